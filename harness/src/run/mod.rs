//! Running a case: what the harness drives ([`implementation`]), the reference in-process
//! ([`driver`]), any other implementation behind the adapter protocol ([`adapter`], its data in
//! [`wire`]), an agent CLI behind a scripted model endpoint ([`agent`]), one case start to end
//! ([`case`]), and a selection of cases in parallel jobs ([`suite`]).

pub mod adapter;
pub mod agent;
pub mod bench;
pub mod case;
pub mod driver;
pub mod implementation;
pub mod suite;
pub mod wire;
