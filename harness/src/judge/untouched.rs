//! The rule that an implementation leaves the case's tree as the steps left it (D-TREE-1): what
//! the sandbox holds is taken before the implementation gets control and again when it gives it
//! back, and every entry created, changed or deleted in between is the implementation's doing.
//!
//! An entry is known by its metadata, never by opening it: a case's tree holds FIFOs, devices
//! and files of gigabytes, and looking must neither block nor read them. A file is changed when
//! its type, size, permissions, inode, modification or status-change time differ (a write that
//! puts the same bytes back still moves its times); a link when its target does. Reading changes
//! none of these (the access time is not looked at).

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The most entries looked at: a tree past it is compared only as far as it was walked (a
/// case's tree is far smaller; the bound keeps a hostile implementation's flood of files from
/// stalling the harness).
const MAX_ENTRIES: usize = 200_000;
/// The deepest folder looked into.
const MAX_DEPTH: usize = 64;

/// What one entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Dir { mode: u32, ino: u64 },
    File { len: u64, mode: u32, ino: u64, mtime: (i64, i64), ctime: (i64, i64) },
    Link { target: PathBuf },
    Other { mode: u32, ino: u64 },
}

/// The entries of a folder's tree by their path relative to it, links not followed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    entries: BTreeMap<String, Entry>,
}

impl Snapshot {
    /// The tree under `dir`, without the entries under the relative paths `skip` (a HOME the
    /// implementation may write to).
    pub fn take(dir: &Path, skip: &[&str]) -> Snapshot {
        let mut entries = BTreeMap::new();
        let mut stack = vec![(dir.to_path_buf(), String::new(), 0usize)];
        while let Some((path, rel, depth)) = stack.pop() {
            let Ok(read) = fs::read_dir(&path) else { continue };
            for item in read.flatten() {
                if entries.len() >= MAX_ENTRIES {
                    return Snapshot { entries };
                }
                let name = item.file_name().to_string_lossy().into_owned();
                let child = if rel.is_empty() { name } else { format!("{rel}/{name}") };
                if skip.iter().any(|s| child == *s || child.starts_with(&format!("{s}/"))) {
                    continue;
                }
                let Ok(meta) = fs::symlink_metadata(item.path()) else { continue };
                let ty = meta.file_type();
                let entry = if ty.is_symlink() {
                    Entry::Link { target: fs::read_link(item.path()).unwrap_or_default() }
                } else if ty.is_dir() {
                    if depth < MAX_DEPTH {
                        stack.push((item.path(), child.clone(), depth + 1));
                    }
                    Entry::Dir { mode: meta.mode(), ino: meta.ino() }
                } else if ty.is_file() {
                    Entry::File {
                        len: meta.len(),
                        mode: meta.mode(),
                        ino: meta.ino(),
                        mtime: (meta.mtime(), meta.mtime_nsec()),
                        ctime: (meta.ctime(), meta.ctime_nsec()),
                    }
                } else {
                    Entry::Other { mode: meta.mode(), ino: meta.ino() }
                };
                entries.insert(child, entry);
            }
        }
        Snapshot { entries }
    }

    /// What differs in `now`, one line an entry in path order (`created src/.cache`, `changed
    /// AGENTS.md`, `deleted docs/a.md`), where `allowed` says which paths may change.
    pub fn changes(&self, now: &Snapshot, allowed: impl Fn(&str) -> bool) -> Vec<String> {
        let mut out = Vec::new();
        let mut before = self.entries.iter().peekable();
        let mut after = now.entries.iter().peekable();
        loop {
            let (path, what) = match (before.peek(), after.peek()) {
                (None, None) => break,
                (Some((a, _)), Some((b, _))) if a == b => {
                    let (Some((p, x)), Some((_, y))) = (before.next(), after.next()) else { break };
                    if x == y {
                        continue;
                    }
                    (p, "changed")
                }
                (Some((a, _)), Some((b, _))) if a < b => match before.next() {
                    Some((p, _)) => (p, "deleted"),
                    None => break,
                },
                (Some(_), None) => match before.next() {
                    Some((p, _)) => (p, "deleted"),
                    None => break,
                },
                _ => match after.next() {
                    Some((p, _)) => (p, "created"),
                    None => break,
                },
            };
            if !allowed(path) {
                out.push(format!("{what} {path}"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_creation_change_and_deletion_is_named_and_reading_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::create_dir_all(d.join("project/src")).unwrap();
        fs::write(d.join("project/AGENTS.md"), "# Root\n").unwrap();
        fs::write(d.join("project/src/a.ts"), "x").unwrap();
        std::os::unix::fs::symlink("project", d.join("plink")).unwrap();
        let fifo = d.join("project/pipe");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let before = Snapshot::take(d, &["home"]);
        // Looking (and reading) changes nothing; the FIFO is never opened.
        let _ = fs::read(d.join("project/AGENTS.md")).unwrap();
        assert!(before.changes(&Snapshot::take(d, &["home"]), |_| false).is_empty());
        // The same bytes written back still count.
        std::thread::sleep(std::time::Duration::from_millis(10));
        fs::write(d.join("project/AGENTS.md"), "# Root\n").unwrap();
        fs::write(d.join("project/.cache"), "").unwrap();
        fs::remove_file(d.join("project/src/a.ts")).unwrap();
        fs::remove_file(d.join("plink")).unwrap();
        std::os::unix::fs::symlink("elsewhere", d.join("plink")).unwrap();
        fs::create_dir_all(d.join("home/.agent")).unwrap();
        let now = Snapshot::take(d, &["home"]);
        assert_eq!(
            before.changes(&now, |_| false),
            ["changed plink", "created project/.cache", "changed project/AGENTS.md", "deleted project/src/a.ts"]
        );
        assert_eq!(before.changes(&now, |p| p.starts_with("project/")), ["changed plink"]);
    }
}
