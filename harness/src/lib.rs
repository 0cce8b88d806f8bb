//! The conformance harness: loads scenarios, materialises their trees, drives their steps through
//! an [`Implementation`], compares observations with expectations, and reports.
//!
//! Data flows one way: scenario YAML → [`load`] → [`tree`] → [`run`] (through an
//! [`Implementation`]) → [`compare`] → one [`run::CaseResult`] per case → [`report`] → exit code.

pub mod adapter;
// FIXME: `run/agent/` sits beside `run.rs` until the move of harness/src into folders lands;
// the path attribute then goes and the module moves under `run`.
#[path = "run/agent/mod.rs"]
pub mod agent;
pub mod beneath;
pub mod cleanup;
pub mod compare;
pub mod corpus;
pub mod coverage;
pub mod diff;
pub mod driver;
pub mod escape;
pub mod explain;
pub mod fuzzing;
pub mod implementation;
pub mod input;
pub mod load;
pub mod manifest;
pub mod matrix;
pub mod report;
pub mod run;
pub mod scenario;
pub mod suite;
pub mod tree;
pub mod vocabulary;
pub mod wire;

pub use implementation::{ImplError, Implementation, InProcess};
pub use wire::Hello;
