//! Comparing one step's observation with its expectation. The semantics are declared in
//! spec-cases/FORMAT.md: startup files and activated modules are ordered lists; "no record" and
//! "an empty record" are different observations; diagnostics are a multiset of (path, code[,
//! line]); content is exact and the observed SHA-256 must be the SHA-256 of the expected content,
//! computed here independently of the implementation.
//!
//! Every difference carries the basis of what it contradicts: the expectation's own (a seed
//! sentence or a decision), or, for the facets the seeds leave to the implementation and this
//! suite settles, the decision that settles them — the suite's diagnostic codes (D-CODE-1), the
//! lines of frontmatter diagnostics (D-FM-11), the whitespace around sent content (D-CONTENT-1),
//! the layout of a section's text (D-SEC-RENDER-1) and of the root file's section
//! (D-RF-RENDER-1). The section text's own seed facets (its ceiling, its headers, whole content,
//! what does not fit named) are checked on the observed text whatever its layout. What the seeds
//! leave to the implementation and no decision settles — default texts, the closing line's and the
//! continuation line's wording, messages — is never compared as a literal.

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::case::scenario::{Basis, BasisSpec, Expect, ExpectDiagnostic, Scenario};
use crate::run::wire::{Hello, Observation, PromptKind, PromptPart, WireDiagnostic, WirePrompt};

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
/// The section profile's one report that seed 002 calls for ("onNestedLimit ... Called once per
/// conversation when that cap is reached").
const NESTED_LIMIT: &str = "section.nested_limit";
/// The decision that says which refusals a section reports.
const SECTION_REPORTS_DECISION: &str = "D-SEC-DIR-3";
/// The decision that sends content byte for byte, its leading and trailing whitespace included.
const CONTENT_DECISION: &str = "D-CONTENT-1";

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
    /// The expectations the implementation cannot be observed to meet
    /// ([`crate::run::implementation::Implementation::unobservable`]): with `section.text` among
    /// them, the section text's own facets (its ceiling, headers and closing line) are not checked
    /// on the text it reports, which is not the text the model saw.
    pub hidden: &'a [&'a str],
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

    /// An ordered list of files: lengths, then each entry's path (on `path_basis`: the facet
    /// `<name>.path`, under which path a file that is there is reported), kind, content and hash.
    fn files(&mut self, name: &str, expected: &[Item<'_>], actual: &[Item<'_>], path_basis: Basis) {
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
            if e.path != a.path {
                self.push_on(path_basis.clone(), format!("{name}[{i}].path"), e.path, a.path);
            }
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
            // A difference in leading or trailing whitespace alone is D-CONTENT-1's: no seed
            // sentence says what whitespace the sent content keeps.
            let on = |whitespace: bool, basis: &Basis| {
                if whitespace {
                    Basis::Decision(CONTENT_DECISION.into())
                } else {
                    basis.clone()
                }
            };
            if let Some(c) = e.content {
                if c != content {
                    let basis = on(c.trim() == content.trim(), &self.basis);
                    self.push_on(basis, format!("{name}[{i}].content"), c, content);
                }
            }
            if let Some(h) = e.sha256 {
                let got = sha256_hex(content);
                if h != got {
                    let whitespace = match e.content {
                        Some(c) => c.trim() == content.trim(),
                        None => final_whitespace_variants(content).iter().any(|v| sha256_hex(v) == h),
                    };
                    let basis = on(whitespace, &self.basis);
                    self.push_on(basis, format!("{name}[{i}].sha256"), h, got);
                }
            }
        }
    }
}

/// What `content` would be with its final whitespace spelled otherwise: where a case gives only a
/// hash, these are the differences a hash can still show to be whitespace alone.
fn final_whitespace_variants(content: &str) -> [String; 5] {
    let end = content.trim_end();
    [format!("{content}\n"), format!("{content}\r\n"), end.to_string(), format!("{end}\n"), format!("{end}\r\n")]
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

/// Whether an observed code is the one an implementation reports for `expected`, by name: its
/// mapped code where it declares one, else the suite's (or the seed's) own. Unlike
/// [`code_answers`], an unmapped suite code is not answered by any other code.
fn reported_as(hello: &Hello, expected: &str, observed: &str) -> bool {
    hello.codes.get(expected).map_or(observed == expected, |mapped| observed == mapped)
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
    section: bool,
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
        let same_code = free.iter().position(|d| reported_as(hello, &e.code, &d.code));
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
        // Seed 002 calls for one report, the limit callback's; what else a section reports (its
        // refusals) is D-SEC-DIR-3's.
        let seedless = section
            && missing.iter().all(|e| e.code != NESTED_LIMIT)
            && free.iter().all(|d| !reported_as(hello, NESTED_LIMIT, &d.code));
        let basis = if seedless { Basis::Decision(SECTION_REPORTS_DECISION.into()) } else { cmp.basis.clone() };
        cmp.push_on(basis, format!("diagnostics ({})", why.join("; ")), want.join("; "), got.join("; "));
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
/// case's own option where it sets one, else for the implementation's declared default. A slot
/// with neither is left in the text, for [`layout_facet`] to compare around.
fn section_text(ctx: &Context<'_>, text: &str) -> String {
    let options = ctx.scenario.options.as_ref();
    let mut out = text.replace("{sandbox}", ctx.sandbox);
    for (slot, own, default) in [
        ("{intro}", options.and_then(|o| o.intro.as_ref()), ctx.hello.defaults.intro.as_ref()),
        ("{retraction}", options.and_then(|o| o.retraction_text.as_ref()), ctx.hello.defaults.retraction_text.as_ref()),
    ] {
        if let Some(t) = own.or(default) {
            out = out.replace(slot, t);
        }
    }
    out
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
                cmp.files("startup", &expected, &actual, basis("startup.path"));
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
                cmp.files("activation", &expected, &actual, basis("activation.path"));
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
            envelope_facets(&mut cmp, expect, obs, actual);
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
                if s.profile == "section" && !ctx.hidden.contains(&"section.text") {
                    section_facets(&mut cmp, ctx, expect, section, got);
                } else if let Some(text) = &section.text {
                    let want = section_text(ctx, text);
                    layout_facet(&mut cmp, ctx, expect, &want, &got.text, section.omitted.as_deref());
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
    let section = s.profile == "section";
    diagnostics(&mut cmp, ctx.hello, &expect.diagnostics, &obs.diagnostics, basis("diagnostics.path"), section);
    cmp.out
}

/// The seed's own facets of the appended text, checked on it whatever its layout (seed 000,
/// "Ordering and composition": "Each module is sent whole, with its source path, as
/// <instruction_module path=...>CONTENT</instruction_module>"): one envelope per module, in the
/// record's order, each naming its module's path and holding its content whole (compared trimmed;
/// the whitespace is D-RENDER-2's and D-CONTENT-1's). The path's form (the root's display form
/// joined with it, escaped) is D-RENDER-1's, so only that it ends with the module's path is asked.
fn envelope_facets(cmp: &mut Cmp, expect: &Expect, obs: &Observation, rendered: &str) {
    const OPEN: &str = "<instruction_module path=\"";
    const CLOSE: &str = "</instruction_module>";
    let observed = obs.activation.as_ref().map(|a| a.modules.as_slice()).unwrap_or_default();
    let wanted: Vec<(&str, &str)> = match &expect.activation {
        Some(modules) => modules
            .iter()
            .zip(observed.iter().map(|m| m.content.as_str()).chain(std::iter::repeat("")))
            .map(|(m, seen)| (m.path.as_str(), m.content.as_deref().unwrap_or(seen)))
            .collect(),
        None => observed.iter().map(|m| (m.path.as_str(), m.content.as_str())).collect(),
    };
    let mut envelopes = Vec::new();
    let mut rest = rendered;
    while let Some(at) = rest.find(OPEN) {
        let after = rest.get(at + OPEN.len()..).unwrap_or("");
        let Some((attr, body)) = after.split_once("\">") else { break };
        let (content, next) = body.split_once(CLOSE).unwrap_or((body, ""));
        let path = attr.replace("&quot;", "\"").replace("&lt;", "<").replace("&gt;", ">").replace("&apos;", "'");
        envelopes.push((path.replace("&amp;", "&").replace('\\', "/"), content));
        rest = next;
    }
    let paths = |list: &[(&str, &str)]| list.iter().map(|(p, _)| *p).collect::<Vec<_>>().join(", ");
    let names =
        |(path, _): &(&str, &str), (attr, _): &(String, &str)| attr == path || attr.ends_with(&format!("/{path}"));
    if envelopes.len() != wanted.len() || !wanted.iter().zip(&envelopes).all(|(w, e)| names(w, e)) {
        let seen: Vec<&str> = envelopes.iter().map(|(p, _)| p.as_str()).collect();
        cmp.push(
            "rendered (one envelope per module, in order)",
            format!("[{}]", paths(&wanted)),
            format!("[{}]", seen.join(", ")),
        );
        return;
    }
    for ((path, want), (_, got)) in wanted.iter().zip(&envelopes) {
        if bare(want) != bare(got) {
            cmp.push(format!("rendered (content of {path})"), bare(want), bare(got));
        }
    }
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

/// The line that introduces a file (seed 002, "Rendering"): "each file introduced by
/// Instructions from: <path relative to the project root>".
const HEADER: &str = "Instructions from: ";
/// `maxBytes`'s default (seed 002, "Options": "maxBytes | 65536 | Total UTF-8 ceiling for the
/// rendered section").
const DEFAULT_MAX_BYTES: u64 = 65_536;

/// A file's text as the seed's sentences see it: "Content is admitted whole" says nothing of a
/// leading BOM, line endings or the whitespace around it, which are the layout's (D-SEC-DIR-2,
/// D-SEC-RENDER-1), so the structural facets compare content with those taken away.
fn bare(text: &str) -> String {
    text.strip_prefix('\u{feff}').unwrap_or(text).replace("\r\n", "\n").trim().to_string()
}

/// Whether a path in a header is the project's (relative), not the global file's (absolute).
fn is_relative(path: &str) -> bool {
    !(path.starts_with('/') || path.starts_with('\\') || path.get(1..3) == Some(":/") || path.get(1..3) == Some(":\\"))
}

/// The files an expected text in D-SEC-RENDER-1's layout admits: each header's path and the
/// content that follows it, up to the next header or the end (a `{closing}` is already cut off).
fn expected_blocks(text: &str) -> Vec<(String, String)> {
    let sep = format!("\n\n{HEADER}");
    let mut out = Vec::new();
    let mut rest = match text.find(&sep) {
        Some(i) => &text[i + 2..],
        None if text.starts_with(HEADER) => text,
        None => return out,
    };
    while let Some(after) = rest.strip_prefix(HEADER) {
        let (line, body) = after.split_once('\n').unwrap_or((after, ""));
        let end = body.find(&sep).unwrap_or(body.len());
        out.push((line.to_string(), body[..end].to_string()));
        rest = body.get(end + 2..).unwrap_or("");
    }
    out
}

/// The header lines of an observed text: each line that begins with [`HEADER`], as (the path it
/// names, the byte offset where the line ends).
fn observed_headers(text: &str) -> Vec<(&str, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let end = at + line.len();
        if let Some(path) = line.strip_prefix(HEADER) {
            out.push((path.trim_end_matches(['\n', '\r']), end));
        }
        at = end;
    }
    out
}

/// The section profile's facets of the section text. The seed's own are checked on the observed
/// text whatever its wording (seed 002, "Rendering", "Options"):
///
/// - its UTF-8 length is at most `maxBytes` ("Total UTF-8 ceiling for the rendered section");
/// - every file the implementation reports as rendered has its header line
///   ("each file introduced by Instructions from: <path relative to the project root>");
/// - every file it admits has its content whole after its header ("Content is admitted whole");
/// - every file the case or the implementation leaves out is named after the last admitted block
///   ("anything that does not fit is named in a closing line rather than silently cut");
///
/// which files are introduced, and in what order, is the files facet's (`section.files`: the
/// case's basis, since the budget's choices are D-SEC-BUDGET-4's); the exact text is the
/// layout's ([`layout_facet`]).
fn section_facets(
    cmp: &mut Cmp,
    ctx: &Context<'_>,
    expect: &Expect,
    section: &crate::case::scenario::ExpectSection,
    got: &crate::run::wire::WireSection,
) {
    let s = ctx.scenario;
    let basis = |what: &str| s.basis_of(expect, what).unwrap_or(Basis::Seed);
    let text = got.text.as_str();
    // Where a step states the ceiling's basis, a decision lets the text exceed it (the ceiling and
    // the naming cannot both hold there): the text is left to the files and layout facets.
    let max = s.options.as_ref().and_then(|o| o.max_bytes).unwrap_or(DEFAULT_MAX_BYTES);
    if Scenario::stated_basis(expect, "section.ceiling").is_none() && text.len() as u64 > max {
        cmp.push_on(
            Basis::Seed,
            "section.text (UTF-8 length)",
            format!("at most {max} bytes (maxBytes: \"Total UTF-8 ceiling for the rendered section\")"),
            format!("{} bytes", text.len()),
        );
    }
    let headers = observed_headers(text);
    let introduced = |path: &str| headers.iter().any(|(p, _)| *p == path);
    let unheaded: Vec<&str> =
        got.files.iter().map(String::as_str).filter(|f| is_relative(f) && !introduced(f)).collect();
    if !unheaded.is_empty() {
        cmp.push_on(
            Basis::Seed,
            "section.text (headers)",
            unheaded.iter().map(|f| format!("a line \"{HEADER}{f}\"")).collect::<Vec<_>>().join("; "),
            format!("no such line for {} it reports as rendered", unheaded.join(", ")),
        );
    }
    let want = section.text.as_deref().map(|t| section_text(ctx, t));
    let want_body = want.as_deref().map(|w| {
        let w = w.strip_suffix("{closing}").unwrap_or(w);
        w.strip_prefix("{intro}").unwrap_or(w)
    });
    let blocks = want_body.map(expected_blocks).unwrap_or_default();
    // Which files the text introduces, in order: told here only where the reported list does not
    // already tell the same difference.
    let want_paths: Vec<&str> = blocks.iter().map(|(p, _)| p.as_str()).filter(|p| is_relative(p)).collect();
    let got_paths: Vec<&str> = headers.iter().map(|(p, _)| *p).filter(|p| is_relative(p)).collect();
    let reported: Vec<&str> = got.files.iter().map(String::as_str).filter(|p| is_relative(p)).collect();
    // Nor where the headers facet already told that the text does not introduce what it renders.
    let told = (section.files.is_some() && reported == got_paths) || !unheaded.is_empty();
    if want.is_some() && want_paths != got_paths && !told {
        cmp.push_on(
            basis("section.files"),
            "section.text (files introduced, in order)",
            format!("[{}]", want_paths.join(", ")),
            format!("[{}]", got_paths.join(", ")),
        );
    }
    // Each admitted file whole after its header; the end of the last admitted block.
    let mut after_blocks = 0;
    for (i, (path, at)) in headers.iter().enumerate() {
        let next = headers.get(i + 1).map_or(text.len(), |(_, end)| {
            text[..*end].trim_end_matches(['\n', '\r']).rfind('\n').map_or(0, |n| n + 1)
        });
        let block = text.get(*at..next.max(*at)).unwrap_or("");
        let end_of_content = match blocks.iter().find(|(p, _)| p == path) {
            Some((_, content)) => {
                let (want_c, got_c) = (bare(content), bare(block));
                if !got_c.starts_with(&want_c) {
                    cmp.push_on(Basis::Seed, format!("section.text (content under \"{HEADER}{path}\")"), want_c, got_c);
                    *at
                } else {
                    // Past the content as the observation spells it (its own BOM, line endings).
                    let body = block.trim_start();
                    let body = body.strip_prefix('\u{feff}').map_or(body, str::trim_start);
                    *at + (block.len() - body.len()) + content_len(body, &want_c)
                }
            }
            None => *at,
        };
        after_blocks = after_blocks.max(end_of_content);
    }
    let mut left_out: Vec<String> = section
        .omitted
        .iter()
        .flatten()
        .map(|f| f.replace("{sandbox}", ctx.sandbox))
        .chain(got.omitted.iter().cloned())
        .filter(|f| !introduced(f))
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    left_out.retain(|f| seen.insert(f.clone()));
    let tail = text.get(after_blocks..).unwrap_or("");
    // The global file may be named by its file name: the absolute form is D-SEC-RENDER-1's.
    let named = |f: &str| {
        tail.contains(f) || (!is_relative(f) && f.rsplit(['/', '\\']).next().is_some_and(|n| tail.contains(n)))
    };
    let unnamed: Vec<&str> = left_out.iter().map(String::as_str).filter(|f| !named(f)).collect();
    if !unnamed.is_empty() {
        let shown = if text.is_empty() { "nothing rendered".to_string() } else { format!("{tail:?}") };
        cmp.push_on(
            Scenario::stated_basis(expect, "section.named").unwrap_or(Basis::Seed),
            "section.text (files left out, named in a closing line)",
            format!("a closing line naming {}", unnamed.join(", ")),
            shown,
        );
    }
    if let Some(w) = &want {
        layout_facet(cmp, ctx, expect, w, text, section.omitted.as_deref());
    }
}

/// The length, in `text`'s own bytes, of its prefix that reads as `want` once its CRLFs are LFs
/// (`want` is a prefix of that reading).
fn content_len(text: &str, want: &str) -> usize {
    let (mut seen, mut len) = (0, 0);
    let bytes = text.as_bytes();
    while seen < want.len() && len < bytes.len() {
        if bytes.get(len..len + 2) == Some(b"\r\n") {
            len += 1;
        }
        len += 1;
        seen += 1;
    }
    len
}

/// The section's exact text. Its layout is a decision (the section profile's D-SEC-RENDER-1, the
/// root file's D-RF-RENDER-1); `{closing}` at its end stands for the closing line, whose wording is
/// the implementation's: the observed text must go on from there and name every omitted file. A
/// leading `{intro}` that the implementation declares no default for stands for whatever text
/// comes before the rest, which is still compared.
fn layout_facet(cmp: &mut Cmp, ctx: &Context<'_>, expect: &Expect, want: &str, got: &str, omitted: Option<&[String]>) {
    let decision = if ctx.scenario.profile == "root-file" { "D-RF-RENDER-1" } else { "D-SEC-RENDER-1" };
    let basis = layout_basis(expect, "section.text", decision);
    // Empty text (no section at all) is no layout: it is the expectation's own.
    let basis = if want.is_empty() { cmp.basis.clone() } else { basis };
    let (any_intro, want) = match want.strip_prefix("{intro}") {
        Some(rest) => (true, rest),
        None => (false, want),
    };
    if want == "{retraction}" {
        // No default declared: the text is wholly the implementation's; only that one is written.
        if got.is_empty() {
            cmp.push_on(cmp.basis.clone(), "section.text", "the retraction text", "nothing");
        }
        return;
    }
    if want.contains("{intro}") || want.contains("{retraction}") {
        // A default the implementation does not declare, inside the text: nothing to compare it to.
        return;
    }
    let names_all =
        |rest: &str| omitted.unwrap_or_default().iter().all(|f| rest.contains(&f.replace("{sandbox}", ctx.sandbox)));
    let holds = match want.strip_suffix("{closing}") {
        Some(prefix) if any_intro => got.match_indices(prefix).any(|(i, _)| names_all(&got[i + prefix.len()..])),
        Some(prefix) => got.strip_prefix(prefix).is_some_and(names_all),
        None if any_intro => got.ends_with(want),
        None => got == want,
    };
    if !holds {
        let intro = if any_intro { "<its intro>" } else { "" };
        let shown = match want.strip_suffix("{closing}") {
            Some(prefix) => format!("{intro}{prefix}<a closing line naming every omitted file>"),
            None => format!("{intro}{want}"),
        };
        cmp.push_on(basis, "section.text", shown, got);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::wire::{WireActivation, WireFile, WireSection};

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
        crate::case::load::parse(&text).unwrap()
    }

    fn hello() -> Hello {
        crate::run::driver::reference_hello()
    }

    fn expect(yaml: &str) -> Expect {
        reference::yaml::from_str(yaml).unwrap()
    }

    fn run(s: &Scenario, hello: &Hello, e: &str, obs: &Observation) -> Vec<Mismatch> {
        let ctx = Context { scenario: s, hello, root: "/r", sandbox: "/sb", hidden: &[] };
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
        // A code the implementation maps is paired by its mapped name.
        let mut mapped = hello();
        mapped.codes.insert("section.nested_limit".into(), "their.limit".into());
        let mut theirs = obs.clone();
        theirs.diagnostics[0].code = "their.limit".into();
        let got = run(&s, &mapped, e, &theirs);
        assert!(failed(&got).contains(&("diagnostics['section.nested_limit'].path", "D-X".into())), "{got:?}");
        // Not stated: the expectation's basis.
        let e = "section: {rewritten: false}\ndiagnostics: [{code: section.nested_limit, path: c}]";
        assert!(run(&s, &hello(), e, &obs).iter().all(|m| m.basis == Basis::Seed));
        // A missing code is still the expectation's, whatever the path's basis.
        let e = "basis: {diagnostics.path: D-X}\ndiagnostics: [{code: section.nested_limit, path: c}]";
        let none = Observation { section: obs.section.clone(), ..Observation::default() };
        assert!(run(&s, &hello(), e, &none).iter().all(|m| m.basis == Basis::Seed));
    }

    /// The envelope's seed facets are checked on the appended text: a module missing from it, or
    /// cut in it, violates the seed; another layout or path form is D-RENDER-2's.
    #[rstest::rstest]
    #[case::as_laid_out("<instruction_module path=\"/r/a.md\">\nA\n</instruction_module>", &[])]
    #[case::another_layout("<instruction_module path=\"/r/a.md\">A</instruction_module>\n", &["D-RENDER-2"])]
    #[case::relative_path("<instruction_module path=\"a.md\">\nA\n</instruction_module>", &["D-RENDER-2"])]
    #[case::no_envelope("A\n", &["seed", "D-RENDER-2"])]
    #[case::cut("<instruction_module path=\"/r/a.md\">\n</instruction_module>", &["seed", "D-RENDER-2"])]
    #[case::another_path("<instruction_module path=\"/r/b.md\">\nA\n</instruction_module>", &["seed", "D-RENDER-2"])]
    fn the_envelope_is_checked_on_the_appended_text(#[case] rendered: &str, #[case] bases: &[&str]) {
        let s = scenario("modules", "seed");
        let obs = Observation {
            activation: Some(crate::run::wire::WireActivation {
                modules: vec![crate::run::wire::WireModule {
                    path: "a.md".into(),
                    supersedes: false,
                    content: "A\n".into(),
                    sha256: sha256_hex("A\n"),
                }],
                rendered: rendered.into(),
            }),
            ..Observation::default()
        };
        let e = "activation: [{path: a.md, content: \"A\\n\"}]\nrendered: \"<instruction_module path=\\\"{root}/a.md\\\">\\nA\\n</instruction_module>\"";
        let got = run(&s, &hello(), e, &obs);
        let seen: Vec<String> = got.iter().map(|m| m.basis.to_string()).collect();
        assert_eq!(seen, bases, "{got:#?}");
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

    /// In the section profile only the limit callback's report is the seed's; a refusal reported or
    /// not is D-SEC-DIR-3's.
    #[test]
    fn a_section_reports_its_refusals_on_a_decision() {
        let s = scenario("section", "seed");
        let diag = |code: &str| Observation {
            diagnostics: vec![WireDiagnostic {
                code: code.into(),
                path: "a".into(),
                line: None,
                message: String::new(),
            }],
            ..Observation::default()
        };
        let got = run(&s, &hello(), "diagnostics: []", &diag("file.not_utf8"));
        assert_eq!(failed(&got), [("diagnostics (unexpected for 'a')", "D-SEC-DIR-3".to_string())]);
        let got = run(&s, &hello(), "diagnostics: []", &diag("section.nested_limit"));
        assert_eq!(failed(&got), [("diagnostics (unexpected for 'a')", "seed".to_string())]);
        let got = run(&s, &hello(), "diagnostics: [{code: section.nested_limit, path: a}]", &Observation::default());
        assert_eq!(failed(&got), [("diagnostics (nothing reported for 'a')", "seed".to_string())]);
        // The modules profile keeps the expectation's basis.
        let m = scenario("modules", "seed");
        assert_eq!(failed(&run(&m, &hello(), "diagnostics: []", &diag("file.not_utf8")))[0].1, "seed");
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

    fn section_case(basis: &str, options: &str) -> Scenario {
        let mut s = scenario("section", basis);
        s.options = Some(reference::yaml::from_str(options).unwrap());
        s
    }

    fn section_obs(text: &str, files: &[&str], omitted: &[&str]) -> Observation {
        Observation {
            section: Some(WireSection {
                text: text.into(),
                rewritten: true,
                files: files.iter().map(|f| f.to_string()).collect(),
                omitted: omitted.iter().map(|f| f.to_string()).collect(),
            }),
            ..Observation::default()
        }
    }

    /// A startup of one root file, AGENTS.md, honestly hashed.
    fn file(content: &str) -> Observation {
        Observation {
            startup: Some(vec![WireFile {
                path: "AGENTS.md".into(),
                kind: "root".into(),
                sha256: sha256_hex(content),
                content: content.into(),
            }]),
            ..Observation::default()
        }
    }

    /// The path a present file is reported under is `startup.path`'s; a file missing is the
    /// expectation's.
    #[test]
    fn a_reported_path_is_its_own_facet() {
        let s = scenario("modules", "seed");
        let e = "basis: {startup.path: D-X}\nstartup: [{path: link.md, content: \"a\\n\"}]";
        let mut moved = file("a\n");
        if let Some(f) = moved.startup.as_mut().and_then(|v| v.first_mut()) {
            f.path = "target.md".into();
        }
        assert_eq!(failed(&run(&s, &hello(), e, &moved)), [("startup[0].path", "D-X".to_string())]);
        let none = Observation { startup: Some(vec![]), ..Observation::default() };
        assert_eq!(failed(&run(&s, &hello(), e, &none)), [("startup (paths in order)", "seed".to_string())]);
    }

    /// The facets that failed, with their bases.
    fn failed(got: &[Mismatch]) -> Vec<(&str, String)> {
        got.iter().map(|m| (m.field.as_str(), m.basis.to_string())).collect()
    }

    const BUDGET: &str = "section: {text: \"I.\\n\\nInstructions from: a\\n\\nA{closing}\", files: [a], omitted: [b]}";

    /// The four kinds of real deviation from seed 002's budget sentences are seed violations in a
    /// case whose own basis is a decision (issue 22): over the ceiling, a left-out file named
    /// nowhere, nothing rendered when nothing fits; a changed layout is the decision's alone.
    #[rstest::rstest]
    #[case::conforming("I.\n\nInstructions from: a\n\nA\n\n(b left out)", &["a"], &["b"], &[])]
    #[case::closing_line_dropped("I.\n\nInstructions from: a\n\nA", &["a"], &["b"], &[
        ("section.text (files left out, named in a closing line)", "seed"), ("section.text", "D-SEC-RENDER-1")])]
    #[case::named_before_the_blocks("I.\n\n(b left out)\n\nInstructions from: a\n\nA", &["a"], &["b"], &[
        ("section.text (files left out, named in a closing line)", "seed"), ("section.text", "D-SEC-RENDER-1")])]
    #[case::nothing_rendered("", &[], &[], &[
        ("section.files", "D-X"), ("section.omitted", "D-X"),
        ("section.text (files left out, named in a closing line)", "seed"), ("section.text", "D-SEC-RENDER-1")])]
    #[case::over_the_ceiling("I.\n\nInstructions from: a\n\nA\n\n(b left out) and more words", &["a"], &["b"], &[
        ("section.text (UTF-8 length)", "seed")])]
    #[case::another_header_form("I.\n\n## a\n\nA\n\n(b left out)", &["a"], &["b"], &[
        ("section.text (headers)", "seed"), ("section.text", "D-SEC-RENDER-1")])]
    #[case::content_cut("I.\n\nInstructions from: a\n\nB\n\n(b left out)", &["a"], &["b"], &[
        ("section.text (content under \"Instructions from: a\")", "seed"), ("section.text", "D-SEC-RENDER-1")])]
    #[case::another_layout("I.\nInstructions from: a\nA\n(b left out)\n", &["a"], &["b"], &[("section.text", "D-SEC-RENDER-1")])]
    fn the_seed_facets_of_a_section_text_are_checked_on_the_text(
        #[case] text: &str,
        #[case] files: &[&str],
        #[case] omitted: &[&str],
        #[case] want: &[(&str, &str)],
    ) {
        let s = section_case("D-X", "{max_bytes: 48, intro: I.}");
        let got = run(&s, &hello(), BUDGET, &section_obs(text, files, omitted));
        let want: Vec<(&str, String)> = want.iter().map(|(f, b)| (*f, b.to_string())).collect();
        assert_eq!(failed(&got), want, "{got:#?}");
    }

    /// Where a step states the ceiling's basis (the ceiling and the naming cannot both hold), the
    /// ceiling is left to the other facets; a stated naming basis is that decision's.
    #[test]
    fn a_stated_budget_basis_yields_the_ceiling() {
        let s = section_case("D-X", "{max_bytes: 4, intro: I.}");
        let e = format!("basis: {{section.ceiling: D-X, section.named: D-X}}\n{BUDGET}");
        let over = section_obs("I.\n\nInstructions from: a\n\nA\n\n(b left out)", &["a"], &["b"]);
        assert!(run(&s, &hello(), &e, &over).is_empty());
        let unnamed = section_obs("I.\n\nInstructions from: a\n\nA", &["a"], &["b"]);
        let got = run(&s, &hello(), &e, &unnamed);
        assert!(failed(&got).contains(&("section.text (files left out, named in a closing line)", "D-X".into())));
    }

    /// Content that differs only in the whitespace around it is never a seed violation: in a
    /// section text it is the layout's, in a file's content D-CONTENT-1's.
    #[test]
    fn whitespace_around_content_is_a_decision_difference() {
        let s = section_case("seed", "{intro: I.}");
        let e = "section: {text: \"I.\\n\\nInstructions from: a\\n\\nA\\n  B\", files: [a]}";
        let got = run(&s, &hello(), e, &section_obs("I.\n\nInstructions from: a\n\n  A\n  B  \n", &["a"], &[]));
        assert_eq!(failed(&got), [("section.text", "D-SEC-RENDER-1".to_string())]);
        let m = scenario("modules", "seed");
        let e = "startup: [{path: AGENTS.md, content: \"a\\n\"}]";
        assert_eq!(failed(&run(&m, &hello(), e, &file("a"))), [("startup[0].content", "D-CONTENT-1".to_string())]);
        assert_eq!(failed(&run(&m, &hello(), e, &file("b\n"))), [("startup[0].content", "seed".to_string())]);
        // A hash alone: a final newline dropped is still told as whitespace.
        let e = format!("startup: [{{path: AGENTS.md, sha256: {}}}]", sha256_hex("a\n"));
        assert_eq!(failed(&run(&m, &hello(), &e, &file("a"))), [("startup[0].sha256", "D-CONTENT-1".to_string())]);
        assert_eq!(failed(&run(&m, &hello(), &e, &file("b"))), [("startup[0].sha256", "seed".to_string())]);
    }

    /// With no default declared, `{intro}` stands for whatever comes first, and the rest of the
    /// text is still compared.
    #[test]
    fn the_text_after_an_undeclared_intro_is_compared() {
        let s = section_case("seed", "{}");
        let mut bare = hello();
        bare.defaults = crate::run::wire::Defaults::default();
        let e = "section: {text: \"{intro}\\n\\nInstructions from: a\\n\\nA\", files: [a]}";
        assert!(run(&s, &bare, e, &section_obs("Theirs.\n\nInstructions from: a\n\nA", &["a"], &[])).is_empty());
        let got = run(&s, &bare, e, &section_obs("Theirs.\n\nInstructions from: a\n\nA\n", &["a"], &[]));
        assert_eq!(failed(&got), [("section.text", "D-SEC-RENDER-1".to_string())]);
        let e = "section: {text: \"{intro}\\n\\nInstructions from: a\\n\\nA{closing}\", omitted: [b]}";
        let named = section_obs("Theirs.\n\nInstructions from: a\n\nA\n\nb is out", &["a"], &["b"]);
        assert!(run(&s, &bare, e, &named).is_empty());
    }

    #[test]
    fn an_intro_without_a_declared_default_is_not_compared() {
        let s = scenario("section", "seed");
        let obs = Observation {
            section: Some(WireSection { text: "Theirs.".into(), rewritten: true, files: vec![], omitted: vec![] }),
            ..Observation::default()
        };
        let mut bare = hello();
        bare.defaults = crate::run::wire::Defaults::default();
        assert!(run(&s, &bare, "section: {text: \"{intro}\"}", &obs).is_empty());
        assert_eq!(run(&s, &hello(), "section: {text: \"{intro}\"}", &obs).len(), 1);
    }

    #[test]
    fn a_continuation_line_is_any_line_naming_fs_read() {
        let s = scenario("root-file", "seed");
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
