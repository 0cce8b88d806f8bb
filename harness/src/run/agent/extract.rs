//! What an agent CLI put in front of the model, read from its requests. Each instruction file of
//! the case's tree (the root file, nested files, rule modules, and files of those names outside
//! the project) is looked for in every text of a request (system prompt, messages, tool results)
//! by its sent content — the file with its BOM and, for a rule module, its frontmatter stripped
//! (seed 000, "Format and discovery": "The sent content is the body with the frontmatter and a BOM
//! stripped"). A file found whole is reported whole; one found only with its surrounding
//! whitespace changed is reported as found; one of which only a prefix appears is reported with
//! that prefix, so a cut shows as a cut. Where each text sits (system prompt, first user message,
//! tool result, a separate system message) is kept for the report and never compared.
//!
//! The tree is walked from the sandbox, bounded (entries and depth) and without following folder
//! links; a file reached through a link is read only where the link resolves inside the sandbox,
//! so a case's hostile links never make the harness read elsewhere.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use super::api::{Place, Segment};

/// The most entries the walk looks at; a bigger tree is searched for its first ones only.
const MAX_ENTRIES: usize = 20_000;
/// The deepest folder the walk enters.
const MAX_DEPTH: usize = 40;
/// The most bytes read of one file: beyond every cap of the seeds (256 KiB), plus one.
const MAX_FILE_BYTES: u64 = (1 << 20) + 1;
/// The shortest prefix reported as a cut: shorter ones are too likely to occur by chance.
const MIN_PREFIX: usize = 48;

/// What kind of instruction file a candidate is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The instruction file at the project root.
    Root,
    /// An instruction file in a folder below the root, or outside the project.
    Nested,
    /// A Markdown file under the rules folder.
    Rule,
}

/// An instruction file of the tree, with what a loader would send of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Project-relative, /-form, in the agent's dialect (`../x/CLAUDE.md` outside the project).
    pub rel: String,
    /// Its kind.
    pub kind: Kind,
    /// Its sent content (BOM and, for a rule, frontmatter stripped), lossily decoded.
    pub sent: String,
}

/// A candidate found in a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The candidate's path.
    pub rel: String,
    /// Its kind.
    pub kind: Kind,
    /// What was found: the sent content, that content trimmed, or a prefix of it.
    pub content: String,
    /// Whether only a prefix of the content was found.
    pub cut: bool,
    /// Where the text sits.
    pub place: Place,
    /// The index of the text in the request and the byte offset in it of its first occurrence,
    /// for ordering.
    pub at: (usize, usize),
    /// How often it occurs (the reads' own output not counted): a conversation repeats its
    /// history, so a file sent again shows as one occurrence more than in the request before.
    pub count: usize,
    /// Where its last occurrence sits.
    pub last_place: Place,
    /// The text index and offset of its last occurrence.
    pub last_at: (usize, usize),
    /// The project path the text names just before its first and its last occurrence, where it
    /// names one of this file's name (`Contents of /root/pkg/CLAUDE.md:`): a file reached through
    /// a linked folder has the same content at two paths, and the CLI's own words tell which one
    /// it loaded.
    pub named: (Option<String>, Option<String>),
}

/// Lists the instruction files of the tree under `sandbox` whose project folder is `project`:
/// files named `names` anywhere (but in the rules folder and in the agent's HOME), and Markdown
/// files under `rules_dir`.
pub fn candidates(sandbox: &Path, project: &Path, names: &[&str], rules_dir: Option<&str>) -> Vec<Candidate> {
    let mut out = Vec::new();
    let mut seen = 0usize;
    let mut stack: Vec<(PathBuf, usize)> = vec![(sandbox.to_path_buf(), 0)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for entry in entries {
            seen += 1;
            if seen > MAX_ENTRIES {
                return out;
            }
            let path = entry.path();
            let Ok(kind) = entry.file_type() else { continue };
            let rel = relative(project, &path);
            // The agent's own HOME is the CLI's, not the case's.
            if rel.as_deref() == Some("../home") {
                continue;
            }
            if kind.is_dir() {
                if depth < MAX_DEPTH {
                    stack.push((path, depth + 1));
                }
                continue;
            }
            let Some(rel) = rel else { continue };
            let name = entry.file_name().to_string_lossy().into_owned();
            let rule = rules_dir.is_some_and(|d| rel.starts_with(&format!("{d}/"))) && name.ends_with(".md");
            let named = names.contains(&name.as_str()) && !rules_dir.is_some_and(|d| rel.starts_with(&format!("{d}/")));
            if !rule && !named {
                continue;
            }
            let Some(bytes) = read_inside(sandbox, &path) else { continue };
            let text = String::from_utf8_lossy(&bytes);
            let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
            let sent = if rule { body(text) } else { text.to_string() };
            let kind = if rule {
                Kind::Rule
            } else if !rel.contains('/') {
                Kind::Root
            } else {
                Kind::Nested
            };
            out.push(Candidate { rel, kind, sent });
        }
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    out
}

/// `path` relative to `project` in /-form, with `../` for the sandbox outside it.
fn relative(project: &Path, path: &Path) -> Option<String> {
    if let Ok(inside) = path.strip_prefix(project) {
        let parts: Vec<String> = inside.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        return (!parts.is_empty()).then(|| parts.join("/"));
    }
    let parent = project.parent()?;
    let inside = path.strip_prefix(parent).ok()?;
    let parts: Vec<String> = inside.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    Some(format!("../{}", parts.join("/")))
}

/// Reads a regular file (through links only where they resolve inside the sandbox), at most
/// [`MAX_FILE_BYTES`]; never opens a FIFO or a device.
fn read_inside(sandbox: &Path, path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let real = std::fs::canonicalize(path).ok()?;
    let sandbox = std::fs::canonicalize(sandbox).ok()?;
    if !real.starts_with(&sandbox) || real.components().any(|c| c == Component::ParentDir) {
        return None;
    }
    let meta = std::fs::metadata(&real).ok()?;
    if !meta.is_file() {
        return None;
    }
    let file = std::fs::File::open(&real).ok()?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// A rule module's body: the text after a closing `---` line when it opens with `---`, else the
/// whole text (an unterminated block is looked for whole).
fn body(text: &str) -> String {
    let first = text.split_inclusive('\n').next().unwrap_or("");
    if first.trim_end() != "---" {
        return text.to_string();
    }
    let mut offset = first.len();
    for line in text.get(first.len()..).unwrap_or("").split_inclusive('\n') {
        offset += line.len();
        if line.trim_end() == "---" {
            return text.get(offset..).unwrap_or("").to_string();
        }
    }
    text.to_string()
}

/// Finds each candidate in the request's texts, ordered by where it first appears. `reads` names
/// the files the last batch read with the CLI's own tool, each with how often: so many of the
/// file's occurrences in tool results are that read's output, not an instruction, and are not
/// counted.
pub fn find(
    candidates: &[Candidate],
    segments: &[Segment],
    reads: &BTreeMap<String, usize>,
    project: &Path,
) -> Vec<Found> {
    let mut out = Vec::new();
    for c in candidates {
        if let Some(mut f) = find_one(c, segments, reads.get(&c.rel).copied().unwrap_or(0)) {
            let name = c.rel.rsplit('/').next().unwrap_or("");
            f.named = (named(segments, f.at, project, name), named(segments, f.last_at, project, name));
            out.push(f);
        }
    }
    out.sort_by_key(|f| f.at);
    out
}

/// Every occurrence of `content`: (text index, offset, place).
fn occurrences(segments: &[Segment], content: &str) -> Vec<(usize, usize, Place)> {
    let mut out = Vec::new();
    for (i, s) in segments.iter().enumerate().filter(|(_, s)| s.place != Place::Assistant) {
        for (off, _) in s.text.match_indices(content) {
            out.push((i, off, s.place));
        }
    }
    out
}

/// How far before a file's text its path is looked for.
const NAMED_WITHIN: usize = 512;

/// The project path of a file named `name` that the text names last before `at`, within
/// [`NAMED_WITHIN`] bytes.
fn named(segments: &[Segment], at: (usize, usize), project: &Path, name: &str) -> Option<String> {
    let text = &segments.get(at.0)?.text;
    let mut from = at.1.saturating_sub(NAMED_WITHIN);
    while !text.is_char_boundary(from) {
        from += 1;
    }
    let before = text.get(from..at.1)?;
    let root = format!("{}/", project.parent()?.to_string_lossy());
    let start = before.rfind(&root)?;
    let token: String = before
        .get(start..)?
        .chars()
        .take_while(|c| !c.is_whitespace() && !matches!(c, ':' | '(' | ')' | '"' | '\'' | '<' | '>' | '`' | ','))
        .collect();
    if !token.ends_with(&format!("/{name}")) {
        return None;
    }
    relative(project, Path::new(&token))
}

fn find_one(c: &Candidate, segments: &[Segment], reads: usize) -> Option<Found> {
    let found = |content: &str, cut: bool| -> Option<Found> {
        let mut all = occurrences(segments, content);
        // The earliest tool-result occurrences are the reads' own output.
        let mut skip = reads;
        all.retain(|(_, _, place)| {
            if skip > 0 && *place == Place::ToolResult {
                skip -= 1;
                false
            } else {
                true
            }
        });
        let (first, last) = (*all.first()?, *all.last()?);
        Some(Found {
            rel: c.rel.clone(),
            kind: c.kind,
            content: content.to_string(),
            cut,
            place: first.2,
            at: (first.0, first.1),
            count: all.len(),
            last_place: last.2,
            last_at: (last.0, last.1),
            named: (None, None),
        })
    };
    if c.sent.trim().is_empty() {
        return None;
    }
    // The model's own turns (the scripted calls' arguments) are not what the CLI loaded.
    let appears_at_all = |t: &str| segments.iter().any(|s| s.place != Place::Assistant && s.text.contains(t));
    if appears_at_all(&c.sent) {
        return found(&c.sent, false);
    }
    let trimmed = c.sent.trim();
    if appears_at_all(trimmed) {
        return found(trimmed, false);
    }
    // The longest prefix that appears: appearing is monotone in the prefix's length, so a binary
    // search over character boundaries finds it.
    let bounds: Vec<usize> = trimmed.char_indices().map(|(i, _)| i).skip(1).collect();
    let (mut lo, mut hi) = (0usize, bounds.len());
    let appears = |n: usize| bounds.get(n).and_then(|&b| trimmed.get(..b)).is_some_and(appears_at_all);
    if !appears(0) {
        return None;
    }
    while lo + 1 < hi {
        let mid = (lo + hi) / 2;
        if appears(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let prefix = bounds.get(lo).and_then(|&b| trimmed.get(..b))?;
    if prefix.len() < MIN_PREFIX {
        return None;
    }
    found(prefix, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(place: Place, text: &str) -> Segment {
        Segment { place, message: 0, text: text.into() }
    }

    fn cand(rel: &str, sent: &str) -> Candidate {
        Candidate { rel: rel.into(), kind: Kind::Nested, sent: sent.into() }
    }

    #[test]
    fn a_whole_file_is_found_where_it_sits() {
        let segs = [seg(Place::System, "sys"), seg(Place::ToolResult, "x\nContents of a:\nNested rules\nend")];
        let f = find(&[cand("src/AGENTS.md", "Nested rules\n")], &segs, &BTreeMap::new(), Path::new("/p/project"));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].content, "Nested rules\n");
        assert_eq!(f[0].place, Place::ToolResult);
        assert!(!f[0].cut);
    }

    #[test]
    fn a_file_found_only_trimmed_is_reported_trimmed() {
        let f = find(
            &[cand("a", "\nRules here\n\n")],
            &[seg(Place::System, "<x>Rules here</x>")],
            &BTreeMap::new(),
            Path::new("/p/project"),
        );
        assert_eq!(f[0].content, "Rules here");
    }

    #[test]
    fn a_cut_file_is_reported_with_its_prefix() {
        let content = "é".repeat(100);
        let shown = format!("start {} end", "é".repeat(60));
        let f =
            find(&[cand("big", &content)], &[seg(Place::FirstUser, &shown)], &BTreeMap::new(), Path::new("/p/project"));
        assert_eq!(f[0].content, "é".repeat(60));
        assert!(f[0].cut);
    }

    #[test]
    fn a_short_chance_prefix_is_not_a_find() {
        assert!(find(
            &[cand("a", "General rules for everything\n")],
            &[seg(Place::System, "General")],
            &BTreeMap::new(),
            Path::new("/p/project")
        )
        .is_empty());
    }

    #[test]
    fn files_are_ordered_by_where_they_appear() {
        let segs = [seg(Place::System, "B then A")];
        let f = find(&[cand("a", "A"), cand("b", "B")], &segs, &BTreeMap::new(), Path::new("/p/project"));
        assert_eq!(f.iter().map(|f| f.rel.as_str()).collect::<Vec<_>>(), ["b", "a"]);
    }

    #[test]
    fn the_path_the_cli_names_before_a_text_is_the_path_it_loaded() {
        let segs = [seg(Place::User, "Contents of /p/project/pkg/CLAUDE.md (project instructions):\n\nPkg rules\n")];
        let f = find(&[cand("real/pkg/CLAUDE.md", "Pkg rules\n")], &segs, &BTreeMap::new(), Path::new("/p/project"));
        assert_eq!(f[0].named.1.as_deref(), Some("pkg/CLAUDE.md"));
        let other = [seg(Place::User, "Contents of /p/project/pkg/notes.md:\n\nPkg rules\n")];
        let f = find(&[cand("real/pkg/CLAUDE.md", "Pkg rules\n")], &other, &BTreeMap::new(), Path::new("/p/project"));
        assert_eq!(f[0].named.1, None);
    }

    #[test]
    fn a_files_occurrences_are_counted_and_a_reads_own_output_is_not() {
        let segs = [
            seg(Place::System, "Contents of AGENTS.md: Root rules"),
            seg(Place::ToolResult, "1\tRoot rules"),
            seg(Place::User, "again: Root rules"),
        ];
        let c = [cand("AGENTS.md", "Root rules")];
        let f = find(&c, &segs, &BTreeMap::new(), Path::new("/p/project"));
        assert_eq!((f[0].count, f[0].last_place), (3, Place::User));
        let reads = BTreeMap::from([("AGENTS.md".to_string(), 1)]);
        assert_eq!(find(&c, &segs, &reads, Path::new("/p/project"))[0].count, 2);
    }

    #[rstest::rstest]
    #[case("---\npaths: [x]\n---\nBody\n", "Body\n")]
    #[case("---\r\npaths: [x]\r\n---\r\nBody\r\n", "Body\r\n")]
    #[case("No frontmatter\n", "No frontmatter\n")]
    #[case("---\nunterminated\n", "---\nunterminated\n")]
    fn a_rule_is_looked_for_by_its_body(#[case] text: &str, #[case] sent: &str) {
        assert_eq!(body(text), sent);
    }

    #[test]
    fn the_walk_finds_names_and_rules_and_reads_no_link_out_of_the_sandbox() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.md"), "SECRET").unwrap();
        let sandbox = tempfile::tempdir().unwrap();
        let project = sandbox.path().join("project");
        std::fs::create_dir_all(project.join("src")).unwrap();
        std::fs::create_dir_all(project.join(".claude/rules")).unwrap();
        std::fs::create_dir_all(sandbox.path().join("home")).unwrap();
        std::fs::write(project.join("CLAUDE.md"), "\u{feff}root").unwrap();
        std::fs::write(project.join("src/CLAUDE.md"), "nested").unwrap();
        std::fs::write(project.join(".claude/rules/a.md"), "---\npaths: [x]\n---\nrule").unwrap();
        std::fs::write(sandbox.path().join("home/CLAUDE.md"), "the CLI's own").unwrap();
        std::fs::create_dir_all(project.join("docs")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.md"), project.join("docs/CLAUDE.md")).unwrap();
        let got = candidates(sandbox.path(), &project, &["CLAUDE.md"], Some(".claude/rules"));
        let got: Vec<(&str, Kind, &str)> = got.iter().map(|c| (c.rel.as_str(), c.kind, c.sent.as_str())).collect();
        assert_eq!(
            got,
            [
                (".claude/rules/a.md", Kind::Rule, "rule"),
                ("CLAUDE.md", Kind::Root, "root"),
                ("src/CLAUDE.md", Kind::Nested, "nested")
            ]
        );
    }
}
