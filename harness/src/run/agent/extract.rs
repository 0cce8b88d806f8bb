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

use std::collections::{BTreeMap, HashMap};

use aho_corasick::AhoCorasick;
use std::path::{Component, Path, PathBuf};

use super::api::{Place, Segment};

/// The most entries the walk looks at; a bigger tree is searched for its first ones only.
const MAX_ENTRIES: usize = 20_000;
/// The deepest folder the walk enters.
pub(crate) const MAX_DEPTH: usize = 40;
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
    /// The project path the text names just before its first and its last occurrence, where that
    /// is another path of the same file (`Contents of /root/pkg/CLAUDE.md:` for a file reached
    /// through a linked folder, a linked rule named by its target): the CLI's own words tell
    /// which path it loaded.
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
///
/// An occurrence is the candidate's only where the text does not say it is another file's: the
/// path a CLI names last before a text (`Contents of /root/src/CLAUDE.md:`, `--- Context from:
/// src/GEMINI.md ---`) decides whose it is. Named as this candidate, or as a path that is the
/// same file through a link, it counts; named as another file, it does not; named as nothing, it
/// counts only when the text is long enough not to occur by chance ([`MIN_UNNAMED`]), so that
/// `# C` is not found in a system prompt and two files with one content are told apart.
///
/// The texts are searched once for every candidate together (a tree has thousands of rule
/// modules, a request megabytes of text): each candidate's content begins with a short key, and
/// only where a key occurs is the whole content compared.
pub fn find(
    candidates: &[Candidate],
    segments: &[Segment],
    reads: &BTreeMap<String, usize>,
    project: &Path,
) -> Vec<Found> {
    let names = Names::new(candidates, project);
    let hits = Hits::new(candidates, segments);
    let mut out = Vec::new();
    for (k, c) in candidates.iter().enumerate() {
        let reads = reads.get(&c.rel).copied().unwrap_or(0);
        if let Some(f) = find_one(c, segments, hits.of(k), reads, &names) {
            out.push(f);
        }
    }
    out.sort_by_key(|f| f.at);
    out
}

/// The shortest text counted where the request names no file before it, unless it is the whole
/// body of a markup element ([`enclosed`]).
pub const MIN_UNNAMED: usize = 40;

/// Whether `content`, which `rest` begins with and `before` precedes, is the whole body of a
/// markup element: the last line before it is an opening tag (`<context name="userRules">`) and,
/// past whitespace, a closing tag follows. A CLI that wraps a file's text in an element of its
/// own names no file, but the element's bounds say where the text begins and ends: a short text
/// that fills one is a file's as surely as a long one (Continue sends a root file this way).
fn enclosed(before: &str, content: &str, rest: &str) -> bool {
    if content.is_empty() {
        return false;
    }
    let head = before.trim_end_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    let line = head.rfind('\n').map_or(head, |n| head.get(n + 1..).unwrap_or("")).trim_start();
    let opens = line.len() > 2
        && line.starts_with('<')
        && line.ends_with('>')
        && !line.starts_with("</")
        && !line.starts_with("<!")
        && !line.ends_with("/>");
    let after = rest.get(content.len()..).unwrap_or("").trim_start();
    opens && after.starts_with("</")
}

/// How far before a file's text its path is looked for.
const NAMED_WITHIN: usize = 512;

/// Where each candidate's key (the start of its trimmed content, at most [`MIN_PREFIX`] bytes)
/// occurs in the texts outside the model's own turns: every content, trimmed or not, and every
/// prefix long enough to report as a cut holds its key at a known offset, so these are the only
/// places any of them can occur.
struct Hits {
    /// For each candidate, the index of its key in `at` (none for a blank file).
    key: Vec<Option<usize>>,
    /// For each key, its occurrences (text index, offset), in order, overlapping ones included.
    at: Vec<Vec<(usize, usize)>>,
}

impl Hits {
    fn new(candidates: &[Candidate], segments: &[Segment]) -> Hits {
        let mut keys: Vec<&str> = Vec::new();
        let mut index = HashMap::new();
        let key = candidates
            .iter()
            .map(|c| {
                let key = floor(js_trim(&c.sent), MIN_PREFIX);
                (!key.is_empty()).then(|| {
                    *index.entry(key).or_insert_with(|| {
                        keys.push(key);
                        keys.len() - 1
                    })
                })
            })
            .collect();
        let mut at = vec![Vec::new(); keys.len()];
        if let Ok(ac) = AhoCorasick::new(&keys) {
            for (i, s) in segments.iter().enumerate().filter(|(_, s)| s.place != Place::Assistant) {
                for m in ac.find_overlapping_iter(&s.text) {
                    if let Some(list) = at.get_mut(m.pattern().as_usize()) {
                        list.push((i, m.start()));
                    }
                }
            }
        }
        Hits { key, at }
    }

    fn of(&self, candidate: usize) -> &[(usize, usize)] {
        self.key.get(candidate).copied().flatten().and_then(|k| self.at.get(k)).map_or(&[], Vec::as_slice)
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends at a character boundary.
fn floor(s: &str, max: usize) -> &str {
    let mut end = max.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.get(..end).unwrap_or("")
}

/// The occurrences of `content`, which holds the key of `hits` at byte `pre`, as
/// [`str::match_indices`] finds them in each text: left to right, none overlapping the one before.
fn occurrences_at(
    segments: &[Segment],
    hits: &[(usize, usize)],
    content: &str,
    pre: usize,
) -> Vec<(usize, usize, Place)> {
    let mut out: Vec<(usize, usize, Place)> = Vec::new();
    let mut free = (usize::MAX, 0usize);
    for &(i, hit) in hits {
        let Some(off) = hit.checked_sub(pre) else { continue };
        let Some(s) = segments.get(i) else { continue };
        if i == free.0 && off < free.1 {
            continue;
        }
        if s.text.get(off..).is_some_and(|t| t.starts_with(content)) {
            out.push((i, off, s.place));
            free = (i, off + content.len().max(1));
        }
    }
    out
}

/// The paths a request may name files by.
struct Names<'a> {
    project: &'a Path,
    /// The candidates, by their project path.
    by_rel: HashMap<&'a str, &'a Candidate>,
    /// The project paths a path can hold whole (every character one that may stand in a path),
    /// looked up by token; the others are searched for one by one.
    odd: Vec<&'a str>,
    /// The sandbox's absolute prefix (`/tmp/x/`).
    sandbox: Option<String>,
}

/// Whether `c` may stand in a path.
fn path_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | '~' | '+' | '@')
}

impl<'a> Names<'a> {
    fn new(candidates: &'a [Candidate], project: &'a Path) -> Names<'a> {
        let by_rel = candidates.iter().map(|c| (c.rel.as_str(), c)).collect();
        let odd = candidates.iter().map(|c| c.rel.as_str()).filter(|r| !r.chars().all(path_char)).collect();
        let sandbox = project.parent().map(|p| format!("{}/", p.to_string_lossy()));
        Names { project, by_rel, odd, sandbox }
    }

    /// The project path named last before `off` in `text` (within [`NAMED_WITHIN`] bytes).
    fn before(&self, text: &str, off: usize) -> Option<String> {
        let mut from = off.saturating_sub(NAMED_WITHIN);
        while !text.is_char_boundary(from) {
            from += 1;
        }
        let window = text.get(from..off)?;
        let mut best: Option<(usize, String)> = None;
        let mut consider = |end: usize, rel: &str| {
            if best.as_ref().is_none_or(|(e, _)| end > *e) {
                best = Some((end, rel.to_string()));
            }
        };
        // An absolute path in the sandbox, whatever it names (a linked folder's path too).
        if let Some(prefix) = &self.sandbox {
            for (start, _) in window.match_indices(prefix.as_str()) {
                let token: String = window.get(start..).unwrap_or("").chars().take_while(|c| path_char(*c)).collect();
                if let Some(rel) = relative(self.project, Path::new(&token)) {
                    consider(start + token.len(), &rel);
                }
            }
        }
        // A candidate's project path, standing alone: it starts a run of path characters and
        // ends it or ends before a `.` (`src/AGENTS.md.` at the end of a sentence).
        let mut start = None;
        for (i, ch) in window.char_indices().chain(std::iter::once((window.len(), ' '))) {
            match (path_char(ch), start) {
                (true, None) => start = Some(i),
                (false, Some(s)) => {
                    let token = window.get(s..i).unwrap_or("");
                    let ends = token.match_indices('.').map(|(d, _)| d).chain(std::iter::once(token.len()));
                    for end in ends {
                        if let Some(c) = token.get(..end).and_then(|rel| self.by_rel.get(rel)) {
                            consider(s + end, &c.rel);
                        }
                    }
                    start = None;
                }
                _ => {}
            }
        }
        for rel in &self.odd {
            for (start, _) in window.match_indices(rel) {
                let alone_before =
                    window.get(..start).and_then(|b| b.chars().next_back()).is_none_or(|c| !path_char(c));
                let alone_after = window
                    .get(start + rel.len()..)
                    .and_then(|a| a.chars().next())
                    .is_none_or(|c| !path_char(c) || c == '.');
                if alone_before && alone_after {
                    consider(start + rel.len(), rel);
                }
            }
        }
        best.map(|(_, rel)| rel)
    }

    /// Whether an occurrence named `named` (or nothing) of `content`, which `rest` begins with and
    /// `before` precedes, is `c`'s, and by which path.
    fn owns(
        &self,
        c: &Candidate,
        named: Option<String>,
        content: &str,
        before: &str,
        rest: &str,
    ) -> Option<Option<String>> {
        match named {
            None => (content.trim().len() >= MIN_UNNAMED || enclosed(before, content, rest)).then_some(None),
            Some(p) if p == c.rel => Some(None),
            Some(p) => match self.by_rel.get(p.as_str()) {
                // A root file's text under another root file's name, where that file's own text
                // is not what follows: a CLI's fixed header for whichever root file it took
                // (Codex heads AGENTS.override.md's text `# AGENTS.md instructions for <cwd>`).
                Some(other) if other.kind == Kind::Root && c.kind == Kind::Root => {
                    let theirs = js_trim(&other.sent);
                    (!theirs.is_empty() && !rest.starts_with(theirs)).then_some(None)
                }
                Some(_) => None,
                // Another path of the same file: through a linked folder, or a link's target
                // (Claude Code names a linked rule by where it points).
                None => {
                    let real = |rel: &str| std::fs::canonicalize(self.project.join(rel)).ok();
                    (real(&p).is_some() && real(&p) == real(&c.rel)).then_some(Some(p))
                }
            },
        }
    }
}

/// Text that must never reach the model (a case's canaries) where a request holds it outside the
/// model's own turns, whatever file it came from — also one the tree walk does not enter (below a
/// folder link, outside the sandbox): (what the CLI names it by, or where it sits; the line it
/// is on; the text index and the offset of that line), in the order they appear.
pub fn leaks(canaries: &[String], segments: &[Segment], project: &Path) -> Vec<(String, String, (usize, usize))> {
    let names = Names::new(&[], project);
    let mut out = Vec::new();
    // One leak per line: two canaries on one line (or one canary that is a prefix of another,
    // `CANARY-1` in `CANARY-1B`) are one text that reached the model, not two.
    let mut lines = std::collections::BTreeSet::new();
    for canary in canaries.iter().filter(|c| !c.is_empty()) {
        for (i, off, place) in occurrences(segments, canary) {
            let Some(text) = segments.get(i).map(|s| s.text.as_str()) else { continue };
            let start = text.get(..off).and_then(|t| t.rfind('\n')).map_or(0, |n| n + 1);
            if !lines.insert((i, start)) {
                continue;
            }
            let label = names.before(text, off).unwrap_or_else(|| format!("(text in the {place})"));
            let end = text.get(off..).and_then(|t| t.find('\n')).map_or(text.len(), |n| off + n);
            out.push((label, text.get(start..end).unwrap_or("").to_string(), (i, start)));
        }
    }
    out.sort_by_key(|l| l.2);
    out
}

/// Every occurrence of `content`: (text index, offset, place), the model's own turns aside.
fn occurrences(segments: &[Segment], content: &str) -> Vec<(usize, usize, Place)> {
    let mut out = Vec::new();
    for (i, s) in segments.iter().enumerate().filter(|(_, s)| s.place != Place::Assistant) {
        for (off, _) in s.text.match_indices(content) {
            out.push((i, off, s.place));
        }
    }
    out
}

/// Whether the text at `off` follows a line number on its line (`     5\t`, `5→`): a line of a
/// numbered view of a file.
fn numbered(text: &str, off: usize) -> bool {
    let before = text.get(..off).unwrap_or("");
    let line = before.rfind('\n').map_or(before, |n| before.get(n + 1..).unwrap_or(""));
    let Some(number) = line.strip_suffix('\t').or_else(|| line.strip_suffix('→')) else { return false };
    let digits = number.trim_start_matches(' ');
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// The candidates `segments` show as a line-numbered view outside a tool result, named by their
/// path: a CLI's note that a file it read changed on disk (Claude Code's `Note: <path> was
/// modified ... (shown with line numbers)`). [`find`] never counts such a view as a send; this
/// is for telling the reader that the model saw it. A candidate is shown when the first line of
/// its sent content follows a line number and its path occurs in the same text.
pub fn views<'c>(candidates: &'c [Candidate], segments: &[Segment]) -> Vec<&'c str> {
    // Only a text with a numbered line can show a view (most texts have none).
    let viewing: Vec<&Segment> = segments
        .iter()
        .filter(|s| s.place != Place::ToolResult)
        .filter(|s| s.text.match_indices(['\t', '→']).any(|(off, mark)| numbered(&s.text, off + mark.len())))
        .collect();
    let shown = |c: &Candidate| {
        let Some(line) = js_trim(&c.sent).lines().next().map(str::trim_end) else { return false };
        !line.is_empty()
            && viewing
                .iter()
                .filter(|s| s.text.contains(c.rel.as_str()))
                .any(|s| s.text.match_indices(line).any(|(off, _)| numbered(&s.text, off)))
    };
    candidates.iter().filter(|c| shown(c)).map(|c| c.rel.as_str()).collect()
}

/// The trim a CLI written in JavaScript makes (`String.prototype.trim` also drops U+FEFF).
pub(crate) fn js_trim(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}')
}

fn find_one(
    c: &Candidate,
    segments: &[Segment],
    hits: &[(usize, usize)],
    reads: usize,
    names: &Names<'_>,
) -> Option<Found> {
    let text = |i: usize| segments.get(i).map_or("", |s| s.text.as_str());
    // The occurrences of `content` (which holds the key at byte `pre`) that are `c`'s, each with
    // the path it is named by.
    let owned = |content: &str, pre: usize| -> Vec<(usize, usize, Place, Option<String>)> {
        let mut all: Vec<(usize, usize, Place, Option<String>)> = occurrences_at(segments, hits, content, pre)
            .into_iter()
            .filter_map(|(i, off, place)| {
                let named = names.before(text(i), off);
                let before = text(i).get(..off).unwrap_or("");
                let rest = text(i).get(off..).unwrap_or("");
                names.owns(c, named, content, before, rest).map(|alias| (i, off, place, alias))
            })
            .collect();
        // The earliest tool-result occurrences that no path heads are the reads' own output (a
        // CLI heads what it attaches with the file's path, not what its read tool returns). A
        // line-numbered view of a file is never a send: a read's output (Claude Code's `1\t# C`)
        // or the CLI's note that a file it read changed on disk shows the file's raw lines,
        // frontmatter and all, not its sent content.
        let mut skip = reads;
        let marks: Vec<(bool, bool)> = all
            .iter()
            .map(|(i, off, _, _)| (names.before(text(*i), *off).is_some(), numbered(text(*i), *off)))
            .collect();
        let mut index = 0;
        all.retain(|(_, _, place, _)| {
            let (headed, numbered) = marks.get(index).copied().unwrap_or((false, false));
            index += 1;
            if skip > 0 && *place == Place::ToolResult && !headed {
                skip -= 1;
                false
            } else {
                !numbered
            }
        });
        all
    };
    let found = |content: &str, cut: bool, all: Vec<(usize, usize, Place, Option<String>)>| -> Option<Found> {
        let first = all.first()?.clone();
        let last = all.last()?.clone();
        // A byte order mark just before the whole sent content is the file's own, sent with it:
        // part of what the model got (the sent content has none, so the difference shows). Before
        // a trimmed text it is whitespace changed, which the trimmed report already says.
        let bom = content == c.sent
            && !content.starts_with('\u{feff}')
            && text(first.0).get(..first.1).is_some_and(|b| b.ends_with('\u{feff}'));
        Some(Found {
            rel: c.rel.clone(),
            kind: c.kind,
            content: if bom { format!("\u{feff}{content}") } else { content.to_string() },
            cut,
            place: first.2,
            at: (first.0, first.1),
            count: all.len(),
            last_place: last.2,
            last_at: (last.0, last.1),
            named: (first.3, last.3),
        })
    };
    let trimmed = js_trim(&c.sent);
    if trimmed.is_empty() {
        // A blank file has no text to find: it was sent where the request heads a text with its
        // absolute path (`Contents of /…/CLAUDE.md:` or `… (project instructions):`, and nothing
        // after), outside the model's own turns; a tool's own report of the path is not a send.
        let abs = names.project.join(&c.rel).to_string_lossy().into_owned();
        let all: Vec<(usize, usize, Place, Option<String>)> = occurrences(segments, &abs)
            .into_iter()
            .filter(|(i, off, _)| {
                let after = text(*i).get(off + abs.len()..).unwrap_or("");
                after.starts_with(':') || after.starts_with(" (")
            })
            .map(|(i, off, place)| (i, off, place, None))
            .collect();
        if !all.is_empty() {
            return found(&c.sent, false, all);
        }
        // Or, whitespace and all, as the whole body of a markup element (Continue's
        // `<context name="userRules">`).
        let all: Vec<(usize, usize, Place, Option<String>)> = occurrences(segments, &c.sent)
            .into_iter()
            .filter(|(i, off, _)| {
                let t = text(*i);
                enclosed(t.get(..*off).unwrap_or(""), &c.sent, t.get(*off..).unwrap_or(""))
            })
            .map(|(i, off, place)| (i, off, place, None))
            .collect();
        return found(&c.sent, false, all);
    }
    if hits.is_empty() {
        return None;
    }
    for variant in [c.sent.as_str(), c.sent.trim(), trimmed] {
        let pre = variant.len() - js_trim_start(variant).len();
        let all = owned(variant, pre);
        if !all.is_empty() {
            return found(variant, false, all);
        }
    }
    // The longest prefix that appears anywhere: the longest common prefix of the content and the
    // text at any of its key's occurrences, shortened to a character boundary. A prefix is
    // shorter than the whole content (which was looked for above).
    let longest = hits
        .iter()
        .map(|&(i, off)| {
            let at = text(i).as_bytes().get(off..).unwrap_or(&[]);
            at.iter().zip(trimmed.as_bytes()).take_while(|(a, b)| a == b).count()
        })
        .max()
        .unwrap_or(0);
    let end = trimmed.char_indices().map(|(i, _)| i).skip(1).take_while(|&i| i <= longest).last()?;
    let prefix = trimmed.get(..end)?;
    if prefix.len() < MIN_PREFIX {
        return None;
    }
    found(prefix, true, owned(prefix, 0))
}

/// [`js_trim`] at the start only.
fn js_trim_start(s: &str) -> &str {
    s.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{feff}')
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

    fn none() -> BTreeMap<String, usize> {
        BTreeMap::new()
    }

    const P: &str = "/p/project";

    /// The dialect refuses a case with a file deeper than this (dialect.rs): the walk must find
    /// every file at that bound and none past it.
    #[test]
    fn the_walk_finds_files_down_to_max_depth_segments_below_the_project() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("project");
        let deepest = format!("{}AGENTS.md", "d/".repeat(MAX_DEPTH - 1));
        let past = format!("{}AGENTS.md", "d/".repeat(MAX_DEPTH));
        for rel in [&deepest, &past] {
            let path = project.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, "# Deep\n").unwrap();
        }
        let found: Vec<String> =
            candidates(dir.path(), &project, &["AGENTS.md"], None).into_iter().map(|c| c.rel).collect();
        assert_eq!(found, [deepest]);
    }

    #[test]
    fn a_named_file_is_found_where_it_sits() {
        let segs = [
            seg(Place::System, "sys"),
            seg(Place::ToolResult, "x\nContents of /p/project/src/AGENTS.md:\nNested rules\nend"),
        ];
        let f = find(&[cand("src/AGENTS.md", "Nested rules\n")], &segs, &none(), Path::new(P));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].content, "Nested rules\n");
        assert_eq!(f[0].place, Place::ToolResult);
        assert!(!f[0].cut);
    }

    #[test]
    fn a_short_text_named_as_nothing_or_as_another_file_is_not_a_find() {
        let c = [cand("src/AGENTS.md", "# C\n"), cand("docs/AGENTS.md", "# D\n")];
        let segs =
            [seg(Place::System, "Use # C\n style."), seg(Place::User, "--- Context from: docs/AGENTS.md ---\n# C\n")];
        assert!(find(&c, &segs, &none(), Path::new(P)).is_empty());
        let named = [seg(Place::User, "--- Context from: src/AGENTS.md ---\n# C\n")];
        assert_eq!(find(&c, &named, &none(), Path::new(P))[0].rel, "src/AGENTS.md");
    }

    #[test]
    fn two_files_with_one_content_are_told_apart_by_the_path_named_before_it() {
        let body = "The same forty-odd bytes of rules, word for word.\n";
        let c = [cand(".claude/rules/a.md", body), cand(".claude/rules/b.md", body)];
        let segs = [seg(Place::User, &format!("Contents of /p/project/.claude/rules/b.md:\n{body}"))];
        let f = find(&c, &segs, &none(), Path::new(P));
        assert_eq!(f.iter().map(|f| f.rel.as_str()).collect::<Vec<_>>(), [".claude/rules/b.md"]);
    }

    #[test]
    fn a_blank_file_is_found_where_its_path_is_named() {
        let c = [cand("src/AGENTS.md", "  \n")];
        let named = [seg(Place::User, "Contents of /p/project/src/AGENTS.md:\n\n")];
        assert_eq!(find(&c, &named, &none(), Path::new(P))[0].content, "  \n");
        let longer = [seg(Place::User, "Contents of /p/project/src/AGENTS.md.bak:\n\n")];
        assert!(find(&c, &longer, &none(), Path::new(P)).is_empty());
        let reported = [seg(Place::ToolResult, "wrote 0 bytes to /p/project/src/AGENTS.md")];
        assert!(find(&c, &reported, &none(), Path::new(P)).is_empty());
    }

    #[test]
    fn a_long_text_named_as_nothing_is_found() {
        let body = "A rule long enough not to occur by chance anywhere.\n";
        let f = find(&[cand("AGENTS.md", body)], &[seg(Place::FirstUser, body)], &none(), Path::new(P));
        assert_eq!(f.len(), 1);
    }

    #[test]
    fn a_file_found_only_trimmed_is_reported_trimmed() {
        let segs = [seg(Place::System, "Contents of /p/project/a/AGENTS.md:\n<x>\u{feff}Rules here</x>")];
        let f = find(&[cand("a/AGENTS.md", "\u{feff}\nRules here\n\n")], &segs, &none(), Path::new(P));
        assert_eq!(f[0].content, "Rules here");
        let f = find(
            &[cand("a/AGENTS.md", "\nRules here\u{feff}\n")],
            &[seg(Place::System, "a/AGENTS.md: Rules here!")],
            &none(),
            Path::new(P),
        );
        assert_eq!(f[0].content, "Rules here");
    }

    #[test]
    fn a_cut_file_is_reported_with_its_prefix() {
        let content = "é".repeat(100);
        let shown = format!("Contents of /p/project/big/AGENTS.md: {} end", "é".repeat(60));
        let f = find(&[cand("big/AGENTS.md", &content)], &[seg(Place::FirstUser, &shown)], &none(), Path::new(P));
        assert_eq!(f[0].content, "é".repeat(60));
        assert!(f[0].cut);
    }

    #[test]
    fn a_short_chance_prefix_is_not_a_find() {
        let segs = [seg(Place::System, "a/AGENTS.md: General")];
        assert!(find(&[cand("a/AGENTS.md", "General rules for everything\n")], &segs, &none(), Path::new(P)).is_empty());
    }

    #[test]
    fn files_are_ordered_by_where_they_appear() {
        let segs = [seg(Place::System, "b/AGENTS.md: B then a/AGENTS.md: A")];
        let f = find(&[cand("a/AGENTS.md", "A"), cand("b/AGENTS.md", "B")], &segs, &none(), Path::new(P));
        assert_eq!(f.iter().map(|f| f.rel.as_str()).collect::<Vec<_>>(), ["b/AGENTS.md", "a/AGENTS.md"]);
    }

    #[test]
    fn the_path_the_cli_names_before_a_text_is_the_path_it_loaded() {
        let sandbox = tempfile::tempdir().unwrap();
        let project = sandbox.path().join("project");
        std::fs::create_dir_all(project.join("real/pkg")).unwrap();
        std::fs::write(project.join("real/pkg/CLAUDE.md"), "Pkg rules\n").unwrap();
        std::os::unix::fs::symlink(project.join("real/pkg"), project.join("pkg")).unwrap();
        let text = format!("Contents of {}/pkg/CLAUDE.md (project instructions):\n\nPkg rules\n", project.display());
        let f = find(&[cand("real/pkg/CLAUDE.md", "Pkg rules\n")], &[seg(Place::User, &text)], &none(), &project);
        assert_eq!(f[0].named.1.as_deref(), Some("pkg/CLAUDE.md"));
        let other = format!("Contents of {}/pkg/notes.md:\n\nPkg rules\n", project.display());
        assert!(find(&[cand("real/pkg/CLAUDE.md", "Pkg rules\n")], &[seg(Place::User, &other)], &none(), &project)
            .is_empty());
    }

    #[test]
    fn a_files_occurrences_are_counted_and_a_reads_own_output_is_not() {
        let body = "Root rules, long enough to be counted where nothing names them.";
        let segs = [
            seg(Place::System, &format!("Contents of AGENTS.md: {body}")),
            seg(Place::ToolResult, body),
            seg(Place::ToolResult, &format!("then AGENTS.md: {body}")),
            seg(Place::User, &format!("again AGENTS.md: {body}")),
            // A line-numbered view is a read's output however it arrives: never a send.
            seg(Place::User, &format!("1\t{body}")),
        ];
        let c = [cand("AGENTS.md", body)];
        let f = find(&c, &segs, &none(), Path::new(P));
        assert_eq!((f[0].count, f[0].last_place), (4, Place::User));
        assert!(f.iter().all(|f| f.at.0 != 4));
        // The read's own output is the unheaded one; a headed attachment in a tool result stays.
        let reads = BTreeMap::from([("AGENTS.md".to_string(), 1)]);
        let f = find(&c, &segs, &reads, Path::new(P));
        assert_eq!((f[0].count, f[0].at.0), (3, 0));
        assert!(f.iter().all(|f| f.at != (1, 3)));
    }

    #[rstest::rstest]
    #[case::a_read_s_output("1\t")]
    #[case::padded("     5\t")]
    #[case::an_arrow("12→")]
    fn a_line_numbered_view_of_a_file_is_not_a_send(#[case] number: &str) {
        // Claude Code's note that a rule it read changed on disk shows the raw file, numbered.
        let body = "# API rules v2, a line long enough to be counted unnamed.";
        let note = format!("Note: api.md changed on disk.\n1\t---\n4\t---\n{number}{body}");
        let segs = [seg(Place::User, &note)];
        assert!(find(&[cand("api.md", &format!("{body}\n"))], &segs, &none(), Path::new(P)).is_empty());
        // Where the same line is not numbered, it is found.
        let segs = [seg(Place::User, &format!("x{number}{body}"))];
        assert_eq!(find(&[cand("api.md", body)], &segs, &none(), Path::new(P)).len(), 1);
    }

    #[test]
    fn a_numbered_view_named_by_its_path_is_told_and_nothing_else_is() {
        let c = [cand(".claude/rules/api.md", "# API v2\n"), cand(".claude/rules/web.md", "# Web\n")];
        let note = "Note: /p/.claude/rules/api.md was modified.\n1\t---\n4\t---\n5\t# API v2\n";
        assert_eq!(views(&c, &[seg(Place::System, note)]), [".claude/rules/api.md"]);
        // A read's own output, or a numbered line that names no path, is no such note.
        assert!(views(&c, &[seg(Place::ToolResult, note)]).is_empty());
        assert!(views(&c, &[seg(Place::User, "1\t# API v2\n2\t# Web\n")]).is_empty());
        // The file's text sent as the rule, unnumbered, is a send, not a view.
        assert!(views(&c, &[seg(Place::User, "Contents of /p/.claude/rules/api.md:\n\n# API v2\n")]).is_empty());
    }

    #[test]
    fn a_line_holding_two_canaries_is_one_leak_and_leaks_come_in_order() {
        let canaries = ["CANARY-7".to_string(), "CANARY-7B".to_string()];
        let segs = [
            seg(Place::User, "Contents of /x/b.md:\nCANARY-7B here"),
            seg(Place::System, "first CANARY-7 there\nand CANARY-7B CANARY-7 again"),
        ];
        let leaks = leaks(&canaries, &segs, Path::new(P));
        let lines: Vec<(&str, (usize, usize))> = leaks.iter().map(|(_, line, at)| (line.as_str(), *at)).collect();
        assert_eq!(
            lines,
            [("CANARY-7B here", (0, 21)), ("first CANARY-7 there", (1, 0)), ("and CANARY-7B CANARY-7 again", (1, 21))]
        );
    }

    /// Random texts over a small alphabet (so contents recur, overlap and cut), with non-ASCII
    /// letters, whitespace, a BOM and path characters.
    fn random_text(rng: &mut crate::util::generate::Rng, least: usize, spread: usize) -> String {
        const ALPHABET: &[&str] = &["a", "b", "ab", "é", " ", "\n", "\u{feff}", "/", ".", "x.md", "€"];
        let len = least + rng.below(spread);
        (0..len).map(|_| ALPHABET[rng.below(ALPHABET.len())]).collect()
    }

    #[test]
    fn the_one_pass_search_finds_what_searching_each_content_alone_finds() {
        let mut rng = crate::util::generate::Rng::new(24);
        let mut cuts = 0;
        for round in 0..300 {
            let texts: Vec<String> = (0..3).map(|_| random_text(&mut rng, 40, 200)).collect();
            let segs: Vec<Segment> = texts
                .iter()
                .enumerate()
                .map(|(i, t)| seg(if i == 1 { Place::Assistant } else { Place::User }, t))
                .collect();
            // Contents taken from the texts (so they occur), and random ones (so they may not).
            let contents: Vec<String> = (0..6)
                .map(|_| {
                    let t = &texts[rng.below(texts.len())];
                    let from = floor(t, rng.below(t.len()));
                    let piece = floor(t.get(from.len()..).unwrap_or(""), 1 + rng.below(120));
                    match rng.below(3) {
                        0 => random_text(&mut rng, 1, 30),
                        // A text that occurs, then goes on otherwise: found cut, where long enough.
                        1 => format!("{piece}{}", random_text(&mut rng, 1, 10)),
                        _ => piece.to_string(),
                    }
                })
                .collect();
            let c: Vec<Candidate> = contents.iter().enumerate().map(|(k, t)| cand(&format!("d{k}.md"), t)).collect();
            let hits = Hits::new(&c, &segs);
            for (k, c) in c.iter().enumerate() {
                let trimmed = js_trim(&c.sent);
                if trimmed.is_empty() {
                    continue;
                }
                for variant in [c.sent.as_str(), c.sent.trim(), trimmed] {
                    let pre = variant.len() - js_trim_start(variant).len();
                    let naive: Vec<(usize, usize, Place)> =
                        occurrences(&segs, variant).into_iter().filter(|o| o.2 != Place::Assistant).collect();
                    assert_eq!(occurrences_at(&segs, hits.of(k), variant, pre), naive, "round {round}: {variant:?}");
                }
                // The longest prefix that appears, as a binary search over boundaries finds it.
                let bounds: Vec<usize> = trimmed.char_indices().map(|(i, _)| i).skip(1).collect();
                let appears = |b: usize| {
                    segs.iter().any(|s| s.place != Place::Assistant && s.text.contains(trimmed.get(..b).unwrap_or("")))
                };
                let naive =
                    bounds.iter().copied().filter(|&b| appears(b) && b >= floor(trimmed, MIN_PREFIX).len()).max();
                let longest = hits
                    .of(k)
                    .iter()
                    .map(|&(i, off)| {
                        let at = segs[i].text.as_bytes().get(off..).unwrap_or(&[]);
                        at.iter().zip(trimmed.as_bytes()).take_while(|(a, b)| a == b).count()
                    })
                    .max();
                let fast = longest.and_then(|l| bounds.iter().copied().take_while(|&b| b <= l).last());
                let fast = fast.filter(|&b| b >= floor(trimmed, MIN_PREFIX).len());
                assert_eq!(fast, naive, "round {round}: {trimmed:?}");
                cuts += usize::from(fast.is_some());
            }
        }
        // The rounds reach cuts, not only whole contents and misses.
        assert!(cuts > 100, "{cuts} cuts");
    }

    #[test]
    fn a_path_is_named_by_token_as_by_searching_for_each_path() {
        let rels = ["a.md", "x.md", "b/x.md", "a b.md", "é/a.md", "../o/x.md"];
        let c: Vec<Candidate> = rels.iter().map(|r| cand(r, "text")).collect();
        let names = Names::new(&c, Path::new(P));
        let naive = |window: &str| {
            let mut best: Option<(usize, &str)> = None;
            for rel in rels {
                for (start, _) in window.match_indices(rel) {
                    let before = window.get(..start).and_then(|b| b.chars().next_back()).is_none_or(|c| !path_char(c));
                    let after = window
                        .get(start + rel.len()..)
                        .and_then(|a| a.chars().next())
                        .is_none_or(|c| !path_char(c) || c == '.');
                    if before && after && best.is_none_or(|(e, _)| start + rel.len() > e) {
                        best = Some((start + rel.len(), rel));
                    }
                }
            }
            best.map(|(_, r)| r.to_string())
        };
        let mut rng = crate::util::generate::Rng::new(7);
        const PIECES: &[&str] = &["a.md", "x.md", "b/", " ", "a b.md", "é/", "../o/", ".", ":", "z", "\n"];
        for _ in 0..2000 {
            let window: String = (0..rng.below(12)).map(|_| PIECES[rng.below(PIECES.len())]).collect();
            assert_eq!(names.before(&window, window.len()), naive(&window), "{window:?}");
        }
    }

    #[test]
    fn a_short_text_that_fills_a_markup_element_is_found_and_one_in_prose_is_not() {
        // Continue: `<context name="userRules">`, the root file's text, `</context>`.
        let root = [Candidate { rel: "AGENTS.md".into(), kind: Kind::Root, sent: "# Root\n".into() }];
        let wrapped = [seg(Place::System, "Be concise.\n\n<context name=\"userRules\">\n# Root\n\n</context>")];
        let f = find(&root, &wrapped, &none(), Path::new(P));
        assert_eq!(
            f.iter().map(|f| (f.rel.as_str(), f.content.as_str())).collect::<Vec<_>>(),
            [("AGENTS.md", "# Root\n")]
        );
        // The same 6 bytes in prose, inside an element with more in it, or after a closing tag:
        // chance, not a send.
        for text in [
            "Use # Root\nas a title.",
            "<context name=\"userRules\">\nsee # Root\n</context>",
            "<context name=\"userRules\">\n# Root\nand more\n</context>",
            "</context>\n# Root\n</x>",
            "<br/>\n# Root\n</x>",
        ] {
            assert!(find(&root, &[seg(Place::System, text)], &none(), Path::new(P)).is_empty(), "{text:?}");
        }
        // A whitespace-only file fills the element whitespace and all.
        let blank = [Candidate { rel: "AGENTS.md".into(), kind: Kind::Root, sent: "  \n\t\n".into() }];
        let segs = [seg(Place::System, "x\n<context name=\"userRules\">\n  \n\t\n\n</context>")];
        assert_eq!(find(&blank, &segs, &none(), Path::new(P)).len(), 1);
        let segs = [seg(Place::System, "x\n  \n\t\n y")];
        assert!(find(&blank, &segs, &none(), Path::new(P)).is_empty());
    }

    #[test]
    fn a_byte_order_mark_sent_before_a_text_is_part_of_what_was_found() {
        let root = [Candidate { rel: "AGENTS.md".into(), kind: Kind::Root, sent: "# Root\n".into() }];
        let segs = [seg(Place::System, "<context name=\"userRules\">\n\u{feff}# Root\n\n</context>")];
        let f = find(&root, &segs, &none(), Path::new(P));
        assert_eq!(f.iter().map(|f| f.content.as_str()).collect::<Vec<_>>(), ["\u{feff}# Root\n"]);
        let segs = [seg(Place::System, "<context name=\"userRules\">\n# Root\n\n</context>")];
        assert_eq!(find(&root, &segs, &none(), Path::new(P)).first().map(|f| f.content.as_str()), Some("# Root\n"));
    }

    #[test]
    fn a_root_files_text_under_the_other_root_names_fixed_header_is_its_own() {
        // Codex heads whichever root file it took `# AGENTS.md instructions for <cwd>`.
        let c = [
            Candidate { rel: "AGENTS.md".into(), kind: Kind::Root, sent: "# Plain root\n".into() },
            Candidate { rel: "AGENTS.override.md".into(), kind: Kind::Root, sent: "# Override root\n".into() },
        ];
        let header = "# AGENTS.md instructions for /p/project\n\n<INSTRUCTIONS>\n";
        let segs = [seg(Place::User, &format!("{header}# Override root\n</INSTRUCTIONS>"))];
        let f = find(&c, &segs, &none(), Path::new(P));
        assert_eq!(f.iter().map(|f| f.rel.as_str()).collect::<Vec<_>>(), ["AGENTS.override.md"]);
        // The named file's own text under its name stays its own, and a nested file gains nothing.
        let segs = [seg(Place::User, &format!("{header}# Plain root\n</INSTRUCTIONS>"))];
        assert_eq!(
            find(&c, &segs, &none(), Path::new(P)).iter().map(|f| f.rel.as_str()).collect::<Vec<_>>(),
            ["AGENTS.md"]
        );
        let nested = [c[0].clone(), cand("src/AGENTS.md", "# Override root\n")];
        let segs = [seg(Place::User, &format!("{header}# Override root\n"))];
        assert!(find(&nested, &segs, &none(), Path::new(P)).is_empty());
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
