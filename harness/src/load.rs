//! Loading the corpus: every `*.yaml` under a directory, parsed strictly and validated. Errors
//! name the file, the line and the field; one bad file never hides the others.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use crate::scenario::{Action, Platform, Scenario, TreeValue};

/// The built-in feature vocabulary (spec-cases/features.yaml).
const FEATURES_YAML: &str = include_str!("../../spec-cases/features.yaml");

/// A file that marks a directory as a materialised tree, never searched for cases.
pub const TREE_MARKER: &str = ".conformance-tree";

/// A loaded case.
#[derive(Debug, Clone)]
pub struct Case {
    /// The file.
    pub file: PathBuf,
    /// The display name: the path below the cases directory, without `.yaml`.
    pub name: String,
    /// The scenario.
    pub scenario: Scenario,
}

/// A loading error, located.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    /// The file.
    pub file: PathBuf,
    /// The 1-based line, where known.
    pub line: Option<usize>,
    /// What is wrong, naming the field.
    pub message: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{}: {}", self.file.display(), l, self.message),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

/// The default corpus: `spec-cases/` of this workspace.
pub fn default_cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("spec-cases")
}

/// The known feature names.
pub fn known_features() -> BTreeSet<String> {
    // The vocabulary is compiled in; a parse failure is caught by the tests that load the corpus.
    reference::yaml::from_str::<BTreeMap<String, String>>(FEATURES_YAML)
        .map(|m| m.into_keys().collect())
        .unwrap_or_default()
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>, errors: &mut Vec<LoadError>) {
    let entries = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) => {
            errors.push(LoadError {
                file: dir.to_path_buf(),
                line: None,
                message: format!("cannot list directory: {e}"),
            });
            return;
        }
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let Ok(ft) = entry.file_type() else { continue };
        if ft.is_dir() {
            // A reproduction's materialised tree is for reading, not a source of cases.
            if !path.join(TREE_MARKER).exists() {
                collect(&path, out, errors);
            }
        } else if path.extension().is_some_and(|e| e == "yaml")
            && path.file_name().is_some_and(|n| n != "features.yaml")
        {
            out.push(path);
        }
    }
}

/// The first 1-based line of `text` containing `needle`.
fn line_of(text: &str, needle: &str) -> Option<usize> {
    text.lines().position(|l| l.contains(needle)).map(|i| i + 1)
}

/// Loads and validates every case under `dir` (files whose top-level mapping has an `id`; other
/// YAML such as clause lists lives in `clauses/` and is skipped).
pub fn load_dir(dir: &Path) -> Result<Vec<Case>, Vec<LoadError>> {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    collect(dir, &mut files, &mut errors);
    files.retain(|f| !f.strip_prefix(dir).is_ok_and(|r| r.starts_with("clauses")));
    files.sort();
    let features = known_features();
    let mut cases = Vec::new();
    for file in files {
        match load_file(dir, &file, &features) {
            Ok(case) => cases.push(case),
            Err(mut e) => errors.append(&mut e),
        }
    }
    let mut ids: BTreeMap<String, PathBuf> = BTreeMap::new();
    for case in &cases {
        if let Some(first) = ids.insert(case.scenario.id.clone(), case.file.clone()) {
            let text = fs::read_to_string(&case.file).unwrap_or_default();
            errors.push(LoadError {
                file: case.file.clone(),
                line: line_of(&text, "id:"),
                message: format!("id: '{}' is also the id of {}", case.scenario.id, first.display()),
            });
        }
    }
    if errors.is_empty() {
        Ok(cases)
    } else {
        Err(errors)
    }
}

/// Loads one file.
pub fn load_file(dir: &Path, file: &Path, features: &BTreeSet<String>) -> Result<Case, Vec<LoadError>> {
    let err = |line: Option<usize>, message: String| LoadError { file: file.to_path_buf(), line, message };
    let text = fs::read_to_string(file).map_err(|e| vec![err(None, format!("cannot read: {e}"))])?;
    let scenario = parse(&text, features)
        .map_err(|problems| problems.into_iter().map(|(line, msg)| err(line, msg)).collect::<Vec<_>>())?;
    let name = file
        .strip_prefix(dir)
        .unwrap_or(file)
        .with_extension("")
        .to_string_lossy()
        .replace(std::path::MAIN_SEPARATOR, "/");
    Ok(Case { file: file.to_path_buf(), name, scenario })
}

/// Parses and validates one scenario's text: the located problems, or the scenario.
pub fn parse(text: &str, features: &BTreeSet<String>) -> Result<Scenario, Vec<(Option<usize>, String)>> {
    let scenario: Scenario = reference::yaml::from_str(text).map_err(|e| vec![(e.line, e.message)])?;
    let problems = validate(&scenario, features);
    if problems.is_empty() {
        Ok(scenario)
    } else {
        Err(problems.into_iter().map(|(needle, msg)| (needle.and_then(|n| line_of(text, &n)), msg)).collect())
    }
}

/// Checks what serde cannot: returns (text to locate the line by, message) pairs.
fn validate(s: &Scenario, features: &BTreeSet<String>) -> Vec<(Option<String>, String)> {
    let mut out: Vec<(Option<String>, String)> = Vec::new();
    let mut bad = |needle: &str, msg: String| out.push((Some(needle.to_string()), msg));
    if s.id.trim().is_empty() || s.id.contains(char::is_whitespace) {
        bad("id:", format!("id: '{}' must be non-empty with no spaces", s.id));
    }
    if !reference::driver::PROFILES.contains(&s.profile.as_str()) {
        bad(
            "profile:",
            format!("profile: '{}' is not a profile (known: {})", s.profile, reference::driver::PROFILES.join(", ")),
        );
    }
    if s.profile == "section" && s.platform != Platform::Posix {
        bad("platform:", "platform: the section profile runs on posix trees only".into());
    }
    if s.options.is_some() && s.profile != "section" {
        bad("options:", "options: only section cases have options".into());
    }
    if s.profile != "modules" {
        for st in &s.steps {
            let name = match st.action {
                Action::Compact => "compact",
                Action::ColdClear => "cold_clear",
                Action::Fork => "fork",
                Action::FailNextAppend => "fail_next_append",
                _ => continue,
            };
            bad(name, format!("steps: {name} is not part of the {} profile", s.profile));
        }
    }
    if s.spec.is_empty() {
        bad("spec:", "spec: cite at least one seed sentence or decision".into());
    }
    for r in &s.spec {
        let cites_seed = r.seed.is_some() && r.quote.is_some() && r.heading.is_some();
        if !cites_seed && r.decision.is_none() {
            bad("spec:", "spec: each entry needs seed, heading and quote, or a decision".into());
        }
    }
    for f in &s.features {
        if !features.contains(f) {
            bad(f, format!("features: '{f}' is not in features.yaml"));
        }
    }
    match s.steps.first().map(|st| &st.action) {
        Some(Action::Start) => {}
        _ => bad("steps:", "steps: the first step must be start".into()),
    }
    if s.steps.iter().skip(1).any(|st| matches!(st.action, Action::Start)) {
        bad("- start", "steps: start may only be the first step".into());
    }
    let host = s.platform == Platform::Posix;
    if !host && s.placement.is_some() {
        bad("placement:", "placement: only posix cases place a root".into());
    }
    if s.platform != Platform::Managed && s.environment.is_some() {
        bad("environment:", "environment: only managed cases have an environment".into());
    }
    if s.platform != Platform::Managed && s.steps.iter().any(|st| matches!(st.action, Action::Environment(_))) {
        bad("environment:", "steps: environment applies to managed cases only".into());
    }
    if s.placement.is_some() && !s.features.iter().any(|f| f == "root_placement") {
        bad("placement:", "placement: needs the feature root_placement".into());
    }
    if host && s.root.is_some() {
        bad("root:", "root: a posix case's root is the directory the harness makes".into());
    }
    for (path, value) in &s.tree {
        if !host && path.starts_with("..") {
            bad(path, format!("tree: '{path}' lies outside an in-memory tree"));
        }
        let posix_only = matches!(value, TreeValue::Sparse(_) | TreeValue::Fifo);
        if !host && posix_only {
            bad(path, format!("tree: '{path}': sparse files and FIFOs exist only on posix"));
        }
        if s.platform == Platform::Windows && matches!(value, TreeValue::Symlink(_)) {
            bad(path, format!("tree: '{path}': a Windows target tree holds no symlinks"));
        }
    }
    for st in &s.steps {
        if let Some(e) = &st.expect {
            for d in &e.diagnostics {
                if !reference::Code::ALL.iter().any(|c| c.as_str() == d.code) {
                    bad(&d.code, format!("expect.diagnostics: '{}' is not a diagnostic code", d.code));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vocabulary parses and names every feature the reference implements: a vocabulary
    /// that failed to parse would otherwise make every case's features unknown.
    #[test]
    fn vocabulary_holds_every_reference_feature() {
        let known = known_features();
        for f in reference::driver::FEATURES {
            assert!(known.contains(*f), "{f} is missing from features.yaml");
        }
    }
}
