//! Where cases come from: the corpus built into the binary (so an installed `conformance` runs from
//! any directory with the source tree gone), or a directory given with `--cases` (a pinned suite
//! release, an implementer's own cases). Either way the same files: the case YAML, `DECISIONS.md`,
//! `clauses/*.yaml`, `seeds/*` and `retired-ids.txt`, as text.
//!
//! A directory is untrusted input: its links are not followed (a `*.yaml` link, or a link to a
//! folder, is an error naming it; any other link is passed over), only regular files are read, and
//! none larger than [`MAX_FILE_BYTES`]; each is opened without blocking and checked on the opened
//! handle ([`crate::util::input`]), so a FIFO or a device among the cases is refused, never waited on.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use include_dir::{include_dir, Dir};

use crate::case::error::LoadError;
use crate::util::input::{self, ErrorKind, Kind};

/// The corpus as it was when the binary was built (harness/build.rs rebuilds it on any change).
static BUILTIN: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/../spec-cases");

/// A file that marks a directory as a materialised tree, never searched for cases.
pub const TREE_MARKER: &str = ".conformance-tree";

/// The default corpus: `spec-cases/` of this workspace.
pub fn default_cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("spec-cases")
}

/// The largest file read from a cases directory: 4 MiB.
pub const MAX_FILE_BYTES: u64 = crate::util::input::MAX_CASE_FILE_BYTES;

/// A corpus: every file by its `/`-path relative to the cases directory.
#[derive(Debug, Clone)]
pub struct Corpus {
    /// Where it came from, for messages: the directory, or `spec-cases (built in)`.
    pub origin: PathBuf,
    /// Relative path → text.
    pub files: BTreeMap<String, String>,
    /// What could not be read, located.
    pub errors: Vec<LoadError>,
}

impl Corpus {
    /// The corpus built into the binary.
    pub fn builtin() -> Corpus {
        fn walk(dir: &Dir<'_>, files: &mut BTreeMap<String, String>) {
            for f in dir.files() {
                if let Some(text) = f.contents_utf8() {
                    files.insert(f.path().to_string_lossy().replace('\\', "/"), text.to_string());
                }
            }
            for d in dir.dirs() {
                walk(d, files);
            }
        }
        let mut files = BTreeMap::new();
        walk(&BUILTIN, &mut files);
        Corpus { origin: PathBuf::from("spec-cases (built in)"), files, errors: Vec::new() }
    }

    /// Reads a cases directory: every `*.yaml`, and the top-level documents the tools read.
    pub fn read(dir: &Path) -> Corpus {
        let mut corpus = Corpus { origin: dir.to_path_buf(), files: BTreeMap::new(), errors: Vec::new() };
        corpus.collect(dir, "");
        for extra in ["DECISIONS.md", "retired-ids.txt"] {
            match input::read_text(&dir.join(extra), Kind::CaseFile) {
                Ok(text) => {
                    corpus.files.insert(extra.into(), text);
                }
                // Both are optional; one that is there but cannot be read is an error, not absent.
                Err(e) if e.kind == ErrorKind::NotFound => {}
                Err(e) => corpus.error(extra, e.message),
            }
        }
        corpus.collect_flat(dir, "seeds");
        corpus
    }

    fn error(&mut self, rel: &str, message: impl Into<String>) {
        self.errors.push(LoadError { file: self.origin.join(rel), line: None, message: message.into() });
    }

    fn collect(&mut self, dir: &Path, rel: &str) {
        let entries = match fs::read_dir(dir) {
            Ok(rd) => rd,
            Err(e) => return self.error(rel, format!("cannot list directory: {e}")),
        };
        let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let name = entry.file_name().to_string_lossy().into_owned();
            let child = if rel.is_empty() { name.clone() } else { format!("{rel}/{name}") };
            let Ok(ft) = entry.file_type() else { continue };
            let yaml = name.ends_with(".yaml");
            if ft.is_symlink() {
                // A link could lead anywhere on the machine; a cases directory is read as it stands.
                if yaml || entry.path().is_dir() {
                    self.error(&child, "is a symbolic link (links in a cases directory are not followed)");
                }
            } else if ft.is_dir() {
                // A reproduction's materialised tree is for reading, not a source of cases.
                if !entry.path().join(TREE_MARKER).exists() {
                    self.collect(&entry.path(), &child);
                }
            } else if yaml {
                match read_file(&entry.path()) {
                    Ok(text) => {
                        self.files.insert(child, text);
                    }
                    Err(e) => self.error(&child, e),
                }
            }
        }
    }

    /// Reads the regular files directly in `dir/sub`.
    fn collect_flat(&mut self, dir: &Path, sub: &str) {
        let Ok(entries) = fs::read_dir(dir.join(sub)) else { return };
        for entry in entries.filter_map(Result::ok) {
            if entry.file_type().is_ok_and(|t| t.is_file()) {
                let rel = format!("{sub}/{}", entry.file_name().to_string_lossy());
                match read_file(&entry.path()) {
                    Ok(text) => {
                        self.files.insert(rel, text);
                    }
                    Err(e) => self.error(&rel, e),
                }
            }
        }
    }

    /// The text of a file, by its relative path.
    pub fn text(&self, rel: &str) -> Option<&str> {
        self.files.get(rel).map(String::as_str)
    }

    /// The display path of a file.
    pub fn path_of(&self, rel: &str) -> PathBuf {
        self.origin.join(rel)
    }

    /// The text of seed `number` (`000`), from `seeds/<number>_*`.
    pub fn seed(&self, number: &str) -> Option<&str> {
        let prefix = format!("seeds/{number}_");
        self.files.iter().find(|(k, _)| k.starts_with(&prefix)).map(|(_, v)| v.as_str())
    }

    /// The scenario files: every `*.yaml` but the vocabulary and the clause lists.
    pub fn case_files(&self) -> impl Iterator<Item = (&String, &String)> {
        self.files
            .iter()
            .filter(|(k, _)| k.ends_with(".yaml") && !k.starts_with("clauses/") && k.as_str() != "vocabulary.yaml")
    }
}

/// Reads a file of a cases directory: a regular file, not through a link, at most
/// [`MAX_FILE_BYTES`], as UTF-8, never blocking ([`input::read_text`]).
pub fn read_file(file: &Path) -> Result<String, String> {
    input::read_text(file, Kind::CaseFile).map_err(|e| e.message)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The built-in corpus is the source tree's: a binary built before a case changed would run
    /// an old suite.
    #[test]
    fn the_builtin_corpus_is_the_source_trees() {
        let disk = Corpus::read(&default_cases_dir());
        let builtin = Corpus::builtin();
        let names = |c: &Corpus| c.case_files().map(|(k, v)| (k.clone(), v.clone())).collect::<Vec<_>>();
        assert!(!names(&builtin).is_empty());
        assert_eq!(names(&builtin), names(&disk));
        assert_eq!(builtin.text("DECISIONS.md"), disk.text("DECISIONS.md"));
        assert!(builtin.seed("000").is_some());
    }
}
