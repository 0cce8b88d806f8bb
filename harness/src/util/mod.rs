//! What every stage stands on, and which uses none of them: reading untrusted input files with
//! bounds ([`input`]), file operations confined beneath a directory ([`beneath`]), and leaving no
//! process or temporary directory behind ([`cleanup`]), and the generated trees that performance is
//! measured on ([`generate`]).

pub mod beneath;
pub mod cleanup;
pub mod generate;
pub mod input;
