//! A session's state directory, held open: where the journal lives (seed 000, "Lifetime": a
//! restart, a respawn or a fork restores what the session loaded) and any other file a session
//! keeps beside it, such as a root-file profile's saved prefix.
//!
//! The directory is opened once and every file in it is reached through that handle, never by
//! its path again. A host that removes the directory (a harness abandoning a timed-out case and
//! deleting its sandbox) therefore leaves a late writer with nothing to write into: an entry
//! created in a removed directory fails, so the writer never recreates the directory, nor
//! follows whatever now stands at its name in a shared temporary folder. Only the directory's
//! last component is ever created; its ancestors are the host's own (followed as links, except
//! procfs's magic links, D-CAP-4 extended), and a parent that is missing is an error, never made.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use crate::confine::{Access, HeldDir};

/// A state directory, opened (created when missing) once and held: every file in it is opened
/// through the handle by its name, without following a link, and only a regular file is read.
///
/// ```
/// use reference::StateDir;
/// let tmp = tempfile::tempdir().unwrap();
/// let dir = StateDir::open_or_create(&tmp.path().join("state")).unwrap();
/// dir.replace_atomically("root-file.json", b"{}").unwrap();
/// assert_eq!(dir.read_bounded("root-file.json", 1 << 20).unwrap(), b"{}");
/// // A missing parent is never created.
/// assert!(StateDir::open_or_create(&tmp.path().join("no/such/state")).is_err());
/// ```
#[derive(Debug, Clone)]
pub struct StateDir {
    path: PathBuf,
    held: Arc<HeldDir>,
}

impl StateDir {
    /// Opens the state directory at `path`, creating it when it is missing with a single
    /// `mkdir` of its last component, mode 0700 (a session's state is its own, in a temporary
    /// folder others share). Its parent must already exist: a missing one is a
    /// `NotFound` error naming it, and nothing is created. A state directory that is a symlink
    /// is refused, never followed; its ancestors are followed as the host's own paths.
    pub fn open_or_create(path: &Path) -> io::Result<StateDir> {
        let held = HeldDir::open_or_create(path)?;
        Ok(StateDir { path: path.to_path_buf(), held: Arc::new(held) })
    }

    /// The path the directory was opened at (for messages; it is never opened by it again).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the file `name` of the directory whole, at most `max` bytes: a longer file is an
    /// `InvalidData` error and never more than `max + 1` bytes are read. A missing file is a
    /// `NotFound` error; a link, a FIFO or anything but a regular file is refused without being
    /// opened for reading.
    pub fn read_bounded(&self, name: &str, max: u64) -> io::Result<Vec<u8>> {
        let file = self.open(name, Access::Read)?;
        let shown = self.shown(name);
        let mut buf = Vec::new();
        file.take(max.saturating_add(1))
            .read_to_end(&mut buf)
            .map_err(|e| io::Error::new(e.kind(), format!("'{}' cannot be read ({e})", shown.display())))?;
        if buf.len() as u64 > max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("'{}' is above the {max}-byte cap (it is not read)", shown.display()),
            ));
        }
        Ok(buf)
    }

    /// Replaces the file `name` of the directory with `bytes` atomically: a reader sees the old
    /// file or the new one whole, never half of one, even after a crash. The bytes go to the
    /// temporary name `<name>.tmp`, created new (`O_CREAT | O_EXCL | O_NOFOLLOW`, after a stale one
    /// is removed), made durable, then renamed over `name` and the rename made durable. A link
    /// standing at either name is replaced, never written through.
    pub fn replace_atomically(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let name = file_name(name)?;
        let tmp = format!("{name}.tmp");
        let shown_tmp = self.shown(&tmp);
        self.held.remove(OsStr::new(&tmp), &shown_tmp)?;
        let mut file = self.held.create_new(OsStr::new(&tmp), &shown_tmp)?;
        let written = file.write_all(bytes).and_then(|()| file.sync_data());
        if let Err(e) = written {
            // Nothing half-written is left for a later replace to trip on.
            let _ = self.held.remove(OsStr::new(&tmp), &shown_tmp);
            return Err(io::Error::new(e.kind(), format!("'{}' cannot be written ({e})", shown_tmp.display())));
        }
        self.held.rename(OsStr::new(&tmp), OsStr::new(name), &self.shown(name))
    }

    /// Opens the file `name` for `access` through the handle ([`HeldDir::open`]).
    pub(crate) fn open(&self, name: &str, access: Access) -> io::Result<File> {
        let name = file_name(name)?;
        self.held.open(OsStr::new(name), access, &self.shown(name))
    }

    /// How the file `name` is named in messages.
    fn shown(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

/// `name` when it is one file name (no `/`, not empty, not `.` or `..`): a state file lies in
/// the directory itself, never below or above it.
fn file_name(name: &str) -> io::Result<&str> {
    let mut parts = Path::new(name).components();
    match (parts.next(), parts.next()) {
        (Some(Component::Normal(n)), None) if n == OsStr::new(name) => Ok(name),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("'{name}' is not a file name (a state file lies in the state directory itself)"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_file_name_is_one_normal_component() {
        for good in ["journal.jsonl", "root-file.json", ".hidden", "a..b"] {
            assert_eq!(file_name(good).unwrap(), good);
        }
        for bad in ["", ".", "..", "a/b", "/abs", "a/", "./a"] {
            assert!(file_name(bad).is_err(), "{bad:?} was taken as a file name");
        }
    }
}
