//! Glob validation and matching for the `paths:` of rule modules (seed 000, "Format and
//! discovery": "*, ** and ? are supported, the patterns compose as OR, and a leading /, a
//! backslash or a .. segment is refused").
//!
//! Compile once, match many: [`RulesBuilder`] collects every conditional module's patterns and
//! builds one immutable [`CompiledRules`], against which a touched path is matched once. The
//! decisions this module implements (spec-cases/DECISIONS.md, D-GLOB-*):
//! - `*` and `?` never match `/`; `*` matches a leading `.` (dotfiles are not special);
//! - `**` must be a whole segment; `a**b` is refused rather than guessed at;
//! - `[`, `]`, `{` and `}` are literal characters, so `app/[id]/page.tsx` matches that file;
//! - matching is case-sensitive on POSIX and case-insensitive on Windows targets, both pattern
//!   and path folded by simple upper-casing, one character at a time (D-GLOB-5);
//! - `?` matches exactly one character (a Unicode scalar value), not one byte (D-GLOB-8).
//!   globset matches bytes, so the set is compiled with `?` widened to `*`, and a hit of a glob
//!   that has a `?` is confirmed by [`exact_match`], which walks characters.

use std::collections::HashMap;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::diag::Code;
use crate::relpath::{Platform, RelPath};

/// Checks one pattern against the seed's refusals and this project's decisions.
pub fn validate(pattern: &str) -> Result<(), (Code, String)> {
    if pattern.starts_with('/') {
        return Err((Code::GlobAbsolute, format!("glob '{pattern}' starts with '/' (globs are project-relative)")));
    }
    if pattern.contains('\\') {
        return Err((
            Code::GlobBackslash,
            format!("glob '{pattern}' contains a backslash (use '/' to separate folders)"),
        ));
    }
    if pattern.split('/').any(|seg| seg == "..") {
        return Err((
            Code::GlobParentSegment,
            format!("glob '{pattern}' has a '..' segment (globs stay inside the project)"),
        ));
    }
    if pattern.split('/').any(|seg| seg.contains("**") && seg != "**") {
        return Err((
            Code::GlobInvalid,
            format!("glob '{pattern}' uses '**' inside a segment ('**' must be a whole segment)"),
        ));
    }
    // What passes these checks globset accepts as it is translated (classes and braces escaped,
    // no backslash, `**` only as a whole segment): `the_checks_leave_nothing_globset_refuses`
    // holds it, so the pattern is not compiled here, only where a set is built.
    Ok(())
}

/// Escapes the characters globset would read as classes or alternations, so that only `*`, `**`
/// and `?` are special, and widens `?` to `*` (a hit is then confirmed by [`exact_match`]).
fn translate(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 4);
    for c in pattern.chars() {
        match c {
            '[' | ']' | '{' | '}' => {
                out.push('\\');
                out.push(c);
            }
            '?' => out.push('*'),
            c => out.push(c),
        }
    }
    out
}

/// Matches one validated pattern against a /-form path, character by character: `**` as a whole
/// segment matches zero or more segments (one or more as the last segment, D-GLOB-1), `*` any run
/// of characters within a segment, `?` exactly one character (D-GLOB-8). Case-insensitive when
/// `fold` (Windows targets, D-GLOB-5).
///
/// The work is polynomial whatever the pattern: at most 5 · (p + 1) · (q + 1) steps, where p and
/// q are the lengths in characters of the pattern and the path (upper-cased first when `fold`);
/// see [`exact_match_counted`].
///
/// ```
/// use reference::glob::exact_match;
/// assert!(exact_match("src/**/*.ts", "src/a/b.ts", false));
/// assert!(!exact_match("src/**", "src", false));
/// ```
pub fn exact_match(pattern: &str, path: &str, fold: bool) -> bool {
    Exact::new(pattern, fold).run(&fold_key(path, fold), &mut 0)
}

/// [`exact_match`] with the number of steps it took: one per cell of its table of (pattern
/// segment, path segment) pairs, and one per call and per loop turn of the matcher of one
/// segment. It is for the fuzz property `harness::fuzzing::glob`, which checks on every input
/// that the steps stay within 5 · (p + 1) · (q + 1) (p and q as for [`exact_match`]), a bound
/// that does not depend on how fast the machine is.
pub fn exact_match_counted(pattern: &str, path: &str, fold: bool) -> (bool, u64) {
    let mut steps = 0;
    let hit = Exact::new(pattern, fold).run(&fold_key(path, fold), &mut steps);
    (hit, steps)
}

/// Whether patterns match any path of one fixed batch of touched paths, each distinct pattern
/// tried once ([`exact_match`]'s walk, which the compiled index agrees with). A trigger that
/// needs only the modules its batch activates asks this of every module as it is read, instead of
/// keeping every module for an index (issue 13: what a trigger holds at once).
#[derive(Debug)]
pub(crate) struct BatchMatcher {
    fold: bool,
    /// The batch, case-folded when matching folds case.
    paths: Vec<String>,
    /// Each pattern tried so far, with whether it matched.
    seen: HashMap<String, bool>,
}

impl BatchMatcher {
    /// A matcher of `platform`'s case rules for `batch`.
    pub(crate) fn new(platform: Platform, batch: &[RelPath]) -> BatchMatcher {
        let fold = platform == Platform::Windows;
        let paths = batch.iter().map(|p| fold_key(p.as_str(), fold)).collect();
        BatchMatcher { fold, paths, seen: HashMap::new() }
    }

    /// Whether one of `patterns` matches one of the batch's paths.
    pub(crate) fn any(&mut self, patterns: &[String]) -> bool {
        patterns.iter().any(|pattern| {
            if let Some(&hit) = self.seen.get(pattern.as_str()) {
                return hit;
            }
            let exact = Exact::new(pattern, self.fold);
            let hit = self.paths.iter().any(|path| exact.run(path, &mut 0));
            self.seen.insert(pattern.clone(), hit);
            hit
        })
    }
}

/// One segment of a pattern prepared for [`Exact`].
#[derive(Debug, Clone)]
enum Seg {
    /// A `**` segment, or a run of them: `a/**/**/b` is `a/**/b`, since zero or more folders
    /// twice is zero or more folders, and a last run is one or more folders however many `**` it
    /// has (the last needs one, the others add zero or more).
    Folders,
    /// Any other segment, as characters (upper-cased when matching folds case).
    Name(Vec<char>),
}

/// A pattern prepared once for [`exact_match`]'s walk, so the patterns of an index are split and
/// case-folded when it is built rather than on every touched path.
///
/// The walk fills a table whose cell (i, j) says whether pattern segments i.. match path segments
/// j.., one row per pattern segment from the last to the first; each row needs only the row
/// below it, so each cell costs one look at a neighbour, plus one [`segment_matches`] for a name.
/// A plain recursion over the same choices is exponential: with sixteen `**` against a path of 24
/// folders it tries every way of sharing the folders among the `**` (issue 10).
#[derive(Debug, Clone)]
struct Exact {
    segs: Vec<Seg>,
    /// How many of `segs` are names; each takes exactly one path segment.
    names: usize,
}

impl Exact {
    fn new(pattern: &str, fold: bool) -> Exact {
        let mut segs = Vec::new();
        for seg in pattern.split('/') {
            if seg != "**" {
                segs.push(Seg::Name(fold_key(seg, fold).chars().collect()));
            } else if !matches!(segs.last(), Some(Seg::Folders)) {
                segs.push(Seg::Folders);
            }
        }
        let names = segs.iter().filter(|s| matches!(s, Seg::Name(_))).count();
        Exact { segs, names }
    }

    /// Whether the pattern matches `path`, which is already case-folded when the pattern is.
    /// Adds the steps taken to `steps`.
    fn run(&self, path: &str, steps: &mut u64) -> bool {
        let parts: Vec<&str> = path.split('/').collect();
        let n = parts.len();
        // Every name takes one path segment, so more names than segments never match, and without
        // a `**` the counts are equal. Past this test there are at most 2n + 1 rows (a run of
        // `**` lies between two names), so the table is small even for a very long pattern.
        let has_folders = self.segs.len() > self.names;
        if self.names > n || (!has_folders && self.names != n) {
            return false;
        }
        // The row below the last pattern segment: the end of the pattern matches only the end of
        // the path.
        let mut below = vec![false; n + 1];
        if let Some(end) = below.last_mut() {
            *end = true;
        }
        let mut row = vec![false; n + 1];
        let last = self.segs.len().saturating_sub(1);
        for (i, seg) in self.segs.iter().enumerate().rev() {
            *steps += n as u64 + 1;
            let mut any = false;
            match seg {
                // A last `**` matches one or more segments (`src/**` is not `src`).
                Seg::Folders if i == last => {
                    for (j, cell) in row.iter_mut().enumerate() {
                        *cell = j < n;
                        any |= *cell;
                    }
                }
                // Elsewhere zero or more: skip it, or let it take segment j and stay.
                Seg::Folders => {
                    let mut taken = false;
                    for (cell, &skip) in row.iter_mut().zip(&below).rev() {
                        taken |= skip;
                        *cell = taken;
                    }
                    any = taken;
                }
                Seg::Name(p) => {
                    for ((cell, &rest), part) in row.iter_mut().zip(below.iter().skip(1)).zip(&parts) {
                        *cell = rest && segment_matches(p, part, steps);
                        any |= *cell;
                    }
                    if let Some(end) = row.last_mut() {
                        *end = false;
                    }
                }
            }
            // No cell of this row holds, so no row above can: stop early.
            if !any {
                return false;
            }
            std::mem::swap(&mut row, &mut below);
        }
        below.first().copied().unwrap_or(false)
    }
}

/// Whether one pattern segment (`*` and `?` its only wildcards) matches one path segment: the
/// classic walk with one backtrack point, the last `*`, which is enough for these wildcards (a
/// later `*` can take whatever an earlier one would have). With m pattern and k name characters
/// it takes at most (k + 1) · (m + 1) loop turns: the backtrack point moves right at most k times,
/// and between two moves every turn advances in the pattern. Adds them to `steps`, with one for
/// the call and one per character of the closing check.
fn segment_matches(p: &[char], name: &str, steps: &mut u64) -> bool {
    *steps += 1;
    // `pi` indexes `p`; `ni` and the saved name position are byte offsets of char boundaries.
    let (mut pi, mut ni) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while let Some(c) = name.get(ni..).and_then(|rest| rest.chars().next()) {
        *steps += 1;
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ni));
                pi += 1;
            }
            Some(&q) if q == '?' || q == c => {
                pi += 1;
                ni += c.len_utf8();
            }
            _ => match star {
                Some((sp, sn)) => {
                    let skipped = name.get(sn..).and_then(|rest| rest.chars().next()).map_or(1, char::len_utf8);
                    pi = sp + 1;
                    ni = sn + skipped;
                    star = Some((sp, ni));
                }
                None => return false,
            },
        }
    }
    p.get(pi..).unwrap_or(&[]).iter().all(|c| {
        *steps += 1;
        *c == '*'
    })
}

/// Compiles `pattern` for `platform`. On Windows the pattern is folded here and the path by the
/// caller, both by [`fold_key`], and the glob itself is case-sensitive: globset's own
/// case-insensitivity folds differently from the one-by-one matcher (D-GLOB-5, issue 26).
fn compile(pattern: &str, platform: Platform) -> Result<globset::Glob, (Code, String)> {
    GlobBuilder::new(&translate(&fold_key(pattern, platform == Platform::Windows)))
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| (Code::GlobInvalid, format!("glob '{pattern}' is not a glob ({})", e.kind())))
}

/// One module's patterns, validated, ready for a [`RulesBuilder`].
#[derive(Debug, Clone)]
pub struct CompiledGlobs {
    patterns: Vec<String>,
}

impl CompiledGlobs {
    /// Validates each pattern ([`validate`]).
    pub fn new(patterns: &[String]) -> Result<CompiledGlobs, (Code, String)> {
        for p in patterns {
            validate(p)?;
        }
        Ok(CompiledGlobs { patterns: patterns.to_vec() })
    }

    /// Patterns that `frontmatter::parse` accepted: it validated every one already, so
    /// discovery does not compile them a second time.
    pub(crate) fn validated(patterns: Vec<String>) -> CompiledGlobs {
        CompiledGlobs { patterns }
    }
}

/// How many patterns a node of the index holds before it compiles them into a globset; below,
/// they are tried one by one with [`exact_match`], which costs nothing to build.
const SET_FROM: usize = 16;

/// The literal folders a pattern starts with: its leading segments up to the first one with a
/// wildcard, never its last segment. Only paths below them can match.
fn literal_prefix(pattern: &str) -> &str {
    let mut end = 0;
    let mut pos = 0;
    for seg in pattern.split('/') {
        let next = pos + seg.len();
        if next >= pattern.len() || seg.contains(['*', '?']) {
            break;
        }
        end = next;
        pos = next + 1;
    }
    pattern.get(..end).unwrap_or("")
}

/// Collects the validated patterns of every conditional module of one discovery.
#[derive(Debug)]
pub struct RulesBuilder {
    platform: Platform,
    entries: Vec<(String, usize)>,
}

impl RulesBuilder {
    /// An empty builder for `platform`'s case rules.
    pub fn new(platform: Platform) -> RulesBuilder {
        RulesBuilder { platform, entries: Vec::new() }
    }

    /// Adds module `owner`'s already validated patterns.
    pub fn add(&mut self, owner: usize, patterns: &[String]) -> Result<(), (Code, String)> {
        self.add_compiled(owner, CompiledGlobs::new(patterns)?);
        Ok(())
    }

    /// Adds module `owner`'s checked patterns.
    pub fn add_compiled(&mut self, owner: usize, globs: CompiledGlobs) {
        self.entries.extend(globs.patterns.into_iter().map(|p| (p, owner)));
    }

    /// Compiles every pattern into the index.
    pub fn build(self) -> CompiledRules {
        let fold = self.platform == Platform::Windows;
        // Node key → pattern → owners: a glob many modules share (`src/**/*.ts`) is compiled once.
        let mut groups: HashMap<String, Vec<(String, Vec<usize>)>> = HashMap::new();
        let mut index: HashMap<(String, String), usize> = HashMap::new();
        for (pattern, owner) in self.entries {
            let key = fold_key(literal_prefix(&pattern), fold);
            let group = groups.entry(key.clone()).or_default();
            match index.get(&(key.clone(), pattern.clone())) {
                Some(&i) => {
                    if let Some((_, owners)) = group.get_mut(i) {
                        owners.push(owner);
                    }
                }
                None => {
                    index.insert((key, pattern.clone()), group.len());
                    group.push((pattern, vec![owner]));
                }
            }
        }
        let platform = self.platform;
        let nodes = groups
            .into_iter()
            .map(|(key, entries)| {
                let set = if entries.len() < SET_FROM { None } else { set_node(&entries, platform) };
                let node = set.unwrap_or_else(|| {
                    Node::Few(
                        entries.into_iter().map(|(pattern, owners)| (Exact::new(&pattern, fold), owners)).collect(),
                    )
                });
                (key, node)
            })
            .collect();
        CompiledRules { parts: vec![Part { nodes, fold, offset: 0 }] }
    }
}

/// One node's patterns compiled into one globset, or `None` when globset refuses to build it.
/// It refuses when the set's regex outgrows globset's size limit (10 MiB of automaton), which
/// some ten or twenty thousand patterns in one node reach, or a few very long ones. Without this
/// answer such a node would be an empty set, and every module under it would silently never
/// activate; the caller tries the patterns one by one instead, slower but right.
fn set_node(entries: &[(String, Vec<usize>)], platform: Platform) -> Option<Node> {
    let fold = platform == Platform::Windows;
    let mut builder = GlobSetBuilder::new();
    let mut owners = Vec::with_capacity(entries.len());
    let mut confirm = Vec::with_capacity(entries.len());
    for (pattern, owner) in entries {
        // Validated patterns compile; one that did not would only match nothing.
        if let Ok(glob) = compile(pattern, platform) {
            builder.add(glob);
            owners.push(owner.clone());
            confirm.push(needs_confirming(pattern).then(|| Exact::new(pattern, fold)));
        }
    }
    let set = builder.build().ok()?;
    Some(Node::Set { set, owners, confirm })
}

/// Whether globset may answer `pattern` otherwise than [`exact_match`], so that a hit must be
/// confirmed: a `?`, which the set widens to `*` (D-GLOB-8), or an empty segment, which never
/// matches a normalised path (D-GLOB-6) but which globset reads as a folder separator, so that
/// `**/` alone matched every path (found by the `glob_set` fuzz target, issue 26).
fn needs_confirming(pattern: &str) -> bool {
    pattern.contains('?') || pattern.split('/').any(str::is_empty)
}

fn fold_key(s: &str, fold: bool) -> String {
    if fold {
        crate::winpath::fold(s)
    } else {
        s.to_string()
    }
}

/// The immutable, compiled `paths:` of every conditional module of one discovery.
///
/// Compile once, match many: the patterns are indexed by the literal folders they start with
/// (`src/api/**/*.ts` under `src/api`), so a touched path consults only the nodes of its own
/// ancestors, and a node's patterns are compiled into one globset when it holds many (and tried
/// one by one when it holds few, or more than globset can build into one set). When
/// discovery ran on several threads there is one index per thread's contiguous share of the
/// modules (at most four). Globset matches bytes, so a glob with a `?` that a set reports is
/// confirmed by [`exact_match`], which walks characters (D-GLOB-8).
#[derive(Debug, Clone)]
pub struct CompiledRules {
    parts: Vec<Part>,
}

#[derive(Debug, Clone)]
struct Part {
    nodes: HashMap<String, Node>,
    fold: bool,
    /// Added to every owner: the number of conditional modules in the parts before this one.
    offset: usize,
}

#[derive(Debug, Clone)]
enum Node {
    /// A few distinct patterns, tried one by one, each with the modules that declare it.
    Few(Vec<(Exact, Vec<usize>)>),
    /// Many distinct patterns in one set.
    Set {
        set: GlobSet,
        owners: Vec<Vec<usize>>,
        /// Per glob: the pattern, when a hit must be confirmed ([`needs_confirming`]).
        confirm: Vec<Option<Exact>>,
    },
}

impl CompiledRules {
    /// A set that matches nothing.
    pub fn empty() -> CompiledRules {
        CompiledRules { parts: Vec::new() }
    }

    /// Joins sets compiled for consecutive shares of the modules; each comes with the number of
    /// modules before its share.
    pub fn concat(shares: Vec<(CompiledRules, usize)>) -> CompiledRules {
        let parts = shares
            .into_iter()
            .flat_map(|(rules, offset)| {
                rules.parts.into_iter().map(move |mut p| {
                    p.offset += offset;
                    p
                })
            })
            .collect();
        CompiledRules { parts }
    }

    /// The modules (by owner index) one of whose patterns matches `path`, each at most once, in
    /// ascending order.
    pub fn matching(&self, path: &RelPath, out: &mut Vec<usize>) {
        let text = path.as_str();
        for part in &self.parts {
            let folded = fold_key(text, part.fold);
            // The ancestors of the path: "", "src", "src/api", ... (never the path itself).
            let ends = std::iter::once(0).chain(folded.match_indices('/').map(|(i, _)| i));
            for end in ends {
                let Some(node) = folded.get(..end).and_then(|k| part.nodes.get(k)) else { continue };
                match node {
                    Node::Few(entries) => {
                        for (pattern, owners) in entries {
                            if pattern.run(&folded, &mut 0) {
                                out.extend(owners.iter().map(|o| o + part.offset));
                            }
                        }
                    }
                    Node::Set { set, owners, confirm } => {
                        for glob in set.matches(folded.as_str()) {
                            if let Some(Some(pattern)) = confirm.get(glob) {
                                if !pattern.run(&folded, &mut 0) {
                                    continue;
                                }
                            }
                            if let Some(of_glob) = owners.get(glob) {
                                out.extend(of_glob.iter().map(|o| o + part.offset));
                            }
                        }
                    }
                }
            }
        }
        out.sort_unstable();
        out.dedup();
    }

    /// The number of patterns in the index (for the unit tests: nothing else asks).
    #[cfg(test)]
    fn len(&self) -> usize {
        let node_len = |n: &Node| match n {
            Node::Few(e) => e.iter().map(|(_, o)| o.len()).sum(),
            Node::Set { owners, .. } => owners.iter().map(Vec::len).sum::<usize>(),
        };
        self.parts.iter().flat_map(|p| p.nodes.values()).map(node_len).sum()
    }
}

/// Every module's globs compiled separately and tried one module at a time: the slow path the
/// benches compare [`CompiledRules`] with. It answers exactly what the compiled set answers.
#[derive(Debug, Clone)]
pub struct OneAtATime {
    modules: Vec<Vec<(globset::GlobMatcher, Option<Exact>)>>,
    fold: bool,
}

impl OneAtATime {
    /// Compiles each module's validated patterns on its own.
    pub fn new(modules: &[Vec<String>], platform: Platform) -> Result<OneAtATime, (Code, String)> {
        let fold = platform == Platform::Windows;
        let modules = modules
            .iter()
            .map(|pats| {
                pats.iter()
                    .map(|p| {
                        compile(p, platform)
                            .map(|g| (g.compile_matcher(), needs_confirming(p).then(|| Exact::new(p, fold))))
                    })
                    .collect()
            })
            .collect::<Result<_, _>>()?;
        Ok(OneAtATime { modules, fold })
    }

    /// The modules one of whose patterns matches `path`, in ascending order.
    pub fn matching(&self, path: &RelPath, out: &mut Vec<usize>) {
        let folded = fold_key(path.as_str(), self.fold);
        for (i, globs) in self.modules.iter().enumerate() {
            let hit = |(g, confirm): &(globset::GlobMatcher, Option<Exact>)| {
                g.is_match(folded.as_str()) && confirm.as_ref().is_none_or(|p| p.run(&folded, &mut 0))
            };
            if globs.iter().any(hit) {
                out.push(i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn is_match(pattern: &str, path: &str, platform: Platform) -> bool {
        let mut b = RulesBuilder::new(platform);
        b.add(0, &[pattern.to_string()]).unwrap();
        let rules = b.build();
        let mut out = Vec::new();
        rules.matching(&RelPath::parse(path).unwrap(), &mut out);
        out == [0]
    }

    #[rstest]
    #[case("src/*.ts", "src/a.ts", true)]
    #[case("src/*.ts", "src/api/a.ts", false)]
    #[case("src/**/*.ts", "src/a.ts", true)]
    #[case("src/**/*.ts", "src/api/v1/a.ts", true)]
    #[case("**/*.ts", "a.ts", true)]
    #[case("**/*.ts", "x/y/a.ts", true)]
    #[case("src/**", "src/a/b.ts", true)]
    #[case("src/**", "src", false)]
    #[case("src/?.ts", "src/a.ts", true)]
    #[case("src/?.ts", "src/ab.ts", false)]
    #[case("*", ".env", true)]
    #[case("src/*", "src/.hidden", true)]
    #[case("app/[id]/page.tsx", "app/[id]/page.tsx", true)]
    #[case("app/[id]/page.tsx", "app/i/page.tsx", false)]
    #[case("src/{a,b}.ts", "src/a.ts", false)]
    #[case("src/{a,b}.ts", "src/{a,b}.ts", true)]
    #[case("SRC/*.ts", "src/a.ts", false)]
    #[case("notes/?.md", "notes/日.md", true)]
    #[case("notes/??.md", "notes/日.md", false)]
    #[case("notes/?.md", "notes/.md", false)]
    #[case("src/?", "src/a/b", false)]
    fn posix_matching(#[case] pattern: &str, #[case] path: &str, #[case] want: bool) {
        validate(pattern).unwrap();
        assert_eq!(is_match(pattern, path, Platform::Posix), want, "{pattern} ~ {path}");
    }

    #[test]
    fn one_at_a_time_answers_what_the_set_answers() {
        let modules =
            vec![vec!["src/**/*.ts".to_string()], vec!["*.md".into(), "docs/**".into()], vec!["src/a.ts".into()]];
        let mut b = RulesBuilder::new(Platform::Posix);
        for (i, m) in modules.iter().enumerate() {
            b.add(i, m).unwrap();
        }
        let set = b.build();
        let slow = OneAtATime::new(&modules, Platform::Posix).unwrap();
        for path in ["src/a.ts", "README.md", "docs/x/y", "src/b/c.ts", "lib/x.rs"] {
            let p = RelPath::parse(path).unwrap();
            let (mut a, mut b) = (Vec::new(), Vec::new());
            set.matching(&p, &mut a);
            slow.matching(&p, &mut b);
            assert_eq!(a, b, "{path}");
        }
    }

    #[rstest]
    #[case("src/api/**/*.ts", "src/api")]
    #[case("src/a.ts", "src")]
    #[case("a.ts", "")]
    #[case("**/x", "")]
    #[case("src/*/x", "src")]
    #[case("src/x?/y", "src")]
    #[case("a/b/c/", "a/b/c")]
    fn literal_prefixes(#[case] pattern: &str, #[case] want: &str) {
        assert_eq!(literal_prefix(pattern), want);
    }

    #[test]
    fn a_glob_shared_by_many_modules_matches_every_one() {
        let mut b = RulesBuilder::new(Platform::Posix);
        for i in 0..50 {
            b.add(i, &["src/**/*.ts".to_string(), format!("lib/m{i}/**")]).unwrap();
        }
        let rules = b.build();
        assert_eq!(rules.len(), 100);
        let mut out = Vec::new();
        rules.matching(&RelPath::parse("src/a/b.ts").unwrap(), &mut out);
        assert_eq!(out, (0..50).collect::<Vec<_>>());
    }

    #[test]
    fn many_patterns_in_one_node_match_through_a_set() {
        let mut b = RulesBuilder::new(Platform::Posix);
        for i in 0..40 {
            b.add(i, &[format!("src/**/*.t{i}"), format!("src/n{i}?/*")]).unwrap();
        }
        let rules = b.build();
        let mut out = Vec::new();
        rules.matching(&RelPath::parse("src/a/b.t7").unwrap(), &mut out);
        assert_eq!(out, [7]);
        out.clear();
        rules.matching(&RelPath::parse("src/n3日/x").unwrap(), &mut out);
        assert_eq!(out, [3]);
    }

    /// Sixteen long patterns in one node outgrow globset's size limit: the node must still match,
    /// one pattern at a time, rather than become an empty set that activates nothing.
    #[test]
    fn a_node_too_big_for_a_set_still_matches() {
        let stars = "*a".repeat(5000);
        let mut b = RulesBuilder::new(Platform::Posix);
        for i in 0..SET_FROM {
            b.add(i, &[format!("{stars}*z{i}")]).unwrap();
        }
        let rules = b.build();
        assert!(rules.parts.iter().flat_map(|p| p.nodes.values()).all(|n| matches!(n, Node::Few(_))));
        let mut out = Vec::new();
        rules.matching(&RelPath::parse(&format!("{}z3", "a".repeat(5100))).unwrap(), &mut out);
        assert_eq!(out, [3]);
    }

    #[rstest]
    #[case("src/**/*.ts", "src/a.ts", true)]
    #[case("**", "a/b/c", true)]
    #[case("a/**/b", "a/b", true)]
    #[case("a/*b*c", "a/xbyyc", true)]
    #[case("a/*b*c", "a/xbyy", false)]
    #[case("?é?", "aéb", true)]
    #[case("src/**", "src", false)]
    #[case("src/**", "src/a", true)]
    #[case("**/src/**", "src", false)]
    fn exact_matcher(#[case] pattern: &str, #[case] path: &str, #[case] want: bool) {
        assert_eq!(exact_match(pattern, path, false), want);
    }

    #[rstest]
    #[case("src/**/**", "src", false)]
    #[case("src/**/**", "src/a", true)]
    #[case("src/**/**/**", "src/a/b", true)]
    #[case("**/**/x", "x", true)]
    #[case("**/**/x", "a/b/x", true)]
    #[case("a/**/**/b", "a/b", true)]
    #[case("a/**/**/b", "a/x/y/b", true)]
    #[case("a/**/**/b", "a/x/y/c", false)]
    #[case("**/**", "a", true)]
    #[case("a/b", "a/b/c", false)]
    #[case("a/b/c", "a/b", false)]
    fn runs_of_double_star_match_as_one(#[case] pattern: &str, #[case] path: &str, #[case] want: bool) {
        assert_eq!(exact_match(pattern, path, false), want, "{pattern} ~ {path}");
    }

    #[rstest]
    #[case("SRC/?.TS", "src/a.ts", true)]
    #[case("src/**/*.TS", "Src/A/b.ts", true)]
    #[case("src/?", "src/日", true)]
    #[case("src/**", "SRC", false)]
    #[case("docs/ä.md", "DOCS/Ä.md", true)]
    #[case("docs/É*", "docs/école", true)]
    #[case("docs/straße", "docs/STRAßE", true)]
    #[case("docs/straße", "docs/STRASSE", false)]
    #[case("docs/ß", "docs/ẞ", false)]
    #[case("docs/?", "docs/SS", false)]
    fn folded_matching_ignores_case(#[case] pattern: &str, #[case] path: &str, #[case] want: bool) {
        assert_eq!(exact_match(pattern, path, true), want, "{pattern} ~ {path}");
    }

    /// Issue 10, item 5: sixteen `**` against 24 folders made the old recursion try every way of
    /// sharing the folders among them, for over 120 s when nothing matched.
    #[rstest]
    #[case("ts", true)]
    #[case("md", false)]
    fn sixteen_double_stars_against_24_folders_answer(#[case] ext: &str, #[case] want: bool) {
        let pattern = format!("{}*.ts", "**/".repeat(16));
        let path = format!("{}x.{ext}", (0..24).map(|i| format!("d{i}/")).collect::<String>());
        assert_eq!(exact_match(&pattern, &path, false), want);
        assert_eq!(is_match(&pattern, &path, Platform::Posix), want);
    }

    /// Many `*` in one segment against a long name: the walk backtracks only to the last `*`.
    #[rstest]
    #[case("b", true)]
    #[case("a", false)]
    fn many_stars_in_one_segment_against_a_long_name_answer(#[case] end: &str, #[case] want: bool) {
        let pattern = format!("{}*b", "*a".repeat(40));
        let name = format!("{}{end}", "a".repeat(400));
        assert_eq!(exact_match(&pattern, &name, false), want);
        assert_eq!(exact_match(&format!("src/{pattern}"), &format!("src/{name}"), true), want);
    }

    #[rstest]
    #[case(format!("{}*.ts", "**/".repeat(16)), format!("{}x.md", "d/".repeat(24)))]
    #[case(format!("{}*b", "*a".repeat(30)), "a".repeat(300))]
    #[case(format!("*{}", "a".repeat(200)), "a".repeat(199))]
    #[case(format!("*{}b", "a".repeat(20)), "a".repeat(300))]
    #[case("a/".repeat(50) + "*", "a/".repeat(60) + "a")]
    fn steps_stay_within_the_documented_bound(#[case] pattern: String, #[case] path: String) {
        for fold in [false, true] {
            let (_, steps) = exact_match_counted(&pattern, &path, fold);
            let bound = 5 * (pattern.chars().count() as u64 + 1) * (path.chars().count() as u64 + 1);
            assert!(steps <= bound, "{steps} steps > {bound} for {pattern} ~ {path}");
        }
    }

    #[test]
    fn windows_matching_ignores_case() {
        assert!(is_match("SRC/*.ts", "src/a.TS", Platform::Windows));
    }

    #[rstest]
    #[case("/src/*.ts", Code::GlobAbsolute)]
    #[case("src\\*.ts", Code::GlobBackslash)]
    #[case("../src/*.ts", Code::GlobParentSegment)]
    #[case("src/../x", Code::GlobParentSegment)]
    #[case("src/a**", Code::GlobInvalid)]
    #[case("**.ts", Code::GlobInvalid)]
    fn refusals(#[case] pattern: &str, #[case] code: Code) {
        assert_eq!(validate(pattern).unwrap_err().0, code);
    }

    #[rstest]
    #[case("src/..x/*.ts")]
    #[case("./src/*.ts")]
    #[case("src//a.ts")]
    fn accepted_literally(#[case] pattern: &str) {
        assert!(validate(pattern).is_ok());
    }

    /// `validate` does not compile what it accepts: every pattern of up to four characters from
    /// an alphabet of globset's syntax that passes its checks compiles, on both platforms.
    #[test]
    fn the_checks_leave_nothing_globset_refuses() {
        let alphabet = ['a', '/', '*', '?', '[', ']', '{', '}', '!', '^', '-', ',', '.', '\\', 'é'];
        let mut patterns = vec![String::new()];
        let mut accepted = 0;
        for _ in 0..4 {
            patterns = patterns.iter().flat_map(|p| alphabet.iter().map(move |c| format!("{p}{c}"))).collect();
            for p in &patterns {
                if validate(p).is_ok() {
                    accepted += 1;
                    for platform in [Platform::Posix, Platform::Windows] {
                        assert!(compile(p, platform).is_ok(), "{p:?} passes the checks and globset refuses it");
                    }
                }
            }
        }
        assert!(accepted > 10_000, "only {accepted} patterns accepted: the search tries too little");
    }
}
