//! The reference behind the protocol's data: a case is opened from an [`OpenCase`], then driven by
//! [`StepOp`]s, and every step answers an [`Observation`]. The harness runs the reference
//! in-process through this module, and `reference-adapter` serves the same module over the
//! protocol, so both paths run one piece of code and the suite through the adapter must give
//! exactly the in-process results.
//!
//! This is the only place that knows both the wire and the reference's library API; the reference
//! itself never knows it is under test.

use std::path::{Path, PathBuf};

use reference::section::{self, Section};
use reference::{
    admitted_root, instruction_scope, place_root, Account, Activation, AppendFailure, Config, Conversation, Diagnostic,
    Environment, HostSource, Kind, LocalTarget, MemSource, MemTree, Node, Placement, Platform, RelPath, Role, Scope,
    Session, SessionError, Source, Spawn, StartupFile, StateDir, ToolResult,
};
use serde::{Deserialize, Serialize};

use crate::run::wire::{
    from_hex, CasePlatform, Defaults, Hello, Observation, OpenCase, Outcome, PerDirectory, PromptKind, PromptPart,
    StepOp, ToolCall, TreeEdit, WireActivation, WireDiagnostic, WireEntry, WireEnvironment, WireFile, WireKind,
    WireModule, WirePrompt, WireRole, WireSection, WireSession,
};

/// What the reference says of itself in `hello`. In-process runs and `reference-adapter` both
/// answer with it, so the two can never disagree. It declares every capability of the vocabulary
/// and its own default texts.
pub fn reference_hello() -> Hello {
    Hello {
        name: "reference".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        language: "rust".into(),
        // The reference implements every profile.
        profiles: crate::case::load::PROFILES.iter().map(|p| p.to_string()).collect(),
        capabilities: crate::case::vocabulary::capabilities().into_keys().collect(),
        defaults: Defaults {
            intro: Some(section::DEFAULT_INTRO.into()),
            retraction_text: Some(section::DEFAULT_RETRACTION.into()),
        },
        codes: reference::Code::ALL.iter().map(|c| (c.as_str().to_string(), c.as_str().to_string())).collect(),
    }
}

/// A running case.
#[derive(Debug)]
pub struct Driver {
    open: OpenCase,
    source: Option<Source>,
    session: Option<Session>,
    section: Option<Section>,
    root_file: Option<RootFileState>,
    /// A local CLI target: the computer's files (kept current through edits) and the directories
    /// that place the root. The session's source is rebuilt from it at its stored root.
    local: Option<LocalTarget>,
    state_dir: PathBuf,
}

/// The root-file profile's session: the prefix read at start, kept in the state directory so a
/// resume retains it (seed 003: "It is read once, when the session starts").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct RootFileState {
    startup: Vec<WireFile>,
    section: String,
}

const ROOT_FILE_STATE: &str = "root-file.json";
/// The most the state file holds: the 32 KiB file, hex-free JSON and the section, with room.
const MAX_STATE_BYTES: u64 = 1 << 20;

/// The wire form of the reference's prompts of `kind` around `section`: each prompt's parts, in
/// order (seed 003, "Decision" and the 2026-10-18 amendment).
fn wire_prompts(kind: PromptKind, section: &str) -> Vec<WirePrompt> {
    use reference::prompt::{self, PartKind};
    let reference_kind = match kind {
        PromptKind::Full => prompt::PromptKind::Full,
        PromptKind::Lean => prompt::PromptKind::Lean,
    };
    prompt::prompts(reference_kind, section)
        .into_iter()
        .map(|p| WirePrompt {
            kind,
            parts: p
                .parts
                .iter()
                .map(|(k, _)| match k {
                    PartKind::WorkingRules => PromptPart::WorkingRules,
                    PartKind::GitRule => PromptPart::GitRule,
                    PartKind::WorkspaceFolders => PromptPart::WorkspaceFolders,
                    PartKind::ProjectInstructions => PromptPart::ProjectInstructions,
                    PartKind::ProjectNotes => PromptPart::ProjectNotes,
                    PartKind::LeanFixed => PromptPart::LeanFixed,
                })
                .collect(),
        })
        .collect()
}

impl RootFileState {
    /// What the session shows: the file read, the section, and the prompts of `prompt`'s kind
    /// where the case observes one.
    fn observation(&self, prompt: Option<PromptKind>) -> Observation {
        let round = WireSection {
            text: self.section.clone(),
            rewritten: !self.section.is_empty(),
            files: self.startup.iter().map(|f| f.path.clone()).collect(),
            omitted: Vec::new(),
        };
        Observation {
            startup: Some(self.startup.clone()),
            section: Some(round),
            prompts: prompt.map(|kind| wire_prompts(kind, &self.section)),
            ..Observation::default()
        }
    }

    fn load(state_dir: &Path) -> Result<RootFileState, String> {
        // The state is the reference's own file, read through a handle on its directory:
        // never through a link, never blocking, bounded.
        let text = StateDir::open_or_create(state_dir)
            .and_then(|dir| dir.read_bounded(ROOT_FILE_STATE, MAX_STATE_BYTES))
            .map_err(|e| format!("no root-file session to resume: {e}"))?;
        serde_json::from_slice(&text).map_err(|e| format!("{ROOT_FILE_STATE}: {e}"))
    }

    /// Saves atomically through a handle on the state directory ([`StateDir::replace_atomically`]):
    /// a crash mid-write never leaves half a state for the resume to read, and nothing is written
    /// through a link or into a state directory made again at a freed name.
    fn save(&self, state_dir: &Path) -> Result<(), String> {
        let text = serde_json::to_vec(self).map_err(|e| e.to_string())?;
        StateDir::open_or_create(state_dir)
            .and_then(|dir| dir.replace_atomically(ROOT_FILE_STATE, &text))
            .map_err(|e| e.to_string())
    }
}

fn rel(platform: Platform, s: &str) -> Result<RelPath, String> {
    let segs: Vec<&str> = match platform {
        Platform::Windows => s.split(['/', '\\']).collect(),
        Platform::Posix => s.split('/').collect(),
    };
    RelPath::from_segments(segs).ok_or_else(|| format!("tree path '{s}' is not a normal relative path"))
}

fn environment(w: &WireEnvironment) -> Environment {
    match w {
        WireEnvironment::Running => Environment::Running,
        WireEnvironment::Stopped => Environment::Stopped,
        WireEnvironment::Pending => Environment::Pending,
        WireEnvironment::Failed(t) => Environment::Failed(t.clone()),
    }
}

fn config(profile: &str) -> Result<Config, String> {
    match profile {
        "modules" | "section" => Ok(Config::modules()),
        "root-file" => Ok(Config::root_file()),
        other => Err(format!("profile '{other}' is not supported")),
    }
}

/// The wire form of the reference's diagnostics.
pub fn wire_diagnostics(diags: Vec<Diagnostic>) -> Vec<WireDiagnostic> {
    diags
        .into_iter()
        .map(|d| WireDiagnostic { code: d.code.as_str().to_string(), path: d.path, line: d.line, message: d.message })
        .collect()
}

fn wire_files(files: Vec<StartupFile>) -> Vec<WireFile> {
    files
        .into_iter()
        .map(|f| WireFile { path: f.path, kind: f.kind, sha256: f.sha256, content: f.content.to_string() })
        .collect()
}

fn wire_activation(a: Activation) -> WireActivation {
    WireActivation {
        modules: a
            .modules
            .into_iter()
            .map(|m| WireModule { path: m.path, sha256: m.sha256, supersedes: m.supersedes, content: m.content })
            .collect(),
        rendered: a.rendered,
    }
}

/// The reference's section options: the case's where it sets them, the seed table's defaults
/// elsewhere.
fn section_options(o: Option<&crate::run::wire::SectionOptions>) -> section::SectionOptions {
    let mut out = section::SectionOptions::default();
    let Some(o) = o else { return out };
    out.cwd.clone_from(&o.cwd);
    out.global_file.clone_from(&o.global_file);
    if let Some(v) = &o.project_root_markers {
        out.project_root_markers.clone_from(v);
    }
    if let Some(v) = &o.file_names {
        out.file_names.clone_from(v);
    }
    if let Some(v) = o.per_directory {
        out.per_directory = match v {
            PerDirectory::First => section::PerDirectory::First,
            PerDirectory::All => section::PerDirectory::All,
        };
    }
    if let Some(v) = o.max_bytes {
        out.max_bytes = v;
    }
    if o.max_file_bytes.is_some() {
        out.max_file_bytes = o.max_file_bytes;
    }
    if let Some(v) = o.nested {
        out.nested = v;
    }
    if let Some(v) = o.max_nested_dirs {
        out.max_nested_dirs = v;
    }
    if let Some(v) = o.max_tracked_scopes {
        out.max_tracked_scopes = v;
    }
    if let Some(v) = &o.intro {
        out.intro.clone_from(v);
    }
    if let Some(v) = &o.retraction_text {
        out.retraction_text.clone_from(v);
    }
    out
}

/// The reference's view of who the spawned session belongs to.
fn spawn(w: &WireSession) -> Spawn {
    let paths = |v: &Option<Vec<String>>| v.as_ref().map(|ps| ps.iter().map(PathBuf::from).collect());
    let accounts = w
        .accounts
        .iter()
        .map(|(name, a)| {
            let role = match a.role {
                WireRole::Administrator => Role::Administrator,
                WireRole::User => Role::User,
                WireRole::Chatbot => Role::Chatbot,
            };
            (name.clone(), Account { role, bound: a.bound.as_ref().map(PathBuf::from), policy: paths(&a.policy) })
        })
        .collect();
    let conversations = w
        .conversations
        .iter()
        .map(|c| Conversation {
            id: c.id.clone(),
            account: c.account.clone(),
            kind: match c.kind {
                WireKind::OwnerChat => Kind::OwnerChat,
                WireKind::SharedRoom => Kind::SharedRoom,
                WireKind::PlatformConversation => Kind::PlatformConversation,
                WireKind::SharedChannel => Kind::SharedChannel,
                WireKind::CronExecution => Kind::CronExecution,
                WireKind::SubAgent => Kind::SubAgent,
            },
            parent: c.parent.clone(),
            fork: c.fork,
            scheduled: c.scheduled,
            admin: c.admin,
            owner: c.owner,
            cwd: c.cwd.as_ref().map(PathBuf::from),
            policy: paths(&c.policy),
        })
        .collect();
    Spawn { accounts, conversations, spawned: w.spawn.clone() }
}

/// The host root of a session: the spawned session's scope first (seed 000, "Boundaries and
/// authority"), then root placement as for any host session. Without `session` the session is
/// an administrator's own chat; without `placement` its root is `root`, the one Project.
fn host_root(open: &OpenCase) -> Option<PathBuf> {
    let (cwd, policies) = match open.session.as_ref().map(|w| instruction_scope(&spawn(w))) {
        None => (None, Vec::new()),
        Some(Scope::Nothing(_)) => return None,
        // The chatbot's exception: its bound Project itself, with no cwd lookup, no worktree
        // inspection and no placement.
        Some(Scope::BoundOnly { project, policies }) => return admitted_root(&project, &policies),
        Some(Scope::Full { cwd, policies }) => (cwd, policies),
    };
    match &open.placement {
        None if policies.is_empty() => Some(PathBuf::from(&open.root)),
        None => admitted_root(Path::new(&open.root), &policies),
        Some(p) => place_root(&Placement {
            cwd: cwd.unwrap_or_else(|| PathBuf::from(&p.cwd)),
            projects: p.projects.iter().map(PathBuf::from).collect(),
            bound: p.bound.as_ref().map(PathBuf::from),
            policies,
        }),
    }
}

fn mem_tree(platform: Platform, entries: &[WireEntry]) -> Result<MemTree, String> {
    let mut tree = MemTree::new(platform);
    for entry in entries {
        match entry {
            WireEntry::File { path, hex } => tree.insert(&rel(platform, path)?, Node::File(from_hex(hex)?)),
            WireEntry::Dir { path } => tree.insert(&rel(platform, path)?, Node::Dir),
            WireEntry::Symlink { path, target } => tree.insert(&rel(platform, path)?, Node::Symlink(target.clone())),
        }
    }
    Ok(tree)
}

/// The local CLI target of a case: the computer's files below `root` and the directories that
/// place the session's root (seed 000, "Local CLI instruction sources").
fn build_local(open: &OpenCase) -> Result<Option<LocalTarget>, String> {
    let Some(local) = &open.local else { return Ok(None) };
    let platform = match open.platform {
        CasePlatform::Posix => Platform::Posix,
        CasePlatform::Windows => Platform::Windows,
        CasePlatform::Managed => return Err("a managed project is no local CLI target".into()),
    };
    let tree = mem_tree(platform, open.tree.as_deref().unwrap_or_default())?;
    Ok(Some(
        LocalTarget::new(platform, open.root.clone(), tree, local.default_dir.clone())
            .with_placed_dir(local.placed_dir.clone())
            .with_work_dir(local.work_dir.clone())
            .with_owner(local.owner)
            .with_connection_lost(local.connection_lost),
    ))
}

fn build_source(open: &OpenCase) -> Result<Source, String> {
    match open.platform {
        CasePlatform::Posix => {
            let root = host_root(open);
            match root {
                None => Ok(Source::Nothing),
                Some(root) => HostSource::new(&root)
                    .map(Source::Host)
                    .map_err(|e| format!("root '{}' cannot be resolved: {e}", root.display())),
            }
        }
        CasePlatform::Windows | CasePlatform::Managed if open.session.is_some() => {
            Err("session (eligibility) applies to posix cases only".into())
        }
        CasePlatform::Windows | CasePlatform::Managed => {
            let platform = if open.platform == CasePlatform::Windows { Platform::Windows } else { Platform::Posix };
            let tree = mem_tree(platform, open.tree.as_deref().unwrap_or_default())?;
            Ok(Source::Mem(if platform == Platform::Windows {
                MemSource::windows(open.root.clone(), tree)
            } else {
                let env = open.environment.as_ref().map(environment).unwrap_or_default();
                MemSource::managed(open.root.clone(), tree, env)
            }))
        }
    }
}

/// A committed call as the section sees it: a failed call contributes nothing.
fn committed(call: &ToolCall) -> section::Call {
    section::Call { failed: call.outcome != Outcome::Ok, args: call.args.clone().unwrap_or_default() }
}

impl Driver {
    /// Opens a case: builds the file source, and resumes the journaled session when asked.
    pub fn open(open: OpenCase) -> Result<(Driver, Observation), String> {
        config(&open.profile)?;
        if open.prompt.is_some() && open.profile != "root-file" {
            return Err(format!("prompt is not part of the {} profile", open.profile));
        }
        if open.local.is_some() && open.profile != "modules" {
            return Err(format!("a local CLI target is part of the modules profile, not of {}", open.profile));
        }
        let local = build_local(&open)?;
        // A local target's files come through its file client only: the daemon's own filesystem
        // at the root's path is never a source (decision D-LOCAL-1).
        let source = if local.is_some() { None } else { Some(build_source(&open)?) };
        let state_dir = PathBuf::from(&open.state_dir);
        let mut driver = Driver { open, source, session: None, section: None, root_file: None, local, state_dir };
        let obs = if driver.open.resume { driver.restart()? } else { Observation::default() };
        Ok((driver, obs))
    }

    /// Restarts in-process: drops the session (and its in-memory queue) and resumes it from the
    /// state directory, with the tree as it is now.
    pub fn restart(&mut self) -> Result<Observation, String> {
        match self.open.profile.as_str() {
            "section" => {
                // The section keeps its scopes in memory only: a restart mounts it afresh
                // (D-SEC-LIFE-1).
                self.section = Some(self.mount_section()?);
                Ok(Observation::default())
            }
            "root-file" => {
                let state = RootFileState::load(&self.state_dir)?;
                let obs = state.observation(self.open.prompt);
                self.root_file = Some(state);
                Ok(obs)
            }
            _ => {
                let config = config(&self.open.profile)?;
                let session = match &self.local {
                    // A resume retains the target stored at spawn (decision D-LOCAL-6).
                    Some(local) => {
                        self.session = None;
                        Session::resume_local(config, local, &self.state_dir)
                    }
                    None => {
                        let source = match self.session.take() {
                            Some(s) => s.into_source(),
                            None => self.source.take().unwrap_or(Source::Nothing),
                        };
                        Session::resume(config, source, &self.state_dir)
                    }
                }
                .map_err(|e| e.to_string())?;
                let obs = Observation { startup: Some(wire_files(session.startup())), ..Observation::default() };
                self.session = Some(session);
                Ok(obs)
            }
        }
    }

    fn mount_section(&self) -> Result<Section, String> {
        if self.open.platform != CasePlatform::Posix {
            return Err("the section profile runs on host (posix) trees only".into());
        }
        Section::new(section_options(self.open.options.as_deref()), Path::new(&self.open.root))
    }

    fn not_in_profile(&self, what: &str) -> String {
        format!("{what} is not part of the {} profile", self.open.profile)
    }

    /// The in-memory tree of a windows or managed case, for edits.
    fn mem(&mut self) -> Result<&mut MemSource, String> {
        let source = match (&mut self.session, &mut self.source) {
            (Some(s), _) => s.source_mut(),
            (None, Some(src)) => src,
            (None, None) => return Err("the case has no file source".into()),
        };
        match source {
            Source::Mem(m) => Ok(m),
            _ => Err("edit_tree applies to in-memory trees only (the harness edits host trees on disk)".into()),
        }
    }

    fn session(&mut self) -> Result<&mut Session, String> {
        self.session.as_mut().ok_or_else(|| "the session has not started (the first step must be start)".into())
    }

    fn start(&mut self) -> Result<Observation, String> {
        let mut obs = Observation::default();
        match self.open.profile.as_str() {
            "section" => self.section = Some(self.mount_section()?),
            "root-file" => {
                let source = self.source.as_ref().ok_or("the session has already started")?;
                // A redefinition in .nodwyn/init.scm replaces the section (D-RF-REDEF-1).
                let out = reference::prompt::section(source, &config("root-file")?);
                let startup = out
                    .file
                    .map(|(path, content, sha256)| WireFile {
                        path: path.to_string(),
                        kind: "root".into(),
                        sha256,
                        content,
                    })
                    .into_iter()
                    .collect();
                let state = RootFileState { startup, section: out.section };
                state.save(&self.state_dir)?;
                obs = state.observation(self.open.prompt);
                obs.diagnostics = wire_diagnostics(out.diagnostics);
                self.root_file = Some(state);
            }
            _ => {
                if self.session.is_some() {
                    return Err("the session has already started".into());
                }
                let config = config(&self.open.profile)?;
                let started = match &self.local {
                    Some(local) => Session::start_local(config, local, &self.state_dir),
                    None => {
                        let source = self.source.take().ok_or("the session has already started")?;
                        Session::start(config, source, &self.state_dir)
                    }
                };
                let (session, startup) = match started {
                    Ok(s) => s,
                    // A failed startup is an observation, not an error of the case: there is no
                    // session and no prefix (seed 000: "A missing Sandbox owner or
                    // LOCAL_EXECUTION_LOST fails startup").
                    Err(SessionError::Local(e)) => {
                        obs.failed = Some(e.to_string());
                        return Ok(obs);
                    }
                    Err(e) => return Err(e.to_string()),
                };
                obs.startup = Some(wire_files(startup.files));
                obs.diagnostics = wire_diagnostics(startup.diagnostics);
                self.session = Some(session);
            }
        }
        Ok(obs)
    }

    /// Runs one step.
    pub fn step(&mut self, op: &StepOp) -> Result<Observation, String> {
        let mut obs = Observation::default();
        match op {
            StepOp::Start => return self.start(),
            StepOp::Touch(call) => match self.open.profile.as_str() {
                "section" => {
                    return Err("the section profile receives tool calls with next_request, not as touch".into())
                }
                // Read once at session start: a touch changes nothing.
                "root-file" => {}
                _ => self
                    .session()?
                    .observe(&ToolResult { tool: call.tool.clone(), file_access: call.file_access.clone() }),
            },
            StepOp::NextRequest { scope, calls } => match self.open.profile.as_str() {
                "section" => {
                    let section = self.section.as_mut().ok_or("the section is not mounted (start first)")?;
                    let calls: Vec<section::Call> = calls.iter().map(committed).collect();
                    let (round, diags) = section.round(scope.as_deref(), &calls);
                    obs.section = Some(WireSection {
                        text: round.text,
                        rewritten: round.rewritten,
                        files: round.files,
                        omitted: round.omitted,
                    });
                    obs.diagnostics = wire_diagnostics(diags);
                }
                "root-file" => {}
                _ => {
                    let out = self.session()?.next_request();
                    obs.activation = out.activation.map(wire_activation);
                    obs.diagnostics = wire_diagnostics(out.diagnostics);
                    obs.blocked = out.blocked;
                    obs.escaped = out.escaped;
                }
            },
            StepOp::Compact
            | StepOp::ColdClear
            | StepOp::FailNextAppend { .. }
            | StepOp::RejectNextResolution
            | StepOp::SelectProject { .. }
            | StepOp::Fork { .. }
                if self.open.profile != "modules" =>
            {
                return Err(self.not_in_profile("this step"));
            }
            StepOp::Compact => self.session()?.compact().map_err(|e| format!("compaction append failed: {e}"))?,
            // Instructions are a protected kind: cold clearing leaves them in the active context.
            StepOp::ColdClear => {
                self.session()?;
            }
            StepOp::FailNextAppend { durable } => self.session()?.fail_next_append(if *durable {
                AppendFailure::Durable
            } else {
                AppendFailure::Transient
            }),
            StepOp::RejectNextResolution => self.session()?.reject_next_resolution(),
            // The recorded work_dir changes; the running session keeps the root it was placed at
            // (decision D-LOCAL-6).
            StepOp::SelectProject { work_dir } => match &mut self.local {
                Some(local) => local.select_project(work_dir.clone()),
                None => return Err("select_project applies to local CLI targets only".into()),
            },
            StepOp::Fork { state_dir } => {
                let fork = self.session()?.fork(&PathBuf::from(state_dir)).map_err(|e| e.to_string())?;
                self.state_dir = PathBuf::from(state_dir);
                // The fork's retained prefix is observable, as a resume's is (D-LIFE-2).
                obs.startup = Some(wire_files(fork.startup()));
                self.session = Some(fork);
            }
            StepOp::EditTree(edit) => self.edit(edit)?,
        }
        Ok(obs)
    }

    fn edit(&mut self, edit: &TreeEdit) -> Result<(), String> {
        if let Some(local) = &mut self.local {
            let platform = local.platform();
            edit_tree(local.tree_mut(), platform, edit)?;
            // The session sees the computer's files below the root it was placed at.
            if let Some(session) = &mut self.session {
                if let Some(root) = session.target().map(str::to_string) {
                    *session.source_mut() = local.source_at(&root);
                }
            }
            return Ok(());
        }
        let mem = self.mem()?;
        let platform = mem.platform();
        match edit {
            TreeEdit::Environment { state } => mem.set_environment(environment(state)),
            other => edit_tree(mem.tree_mut(), platform, other)?,
        }
        Ok(())
    }
}

/// An edit of an in-memory tree's files (a local target has no environment).
fn edit_tree(tree: &mut MemTree, platform: Platform, edit: &TreeEdit) -> Result<(), String> {
    match edit {
        TreeEdit::Write { path, hex } => tree.insert(&rel(platform, path)?, Node::File(from_hex(hex)?)),
        TreeEdit::Delete { path } => {
            tree.remove(&rel(platform, path)?);
        }
        TreeEdit::Rename { from, to } => {
            let from = rel(platform, from)?;
            let node = tree.get(&from).cloned().ok_or_else(|| format!("rename: '{from}' does not exist"))?;
            if node == Node::Dir {
                return Err(format!("rename: '{from}' is a directory (only files are renamed)"));
            }
            tree.remove(&from);
            tree.insert(&rel(platform, to)?, node);
        }
        TreeEdit::Environment { .. } => return Err("a local CLI target has no environment".into()),
    }
    Ok(())
}
