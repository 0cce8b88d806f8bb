//! The one internal path form: `/`-separated, relative to the root, with no `.`, `..` or empty
//! segment. Paths enter through [`Platform::within`] (one function in) and leave through
//! [`RelPath::as_str`] or [`Platform::display_join`] (one function out); nothing in between
//! converts separators.
//!
//! Platform semantics are data, not `#[cfg]`: POSIX and Windows rules are both plain string
//! logic, testable on every OS (seed 000, "Local CLI instruction sources").

use std::fmt;

use serde::{Deserialize, Serialize};

/// A `/`-form path relative to the root. Never empty, never starts or ends with `/`, and has no
/// `.`, `..` or empty segment.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(try_from = "String")]
pub struct RelPath(String);

impl RelPath {
    /// Builds a relative path from already-normalised segments; `None` when there are none or
    /// one of them is not a plain name.
    pub fn from_segments<'a>(segments: impl IntoIterator<Item = &'a str>) -> Option<RelPath> {
        let mut out = String::new();
        for seg in segments {
            if seg.is_empty() || seg == "." || seg == ".." || seg.contains('/') {
                return None;
            }
            if !out.is_empty() {
                out.push('/');
            }
            out.push_str(seg);
        }
        if out.is_empty() {
            None
        } else {
            Some(RelPath(out))
        }
    }

    /// A path from a literal the crate knows to be normal.
    pub(crate) fn trusted(s: &str) -> RelPath {
        debug_assert!(RelPath::parse(s).is_some(), "{s}");
        RelPath(s.to_string())
    }

    /// Parses a `/`-form relative path, refusing anything not already normal.
    pub fn parse(s: &str) -> Option<RelPath> {
        RelPath::from_segments(s.split('/'))
    }

    /// The path as a `/`-form string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The path's segments.
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.0.split('/')
    }

    /// The last segment.
    pub fn file_name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or(&self.0)
    }

    /// The folders that contain this path, from the first folder under the root down to the
    /// path's own folder (seed 000, "Format and discovery": nested files are found "from the
    /// first folder under the root down to the file's own folder").
    pub fn ancestor_folders(&self) -> Vec<RelPath> {
        let mut out = Vec::new();
        let mut end = 0;
        while let Some(pos) = self.0.get(end..).and_then(|rest| rest.find('/')) {
            end += pos;
            if let Some(prefix) = self.0.get(..end) {
                out.push(RelPath(prefix.to_string()));
            }
            end += 1;
        }
        out
    }

    /// `self/name`.
    pub fn join(&self, name: &str) -> Option<RelPath> {
        RelPath::from_segments(self.segments().chain(std::iter::once(name)))
    }

    /// The number of segments.
    pub fn depth(&self) -> usize {
        self.segments().count()
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for RelPath {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        RelPath::parse(&s).ok_or_else(|| format!("'{s}' is not a normal /-form relative path"))
    }
}

/// Whose path rules apply to a root and the paths touched under it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    /// `/` separates, names are case-sensitive, a backslash is an ordinary character.
    Posix,
    /// `\` and `/` both separate; drive letters, UNC shares and names compare case-insensitively
    /// (seed 000, "Local CLI instruction sources": files are "joined and listed with
    /// path.win32").
    Windows,
}

/// Lexical normalisation of absolute segments: drops empty and `.` segments, and lets `..` pop
/// (never above the top, as the kernel does for `/..`).
pub(crate) fn normalise<'a>(segs: impl IntoIterator<Item = &'a str>) -> Option<Vec<&'a str>> {
    let mut out: Vec<&str> = Vec::new();
    for seg in segs {
        match seg {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            s => out.push(s),
        }
    }
    Some(out)
}

/// The remainder of `path` below `root`, when `root` is a strict prefix.
pub(crate) fn strip_prefix(root: &[&str], path: &[&str], eq: impl Fn(&str, &str) -> bool) -> Option<RelPath> {
    if path.len() <= root.len() {
        return None;
    }
    let (head, tail) = path.split_at(root.len());
    if head.iter().zip(root).all(|(a, b)| eq(a, b)) {
        RelPath::from_segments(tail.iter().copied())
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case("/repo", "/repo/src/a.ts", Some("src/a.ts"))]
    #[case("/repo", "src/a.ts", Some("src/a.ts"))]
    #[case("/repo/", "/repo/./src//a.ts", Some("src/a.ts"))]
    #[case("/repo", "/repo/src/../a.ts", Some("a.ts"))]
    #[case("/repo", "/repo/../repo/a.ts", Some("a.ts"))]
    #[case("/repo", "src/../../x", None)]
    #[case("/repo", "/repository/a.ts", None)]
    #[case("/repo", "/repo", None)]
    #[case("/repo", "/other/a.ts", None)]
    #[case("/repo", "/REPO/a.ts", None)]
    #[case("/repo", "src\\a.ts", Some("src\\a.ts"))]
    #[case("relative", "a.ts", None)]
    fn posix_within_answers_the_relative_path(#[case] root: &str, #[case] path: &str, #[case] want: Option<&str>) {
        assert_eq!(Platform::Posix.within(root, path).as_ref().map(RelPath::as_str), want);
    }

    #[rstest]
    #[case("a/b/c.ts", &["a", "a/b"])]
    #[case("c.ts", &[])]
    #[case("a/c.ts", &["a"])]
    fn ancestor_folders_run_shallow_to_deep(#[case] path: &str, #[case] want: &[&str]) {
        let got = RelPath::parse(path).unwrap().ancestor_folders();
        let got: Vec<&str> = got.iter().map(RelPath::as_str).collect();
        assert_eq!(got, want);
    }

    #[rstest]
    #[case("", false)]
    #[case("a//b", false)]
    #[case("./a", false)]
    #[case("a/..", false)]
    #[case("/a", false)]
    #[case("a/", false)]
    #[case("a/b", true)]
    fn parse_accepts_only_normal_paths(#[case] s: &str, #[case] ok: bool) {
        assert_eq!(RelPath::parse(s).is_some(), ok);
    }
}
