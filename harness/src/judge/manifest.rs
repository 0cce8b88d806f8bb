//! The expectations manifest of one implementation: which cases it is expected not to pass, and
//! why. It is strict: an entry for an unknown id is a manifest error, and a case whose status
//! differs from its entry — an XPASS above all — is an unexpected result.
//!
//! It also records the `hello` it was written against: a later run whose implementation declares
//! less (a profile or capability dropped) is reported, since dropping a capability would otherwise
//! turn failing cases into UNSUPPORTED ones without anyone noticing.
//!
//! ```yaml
//! # conformance expectations for my-loader
//! hello:
//!   name: my-loader
//!   profiles: [modules]
//!   capabilities: [nested_files, rule_modules]
//! expectations:
//!   m-fm-003:
//!     status: FAIL
//!     reason: tab-only frontmatter lines are rejected by our YAML parser
//!     link: https://example.invalid/issues/12
//!   m-glob-011:
//!     status: FAIL
//!     reason: attaches a batch's rules in the order its concurrent reads finish
//!     flaky: true
//! ```
//!
//! A `flaky` entry is of a case whose result varies from run to run of the same build (an agent
//! CLI's concurrent tool calls finish in either order): it passes on some runs and has the
//! entry's status on others, and both are as expected. Any other status is not.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::run::case::{CaseResult, Status};

/// How the note that gives an expected result's manifest reason begins.
pub const EXPECTED_BY: &str = "as the manifest expects: ";

/// One entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// The expected status: FAIL, ERROR, CRASH, TIMEOUT, UNSUPPORTED or SKIP (not run).
    pub status: Status,
    /// Why.
    pub reason: String,
    /// Where it is tracked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// The case passes on some runs and has `status` on others: a PASS is as expected too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub flaky: bool,
}

/// What the manifest's implementation declared when it was written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeclaredSupport {
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// Its profiles.
    #[serde(default)]
    pub profiles: Vec<String>,
    /// Its capabilities.
    #[serde(default)]
    pub capabilities: Vec<String>,
}

impl DeclaredSupport {
    /// What `hello` declares.
    pub fn of(hello: &crate::Hello) -> DeclaredSupport {
        DeclaredSupport {
            name: hello.name.clone(),
            profiles: hello.profiles.clone(),
            capabilities: hello.capabilities.clone(),
        }
    }
}

/// A manifest: the hello it was written against, and case id → entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// What the implementation declared when the manifest was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hello: Option<DeclaredSupport>,
    /// Entries by id.
    #[serde(default, rename = "expectations")]
    pub entries: BTreeMap<String, Entry>,
}

impl Manifest {
    /// Reads a manifest; errors name the file and line. The file must be a regular file of at
    /// most [`crate::util::input::MAX_MANIFEST_BYTES`] (a link to one is followed): a FIFO or a device
    /// is refused at once ([`crate::util::input::read_text`]).
    pub fn read(path: &Path) -> Result<Manifest, String> {
        let text = crate::util::input::read_text(path, crate::util::input::Kind::Manifest)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if text.trim().is_empty() {
            return Ok(Manifest::default());
        }
        let m: Manifest = reference::yaml::from_str(&text).map_err(|e| {
            let message = crate::util::input::clip(&e.message);
            match e.line {
                Some(l) => format!("{}:{l}: {message}", path.display()),
                None => format!("{}: {message}", path.display()),
            }
        })?;
        for (id, entry) in &m.entries {
            if matches!(entry.status, Status::Pass | Status::Xfail | Status::Xpass) {
                return Err(format!(
                    "{}: {}: status {} cannot be expected (use FAIL, ERROR, CRASH, TIMEOUT, UNSUPPORTED or SKIP)",
                    path.display(),
                    crate::util::input::clip(id),
                    entry.status.as_str()
                ));
            }
        }
        Ok(m)
    }

    /// What the manifest's hello declared that `hello` no longer does.
    pub fn dropped_support(&self, hello: &crate::Hello) -> Vec<String> {
        let Some(was) = &self.hello else { return Vec::new() };
        let profiles = was.profiles.iter().filter(|p| !hello.profiles.contains(p)).map(|p| format!("profile '{p}'"));
        let caps =
            was.capabilities.iter().filter(|c| !hello.capabilities.contains(c)).map(|c| format!("capability '{c}'"));
        profiles.chain(caps).collect()
    }

    /// Ids the manifest names that the corpus does not hold.
    pub fn unknown_ids(&self, known: &BTreeSet<String>) -> Vec<String> {
        self.entries.keys().filter(|id| !known.contains(*id)).cloned().collect()
    }

    /// Whether the case is to be skipped.
    pub fn skips(&self, id: &str) -> bool {
        self.entries.get(id).is_some_and(|e| e.status == Status::Skip)
    }

    /// Applies the manifest to a result: FAIL expected becomes XFAIL, PASS against an entry
    /// becomes XPASS. Returns whether the result is as expected.
    pub fn apply(&self, r: &mut CaseResult) -> bool {
        match self.entries.get(&r.id) {
            None => matches!(r.status, Status::Pass | Status::Unsupported | Status::Skip),
            Some(entry) if r.status == Status::Pass && entry.flaky => {
                r.notes.push(format!(
                    "passed this run; the manifest marks it flaky, {} on other runs ({})",
                    entry.status.as_str(),
                    entry.reason
                ));
                true
            }
            Some(entry) if r.status == Status::Pass => {
                r.status = Status::Xpass;
                r.reason =
                    Some(format!("passed, but the manifest expects {} ({})", entry.status.as_str(), entry.reason));
                false
            }
            Some(entry) if entry.status == r.status => {
                if r.status == Status::Fail {
                    r.status = Status::Xfail;
                }
                r.notes.push(format!("{EXPECTED_BY}{}", entry.reason));
                true
            }
            Some(entry) => {
                let why = r.reason.clone().unwrap_or_default();
                r.reason =
                    Some(format!("the manifest expects {}, got {}: {why}", entry.status.as_str(), r.status.as_str()));
                false
            }
        }
    }

    /// A manifest that expects exactly these results of the implementation that said `hello`.
    pub fn from_results(hello: &crate::Hello, results: &[CaseResult]) -> Manifest {
        let entries = results
            .iter()
            .filter(|r| !matches!(r.status, Status::Pass | Status::Unsupported | Status::Xpass))
            .map(|r| {
                let status = if r.status == Status::Xfail { Status::Fail } else { r.status };
                (r.id.clone(), Entry { status, reason: r.reason.clone().unwrap_or_default(), link: None, flaky: false })
            })
            .collect();
        Manifest { hello: Some(DeclaredSupport::of(hello)), entries }
    }

    /// Keeps the hand-written parts of `old`: the reason, link and flakiness of each entry whose
    /// status is unchanged, every SKIP entry as it was (a skipped case was not run, so the run says
    /// nothing new about it), and every flaky entry whose case passed this time (a pass is one of
    /// its outcomes).
    pub fn keep_notes_from(&mut self, old: &Manifest, passed: &BTreeSet<String>) {
        for (id, was) in &old.entries {
            if was.status == Status::Skip || (was.flaky && passed.contains(id)) {
                self.entries.insert(id.clone(), was.clone());
            } else if let Some(now) = self.entries.get_mut(id) {
                if now.status == was.status {
                    now.reason.clone_from(&was.reason);
                    now.link.clone_from(&was.link);
                    now.flaky = was.flaky;
                }
            }
        }
    }

    /// The manifest as YAML.
    pub fn to_yaml(&self) -> String {
        let body = reference::yaml::to_string(self).unwrap_or_default();
        format!("# conformance expectations manifest: case id -> expected status, reason, link\n{body}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_declaring_less_than_its_manifest_is_reported() {
        let mut hello = crate::run::driver::reference_hello();
        let manifest = Manifest::from_results(&hello, &[]);
        assert!(manifest.dropped_support(&hello).is_empty());
        hello.capabilities.retain(|c| c != "rule_modules");
        hello.profiles.retain(|p| p != "section");
        assert_eq!(manifest.dropped_support(&hello), vec!["profile 'section'", "capability 'rule_modules'"]);
    }

    #[test]
    fn a_rewrite_keeps_reasons_links_and_skips() {
        let hello = crate::run::driver::reference_hello();
        let entry = |status, reason: &str, link: Option<&str>| Entry {
            status,
            reason: reason.into(),
            link: link.map(String::from),
            flaky: false,
        };
        let mut old = Manifest::from_results(&hello, &[]);
        old.entries.insert("a".into(), entry(Status::Fail, "ours: tabs", Some("https://x/1")));
        old.entries.insert("b".into(), entry(Status::Fail, "ours: b", None));
        old.entries.insert("c".into(), entry(Status::Skip, "too slow", None));
        let mut new = Manifest::from_results(&hello, &[]);
        new.entries.insert("a".into(), entry(Status::Fail, "step 1: differs", None));
        new.entries.insert("b".into(), entry(Status::Crash, "crash: x", None));
        new.keep_notes_from(&old, &BTreeSet::new());
        assert_eq!(new.entries["a"], entry(Status::Fail, "ours: tabs", Some("https://x/1")));
        assert_eq!(new.entries["b"], entry(Status::Crash, "crash: x", None));
        assert_eq!(new.entries["c"], entry(Status::Skip, "too slow", None));
    }

    #[test]
    fn a_flaky_entry_takes_a_pass_or_its_status_and_nothing_else() {
        let hello = crate::run::driver::reference_hello();
        let mut m = Manifest::from_results(&hello, &[]);
        let entry = Entry { status: Status::Fail, reason: "order".into(), link: None, flaky: true };
        m.entries.insert("m-x-001".into(), entry.clone());
        let result = |status| {
            let mut r: CaseResult = serde_json::from_value(serde_json::json!({
                "id": "m-x-001", "name": "x", "profile": "modules", "area": "x", "status": "PASS",
                "steps": [], "millis": 0
            }))
            .unwrap();
            r.status = status;
            r
        };
        let mut pass = result(Status::Pass);
        assert!(m.apply(&mut pass));
        assert_eq!(pass.status, Status::Pass);
        assert!(pass.notes.iter().any(|n| n.contains("flaky")), "{:?}", pass.notes);
        let mut fail = result(Status::Fail);
        assert!(m.apply(&mut fail));
        assert_eq!(fail.status, Status::Xfail);
        assert_eq!(fail.notes, [format!("{EXPECTED_BY}order")]);
        let mut timeout = result(Status::Timeout);
        assert!(!m.apply(&mut timeout));
        // Without the flag, the same pass is an XPASS.
        m.entries.insert("m-x-001".into(), Entry { flaky: false, ..entry.clone() });
        let mut xpass = result(Status::Pass);
        assert!(!m.apply(&mut xpass));
        assert_eq!(xpass.status, Status::Xpass);
        // A rewrite after a passing run keeps the flaky entry; a plain one is dropped.
        m.entries.insert("m-x-001".into(), entry.clone());
        let passed: BTreeSet<String> = ["m-x-001".to_string()].into();
        let mut rewritten = Manifest::from_results(&hello, &[]);
        rewritten.keep_notes_from(&m, &passed);
        assert_eq!(rewritten.entries.get("m-x-001"), Some(&entry));
        m.entries.insert("m-x-001".into(), Entry { flaky: false, ..entry });
        let mut rewritten = Manifest::from_results(&hello, &[]);
        rewritten.keep_notes_from(&m, &passed);
        assert!(rewritten.entries.is_empty());
    }

    #[test]
    fn the_manifest_round_trips_with_its_hello() {
        let hello = crate::run::driver::reference_hello();
        let m = Manifest::from_results(&hello, &[]);
        let back: Manifest = reference::yaml::from_str(&m.to_yaml()).unwrap();
        assert_eq!(back, m);
    }
}
