//! The adapter protocol's data (harness/PROTOCOL.md): what `open` carries, the steps, the
//! observations, `hello`, and the envelopes of both modes. harness/protocol.schema.json is
//! generated from these types. They belong to the harness, not to the reference: the reference is
//! a library that never knows it is under test, and the in-process driver translates between the
//! two (it uses this file, so this file does not link to it).
//!
//! Field names are snake_case. Every struct refuses unknown fields, so that a misspelt field in an
//! adapter's reply is a CRASH with a message rather than a silently empty observation.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The protocol version the harness speaks; `hello` and one-shot input carry it.
pub const PROTOCOL_VERSION: &str = "2";

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

/// Root placement inputs on the wire (host cases needing the `root_placement` capability).
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

/// What an account is (capability `eligibility`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WireRole {
    /// An administrator: its own chat and its delegated sub-agents get the Project scope.
    Administrator,
    /// An ordinary user.
    User,
    /// A chatbot, with a bound Project and a live policy.
    Chatbot,
}

/// An account of a session's world.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WireAccount {
    /// What it is.
    pub role: WireRole,
    /// A chatbot's bound Project (absolute on the wire; relative to the project directory in a
    /// case file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<String>,
    /// The account's live policy: the Projects it may access. Absent: every Project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Vec<String>>,
}

/// What a conversation row is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WireKind {
    /// The account's own conversation (`isOwnedUserSession`).
    OwnerChat,
    /// A room several people share.
    SharedRoom,
    /// A shared conversation on a chat platform.
    PlatformConversation,
    /// A shared channel.
    SharedChannel,
    /// A cron execution's conversation; its id starts with `brain-ch-cron-`.
    CronExecution,
    /// A delegated session, with a parent; a fork when `fork` is set.
    SubAgent,
}

/// One durable conversation row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WireConversation {
    /// The session id.
    pub id: String,
    /// The owning account's name (a key of `accounts`).
    pub account: String,
    /// What it is.
    pub kind: WireKind,
    /// `parent_session_id` (sub-agents only). It may name no row: that is a missing row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// A fork of its parent rather than a fresh sub-agent. The default is false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fork: bool,
    /// The row's turn was scheduled (delivered by the scheduler). The default is false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub scheduled: bool,
    /// The captured admin bit. The default is false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub admin: bool,
    /// The captured owner bit. The default is false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub owner: bool,
    /// The recorded working directory. Absent: the placement's `cwd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The session's own (scoped) policy: the Projects it may access. Absent: no restriction of
    /// its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Vec<String>>,
}

/// Who a spawned session belongs to (capability `eligibility`): the accounts, the durable
/// conversation rows with their parent edges, and which row is spawned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WireSession {
    /// Accounts by name.
    pub accounts: BTreeMap<String, WireAccount>,
    /// The rows, in any order.
    pub conversations: Vec<WireConversation>,
    /// The id of the row being spawned.
    pub spawn: String,
}

/// A local CLI target on the wire (seed 000, "Local CLI instruction sources"): the directories
/// that place the conversation's root on the computer, absolute in the computer's own path form,
/// and the state of the target. The computer's files are `OpenCase.tree`, relative to
/// `OpenCase.root` (the base of the tree, which is not itself the session's root).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WireLocal {
    /// A child's placed directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placed_dir: Option<String>,
    /// The recorded work_dir (a paired CLI's start directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_dir: Option<String>,
    /// The computer's default directory.
    pub default_dir: String,
    /// Whether a Sandbox owner holds the target.
    pub owner: bool,
    /// Whether the bound connection is lost around the startup reads (`LOCAL_EXECUTION_LOST`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub connection_lost: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// `perDirectory` of the section profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PerDirectory {
    /// The first present candidate of a folder.
    First,
    /// Every present candidate.
    All,
}

/// The section profile's options (seed 002, "Options"), exactly as the case sets them: an option
/// the case does not set is absent, and the implementation uses its own default for it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SectionOptions {
    /// The session working directory (absolute on the wire; relative to the project directory in a
    /// case file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// An absolute path read before any project file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_file: Option<String>,
    /// Entries that stop the upward walk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_root_markers: Option<Vec<String>>,
    /// Same-directory candidates, in precedence order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_names: Option<Vec<String>>,
    /// `first` or `all` present candidates per directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_directory: Option<PerDirectory>,
    /// Total UTF-8 ceiling of the rendered section.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    /// Per-file UTF-8 ceiling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_file_bytes: Option<u64>,
    /// Scan subtrees a tool call reaches into.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested: Option<bool>,
    /// Most subtree directories kept in scope at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_nested_dirs: Option<usize>,
    /// Conversations whose subtrees this instance remembers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tracked_scopes: Option<usize>,
    /// The paragraph placed above the files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intro: Option<String>,
    /// Written when every file leaves scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retraction_text: Option<String>,
}

/// Which system prompt a root-file case observes (D-RF-PROMPT-1): seed 003 has three, the two full
/// ones of "both system prompts" and lean-system-prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PromptKind {
    /// The full system prompts: the implementation reports each of them.
    Full,
    /// lean-system-prompt (capability `lean_prompt`).
    Lean,
}

/// A part of a system prompt, observed by its place and presence only: the texts of the parts
/// other than the section are the implementation's own (the section's text is `section.text`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PromptPart {
    /// The working rules, the same for every repository.
    WorkingRules,
    /// The git rule.
    GitRule,
    /// The workspace's folders.
    WorkspaceFolders,
    /// (project-instructions-section): present exactly when its text is not empty.
    ProjectInstructions,
    /// The project notes, the agent's own.
    ProjectNotes,
    /// The lean prompt's fixed text, up to its last fixed sentence.
    LeanFixed,
}

/// One system prompt as observed: which one, and its parts in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WirePrompt {
    /// Which prompt.
    pub kind: PromptKind,
    /// Its parts, in order.
    pub parts: Vec<PromptPart>,
}

/// What `open` carries: everything an implementation needs to run one case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenCase {
    /// The profile: `modules`, `section` or `root-file`.
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
    /// Who the session belongs to (capability `eligibility`); absent: the session is an
    /// administrator's own chat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<Box<WireSession>>,
    /// A local CLI target: `tree` holds the computer's files below `root` (on a POSIX computer
    /// too), and the session's root is placed from these directories. On a POSIX computer the
    /// daemon's own disk holds other files at the same paths, which must never be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<Box<WireLocal>>,
    /// Resume the session journaled in `state_dir` (after a restart) instead of starting anew.
    #[serde(default)]
    pub resume: bool,
    /// The section profile's options that the case sets; absent when it sets none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Box<SectionOptions>>,
    /// The system prompt to observe (root-file profile); absent: none is observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<PromptKind>,
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

/// How a tool call settled, as the case states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// It succeeded.
    Ok,
    /// It errored.
    Error,
    /// It was refused (not authorized).
    Refused,
    /// A read past the end of the file.
    PastEof,
}

impl Outcome {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::Refused => "refused",
            Outcome::PastEof => "past_eof",
        }
    }
}

/// A settled tool call, exactly as the case states it: the harness derives nothing (seed 000,
/// "Triggers and timing": core "triggers on that field and never on a tool name").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// The tool's name.
    pub tool: String,
    /// The path the call named (for the record; never a trigger by itself).
    pub path: String,
    /// How the call settled.
    pub outcome: Outcome,
    /// `details.fileAccess.path`: present exactly when the case says the result carries the field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_access: Option<String>,
    /// The call's arguments (section profile: `filePathFromTouch` reads `file_path`, `path` or
    /// `filePath`; a `skillId` makes the path no workspace path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Value>")]
    pub args: Option<serde_json::Map<String, serde_json::Value>>,
}

/// One step of a session's life.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum StepOp {
    /// Spawn: read the startup prefix (modules, root-file), mount the section (section).
    Start,
    /// A settled tool result (modules and root-file profiles; the section profile receives its
    /// calls with the next round instead).
    Touch(ToolCall),
    /// The next model request: drain the trigger queue (modules); resolve the section of the
    /// conversation `scope` with the tool calls committed in it since its last round (section).
    NextRequest {
        /// The conversation scope (section profile); absent: the unscoped bucket.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scope: Option<String>,
        /// The tool calls committed in this scope since its last round (section profile).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        calls: Vec<ToolCall>,
    },
    /// Compaction of the history.
    Compact,
    /// Cold clearing of per-turn context (instructions are protected from it).
    ColdClear,
    /// Makes the next journal append fail; `durable` makes it a durable journal failure, which
    /// trips the persistence latch.
    FailNextAppend {
        /// A durable journal failure (the default is a transient one, which only requeues).
        #[serde(default, skip_serializing_if = "is_false")]
        durable: bool,
    },
    /// Makes the resolver reject the next batch it resolves.
    RejectNextResolution,
    /// A later Project selection records another work_dir for the local target (absolute).
    SelectProject {
        /// The newly recorded work_dir.
        work_dir: String,
    },
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

impl StepOp {
    /// The op's wire name.
    pub fn name(&self) -> &'static str {
        match self {
            StepOp::Start => "start",
            StepOp::Touch(_) => "touch",
            StepOp::NextRequest { .. } => "next_request",
            StepOp::Compact => "compact",
            StepOp::ColdClear => "cold_clear",
            StepOp::FailNextAppend { .. } => "fail_next_append",
            StepOp::RejectNextResolution => "reject_next_resolution",
            StepOp::SelectProject { .. } => "select_project",
            StepOp::Fork { .. } => "fork",
            StepOp::EditTree(_) => "edit_tree",
        }
    }
}

/// A file of the startup prefix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WireFile {
    /// The /-form root-relative path.
    pub path: String,
    /// `root` or `module`.
    pub kind: String,
    /// SHA-256 of `content`, lower-case hex.
    pub sha256: String,
    /// The sent content.
    pub content: String,
}

/// One module of an activation record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WireModule {
    /// The /-form root-relative path.
    pub path: String,
    /// SHA-256 of `content`, lower-case hex.
    pub sha256: String,
    /// Marked `supersedes="earlier version"`.
    pub supersedes: bool,
    /// The sent content.
    pub content: String,
}

/// The one record a model request appended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WireActivation {
    /// The modules, in the order they were sent. An appended record with no module is reported
    /// as such (`[]`): it is a different observation from no record at all.
    pub modules: Vec<WireModule>,
    /// The appended text.
    #[serde(default)]
    pub rendered: String,
}

/// What one model round observed of the section (section profile), or the section read at start
/// (root-file profile).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WireSection {
    /// The section's text ("" when it has never had a file).
    pub text: String,
    /// Whether the node on the model surface was rewritten this round.
    pub rewritten: bool,
    /// The files rendered, in order, as their headers name them.
    #[serde(default)]
    pub files: Vec<String>,
    /// The files that did not fit, as the closing line names them, in order.
    #[serde(default)]
    pub omitted: Vec<String>,
}

/// One diagnostic. The code is the implementation's own string: the seed's `brain.*` codes, the
/// suite's names, or anything else (an unknown code is a comparable value, never an error).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WireDiagnostic {
    /// The code.
    pub code: String,
    /// The /-form, root-relative path of the file ("" for the root directory itself).
    #[serde(default)]
    pub path: String,
    /// The 1-based line in the file, where there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// The message (never compared).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// What one step observed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Observation {
    /// The startup prefix: after `start`, after a resume and after a fork.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup: Option<Vec<WireFile>>,
    /// The record `next_request` appended; absent when it appended none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activation: Option<WireActivation>,
    /// The section after a model round (section profile), or at start (root-file profile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section: Option<WireSection>,
    /// The system prompts of the kind `open.prompt` names, each with its parts in order (root-file
    /// profile, after `start` and a resume): both full prompts, or the lean one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<Vec<WirePrompt>>,
    /// Diagnostics of the step.
    #[serde(default)]
    pub diagnostics: Vec<WireDiagnostic>,
    /// `next_request`: the persistence latch held the provider request back.
    #[serde(default, skip_serializing_if = "is_false")]
    pub blocked: bool,
    /// `next_request`: the error with which the resolver rejected the batch, which escaped the
    /// instruction hook (its text is never compared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escaped: Option<String>,
    /// `start`: why the startup failed (its text is never compared); there is no session then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

/// Texts the seeds leave to the implementation, as the implementation's defaults. A case that
/// compares such a text uses the case's own option where it sets one, else this default; where
/// neither exists the text is not compared.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    /// The section profile's default intro (seed 002: "see DEFAULT_INTRO").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intro: Option<String>,
    /// The section profile's default retraction text (seed 002: "see DEFAULT_RETRACTION").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retraction_text: Option<String>,
}

/// What an implementation says of itself (`hello`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// Its language.
    pub language: String,
    /// The profiles it implements.
    pub profiles: Vec<String>,
    /// The capabilities it has (spec-cases/vocabulary.yaml); a case needing another is
    /// UNSUPPORTED. Rules (confinement, the cap, ordering, ...) are not capabilities and cannot be
    /// declared away.
    pub capabilities: Vec<String>,
    /// Its defaults for the texts the seeds leave to it.
    #[serde(default, skip_serializing_if = "is_default")]
    pub defaults: Defaults,
    /// Its diagnostic codes for the suite's codes (suite code → its own). A suite code it maps is
    /// compared as the mapped string; an unmapped one only by path.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub codes: BTreeMap<String, String>,
}

fn is_default(d: &Defaults) -> bool {
    *d == Defaults::default()
}

/// A request of the persistent mode; the reply echoes its `seq`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// The first request to every process: the reply carries `hello`.
    Hello {
        /// The request's number, increasing over the harness's run.
        seq: u64,
        /// The protocol version, `"2"`.
        protocol: String,
    },
    /// Opens a case: the reply carries the open's `observation` (empty unless `open.resume`).
    Open {
        /// The request's number.
        seq: u64,
        /// The case id, for the implementation's logs.
        case: String,
        /// Everything needed to run the case.
        open: OpenCase,
    },
    /// Runs one step of the open case: the reply carries its `observation`.
    Step {
        /// The request's number.
        seq: u64,
        /// The step.
        step: StepOp,
    },
    /// Closes the open case; the process stays up for the next one.
    Close {
        /// The request's number.
        seq: u64,
    },
}

/// A reply of the persistent mode.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = seq_is_required)]
pub struct Reply {
    /// The request's `seq`; null only when the request could not be read at all.
    pub seq: Option<u64>,
    /// Whether the request succeeded. When false, `error` says why and the case is ERROR.
    pub ok: bool,
    /// The answer to `hello`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hello: Option<Hello>,
    /// The answer to `open` and `step`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observation: Option<Observation>,
    /// Why the request failed (with `ok: false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// With `ok: false` to an `open`: the option (as the case names it) whose value the
    /// implementation does not take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_option: Option<String>,
}

/// Marks `seq` required in [`Reply`]'s schema: every reply has one, if only null, but an
/// `Option` field alone would be optional.
fn seq_is_required(schema: &mut schemars::Schema) {
    if let Some(serde_json::Value::Array(required)) = schema.get_mut("required") {
        required.insert(0, "seq".into());
    }
}

/// One step of a one-shot case: a [`StepOp`], or a restart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum ScriptStep {
    /// The session is dropped and resumed from the state directory; observes the startup.
    Restart,
    /// Any other step.
    #[serde(untagged)]
    Step(StepOp),
}

/// The one-shot mode's input: a whole case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OneShotRequest {
    /// The protocol version, `"2"`.
    pub protocol: String,
    /// The case id, for the implementation's logs.
    pub case: String,
    /// Everything needed to run the case.
    pub open: OpenCase,
    /// The steps, in order.
    pub steps: Vec<ScriptStep>,
}

/// The one-shot mode's output.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OneShotReply {
    /// One observation per step (the open's is not included).
    pub observations: Vec<Observation>,
    /// Why the case failed: the case is ERROR.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Any message of adapter protocol 2: a persistent-mode request or reply, or a one-shot input or
/// output (harness/PROTOCOL.md).
#[derive(schemars::JsonSchema)]
#[schemars(untagged, title = "Adapter protocol 2")]
#[allow(dead_code, clippy::large_enum_variant)] // Only its schema is used; it is never built.
enum Message {
    Request(Request),
    Reply(Reply),
    OneShotRequest(OneShotRequest),
    OneShotReply(OneShotReply),
}

/// The JSON Schema of every protocol message, as checked in at harness/protocol.schema.json.
pub fn protocol_schema() -> serde_json::Value {
    schemars::schema_for!(Message).to_value()
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
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        for nibble in [b >> 4, b & 0xf] {
            out.push(char::from_digit(u32::from(nibble), 16).unwrap_or('0'));
        }
    }
    out
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
    fn touch_steps_carry_the_call_beside_op() {
        let op = StepOp::Touch(ToolCall {
            tool: "read".into(),
            path: "a".into(),
            outcome: Outcome::Ok,
            file_access: None,
            args: None,
        });
        let json = serde_json::to_string(&op).unwrap();
        assert_eq!(json, r#"{"op":"touch","tool":"read","path":"a","outcome":"ok"}"#);
        assert_eq!(serde_json::from_str::<StepOp>(&json).unwrap(), op);
    }

    #[test]
    fn a_transient_failure_keeps_its_old_wire_form() {
        let json = serde_json::to_string(&StepOp::FailNextAppend { durable: false }).unwrap();
        assert_eq!(json, r#"{"op":"fail_next_append"}"#);
        let durable: StepOp = serde_json::from_str(r#"{"op":"fail_next_append","durable":true}"#).unwrap();
        assert_eq!(durable, StepOp::FailNextAppend { durable: true });
    }

    #[test]
    fn unknown_step_fields_are_refused() {
        assert!(
            serde_json::from_str::<StepOp>(r#"{"op":"touch","tool":"read","path":"a","outcome":"ok","x":1}"#).is_err()
        );
        assert!(serde_json::from_str::<StepOp>(r#"{"op":"edit_tree","edit":"delete","path":"a","x":1}"#).is_err());
    }

    #[test]
    fn an_unknown_diagnostic_code_is_a_value() {
        let obs: Observation =
            serde_json::from_str(r#"{"diagnostics":[{"code":"my.own_code","path":"a.md"}]}"#).unwrap();
        assert_eq!(obs.diagnostics[0].code, "my.own_code");
    }

    #[test]
    fn hex_round_trips() {
        assert_eq!(to_hex(&[0, 0xab, 0xff]), "00abff");
        assert_eq!(from_hex("00ABff").unwrap(), vec![0, 0xab, 0xff]);
        assert!(from_hex("0").is_err());
    }
}
