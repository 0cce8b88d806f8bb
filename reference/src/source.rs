//! File sources: where instruction files are listed and read from (seed 000, "Local CLI
//! instruction sources" and "Boundaries and authority").
//!
//! - [`HostSource`]: the daemon's own filesystem. The root is realpath-resolved once; module
//!   files and nested instruction files must resolve inside it ("realPathWithin"), while the root
//!   file follows a symlink wherever it points, "as PI's own loader does".
//! - [`MemSource`]: a tree the daemon reaches through a file client, held in memory: a Windows
//!   computer's files (`path.win32`, case-insensitive and case-preserving, not realpath-resolved)
//!   or a managed project's guest (lexical POSIX paths, every symlink entry refused, a stopped
//!   environment yields no files).
//!
//! Every read is bounded: the size comes from metadata first, and never more than cap + 1 bytes
//! are read, so a sparse file of gigabytes costs one `fstat`. On the host, every listing and
//! every open starts from the held root directory ([`crate::confine`]): nothing is reached
//! through a path string, and nothing but a regular file on a real filesystem is opened.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::FileType;

use crate::confine::{look, requested_confinement, Confinement, End, Fail, ListFail, Place, Refusal, Root, Scope};
use crate::diag::{Code, Diagnostic};
use crate::relpath::{Platform, RelPath};
use crate::winpath;

/// How many names the root listing of a file client returns at most (seed 000, "Boundaries and
/// authority": "one guest listing of at most 1,000 entries, starting just below AGENTS").
pub const ROOT_LISTING_LIMIT: usize = 1000;

/// What a directory entry is, with links already classified against the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symlink to a file inside the root.
    LinkInsideFile,
    /// A symlink to a directory inside the root.
    LinkInsideDir,
    /// A symlink that resolves outside the root.
    LinkOutside,
    /// A symlink that does not resolve (dangling, or a loop), with the reason.
    LinkBroken(String),
    /// A symlink entry in a tree where every symlink is refused (a managed project).
    LinkRefused,
    /// Anything else: a FIFO, a socket, a device.
    Other,
}

/// One directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The entry's name as stored.
    pub name: String,
    /// What it is.
    pub kind: EntryKind,
}

/// A folder as a listing opened it ([`Source::list_folder`]): on the host, the handle it was
/// listed through; elsewhere, nothing to hold (files are read by path).
#[derive(Debug)]
pub(crate) enum Folder {
    /// The handle the host folder was listed through.
    Held(Place),
    /// Read by path.
    ByPath,
}

/// The answer of a bounded read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadOutcome {
    /// The whole file, at most the cap.
    Bytes(Vec<u8>),
    /// There is no such file (any more).
    Absent,
    /// The file was refused.
    Refused(Code, String),
}

/// The state of a managed project's environment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Environment {
    /// Files can be listed and read.
    #[default]
    Running,
    /// Stopped: nothing is listed, nothing is logged (opening a conversation never starts it).
    Stopped,
    /// Starting: the same as stopped.
    Pending,
    /// Listing fails with this text; logged at info level.
    Failed(String),
}

/// A file source.
#[derive(Debug, Clone)]
pub enum Source {
    /// No project: an unregistered directory, or a worktree of another repository. It lists
    /// nothing and contains no path.
    Nothing,
    /// The daemon's filesystem.
    Host(HostSource),
    /// A file client's tree, held in memory.
    Mem(MemSource),
}

impl Source {
    /// The path rules of this source.
    pub fn platform(&self) -> Platform {
        match self {
            Source::Host(_) | Source::Nothing => Platform::Posix,
            Source::Mem(m) => m.tree.platform,
        }
    }

    /// The root as the rendered envelope names it.
    pub fn root_display(&self) -> String {
        match self {
            Source::Nothing => String::new(),
            Source::Host(h) => h.root_real.to_string_lossy().into_owned(),
            Source::Mem(m) => m.root.clone(),
        }
    }

    /// Answers the root-relative path of a touched path, or `None` outside the root.
    pub fn within(&self, path: &str) -> Option<RelPath> {
        match self {
            Source::Nothing => None,
            Source::Host(h) => h.within(path),
            Source::Mem(m) => m.tree.platform.within(&m.root, path),
        }
    }

    /// The entries of `dir` (`None`: the root), sorted by name; `Err` with a diagnostic when
    /// the listing failed in a way worth logging, `Ok(empty)` when there is nothing to list.
    pub fn list(&self, dir: Option<&RelPath>) -> Result<Vec<Entry>, Option<Diagnostic>> {
        match self {
            Source::Nothing => Ok(Vec::new()),
            Source::Host(h) => h.list(dir),
            Source::Mem(m) => m.list(dir),
        }
    }

    /// Whether the source can be listed at all: `Err(None)` for a stopped or pending managed
    /// environment (absent, silently), `Err(Some(..))` for a failed one (logged at info).
    pub fn available(&self) -> Result<(), Option<Diagnostic>> {
        match self {
            Source::Mem(m) => m.available(),
            Source::Host(_) | Source::Nothing => Ok(()),
        }
    }

    /// What the entry at `path` is, without following a final link.
    pub fn entry_kind(&self, path: &RelPath) -> Option<EntryKind> {
        match self {
            Source::Nothing => None,
            Source::Host(h) => h.entry_kind(path),
            Source::Mem(m) => m.entry_kind(path),
        }
    }

    /// The first of `names` present in `dir` as a non-directory, as its stored path. The root
    /// (`dir` = `None`) of a file client is found with one bounded listing; a listing that
    /// reaches its limit before any candidate answers `None` with an info diagnostic.
    pub fn find_first(&self, dir: Option<&RelPath>, names: &[String]) -> (Option<RelPath>, Option<Diagnostic>) {
        match self {
            Source::Nothing => (None, None),
            Source::Host(h) => h.find_first(dir, names),
            Source::Mem(m) => m.find_first(dir, names),
        }
    }

    /// Reads a file that a walk of real directories under the real root listed as a regular file.
    /// It is read as any confined file is: should a link have replaced it since the listing, the
    /// read resolves it beneath the root.
    pub fn read_listed_file(&self, path: &RelPath, cap: u64) -> ReadOutcome {
        self.read(path, true, cap)
    }

    /// The entries of `dir` as [`Source::list`] gives them, with the folder that listing opened,
    /// to read the regular files it found through the same handle ([`Source::read_in`]).
    pub(crate) fn list_folder(&self, dir: Option<&RelPath>) -> Result<(Vec<Entry>, Folder), Option<Diagnostic>> {
        match self {
            Source::Nothing => Ok((Vec::new(), Folder::ByPath)),
            Source::Host(h) => {
                h.list_held(dir).map(|(entries, place)| (entries, place.map_or(Folder::ByPath, Folder::Held)))
            }
            Source::Mem(m) => m.list(dir).map(|entries| (entries, Folder::ByPath)),
        }
    }

    /// Reads `path`, an entry that the listing of `folder` found as a regular file, as
    /// [`Source::read_listed_file`] does, through the folder's handle: the file is looked at
    /// below the handle and opened by it and its name, without resolving its folder again from
    /// the root. Should anything but a regular file be there now (a link swapped in since the
    /// listing, say), the read resolves `path` beneath the root as any confined read does.
    ///
    /// The handle was opened beneath the root, through real directories only, when the folder
    /// was listed; a folder moved out of the root since still holds only what was inside it (or
    /// what was moved into it, which could as well have been moved into the root), so nothing
    /// outside the root is read through it that a rename into the root could not have put there.
    pub(crate) fn read_in(&self, folder: &Folder, path: &RelPath, cap: u64) -> ReadOutcome {
        match (self, folder) {
            (Source::Host(h), Folder::Held(place)) => h.read_in(place, path, cap),
            _ => self.read_listed_file(path, cap),
        }
    }

    /// Reads at most `max + 1` bytes from the start of `path`, whatever its size, so a caller can
    /// cut it (the root-file profile's 32 KiB cut). Refusals are as for [`Source::read`] but for
    /// the size.
    pub fn read_head(&self, path: &RelPath, confined: bool, max: u64) -> ReadOutcome {
        match self {
            Source::Nothing => ReadOutcome::Absent,
            Source::Host(h) => h.read_with(path, confined, Bound::Head(max), None),
            Source::Mem(m) => m.read_head(path, max),
        }
    }

    /// Reads the head of `path` as [`Source::read_head`] does, confined, after `check` has passed
    /// the root-relative path of the file the read resolved to: the very file that is then
    /// opened, from the same resolution, not a path resolved earlier (a link swapped in between
    /// cannot slip another file past the check). `check` answers a refusal to stop the read
    /// before a byte is read. A target outside the root is an escape before it is checked.
    pub fn read_head_checked(&self, path: &RelPath, max: u64, check: TargetCheck<'_>) -> ReadOutcome {
        match self {
            Source::Nothing => ReadOutcome::Absent,
            Source::Host(h) => h.read_with(path, true, Bound::Head(max), Some(check)),
            // A file client's tree has no links to follow: the target is the path.
            Source::Mem(m) => match m.tree.get(path) {
                Some(Node::File(_)) => match check(path) {
                    Some((code, message)) => ReadOutcome::Refused(code, message),
                    None => m.read_head(path, max),
                },
                _ => m.read_head(path, max),
            },
        }
    }

    /// The identity of the entry at `path`, its last component not followed: `None` where there
    /// is none, or for a source that offers none (a file client's tree, held in memory).
    pub(crate) fn identity(&self, path: &RelPath) -> Option<Ident> {
        match self {
            Source::Host(h) => h.root.stat_below(path.as_str()).ok().map(|st| Ident::of(&st)),
            Source::Mem(_) | Source::Nothing => None,
        }
    }

    /// Reads `path` whole if it is at most `cap` bytes. `confined`: the file must resolve inside
    /// the root (modules and nested files); otherwise links are followed (the root file).
    pub fn read(&self, path: &RelPath, confined: bool, cap: u64) -> ReadOutcome {
        match self {
            Source::Nothing => ReadOutcome::Absent,
            Source::Host(h) => h.read_with(path, confined, Bound::Cap(cap), None),
            Source::Mem(m) => m.read(path, cap),
        }
    }
}

/// One version of a directory entry as its metadata tells it: the same file (device and inode),
/// the same kind, size, modification and change time. Any write changes the change time, which
/// no caller can set back; a replacement changes the inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ident {
    dev: u64,
    ino: u64,
    mode: u32,
    size: i64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Ident {
    pub(crate) fn of(st: &rustix::fs::Stat) -> Ident {
        #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
        Ident {
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
            mode: st.st_mode as u32,
            size: st.st_size as i64,
            mtime: (st.st_mtime as i64, st.st_mtime_nsec as i64),
            ctime: (st.st_ctime as i64, st.st_ctime_nsec as i64),
        }
    }

    /// Whether it is a directory (a link to one is not).
    pub(crate) fn is_dir(&self) -> bool {
        FileType::from_raw_mode(self.mode) == FileType::Directory
    }

    /// Whether it is a regular file (a link to one is not).
    pub(crate) fn is_file(&self) -> bool {
        FileType::from_raw_mode(self.mode) == FileType::RegularFile
    }

    /// The later of its modification and change times, in nanoseconds since the epoch.
    pub(crate) fn changed_ns(&self) -> i128 {
        let ns = |(s, n): (i64, i64)| i128::from(s) * 1_000_000_000 + i128::from(n);
        ns(self.mtime).max(ns(self.ctime))
    }
}

/// The daemon's own filesystem under one realpath-resolved root, held open: every listing and
/// every read starts from the root's handle and walks down it ([`crate::confine`]), so a folder
/// swapped for a link while discovery runs cannot lead a read or a listing outside.
#[derive(Debug, Clone)]
pub struct HostSource {
    root_given: String,
    root_real: PathBuf,
    root: Arc<Root>,
}

/// A check of the file a read resolved to, before a byte of it is read: `Some` refuses.
pub type TargetCheck<'a> = &'a dyn Fn(&RelPath) -> Option<(Code, String)>;

impl HostSource {
    /// A source rooted at `root`, resolved once with realpath and held open. Reads and listings
    /// are confined by `openat2` where the kernel offers it, else by the reference's own walk
    /// (see [`force_confinement_fallback`](crate::force_confinement_fallback)).
    pub fn new(root: &Path) -> io::Result<HostSource> {
        HostSource::with_confinement(root, requested_confinement())
    }

    /// A source rooted at `root` that uses `confinement` where it can: [`Confinement::Kernel`]
    /// still falls back to the walk where `openat2` is missing or refused. For tests that prove
    /// both resolvers give one answer.
    pub fn with_confinement(root: &Path, confinement: Confinement) -> io::Result<HostSource> {
        let root_real = fs::canonicalize(root)?;
        let held = Root::open(&root_real, confinement)?;
        Ok(HostSource { root_given: root.to_string_lossy().into_owned(), root_real, root: Arc::new(held) })
    }

    /// A handle on the folder `dir` below the root to look at its entries from, reached through
    /// real directories only ([`Root::dir_handle`]); `None` when it is not one (any more).
    pub(crate) fn dir_handle(&self, dir: &RelPath) -> Option<Arc<rustix::fd::OwnedFd>> {
        let names: Vec<OsString> = dir.segments().map(OsString::from).collect();
        self.root.dir_handle(&names)
    }

    /// The realpath of the root.
    pub fn root_real(&self) -> &Path {
        &self.root_real
    }

    /// The resolver this source confines with.
    pub fn confinement(&self) -> Confinement {
        self.root.confinement()
    }

    fn within(&self, path: &str) -> Option<RelPath> {
        Platform::Posix
            .within(&self.root_given, path)
            .or_else(|| Platform::Posix.within(&self.root_real.to_string_lossy(), path))
    }

    fn full(&self, rel: Option<&RelPath>) -> PathBuf {
        match rel {
            Some(r) => self.root_real.join(r.as_str()),
            None => self.root_real.clone(),
        }
    }

    /// Walks `path` below the root, confined. When the walk meets a step out of the root (a link
    /// out, or a chain that passes outside), the path's realpath is asked for a candidate inside
    /// the root and that is walked again, confined: confinement judges the final target
    /// (D-LINK-7), and realpath only proposes, it never opens. A chain that passes through a
    /// link on a pseudo filesystem (a procfs magic link) proposes nothing: it left the root, and
    /// its way back is no path ([`HostSource::through_pseudo_link`]).
    fn walk_confined(&self, path: &RelPath, follow_last: bool) -> Result<End, Fail> {
        match self.root.walk(self.root.place(), OsStr::new(path.as_str()), Scope::Beneath, follow_last) {
            Err(Fail::Escape) => {
                if self.through_pseudo_link(self.root.place(), OsStr::new(path.as_str())) {
                    return Err(Fail::Escape);
                }
                let real = fs::canonicalize(self.full(Some(path))).map_err(|e| match e.raw_os_error() {
                    Some(n) => Fail::Io(rustix::io::Errno::from_raw_os_error(n)),
                    None => Fail::Missing { link: true },
                })?;
                let rel = real.strip_prefix(&self.root_real).map_err(|_| Fail::Escape)?;
                if rel.as_os_str().is_empty() {
                    return Err(Fail::Escape);
                }
                self.root.walk(self.root.place(), rel.as_os_str(), Scope::Beneath, true)
            }
            other => other,
        }
    }

    /// Whether the chain at `path` from `start`, which left the root, passes through a link on
    /// a pseudo filesystem (D-CAP-4 extended). realpath follows procfs's magic links: a module
    /// linked to `/proc/self/cwd/<the root>/docs/x.md` or to `/proc/self/fd/<n>` would be
    /// proposed as the inside file the link names, a file no path in the tree leads to. The
    /// reference's own walk, which refuses such links, is asked first. It resolves apart from
    /// realpath, so a chain swapped between the two gets what one of its states would give, and
    /// content still comes only from inside the root: the proposal is walked again beneath it.
    fn through_pseudo_link(&self, start: Place, path: &OsStr) -> bool {
        matches!(self.root.walk(start, path, Scope::Anywhere, true), Err(Fail::PseudoLink))
    }

    /// What a link entry `name` of the listed directory `dir` (found as `path`) is, judged by
    /// where its chain ends.
    fn classify_link(&self, dir: &Place, name: &OsStr, path: &RelPath) -> EntryKind {
        let first = self.root.walk(dir.clone(), name, Scope::Beneath, true);
        let end = match first {
            Err(Fail::Escape) if self.through_pseudo_link(dir.clone(), name) => return EntryKind::LinkOutside,
            Err(Fail::Escape) => match fs::canonicalize(self.full(Some(path))) {
                Err(e) => return EntryKind::LinkBroken(e.to_string()),
                Ok(real) if real == self.root_real => return EntryKind::LinkInsideDir,
                Ok(real) => match real.strip_prefix(&self.root_real) {
                    Err(_) => return EntryKind::LinkOutside,
                    Ok(rel) => self.root.walk(self.root.place(), rel.as_os_str(), Scope::Beneath, true),
                },
            },
            other => other,
        };
        match end {
            Ok(End::Place(_)) => EntryKind::LinkInsideDir,
            Ok(End::Entry { stat, .. }) if FileType::from_raw_mode(stat.st_mode) == FileType::Directory => {
                EntryKind::LinkInsideDir
            }
            Ok(End::Entry { .. }) => EntryKind::LinkInsideFile,
            Err(Fail::Escape) => EntryKind::LinkOutside,
            Err(f) => EntryKind::LinkBroken(f.reason()),
        }
    }

    fn kind_of(&self, dir: &Place, name: &OsStr, ft: FileType, path: impl FnOnce() -> Option<RelPath>) -> EntryKind {
        let ft = if ft == FileType::Unknown {
            match look(dir, name) {
                Ok(st) => FileType::from_raw_mode(st.st_mode),
                Err(_) => FileType::Unknown,
            }
        } else {
            ft
        };
        match ft {
            // Only a link needs its path (to be judged); a listed name always has one.
            FileType::Symlink => path().map_or(EntryKind::LinkRefused, |path| self.classify_link(dir, name, &path)),
            FileType::Directory => EntryKind::Dir,
            FileType::RegularFile => EntryKind::File,
            _ => EntryKind::Other,
        }
    }

    /// Lists `dir` through its handle. A folder that cannot be listed is reported
    /// (`file.unreadable`), never silently empty; one that became a link meanwhile is judged as
    /// the walk would judge that link's entry.
    fn list(&self, dir: Option<&RelPath>) -> Result<Vec<Entry>, Option<Diagnostic>> {
        self.list_held(dir).map(|(entries, _)| entries)
    }

    /// [`HostSource::list`], with the handle the folder was listed through (none when there was
    /// nothing to list).
    fn list_held(&self, dir: Option<&RelPath>) -> Result<(Vec<Entry>, Option<Place>), Option<Diagnostic>> {
        let names: Vec<OsString> = dir.map_or_else(Vec::new, |d| d.segments().map(OsString::from).collect());
        let shown = dir.map_or("", RelPath::as_str);
        let listing = match self.root.list(&names) {
            Ok(l) => l,
            Err(ListFail::Gone) => return Ok((Vec::new(), None)),
            Err(ListFail::Io(e)) => {
                return Err(Some(Diagnostic::new(
                    Code::FileUnreadable,
                    shown,
                    format!("'{shown}' cannot be listed ({})", io::Error::from(e)),
                )))
            }
            Err(ListFail::Link { parent, name }) => {
                let Some(at) = link_path(&parent, &name) else { return Ok((Vec::new(), None)) };
                return match self.classify_link(&parent, &name, &at) {
                    EntryKind::LinkOutside => Err(Some(Diagnostic::new(
                        Code::InstructionModuleEscape,
                        at.as_str(),
                        format!("'{at}' is a symlink out of the project (it is not walked)"),
                    ))),
                    // A link inside the root is not walked (D-LINK-2).
                    _ => Ok((Vec::new(), None)),
                };
            }
        };
        let mut out: Vec<Entry> = listing
            .entries
            .into_iter()
            .filter_map(|(name, ft)| {
                // A name that is not UTF-8 has no /-form path; it can hold no instruction file
                // the suite can name, so it is passed over.
                let text = name.to_str()?.to_string();
                let path = || match dir {
                    Some(d) => d.join(&text),
                    None => RelPath::parse(&text),
                };
                Some(Entry { kind: self.kind_of(&listing.place, &name, ft, path), name: text })
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok((out, Some(listing.place)))
    }

    /// What the entry at `path` is. An entry in a folder that cannot be searched is answered as
    /// a directory, so that listing it reports why: an unreadable folder is never silently absent.
    fn entry_kind(&self, path: &RelPath) -> Option<EntryKind> {
        match self.root.walk(self.root.place(), OsStr::new(path.as_str()), Scope::Beneath, false) {
            Ok(End::Place(_)) => Some(EntryKind::Dir),
            Ok(End::Entry { dir, name, stat }) => {
                Some(self.kind_of(&dir, &name, FileType::from_raw_mode(stat.st_mode), || Some(path.clone())))
            }
            // A folder on the way became a link out since it was looked at.
            Err(Fail::Escape) => Some(EntryKind::LinkOutside),
            Err(Fail::Io(rustix::io::Errno::ACCESS)) => Some(EntryKind::Dir),
            Err(_) => None,
        }
    }

    /// The first of `names` present in `dir` as a non-directory. The folder is reached as the
    /// touched path names it, links followed wherever they point: a file found through a link
    /// out is then refused by the confined read (D-LINK-4). A folder that cannot be searched is
    /// reported.
    fn find_first(&self, dir: Option<&RelPath>, names: &[String]) -> (Option<RelPath>, Option<Diagnostic>) {
        let shown = dir.map_or("", RelPath::as_str);
        let unsearchable = |e: String| {
            Some(Diagnostic::new(Code::FileUnreadable, shown, format!("'{shown}' cannot be searched ({e})")))
        };
        let place = match dir {
            None => self.root.place(),
            Some(d) => {
                let names: Vec<OsString> = d.segments().map(OsString::from).collect();
                let reached = match self.root.kernel_dir(&names, Root::walk_flags()) {
                    Some(place) => Ok(place),
                    None => self
                        .root
                        .walk(self.root.place(), OsStr::new(d.as_str()), Scope::Anywhere, true)
                        .and_then(|end| self.root.enter(end)),
                };
                match reached {
                    Ok(p) => p,
                    Err(Fail::Io(e)) => return (None, unsearchable(io::Error::from(e).to_string())),
                    // No such folder (or a file, a dangling link, a loop): nothing is present.
                    Err(_) => return (None, None),
                }
            }
        };
        for name in names {
            let stat = match look(&place, OsStr::new(name)) {
                Ok(s) => s,
                Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR) => continue,
                Err(e) => return (None, unsearchable(io::Error::from(e).to_string())),
            };
            let is_dir = match FileType::from_raw_mode(stat.st_mode) {
                FileType::Directory => true,
                // A link to a directory is not present either (D-NEST-1).
                FileType::Symlink => match self.root.walk(place.clone(), OsStr::new(name), Scope::Anywhere, true) {
                    Ok(End::Place(_)) => true,
                    Ok(End::Entry { stat, .. }) => FileType::from_raw_mode(stat.st_mode) == FileType::Directory,
                    Err(_) => false,
                },
                _ => false,
            };
            if is_dir {
                continue;
            }
            let found = match dir {
                Some(d) => d.join(name),
                None => RelPath::parse(name),
            };
            return (found, None);
        }
        (None, None)
    }

    /// [`Source::read_in`] on the host: `path`'s last name opened below `place` when it is a
    /// regular file and no link ([`Root::open_in`], the kernel fast path's own step). Anything
    /// else, or a file gone or changed since it was looked at, is read as
    /// [`HostSource::read_with`] reads `path`, confined.
    fn read_in(&self, place: &Place, path: &RelPath, cap: u64) -> ReadOutcome {
        match self.root.open_in(place, OsStr::new(path.file_name())) {
            Some(Ok((file, stat))) => read_open(file, file_size(&stat), path, Bound::Cap(cap)),
            Some(Err(r)) => refusal(path, r),
            None => self.read_with(path, true, Bound::Cap(cap), None),
        }
    }

    fn read_with(&self, path: &RelPath, confined: bool, bound: Bound, check: Option<TargetCheck<'_>>) -> ReadOutcome {
        match self.open_for_read(path, confined, check) {
            Ok((file, size)) => read_open(file, size, path, bound),
            Err(outcome) => outcome,
        }
    }

    /// Opens `path` for reading: confined, it must resolve inside the root (modules and nested
    /// files); otherwise links are followed wherever they point (the root file). Either way only
    /// a regular file on a real filesystem is opened. `check` judges the root-relative path of
    /// the file that is then opened, from the same resolution.
    fn open_for_read(
        &self,
        path: &RelPath,
        confined: bool,
        check: Option<TargetCheck<'_>>,
    ) -> Result<(fs::File, u64), ReadOutcome> {
        let refused = |code, message: String| Err(ReadOutcome::Refused(code, message));
        if confined && check.is_none() {
            match self.root.kernel_open(path.as_str()) {
                Some(Ok((file, stat))) => return Ok((file, file_size(&stat))),
                Some(Err(r)) => return Err(refusal(path, r)),
                None => {}
            }
        }
        let walked = if confined {
            self.walk_confined(path, true)
        } else {
            self.root.walk(self.root.place(), OsStr::new(path.as_str()), Scope::Anywhere, true)
        };
        match walked {
            Ok(End::Entry { dir, name, stat }) => {
                if let Some(check) = check {
                    if let Some((code, message)) = target_path(&dir, &name).and_then(|t| check(&t)) {
                        return refused(code, message);
                    }
                }
                match self.root.open_entry(&dir, &name, &stat) {
                    Ok((file, stat)) => Ok((file, file_size(&stat))),
                    Err(r) => Err(refusal(path, r)),
                }
            }
            Ok(End::Place(_)) => Err(refusal(path, Refusal::NotRegular)),
            // Only an unconfined walk (the modules profile's root file) meets such a link: a
            // confined one leaves the root first, an escape (D-CAP-4 extended).
            Err(Fail::PseudoLink) => refused(
                Code::FileNotRegular,
                format!(
                    "'{path}' resolves through a link on a pseudo filesystem such as /proc (not a regular file; \
                     such links are never followed)"
                ),
            ),
            Err(Fail::Escape) => refused(
                Code::InstructionModuleEscape,
                format!("'{path}' resolves outside the project root (symlinks out of the project are refused)"),
            ),
            // A dangling link is present (it is no directory) and is refused, confined or not: the
            // modules profile's root file follows links anywhere, but a root AGENTS.md whose link
            // leads nowhere wins its name priority and is reported, never silently no file
            // (D-ROOT-3, as D-CAP-2 for modules and D-RF-READ-1 for the root-file profile).
            Err(Fail::Missing { link: true }) => {
                refused(Code::FileUnreadable, format!("'{path}' is a link that does not resolve"))
            }
            Err(Fail::Missing { .. }) => Err(ReadOutcome::Absent),
            Err(f) => refused(Code::FileUnreadable, format!("'{path}' cannot be opened ({})", f.reason())),
        }
    }
}

/// The root-relative path of the entry `name` of `dir`, when `dir` lies below the root (names
/// that are not UTF-8 are judged by their lossy form).
fn target_path(dir: &Place, name: &OsStr) -> Option<RelPath> {
    let names = dir.names_below_root()?;
    rel_of(names.iter().map(OsString::as_os_str).chain(std::iter::once(name)))
}

/// The /-form path of the link `name` in `parent` below the root.
fn link_path(parent: &Place, name: &OsStr) -> Option<RelPath> {
    let names = parent.names_below_root()?;
    RelPath::from_segments(
        names.iter().map(|n| n.to_str()).chain(std::iter::once(name.to_str())).collect::<Option<Vec<&str>>>()?,
    )
}

fn rel_of<'a>(names: impl Iterator<Item = &'a OsStr>) -> Option<RelPath> {
    let lossy: Vec<String> = names.map(|n| n.to_string_lossy().into_owned()).collect();
    RelPath::from_segments(lossy.iter().map(String::as_str))
}

fn file_size(stat: &rustix::fs::Stat) -> u64 {
    u64::try_from(stat.st_size).unwrap_or(0)
}

/// The read outcome of a refused open.
fn refusal(path: &RelPath, r: Refusal) -> ReadOutcome {
    match r {
        Refusal::NotRegular => ReadOutcome::Refused(Code::FileNotRegular, format!("'{path}' is not a regular file")),
        Refusal::PseudoFs => ReadOutcome::Refused(
            Code::FileNotRegular,
            format!("'{path}' is on a pseudo filesystem such as /proc (not a regular file; it is never read)"),
        ),
        Refusal::Gone => ReadOutcome::Absent,
        Refusal::Changed => {
            ReadOutcome::Refused(Code::FileUnreadable, format!("'{path}' changed while it was opened (not read)"))
        }
        Refusal::Io(e) => {
            ReadOutcome::Refused(Code::FileUnreadable, format!("'{path}' cannot be opened ({})", io::Error::from(e)))
        }
    }
}

/// How much of a file a read takes.
#[derive(Debug, Clone, Copy)]
enum Bound {
    /// The whole file, refused above this many bytes.
    Cap(u64),
    /// The first this-many bytes and one more (to tell whether there is more), whatever the size.
    Head(u64),
}

/// Reads at most `cap + 1` bytes of an opened regular file of `size` bytes (its `fstat`).
fn read_open(file: fs::File, size: u64, path: &RelPath, bound: Bound) -> ReadOutcome {
    let limit = match bound {
        Bound::Cap(cap) if size > cap => return oversized(path, size, cap),
        Bound::Cap(n) | Bound::Head(n) => n,
    };
    let mut buf = Vec::with_capacity(usize::try_from(size.min(limit.saturating_add(1))).unwrap_or(0));
    if let Err(e) = file.take(limit.saturating_add(1)).read_to_end(&mut buf) {
        return ReadOutcome::Refused(Code::FileUnreadable, format!("'{path}' cannot be read ({e})"));
    }
    // The file may have grown between fstat and read; the cap still holds.
    if let Bound::Cap(cap) = bound {
        if buf.len() as u64 > cap {
            return oversized(path, buf.len() as u64, cap);
        }
    }
    ReadOutcome::Bytes(buf)
}

fn oversized(path: &RelPath, size: u64, cap: u64) -> ReadOutcome {
    ReadOutcome::Refused(
        Code::ContextFileOversized,
        format!("'{path}' is {size} bytes, above the {cap}-byte cap (instructions are never truncated)"),
    )
}

/// One node of an in-memory tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// A file with these bytes.
    File(Vec<u8>),
    /// A directory.
    Dir,
    /// A symlink with this target text (refused wherever a managed tree meets it).
    Symlink(String),
}

#[derive(Debug, Clone)]
struct Child {
    name: String,
    node: Node,
}

/// An in-memory tree with a platform's name rules: case-insensitive and case-preserving on
/// Windows, case-sensitive otherwise. Paths are /-form and root-relative.
#[derive(Debug, Clone)]
pub struct MemTree {
    platform: Platform,
    /// Folded directory path ("" for the root) → folded name → child.
    dirs: HashMap<String, BTreeMap<String, Child>>,
}

impl MemTree {
    /// An empty tree.
    pub fn new(platform: Platform) -> MemTree {
        let mut dirs = HashMap::new();
        dirs.insert(String::new(), BTreeMap::new());
        MemTree { platform, dirs }
    }

    fn fold(&self, s: &str) -> String {
        match self.platform {
            Platform::Windows => winpath::fold(s),
            Platform::Posix => s.to_string(),
        }
    }

    fn split<'a>(&self, path: &'a RelPath) -> (String, &'a str) {
        match path.as_str().rsplit_once('/') {
            Some((dir, name)) => (self.fold(dir), name),
            None => (String::new(), path.as_str()),
        }
    }

    /// Puts `node` at `path`, creating parent directories and replacing what was there.
    pub fn insert(&mut self, path: &RelPath, node: Node) {
        let mut dir = String::new();
        let segs: Vec<&str> = path.segments().collect();
        let (last, parents) = match segs.split_last() {
            Some(x) => x,
            None => return,
        };
        for seg in parents {
            let key = self.fold(seg);
            let children = self.dirs.entry(dir.clone()).or_default();
            let child = children.entry(key.clone()).or_insert_with(|| Child { name: seg.to_string(), node: Node::Dir });
            if child.node != Node::Dir {
                child.node = Node::Dir;
            }
            dir = if dir.is_empty() { key } else { format!("{dir}/{key}") };
            self.dirs.entry(dir.clone()).or_default();
        }
        let key = self.fold(last);
        let full = if dir.is_empty() { key.clone() } else { format!("{dir}/{key}") };
        if node == Node::Dir {
            self.dirs.entry(full).or_default();
        } else {
            self.remove_dir_contents(&full);
        }
        let children = self.dirs.entry(dir).or_default();
        let name = children.get(&key).map_or_else(|| last.to_string(), |c| c.name.clone());
        children.insert(key, Child { name, node });
    }

    fn remove_dir_contents(&mut self, folded: &str) {
        let prefix = format!("{folded}/");
        self.dirs.retain(|k, _| k != folded && !k.starts_with(&prefix));
    }

    /// Removes the entry at `path` (and everything below it); `false` when there was none.
    pub fn remove(&mut self, path: &RelPath) -> bool {
        let (dir, name) = self.split(path);
        let key = self.fold(name);
        let removed = self.dirs.get_mut(&dir).and_then(|c| c.remove(&key)).is_some();
        if removed {
            let full = if dir.is_empty() { key } else { format!("{dir}/{key}") };
            self.remove_dir_contents(&full);
        }
        removed
    }

    /// The node at `path`.
    pub fn get(&self, path: &RelPath) -> Option<&Node> {
        let (dir, name) = self.split(path);
        self.dirs.get(&dir)?.get(&self.fold(name)).map(|c| &c.node)
    }

    fn stored_path(&self, dir: Option<&RelPath>, name: &str) -> Option<RelPath> {
        let (folded_dir, stored_dir) = match dir {
            None => (String::new(), None),
            Some(d) => (self.fold(d.as_str()), Some(self.stored_dir(d)?)),
        };
        let child = self.dirs.get(&folded_dir)?.get(&self.fold(name))?;
        match stored_dir {
            None => RelPath::parse(&child.name),
            Some(d) => d.join(&child.name),
        }
    }

    /// The stored-case form of a directory path.
    fn stored_dir(&self, dir: &RelPath) -> Option<RelPath> {
        let mut folded = String::new();
        let mut stored: Vec<String> = Vec::new();
        for seg in dir.segments() {
            let key = self.fold(seg);
            let child = self.dirs.get(&folded)?.get(&key)?;
            stored.push(child.name.clone());
            folded = if folded.is_empty() { key } else { format!("{folded}/{key}") };
        }
        RelPath::from_segments(stored.iter().map(String::as_str))
    }

    fn children(&self, dir: Option<&RelPath>) -> Option<&BTreeMap<String, Child>> {
        let key = dir.map_or_else(String::new, |d| self.fold(d.as_str()));
        self.dirs.get(&key)
    }

    /// The tree below the directory `dir`, as a tree of its own (`dir` becomes its root); an
    /// empty tree when `dir` is no directory of this one.
    pub fn subtree(&self, dir: &RelPath) -> MemTree {
        let top = self.fold(dir.as_str());
        let below = format!("{top}/");
        let mut dirs: HashMap<String, BTreeMap<String, Child>> = self
            .dirs
            .iter()
            .filter_map(|(k, v)| {
                let key = if *k == top { Some(String::new()) } else { k.strip_prefix(&below).map(str::to_string) };
                key.map(|key| (key, v.clone()))
            })
            .collect();
        dirs.entry(String::new()).or_default();
        MemTree { platform: self.platform, dirs }
    }
}

/// A file client's tree: a Windows computer's (local CLI target) or a managed project's guest.
#[derive(Debug, Clone)]
pub struct MemSource {
    root: String,
    tree: MemTree,
    environment: Environment,
    /// Whose tree, for messages: a managed project's guest or a local CLI target.
    client: &'static str,
}

impl MemSource {
    /// A Windows computer's files under `root` (a `path.win32` path), not realpath-resolved.
    pub fn windows(root: impl Into<String>, tree: MemTree) -> MemSource {
        MemSource { root: root.into(), tree, environment: Environment::Running, client: "local target" }
    }

    /// A POSIX computer's files under `root`, reached through the local CLI's file client (seed
    /// 000, "Local CLI instruction sources"): lexical POSIX paths, not realpath-resolved on the
    /// daemon, and so every symlink entry is refused, as in a managed guest (decision D-LOCAL-4).
    pub fn local_posix(root: impl Into<String>, tree: MemTree) -> MemSource {
        MemSource { root: root.into(), tree, environment: Environment::Running, client: "local target" }
    }

    /// A managed project's guest files under `root` (a lexical POSIX path).
    pub fn managed(root: impl Into<String>, tree: MemTree, environment: Environment) -> MemSource {
        MemSource { root: root.into(), tree, environment, client: "managed project" }
    }

    /// The path rules of the tree.
    pub fn platform(&self) -> Platform {
        self.tree.platform
    }

    /// The tree, for edits between steps.
    pub fn tree_mut(&mut self) -> &mut MemTree {
        &mut self.tree
    }

    /// Changes the environment's state.
    pub fn set_environment(&mut self, environment: Environment) {
        self.environment = environment;
    }

    fn available(&self) -> Result<(), Option<Diagnostic>> {
        match &self.environment {
            Environment::Running => Ok(()),
            Environment::Stopped | Environment::Pending => Err(None),
            Environment::Failed(text) => Err(Some(Diagnostic::new(
                Code::ManagedListingFailed,
                "",
                format!("managed project listing failed: {text}"),
            ))),
        }
    }

    fn kind_of(&self, node: &Node) -> EntryKind {
        match node {
            Node::File(_) => EntryKind::File,
            Node::Dir => EntryKind::Dir,
            // A Windows tree cannot hold links (the scenario loader refuses them); a managed
            // tree refuses every link entry.
            Node::Symlink(_) => EntryKind::LinkRefused,
        }
    }

    fn list(&self, dir: Option<&RelPath>) -> Result<Vec<Entry>, Option<Diagnostic>> {
        self.available()?;
        let Some(children) = self.tree.children(dir) else { return Ok(Vec::new()) };
        let mut out: Vec<Entry> =
            children.values().map(|c| Entry { name: c.name.clone(), kind: self.kind_of(&c.node) }).collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    fn entry_kind(&self, path: &RelPath) -> Option<EntryKind> {
        self.available().ok()?;
        self.tree.get(path).map(|n| self.kind_of(n))
    }

    fn find_first(&self, dir: Option<&RelPath>, names: &[String]) -> (Option<RelPath>, Option<Diagnostic>) {
        if let Err(diag) = self.available() {
            return (None, diag);
        }
        let present = |name: &str| match self.tree.children(dir).and_then(|c| c.get(&self.tree.fold(name))) {
            Some(c) => c.node != Node::Dir,
            None => false,
        };
        if dir.is_none() {
            // One listing of at most ROOT_LISTING_LIMIT names, starting just below "AGENTS", in
            // the client's order (folded names).
            let Some(children) = self.tree.children(None) else { return (None, None) };
            let start = self.tree.fold("AGENTS");
            let listed: Vec<&String> = children.keys().filter(|k| **k >= start).take(ROOT_LISTING_LIMIT + 1).collect();
            let truncated = listed.len() > ROOT_LISTING_LIMIT;
            let window: Vec<&String> = listed.into_iter().take(ROOT_LISTING_LIMIT).collect();
            for name in names {
                let key = self.tree.fold(name);
                if window.contains(&&key) && present(name) {
                    return (self.tree.stored_path(None, name), None);
                }
            }
            let diag = truncated.then(|| {
                Diagnostic::new(
                    Code::RootListingLimit,
                    "",
                    format!("the root listing has more than {ROOT_LISTING_LIMIT} names before the instruction file candidates (treated as no instruction file)"),
                )
            });
            return (None, diag);
        }
        for name in names {
            if present(name) {
                return (self.tree.stored_path(dir, name), None);
            }
        }
        (None, None)
    }

    fn read_head(&self, path: &RelPath, max: u64) -> ReadOutcome {
        match self.read(path, u64::MAX) {
            ReadOutcome::Bytes(mut b) => {
                b.truncate(usize::try_from(max.saturating_add(1)).unwrap_or(usize::MAX));
                ReadOutcome::Bytes(b)
            }
            other => other,
        }
    }

    fn read(&self, path: &RelPath, cap: u64) -> ReadOutcome {
        if self.available().is_err() {
            return ReadOutcome::Absent;
        }
        match self.tree.get(path) {
            None | Some(Node::Dir) => ReadOutcome::Absent,
            Some(Node::Symlink(_)) => ReadOutcome::Refused(
                Code::InstructionModuleEscape,
                format!("'{path}' is a symlink in a {} (symlink entries are refused)", self.client),
            ),
            Some(Node::File(bytes)) if bytes.len() as u64 > cap => oversized(path, bytes.len() as u64, cap),
            Some(Node::File(bytes)) => ReadOutcome::Bytes(bytes.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rp(s: &str) -> RelPath {
        RelPath::parse(s).unwrap()
    }

    #[test]
    fn windows_tree_is_case_insensitive_and_case_preserving() {
        let mut t = MemTree::new(Platform::Windows);
        t.insert(&rp("Src/Api/AGENTS.md"), Node::File(b"x".to_vec()));
        let s = MemSource::windows(r"C:\repo", t);
        let (found, _) = s.find_first(Some(&rp("src/api")), &["AGENTS.md".to_string()]);
        assert_eq!(found, Some(rp("Src/Api/AGENTS.md")));
        assert_eq!(s.read(&rp("SRC/API/agents.md"), 10), ReadOutcome::Bytes(b"x".to_vec()));
    }

    #[test]
    fn mem_read_refuses_above_cap_and_accepts_at_cap() {
        let mut t = MemTree::new(Platform::Posix);
        t.insert(&rp("a.md"), Node::File(vec![b'a'; 10]));
        let s = MemSource::managed("/w", t, Environment::Running);
        assert!(matches!(s.read(&rp("a.md"), 10), ReadOutcome::Bytes(_)));
        assert!(matches!(s.read(&rp("a.md"), 9), ReadOutcome::Refused(Code::ContextFileOversized, _)));
    }

    #[test]
    fn stopped_environment_lists_nothing_and_logs_nothing() {
        let mut t = MemTree::new(Platform::Posix);
        t.insert(&rp("AGENTS.md"), Node::File(b"x".to_vec()));
        let s = MemSource::managed("/w", t, Environment::Stopped);
        assert_eq!(s.find_first(None, &["AGENTS.md".to_string()]), (None, None));
    }

    /// Both resolvers follow links inside the root, a nested absolute link to an in-root file
    /// too (D-LINK-7), and refuse a link out.
    #[test]
    fn confined_reads_follow_links_inside_and_refuse_links_out_on_both_resolvers() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("docs")).unwrap();
        std::fs::write(root.join("docs/a.md"), "inside").unwrap();
        std::fs::write(dir.path().join("secret.md"), "outside").unwrap();
        std::os::unix::fs::symlink("docs/a.md", root.join("rel.md")).unwrap();
        std::os::unix::fs::symlink(root.join("docs/a.md"), root.join("abs.md")).unwrap();
        std::os::unix::fs::symlink("../secret.md", root.join("out.md")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret.md"), root.join("absout.md")).unwrap();
        for confinement in [Confinement::Kernel, Confinement::Fallback] {
            let s = HostSource::with_confinement(&root, confinement).unwrap();
            assert_eq!(s.read_with(&rp("rel.md"), true, Bound::Cap(100), None), ReadOutcome::Bytes(b"inside".to_vec()));
            assert_eq!(s.read_with(&rp("abs.md"), true, Bound::Cap(100), None), ReadOutcome::Bytes(b"inside".to_vec()));
            for out in ["out.md", "absout.md"] {
                let got = s.read_with(&rp(out), true, Bound::Cap(100), None);
                assert!(
                    matches!(got, ReadOutcome::Refused(Code::InstructionModuleEscape, _)),
                    "{confinement:?} {out}: {got:?}"
                );
            }
        }
    }

    /// A file read through the handle its folder was listed with ([`Source::read_in`]) is the file
    /// there at the read: one swapped since the listing for a link out of the root is refused as an
    /// escape, one swapped for a FIFO as not regular, one removed is absent, one rewritten is read
    /// as it is now; never a byte from outside, on either resolver.
    #[test]
    fn a_file_swapped_after_its_folder_was_listed_is_read_as_it_is_now() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("project");
        let rules = root.join(".elowen/rules");
        std::fs::create_dir_all(&rules).unwrap();
        std::fs::write(dir.path().join("secret.md"), "CANARY outside").unwrap();
        for confinement in [Confinement::Kernel, Confinement::Fallback] {
            for name in ["out.md", "fifo.md", "gone.md", "edited.md"] {
                std::fs::write(rules.join(name), "listed").unwrap();
            }
            let source = Source::Host(HostSource::with_confinement(&root, confinement).unwrap());
            let (entries, folder) = source.list_folder(Some(&rp(".elowen/rules"))).unwrap();
            assert!(matches!(folder, Folder::Held(_)), "{confinement:?}");
            assert_eq!(entries.len(), 4, "{confinement:?}");
            std::fs::remove_file(rules.join("out.md")).unwrap();
            std::os::unix::fs::symlink("../../../secret.md", rules.join("out.md")).unwrap();
            std::fs::remove_file(rules.join("fifo.md")).unwrap();
            rustix::fs::mknodat(
                rustix::fs::CWD,
                rules.join("fifo.md"),
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
                0,
            )
            .unwrap();
            std::fs::remove_file(rules.join("gone.md")).unwrap();
            std::fs::write(rules.join("edited.md"), "edited").unwrap();
            let read = |name: &str| source.read_in(&folder, &rp(&format!(".elowen/rules/{name}")), 100);
            let out = read("out.md");
            assert!(matches!(out, ReadOutcome::Refused(Code::InstructionModuleEscape, _)), "{confinement:?}: {out:?}");
            let fifo = read("fifo.md");
            assert!(matches!(fifo, ReadOutcome::Refused(Code::FileNotRegular, _)), "{confinement:?}: {fifo:?}");
            assert_eq!(read("gone.md"), ReadOutcome::Absent, "{confinement:?}");
            assert_eq!(read("edited.md"), ReadOutcome::Bytes(b"edited".to_vec()), "{confinement:?}");
            for name in ["out.md", "fifo.md", "edited.md"] {
                std::fs::remove_file(rules.join(name)).unwrap();
            }
        }
    }

    /// The CI kernel has openat2; the probe must find it unless the fallback is forced.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_kernel_resolver_is_used_where_openat2_works() {
        let dir = tempfile::tempdir().unwrap();
        let s = HostSource::with_confinement(dir.path(), Confinement::Kernel).unwrap();
        assert_eq!(s.confinement(), Confinement::Kernel);
        let s = HostSource::with_confinement(dir.path(), Confinement::Fallback).unwrap();
        assert_eq!(s.confinement(), Confinement::Fallback);
    }

    #[test]
    fn host_read_never_reads_past_cap_plus_one() {
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::File::create(dir.path().join("big.md")).unwrap();
        f.set_len(8 << 30).unwrap();
        let s = HostSource::new(dir.path()).unwrap();
        let out = Source::Host(s).read(&rp("big.md"), true, 262_144);
        assert!(matches!(out, ReadOutcome::Refused(Code::ContextFileOversized, _)));
    }
}
