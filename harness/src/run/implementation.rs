//! What the harness drives: an [`Implementation`] opens a case, runs its steps and restarts. The
//! reference runs in-process ([`InProcess`]); any other implementation runs behind the adapter
//! protocol (`ProcessAdapter`, in the adapter module, which implements this trait and so is not
//! linked from here).

use crate::run::driver::Driver;
use crate::run::wire::{Hello, Observation, OpenCase, ScriptStep, StepOp};

/// How a request to an implementation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImplError {
    /// The implementation answered the request with an error: the case is ERROR.
    Refused(String),
    /// The implementation does not take the value the case sets for one of its options
    /// (`refused_option` in an `open` reply): a difference on the case's basis, not an ERROR,
    /// where the case sets that option.
    OptionRefused {
        /// The option, as the case names it (`max_nested_dirs`).
        option: String,
        /// Why, in the implementation's words.
        error: String,
    },
    /// The process exited, or wrote something that is not a reply: the case is CRASH.
    Crash {
        /// What went wrong.
        reason: String,
        /// The last lines of its stderr.
        stderr: String,
    },
    /// No reply within the step timeout: the case is TIMEOUT.
    Timeout {
        /// The last lines of its stderr.
        stderr: String,
    },
    /// The implementation cannot be used at all (it cannot be started, refused `hello`, or
    /// crashed or timed out more often than allowed): the run ends with exit code 2.
    Fatal(String),
}

impl std::fmt::Display for ImplError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ImplError::Refused(m) => write!(f, "implementation error: {m}"),
            ImplError::OptionRefused { option, error } => write!(f, "implementation refused option {option}: {error}"),
            ImplError::Crash { reason, stderr } => write!(f, "crash: {reason}\nstderr tail:\n{stderr}"),
            ImplError::Timeout { stderr } => write!(f, "timeout\nstderr tail:\n{stderr}"),
            ImplError::Fatal(m) => write!(f, "fatal: {m}"),
        }
    }
}

/// An implementation under test.
pub trait Implementation {
    /// `hello`: name, version, language, profiles and features.
    fn hello(&mut self) -> Result<Hello, ImplError>;
    /// Opens a case (`open.resume` is false).
    fn open(&mut self, open: &OpenCase) -> Result<Observation, ImplError>;
    /// Runs one step of the open case.
    fn step(&mut self, op: &StepOp) -> Result<Observation, ImplError>;
    /// Restarts: the session is dropped (for a process, the process is killed and started again)
    /// and the case is opened again with `open.resume` true and the same state directory.
    fn restart(&mut self, open: &OpenCase) -> Result<Observation, ImplError>;
    /// Closes the case.
    fn close(&mut self) -> Result<(), ImplError>;
    /// Tells the implementation which case comes next (for its logs). The default ignores it.
    fn set_case(&mut self, _id: &str) {}
    /// Hands the implementation a share in the next case's directories, which it keeps while it
    /// may still write in them: the case's sandbox is removed only when the share is gone too.
    /// The default drops it (a process adapter is killed before its sandbox is removed).
    fn lend(&mut self, _lease: Option<crate::case::tree::Lease>) {}
    /// For an implementation that runs a case in a dialect of its own (an agent CLI reads
    /// `CLAUDE.md` where the case has `AGENTS.md`): the case as it runs there, or why it cannot
    /// (the case is UNSUPPORTED with that reason). The case's expectations are compared as
    /// written; the implementation translates what it observes back. The default runs the case as
    /// it is.
    fn translate(
        &mut self,
        _case: &crate::case::scenario::Scenario,
    ) -> Result<Option<crate::case::scenario::Scenario>, String> {
        Ok(None)
    }
    /// The expectations this implementation cannot be observed to meet (a black box shows no
    /// diagnostics): they are not compared, and the result says so. A case that expects nothing
    /// else is UNSUPPORTED. The default is none.
    fn unobservable(&self) -> &'static [&'static str] {
        &[]
    }
    /// How long the step just run waited on the implementation itself, where that is less than
    /// the step's time (an agent CLI: from its launch, or the fake model's answer, to its next
    /// model request, without the harness's reading of that request). The default is none: the
    /// step's time is the implementation's.
    fn take_wait(&mut self) -> Option<std::time::Duration> {
        None
    }
    /// Notes on the case just run, for every report and never compared (where an agent CLI put
    /// each file's text). The default is none.
    fn take_notes(&mut self) -> Vec<String> {
        Vec::new()
    }
    /// The raw exchange of the case just closed (an agent CLI's requests and the scripted
    /// replies), kept for a case that does not pass. The default is none.
    fn take_transcript(&mut self) -> Option<String> {
        None
    }
    /// Whether a blank file it sends always shows. An agent CLI is read by the text it sends: one
    /// that sends a file's text without its name leaves nothing to see of a blank file, so an
    /// expected blank file its observation does not show is not compared (the result notes it),
    /// and one it shows is (recipe `dialect.names_files`). The default is true.
    fn shows_blank_files(&self) -> bool {
        true
    }
    /// Whether it makes a touched file the tree lacks before it reads it (an agent CLI's read of a
    /// missing file fails, so the runner makes it): those paths and their folders may appear in
    /// the tree (D-TREE-1). The default is false.
    fn makes_touched_files(&self) -> bool {
        false
    }
    /// How the implementation's network is confined, for the report. The default is none (not
    /// a networked implementation).
    fn network(&self) -> Option<String> {
        None
    }
    /// Whether the implementation takes a whole case at once ([`Implementation::run_whole`])
    /// rather than step by step. The default is false.
    fn is_one_shot(&self) -> bool {
        false
    }
    /// Runs a whole case at once: one observation per script step. Only one-shot
    /// implementations answer; the default is `None`.
    fn run_whole(
        &mut self,
        _case: &str,
        _open: &OpenCase,
        _steps: &[ScriptStep],
    ) -> Option<Result<Vec<Observation>, ImplError>> {
        None
    }
}

pub use crate::run::driver::reference_hello;

/// The reference, in-process, on a worker thread of its own so that a step has the same timeout
/// as an adapter's: a step that does not finish in time is a TIMEOUT, the worker is abandoned
/// (a thread cannot be killed; it ends by itself when its step does) and the next case gets a new
/// one. The default timeout is 10 s.
#[derive(Debug)]
pub struct InProcess {
    worker: Option<Worker>,
    timeout: std::time::Duration,
    /// The open case's directories, lent to every job: a worker abandoned at a timeout keeps
    /// them until its step ends, so it never writes where they were (issue 21).
    lease: Option<crate::case::tree::Lease>,
}

impl Default for InProcess {
    fn default() -> Self {
        InProcess::with_timeout(std::time::Duration::from_secs(10))
    }
}

#[derive(Debug)]
enum Job {
    Open(OpenCase),
    Step(StepOp),
    Restart(OpenCase),
    Close,
}

#[derive(Debug)]
struct Worker {
    jobs: std::sync::mpsc::Sender<(Job, Option<crate::case::tree::Lease>)>,
    done: std::sync::mpsc::Receiver<Result<Observation, String>>,
}

impl Worker {
    fn start() -> Worker {
        let (jobs, job_rx) = std::sync::mpsc::channel::<(Job, Option<crate::case::tree::Lease>)>();
        let (done_tx, done) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut driver: Option<Driver> = None;
            for (job, lease) in job_rx {
                let out = match job {
                    Job::Open(open) => Driver::open(open).map(|(d, obs)| {
                        driver = Some(d);
                        obs
                    }),
                    Job::Step(op) => match driver.as_mut() {
                        Some(d) => d.step(&op),
                        None => Err("no open case".into()),
                    },
                    // In-process, a restart is the session dropped and resumed from the same
                    // state directory, with the tree as it is now.
                    Job::Restart(open) => match driver.as_mut() {
                        Some(d) => d.restart(),
                        None => Driver::open(open).map(|(d, obs)| {
                            driver = Some(d);
                            obs
                        }),
                    },
                    Job::Close => {
                        driver = None;
                        Ok(Observation::default())
                    }
                };
                // The job's directories may go once its step has ended.
                drop(lease);
                if done_tx.send(out).is_err() {
                    return;
                }
            }
        });
        Worker { jobs, done }
    }
}

impl InProcess {
    /// The reference in-process, each step bounded by `timeout`.
    pub fn with_timeout(timeout: std::time::Duration) -> InProcess {
        InProcess { worker: None, timeout, lease: None }
    }

    fn run(&mut self, job: Job) -> Result<Observation, ImplError> {
        let worker = self.worker.get_or_insert_with(Worker::start);
        if worker.jobs.send((job, self.lease.clone())).is_err() {
            self.worker = None;
            return Err(ImplError::Crash { reason: "the in-process worker is gone".into(), stderr: String::new() });
        }
        match worker.done.recv_timeout(self.timeout) {
            Ok(out) => out.map_err(ImplError::Refused),
            Err(_) => {
                self.worker = None;
                Err(ImplError::Timeout {
                    stderr: format!(
                        "the reference did not finish the step in {} s (in-process)",
                        self.timeout.as_secs_f64()
                    ),
                })
            }
        }
    }
}

impl Implementation for InProcess {
    fn hello(&mut self) -> Result<Hello, ImplError> {
        Ok(reference_hello())
    }

    fn open(&mut self, open: &OpenCase) -> Result<Observation, ImplError> {
        self.run(Job::Open(open.clone()))
    }

    fn step(&mut self, op: &StepOp) -> Result<Observation, ImplError> {
        self.run(Job::Step(op.clone()))
    }

    fn restart(&mut self, open: &OpenCase) -> Result<Observation, ImplError> {
        self.run(Job::Restart(open.clone()))
    }

    fn close(&mut self) -> Result<(), ImplError> {
        if self.worker.is_none() {
            self.lease = None;
            return Ok(());
        }
        let closed = self.run(Job::Close).map(drop);
        self.lease = None;
        closed
    }
    fn lend(&mut self, lease: Option<crate::case::tree::Lease>) {
        self.lease = lease;
    }
}

/// Checks a `hello` against the vocabulary: every profile and capability it declares must be
/// known, and a rule is not a capability. The error names the unknown word and the nearest known
/// one, so that a misspelt capability cannot silently turn every case into UNSUPPORTED.
pub fn validate_hello(hello: &Hello) -> Result<(), String> {
    let mut problems = Vec::new();
    for p in &hello.profiles {
        if let Err(e) = crate::case::load::check_profile(p) {
            problems.push(format!("profile {e}"));
        }
    }
    let capabilities = crate::case::vocabulary::capabilities();
    for c in &hello.capabilities {
        if capabilities.contains_key(c) {
            continue;
        }
        if crate::case::vocabulary::is_rule(c) {
            problems.push(format!(
                "'{c}' is a rule, not a capability: rules (confinement, the cap, ordering, ...) cannot be declared away"
            ));
            continue;
        }
        let hint = crate::case::vocabulary::nearest(c, capabilities.keys().map(String::as_str))
            .map(|n| format!(" (did you mean '{n}'?)"))
            .unwrap_or_default();
        problems.push(format!("capability '{c}' is not in the vocabulary{hint}"));
    }
    for code in hello.codes.keys() {
        if !reference::Code::ALL.iter().any(|k| k.as_str() == code) {
            problems.push(format!("codes: '{code}' is not one of the suite's diagnostic codes"));
        }
    }
    if hello.profiles.is_empty() {
        problems.push("it declares no profile".into());
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("hello from '{}' is not valid: {}", hello.name, problems.join("; ")))
    }
}

/// What the command line says of an implementation's support, applied over its `hello`: a
/// one-shot adapter has no `hello`, so this is how it declares what it implements, and any
/// adapter can be run on less than it declares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Declared {
    /// The profiles it implements, instead of the declared ones.
    pub profiles: Option<Vec<String>>,
    /// The capabilities it has, instead of the declared ones.
    pub capabilities: Option<Vec<String>>,
    /// Capabilities taken away from what it declares.
    pub exclude: Vec<String>,
}

impl Declared {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == Declared::default()
    }

    /// `hello` as the command line has it.
    pub fn apply(&self, mut hello: Hello) -> Hello {
        if let Some(p) = &self.profiles {
            hello.profiles.clone_from(p);
        }
        if let Some(c) = &self.capabilities {
            hello.capabilities.clone_from(c);
        }
        hello.capabilities.retain(|c| !self.exclude.contains(c));
        hello
    }
}

/// An implementation whose `hello` is [`Declared`] over.
pub struct WithDeclared {
    /// The implementation.
    pub inner: Box<dyn Implementation + Send>,
    /// What the command line declares.
    pub declared: Declared,
}

impl Implementation for WithDeclared {
    fn hello(&mut self) -> Result<Hello, ImplError> {
        self.inner.hello().map(|h| self.declared.apply(h))
    }
    fn open(&mut self, open: &OpenCase) -> Result<Observation, ImplError> {
        self.inner.open(open)
    }
    fn step(&mut self, op: &StepOp) -> Result<Observation, ImplError> {
        self.inner.step(op)
    }
    fn restart(&mut self, open: &OpenCase) -> Result<Observation, ImplError> {
        self.inner.restart(open)
    }
    fn close(&mut self) -> Result<(), ImplError> {
        self.inner.close()
    }
    fn set_case(&mut self, id: &str) {
        self.inner.set_case(id);
    }
    fn lend(&mut self, lease: Option<crate::case::tree::Lease>) {
        self.inner.lend(lease);
    }
    fn translate(
        &mut self,
        case: &crate::case::scenario::Scenario,
    ) -> Result<Option<crate::case::scenario::Scenario>, String> {
        self.inner.translate(case)
    }
    fn unobservable(&self) -> &'static [&'static str] {
        self.inner.unobservable()
    }
    fn take_wait(&mut self) -> Option<std::time::Duration> {
        self.inner.take_wait()
    }
    fn take_notes(&mut self) -> Vec<String> {
        self.inner.take_notes()
    }
    fn take_transcript(&mut self) -> Option<String> {
        self.inner.take_transcript()
    }
    fn shows_blank_files(&self) -> bool {
        self.inner.shows_blank_files()
    }
    fn makes_touched_files(&self) -> bool {
        self.inner.makes_touched_files()
    }
    fn network(&self) -> Option<String> {
        self.inner.network()
    }
    fn is_one_shot(&self) -> bool {
        self.inner.is_one_shot()
    }
    fn run_whole(
        &mut self,
        case: &str,
        open: &OpenCase,
        steps: &[ScriptStep],
    ) -> Option<Result<Vec<Observation>, ImplError>> {
        self.inner.run_whole(case, open, steps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::scenario::TreeValue;
    use crate::case::tree::Sandbox;
    use std::time::{Duration, Instant};

    #[test]
    fn a_worker_abandoned_at_a_timeout_keeps_its_sandbox_until_its_step_ends_and_never_makes_it_again() {
        // Issue 21: the sandbox used to be removed at the timeout, and the abandoned worker's
        // step then made its state directory again at the freed name (following whatever stood
        // there by then in the shared temporary directory).
        let sandbox = Sandbox::new().unwrap();
        sandbox.put("AGENTS.md", &TreeValue::File(b"# r\n".to_vec())).unwrap();
        for i in 0..2000 {
            let module = format!("---\npaths: [\"src/{i}/**\"]\n---\nm\n");
            sandbox.put(&format!(".elowen/rules/m{i}.md"), &TreeValue::File(module.into_bytes())).unwrap();
        }
        let (dir, state) = (sandbox.dir.clone(), sandbox.state_dir());
        let open: OpenCase = serde_json::from_value(serde_json::json!({
            "profile": "modules", "platform": "posix",
            "root": sandbox.project.to_string_lossy(), "state_dir": state.to_string_lossy(),
        }))
        .unwrap();
        let mut imp = InProcess::with_timeout(Duration::from_secs(30));
        imp.lend(sandbox.lease());
        imp.open(&open).unwrap();
        // No step ends in no time: the start (a discovery, a journal made and synced) times out.
        imp.timeout = Duration::ZERO;
        assert!(matches!(imp.step(&StepOp::Start), Err(ImplError::Timeout { .. })));
        imp.close().unwrap();
        drop(sandbox);
        // A discovery of 2,000 modules and a synced journal take milliseconds, the drop none.
        assert!(dir.exists() && state.parent().unwrap().exists(), "removed while its abandoned worker still ran");
        // The worker ends its step in directories that still exist, and they go with its lease.
        let deadline = Instant::now() + Duration::from_secs(30);
        while (dir.exists() || state.exists()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!dir.exists() && !state.exists(), "the sandbox outlived the abandoned worker's step");
        std::thread::sleep(Duration::from_millis(200));
        assert!(!dir.exists() && !state.parent().unwrap().exists(), "a directory was made again at a freed name");
    }
}
