//! The conformance harness: loads scenarios, materialises their trees, drives their steps through
//! an [`Implementation`], compares observations with expectations, and reports.
//!
//! Its folders are the stages a case flows through, in order; data flows one way:
//!
//! scenario YAML → [`case`] (corpus, scenario, vocabulary, load, tree, coverage) → [`run`]
//! (implementation, driver, adapter, wire, case, suite) → [`judge`] (compare, manifest) → one
//! [`run::case::CaseResult`] per case → [`report`] (formats, matrix, explain, diff, escape) →
//! exit code.
//!
//! [`util`] (input, beneath, cleanup) lies below every stage. [`fuzzing`] holds the entry points of
//! the fuzz targets in `fuzz/`.

pub mod case;
pub mod fuzzing;
pub mod judge;
pub mod report;
pub mod run;
pub mod util;

pub use run::implementation::{ImplError, Implementation, InProcess};
pub use run::wire::Hello;
