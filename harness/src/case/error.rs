//! The error of loading a corpus: a message located at a file and, where known, a line. Both the
//! corpus reader (a file that cannot be read) and the loader (a case that does not parse or
//! validate) produce it, so it lives below both.

use std::fmt;
use std::path::PathBuf;

/// A loading error, located.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    /// The file.
    pub file: PathBuf,
    /// The 1-based line, where known.
    pub line: Option<usize>,
    /// What is wrong, naming the field.
    pub message: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A message may quote the case file (a parser's does), so it is clipped.
        let message = crate::util::input::clip(&self.message);
        match self.line {
            Some(l) => write!(f, "{}:{}: {}", self.file.display(), l, message),
            None => write!(f, "{}: {}", self.file.display(), message),
        }
    }
}
