//! The scenario model (spec-cases/FORMAT.md): one YAML file per case, loaded strictly. Unknown
//! keys are errors, and every error names the file, the line and the field.
//!
//! Tree entries and steps are maps whose shape depends on a key, so they have hand-written
//! visitors: that keeps serde_yaml's line numbers on every error, which `untagged` enums lose.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

pub use crate::run::wire::CasePlatform as Platform;
pub use crate::run::wire::WireSession as SessionSpec;
pub use crate::run::wire::{Outcome, PromptKind, PromptPart, SectionOptions, WireEnvironment};
pub use crate::run::wire::{
    WireAccount as AccountSpec, WireConversation as ConversationSpec, WireKind as Kind, WireRole as Role,
};

/// A managed environment's state: `running`, `stopped`, `pending`, or `{failed: "text"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct Environment(#[schemars(with = "serde_json::Value")] pub WireEnvironment);

impl<'de> Deserialize<'de> for Environment {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Environment;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("running, stopped, pending, or {failed: \"text\"}")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Environment, E> {
                match s {
                    "running" => Ok(Environment(WireEnvironment::Running)),
                    "stopped" => Ok(Environment(WireEnvironment::Stopped)),
                    "pending" => Ok(Environment(WireEnvironment::Pending)),
                    other => Err(E::unknown_variant(other, &["running", "stopped", "pending", "failed"])),
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Environment, A::Error> {
                let key: String = map.next_key()?.ok_or_else(|| de::Error::custom("expected {failed: \"text\"}"))?;
                if key != "failed" {
                    return Err(de::Error::unknown_field(&key, &["failed"]));
                }
                let text: String = map.next_value()?;
                if map.next_key::<String>()?.is_some() {
                    return Err(de::Error::custom("environment takes one key, failed"));
                }
                Ok(Environment(WireEnvironment::Failed(text)))
            }
        }
        d.deserialize_any(V)
    }
}

/// One scenario.
#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Stable id: never changed, never reused. The file path is only a display name.
    pub id: String,
    /// What the case shows, as a sentence.
    pub title: String,
    /// The seed sentences (or written decisions) the case tests.
    pub spec: Vec<SpecRef>,
    /// Clause ids from spec-cases/clauses (the coverage gate).
    #[serde(default)]
    pub clauses: Vec<String>,
    /// The profile: `modules`, `section` or `root-file`.
    pub profile: String,
    /// Whose files: posix (a real directory), windows or managed (in memory).
    pub platform: Platform,
    /// The capabilities the case's tree, options and steps use (spec-cases/vocabulary.yaml); an
    /// implementation lacking one reports UNSUPPORTED.
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// The rules the case tests (spec-cases/vocabulary.yaml), for reading and filtering.
    pub rules: Vec<String>,
    /// The basis of every expectation of the case, unless a step says otherwise: `seed`, or the
    /// id of a decision the case cites. Without it, a case citing only seed sentences rests on
    /// the seed and a case citing only decisions on its (first) decision.
    #[serde(default)]
    pub basis: Option<Basis>,
    /// The root of an in-memory tree. Defaults: `C:\work\repo` (windows), `/workspace` (managed).
    #[serde(default)]
    pub root: Option<String>,
    /// The managed environment's state at open. The default is running.
    #[serde(default)]
    pub environment: Option<Environment>,
    /// Root placement inputs (posix), relative to the project directory.
    #[serde(default)]
    pub placement: Option<PlacementSpec>,
    /// Who the session belongs to (posix, modules profile): accounts, conversation rows with
    /// parent edges, and the spawned row. Paths are relative to the project directory.
    #[serde(default)]
    pub session: Option<SessionSpec>,
    /// A local CLI target (modules profile): `tree` is the computer's files, reached through its
    /// file client, and the root is its resolved working directory.
    #[serde(default)]
    pub local: Option<LocalSpec>,
    /// The section profile's options the case sets; `cwd` and `global_file` are relative to the
    /// project directory (`../x` is beside it). An option the case does not set is not sent.
    #[serde(default)]
    pub options: Option<SectionOptions>,
    /// root-file only: the system prompt the case observes, `full` (both full prompts) or `lean`
    /// (capability `lean_prompt`). Without it no prompt is observed, only the section.
    #[serde(default)]
    pub prompt: Option<PromptKind>,
    /// Files, relative to the project directory; `../x` is beside it, outside the root.
    #[serde(default)]
    pub tree: BTreeMap<String, TreeValue>,
    /// Strings that must never appear in any observation.
    #[serde(default)]
    pub canaries: Vec<String>,
    /// What a canary's appearance violates: `seed` (the default: a canary in a file outside the
    /// root guards the seeds' confinement), or the id of a decision the case cites, when the
    /// canary sits where only a decision keeps it out (a lower-priority name a refused file must
    /// not fall back to, a secret only a decided pattern redacts).
    #[serde(default)]
    pub canary_basis: Option<Basis>,
    /// The session's life.
    pub steps: Vec<Step>,
}

/// A citation of the seed text, or of a written decision.
#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpecRef {
    /// The seed file's number prefix (`000`), absent for a decision.
    #[serde(default)]
    pub seed: Option<String>,
    /// The section heading in the seed.
    #[serde(default)]
    pub heading: Option<String>,
    /// The quoted sentence.
    #[serde(default)]
    pub quote: Option<String>,
    /// A decision id from spec-cases/DECISIONS.md.
    #[serde(default)]
    pub decision: Option<String>,
}

/// Root placement inputs, relative to the project directory.
#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlacementSpec {
    /// The working directory. The default is `.`.
    #[serde(default = "dot")]
    pub cwd: String,
    /// Registered Projects. The default is `[.]`.
    #[serde(default = "dots")]
    pub projects: Vec<String>,
    /// The bound Project.
    #[serde(default)]
    pub bound: Option<String>,
}

/// A local CLI target (seed 000, "Local CLI instruction sources"). Its directories are relative
/// to the base of the computer's tree (`root` on a Windows computer, the project directory on a
/// POSIX one); the harness sends them absolute.
#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LocalSpec {
    /// A child's placed directory, if the conversation is a placed child.
    #[serde(default)]
    pub placed_dir: Option<String>,
    /// The recorded work_dir: the directory a paired CLI was started in.
    #[serde(default)]
    pub work_dir: Option<String>,
    /// The computer's default directory. The default is `.`, the base.
    #[serde(default = "dot")]
    pub default_dir: String,
    /// Whether a Sandbox owner holds the target. The default is true.
    #[serde(default = "yes")]
    pub owner: bool,
    /// Whether the bound connection is lost around the startup reads (`LOCAL_EXECUTION_LOST`).
    /// The default is false.
    #[serde(default)]
    pub connection_lost: bool,
    /// Files on the daemon's own disk at the same paths (POSIX computers only), which must never
    /// be read for this target.
    #[serde(default)]
    pub daemon_tree: BTreeMap<String, TreeValue>,
}

fn yes() -> bool {
    true
}

fn dot() -> String {
    ".".into()
}
fn dots() -> Vec<String> {
    vec![".".into()]
}

/// What a tree entry is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TreeValue {
    /// A file with these bytes.
    File(#[schemars(with = "String")] Vec<u8>),
    /// A file of `size` bytes of `fill` (repeated, cut at `size`).
    Sized {
        /// Bytes.
        size: u64,
        /// The repeated text. The default is `a`.
        fill: String,
    },
    /// A sparse file of `size` bytes (posix only).
    Sparse(u64),
    /// A directory.
    Dir,
    /// A symlink with this target text, made as written.
    Symlink(String),
    /// A FIFO (posix only).
    Fifo,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntrySpec {
    text: Option<String>,
    hex: Option<String>,
    size: Option<u64>,
    fill: Option<String>,
    head: Option<String>,
    tail: Option<String>,
    sparse: Option<u64>,
    dir: Option<bool>,
    symlink: Option<String>,
    fifo: Option<bool>,
}

fn hex_bytes(s: &str) -> Result<Vec<u8>, String> {
    let compact: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    crate::run::wire::from_hex(&compact)
}

impl TryFrom<EntrySpec> for TreeValue {
    type Error = String;
    fn try_from(e: EntrySpec) -> Result<TreeValue, String> {
        let kinds = [
            e.text.is_some(),
            e.hex.is_some(),
            e.size.is_some(),
            e.sparse.is_some(),
            e.dir.is_some(),
            e.symlink.is_some(),
            e.fifo.is_some(),
        ];
        if kinds.iter().filter(|k| **k).count() != 1 {
            return Err("a tree entry needs exactly one of text, hex, size, sparse, dir, symlink, fifo".into());
        }
        if e.fill.is_some() && e.size.is_none() {
            return Err("fill goes with size".into());
        }
        if (e.head.is_some() || e.tail.is_some()) && e.size.is_none() {
            return Err("head and tail go with size".into());
        }
        Ok(if let Some(t) = e.text {
            TreeValue::File(t.into_bytes())
        } else if let Some(h) = e.hex {
            TreeValue::File(hex_bytes(&h)?)
        } else if let Some(size) = e.size {
            let fill = e.fill.unwrap_or_else(|| "a".into());
            if fill.is_empty() {
                return Err("fill must not be empty".into());
            }
            if e.head.is_none() && e.tail.is_none() {
                TreeValue::Sized { size, fill }
            } else {
                // A file framed by a head and a tail (a frontmatter around a bomb) is small
                // enough to be held whole: it is written as the bytes it is.
                let (head, tail) = (e.head.unwrap_or_default(), e.tail.unwrap_or_default());
                let whole = size.saturating_add(head.len() as u64).saturating_add(tail.len() as u64);
                if whole > crate::util::beneath::MAX_DENSE_FILE {
                    return Err(format!(
                        "{whole} bytes with head and tail is over the {} MiB cap of a dense file",
                        crate::util::beneath::MAX_DENSE_FILE >> 20
                    ));
                }
                let mut bytes = head.into_bytes();
                bytes.extend(fill.bytes().cycle().take(size as usize));
                bytes.extend(tail.into_bytes());
                TreeValue::File(bytes)
            }
        } else if let Some(s) = e.sparse {
            TreeValue::Sparse(s)
        } else if let Some(t) = e.symlink {
            TreeValue::Symlink(t)
        } else if e.fifo == Some(true) {
            TreeValue::Fifo
        } else if e.dir == Some(true) {
            TreeValue::Dir
        } else {
            return Err("dir and fifo take `true`".into());
        })
    }
}

impl<'de> Deserialize<'de> for TreeValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TreeValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("file text, or a mapping with one of text, hex, size, sparse, dir, symlink, fifo")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<TreeValue, E> {
                Ok(TreeValue::File(s.as_bytes().to_vec()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<TreeValue, A::Error> {
                let spec = EntrySpec::deserialize(de::value::MapAccessDeserializer::new(map))?;
                TreeValue::try_from(spec).map_err(de::Error::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// How a touch is reported by the tool. What the case states reaches the implementation as it
/// is: the harness derives nothing from the tool's name.
#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TouchSpec {
    /// The path the call named, as the tool reports it.
    pub path: String,
    /// The tool. The default is `read`.
    #[serde(default)]
    pub tool: Option<String>,
    /// Whether the result carries `details.fileAccess`. It must be stated whenever `tool` or
    /// `outcome` is; a plain touch (neither stated) is a successful read that carries it.
    #[serde(default)]
    pub file_access: Option<bool>,
    /// `ok` (the default), `error`, `refused` or `past_eof`.
    #[serde(default)]
    pub outcome: Option<Outcome>,
    /// The conversation scope (section profile). The default is the unscoped bucket.
    #[serde(default)]
    pub scope: Option<String>,
    /// The call's arguments (section profile). The default is `{file_path: <path>}`.
    #[serde(default)]
    #[schemars(with = "Option<serde_json::Value>")]
    pub args: Option<serde_json::Map<String, serde_json::Value>>,
}

impl TouchSpec {
    /// The tool's name as sent.
    pub fn tool(&self) -> &str {
        self.tool.as_deref().unwrap_or("read")
    }

    /// The outcome as sent.
    pub fn outcome(&self) -> Outcome {
        self.outcome.unwrap_or(Outcome::Ok)
    }

    /// Whether the result carries a file access: as stated; a plain touch carries it.
    pub fn carries_file_access(&self) -> bool {
        self.file_access.unwrap_or(true)
    }
}

/// A file write between steps.
#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteSpec {
    /// The path.
    pub path: String,
    /// The new content.
    #[serde(flatten)]
    pub value: WriteValue,
    /// Overwrite the file standing at the path in place (truncated and written again: the same
    /// file, so its folder does not change), as an editor that saves in place does; the file
    /// must exist and be a regular file. Host trees only. The default replaces whatever stands
    /// at the path with a new file.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_place: bool,
}

/// New file content.
#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WriteValue {
    /// Text.
    Text(String),
    /// Hex bytes.
    Hex(String),
}

impl WriteValue {
    /// The bytes.
    pub fn bytes(&self) -> Result<Vec<u8>, String> {
        match self {
            WriteValue::Text(t) => Ok(t.clone().into_bytes()),
            WriteValue::Hex(h) => hex_bytes(h),
        }
    }
}

/// What a model request names.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestSpec {
    scope: Option<String>,
}

/// A rename between steps.
#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RenameSpec {
    /// From.
    pub from: String,
    /// To.
    pub to: String,
}

/// One step of a session's life.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Spawn.
    Start,
    /// A tool result.
    Touch(TouchSpec),
    /// The next model request, in a conversation scope (section profile).
    NextRequest(Option<String>),
    /// Compaction.
    Compact,
    /// Cold clearing.
    ColdClear,
    /// A daemon restart (for adapters, a real process restart with the same state directory).
    Restart,
    /// A new session over the same tree: the case's session is closed and another one starts,
    /// with a fresh state directory (seed 003: "an edit to the file shows in the next session").
    NewSession,
    /// A fork.
    Fork,
    /// The next journal append fails: transiently (`fail_next_append:`), or durably
    /// (`fail_next_append: durable`), which trips the persistence latch.
    FailNextAppend(Failure),
    /// The resolver rejects the next batch it resolves.
    RejectNextResolution,
    /// A later Project selection records another work_dir (local targets), relative to the base.
    SelectProject(String),
    /// A file is written.
    Write(WriteSpec),
    /// A file is deleted.
    Delete(String),
    /// A file is renamed.
    Rename(RenameSpec),
    /// The managed environment changes state.
    Environment(Environment),
}

impl Action {
    /// The step's name as a case file writes it (`next_request`).
    pub fn name(&self) -> &'static str {
        match self {
            Action::Start => "start",
            Action::Touch(_) => "touch",
            Action::NextRequest(_) => "next_request",
            Action::Compact => "compact",
            Action::ColdClear => "cold_clear",
            Action::Restart => "restart",
            Action::NewSession => "new_session",
            Action::Fork => "fork",
            Action::FailNextAppend(_) => "fail_next_append",
            Action::RejectNextResolution => "reject_next_resolution",
            Action::SelectProject(_) => "select_project",
            Action::Write(_) => "write",
            Action::Delete(_) => "delete",
            Action::Rename(_) => "rename",
            Action::Environment(_) => "environment",
        }
    }
}

/// How a `fail_next_append` fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    /// Once; the batch is requeued (`fail_next_append:` or `fail_next_append: transient`).
    Transient,
    /// The journal cannot persist: the batch is requeued and the persistence latch trips.
    Durable,
}

/// A step: one action, and what to expect of it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Step {
    /// The action.
    #[serde(flatten)]
    pub action: Action,
    /// Expectations; absent: nothing is checked at this step.
    pub expect: Option<Expect>,
}

const ACTIONS: &[&str] = &[
    "start",
    "touch",
    "next_request",
    "compact",
    "cold_clear",
    "restart",
    "new_session",
    "fork",
    "fail_next_append",
    "reject_next_resolution",
    "select_project",
    "write",
    "delete",
    "rename",
    "environment",
];

impl<'de> Deserialize<'de> for Step {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Step;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a step: a mapping with one of {} and an optional expect", ACTIONS.join(", "))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Step, A::Error> {
                let mut action = None;
                let mut expect = None;
                while let Some(key) = map.next_key::<String>()? {
                    if key == "expect" {
                        if expect.is_some() {
                            return Err(de::Error::duplicate_field("expect"));
                        }
                        expect = Some(map.next_value::<Expect>()?);
                        continue;
                    }
                    if action.is_some() {
                        return Err(de::Error::custom(format!(
                            "step has a second action '{key}' (one action per step)"
                        )));
                    }
                    action = Some(match key.as_str() {
                        "start" => unit(&mut map, Action::Start)?,
                        "next_request" => {
                            Action::NextRequest(map.next_value::<Option<RequestSpec>>()?.and_then(|r| r.scope))
                        }
                        "compact" => unit(&mut map, Action::Compact)?,
                        "cold_clear" => unit(&mut map, Action::ColdClear)?,
                        "restart" => unit(&mut map, Action::Restart)?,
                        "new_session" => unit(&mut map, Action::NewSession)?,
                        "fork" => unit(&mut map, Action::Fork)?,
                        "fail_next_append" => match map.next_value::<Option<String>>()?.as_deref() {
                            None | Some("transient") => Action::FailNextAppend(Failure::Transient),
                            Some("durable") => Action::FailNextAppend(Failure::Durable),
                            Some(other) => {
                                return Err(de::Error::custom(format!(
                                    "fail_next_append: '{other}' is neither transient (the default) nor durable"
                                )))
                            }
                        },
                        "reject_next_resolution" => unit(&mut map, Action::RejectNextResolution)?,
                        "select_project" => Action::SelectProject(map.next_value()?),
                        "touch" => Action::Touch(map.next_value()?),
                        "write" => Action::Write(map.next_value()?),
                        "delete" => Action::Delete(map.next_value()?),
                        "rename" => Action::Rename(map.next_value()?),
                        "environment" => Action::Environment(map.next_value()?),
                        other => return Err(de::Error::unknown_field(other, ACTIONS)),
                    });
                }
                let action = action.ok_or_else(|| de::Error::custom("step has no action"))?;
                Ok(Step { action, expect })
            }
        }
        d.deserialize_map(V)
    }
}

/// Reads an action without arguments: `start:` with nothing after it.
fn unit<'de, A: MapAccess<'de>>(map: &mut A, action: Action) -> Result<Action, A::Error> {
    map.next_value::<Option<()>>()?;
    Ok(action)
}

/// What a step must observe. Comparison semantics (FORMAT.md): lists of files and modules are
/// ordered; diagnostics are a multiset of (code, path[, line]) and, once `expect` is given, an
/// omitted `diagnostics` means none.
#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// The basis of this step's expectations: `seed` or a decision id for all of them, or a map
    /// from expectation (`startup`, `activation`, `rendered`, `section`, `prompt`, `diagnostics`,
    /// `blocked`, `escaped`, `failed`) to basis.
    #[serde(default)]
    pub basis: Option<BasisSpec>,
    /// The startup prefix, in order.
    #[serde(default)]
    pub startup: Option<Vec<ExpectFile>>,
    /// The modules of the appended record, in order; `[]`: nothing appended.
    #[serde(default)]
    pub activation: Option<Vec<ExpectModule>>,
    /// The appended text, `{root}` standing for the root's display form.
    #[serde(default)]
    pub rendered: Option<String>,
    /// The section (section and root-file profiles).
    #[serde(default)]
    pub section: Option<ExpectSection>,
    /// The parts of the system prompt the case names (`prompt:`), in order; every observed
    /// prompt of that kind must have exactly these (root-file profile).
    #[serde(default)]
    pub prompt: Option<Vec<PromptPart>>,
    /// The diagnostics.
    #[serde(default)]
    pub diagnostics: Vec<ExpectDiagnostic>,
    /// `next_request`: whether the persistence latch blocked the request. Compared when stated.
    #[serde(default)]
    pub blocked: Option<bool>,
    /// `next_request`: whether a rejection of the resolver escaped the instruction hook.
    /// Compared when stated.
    #[serde(default)]
    pub escaped: Option<bool>,
    /// `start`: whether the startup failed (a local target without an owner, or with its
    /// connection lost). Compared when stated.
    #[serde(default)]
    pub failed: Option<bool>,
}

impl Expect {
    /// Whether it states anything beyond the implied "no diagnostics".
    pub fn states_anything(&self) -> bool {
        self.startup.is_some()
            || self.activation.is_some()
            || self.rendered.is_some()
            || self.section.is_some()
            || self.prompt.is_some()
            || !self.diagnostics.is_empty()
            || self.blocked.is_some()
            || self.escaped.is_some()
            || self.failed.is_some()
    }
}

/// An expected section.
#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpectSection {
    /// The exact text; `{sandbox}` stands for the sandbox directory.
    #[serde(default)]
    pub text: Option<String>,
    /// Whether the node was rewritten this round.
    #[serde(default)]
    pub rewritten: Option<bool>,
    /// The files rendered, in order, as their headers name them.
    #[serde(default)]
    pub files: Option<Vec<String>>,
    /// The files named as not fitting, in order.
    #[serde(default)]
    pub omitted: Option<Vec<String>>,
}

/// An expected startup file.
#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpectFile {
    /// /-form root-relative path.
    pub path: String,
    /// `root` or `module`.
    #[serde(default)]
    pub kind: Option<String>,
    /// The exact sent content; its SHA-256 is checked too.
    #[serde(default)]
    pub content: Option<String>,
    /// The SHA-256, when the content is not spelled out.
    #[serde(default)]
    pub sha256: Option<String>,
    /// The file was cut and a last line says it goes on and that fs-read reads the rest (root-file
    /// profile). That line's wording is the implementation's: it must mention `fs-read`, and
    /// `content` and `sha256` are compared with it removed.
    #[serde(default)]
    pub continued: Option<bool>,
}

/// An expected module of an activation.
#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpectModule {
    /// /-form root-relative path.
    pub path: String,
    /// Marked `supersedes="earlier version"`. The default is false.
    #[serde(default)]
    pub supersedes: bool,
    /// The exact sent content; its SHA-256 is checked too.
    #[serde(default)]
    pub content: Option<String>,
    /// The SHA-256, when the content is not spelled out.
    #[serde(default)]
    pub sha256: Option<String>,
}

/// An expected diagnostic.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpectDiagnostic {
    /// The stable code.
    pub code: String,
    /// /-form root-relative path ("" for the root directory).
    #[serde(default)]
    pub path: String,
    /// The line, when it matters.
    #[serde(default)]
    pub line: Option<u32>,
}

/// What an expectation rests on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
#[serde(into = "String")]
#[schemars(with = "String")]
pub enum Basis {
    /// A quoted seed sentence requires it.
    Seed,
    /// A written decision (its id) settles what the seeds leave open.
    Decision(String),
}

impl Basis {
    /// `seed` or `decision`.
    pub fn kind(&self) -> &'static str {
        match self {
            Basis::Seed => "seed",
            Basis::Decision(_) => "decision",
        }
    }

    /// The decision id, for a decision.
    pub fn decision(&self) -> Option<&str> {
        match self {
            Basis::Seed => None,
            Basis::Decision(id) => Some(id),
        }
    }
}

impl From<Basis> for String {
    fn from(b: Basis) -> String {
        match b {
            Basis::Seed => "seed".into(),
            Basis::Decision(id) => id,
        }
    }
}

impl fmt::Display for Basis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Basis::Seed => f.write_str("seed"),
            Basis::Decision(id) => f.write_str(id),
        }
    }
}

impl<'de> Deserialize<'de> for Basis {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s == "seed" {
            Ok(Basis::Seed)
        } else if s.starts_with("D-") && s.len() > 2 && !s.contains(char::is_whitespace) {
            Ok(Basis::Decision(s))
        } else {
            Err(de::Error::custom(format!("basis '{s}' is neither 'seed' nor a decision id (D-...)")))
        }
    }
}

/// The expectations whose basis a step may set one by one.
pub const EXPECTATIONS: &[&str] =
    &["startup", "activation", "rendered", "section", "prompt", "diagnostics", "blocked", "escaped", "failed"];

/// The facets of an expectation whose basis a step may set apart from the expectation's own
/// (`expectation.facet`): a facet not stated takes its expectation's basis. `section.text` is the
/// exact text's layout; `diagnostics.path` is which path a diagnostic names when the step reports
/// its code for another one. `section.ceiling` and `section.named` are seed 002's two budget
/// sentences (the UTF-8 ceiling; that what does not fit is named), checked on every section text:
/// each is the seed's unless a step states it, which a case does only where a decision settles it
/// (the two cannot both hold; a file left out only for `maxFileBytes`).
pub const FACETS: &[&str] = &[
    "startup.path",
    "activation.path",
    "section.rewritten",
    "section.files",
    "section.omitted",
    "section.text",
    "section.ceiling",
    "section.named",
    "diagnostics.path",
];

/// A step's basis: one for all its expectations, or one per expectation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum BasisSpec {
    /// Every expectation of the step.
    All(Basis),
    /// Expectation name → basis; the others take the case's basis.
    Each(BTreeMap<String, Basis>),
}

impl<'de> Deserialize<'de> for BasisSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = BasisSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("'seed', a decision id, or a map from expectation name to one of those")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<BasisSpec, E> {
                Basis::deserialize(de::value::StrDeserializer::<E>::new(s)).map(BasisSpec::All)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<BasisSpec, A::Error> {
                let mut out = BTreeMap::new();
                while let Some(key) = map.next_key::<String>()? {
                    if !EXPECTATIONS.contains(&key.as_str()) && !FACETS.contains(&key.as_str()) {
                        let known = EXPECTATIONS.iter().chain(FACETS).map(|k| format!("`{k}`")).collect::<Vec<_>>();
                        return Err(de::Error::custom(format!(
                            "unknown basis key `{key}`, expected one of {}",
                            known.join(", ")
                        )));
                    }
                    let basis: Basis = map.next_value()?;
                    out.insert(key, basis);
                }
                Ok(BasisSpec::Each(out))
            }
        }
        d.deserialize_any(V)
    }
}

impl Scenario {
    /// The case's own basis: stated, else derived from what it cites (only seed sentences: the
    /// seed; only decisions: the first). `None` when it cites both and states none.
    pub fn case_basis(&self) -> Option<Basis> {
        if let Some(b) = &self.basis {
            return Some(b.clone());
        }
        let seeds = self.spec.iter().any(|r| r.seed.is_some());
        let decisions: Vec<&String> = self.spec.iter().filter_map(|r| r.decision.as_ref()).collect();
        match (seeds, decisions.first()) {
            (true, None) => Some(Basis::Seed),
            (false, Some(d)) => Some(Basis::Decision((*d).clone())),
            _ => None,
        }
    }

    /// The basis a step states for `what` itself, and for nothing else (no fallback).
    pub fn stated_basis(expect: &Expect, what: &str) -> Option<Basis> {
        match &expect.basis {
            Some(BasisSpec::Each(m)) => m.get(what).cloned(),
            _ => None,
        }
    }

    /// The basis of expectation `what` of `expect`.
    pub fn basis_of(&self, expect: &Expect, what: &str) -> Option<Basis> {
        match &expect.basis {
            Some(BasisSpec::All(b)) => Some(b.clone()),
            Some(BasisSpec::Each(m)) => m
                .get(what)
                .or_else(|| what.split_once('.').and_then(|(expectation, _)| m.get(expectation)))
                .cloned()
                .or_else(|| self.case_basis()),
            None => self.case_basis(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every facet is a facet of one of the expectations.
    #[test]
    fn every_facet_belongs_to_an_expectation() {
        assert!(FACETS.iter().all(|f| f.split_once('.').is_some_and(|(e, _)| EXPECTATIONS.contains(&e))));
    }

    fn entry(yaml: &str) -> Result<TreeValue, String> {
        reference::yaml::from_str::<TreeValue>(yaml).map_err(|e| e.to_string())
    }

    /// A head and a tail frame the repeated fill; without them a sized file stays sized.
    #[test]
    fn a_sized_file_may_have_a_head_and_a_tail() {
        assert_eq!(
            entry("{size: 5, fill: \"[\", head: \"---\\n\", tail: \"\\n---\\n\"}"),
            Ok(TreeValue::File(b"---\n[[[[[\n---\n".to_vec()))
        );
        assert_eq!(entry("{size: 3, fill: ab, tail: \"!\"}"), Ok(TreeValue::File(b"aba!".to_vec())));
        assert_eq!(entry("{size: 3, fill: ab}"), Ok(TreeValue::Sized { size: 3, fill: "ab".into() }));
        assert!(entry("{text: x, head: y}").unwrap_err().contains("head and tail go with size"));
        assert!(entry("{size: 70000000, head: y}").unwrap_err().contains("cap of a dense file"));
    }
}
