//! File operations confined beneath one directory, through directory handles. The harness runs
//! third-party case directories, so a case's tree and steps must never create, change, move or
//! delete anything outside its sandbox, however the tree's links point.
//!
//! Every path is walked component by component from a handle on the sandbox, each folder opened
//! with `O_NOFOLLOW | O_DIRECTORY`: a folder that is a symlink is not entered, and the operation is
//! refused with an error naming the path and the link. Only the last component may be a link,
//! and then the operation acts on the link itself (a write replaces it with a file, a delete
//! removes the link, a rename moves the link), never on what it points to. Nothing here resolves
//! a path string against the filesystem, so there is no window between a check and its use.
//!
//! # Platform behavior
//! POSIX only (the harness's host trees are POSIX trees); `rustix` supplies the `*at` calls.

use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

/// The largest dense file a tree may hold: 64 MiB. A larger one must be `sparse`.
pub const MAX_DENSE_FILE: u64 = 64 << 20;
/// The most bytes of dense files one tree may hold, on disk or in memory: 256 MiB.
pub const MAX_TREE_BYTES: u64 = 256 << 20;
/// The most bytes of files an in-memory (windows or managed) tree may hold: 16 MiB, because the
/// tree travels as hex in one `open` request.
pub const MAX_MEM_TREE_BYTES: u64 = 16 << 20;

/// A directory that operations stay beneath.
#[derive(Debug)]
pub struct Beneath {
    root: OwnedFd,
}

fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// Runs one change to a tree while holding the cleanup's write gate ([`crate::util::cleanup::writing`]),
/// so that a signal's cleanup never removes a folder while an entry is being added to it; after a
/// signal, or once the run has ended, no change is made. Taken once per public operation (the
/// gate is not reentrant).
fn gated<T>(change: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    let _held = crate::util::cleanup::writing()
        .ok_or_else(|| "the harness is stopping: nothing more is written".to_string())?;
    change()
}

/// The components of a relative `/`-path: no empty, `.` or `..` component, no absolute path.
fn components(rel: &str) -> Result<Vec<&str>, String> {
    let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    if rel.starts_with('/') || parts.contains(&"..") || parts.is_empty() {
        return Err(format!("'{rel}' is not a plain relative path"));
    }
    Ok(parts)
}

impl Beneath {
    /// A handle on `dir`, which must be a real directory (not a link).
    pub fn open(dir: &Path) -> Result<Beneath, String> {
        let root = rfs::open(dir, dir_flags(), Mode::empty()).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(Beneath { root })
    }

    /// Opens the folder holding `rel`'s last component, creating missing folders when `create`,
    /// and answers it with the last component's name.
    fn parent<'a>(&self, rel: &'a str, create: bool) -> Result<(OwnedFd, &'a str), String> {
        let parts = components(rel)?;
        let (last, folders) = parts.split_last().ok_or_else(|| format!("'{rel}' is empty"))?;
        let mut dir = rfs::openat(&self.root, ".", dir_flags(), Mode::empty()).map_err(|e| format!("'{rel}': {e}"))?;
        let mut walked = String::new();
        for folder in folders {
            if !walked.is_empty() {
                walked.push('/');
            }
            walked.push_str(folder);
            let next = match rfs::openat(&dir, *folder, dir_flags(), Mode::empty()) {
                Ok(fd) => fd,
                Err(e @ (Errno::NOENT | Errno::NOTDIR)) if create => {
                    // A file (never a link) in the way becomes a folder, as it does in an
                    // in-memory tree.
                    if e == Errno::NOTDIR {
                        match self.kind(&dir, folder) {
                            Some(FileType::Symlink | FileType::Directory) | None => {
                                return Err(self.refusal(rel, &walked, &dir, folder, e))
                            }
                            Some(_) => rfs::unlinkat(&dir, *folder, AtFlags::empty())
                                .map_err(|e| format!("'{rel}': cannot replace the file '{walked}': {e}"))?,
                        }
                    }
                    match rfs::mkdirat(&dir, *folder, Mode::from_raw_mode(0o755)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(e) => return Err(format!("'{rel}': cannot create '{walked}': {e}")),
                    }
                    rfs::openat(&dir, *folder, dir_flags(), Mode::empty())
                        .map_err(|e| self.refusal(rel, &walked, &dir, folder, e))?
                }
                Err(e) => return Err(self.refusal(rel, &walked, &dir, folder, e)),
            };
            dir = next;
        }
        Ok((dir, last))
    }

    /// Why a folder of `rel` could not be entered: a link (never followed), or the error itself.
    fn refusal(&self, rel: &str, walked: &str, dir: &OwnedFd, name: &str, e: Errno) -> String {
        match rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
                format!("'{rel}' crosses the link '{walked}' (the harness never writes through a link)")
            }
            Ok(_) if e == Errno::NOTDIR || e == Errno::LOOP => format!("'{rel}': '{walked}' is not a folder"),
            _ => format!("'{rel}': '{walked}': {e}"),
        }
    }

    /// The type of `rel`'s last component, not following it.
    fn kind(&self, dir: &OwnedFd, name: &str) -> Option<FileType> {
        rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).ok().map(|st| FileType::from_raw_mode(st.st_mode))
    }

    /// Removes whatever stands at `name` in `dir` so that something new can be made there: a file
    /// or link is unlinked, a folder removed with everything below it.
    fn clear(&self, dir: &OwnedFd, name: &str, rel: &str) -> Result<(), String> {
        match self.kind(dir, name) {
            None => Ok(()),
            Some(FileType::Directory) => remove_tree(dir, name).map_err(|e| format!("'{rel}': {e}")),
            Some(_) => rfs::unlinkat(dir, name, AtFlags::empty()).map_err(|e| format!("'{rel}': {e}")),
        }
    }

    /// Creates a new regular file at `rel` (replacing a file or link there, never writing through
    /// one, and a folder there with everything below it) and hands it to `fill`.
    fn create(&self, rel: &str, fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>) -> Result<(), String> {
        let (dir, name) = self.parent(rel, true)?;
        self.clear(&dir, name, rel)?;
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rfs::openat(&dir, name, flags, Mode::from_raw_mode(0o644)).map_err(|e| format!("'{rel}': {e}"))?;
        let mut file = std::fs::File::from(fd);
        fill(&mut file).map_err(|e| format!("'{rel}': {e}"))
    }

    /// Writes a file with these bytes.
    pub fn write(&self, rel: &str, bytes: &[u8]) -> Result<(), String> {
        gated(|| self.create(rel, |f| f.write_all(bytes)))
    }

    /// Overwrites the regular file at `rel` in place with these bytes: opened without following
    /// a link, truncated and written again, so it stays the same file and its folder does not
    /// change. Anything but an existing regular file there is an error.
    pub fn overwrite(&self, rel: &str, bytes: &[u8]) -> Result<(), String> {
        gated(|| {
            let (dir, name) = self.parent(rel, false)?;
            match self.kind(&dir, name) {
                Some(FileType::RegularFile) => {}
                None => return Err(format!("'{rel}' does not exist (in_place overwrites a file that is there)")),
                Some(_) => return Err(format!("'{rel}' is not a regular file (in_place overwrites a file)")),
            }
            let flags = OFlags::WRONLY | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
            let fd = rfs::openat(&dir, name, flags, Mode::empty()).map_err(|e| format!("'{rel}': {e}"))?;
            std::fs::File::from(fd).write_all(bytes).map_err(|e| format!("'{rel}': {e}"))
        })
    }

    /// Writes `size` bytes of `fill` repeated (at most [`MAX_DENSE_FILE`]).
    pub fn write_repeated(&self, rel: &str, size: u64, fill: &[u8]) -> Result<(), String> {
        gated(|| {
            if size > MAX_DENSE_FILE {
                return Err(format!(
                    "'{rel}': {size} bytes is over the {} MiB cap of a dense file",
                    MAX_DENSE_FILE >> 20
                ));
            }
            self.create(rel, |f| {
                // A whole number of fills per chunk, so every chunk starts where a fill starts.
                let chunk = fill.repeat((64 * 1024 / fill.len().max(1)).max(1));
                let mut left = size;
                while left > 0 {
                    let n = usize::try_from(left).unwrap_or(usize::MAX).min(chunk.len());
                    f.write_all(chunk.get(..n).unwrap_or(&[]))?;
                    left -= n as u64;
                }
                Ok(())
            })
        })
    }

    /// Makes a sparse file of `size` bytes.
    pub fn sparse(&self, rel: &str, size: u64) -> Result<(), String> {
        gated(|| self.create(rel, |f| f.set_len(size)))
    }

    /// Makes a folder (and its missing parents); an existing folder is kept.
    pub fn mkdir_all(&self, rel: &str) -> Result<(), String> {
        gated(|| {
            let (dir, name) = self.parent(rel, true)?;
            match rfs::mkdirat(&dir, name, Mode::from_raw_mode(0o755)) {
                Ok(()) => Ok(()),
                Err(Errno::EXIST) if self.kind(&dir, name) == Some(FileType::Directory) => Ok(()),
                Err(Errno::EXIST) => Err(format!("'{rel}' exists and is not a folder")),
                Err(e) => Err(format!("'{rel}': {e}")),
            }
        })
    }

    /// Makes a symlink with `target` as written (it is never resolved here). Nothing may stand at
    /// `rel` yet.
    pub fn symlink(&self, rel: &str, target: &str) -> Result<(), String> {
        gated(|| {
            let (dir, name) = self.parent(rel, true)?;
            rfs::symlinkat(target, &dir, name).map_err(|e| format!("'{rel}': {e}"))
        })
    }

    /// Makes a FIFO. Nothing may stand at `rel` yet.
    pub fn fifo(&self, rel: &str) -> Result<(), String> {
        gated(|| {
            let (dir, name) = self.parent(rel, true)?;
            rfs::mknodat(&dir, name, FileType::Fifo, Mode::from_raw_mode(0o644), 0).map_err(|e| format!("'{rel}': {e}"))
        })
    }

    /// Removes `rel`: a file or link (the link itself), or a folder with everything below it.
    pub fn delete(&self, rel: &str) -> Result<(), String> {
        gated(|| {
            let (dir, name) = self.parent(rel, false)?;
            match self.kind(&dir, name) {
                None => Err(format!("'{rel}' does not exist")),
                Some(_) => self.clear(&dir, name, rel),
            }
        })
    }

    /// Moves `from` to `to` (a link moves as a link), creating `to`'s missing folders and
    /// replacing what stands at `to` as [`Beneath::write`] does; never onto a folder holding `from`.
    pub fn rename(&self, from: &str, to: &str) -> Result<(), String> {
        gated(|| {
            let (from_parts, to_parts) = (components(from)?, components(to)?);
            if from_parts.len() > to_parts.len() && from_parts.starts_with(&to_parts) {
                return Err(format!("rename '{from}' to '{to}': '{to}' holds '{from}'"));
            }
            let (from_dir, from_name) = self.parent(from, false)?;
            self.kind(&from_dir, from_name)
                .ok_or_else(|| format!("rename '{from}' to '{to}': '{from}' does not exist"))?;
            let (to_dir, to_name) = self.parent(to, true)?;
            if self.kind(&to_dir, to_name) == Some(FileType::Directory) {
                remove_tree(&to_dir, to_name).map_err(|e| format!("rename '{from}' to '{to}': {e}"))?;
            }
            rfs::renameat(&from_dir, from_name, &to_dir, to_name).map_err(|e| format!("rename '{from}' to '{to}': {e}"))
        })
    }

    /// Whether `rel` is a folder (not following a last link).
    pub fn is_dir(&self, rel: &str) -> bool {
        self.parent(rel, false).is_ok_and(|(dir, name)| self.kind(&dir, name) == Some(FileType::Directory))
    }
}

/// Removes the folder `name` of `dir` and everything below it, through handles: links below it
/// are unlinked, never followed.
fn remove_tree(dir: &impl AsFd, name: &str) -> std::io::Result<()> {
    let fd = rfs::openat(dir, name, dir_flags(), Mode::empty())?;
    let mut entries = Vec::new();
    let mut listing = rfs::Dir::read_from(&fd)?;
    while let Some(entry) = listing.read() {
        let entry = entry?;
        let n = entry.file_name().to_string_lossy().into_owned();
        if n != "." && n != ".." {
            entries.push(n);
        }
    }
    for n in entries {
        match rfs::statat(&fd, n.as_str(), AtFlags::SYMLINK_NOFOLLOW).map(|st| FileType::from_raw_mode(st.st_mode)) {
            Ok(FileType::Directory) => remove_tree(&fd, &n)?,
            Ok(_) => rfs::unlinkat(&fd, n.as_str(), AtFlags::empty())?,
            Err(Errno::NOENT) => {}
            Err(e) => return Err(e.into()),
        }
    }
    rfs::unlinkat(dir, name, AtFlags::REMOVEDIR)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, Beneath, std::path::PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let sandbox = tmp.path().join("sandbox");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&sandbox).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(&outside, sandbox.join("lnk")).unwrap();
        let b = Beneath::open(&sandbox).unwrap();
        (tmp, b, outside)
    }

    #[test]
    fn no_operation_crosses_a_link_out_of_the_sandbox() {
        let (_tmp, b, outside) = setup();
        assert!(b.write("lnk/x", b"x").unwrap_err().contains("crosses the link 'lnk'"));
        assert!(b.delete("lnk/secret").is_err());
        assert!(b.mkdir_all("lnk/dir").is_err());
        assert!(b.rename("lnk/secret", "stolen").is_err());
        assert!(b.symlink("lnk/l", "/").is_err());
        assert!(b.fifo("lnk/f").is_err());
        let names: Vec<_> = std::fs::read_dir(&outside).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("secret")]);
    }

    #[test]
    fn a_step_naming_the_link_acts_on_the_link() {
        let (tmp, b, outside) = setup();
        b.write("lnk", b"now a file").unwrap();
        assert_eq!(std::fs::read(tmp.path().join("sandbox/lnk")).unwrap(), b"now a file");
        assert_eq!(std::fs::read(outside.join("secret")).unwrap(), b"s");
        b.symlink("lnk2", outside.to_str().unwrap()).unwrap();
        b.delete("lnk2").unwrap();
        assert!(outside.join("secret").exists());
    }

    #[test]
    fn a_folder_is_deleted_without_following_links_inside_it() {
        let (tmp, b, outside) = setup();
        b.write("d/e/f.txt", b"f").unwrap();
        b.symlink("d/out", outside.to_str().unwrap()).unwrap();
        b.delete("d").unwrap();
        assert!(!tmp.path().join("sandbox/d").exists());
        assert!(outside.join("secret").exists());
    }

    #[test]
    fn dense_files_are_capped() {
        let (_tmp, b, _) = setup();
        assert!(b.write_repeated("big", MAX_DENSE_FILE + 1, b"a").unwrap_err().contains("cap"));
        b.write_repeated("ok", 10, b"ab").unwrap();
    }

    #[test]
    fn paths_must_be_plain_and_relative() {
        let (_tmp, b, _) = setup();
        assert!(b.write("../x", b"x").is_err());
        assert!(b.write("/etc/x", b"x").is_err());
    }

    #[test]
    fn a_write_replaces_a_folder_and_a_file_in_its_way() {
        let (tmp, b, outside) = setup();
        let sandbox = tmp.path().join("sandbox");
        b.write("rules", b"a file").unwrap();
        b.write("rules/a.md", b"a").unwrap();
        assert_eq!(std::fs::read(sandbox.join("rules/a.md")).unwrap(), b"a");
        b.write("api/deep/old.md", b"o").unwrap();
        b.symlink("api/out", outside.to_str().unwrap()).unwrap();
        b.write("api", b"now a file").unwrap();
        assert_eq!(std::fs::read(sandbox.join("api")).unwrap(), b"now a file");
        assert!(outside.join("secret").exists());
        assert!(b.write("lnk/deeper/x", b"x").unwrap_err().contains("crosses the link 'lnk'"));
    }

    #[test]
    fn an_in_place_overwrite_keeps_the_file_and_its_folder_and_writes_through_no_link() {
        use std::os::unix::fs::MetadataExt;
        let (tmp, b, outside) = setup();
        let sandbox = tmp.path().join("sandbox");
        b.write("d/a.md", b"version one\n").unwrap();
        let (file, folder) =
            (std::fs::metadata(sandbox.join("d/a.md")).unwrap(), std::fs::metadata(sandbox.join("d")).unwrap());
        b.overwrite("d/a.md", b"v2\n").unwrap();
        let (file2, folder2) =
            (std::fs::metadata(sandbox.join("d/a.md")).unwrap(), std::fs::metadata(sandbox.join("d")).unwrap());
        assert_eq!(std::fs::read(sandbox.join("d/a.md")).unwrap(), b"v2\n");
        assert_eq!((file.ino(), folder.ino()), (file2.ino(), folder2.ino()));
        assert_eq!(
            (folder.mtime(), folder.mtime_nsec(), folder.ctime_nsec()),
            (folder2.mtime(), folder2.mtime_nsec(), folder2.ctime_nsec())
        );
        assert!(b.overwrite("d/missing.md", b"x").unwrap_err().contains("does not exist"));
        assert!(b.overwrite("d", b"x").unwrap_err().contains("not a regular file"));
        std::os::unix::fs::symlink(outside.join("secret"), sandbox.join("d/out.md")).unwrap();
        assert!(b.overwrite("d/out.md", b"x").unwrap_err().contains("not a regular file"));
        assert!(b.overwrite("lnk/secret", b"x").unwrap_err().contains("crosses the link 'lnk'"));
        assert_eq!(std::fs::read(outside.join("secret")).unwrap(), b"s");
    }
}
