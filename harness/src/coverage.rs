//! Clause coverage: which normative sentences of the seeds, and which written decisions, the
//! corpus tests. Clauses come from `clauses/*.yaml` in the cases directory and from every
//! `**D-...**` entry of `DECISIONS.md`. A case covers the clauses in its `clauses:` and the
//! decisions its `spec:` cites. A clause no case covers, and a case that covers none, are gaps:
//! `conformance coverage` lists them and fails.
//!
//! A decision that no scenario can express (a race, a path longer than the harness can build)
//! says so in its text with [`NOT_A_SCENARIO`] and names the test that pins it instead; coverage
//! lists such decisions apart and does not count them as gaps.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::load::Case;

/// One clause.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Clause {
    /// Stable id: `M-FD-12e`, `D-FM-5`.
    pub id: String,
    /// The seed heading, or `DECISIONS.md`.
    pub heading: String,
    /// The quoted text.
    pub text: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClauseFile {
    #[allow(dead_code)]
    profile: String,
    #[allow(dead_code)]
    seed: String,
    clauses: Vec<Clause>,
}

/// The marker of a decision pinned outside the corpus: `(not a scenario: <test>)`.
pub const NOT_A_SCENARIO: &str = "(not a scenario:";

/// Every clause of a corpus: the clause files, then the decisions.
pub fn load_clauses(corpus: &crate::corpus::Corpus) -> Result<Vec<Clause>, String> {
    let mut out = Vec::new();
    for (rel, text) in corpus.files.iter().filter(|(k, _)| k.starts_with("clauses/") && k.ends_with(".yaml")) {
        let f = corpus.path_of(rel);
        let file: ClauseFile = reference::yaml::from_str(text).map_err(|e| match e.line {
            Some(l) => format!("{}:{l}: {}", f.display(), e.message),
            None => format!("{}: {}", f.display(), e.message),
        })?;
        out.extend(file.clauses);
    }
    if out.is_empty() {
        return Err(format!("{}: no clause list under clauses/", corpus.origin.display()));
    }
    out.extend(decision_clauses(corpus.text("DECISIONS.md").unwrap_or_default()));
    let mut seen = BTreeSet::new();
    for c in &out {
        if !seen.insert(c.id.clone()) {
            return Err(format!("clause id '{}' is defined twice", c.id));
        }
    }
    Ok(out)
}

/// The `- **D-...**` bullets of DECISIONS.md, each with its text (joined lines).
pub fn decision_clauses(text: &str) -> Vec<Clause> {
    let mut out: Vec<Clause> = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix("- **D-") {
            if let Some((id, body)) = rest.split_once("**") {
                out.push(Clause {
                    id: format!("D-{id}"),
                    heading: "DECISIONS.md".into(),
                    text: body.trim().to_string(),
                });
                continue;
            }
        }
        let continuation = line.starts_with("  ") && !trimmed.is_empty();
        if let (true, Some(last)) = (continuation, out.last_mut()) {
            last.text.push(' ');
            last.text.push_str(trimmed);
        }
    }
    out
}

/// The clause ids a case covers.
pub fn covered_by(case: &Case) -> BTreeSet<String> {
    let s = &case.scenario;
    s.clauses.iter().cloned().chain(s.spec.iter().filter_map(|r| r.decision.clone())).collect()
}

/// The coverage of a corpus.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Coverage {
    /// Clause id → ids of the cases covering it.
    pub clauses: BTreeMap<String, Vec<String>>,
    /// Clauses no case covers.
    pub uncovered: Vec<Clause>,
    /// Cases that cover no clause.
    pub caseless: Vec<String>,
    /// Clause ids that cases cite but no clause list defines (with the citing case).
    pub unknown: Vec<(String, String)>,
    /// Decisions that no scenario can express, pinned by the test their text names.
    pub outside: Vec<String>,
}

impl Coverage {
    /// Whether there is no gap.
    pub fn is_complete(&self) -> bool {
        self.uncovered.is_empty() && self.caseless.is_empty() && self.unknown.is_empty()
    }
}

/// Computes coverage.
pub fn coverage(clauses: &[Clause], cases: &[Case]) -> Coverage {
    let mut cov = Coverage::default();
    let known: BTreeSet<&str> = clauses.iter().map(|c| c.id.as_str()).collect();
    for c in clauses {
        cov.clauses.insert(c.id.clone(), Vec::new());
    }
    for case in cases {
        let ids = covered_by(case);
        if ids.is_empty() {
            cov.caseless.push(case.scenario.id.clone());
        }
        for id in ids {
            if !known.contains(id.as_str()) {
                cov.unknown.push((case.scenario.id.clone(), id));
            } else if let Some(v) = cov.clauses.get_mut(&id) {
                v.push(case.scenario.id.clone());
            }
        }
    }
    let (outside, uncovered): (Vec<Clause>, Vec<Clause>) = clauses
        .iter()
        .filter(|c| cov.clauses.get(&c.id).is_none_or(Vec::is_empty))
        .cloned()
        .partition(|c| c.text.contains(NOT_A_SCENARIO));
    cov.uncovered = uncovered;
    cov.outside = outside.into_iter().map(|c| c.id).collect();
    cov
}

/// The human report.
pub fn report(cov: &Coverage) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for c in &cov.uncovered {
        let _ = writeln!(out, "uncovered clause {} ({}): \"{}\"", c.id, c.heading, c.text);
    }
    for id in &cov.caseless {
        let _ = writeln!(out, "case {id} cites no clause (add clauses: or a decision to its spec)");
    }
    for (case, id) in &cov.unknown {
        let _ = writeln!(out, "case {case} cites '{id}', which no clause list or DECISIONS.md defines");
    }
    if !cov.outside.is_empty() {
        let _ = writeln!(out, "pinned outside the corpus (no scenario can express them): {}", cov.outside.join(", "));
    }
    let covered = cov.clauses.values().filter(|v| !v.is_empty()).count();
    let _ = writeln!(
        out,
        "{covered} of {} clauses covered; {} cases without a clause",
        cov.clauses.len(),
        cov.caseless.len()
    );
    out
}
