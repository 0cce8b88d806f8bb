//! Judging a case: an observation against its expectation ([`compare`]), and a result against
//! the implementation's expectations manifest ([`manifest`]); the tree the implementation was given
//! against the tree it left ([`untouched`]).

pub mod compare;
pub mod manifest;
pub mod untouched;
