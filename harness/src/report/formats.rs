//! Reporters: human text with the first divergent step side by side, JSON, JUnit XML, Markdown
//! and badges.
//!
//! Every text that came from a case or an implementation is cut to its cap and escaped for the
//! format by [`crate::report::escape`] on its way in, so no report acts on what displays it and none grows
//! with what the implementation sent; that module's docs give the caps and the size bound.

use std::borrow::Cow;
use std::fmt::Write;

use crate::report::escape::{self, cut, DETAIL_MAX, FIELD_MAX, MESSAGE_MAX, REASON_MAX};
use crate::run::case::{CaseResult, Status, Verdict};

/// The most mismatches of the first divergent step, and decision differences, a case's detail
/// shows. The default is 20.
const MISMATCHES_SHOWN: usize = 20;
/// The notes shown in a case's detail.
const NOTES_SHOWN: usize = 20;
/// The notes a saved report keeps of a case.
const NOTES_KEPT: usize = 200;

/// A label from a case or an implementation (an id, a name, an area, a hello field), cut to
/// [`FIELD_MAX`].
fn label(s: &str) -> Cow<'_, str> {
    cut(s, FIELD_MAX)
}

/// A label on one line of plain text: cut to [`FIELD_MAX`], a newline in it escaped, so that no
/// label can start a line that looks like the report's own.
fn one_line(s: &str) -> String {
    escape::terminal_line(&label(s)).into_owned()
}

/// The detail of one non-passing case: its reason and, for a failure, the first divergent step
/// with expected and actual side by side. Plain text, inert on a terminal (every control and bidi
/// character from data escaped), at most [`DETAIL_MAX`] bytes before that escaping (the commands
/// that read and reproduce the case aside), every label on one line and every line of a reason
/// after its first indented, so that nothing from data reads as a line of the report.
pub fn case_detail(r: &CaseResult) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{} {} [{}]{}", r.status.as_str(), one_line(&r.name), one_line(&r.id), basis_label(r));
    if let Some(reason) = &r.reason {
        let _ = writeln!(out, "  {}", cut(reason, REASON_MAX).replace('\n', "\n    "));
    }
    for d in r.decision_differences.iter().take(MISMATCHES_SHOWN) {
        let _ = writeln!(out, "  (not gated) {}", one_line(d));
    }
    if r.decision_differences.len() > MISMATCHES_SHOWN {
        let _ = writeln!(out, "  … {} more differences not gated", r.decision_differences.len() - MISMATCHES_SHOWN);
    }
    for n in r.notes.iter().take(NOTES_SHOWN) {
        let _ = writeln!(out, "  note: {}", one_line(n));
    }
    if r.notes.len() > NOTES_SHOWN {
        let _ = writeln!(out, "  … {} more notes", r.notes.len() - NOTES_SHOWN);
    }
    if r.status == Status::Fail {
        if let Some(step) = r.first_divergence() {
            let _ = writeln!(out, "  first divergent step: {} ({})", step.index, one_line(&step.action));
            for m in step.mismatches.iter().take(MISMATCHES_SHOWN) {
                let on = match &m.basis {
                    crate::case::scenario::Basis::Seed => "seed".into(),
                    crate::case::scenario::Basis::Decision(d) => one_line(d),
                };
                let _ = writeln!(out, "  {} ({on}):", one_line(&m.field));
                out.push_str(&crate::report::diff::render(&m.expected, &m.actual, "    "));
                if out.len() > DETAIL_MAX {
                    break;
                }
            }
            if step.mismatches.len() > MISMATCHES_SHOWN {
                let _ = writeln!(out, "  … {} more differences at this step", step.mismatches.len() - MISMATCHES_SHOWN);
            }
        }
    }
    let mut out = escape::terminal(&cut(&out, DETAIL_MAX)).into_owned();
    if !out.ends_with('\n') {
        out.push('\n');
    }
    if !matches!(r.status, Status::Pass | Status::Skip | Status::Unsupported) {
        let program = std::env::args().next().unwrap_or_else(|| "conformance".into());
        let program = crate::run::adapter::shell_quote(&program);
        let id = crate::run::adapter::shell_quote(&label(&r.id));
        let dir = crate::run::adapter::shell_quote(&format!("repro-{}", label(&r.id)));
        let commands = format!("  read it:      {program} explain {id}\n  reproduce it: {program} repro {id} {dir}\n");
        out.push_str(&escape::terminal(&commands));
    }
    out
}

/// `violates the seed` or `differs from decision D-X`, for a failure.
fn basis_label(r: &CaseResult) -> String {
    match (r.basis, &r.decision) {
        (Some(Verdict::Seed), _) => " — violates the seed".into(),
        (Some(_), Some(d)) => format!(" — differs from decision {}", one_line(d)),
        _ => String::new(),
    }
}

/// `hello` with its name, version and language cut to [`FIELD_MAX`], for a report.
pub(crate) fn bounded_hello(hello: &crate::Hello) -> crate::Hello {
    let mut hello = hello.clone();
    for field in [&mut hello.name, &mut hello.version, &mut hello.language] {
        if let Cow::Owned(cut) = label(field) {
            *field = cut;
        }
    }
    hello
}

/// `r` with its reason cut to [`REASON_MAX`], for a JSON report.
pub(crate) fn bounded_result(r: &CaseResult) -> CaseResult {
    let mut r = r.clone();
    r.notes.truncate(NOTES_KEPT);
    for n in &mut r.notes {
        if let Cow::Owned(cut) = cut(n, FIELD_MAX) {
            *n = cut;
        }
    }
    if let Some(reason) = &mut r.reason {
        if let Cow::Owned(cut) = cut(reason, REASON_MAX) {
            *reason = cut;
        }
    }
    r
}

/// Counts of statuses, per area and in total.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Summary {
    /// Area → status → count.
    pub areas: std::collections::BTreeMap<String, std::collections::BTreeMap<&'static str, usize>>,
    /// Status → count.
    pub total: std::collections::BTreeMap<&'static str, usize>,
    /// Cases whose result the manifest did not expect.
    pub unexpected: Vec<String>,
}

impl Summary {
    /// Summarises results; `unexpected` lists the ids that fail the gate.
    pub fn new(results: &[CaseResult], unexpected: Vec<String>) -> Summary {
        let mut s = Summary { unexpected, ..Summary::default() };
        for r in results {
            *s.areas.entry(format!("{}/{}", r.profile, r.area)).or_default().entry(r.status.as_str()).or_default() += 1;
            *s.total.entry(r.status.as_str()).or_default() += 1;
        }
        s
    }

    fn count(&self, status: Status) -> usize {
        self.total.get(status.as_str()).copied().unwrap_or(0)
    }
}

const ORDER: [Status; 9] = [
    Status::Pass,
    Status::Fail,
    Status::Error,
    Status::Crash,
    Status::Timeout,
    Status::Skip,
    Status::Unsupported,
    Status::Xfail,
    Status::Xpass,
];

/// Whether colour may be used on a stream: it is a terminal and `NO_COLOR` is unset or empty
/// (<https://no-color.org>).
pub fn use_colour(is_terminal: bool) -> bool {
    is_terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// The status word, in red or green when `colour`.
fn paint(status: Status, colour: bool) -> String {
    let code = match status {
        Status::Pass | Status::Xfail => "32",
        Status::Skip | Status::Unsupported => "33",
        _ => "31",
    };
    if colour {
        format!("\x1b[{code}m{}\x1b[0m", status.as_str())
    } else {
        status.as_str().to_string()
    }
}

/// The human report: a table per area, the detail of every unexpected case, and a closing line
/// `N passed, N failed`. `colour` paints the status words.
pub fn human(results: &[CaseResult], summary: &Summary, colour: bool) -> String {
    let mut out = String::new();
    for r in results.iter().filter(|r| summary.unexpected.contains(&r.id)) {
        let detail = case_detail(r);
        match detail.strip_prefix(r.status.as_str()) {
            Some(rest) => {
                out.push_str(&paint(r.status, colour));
                out.push_str(rest);
            }
            None => out.push_str(&detail),
        }
        out.push('\n');
    }
    let _ = writeln!(out, "{:<28} {}", "area", ORDER.map(|s| format!("{:>5}", short(s))).join(" "));
    for (area, counts) in &summary.areas {
        let cells = ORDER.map(|s| format!("{:>5}", counts.get(s.as_str()).copied().unwrap_or(0)));
        let _ = writeln!(out, "{:<28} {}", escape::terminal_line(&label(area)), cells.join(" "));
    }
    // XFAIL is an expected failure, not a pass; XPASS did pass (and is unexpected).
    let passed = summary.count(Status::Pass) + summary.count(Status::Xpass);
    let not_run = summary.count(Status::Skip) + summary.count(Status::Unsupported);
    let failed = results.len() - passed - not_run;
    let (seed, decision) = split_by_basis(results);
    let _ = writeln!(
        out,
        "{} cases: {} unexpected; {} not run (unsupported or skipped); of the failures, {} violate the seed and {} \
         differ only from a decision",
        results.len(),
        summary.unexpected.len(),
        not_run,
        seed,
        decision
    );
    let _ = writeln!(out, "{passed} passed, {failed} failed");
    out
}

/// How many failures violate the seed, and how many differ only from a decision.
fn split_by_basis(results: &[CaseResult]) -> (usize, usize) {
    let failed = |r: &&CaseResult| matches!(r.status, Status::Fail | Status::Xfail);
    let seed = results.iter().filter(failed).filter(|r| r.basis == Some(Verdict::Seed)).count();
    let decision = results.iter().filter(failed).filter(|r| r.basis == Some(Verdict::Decision)).count();
    (seed, decision)
}

fn short(s: Status) -> &'static str {
    match s {
        Status::Pass => "pass",
        Status::Fail => "fail",
        Status::Error => "err",
        Status::Crash => "crash",
        Status::Timeout => "tmout",
        Status::Skip => "skip",
        Status::Unsupported => "unsup",
        Status::Xfail => "xfail",
        Status::Xpass => "xpass",
    }
}

/// The JSON report: the implementation, the summary and every result with its steps. The hello
/// fields and reasons are cut to their caps; observations and mismatches are kept whole, as this
/// is the record `conformance report` renders again. DEL, C1 and bidi characters are written as
/// `\uXXXX` ([`escape::json`]).
pub fn json(hello: &crate::Hello, results: &[CaseResult], summary: &Summary) -> String {
    json_of_run(hello, &RunInfo::current(), results, summary)
}

/// The JSON report of a run described by `run` ([`json`] is this for an unsharded run of this
/// suite with no selection): `run`'s fields sit at the top level beside `implementation`, each
/// absent when unset.
pub fn json_of_run(hello: &crate::Hello, run: &RunInfo, results: &[CaseResult], summary: &Summary) -> String {
    let results: Vec<CaseResult> = results.iter().map(bounded_result).collect();
    let mut v = serde_json::json!({
        "implementation": bounded_hello(hello),
        "summary": summary,
        "results": results,
    });
    if let (Some(top), Ok(serde_json::Value::Object(fields))) = (v.as_object_mut(), serde_json::to_value(run)) {
        top.extend(fields);
    }
    escape::json(serde_json::to_string_pretty(&v).unwrap_or_default())
}

/// What a JSON report records of the run beside the implementation's hello, so that the shards
/// of one run can be told from those of another and merged (`conformance report --merge`,
/// [`crate::report::merge`]). Every field is optional when a saved report is read, so that a
/// report written before a field existed still loads; all but `suite_version` are absent from a
/// report when unset.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RunInfo {
    /// The suite version that ran the cases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite_version: Option<String>,
    /// The shard this run was (`--shard K/N`); absent when it ran every selected case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
    /// `--profile`, when the run had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// `--filter`, when the run had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// For a report merged from shards: how many shards the run had and which were not merged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<Merged>,
}

impl RunInfo {
    /// An unsharded run of this suite with no selection.
    pub fn current() -> RunInfo {
        RunInfo { suite_version: Some(env!("CARGO_PKG_VERSION").into()), ..RunInfo::default() }
    }
}

/// Shard `index` of `of` (`--shard 2/4`: `{"index": 2, "of": 4}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shard {
    /// 1-based.
    pub index: usize,
    /// The number of shards of the run.
    pub of: usize,
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.of)
    }
}

/// Where a merged report came from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Merged {
    /// The number of shards of the run.
    pub shards: usize,
    /// The shards not merged (`--allow-missing`), 1-based; absent when none is missing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<usize>,
}

/// JUnit XML in the form of the common Jenkins/Ant `junit-10` schema: `<testsuites>` with one
/// `<testsuite>` per area (`name`, `tests`, `failures`, `errors`, `skipped`, `time`), each
/// carrying `<properties>` that name the implementation, its version and language, the suite and
/// protocol versions; one `<testcase>` per case, with `<failure>`, `<error>` or `<skipped>`.
/// A case the manifest expects not to pass is reported as skipped, with the reason.
///
/// Every text from data is cut to its cap and escaped by [`escape::xml_attr`] or
/// [`escape::xml_text`] (quick-xml escapes the markup), so the document is valid XML 1.0 and an
/// attribute reads back as the escaped text.
pub fn junit(hello: &crate::Hello, results: &[CaseResult], summary: &Summary) -> String {
    use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};
    enum Outcome {
        Pass,
        Skipped(String),
        Failure(String, String),
        Error(String, String),
    }
    let outcome = |r: &CaseResult| -> Outcome {
        let reason = escape::xml_attr(&cut(r.reason.as_deref().unwrap_or_default(), MESSAGE_MAX)).into_owned();
        let unexpected = summary.unexpected.contains(&r.id);
        match r.status {
            Status::Pass => Outcome::Pass,
            Status::Skip | Status::Unsupported | Status::Xfail => {
                Outcome::Skipped(format!("{}: {reason}", r.status.as_str()))
            }
            _ if !unexpected => Outcome::Skipped(format!("{} as expected: {reason}", r.status.as_str())),
            Status::Fail | Status::Xpass => Outcome::Failure(reason, escape::xml_text(&case_detail(r)).into_owned()),
            _ => Outcome::Error(reason, escape::xml_text(&case_detail(r)).into_owned()),
        }
    };
    // Each outcome is worked out once: a case's detail renders its diffs.
    let mut by_area: std::collections::BTreeMap<String, Vec<(&CaseResult, Outcome)>> =
        std::collections::BTreeMap::new();
    for r in results {
        by_area.entry(format!("{}/{}", r.profile, r.area)).or_default().push((r, outcome(r)));
    }
    let seconds = |ms: u128| format!("{:.3}", ms as f64 / 1000.0);
    let mut w = quick_xml::Writer::new_with_indent(Vec::new(), b' ', 2);
    let emit = |w: &mut quick_xml::Writer<Vec<u8>>, e: Event<'_>| {
        let _ = w.write_event(e);
    };
    emit(&mut w, Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)));
    let count = |f: &dyn Fn(&Outcome) -> bool, rs: &[(&CaseResult, Outcome)]| rs.iter().filter(|(_, o)| f(o)).count();
    let count_all = |f: &dyn Fn(&Outcome) -> bool| by_area.values().map(|rs| count(f, rs)).sum::<usize>().to_string();
    let total_ms: u128 = results.iter().map(|r| r.millis).sum();
    let attr = |s: &str| escape::xml_attr(&label(s)).into_owned();
    let mut root = BytesStart::new("testsuites");
    root.push_attribute(("name", format!("conformance: {}", attr(&hello.name)).as_str()));
    root.push_attribute(("tests", results.len().to_string().as_str()));
    root.push_attribute(("failures", count_all(&|o| matches!(o, Outcome::Failure(..))).as_str()));
    root.push_attribute(("errors", count_all(&|o| matches!(o, Outcome::Error(..))).as_str()));
    root.push_attribute(("time", seconds(total_ms).as_str()));
    emit(&mut w, Event::Start(root));
    for (area, rs) in &by_area {
        let mut suite = BytesStart::new("testsuite");
        suite.push_attribute(("name", attr(area).as_str()));
        suite.push_attribute(("tests", rs.len().to_string().as_str()));
        suite.push_attribute(("failures", count(&|o| matches!(o, Outcome::Failure(..)), rs).to_string().as_str()));
        suite.push_attribute(("errors", count(&|o| matches!(o, Outcome::Error(..)), rs).to_string().as_str()));
        suite.push_attribute(("skipped", count(&|o| matches!(o, Outcome::Skipped(_)), rs).to_string().as_str()));
        suite.push_attribute(("time", seconds(rs.iter().map(|(r, _)| r.millis).sum()).as_str()));
        emit(&mut w, Event::Start(suite));
        emit(&mut w, Event::Start(BytesStart::new("properties")));
        for (name, value) in [
            ("implementation", hello.name.as_str()),
            ("implementation.version", hello.version.as_str()),
            ("implementation.language", hello.language.as_str()),
            ("suite.version", env!("CARGO_PKG_VERSION")),
            ("protocol", crate::run::wire::PROTOCOL_VERSION),
        ] {
            let mut p = BytesStart::new("property");
            p.push_attribute(("name", name));
            p.push_attribute(("value", attr(value).as_str()));
            emit(&mut w, Event::Empty(p));
        }
        emit(&mut w, Event::End(BytesEnd::new("properties")));
        for (r, outcome) in rs {
            let mut tc = BytesStart::new("testcase");
            tc.push_attribute(("name", format!("{} [{}]", attr(&r.name), attr(&r.id)).as_str()));
            tc.push_attribute(("classname", format!("{}.{}", attr(&r.profile), attr(&r.area)).as_str()));
            tc.push_attribute(("time", seconds(r.millis).as_str()));
            let (tag, message, body) = match outcome {
                Outcome::Pass => {
                    emit(&mut w, Event::Empty(tc));
                    continue;
                }
                Outcome::Skipped(m) => ("skipped", m, None),
                Outcome::Failure(m, d) => ("failure", m, Some(d)),
                Outcome::Error(m, d) => ("error", m, Some(d)),
            };
            emit(&mut w, Event::Start(tc));
            let mut el = BytesStart::new(tag);
            el.push_attribute(("message", message.as_str()));
            if tag != "skipped" {
                el.push_attribute(("type", r.status.as_str()));
            }
            match body {
                Some(text) => {
                    emit(&mut w, Event::Start(el));
                    emit(&mut w, Event::Text(BytesText::new(text)));
                    emit(&mut w, Event::End(BytesEnd::new(tag)));
                }
                None => emit(&mut w, Event::Empty(el)),
            }
            emit(&mut w, Event::End(BytesEnd::new("testcase")));
        }
        emit(&mut w, Event::End(BytesEnd::new("testsuite")));
    }
    emit(&mut w, Event::End(BytesEnd::new("testsuites")));
    String::from_utf8(w.into_inner()).unwrap_or_default()
}

/// Markdown for a CI step summary. Text from data is inline text escaped by
/// [`escape::markdown_text`] (ids in code spans by [`escape::markdown_code`]), and a reason of
/// several lines continues in a code block ([`escape::markdown_block`]): nothing from data
/// becomes HTML, a heading, a table cell, a link or an image.
pub fn markdown(hello: &crate::Hello, results: &[CaseResult], summary: &Summary) -> String {
    let text = |s: &str| escape::markdown_text(&label(s));
    let mut out = String::new();
    let _ =
        writeln!(out, "## Conformance: {} {} ({})\n", text(&hello.name), text(&hello.version), text(&hello.language));
    let _ = writeln!(out, "| area | {} |", ORDER.map(|s| s.as_str()).join(" | "));
    let _ = writeln!(out, "|---|{}", "---:|".repeat(ORDER.len()));
    for (area, counts) in &summary.areas {
        let cells = ORDER.map(|s| counts.get(s.as_str()).copied().unwrap_or(0).to_string());
        let _ = writeln!(out, "| {} | {} |", text(area), cells.join(" | "));
    }
    let (seed, decision) = split_by_basis(results);
    let _ = writeln!(out, "\nOf the failures, {seed} violate the seed and {decision} differ only from a decision.");
    if summary.unexpected.is_empty() {
        let _ = writeln!(out, "\nEvery case is as expected.");
    } else {
        let unexpected: Vec<&CaseResult> = results.iter().filter(|r| summary.unexpected.contains(&r.id)).collect();
        let groups = [
            ("Violates the seed", Some(Verdict::Seed)),
            ("Differs from a decision", Some(Verdict::Decision)),
            ("Other unexpected results", None),
        ];
        for (title, basis) in groups {
            let members: Vec<&&CaseResult> = unexpected.iter().filter(|r| r.basis == basis).collect();
            if members.is_empty() {
                continue;
            }
            let _ = writeln!(out, "\n### {title}\n");
            for r in members {
                let reason = cut(r.reason.as_deref().unwrap_or_default(), REASON_MAX);
                let (first, rest) = reason.split_once('\n').unwrap_or((&reason, ""));
                let _ = writeln!(
                    out,
                    "- **{}** {} ({}): {}",
                    r.status.as_str(),
                    escape::markdown_code(&label(&r.id)),
                    text(&r.name),
                    escape::markdown_text(first)
                );
                if !rest.is_empty() {
                    out.push_str(&escape::markdown_block(rest, "  "));
                }
            }
        }
    }
    out
}

/// One shields.io endpoint document (`schemaVersion`, `label`, `message`, `color`) for the
/// results of `profile` (all results when `None`). The count is over every selected case, the
/// unsupported ones included, so a loader that runs 10 of 319 cases shows "10/319, 309
/// unsupported", never "10/10". PASS and XPASS count as passed; XFAIL does not.
pub fn badge(results: &[CaseResult], profile: Option<&str>) -> String {
    let mine: Vec<&CaseResult> = results.iter().filter(|r| profile.is_none_or(|p| r.profile == p)).collect();
    let total = mine.len();
    let passed = mine.iter().filter(|r| matches!(r.status, Status::Pass | Status::Xpass)).count();
    let unsupported = mine.iter().filter(|r| matches!(r.status, Status::Unsupported | Status::Skip)).count();
    let share = if total == 0 { 0.0 } else { passed as f64 / total as f64 };
    let color = match share {
        _ if total == 0 => "lightgrey",
        s if s >= 1.0 => "brightgreen",
        s if s >= 0.9 => "green",
        s if s >= 0.75 => "yellow",
        s if s >= 0.5 => "orange",
        _ => "red",
    };
    let message = if unsupported > 0 {
        format!("{passed}/{total}, {unsupported} unsupported")
    } else {
        format!("{passed}/{total}")
    };
    let title = profile.map_or_else(|| "conformance".to_string(), |p| format!("conformance: {}", label(p)));
    let doc = serde_json::json!({"schemaVersion": 1, "label": title, "message": message, "color": color});
    escape::json(serde_json::to_string_pretty(&doc).unwrap_or_default())
}

/// The profiles the results cover, in order.
pub fn profiles(results: &[CaseResult]) -> Vec<String> {
    let set: std::collections::BTreeSet<&str> = results.iter().map(|r| r.profile.as_str()).collect();
    set.into_iter().map(String::from).collect()
}
