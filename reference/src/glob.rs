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
//! - matching is case-sensitive on POSIX and case-insensitive on Windows targets.

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
    compile(pattern, Platform::Posix).map(|_| ())
}

/// Escapes the characters globset would read as classes or alternations, so that only `*`, `**`
/// and `?` are special.
fn translate(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 4);
    for c in pattern.chars() {
        if matches!(c, '[' | ']' | '{' | '}') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn compile(pattern: &str, platform: Platform) -> Result<globset::Glob, (Code, String)> {
    GlobBuilder::new(&translate(pattern))
        .literal_separator(true)
        .backslash_escape(true)
        .case_insensitive(platform == Platform::Windows)
        .build()
        .map_err(|e| (Code::GlobInvalid, format!("glob '{pattern}' is not a glob ({})", e.kind())))
}

/// Collects the validated patterns of every conditional module of one discovery.
#[derive(Debug)]
pub struct RulesBuilder {
    platform: Platform,
    builder: GlobSetBuilder,
    owners: Vec<usize>,
}

impl RulesBuilder {
    /// An empty builder for `platform`'s case rules.
    pub fn new(platform: Platform) -> RulesBuilder {
        RulesBuilder { platform, builder: GlobSetBuilder::new(), owners: Vec::new() }
    }

    /// Adds module `owner`'s already validated patterns.
    pub fn add(&mut self, owner: usize, patterns: &[String]) -> Result<(), (Code, String)> {
        let globs = patterns.iter().map(|p| compile(p, self.platform)).collect::<Result<Vec<_>, _>>()?;
        for glob in globs {
            self.builder.add(glob);
            self.owners.push(owner);
        }
        Ok(())
    }

    /// Compiles every pattern into one set.
    pub fn build(self) -> CompiledRules {
        // Every glob was compiled alone already, so building the set cannot fail on a pattern;
        // should it fail anyway, matching nothing is the safe answer.
        let set = self.builder.build().unwrap_or_else(|_| GlobSet::empty());
        CompiledRules { set, owners: self.owners }
    }
}

/// The immutable, compiled `paths:` of every conditional module of one discovery.
#[derive(Debug, Clone)]
pub struct CompiledRules {
    set: GlobSet,
    owners: Vec<usize>,
}

impl CompiledRules {
    /// A set that matches nothing.
    pub fn empty() -> CompiledRules {
        CompiledRules { set: GlobSet::empty(), owners: Vec::new() }
    }

    /// The modules (by owner index) one of whose patterns matches `path`, each at most once, in
    /// ascending order.
    pub fn matching(&self, path: &RelPath, out: &mut Vec<usize>) {
        for glob in self.set.matches(path.as_str()) {
            if let Some(&owner) = self.owners.get(glob) {
                out.push(owner);
            }
        }
        out.sort_unstable();
        out.dedup();
    }

    /// The number of patterns in the set.
    pub fn len(&self) -> usize {
        self.owners.len()
    }

    /// Whether the set holds no pattern.
    pub fn is_empty(&self) -> bool {
        self.owners.is_empty()
    }
}

/// Matches `path` against `patterns` one at a time, compiling each: the slow path the benches
/// compare the compiled set with, and the obvious definition the fuzzer checks it against.
pub fn matches_one_at_a_time(patterns: &[String], path: &RelPath, platform: Platform) -> bool {
    patterns.iter().filter_map(|p| compile(p, platform).ok()).any(|g| g.compile_matcher().is_match(path.as_str()))
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
    fn posix_matching(#[case] pattern: &str, #[case] path: &str, #[case] want: bool) {
        validate(pattern).unwrap();
        assert_eq!(is_match(pattern, path, Platform::Posix), want, "{pattern} ~ {path}");
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
}
