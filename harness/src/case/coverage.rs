//! Clause coverage: which normative sentences of the seeds, and which written decisions, the
//! corpus tests. Clauses come from `clauses/*.yaml` in the cases directory and from every
//! `**D-...**` entry of `DECISIONS.md`. A case covers the clauses in its `clauses:` and the
//! decisions its `spec:` cites. A clause no case covers, and a case that covers none, are gaps:
//! `conformance coverage` lists them and fails.
//!
//! Every quoted sentence, each clause's `text` and each case's `spec` quote, must occur verbatim
//! under the cited heading of the cited seed (see [`misquoted`]); a quote that does not is a gap
//! too, so a clause or a case can never rest on words the seed does not say.
//!
//! A decision that no scenario can express (a race, a path longer than the harness can build)
//! says so in its text with [`NOT_A_SCENARIO`] and names the test that pins it instead; coverage
//! lists such decisions apart and does not count them as gaps.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::case::load::Case;

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
    seed: String,
    clauses: Vec<Clause>,
}

/// The marker of a decision pinned outside the corpus: `(not a scenario: <test>)`.
pub const NOT_A_SCENARIO: &str = "(not a scenario:";

/// The clause files of a corpus, by relative path, parsed.
fn clause_files(corpus: &crate::case::corpus::Corpus) -> Result<Vec<(&str, ClauseFile)>, String> {
    let mut out = Vec::new();
    for (rel, text) in corpus.files.iter().filter(|(k, _)| k.starts_with("clauses/") && k.ends_with(".yaml")) {
        let f = corpus.path_of(rel);
        let file: ClauseFile = reference::yaml::from_str(text).map_err(|e| match e.line {
            Some(l) => format!("{}:{l}: {}", f.display(), e.message),
            None => format!("{}: {}", f.display(), e.message),
        })?;
        out.push((rel.as_str(), file));
    }
    Ok(out)
}

/// Every clause of a corpus: the clause files, then the decisions.
pub fn load_clauses(corpus: &crate::case::corpus::Corpus) -> Result<Vec<Clause>, String> {
    let mut out = Vec::new();
    for (_, file) in clause_files(corpus)? {
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
    /// Quotes that are not under their cited heading of their cited seed ([`misquoted`]).
    pub misquoted: Vec<Misquote>,
}

impl Coverage {
    /// Whether there is no gap.
    pub fn is_complete(&self) -> bool {
        self.uncovered.is_empty() && self.caseless.is_empty() && self.unknown.is_empty() && self.misquoted.is_empty()
    }
}

/// The whole coverage of a corpus: its clauses against its cases, and every quote against its seed.
pub fn coverage_of(corpus: &crate::case::corpus::Corpus, cases: &[Case]) -> Result<Coverage, String> {
    let clauses = load_clauses(corpus)?;
    let mut cov = coverage(&clauses, cases);
    cov.misquoted = misquoted(corpus, cases)?;
    Ok(cov)
}

/// One quoted sentence and who quotes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Quote {
    /// The file that quotes it, for messages.
    pub file: String,
    /// Who quotes it: `clause M-FD-01`, `case m-fm-005`.
    pub owner: String,
    /// The seed's number (`000`).
    pub seed: String,
    /// The cited heading.
    pub heading: String,
    /// The quoted words.
    pub text: String,
}

/// A quote the seed does not hold where it is cited, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Misquote {
    /// The quote.
    pub quote: Quote,
    /// What is wrong: no such seed, no such heading, or not under it (and where it is, if anywhere).
    pub why: String,
}

/// Every quote of a corpus: each clause's `text` (with its file's `seed`) and each case's `spec`
/// quote.
pub fn quotes(corpus: &crate::case::corpus::Corpus, cases: &[Case]) -> Result<Vec<Quote>, String> {
    let mut out = Vec::new();
    for (rel, file) in clause_files(corpus)? {
        for c in file.clauses {
            out.push(Quote {
                file: corpus.path_of(rel).display().to_string(),
                owner: format!("clause {}", c.id),
                seed: file.seed.clone(),
                heading: c.heading,
                text: c.text,
            });
        }
    }
    for case in cases {
        for r in &case.scenario.spec {
            if let (Some(seed), Some(heading), Some(text)) = (&r.seed, &r.heading, &r.quote) {
                out.push(Quote {
                    file: case.file.display().to_string(),
                    owner: format!("case {}", case.scenario.id),
                    seed: seed.clone(),
                    heading: heading.clone(),
                    text: text.clone(),
                });
            }
        }
    }
    Ok(out)
}

/// The sections of a seed, in order: each heading with the text below it up to the next heading,
/// its whitespace collapsed (runs of spaces and line breaks become one space).
///
/// A heading is the document's first line (its title), and every other paragraph (text between
/// blank lines) that is one line, starts with an upper-case letter, ends without punctuation
/// (`.`, `:`, `;`, `,`, `!`, `?`) and holds no `|`. That is how the seeds set their section titles:
/// `Format and discovery`, `Amendment 2026-10-18: the lean prompt carries it too`; it leaves out
/// a lead-in such as `Known limits:`, a command line (`pnpm add ...`) and the flattened options
/// table.
pub fn seed_sections(text: &str) -> Vec<(String, String)> {
    let mut paragraphs: Vec<Vec<&str>> = vec![Vec::new()];
    for line in text.lines() {
        match (line.trim().is_empty(), paragraphs.last_mut()) {
            (true, _) => paragraphs.push(Vec::new()),
            (false, Some(p)) => p.push(line.trim()),
            (false, None) => {}
        }
    }
    let is_heading = |line: &str| {
        line.chars().next().is_some_and(char::is_uppercase)
            && !line.ends_with(['.', ':', ';', ',', '!', '?'])
            && !line.contains('|')
    };
    let mut sections: Vec<(String, String)> = Vec::new();
    for p in paragraphs.into_iter().filter(|p| !p.is_empty()) {
        let heading = match p.as_slice() {
            [line] if sections.is_empty() || is_heading(line) => Some(line.to_string()),
            _ => None,
        };
        match (heading, sections.last_mut()) {
            (Some(h), _) => sections.push((h, String::new())),
            (None, Some((_, body))) => {
                body.push(' ');
                body.push_str(&p.join(" "));
            }
            (None, None) => {}
        }
    }
    sections.into_iter().map(|(h, body)| (h, collapse(&body))).collect()
}

/// `text` with every run of whitespace (spaces, tabs, line breaks) made one space, trimmed.
fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The quotes of a corpus that do not occur verbatim under their cited heading of their cited
/// seed, compared after collapsing whitespace and line breaks only: no case folding, no
/// punctuation or quote-mark leniency, so a paraphrase or a quote moved to another section fails.
pub fn misquoted(corpus: &crate::case::corpus::Corpus, cases: &[Case]) -> Result<Vec<Misquote>, String> {
    let mut seeds: BTreeMap<String, Option<Vec<(String, String)>>> = BTreeMap::new();
    let mut out = Vec::new();
    for quote in quotes(corpus, cases)? {
        let sections = seeds.entry(quote.seed.clone()).or_insert_with(|| corpus.seed(&quote.seed).map(seed_sections));
        let why = match sections {
            None => Some(format!("there is no seed {} under seeds/", quote.seed)),
            Some(sections) => {
                let probe = collapse(&quote.text);
                let under = |h: &str| sections.iter().any(|(head, body)| head == h && body.contains(&probe));
                if probe.is_empty() {
                    Some("the quote is empty".into())
                } else if under(&quote.heading) {
                    None
                } else if !sections.iter().any(|(h, _)| *h == quote.heading) {
                    let known: Vec<&str> = sections.iter().map(|(h, _)| h.as_str()).collect();
                    Some(format!(
                        "seed {} has no heading \"{}\" (its headings: {})",
                        quote.seed,
                        quote.heading,
                        known.join("; ")
                    ))
                } else {
                    match sections.iter().find(|(_, body)| body.contains(&probe)) {
                        Some((h, _)) => Some(format!("the words are under \"{h}\", not \"{}\"", quote.heading)),
                        None => Some(format!("seed {} does not say this under \"{}\"", quote.seed, quote.heading)),
                    }
                }
            }
        };
        if let Some(why) = why {
            out.push(Misquote { quote, why });
        }
    }
    Ok(out)
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
    for m in &cov.misquoted {
        let q = &m.quote;
        let _ = writeln!(out, "misquoted: {}: {}: \"{}\" ({})", q.file, q.owner, q.text, m.why);
    }
    if !cov.outside.is_empty() {
        let _ = writeln!(out, "pinned outside the corpus (no scenario can express them): {}", cov.outside.join(", "));
    }
    let covered = cov.clauses.values().filter(|v| !v.is_empty()).count();
    let _ = writeln!(
        out,
        "{covered} of {} clauses covered; {} cases without a clause; {} quotes not in their seed",
        cov.clauses.len(),
        cov.caseless.len(),
        cov.misquoted.len()
    );
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;
    use crate::case::corpus::Corpus;

    const SEED: &str = "Title of the seed\n\nIntro text.\n\nFirst part\n\nA sentence that runs\nover two lines.\n\n\
                        Known limits:\n\n\u{2022} a bullet.\n\nSecond part\n\nOther words here.\n";

    fn corpus_with(clause_text: &str, heading: &str) -> Corpus {
        let mut corpus = Corpus::builtin();
        corpus.files.retain(|k, _| !k.starts_with("clauses/") && !k.starts_with("seeds/"));
        corpus.files.insert("seeds/900_test.txt".into(), SEED.into());
        corpus.files.insert(
            "clauses/test.yaml".into(),
            format!("profile: modules\nseed: \"900\"\nclauses:\n  - id: T-1\n    heading: {heading}\n    text: \"{clause_text}\"\n"),
        );
        corpus
    }

    #[test]
    fn sections_are_split_at_one_line_titles_only() {
        let heads: Vec<String> = seed_sections(SEED).into_iter().map(|(h, _)| h).collect();
        assert_eq!(heads, ["Title of the seed", "First part", "Second part"]);
    }

    #[test]
    fn a_quote_broken_over_lines_matches_its_heading() {
        let corpus = corpus_with("A sentence that runs over two lines.", "First part");
        assert_eq!(misquoted(&corpus, &[]).unwrap(), []);
        let corpus = corpus_with("a bullet.", "First part");
        assert_eq!(misquoted(&corpus, &[]).unwrap(), []);
    }

    #[test]
    fn a_paraphrase_is_refused_naming_the_file_the_clause_and_the_quote() {
        let corpus = corpus_with("A sentence that runs over 2 lines.", "First part");
        let bad = misquoted(&corpus, &[]).unwrap();
        assert_eq!(bad.len(), 1);
        let mut cov = Coverage { misquoted: bad, ..Coverage::default() };
        assert!(!cov.is_complete());
        let text = report(&cov);
        assert!(text.contains("clauses/test.yaml: clause T-1: \"A sentence that runs over 2 lines.\""), "{text}");
        cov.misquoted.clear();
        assert!(cov.is_complete());
    }

    #[test]
    fn a_quote_under_another_heading_is_refused_and_told_where_it_is() {
        let corpus = corpus_with("Other words here.", "First part");
        let bad = misquoted(&corpus, &[]).unwrap();
        assert_eq!(bad.len(), 1);
        assert!(bad[0].why.contains("under \"Second part\""), "{}", bad[0].why);
    }

    #[test]
    fn a_heading_the_seed_lacks_is_refused() {
        let corpus = corpus_with("Other words here.", "Known limits");
        let bad = misquoted(&corpus, &[]).unwrap();
        assert!(bad[0].why.contains("has no heading"), "{}", bad[0].why);
    }

    #[test]
    fn case_differs_is_not_normalised() {
        let corpus = corpus_with("other words here.", "Second part");
        assert_eq!(misquoted(&corpus, &[]).unwrap().len(), 1);
    }
}
