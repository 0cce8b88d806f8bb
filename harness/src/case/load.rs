//! Loading the corpus: every `*.yaml` under a directory, parsed strictly and validated. Errors
//! name the file, the line and the field; one bad file never hides the others.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::path::{Path, PathBuf};

use crate::case::corpus::Corpus;
use crate::case::error::LoadError;
use crate::case::scenario::{Action, Basis, BasisSpec, Failure, Platform, Scenario, TreeValue};
use crate::case::vocabulary;

/// A loaded case.
#[derive(Debug, Clone)]
pub struct Case {
    /// The file.
    pub file: PathBuf,
    /// The display name: the path below the cases directory, without `.yaml`.
    pub name: String,
    /// The scenario.
    pub scenario: Scenario,
    /// The case file's text.
    pub text: String,
}

/// The first 1-based line of `text` containing `needle`.
fn line_of(text: &str, needle: &str) -> Option<usize> {
    text.lines().position(|l| l.contains(needle)).map(|i| i + 1)
}

/// Loads and validates every case under `dir` (files whose top-level mapping has an `id`; other
/// YAML such as clause lists lives in `clauses/` and is skipped).
pub fn load_dir(dir: &Path) -> Result<Vec<Case>, Vec<LoadError>> {
    load(&Corpus::read(dir))
}

/// Loads and validates every case of a corpus. One bad file never hides the others: every
/// error of every file is returned.
pub fn load(corpus: &Corpus) -> Result<Vec<Case>, Vec<LoadError>> {
    let mut errors = corpus.errors.clone();
    let mut cases = Vec::new();
    for (rel, text) in corpus.case_files() {
        let file = corpus.path_of(rel);
        let err = |line: Option<usize>, message: String| LoadError { file: file.clone(), line, message };
        match parse(text) {
            Ok(scenario) => {
                let name = rel.strip_suffix(".yaml").unwrap_or(rel).to_string();
                cases.push(Case { file: file.clone(), name, scenario, text: text.clone() });
            }
            Err(problems) => errors.extend(problems.into_iter().map(|(line, msg)| err(line, msg))),
        }
    }
    let mut ids: BTreeMap<String, PathBuf> = BTreeMap::new();
    for case in &cases {
        if let Some(first) = ids.insert(case.scenario.id.clone(), case.file.clone()) {
            errors.push(LoadError {
                file: case.file.clone(),
                line: line_of(&case.text, "id:"),
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

/// The most problems reported of one case file. Each is located by a search of the text, so a
/// file that breaks a rule at each of its 12,000 entries would take a search per entry; the first
/// hundred say what is wrong.
pub const MAX_PROBLEMS: usize = 100;

/// Parses and validates one scenario's text: the located problems (at most [`MAX_PROBLEMS`], then
/// a count of the rest), or the scenario.
pub fn parse(text: &str) -> Result<Scenario, Vec<(Option<usize>, String)>> {
    let scenario: Scenario = reference::yaml::from_str(text).map_err(|e| vec![(e.line, e.message)])?;
    let problems = validate(&scenario);
    if problems.is_empty() {
        return Ok(scenario);
    }
    let more = problems.len().saturating_sub(MAX_PROBLEMS);
    let mut located: Vec<(Option<usize>, String)> = problems
        .into_iter()
        .take(MAX_PROBLEMS)
        .map(|(needle, msg)| (needle.and_then(|n| line_of(text, &n)), msg))
        .collect();
    if more > 0 {
        located.push((None, format!("{more} more problems not shown (the first {MAX_PROBLEMS} are)")));
    }
    Err(located)
}

/// Checks what serde cannot: returns (text to locate the line by, message) pairs.
fn validate(s: &Scenario) -> Vec<(Option<String>, String)> {
    let mut out: Vec<(Option<String>, String)> = Vec::new();
    let mut bad = |needle: &str, msg: String| out.push((Some(needle.to_string()), msg));
    if s.id.trim().is_empty() || s.id.contains(char::is_whitespace) {
        bad("id:", format!("id: '{}' must be non-empty with no spaces", s.id));
    }
    if let Err(e) = check_profile(&s.profile) {
        bad("profile:", format!("profile: {e}"));
    }
    if s.profile == "section" && s.platform != Platform::Posix {
        bad("platform:", "platform: the section profile runs on posix trees only".into());
    }
    if s.prompt.is_some() && s.profile != "root-file" {
        bad("prompt:", "prompt: only root-file cases observe a system prompt".into());
    }
    if s.prompt.is_none() && s.steps.iter().any(|st| st.expect.as_ref().is_some_and(|e| e.prompt.is_some())) {
        bad("prompt:", "expect.prompt: the case must name the prompt it observes (prompt: full or lean)".into());
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
                Action::FailNextAppend(_) => "fail_next_append",
                Action::RejectNextResolution => "reject_next_resolution",
                Action::SelectProject(_) => "select_project",
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
    validate_vocabulary(s, &mut bad);
    validate_basis(s, &mut bad);
    match s.steps.first().map(|st| &st.action) {
        Some(Action::Start) => {}
        _ => bad("steps:", "steps: the first step must be start".into()),
    }
    if s.steps.iter().skip(1).any(|st| matches!(st.action, Action::Start)) {
        bad("- start", "steps: start may only be the first step".into());
    }
    let host = s.platform == Platform::Posix;
    validate_session(s, &mut bad);
    validate_local(s, &mut bad);
    // A local target's files are in memory on a POSIX computer too (its daemon tree is on disk).
    let in_memory = !host || s.local.is_some();
    if in_memory && s.steps.iter().any(|st| matches!(&st.action, Action::Write(w) if w.in_place)) {
        bad(
            "in_place:",
            "steps: in_place applies to the files of a host tree (a file client's tree has no file identity)".into(),
        );
    }
    if !host && s.placement.is_some() {
        bad("placement:", "placement: only posix cases place a root".into());
    }
    if s.platform != Platform::Managed && s.environment.is_some() {
        bad("environment:", "environment: only managed cases have an environment".into());
    }
    if s.platform != Platform::Managed && s.steps.iter().any(|st| matches!(st.action, Action::Environment(_))) {
        bad("environment:", "steps: environment applies to managed cases only".into());
    }
    if host && s.root.is_some() {
        bad("root:", "root: a posix case's root is the directory the harness makes".into());
    }
    let entries = PathTrie::of(&s.tree);
    for path in s.tree.keys() {
        if let Some((link, _)) = entries.entries_above(path).find(|(_, v)| matches!(v, TreeValue::Symlink(_))) {
            bad(path, format!("tree: '{path}' lies below the link '{link}' (the harness never writes through a link)"));
        }
    }
    for path in s.tree.keys() {
        let file = entries.entries_above(path).find(|(_, v)| !matches!(v, TreeValue::Dir | TreeValue::Symlink(_)));
        if let Some((file, _)) = file {
            bad(path, format!("tree: '{path}' lies below the file '{file}' (an entry cannot be a file and a folder)"));
        }
    }
    let linked = through_links(s);
    if linked.total > MAX_LINKED_PATHS {
        bad(
            "tree:",
            format!(
                "tree: its links stand for {} entries through them, over the {MAX_LINKED_PATHS} a case may have \
                 (each link repeats every entry below its target)",
                linked.total
            ),
        );
    }
    let mut total: u64 = 0;
    for (path, value) in &s.tree {
        let bytes = match value {
            TreeValue::File(b) => b.len() as u64,
            TreeValue::Sized { size, .. } => *size,
            _ => 0,
        };
        if let TreeValue::Sized { size, .. } = value {
            if *size > crate::util::beneath::MAX_DENSE_FILE {
                bad(
                    path,
                    format!(
                        "tree: '{path}': {size} bytes is over the {} MiB cap of a dense file (use sparse)",
                        crate::util::beneath::MAX_DENSE_FILE >> 20
                    ),
                );
            }
        }
        total = total.saturating_add(bytes);
        if in_memory && path.starts_with("..") {
            bad(path, format!("tree: '{path}' lies outside an in-memory tree"));
        }
        let posix_only = matches!(value, TreeValue::Sparse(_) | TreeValue::Fifo);
        if in_memory && posix_only {
            bad(path, format!("tree: '{path}': sparse files and FIFOs exist only in a host tree"));
        }
        if s.platform == Platform::Windows && matches!(value, TreeValue::Symlink(_)) {
            bad(path, format!("tree: '{path}': a Windows target tree holds no symlinks"));
        }
    }
    let cap = if in_memory { crate::util::beneath::MAX_MEM_TREE_BYTES } else { crate::util::beneath::MAX_TREE_BYTES };
    if total > cap {
        bad(
            "tree:",
            format!(
                "tree: {total} bytes of files is over the {} MiB a {} tree may hold",
                cap >> 20,
                if in_memory { "in-memory" } else { "host" }
            ),
        );
    }
    for st in &s.steps {
        if let Action::Touch(t) = &st.action {
            if s.profile != "section" && (t.tool.is_some() || t.outcome.is_some()) && t.file_access.is_none() {
                bad(
                    "touch:",
                    format!(
                        "steps: touch '{}' names a tool or an outcome, so it must state file_access (the harness \
                         derives nothing from a tool's name)",
                        t.path
                    ),
                );
            }
            if s.profile == "section" && st.expect.is_some() {
                bad(
                    "touch:",
                    "steps: a section touch observes nothing (the section sees the call with the next round: \
                     expect it at the next next_request)"
                        .into(),
                );
            }
        }
        if let Some(e) = &st.expect {
            let request = matches!(st.action, Action::NextRequest(_));
            if (e.blocked.is_some() || e.escaped.is_some()) && !(request && s.profile == "modules") {
                let which = if e.blocked.is_some() { "blocked" } else { "escaped" };
                bad(which, format!("expect.{which}: belongs to a next_request step of the modules profile"));
            }
            if e.failed.is_some() && !matches!(st.action, Action::Start) {
                bad("failed:", "expect.failed: belongs to the start step".into());
            }
            if e.failed == Some(true) && s.steps.len() > 1 {
                bad(
                    "failed:",
                    "expect.failed: a failed startup leaves no session to drive, so it must be the case's only step"
                        .into(),
                );
            }
            if s.profile != "root-file" && e.startup.iter().flatten().any(|f| f.continued.is_some()) {
                bad("continued:", "expect.startup: continued belongs to the root-file profile".into());
            }
            for d in &e.diagnostics {
                if !reference::Code::ALL.iter().any(|c| c.as_str() == d.code) {
                    bad(&d.code, format!("expect.diagnostics: '{}' is not a diagnostic code", d.code));
                }
            }
        }
    }
    out
}

/// Checks `session:` (FORMAT.md, "Session"): what serde cannot. A parent id that names no row is
/// valid input (the "missing row" case), and so is a sub-agent with no parent (an orphan).
fn validate_session(s: &Scenario, bad: &mut impl FnMut(&str, String)) {
    let Some(w) = &s.session else { return };
    if s.profile != "modules" || s.platform != Platform::Posix {
        bad("session:", "session: only posix cases of the modules profile model who a session belongs to".into());
    }
    let mut ids = BTreeSet::new();
    for c in &w.conversations {
        let at = format!("id: {}", c.id);
        if c.id.trim().is_empty() {
            bad("conversations:", "session.conversations: a row's id must not be empty".into());
        }
        if !ids.insert(c.id.as_str()) {
            bad(&at, format!("session.conversations: two rows have the id '{}'", c.id));
        }
        if !w.accounts.contains_key(&c.account) {
            bad(
                &at,
                format!(
                    "session.conversations: row '{}' names the account '{}', which session.accounts lacks",
                    c.id, c.account
                ),
            );
        }
        let sub = c.kind == crate::case::scenario::Kind::SubAgent;
        if !sub && c.parent.is_some() {
            bad(&at, format!("session.conversations: row '{}' has a parent, but only a sub_agent has one", c.id));
        }
        if !sub && c.fork {
            bad(
                &at,
                format!("session.conversations: row '{}' is a fork, but only a sub_agent (with a parent) forks", c.id),
            );
        }
        if c.kind == crate::case::scenario::Kind::CronExecution && !c.id.starts_with(reference::CRON_ROOT_PREFIX) {
            bad(
                &at,
                format!(
                    "session.conversations: row '{}' is a cron_execution, whose id starts with '{}'",
                    c.id,
                    reference::CRON_ROOT_PREFIX
                ),
            );
        }
        if s.placement.is_none() && (c.cwd.is_some() || c.policy.is_some()) {
            bad(
                &at,
                format!(
                    "session.conversations: row '{}' sets cwd or policy, which place a root: the case needs placement",
                    c.id
                ),
            );
        }
    }
    for (name, a) in &w.accounts {
        let at = format!("{name}:");
        let chatbot = a.role == crate::case::scenario::Role::Chatbot;
        if !chatbot && a.bound.is_some() {
            bad(&at, format!("session.accounts.{name}.bound: only a chatbot account is bound (a session's bound Project is placement.bound)"));
        }
        if chatbot && a.policy.is_none() {
            bad(&at, format!("session.accounts.{name}.policy: a chatbot's live policy must be stated"));
        }
    }
    match w.conversations.iter().find(|c| c.id == w.spawn) {
        None => bad("spawn:", format!("session.spawn: '{}' names no row of session.conversations", w.spawn)),
        Some(c) => {
            let chatbot = w.accounts.get(&c.account).is_some_and(|a| a.role == crate::case::scenario::Role::Chatbot);
            if chatbot && s.placement.as_ref().is_some_and(|p| p.bound.is_some()) {
                bad("bound:", format!("placement.bound: the spawned row belongs to the chatbot '{}', which is bound through session.accounts.{}.bound", c.account, c.account));
            }
        }
    }
}

/// Checks a local CLI target's inputs: the modules profile on a POSIX or Windows computer, its
/// directories relative to the base of the computer's tree, a daemon tree only on POSIX.
fn validate_local(s: &Scenario, bad: &mut impl FnMut(&str, String)) {
    let selects = s.steps.iter().any(|st| matches!(st.action, Action::SelectProject(_)));
    let Some(local) = &s.local else {
        if selects {
            bad("select_project", "steps: select_project applies to local CLI targets only (set local:)".into());
        }
        return;
    };
    if s.profile != "modules" {
        bad("local:", format!("local: a local CLI target belongs to the modules profile, not to {}", s.profile));
    }
    if s.platform == Platform::Managed {
        bad("local:", "local: a managed project is no local CLI target (platform: posix or windows)".into());
    }
    if s.placement.is_some() {
        bad("placement:", "placement: a local target's root is its working directory (local:), not a placement".into());
    }
    if s.platform != Platform::Posix && !local.daemon_tree.is_empty() {
        bad("daemon_tree:", "local.daemon_tree: only a POSIX computer's paths name daemon files".into());
    }
    let mut dirs: Vec<(&str, &str)> = vec![("default_dir", &local.default_dir)];
    dirs.extend(local.work_dir.as_deref().map(|d| ("work_dir", d)));
    dirs.extend(local.placed_dir.as_deref().map(|d| ("placed_dir", d)));
    for st in &s.steps {
        if let Action::SelectProject(d) = &st.action {
            dirs.push(("select_project", d));
        }
    }
    for (field, dir) in dirs {
        let parts: Vec<&str> = dir.split(['/', '\\']).collect();
        if dir.is_empty() || dir.starts_with(['/', '\\']) || dir.contains(':') || parts.contains(&"..") {
            bad(
                field,
                format!(
                    "local.{field}: '{dir}' must be relative to the base of the computer's tree, with no '..' \
                     ('.' is the base)"
                ),
            );
        }
    }
    let entries = PathTrie::of(&local.daemon_tree);
    for (path, value) in &local.daemon_tree {
        if let Some((link, _)) = entries.entries_above(path).find(|(_, v)| matches!(v, TreeValue::Symlink(_))) {
            bad(
                path,
                format!("local.daemon_tree: '{path}' lies below the link '{link}' (the harness never writes through a link)"),
            );
        }
        if let TreeValue::Sized { size, .. } = value {
            if *size > crate::util::beneath::MAX_DENSE_FILE {
                bad(path, format!("local.daemon_tree: '{path}': {size} bytes is over the cap of a dense file"));
            }
        }
    }
}

/// The directories a local case places a root at (relative to the base of its tree): the one of
/// its spawn (the placed dir, else the work_dir, else the default) and every later selection,
/// which a new session is placed at.
fn local_roots(s: &Scenario) -> Vec<String> {
    let Some(l) = &s.local else { return Vec::new() };
    let spawn = l.placed_dir.as_ref().or(l.work_dir.as_ref()).unwrap_or(&l.default_dir);
    let mut out = vec![spawn.clone()];
    for st in &s.steps {
        if let Action::SelectProject(d) = &st.action {
            out.push(d.clone());
        }
    }
    out.into_iter().map(|d| join_lexical("", &d.replace('\\', "/"))).collect()
}

/// The directories a local case may place a root at, to find the ones a path lies strictly below
/// in one walk down the path (a scan of every root per path was quadratic in the steps).
struct PlacedRoots<'a> {
    /// Whether the base of the tree (`""`) is one: every path lies below it.
    base: bool,
    others: PathTrie<'a, ()>,
}

impl<'a> PlacedRoots<'a> {
    fn new(roots: &'a [String]) -> Self {
        let mut others = PathTrie::new();
        for d in roots.iter().filter(|d| !d.is_empty()) {
            others.insert(d, ());
        }
        PlacedRoots { base: roots.iter().any(String::is_empty), others }
    }

    /// `path` relative to each root it lies strictly below (the base first, then nearest the
    /// base first).
    fn below<'p>(&'p self, path: &'p str) -> impl Iterator<Item = &'p str> + 'p {
        let base = self.base.then_some(path);
        base.into_iter().chain(self.others.above(path).map(|(rest, _)| rest))
    }
}

/// The profiles a case may name.
pub const PROFILES: &[&str] = &["modules", "section", "root-file"];

/// Checks a profile name: `Err` says it is not one, with the nearest known name.
pub fn check_profile(p: &str) -> Result<(), String> {
    if PROFILES.contains(&p) {
        return Ok(());
    }
    let hint =
        vocabulary::nearest(p, PROFILES.iter().copied()).map(|n| format!(" (did you mean '{n}'?)")).unwrap_or_default();
    Err(format!("'{p}' is not a profile{hint}; known: {}", PROFILES.join(", ")))
}

/// The instruction file names of the modules profile, compared case-insensitively here so that a
/// Windows tree's `agents.md` counts too (seed 000, "Format and discovery").
const INSTRUCTION_NAMES: &[&str] = &["agents.override.md", "agents.md", "claude.md"];

/// The capabilities a case uses, derived from its platform, tree, options and steps: what a case
/// must list in `capabilities`, no more and no less.
pub fn used_capabilities(s: &Scenario) -> BTreeSet<&'static str> {
    let mut out = BTreeSet::new();
    let has = |f: fn(&Action) -> bool| s.steps.iter().any(|st| f(&st.action));
    if has(|a| matches!(a, Action::Restart)) {
        out.insert("restart");
    }
    if s.local.is_some() {
        out.insert("local_cli");
    }
    // Whose files: a Windows target or a managed project, in every profile.
    match s.platform {
        Platform::Windows => {
            out.insert("windows_targets");
        }
        Platform::Managed => {
            out.insert("managed");
        }
        Platform::Posix => {}
    }
    match s.profile.as_str() {
        "modules" => {
            let norm = |p: &str| {
                let p = p.replace('\\', "/");
                if s.platform == Platform::Windows {
                    p.to_lowercase()
                } else {
                    p
                }
            };
            let mut paths: Vec<String> = s.tree.keys().map(|p| norm(p)).collect();
            // Files reached only through a link count where the link puts them.
            paths.extend(through_links(s).paths.iter().map(|p| norm(p)));
            for st in &s.steps {
                match &st.action {
                    Action::Write(w) => paths.push(norm(&w.path)),
                    Action::Rename(r) => paths.push(norm(&r.to)),
                    _ => {}
                }
            }
            let is_rules = |p: &str| p == ".elowen/rules" || p.starts_with(".elowen/rules/");
            // A local target's tree is the computer's: its rules lie below the directory the root
            // is placed at.
            let local_roots: Vec<String> = local_roots(s).iter().map(|d| norm(d)).collect();
            let placed = PlacedRoots::new(&local_roots);
            let rules = if s.local.is_some() {
                paths.iter().any(|p| placed.below(p).any(is_rules))
            } else {
                paths.iter().any(|p| is_rules(p))
            };
            if rules {
                out.insert("rule_modules");
            }
            let mut roots: BTreeSet<String> = match &s.placement {
                None => [".".to_string()].into(),
                Some(pl) => {
                    let mut r: BTreeSet<String> = pl.projects.iter().cloned().collect();
                    r.extend(pl.bound.clone());
                    r.insert(pl.cwd.clone());
                    r.insert(".".into());
                    r
                }
            };
            // A chatbot's bound Project, and a row's working directory, are roots too.
            if let Some(w) = &s.session {
                roots.extend(w.accounts.values().filter_map(|a| a.bound.clone()));
                roots.extend(w.conversations.iter().filter_map(|c| c.cwd.clone()));
            }
            let nested = paths.iter().any(|p| {
                let (folder, name) = p.rsplit_once('/').unwrap_or((".", p));
                let named = INSTRUCTION_NAMES.contains(&name.to_lowercase().as_str());
                if s.local.is_some() {
                    // Strictly below a directory the root may be placed at.
                    let folder = if folder == "." { "" } else { folder };
                    named && placed.below(folder).any(|r| !r.is_empty())
                } else {
                    named && !folder.starts_with("..") && !roots.contains(folder)
                }
            });
            if nested && has(|a| matches!(a, Action::Touch(_))) {
                out.insert("nested_files");
            }
            for (name, used) in [
                ("fork", has(|a| matches!(a, Action::Fork))),
                ("compaction", has(|a| matches!(a, Action::Compact))),
                ("cold_clear", has(|a| matches!(a, Action::ColdClear))),
                ("append_failure", has(|a| matches!(a, Action::FailNextAppend(Failure::Transient)))),
                ("persistence_latch", has(|a| matches!(a, Action::FailNextAppend(Failure::Durable)))),
                ("resolver_rejection", has(|a| matches!(a, Action::RejectNextResolution))),
                ("root_placement", s.placement.is_some()),
                ("eligibility", s.session.is_some()),
            ] {
                if used {
                    out.insert(name);
                }
            }
        }
        "section" => {
            // A touch needs no capability: seed 002 has subtrees on by default ("Once a tool call
            // touches a file below cwd, that subtree's directories join the scan"; `nested: true`),
            // so `subtrees` is only retained for hellos that declare it (vocabulary.yaml). Turning
            // them off is the `nested` option's capability, below.
            let scoped = s.steps.iter().any(|st| match &st.action {
                Action::Touch(t) => t.scope.is_some(),
                Action::NextRequest(scope) => scope.is_some(),
                _ => false,
            });
            if scoped {
                out.insert("scopes");
            }
            if let Some(o) = &s.options {
                for (name, set) in [
                    ("global_file", o.global_file.is_some()),
                    ("per_directory", o.per_directory.is_some()),
                    ("file_names", o.file_names.is_some()),
                    ("root_markers", o.project_root_markers.is_some()),
                    ("nested_option", o.nested.is_some()),
                    ("max_bytes", o.max_bytes.is_some()),
                    ("max_file_bytes", o.max_file_bytes.is_some()),
                    ("max_nested_dirs", o.max_nested_dirs.is_some()),
                    ("max_tracked_scopes", o.max_tracked_scopes.is_some()),
                    ("intro", o.intro.is_some()),
                    ("retraction_text", o.retraction_text.is_some()),
                ] {
                    if set {
                        out.insert(name);
                    }
                }
            }
        }
        "root-file" => {
            if s.prompt == Some(crate::case::scenario::PromptKind::Lean) {
                out.insert("lean_prompt");
            }
            let mut paths: Vec<String> = s.tree.keys().cloned().collect();
            paths.extend(through_links(s).paths);
            for st in &s.steps {
                match &st.action {
                    Action::Write(w) => paths.push(w.path.clone()),
                    Action::Rename(r) => paths.push(r.to.clone()),
                    _ => {}
                }
            }
            // A Windows target's names are case-insensitive.
            let windows = s.platform == Platform::Windows;
            let norm = |p: &String| {
                let p = p.replace('\\', "/");
                if windows {
                    p.to_lowercase()
                } else {
                    p
                }
            };
            if paths.iter().any(|p| norm(p) == reference::prompt::INIT_FILE) {
                out.insert("section_redefinition");
            }
        }
        _ => {}
    }
    out
}

/// Lexically joins `rel` (with `..`) onto `base`, both relative to the project directory, where
/// `..` may step beside it.
fn join_lexical(base: &str, rel: &str) -> String {
    let mut parts: Vec<&str> = base.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    for seg in rel.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else {
                    parts.push("..");
                }
            }
            other => parts.push(other),
        }
    }
    parts.join("/")
}

/// The most paths a case's links may stand for ([`through_links`]): far more than any real case
/// needs, and few enough to list. Each link repeats every entry below its target, so 12,000 links
/// to a folder of 12,000 files would stand for 144 million paths.
pub const MAX_LINKED_PATHS: usize = 100_000;

/// What a case's links make of its other entries.
struct Linked {
    /// The paths, at most [`MAX_LINKED_PATHS`] of them.
    paths: Vec<String>,
    /// How many there are in all.
    total: usize,
}

/// The paths a case's links make of its other entries: for a link `L` whose target is the tree
/// path `T` (relative, or `{project}/…`, `{sandbox}/…`), every entry `T/x` also stands at `L/x`.
/// The entries below a target are one range of the sorted tree, counted once per target, so the
/// cost is that of the paths listed, never the number of links times the number of entries.
fn through_links(s: &Scenario) -> Linked {
    let mut out = Linked { paths: Vec::new(), total: 0 };
    let mut counts: HashMap<String, usize> = HashMap::new();
    for (link, value) in &s.tree {
        let TreeValue::Symlink(target) = value else { continue };
        let target = if let Some(rest) = target.strip_prefix("{project}") {
            join_lexical("", rest)
        } else if let Some(rest) = target.strip_prefix("{sandbox}") {
            join_lexical("..", rest)
        } else if target.starts_with('/') {
            continue;
        } else {
            let folder = link.rsplit_once('/').map_or("", |(f, _)| f);
            join_lexical(folder, target)
        };
        let below = format!("{target}/");
        let itself = s.tree.contains_key(&target);
        let from = (Bound::Included(below.as_str()), Bound::Unbounded);
        let entries = || s.tree.range::<str, _>(from).take_while(|(p, _)| p.starts_with(&below));
        let count = *counts.entry(target.clone()).or_insert_with(|| usize::from(itself) + entries().count());
        out.total = out.total.saturating_add(count);
        if out.paths.len() + count > MAX_LINKED_PATHS {
            continue;
        }
        if itself {
            out.paths.push(link.clone());
        }
        out.paths.extend(entries().map(|(p, _)| format!("{link}/{}", p.get(below.len()..).unwrap_or_default())));
    }
    out
}

/// A set of `/`-paths by their components, each with a mark, so that the marked paths above a
/// path are found in one walk down it. A lookup per ancestor, or a scan of every link per entry,
/// made a case with 12,000 links take 30 s to load.
struct PathTrie<'a, T> {
    /// Each node's children by component, and its mark.
    nodes: Vec<(HashMap<&'a str, usize>, Option<T>)>,
}

impl<'a, T> PathTrie<'a, T> {
    fn new() -> Self {
        PathTrie { nodes: vec![(HashMap::new(), None)] }
    }

    fn insert(&mut self, path: &'a str, mark: T) {
        let mut at = 0;
        for part in path.split('/') {
            let next = self.nodes.len();
            let Some((children, _)) = self.nodes.get_mut(at) else { return };
            at = *children.entry(part).or_insert(next);
            if at == next {
                self.nodes.push((HashMap::new(), None));
            }
        }
        if let Some(node) = self.nodes.get_mut(at) {
            node.1 = Some(mark);
        }
    }

    /// For each marked path `path` lies strictly below, nearest the root first: the rest of
    /// `path` after it (and its `/`), and its mark. `a` is above `a/b` and `a/`, not above `ab`.
    fn above<'p>(&'p self, path: &'p str) -> impl Iterator<Item = (&'p str, &'p T)> + 'p {
        let mut at = Some(0);
        let mut start = 0;
        path.match_indices('/')
            .map_while(move |(i, _)| {
                let part = path.get(start..i)?;
                start = i + 1;
                let (children, _) = self.nodes.get(at?)?;
                at = children.get(part).copied();
                let (_, mark) = self.nodes.get(at?)?;
                Some(mark.as_ref().map(|m| (path.get(i + 1..).unwrap_or_default(), m)))
            })
            .flatten()
    }
}

impl<'a> PathTrie<'a, (&'a str, &'a TreeValue)> {
    /// A tree's entries, each marked with its path and value.
    fn of(tree: &'a BTreeMap<String, TreeValue>) -> Self {
        let mut trie = PathTrie::new();
        for (path, value) in tree {
            trie.insert(path, (path.as_str(), value));
        }
        trie
    }

    /// The entries `path` lies strictly below, nearest the root first.
    fn entries_above<'p>(&'p self, path: &'p str) -> impl Iterator<Item = (&'a str, &'a TreeValue)> + 'p {
        self.above(path).map(|(_, entry)| *entry)
    }
}

fn validate_vocabulary(s: &Scenario, bad: &mut impl FnMut(&str, String)) {
    for c in &s.capabilities {
        if !vocabulary::is_capability(c) {
            let hint =
                if vocabulary::is_rule(c) { " (it is a rule: list it under rules)".to_string() } else { String::new() };
            bad(c, format!("capabilities: '{c}' is not a capability in vocabulary.yaml{hint}"));
        }
    }
    for r in &s.rules {
        if !vocabulary::is_rule(r) {
            let hint = if vocabulary::is_capability(r) {
                " (it is a capability: list it under capabilities)".to_string()
            } else {
                String::new()
            };
            bad(r, format!("rules: '{r}' is not a rule in vocabulary.yaml{hint}"));
        }
    }
    if s.rules.is_empty() {
        bad("rules:", "rules: name at least one rule the case tests".into());
    }
    let used = used_capabilities(s);
    let listed: BTreeSet<&str> = s.capabilities.iter().map(String::as_str).collect();
    for missing in used.difference(&listed) {
        bad("capabilities:", format!("capabilities: the case uses '{missing}' but does not list it"));
    }
    for extra in listed.difference(&used).filter(|c| vocabulary::is_capability(c)) {
        bad(
            "capabilities:",
            format!("capabilities: the case lists '{extra}' but its tree, options and steps do not use it"),
        );
    }
}

fn validate_basis(s: &Scenario, bad: &mut impl FnMut(&str, String)) {
    let cites_quote = s.spec.iter().any(|r| r.seed.is_some() && r.quote.is_some());
    let decisions: BTreeSet<&str> = s.spec.iter().filter_map(|r| r.decision.as_deref()).collect();
    let check = |b: &Basis, bad: &mut dyn FnMut(&str, String)| match b {
        Basis::Seed if !cites_quote => {
            bad("basis:", "basis: 'seed' needs a quoted seed sentence in spec".into());
        }
        Basis::Decision(id) if !decisions.contains(id.as_str()) => {
            bad(id, format!("basis: '{id}' is not a decision the case cites in spec"));
        }
        _ => {}
    };
    if let Some(b) = &s.basis {
        check(b, bad);
    }
    if let Some(b) = &s.canary_basis {
        check(b, bad);
        if s.canaries.is_empty() {
            bad("canary_basis:", "canary_basis: the case has no canaries".into());
        }
    }
    for st in &s.steps {
        let Some(e) = &st.expect else { continue };
        match &e.basis {
            Some(BasisSpec::All(b)) => check(b, bad),
            Some(BasisSpec::Each(m)) => {
                for b in m.values() {
                    check(b, bad);
                }
            }
            None => {}
        }
        let all_stated = match &e.basis {
            Some(BasisSpec::All(_)) => true,
            Some(BasisSpec::Each(m)) => crate::case::scenario::EXPECTATIONS.iter().all(|x| m.contains_key(*x)),
            None => false,
        };
        if !all_stated && s.case_basis().is_none() {
            bad(
                "spec:",
                "basis: the case cites both seed sentences and decisions, so it must state what its \
                 expectations rest on (basis: seed, or a decision id, for the case or per step)"
                    .into(),
            );
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_using_rule_module_files_must_need_rule_modules() {
        let text = "id: x\ntitle: t\nspec: [{decision: D-X}]\nprofile: modules\nplatform: posix\nrules: [globs]\n\
                    tree:\n  .elowen/rules/a.md: \"a\"\nsteps:\n  - start:\n";
        let problems = parse(text).unwrap_err();
        assert!(problems.iter().any(|(_, m)| m.contains("uses 'rule_modules'")), "{problems:?}");
    }

    /// Each capability is derived from what the case uses, and from nothing else.
    #[rstest::rstest]
    #[case::rule_modules("modules", "posix", "tree: {.elowen/rules/a.md: x}\n", "", &["rule_modules"])]
    #[case::rule_modules_by_write("modules", "posix", "", "  - write: {path: .elowen/rules/a.md, text: x}\n", &["rule_modules"])]
    #[case::nested_needs_a_touch("modules", "posix", "tree: {src/AGENTS.md: x}\n", "", &[])]
    #[case::nested_files("modules", "posix", "tree: {src/AGENTS.md: x}\n", "  - touch: {path: src/a.ts}\n", &["nested_files"])]
    #[case::nested_any_case("modules", "posix", "tree: {src/claude.MD: x}\n", "  - touch: {path: src/a.ts}\n", &["nested_files"])]
    #[case::root_file_is_no_capability("modules", "posix", "tree: {AGENTS.md: x}\n", "  - touch: {path: a.ts}\n", &[])]
    #[case::through_a_link("modules", "posix", "tree: {../o/AGENTS.md: x, vendor: {symlink: ../o}}\n", "  - touch: {path: vendor/a}\n", &["nested_files"])]
    #[case::restart("root-file", "posix", "", "  - restart:\n", &["restart"])]
    #[case::fork("modules", "posix", "", "  - fork:\n", &["fork"])]
    #[case::compaction("modules", "posix", "", "  - compact:\n", &["compaction"])]
    #[case::cold_clear("modules", "posix", "", "  - cold_clear:\n", &["cold_clear"])]
    #[case::append_failure("modules", "posix", "", "  - fail_next_append:\n", &["append_failure"])]
    #[case::eligibility("modules", "posix", "session: {accounts: {a: {role: user}}, conversations: [{id: c, account: a, kind: owner_chat}], spawn: c}\n", "", &["eligibility"])]
    #[case::persistence_latch("modules", "posix", "", "  - fail_next_append: durable\n", &["persistence_latch"])]
    #[case::resolver_rejection("modules", "posix", "", "  - reject_next_resolution:\n", &["resolver_rejection"])]
    #[case::local_cli("modules", "posix", "local: {work_dir: repo}\n", "", &["local_cli"])]
    #[case::local_rules_below_the_root("modules", "posix", "local: {work_dir: repo}\ntree: {repo/.elowen/rules/a.md: x}\n", "", &["local_cli", "rule_modules"])]
    #[case::local_rules_elsewhere("modules", "posix", "local: {work_dir: repo}\ntree: {.elowen/x.md: x, other/.elowen/rules/a.md: x, .elowen/rules/b.md: x}\n", "", &["local_cli"])]
    #[case::local_rules_of_a_selection("modules", "posix", "local: {work_dir: repo}\ntree: {other/.elowen/rules/a.md: x}\n", "  - select_project: other\n", &["local_cli", "rule_modules"])]
    #[case::local_root_file_is_no_nested_file("modules", "posix", "local: {work_dir: repo}\ntree: {repo/AGENTS.md: x, AGENTS.md: x}\n", "  - touch: {path: a}\n", &["local_cli"])]
    #[case::local_nested("modules", "windows", "local: {work_dir: repo}\ntree: {repo/src/agents.md: x}\n", "  - touch: {path: a}\n", &["local_cli", "nested_files", "windows_targets"])]
    #[case::windows("modules", "windows", "", "", &["windows_targets"])]
    #[case::managed("modules", "managed", "", "", &["managed"])]
    #[case::a_touch_is_no_capability("section", "posix", "", "  - touch: {path: a/b.ts}\n", &[])]
    #[case::nested_option("section", "posix", "options: {nested: false}\n", "  - touch: {path: a/b.ts}\n", &["nested_option"])]
    #[case::scopes("section", "posix", "", "  - next_request: {scope: c}\n", &["scopes"])]
    #[case::option("section", "posix", "options: {max_bytes: 10, intro: x, cwd: a}\n", "", &["max_bytes", "intro"])]
    #[case::lean_prompt("root-file", "posix", "prompt: lean\n", "", &["lean_prompt"])]
    #[case::full_prompt_is_no_capability("root-file", "posix", "prompt: full\n", "", &[])]
    #[case::init_file("root-file", "posix", "tree: {.nodwyn/init.scm: x}\n", "", &["section_redefinition"])]
    #[case::init_file_by_write("root-file", "managed", "", "  - write: {path: .nodwyn/init.scm, text: x}\n", &["managed", "section_redefinition"])]
    #[case::init_file_elsewhere("root-file", "posix", "tree: {docs/.nodwyn/init.scm: x}\n", "", &[])]
    fn capabilities_are_derived(
        #[case] profile: &str,
        #[case] platform: &str,
        #[case] extra: &str,
        #[case] steps: &str,
        #[case] want: &[&str],
    ) {
        let text = format!(
            "id: x\ntitle: t\nspec: [{{decision: D-X}}]\nprofile: {profile}\nplatform: {platform}\nrules: [globs]\n\
             {extra}steps:\n  - start:\n{steps}"
        );
        let s: Scenario = reference::yaml::from_str(&text).unwrap();
        let got: Vec<&str> = used_capabilities(&s).into_iter().collect();
        let mut want = want.to_vec();
        want.sort_unstable();
        assert_eq!(got, want);
    }

    /// A retained capability (vocabulary.yaml) is never derived, whatever a case uses: a section
    /// case with touches, scopes and every option needs every option's capability and `scopes`,
    /// never `subtrees`.
    #[test]
    fn no_retained_capability_is_derived() {
        let text = "id: x\ntitle: t\nspec: [{decision: D-X}]\nprofile: section\nplatform: posix\nrules: [globs]\n\
                    options: {cwd: a, global_file: g, per_directory: all, file_names: [A.md], project_root_markers: [.hg],\
                    \x20nested: true, max_bytes: 9, max_file_bytes: 9, max_nested_dirs: 1, max_tracked_scopes: 1, intro: i,\
                    \x20retraction_text: r}\n\
                    steps:\n  - start:\n  - touch: {path: b/c.ts, scope: s}\n  - next_request: {scope: s}\n  - restart:\n";
        let s: Scenario = reference::yaml::from_str(text).unwrap();
        let used = used_capabilities(&s);
        assert!(used.contains("scopes") && used.contains("nested_option") && used.contains("restart"), "{used:?}");
        let retained = crate::case::vocabulary::retained();
        assert!(!retained.is_empty());
        for r in &retained {
            assert!(!used.contains(r.as_str()), "'{r}' is retained but derived");
        }
    }

    #[test]
    fn a_prompt_belongs_to_the_root_file_profile_and_its_expectation_to_a_case_naming_one() {
        let text = "id: x\ntitle: t\nspec: [{decision: D-X}]\nprofile: modules\nplatform: posix\nrules: [globs]\n\
                    prompt: full\nsteps:\n  - start:\n";
        let problems = parse(text).unwrap_err();
        assert!(problems.iter().any(|(_, m)| m.contains("only root-file cases")), "{problems:?}");
        let text = "id: x\ntitle: t\nspec: [{decision: D-X}]\nprofile: root-file\nplatform: posix\n\
                    rules: [rootfile_prompt]\nsteps:\n  - start:\n    expect: {prompt: [lean_fixed]}\n";
        let problems = parse(text).unwrap_err();
        assert!(problems.iter().any(|(_, m)| m.contains("must name the prompt")), "{problems:?}");
        assert!(parse(&text.replace("rules:", "prompt: full\nrules:")).is_ok());
    }

    #[test]
    fn a_case_listing_an_unused_capability_is_refused() {
        let text = "id: x\ntitle: t\nspec: [{decision: D-X}]\nprofile: modules\nplatform: posix\nrules: [globs]\n\
                    capabilities: [fork]\nsteps:\n  - start:\n";
        let problems = parse(text).unwrap_err();
        assert!(problems.iter().any(|(_, m)| m.contains("lists 'fork'")), "{problems:?}");
    }

    #[test]
    fn a_mixed_case_must_state_its_basis() {
        let text = "id: x\ntitle: t\nspec: [{decision: D-X}, {seed: '000', heading: h, quote: q}]\n\
                    profile: modules\nplatform: posix\nrules: [globs]\nsteps:\n  - start:\n    expect: {}\n";
        let problems = parse(text).unwrap_err();
        assert!(problems.iter().any(|(_, m)| m.contains("must state what its expectations rest on")), "{problems:?}");
        assert!(parse(&text.replace("rules: [globs]", "rules: [globs]\nbasis: D-X")).is_ok());
        assert!(parse(&text.replace("rules: [globs]", "rules: [globs]\nbasis: D-Y")).is_err());
    }

    /// `session:` is checked strictly, each problem naming its field and line; a parent id that
    /// names no row, and a sub-agent with no parent, are valid input.
    #[rstest::rstest]
    #[case::spawn_names_no_row("spawn: c", "spawn: zz", "session.spawn: 'zz' names no row", 13)]
    #[case::unknown_account(
        "account: a, kind: owner_chat",
        "account: b, kind: owner_chat",
        "names the account 'b'",
        12
    )]
    #[case::unknown_key("kind: owner_chat}", "kind: owner_chat, colour: red}", "colour", 12)]
    #[case::unknown_kind("kind: owner_chat}", "kind: owner}", "owner", 12)]
    #[case::parent_on_root("kind: owner_chat}", "kind: owner_chat, parent: x}", "only a sub_agent has one", 12)]
    #[case::duplicate_row(
        "kind: owner_chat}",
        "kind: owner_chat}\n    - {id: c, account: a, kind: shared_room}",
        "two rows have the id 'c'",
        12
    )]
    #[case::cron_id("kind: owner_chat}", "kind: cron_execution}", "whose id starts with", 12)]
    #[case::chatbot_policy("{role: administrator}", "{role: chatbot, bound: .}", "live policy must be stated", 10)]
    #[case::bound_on_admin(
        "{role: administrator}",
        "{role: administrator, bound: .}",
        "only a chatbot account is bound",
        10
    )]
    #[case::cwd_without_placement("kind: owner_chat}", "kind: owner_chat, cwd: src}", "needs placement", 12)]
    fn session_problems_are_located(#[case] from: &str, #[case] to: &str, #[case] message: &str, #[case] line: usize) {
        let text = "id: x\ntitle: t\nspec: [{decision: D-X}]\nprofile: modules\nplatform: posix\nrules: [placement]\n\
                    capabilities: [eligibility]\nsession:\n  accounts:\n    a: {role: administrator}\n  conversations:\n\
                    - {id: c, account: a, kind: owner_chat}\n  spawn: c\nsteps:\n  - start:\n";
        let text = text.replace("\n- {id", "\n    - {id");
        assert!(parse(&text).is_ok(), "{:?}", parse(&text).err());
        let problems = parse(&text.replacen(from, to, 1)).unwrap_err();
        let hit = problems.iter().find(|(_, m)| m.contains(message));
        assert!(hit.is_some(), "{problems:?}");
        assert_eq!(hit.and_then(|(l, _)| *l), Some(line), "{problems:?}");
    }

    #[test]
    fn a_parent_naming_no_row_and_an_orphan_are_valid_input() {
        let text = "id: x\ntitle: t\nspec: [{decision: D-X}]\nprofile: modules\nplatform: posix\nrules: [placement]\n\
                    capabilities: [eligibility]\nsession:\n  accounts: {a: {role: administrator}}\n  conversations:\n\
                    \x20   - {id: c, account: a, kind: sub_agent, parent: gone}\n    - {id: d, account: a, kind: sub_agent}\n\
                    \x20 spawn: c\nsteps:\n  - start:\n";
        assert!(parse(text).is_ok(), "{:?}", parse(text).err());
    }

    /// Bad local, latch and rejection inputs are refused with a message naming the field.
    #[rstest::rstest]
    #[case::local_on_managed(
        "platform: managed\nlocal: {work_dir: repo}\n",
        "",
        "a managed project is no local CLI target"
    )]
    #[case::daemon_tree_on_windows("platform: windows\nlocal: {daemon_tree: {a: x}}\n", "", "local.daemon_tree")]
    #[case::dotdot_work_dir("platform: posix\nlocal: {work_dir: ../repo}\n", "", "local.work_dir")]
    #[case::absolute_placed_dir("platform: posix\nlocal: {placed_dir: /repo}\n", "", "local.placed_dir")]
    #[case::local_with_placement(
        "platform: posix\nlocal: {work_dir: repo}\nplacement: {cwd: .}\n",
        "",
        "placement: a local target"
    )]
    #[case::select_without_local(
        "platform: posix\n",
        "  - select_project: repo\n",
        "select_project applies to local CLI targets only"
    )]
    #[case::failed_not_alone(
        "platform: posix\nlocal: {owner: false}\n",
        "    expect: {failed: true}\n  - next_request:\n",
        "must be the case's only step"
    )]
    #[case::blocked_on_start("platform: posix\n", "    expect: {blocked: true}\n", "expect.blocked")]
    #[case::failed_on_a_request(
        "platform: posix\n",
        "  - next_request:\n    expect: {failed: true}\n",
        "expect.failed: belongs to the start step"
    )]
    fn bad_local_and_fault_inputs_are_refused(#[case] head: &str, #[case] steps: &str, #[case] want: &str) {
        let text = format!(
            "id: x\ntitle: t\nspec: [{{decision: D-X}}]\nprofile: modules\n{head}rules: [globs]\nsteps:\n  - start:\n{steps}"
        );
        let problems = parse(&text).unwrap_err();
        assert!(problems.iter().any(|(_, m)| m.contains(want)), "{problems:?}");
    }

    #[test]
    fn an_unknown_failure_kind_is_refused() {
        let text = "id: x\ntitle: t\nspec: [{decision: D-X}]\nprofile: modules\nplatform: posix\nrules: [globs]\n\
                    steps:\n  - start:\n  - fail_next_append: forever\n";
        let problems = parse(text).unwrap_err();
        assert!(problems.iter().any(|(_, m)| m.contains("neither transient")), "{problems:?}");
    }

    /// A canary's basis is checked like any basis: a decision the case cites, and only with
    /// canaries to apply to.
    #[rstest::rstest]
    #[case::cited("canaries: [C]\ncanary_basis: D-X\n", None)]
    #[case::not_cited("canaries: [C]\ncanary_basis: D-Y\n", Some("'D-Y' is not a decision the case cites"))]
    #[case::seed_without_quote("canaries: [C]\ncanary_basis: seed\n", Some("needs a quoted seed sentence"))]
    #[case::no_canaries("canary_basis: D-X\n", Some("the case has no canaries"))]
    fn a_canary_basis_is_checked(#[case] head: &str, #[case] want: Option<&str>) {
        let text = format!(
            "id: x\ntitle: t\nspec: [{{decision: D-X}}]\nprofile: modules\nplatform: posix\nrules: [globs]\n{head}\
             steps:\n  - start:\n"
        );
        match (parse(&text), want) {
            (Ok(_), None) => {}
            (Err(problems), Some(want)) => assert!(problems.iter().any(|(_, m)| m.contains(want)), "{problems:?}"),
            (got, want) => panic!("{want:?}: {:?}", got.err()),
        }
    }

    #[test]
    fn a_touch_naming_a_tool_must_state_file_access() {
        let text = "id: x\ntitle: t\nspec: [{decision: D-X}]\nprofile: modules\nplatform: posix\nrules: [triggers]\n\
                    steps:\n  - start:\n  - touch: {path: a, tool: bash}\n";
        let problems = parse(text).unwrap_err();
        assert!(problems.iter().any(|(_, m)| m.contains("must state file_access")), "{problems:?}");
        assert!(parse(&text.replace("tool: bash", "tool: bash, file_access: false")).is_ok());
    }

    /// A marked path is above another when its components begin the other's: `a` is above `a/b`
    /// and `a/`, not above `ab` or itself.
    #[rstest::rstest]
    #[case::child("a/b", &["a"], &[("b", "a")])]
    #[case::grandchild("a/b/c", &["a", "a/b", "x"], &[("b/c", "a"), ("c", "a/b")])]
    #[case::trailing_slash("a/", &["a"], &[("", "a")])]
    #[case::empty_component("a//b", &["a", "a/"], &[("/b", "a"), ("b", "a/")])]
    #[case::not_a_prefix_of_a_name("ab/c", &["a"], &[])]
    #[case::not_itself("a", &["a"], &[])]
    #[case::leading_slash("/x", &[""], &[("x", "")])]
    fn the_paths_above_a_path_are_found_by_its_components(
        #[case] path: &str,
        #[case] marked: &[&str],
        #[case] want: &[(&str, &str)],
    ) {
        let mut trie = PathTrie::new();
        for m in marked {
            trie.insert(m, *m);
        }
        let got: Vec<(&str, &str)> = trie.above(path).map(|(rest, m)| (rest, *m)).collect();
        assert_eq!(got, want);
    }

    fn case_with_tree(tree: &str) -> String {
        format!(
            "id: x\ntitle: t\nspec: [{{decision: D-X}}]\nprofile: modules\nplatform: posix\nrules: [symlinks]\n\
             tree:\n{tree}steps:\n  - start:\n"
        )
    }

    #[test]
    fn links_that_stand_for_too_many_paths_are_refused() {
        let mut tree: String = (0..300).map(|i| format!("  d/f{i}: x\n")).collect();
        tree.extend((0..400).map(|i| format!("  l{i}: {{symlink: d}}\n")));
        let problems = parse(&case_with_tree(&tree)).unwrap_err();
        let want = "tree: its links stand for 120000 entries through them, over the 100000 a case may have";
        assert!(problems.iter().any(|(line, m)| m.starts_with(want) && *line == Some(7)), "{problems:?}");
        // Links that stand for 99,900 paths are within the bound.
        let tree: String = (0..300)
            .map(|i| format!("  d/f{i}: x\n"))
            .chain((0..333).map(|i| format!("  l{i}: {{symlink: d}}\n")))
            .collect();
        assert!(parse(&case_with_tree(&tree)).is_ok(), "{:?}", parse(&case_with_tree(&tree)).err());
    }

    #[test]
    fn at_most_a_hundred_problems_are_listed_then_a_count() {
        let tree: String = (0..150).map(|i| format!("  l{i}: {{symlink: x}}\n  l{i}/below: y\n")).collect();
        let problems = parse(&case_with_tree(&tree)).unwrap_err();
        assert_eq!(problems.len(), MAX_PROBLEMS + 1);
        assert!(problems.first().is_some_and(|(_, m)| m.contains("lies below the link")), "{problems:?}");
        assert_eq!(problems.last().map(|(_, m)| m.as_str()), Some("50 more problems not shown (the first 100 are)"));
    }
}
