//! Reporters: human text with the first divergent step side by side.

use std::fmt::Write;

use crate::run::{CaseResult, Status};

/// The detail of one non-passing case: its reason and, for a failure, the first divergent step
/// with expected and actual side by side.
pub fn case_detail(r: &CaseResult) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{} {} [{}]{}", r.status.as_str(), r.name, r.id, basis_label(r));
    if let Some(reason) = &r.reason {
        let _ = writeln!(out, "  {reason}");
    }
    for d in &r.decision_differences {
        let _ = writeln!(out, "  (not gated) {d}");
    }
    if r.status == Status::Fail {
        if let Some(step) = r.first_divergence() {
            let _ = writeln!(out, "  first divergent step: {} ({})", step.index, step.action);
            for m in &step.mismatches {
                let _ = writeln!(out, "  {}:", m.field);
                side_by_side(&mut out, &m.expected, &m.actual);
            }
        }
    }
    out
}

/// `violates the seed` or `differs from decision D-X`, for a failure.
fn basis_label(r: &CaseResult) -> String {
    match (r.basis, &r.decision) {
        (Some("seed"), _) => " — violates the seed".into(),
        (Some(_), Some(d)) => format!(" — differs from decision {d}"),
        _ => String::new(),
    }
}

fn side_by_side(out: &mut String, expected: &str, actual: &str) {
    let e: Vec<String> = expected.lines().map(|l| format!("{l:?}")).collect();
    let a: Vec<String> = actual.lines().map(|l| format!("{l:?}")).collect();
    let width = e.iter().map(String::len).max().unwrap_or(0).clamp(8, 60);
    let _ = writeln!(out, "    {:<width$} | actual", "expected");
    for i in 0..e.len().max(a.len()).max(1) {
        let l = e.get(i).map_or("", String::as_str);
        let r = a.get(i).map_or("", String::as_str);
        let mark = if l == r { ' ' } else { '!' };
        let _ = writeln!(out, "  {mark} {l:<width$} | {r}");
    }
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
        let _ = writeln!(out, "{area:<28} {}", cells.join(" "));
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
    let seed = results.iter().filter(failed).filter(|r| r.basis == Some("seed")).count();
    let decision = results.iter().filter(failed).filter(|r| r.basis == Some("decision")).count();
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

/// The JSON report: the implementation, the summary and every result with its steps.
pub fn json(hello: &crate::Hello, results: &[CaseResult], summary: &Summary) -> String {
    let v = serde_json::json!({
        "suite_version": env!("CARGO_PKG_VERSION"),
        "implementation": hello,
        "summary": summary,
        "results": results,
    });
    serde_json::to_string_pretty(&v).unwrap_or_default()
}

/// JUnit XML: one test suite per area, one test case per case.
pub fn junit(hello: &crate::Hello, results: &[CaseResult], summary: &Summary) -> String {
    use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
    let mut report = Report::new(format!("conformance: {}", hello.name));
    let mut suites: std::collections::BTreeMap<String, TestSuite> = std::collections::BTreeMap::new();
    for r in results {
        let suite = suites.entry(format!("{}/{}", r.profile, r.area)).or_insert_with_key(|k| TestSuite::new(k.clone()));
        let unexpected = summary.unexpected.contains(&r.id);
        let status = match r.status {
            Status::Pass => TestCaseStatus::success(),
            Status::Skip | Status::Unsupported | Status::Xfail => {
                let mut s = TestCaseStatus::skipped();
                if let TestCaseStatus::Skipped { message, .. } = &mut s {
                    *message = Some(format!("{}: {}", r.status.as_str(), r.reason.clone().unwrap_or_default()).into());
                }
                s
            }
            _ if !unexpected => TestCaseStatus::success(),
            st => {
                let kind = if st == Status::Fail || st == Status::Xpass {
                    NonSuccessKind::Failure
                } else {
                    NonSuccessKind::Error
                };
                let mut s = TestCaseStatus::non_success(kind);
                if let TestCaseStatus::NonSuccess { message, description, ty, .. } = &mut s {
                    *message = Some(r.reason.clone().unwrap_or_default().into());
                    *description = Some(case_detail(r).into());
                    *ty = Some(st.as_str().into());
                }
                s
            }
        };
        let mut tc = TestCase::new(format!("{} [{}]", r.name, r.id), status);
        tc.set_classname(format!("{}.{}", r.profile, r.area));
        tc.set_time(std::time::Duration::from_millis(u64::try_from(r.millis).unwrap_or(u64::MAX)));
        suite.add_test_case(tc);
    }
    report.add_test_suites(suites.into_values());
    report.to_string().unwrap_or_default()
}

/// Markdown for a CI step summary.
pub fn markdown(hello: &crate::Hello, results: &[CaseResult], summary: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## Conformance: {} {} ({})\n", hello.name, hello.version, hello.language);
    let _ = writeln!(out, "| area | {} |", ORDER.map(|s| s.as_str()).join(" | "));
    let _ = writeln!(out, "|---|{}", "---:|".repeat(ORDER.len()));
    for (area, counts) in &summary.areas {
        let cells = ORDER.map(|s| counts.get(s.as_str()).copied().unwrap_or(0).to_string());
        let _ = writeln!(out, "| {area} | {} |", cells.join(" | "));
    }
    let (seed, decision) = split_by_basis(results);
    let _ = writeln!(out, "\nOf the failures, {seed} violate the seed and {decision} differ only from a decision.");
    if summary.unexpected.is_empty() {
        let _ = writeln!(out, "\nEvery case is as expected.");
    } else {
        let unexpected: Vec<&CaseResult> = results.iter().filter(|r| summary.unexpected.contains(&r.id)).collect();
        let groups = [
            ("Violates the seed", Some("seed")),
            ("Differs from a decision", Some("decision")),
            ("Other unexpected results", None),
        ];
        for (title, basis) in groups {
            let members: Vec<&&CaseResult> = unexpected.iter().filter(|r| r.basis == basis).collect();
            if members.is_empty() {
                continue;
            }
            let _ = writeln!(out, "\n### {title}\n");
            for r in members {
                let _ = writeln!(
                    out,
                    "- **{}** `{}` ({}): {}",
                    r.status.as_str(),
                    r.id,
                    r.name,
                    r.reason.clone().unwrap_or_default()
                );
            }
        }
    }
    out
}

/// Badge JSON per profile (shields.io endpoint schema): passed over run cases.
pub fn badge(results: &[CaseResult]) -> String {
    let mut per: std::collections::BTreeMap<&str, (usize, usize)> = std::collections::BTreeMap::new();
    for r in results.iter().filter(|r| !matches!(r.status, Status::Skip | Status::Unsupported)) {
        let e = per.entry(r.profile.as_str()).or_default();
        e.1 += 1;
        if r.status == Status::Pass {
            e.0 += 1;
        }
    }
    let badges: serde_json::Map<String, serde_json::Value> = per
        .into_iter()
        .map(|(profile, (pass, run))| {
            let color = if pass == run { "brightgreen" } else if pass * 10 >= run * 9 { "yellow" } else { "red" };
            let v = serde_json::json!({"schemaVersion": 1, "label": format!("conformance: {profile}"), "message": format!("{pass}/{run}"), "color": color});
            (profile.to_string(), v)
        })
        .collect();
    serde_json::to_string_pretty(&serde_json::Value::Object(badges)).unwrap_or_default()
}
