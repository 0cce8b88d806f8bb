//! Judging a case: an observation against its expectation ([`compare`]), and a result against
//! the implementation's expectations manifest ([`manifest`]).

pub mod compare;
pub mod manifest;
