//! The session as data: a case is opened, then driven by [`StepOp`]s, and every step answers an
//! [`Observation`]. The harness drives the reference in-process through this module, and
//! `reference-adapter` puts the same module behind the adapter protocol, so both paths run one
//! piece of code and the suite through the adapter must give exactly the in-process results.
//!
//! The wire shapes here are the protocol's (harness/PROTOCOL.md); field names are snake_case.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::diag::Diagnostic;
use crate::journal::StartupFile;
use crate::placement::{place_root, Placement};
use crate::relpath::{Platform, RelPath};
use crate::section::{Section, SectionOptions, SectionRound};
use crate::session::{Activation, Session, ToolResult};
use crate::source::{Environment, HostSource, MemSource, MemTree, Node, Source};

/// The platform of a case: whose files, under whose path rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CasePlatform {
    /// The daemon's own POSIX filesystem: a real directory the harness made.
    Posix,
    /// A Windows computer's files, in memory, with `path.win32` rules.
    Windows,
    /// A managed project's guest files, in memory.
    Managed,
}

/// One entry of an in-memory tree on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum WireEntry {
    /// A file; its bytes in lower-case hex.
    File {
        /// Root-relative path (`/` or, on Windows, `\` separated).
        path: String,
        /// The bytes, hex-encoded.
        hex: String,
    },
    /// A directory.
    Dir {
        /// Root-relative path.
        path: String,
    },
    /// A symlink.
    Symlink {
        /// Root-relative path.
        path: String,
        /// The link's target text.
        target: String,
    },
}

/// The state of a managed project's environment on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema, Default)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum WireEnvironment {
    /// Files can be listed and read.
    #[default]
    Running,
    /// Stopped: no files, nothing logged.
    Stopped,
    /// Starting: the same as stopped.
    Pending,
    /// Listing fails with this text.
    Failed(String),
}

/// Root placement inputs on the wire (host cases with the `root_placement` feature).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WirePlacement {
    /// The session's working directory (absolute).
    pub cwd: String,
    /// The registered Projects (absolute).
    #[serde(default)]
    pub projects: Vec<String>,
    /// The bound Project (absolute), if any.
    #[serde(default)]
    pub bound: Option<String>,
}

/// What `open` carries: everything an implementation needs to run one case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenCase {
    /// The profile (`modules`).
    pub profile: String,
    /// Whose files.
    pub platform: CasePlatform,
    /// The root: a real absolute path (posix), a `path.win32` path (windows) or a guest path
    /// (managed).
    pub root: String,
    /// A directory the implementation owns for the case's journal.
    pub state_dir: String,
    /// The in-memory tree (windows and managed only).
    #[serde(default)]
    pub tree: Option<Vec<WireEntry>>,
    /// The managed environment's state.
    #[serde(default)]
    pub environment: Option<WireEnvironment>,
    /// Root placement inputs; without them the root is `root`.
    #[serde(default)]
    pub placement: Option<WirePlacement>,
    /// Resume the session journaled in `state_dir` (after a restart) instead of starting anew.
    #[serde(default)]
    pub resume: bool,
    /// The section profile's options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Box<SectionOptions>>,
}

/// A change to an in-memory tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "edit", rename_all = "snake_case", deny_unknown_fields)]
pub enum TreeEdit {
    /// Creates or replaces a file.
    Write {
        /// Root-relative path.
        path: String,
        /// The bytes, hex-encoded.
        hex: String,
    },
    /// Removes a file or directory.
    Delete {
        /// Root-relative path.
        path: String,
    },
    /// Moves a file.
    Rename {
        /// From.
        from: String,
        /// To.
        to: String,
    },
    /// Sets the managed environment's state.
    Environment {
        /// The new state.
        state: WireEnvironment,
    },
}

/// One step of a session's life.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum StepOp {
    /// Spawn: read the startup prefix.
    Start,
    /// A settled tool result.
    Touch {
        /// The tool's name.
        tool: String,
        /// The path the call named (for the record; never a trigger by itself).
        path: String,
        /// `details.fileAccess.path`, present only on a successful, authorized file access.
        #[serde(default)]
        file_access: Option<String>,
        /// Whether the call failed (section profile: a failed call contributes nothing).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        failed: bool,
        /// The call's arguments (section profile: `filePathFromTouch` reads `file_path`, `path`
        /// or `filePath`; a `skillId` makes the path no workspace path).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(with = "Option<serde_json::Value>")]
        args: Option<serde_json::Map<String, serde_json::Value>>,
        /// The conversation scope (section profile); absent: the unscoped bucket.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scope: Option<String>,
    },
    /// The next model request: drain the trigger queue (modules), re-resolve the section of the
    /// conversation `scope` (section).
    NextRequest {
        /// The conversation scope (section profile); absent: the unscoped bucket.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scope: Option<String>,
    },
    /// Compaction of the history.
    Compact,
    /// Cold clearing of per-turn context (instructions are protected from it).
    ColdClear,
    /// Makes the next journal append fail.
    FailNextAppend,
    /// Forks the session into a new state directory and continues as the fork; observes the
    /// fork's startup prefix.
    Fork {
        /// The fork's state directory.
        state_dir: String,
    },
    /// An edit of an in-memory tree (host trees are edited by the harness on disk). On the wire its
    /// fields sit beside `op`: `{"op":"edit_tree","edit":"write","path":..,"hex":..}`. A newtype
    /// variant, not `flatten`, because serde's `flatten` cannot be combined with
    /// `deny_unknown_fields`.
    EditTree(TreeEdit),
}

/// What one step observed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Observation {
    /// The startup prefix: after `start`, and after a resume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Vec<serde_json::Value>>")]
    pub startup: Option<Vec<StartupFile>>,
    /// The record `next_request` appended, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Value>")]
    pub activation: Option<Activation>,
    /// The section after a model round (section profile), or at start (root-file profile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section: Option<SectionRound>,
    /// Diagnostics of the step.
    #[serde(default)]
    #[schemars(with = "Vec<serde_json::Value>")]
    pub diagnostics: Vec<Diagnostic>,
}

/// Every feature in spec-cases/features.yaml that the reference implements.
pub const FEATURES: &[&str] = &[
    "frontmatter",
    "globs",
    "ordering",
    "nested",
    "symlinks",
    "oversize",
    "encoding",
    "dedupe",
    "compaction",
    "restart",
    "fork",
    "append_failure",
    "windows_paths",
    "managed",
    "triggers",
    "root_file",
    "root_placement",
    "rendering",
    "hostile",
    "section_discovery",
    "section_subtrees",
    "section_scopes",
    "section_budget",
    "section_render",
    "rootfile_read",
    "rootfile_denylist",
    "rootfile_redaction",
    "rootfile_cut",
    "rootfile_render",
];

/// What the reference says of itself in `hello`. The harness's in-process `reference_hello()` and
/// `reference-adapter` both answer with it, so the two can never disagree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HelloFields {
    /// `reference`.
    pub name: &'static str,
    /// The crate version.
    pub version: &'static str,
    /// `rust`.
    pub language: &'static str,
    /// The profiles the reference supports.
    pub profiles: &'static [&'static str],
    /// [`FEATURES`].
    pub features: &'static [&'static str],
}

/// The reference's `hello` data.
pub fn hello_fields() -> HelloFields {
    HelloFields {
        name: "reference",
        version: env!("CARGO_PKG_VERSION"),
        language: "rust",
        profiles: PROFILES,
        features: FEATURES,
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
    state_dir: PathBuf,
}

/// The root-file profile's session: the prefix read at start, kept in the state directory so a
/// resume retains it (seed 003: "It is read once, when the session starts").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct RootFileState {
    startup: Vec<StartupFile>,
    section: String,
}

const ROOT_FILE_STATE: &str = "root-file.json";

impl RootFileState {
    fn observation(&self) -> Observation {
        let round = SectionRound {
            text: self.section.clone(),
            rewritten: !self.section.is_empty(),
            files: self.startup.iter().map(|f| f.path.clone()).collect(),
            omitted: Vec::new(),
        };
        Observation { startup: Some(self.startup.clone()), section: Some(round), ..Observation::default() }
    }

    fn load(state_dir: &std::path::Path) -> Result<RootFileState, String> {
        let text = std::fs::read(state_dir.join(ROOT_FILE_STATE))
            .map_err(|e| format!("no root-file session to resume: {e}"))?;
        serde_json::from_slice(&text).map_err(|e| format!("{ROOT_FILE_STATE}: {e}"))
    }

    fn save(&self, state_dir: &std::path::Path) -> Result<(), String> {
        std::fs::create_dir_all(state_dir).map_err(|e| e.to_string())?;
        let text = serde_json::to_vec(self).map_err(|e| e.to_string())?;
        std::fs::write(state_dir.join(ROOT_FILE_STATE), text).map_err(|e| e.to_string())
    }
}

/// Decodes lower-case or upper-case hex.
pub fn from_hex(s: &str) -> Result<Vec<u8>, String> {
    if !s.len().is_multiple_of(2) {
        return Err(format!("hex of odd length {}", s.len()));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| {
            s.get(i..i + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                .ok_or_else(|| format!("'{}' at offset {i} is not hex", s.get(i..i + 2).unwrap_or("")))
        })
        .collect()
}

/// Encodes as lower-case hex.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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

/// The profiles the driver runs.
pub const PROFILES: &[&str] = &["modules", "section", "root-file"];

fn config(profile: &str) -> Result<Config, String> {
    match profile {
        "modules" | "section" => Ok(Config::modules()),
        "root-file" => Ok(Config::root_file()),
        other => Err(format!("profile '{other}' is not supported")),
    }
}

fn build_source(open: &OpenCase) -> Result<Source, String> {
    match open.platform {
        CasePlatform::Posix => {
            let root = match &open.placement {
                None => Some(PathBuf::from(&open.root)),
                Some(p) => place_root(&Placement {
                    cwd: PathBuf::from(&p.cwd),
                    projects: p.projects.iter().map(PathBuf::from).collect(),
                    bound: p.bound.as_ref().map(PathBuf::from),
                }),
            };
            match root {
                None => Ok(Source::Nothing),
                Some(root) => HostSource::new(&root)
                    .map(Source::Host)
                    .map_err(|e| format!("root '{}' cannot be resolved: {e}", root.display())),
            }
        }
        CasePlatform::Windows | CasePlatform::Managed => {
            let platform = if open.platform == CasePlatform::Windows { Platform::Windows } else { Platform::Posix };
            let mut tree = MemTree::new(platform);
            for entry in open.tree.iter().flatten() {
                match entry {
                    WireEntry::File { path, hex } => tree.insert(&rel(platform, path)?, Node::File(from_hex(hex)?)),
                    WireEntry::Dir { path } => tree.insert(&rel(platform, path)?, Node::Dir),
                    WireEntry::Symlink { path, target } => {
                        tree.insert(&rel(platform, path)?, Node::Symlink(target.clone()))
                    }
                }
            }
            Ok(Source::Mem(if platform == Platform::Windows {
                MemSource::windows(open.root.clone(), tree)
            } else {
                let env = open.environment.as_ref().map(environment).unwrap_or_default();
                MemSource::managed(open.root.clone(), tree, env)
            }))
        }
    }
}

impl Driver {
    /// Opens a case: builds the file source, and resumes the journaled session when asked.
    pub fn open(open: OpenCase) -> Result<(Driver, Observation), String> {
        config(&open.profile)?;
        let source = build_source(&open)?;
        let state_dir = PathBuf::from(&open.state_dir);
        let mut driver =
            Driver { open, source: Some(source), session: None, section: None, root_file: None, state_dir };
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
                let obs = state.observation();
                self.root_file = Some(state);
                Ok(obs)
            }
            _ => {
                let source = match self.session.take() {
                    Some(s) => s.into_source(),
                    None => self.source.take().unwrap_or(Source::Nothing),
                };
                let session =
                    Session::resume(config(&self.open.profile)?, source, &self.state_dir).map_err(|e| e.to_string())?;
                let obs = Observation { startup: Some(session.startup()), ..Observation::default() };
                self.session = Some(session);
                Ok(obs)
            }
        }
    }

    fn mount_section(&self) -> Result<Section, String> {
        if self.open.platform != CasePlatform::Posix {
            return Err("the section profile runs on host (posix) trees only".into());
        }
        Section::new(self.open.options.as_deref().cloned().unwrap_or_default(), std::path::Path::new(&self.open.root))
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

    /// Runs one step.
    pub fn step(&mut self, op: &StepOp) -> Result<Observation, String> {
        let mut obs = Observation::default();
        match op {
            StepOp::Start => match self.open.profile.as_str() {
                "section" => self.section = Some(self.mount_section()?),
                "root-file" => {
                    let source = self.source.as_ref().ok_or("the session has already started")?;
                    let out = crate::rootfile::root_file(source, &config("root-file")?);
                    let startup = out
                        .file
                        .map(|(path, content, sha256)| StartupFile {
                            path: path.to_string(),
                            kind: "root".into(),
                            sha256,
                            content,
                        })
                        .into_iter()
                        .collect();
                    let state = RootFileState { startup, section: out.section };
                    state.save(&self.state_dir)?;
                    obs = state.observation();
                    obs.diagnostics = out.diagnostics;
                    self.root_file = Some(state);
                }
                _ => {
                    let source = self.source.take().ok_or("the session has already started")?;
                    let (session, startup) = Session::start(config(&self.open.profile)?, source, &self.state_dir)
                        .map_err(|e| e.to_string())?;
                    obs.startup = Some(startup.files);
                    obs.diagnostics = startup.diagnostics;
                    self.session = Some(session);
                }
            },
            StepOp::Touch { tool, file_access, failed, args, scope, .. } => match self.open.profile.as_str() {
                "section" => {
                    let section = self.section.as_mut().ok_or("the section is not mounted (start first)")?;
                    obs.diagnostics = section.observe(scope.as_deref(), *failed, &args.clone().unwrap_or_default());
                }
                // Read once at session start: a touch changes nothing.
                "root-file" => {}
                _ => self.session()?.observe(&ToolResult { tool: tool.clone(), file_access: file_access.clone() }),
            },
            StepOp::NextRequest { scope } => match self.open.profile.as_str() {
                "section" => {
                    let section = self.section.as_mut().ok_or("the section is not mounted (start first)")?;
                    let (round, diags) = section.resolve(scope.as_deref());
                    obs.section = Some(round);
                    obs.diagnostics = diags;
                }
                "root-file" => {}
                _ => {
                    let out = self.session()?.next_request();
                    obs.activation = out.activation;
                    obs.diagnostics = out.diagnostics;
                }
            },
            StepOp::Compact | StepOp::ColdClear | StepOp::FailNextAppend | StepOp::Fork { .. }
                if self.open.profile != "modules" =>
            {
                return Err(self.not_in_profile("this step"));
            }
            StepOp::Compact => self.session()?.compact().map_err(|e| format!("compaction append failed: {e}"))?,
            // Instructions are a protected kind: cold clearing leaves them in the active context.
            StepOp::ColdClear => {
                self.session()?;
            }
            StepOp::FailNextAppend => self.session()?.fail_next_append(),
            StepOp::Fork { state_dir } => {
                let fork = self.session()?.fork(&PathBuf::from(state_dir)).map_err(|e| e.to_string())?;
                self.state_dir = PathBuf::from(state_dir);
                // The fork's retained prefix is observable, as a resume's is (D-LIFE-2).
                obs.startup = Some(fork.startup());
                self.session = Some(fork);
            }
            StepOp::EditTree(edit) => self.edit(edit)?,
        }
        Ok(obs)
    }

    fn edit(&mut self, edit: &TreeEdit) -> Result<(), String> {
        let mem = self.mem()?;
        let platform = mem.platform();
        match edit {
            TreeEdit::Write { path, hex } => mem.tree_mut().insert(&rel(platform, path)?, Node::File(from_hex(hex)?)),
            TreeEdit::Delete { path } => {
                mem.tree_mut().remove(&rel(platform, path)?);
            }
            TreeEdit::Rename { from, to } => {
                let from = rel(platform, from)?;
                let node =
                    mem.tree_mut().get(&from).cloned().ok_or_else(|| format!("rename: '{from}' does not exist"))?;
                if node == Node::Dir {
                    return Err(format!("rename: '{from}' is a directory (only files are renamed)"));
                }
                mem.tree_mut().remove(&from);
                mem.tree_mut().insert(&rel(platform, to)?, node);
            }
            TreeEdit::Environment { state } => mem.set_environment(environment(state)),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_tree_steps_read_back_from_their_wire_form() {
        let op = StepOp::EditTree(TreeEdit::Write { path: "a.md".into(), hex: "61".into() });
        let json = serde_json::to_string(&op).unwrap();
        assert_eq!(json, r#"{"op":"edit_tree","edit":"write","path":"a.md","hex":"61"}"#);
        assert_eq!(serde_json::from_str::<StepOp>(&json).unwrap(), op);
    }

    #[test]
    fn unknown_step_fields_are_refused() {
        // serde ignores extra fields beside the tag of a unit variant (`next_request`); the
        // variants that carry fields refuse unknown ones.
        assert!(serde_json::from_str::<StepOp>(r#"{"op":"touch","tool":"read","path":"a","x":1}"#).is_err());
        assert!(serde_json::from_str::<StepOp>(r#"{"op":"edit_tree","edit":"delete","path":"a","x":1}"#).is_err());
    }
}
