//! Comparing one step's observation with its expectation. The semantics are declared in
//! spec-cases/FORMAT.md: startup files and activated modules are ordered lists; "no record" and
//! "an empty record" are different observations; diagnostics are a multiset of (path, code[,
//! line]); content is exact and the observed SHA-256 must be the SHA-256 of the expected content,
//! computed here independently of the implementation.
//!
//! Every difference carries the basis of what it contradicts: the expectation's own (a seed
//! sentence or a decision), or, for the facets the seeds leave to the implementation and this
//! suite settles, the decision that settles them — the suite's diagnostic codes (D-CODE-1), the
//! lines of frontmatter diagnostics (D-FM-11), the layout of a section's text (D-SEC-RENDER-1)
//! and of the root file's section (D-RF-RENDER-1). What the seeds leave to the implementation and
//! no decision settles — default texts, the closing line's and the continuation line's wording,
//! messages — is never compared as a literal.

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::scenario::{Basis, BasisSpec, Expect, ExpectDiagnostic, Scenario};
use crate::wire::{Hello, Observation, PromptKind, PromptPart, WireDiagnostic, WirePrompt};

/// The seed's own diagnostic codes (seed 000, "Boundaries and authority", "Lifetime"): compared
/// literally, whatever an implementation maps.
pub const SEED_CODES: &[&str] =
    &["brain.instruction_module_escape", "brain.context_file_oversized", "brain.instruction_activation_failed"];

/// The decision that names the suite's other diagnostic codes.
const CODES_DECISION: &str = "D-CODE-1";
/// The decision that places frontmatter diagnostics on lines.
const LINES_DECISION: &str = "D-FM-11";
/// The decision that lays out the rendered envelopes.
const RENDER_DECISION: &str = "D-RENDER-2";

/// One difference, with both sides rendered for a side-by-side report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Mismatch {
    /// What differs (`activation[0].path`).
    pub field: String,
    /// The expectation.
    pub expected: String,
    /// The observation.
    pub actual: String,
    /// What the expectation rests on.
    pub basis: Basis,
}

/// What a comparison needs besides the two sides.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The case.
    pub scenario: &'a Scenario,
    /// The implementation's hello: its default texts and its diagnostic codes.
    pub hello: &'a Hello,
    /// The root's display form, for `{root}`.
    pub root: &'a str,
    /// The sandbox directory, for `{sandbox}`.
    pub sandbox: &'a str,
}

/// The lower-case hex SHA-256 of `s`.
pub fn sha256_hex(s: &str) -> String {
    Sha256::digest(s.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

struct Cmp {
    out: Vec<Mismatch>,
    basis: Basis,
}

impl Cmp {
    fn push(&mut self, field: impl Into<String>, expected: impl Into<String>, actual: impl Into<String>) {
        let basis = self.basis.clone();
        self.push_on(basis, field, expected, actual);
    }

    fn push_on(
        &mut self,
        basis: Basis,
        field: impl Into<String>,
        expected: impl Into<String>,
        actual: impl Into<String>,
    ) {
        self.out.push(Mismatch { field: field.into(), expected: expected.into(), actual: actual.into(), basis });
    }

    fn eq(&mut self, field: String, expected: &str, actual: &str) {
        if expected != actual {
            self.push(field, expected, actual);
        }
    }

    /// An ordered list of files: lengths, then each entry's path, kind, content and hash.
    fn files(&mut self, name: &str, expected: &[Item<'_>], actual: &[Item<'_>]) {
        let list = |items: &[Item<'_>]| items.iter().map(|i| i.path.to_string()).collect::<Vec<_>>().join(", ");
        if expected.len() != actual.len() {
            self.push(
                format!("{name} (paths in order)"),
                format!("[{}]", list(expected)),
                format!("[{}]", list(actual)),
            );
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
            let full = a.content.unwrap_or("");
            // The observed hash must be the hash of the observed content: an implementation
            // cannot pass by reporting the right hash of the wrong text.
            let own = sha256_hex(full);
            if a.sha256.is_some_and(|h| h != own) {
                self.push(format!("{name}[{i}].sha256 (of its own content)"), own, a.sha256.unwrap_or(""));
            }
            let content = match e.continued {
                Some(true) => match continuation(full) {
                    Some(kept) => kept,
                    None => {
                        self.push(
                            format!("{name}[{i}].continued"),
                            "a last line saying the file goes on and that fs-read reads the rest",
                            format!("no such line: {}", last_line(full)),
                        );
                        full
                    }
                },
                _ => full,
            };
            if let Some(c) = e.content {
                self.eq(format!("{name}[{i}].content"), c, content);
            }
            if let Some(h) = e.sha256 {
                self.eq(format!("{name}[{i}].sha256"), h, &sha256_hex(content));
            }
        }
    }
}

/// The content before a last line that mentions `fs-read` (the root-file profile's continuation
/// line, whose wording is the implementation's), or `None` when there is no such line.
fn continuation(content: &str) -> Option<&str> {
    let body = content.strip_suffix('\n').unwrap_or(content);
    let start = body.rfind('\n').map_or(0, |i| i + 1);
    let last = body.get(start..)?;
    last.contains("fs-read").then(|| content.get(..start).unwrap_or(""))
}

fn last_line(content: &str) -> String {
    let body = content.strip_suffix('\n').unwrap_or(content);
    let line = body.rsplit('\n').next().unwrap_or("");
    format!("{line:?}")
}

/// A file or module on either side, borrowed.
#[derive(Default)]
struct Item<'a> {
    path: &'a str,
    kind: Option<&'a str>,
    supersedes: Option<bool>,
    content: Option<&'a str>,
    sha256: Option<&'a str>,
    continued: Option<bool>,
}

fn shown(code: &str, path: &str, line: Option<u32>) -> String {
    match line {
        Some(l) => format!("{code} {path}:{l}"),
        None => format!("{code} {path}"),
    }
}

/// Whether an observed code answers an expected suite code: the seed's codes literally; a suite
/// code the implementation maps, as its mapped string; an unmapped suite code, any code that is
/// not one of the seed's.
fn code_answers(hello: &Hello, expected: &str, observed: &str) -> bool {
    if SEED_CODES.contains(&expected) {
        return observed == expected;
    }
    match hello.codes.get(expected) {
        Some(mapped) => observed == mapped,
        None => !SEED_CODES.contains(&observed),
    }
}

/// Diagnostics, in three passes so that each difference is told on its own basis: which paths are
/// diagnosed (the expectation's basis), with which codes (D-CODE-1, or the expectation's for the
/// seed's own codes), on which lines (D-FM-11).
fn diagnostics(
    cmp: &mut Cmp,
    hello: &Hello,
    expected: &[ExpectDiagnostic],
    observed: &[WireDiagnostic],
    path_basis: Basis,
) {
    let mut free: Vec<&WireDiagnostic> = observed.iter().collect();
    let mut pairs: Vec<(&ExpectDiagnostic, &WireDiagnostic)> = Vec::new();
    let mut missing: Vec<&ExpectDiagnostic> = Vec::new();
    // Pair the exact answers first, then whatever is left at the same path.
    let mut unpaired: Vec<&ExpectDiagnostic> = Vec::new();
    for e in expected {
        let exact = free.iter().position(|d| {
            d.path == e.path && code_answers(hello, &e.code, &d.code) && e.line.is_none_or(|l| d.line == Some(l))
        });
        match exact {
            Some(i) => pairs.push((e, free.remove(i))),
            None => unpaired.push(e),
        }
    }
    let mut elsewhere: Vec<(&ExpectDiagnostic, &WireDiagnostic)> = Vec::new();
    for e in unpaired {
        let by_code = free.iter().position(|d| d.path == e.path && code_answers(hello, &e.code, &d.code));
        let by_path = by_code.or_else(|| free.iter().position(|d| d.path == e.path));
        match by_path {
            Some(i) => pairs.push((e, free.remove(i))),
            None => missing.push(e),
        }
    }
    // A code reported for another path than expected: the path is its own facet
    // (`diagnostics.path`), so that a case can rest which path is named on a decision while the
    // report itself rests on the seed.
    missing.retain(|e| {
        let same_code = free.iter().position(|d| code_answers(hello, &e.code, &d.code) && d.code == e.code);
        match same_code {
            Some(i) => {
                elsewhere.push((e, free.remove(i)));
                false
            }
            None => true,
        }
    });
    for (e, d) in &elsewhere {
        cmp.push_on(path_basis.clone(), format!("diagnostics['{}'].path", e.code), e.path.clone(), d.path.clone());
    }
    if !missing.is_empty() || !free.is_empty() {
        let want: Vec<String> = expected.iter().map(|e| shown(&e.code, &e.path, e.line)).collect();
        let got: Vec<String> = observed.iter().map(|d| shown(&d.code, &d.path, d.line)).collect();
        let mut why = Vec::new();
        if !missing.is_empty() {
            let paths: Vec<String> = missing.iter().map(|e| format!("'{}'", e.path)).collect();
            why.push(format!("nothing reported for {}", paths.join(", ")));
        }
        if !free.is_empty() {
            let paths: Vec<String> = free.iter().map(|d| format!("'{}'", d.path)).collect();
            why.push(format!("unexpected for {}", paths.join(", ")));
        }
        cmp.push(format!("diagnostics ({})", why.join("; ")), want.join("; "), got.join("; "));
    }
    for (e, d) in &pairs {
        if !code_answers(hello, &e.code, &d.code) {
            let basis = if SEED_CODES.contains(&e.code.as_str()) {
                cmp.basis.clone()
            } else {
                Basis::Decision(CODES_DECISION.into())
            };
            let want = match hello.codes.get(&e.code) {
                Some(mapped) if !SEED_CODES.contains(&e.code.as_str()) => {
                    format!("{} (mapped from {})", mapped, e.code)
                }
                _ if SEED_CODES.contains(&e.code.as_str()) => e.code.clone(),
                _ => format!("a code other than the seed's own (the suite calls it {})", e.code),
            };
            cmp.push_on(basis, format!("diagnostics['{}'].code", e.path), want, d.code.clone());
        } else if let Some(l) = e.line {
            if d.line != Some(l) {
                let got = d.line.map_or("no line".to_string(), |x| x.to_string());
                cmp.push_on(
                    Basis::Decision(LINES_DECISION.into()),
                    format!("diagnostics['{}'].line", e.path),
                    l.to_string(),
                    got,
                );
            }
        }
    }
}

/// The basis of a layout facet (an exact text): the decision the step itself states for the
/// expectation, else the decision that lays the text out. A case-wide basis is not taken: it says
/// what the case is about, and a layout difference in, say, a budget case is still a layout
/// difference.
fn layout_basis(expect: &Expect, what: &str, layout: &str) -> Basis {
    let stated = match &expect.basis {
        Some(BasisSpec::All(b)) => Some(b),
        Some(BasisSpec::Each(m)) => {
            m.get(what).or_else(|| what.split_once('.').and_then(|(expectation, _)| m.get(expectation)))
        }
        None => None,
    };
    match stated {
        Some(Basis::Decision(d)) => Basis::Decision(d.clone()),
        _ => Basis::Decision(layout.into()),
    }
}

/// The default texts that a section text may name: `{intro}` and `{retraction}` stand for the
/// case's own option where it sets one, else for the implementation's declared default.
fn section_text(ctx: &Context<'_>, text: &str) -> Result<String, String> {
    let options = ctx.scenario.options.as_ref();
    let mut out = text.replace("{sandbox}", ctx.sandbox);
    for (slot, own, default) in [
        ("{intro}", options.and_then(|o| o.intro.as_ref()), ctx.hello.defaults.intro.as_ref()),
        ("{retraction}", options.and_then(|o| o.retraction_text.as_ref()), ctx.hello.defaults.retraction_text.as_ref()),
    ] {
        if out.contains(slot) {
            match own.or(default) {
                Some(t) => out = out.replace(slot, t),
                None => return Err(format!("the implementation declares no default for {slot}")),
            }
        }
    }
    Ok(out)
}

/// The parts of the system prompts of the case's kind (D-RF-PROMPT-1): at least one prompt of
/// that kind is observed, and every one has exactly the expected parts in order (a full
/// expectation holds for both full prompts). Their texts are the implementation's; only order
/// and presence are compared.
fn prompt_facet(cmp: &mut Cmp, kind: Option<PromptKind>, want: &[PromptPart], got: Option<&[WirePrompt]>) {
    let names = |parts: &[PromptPart]| {
        let names: Vec<String> = parts
            .iter()
            .map(|p| serde_json::to_value(p).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default())
            .collect();
        format!("[{}]", names.join(", "))
    };
    let kind_name = |k: PromptKind| match k {
        PromptKind::Full => "full",
        PromptKind::Lean => "lean",
    };
    let Some(kind) = kind else { return };
    let prompts = got.unwrap_or(&[]);
    if prompts.is_empty() {
        cmp.push("prompt", format!("the {} prompt {}", kind_name(kind), names(want)), "no prompt");
        return;
    }
    for (i, p) in prompts.iter().enumerate() {
        let field = if prompts.len() == 1 { "prompt".to_string() } else { format!("prompt[{i}]") };
        if p.kind != kind {
            cmp.push(field.clone(), format!("a {} prompt", kind_name(kind)), format!("a {} prompt", kind_name(p.kind)));
        } else if p.parts != want {
            cmp.push(field.clone(), names(want), names(&p.parts));
        }
    }
}

/// Compares `obs` with `expect` (a step of `ctx.scenario`).
pub fn compare(ctx: &Context<'_>, expect: &Expect, obs: &Observation) -> Vec<Mismatch> {
    let s = ctx.scenario;
    let basis = |what: &str| s.basis_of(expect, what).unwrap_or(Basis::Seed);
    let mut cmp = Cmp { out: Vec::new(), basis: basis("startup") };
    if let Some(files) = &expect.startup {
        let expected: Vec<Item<'_>> = files
            .iter()
            .map(|f| Item {
                path: &f.path,
                kind: f.kind.as_deref(),
                content: f.content.as_deref(),
                sha256: f.sha256.as_deref(),
                continued: f.continued,
                ..Item::default()
            })
            .collect();
        match &obs.startup {
            None => cmp.push("startup", "a startup prefix", "none"),
            Some(startup) => {
                let actual: Vec<Item<'_>> = startup
                    .iter()
                    .map(|f| Item {
                        path: &f.path,
                        kind: Some(&f.kind),
                        content: Some(&f.content),
                        sha256: Some(&f.sha256),
                        ..Item::default()
                    })
                    .collect();
                cmp.files("startup", &expected, &actual);
            }
        }
    }
    cmp.basis = basis("activation");
    if let Some(modules) = &expect.activation {
        match &obs.activation {
            None if modules.is_empty() => {}
            Some(a) if modules.is_empty() => {
                let what = if a.modules.is_empty() { "an empty record" } else { "a record" };
                let paths: Vec<&str> = a.modules.iter().map(|m| m.path.as_str()).collect();
                cmp.push("activation", "no record appended", format!("{what} appended [{}]", paths.join(", ")));
            }
            None => {
                let paths: Vec<&str> = modules.iter().map(|m| m.path.as_str()).collect();
                cmp.push("activation", format!("a record of [{}]", paths.join(", ")), "no record appended");
            }
            Some(a) => {
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
                let actual: Vec<Item<'_>> = a
                    .modules
                    .iter()
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
        }
    }
    cmp.basis = basis("rendered");
    if let Some(text) = &expect.rendered {
        // The seed shows one envelope; how envelopes are joined, where newlines fall and how the
        // path is escaped is D-RENDER-2's.
        let expected = text.replace("{root}", ctx.root);
        let actual = obs.activation.as_ref().map_or("", |a| a.rendered.as_str());
        if expected != actual {
            let on = layout_basis(expect, "rendered", RENDER_DECISION);
            cmp.push_on(on, "rendered", expected, actual);
        }
    }
    cmp.basis = basis("section");
    if let Some(section) = &expect.section {
        match &obs.section {
            None => cmp.push("section", "a section", "none"),
            Some(got) => {
                if let Some(r) = section.rewritten {
                    cmp.basis = basis("section.rewritten");
                    cmp.eq("section.rewritten".into(), &r.to_string(), &got.rewritten.to_string());
                }
                if let Some(files) = &section.files {
                    cmp.basis = basis("section.files");
                    let want: Vec<String> = files.iter().map(|f| f.replace("{sandbox}", ctx.sandbox)).collect();
                    cmp.eq("section.files".into(), &want.join("\n"), &got.files.join("\n"));
                }
                if let Some(omitted) = &section.omitted {
                    cmp.basis = basis("section.omitted");
                    let want: Vec<String> = omitted.iter().map(|f| f.replace("{sandbox}", ctx.sandbox)).collect();
                    cmp.eq("section.omitted".into(), &want.join("\n"), &got.omitted.join("\n"));
                }
                cmp.basis = basis("section");
                if let Some(text) = &section.text {
                    text_facet(&mut cmp, ctx, expect, text, &got.text, section.omitted.as_deref());
                }
            }
        }
    }
    cmp.basis = basis("prompt");
    if let Some(parts) = &expect.prompt {
        prompt_facet(&mut cmp, s.prompt, parts, obs.prompts.as_deref());
    }
    // The request's and the start's own outcomes: compared where the step states them.
    if let Some(want) = expect.blocked {
        cmp.basis = basis("blocked");
        if want != obs.blocked {
            let shown = |b| if b { "blocked by the persistence latch" } else { "not blocked" };
            cmp.push("blocked", shown(want), shown(obs.blocked));
        }
    }
    if let Some(want) = expect.escaped {
        cmp.basis = basis("escaped");
        told_facet(
            &mut cmp,
            "escaped",
            want,
            obs.escaped.as_deref(),
            "a rejection escaped the hook",
            "no rejection escaped the hook",
        );
    }
    if let Some(want) = expect.failed {
        cmp.basis = basis("failed");
        told_facet(&mut cmp, "failed", want, obs.failed.as_deref(), "the startup failed", "the startup did not fail");
        // A failed startup has no prefix: a source that answered one instead did not fail it.
        if want && obs.startup.is_some() && expect.startup.is_none() {
            let paths: Vec<&str> = obs.startup.iter().flatten().map(|f| f.path.as_str()).collect();
            cmp.push("startup", "no startup prefix (the startup failed)", format!("[{}]", paths.join(", ")));
        }
    }
    cmp.basis = basis("diagnostics");
    diagnostics(&mut cmp, ctx.hello, &expect.diagnostics, &obs.diagnostics, basis("diagnostics.path"));
    cmp.out
}

/// An outcome the implementation tells with a text (`escaped`, `failed`): only whether it was told
/// is compared, never the text, which is shown beside the outcome.
fn told_facet(cmp: &mut Cmp, field: &str, want: bool, got: Option<&str>, yes: &str, no: &str) {
    if want != got.is_some() {
        let expected = if want { yes } else { no };
        let actual = match got {
            Some(text) => format!("{yes} ({text})"),
            None => no.to_string(),
        };
        cmp.push(field, expected, actual);
    }
}

/// The section's exact text. Its layout is a decision (the section profile's D-SEC-RENDER-1, the
/// root file's D-RF-RENDER-1); `{closing}` at its end stands for the closing line, whose wording is
/// the implementation's: the observed text must go on from there and name every omitted file.
fn text_facet(cmp: &mut Cmp, ctx: &Context<'_>, expect: &Expect, text: &str, got: &str, omitted: Option<&[String]>) {
    let decision = if ctx.scenario.profile == "root-file" { "D-RF-RENDER-1" } else { "D-SEC-RENDER-1" };
    let basis = layout_basis(expect, "section.text", decision);
    // Empty text (no section at all) is no layout: it is the expectation's own.
    let basis = if text.is_empty() { cmp.basis.clone() } else { basis };
    let want = match section_text(ctx, text) {
        Ok(w) => w,
        // A default the implementation does not declare cannot be compared.
        Err(_) => return,
    };
    match want.strip_suffix("{closing}") {
        Some(prefix) => {
            let rest = got.strip_prefix(prefix);
            let names_all = rest.is_some_and(|r| {
                omitted.unwrap_or_default().iter().all(|f| r.contains(&f.replace("{sandbox}", ctx.sandbox)))
            });
            if !names_all {
                cmp.push_on(basis, "section.text", format!("{prefix}<a closing line naming every omitted file>"), got);
            }
        }
        None => {
            if want != got {
                cmp.push_on(basis, "section.text", want, got);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{WireActivation, WireFile, WireSection};

    /// A told outcome is compared by whether it was told; its text is shown, never compared.
    #[rstest::rstest]
    #[case::told_as_wanted(true, Some("lost"), None)]
    #[case::untold_as_wanted(false, None, None)]
    #[case::not_told(true, None, Some(("it failed", "it did not fail")))]
    #[case::told_unwanted(false, Some("lost"), Some(("it did not fail", "it failed (lost)")))]
    fn a_told_outcome_compares_presence_only(
        #[case] want: bool,
        #[case] got: Option<&str>,
        #[case] mismatch: Option<(&str, &str)>,
    ) {
        let mut cmp = Cmp { out: Vec::new(), basis: Basis::Seed };
        told_facet(&mut cmp, "failed", want, got, "it failed", "it did not fail");
        let seen: Vec<(&str, &str)> = cmp.out.iter().map(|m| (m.expected.as_str(), m.actual.as_str())).collect();
        assert_eq!(seen, mismatch.into_iter().collect::<Vec<_>>());
    }

    fn scenario(profile: &str, basis: &str) -> Scenario {
        let text = format!(
            "id: x\ntitle: t\nspec: [{{decision: D-X}}, {{seed: '000', heading: h, quote: q}}]\nbasis: {basis}\n\
             profile: {profile}\nplatform: posix\nrules: [globs]\nsteps:\n  - start:\n"
        );
        crate::load::parse(&text).unwrap()
    }

    fn hello() -> Hello {
        crate::driver::reference_hello()
    }

    fn expect(yaml: &str) -> Expect {
        reference::yaml::from_str(yaml).unwrap()
    }

    fn run(s: &Scenario, hello: &Hello, e: &str, obs: &Observation) -> Vec<Mismatch> {
        let ctx = Context { scenario: s, hello, root: "/r", sandbox: "/sb" };
        compare(&ctx, &expect(e), obs)
    }

    /// A `full` expectation holds for every full prompt observed, and a missing or wrong-kind
    /// prompt fails it (D-RF-PROMPT-1).
    #[test]
    fn every_observed_prompt_must_have_the_expected_parts() {
        let mut s = scenario("root-file", "seed");
        s.prompt = Some(PromptKind::Full);
        let e = "prompt: [working_rules, project_instructions]";
        let p = |kind, parts: &[PromptPart]| WirePrompt { kind, parts: parts.to_vec() };
        let good = [PromptPart::WorkingRules, PromptPart::ProjectInstructions];
        let obs = |prompts: Option<Vec<WirePrompt>>| Observation { prompts, ..Observation::default() };
        let both = obs(Some(vec![p(PromptKind::Full, &good), p(PromptKind::Full, &good)]));
        assert!(run(&s, &hello(), e, &both).is_empty());
        let second_wrong =
            obs(Some(vec![p(PromptKind::Full, &good), p(PromptKind::Full, &[PromptPart::ProjectInstructions])]));
        let got = run(&s, &hello(), e, &second_wrong);
        assert!(got.len() == 1 && got[0].field == "prompt[1]", "{got:?}");
        assert_eq!(run(&s, &hello(), e, &obs(None)).len(), 1);
        assert_eq!(run(&s, &hello(), e, &obs(Some(vec![]))).len(), 1);
        assert_eq!(run(&s, &hello(), e, &obs(Some(vec![p(PromptKind::Lean, &good)]))).len(), 1);
    }

    /// A facet stated on its own (`diagnostics.path`, `section.rewritten`) takes that basis; the
    /// rest of its expectation keeps the expectation's.
    #[test]
    fn a_facet_carries_its_own_basis() {
        let s = scenario("section", "seed");
        let obs = Observation {
            diagnostics: vec![WireDiagnostic {
                code: "section.nested_limit".into(),
                path: "b".into(),
                line: None,
                message: String::new(),
            }],
            section: Some(WireSection { text: String::new(), rewritten: true, files: vec![], omitted: vec![] }),
            ..Observation::default()
        };
        let e = "basis: {diagnostics.path: D-X, section.rewritten: D-X}\n\
                 section: {rewritten: false}\ndiagnostics: [{code: section.nested_limit, path: c}]";
        let got = run(&s, &hello(), e, &obs);
        let seen: Vec<(&str, &Basis)> = got.iter().map(|m| (m.field.as_str(), &m.basis)).collect();
        let d = Basis::Decision("D-X".into());
        assert_eq!(seen, [("section.rewritten", &d), ("diagnostics['section.nested_limit'].path", &d)]);
        // Not stated: the expectation's basis.
        let e = "section: {rewritten: false}\ndiagnostics: [{code: section.nested_limit, path: c}]";
        assert!(run(&s, &hello(), e, &obs).iter().all(|m| m.basis == Basis::Seed));
        // A missing code is still the expectation's, whatever the path's basis.
        let e = "basis: {diagnostics.path: D-X}\ndiagnostics: [{code: section.nested_limit, path: c}]";
        let none = Observation { section: obs.section.clone(), ..Observation::default() };
        assert!(run(&s, &hello(), e, &none).iter().all(|m| m.basis == Basis::Seed));
    }

    #[test]
    fn an_empty_record_is_not_no_record() {
        let s = scenario("modules", "seed");
        let empty = Observation {
            activation: Some(WireActivation { modules: vec![], rendered: String::new() }),
            ..Observation::default()
        };
        let got = run(&s, &hello(), "activation: []", &empty);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].basis, Basis::Seed);
        assert!(got[0].actual.contains("an empty record"));
        assert!(run(&s, &hello(), "activation: []", &Observation::default()).is_empty());
    }

    #[test]
    fn a_suite_code_is_compared_only_as_mapped_and_as_a_decision() {
        let s = scenario("modules", "seed");
        let obs = Observation {
            diagnostics: vec![WireDiagnostic {
                code: "their.code".into(),
                path: "a.md".into(),
                line: Some(3),
                message: String::new(),
            }],
            ..Observation::default()
        };
        let e = "diagnostics: [{code: frontmatter.unknown_key, path: a.md, line: 2}]";
        let mut unmapped = hello();
        unmapped.codes.clear();
        // Unmapped: any non-seed code answers; the line differs, on D-FM-11.
        let got = run(&s, &unmapped, e, &obs);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].basis, Basis::Decision("D-FM-11".into()));
        // Mapped to another code: a difference from D-CODE-1, never a seed violation.
        let got = run(&s, &hello(), e, &obs);
        assert_eq!(got[0].basis, Basis::Decision("D-CODE-1".into()), "{got:?}");
        // A seed code is compared literally, on the expectation's basis.
        let got = run(&s, &unmapped, "diagnostics: [{code: brain.context_file_oversized, path: a.md}]", &obs);
        assert_eq!(got[0].basis, Basis::Seed, "{got:?}");
        // A missing diagnostic is on the expectation's basis.
        let got = run(&s, &hello(), e, &Observation::default());
        assert_eq!(got[0].basis, Basis::Seed, "{got:?}");
    }

    #[test]
    fn blocked_escaped_and_failed_are_compared_when_stated() {
        let s = scenario("modules", "seed");
        let blocked = Observation { blocked: true, ..Observation::default() };
        assert!(run(&s, &hello(), "blocked: true", &blocked).is_empty());
        assert_eq!(run(&s, &hello(), "blocked: false", &blocked).len(), 1);
        assert_eq!(run(&s, &hello(), "blocked: true", &Observation::default()).len(), 1);
        // Not stated: not compared.
        assert!(run(&s, &hello(), "activation: []", &blocked).is_empty());
        let escaped = Observation { escaped: Some("rejected".into()), ..Observation::default() };
        assert!(run(&s, &hello(), "escaped: true", &escaped).is_empty());
        assert_eq!(run(&s, &hello(), "escaped: true", &Observation::default()).len(), 1);
        let failed = Observation { failed: Some("no owner".into()), ..Observation::default() };
        assert!(run(&s, &hello(), "failed: true", &failed).is_empty());
        let started = Observation { startup: Some(Vec::new()), ..Observation::default() };
        let got = run(&s, &hello(), "failed: true", &started);
        assert_eq!(got.len(), 2, "{got:?}");
    }

    #[test]
    fn a_closing_line_is_compared_by_the_names_it_gives() {
        let s = scenario("section", "seed");
        let obs = Observation {
            section: Some(WireSection {
                text: "I.\n\nInstructions from: a\n\nA\n\n(b did not fit)".into(),
                rewritten: true,
                files: vec!["a".into()],
                omitted: vec!["b".into()],
            }),
            ..Observation::default()
        };
        let e = "section: {text: \"I.\\n\\nInstructions from: a\\n\\nA{closing}\", omitted: [b]}";
        assert!(run(&s, &hello(), e, &obs).is_empty());
        let e = "section: {text: \"I.\\n\\nInstructions from: a\\n\\nA{closing}\", omitted: [c]}";
        let got = run(&s, &hello(), e, &obs);
        assert!(got.iter().any(|m| m.field == "section.text" && m.basis == Basis::Decision("D-SEC-RENDER-1".into())));
        assert!(got.iter().any(|m| m.field == "section.omitted" && m.basis == Basis::Seed));
    }

    #[test]
    fn an_intro_without_a_declared_default_is_not_compared() {
        let s = scenario("section", "seed");
        let obs = Observation {
            section: Some(WireSection { text: "Theirs.".into(), rewritten: true, files: vec![], omitted: vec![] }),
            ..Observation::default()
        };
        let mut bare = hello();
        bare.defaults = crate::wire::Defaults::default();
        assert!(run(&s, &bare, "section: {text: \"{intro}\"}", &obs).is_empty());
        assert_eq!(run(&s, &hello(), "section: {text: \"{intro}\"}", &obs).len(), 1);
    }

    #[test]
    fn a_continuation_line_is_any_line_naming_fs_read() {
        let s = scenario("root-file", "seed");
        let file = |content: &str| Observation {
            startup: Some(vec![WireFile {
                path: "AGENTS.md".into(),
                kind: "root".into(),
                sha256: sha256_hex(content),
                content: content.into(),
            }]),
            ..Observation::default()
        };
        let e = "startup: [{path: AGENTS.md, content: \"a\\n\", continued: true}]";
        assert!(run(&s, &hello(), e, &file("a\n(more: use fs-read)\n")).is_empty());
        assert!(!run(&s, &hello(), e, &file("a\n(more follows)\n")).is_empty());
        // The observed hash must be the hash of the observed content.
        let mut lying = file("a\n(fs-read)\n");
        if let Some(f) = lying.startup.as_mut().and_then(|v| v.first_mut()) {
            f.sha256 = sha256_hex("a\n");
        }
        assert!(!run(&s, &hello(), e, &lying).is_empty());
    }
}
