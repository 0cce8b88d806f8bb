//! The session journal: a JSON Lines file in the session's state directory (seed 000,
//! "Lifetime"). Loaded instructions are journal records like any other turn context, so a
//! restart, a respawn or a fork restores them, and compaction drops them.
//!
//! An append counts only once it is durable: the line is written whole and `sync_data` returns.
//! A torn last line (a crash mid-append) is tolerated on restore and cut off before the next
//! append; a corrupt line anywhere else is an error, because guessing would lose records.
//!
//! The journal is only ever a regular file: it is opened without following a link (a journal
//! that is a symlink is refused, never read, cut or written through), and a resume streams it one
//! line at a time, no line longer than [`JOURNAL_MAX_LINE_BYTES`], so a journal of gigabytes costs one
//! line of memory and the records the session keeps.
//!
//! It is reached only through its state directory's handle ([`StateDir`]), opened once: a state
//! directory removed while the session runs (a harness abandoning a timed-out case) makes the
//! next append fail, and nothing is recreated where the directory stood.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Write};
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::confine::Access;
use crate::state::StateDir;

/// The journal's file name inside a state directory.
pub const JOURNAL_FILE: &str = "journal.jsonl";

/// The longest line a journal holds: an append refuses a longer record (it is not appended, and
/// the failure is the append's), and a resume reads a longer line as a line that is not a record
/// (cut when it is the last, torn by a crash; an error anywhere else). A startup prefix of 64
/// MiB is far beyond any model's context. The default is 64 MiB.
pub const JOURNAL_MAX_LINE_BYTES: usize = 64 << 20;

/// An instruction identity of an activation record: `{ relPath, sha256, supersedes }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Identity {
    /// The /-form root-relative path.
    pub rel_path: String,
    /// SHA-256 of the sent content.
    pub sha256: String,
    /// Whether this version superseded another in the active context.
    pub supersedes: bool,
}

/// A file of the startup prefix, kept so that a resume retains it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartupFile {
    /// The /-form root-relative path.
    pub path: String,
    /// `root` or `module`.
    pub kind: String,
    /// SHA-256 of `content`.
    pub sha256: String,
    /// The sent content, shared with the module list it was loaded into (a startup prefix of
    /// many modules is held once, not once per copy of the prefix).
    #[serde(serialize_with = "ser_shared", deserialize_with = "de_shared")]
    pub content: Arc<str>,
}

fn ser_shared<S: serde::Serializer>(text: &Arc<str>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(text)
}

fn de_shared<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Arc<str>, D::Error> {
    String::deserialize(d).map(Arc::from)
}

/// One journal line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    /// The fixed startup prefix of the session.
    Startup {
        /// Root file first, then the unconditional modules.
        files: Vec<StartupFile>,
        /// A local CLI target's root as placed at spawn, which every resume retains.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target: Option<String>,
    },
    /// A turn-context record of kind `instructions`.
    Instructions {
        /// `details.instructions`.
        instructions: Vec<Identity>,
        /// The appended text.
        rendered: String,
    },
    /// Compaction: every earlier turn-context record left the active context.
    Compaction,
}

/// A writer that only counts what it is given: the length of a line before it is written.
struct Counted(usize);

impl Write for Counted {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// An open journal and the records it holds.
#[derive(Debug)]
pub struct Journal {
    /// The state directory, held open: the journal file is opened through it, by name.
    dir: StateDir,
    /// How many records the file holds.
    len: usize,
    /// The startup prefix, the one record a resume reads back whole.
    startup: Option<Vec<StartupFile>>,
    /// The local CLI target's root the startup record names.
    target: Option<String>,
    /// The latest active-context hash per path, kept current on every append so that dedupe
    /// costs the same whatever the journal's length.
    active: HashMap<String, String>,
}

/// Applies one record to the active-context map.
fn apply(active: &mut HashMap<String, String>, record: &Record) {
    match record {
        Record::Compaction => active.clear(),
        Record::Instructions { instructions, .. } => {
            for id in instructions {
                active.insert(id.rel_path.clone(), id.sha256.clone());
            }
        }
        Record::Startup { .. } => {}
    }
}

/// Why a journal could not be opened.
#[derive(Debug)]
pub enum JournalError {
    /// The state directory or the file could not be read or created.
    Io(io::Error),
    /// A line other than the last is not a record.
    Corrupt {
        /// 1-based line.
        line: usize,
        /// The parser's message.
        message: String,
    },
}

impl std::fmt::Display for JournalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JournalError::Io(e) => write!(f, "journal i/o error: {e}"),
            JournalError::Corrupt { line, message } => {
                write!(f, "{JOURNAL_FILE}:{line}: not a journal record: {message}")
            }
        }
    }
}

impl std::error::Error for JournalError {}

impl Journal {
    fn empty(dir: StateDir) -> Journal {
        Journal { dir, len: 0, startup: None, target: None, active: HashMap::new() }
    }

    /// Creates an empty journal in `state_dir`, replacing any earlier one (a symlink there is
    /// refused, not followed). The state directory is created when it is missing, its parent
    /// never ([`StateDir::open_or_create`]).
    pub fn create(state_dir: &Path) -> Result<Journal, JournalError> {
        let dir = StateDir::open_or_create(state_dir).map_err(JournalError::Io)?;
        let f = dir.open(JOURNAL_FILE, Access::Replace).map_err(JournalError::Io)?;
        f.sync_data().map_err(JournalError::Io)?;
        Ok(Journal::empty(dir))
    }

    /// Opens the journal in `state_dir` and restores its records, streaming it line by line. A
    /// state directory without a journal holds an empty one (the directory is created when it
    /// is missing, its parent never).
    pub fn open(state_dir: &Path) -> Result<Journal, JournalError> {
        let dir = StateDir::open_or_create(state_dir).map_err(JournalError::Io)?;
        Journal::open_in(dir)
    }

    fn open_in(dir: StateDir) -> Result<Journal, JournalError> {
        let file = match dir.open(JOURNAL_FILE, Access::ReadWrite) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Journal::empty(dir)),
            Err(e) => return Err(JournalError::Io(e)),
        };
        let mut journal = Journal::empty(dir);
        let mut reader = BufReader::new(file);
        let mut line = Vec::new();
        let mut good_end = 0u64;
        let mut offset = 0u64;
        let mut line_no = 0usize;
        while let Some(read) = next_line(&mut reader, &mut line).map_err(JournalError::Io)? {
            line_no += 1;
            offset += read.consumed;
            let parsed = if read.oversize {
                Err(format!("the line is longer than {JOURNAL_MAX_LINE_BYTES} bytes"))
            } else {
                serde_json::from_slice::<Record>(&line).map_err(|e| e.to_string())
            };
            match (parsed, read.complete) {
                (Ok(r), true) => {
                    journal.remember(r);
                    good_end = offset;
                }
                // The last line without its newline, or an unparsable last line: a torn append.
                (_, false) => break,
                (Err(_), true) if reader.fill_buf().map_err(JournalError::Io)?.is_empty() => break,
                (Err(message), true) => return Err(JournalError::Corrupt { line: line_no, message }),
            }
        }
        let file = reader.into_inner();
        if good_end < file.metadata().map_err(JournalError::Io)?.len() {
            file.set_len(good_end).map_err(JournalError::Io)?;
            file.sync_data().map_err(JournalError::Io)?;
        }
        Ok(journal)
    }

    /// Appends `record` durably; on error nothing counts as appended. The line is measured
    /// first and then written as it is serialized, so a startup prefix of many modules is never
    /// held a second time as one buffer (issue 13).
    pub fn append(&mut self, record: Record) -> io::Result<()> {
        let mut len = Counted(0);
        serde_json::to_writer(&mut len, &record).map_err(io::Error::other)?;
        if len.0 > JOURNAL_MAX_LINE_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a journal record of {} bytes is above the {JOURNAL_MAX_LINE_BYTES}-byte line limit", len.0),
            ));
        }
        let mut out = io::BufWriter::new(self.dir.open(JOURNAL_FILE, Access::Append)?);
        serde_json::to_writer(&mut out, &record).map_err(io::Error::other)?;
        out.write_all(b"\n")?;
        out.into_inner().map_err(io::IntoInnerError::into_error)?.sync_data()?;
        self.remember(record);
        Ok(())
    }

    /// Keeps what the session needs of a record: the startup prefix and the active context.
    /// Rendered activations stay in the file only, so memory does not grow with the session.
    fn remember(&mut self, record: Record) {
        apply(&mut self.active, &record);
        self.len += 1;
        if let Record::Startup { files, target } = record {
            if self.startup.is_none() {
                self.startup = Some(files);
                self.target = target;
            }
        }
    }

    /// How many records the journal holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the journal holds no record.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The startup prefix, when the journal has one.
    pub fn startup(&self) -> Option<&[StartupFile]> {
        self.startup.as_deref()
    }

    /// The local CLI target's root the startup record names, if any.
    pub fn target(&self) -> Option<&str> {
        self.target.as_deref()
    }

    /// The latest active-context hash per path: instruction records after the last compaction,
    /// the last record winning.
    pub fn active(&self) -> &HashMap<String, String> {
        &self.active
    }

    /// Copies this journal into `state_dir` for a fork, and opens the copy. Neither side is
    /// followed when it is a link; the fork's state directory is created when it is missing,
    /// its parent never, and the copy is opened again through its handle, not its path.
    pub fn fork_into(&self, state_dir: &Path) -> Result<Journal, JournalError> {
        let dir = StateDir::open_or_create(state_dir).map_err(JournalError::Io)?;
        let mut from = self.dir.open(JOURNAL_FILE, Access::Read).map_err(JournalError::Io)?;
        let mut to = dir.open(JOURNAL_FILE, Access::Replace).map_err(JournalError::Io)?;
        io::copy(&mut from, &mut to).map_err(JournalError::Io)?;
        to.sync_data().map_err(JournalError::Io)?;
        Journal::open_in(dir)
    }
}

/// One line as [`next_line`] read it.
struct LineRead {
    /// Bytes consumed, the newline included.
    consumed: u64,
    /// Whether a newline ended it (the last line of a torn append has none).
    complete: bool,
    /// Whether it was longer than [`JOURNAL_MAX_LINE_BYTES`]; then `line` holds nothing of it.
    oversize: bool,
}

/// Reads the next line into `line` (without its newline), keeping at most [`JOURNAL_MAX_LINE_BYTES`]
/// of it in memory: a longer line is consumed to its end and reported oversize. `None` at the
/// end of the file.
fn next_line(reader: &mut impl BufRead, line: &mut Vec<u8>) -> io::Result<Option<LineRead>> {
    line.clear();
    let mut read = LineRead { consumed: 0, complete: false, oversize: false };
    loop {
        let available = reader.fill_buf()?;
        if available.is_empty() {
            return Ok((read.consumed > 0).then_some(read));
        }
        let (chunk, used, complete) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (available.get(..i).unwrap_or(&[]), i + 1, true),
            None => (available, available.len(), false),
        };
        if !read.oversize {
            if line.len() + chunk.len() > JOURNAL_MAX_LINE_BYTES {
                read.oversize = true;
                line.clear();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        reader.consume(used);
        read.consumed += used as u64;
        if complete {
            read.complete = true;
            return Ok(Some(read));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn instr(path: &str, sha: &str) -> Record {
        Record::Instructions {
            instructions: vec![Identity { rel_path: path.into(), sha256: sha.into(), supersedes: false }],
            rendered: String::new(),
        }
    }

    #[test]
    fn torn_last_line_is_tolerated_and_cut() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::create(dir.path()).unwrap();
        j.append(instr("a.md", "1")).unwrap();
        let path = dir.path().join(JOURNAL_FILE);
        let mut bytes = fs::read(&path).unwrap();
        bytes.extend_from_slice(b"{\"type\":\"instr");
        fs::write(&path, &bytes).unwrap();
        let mut j = Journal::open(dir.path()).unwrap();
        assert_eq!(j.len(), 1);
        j.append(instr("b.md", "2")).unwrap();
        let j = Journal::open(dir.path()).unwrap();
        assert_eq!(j.len(), 2);
    }

    #[test]
    fn corrupt_middle_line_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(JOURNAL_FILE), "garbage\n{\"type\":\"compaction\"}\n").unwrap();
        assert!(matches!(Journal::open(dir.path()), Err(JournalError::Corrupt { line: 1, .. })));
    }

    #[test]
    fn compaction_empties_the_active_context_and_last_record_wins() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::create(dir.path()).unwrap();
        j.append(instr("a.md", "1")).unwrap();
        j.append(Record::Compaction).unwrap();
        assert!(j.active().is_empty());
        j.append(instr("a.md", "2")).unwrap();
        j.append(instr("a.md", "3")).unwrap();
        assert_eq!(j.active().get("a.md").map(String::as_str), Some("3"));
    }
}
