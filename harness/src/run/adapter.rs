//! The harness's side of the adapter protocol (harness/PROTOCOL.md): the wire envelopes, from which
//! harness/protocol.schema.json is generated; [`ProcessAdapter`], which drives an implementation's
//! persistent process over JSON Lines; and [`run_one_shot`], for adapters that take a whole case
//! at once. A process that crashes, hangs or writes garbage is killed, the request fails with
//! CRASH or TIMEOUT and its stderr tail, and the next request starts the process again.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use crate::run::implementation::{ImplError, Implementation};
pub use crate::run::wire::{
    protocol_schema, OneShotReply, OneShotRequest, Reply, Request, ScriptStep, PROTOCOL_VERSION,
};
use crate::run::wire::{Hello, Observation, OpenCase, StepOp};

/// The longest reply line (and the longest one-shot output) the harness reads: 16 MiB. A longer
/// one is a CRASH, so that a runaway implementation cannot exhaust the harness's memory.
pub const MAX_REPLY_BYTES: usize = 16 << 20;

/// How many stdout lines may wait unread: a reply and a few extra lines that prove the process
/// wrote more than it was asked for.
const EVENT_QUEUE: usize = 4;
/// How many stderr lines a CRASH or TIMEOUT reports.
const STDERR_TAIL_LINES: usize = 40;
/// Longer stderr lines are cut, so the tail stays within 40 KiB.
const STDERR_LINE_MAX: usize = 1024;
/// How long to wait for the rest of stderr once the process is gone. A grandchild that escaped
/// the kill may hold stderr open for ever; the tail must not wait for it.
const STDERR_DRAIN: Duration = Duration::from_millis(300);
/// How long a process gets to exit by itself after it closed stdout (so that its exit status can
/// be reported) or after the harness closed its stdin (the end of a run).
const EXIT_GRACE: Duration = Duration::from_millis(200);

/// An environment variable the harness puts in its own environment and every adapter's, whose
/// value is a canary: a case that links a file to `/proc/self/environ` lists the value, so an
/// implementation that reads its environment into a prompt fails it.
pub const ENV_CANARY: (&str, &str) = ("CONFORMANCE_ENV_CANARY", "CANARY-ENVIRONMENT-5e1f0c");

/// Puts [`ENV_CANARY`] into this process's environment. Call it first thing in `main`, before any
/// thread starts.
pub fn export_env_canary() {
    std::env::set_var(ENV_CANARY.0, ENV_CANARY.1);
}

/// Quotes `s` as one word for `sh`, e.g. to put a path into an adapter command.
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Finds `reference-adapter` next to the running executable: in `target/<profile>/`, which is
/// also the parent of a test binary's `target/<profile>/deps/`.
///
/// Under cargo (`CARGO` is set, as in `cargo test` and `cargo run`) it is built first with
/// `cargo build -p harness --bin reference-adapter`, because `cargo test -p harness` does not
/// build another package's binaries and a stale one would test old code; elsewhere it is built
/// only when missing. The build runs once per process.
pub fn reference_adapter_path() -> Result<PathBuf, String> {
    static PATH: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    PATH.get_or_init(locate_reference_adapter).clone()
}

fn locate_reference_adapter() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate the running executable: {e}"))?;
    let mut dir = exe.parent().ok_or("the running executable has no directory")?.to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let path = dir.join(format!("reference-adapter{}", std::env::consts::EXE_SUFFIX));
    let cargo = std::env::var_os("CARGO");
    if cargo.is_none() && path.is_file() {
        return Ok(path);
    }
    // Build it only into the Cargo target folder the running program came from (one Cargo marked
    // with its CACHEDIR.TAG), from the source tree it was built in: a copy of `conformance` in
    // /usr/local/bin must not make Cargo write to /usr/local.
    let from_target = dir.parent().is_some_and(|t| t.join("CACHEDIR.TAG").is_file());
    if !from_target || !Path::new(env!("CARGO_MANIFEST_DIR")).is_dir() {
        return Err(format!(
            "reference-adapter is not beside {} (install it with conformance, or build it with `cargo build -p harness \
             --bin reference-adapter` and run conformance from the target folder)",
            exe.display()
        ));
    }
    let mut build = Command::new(cargo.unwrap_or_else(|| "cargo".into()));
    build.args(["build", "--quiet", "-p", "harness", "--bin", "reference-adapter"]);
    build.current_dir(env!("CARGO_MANIFEST_DIR"));
    match dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => {}
        Some("release") => {
            build.arg("--release");
        }
        Some(profile) => {
            build.args(["--profile", profile]);
        }
    }
    // The binary must land where it is looked for, whatever the target directory is called.
    if let Some(target_dir) = dir.parent() {
        build.env("CARGO_TARGET_DIR", target_dir);
    }
    let out = build.output().map_err(|e| format!("cannot run cargo to build reference-adapter: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "building reference-adapter failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!("reference-adapter is not at '{}' after building it", path.display()))
    }
}

/// An implementation behind the persistent mode of the protocol: one process, started lazily,
/// that answers one request after another.
///
/// A CRASH or TIMEOUT kills the process; the next `hello`, `open` or `restart` starts it again
/// and counts a restart ([`ProcessAdapter::restarts`]). Once that would exceed `max_restarts`,
/// every request fails with [`ImplError::Fatal`], and the runner ends the run with exit code 2.
/// Restarts that a case asks for are not counted.
#[derive(Debug)]
pub struct ProcessAdapter {
    command: String,
    home: PathBuf,
    timeout: Duration,
    max_restarts: u32,
    restarts: u32,
    seq: u64,
    case: String,
    proc: Option<Proc>,
    hello: Option<Hello>,
    /// The process was killed for a crash or timeout, so starting it again counts.
    crashed: bool,
    /// Every line exchanged, when recording: `> ` request, `< ` reply.
    transcript: Option<Vec<String>>,
}

impl ProcessAdapter {
    /// An adapter that runs `sh -c <command>` with `HOME` set to `home` (a fake, empty directory)
    /// and `XDG_CONFIG_HOME` removed, and waits up to `timeout` for each reply. Nothing starts
    /// until the first request.
    pub fn new(command: impl Into<String>, home: impl Into<PathBuf>, timeout: Duration, max_restarts: u32) -> Self {
        ProcessAdapter {
            command: command.into(),
            home: home.into(),
            timeout,
            max_restarts,
            restarts: 0,
            seq: 0,
            case: String::new(),
            proc: None,
            hello: None,
            crashed: false,
            transcript: None,
        }
    }

    /// Records every line exchanged from now on (see [`ProcessAdapter::transcript`]).
    pub fn record(&mut self) {
        self.transcript = Some(Vec::new());
    }

    /// The lines exchanged since [`ProcessAdapter::record`]: `> {request}` and `< {reply}`, in
    /// order, each as sent.
    pub fn transcript(&self) -> &[String] {
        self.transcript.as_deref().unwrap_or_default()
    }

    /// How many times the process was started again after a crash or timeout.
    pub fn restarts(&self) -> u32 {
        self.restarts
    }

    /// Sets the case id that the next `open` sends (it is only for the implementation's logs).
    /// The default is empty.
    pub fn set_case(&mut self, id: impl Into<String>) {
        self.case = id.into();
    }

    /// Starts the process and says `hello`, unless it is running.
    fn ensure_running(&mut self) -> Result<(), ImplError> {
        if self.proc.is_some() {
            return Ok(());
        }
        if self.crashed {
            if self.restarts >= self.max_restarts {
                return Err(ImplError::Fatal(format!(
                    "'{}' crashed or timed out {} times (the limit is {} restarts)",
                    self.command,
                    self.restarts + 1,
                    self.max_restarts
                )));
            }
            self.restarts += 1;
        }
        self.proc = Some(Proc::start(&self.command, &self.home)?);
        self.crashed = false;
        let reply = match self.exchange(|seq| Request::Hello { seq, protocol: PROTOCOL_VERSION.into() }) {
            Ok(reply) => reply,
            Err(ImplError::Refused(e)) => {
                self.stop();
                return Err(ImplError::Fatal(format!("'{}' refused hello: {e}", self.command)));
            }
            Err(e) => return Err(e),
        };
        match reply.hello {
            Some(hello) => {
                self.hello = Some(hello);
                Ok(())
            }
            None => Err(self.fail(Failure::Garbage("the reply to hello has no 'hello'".into()))),
        }
    }

    /// Sends one request and reads its reply; `ok: false` is [`ImplError::Refused`], anything
    /// that is not the reply kills the process.
    fn exchange(&mut self, request: impl FnOnce(u64) -> Request) -> Result<Reply, ImplError> {
        self.seq += 1;
        let seq = self.seq;
        let mut line =
            serde_json::to_vec(&request(seq)).map_err(|e| ImplError::Fatal(format!("cannot encode a request: {e}")))?;
        line.push(b'\n');
        // Only `step` and `close` get here without a process, and a process that is not running
        // has no case open.
        let Some(proc) = self.proc.as_mut() else {
            return Err(ImplError::Refused("no case is open (the implementation's process is not running)".into()));
        };
        if let Some(t) = self.transcript.as_mut() {
            t.push(format!("> {}", String::from_utf8_lossy(line.strip_suffix(b"\n").unwrap_or(&line))));
        }
        let outcome = proc.round_trip(line, self.timeout);
        let bytes = outcome.map_err(|f| self.fail(f))?;
        if let Some(t) = self.transcript.as_mut() {
            t.push(format!("< {}", String::from_utf8_lossy(bytes.strip_suffix(b"\n").unwrap_or(&bytes))));
        }
        let reply: Reply = match serde_json::from_slice(&bytes) {
            Ok(reply) => reply,
            Err(e) => {
                return Err(self.fail(Failure::Garbage(format!("'{}' is not a reply ({e})", preview(&bytes)))));
            }
        };
        if reply.seq != Some(seq) {
            let got = reply.seq.map_or("null".to_string(), |s| s.to_string());
            let error = reply.error.map(|e| format!(": {e}")).unwrap_or_default();
            return Err(self.fail(Failure::Garbage(format!("a reply with seq {got} to request {seq}{error}"))));
        }
        if !reply.ok {
            let error = reply.error.unwrap_or_else(|| "failed without an error message".into());
            return Err(match reply.refused_option {
                Some(option) => ImplError::OptionRefused {
                    option: crate::report::escape::cut(&option, crate::report::escape::FIELD_MAX).into_owned(),
                    error,
                },
                None => ImplError::Refused(error),
            });
        }
        Ok(reply)
    }

    /// [`Self::exchange`] for a request whose reply must carry an observation.
    fn observe(&mut self, request: impl FnOnce(u64) -> Request) -> Result<Observation, ImplError> {
        match self.exchange(request)?.observation {
            Some(observation) => Ok(observation),
            None => Err(self.fail(Failure::Garbage("the reply has no 'observation'".into()))),
        }
    }

    /// Kills the process for a failure and says what happened.
    fn fail(&mut self, failure: Failure) -> ImplError {
        self.crashed = true;
        self.hello = None;
        let grace = if matches!(failure, Failure::Gone(_)) { EXIT_GRACE } else { Duration::ZERO };
        let (stopped, stderr) = match self.proc.take() {
            Some(mut proc) => (proc.stop(grace), proc.stderr.text()),
            None => (Stopped::Killed, String::new()),
        };
        match failure {
            Failure::Timeout => ImplError::Timeout { stderr },
            Failure::Garbage(reason) => ImplError::Crash { reason, stderr },
            Failure::Gone(reason) => ImplError::Crash { reason: format!("{reason} ({stopped})"), stderr },
        }
    }

    /// Kills the process, if one is running, without counting it as a crash.
    fn stop(&mut self) {
        if let Some(mut proc) = self.proc.take() {
            proc.stop(Duration::ZERO);
        }
        self.hello = None;
    }
}

impl Implementation for ProcessAdapter {
    fn set_case(&mut self, id: &str) {
        self.case = id.to_string();
    }

    fn hello(&mut self) -> Result<Hello, ImplError> {
        self.ensure_running()?;
        self.hello.clone().ok_or_else(|| ImplError::Fatal("no hello after starting the process".into()))
    }

    fn open(&mut self, open: &OpenCase) -> Result<Observation, ImplError> {
        self.ensure_running()?;
        let case = self.case.clone();
        self.observe(|seq| Request::Open { seq, case, open: open.clone() })
    }

    /// A step never starts the process: if it died earlier in the case, the case is gone with it.
    fn step(&mut self, op: &StepOp) -> Result<Observation, ImplError> {
        self.observe(|seq| Request::Step { seq, step: op.clone() })
    }

    /// Kills the process, starts it again and opens the case with `resume` true.
    fn restart(&mut self, open: &OpenCase) -> Result<Observation, ImplError> {
        self.stop();
        self.ensure_running()?;
        let case = self.case.clone();
        let open = OpenCase { resume: true, ..open.clone() };
        self.observe(|seq| Request::Open { seq, case, open })
    }

    /// Closing without a running process succeeds: no case is open in it.
    fn close(&mut self) -> Result<(), ImplError> {
        if self.proc.is_none() {
            return Ok(());
        }
        self.exchange(|seq| Request::Close { seq }).map(drop)
    }
}

impl Drop for ProcessAdapter {
    /// Closes stdin, which is the end of the conversation, and kills the process if it has not
    /// exited within [`EXIT_GRACE`].
    fn drop(&mut self) {
        if let Some(mut proc) = self.proc.take() {
            proc.stop(EXIT_GRACE);
        }
    }
}

/// An implementation in the one-shot mode: [`run_one_shot`] once per case. The mode has no
/// `hello`, so it is taken to implement every profile and capability of the built-in vocabulary,
/// with no default texts and none of the suite's codes; a case it cannot handle is a FAIL or an
/// ERROR, never UNSUPPORTED.
#[derive(Debug, Clone)]
pub struct OneShotAdapter {
    command: String,
    home: PathBuf,
    timeout: Duration,
}

impl OneShotAdapter {
    /// `timeout` bounds each whole case.
    pub fn new(command: impl Into<String>, home: impl Into<PathBuf>, timeout: Duration) -> Self {
        OneShotAdapter { command: command.into(), home: home.into(), timeout }
    }
}

impl Implementation for OneShotAdapter {
    fn hello(&mut self) -> Result<Hello, ImplError> {
        Ok(Hello {
            name: self.command.clone(),
            version: "unknown".into(),
            language: "unknown".into(),
            profiles: crate::case::load::PROFILES.iter().map(|p| p.to_string()).collect(),
            capabilities: crate::case::vocabulary::capabilities().into_keys().collect(),
            defaults: crate::run::wire::Defaults::default(),
            codes: std::collections::BTreeMap::new(),
        })
    }

    fn open(&mut self, _open: &OpenCase) -> Result<Observation, ImplError> {
        Err(ImplError::Refused("a one-shot adapter runs whole cases only".into()))
    }

    fn step(&mut self, _op: &StepOp) -> Result<Observation, ImplError> {
        Err(ImplError::Refused("a one-shot adapter runs whole cases only".into()))
    }

    fn restart(&mut self, _open: &OpenCase) -> Result<Observation, ImplError> {
        Err(ImplError::Refused("a one-shot adapter runs whole cases only".into()))
    }

    fn close(&mut self) -> Result<(), ImplError> {
        Ok(())
    }

    fn is_one_shot(&self) -> bool {
        true
    }

    fn run_whole(
        &mut self,
        case: &str,
        open: &OpenCase,
        steps: &[ScriptStep],
    ) -> Option<Result<Vec<Observation>, ImplError>> {
        Some(run_one_shot(&self.command, &self.home, case, open, steps, self.timeout))
    }
}

/// Runs a case in the one-shot mode: `sh -c <command>` (with the same environment as
/// [`ProcessAdapter`]) gets the whole case as one JSON object on stdin and prints one
/// [`OneShotReply`] on stdout.
///
/// `timeout` bounds the whole run, from start to exit. The result is one observation per step;
/// a non-zero exit status, output that is not a reply or the wrong number of observations is a
/// CRASH, a reply with `error` is [`ImplError::Refused`].
pub fn run_one_shot(
    command: &str,
    home: &Path,
    case: &str,
    open: &OpenCase,
    steps: &[ScriptStep],
    timeout: Duration,
) -> Result<Vec<Observation>, ImplError> {
    let deadline = Instant::now() + timeout;
    let request = OneShotRequest {
        protocol: PROTOCOL_VERSION.into(),
        case: case.into(),
        open: open.clone(),
        steps: steps.to_vec(),
    };
    let mut input =
        serde_json::to_vec(&request).map_err(|e| ImplError::Fatal(format!("cannot encode a request: {e}")))?;
    input.push(b'\n');
    let Spawned { mut child, mut stdin, stdout, stderr } = spawn(command, home)?;
    let _group = crate::util::cleanup::register_group(child.id());
    // Writing and reading run beside each other: an implementation that answers before it has
    // read all its input must not deadlock against a full pipe.
    thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut output = Vec::new();
        let read = stdout.take(MAX_REPLY_BYTES as u64 + 1).read_to_end(&mut output);
        let _ = tx.send(read.map(|_| output));
    });
    let crash = |child: &mut Child, reason: String| {
        stop_child(child, Duration::ZERO);
        ImplError::Crash { reason, stderr: stderr.text() }
    };
    let output = match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        Ok(Ok(output)) if output.len() > MAX_REPLY_BYTES => {
            return Err(crash(&mut child, format!("the output is longer than {} MiB", MAX_REPLY_BYTES >> 20)));
        }
        Ok(Ok(output)) => output,
        Ok(Err(e)) => return Err(crash(&mut child, format!("reading stdout failed: {e}"))),
        Err(_) => {
            stop_child(&mut child, Duration::ZERO);
            return Err(ImplError::Timeout { stderr: stderr.text() });
        }
    };
    match stop_child(&mut child, deadline.saturating_duration_since(Instant::now())) {
        Stopped::Exited(status) if status.success() => {}
        Stopped::Exited(status) => return Err(crash(&mut child, format!("the process exited with {status}"))),
        Stopped::Killed => return Err(ImplError::Timeout { stderr: stderr.text() }),
    }
    let reply: OneShotReply = serde_json::from_slice(&output)
        .map_err(|e| crash(&mut child, format!("'{}' is not a one-shot reply ({e})", preview(&output))))?;
    if let Some(error) = reply.error {
        return Err(ImplError::Refused(error));
    }
    if reply.observations.len() != steps.len() {
        let reason = format!("{} observations for {} steps", reply.observations.len(), steps.len());
        return Err(crash(&mut child, reason));
    }
    Ok(reply.observations)
}

/// Why a request got no reply.
#[derive(Debug)]
enum Failure {
    /// Something other than a reply came (CRASH).
    Garbage(String),
    /// The process is gone or going (CRASH, with its exit status).
    Gone(String),
    /// Nothing came in time (TIMEOUT).
    Timeout,
}

/// What a reader or writer thread saw.
#[derive(Debug)]
enum Event {
    /// A line of stdout, with its newline if it had one.
    Line(Vec<u8>),
    /// A stdout line longer than [`MAX_REPLY_BYTES`].
    TooLong,
    /// Stdout closed.
    Eof,
    /// Reading stdout failed.
    ReadFailed(String),
    /// Writing stdin failed (the process has most likely exited).
    WriteFailed(String),
}

/// A running process of the persistent mode.
#[derive(Debug)]
struct Proc {
    child: Child,
    /// Request lines for the writer thread; dropping it closes stdin.
    requests: Option<Sender<Vec<u8>>>,
    events: Receiver<Event>,
    stderr: StderrTail,
    _group: crate::util::cleanup::Guard,
}

impl Proc {
    fn start(command: &str, home: &Path) -> Result<Proc, ImplError> {
        let Spawned { child, stdin, stdout, stderr } = spawn(command, home)?;
        // Bounded: a process that floods stdout blocks on its pipe instead of growing the
        // harness's memory (each line is capped at MAX_REPLY_BYTES, and at most
        // EVENT_QUEUE lines wait).
        let (event_tx, events) = mpsc::sync_channel(EVENT_QUEUE);
        let (requests, request_rx) = mpsc::channel();
        let writer_events = event_tx.clone();
        // A writer thread, because a process that stops reading would block a large `open` in
        // `write_all` for ever; this way the reply's timeout covers the write too.
        thread::spawn(move || write_requests(stdin, request_rx, writer_events));
        thread::spawn(move || read_replies(stdout, event_tx));
        let _group = crate::util::cleanup::register_group(child.id());
        Ok(Proc { child, requests: Some(requests), events, stderr, _group })
    }

    fn round_trip(&mut self, line: Vec<u8>, timeout: Duration) -> Result<Vec<u8>, Failure> {
        // Anything already waiting answers no request: an extra or unsolicited line, which would
        // otherwise be taken as the reply to this one.
        if let Ok(Event::Line(extra)) = self.events.try_recv() {
            return Err(Failure::Garbage(format!(
                "'{}' was written when no request was waiting for a reply (an extra or unsolicited line)",
                preview(&extra)
            )));
        }
        let sent = self.requests.as_ref().is_some_and(|tx| tx.send(line).is_ok());
        if !sent {
            return Err(Failure::Gone("the process stopped reading its stdin".into()));
        }
        match self.events.recv_timeout(timeout) {
            Ok(Event::Line(bytes)) => Ok(bytes),
            Ok(Event::TooLong) => {
                Err(Failure::Garbage(format!("a reply line is longer than {} MiB", MAX_REPLY_BYTES >> 20)))
            }
            Ok(Event::Eof) | Err(RecvTimeoutError::Disconnected) => {
                Err(Failure::Gone("the process closed its stdout".into()))
            }
            Ok(Event::ReadFailed(e)) => Err(Failure::Garbage(format!("reading its stdout failed: {e}"))),
            Ok(Event::WriteFailed(e)) => Err(Failure::Gone(format!("writing the request failed: {e}"))),
            Err(RecvTimeoutError::Timeout) => Err(Failure::Timeout),
        }
    }

    /// Closes stdin, gives the process `grace` to exit by itself, then kills it.
    fn stop(&mut self, grace: Duration) -> Stopped {
        self.requests = None;
        stop_child(&mut self.child, grace)
    }
}

fn write_requests(mut stdin: ChildStdin, requests: Receiver<Vec<u8>>, events: SyncSender<Event>) {
    for line in requests {
        if let Err(e) = stdin.write_all(&line).and_then(|()| stdin.flush()) {
            let _ = events.send(Event::WriteFailed(e.to_string()));
            return;
        }
    }
}

fn read_replies(stdout: ChildStdout, events: SyncSender<Event>) {
    let mut reader = BufReader::new(stdout);
    loop {
        let mut line = Vec::new();
        // Reading through `take` bounds the line, so a process that never writes a newline
        // cannot make the harness buffer without end.
        let event = match (&mut reader).take(MAX_REPLY_BYTES as u64 + 1).read_until(b'\n', &mut line) {
            Ok(0) => Event::Eof,
            Ok(_) if line.len() > MAX_REPLY_BYTES => Event::TooLong,
            Ok(_) => Event::Line(line),
            Err(e) => Event::ReadFailed(e.to_string()),
        };
        let last = !matches!(event, Event::Line(_));
        if events.send(event).is_err() || last {
            return;
        }
    }
}

/// A started `sh -c <command>` and its pipes.
struct Spawned {
    child: Child,
    stdin: ChildStdin,
    stdout: ChildStdout,
    stderr: StderrTail,
}

/// Starts `sh -c <command>` in a process group of its own, so that killing the group also kills
/// whatever the command started (a shell wrapper's children would otherwise survive and hold the
/// pipes open).
fn spawn(command: &str, home: &Path) -> Result<Spawned, ImplError> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(command)
        .env("HOME", home)
        .env(ENV_CANARY.0, ENV_CANARY.1)
        .env_remove("XDG_CONFIG_HOME")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| ImplError::Fatal(format!("cannot start 'sh -c {command}': {e}")))?;
    match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
        (Some(stdin), Some(stdout), Some(stderr)) => {
            Ok(Spawned { child, stdin, stdout, stderr: StderrTail::collect(stderr) })
        }
        _ => {
            stop_child(&mut child, Duration::ZERO);
            Err(ImplError::Fatal(format!("'sh -c {command}' started without its pipes")))
        }
    }
}

/// How a process ended.
#[derive(Debug, Clone, Copy)]
enum Stopped {
    /// By itself.
    Exited(ExitStatus),
    /// Killed by the harness.
    Killed,
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stopped::Exited(status) => write!(f, "{status}"),
            Stopped::Killed => write!(f, "killed by the harness"),
        }
    }
}

/// Waits up to `grace` for the child to exit, then kills its whole process group and reaps it. It
/// never hangs: SIGKILL cannot be caught, and the reap follows it.
///
/// The child is waited for without being reaped (`WNOWAIT`), so its pid — the group's id — stays
/// reserved while the group is killed: whatever the child left running in its group (a child that
/// ignores SIGTERM, a shell wrapper's children) dies with it, and no stranger who inherited a
/// reused id can be hit.
fn stop_child(child: &mut Child, grace: Duration) -> Stopped {
    use rustix::process::{waitid, Pid, WaitId, WaitIdOptions};
    let deadline = Instant::now() + grace;
    let pid = i32::try_from(child.id()).ok().and_then(Pid::from_raw);
    let exited = loop {
        let Some(pid) = pid else { break false };
        match waitid(WaitId::Pid(pid), WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT) {
            Ok(Some(_)) => break true,
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(5)),
            _ => break false,
        }
    };
    if let Some(pid) = pid {
        crate::util::cleanup::kill_group(pid.as_raw_nonzero().get());
    }
    if exited {
        if let Ok(status) = child.wait() {
            return Stopped::Exited(status);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    Stopped::Killed
}

/// The last lines of a process's stderr, collected by a thread.
#[derive(Debug)]
struct StderrTail {
    lines: Arc<Mutex<VecDeque<String>>>,
    /// Disconnects when stderr closes.
    done: Receiver<()>,
}

impl StderrTail {
    fn collect(stderr: ChildStderr) -> StderrTail {
        let lines = Arc::new(Mutex::new(VecDeque::new()));
        let (done_tx, done) = mpsc::channel::<()>();
        let tail = Arc::clone(&lines);
        thread::spawn(move || {
            let _done = done_tx;
            let mut reader = BufReader::new(stderr);
            let mut cut = false;
            loop {
                let mut piece = Vec::new();
                match (&mut reader).take(STDERR_LINE_MAX as u64).read_until(b'\n', &mut piece) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                let ends_line = piece.ends_with(b"\n");
                // The rest of a cut line is dropped, not reported as lines of its own.
                if !cut {
                    let mut line = String::from_utf8_lossy(&piece).trim_end_matches(['\n', '\r']).to_string();
                    if !ends_line && piece.len() == STDERR_LINE_MAX {
                        line.push_str(" [cut]");
                    }
                    let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
                    if tail.len() == STDERR_TAIL_LINES {
                        tail.pop_front();
                    }
                    tail.push_back(line);
                }
                cut = !ends_line;
            }
        });
        StderrTail { lines, done }
    }

    /// The tail, once stderr has closed or [`STDERR_DRAIN`] has passed.
    fn text(&self) -> String {
        let _ = self.done.recv_timeout(STDERR_DRAIN);
        let lines = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
        lines.iter().map(String::as_str).collect::<Vec<_>>().join("\n")
    }
}

/// The start of some output, for a message.
fn preview(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim_end();
    match text.char_indices().nth(200) {
        Some((i, _)) => format!("{}...", text.get(..i).unwrap_or_default()),
        None => text.to_string(),
    }
}
