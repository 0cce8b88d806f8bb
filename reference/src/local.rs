//! Local CLI instruction sources (seed 000, "Local CLI instruction sources"): a session whose
//! files are a computer's, reached through the local CLI's file client, never the daemon's own
//! filesystem.
//!
//! - The root is the conversation's resolved working directory on the computer
//!   (`effectiveTurnWorkDir`): a child's placed directory, else the recorded work_dir, else the
//!   computer's default ([`LocalTarget::work_dir`]). It is placed once, at spawn, used as given
//!   ("A local root is not realpath-resolved on the daemon"), and journaled with the startup
//!   prefix, so that "Existing resumes retain their stored target and startup prefix".
//! - The computer's platform picks the path rules: `path.win32` for a Windows computer, POSIX
//!   otherwise; both are file-client trees ([`MemSource`]), so the root listing limit applies and
//!   every symlink entry of a POSIX computer is refused (decisions D-LOCAL-3, D-LOCAL-4).
//! - "A missing Sandbox owner or LOCAL_EXECUTION_LOST fails startup": no prefix is read, and
//!   nothing of the daemon's files stands in ([`LocalError`]).

use std::path::Path;

use crate::config::Config;
use crate::journal::Journal;
use crate::relpath::{Platform, RelPath};
use crate::session::{LocalError, Session, SessionError, Startup};
use crate::source::{MemSource, MemTree, Source};

/// A local CLI target: a computer's files (held in memory, as the file client answers them) and
/// the directories that place the conversation's root on it.
#[derive(Debug, Clone)]
pub struct LocalTarget {
    platform: Platform,
    base: String,
    tree: MemTree,
    placed_dir: Option<String>,
    work_dir: Option<String>,
    default_dir: String,
    owner: bool,
    connection_lost: bool,
}

impl LocalTarget {
    /// A target whose files below the absolute directory `base` are `tree`, with the computer's
    /// default directory `default_dir` (absolute) and nothing else recorded. Its owner is present
    /// and its connection bound.
    pub fn new(platform: Platform, base: impl Into<String>, tree: MemTree, default_dir: impl Into<String>) -> Self {
        LocalTarget {
            platform,
            base: base.into(),
            tree,
            placed_dir: None,
            work_dir: None,
            default_dir: default_dir.into(),
            owner: true,
            connection_lost: false,
        }
    }

    /// Sets a child's placed directory (absolute).
    pub fn with_placed_dir(mut self, dir: Option<String>) -> Self {
        self.placed_dir = dir;
        self
    }

    /// Sets the recorded work_dir (absolute): the directory a paired CLI was started in.
    pub fn with_work_dir(mut self, dir: Option<String>) -> Self {
        self.work_dir = dir;
        self
    }

    /// Whether a Sandbox owner holds the target. The default is true.
    pub fn with_owner(mut self, owner: bool) -> Self {
        self.owner = owner;
        self
    }

    /// Whether the connection is lost around the startup reads. The default is false.
    pub fn with_connection_lost(mut self, lost: bool) -> Self {
        self.connection_lost = lost;
        self
    }

    /// A later Project selection records another work_dir. A running session keeps the root it
    /// was placed at, and so does its resume (decision D-LOCAL-6).
    pub fn select_project(&mut self, work_dir: String) {
        self.work_dir = Some(work_dir);
    }

    /// The computer's files, for edits between steps.
    pub fn tree_mut(&mut self) -> &mut MemTree {
        &mut self.tree
    }

    /// The computer's platform.
    pub fn platform(&self) -> Platform {
        self.platform
    }

    /// `effectiveTurnWorkDir`: a child's placed directory, else the recorded work_dir, else the
    /// computer's default (seed 000, "Local CLI instruction sources").
    pub fn work_dir(&self) -> &str {
        self.placed_dir.as_deref().or(self.work_dir.as_deref()).unwrap_or(&self.default_dir)
    }

    /// The file source rooted at `root`, as given: the computer's files below it. A root that is
    /// no directory of the computer's tree has no files.
    pub fn source_at(&self, root: &str) -> Source {
        let tree = match below(self.platform, &self.base, root) {
            Some(None) => self.tree.clone(),
            Some(Some(rel)) => self.tree.subtree(&rel),
            None => MemTree::new(self.platform),
        };
        Source::Mem(match self.platform {
            Platform::Windows => MemSource::windows(root.to_string(), tree),
            Platform::Posix => MemSource::local_posix(root.to_string(), tree),
        })
    }

    /// The root and source of a new conversation's startup: fails without an owner or when the
    /// bound connection is lost, and never turns to another source instead.
    pub fn startup_source(&self) -> Result<(String, Source), LocalError> {
        if !self.owner {
            return Err(LocalError::OwnerMissing);
        }
        if self.connection_lost {
            return Err(LocalError::ExecutionLost);
        }
        let root = self.work_dir().to_string();
        let source = self.source_at(&root);
        Ok((root, source))
    }
}

/// Where `dir` lies relative to `base`: `Some(None)` for `base` itself, `Some(Some(rel))` below
/// it, `None` elsewhere. The platform's `within` decides both, so the two agree on spelling.
fn below(platform: Platform, base: &str, dir: &str) -> Option<Option<RelPath>> {
    if let Some(rel) = platform.within(base, dir) {
        return Some(Some(rel));
    }
    let sep = if platform == Platform::Windows { "\\" } else { "/" };
    let probe = format!("{}{sep}x", dir.trim_end_matches(['/', '\\']));
    (platform.within(base, &probe).as_ref().map(RelPath::as_str) == Some("x")).then_some(None)
}

impl Session {
    /// Spawns a session on a local CLI target: the root is placed at its resolved working
    /// directory and journaled; a missing owner or a lost connection fails the start.
    pub fn start_local(
        config: Config,
        target: &LocalTarget,
        state_dir: &Path,
    ) -> Result<(Session, Startup), SessionError> {
        let (root, source) = target.startup_source().map_err(SessionError::Local)?;
        Session::start_at(config, source, state_dir, Some(root))
    }

    /// Resumes a local session at the root its journal stored, whatever the target records now.
    pub fn resume_local(config: Config, target: &LocalTarget, state_dir: &Path) -> Result<Session, SessionError> {
        let journal = Journal::open(state_dir)?;
        let root = journal.target().ok_or(SessionError::NothingToResume)?.to_string();
        drop(journal);
        Session::resume(config, target.source_at(&root), state_dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Node;

    fn tree(platform: Platform, files: &[&str]) -> MemTree {
        let mut t = MemTree::new(platform);
        for f in files {
            let segs: Vec<&str> = f.split('/').collect();
            t.insert(&RelPath::from_segments(segs).unwrap(), Node::File(b"x".to_vec()));
        }
        t
    }

    #[rstest::rstest]
    #[case(Some("/c/repo/app"), Some("/c/repo"), "/c/repo/app")]
    #[case(None, Some("/c/repo"), "/c/repo")]
    #[case(None, None, "/c")]
    fn the_work_dir_is_the_placed_dir_else_the_recorded_else_the_default(
        #[case] placed: Option<&str>,
        #[case] work: Option<&str>,
        #[case] want: &str,
    ) {
        let t = LocalTarget::new(Platform::Posix, "/c", MemTree::new(Platform::Posix), "/c")
            .with_placed_dir(placed.map(str::to_string))
            .with_work_dir(work.map(str::to_string));
        assert_eq!(t.work_dir(), want);
    }

    #[rstest::rstest]
    #[case(Platform::Posix, "/c", "/c", Some(None))]
    #[case(Platform::Posix, "/c", "/c/", Some(None))]
    #[case(Platform::Posix, "/c", "/c/repo", Some(Some("repo")))]
    #[case(Platform::Posix, "/c", "/d/repo", None)]
    #[case(Platform::Windows, r"C:\Users\dev", r"c:\users\DEV\repo", Some(Some("repo")))]
    #[case(Platform::Windows, r"C:\Users\dev", r"C:\Users\dev", Some(None))]
    #[case(Platform::Windows, r"C:\Users\dev", r"D:\repo", None)]
    fn a_dir_is_placed_against_the_base(
        #[case] platform: Platform,
        #[case] base: &str,
        #[case] dir: &str,
        #[case] want: Option<Option<&str>>,
    ) {
        let got = below(platform, base, dir);
        assert_eq!(got.as_ref().map(|o| o.as_ref().map(RelPath::as_str)), want);
    }

    #[test]
    fn startup_fails_without_an_owner_or_with_the_connection_lost() {
        let t = LocalTarget::new(Platform::Posix, "/c", tree(Platform::Posix, &["AGENTS.md"]), "/c");
        assert!(t.startup_source().is_ok());
        assert_eq!(t.clone().with_owner(false).startup_source().err(), Some(LocalError::OwnerMissing));
        assert_eq!(t.with_connection_lost(true).startup_source().err(), Some(LocalError::ExecutionLost));
    }

    #[test]
    fn the_source_holds_only_the_files_below_the_root() {
        let t = LocalTarget::new(Platform::Posix, "/c", tree(Platform::Posix, &["AGENTS.md", "repo/CLAUDE.md"]), "/c");
        let src = t.source_at("/c/repo");
        let names: Vec<String> = src.list(None).unwrap().into_iter().map(|e| e.name).collect();
        assert_eq!(names, ["CLAUDE.md"]);
        assert!(t.source_at("/elsewhere").list(None).unwrap().is_empty());
    }
}
