//! Root placement on the host (seed 000, "Boundaries and authority"): which directory is the
//! Project root for a session, given its working directory and the registered Projects.
//!
//! Precedence:
//! 1. A linked Git worktree: the nearest `.git` at or above the working directory is a file whose
//!    `gitdir:` names an administrative directory, whose `commondir` names a repository's `.git`.
//!    When that is (by real path) the `.git` of the bound Project, or of a registered one when
//!    none is bound, the worktree's own top level is the root; otherwise nothing is ("a linked
//!    worktree of another repository contributes nothing, even if a host Project is bound").
//!    Both relative pointers resolve against the directory that holds them, as Git documents. A
//!    `.git` file whose administrative directory has no `commondir` (a submodule's) is not a
//!    linked worktree, and placement goes on with step 2.
//! 2. The bound Project wins.
//! 3. The registered Project containing the working directory (by real path; the deepest one).
//! 4. Otherwise nothing: "an unregistered directory contributes nothing".
//!
//! A session's policies restrict every step ("Project lookup uses the child's policy, including
//! canAccessProject for a scoped lookup"): only a Project every policy admits (by real path) is a
//! candidate of step 1 and of step 3, and a bound Project that one of them does not admit gives
//! nothing (it still wins: the lookup of step 3 is not tried instead).
//!
//! No ancestor walk looks for instruction files; the only upward look is Git's own `.git`
//! discovery in step 1.
//!
//! The `.git` file and the `commondir` are read as instruction files are: regular files on a
//! real filesystem only, looked at before they are opened, never more than a small cap and one
//! byte. One that cannot be read so (a FIFO, a device, `/proc`, a file of gigabytes) makes no
//! linked worktree, and placement goes on with step 2.

use std::fs;
use std::path::{Path, PathBuf};

/// The inputs of root placement.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// The session's working directory.
    pub cwd: PathBuf,
    /// The registered host Projects.
    pub projects: Vec<PathBuf>,
    /// The Project bound to the session, if any.
    pub bound: Option<PathBuf>,
    /// The session's policies: each lists the Projects it admits, and a Project is accessible
    /// only when every one admits it. The default, none, admits every Project.
    pub policies: Vec<Vec<PathBuf>>,
}

/// Whether every policy admits `project`, compared by real path; a path that does not resolve
/// admits nothing and is admitted by nothing.
fn admits(policies: &[Vec<PathBuf>], project: &Path) -> bool {
    if policies.is_empty() {
        return true;
    }
    let Ok(real) = fs::canonicalize(project) else { return false };
    policies.iter().all(|policy| policy.iter().any(|p| fs::canonicalize(p).is_ok_and(|r| r == real)))
}

/// The real path of `project` when every policy admits it: the root of a session whose scope is
/// one Project (a chatbot's bound Project, or a case's root without placement).
pub fn admitted_root(project: &Path, policies: &[Vec<PathBuf>]) -> Option<PathBuf> {
    admits(policies, project).then(|| given_form(project)).flatten()
}

/// The root as the session names it: `project` as given where it is absolute and resolves (a
/// link to the project directory stays the link, so that a path named through it is inside by
/// its given form, D-LINK-6), else its real path; `None` when it does not resolve.
fn given_form(project: &Path) -> Option<PathBuf> {
    let real = fs::canonicalize(project).ok()?;
    Some(if project.is_absolute() { project.to_path_buf() } else { real })
}

/// How many bytes a `.git` file or a `commondir` may hold. Each holds one path (at most
/// `PATH_MAX`, 4,096 bytes) and a newline; a longer one is no pointer Git wrote. The default is
/// 64 KiB.
const POINTER_FILE_CAP: u64 = 64 * 1024;

/// Reads a Git pointer file: a regular file on a real filesystem only, never more than the cap
/// and one byte (a FIFO there must not hang placement, nor `/dev/zero` fill memory). The `.git`
/// file itself is not followed when it is a link (it was looked at without following); a
/// `commondir` is followed, as Git follows it.
fn read_pointer(path: &Path, follow: bool) -> Option<String> {
    let bytes = crate::confine::read_regular(path, follow, POINTER_FILE_CAP).ok()?;
    String::from_utf8(bytes).ok()
}

/// The `.git` a linked worktree's `.git` file points at, through `gitdir:` and `commondir`.
fn linked_common_dir(git_file: &Path) -> Option<PathBuf> {
    let text = read_pointer(git_file, false)?;
    let gitdir = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
    let holder = git_file.parent()?;
    let admin = holder.join(gitdir);
    let common = read_pointer(&admin.join("commondir"), true)?;
    fs::canonicalize(admin.join(common.trim())).ok()
}

/// The root for `p`, or `None` when the session has no Project root: a linked worktree's top
/// level as found from the working directory's real path, else the Project as given (bound or
/// registered; [`HostSource::new`](crate::HostSource::new) resolves it, and keeps the given form
/// for placing touched paths).
pub fn place_root(p: &Placement) -> Option<PathBuf> {
    let cwd = fs::canonicalize(&p.cwd).ok()?;
    if p.bound.as_ref().is_some_and(|b| !admits(&p.policies, b)) {
        return None;
    }
    let candidates: Vec<&PathBuf> = match &p.bound {
        Some(b) => vec![b],
        None => p.projects.iter().filter(|proj| admits(&p.policies, proj)).collect(),
    };
    for dir in cwd.ancestors() {
        let git = dir.join(".git");
        let Ok(md) = fs::symlink_metadata(&git) else { continue };
        if md.is_file() {
            // A `.git` file without a `commondir` behind it (a submodule's) is no linked
            // worktree: placement goes on as for any directory.
            if let Some(common) = linked_common_dir(&git) {
                let ours = candidates.iter().any(|c| fs::canonicalize(c.join(".git")).is_ok_and(|g| g == common));
                return ours.then(|| dir.to_path_buf());
            }
        }
        break;
    }
    if let Some(bound) = &p.bound {
        return given_form(bound);
    }
    // The deepest by real path; the root is the Project as it was registered.
    candidates
        .into_iter()
        .filter_map(|proj| fs::canonicalize(proj).ok().map(|real| (real, proj)))
        .filter(|(real, _)| cwd.starts_with(real))
        .max_by_key(|(real, _)| real.components().count())
        .and_then(|(_, proj)| given_form(proj))
}
