//! Running one case through an implementation: materialise the tree, drive every step, compare,
//! check the canaries, and produce exactly one [`CaseResult`], whatever happens.

use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use crate::case::load::Case;
use crate::case::scenario::Failure;
use crate::case::scenario::{Action, Basis, Expect, Platform, Scenario};
use crate::case::tree::{default_root, display_root, MemModel, Sandbox};
use crate::judge::compare::{compare, Context, Mismatch};
use crate::judge::untouched::Snapshot;
use crate::run::implementation::{ImplError, Implementation};
use crate::run::wire::{
    CasePlatform, Hello, Observation, OpenCase, ScriptStep, SectionOptions, StepOp, ToolCall, TreeEdit, WireLocal,
    WirePlacement, WireSession,
};

/// Which expectations gate a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Every expectation, seed-based and decision-based. The default.
    #[default]
    All,
    /// Only the expectations a seed sentence requires: a case that differs only from decisions
    /// passes, with the differences kept in its record.
    Seed,
}

/// What a failure contradicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// It violates a seed sentence.
    Seed,
    /// It only differs from a decision of this suite.
    Decision,
}

/// What every case of a run shares.
#[derive(Debug, Clone, Copy)]
pub struct RunContext<'a> {
    /// The implementation's hello.
    pub hello: &'a Hello,
    /// Which expectations gate.
    pub level: Level,
    /// Keep the transcript of a passing case too (a reproduction); the default keeps only those
    /// of cases that do not pass.
    pub keep_transcript: bool,
}

impl<'a> RunContext<'a> {
    /// Every expectation gates ([`Level::All`]).
    pub fn new(hello: &'a Hello) -> RunContext<'a> {
        RunContext { hello, level: Level::All, keep_transcript: false }
    }
}

/// A case's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    /// Every expectation held.
    Pass,
    /// An expectation did not hold.
    Fail,
    /// The case could not run (bad tree, the implementation refused a request).
    Error,
    /// The implementation's process died or spoke garbage.
    Crash,
    /// The implementation did not answer in time.
    Timeout,
    /// Not run (filtered by the manifest).
    Skip,
    /// The case needs a profile or feature the implementation does not declare.
    Unsupported,
    /// Failed, as the manifest expected.
    Xfail,
    /// Passed, though the manifest expected a failure.
    Xpass,
}

impl Status {
    /// The upper-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Fail => "FAIL",
            Status::Error => "ERROR",
            Status::Crash => "CRASH",
            Status::Timeout => "TIMEOUT",
            Status::Skip => "SKIP",
            Status::Unsupported => "UNSUPPORTED",
            Status::Xfail => "XFAIL",
            Status::Xpass => "XPASS",
        }
    }
}

/// One step's record.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct StepResult {
    /// 0-based index in `steps`.
    pub index: usize,
    /// The action's name.
    pub action: String,
    /// What the implementation observed.
    pub observation: Observation,
    /// Differences from the expectation.
    pub mismatches: Vec<Mismatch>,
    /// How long the implementation took over the step, in microseconds ([`Implementation::take_wait`]
    /// where it tells; 0 for a one-shot run, whose steps are not timed one by one). Kept out of reports, which carry the case's time;
    /// `conformance bench` reads it.
    #[serde(skip)]
    pub micros: u128,
}

/// One case's result.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct CaseResult {
    /// The stable id.
    pub id: String,
    /// The display name.
    pub name: String,
    /// The profile.
    pub profile: String,
    /// The area: the first folder of the name below the profile.
    pub area: String,
    /// The status.
    pub status: Status,
    /// Why, for anything but PASS.
    pub reason: Option<String>,
    /// For a FAIL: `seed` when it violates a seed sentence, `decision` when it only differs from a
    /// decision of this suite. A case that differs from both is a seed violation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basis: Option<Verdict>,
    /// For a FAIL on a decision, the decision's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    /// Differences from decisions that did not gate the case (`--level seed`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decision_differences: Vec<String>,
    /// The steps that ran.
    pub steps: Vec<StepResult>,
    /// Notes for every report, never compared: for an agent CLI, how its network was confined,
    /// where each instruction file's text landed in its requests, and which expectations it could
    /// not be observed to meet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// For a case that did not pass, the raw exchange with the implementation where it keeps one
    /// (an agent CLI's requests and the scripted replies, JSON Lines); written by `--transcripts`,
    /// never into a report.
    #[serde(skip)]
    pub transcript: Option<String>,
    /// Wall time in milliseconds.
    pub millis: u128,
    /// The implementation can no longer be run (too many restarts): the run ends with exit 2.
    #[serde(skip)]
    pub fatal: bool,
}

impl CaseResult {
    /// The first step with a mismatch.
    pub fn first_divergence(&self) -> Option<&StepResult> {
        self.steps.iter().find(|s| !s.mismatches.is_empty())
    }
}

fn action_name(a: &Action) -> &'static str {
    a.name()
}

/// The area of a case: the folder below the profile folder.
pub(crate) fn area(name: &str) -> String {
    let mut parts = name.split('/');
    let first = parts.next().unwrap_or("");
    match parts.next() {
        Some(second) if parts.next().is_some() => second.to_string(),
        _ => first.to_string(),
    }
}

/// What the implementation lacks to run `s`, if anything.
pub fn unsupported(hello: &Hello, s: &Scenario) -> Option<String> {
    if !hello.profiles.contains(&s.profile) {
        return Some(format!("profile '{}' is not supported", s.profile));
    }
    let missing: Vec<&str> =
        s.capabilities.iter().filter(|c| !hello.capabilities.contains(c)).map(String::as_str).collect();
    (!missing.is_empty()).then(|| format!("needs capabilities it does not declare: {}", missing.join(", ")))
}

/// Prepared state of a running case.
struct Running {
    sandbox: Sandbox,
    open: OpenCase,
    mem: Option<MemModel>,
    root_display: String,
    /// Section calls not yet delivered: each reaches the section with its scope's next round.
    pending: Vec<(Option<String>, ToolCall)>,
    /// The sandbox as the implementation was last given it (D-TREE-1).
    given: Snapshot,
}

impl Running {
    /// What the sandbox holds now, but the fake HOME (an agent CLI's own).
    fn snapshot(&self) -> Snapshot {
        Snapshot::take(&self.sandbox.dir, &["home"])
    }

    /// What the implementation changed in the sandbox since it was given it, as mismatches of
    /// D-TREE-1; the tree as it is now is the given one from here on, so a change is named once.
    /// `allowed` paths (relative to the sandbox) may change.
    fn changed(&mut self, allowed: &dyn Fn(&str) -> bool) -> Vec<Mismatch> {
        let now = self.snapshot();
        let changes = self.given.changes(&now, allowed);
        self.given = now;
        if changes.is_empty() {
            return Vec::new();
        }
        const SHOWN: usize = 20;
        let more = changes.len().saturating_sub(SHOWN);
        // The names are the implementation's: each is cut, as any field of a report is.
        let shown: Vec<String> = changes
            .iter()
            .take(SHOWN)
            .map(|c| crate::report::escape::cut(c, crate::report::escape::FIELD_MAX).into_owned())
            .collect();
        let mut actual = shown.join(", ");
        if more > 0 {
            actual.push_str(&format!(" and {more} more"));
        }
        vec![Mismatch {
            field: "tree (left as the steps left it)".into(),
            expected: "nothing created, changed or deleted by the implementation".into(),
            actual,
            basis: Basis::Decision(UNTOUCHED.into()),
        }]
    }
}

/// The decision that an implementation leaves the case's tree as the steps left it.
const UNTOUCHED: &str = "D-TREE-1";

fn prepare(s: &Scenario) -> Result<Running, String> {
    prepare_in(s, Sandbox::new()?)
}

/// A directory of a local target, relative to the base of the computer's tree, made absolute in
/// the computer's own path form.
fn local_dir(platform: Platform, base: &str, rel: &str) -> String {
    if rel.is_empty() || rel == "." {
        return base.to_string();
    }
    match platform {
        Platform::Windows => format!("{}\\{}", base.trim_end_matches(['\\', '/']), rel.replace('/', "\\")),
        _ => format!("{}/{}", base.trim_end_matches('/'), rel),
    }
}

fn prepare_in(s: &Scenario, sandbox: Sandbox) -> Result<Running, String> {
    // A local target's files are the computer's, sent in memory on a POSIX computer too; what
    // the harness writes on disk for it is the daemon's own files at the same paths.
    let host = s.platform == Platform::Posix && s.local.is_none();
    let mem = (!host).then(|| MemModel::new(s));
    if host {
        sandbox.build(&s.tree)?;
    }
    if let Some(local) = &s.local {
        sandbox.build(&local.daemon_tree)?;
    }
    let root = match s.platform {
        Platform::Posix => sandbox.project.to_string_lossy().into_owned(),
        p => s.root.clone().unwrap_or_else(|| default_root(p).to_string()),
    };
    let placement = match &s.placement {
        None => None,
        Some(p) => Some(WirePlacement {
            cwd: sandbox.resolve(&p.cwd)?.to_string_lossy().into_owned(),
            projects: p
                .projects
                .iter()
                .map(|x| sandbox.resolve(x).map(|d| d.to_string_lossy().into_owned()))
                .collect::<Result<_, _>>()?,
            bound: p
                .bound
                .as_ref()
                .map(|b| sandbox.resolve(b).map(|d| d.to_string_lossy().into_owned()))
                .transpose()?,
        }),
    };
    let session = s.session.as_ref().map(|w| wire_session(w, &sandbox).map(Box::new)).transpose()?;
    let local = s.local.as_ref().map(|l| {
        Box::new(WireLocal {
            placed_dir: l.placed_dir.as_deref().map(|d| local_dir(s.platform, &root, d)),
            work_dir: l.work_dir.as_deref().map(|d| local_dir(s.platform, &root, d)),
            default_dir: local_dir(s.platform, &root, &l.default_dir),
            owner: l.owner,
            connection_lost: l.connection_lost,
        })
    });
    let open = OpenCase {
        profile: s.profile.clone(),
        platform: s.platform,
        root: root.clone(),
        state_dir: sandbox.state_dir().to_string_lossy().into_owned(),
        tree: mem.as_ref().map(MemModel::wire),
        environment: if s.platform == CasePlatform::Managed { s.environment.clone().map(|e| e.0) } else { None },
        placement,
        session,
        local,
        resume: false,
        options: section_options(s, &sandbox)?,
        prompt: s.prompt,
    };
    let mut running = Running {
        root_display: display_root(s.platform, &root),
        sandbox,
        open,
        mem,
        pending: Vec::new(),
        given: Snapshot::default(),
    };
    running.given = running.snapshot();
    Ok(running)
}

/// The session's rows and accounts with their paths (bound Projects, policies, working
/// directories) made absolute: they are written relative to the project directory.
fn wire_session(w: &WireSession, sandbox: &Sandbox) -> Result<WireSession, String> {
    let abs = |p: &String| sandbox.resolve(p).map(|d| d.to_string_lossy().into_owned());
    let all =
        |ps: &Option<Vec<String>>| ps.as_ref().map(|v| v.iter().map(abs).collect::<Result<Vec<_>, _>>()).transpose();
    let mut out = w.clone();
    for a in out.accounts.values_mut() {
        a.bound = a.bound.as_ref().map(abs).transpose()?;
        a.policy = all(&a.policy)?;
    }
    for c in &mut out.conversations {
        c.cwd = c.cwd.as_ref().map(abs).transpose()?;
        c.policy = all(&c.policy)?;
    }
    Ok(out)
}

/// The section options with `cwd` and `global_file` made absolute (they are written relative to
/// the project directory).
fn section_options(s: &Scenario, sandbox: &Sandbox) -> Result<Option<Box<SectionOptions>>, String> {
    let Some(mut o) = s.options.clone() else { return Ok(None) };
    let abs = |p: &str| sandbox.resolve(p).map(|d| d.to_string_lossy().into_owned());
    o.cwd = o.cwd.as_deref().map(abs).transpose()?;
    o.global_file = o.global_file.as_deref().map(abs).transpose()?;
    Ok(Some(Box::new(o)))
}

/// Substitutes `{root}` (the root's real path) and `{sandbox}` (the sandbox's, where a case's
/// links to the project live) in a touched path.
fn touched(open: &OpenCase, sandbox: &Path, path: &str) -> String {
    path.replace("{root}", &open.root).replace("{sandbox}", &sandbox.to_string_lossy())
}

/// What the implementation is asked to do for one step.
enum Planned {
    /// A step request.
    Op(StepOp),
    /// A restart, then an `open` with `resume` set.
    Restart(OpenCase),
    /// A `close`, an `open` of a new session (a fresh state directory) and its `start`.
    NewSession(OpenCase),
    /// Nothing: the harness edited the host tree itself; the step observes nothing.
    Nothing,
}

/// Plans one step's action, applying host tree edits on disk right away (the harness owns the
/// tree) and keeping the in-memory model current.
fn plan(r: &mut Running, action: &Action) -> Result<Planned, ImplError> {
    let bad = |e: String| ImplError::Refused(format!("harness: {e}"));
    let edit = |r: &mut Running, edit: TreeEdit| -> Result<Option<StepOp>, String> {
        if let (Some(mem), Some(tree)) = (r.mem.as_mut(), r.open.tree.as_mut()) {
            match &edit {
                TreeEdit::Write { path, hex } => mem.write(path, crate::run::wire::from_hex(hex)?)?,
                TreeEdit::Delete { path } => mem.delete(path)?,
                TreeEdit::Rename { from, to } => mem.rename(from, to)?,
                TreeEdit::Environment { state } => r.open.environment = Some(state.clone()),
            }
            *tree = mem.wire();
            Ok(Some(StepOp::EditTree(edit)))
        } else {
            Ok(None)
        }
    };
    let op = match action {
        Action::Start => Some(StepOp::Start),
        Action::Touch(t) => {
            let path = touched(&r.open, &r.sandbox.dir, &t.path);
            let call = ToolCall {
                tool: t.tool().to_string(),
                file_access: t.carries_file_access().then(|| path.clone()),
                path: path.clone(),
                outcome: t.outcome(),
                args: (r.open.profile == "section").then(|| {
                    t.args.clone().unwrap_or_else(|| {
                        let mut m = serde_json::Map::new();
                        m.insert("file_path".into(), serde_json::Value::String(path.clone()));
                        m
                    })
                }),
            };
            if r.open.profile == "section" {
                // The section sees committed calls only with the next round of their conversation
                // (seed 002: a callback "the turn loop re-runs before every model round").
                r.pending.push((t.scope.clone(), call));
                None
            } else {
                Some(StepOp::Touch(call))
            }
        }
        Action::NextRequest(scope) => {
            let (mine, others): (Vec<_>, Vec<_>) =
                std::mem::take(&mut r.pending).into_iter().partition(|(s, _)| s == scope);
            r.pending = others;
            Some(StepOp::NextRequest { scope: scope.clone(), calls: mine.into_iter().map(|(_, c)| c).collect() })
        }
        Action::Compact => Some(StepOp::Compact),
        Action::ColdClear => Some(StepOp::ColdClear),
        Action::FailNextAppend(f) => Some(StepOp::FailNextAppend { durable: *f == Failure::Durable }),
        Action::RejectNextResolution => Some(StepOp::RejectNextResolution),
        Action::SelectProject(dir) => {
            let work_dir = local_dir(r.open.platform, &r.open.root, dir);
            // A restarted adapter is opened with the target as it is recorded now; it must still
            // resume at the root it stored (decision D-LOCAL-6).
            match r.open.local.as_mut() {
                Some(l) => l.work_dir = Some(work_dir.clone()),
                None => return Err(bad("select_project applies to local CLI targets only".into())),
            }
            Some(StepOp::SelectProject { work_dir })
        }
        Action::Fork => {
            let dir = r.sandbox.fork_dir().to_string_lossy().into_owned();
            r.open.state_dir = dir.clone();
            Some(StepOp::Fork { state_dir: dir })
        }
        Action::NewSession => {
            r.pending.clear();
            let dir = r.sandbox.fork_dir().to_string_lossy().into_owned();
            r.open.state_dir = dir;
            r.open.resume = false;
            return Ok(Planned::NewSession(r.open.clone()));
        }
        Action::Restart => {
            // A restart mounts the section afresh: calls it never saw are gone with the old
            // instance (D-SEC-TIME-1).
            r.pending.clear();
            let mut open = r.open.clone();
            open.resume = true;
            return Ok(Planned::Restart(open));
        }
        Action::Write(w) => {
            let bytes = w.value.bytes().map_err(bad)?;
            if r.mem.is_none() {
                if w.in_place {
                    r.sandbox.overwrite(&w.path, &bytes).map_err(bad)?;
                } else {
                    r.sandbox.put(&w.path, &crate::case::scenario::TreeValue::File(bytes.clone())).map_err(bad)?;
                }
            }
            edit(r, TreeEdit::Write { path: w.path.clone(), hex: crate::run::wire::to_hex(&bytes) }).map_err(bad)?
        }
        Action::Delete(path) => {
            if r.mem.is_none() {
                r.sandbox.delete(path).map_err(bad)?;
            }
            edit(r, TreeEdit::Delete { path: path.clone() }).map_err(bad)?
        }
        Action::Rename(rn) => {
            if r.mem.is_none() {
                r.sandbox.rename(&rn.from, &rn.to).map_err(bad)?;
            }
            edit(r, TreeEdit::Rename { from: rn.from.clone(), to: rn.to.clone() }).map_err(bad)?
        }
        Action::Environment(env) => edit(r, TreeEdit::Environment { state: env.0.clone() }).map_err(bad)?,
    };
    Ok(op.map_or(Planned::Nothing, Planned::Op))
}

/// Runs one step live.
fn drive(imp: &mut dyn Implementation, r: &mut Running, action: &Action) -> Result<Observation, ImplError> {
    let planned = plan(r, action)?;
    // The harness's own edits of the step are made: what the tree holds now is what the
    // implementation is given (after any other step it is what it was last given).
    if r.mem.is_none() && matches!(action, Action::Write(_) | Action::Delete(_) | Action::Rename(_)) {
        r.given = r.snapshot();
    }
    match planned {
        Planned::Op(op) => imp.step(&op),
        Planned::Restart(open) => imp.restart(&open),
        Planned::NewSession(open) => {
            imp.close()?;
            imp.open(&open)?;
            imp.step(&StepOp::Start)
        }
        Planned::Nothing => Ok(Observation::default()),
    }
}

/// A whole case as one-shot mode sends it: the `open` as it is at the start, the script of steps,
/// and for each scenario step whether it is in the script (host tree edits are not). A host tree
/// cannot change between the steps of a one-shot run, so a case that edits one is refused.
fn whole_script(r: &mut Running, s: &Scenario) -> Result<(OpenCase, Vec<ScriptStep>, Vec<bool>), String> {
    let host_edits = r.mem.is_none()
        && s.steps.iter().any(|st| matches!(st.action, Action::Write(_) | Action::Delete(_) | Action::Rename(_)));
    if host_edits {
        return Err("one-shot mode cannot edit a host tree between steps".into());
    }
    let mut script = Vec::new();
    let mut planned = Vec::new();
    for step in &s.steps {
        let p = plan(r, &step.action).map_err(|e| e.to_string())?;
        match &p {
            Planned::Op(op) => script.push(ScriptStep::Step(op.clone())),
            Planned::Restart(_) => script.push(ScriptStep::Restart),
            Planned::NewSession(_) => return Err("one-shot mode cannot start a second session".into()),
            Planned::Nothing => {}
        }
        planned.push(!matches!(p, Planned::Nothing));
    }
    // The open of a one-shot run carries the tree as it is at the start; `plan` above moved the
    // model on, so it is rebuilt from the scenario.
    let mut open = r.open.clone();
    open.tree = r.mem.is_some().then(|| MemModel::new(s).wire());
    open.state_dir = r.sandbox.state_dir().to_string_lossy().into_owned();
    open.environment = if s.platform == CasePlatform::Managed { s.environment.clone().map(|e| e.0) } else { None };
    Ok((open, script, planned))
}

/// The one-shot input of a case whose tree is made in `sandbox` (for a reproduction).
pub fn one_shot_input(s: &Scenario, sandbox: Sandbox) -> Result<crate::run::wire::OneShotRequest, String> {
    let mut r = prepare_in(s, sandbox)?;
    let (open, steps, _) = whole_script(&mut r, s)?;
    // The reproduction's tree stays where it was made; nothing here may remove it.
    let _kept = r.sandbox;
    Ok(crate::run::wire::OneShotRequest {
        protocol: crate::run::wire::PROTOCOL_VERSION.into(),
        case: s.id.clone(),
        open,
        steps,
    })
}

/// Runs every step in one go, for an implementation in one-shot mode.
fn drive_whole(
    imp: &mut dyn Implementation,
    r: &mut Running,
    s: &Scenario,
) -> Result<Option<Vec<Result<Observation, ImplError>>>, String> {
    let (open, script, planned) = whole_script(r, s)?;
    let Some(outcome) = imp.run_whole(&s.id, &open, &script) else { return Ok(None) };
    let mut observations = match outcome {
        Ok(obs) => obs.into_iter(),
        Err(e) => return Ok(Some(vec![Err(e)])),
    };
    Ok(Some(
        planned
            .into_iter()
            .map(|sent| if sent { observations.next().unwrap_or_default() } else { Observation::default() })
            .map(Ok)
            .collect(),
    ))
}

/// Runs one case. Every case gets a result and every failure its reason.
pub fn run_case(imp: &mut dyn Implementation, ctx: &RunContext<'_>, case: &Case) -> CaseResult {
    let hello = ctx.hello;
    let started = Instant::now();
    let s = &case.scenario;
    let mut result = CaseResult {
        id: s.id.clone(),
        name: case.name.clone(),
        profile: s.profile.clone(),
        area: area(&case.name),
        status: Status::Pass,
        reason: None,
        basis: None,
        decision: None,
        decision_differences: Vec::new(),
        steps: Vec::new(),
        notes: Vec::new(),
        transcript: None,
        millis: 0,
        fatal: false,
    };
    if let Some(why) = unsupported(hello, s) {
        result.status = Status::Unsupported;
        result.reason = Some(why);
        return result;
    }
    // An agent CLI runs the case in its own file names; the expectations stay the case's.
    let translated = match imp.translate(s) {
        Ok(t) => t,
        Err(why) => {
            result.status = Status::Unsupported;
            result.reason = Some(why);
            return result;
        }
    };
    let hidden = imp.unobservable();
    let expects: Vec<Option<Expect>> =
        s.steps.iter().map(|st| st.expect.as_ref().map(|e| observable(e, hidden))).collect();
    if !hidden.is_empty() {
        let stated = |e: &Option<Expect>| e.as_ref().is_some_and(|e| e.states_anything());
        if !expects.iter().any(stated) {
            result.status = Status::Unsupported;
            result.reason = Some(format!(
                "everything this case expects ({}) is invisible in what the implementation sends",
                hidden_in(s, hidden).join(", ")
            ));
            return result;
        }
        let missed = hidden_in(s, hidden);
        if !missed.is_empty() {
            result.notes.push(format!("not compared (not visible in what it sends): {}", missed.join(", ")));
        }
    }
    let run_s = translated.as_ref().unwrap_or(s);
    let mut running = match prepare(run_s) {
        Ok(r) => r,
        Err(e) => {
            result.status = Status::Error;
            result.reason = Some(format!("harness could not build the tree: {e}"));
            return result;
        }
    };
    imp.set_case(&s.id);
    imp.lend(running.sandbox.lease());
    let whole = if imp.is_one_shot() {
        match drive_whole(imp, &mut running, run_s) {
            Ok(w) => w,
            Err(why) => {
                result.status = Status::Unsupported;
                result.reason = Some(why);
                return result;
            }
        }
    } else {
        None
    };
    // The paths an implementation may make in the tree: for an agent CLI, the touched files the
    // tree lacks, made for its read (and their folders); for anything else, none.
    let touched: Vec<String> = if imp.makes_touched_files() {
        run_s
            .steps
            .iter()
            .filter_map(|st| match &st.action {
                Action::Touch(t) => Some(format!("project/{}", t.path.strip_prefix("{root}/").unwrap_or(&t.path))),
                _ => None,
            })
            .collect()
    } else {
        Vec::new()
    };
    let allowed = |p: &str| touched.iter().any(|t| t == p || t.strip_prefix(p).is_some_and(|r| r.starts_with('/')));
    let mut left = Vec::new();
    let whole_steps = whole.as_ref().map(Vec::len);
    if whole.is_some() {
        left = running.changed(&allowed);
    }
    let mut whole = whole.map(Vec::into_iter);
    if whole.is_none() {
        let opened = imp.open(&running.open);
        left = running.changed(&allowed);
        if let Err(e) = opened {
            match refused_option(s, &e) {
                Some(m) => {
                    let action = s.steps.first().map_or("start", |st| action_name(&st.action)).to_string();
                    record(&mut result, ctx.level, 0, &action, std::slice::from_ref(&m));
                    result.steps.push(StepResult {
                        index: 0,
                        action,
                        observation: Observation::default(),
                        mismatches: vec![m],
                        micros: 0,
                    });
                }
                None => set_error(&mut result, "open", &e),
            }
            result.millis = started.elapsed().as_millis();
            return result;
        }
    }
    for (index, (step, expect)) in run_s.steps.iter().zip(&expects).enumerate() {
        let action = action_name(&step.action).to_string();
        let timed = Instant::now();
        let outcome = match whole.as_mut() {
            Some(w) => match w.next() {
                Some(o) => o,
                None => break,
            },
            None => drive(imp, &mut running, &step.action),
        };
        let waited = imp.take_wait();
        let micros = if whole.is_some() { 0 } else { waited.unwrap_or_else(|| timed.elapsed()).as_micros() };
        let obs = match outcome {
            Ok(obs) => obs,
            Err(e) => {
                set_error(&mut result, &format!("step {index} ({action})"), &e);
                break;
            }
        };
        let sandbox = running.sandbox.dir.to_string_lossy().into_owned();
        let cmp = Context { scenario: s, hello, root: &running.root_display, sandbox: &sandbox, hidden };
        let unseen;
        let expect = match expect {
            Some(e) if !imp.shows_blank_files() => {
                let (kept, blanks) = without_unseen_blanks(e, &obs);
                if !blanks.is_empty() {
                    result.notes.push(format!(
                        "step {index} ({action}): not compared: {} (blank, and a blank file sent without its name leaves nothing to see)",
                        blanks.join(", ")
                    ));
                }
                unseen = kept;
                Some(&unseen)
            }
            other => other.as_ref(),
        };
        let mut mismatches = match expect {
            Some(expect) => compare(&cmp, expect, &obs),
            None => Vec::new(),
        };
        // What the implementation changed in the tree: at open (named with the first step), in
        // this step, or, for a one-shot run, in the whole run (named with its last step).
        if whole.is_none() {
            left.extend(running.changed(&allowed));
        }
        if whole.is_none() || whole_steps == Some(index + 1) {
            mismatches.append(&mut left);
        }
        if !s.canaries.is_empty() {
            let text = serde_json::to_string(&obs).unwrap_or_default();
            for canary in s.canaries.iter().filter(|c| text.contains(c.as_str())) {
                mismatches.push(Mismatch {
                    field: "canary".into(),
                    expected: format!("'{canary}' never observed"),
                    actual: "observed (text that must never reach any observation did)".into(),
                    basis: s.canary_basis.clone().unwrap_or(Basis::Seed),
                });
            }
        }
        record(&mut result, ctx.level, index, &action, &mismatches);
        result.steps.push(StepResult { index, action, observation: obs, mismatches, micros });
    }
    if whole.is_some() {
        // A one-shot run has no open session to close.
    } else if let Err(e) = imp.close() {
        if result.status == Status::Pass {
            set_error(&mut result, "close", &e);
        }
    }
    if let Some(network) = imp.network() {
        result.notes.insert(0, format!("network: {network}"));
    }
    result.notes.extend(imp.take_notes());
    let transcript = imp.take_transcript();
    if result.status != Status::Pass || ctx.keep_transcript {
        result.transcript = transcript;
    }
    result.millis = started.elapsed().as_millis();
    result
}

/// An expectation without the parts the implementation cannot be observed to meet. Besides whole
/// expectations (`diagnostics`, `blocked`, `escaped`, `failed`, `prompt`), a section's fields are
/// hidden one by one (`section.text`, `section.rewritten`, `section.omitted`): a black box shows
/// which files' contents reached the model, not the section's wording. A section left with no
/// field is no expectation at all, except that an empty `text` (no file rendered) still says
/// which files there are: none.
fn observable(e: &Expect, hidden: &[&str]) -> Expect {
    let mut e = e.clone();
    for h in hidden {
        match *h {
            "diagnostics" => e.diagnostics.clear(),
            "blocked" => e.blocked = None,
            "escaped" => e.escaped = None,
            "failed" => e.failed = None,
            "prompt" => e.prompt = None,
            "section.text" => {
                if let Some(sec) = e.section.as_mut() {
                    if sec.text.as_deref() == Some("") && sec.files.is_none() {
                        sec.files = Some(Vec::new());
                    }
                    sec.text = None;
                }
            }
            "section.rewritten" => {
                if let Some(sec) = e.section.as_mut() {
                    sec.rewritten = None;
                }
            }
            "section.omitted" => {
                if let Some(sec) = e.section.as_mut() {
                    sec.omitted = None;
                }
            }
            _ => {}
        }
    }
    if e.section.as_ref().is_some_and(|sec| {
        sec.text.is_none() && sec.rewritten.is_none() && sec.files.is_none() && sec.omitted.is_none()
    }) {
        e.section = None;
    }
    e
}

/// `e` without the blank files it expects that `obs` does not show (for an implementation whose
/// blank files leave no trace), and their paths. A blank file is one whose expected content is
/// empty or whitespace, or whose SHA-256 is the empty text's.
fn without_unseen_blanks(e: &Expect, obs: &Observation) -> (Expect, Vec<String>) {
    let empty = reference::sha256_hex(b"");
    let blank = |content: &Option<String>, sha: &Option<String>| {
        content.as_deref().is_some_and(|c| crate::run::agent::extract::js_trim(c).is_empty())
            || sha.as_deref().is_some_and(|h| h.eq_ignore_ascii_case(&empty))
    };
    let mut dropped = Vec::new();
    // Keeps an expected file unless it is blank and `shown` lacks its path.
    let mut keep = |path: &str, content: &Option<String>, sha: &Option<String>, shown: &[&str]| {
        let unseen = blank(content, sha) && !shown.contains(&path);
        if unseen {
            dropped.push(path.to_string());
        }
        !unseen
    };
    let mut e = e.clone();
    let shown: Vec<&str> = obs.startup.iter().flatten().map(|f| f.path.as_str()).collect();
    if let Some(startup) = e.startup.as_mut() {
        startup.retain(|f| keep(&f.path, &f.content, &f.sha256, &shown));
    }
    let shown: Vec<&str> = obs.activation.iter().flat_map(|a| a.modules.iter()).map(|m| m.path.as_str()).collect();
    if let Some(modules) = e.activation.as_mut() {
        modules.retain(|m| keep(&m.path, &m.content, &m.sha256, &shown));
    }
    (e, dropped)
}

/// The hidden parts a case's steps state, in the order of [`observable`]'s names.
fn hidden_in(s: &Scenario, hidden: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in s.steps.iter().filter_map(|st| st.expect.as_ref()) {
        let sec = e.section.as_ref();
        let stated = [
            ("diagnostics", !e.diagnostics.is_empty()),
            ("blocked", e.blocked.is_some()),
            ("escaped", e.escaped.is_some()),
            ("failed", e.failed.is_some()),
            ("prompt", e.prompt.is_some()),
            ("section.text", sec.is_some_and(|x| x.text.is_some())),
            ("section.rewritten", sec.is_some_and(|x| x.rewritten.is_some())),
            ("section.omitted", sec.is_some_and(|x| x.omitted.is_some())),
        ];
        for (name, on) in stated {
            if on && hidden.contains(&name) && !out.iter().any(|o| o == name) {
                out.push(name.to_string());
            }
        }
    }
    out
}

/// Folds one step's mismatches into the result: the first seed violation decides the reason and
/// the basis, else the first difference from a decision; at `--level seed` a decision difference
/// is kept but does not fail the case.
fn record(result: &mut CaseResult, level: Level, index: usize, action: &str, mismatches: &[Mismatch]) {
    let first_seed = mismatches.iter().find(|m| m.basis == Basis::Seed);
    let first_decision = mismatches.iter().find(|m| m.basis != Basis::Seed);
    if let Some(m) = first_seed {
        if result.basis != Some(Verdict::Seed) {
            result.status = Status::Fail;
            result.basis = Some(Verdict::Seed);
            result.decision = None;
            result.reason = Some(format!("step {index} ({action}): {} differs (violates the seed)", m.field));
        }
    }
    if let Some(m) = first_decision {
        let id = m.basis.decision().unwrap_or_default().to_string();
        match level {
            Level::Seed => {
                result.decision_differences.push(format!("step {index} ({action}): {} differs from {id}", m.field))
            }
            Level::All if result.basis.is_none() => {
                result.status = Status::Fail;
                result.basis = Some(Verdict::Decision);
                result.reason = Some(format!(
                    "step {index} ({action}): {} differs from decision {id} (not from the seed)",
                    m.field
                ));
                result.decision = Some(id);
            }
            Level::All => {}
        }
    }
}

/// An option the case sets that the implementation refused to take at `open`: a difference on the
/// case's basis (the meaning the case gives that value rests on it), told at the first step. An
/// option the case does not set is no answer to it: the case is ERROR.
fn refused_option(s: &Scenario, e: &ImplError) -> Option<Mismatch> {
    let ImplError::OptionRefused { option, error } = e else { return None };
    let options = serde_json::to_value(s.options.as_ref()?).ok()?;
    let value = options.get(option).filter(|v| !v.is_null())?;
    Some(Mismatch {
        field: format!("options.{option}"),
        expected: format!("{option}: {value} taken"),
        actual: format!("refused: {}", crate::report::escape::cut(error, crate::report::escape::REASON_MAX)),
        basis: s.case_basis().unwrap_or(Basis::Seed),
    })
}

fn set_error(result: &mut CaseResult, at: &str, e: &ImplError) {
    result.fatal = matches!(e, ImplError::Fatal(_));
    result.status = match e {
        ImplError::Refused(_) | ImplError::OptionRefused { .. } => Status::Error,
        ImplError::Crash { .. } | ImplError::Fatal(_) => Status::Crash,
        ImplError::Timeout { .. } => Status::Timeout,
    };
    result.reason = Some(format!("{at}: {e}"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expect(yaml: &str) -> Expect {
        reference::yaml::from_str(yaml).unwrap()
    }

    fn observed(json: serde_json::Value) -> Observation {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn only_a_blank_file_the_observation_does_not_show_goes_uncompared() {
        let e = expect(
            "startup:\n  - {path: AGENTS.md, kind: root, content: \"\"}\n  - {path: src/AGENTS.md, content: \" \\n\"}\n  - {path: b/AGENTS.md, content: \"x\"}\n",
        );
        let sha = |c: &str| reference::sha256_hex(c.as_bytes());
        let file = |p: &str, c: &str| serde_json::json!({"path": p, "kind": "root", "sha256": sha(c), "content": c});
        // Nothing shown: both blank files go, the file with text stays (and then mismatches).
        let (kept, dropped) = without_unseen_blanks(&e, &observed(serde_json::json!({"startup": []})));
        assert_eq!(dropped, ["AGENTS.md", "src/AGENTS.md"]);
        assert_eq!(kept.startup.unwrap().iter().map(|f| f.path.as_str()).collect::<Vec<_>>(), ["b/AGENTS.md"]);
        // A blank file the observation shows is compared like any other.
        let obs = observed(serde_json::json!({"startup": [file("AGENTS.md", "")]}));
        let (kept, dropped) = without_unseen_blanks(&e, &obs);
        assert_eq!(dropped, ["src/AGENTS.md"]);
        assert_eq!(kept.startup.unwrap().len(), 2);
        // Modules by their SHA-256 alone.
        let e = expect(&format!("activation:\n  - {{path: .elowen/rules/a.md, sha256: {}}}\n", sha("")));
        let (kept, dropped) = without_unseen_blanks(&e, &observed(serde_json::json!({})));
        assert_eq!(dropped, [".elowen/rules/a.md"]);
        assert_eq!(kept.activation.map(|a| a.len()), Some(0));
    }

    /// A black box that answers every `next_request` with a section of these files, and hides
    /// what an agent CLI hides.
    struct BlackBox {
        files: Vec<String>,
    }

    impl Implementation for BlackBox {
        fn hello(&mut self) -> Result<Hello, ImplError> {
            Ok(crate::run::driver::reference_hello())
        }
        fn open(&mut self, _open: &OpenCase) -> Result<Observation, ImplError> {
            Ok(Observation::default())
        }
        fn step(&mut self, op: &StepOp) -> Result<Observation, ImplError> {
            let section = matches!(op, StepOp::NextRequest { .. }).then(|| crate::run::wire::WireSection {
                text: String::new(),
                rewritten: false,
                files: self.files.clone(),
                omitted: Vec::new(),
            });
            Ok(Observation { section, ..Observation::default() })
        }
        fn restart(&mut self, _open: &OpenCase) -> Result<Observation, ImplError> {
            Ok(Observation::default())
        }
        fn close(&mut self) -> Result<(), ImplError> {
            Ok(())
        }
        fn unobservable(&self) -> &'static [&'static str] {
            &["diagnostics", "prompt", "section.text", "section.rewritten", "section.omitted"]
        }
    }

    /// A section case whose `next_request` expects `section`.
    fn case(section: &str) -> Case {
        let text = format!(
            "id: s-x-001\ntitle: t\nspec:\n  - seed: '002'\n    heading: Discovery\n    quote: q\n\
             profile: section\nplatform: posix\nrules: [section_discovery]\ntree:\n  .git: {{dir: true}}\n  \
             AGENTS.md: \"# Root\\n\"\n  pkg/AGENTS.md: \"# Pkg\\n\"\nsteps:\n  - start:\n  - next_request:\n    \
             expect:\n      section: {section}\n"
        );
        let scenario = match crate::case::load::parse(&text) {
            Ok(s) => s,
            Err(e) => panic!("{e:?}"),
        };
        Case { file: "s-x-001.yaml".into(), name: "section/discovery/001-x".into(), scenario, text }
    }

    fn run(section: &str, files: &[&str]) -> CaseResult {
        let hello = crate::run::driver::reference_hello();
        let mut imp = BlackBox { files: files.iter().map(|f| f.to_string()).collect() };
        run_case(&mut imp, &RunContext::new(&hello), &case(section))
    }

    #[test]
    fn a_section_expecting_only_hidden_fields_is_unsupported_naming_them() {
        let got = run("{text: \"{intro}\", rewritten: true, omitted: []}", &["AGENTS.md"]);
        assert_eq!(got.status, Status::Unsupported, "{got:?}");
        let reason = got.reason.unwrap_or_default();
        assert!(reason.contains("(section.text, section.rewritten, section.omitted) is invisible"), "{reason}");
    }

    #[test]
    fn only_the_files_of_a_section_are_compared_and_the_rest_noted() {
        // The observed text is empty: its headers facet would fail it if it were checked.
        let got = run(
            "{text: \"whatever\", rewritten: true, files: [AGENTS.md, pkg/AGENTS.md]}",
            &["AGENTS.md", "pkg/AGENTS.md"],
        );
        assert_eq!(got.status, Status::Pass, "{got:?}");
        assert!(
            got.notes
                .iter()
                .any(|n| n == "not compared (not visible in what it sends): section.text, section.rewritten"),
            "{:?}",
            got.notes
        );
    }

    #[test]
    fn a_section_in_the_wrong_order_fails_on_its_files() {
        let got = run("{rewritten: true, files: [AGENTS.md, pkg/AGENTS.md]}", &["pkg/AGENTS.md", "AGENTS.md"]);
        assert_eq!(got.status, Status::Fail, "{got:?}");
        assert_eq!(got.reason.as_deref(), Some("step 1 (next_request): section.files differs (violates the seed)"));
    }

    #[test]
    fn an_empty_section_text_still_expects_no_file() {
        let got = run("{text: \"\"}", &["AGENTS.md"]);
        assert_eq!(got.status, Status::Fail, "{got:?}");
        assert!(run("{text: \"\"}", &[]).status == Status::Pass);
    }
}
