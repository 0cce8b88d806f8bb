//! Windows path rules as plain string logic (`path.win32` semantics), so they are tested on every
//! OS: `\` and `/` both separate, a drive letter or a UNC share prefixes an absolute path, and
//! names compare case-insensitively (seed 000, "Local CLI instruction sources").
//!
//! Decisions (spec-cases/DECISIONS.md, D-WIN-*): a drive-relative path such as `C:foo` names the
//! current directory of a drive, which a daemon cannot know, so it is never inside a root; the
//! verbatim prefixes `\\?\C:\` and `\\?\UNC\server\share\` are the same paths without them; a
//! device path (`\\.\`) is never inside a root.

use crate::relpath::{normalise, strip_prefix, RelPath};

/// The prefix of a Windows path.
#[derive(Debug, PartialEq, Eq)]
enum Prefix {
    /// No prefix: relative, or rooted on the current drive (`\foo`).
    None,
    /// `C:`; the letter is kept upper-case.
    Drive(char),
    /// `\\server\share`.
    Unc(String, String),
    /// A form the daemon cannot place (`\\.\`, `C:` without a separator).
    Unplaceable,
}

struct Parsed<'a> {
    prefix: Prefix,
    rooted: bool,
    segs: Vec<&'a str>,
}

fn is_sep(c: char) -> bool {
    c == '\\' || c == '/'
}

fn parse(path: &str) -> Parsed<'_> {
    let mut rest = path;
    // `\\?\` verbatim paths name the same file as the plain path after them.
    for verbatim in ["\\\\?\\", "//?/"] {
        if let Some(r) = rest.strip_prefix(verbatim) {
            if let Some(unc) = r.strip_prefix("UNC\\").or_else(|| r.strip_prefix("UNC/")) {
                return parse_unc(unc);
            }
            rest = r;
            break;
        }
    }
    let mut chars = rest.chars();
    match (chars.next(), chars.next(), chars.next()) {
        (Some(a), Some(b), _) if is_sep(a) && is_sep(b) => {
            let after = rest.get(2..).unwrap_or("");
            if after.starts_with('.') || after.starts_with('?') {
                return Parsed { prefix: Prefix::Unplaceable, rooted: true, segs: Vec::new() };
            }
            parse_unc(after)
        }
        (Some(d), Some(':'), third) if d.is_ascii_alphabetic() => {
            let rooted = third.is_some_and(is_sep);
            if !rooted && third.is_some() {
                return Parsed { prefix: Prefix::Unplaceable, rooted: false, segs: Vec::new() };
            }
            let segs = rest.get(2..).unwrap_or("").split(is_sep).collect();
            let prefix = if rooted { Prefix::Drive(d.to_ascii_uppercase()) } else { Prefix::Unplaceable };
            Parsed { prefix, rooted, segs }
        }
        (Some(a), _, _) if is_sep(a) => {
            Parsed { prefix: Prefix::None, rooted: true, segs: rest.split(is_sep).collect() }
        }
        _ => Parsed { prefix: Prefix::None, rooted: false, segs: rest.split(is_sep).collect() },
    }
}

fn parse_unc(after: &str) -> Parsed<'_> {
    let mut parts = after.split(is_sep);
    let server = parts.next().unwrap_or("");
    let share = parts.next().unwrap_or("");
    if server.is_empty() || share.is_empty() {
        return Parsed { prefix: Prefix::Unplaceable, rooted: true, segs: Vec::new() };
    }
    Parsed { prefix: Prefix::Unc(fold(server), fold(share)), rooted: true, segs: parts.collect() }
}

/// Case folding for comparison (D-GLOB-5): Windows compares names as NTFS does, each character
/// upper-cased on its own by its simple mapping, so `ä` is `Ä` and `é` is `É`, but `ß` stays
/// `ß` (its upper case `SS` is two characters) and so is neither `SS` nor `ẞ`. Every comparison
/// that folds case (names, globs in sets and one by one, folders) folds through this one function.
pub(crate) fn fold(s: &str) -> String {
    if s.is_ascii() {
        return s.to_ascii_uppercase();
    }
    s.chars().map(simple_upper).collect()
}

/// `c` upper-cased when its upper case is one character, else `c` itself.
fn simple_upper(c: char) -> char {
    let mut upper = c.to_uppercase();
    match (upper.next(), upper.next()) {
        (Some(u), None) => u,
        _ => c,
    }
}

/// `within(root, path)` with Windows rules; see [`crate::Platform::within`].
pub(crate) fn within(root: &str, path: &str) -> Option<RelPath> {
    let root = parse(root);
    let root_absolute = match root.prefix {
        Prefix::Drive(_) => root.rooted,
        Prefix::Unc(..) => true,
        _ => false,
    };
    if !root_absolute {
        return None;
    }
    let root_segs = normalise(root.segs.iter().copied())?;
    let p = parse(path);
    let segs: Vec<&str> = match p.prefix {
        Prefix::Unplaceable => return None,
        Prefix::None if p.rooted => p.segs,
        Prefix::None => root.segs.iter().copied().chain(p.segs).collect(),
        ref other => {
            if *other != root.prefix {
                return None;
            }
            p.segs
        }
    };
    let segs = normalise(segs)?;
    let rel = strip_prefix(&root_segs, &segs, |a, b| fold(a) == fold(b))?;
    // A `:` cannot stand in a Windows file name: below the root it is an alternate data stream
    // (`AGENTS.md:x`) or a drive (`C:`), never a file of the project (D-WIN-4).
    if rel.segments().any(|seg| seg.contains(':')) {
        return None;
    }
    Some(rel)
}

/// The root with `/` separators and no trailing separator, as given otherwise
/// (`C:\Users\dev\repo\` is `C:/Users/dev/repo`). A verbatim prefix is dropped, since it names the
/// same path: `\\?\C:\repo` is `C:/repo` and `\\?\UNC\srv\share` is `//srv/share` (D-RENDER-1).
pub(crate) fn display(root: &str) -> String {
    let plain = if let Some(unc) = root.strip_prefix("\\\\?\\UNC\\").or_else(|| root.strip_prefix("//?/UNC/")) {
        format!("//{unc}")
    } else if let Some(rest) = root.strip_prefix("\\\\?\\").or_else(|| root.strip_prefix("//?/")) {
        rest.to_string()
    } else {
        root.to_string()
    };
    let s: String = plain.chars().map(|c| if c == '\\' { '/' } else { c }).collect();
    // `C:\` becomes `C:`, so the join adds the only separator.
    s.trim_end_matches('/').to_string()
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case(r"C:\repo", r"C:\repo\.elowen\rules\api.md", Some(".elowen/rules/api.md"))]
    #[case(r"C:\repo", r"c:\REPO\src\a.ts", Some("src/a.ts"))]
    #[case(r"C:\repo\", r"C:/repo/src/a.ts", Some("src/a.ts"))]
    #[case(r"C:\repo", r"src\api\x.ts", Some("src/api/x.ts"))]
    #[case(r"C:\repo", r"src/api\x.ts", Some("src/api/x.ts"))]
    #[case(r"C:\repo", r"\repo\a.ts", Some("a.ts"))]
    #[case(r"C:\repo", r"D:\repo\a.ts", None)]
    #[case(r"C:\repo", r"C:a.ts", None)]
    #[case(r"C:\repo", r"C:\repo\..\other\a.ts", None)]
    #[case(r"C:\repo", r"C:\repo\src\..\a.ts", Some("a.ts"))]
    #[case(r"C:\repo", r"..\repo\a.ts", Some("a.ts"))]
    #[case(r"C:\repo", r"C:\repository\a.ts", None)]
    #[case(r"C:\repo", r"C:\repo", None)]
    #[case(r"C:\repo", r"\\?\C:\repo\a.ts", Some("a.ts"))]
    #[case(r"\\server\share\repo", r"\\SERVER\Share\repo\a.ts", Some("a.ts"))]
    #[case(r"\\server\share\repo", r"\\?\UNC\server\share\repo\a.ts", Some("a.ts"))]
    #[case(r"\\server\share\repo", r"\\server\other\repo\a.ts", None)]
    #[case(r"\\server\share", r"\\server\share\a.ts", Some("a.ts"))]
    #[case(r"C:\repo", r"\\.\C:\repo\a.ts", None)]
    #[case(r"repo", r"repo\a.ts", None)]
    #[case(r"C:\", r"C:\a\b.ts", Some("a/b.ts"))]
    #[case(r"C:\repo", r"C:\repo\C:", None)]
    #[case(r"C:\repo", r"C:\repo\AGENTS.md:hidden", None)]
    fn within_answers_the_slash_form(#[case] root: &str, #[case] path: &str, #[case] want: Option<&str>) {
        assert_eq!(within(root, path).as_ref().map(RelPath::as_str), want);
    }

    #[rstest]
    #[case(r"C:\Users\dev\repo\", "C:/Users/dev/repo")]
    #[case(r"\\srv\share\repo", "//srv/share/repo")]
    #[case(r"C:\", "C:")]
    #[case(r"\\?\C:\repo", "C:/repo")]
    #[case(r"\\?\UNC\srv\share\repo", "//srv/share/repo")]
    fn display_uses_slashes(#[case] root: &str, #[case] want: &str) {
        assert_eq!(display(root), want);
    }
}
