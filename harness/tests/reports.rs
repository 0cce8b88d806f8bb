//! Reports on a real run: JUnit is well-formed XML with one test case per case, the human report
//! ends with the plain closing line, and a manifest entry turns a failure into XFAIL and a pass
//! into XPASS.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use harness::implementation::{reference_hello, InProcess};
use harness::load::{default_cases_dir, load_dir};
use harness::manifest::{Entry, Manifest};
use harness::report::{self, Summary};
use harness::run::{run_case, RunContext, Status};

fn results() -> Vec<harness::run::CaseResult> {
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
    let xml = report::junit(&reference_hello(), &results, &summary);
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

#[test]
fn human_report_closes_with_passed_and_failed_counts() {
    let results = results();
    let summary = Summary::new(&results, Vec::new());
    let text = report::human(&results, &summary, false);
    assert_eq!(text.lines().last(), Some(format!("{} passed, 0 failed", results.len()).as_str()));
}

#[test]
fn manifest_marks_a_pass_against_an_entry_as_an_unexpected_xpass() {
    let mut results = results();
    let first = results.first_mut().unwrap();
    assert_eq!(first.status, Status::Pass);
    let mut m = Manifest::default();
    m.entries.insert(first.id.clone(), Entry { status: Status::Fail, reason: "known".into(), link: None });
    assert!(!m.apply(first));
    assert_eq!(first.status, Status::Xpass);
}

#[test]
fn manifest_marks_an_expected_failure_as_xfail() {
    let mut results = results();
    let first = results.first_mut().unwrap();
    first.status = Status::Fail;
    let mut m = Manifest::default();
    m.entries.insert(first.id.clone(), Entry { status: Status::Fail, reason: "known".into(), link: None });
    assert!(m.apply(first));
    assert_eq!(first.status, Status::Xfail);
}

#[test]
fn manifest_names_unknown_ids() {
    let mut m = Manifest::default();
    m.entries.insert("no-such-case".into(), Entry { status: Status::Fail, reason: "x".into(), link: None });
    let known = ["m-fm-001".to_string()].into_iter().collect();
    assert_eq!(m.unknown_ids(&known), vec!["no-such-case".to_string()]);
}
