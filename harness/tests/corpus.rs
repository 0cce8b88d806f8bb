//! The corpus lint: ids are unique (the loader refuses duplicates), no retired id is used again,
//! every feature is known (the loader), every case cites a clause, every cited clause exists, and
//! every clause of the seeds and of DECISIONS.md is covered by a case, and every quoted sentence
//! (a clause's text, a case's spec quote) is verbatim under its cited heading of its cited seed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use harness::case::corpus::default_cases_dir;
use harness::case::coverage::{coverage, load_clauses, misquoted, report};
use harness::case::load::load_dir;

fn retired() -> Vec<String> {
    let text = std::fs::read_to_string(default_cases_dir().join("retired-ids.txt")).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect()
}

#[test]
fn no_retired_id_is_used_again() {
    let cases = load_dir(&default_cases_dir()).unwrap();
    let clauses = load_clauses(&harness::case::corpus::Corpus::read(&default_cases_dir())).unwrap();
    for id in retired() {
        assert!(!cases.iter().any(|c| c.scenario.id == id), "retired id {id} is a case id again");
        assert!(!clauses.iter().any(|c| c.id == id), "retired id {id} is a clause id again");
    }
}

#[test]
fn every_clause_is_covered_and_every_case_cites_one() {
    let cases = load_dir(&default_cases_dir()).unwrap();
    assert!(!cases.is_empty());
    let clauses = load_clauses(&harness::case::corpus::Corpus::read(&default_cases_dir())).unwrap();
    let cov = coverage(&clauses, &cases);
    assert!(cov.is_complete(), "{}", report(&cov));
}

#[test]
fn every_quote_is_verbatim_under_its_heading_in_its_seed() {
    let corpus = harness::case::corpus::Corpus::read(&default_cases_dir());
    let cases = load_dir(&default_cases_dir()).unwrap();
    let bad = misquoted(&corpus, &cases).unwrap();
    let lines: Vec<String> =
        bad.iter().map(|m| format!("{}: {}: \"{}\" ({})", m.quote.file, m.quote.owner, m.quote.text, m.why)).collect();
    assert!(bad.is_empty(), "{} quotes are not in their seed:\n{}", bad.len(), lines.join("\n"));
}
