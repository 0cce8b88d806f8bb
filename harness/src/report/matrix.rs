//! `conformance matrix`: several implementations run over the same corpus, written as one static
//! site — `index.html` (implementations × profiles × areas, seed violations apart from differences
//! with the suite's decisions, unsupported cases apart from both, and the cases whose result
//! changed between releases of one agent), `matrix.json` (every result, the counts of every cell,
//! and the same changes), a page per cell that lists its cases with their reasons, and a page per
//! non-passing or changed case with its reason, where its instruction files landed and what was
//! expected beside what was observed. No script, no external asset: the pages open from disk in any browser.
//!
//! Every text from a case or an implementation is cut to its cap and escaped by
//! [`crate::report::escape::html`] (markup, control and bidi characters); `matrix.json` carries the same
//! caps as the JSON report.
//!
//! # Releases
//! Two or more columns are releases of one agent when their hellos name the same agent with
//! different versions (an agent CLI's hello is `claude-code@2.1.197`, version `2.1.197`; see
//! [`releases`]). They are ordered by version, compared as dotted numbers, and each case whose
//! status or verdict (seed or decision) differs between consecutive releases is listed.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write;
use std::fs;
use std::path::Path;

use crate::report::escape::{cut, DETAIL_MAX, FIELD_MAX, MESSAGE_MAX, REASON_MAX};
use crate::run::case::{CaseResult, Status, Verdict};
use crate::run::wire::Hello;

/// One implementation's run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Column {
    /// The name given on the command line.
    pub name: String,
    /// Its hello.
    pub hello: Hello,
    /// Its results, one per case, in corpus order.
    pub results: Vec<CaseResult>,
}

/// The most notes a case page lists. The default is 40.
const NOTES_SHOWN: usize = 40;
/// The most mismatches a case page lists, over all its steps. The default is 20.
const MISMATCHES_SHOWN: usize = 20;
/// The most bytes of a file name made from data (a column's name, a case's id), so that a long id
/// cannot make a name the file system refuses. The default is 96.
const SLUG_MAX: usize = 96;

/// A label from data (a name, an id, an area, a hello field), cut to its cap and escaped for
/// HTML.
fn esc(s: &str) -> String {
    crate::report::escape::html(&cut(s, FIELD_MAX))
}

/// A text from data cut to `max` bytes and escaped for HTML.
fn esc_max(s: &str, max: usize) -> String {
    crate::report::escape::html(&cut(s, max))
}

/// A name safe as a file name: ASCII letters, digits, `-`, `_` and `.`, at most [`SLUG_MAX`]
/// bytes, never empty and never `.` or `..`. It never holds `~`, which [`Names`] and the cell pages
/// use to stay apart from every slug.
fn slug(s: &str) -> String {
    let s: String = s
        .chars()
        .take(SLUG_MAX)
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' { c } else { '_' })
        .collect();
    if s.is_empty() || s.chars().all(|c| c == '.') {
        return "_".repeat(s.len().max(1));
    }
    s
}

/// File names from data, made unique: two ids with one slug (`a/b` and `a_b`) would otherwise
/// write one page over the other. The second gets `~2`, the third `~3`.
#[derive(Default)]
struct Names(BTreeSet<String>);

impl Names {
    fn unique(&mut self, s: &str) -> String {
        let base = slug(s);
        let mut name = base.clone();
        let mut n = 1;
        while !self.0.insert(name.clone()) {
            n += 1;
            name = format!("{base}~{n}");
        }
        name
    }
}

/// What a result counts as in a cell and in an implementation's lists, in the order they are
/// listed: what violates the seed comes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Seed,
    Decision,
    Other,
    Unsupported,
    Pass,
}

impl Kind {
    fn of(r: &CaseResult) -> Kind {
        match r.status {
            Status::Pass | Status::Xpass => Kind::Pass,
            Status::Unsupported | Status::Skip => Kind::Unsupported,
            Status::Fail | Status::Xfail if r.basis == Some(Verdict::Seed) => Kind::Seed,
            Status::Fail | Status::Xfail => Kind::Decision,
            Status::Error | Status::Crash | Status::Timeout => Kind::Other,
        }
    }

    /// The CSS class.
    fn class(self) -> &'static str {
        match self {
            Kind::Seed => "seed",
            Kind::Decision => "decision",
            Kind::Other => "other",
            Kind::Unsupported => "unsup",
            Kind::Pass => "pass",
        }
    }

    /// What the cases of this kind do, for a heading.
    fn what(self) -> &'static str {
        match self {
            Kind::Seed => "violate the seed",
            Kind::Decision => "differ from a decision",
            Kind::Other => "error, crash or timeout",
            Kind::Unsupported => "unsupported",
            Kind::Pass => "pass",
        }
    }
}

/// Counts of one cell.
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
struct Cell {
    total: usize,
    passed: usize,
    seed: usize,
    decision: usize,
    other: usize,
    unsupported: usize,
}

impl Cell {
    fn add(&mut self, r: &CaseResult) {
        self.total += 1;
        match Kind::of(r) {
            Kind::Pass => self.passed += 1,
            Kind::Unsupported => self.unsupported += 1,
            Kind::Seed => self.seed += 1,
            Kind::Decision => self.decision += 1,
            Kind::Other => self.other += 1,
        }
    }

    /// The cell's counts; `href`, where given, links them to the page that explains them.
    fn html(&self, href: Option<&str>) -> String {
        let link = |text: String| match href {
            Some(h) => format!("<a href=\"{h}\">{text}</a>"),
            None => text,
        };
        if self.total > 0 && self.unsupported == self.total {
            return link(format!("<span class=\"unsup\">not run ({} unsupported)</span>", self.total));
        }
        let mut out = format!("<span class=\"pass\">{}/{}</span>", self.passed, self.total);
        for (n, kind) in [
            (self.seed, Kind::Seed),
            (self.decision, Kind::Decision),
            (self.other, Kind::Other),
            (self.unsupported, Kind::Unsupported),
        ] {
            if n > 0 {
                let _ = write!(
                    out,
                    " <span class=\"{}\" title=\"{}\">{n} {}</span>",
                    kind.class(),
                    kind.what(),
                    kind.what()
                );
            }
        }
        if self.passed < self.total {
            link(out)
        } else {
            out
        }
    }
}

/// A case's result in one release: its status and, for a failure, what it contradicts. `None`
/// where the release did not run the case at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Outcome {
    /// The status.
    pub status: Status,
    /// For a failure, `seed` or `decision`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub basis: Option<Verdict>,
}

impl Outcome {
    fn of(r: &CaseResult) -> Outcome {
        let basis = if matches!(r.status, Status::Fail | Status::Xfail) { r.basis } else { None };
        Outcome { status: r.status, basis }
    }

    /// `FAIL (seed)`, `PASS`.
    fn label(o: Option<Outcome>) -> String {
        match o {
            None => "not run".into(),
            Some(Outcome { status, basis: Some(Verdict::Seed) }) => format!("{} (seed)", status.as_str()),
            Some(Outcome { status, basis: Some(Verdict::Decision) }) => format!("{} (decision)", status.as_str()),
            Some(Outcome { status, basis: None }) => status.as_str().into(),
        }
    }

    /// The kind, for the CSS class.
    fn class(o: Option<Outcome>) -> &'static str {
        match o {
            None => Kind::Unsupported.class(),
            Some(o) => match o.status {
                Status::Pass | Status::Xpass => Kind::Pass,
                Status::Unsupported | Status::Skip => Kind::Unsupported,
                Status::Fail | Status::Xfail if o.basis == Some(Verdict::Seed) => Kind::Seed,
                Status::Fail | Status::Xfail => Kind::Decision,
                Status::Error | Status::Crash | Status::Timeout => Kind::Other,
            }
            .class(),
        }
    }
}

/// A case whose result differs between two consecutive releases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The case's id.
    pub id: String,
    /// The case's display name.
    pub name: String,
    /// Its result in the older release.
    pub old: Option<Outcome>,
    /// Its result in the newer release.
    pub new: Option<Outcome>,
}

/// Two consecutive releases of one agent and the cases whose result changed between them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleasePair {
    /// The agent, without its version (`claude-code`).
    pub agent: String,
    /// The older release's column (an index into the columns).
    pub from: usize,
    /// The newer release's column.
    pub to: usize,
    /// The cases that changed, in the newer release's order (then those only the older ran).
    pub changes: Vec<Change>,
}

/// The agent a hello names, and its version: an agent CLI's hello is named with its pin
/// (`claude-code@2.1.197`, harness/src/run/agent/recipe.rs), which loses its `@VERSION`; another
/// implementation's name is its agent.
fn release_of(hello: &Hello) -> (&str, &str) {
    let name = hello.name.strip_suffix(hello.version.as_str()).and_then(|n| n.strip_suffix('@'));
    (name.unwrap_or(&hello.name), &hello.version)
}

/// One dotted part of a version compared with another: numbers as numbers (`9` < `10`, leading
/// zeros aside), a number before a word, words as text.
fn compare_part(a: &str, b: &str) -> Ordering {
    fn number(s: &str) -> Option<&str> {
        (!s.is_empty() && s.bytes().all(|c| c.is_ascii_digit())).then(|| s.trim_start_matches('0'))
    }
    match (number(a), number(b)) {
        (Some(x), Some(y)) => x.len().cmp(&y.len()).then_with(|| x.cmp(y)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

fn compare_dotted(a: &str, b: &str) -> Ordering {
    let (mut x, mut y) = (a.split('.'), b.split('.'));
    loop {
        match (x.next(), y.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(p), Some(q)) => match compare_part(p, q) {
                Ordering::Equal => {}
                other => return other,
            },
        }
    }
}

/// Versions in release order: dotted parts compared as numbers (`2.1.197` < `2.1.332` <
/// `2.10.0`), a leading `v` ignored, a pre-release (`1.0.0-rc.1`) before its release, build
/// metadata (`+…`) only to break a tie, and then the text itself, so that the order is total.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    fn parts(v: &str) -> (&str, Option<&str>) {
        let v = v.strip_prefix(['v', 'V']).unwrap_or(v);
        let v = v.split_once('+').map_or(v, |(core, _)| core);
        match v.split_once('-') {
            Some((core, pre)) => (core, Some(pre)),
            None => (v, None),
        }
    }
    let ((a_core, a_pre), (b_core, b_pre)) = (parts(a), parts(b));
    compare_dotted(a_core, b_core)
        .then_with(|| match (a_pre, b_pre) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Greater,
            (Some(_), None) => Ordering::Less,
            (Some(p), Some(q)) => compare_dotted(p, q),
        })
        .then_with(|| a.cmp(b))
}

/// The releases among `columns`: the columns whose hellos name one agent with two or more
/// versions (see [`release_of`]), ordered by [`compare_versions`], and for each two consecutive
/// releases the cases whose status or verdict changed. Two columns with one version (the
/// reference in-process and through its adapter) are one release: the first on the command line
/// stands for it. Agents come in the order of their first column.
pub fn releases(columns: &[Column]) -> Vec<ReleasePair> {
    let mut agents: Vec<(&str, Vec<usize>)> = Vec::new();
    for (i, col) in columns.iter().enumerate() {
        let (agent, version) = release_of(&col.hello);
        let at = match agents.iter().position(|(a, _)| *a == agent) {
            Some(at) => at,
            None => {
                agents.push((agent, Vec::new()));
                agents.len() - 1
            }
        };
        if let Some((_, cols)) = agents.get_mut(at) {
            if !cols.iter().any(|c| columns.get(*c).is_some_and(|o| o.hello.version == version)) {
                cols.push(i);
            }
        }
    }
    let mut pairs = Vec::new();
    for (agent, mut cols) in agents {
        if cols.len() < 2 {
            continue;
        }
        cols.sort_by(|a, b| {
            let v = |i: &usize| columns.get(*i).map_or("", |c| c.hello.version.as_str());
            compare_versions(v(a), v(b))
        });
        for w in cols.windows(2) {
            let (Some(&from), Some(&to)) = (w.first(), w.get(1)) else { continue };
            let (Some(old), Some(new)) = (columns.get(from), columns.get(to)) else { continue };
            pairs.push(ReleasePair { agent: agent.to_string(), from, to, changes: changes(old, new) });
        }
    }
    pairs
}

/// The cases whose outcome differs between `old` and `new`.
fn changes(old: &Column, new: &Column) -> Vec<Change> {
    let before: HashMap<&str, &CaseResult> = old.results.iter().map(|r| (r.id.as_str(), r)).collect();
    let after: HashMap<&str, &CaseResult> = new.results.iter().map(|r| (r.id.as_str(), r)).collect();
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for r in &new.results {
        if !seen.insert(r.id.as_str()) {
            continue;
        }
        let was = before.get(r.id.as_str()).map(|o| Outcome::of(o));
        let now = Some(Outcome::of(r));
        if was != now {
            out.push(Change { id: r.id.clone(), name: r.name.clone(), old: was, new: now });
        }
    }
    for r in &old.results {
        if !after.contains_key(r.id.as_str()) && seen.insert(r.id.as_str()) {
            out.push(Change { id: r.id.clone(), name: r.name.clone(), old: Some(Outcome::of(r)), new: None });
        }
    }
    out
}

/// A release change as `matrix.json` holds it, its labels cut to their caps.
fn change_json(columns: &[Column], pair: &ReleasePair) -> serde_json::Value {
    let side = |i: usize| {
        let c = columns.get(i);
        serde_json::json!({
            "column": cut(c.map_or("", |c| c.name.as_str()), FIELD_MAX),
            "version": cut(c.map_or("", |c| c.hello.version.as_str()), FIELD_MAX),
        })
    };
    serde_json::json!({
        "agent": cut(&pair.agent, FIELD_MAX),
        "from": side(pair.from),
        "to": side(pair.to),
        "changed": pair.changes.iter().map(|c| serde_json::json!({
            "id": cut(&c.id, FIELD_MAX),
            "name": cut(&c.name, FIELD_MAX),
            "old": c.old,
            "new": c.new,
        })).collect::<Vec<_>>(),
    })
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#222}\
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}\
th{background:#f4f4f4}.pass{font-weight:600}.seed{color:#b00020}.decision{color:#a05a00}\
.other{color:#6a1b9a}.unsup{color:#777}pre{background:#f8f8f8;padding:1em;overflow:auto;max-width:60em}\
.reason{white-space:pre-wrap}.changed{background:#fff3c4;border-left:4px solid #e0a800;padding:.3em .6em}\
.mark{background:#fff3c4;font-size:.85em;padding:0 .3em}";

/// The mark beside a case, in a list, whose result changed between releases.
const CHANGED_MARK: &str = " <span class=\"mark\">changed between releases</span>";

fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head>\n<body>\n{body}</body></html>\n",
        esc(title)
    )
}

/// `old → new` between two releases, for a mark on a case page.
fn change_line(columns: &[Column], pair: &ReleasePair, change: &Change) -> String {
    let version = |i: usize| esc(columns.get(i).map_or("", |c| c.hello.version.as_str()));
    format!(
        "{}: {} <span class=\"{}\">{}</span> → {} <span class=\"{}\">{}</span>",
        esc(&pair.agent),
        version(pair.from),
        Outcome::class(change.old),
        Outcome::label(change.old),
        version(pair.to),
        Outcome::class(change.new),
        Outcome::label(change.new)
    )
}

/// The parts of a case page besides its reason: the marks of the releases it changed in, the
/// notes that say where its instruction files landed, and every mismatch with expected and actual
/// side by side and their diff. At most [`DETAIL_MAX`] bytes of data before escaping.
fn case_sections(r: &CaseResult, marks: &[String]) -> String {
    let mut out = String::new();
    for m in marks {
        let _ = writeln!(out, "<p class=\"changed\">changed between releases — {m}</p>");
    }
    let mut budget = DETAIL_MAX;
    if !r.notes.is_empty() {
        out.push_str("<h2>What was sent and where it landed</h2>\n<ul>\n");
        for n in r.notes.iter().take(NOTES_SHOWN) {
            let n = cut(n, MESSAGE_MAX);
            if n.len() > budget {
                break;
            }
            budget -= n.len();
            let _ = writeln!(out, "<li>{}</li>", crate::report::escape::html(&n));
        }
        if r.notes.len() > NOTES_SHOWN {
            let _ = writeln!(out, "<li>… {} more notes</li>", r.notes.len() - NOTES_SHOWN);
        }
        out.push_str("</ul>\n");
    }
    let mismatches: Vec<_> =
        r.steps.iter().flat_map(|s| s.mismatches.iter().map(move |m| (s.index, s.action.as_str(), m))).collect();
    if !mismatches.is_empty() {
        out.push_str("<h2>Expected and observed</h2>\n<table>\n<tr><th>step</th><th>field</th><th>on</th><th>expected</th><th>actual</th></tr>\n");
        let mut shown = 0;
        for (index, action, m) in &mismatches {
            let (expected, actual) = (cut(&m.expected, MESSAGE_MAX), cut(&m.actual, MESSAGE_MAX));
            let diff = crate::report::diff::render(&m.expected, &m.actual, "");
            let size = expected.len() + actual.len() + diff.len();
            if shown >= MISMATCHES_SHOWN || size > budget {
                break;
            }
            budget -= size;
            shown += 1;
            let on = match &m.basis {
                crate::case::scenario::Basis::Seed => "seed".to_string(),
                crate::case::scenario::Basis::Decision(d) => esc(d),
            };
            let _ = writeln!(
                out,
                "<tr><td>{index} ({})</td><td>{}</td><td>{on}</td><td><pre>{}</pre></td><td><pre>{}</pre></td></tr>\n\
                 <tr><td colspan=\"5\"><pre>{}</pre></td></tr>",
                esc(action),
                esc(&m.field),
                crate::report::escape::html(&expected),
                crate::report::escape::html(&actual),
                crate::report::escape::html(&diff)
            );
        }
        out.push_str("</table>\n");
        if mismatches.len() > shown {
            let _ = writeln!(out, "<p>… {} more differences not shown</p>", mismatches.len() - shown);
        }
    }
    out
}

/// Writes the site into `dir` (created if missing).
pub fn write(dir: &Path, columns: &[Column]) -> Result<(), String> {
    write_with_bench(dir, columns, None)
}

/// Writes the site into `dir`, its index ending with the table and plot of a `conformance
/// bench` run (`bench.json`) when there is one.
pub fn write_with_bench(
    dir: &Path,
    columns: &[Column],
    bench: Option<&crate::run::bench::Bench>,
) -> Result<(), String> {
    let put = |p: &Path, text: String| fs::write(p, text).map_err(|e| format!("{}: {e}", p.display()));
    let mkdir = |p: &Path| fs::create_dir_all(p).map_err(|e| format!("{}: {e}", p.display()));
    mkdir(&dir.join("cases"))?;
    let pairs = releases(columns);
    // Column → case id → the marks of the releases the case changed in.
    let mut marks: Vec<HashMap<&str, Vec<String>>> = vec![HashMap::new(); columns.len()];
    for pair in &pairs {
        for c in &pair.changes {
            let line = change_line(columns, pair, c);
            for i in [pair.from, pair.to] {
                if let Some(m) = marks.get_mut(i) {
                    m.entry(c.id.as_str()).or_default().push(line.clone());
                }
            }
        }
    }
    // Directory of each column, and the page of each case that has one (not passing, or changed).
    let mut dirs = Names::default();
    let col_dirs: Vec<String> = columns.iter().map(|c| dirs.unique(&c.name)).collect();
    let mut case_pages: Vec<HashMap<&str, String>> = Vec::with_capacity(columns.len());
    for (i, col) in columns.iter().enumerate() {
        let mut names = Names::default();
        let mut pages = HashMap::new();
        for r in &col.results {
            let changed = marks.get(i).is_some_and(|m| m.contains_key(r.id.as_str()));
            if (Kind::of(r) != Kind::Pass || changed) && !pages.contains_key(r.id.as_str()) {
                let dir = col_dirs.get(i).map_or("_", String::as_str);
                pages.insert(r.id.as_str(), format!("cases/{dir}/{}.html", names.unique(&r.id)));
            }
        }
        case_pages.push(pages);
    }
    // Rows: profile/area → column index → counts.
    let mut rows: BTreeMap<String, Vec<Cell>> = BTreeMap::new();
    // Profile/area and column → the cases there that do not pass, for the cell's page.
    let mut members: HashMap<(String, usize), Vec<&CaseResult>> = HashMap::new();
    let mut totals = vec![Cell::default(); columns.len()];
    for (i, col) in columns.iter().enumerate() {
        for r in &col.results {
            let area = format!("{}/{}", r.profile, r.area);
            if Kind::of(r) != Kind::Pass {
                members.entry((area.clone(), i)).or_default().push(r);
            }
            let row = rows.entry(area).or_insert_with(|| vec![Cell::default(); columns.len()]);
            if let Some(cell) = row.get_mut(i) {
                cell.add(r);
            }
            if let Some(t) = totals.get_mut(i) {
                t.add(r);
            }
        }
    }
    let mut body = String::from("<h1>Conformance matrix</h1>\n");
    let _ = writeln!(
        body,
        "<p>Suite {}, adapter protocol {}. Each cell: cases passed of the cases run there; then those that \
         <span class=\"seed\">violate the seed</span>, that only <span class=\"decision\">differ from a decision</span> \
         of this suite, that <span class=\"other\">errored, crashed or timed out</span>, and that are \
         <span class=\"unsup\">unsupported</span> (a capability the implementation does not declare). A cell's counts \
         link to the reasons of its cases.</p>",
        env!("CARGO_PKG_VERSION"),
        crate::run::wire::PROTOCOL_VERSION
    );
    body.push_str("<table>\n<tr><th>profile/area</th>");
    for col in columns {
        // What the column's name does not say already: the hello's name, its version, its language
        // (an agent's column `claude-code@2.1.332` is the hello's name and holds its version).
        let mut small: Vec<&str> = Vec::new();
        if col.hello.name != col.name {
            small.push(&col.hello.name);
        }
        if !col.name.ends_with(&format!("@{}", col.hello.version))
            && !col.name.ends_with(&format!(" {}", col.hello.version))
        {
            small.push(&col.hello.version);
        }
        let language = format!("({})", col.hello.language);
        small.push(&language);
        let _ = write!(body, "<th>{}<br><small>{}</small></th>", esc(&col.name), esc(&small.join(" ")));
    }
    body.push_str("</tr>\n");
    for (n, (area, cells)) in rows.iter().enumerate() {
        let _ = write!(body, "<tr><td>{}</td>", esc(area));
        for (i, c) in cells.iter().enumerate() {
            let (Some(col), Some(col_dir)) = (columns.get(i), col_dirs.get(i)) else { continue };
            if c.passed == c.total {
                let _ = write!(body, "<td>{}</td>", c.html(None));
                continue;
            }
            // A slug never holds `~`, so no case page can take this name.
            let file = format!("~cell-{n}-{}.html", slug(area));
            let href = format!("cases/{col_dir}/{file}");
            let _ = write!(body, "<td>{}</td>", c.html(Some(&href)));
            mkdir(&dir.join("cases").join(col_dir))?;
            let mut cases = members.remove(&(area.clone(), i)).unwrap_or_default();
            cases.sort_by_key(|r| Kind::of(r));
            let mut list = format!(
                "<p><a href=\"../../index.html\">matrix</a></p>\n<h1>{} on {}</h1>\n<p>{}</p>\n<ul>\n",
                esc(area),
                esc(&col.name),
                c.html(None)
            );
            for r in cases {
                let kind = Kind::of(r);
                let mark = if marks.get(i).is_some_and(|m| m.contains_key(r.id.as_str())) { CHANGED_MARK } else { "" };
                // The case's own page sits beside this one.
                let id = match case_pages.get(i).and_then(|p| p.get(r.id.as_str())) {
                    Some(page) => {
                        format!("<a href=\"{}\">{}</a>", esc(page.rsplit('/').next().unwrap_or(page)), esc(&r.id))
                    }
                    None => esc(&r.id),
                };
                let expected = r
                    .notes
                    .iter()
                    .find_map(|n| n.strip_prefix(crate::judge::manifest::EXPECTED_BY))
                    .map(|why| format!(" <small>(manifest: {})</small>", esc_max(why, MESSAGE_MAX)))
                    .unwrap_or_default();
                let _ = writeln!(
                    list,
                    "<li><b>{id}</b> <span class=\"{}\">{}</span>{mark} {} — <span class=\"reason\">{}</span>{expected}</li>",
                    kind.class(),
                    Outcome::label(Some(Outcome::of(r))),
                    esc(&r.name),
                    esc_max(r.reason.as_deref().unwrap_or(""), MESSAGE_MAX),
                );
            }
            list.push_str("</ul>\n");
            put(
                &dir.join("cases").join(col_dir).join(&file),
                page(&format!("{} on {}", cut(area, FIELD_MAX), cut(&col.name, FIELD_MAX)), &list),
            )?;
        }
        body.push_str("</tr>\n");
    }
    body.push_str("<tr><th>all</th>");
    for t in &totals {
        let _ = write!(body, "<th>{}</th>", t.html(None));
    }
    body.push_str("</tr>\n</table>\n");
    if !pairs.is_empty() {
        body.push_str("<h2 id=\"changed\">Changed between releases</h2>\n");
        for pair in &pairs {
            let (Some(old), Some(new)) = (columns.get(pair.from), columns.get(pair.to)) else { continue };
            let _ = writeln!(
                body,
                "<h3>{}: {} → {} ({} changed)</h3>",
                esc(&pair.agent),
                esc(&old.hello.version),
                esc(&new.hello.version),
                pair.changes.len()
            );
            if pair.changes.is_empty() {
                continue;
            }
            body.push_str("<table>\n<tr><th>case</th><th>title</th><th>");
            let _ = writeln!(body, "{}</th><th>{}</th></tr>", esc(&old.hello.version), esc(&new.hello.version));
            for c in &pair.changes {
                let link = |i: usize| case_pages.get(i).and_then(|p| p.get(c.id.as_str()));
                let id = match link(pair.to).or_else(|| link(pair.from)) {
                    Some(href) => format!("<a href=\"{}\">{}</a>", crate::report::escape::html(href), esc(&c.id)),
                    None => esc(&c.id),
                };
                let _ = writeln!(
                    body,
                    "<tr><td>{id}</td><td>{}</td><td class=\"{}\">{}</td><td class=\"{}\">→ {}</td></tr>",
                    esc(&c.name),
                    Outcome::class(c.old),
                    Outcome::label(c.old),
                    Outcome::class(c.new),
                    Outcome::label(c.new)
                );
            }
            body.push_str("</table>\n");
        }
    }
    for (i, col) in columns.iter().enumerate() {
        let mut listed: Vec<&CaseResult> = col.results.iter().filter(|r| Kind::of(r) != Kind::Pass).collect();
        listed.sort_by_key(|r| Kind::of(r));
        let failing = listed.iter().filter(|r| Kind::of(r) != Kind::Unsupported).count();
        let _ = writeln!(body, "<h2>{}: {failing} not passing</h2>", esc(&col.name));
        let col_dir = col_dirs.get(i).map_or("_", String::as_str);
        let pages = case_pages.get(i);
        let col_marks = marks.get(i);
        let mut current = None;
        for r in &listed {
            let kind = Kind::of(r);
            if current != Some(kind) {
                if current.is_some() {
                    body.push_str("</ul>\n");
                }
                current = Some(kind);
                let n = listed.iter().filter(|x| Kind::of(x) == kind).count();
                let _ = writeln!(body, "<h3 class=\"{}\">{n} {}</h3>\n<ul>", kind.class(), kind.what());
            }
            let mark = if col_marks.is_some_and(|m| m.contains_key(r.id.as_str())) { CHANGED_MARK } else { "" };
            let id = match pages.and_then(|p| p.get(r.id.as_str())) {
                Some(href) => format!("<a href=\"{}\">{}</a>", crate::report::escape::html(href), esc(&r.id)),
                None => esc(&r.id),
            };
            let _ = writeln!(
                body,
                "<li>{id} <span class=\"{}\">{}</span>{mark} {} — {}</li>",
                kind.class(),
                r.status.as_str(),
                esc(&r.name),
                esc_max(r.reason.as_deref().unwrap_or(""), MESSAGE_MAX)
            );
        }
        if current.is_some() {
            body.push_str("</ul>\n");
        }
        let Some(pages) = pages else { continue };
        if !pages.is_empty() {
            mkdir(&dir.join("cases").join(col_dir))?;
        }
        for r in &col.results {
            let Some(href) = pages.get(r.id.as_str()) else { continue };
            let kind = Kind::of(r);
            let none = Vec::new();
            let case_marks = col_marks.and_then(|m| m.get(r.id.as_str())).unwrap_or(&none);
            let detail = crate::report::formats::case_detail(r);
            let case_page = format!(
                "<p><a href=\"../../index.html\">matrix</a></p>\n<h1>{} on {}</h1>\n<p>{} <span class=\"{}\">{}</span></p>\n\
                 <p class=\"{} reason\">{}</p>\n{}<h2>Report</h2>\n<pre>{}</pre>\n",
                esc(&r.id),
                esc(&col.name),
                esc(&r.name),
                kind.class(),
                Outcome::label(Some(Outcome::of(r))),
                kind.class(),
                esc_max(r.reason.as_deref().unwrap_or(""), REASON_MAX),
                case_sections(r, case_marks),
                crate::report::escape::html(&detail)
            );
            put(
                &dir.join(href),
                page(&format!("{} on {}", cut(&r.id, FIELD_MAX), cut(&col.name, FIELD_MAX)), &case_page),
            )?;
        }
    }
    if let Some(bench) = bench {
        body.push_str(&bench.html());
    }
    put(&dir.join("index.html"), page("Conformance matrix", &body))?;
    let bounded: Vec<Column> = columns
        .iter()
        .map(|c| Column {
            name: c.name.clone(),
            hello: crate::report::formats::bounded_hello(&c.hello),
            results: c.results.iter().map(crate::report::formats::bounded_result).collect(),
        })
        .collect();
    let json = serde_json::to_string_pretty(&serde_json::json!({
        "suite_version": env!("CARGO_PKG_VERSION"),
        "protocol": crate::run::wire::PROTOCOL_VERSION,
        "implementations": bounded,
        "counts": columns.iter().enumerate().map(|(i, c)| serde_json::json!({
            "implementation": cut(&c.name, FIELD_MAX),
            "areas": rows
                .iter()
                .filter_map(|(area, cells)| Some((cut(area, FIELD_MAX).into_owned(), *cells.get(i)?)))
                .filter(|(_, cell)| cell.total > 0)
                .collect::<BTreeMap<_, _>>(),
            "all": totals.get(i).copied().unwrap_or_default(),
        })).collect::<Vec<_>>(),
        "releases": pairs.iter().map(|p| change_json(columns, p)).collect::<Vec<_>>(),
    }))
    .map_err(|e| e.to_string())?;
    put(&dir.join("matrix.json"), crate::report::escape::json(json))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::scenario::Basis;
    use crate::judge::compare::Mismatch;
    use crate::run::case::StepResult;
    use rstest::rstest;

    fn result(id: &str, status: Status, basis: Option<Verdict>) -> CaseResult {
        CaseResult {
            id: id.into(),
            name: format!("modules/glob/{id} title"),
            profile: "modules".into(),
            area: "glob".into(),
            status,
            reason: (status != Status::Pass).then(|| format!("why {id}")),
            basis,
            decision: None,
            decision_differences: Vec::new(),
            steps: Vec::new(),
            notes: Vec::new(),
            transcript: None,
            millis: 1,
            fatal: false,
        }
    }

    fn column(name: &str, version: &str, results: Vec<CaseResult>) -> Column {
        let mut hello = crate::run::driver::reference_hello();
        hello.name = name.into();
        hello.version = version.into();
        hello.language = "agent-cli".into();
        Column { name: name.into(), hello, results }
    }

    /// `claude-code` at 2.1.332 (given first) and 2.1.197: `m-b` went from a seed violation to
    /// a pass, `m-a` passes in both and `m-c` differs from a decision in both; the reference
    /// beside them is no release of it.
    fn two_releases() -> Vec<Column> {
        let fail = |id| result(id, Status::Fail, Some(Verdict::Decision));
        vec![
            column(
                "claude-code@2.1.332",
                "2.1.332",
                vec![result("m-a", Status::Pass, None), result("m-b", Status::Pass, None), fail("m-c")],
            ),
            column("reference", "0.1.0", vec![result("m-a", Status::Pass, None)]),
            column(
                "claude-code@2.1.197",
                "2.1.197",
                vec![result("m-a", Status::Pass, None), result("m-b", Status::Fail, Some(Verdict::Seed)), fail("m-c")],
            ),
        ]
    }

    fn read(p: &Path) -> String {
        fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    #[test]
    fn html_is_escaped() {
        assert_eq!(esc("<a href=\"x\">&'\u{1b}"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;\\x1b");
        assert_eq!(slug("my impl/1"), "my_impl_1");
    }

    #[rstest]
    #[case::numeric_not_text("2.1.197", "2.1.332", Ordering::Less)]
    #[case::more_digits("2.9.0", "2.10.0", Ordering::Less)]
    #[case::pre_release_first("1.0.0-rc.1", "1.0.0", Ordering::Less)]
    #[case::pre_releases_numeric("1.0.0-rc.2", "1.0.0-rc.10", Ordering::Less)]
    #[case::leading_v("v0.61.0", "0.9.0", Ordering::Greater)]
    #[case::number_before_word("1.0", "local", Ordering::Less)]
    #[case::huge_number("99999999999999999999999999.0", "100000000000000000000000000.0", Ordering::Less)]
    #[case::equal("2.1.197", "2.1.197", Ordering::Equal)]
    fn versions_compare_as_dotted_numbers(#[case] a: &str, #[case] b: &str, #[case] order: Ordering) {
        assert_eq!(compare_versions(a, b), order);
        assert_eq!(compare_versions(b, a), order.reverse());
    }

    #[rstest]
    #[case::an_agent_pin("claude-code@2.1.197", "2.1.197", "claude-code")]
    #[case::an_adapter("reference", "0.1.0", "reference")]
    #[case::a_local_program("claude-code", "local", "claude-code")]
    #[case::a_name_ending_in_its_version_without_at("tool2", "2", "tool2")]
    fn a_release_is_named_by_its_agent(#[case] name: &str, #[case] version: &str, #[case] agent: &str) {
        let c = column(name, version, Vec::new());
        assert_eq!(release_of(&c.hello), (agent, version));
    }

    #[test]
    fn two_releases_list_exactly_the_changed_case_old_to_new_in_version_order() {
        let columns = two_releases();
        let pairs = releases(&columns);
        assert_eq!(
            pairs,
            vec![ReleasePair {
                agent: "claude-code".into(),
                from: 2,
                to: 0,
                changes: vec![Change {
                    id: "m-b".into(),
                    name: "modules/glob/m-b title".into(),
                    old: Some(Outcome { status: Status::Fail, basis: Some(Verdict::Seed) }),
                    new: Some(Outcome { status: Status::Pass, basis: None }),
                }],
            }]
        );
    }

    #[test]
    fn a_verdict_that_moves_from_decision_to_seed_is_a_change() {
        let mut columns = two_releases();
        columns[0].results[2].basis = Some(Verdict::Seed);
        let ids: Vec<_> = releases(&columns)[0].changes.iter().map(|c| c.id.clone()).collect();
        assert_eq!(ids, ["m-b", "m-c"]);
    }

    #[test]
    fn unchanged_releases_and_one_release_twice_list_nothing() {
        let same = |v: &str| column(&format!("x@{v}"), v, vec![result("m-a", Status::Pass, None)]);
        let pairs = releases(&[same("1.2"), same("1.10")]);
        assert_eq!(pairs.len(), 1);
        assert_eq!((pairs[0].from, pairs[0].to), (0, 1));
        assert!(pairs[0].changes.is_empty());
        assert!(releases(&[same("1.2"), same("1.2")]).is_empty());
        assert!(releases(&[]).is_empty());
    }

    #[test]
    fn the_site_shows_the_changed_section_and_marks_the_case_pages() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &two_releases()).unwrap();
        let index = read(&dir.path().join("index.html"));
        let (_, section) = index.split_once("<h2 id=\"changed\">Changed between releases</h2>").unwrap();
        let section = section.split("<h2>").next().unwrap();
        assert!(section.contains("<h3>claude-code: 2.1.197 → 2.1.332 (1 changed)</h3>"), "{section}");
        assert!(section.contains("m-b</a></td><td>modules/glob/m-b title</td>"), "{section}");
        assert!(section.contains(">FAIL (seed)</td>") && section.contains(">→ PASS</td>"), "{section}");
        assert!(!section.contains("m-a") && !section.contains("m-c"), "{section}");
        // The newer release passes m-b: it has a page all the same, which the section links.
        assert!(section.contains("href=\"cases/claude-code_2.1.332/m-b.html\""), "{section}");
        for col in ["claude-code_2.1.332", "claude-code_2.1.197"] {
            let page = read(&dir.path().join("cases").join(col).join("m-b.html"));
            assert!(page.contains("<p class=\"changed\">changed between releases — claude-code: 2.1.197"), "{page}");
        }
        let page = read(&dir.path().join("cases/claude-code_2.1.332/m-c.html"));
        assert!(!page.contains("changed between releases"), "{page}");
        let json: serde_json::Value = serde_json::from_str(&read(&dir.path().join("matrix.json"))).unwrap();
        let release = &json["releases"][0];
        assert_eq!(release["from"]["version"], "2.1.197");
        assert_eq!(release["to"]["column"], "claude-code@2.1.332");
        assert_eq!(release["changed"][0]["id"], "m-b");
        assert_eq!(release["changed"][0]["old"], serde_json::json!({"status": "FAIL", "basis": "seed"}));
        assert_eq!(release["changed"][0]["new"], serde_json::json!({"status": "PASS"}));
        assert_eq!(release["changed"].as_array().map(Vec::len), Some(1));
        let older = &json["counts"][2];
        assert_eq!(older["implementation"], "claude-code@2.1.197");
        assert_eq!(
            older["all"],
            serde_json::json!({"total": 3, "passed": 1, "seed": 1, "decision": 1, "other": 0, "unsupported": 0})
        );
        assert_eq!(older["areas"]["modules/glob"]["seed"], 1);
        assert_eq!(json["counts"][1]["areas"].as_object().map(|a| a.len()), Some(1));
    }

    #[test]
    fn seed_violations_are_listed_before_decision_differences_and_unsupported() {
        let dir = tempfile::tempdir().unwrap();
        let results = vec![
            result("m-unsup", Status::Unsupported, None),
            result("m-decision", Status::Fail, Some(Verdict::Decision)),
            result("m-crash", Status::Crash, None),
            result("m-seed", Status::Fail, Some(Verdict::Seed)),
        ];
        let mut results = results;
        if let Some(r) = results.get_mut(1) {
            r.status = Status::Xfail;
            r.notes.push(format!("{}tabs <b>refused</b>", crate::judge::manifest::EXPECTED_BY));
        }
        write(dir.path(), &[column("x", "1", results)]).unwrap();
        let index = read(&dir.path().join("index.html"));
        let (_, list) = index.split_once("<h2>x: 3 not passing</h2>").unwrap();
        let at = |s: &str| list.find(s).unwrap_or_else(|| panic!("{s}: {list}"));
        assert!(at(">m-seed<") < at(">m-decision<"), "{list}");
        assert!(at(">m-decision<") < at(">m-crash<"), "{list}");
        assert!(at(">m-crash<") < at(">m-unsup<"), "{list}");
        assert!(at("1 violate the seed</h3>") < at("1 differ from a decision</h3>"), "{list}");
        // The cell links a page that gives every case's reason, the seed violation first.
        let cell = read(&dir.path().join("cases/x/~cell-0-modules_glob.html"));
        assert!(cell.contains("why m-seed") && cell.contains("why m-unsup"), "{cell}");
        assert!(cell.find("m-seed") < cell.find("m-decision"), "{cell}");
        // Each case links its own page, which is there.
        assert!(cell.contains("<a href=\"m-seed.html\">m-seed</a>"), "{cell}");
        assert!(dir.path().join("cases/x/m-seed.html").is_file());
        // An expected result gives its manifest's reason too.
        assert!(cell.contains("(manifest: tabs &lt;b&gt;refused&lt;/b&gt;)"), "{cell}");
        assert!(index.contains("<a href=\"cases/x/~cell-0-modules_glob.html\">"), "{index}");
    }

    #[test]
    fn a_bench_run_ends_the_index_and_an_index_without_one_has_no_such_section() {
        use crate::run::bench::{Bench, Row};
        let row = |target: &str, modules| Row {
            target: target.into(),
            modules,
            first: vec![2000],
            next: vec![1000],
            error: None,
        };
        let bench = Bench {
            sizes: vec![0, 1000],
            targets: vec!["a".into()],
            baseline: "a".into(),
            rows: vec![row("a", 0), row("a", 1000)],
        };
        let dir = tempfile::tempdir().unwrap();
        let columns = [column("x", "1", vec![result("m-1", Status::Pass, None)])];
        write_with_bench(dir.path(), &columns, Some(&bench)).unwrap();
        let index = read(&dir.path().join("index.html"));
        assert!(index.contains("Time to first request on large trees") && index.contains("<svg"), "{index}");
        write(dir.path(), &columns).unwrap();
        assert!(!read(&dir.path().join("index.html")).contains("<svg"));
    }

    #[test]
    fn a_failing_case_page_shows_where_files_landed_and_expected_beside_actual() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = result("m-land", Status::Fail, Some(Verdict::Seed));
        r.notes.push("request 2 (activation): .elowen/rules/api.md in the user message".into());
        r.steps.push(StepResult {
            index: 1,
            action: "touch".into(),
            observation: Default::default(),
            micros: 0,
            mismatches: vec![Mismatch {
                field: "activation[0].path".into(),
                expected: ".elowen/rules/api.md".into(),
                actual: "(none)".into(),
                basis: Basis::Seed,
            }],
        });
        write(dir.path(), &[column("x", "1", vec![r])]).unwrap();
        let page = read(&dir.path().join("cases/x/m-land.html"));
        assert!(page.contains("<li>request 2 (activation): .elowen/rules/api.md in the user message</li>"), "{page}");
        assert!(page.contains("<td>activation[0].path</td><td>seed</td>"), "{page}");
        assert!(page.contains("<pre>.elowen/rules/api.md</pre></td><td><pre>(none)</pre>"), "{page}");
        assert!(page.contains("first divergent step"), "{page}");
    }

    #[test]
    fn html_from_data_is_escaped_and_capped_on_every_page() {
        let dir = tempfile::tempdir().unwrap();
        let evil = "<script>x</script>\u{202e}";
        let mut r = result(&format!("m-{evil}"), Status::Fail, Some(Verdict::Seed));
        r.name = evil.into();
        r.area = evil.into();
        r.reason = Some(evil.repeat(100_000));
        r.notes.push(evil.repeat(10_000));
        r.steps.push(StepResult {
            index: 0,
            action: evil.into(),
            observation: Default::default(),
            micros: 0,
            mismatches: vec![
                Mismatch {
                    field: evil.into(),
                    expected: evil.repeat(5_000),
                    actual: evil.into(),
                    basis: Basis::Decision(evil.into()),
                };
                30
            ],
        });
        let mut new = r.clone();
        new.status = Status::Pass;
        let columns = [
            column(&format!("a@1.0{evil}"), &format!("1.0{evil}"), vec![r]),
            column(&format!("a@2{evil}"), "2", vec![new]),
        ];
        assert_eq!(releases(&columns).len(), 0, "different agents once the version is taken off");
        let mut newer = column("a@2", "2", columns[1].results.clone());
        newer.name = evil.into();
        let columns = [column("a@1.0", "1.0", columns[0].results.clone()), newer];
        assert_eq!(releases(&columns).len(), 1);
        write(dir.path(), &columns).unwrap();
        let mut pages = vec![dir.path().join("index.html")];
        for col in fs::read_dir(dir.path().join("cases")).unwrap() {
            for p in fs::read_dir(col.unwrap().path()).unwrap() {
                pages.push(p.unwrap().path());
            }
        }
        assert!(pages.len() >= 4, "{pages:?}");
        for p in pages {
            let text = read(&p);
            assert!(!text.contains("<script") && !text.contains('\u{202e}'), "{}", p.display());
            assert!(text.len() < 2 << 20, "{}: {} bytes", p.display(), text.len());
        }
    }
}
