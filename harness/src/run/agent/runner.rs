//! An agent CLI as an [`Implementation`]: the unmodified CLI runs in the case's tree (translated
//! into its dialect), against the fake model endpoint, and the case's steps become the
//! conversation:
//!
//! 1. `start` launches the CLI; its first main request (one that offers tools) is the startup
//!    observation.
//! 2. Each `touch` becomes a call of the CLI's own read, write or edit tool, queued; `next_request`
//!    answers the waiting request with the queued calls (one batch), and the request that carries
//!    their results is that step's observation: what appears in it for the first time is the
//!    activation. A `next_request` that follows no touch sends the recipe's `noop` call.
//! 3. The harness edits the tree between steps while the CLI waits for the model's reply, so an
//!    edit lands exactly between two requests.
//! 4. `restart` ends the CLI (the scripted model answers with text, and the CLI exits) and
//!    resumes its session with the recipe's `resume_args`; the resumed CLI's first main request
//!    is the observation.
//!
//! A request that offers no tools (titles, summaries) gets a short text at once; a retried request
//! gets the reply its round already got. Diagnostics, the persistence latch and hook escapes are
//! not visible in what a CLI sends, so they are never compared ([`Implementation::unobservable`]).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::api::{self, Api, Call, Reply};
use super::dialect::{Dialect, Translated};
use super::extract::{self, Found, Kind};
use super::jail::Jail;
use super::recipe::Recipe;
use super::server::{Handler, Incoming, Server};
use crate::case::scenario::Scenario;
use crate::run::implementation::{ImplError, Implementation};
use crate::run::wire::{
    Hello, Observation, OpenCase, StepOp, ToolCall, WireActivation, WireFile, WireModule, WireSection,
};

/// How long a CLI gets to exit after the scripted model's last answer before its group is killed.
const EXIT_GRACE: Duration = Duration::from_secs(3);
/// The most bytes of a CLI's stdout and stderr kept for a report.
const OUTPUT_TAIL: usize = 16 << 10;
/// What the scripted model says when the case is over, and to a request that offers no tools.
const DONE: &str = "Done.";

/// How long a CLI may take over one model request before the result says so.
const SLOW: Duration = Duration::from_secs(5);

/// A canary line no found file accounts for: what the CLI names it by (or where it sits), the
/// line, and where the line is (text index, offset).
type Leak = (String, String, (usize, usize));

/// A main request waiting for the scripted model's reply.
struct Main {
    body: Value,
    reply: mpsc::Sender<Reply>,
}

/// The server's side of the conversation: side requests are answered at once, a retried round
/// with its earlier reply, and every other main request is handed to the runner.
struct Bridge {
    mains: mpsc::Sender<Main>,
    generation: Arc<AtomicUsize>,
    answered: BTreeMap<(usize, usize), Reply>,
    wait: Duration,
}

impl Handler for Bridge {
    fn reply(&mut self, api: Api, request: &Incoming) -> Reply {
        if !api::offers_tools(api, &request.body) {
            return Reply::Text(DONE.into());
        }
        let round = (self.generation.load(Ordering::SeqCst), api::tool_results(api, &request.body));
        if let Some(r) = self.answered.get(&round) {
            return r.clone();
        }
        let (tx, rx) = mpsc::channel();
        if self.mains.send(Main { body: request.body.clone(), reply: tx }).is_err() {
            return Reply::Text(DONE.into());
        }
        let reply = rx.recv_timeout(self.wait).unwrap_or_else(|_| Reply::Text(DONE.into()));
        self.answered.insert(round, reply.clone());
        reply
    }
}

/// A running CLI process.
struct Process {
    child: Child,
    _guard: crate::util::cleanup::Guard,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl Process {
    fn tail(buf: &Arc<Mutex<Vec<u8>>>) -> String {
        let b = buf.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&b).into_owned()
    }

    /// Kills the process group and reaps the leader.
    fn kill(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            crate::util::cleanup::kill_group(pid);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits up to `grace` for the CLI to exit by itself, then kills its group either way (its
    /// helpers die with it).
    fn finish(&mut self, grace: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + grace;
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                _ => break None,
            }
        };
        self.kill();
        status
    }
}

/// Keeps the last [`OUTPUT_TAIL`] bytes of a pipe.
fn collect(mut pipe: impl Read + Send + 'static) -> Arc<Mutex<Vec<u8>>> {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let out = Arc::clone(&buf);
    std::thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        while let Ok(n) = pipe.read(&mut chunk) {
            if n == 0 {
                break;
            }
            if let Ok(mut b) = out.lock() {
                b.extend_from_slice(chunk.get(..n).unwrap_or_default());
                let excess = b.len().saturating_sub(OUTPUT_TAIL);
                b.drain(..excess);
            }
        }
    });
    buf
}

/// One open case.
struct Live {
    jail: Jail,
    server: Option<Server>,
    mains: mpsc::Receiver<Main>,
    generation: Arc<AtomicUsize>,
    pending: Option<Main>,
    queued: Vec<ToolCall>,
    process: Option<Process>,
    root: PathBuf,
    /// The CLI's working directory: the case's `options.cwd` where it sets one, else the root.
    cwd: PathBuf,
    /// The case's profile: `section` and `root-file` cases observe a section too.
    profile: String,
    /// Seed 002's section root, relative to the project root in /-form ("" for the root itself):
    /// the paths of `section.files` are relative to it.
    section_root: String,
    sandbox: PathBuf,
    home: PathBuf,
    /// How often each (path, content) occurs in the request before: one more now is a send.
    counts: BTreeMap<(String, String), usize>,
    /// Each path's last content sent, for `supersedes`.
    last: BTreeMap<String, String>,
    /// The files the batch being answered reads with the CLI's own tool (dialect paths).
    reads: BTreeMap<String, usize>,
    /// How many canary occurrences the request before held.
    leaks: usize,
    calls: usize,
    steps: usize,
}

/// An agent CLI run from its recipe.
pub struct Agent {
    recipe: Recipe,
    version: Option<String>,
    program: PathBuf,
    node_dir: Option<PathBuf>,
    timeout: Duration,
    translated: Option<Translated>,
    live: Option<Live>,
    notes: Vec<String>,
    /// How long the CLI took to send its main requests since the step began (launch or the last
    /// answer to each request's arrival), for [`Implementation::take_wait`].
    wait: Option<Duration>,
    transcript: Option<String>,
    /// How the last case's CLI was confined.
    network: Option<String>,
    /// The case's canaries: text that must never reach the model.
    canaries: Vec<String>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent").field("agent", &self.recipe.pin(self.version.as_deref())).finish_non_exhaustive()
    }
}

impl Agent {
    /// The agent of `recipe` (at `version`, else its pin), each wait for a request bounded by
    /// `timeout`. Fails when the CLI is not installed.
    pub fn new(recipe: Recipe, version: Option<String>, timeout: Duration) -> Result<Agent, String> {
        let program = recipe.program(version.as_deref())?;
        Ok(Agent {
            recipe,
            version,
            program,
            node_dir: node_dir(),
            timeout,
            translated: None,
            live: None,
            notes: Vec::new(),
            wait: None,
            transcript: None,
            network: None,
            canaries: Vec::new(),
        })
    }

    fn api(&self) -> Api {
        self.recipe.api
    }

    fn live(&mut self) -> Result<&mut Live, ImplError> {
        self.live.as_mut().ok_or_else(|| ImplError::Refused("no case is open".into()))
    }

    fn translated(&self) -> Result<&Translated, ImplError> {
        self.translated.as_ref().ok_or_else(|| ImplError::Refused("the case was not translated".into()))
    }

    /// The command that starts the CLI with `args`.
    fn command(&self, live: &Live, args: &[String], base_url: &str) -> Command {
        let fill = |s: &str| {
            s.replace("{base_url}", base_url)
                .replace("{home}", &live.home.to_string_lossy())
                .replace("{root}", &live.root.to_string_lossy())
        };
        let mut cmd = Command::new(&self.program);
        cmd.args(args.iter().map(|a| fill(a)));
        cmd.current_dir(&live.cwd);
        cmd.env_clear();
        let mut path = Vec::new();
        if let Some(dir) = &self.node_dir {
            path.push(dir.to_string_lossy().into_owned());
        }
        path.extend(["/usr/local/bin", "/usr/bin", "/bin"].map(String::from));
        cmd.env("PATH", path.join(":"));
        cmd.env("HOME", &live.home);
        cmd.env("TMPDIR", live.home.join("tmp"));
        cmd.env("LANG", "C.UTF-8");
        // The suite's environment canary, as every adapter gets it: a CLI that puts its own
        // environment in front of the model (a rule linked to /proc/self/environ) shows it.
        cmd.env(crate::run::adapter::ENV_CANARY.0, crate::run::adapter::ENV_CANARY.1);
        for (k, v) in &self.recipe.launch.env {
            cmd.env(k, fill(v));
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        cmd
    }

    /// Starts the CLI with `args` and waits for its first main request.
    fn launch(&mut self, args: Vec<String>) -> Result<Main, ImplError> {
        let live = self.live.as_ref().ok_or_else(|| ImplError::Refused("no case is open".into()))?;
        let url = live.server.as_ref().map(Server::url).unwrap_or_default();
        let cmd = self.command(live, &args, &url);
        let mut child = live.jail.spawn(cmd).map_err(|e| {
            ImplError::Fatal(format!(
                "cannot start {} ({}): {e}",
                self.recipe.pin(self.version.as_deref()),
                self.program.display()
            ))
        })?;
        let guard = crate::util::cleanup::register_group(child.id());
        let stdout = child.stdout.take().map(collect).unwrap_or_default();
        let stderr = child.stderr.take().map(collect).unwrap_or_default();
        let live = self.live()?;
        live.process = Some(Process { child, _guard: guard, stdout, stderr });
        self.next_main()
    }

    /// Waits for the next main request, failing when the CLI exits first or the wait times out.
    fn next_main(&mut self) -> Result<Main, ImplError> {
        let timeout = self.timeout;
        let live = self.live()?;
        let started = Instant::now();
        let deadline = started + timeout;
        loop {
            match live.mains.recv_timeout(Duration::from_millis(50)) {
                Ok(main) => {
                    let took = started.elapsed();
                    let request = live.steps + 1;
                    self.wait = Some(self.wait.unwrap_or_default() + took);
                    if took >= SLOW {
                        let note = format!(
                            "request {request} came {:.1} s after the CLI was started or last answered: \
                             the CLI's own time (the fake model answers at once)",
                            took.as_secs_f64()
                        );
                        self.notes.push(note);
                    }
                    return Ok(main);
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(ImplError::Crash {
                        reason: "the fake model endpoint stopped".into(),
                        stderr: String::new(),
                    })
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            let Some(p) = live.process.as_mut() else {
                return Err(ImplError::Refused("the CLI is not running".into()));
            };
            if let Ok(Some(status)) = p.child.try_wait() {
                let out = Process::tail(&p.stdout);
                let err = Process::tail(&p.stderr);
                return Err(ImplError::Crash {
                    reason: format!("the CLI exited ({status}) before its next model request; stdout: {}", out.trim()),
                    stderr: err,
                });
            }
            if Instant::now() >= deadline {
                let err = live.process.as_ref().map(|p| Process::tail(&p.stderr)).unwrap_or_default();
                return Err(ImplError::Timeout { stderr: err });
            }
        }
    }

    /// What a request holds of the tree's instruction files, in the texts `keep` takes.
    fn found(&self, main: &Main, keep: impl Fn(&api::Segment) -> bool) -> Result<Vec<Found>, ImplError> {
        let live = self.live.as_ref().ok_or_else(|| ImplError::Refused("no case is open".into()))?;
        let dialect = Dialect::new(&self.recipe);
        let names = dialect.instruction_names();
        let candidates = extract::candidates(&live.sandbox, &live.root, &names, dialect.rules_dir());
        let segments: Vec<api::Segment> =
            api::segments(self.api(), &main.body).into_iter().filter(|s| keep(s)).collect();
        Ok(extract::find(&candidates, &segments, &live.reads, &live.root))
    }

    /// The files the newest message of a request shows as a line-numbered view of the file
    /// ([`extract::views`]).
    fn views(&self, segments: &[api::Segment]) -> Result<Vec<String>, ImplError> {
        let live = self.live.as_ref().ok_or_else(|| ImplError::Refused("no case is open".into()))?;
        let dialect = Dialect::new(&self.recipe);
        let candidates =
            extract::candidates(&live.sandbox, &live.root, &dialect.instruction_names(), dialect.rules_dir());
        let newest = segments.iter().map(|s| s.message).max().unwrap_or(0);
        let last: Vec<api::Segment> = segments.iter().filter(|s| s.message == newest).cloned().collect();
        Ok(extract::views(&candidates, &last).into_iter().map(str::to_string).collect())
    }

    /// The canaries a request holds that no found file accounts for, as the paths (or places)
    /// the CLI put them at and the lines they are on: new since `before` leaks.
    fn leaked(&self, main: &Main, found: &[Found]) -> Result<(Vec<Leak>, usize), ImplError> {
        let live = self.live.as_ref().ok_or_else(|| ImplError::Refused("no case is open".into()))?;
        let segments = api::segments(self.api(), &main.body);
        let all = extract::leaks(&self.canaries, &segments, &live.root);
        let total = all.len();
        let accounted = |line: &str| {
            found
                .iter()
                .any(|f| self.canaries.iter().any(|c| line.contains(c.as_str()) && f.content.contains(c.as_str())))
        };
        // An unheaded canary in a tool result, after the batch read a file, is that read's own
        // output: the case's touch reads what it reads (a touched link out of the project).
        let reads_output = |label: &str| !live.reads.is_empty() && label.starts_with("(text in the tool result");
        let new = all
            .into_iter()
            .skip(live.leaks)
            .filter(|(label, line, _)| !accounted(line) && !reads_output(label))
            .collect();
        Ok((new, total))
    }

    /// The startup observation of a (first or resumed) main request: what its system prompt and
    /// first message hold. A resumed CLI replays its conversation after them; what it attached
    /// then is restored history, not the startup prefix (D-LIFE-1), and is counted so that only
    /// a new send shows as an activation.
    fn startup(&mut self, main: Main) -> Result<Observation, ImplError> {
        let found = self.found(&main, |s| s.message <= 1)?;
        let startup_found = found.clone();
        let everything = self.found(&main, |_| true)?;
        let (leaks, total) = self.leaked(&main, &everything)?;
        let translated = self.translated()?.clone();
        let live = self.live()?;
        live.leaks = total;
        live.pending = Some(main);
        live.steps += 1;
        let step = live.steps;
        // Each file and each leaked line where it first appears, with its note.
        let mut files: Vec<((usize, usize), WireFile, String)> = Vec::new();
        for f in &everything {
            live.counts.insert((f.rel.clone(), f.content.clone()), f.count);
            live.last.insert(f.rel.clone(), f.content.clone());
        }
        for (label, line, at) in leaks {
            let note = format!("request {step} (startup): a canary reached the model: {label}");
            let file = WireFile {
                path: label,
                kind: "module".into(),
                sha256: crate::judge::compare::sha256_hex(&line),
                content: line,
            };
            files.push((at, file, note));
        }
        for f in found {
            live.last.insert(f.rel.clone(), f.content.clone());
            let path = translated.back(f.named.0.as_deref().unwrap_or(&f.rel));
            let note = note(step, "startup", &path, &f);
            let file = WireFile {
                kind: if f.kind == Kind::Root { "root" } else { "module" }.into(),
                sha256: crate::judge::compare::sha256_hex(&f.content),
                content: f.content,
                path,
            };
            files.push((f.at, file, note));
        }
        files.sort_by_key(|(at, _, _)| *at);
        let section = self.section(&startup_found)?;
        let (files, notes): (Vec<WireFile>, Vec<String>) = files.into_iter().map(|(_, f, n)| (f, n)).unzip();
        self.notes.extend(notes);
        Ok(Observation { startup: Some(files), section, ..Observation::default() })
    }

    /// The activation observation of the request that carries a batch's results.
    fn activation(&mut self, main: Main) -> Result<Observation, ImplError> {
        let found = self.found(&main, |_| true)?;
        let section = self.section(&found)?;
        let (leaks, total) = self.leaked(&main, &found)?;
        let failed = api::failed_results(self.api(), &main.body);
        let translated = self.translated()?.clone();
        let segments = api::segments(self.api(), &main.body);
        let views = self.views(&segments)?;
        let live = self.live()?;
        live.pending = Some(main);
        live.steps += 1;
        let step = live.steps;
        let mut modules = Vec::new();
        let mut pieces: Vec<String> = Vec::new();
        let root = live.root.clone();
        let mut notes = Vec::new();
        // A content no longer on disk keeps its count: an old copy in the history is not a send.
        let before = live.counts.clone();
        for f in &found {
            live.counts.insert((f.rel.clone(), f.content.clone()), f.count);
        }
        // What occurs more often than in the request before was sent with this one, as often as
        // it was sent (a file sent twice in one batch is two modules), in the order of its latest
        // occurrence.
        let mut sent: Vec<Found> = Vec::new();
        for f in found {
            let more = f.count.saturating_sub(before.get(&(f.rel.clone(), f.content.clone())).copied().unwrap_or(0));
            sent.extend(std::iter::repeat_n(f, more));
        }
        sent.sort_by_key(|f| f.last_at);
        live.leaks = total;
        for text in failed {
            notes.push(format!(
                "request {step}: the CLI's tool call failed: {}",
                crate::report::escape::cut(&text, 300)
            ));
        }
        for rel in views {
            notes.push(format!(
                "request {step}: {} is shown line-numbered, as a view of the file on disk (a \
                 changed-file note), not sent as a module",
                translated.back(&rel)
            ));
        }
        // Each module sent and each leaked line where it appears: (where, module, piece, note).
        let mut parts: Vec<((usize, usize), WireModule, String, String)> = Vec::new();
        for (label, line, at) in leaks {
            let note = format!("request {step} (activation): a canary reached the model: {label}");
            let module = WireModule {
                path: label,
                sha256: crate::judge::compare::sha256_hex(&line),
                supersedes: false,
                content: line.clone(),
            };
            parts.push((at, module, line, note));
        }
        for f in sent {
            let supersedes = live.last.insert(f.rel.clone(), f.content.clone()).is_some_and(|c| c != f.content);
            let path = translated.back(f.named.1.as_deref().unwrap_or(&f.rel));
            let note = note(step, "activation", &path, &f);
            let named = f.named.1.as_deref().unwrap_or(&f.rel);
            let piece =
                segments.get(f.last_at.0).map(|seg| piece(&seg.text, f.last_at.1, f.content.len(), &root, named));
            let module = WireModule {
                path,
                sha256: crate::judge::compare::sha256_hex(&f.content),
                supersedes,
                content: f.content,
            };
            parts.push((f.last_at, module, piece.unwrap_or_default(), note));
        }
        // A stable sort: copies of one file sent twice keep their order.
        parts.sort_by_key(|(at, _, _, _)| *at);
        for (_, module, piece, note) in parts {
            modules.push(module);
            if !piece.is_empty() {
                pieces.push(piece);
            }
            notes.push(note);
        }
        self.notes.extend(notes);
        if modules.is_empty() {
            return Ok(Observation { section, ..Observation::default() });
        }
        let rendered = pieces;
        Ok(Observation {
            activation: Some(WireActivation { modules, rendered: rendered.join("\n") }),
            section,
            ..Observation::default()
        })
    }

    /// The section a section or root-file case observes in a request (seed 002, "Discovery";
    /// seed 003, "Decision"): the case's files whose content reached the model in `found`, in the
    /// order they first appear, named relative to the section root as seed 002's headers name
    /// them ("<path relative to the project root>"). A file found only cut is listed too (its cut
    /// is in the notes). The text, whether it was rewritten and what a closing line names are not
    /// what the CLI sends, so they are left empty and never compared
    /// ([`Implementation::unobservable`]). Other profiles observe none.
    fn section(&self, found: &[Found]) -> Result<Option<WireSection>, ImplError> {
        let live = self.live.as_ref().ok_or_else(|| ImplError::Refused("no case is open".into()))?;
        if live.profile != "section" && live.profile != "root-file" {
            return Ok(None);
        }
        let translated = self.translated()?;
        let mut order: Vec<&Found> = found.iter().collect();
        order.sort_by_key(|f| f.at);
        let mut files: Vec<String> = Vec::new();
        for f in order {
            let path = rebase(&translated.back(f.named.0.as_deref().unwrap_or(&f.rel)), &live.section_root);
            if !files.contains(&path) {
                files.push(path);
            }
        }
        Ok(Some(WireSection { text: String::new(), rewritten: false, files, omitted: Vec::new() }))
    }

    /// The scripted calls for the queued touches.
    fn calls(&mut self) -> Result<Vec<Call>, ImplError> {
        let live = self.live()?;
        let queued = std::mem::take(&mut live.queued);
        let root = live.root.clone();
        let cwd = live.cwd.clone();
        let mut n = live.calls;
        let mut out = Vec::new();
        let tools = &self.recipe.tools;
        let mut push = |key: &str, path: &Path, out: &mut Vec<Call>| -> Result<(), ImplError> {
            let tool =
                tools.get(key).ok_or_else(|| ImplError::Refused(format!("the recipe has no tool for '{key}'")))?;
            n += 1;
            out.push(Call {
                id: format!("toolu_conformance_{n:04}"),
                name: tool.name.clone(),
                args: args(&tool.args, path),
            });
            Ok(())
        };
        if queued.is_empty() && self.recipe.tools.contains_key("noop") {
            push("noop", &root, &mut out)?;
        }
        let mut reads: BTreeMap<String, usize> = BTreeMap::new();
        let mut made = Vec::new();
        for call in &queued {
            // A relative touch is the CLI's: relative to its working directory.
            let path = absolute(&cwd, &call.path);
            let key = call.tool.as_str();
            let later_folder = path
                .strip_prefix(&root)
                .ok()
                .is_some_and(|r| self.translated.as_ref().is_some_and(|t| t.is_folder(&r.to_string_lossy())));
            if key != "write" && !later_folder && placeholder(&root, &path) {
                made.push(path.to_string_lossy().into_owned());
            }
            let read_first = tools.get(key).is_some_and(|t| t.read_first);
            if read_first {
                push("read", &path, &mut out)?;
            }
            push(key, &path, &mut out)?;
            if key == "read" || read_first {
                if let Ok(rel) = path.strip_prefix(&root) {
                    *reads.entry(rel.to_string_lossy().into_owned()).or_default() += 1;
                }
            }
        }
        if let Some(live) = self.live.as_mut() {
            live.calls = n;
            live.reads = reads;
        }
        for p in made {
            self.notes.push(format!("made {p} (the case touches it; its tree does not have it)"));
        }
        Ok(out)
    }

    /// Answers the waiting request with text (the CLI's turn ends), if one waits.
    fn answer_done(&mut self) {
        if let Some(main) = self.live.as_mut().and_then(|l| l.pending.take()) {
            let _ = main.reply.send(Reply::Text(DONE.into()));
        }
    }
}

/// What a file was sent as: its text at `off` (`len` bytes) with the line that names it before
/// it (`Contents of /…/src/CLAUDE.md:`), where one does within 512 bytes — not the whole text it
/// sits in, which can hold a read's output too.
fn piece(text: &str, off: usize, len: usize, root: &Path, rel: &str) -> String {
    let mut from = off.saturating_sub(512);
    while !text.is_char_boundary(from) {
        from += 1;
    }
    let window = text.get(from..off).unwrap_or("");
    let abs = root.join(rel).to_string_lossy().into_owned();
    let head = window.rfind(&abs).or_else(|| window.rfind(rel)).map(|p| from + p);
    let start = match head {
        Some(p) => text.get(..p).and_then(|t| t.rfind('\n')).map_or(0, |n| n + 1),
        None => off,
    };
    text.get(start..off + len).unwrap_or("").to_string()
}

/// A report note: where one file's text landed.
fn note(step: usize, what: &str, path: &str, f: &Found) -> String {
    let cut = if f.cut { format!(" (only its first {} bytes)", f.content.len()) } else { String::new() };
    let place = if what == "startup" { f.place } else { f.last_place };
    format!("request {step} ({what}): {path} in the {place}{cut}")
}

/// The text of a touched file that the case's tree does not have, made so that the CLI's read of
/// it succeeds as the case's touch does (the seed's tool reports a successful access).
pub const PLACEHOLDER: &str = "// a file the conformance case touches\n";

/// Makes a missing touched file inside the project with [`PLACEHOLDER`], through real folders
/// only: nothing is made where any folder on the way is a link or a file, nor outside the
/// project. Whether it made one.
fn placeholder(root: &Path, path: &Path) -> bool {
    let Ok(rel) = path.strip_prefix(root) else { return false };
    if rel.components().any(|c| !matches!(c, std::path::Component::Normal(_))) || path.symlink_metadata().is_ok() {
        return false;
    }
    let mut at = root.to_path_buf();
    let parts: Vec<_> = rel.components().collect();
    for c in parts.iter().take(parts.len().saturating_sub(1)) {
        at.push(c);
        match at.symlink_metadata() {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return false,
            Err(_) => {
                if std::fs::create_dir(&at).is_err() {
                    return false;
                }
            }
        }
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, PLACEHOLDER.as_bytes()))
        .is_ok()
}

/// Seed 002's section root for a CLI working in `cwd`, relative to the project `root` in /-form:
/// the first folder at or above `cwd` that holds `.git` ("Walk up from cwd until a
/// projectRootMarkers entry is found (.git by default)"), looked for no higher than the sandbox
/// (the root's parent), else `cwd` itself. A folder outside the root is in `../` form.
fn section_root(root: &Path, cwd: &Path) -> String {
    let sandbox = root.parent().unwrap_or(root);
    let found = cwd
        .ancestors()
        .take_while(|d| d.starts_with(sandbox))
        .find(|d| d.join(".git").symlink_metadata().is_ok())
        .unwrap_or(cwd);
    rebase(&found.to_string_lossy(), &root.to_string_lossy())
}

/// A /-form path `rel` (relative to some folder) made relative to `base` (relative to the same
/// folder), with `..` where it lies outside `base`; "" for `base` itself.
fn rebase(rel: &str, base: &str) -> String {
    let parts = |p: &str| -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for seg in p.split('/').filter(|x| !x.is_empty() && *x != ".") {
            if seg == ".." && out.last().is_some_and(|l| l != "..") {
                out.pop();
            } else {
                out.push(seg.to_string());
            }
        }
        out
    };
    let (path, base) = (parts(rel), parts(base));
    let common = path.iter().zip(&base).take_while(|(a, b)| a == b).count();
    let mut out: Vec<String> = std::iter::repeat_n("..".to_string(), base.len() - common).collect();
    out.extend(path.into_iter().skip(common));
    out.join("/")
}

/// A touched path, absolute.
fn absolute(root: &Path, path: &str) -> PathBuf {
    let p = Path::new(path);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        root.join(p)
    }
}

/// A tool's arguments with the placeholders of `path` filled in.
fn args(template: &serde_json::Map<String, Value>, path: &Path) -> Value {
    let path_s = path.to_string_lossy().into_owned();
    let content = std::fs::File::open(path)
        .ok()
        .and_then(|f| {
            let mut b = Vec::new();
            f.take(1 << 20).read_to_end(&mut b).ok().map(|_| String::from_utf8_lossy(&b).into_owned())
        })
        .unwrap_or_default();
    let old = content.lines().find(|l| !l.trim().is_empty()).unwrap_or("").to_string();
    let fill = |s: &str| {
        s.replace("{path_shell}", &crate::run::adapter::shell_quote(&path_s))
            .replace("{path}", &path_s)
            .replace("{content}", &content)
            .replace("{old}", &old)
            .replace("{new}", &format!("{old} "))
    };
    fn walk(v: &Value, fill: &dyn Fn(&str) -> String) -> Value {
        match v {
            Value::String(s) => Value::String(fill(s)),
            Value::Array(a) => Value::Array(a.iter().map(|x| walk(x, fill)).collect()),
            Value::Object(o) => Value::Object(o.iter().map(|(k, x)| (k.clone(), walk(x, fill))).collect()),
            other => other.clone(),
        }
    }
    walk(&Value::Object(template.clone()), &fill)
}

/// The folder of this machine's `node`, for CLIs that are Node scripts.
fn node_dir() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).find(|d| d.join("node").is_file())
}

impl Implementation for Agent {
    fn hello(&mut self) -> Result<Hello, ImplError> {
        Ok(Hello {
            name: self.recipe.pin(self.version.as_deref()),
            version: self
                .version
                .clone()
                .or_else(|| self.recipe.package.version.clone())
                .unwrap_or_else(|| "local".into()),
            language: "agent-cli".into(),
            profiles: self.recipe.profiles.clone(),
            capabilities: self.recipe.capabilities.clone(),
            defaults: Default::default(),
            codes: BTreeMap::new(),
        })
    }

    fn translate(&mut self, s: &Scenario) -> Result<Option<Scenario>, String> {
        let t = Dialect::new(&self.recipe).translate(s)?;
        self.canaries = s.canaries.clone();
        let scenario = t.scenario.clone();
        self.translated = Some(t);
        Ok(Some(scenario))
    }

    fn unobservable(&self) -> &'static [&'static str] {
        &[
            "diagnostics",
            "blocked",
            "escaped",
            "failed",
            "prompt",
            "section.text",
            "section.rewritten",
            "section.omitted",
        ]
    }

    fn shows_blank_files(&self) -> bool {
        self.recipe.dialect.names_files
    }

    fn makes_touched_files(&self) -> bool {
        true
    }

    fn take_wait(&mut self) -> Option<Duration> {
        self.wait.take()
    }

    fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    fn take_transcript(&mut self) -> Option<String> {
        self.transcript.take()
    }

    fn network(&self) -> Option<String> {
        self.network.clone()
    }

    fn open(&mut self, open: &OpenCase) -> Result<Observation, ImplError> {
        self.close()?;
        self.notes.clear();
        self.transcript = None;
        let root = PathBuf::from(&open.root);
        let cwd = open.options.as_ref().and_then(|o| o.cwd.as_deref()).map_or_else(|| root.clone(), PathBuf::from);
        let section_root = section_root(&root, &cwd);
        let sandbox = root.parent().map(Path::to_path_buf).unwrap_or_else(|| root.clone());
        let home = sandbox.join("home");
        std::fs::create_dir_all(home.join("tmp"))
            .map_err(|e| ImplError::Refused(format!("{}: {e}", home.display())))?;
        let jail = Jail::new().map_err(ImplError::Fatal)?;
        self.network = Some(jail.network().to_string());
        let listener =
            jail.bind().map_err(|e| ImplError::Fatal(format!("cannot bind the fake model endpoint: {e}")))?;
        let (tx, mains) = mpsc::channel();
        let generation = Arc::new(AtomicUsize::new(0));
        let bridge = Bridge {
            mains: tx,
            generation: Arc::clone(&generation),
            answered: BTreeMap::new(),
            wait: self.timeout.saturating_mul(6),
        };
        let server = Server::start(listener, self.api(), Box::new(bridge))
            .map_err(|e| ImplError::Fatal(format!("cannot serve the fake model endpoint: {e}")))?;
        let url = server.url();
        for (rel, text) in &self.recipe.launch.home_files {
            let path = home.join(rel);
            let text = text
                .replace("{base_url}", &url)
                .replace("{home}", &home.to_string_lossy())
                .replace("{root}", &open.root);
            if let Some(dir) = path.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            std::fs::write(&path, text).map_err(|e| ImplError::Refused(format!("{}: {e}", path.display())))?;
        }
        self.live = Some(Live {
            jail,
            server: Some(server),
            mains,
            generation,
            pending: None,
            queued: Vec::new(),
            process: None,
            root,
            cwd,
            profile: open.profile.clone(),
            section_root,
            sandbox,
            home,
            counts: BTreeMap::new(),
            last: BTreeMap::new(),
            reads: BTreeMap::new(),
            leaks: 0,
            calls: 0,
            steps: 0,
        });
        Ok(Observation::default())
    }

    fn step(&mut self, op: &StepOp) -> Result<Observation, ImplError> {
        match op {
            StepOp::Start => {
                let args = self.recipe.launch.args.clone();
                let main = self.launch(args)?;
                self.startup(main)
            }
            StepOp::Touch(call) => {
                self.live()?.queued.push(call.clone());
                Ok(Observation::default())
            }
            StepOp::NextRequest { calls, .. } => {
                // A section case's touches come with the round that sees them (FORMAT.md, "The
                // section sees calls with the next round"); the CLI makes them in this batch.
                self.live()?.queued.extend(calls.iter().cloned());
                let calls = self.calls()?;
                if calls.is_empty() {
                    // Nothing to send without a noop tool: the CLI makes no request, so none is observed.
                    return Ok(Observation::default());
                }
                let pending = self
                    .live()?
                    .pending
                    .take()
                    .ok_or_else(|| ImplError::Refused("no request waits for a reply".into()))?;
                let _ = pending.reply.send(Reply::Tools(calls));
                let main = self.next_main()?;
                self.activation(main)
            }
            other => Err(ImplError::Refused(format!("an agent CLI cannot be made to take this step ({other:?})"))),
        }
    }

    fn restart(&mut self, _open: &OpenCase) -> Result<Observation, ImplError> {
        let Some(args) = self.recipe.launch.resume_args.clone() else {
            return Err(ImplError::Refused("the recipe has no resume_args".into()));
        };
        self.answer_done();
        let live = self.live()?;
        if let Some(mut p) = live.process.take() {
            p.finish(EXIT_GRACE);
        }
        live.generation.fetch_add(1, Ordering::SeqCst);
        live.queued.clear();
        let main = self.launch(args)?;
        self.startup(main)
    }

    fn close(&mut self) -> Result<(), ImplError> {
        self.answer_done();
        let Some(mut live) = self.live.take() else { return Ok(()) };
        if let Some(mut p) = live.process.take() {
            p.finish(EXIT_GRACE);
        }
        if let Some(server) = live.server.take() {
            let log = server.stop();
            let mut text = String::new();
            for x in &log {
                text.push_str(&serde_json::to_string(&transcript_line(x)).unwrap_or_default());
                text.push('\n');
            }
            self.transcript = Some(text);
        }
        Ok(())
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// One exchange of the transcript.
fn transcript_line(x: &super::server::Exchange) -> Value {
    serde_json::json!({
        "seq": x.incoming.seq,
        "at_ms": x.at_ms,
        "method": x.incoming.method,
        "path": x.incoming.path,
        "request": x.incoming.body,
        "status": x.status,
        "reply": x.reply,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[rstest::rstest]
    #[case("AGENTS.md", "", "AGENTS.md")]
    #[case("packages/api/AGENTS.md", "packages/api", "AGENTS.md")]
    #[case("packages/AGENTS.md", "packages/api", "../AGENTS.md")]
    #[case("AGENTS.md", "packages/api", "../../AGENTS.md")]
    #[case("../AGENTS.md", "", "../AGENTS.md")]
    #[case("pkg/./a/../AGENTS.md", "pkg", "AGENTS.md")]
    #[case("/tmp/s/project/sub", "/tmp/s/project", "sub")]
    #[case("/tmp/s/project", "/tmp/s/project", "")]
    fn paths_are_rebased_onto_the_section_root(#[case] rel: &str, #[case] base: &str, #[case] want: &str) {
        assert_eq!(rebase(rel, base), want);
    }

    #[test]
    fn the_section_root_is_the_nearest_git_folder_at_or_above_cwd_else_cwd() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("project");
        let cwd = root.join("packages/api");
        std::fs::create_dir_all(&cwd).unwrap();
        assert_eq!(section_root(&root, &cwd), "packages/api");
        std::fs::create_dir(root.join(".git")).unwrap();
        assert_eq!(section_root(&root, &cwd), "");
        std::fs::write(root.join("packages/.git"), "gitdir: elsewhere\n").unwrap();
        assert_eq!(section_root(&root, &cwd), "packages");
        assert_eq!(section_root(&root, &root), "");
    }
}
