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
//! are read, so a sparse file of gigabytes costs one `fstat`.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

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
            Source::Host(h) => Ok(h.list(dir)),
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
            Source::Host(h) => (h.find_first(dir, names), None),
            Source::Mem(m) => m.find_first(dir, names),
        }
    }

    /// Reads a file that a walk of real directories under the real root listed as a regular file.
    /// No realpath is needed for it; should a link have replaced it since the listing, the read
    /// does not follow it but falls back to the confined read, which resolves it.
    pub fn read_listed_file(&self, path: &RelPath, cap: u64) -> ReadOutcome {
        match self {
            Source::Host(h) => h.read_listed_file(path, cap),
            _ => self.read(path, true, cap),
        }
    }

    /// Reads at most `max + 1` bytes from the start of `path`, whatever its size, so a caller can
    /// cut it (the root-file profile's 32 KiB cut). Refusals are as for [`Source::read`] but for
    /// the size.
    pub fn read_head(&self, path: &RelPath, confined: bool, max: u64) -> ReadOutcome {
        match self {
            Source::Nothing => ReadOutcome::Absent,
            Source::Host(h) => h.read_head(path, confined, max),
            Source::Mem(m) => match m.read(path, u64::MAX) {
                ReadOutcome::Bytes(mut b) => {
                    b.truncate(usize::try_from(max.saturating_add(1)).unwrap_or(usize::MAX));
                    ReadOutcome::Bytes(b)
                }
                other => other,
            },
        }
    }

    /// The root-relative path a file resolves to after links, when it resolves inside the root
    /// (an in-memory tree has no links to follow).
    pub fn resolve(&self, path: &RelPath) -> Option<RelPath> {
        match self {
            Source::Nothing => None,
            Source::Host(h) => {
                let real = fs::canonicalize(h.full(Some(path))).ok()?;
                let rel = real.strip_prefix(&h.root_real).ok()?;
                RelPath::from_segments(rel.iter().map(|c| c.to_str().unwrap_or("\u{0}")))
            }
            Source::Mem(_) => Some(path.clone()),
        }
    }

    /// Reads `path` whole if it is at most `cap` bytes. `confined`: the file must resolve inside
    /// the root (modules and nested files); otherwise links are followed (the root file).
    pub fn read(&self, path: &RelPath, confined: bool, cap: u64) -> ReadOutcome {
        match self {
            Source::Nothing => ReadOutcome::Absent,
            Source::Host(h) => h.read(path, confined, cap),
            Source::Mem(m) => m.read(path, cap),
        }
    }
}

/// The daemon's own filesystem under one realpath-resolved root.
#[derive(Debug, Clone)]
pub struct HostSource {
    root_given: String,
    root_real: PathBuf,
    /// The root directory, held open, for reads the kernel confines ([`open_beneath`]).
    root_dir: Option<std::sync::Arc<RootDir>>,
}

impl HostSource {
    /// A source rooted at `root`, resolved once with realpath.
    pub fn new(root: &Path) -> io::Result<HostSource> {
        let root_real = fs::canonicalize(root)?;
        let root_dir = RootDir::open(&root_real).map(std::sync::Arc::new);
        Ok(HostSource { root_given: root.to_string_lossy().into_owned(), root_real, root_dir })
    }

    /// The realpath of the root.
    pub fn root_real(&self) -> &Path {
        &self.root_real
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

    fn classify(&self, path: &Path, ft: fs::FileType) -> EntryKind {
        if ft.is_symlink() {
            match fs::canonicalize(path) {
                Err(e) => EntryKind::LinkBroken(e.to_string()),
                Ok(real) if !real.starts_with(&self.root_real) || real == self.root_real => {
                    if real == self.root_real {
                        EntryKind::LinkInsideDir
                    } else {
                        EntryKind::LinkOutside
                    }
                }
                Ok(real) => match fs::metadata(&real) {
                    Ok(md) if md.is_dir() => EntryKind::LinkInsideDir,
                    Ok(_) => EntryKind::LinkInsideFile,
                    Err(e) => EntryKind::LinkBroken(e.to_string()),
                },
            }
        } else if ft.is_dir() {
            EntryKind::Dir
        } else if ft.is_file() {
            EntryKind::File
        } else {
            EntryKind::Other
        }
    }

    fn list(&self, dir: Option<&RelPath>) -> Vec<Entry> {
        let Ok(rd) = fs::read_dir(self.full(dir)) else {
            return Vec::new();
        };
        let mut out: Vec<Entry> = rd
            .filter_map(Result::ok)
            .filter_map(|de| {
                // A name that is not UTF-8 has no /-form path; it can hold no instruction file
                // the suite can name, so it is passed over.
                let name = de.file_name().into_string().ok()?;
                let ft = de.file_type().ok()?;
                Some(Entry { kind: self.classify(&de.path(), ft), name })
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    fn entry_kind(&self, path: &RelPath) -> Option<EntryKind> {
        let full = self.full(Some(path));
        let md = fs::symlink_metadata(&full).ok()?;
        Some(self.classify(&full, md.file_type()))
    }

    fn find_first(&self, dir: Option<&RelPath>, names: &[String]) -> Option<RelPath> {
        let base = self.full(dir);
        names.iter().find_map(|name| {
            let md = fs::symlink_metadata(base.join(name)).ok()?;
            // A directory of that name is not an instruction file; a link to one neither.
            let is_dir =
                md.is_dir() || (md.file_type().is_symlink() && fs::metadata(base.join(name)).is_ok_and(|m| m.is_dir()));
            if is_dir {
                return None;
            }
            match dir {
                Some(d) => d.join(name),
                None => RelPath::parse(name),
            }
        })
    }

    fn read_head(&self, path: &RelPath, confined: bool, max: u64) -> ReadOutcome {
        self.read_with(path, confined, Bound::Head(max))
    }

    fn read_listed_file(&self, path: &RelPath, cap: u64) -> ReadOutcome {
        // A confined open resolves in the kernel at no extra cost; realpath is what costs.
        if self.root_dir.is_some() {
            return self.read_with(path, true, Bound::Cap(cap));
        }
        match read_bounded(&self.full(Some(path)), path, Bound::Cap(cap), true) {
            // ELOOP: the last component is a link now. Resolve it as any link is resolved.
            ReadOutcome::Refused(Code::FileUnreadable, _) => self.read(path, true, cap),
            other => other,
        }
    }

    fn read(&self, path: &RelPath, confined: bool, cap: u64) -> ReadOutcome {
        self.read_with(path, confined, Bound::Cap(cap))
    }

    fn read_with(&self, path: &RelPath, confined: bool, bound: Bound) -> ReadOutcome {
        if confined {
            if let Some(opened) = self.root_dir.as_ref().and_then(|d| d.open_beneath(path)) {
                let opened = match opened {
                    // The kernel refuses an absolute link, or a `..` that steps out and back in,
                    // even when the final target lies inside the root; confinement judges the
                    // final target (D-LINK-7). So resolve it, and open its real path beneath the
                    // root again: a link swapped in meanwhile is still refused.
                    Err(Beneath::Escape) => match self.target(path, true) {
                        Ok(real) => match real
                            .strip_prefix(&self.root_real)
                            .ok()
                            .and_then(|r| RelPath::from_segments(r.iter().map(|c| c.to_str().unwrap_or("\u{0}"))))
                        {
                            Some(rel) => self
                                .root_dir
                                .as_ref()
                                .and_then(|d| d.open_beneath(&rel))
                                .unwrap_or(Err(Beneath::Escape)),
                            None => Err(Beneath::Escape),
                        },
                        Err(refusal) => return refusal,
                    },
                    other => other,
                };
                return match opened {
                    Ok(file) => read_open(file, path, bound),
                    Err(Beneath::Escape) => ReadOutcome::Refused(
                        Code::InstructionModuleEscape,
                        format!("'{path}' resolves outside the project root (symlinks out of the project are refused)"),
                    ),
                    Err(Beneath::NotFound) if fs::symlink_metadata(self.full(Some(path))).is_err() => {
                        ReadOutcome::Absent
                    }
                    Err(Beneath::NotFound) => {
                        ReadOutcome::Refused(Code::FileUnreadable, format!("'{path}' is a link that does not resolve"))
                    }
                    Err(Beneath::Other(e)) => {
                        ReadOutcome::Refused(Code::FileUnreadable, format!("'{path}' cannot be opened ({e})"))
                    }
                };
            }
        }
        match self.target(path, confined) {
            Ok(target) => read_bounded(&target, path, bound, false),
            Err(refusal) => refusal,
        }
    }

    /// The file to open for `path`: confined, its real path inside the root; otherwise the path
    /// itself, links followed by the open.
    fn target(&self, path: &RelPath, confined: bool) -> Result<PathBuf, ReadOutcome> {
        let full = self.full(Some(path));
        if !confined {
            return Ok(full);
        }
        match fs::canonicalize(&full) {
            Ok(real) if real.starts_with(&self.root_real) && real != self.root_real => Ok(real),
            Ok(_) => Err(ReadOutcome::Refused(
                Code::InstructionModuleEscape,
                format!("'{path}' resolves outside the project root (symlinks out of the project are refused)"),
            )),
            Err(e) if e.kind() == io::ErrorKind::NotFound && fs::symlink_metadata(&full).is_err() => {
                Err(ReadOutcome::Absent)
            }
            Err(e) => Err(ReadOutcome::Refused(Code::FileUnreadable, format!("'{path}' cannot be resolved ({e})"))),
        }
    }
}

/// Why a confined open failed.
#[derive(Debug)]
enum Beneath {
    /// Resolving the path would leave the root (through a link, or `..` in a link's target).
    Escape,
    /// Nothing at the end of the path (a missing file, or a dangling link).
    NotFound,
    /// Anything else: a link loop, a permission, an I/O error.
    Other(io::Error),
}

/// The root directory, held open so that reads below it can be confined by the kernel.
#[derive(Debug)]
struct RootDir {
    #[cfg(target_os = "linux")]
    fd: rustix::fd::OwnedFd,
}

impl RootDir {
    /// Opens the root directory for [`RootDir::open_beneath`]; `None` where that is not
    /// available, and reads fall back to realpath-then-open.
    ///
    /// # Platform behavior
    /// Linux only (it needs `openat2`, Linux 5.6 and later); elsewhere always `None`.
    fn open(root: &Path) -> Option<RootDir> {
        #[cfg(target_os = "linux")]
        {
            use rustix::fs::{Mode, OFlags};
            let fd = rustix::fs::open(root, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).ok()?;
            let probe = RootDir { fd };
            // A kernel without openat2 answers ENOSYS: then there is no point holding the root.
            match probe.open_beneath_raw(".") {
                Err(rustix::io::Errno::NOSYS) => None,
                _ => Some(probe),
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = root;
            None
        }
    }

    #[cfg(target_os = "linux")]
    fn open_beneath_raw(&self, rel: &str) -> Result<rustix::fd::OwnedFd, rustix::io::Errno> {
        use rustix::fs::{Mode, OFlags, ResolveFlags};
        rustix::fs::openat2(
            &self.fd,
            rel,
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
        )
    }

    /// Opens `rel` so that no step of its resolution leaves the root: the kernel follows links
    /// inside the root and refuses the rest (`openat2` with `RESOLVE_BENEATH`). There is no
    /// window between checking and opening in which a swapped link could lead out, as there is
    /// with realpath-then-open. `None` when the kernel cannot do it.
    fn open_beneath(&self, rel: &RelPath) -> Option<Result<fs::File, Beneath>> {
        #[cfg(target_os = "linux")]
        {
            use rustix::io::Errno;
            match self.open_beneath_raw(rel.as_str()) {
                Ok(fd) => Some(Ok(fs::File::from(fd))),
                Err(Errno::NOSYS) => None,
                Err(Errno::XDEV) => Some(Err(Beneath::Escape)),
                Err(Errno::NOENT) => Some(Err(Beneath::NotFound)),
                Err(e) => Some(Err(Beneath::Other(io::Error::from(e)))),
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = rel;
            None
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

/// Opens without blocking (a FIFO must not hang discovery), and without following a final link
/// when `no_follow`; checks the opened file's own metadata, and reads at most `cap + 1` bytes.
fn read_bounded(target: &Path, path: &RelPath, bound: Bound, no_follow: bool) -> ReadOutcome {
    let mut opts = fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NONBLOCK | if no_follow { libc::O_NOFOLLOW } else { 0 });
    }
    #[cfg(not(unix))]
    let _ = no_follow;
    match opts.open(target) {
        Ok(file) => read_open(file, path, bound),
        Err(e) if e.kind() == io::ErrorKind::NotFound => ReadOutcome::Absent,
        Err(e) => ReadOutcome::Refused(Code::FileUnreadable, format!("'{path}' cannot be opened ({e})")),
    }
}

/// Checks an opened file's own metadata and reads at most `cap + 1` bytes of it.
fn read_open(file: fs::File, path: &RelPath, bound: Bound) -> ReadOutcome {
    let md = match file.metadata() {
        Ok(md) => md,
        Err(e) => return ReadOutcome::Refused(Code::FileUnreadable, format!("'{path}' cannot be inspected ({e})")),
    };
    if !md.is_file() {
        return ReadOutcome::Refused(Code::FileNotRegular, format!("'{path}' is not a regular file"));
    }
    let limit = match bound {
        Bound::Cap(cap) if md.len() > cap => return oversized(path, md.len(), cap),
        Bound::Cap(n) | Bound::Head(n) => n,
    };
    let mut buf = Vec::with_capacity(usize::try_from(md.len().min(limit.saturating_add(1))).unwrap_or(0));
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
}

/// A file client's tree: a Windows computer's (local CLI target) or a managed project's guest.
#[derive(Debug, Clone)]
pub struct MemSource {
    root: String,
    tree: MemTree,
    environment: Environment,
}

impl MemSource {
    /// A Windows computer's files under `root` (a `path.win32` path), not realpath-resolved.
    pub fn windows(root: impl Into<String>, tree: MemTree) -> MemSource {
        MemSource { root: root.into(), tree, environment: Environment::Running }
    }

    /// A managed project's guest files under `root` (a lexical POSIX path).
    pub fn managed(root: impl Into<String>, tree: MemTree, environment: Environment) -> MemSource {
        MemSource { root: root.into(), tree, environment }
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

    fn read(&self, path: &RelPath, cap: u64) -> ReadOutcome {
        if self.available().is_err() {
            return ReadOutcome::Absent;
        }
        match self.tree.get(path) {
            None | Some(Node::Dir) => ReadOutcome::Absent,
            Some(Node::Symlink(_)) => ReadOutcome::Refused(
                Code::InstructionModuleEscape,
                format!("'{path}' is a symlink in a managed project (symlink entries are refused)"),
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

    /// On Linux the kernel confines reads: a link out is refused by `openat2` itself, a link
    /// inside is followed, and a nested absolute link to an in-root file is still followed
    /// (through the realpath fallback).
    #[cfg(target_os = "linux")]
    #[test]
    fn kernel_confined_reads_follow_links_inside_and_refuse_links_out() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("docs")).unwrap();
        std::fs::write(root.join("docs/a.md"), "inside").unwrap();
        std::fs::write(dir.path().join("secret.md"), "outside").unwrap();
        std::os::unix::fs::symlink("docs/a.md", root.join("rel.md")).unwrap();
        std::os::unix::fs::symlink(root.join("docs/a.md"), root.join("abs.md")).unwrap();
        std::os::unix::fs::symlink("../secret.md", root.join("out.md")).unwrap();
        let s = HostSource::new(&root).unwrap();
        let d = s.root_dir.as_ref().expect("openat2 is available on the CI kernel");
        assert!(matches!(d.open_beneath(&rp("out.md")), Some(Err(Beneath::Escape))));
        assert!(matches!(d.open_beneath(&rp("rel.md")), Some(Ok(_))));
        assert_eq!(s.read(&rp("rel.md"), true, 100), ReadOutcome::Bytes(b"inside".to_vec()));
        assert_eq!(s.read(&rp("abs.md"), true, 100), ReadOutcome::Bytes(b"inside".to_vec()));
        assert!(matches!(s.read(&rp("out.md"), true, 100), ReadOutcome::Refused(Code::InstructionModuleEscape, _)));
    }

    #[test]
    fn host_read_never_reads_past_cap_plus_one() {
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::File::create(dir.path().join("big.md")).unwrap();
        f.set_len(8 << 30).unwrap();
        let s = HostSource::new(dir.path()).unwrap();
        let out = s.read(&rp("big.md"), true, 262_144);
        assert!(matches!(out, ReadOutcome::Refused(Code::ContextFileOversized, _)));
    }
}
