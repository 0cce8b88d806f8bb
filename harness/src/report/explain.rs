//! `explain` (a case beside the seed text it cites) and `repro` (a directory that reproduces one
//! case).

use std::fmt::Write;
use std::fs;
use std::path::Path;

use crate::case::corpus::{Corpus, TREE_MARKER};
use crate::case::load::Case;
use crate::case::scenario::Platform;
use crate::case::tree::Sandbox;

fn find<'a>(cases: &'a [Case], id: &str) -> Result<&'a Case, String> {
    cases
        .iter()
        .find(|c| c.scenario.id == id)
        .ok_or_else(|| format!("no case has the id '{id}' (see conformance list)"))
}

/// The paragraph of `text` that holds `quote` (compared without line breaks), or `None`.
fn paragraph_with(text: &str, quote: &str) -> Option<String> {
    let probe: String = quote.chars().take(60).collect();
    text.split("\n\n").find(|p| p.replace('\n', " ").contains(probe.trim())).map(|p| p.trim().to_string())
}

/// The case, each cited sentence in its seed paragraph or decision, and the case file.
pub fn explain(corpus: &Corpus, cases: &[Case], id: &str) -> Result<String, String> {
    let case = find(cases, id)?;
    let s = &case.scenario;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} — {}\n{}\ncapabilities: {}\nrules: {}\n",
        s.id,
        s.title,
        case.file.display(),
        s.capabilities.join(", "),
        s.rules.join(", ")
    );
    for r in &s.spec {
        if let (Some(seed), Some(quote)) = (&r.seed, &r.quote) {
            let heading = r.heading.as_deref().unwrap_or("");
            let _ = writeln!(out, "seed {seed}, \"{heading}\":");
            let text = corpus.seed(seed).unwrap_or_default();
            match paragraph_with(text, quote) {
                Some(p) => p.lines().for_each(|l| {
                    let _ = writeln!(out, "  | {l}");
                }),
                None => {
                    let _ = writeln!(out, "  (quote not found in the seed) \"{quote}\"");
                }
            }
        }
        if let Some(d) = &r.decision {
            let text = corpus.text("DECISIONS.md").unwrap_or_default();
            let marker = format!("**{d}**");
            let _ = writeln!(out, "decision {d}:");
            match text.split("\n- ").find(|b| b.contains(&marker)) {
                Some(b) => b.lines().for_each(|l| {
                    let _ = writeln!(out, "  | {}", l.trim());
                }),
                None => {
                    let _ = writeln!(out, "  (not found in DECISIONS.md)");
                }
            }
        }
        out.push('\n');
    }
    let _ = writeln!(out, "---\n{}", case.text);
    Ok(out)
}

/// Writes `dir` with `case.yaml` (so `conformance run --cases DIR` runs just this case) and, for a
/// host case, the materialised tree under `tree/` for reading. `dir` must not exist; it is made
/// here (its last component only, after its parents) and everything in it is written through a
/// handle on it, never through a name the case's tree could have placed: the tree lives in
/// `tree/`, which its `../` entries cannot leave, and the state directories the one-shot input
/// names (`state/`) lie beside it.
pub fn repro(cases: &[Case], id: &str, dir: &Path) -> Result<String, String> {
    let case = find(cases, id)?;
    let shown = |e: std::io::Error| format!("{}: {e}", dir.display());
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent).map_err(shown)?;
    }
    match fs::create_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(format!("{} exists (repro writes a new directory)", dir.display()))
        }
        other => other.map_err(shown)?,
    }
    let out = crate::util::beneath::Beneath::open(dir)?;
    out.write("case.yaml", case.text.as_bytes())?;
    out.write(&format!("tree/{TREE_MARKER}"), b"")?;
    let sandbox = Sandbox::in_dir(&dir.join("tree"), dir)?;
    let mut notes = vec![format!("wrote {}", dir.display())];
    // The one-shot input builds the tree as a run would (host cases), with paths into tree/.
    match crate::run::case::one_shot_input(&case.scenario, sandbox) {
        Ok(input) => {
            let text = serde_json::to_string_pretty(&input).map_err(|e| e.to_string())?;
            out.write("one-shot.json", (text + "\n").as_bytes())?;
            notes.push(format!("one-shot input: {}/one-shot.json (ADAPTER --one-shot < one-shot.json)", dir.display()));
        }
        Err(why) => notes.push(format!("no one-shot input: {why}")),
    }
    if case.scenario.platform == Platform::Posix {
        notes.push(format!("the tree as the harness makes it: {}/tree/project", dir.display()));
    }
    notes.push(format!("run it: conformance run --cases {} [--adapter CMD]", dir.display()));
    Ok(notes.join("\n"))
}
