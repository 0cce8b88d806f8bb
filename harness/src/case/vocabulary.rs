//! The suite's vocabulary (spec-cases/vocabulary.yaml): capabilities, which an implementation may
//! lack and declares in `hello`, and rules, which a case tests and which nobody can declare away.
//! A few capabilities are only retained: a `hello` may still declare them, no case requires them.

use std::collections::BTreeMap;

use serde::Deserialize;

/// The built-in vocabulary.
const VOCABULARY_YAML: &str = include_str!("../../../spec-cases/vocabulary.yaml");

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Vocabulary {
    capabilities: BTreeMap<String, String>,
    rules: BTreeMap<String, String>,
    /// Capabilities kept only so that an existing adapter's `hello` stays valid; none is derived
    /// for a case. Absent: none.
    #[serde(default)]
    retained: Vec<String>,
}

fn vocabulary() -> &'static Vocabulary {
    static V: std::sync::OnceLock<Vocabulary> = std::sync::OnceLock::new();
    // The vocabulary is compiled in; a test parses it, so a broken one never ships.
    V.get_or_init(|| reference::yaml::from_str(VOCABULARY_YAML).unwrap_or_default())
}

/// Every capability, with what it means.
pub fn capabilities() -> BTreeMap<String, String> {
    vocabulary().capabilities.clone()
}

/// Every rule, with what it means.
pub fn rules() -> BTreeMap<String, String> {
    vocabulary().rules.clone()
}

/// Whether `name` is a capability.
pub fn is_capability(name: &str) -> bool {
    vocabulary().capabilities.contains_key(name)
}

/// The capabilities that are only retained for compatibility: valid in a `hello`, never required
/// by a case (`subtrees`, which seed 002 has on by default).
pub fn retained() -> Vec<String> {
    vocabulary().retained.clone()
}

/// Whether `name` is a rule.
pub fn is_rule(name: &str) -> bool {
    vocabulary().rules.contains_key(name)
}

/// The known word closest to `name` among `words`, when one is close enough to be a likely typo
/// (a Jaro-Winkler similarity of at least 0.8, compared case-insensitively).
pub fn nearest<'a>(name: &str, words: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lower = name.to_lowercase().replace('-', "_");
    words
        .into_iter()
        .map(|w| (strsim::jaro_winkler(&lower, &w.to_lowercase().replace('-', "_")), w))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, w)| w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vocabulary_parses_and_keeps_its_two_kinds_apart() {
        let v: Vocabulary = reference::yaml::from_str(VOCABULARY_YAML).unwrap();
        assert!(v.capabilities.contains_key("rule_modules"));
        assert!(v.rules.contains_key("symlinks"));
        for c in v.capabilities.keys() {
            assert!(!v.rules.contains_key(c), "'{c}' is both a capability and a rule");
        }
    }

    /// A retained word must stay a capability, or an adapter's hello that declares it would end
    /// the run (exit 2) instead of being accepted.
    #[test]
    fn every_retained_word_is_still_a_capability() {
        let v: Vocabulary = reference::yaml::from_str(VOCABULARY_YAML).unwrap();
        assert!(v.retained.contains(&"subtrees".to_string()));
        for r in &v.retained {
            assert!(v.capabilities.contains_key(r), "retained '{r}' is not a capability");
        }
    }

    #[test]
    fn nearest_names_a_likely_typo() {
        let caps = ["rule_modules", "nested_files", "windows_targets"];
        assert_eq!(nearest("Rule-Modules", caps), Some("rule_modules"));
        assert_eq!(nearest("nested_file", caps), Some("nested_files"));
        assert_eq!(nearest("qqq", caps), None);
    }
}
