//! The case and its tree: where the case files come from ([`corpus`]), what they mean
//! ([`scenario`], [`vocabulary`]), loading and validating them ([`load`], with errors located by
//! [`error`]), materialising a case's tree in a sandbox or in memory ([`tree`]), and which seed
//! clauses the corpus covers ([`coverage`]).

pub mod corpus;
pub mod coverage;
pub mod error;
pub mod load;
pub mod scenario;
pub mod tree;
pub mod vocabulary;
