//! Comparing one step's observation with its expectation. The semantics are declared in
//! spec-cases/FORMAT.md: startup files and activated modules are ordered lists; diagnostics are a
//! multiset of (code, path[, line]); content is exact and the observed SHA-256 must be the
//! SHA-256 of the expected content, computed here independently of the implementation.

use reference::driver::Observation;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::scenario::{Expect, ExpectDiagnostic};

/// One difference, with both sides rendered for a side-by-side report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mismatch {
    /// What differs (`activation[0].path`).
    pub field: String,
    /// The expectation.
    pub expected: String,
    /// The observation.
    pub actual: String,
}

fn sha256_hex(s: &str) -> String {
    Sha256::digest(s.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

struct Cmp(Vec<Mismatch>);

impl Cmp {
    fn eq(&mut self, field: String, expected: &str, actual: &str) {
        if expected != actual {
            self.0.push(Mismatch { field, expected: expected.to_string(), actual: actual.to_string() });
        }
    }

    /// An ordered list of files: lengths, then each entry's path, kind, content and hash.
    fn files(&mut self, name: &str, expected: &[Item<'_>], actual: &[Item<'_>]) {
        let list = |items: &[Item<'_>]| items.iter().map(|i| i.path.to_string()).collect::<Vec<_>>().join(", ");
        if expected.len() != actual.len() {
            self.0.push(Mismatch {
                field: format!("{name} (paths in order)"),
                expected: format!("[{}]", list(expected)),
                actual: format!("[{}]", list(actual)),
            });
            return;
        }
        for (i, (e, a)) in expected.iter().zip(actual).enumerate() {
            self.eq(format!("{name}[{i}].path"), e.path, a.path);
            if let Some(k) = e.kind {
                self.eq(format!("{name}[{i}].kind"), k, a.kind.unwrap_or(""));
            }
            if let Some(sup) = e.supersedes {
                self.eq(
                    format!("{name}[{i}].supersedes"),
                    &sup.to_string(),
                    &a.supersedes.unwrap_or(false).to_string(),
                );
            }
            if let Some(c) = e.content {
                self.eq(format!("{name}[{i}].content"), c, a.content.unwrap_or(""));
                self.eq(
                    format!("{name}[{i}].sha256 (of the expected content)"),
                    &sha256_hex(c),
                    a.sha256.unwrap_or(""),
                );
            }
            if let Some(h) = e.sha256 {
                self.eq(format!("{name}[{i}].sha256"), h, a.sha256.unwrap_or(""));
            }
        }
    }
}

/// A file or module on either side, borrowed.
#[derive(Default)]
struct Item<'a> {
    path: &'a str,
    kind: Option<&'a str>,
    supersedes: Option<bool>,
    content: Option<&'a str>,
    sha256: Option<&'a str>,
}

fn diag_key(d: &ExpectDiagnostic) -> String {
    match d.line {
        Some(l) => format!("{} {}:{}", d.code, d.path, l),
        None => format!("{} {}", d.code, d.path),
    }
}

/// Compares `obs` with `expect`; `root` is the display form `{root}` stands for, `sandbox` the
/// directory `{sandbox}` stands for.
pub fn compare(expect: &Expect, obs: &Observation, root: &str, sandbox: &str) -> Vec<Mismatch> {
    let mut cmp = Cmp(Vec::new());
    if let Some(files) = &expect.startup {
        let expected: Vec<Item<'_>> = files
            .iter()
            .map(|f| Item {
                path: &f.path,
                kind: f.kind.as_deref(),
                content: f.content.as_deref(),
                sha256: f.sha256.as_deref(),
                ..Item::default()
            })
            .collect();
        let actual: Vec<Item<'_>> = obs
            .startup
            .iter()
            .flatten()
            .map(|f| Item {
                path: &f.path,
                kind: Some(&f.kind),
                content: Some(&f.content),
                sha256: Some(&f.sha256),
                ..Item::default()
            })
            .collect();
        if obs.startup.is_none() {
            cmp.0.push(Mismatch {
                field: "startup".into(),
                expected: "a startup prefix".into(),
                actual: "none".into(),
            });
        } else {
            cmp.files("startup", &expected, &actual);
        }
    }
    if let Some(modules) = &expect.activation {
        let expected: Vec<Item<'_>> = modules
            .iter()
            .map(|m| Item {
                path: &m.path,
                supersedes: Some(m.supersedes),
                content: m.content.as_deref(),
                sha256: m.sha256.as_deref(),
                ..Item::default()
            })
            .collect();
        let actual: Vec<Item<'_>> = obs
            .activation
            .iter()
            .flat_map(|a| &a.modules)
            .map(|m| Item {
                path: &m.path,
                supersedes: Some(m.supersedes),
                content: Some(&m.content),
                sha256: Some(&m.sha256),
                ..Item::default()
            })
            .collect();
        cmp.files("activation", &expected, &actual);
    }
    if let Some(text) = &expect.rendered {
        let expected = text.replace("{root}", root);
        let actual = obs.activation.as_ref().map_or("", |a| a.rendered.as_str());
        cmp.eq("rendered".into(), &expected, actual);
    }
    if let Some(section) = &expect.section {
        match &obs.section {
            None => {
                cmp.0.push(Mismatch { field: "section".into(), expected: "a section".into(), actual: "none".into() })
            }
            Some(got) => {
                if let Some(text) = &section.text {
                    cmp.eq("section.text".into(), &text.replace("{sandbox}", sandbox), &got.text);
                }
                if let Some(r) = section.rewritten {
                    cmp.eq("section.rewritten".into(), &r.to_string(), &got.rewritten.to_string());
                }
                if let Some(files) = &section.files {
                    let want: Vec<String> = files.iter().map(|f| f.replace("{sandbox}", sandbox)).collect();
                    cmp.eq("section.files".into(), &want.join("\n"), &got.files.join("\n"));
                }
                if let Some(omitted) = &section.omitted {
                    let want: Vec<String> = omitted.iter().map(|f| f.replace("{sandbox}", sandbox)).collect();
                    cmp.eq("section.omitted".into(), &want.join("\n"), &got.omitted.join("\n"));
                }
            }
        }
    }
    let mut unmatched: Vec<&reference::Diagnostic> = obs.diagnostics.iter().collect();
    let mut missing = Vec::new();
    for e in &expect.diagnostics {
        let pos = unmatched
            .iter()
            .position(|d| d.code.as_str() == e.code && d.path == e.path && e.line.is_none_or(|l| d.line == Some(l)));
        match pos {
            Some(i) => {
                unmatched.remove(i);
            }
            None => missing.push(diag_key(e)),
        }
    }
    if !missing.is_empty() || !unmatched.is_empty() {
        let shown = |d: &reference::Diagnostic| match d.line {
            Some(l) => format!("{} {}:{}", d.code, d.path, l),
            None => format!("{} {}", d.code, d.path),
        };
        cmp.0.push(Mismatch {
            field: "diagnostics".into(),
            expected: expect.diagnostics.iter().map(diag_key).collect::<Vec<_>>().join("; "),
            actual: obs.diagnostics.iter().map(shown).collect::<Vec<_>>().join("; "),
        });
    }
    cmp.0
}
