//! Confined opening and listing: how the host source reaches every file and folder below the
//! held-open root directory, never through a path string (seed 000, "Boundaries and authority":
//! "realPathWithin ... requires each module file and each nested AGENTS.md to resolve inside
//! realpath of the Project root").
//!
//! A path string is resolved again by every system call that takes it, so a folder swapped for
//! a link between two calls leads the second one outside the root. Here a path is walked from a
//! directory handle one component at a time, and what a step finds is what the next step starts
//! from. Two resolvers give one answer:
//!
//! 1. The kernel's, `openat2` with `RESOLVE_BENEATH` (Linux 5.6 and later). It is a fast path
//!    only: whatever it refuses is handed to the walk, which decides. A probe when the root is
//!    opened decides whether it is used; any probe error (ENOSYS on old kernels and gVisor, EPERM
//!    under a container's seccomp filter, anything else) means it is missing.
//! 2. The walk, on every POSIX system: each component is opened with `O_NOFOLLOW` below the
//!    handle of the one before; a link is read with `readlinkat` and its target walked in its
//!    place, so the code itself decides whether a step leaves the root ([`Scope::Beneath`]) or
//!    may go anywhere ([`Scope::Anywhere`], the root file "follows a symlink as PI's own loader
//!    does"). A link on a pseudo filesystem is never read or walked, anywhere ([`Fail::PseudoLink`]):
//!    procfs's magic links (`/proc/self/fd/<n>`, `cwd`, `root`, `exe`) name kernel objects, and
//!    the text readlink gives for them leads to whatever the process holds open. The kernel's
//!    path refuses them with `RESOLVE_NO_MAGICLINKS` (D-CAP-4 extended).
//!
//! Nothing that is not a regular file is opened for reading: the entry is looked at first
//! (`fstatat` without following, or `O_PATH` on the kernel's path), then opened by its directory
//! handle and name with `O_NOFOLLOW | O_NONBLOCK | O_NOCTTY`, and the opened file must be the one
//! looked at (same device and inode). Files of pseudo filesystems (procfs, sysfs and the other
//! kernel interfaces, whose size says nothing of their content) are refused before they are
//! opened. Listing reads a directory handle opened beneath the root (`getdents`), never a path.
//!
//! # Platform behavior
//! POSIX only (rustix). `O_PATH` and `openat2` are Linux's; elsewhere the walk opens directories
//! with `O_RDONLY | O_DIRECTORY` and there is no pseudo-filesystem check (macOS has no procfs).

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

use rustix::fd::OwnedFd;
use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

/// Which resolver confines a host source's reads and listings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confinement {
    /// `openat2(RESOLVE_BENEATH)` first, the walk for whatever it refuses (Linux 5.6 and later).
    Kernel,
    /// The walk alone: one component at a time from the held root, links read and judged by the
    /// reference itself. The only resolver where `openat2` is missing or refused.
    Fallback,
}

/// Not set by [`force_confinement_fallback`]: the environment decides.
const UNSET: u8 = 0;
const FORCED: u8 = 1;
const NOT_FORCED: u8 = 2;

static FORCE: AtomicU8 = AtomicU8::new(UNSET);

/// For tests: makes every host source opened afterwards use the fallback walk even where
/// `openat2` works (`true`), or lets the probe decide again (`false`), so a test suite can
/// prove both resolvers give the same answers. Sources already open keep their resolver.
///
/// Without a call, the environment variable `REFERENCE_CONFINEMENT` decides, read once: the
/// value `fallback` forces the walk (`REFERENCE_CONFINEMENT=fallback cargo test` runs the whole
/// corpus through it); any other value, or none, lets the probe decide. The default is the
/// probe's choice.
pub fn force_confinement_fallback(on: bool) {
    FORCE.store(if on { FORCED } else { NOT_FORCED }, Ordering::SeqCst);
}

/// The resolver a newly opened host source asks for ([`force_confinement_fallback`]).
pub(crate) fn requested_confinement() -> Confinement {
    static ENV: OnceLock<bool> = OnceLock::new();
    let forced = match FORCE.load(Ordering::SeqCst) {
        FORCED => true,
        NOT_FORCED => false,
        _ => *ENV.get_or_init(|| std::env::var_os("REFERENCE_CONFINEMENT").is_some_and(|v| v == "fallback")),
    };
    if forced {
        Confinement::Fallback
    } else {
        Confinement::Kernel
    }
}

/// How many links one resolution follows at most, as the kernel does (`MAXSYMLINKS`); one more
/// is a loop.
const MAX_HOPS: u32 = 40;

/// Where a walk may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Never outside the root: a link or `..` that leads out ends the walk with [`Fail::Escape`].
    Beneath,
    /// Links are followed wherever they point.
    Anywhere,
}

/// What a place's names are relative to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Base {
    /// The held root.
    Root,
    /// The filesystem root `/` (only an unconfined walk gets there).
    Slash,
}

/// A directory reached by a walk: its handle and its real names from the base, none a link.
#[derive(Debug, Clone)]
pub(crate) struct Place {
    base: Base,
    names: Vec<OsString>,
    fd: Arc<OwnedFd>,
}

impl Place {
    /// The place's names below the root, when it lies below the root (`None` outside).
    pub(crate) fn names_below_root(&self) -> Option<&[OsString]> {
        (self.base == Base::Root).then_some(self.names.as_slice())
    }

    fn child(&self, name: OsString, fd: OwnedFd) -> Place {
        let mut names = self.names.clone();
        names.push(name);
        Place { base: self.base, names, fd: Arc::new(fd) }
    }
}

/// Where a walk ended.
#[derive(Debug)]
pub(crate) enum End {
    /// The entry `name` of the directory `dir`, with its own metadata: never a link, unless the
    /// walk was asked not to follow a final one.
    Entry {
        /// The directory that holds the entry.
        dir: Place,
        /// The entry's name in it.
        name: OsString,
        /// The entry's own metadata (`fstatat` without following).
        stat: Stat,
    },
    /// A directory reached as a place: the path ended in `.` or `..` (a link to `..`, say).
    Place(Place),
}

/// Why a walk ended without an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fail {
    /// A step would leave the root ([`Scope::Beneath`] only).
    Escape,
    /// Nothing is there. `link`: the missing step lies in the target of the path's own final
    /// link (a dangling link), not on the path itself.
    Missing {
        /// Whether the path's final link dangles.
        link: bool,
    },
    /// More than [`MAX_HOPS`] links.
    Loop,
    /// A step that needs a directory met something else.
    NotDir,
    /// A link on a pseudo filesystem was met (procfs's magic links: `/proc/self`,
    /// `/proc/<pid>/fd/<n>`, `cwd`, `root`, `exe`): refused, never read or followed
    /// (D-CAP-4 extended).
    PseudoLink,
    /// The system refused a step (a permission, an I/O error, a name too long).
    Io(Errno),
}

impl Fail {
    /// The reason, worded as the system words it.
    pub(crate) fn reason(self) -> String {
        let errno = match self {
            Fail::PseudoLink => return PSEUDO_LINK_REASON.to_string(),
            Fail::Escape => Errno::XDEV,
            Fail::Missing { .. } => Errno::NOENT,
            Fail::Loop => Errno::LOOP,
            Fail::NotDir => Errno::NOTDIR,
            Fail::Io(e) => e,
        };
        io::Error::from(errno).to_string()
    }
}

/// Why a walk refused a link on a pseudo filesystem, as a reason reads.
const PSEUDO_LINK_REASON: &str = "a link on a pseudo filesystem such as /proc is never followed";

/// Where a component came from, to tell a missing file from a dangling link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    /// A component of the path, or of a link met on the way to its last component.
    Path,
    /// The path's own last component.
    Last,
    /// A component of the target of the path's last component (or of links met inside it).
    Final,
}

/// The root directory, held open: every confined open and listing starts from it.
#[derive(Debug)]
pub(crate) struct Root {
    fd: Arc<OwnedFd>,
    real_names: Vec<OsString>,
    confinement: Confinement,
    /// The root's own metadata when it lies on a real filesystem: a file on the same device is
    /// on that filesystem too, so it needs no `statfs` of its own.
    real_fs: Option<Stat>,
}

/// Flags that open a directory as a handle to walk from, never following a final link.
fn dir_flags() -> OFlags {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let kind = OFlags::PATH;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let kind = OFlags::RDONLY;
    kind | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// Opens the directory `name` below `dir`, refusing a link (`ENOTDIR` or `ELOOP`).
fn open_dir(dir: &OwnedFd, name: &OsStr) -> Result<OwnedFd, Errno> {
    rfs::openat(dir, name, dir_flags(), Mode::empty())
}

/// Opens the directory `name` below `dir` for reading its entries.
fn open_dir_readable(dir: &OwnedFd, name: &OsStr) -> Result<OwnedFd, Errno> {
    rfs::openat(dir, name, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())
}

/// The normal names of an absolute path, `..` kept (a `..` after a link is not lexical).
fn absolute_names(path: &Path) -> Vec<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            _ => None,
        })
        .collect()
}

/// Splits a link target or a relative path into its components (empty ones and `.` kept; the
/// walk skips them).
fn split(bytes: &[u8]) -> impl Iterator<Item = OsString> + '_ {
    bytes.split(|&b| b == b'/').map(|c| OsString::from_vec(c.to_vec()))
}

/// The open flags of a read: never a link, never blocking on a FIFO, never a controlling tty.
fn read_flags() -> OFlags {
    OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC
}

impl Root {
    /// Opens the root at its real path `real`, with the resolver `confinement` asks for: the
    /// kernel's only when a probe of `openat2` below it succeeds.
    pub(crate) fn open(real: &Path, confinement: Confinement) -> io::Result<Root> {
        let fd = rfs::open(real, dir_flags(), Mode::empty())?;
        let mut root = Root::from_fd(fd, absolute_names(real));
        if confinement == Confinement::Kernel && root.kernel_probe() {
            root.confinement = Confinement::Kernel;
        }
        Ok(root)
    }

    fn from_fd(fd: OwnedFd, real_names: Vec<OsString>) -> Root {
        let real_fs = rfs::fstat(&fd).ok().filter(|_| !on_pseudo_fs(&fd));
        Root { fd: Arc::new(fd), real_names, confinement: Confinement::Fallback, real_fs }
    }

    /// Whether a file of metadata `stat`, reached through `fd`, lies on a pseudo filesystem.
    fn pseudo(&self, stat: &Stat, fd: &OwnedFd) -> bool {
        match &self.real_fs {
            Some(root) if root.st_dev == stat.st_dev => false,
            _ => on_pseudo_fs(fd),
        }
    }

    /// Whether the directory `place` lies on a pseudo filesystem; one that cannot be asked
    /// counts as one, refusing being the safe answer.
    fn pseudo_place(&self, place: &Place) -> bool {
        rfs::fstat(&*place.fd).map_or(true, |st| self.pseudo(&st, &place.fd))
    }

    /// The resolver in use.
    pub(crate) fn confinement(&self) -> Confinement {
        self.confinement
    }

    /// The root as a place.
    pub(crate) fn place(&self) -> Place {
        Place { base: Base::Root, names: Vec::new(), fd: Arc::clone(&self.fd) }
    }

    /// Whether `openat2` works below the root. Any error means it does not: ENOSYS where the
    /// kernel lacks it, EPERM where a seccomp filter refuses it, anything else alike.
    fn kernel_probe(&self) -> bool {
        #[cfg(target_os = "linux")]
        {
            self.openat2(OsStr::new("."), OFlags::PATH | OFlags::CLOEXEC, rfs::ResolveFlags::empty()).is_ok()
        }
        #[cfg(not(target_os = "linux"))]
        {
            false
        }
    }

    #[cfg(target_os = "linux")]
    fn openat2(&self, rel: &OsStr, flags: OFlags, extra: rfs::ResolveFlags) -> Result<OwnedFd, Errno> {
        use rustix::fs::ResolveFlags;
        rfs::openat2(&*self.fd, rel, flags, Mode::empty(), ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS | extra)
    }

    /// The kernel's fast path for a confined read of `rel`: `Some` with the opened regular file
    /// (or its refusal as not regular) when `openat2` resolved its folder beneath the root and
    /// the file is no link; `None` when the walk must decide (the kernel refused, the file is a
    /// link, or the resolver is the fallback). The file is looked at (`fstatat` below the folder's
    /// handle, which opens nothing) before it is opened by that handle and its name.
    pub(crate) fn kernel_open(&self, rel: &str) -> Option<Result<(File, Stat), Refusal>> {
        if self.confinement != Confinement::Kernel {
            return None;
        }
        #[cfg(target_os = "linux")]
        {
            let (folder, name) = rel.rsplit_once('/').unwrap_or((".", rel));
            let fd = self.openat2(OsStr::new(folder), dir_flags(), rfs::ResolveFlags::empty()).ok()?;
            let dir = Place { base: Base::Root, names: Vec::new(), fd: Arc::new(fd) };
            self.open_in(&dir, OsStr::new(name))
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = rel;
            None
        }
    }

    /// Opens the entry `name` of the directory handle `dir` for reading when it is a regular file
    /// and no link: it is looked at (`fstatat` below the handle, which opens nothing) before it is
    /// opened by the handle and its name ([`Root::open_entry`]). `Some` with the opened file, or
    /// its refusal as not regular; `None` when the walk must decide (the entry is a link, is
    /// gone, or changed since it was looked at).
    pub(crate) fn open_in(&self, dir: &Place, name: &OsStr) -> Option<Result<(File, Stat), Refusal>> {
        let seen = look(dir, name).ok()?;
        if FileType::from_raw_mode(seen.st_mode) == FileType::Symlink {
            return None;
        }
        match self.open_entry(dir, name, &seen) {
            Ok(opened) => Some(Ok(opened)),
            Err(r @ (Refusal::NotRegular | Refusal::PseudoFs)) => Some(Err(r)),
            // Gone or changed since it was looked at, or refused: the walk decides.
            Err(_) => None,
        }
    }

    /// Opens the directory `names` below the root for listing, through real directories only
    /// (no link on the way, not even one inside the root), and reads its entries.
    pub(crate) fn list(&self, names: &[OsString]) -> Result<Listing, ListFail> {
        if let Some(place) = self.kernel_dir(names, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC) {
            return read_entries(place);
        }
        let place = self.open_strict(names, true)?;
        read_entries(place)
    }

    /// The directory `names` below the root, opened by the kernel in one call through real
    /// directories only (`RESOLVE_NO_SYMLINKS`), so that its names are its real ones; `None` when
    /// the walk must decide (a link on the way, any refusal, or the fallback resolver).
    pub(crate) fn kernel_dir(&self, names: &[OsString], flags: OFlags) -> Option<Place> {
        if self.confinement != Confinement::Kernel || names.is_empty() {
            return None;
        }
        #[cfg(target_os = "linux")]
        {
            let joined = names.iter().map(|n| n.as_bytes()).collect::<Vec<_>>().join(&b'/');
            let fd = self.openat2(OsStr::from_bytes(&joined), flags, rfs::ResolveFlags::NO_SYMLINKS).ok()?;
            Some(Place { base: Base::Root, names: names.to_vec(), fd: Arc::new(fd) })
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = flags;
            None
        }
    }

    /// The metadata of the entry at `rel` below the held root, its last component not followed.
    /// Only metadata: nothing is opened or read, so this is how the discovery cache asks whether
    /// an entry is the version it read before (cache.rs), never how it reaches content.
    pub(crate) fn stat_below(&self, rel: &str) -> Result<Stat, Errno> {
        rfs::statat(&*self.fd, rel, AtFlags::SYMLINK_NOFOLLOW)
    }

    /// A handle on the directory `names` below the root, opened one component at a time without
    /// following any link (a link on the way refuses it). Only to look at entries by name from
    /// ([`stat_entry`], [`open_subdir`]): the discovery cache's revalidation, which reads nothing.
    pub(crate) fn dir_handle(&self, names: &[OsString]) -> Option<Arc<OwnedFd>> {
        self.open_strict(names, false).ok().map(|place| place.fd)
    }

    /// The flags of a directory handle to walk or look from.
    pub(crate) fn walk_flags() -> OFlags {
        dir_flags()
    }

    /// Opens `names` below the root through real directories only; the last one readable when
    /// `readable` (a handle to list), else as a walking handle.
    fn open_strict(&self, names: &[OsString], readable: bool) -> Result<Place, ListFail> {
        let mut place = self.place();
        for (i, name) in names.iter().enumerate() {
            let last = i + 1 == names.len();
            let opened = if last && readable { open_dir_readable(&place.fd, name) } else { open_dir(&place.fd, name) };
            match opened {
                Ok(fd) => place = place.child(name.clone(), fd),
                Err(Errno::NOTDIR | Errno::LOOP) => {
                    let is_link = rfs::statat(&*place.fd, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
                        .is_ok_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::Symlink);
                    return Err(if is_link {
                        ListFail::Link { parent: place, name: name.clone() }
                    } else {
                        ListFail::Gone
                    });
                }
                Err(Errno::NOENT) => return Err(ListFail::Gone),
                Err(e) => return Err(ListFail::Io(e)),
            }
        }
        if names.is_empty() && readable {
            let fd = open_dir_readable(&self.fd, OsStr::new(".")).map_err(ListFail::Io)?;
            place = Place { base: Base::Root, names: Vec::new(), fd: Arc::new(fd) };
        }
        Ok(place)
    }

    /// Reopens a place from its base through its real names (after a `..`).
    fn reopen(&self, base: Base, names: Vec<OsString>) -> Result<Place, Fail> {
        let mut place = match base {
            Base::Root => self.place(),
            Base::Slash => slash()?,
        };
        for name in names {
            match open_dir(&place.fd, &name) {
                Ok(fd) => place = place.child(name, fd),
                Err(Errno::NOENT) => return Err(Fail::Missing { link: false }),
                Err(Errno::NOTDIR | Errno::LOOP) => return Err(Fail::NotDir),
                Err(e) => return Err(Fail::Io(e)),
            }
        }
        Ok(place)
    }

    /// The parent of `place`; above the root only when the walk may go anywhere.
    fn parent(&self, mut place: Place, scope: Scope) -> Result<Place, Fail> {
        if place.names.pop().is_some() {
            return self.reopen(place.base, place.names);
        }
        match (place.base, scope) {
            (Base::Root, Scope::Beneath) => Err(Fail::Escape),
            (Base::Root, Scope::Anywhere) => {
                let mut names = self.real_names.clone();
                names.pop();
                self.reopen(Base::Slash, names)
            }
            // `..` of `/` is `/`.
            (Base::Slash, _) => Ok(place),
        }
    }

    /// Where an absolute link target starts: the root when the target lies lexically below the
    /// root's real path, else `/` (or an escape, confined), with the names left to walk.
    fn jump(&self, target: &Path, scope: Scope) -> Result<(Place, Vec<OsString>), Fail> {
        let names = absolute_names(target);
        if let Some(rest) = names.strip_prefix(self.real_names.as_slice()) {
            return Ok((self.place(), rest.to_vec()));
        }
        match scope {
            Scope::Beneath => Err(Fail::Escape),
            Scope::Anywhere => Ok((slash()?, names)),
        }
    }

    /// Walks `path` (components, `/`-separated) from `start`, following every link, the last one
    /// too when `follow_last`.
    pub(crate) fn walk(&self, start: Place, path: &OsStr, scope: Scope, follow_last: bool) -> Result<End, Fail> {
        let comps: Vec<OsString> = split(path.as_bytes()).collect();
        let n = comps.len();
        let queue: VecDeque<(OsString, Tag)> =
            comps.into_iter().enumerate().map(|(i, c)| (c, if i + 1 == n { Tag::Last } else { Tag::Path })).collect();
        self.walk_queue(start, queue, scope, follow_last)
    }

    fn walk_queue(
        &self,
        start: Place,
        mut queue: VecDeque<(OsString, Tag)>,
        scope: Scope,
        follow_last: bool,
    ) -> Result<End, Fail> {
        let mut place = start;
        let mut hops = 0u32;
        while let Some((name, tag)) = queue.pop_front() {
            let last = queue.is_empty();
            match name.as_bytes() {
                b"" | b"." => {
                    if last {
                        return Ok(End::Place(place));
                    }
                    continue;
                }
                b".." => {
                    place = self.parent(place, scope)?;
                    if last {
                        return Ok(End::Place(place));
                    }
                    continue;
                }
                _ => {}
            }
            let missing = Fail::Missing { link: tag == Tag::Final };
            if !last {
                // The common step: a real directory, opened without following.
                match open_dir(&place.fd, &name) {
                    Ok(fd) => {
                        place = place.child(name, fd);
                        continue;
                    }
                    // A link, or not a directory: look at it below.
                    Err(Errno::NOTDIR | Errno::LOOP) => {}
                    Err(Errno::NOENT) => return Err(missing),
                    Err(e) => return Err(Fail::Io(e)),
                }
            }
            let stat = match rfs::statat(&*place.fd, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(s) => s,
                Err(Errno::NOENT) => return Err(missing),
                Err(e) => return Err(Fail::Io(e)),
            };
            let kind = FileType::from_raw_mode(stat.st_mode);
            if kind == FileType::Symlink && (!last || follow_last) {
                // A link on a pseudo filesystem is no path: procfs's magic links (`/proc/self`,
                // `/proc/<pid>/fd/<n>`, `cwd`, `root`, `exe`) name kernel objects, and the text
                // readlink gives for them walks to whatever the process holds open (stdin, a
                // harness's own files) or to a place no link in the tree names. It is refused
                // here, never read and walked (D-CAP-4 extended); `openat2` refuses the same
                // with RESOLVE_NO_MAGICLINKS.
                if self.pseudo_place(&place) {
                    return Err(Fail::PseudoLink);
                }
                hops += 1;
                if hops > MAX_HOPS {
                    return Err(Fail::Loop);
                }
                let target = match rfs::readlinkat(&*place.fd, name.as_os_str(), Vec::new()) {
                    Ok(t) => t.into_bytes(),
                    // Replaced since it was looked at: look again (the hop count bounds this).
                    Err(Errno::NOENT | Errno::INVAL) => {
                        queue.push_front((name, tag));
                        continue;
                    }
                    Err(e) => return Err(Fail::Io(e)),
                };
                let inner = if tag == Tag::Path { Tag::Path } else { Tag::Final };
                let rest: Vec<OsString> = if target.first() == Some(&b'/') {
                    let (start, names) = self.jump(Path::new(OsStr::from_bytes(&target)), scope)?;
                    place = start;
                    names
                } else {
                    split(&target).collect()
                };
                for comp in rest.into_iter().rev() {
                    queue.push_front((comp, inner));
                }
                continue;
            }
            if last {
                return Ok(End::Entry { dir: place, name, stat });
            }
            if kind == FileType::Directory {
                // A directory now, a link when it was opened: look again.
                hops += 1;
                if hops > MAX_HOPS {
                    return Err(Fail::Loop);
                }
                queue.push_front((name, tag));
                continue;
            }
            return Err(Fail::NotDir);
        }
        Ok(End::Place(place))
    }

    /// Opens the directory an [`End`] names, as a place to walk or look from.
    pub(crate) fn enter(&self, end: End) -> Result<Place, Fail> {
        match end {
            End::Place(p) => Ok(p),
            End::Entry { dir, name, stat } => {
                if FileType::from_raw_mode(stat.st_mode) != FileType::Directory {
                    return Err(Fail::NotDir);
                }
                match open_dir(&dir.fd, &name) {
                    Ok(fd) => Ok(dir.child(name, fd)),
                    Err(Errno::NOENT) => Err(Fail::Missing { link: false }),
                    Err(Errno::NOTDIR | Errno::LOOP) => Err(Fail::NotDir),
                    Err(e) => Err(Fail::Io(e)),
                }
            }
        }
    }
}

/// The filesystem root, as a place.
fn slash() -> Result<Place, Fail> {
    let fd = rfs::open("/", dir_flags(), Mode::empty()).map_err(Fail::Io)?;
    Ok(Place { base: Base::Slash, names: Vec::new(), fd: Arc::new(fd) })
}

/// Opens the directory `rel` below the directory handle `dir` as a handle to look from (only
/// to look from: the discovery cache's revalidation, which reads nothing through it), not
/// following a final link (a link or anything but a directory there refuses it).
pub(crate) fn open_subdir(dir: &OwnedFd, rel: &str) -> Result<OwnedFd, Errno> {
    open_dir(dir, OsStr::new(rel))
}

/// The metadata of the entry `rel` below the directory handle `dir`, its last component not
/// followed: nothing opened.
pub(crate) fn stat_entry(dir: &OwnedFd, name: &str) -> Result<Stat, Errno> {
    rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
}

/// The metadata of the file a handle holds.
pub(crate) fn stat_handle(fd: &OwnedFd) -> Result<Stat, Errno> {
    rfs::fstat(fd)
}

/// Looks at the entry `name` of `place` without following it.
pub(crate) fn look(place: &Place, name: &OsStr) -> Result<Stat, Errno> {
    rfs::statat(&*place.fd, name, AtFlags::SYMLINK_NOFOLLOW)
}

/// Whether two metadata are of the same file.
fn same_file(a: &Stat, b: &Stat) -> bool {
    a.st_dev == b.st_dev && a.st_ino == b.st_ino
}

/// The `statfs` magic numbers of Linux's pseudo filesystems: kernel interfaces whose files are
/// not data (a procfs file reports size 0 and reads as the process's environment). tmpfs, which
/// `/dev` and `/dev/shm` use, holds ordinary files and is not among them; the devices on it are
/// refused as not regular.
#[cfg(target_os = "linux")]
const PSEUDO_FS: &[u32] = &[
    0x9fa0,      // proc
    0x6265_6572, // sysfs
    0x1cd1,      // devpts
    0x6462_6720, // debugfs
    0x7472_6163, // tracefs
    0x7363_6673, // securityfs
    0x0027_e0eb, // cgroup
    0x6367_7270, // cgroup2
    0xcafe_4a11, // bpf
    0xde5e_81e4, // efivarfs
    0x6265_6570, // configfs
    0x6165_676c, // pstore
    0x6573_5543, // fusectl
    0xf97c_ff8c, // selinuxfs
    0x4341_5d53, // smackfs
    0x4249_4e4d, // binfmt_misc
    0x6e73_6673, // nsfs
];

/// Whether the file `fd` lies on a pseudo filesystem ([`PSEUDO_FS`]). A filesystem that cannot
/// be asked counts as one: refusing is the safe answer.
fn on_pseudo_fs(fd: &OwnedFd) -> bool {
    #[cfg(target_os = "linux")]
    {
        match rfs::fstatfs(fd) {
            // The field's width differs between architectures; the magic is its low 32 bits.
            Ok(st) => PSEUDO_FS.contains(&((i128::from(st.f_type) & 0xffff_ffff) as u32)),
            Err(_) => true,
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = fd;
        false
    }
}

/// Why an entry was not opened for reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// It is not a regular file (a directory, a FIFO, a socket, a device).
    NotRegular,
    /// It lies on a pseudo filesystem (procfs, sysfs, ...).
    PseudoFs,
    /// It is gone.
    Gone,
    /// Another file took its place between the look and the open.
    Changed,
    /// The system refused the open.
    Io(Errno),
}

impl Root {
    /// Opens the entry a walk ended on for reading: only a regular file, not on a pseudo
    /// filesystem, and only the very file that was looked at.
    pub(crate) fn open_entry(&self, dir: &Place, name: &OsStr, seen: &Stat) -> Result<(File, Stat), Refusal> {
        self.open_entry_with(dir, name, seen, read_flags())
    }

    fn open_entry_with(&self, dir: &Place, name: &OsStr, seen: &Stat, flags: OFlags) -> Result<(File, Stat), Refusal> {
        if FileType::from_raw_mode(seen.st_mode) != FileType::RegularFile {
            return Err(Refusal::NotRegular);
        }
        // The folder's filesystem is the file's, unless the file is a mount point of its own; the
        // opened file is asked again below.
        if self.pseudo(seen, &dir.fd) {
            return Err(Refusal::PseudoFs);
        }
        let fd = match rfs::openat(&*dir.fd, name, flags | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Err(Refusal::Gone),
            Err(Errno::LOOP) => return Err(Refusal::Changed),
            Err(e) => return Err(Refusal::Io(e)),
        };
        let stat = rfs::fstat(&fd).map_err(Refusal::Io)?;
        if !same_file(seen, &stat) {
            return Err(Refusal::Changed);
        }
        if self.pseudo(&stat, &fd) {
            return Err(Refusal::PseudoFs);
        }
        Ok((File::from(fd), stat))
    }
}

/// A directory's entries, read through its handle.
#[derive(Debug)]
pub(crate) struct Listing {
    /// The directory, to look at its entries from.
    pub(crate) place: Place,
    /// Each entry's name and type as the directory reports it (`.` and `..` left out).
    pub(crate) entries: Vec<(OsString, FileType)>,
}

/// Why a directory could not be listed.
#[derive(Debug)]
pub(crate) enum ListFail {
    /// A component on the way (or the directory itself) is a link now: `name` in `parent`.
    Link {
        /// The directory holding the link.
        parent: Place,
        /// The link's name.
        name: OsString,
    },
    /// Nothing there, or not a directory (any more).
    Gone,
    /// The system refused to open or read it.
    Io(Errno),
}

/// Reads the entries of `place`, a directory handle opened for this listing alone, so it is
/// read from where it stands, at its start. On Linux `getdents64` reads it in place, borrowed
/// (no second handle to make and close per folder); elsewhere a duplicate is read with
/// `readdir`.
fn read_entries(place: Place) -> Result<Listing, ListFail> {
    let mut entries = Vec::new();
    let mut push = |name: &[u8], ft: FileType| {
        if name != b"." && name != b".." {
            entries.push((OsString::from_vec(name.to_vec()), ft));
        }
    };
    #[cfg(target_os = "linux")]
    {
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 16 * 1024];
        let mut dir = rfs::RawDir::new(&*place.fd, &mut buf);
        while let Some(entry) = dir.next() {
            let entry = entry.map_err(ListFail::Io)?;
            push(entry.file_name().to_bytes(), entry.file_type());
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let fd = place.fd.try_clone().map_err(|e| ListFail::Io(Errno::from_io_error(&e).unwrap_or(Errno::IO)))?;
        let mut dir = rfs::Dir::new(fd).map_err(ListFail::Io)?;
        while let Some(entry) = dir.read() {
            let entry = entry.map_err(ListFail::Io)?;
            push(entry.file_name().to_bytes(), entry.file_type());
        }
    }
    Ok(Listing { place, entries })
}

/// What a file outside any root is opened for ([`open_regular`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Reading.
    Read,
    /// Reading and writing (a journal cut back to its last whole record).
    ReadWrite,
    /// Appending, creating the file when there is none.
    Append,
    /// Writing from empty, creating the file when there is none or emptying the one there.
    Replace,
}

impl Access {
    fn flags(self) -> OFlags {
        match self {
            Access::Read => OFlags::RDONLY,
            Access::ReadWrite => OFlags::RDWR,
            Access::Append => OFlags::WRONLY | OFlags::APPEND,
            Access::Replace => OFlags::WRONLY,
        }
    }

    fn creates(self) -> bool {
        matches!(self, Access::Append | Access::Replace)
    }
}

/// A file outside any root (a `.git` file, a `commondir`), opened as instruction files are: its
/// folder resolved one component at a time from `/` (links followed: the path is the host's
/// own; a link on a pseudo filesystem never), its last component followed only when
/// `follow_last`, and only a regular file on a real filesystem opened, looked at before it is
/// opened. A link at the last component that is not followed is an error, never a way to
/// another file. A file is created, when `access` creates, only where there is none.
pub(crate) fn open_regular(path: &Path, follow_last: bool, access: Access) -> io::Result<File> {
    let abs = absolute(path)?;
    let (resolver, dir, name) = walk_to_parent(&abs)?;
    match look(&dir, name) {
        Ok(st) if follow_last && FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
            match resolver.walk(dir, name, Scope::Anywhere, true).map_err(|f| fail_to_io(f, &abs))? {
                End::Entry { dir, name, stat } => open_looked(&resolver, &dir, &name, Ok(stat), access, &abs),
                End::Place(_) => Err(invalid(&abs, "is not a regular file")),
            }
        }
        looked => open_looked(&resolver, &dir, name, looked, access, &abs),
    }
}

/// `path` made absolute against the working directory.
fn absolute(path: &Path) -> io::Result<PathBuf> {
    Ok(if path.is_absolute() { path.to_path_buf() } else { std::env::current_dir()?.join(path) })
}

/// An error of kind `InvalidInput` saying what `shown` is.
fn invalid(shown: &Path, what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("'{}' {what}", shown.display()))
}

/// The system's error `e` for `shown`, its kind kept (a caller tells a missing file by it).
fn named(e: impl Into<io::Error>, shown: &Path) -> io::Error {
    let e: io::Error = e.into();
    io::Error::new(e.kind(), format!("'{}' cannot be opened ({e})", shown.display()))
}

/// The parent directory of the absolute path `abs`, reached from `/` one component at a time
/// (links followed, a link on a pseudo filesystem refused), with the resolver that walked it and
/// the path's last name.
fn walk_to_parent(abs: &Path) -> io::Result<(Root, Place, &OsStr)> {
    let (Some(parent), Some(name)) = (abs.parent(), abs.file_name()) else {
        return Err(invalid(abs, "names no file"));
    };
    let start = slash().map_err(|f| fail_to_io(f, abs))?;
    // A resolver whose root is `/`: every absolute link target lies below it.
    let resolver = Root::from_fd(start.fd.try_clone()?, Vec::new());
    let rel = parent.strip_prefix("/").unwrap_or(parent);
    let dir = resolver
        .walk(start, rel.as_os_str(), Scope::Anywhere, true)
        .and_then(|end| resolver.enter(end))
        .map_err(|f| fail_to_io(f, abs))?;
    Ok((resolver, dir, name))
}

/// Opens the entry `name` of `dir` for `access`, given what looking at it without following
/// found (`looked`): a link is refused, never followed; a missing entry is created, when
/// `access` creates, with `O_EXCL` (only a new file, never one that appeared meanwhile, a link
/// included); anything else must be the very regular file that was looked at. `shown` names it
/// in every error.
fn open_looked(
    resolver: &Root,
    dir: &Place,
    name: &OsStr,
    looked: Result<Stat, Errno>,
    access: Access,
    shown: &Path,
) -> io::Result<File> {
    let stat = match looked {
        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
            return Err(invalid(shown, "is a symlink (it is not followed)"));
        }
        Ok(st) => st,
        Err(Errno::NOENT) if access.creates() => {
            let flags = access.flags() | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            // In a directory removed since its handle was opened this is ENOENT: nothing is
            // created where the directory stood.
            let fd = rfs::openat(&*dir.fd, name, flags, Mode::from_raw_mode(0o644)).map_err(|e| named(e, shown))?;
            return Ok(File::from(fd));
        }
        Err(e) => return Err(named(e, shown)),
    };
    match resolver.open_entry_with(dir, name, &stat, access.flags() | OFlags::NONBLOCK | OFlags::NOCTTY) {
        Ok((file, _)) => {
            if access == Access::Replace {
                // Emptied only once it is known to be the regular file that was looked at.
                file.set_len(0).map_err(|e| named(e, shown))?;
            }
            Ok(file)
        }
        Err(Refusal::NotRegular) => Err(invalid(shown, "is not a regular file")),
        Err(Refusal::PseudoFs) => Err(invalid(shown, "is on a pseudo filesystem (not a regular file)")),
        Err(Refusal::Gone) => Err(named(io::Error::from(io::ErrorKind::NotFound), shown)),
        Err(Refusal::Changed) => Err(io::Error::other(format!("'{}' changed while it was opened", shown.display()))),
        Err(Refusal::Io(e)) => Err(named(e, shown)),
    }
}

/// A directory outside any root, held open (a session's state directory): its entries are
/// opened by the handle and their name, never through a path string and never through a link,
/// so that a directory removed (and perhaps replaced by another, or by a link) after it was
/// opened is never written through its old name: an entry created in a removed directory fails.
#[derive(Debug)]
pub(crate) struct HeldDir {
    /// Only to open entries from: its place is the directory itself.
    resolver: Root,
}

impl HeldDir {
    /// Opens the directory at `path`, creating it first when it is missing with one `mkdir` of
    /// its last component: its parent must exist (it is the host's own, reached as
    /// [`open_regular`] reaches a folder), and no ancestor is ever created. A directory that is
    /// a link is refused, never followed.
    pub(crate) fn open_or_create(path: &Path) -> io::Result<HeldDir> {
        let abs = absolute(path)?;
        let (_, parent, name) = walk_to_parent(&abs).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                let parent = abs.parent().unwrap_or(&abs).display();
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "'{}' cannot be created: its parent '{parent}' does not exist (it is never created)",
                        abs.display()
                    ),
                )
            } else {
                e
            }
        })?;
        match rfs::mkdirat(&*parent.fd, name, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => {
                let e = io::Error::from(e);
                return Err(io::Error::new(e.kind(), format!("'{}' cannot be created ({e})", abs.display())));
            }
        }
        // Readable, not O_PATH: a rename in it is made durable by an fsync of this handle.
        let fd = match open_dir_readable(&parent.fd, name) {
            Ok(fd) => fd,
            Err(Errno::LOOP | Errno::NOTDIR) => {
                let link = look(&parent, name).is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink);
                return Err(invalid(
                    &abs,
                    if link { "is a symlink (a state directory is never followed)" } else { "is not a directory" },
                ));
            }
            Err(e) => return Err(named(e, &abs)),
        };
        Ok(HeldDir { resolver: Root::from_fd(fd, Vec::new()) })
    }

    /// Opens the entry `name` for `access` (`shown` names it in errors): never a link, only a
    /// regular file, created only where there is none ([`open_regular`]'s rules, by the handle).
    pub(crate) fn open(&self, name: &OsStr, access: Access, shown: &Path) -> io::Result<File> {
        let dir = self.resolver.place();
        open_looked(&self.resolver, &dir, name, look(&dir, name), access, shown)
    }

    /// Creates the entry `name` as a new regular file for writing: `O_EXCL`, so never one that
    /// stands there (a link included).
    pub(crate) fn create_new(&self, name: &OsStr, shown: &Path) -> io::Result<File> {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd =
            rfs::openat(&*self.resolver.fd, name, flags, Mode::from_raw_mode(0o644)).map_err(|e| named(e, shown))?;
        Ok(File::from(fd))
    }

    /// Removes the entry `name` (a link is removed, not followed); a missing one is no error.
    pub(crate) fn remove(&self, name: &OsStr, shown: &Path) -> io::Result<()> {
        match rfs::unlinkat(&*self.resolver.fd, name, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => {
                let e = io::Error::from(e);
                Err(io::Error::new(e.kind(), format!("'{}' cannot be removed ({e})", shown.display())))
            }
        }
    }

    /// Renames the entry `from` to `to` in this directory, replacing what stands at `to` (a link
    /// there is replaced, not followed), and makes the rename durable.
    pub(crate) fn rename(&self, from: &OsStr, to: &OsStr, shown: &Path) -> io::Result<()> {
        let fd = &*self.resolver.fd;
        let renamed = rfs::renameat(fd, from, fd, to).and_then(|()| rfs::fsync(fd));
        renamed.map_err(|e| {
            let e = io::Error::from(e);
            io::Error::new(e.kind(), format!("'{}' cannot be replaced ({e})", shown.display()))
        })
    }
}

/// The error of a walk to `shown` that ended without an entry, naming it; the kind is the
/// system's (a caller tells a missing file by `NotFound`).
fn fail_to_io(f: Fail, shown: &Path) -> io::Error {
    let errno = match f {
        Fail::PseudoLink => {
            return io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "'{}' resolves through a link on a pseudo filesystem such as /proc (never followed)",
                    shown.display()
                ),
            )
        }
        Fail::Missing { .. } => Errno::NOENT,
        Fail::Io(e) => e,
        Fail::Loop => Errno::LOOP,
        Fail::NotDir => Errno::NOTDIR,
        Fail::Escape => Errno::XDEV,
    };
    named(errno, shown)
}

/// Reads at most `cap` bytes of the regular file at `path` ([`open_regular`]); a longer file is
/// an error, and never more than `cap + 1` bytes are read.
pub(crate) fn read_regular(path: &Path, follow_last: bool, cap: u64) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let file = open_regular(path, follow_last, Access::Read)?;
    let mut buf = Vec::new();
    file.take(cap.saturating_add(1)).read_to_end(&mut buf)?;
    if buf.len() as u64 > cap {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("'{}' is above the {cap}-byte cap", path.display()),
        ));
    }
    Ok(buf)
}
