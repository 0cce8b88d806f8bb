//! A case in an agent's file-name dialect. Seed 000 names its files `AGENTS.md` (with its name
//! priority) and its rule modules `.elowen/rules/**/*.md` under the key `paths`; Claude Code reads
//! `CLAUDE.md` and `.claude/rules`, Gemini CLI `GEMINI.md`. Before an agent runs a case, its tree
//! and steps are translated into the agent's dialect ([`Dialect::translate`]), and every path it
//! is observed to load is translated back ([`Translated::back`]), so the case's expectations are
//! compared as written.
//!
//! A case the dialect cannot express is UNSUPPORTED, saying why: a seed name the agent has no name
//! for, two seed names that become one file (`AGENTS.md` and `CLAUDE.md` in one folder, which is
//! what a name-priority case is about), rule modules for an agent without a rules folder, a
//! Windows or managed target, or a step a CLI cannot be made to take.

use std::collections::BTreeMap;

use crate::case::scenario::{Action, Platform, Scenario, TreeValue, WriteValue};

use super::recipe::{Recipe, SEED_NAMES};

/// Seed 003's second name for the root file ("the root's AGENTS.md, or agents.md when there is no
/// AGENTS.md").
const ROOT_FILE_FALLBACK: &str = "agents.md";

/// Seed 000's rules folder ("Format and discovery": ".elowen/rules/**/*.md modules").
const SEED_RULES: &str = ".elowen/rules";

/// A case translated into an agent's dialect.
#[derive(Debug, Clone)]
pub struct Translated {
    /// The case as the agent's tree and steps.
    pub scenario: Scenario,
    /// Each translated project path → the case's path.
    back: BTreeMap<String, String>,
    /// The agent's rules folder, if it has one.
    rules_dir: Option<String>,
    /// Each agent file name → the seed names mapped to it.
    names_back: BTreeMap<String, Vec<String>>,
    /// Every project path some entry or step of the case has something below: a folder at some
    /// point, so never a placeholder file.
    folders: std::collections::BTreeSet<String>,
}

impl Translated {
    /// The case's path of a project-relative path in the agent's dialect (`CLAUDE.md` →
    /// `AGENTS.md`); a path the case never named is returned as it is.
    pub fn back(&self, rel: &str) -> String {
        if let Some(p) = self.back.get(rel) {
            return p.clone();
        }
        if let Some(dir) = &self.rules_dir {
            if let Some(rest) = rel.strip_prefix(dir.as_str()).filter(|r| r.is_empty() || r.starts_with('/')) {
                return format!("{SEED_RULES}{rest}");
            }
        }
        // A path the case never named (a file reached through a linked folder): its file name in
        // the seed's words, AGENTS.md where several seed names share the agent's name.
        let (folder, name) = match rel.rsplit_once('/') {
            Some((f, n)) => (Some(f), n),
            None => (None, rel),
        };
        let seed = self.names_back.get(name).map(|seeds| {
            if seeds.iter().any(|s| s == "AGENTS.md") {
                "AGENTS.md".to_string()
            } else {
                seeds.first().cloned().unwrap_or_default()
            }
        });
        match (folder, seed) {
            (Some(f), Some(n)) if !n.is_empty() => format!("{f}/{n}"),
            (None, Some(n)) if !n.is_empty() => n,
            _ => rel.to_string(),
        }
    }

    /// Whether the case has something below `rel` at some point (then a placeholder file there
    /// would turn a later folder into a file).
    pub fn is_folder(&self, rel: &str) -> bool {
        self.folders.contains(rel)
    }

    /// Whether a project-relative path (in the dialect) is a rule module: a Markdown file under
    /// the rules folder.
    pub fn is_rule(&self, rel: &str) -> bool {
        self.rules_dir.as_deref().is_some_and(|d| rel.starts_with(&format!("{d}/")) && rel.ends_with(".md"))
    }
}

/// The translation of one recipe's dialect.
#[derive(Debug, Clone)]
pub struct Dialect<'r> {
    recipe: &'r Recipe,
}

impl<'r> Dialect<'r> {
    /// The dialect of `recipe`.
    pub fn new(recipe: &'r Recipe) -> Dialect<'r> {
        Dialect { recipe }
    }

    fn agent(&self) -> &str {
        &self.recipe.name
    }

    /// The agent's instruction-file names.
    pub fn instruction_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.recipe.dialect.names.values().map(String::as_str).collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// The agent's rules folder.
    pub fn rules_dir(&self) -> Option<&str> {
        self.recipe.dialect.rules_dir.as_deref()
    }

    /// Translates a case; `Err` is the reason it is UNSUPPORTED.
    pub fn translate(&self, s: &Scenario) -> Result<Translated, String> {
        if s.platform != Platform::Posix {
            return Err(format!(
                "{} runs on this host: a {} target cannot be given to it",
                self.agent(),
                platform_name(s.platform)
            ));
        }
        if s.local.is_some() {
            return Err(format!(
                "{} runs in a directory of this host, not on a computer behind a file client",
                self.agent()
            ));
        }
        if let Some(name) = s.options.as_ref().and_then(refused_option) {
            return Err(format!(
                "{} takes no option {name}: a CLI has only its own fixed behaviour (the case sets it to other than seed 002's default)",
                self.agent()
            ));
        }
        if s.profile == "section" || s.profile == "root-file" {
            if let Some(path) = blank_instruction_file(s) {
                return Err(format!(
                    "{path} holds only whitespace: a file is found in what {} sends by its content, so whether it reached the model cannot be seen",
                    self.agent()
                ));
            }
            // Seed 003's fallback name is none of seed 000's, which are all a dialect maps: a case
            // that expects it read cannot be said. One that only has it (a canary that must not
            // reach the model) still runs.
            let lower = |p: &str| p == ROOT_FILE_FALLBACK;
            let expects_lower = s.steps.iter().filter_map(|st| st.expect.as_ref()).any(|e| {
                e.startup.iter().flatten().any(|f| lower(&f.path))
                    || e.activation.iter().flatten().any(|m| lower(&m.path))
                    || e.section.as_ref().and_then(|x| x.files.as_ref()).is_some_and(|f| f.iter().any(|p| lower(p)))
            });
            if s.profile == "root-file" && expects_lower {
                return Err(format!(
                    "{} has no name for seed 003's {ROOT_FILE_FALLBACK} (recipe dialect.names maps seed 000's names only)",
                    self.agent()
                ));
            }
            // The extractor looks for files no deeper than its bound (extract::MAX_DEPTH folders
            // below the sandbox): a deeper file would be reported as not sent when it was.
            let deep = |p: &str| !p.starts_with("../") && p.split('/').count() > super::extract::MAX_DEPTH;
            let too_deep = s.tree.keys().find(|p| deep(p)).cloned().or_else(|| {
                s.steps.iter().find_map(|st| match &st.action {
                    Action::Write(w) if deep(&w.path) => Some(w.path.clone()),
                    _ => None,
                })
            });
            if let Some(path) = too_deep {
                return Err(format!(
                    "{} lies {} folders deep: what {} sends is searched for files at most {} folders below the project",
                    crate::report::escape::cut(&path, 80),
                    path.split('/').count() - 1,
                    self.agent(),
                    super::extract::MAX_DEPTH - 1
                ));
            }
            if let Some(path) = removed_instruction_file(s) {
                return Err(format!(
                    "the case deletes or renames {path}: a file is found in what {} sends by its content on disk, so a text it keeps in its history after the file is gone cannot be seen",
                    self.agent()
                ));
            }
        }
        let mut out = s.clone();
        let mut back = BTreeMap::new();
        let mut forward = BTreeMap::new();
        out.tree = BTreeMap::new();
        for (path, value) in &s.tree {
            let to = self.path(path)?;
            note(&mut forward, &mut back, path, &to, self.agent())?;
            let value = match value {
                TreeValue::File(bytes) if self.is_rule_path(&to) => TreeValue::File(self.content(bytes)),
                TreeValue::Symlink(target) => TreeValue::Symlink(self.link_target(target)),
                other => other.clone(),
            };
            out.tree.insert(to, value);
        }
        // What is a folder as each step comes: a CLI's read of a folder fails, where the case's
        // touch of one is a file access. (A touch of a file the case's tree lacks is a successful
        // read in the case; the runner makes the file just before the CLI reads it.)
        let parents = |p: &str| -> Vec<String> {
            p.match_indices('/').filter_map(|(i, _)| p.get(..i)).map(str::to_string).collect()
        };
        let mut dirs: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
        let mut folders: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
        for (p, v) in &out.tree {
            if matches!(v, TreeValue::Dir) {
                dirs.insert(p.clone());
            }
            dirs.extend(parents(p));
        }
        for step in &out.steps {
            match &step.action {
                Action::Write(w) => {
                    let p = self.path(&w.path)?;
                    dirs.remove(&p);
                    dirs.extend(parents(&p));
                }
                Action::Delete(p) => {
                    let p = self.path(p)?;
                    dirs.retain(|e| e != &p && !e.starts_with(&format!("{p}/")));
                }
                Action::Rename(r) => {
                    let (from, to) = (self.path(&r.from)?, self.path(&r.to)?);
                    dirs.remove(&from);
                    dirs.extend(parents(&to));
                }
                Action::Touch(t) => {
                    let rel = self.path(t.path.strip_prefix("{root}/").unwrap_or(&t.path))?;
                    if dirs.contains(&rel) {
                        return Err(format!(
                            "the case touches the folder {rel}: {}'s own tools fail on a folder, where the case's tool reports a file access",
                            self.agent()
                        ));
                    }
                }
                _ => {}
            }
        }
        for step in &mut out.steps {
            match &mut step.action {
                Action::Start | Action::NextRequest(None) => {}
                Action::Touch(t) => {
                    self.touchable(t)?;
                    let (prefix, rel) = match t.path.strip_prefix("{root}/") {
                        Some(rel) => ("{root}/", rel.to_string()),
                        None => ("", t.path.clone()),
                    };
                    let to = self.path(&rel)?;
                    note(&mut forward, &mut back, &rel, &to, self.agent())?;
                    t.path = format!("{prefix}{to}");
                }
                Action::Write(w) => {
                    let to = self.path(&w.path)?;
                    note(&mut forward, &mut back, &w.path, &to, self.agent())?;
                    if self.is_rule_path(&to) {
                        let bytes = w.value.bytes()?;
                        w.value = WriteValue::Hex(crate::run::wire::to_hex(&self.content(&bytes)));
                    }
                    w.path = to;
                }
                Action::Delete(p) => {
                    let to = self.path(p)?;
                    note(&mut forward, &mut back, p, &to, self.agent())?;
                    *p = to;
                }
                Action::Rename(r) => {
                    for p in [&mut r.from, &mut r.to] {
                        let to = self.path(p)?;
                        note(&mut forward, &mut back, p, &to, self.agent())?;
                        *p = to;
                    }
                }
                Action::Restart if self.recipe.launch.resume_args.is_none() => {
                    return Err(format!(
                        "{}'s recipe has no way to resume a session (launch.resume_args)",
                        self.agent()
                    ));
                }
                Action::Restart => {}
                other => return Err(format!("{} cannot be made to take a '{}' step", self.agent(), other.name())),
            }
        }
        let mut names_back: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (seed, agent) in &self.recipe.dialect.names {
            names_back.entry(agent.clone()).or_default().push(seed.clone());
        }
        for (to, from) in &back {
            if self.recipe.dialect.reserved.iter().any(|r| r == to) {
                return Err(format!(
                    "{from} would be {to}, which {} reads for a purpose of its own (recipe dialect.reserved)",
                    self.agent()
                ));
            }
        }
        for p in out.tree.keys() {
            folders.extend(parents(p));
        }
        for step in &out.steps {
            match &step.action {
                Action::Write(w) => folders.extend(parents(&w.path)),
                Action::Touch(t) => folders.extend(parents(t.path.strip_prefix("{root}/").unwrap_or(&t.path))),
                Action::Rename(r) => folders.extend(parents(&r.to)),
                _ => {}
            }
        }
        Ok(Translated { scenario: out, back, rules_dir: self.rules_dir().map(str::to_string), names_back, folders })
    }

    /// Whether the CLI can be scripted to make this touch: a successful call of a tool its recipe
    /// names. A CLI's own tool decides a call's outcome, and only its own read, write and edit
    /// carry a file access; a tool without one (a shell, a listing) is sent where the recipe has it.
    fn touchable(&self, t: &crate::case::scenario::TouchSpec) -> Result<(), String> {
        let agent = self.agent();
        let tool = t.tool();
        if let Some(scope) = &t.scope {
            return Err(format!("{agent} has one conversation: a call in the scope '{scope}' cannot be made"));
        }
        if let Some(args) = &t.args {
            let plain = args.len() == 1 && args.get("file_path").and_then(|v| v.as_str()) == Some(t.path.as_str());
            if !plain {
                return Err(format!(
                    "{agent}'s own tools take their own arguments: a call with the arguments {} cannot be made",
                    serde_json::Value::Object(args.clone())
                ));
            }
        }
        if t.outcome() != crate::run::wire::Outcome::Ok {
            return Err(format!(
                "{agent}'s own tools decide a call's outcome: a scripted '{}' cannot be made",
                outcome_word(t.outcome())
            ));
        }
        let file_tools = ["read", "write", "edit"];
        match (t.carries_file_access(), file_tools.contains(&tool)) {
            (true, false) => {
                return Err(format!("a '{tool}' tool reporting a file access is not one of {agent}'s tools (only its read, write and edit are)"))
            }
            (false, true) => return Err(format!("{agent}'s '{tool}' tool cannot be made to carry no file access")),
            _ => {}
        }
        if !self.recipe.tools.contains_key(tool) {
            return Err(format!("{agent}'s recipe has no '{tool}' tool"));
        }
        Ok(())
    }

    /// A project-relative path in the dialect; paths outside the project (`../`) are unchanged.
    pub fn path(&self, rel: &str) -> Result<String, String> {
        if rel == ".." || rel.starts_with('/') {
            return Ok(rel.to_string());
        }
        // Outside the project only the file name is the agent's (a file above the root, a link's
        // target): a name it has no word for stays as it is.
        if rel.starts_with("../") {
            return Ok(match rel.rsplit_once('/') {
                Some((folder, name)) => match self.recipe.dialect.names.get(name) {
                    Some(n) => format!("{folder}/{n}"),
                    None => rel.to_string(),
                },
                None => rel.to_string(),
            });
        }
        let mut parts: Vec<String> = rel.split('/').map(str::to_string).collect();
        let in_rules = rel == SEED_RULES || rel.starts_with(&format!("{SEED_RULES}/"));
        if in_rules {
            let Some(dir) = self.rules_dir() else {
                return Err(format!(
                    "{} has no rules folder standing for {SEED_RULES} (recipe dialect.rules_dir)",
                    self.agent()
                ));
            };
            let rest: Vec<String> = parts.split_off(2);
            let mut to: Vec<String> = dir.split('/').map(str::to_string).collect();
            to.extend(rest);
            return Ok(to.join("/"));
        }
        if parts.first().is_some_and(|p| p == ".elowen") {
            if let Some(parent) = self.rules_dir().and_then(|d| d.rsplit_once('/')).map(|(p, _)| p.to_string()) {
                if let Some(first) = parts.first_mut() {
                    *first = parent;
                }
            }
        }
        if let Some(last) = parts.last_mut() {
            if SEED_NAMES.contains(&last.as_str()) {
                match self.recipe.dialect.names.get(last.as_str()) {
                    Some(name) => *last = name.clone(),
                    None => return Err(format!("{} has no name for {last} (recipe dialect.names)", self.agent())),
                }
            }
        }
        Ok(parts.join("/"))
    }

    fn is_rule_path(&self, rel: &str) -> bool {
        self.rules_dir().is_some_and(|d| rel.starts_with(&format!("{d}/")))
    }

    /// A rule module's bytes with the frontmatter key `paths` renamed to the dialect's, and its
    /// globs in the dialect's names (`**/AGENTS.md` → `**/CLAUDE.md`, `.elowen/rules/*.md` →
    /// `.claude/rules/*.md`), so that they match the files the agent is made to touch.
    fn content(&self, bytes: &[u8]) -> Vec<u8> {
        let key = &self.recipe.dialect.frontmatter_key;
        let Ok(text) = std::str::from_utf8(bytes) else { return bytes.to_vec() };
        let (bom, body) = match text.strip_prefix('\u{feff}') {
            Some(rest) => ("\u{feff}", rest),
            None => ("", text),
        };
        if !(body.starts_with("---\n") || body.starts_with("---\r\n")) {
            return bytes.to_vec();
        }
        let mut out = String::from(bom);
        let mut in_front = true;
        for (i, line) in body.split_inclusive('\n').enumerate() {
            if i > 0 && in_front && line.trim_end() == "---" {
                in_front = false;
                out.push_str(line);
                continue;
            }
            let line = if in_front && i > 0 { self.glob_names(line) } else { line.to_string() };
            match line.strip_prefix("paths:") {
                Some(rest) if in_front && i > 0 => {
                    out.push_str(key);
                    out.push(':');
                    out.push_str(rest);
                }
                _ => out.push_str(&line),
            }
        }
        out.into_bytes()
    }

    /// A frontmatter line with the seed's folder and file names in globs made the dialect's.
    fn glob_names(&self, line: &str) -> String {
        let mut out = line.to_string();
        if let Some(dir) = self.rules_dir() {
            out = out.replace(SEED_RULES, dir);
            if let Some((parent, _)) = dir.rsplit_once('/') {
                out = replace_word(&out, ".elowen", parent);
            }
        }
        for (seed, agent) in &self.recipe.dialect.names {
            out = replace_word(&out, seed, agent);
        }
        out
    }

    /// A link's target with the names it passes through in the dialect.
    fn link_target(&self, target: &str) -> String {
        let parts: Vec<&str> = target.split('/').collect();
        let mut out: Vec<String> = Vec::new();
        let mut i = 0;
        while let Some(part) = parts.get(i) {
            let next = parts.get(i + 1).copied();
            if let (Some(dir), ".elowen", Some("rules")) = (self.rules_dir(), *part, next) {
                out.push(dir.to_string());
                i += 2;
                continue;
            }
            let last = i + 1 == parts.len();
            let mapped = if last { self.recipe.dialect.names.get(*part).cloned() } else { None };
            out.push(mapped.unwrap_or_else(|| (*part).to_string()));
            i += 1;
        }
        out.join("/")
    }
}

/// `text` with every `word` that stands as a whole path segment (not part of a longer name)
/// replaced by `by`.
fn replace_word(text: &str, word: &str, by: &str) -> String {
    let segment = |c: Option<char>| c.is_none_or(|c| !(c.is_alphanumeric() || matches!(c, '.' | '_' | '-')));
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(word) {
        let before = rest.get(..at).unwrap_or("");
        let after = rest.get(at + word.len()..).unwrap_or("");
        let whole =
            segment(before.chars().next_back().or_else(|| out.chars().next_back())) && segment(after.chars().next());
        out.push_str(before);
        out.push_str(if whole { by } else { word });
        rest = after;
    }
    out.push_str(rest);
    out
}

/// Records `from` → `to`, refusing two case paths that become one agent path.
fn note(
    forward: &mut BTreeMap<String, String>,
    back: &mut BTreeMap<String, String>,
    from: &str,
    to: &str,
    agent: &str,
) -> Result<(), String> {
    if let Some(other) = back.get(to).filter(|o| o.as_str() != from) {
        return Err(format!("{other} and {from} are both {to} in {agent}'s dialect (two names that collide)"));
    }
    forward.insert(from.to_string(), to.to_string());
    back.insert(to.to_string(), from.to_string());
    Ok(())
}

/// The first section option (seed 002, "Options") that `o` sets to other than its default, in the
/// table's order; `cwd` is none: the CLI runs in that folder. An agent CLI has only its own fixed
/// behaviour, so a case that sets one cannot be put to it.
fn refused_option(o: &crate::run::wire::SectionOptions) -> Option<&'static str> {
    use crate::run::wire::PerDirectory;
    let max_bytes = o.max_bytes.unwrap_or(65536);
    let set = [
        ("globalFile", o.global_file.is_some()),
        ("projectRootMarkers", o.project_root_markers.as_ref().is_some_and(|m| m != &[".git"])),
        ("fileNames", o.file_names.as_ref().is_some_and(|n| n != &["AGENTS.override.md", "AGENTS.md"])),
        ("perDirectory", o.per_directory.is_some_and(|p| p != PerDirectory::First)),
        ("maxBytes", max_bytes != 65536),
        ("maxFileBytes", o.max_file_bytes.is_some_and(|m| m != max_bytes)),
        ("nested", o.nested == Some(false)),
        ("maxNestedDirs", o.max_nested_dirs.is_some_and(|m| m != 256)),
        ("maxTrackedScopes", o.max_tracked_scopes.is_some_and(|m| m != 64)),
        ("intro", o.intro.is_some()),
        ("retractionText", o.retraction_text.is_some()),
    ];
    set.into_iter().find(|(_, on)| *on).map(|(name, _)| name)
}

/// The first instruction file (a seed name) of the case's tree or of a `write` step whose text is
/// only whitespace. Seed 002 renders such a file under its header ("Files with identical trimmed
/// content collapse"), but a black box shows only content: the section's `files` cannot be told.
fn blank_instruction_file(s: &Scenario) -> Option<String> {
    let named = |p: &str| SEED_NAMES.contains(&p.rsplit('/').next().unwrap_or(p));
    let blank = |b: &[u8]| b.iter().all(|c| c.is_ascii_whitespace());
    let in_tree = s.tree.iter().find_map(|(p, v)| match v {
        TreeValue::File(b) if named(p) && blank(b) => Some(p.clone()),
        _ => None,
    });
    in_tree.or_else(|| {
        s.steps.iter().find_map(|st| match &st.action {
            Action::Write(w) if named(&w.path) && w.value.bytes().is_ok_and(|b| blank(&b)) => Some(w.path.clone()),
            _ => None,
        })
    })
}

/// The first instruction file (a seed name) a `delete` or `rename` step takes away. Seed 002
/// retracts such a file's text ("appending has no way to retract text that no longer applies"),
/// but its old text, still in a CLI's history, is no longer on disk to be looked for: a section
/// without it would be seen whether the CLI retracted it or not.
fn removed_instruction_file(s: &Scenario) -> Option<String> {
    let named = |p: &str| SEED_NAMES.contains(&p.rsplit('/').next().unwrap_or(p));
    s.steps.iter().find_map(|st| match &st.action {
        Action::Delete(p) if named(p) || s.tree.keys().any(|k| k.starts_with(&format!("{p}/")) && named(k)) => {
            Some(p.clone())
        }
        Action::Rename(r)
            if named(&r.from) || s.tree.keys().any(|k| k.starts_with(&format!("{}/", r.from)) && named(k)) =>
        {
            Some(r.from.clone())
        }
        _ => None,
    })
}

fn platform_name(p: Platform) -> &'static str {
    match p {
        Platform::Posix => "posix",
        Platform::Windows => "Windows",
        Platform::Managed => "managed (guest)",
    }
}

fn outcome_word(o: crate::run::wire::Outcome) -> &'static str {
    match o {
        crate::run::wire::Outcome::Ok => "ok",
        crate::run::wire::Outcome::Error => "error",
        crate::run::wire::Outcome::Refused => "refused",
        crate::run::wire::Outcome::PastEof => "past_eof",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claude() -> Recipe {
        let text = r#"
name = "claude-code"
description = "test"
api = "anthropic-messages"
[package]
path = "/bin/true"
[launch]
args = []
[tools.read]
name = "Read"
[dialect]
names = { "AGENTS.md" = "CLAUDE.md", "CLAUDE.md" = "CLAUDE.md" }
rules_dir = ".claude/rules"
frontmatter_key = "globs"
"#;
        Recipe::parse(text, "t.toml").unwrap()
    }

    /// A small modules case with this tree.
    fn scenario(tree: &str) -> Scenario {
        let text = format!(
            "id: m-x-001\ntitle: t\nspec:\n  - decision: D-X\nprofile: modules\nplatform: posix\ncapabilities: []\nrules: [nested]\n{tree}\nsteps:\n  - start:\n"
        );
        match crate::case::load::parse(&text) {
            Ok(s) => s,
            Err(e) => panic!("{e:?}"),
        }
    }

    #[rstest::rstest]
    #[case("AGENTS.md", Ok("CLAUDE.md"))]
    #[case("src/api/AGENTS.md", Ok("src/api/CLAUDE.md"))]
    #[case(".elowen/rules/api.md", Ok(".claude/rules/api.md"))]
    #[case(".elowen/rules/sub/AGENTS.md", Ok(".claude/rules/sub/AGENTS.md"))]
    #[case(".elowen/AGENTS.md", Ok(".claude/CLAUDE.md"))]
    #[case("../outside/AGENTS.md", Ok("../outside/CLAUDE.md"))]
    #[case("../outside/AGENTS.override.md", Ok("../outside/AGENTS.override.md"))]
    #[case("src/x.ts", Ok("src/x.ts"))]
    #[case("AGENTS.override.md", Err("claude-code has no name for AGENTS.override.md"))]
    fn paths_are_translated_into_the_dialect(#[case] from: &str, #[case] to: Result<&str, &str>) {
        let r = claude();
        let got = Dialect::new(&r).path(from);
        match to {
            Ok(to) => assert_eq!(got.unwrap(), to),
            Err(e) => assert!(got.unwrap_err().contains(e)),
        }
    }

    #[test]
    fn the_frontmatter_key_is_renamed_and_the_body_kept() {
        let r = claude();
        let got = Dialect::new(&r).content(b"---\npaths:\n  - \"src/**\"\n---\npaths: stays\n");
        assert_eq!(String::from_utf8(got).unwrap(), "---\nglobs:\n  - \"src/**\"\n---\npaths: stays\n");
    }

    #[test]
    fn two_seed_names_in_one_folder_collide() {
        let r = claude();
        let s = scenario("tree: {AGENTS.md: \"a\\n\", CLAUDE.md: \"b\\n\"}");
        let err = Dialect::new(&r).translate(&s).unwrap_err();
        assert!(err.contains("collide"), "{err}");
    }

    #[test]
    fn observed_paths_are_translated_back() {
        let r = claude();
        let s = scenario("tree: {AGENTS.md: \"a\\n\", src/AGENTS.md: \"b\\n\"}");
        let t = Dialect::new(&r).translate(&s).unwrap();
        assert_eq!(t.back("CLAUDE.md"), "AGENTS.md");
        assert_eq!(t.back("src/CLAUDE.md"), "src/AGENTS.md");
        assert_eq!(t.back(".claude/rules/new.md"), ".elowen/rules/new.md");
        assert!(t.scenario.tree.contains_key("src/CLAUDE.md"));
    }

    /// A section case with these options and this step (a `touch:` line) after its start.
    fn section_case(options: &str, touch: &str) -> Scenario {
        let text = format!(
            "id: s-x-001\ntitle: t\nspec:\n  - decision: D-X\nprofile: section\nplatform: posix\n\
             rules: [section_discovery]\n{options}\ntree:\n  .git: {{dir: true}}\n  AGENTS.md: \"# Root\\n\"\n\
             steps:\n  - start:\n{touch}  - next_request:\n"
        );
        match crate::case::load::parse(&text) {
            Ok(s) => s,
            Err(e) => panic!("{e:?}"),
        }
    }

    #[rstest::rstest]
    #[case("{cwd: pkg}", None)]
    #[case("{max_bytes: 65536, max_file_bytes: 65536, per_directory: first, project_root_markers: ['.git']}", None)]
    #[case("{file_names: [AGENTS.override.md, AGENTS.md], nested: true, max_nested_dirs: 256}", None)]
    #[case("{max_bytes: 1024}", Some("claude-code takes no option maxBytes"))]
    #[case("{project_root_markers: [package.json]}", Some("claude-code takes no option projectRootMarkers"))]
    #[case("{per_directory: all}", Some("claude-code takes no option perDirectory"))]
    #[case("{file_names: [RULES.md]}", Some("claude-code takes no option fileNames"))]
    #[case("{global_file: ../g.md}", Some("claude-code takes no option globalFile"))]
    #[case("{intro: Hi.}", Some("claude-code takes no option intro"))]
    #[case("{max_file_bytes: 100}", Some("claude-code takes no option maxFileBytes"))]
    #[case("{nested: false}", Some("claude-code takes no option nested"))]
    #[case("{max_tracked_scopes: 2}", Some("claude-code takes no option maxTrackedScopes"))]
    fn section_options_other_than_the_defaults_are_refused(#[case] options: &str, #[case] refused: Option<&str>) {
        let r = claude();
        let mut s = section_case("", "");
        s.options = Some(reference::yaml::from_str(options).unwrap());
        let got = Dialect::new(&r).translate(&s);
        match refused {
            None => assert!(got.is_ok(), "{:?}", got.err()),
            Some(why) => assert!(got.as_ref().err().is_some_and(|e| e.contains(why)), "{:?}", got.err()),
        }
    }

    #[rstest::rstest]
    #[case("  - touch: {path: pkg/x.ts}\n", None)]
    #[case("  - touch: {path: pkg/x.ts, args: {file_path: pkg/x.ts}}\n", None)]
    #[case("  - touch: {path: pkg/x.ts, args: {path: pkg/x.ts}}\n", Some("take their own arguments"))]
    #[case("  - touch: {path: pkg/x.ts, scope: conv-a}\n", Some("a call in the scope 'conv-a' cannot be made"))]
    fn section_touches_the_cli_cannot_make_are_refused(#[case] touch: &str, #[case] refused: Option<&str>) {
        let r = claude();
        let caps = if touch.contains("scope") { "capabilities: [scopes]" } else { "" };
        let got = Dialect::new(&r).translate(&section_case(caps, touch));
        match refused {
            None => assert!(got.is_ok(), "{:?}", got.err()),
            Some(why) => assert!(got.as_ref().err().is_some_and(|e| e.contains(why)), "{:?}", got.err()),
        }
    }

    #[test]
    fn a_whitespace_only_instruction_file_is_refused_in_a_section_case() {
        let r = claude();
        let mut s = section_case("", "");
        s.tree.insert("pkg/AGENTS.md".into(), TreeValue::File(b" \n\t\n".to_vec()));
        let err = Dialect::new(&r).translate(&s).unwrap_err();
        assert!(err.starts_with("pkg/AGENTS.md holds only whitespace"), "{err}");
        s.profile = "modules".into();
        assert!(Dialect::new(&r).translate(&s).is_ok());
    }

    #[test]
    fn a_root_file_case_expecting_the_lowercase_fallback_is_refused() {
        let r = claude();
        let mut s = section_case("", "");
        s.profile = "root-file".into();
        assert!(Dialect::new(&r).translate(&s).is_ok());
        s.tree.insert("agents.md".into(), TreeValue::File(b"Run make.\n".to_vec()));
        assert!(Dialect::new(&r).translate(&s).is_ok(), "a fallback no step expects is only a canary");
        let expect: crate::case::scenario::Expect =
            reference::yaml::from_str("startup: [{path: agents.md, kind: root}]").unwrap();
        s.steps.push(crate::case::scenario::Step { action: Action::NextRequest(None), expect: Some(expect) });
        let err = Dialect::new(&r).translate(&s).unwrap_err();
        assert_eq!(
            err,
            "claude-code has no name for seed 003's agents.md (recipe dialect.names maps seed 000's names only)"
        );
    }

    #[test]
    fn an_instruction_file_deeper_than_the_extractor_looks_is_refused() {
        let r = claude();
        let mut s = section_case("", "");
        let at = |folders: usize| format!("{}AGENTS.md", "d/".repeat(folders));
        s.tree.insert(at(super::super::extract::MAX_DEPTH - 1), TreeValue::File(b"# Deep\n".to_vec()));
        assert!(Dialect::new(&r).translate(&s).is_ok());
        s.tree.insert(at(super::super::extract::MAX_DEPTH), TreeValue::File(b"# Deeper\n".to_vec()));
        let err = Dialect::new(&r).translate(&s).unwrap_err();
        assert!(err.contains("lies 40 folders deep"), "{err}");
    }

    #[test]
    fn deleting_an_instruction_file_is_refused_in_a_section_case() {
        let r = claude();
        let mut s = section_case("", "");
        s.steps.push(crate::case::scenario::Step { action: Action::Delete("AGENTS.md".into()), expect: None });
        let err = Dialect::new(&r).translate(&s).unwrap_err();
        assert!(err.starts_with("the case deletes or renames AGENTS.md"), "{err}");
        let mut other = section_case("", "");
        other.steps.push(crate::case::scenario::Step { action: Action::Delete("src/x.ts".into()), expect: None });
        assert!(Dialect::new(&r).translate(&other).is_ok());
    }
}
