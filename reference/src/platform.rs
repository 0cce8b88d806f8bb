//! Path rules as data: what [`Platform`] answers for a root and a path under it, on POSIX and on
//! Windows (`path.win32`), both as plain string logic testable on every OS. The POSIX rules are
//! here; the Windows ones live in `winpath.rs`. Both sit above `relpath.rs`, which knows neither.

use crate::relpath::{normalise, strip_prefix, Platform, RelPath};
use crate::winpath;

impl Platform {
    /// `s` as this platform compares names: unchanged on POSIX; on Windows each character
    /// upper-cased on its own when its upper case is one character (D-GLOB-5), so `ä` and `Ä`
    /// compare equal and `ß`, `SS` and `ẞ` do not. Globs, folders and names fold through this.
    pub fn fold_case(self, s: &str) -> String {
        match self {
            Platform::Posix => s.to_string(),
            Platform::Windows => winpath::fold(s),
        }
    }

    /// Answers the `/`-form root-relative path of `path`, or `None` when it is not strictly
    /// below `root`. A relative `path` is taken relative to `root`. `.` and `..` are normalised
    /// lexically before containment is decided, so `src/../../x` is outside.
    ///
    /// This is `ContextFileSource.within(root, path)` of seed 000, "Local CLI instruction
    /// sources"; both module discovery and on-demand activation use it.
    pub fn within(self, root: &str, path: &str) -> Option<RelPath> {
        match self {
            Platform::Posix => posix_within(root, path),
            Platform::Windows => winpath::within(root, path),
        }
    }

    /// The root in display form with `/` separators, joined with `rel`: the source path the
    /// rendered envelope names.
    pub fn display_join(self, root: &str, rel: &RelPath) -> String {
        let root = match self {
            Platform::Posix => root.trim_end_matches('/').to_string(),
            Platform::Windows => winpath::display(root),
        };
        format!("{}/{}", root, rel.as_str())
    }
}

fn posix_within(root: &str, path: &str) -> Option<RelPath> {
    if !root.starts_with('/') {
        return None;
    }
    let root_segs = normalise(root.split('/'))?;
    let joined: Vec<&str> = if path.starts_with('/') {
        path.split('/').collect()
    } else {
        root.split('/').chain(path.split('/')).collect()
    };
    let segs = normalise(joined)?;
    strip_prefix(&root_segs, &segs, |a, b| a == b)
}
