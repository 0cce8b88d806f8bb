//! Reports on a real run: JUnit is well-formed XML with one test case per case, the human report
//! ends with the plain closing line, and a manifest entry turns a failure into XFAIL and a pass
//! into XPASS.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use harness::case::corpus::default_cases_dir;
use harness::case::load::load_dir;
use harness::judge::manifest::{Entry, Manifest};
use harness::report::formats::{self, Summary};
use harness::run::case::{run_case, RunContext, Status};
use harness::run::implementation::{reference_hello, InProcess};

fn results() -> Vec<harness::run::case::CaseResult> {
    let cases = load_dir(&default_cases_dir()).unwrap();
    cases
        .iter()
        .take(12)
        .map(|c| run_case(&mut InProcess::default(), &RunContext::new(&reference_hello()), c))
        .collect()
}

#[test]
fn junit_is_well_formed_xml_with_one_testcase_per_case() {
    let results = results();
    let summary = Summary::new(&results, Vec::new());
    let xml = formats::junit(&reference_hello(), &results, &summary);
    let mut reader = quick_xml::Reader::from_str(&xml);
    let mut testcases = 0;
    loop {
        match reader.read_event().expect("well-formed XML") {
            quick_xml::events::Event::Eof => break,
            quick_xml::events::Event::Start(e) | quick_xml::events::Event::Empty(e)
                if e.name().as_ref() == b"testcase" =>
            {
                testcases += 1
            }
            _ => {}
        }
    }
    assert_eq!(testcases, results.len());
}

/// The constraints of the common Jenkins/Ant `junit-10` schema that a report can break: for each
/// element, the attributes it may carry, those it must, and the elements it may hold.
type Element = (&'static str, &'static [&'static str], &'static [&'static str], &'static [&'static str]);
const JUNIT_10: &[Element] = &[
    ("testsuites", &["name", "time", "tests", "failures", "errors"], &[], &["testsuite"]),
    (
        "testsuite",
        &[
            "name",
            "tests",
            "failures",
            "errors",
            "group",
            "time",
            "skipped",
            "timestamp",
            "hostname",
            "id",
            "package",
            "file",
            "log",
            "url",
        ],
        &["name", "tests", "failures", "errors"],
        &["testsuite", "properties", "testcase", "system-out", "system-err"],
    ),
    ("properties", &[], &[], &["property"]),
    ("property", &["name", "value"], &["name", "value"], &[]),
    (
        "testcase",
        &["name", "time", "classname", "group"],
        &["name"],
        &["skipped", "error", "failure", "system-out", "system-err"],
    ),
    ("failure", &["type", "message"], &[], &[]),
    ("error", &["type", "message"], &[], &[]),
    ("skipped", &["type", "message"], &[], &[]),
];

/// Checks `xml` against [`JUNIT_10`]; returns every violation.
fn junit_violations(xml: &str) -> Vec<String> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut stack: Vec<String> = Vec::new();
    let mut out = Vec::new();
    loop {
        let event = reader.read_event().expect("well-formed XML");
        let (e, empty) = match event {
            Event::Eof => break,
            Event::Start(e) => (e, false),
            Event::Empty(e) => (e, true),
            Event::End(_) => {
                stack.pop();
                continue;
            }
            _ => continue,
        };
        let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
        let Some((_, allowed, required, _)) = JUNIT_10.iter().find(|(n, ..)| *n == name) else {
            out.push(format!("unknown element <{name}>"));
            continue;
        };
        if let Some(parent) = stack.last() {
            let children = JUNIT_10.iter().find(|(n, ..)| n == parent).map_or(&[][..], |t| t.3);
            if !children.contains(&name.as_str()) {
                out.push(format!("<{name}> inside <{parent}>"));
            }
        }
        let attrs: Vec<String> =
            e.attributes().map(|a| String::from_utf8_lossy(a.unwrap().key.as_ref()).into_owned()).collect();
        for a in &attrs {
            if !allowed.contains(&a.as_str()) {
                out.push(format!("<{name}> has attribute '{a}'"));
            }
        }
        for r in *required {
            if !attrs.iter().any(|a| a == r) {
                out.push(format!("<{name}> lacks attribute '{r}'"));
            }
        }
        if !empty {
            stack.push(name);
        }
    }
    out
}

#[test]
fn junit_follows_the_jenkins_schema_with_failures_and_skips() {
    let mut results = results();
    results[0].status = Status::Fail;
    results[0].reason = Some("step 0: \u{1}binary\u{0} in stderr".into());
    results[1].status = Status::Unsupported;
    results[2].status = Status::Crash;
    let summary = Summary::new(&results, vec![results[0].id.clone(), results[2].id.clone()]);
    let xml = formats::junit(&reference_hello(), &results, &summary);
    assert_eq!(junit_violations(&xml), Vec::<String>::new(), "{xml}");
    assert!(xml.contains("<failure") && xml.contains("<error") && xml.contains("<skipped"), "{xml}");
    assert!(xml.contains(r#"name="implementation" value="reference""#), "{xml}");
}

#[test]
fn human_report_closes_with_passed_and_failed_counts() {
    let results = results();
    let summary = Summary::new(&results, Vec::new());
    let text = formats::human(&results, &summary, false);
    assert_eq!(text.lines().last(), Some(format!("{} passed, 0 failed", results.len()).as_str()));
}

#[test]
fn manifest_marks_a_pass_against_an_entry_as_an_unexpected_xpass() {
    let mut results = results();
    let first = results.first_mut().unwrap();
    assert_eq!(first.status, Status::Pass);
    let mut m = Manifest::default();
    m.entries
        .insert(first.id.clone(), Entry { status: Status::Fail, reason: "known".into(), link: None, flaky: false });
    assert!(!m.apply(first));
    assert_eq!(first.status, Status::Xpass);
}

#[test]
fn manifest_marks_an_expected_failure_as_xfail() {
    let mut results = results();
    let first = results.first_mut().unwrap();
    first.status = Status::Fail;
    let mut m = Manifest::default();
    m.entries
        .insert(first.id.clone(), Entry { status: Status::Fail, reason: "known".into(), link: None, flaky: false });
    assert!(m.apply(first));
    assert_eq!(first.status, Status::Xfail);
}

#[test]
fn manifest_names_unknown_ids() {
    let mut m = Manifest::default();
    m.entries
        .insert("no-such-case".into(), Entry { status: Status::Fail, reason: "x".into(), link: None, flaky: false });
    let known = ["m-fm-001".to_string()].into_iter().collect();
    assert_eq!(m.unknown_ids(&known), vec!["no-such-case".to_string()]);
}
