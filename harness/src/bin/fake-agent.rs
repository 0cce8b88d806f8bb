//! `fake-agent`: a small scripted agent CLI that stands for third-party software, so that
//! `conformance run --agent` can be tested offline. It behaves like Claude Code in its
//! essentials: it reads its instruction files, puts them in the system prompt of every request to
//! a model endpoint, runs the tool calls the model asks for, and attaches nested instruction
//! files and conditional rules to the tool results. It knows nothing of the suite: it uses
//! neither the `reference` crate nor any harness module, and some of its behaviours are
//! deliberately simple (it skips an over-long file instead of cutting it; it follows symlinks out
//! of the project) so that the suite has something to catch.
//!
//! ```sh
//! FAKE_AGENT_BASE_URL=http://127.0.0.1:8080 fake-agent -p "read src/x.ts"
//! ```
//!
//! # Contract
//!
//! Environment:
//! - `FAKE_AGENT_BASE_URL` (required): the model endpoint, `http://HOST:PORT`. There is no TLS.
//! - `FAKE_AGENT_API`: `anthropic` (Messages API) or `gemini` (generateContent). The default is
//!   `anthropic`.
//! - `FAKE_AGENT_STREAM`: `1` asks for server-sent events, `0` for one JSON reply. The default is
//!   `0`.
//! - `HOME` (required): sessions live in `$HOME/.fake-agent/sessions/<hex of cwd>.json`.
//!
//! Arguments: `-p PROMPT` (required) and `--continue` (resume the last session of this cwd).
//!
//! Files, relative to the current directory (the project root):
//! 1. The root file `AGENTS.md`, or `CLAUDE.md` when there is no `AGENTS.md`.
//! 2. Rule modules: `*.md` under `.fake/rules/`, found recursively. No frontmatter makes a rule
//!    unconditional; a frontmatter with only a `paths:` list of globs makes it conditional; any
//!    other frontmatter makes the rule ignored, with a line on stderr.
//! 3. Nested files: the root file's names in sub-folders, the same precedence in each folder.
//!
//! Every instruction file is read whole, or skipped with a line on stderr when it is over
//! 262,144 bytes.
//!
//! Exit codes: 0 on a final answer (`{"result": TEXT, "session_id": ID}` on stdout), 1 for a bad
//! setup (arguments, environment, session file), 2 for an HTTP error or a reply it cannot parse,
//! 3 when the model still asks for tools after 50 rounds.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde_json::{json, Map, Value};

/// The most main requests one run sends; a script that never ends would otherwise loop forever.
const MAX_ROUNDS: usize = 50;
/// The largest instruction file that is read; a bigger one is skipped whole, never cut.
const INSTRUCTION_LIMIT: u64 = 262_144;
/// The largest file the `Read` and `Edit` tools open.
const TOOL_READ_LIMIT: u64 = 1 << 20;
/// The largest reply body that is read, so that a runaway server cannot exhaust memory.
const REPLY_LIMIT: u64 = 16 << 20;
/// How long one HTTP exchange may take, so that a silent server cannot hang the agent.
const HTTP_TIMEOUT: Duration = Duration::from_secs(120);
/// Root-file names by precedence: the first that exists in a folder is that folder's file.
const ROOT_NAMES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];
const RULES_DIR: &str = ".fake/rules";
/// How deep the rules walk goes, so that a symlinked folder loop ends.
const RULES_DEPTH: usize = 16;
const MODEL: &str = "fake-model";
const SYSTEM_HEADER: &str = "You are fake-agent.\n";

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            warn(&failure.message);
            ExitCode::from(failure.code)
        }
    }
}

/// Writes one line on stderr; a closed stderr is not a reason to panic.
fn warn(message: &str) {
    let _ = writeln!(io::stderr(), "fake-agent: {message}");
}

/// Why a run stopped early, with its exit code.
struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    fn setup(message: impl Into<String>) -> Self {
        Failure { code: 1, message: message.into() }
    }

    fn wire(message: impl Into<String>) -> Self {
        Failure { code: 2, message: message.into() }
    }
}

fn run() -> Result<(), Failure> {
    let args = parse_args(std::env::args().skip(1))?;
    let config = Config::from_env()?;
    let cwd = std::env::current_dir().map_err(|e| Failure::setup(format!("cannot read the current directory: {e}")))?;
    let session_path = config.home.join(".fake-agent").join("sessions").join(format!("{}.json", to_hex(&cwd)));
    let project = Project::load(&cwd);
    let system = project.system_prompt();
    let mut session = if args.resume {
        Session::load(&session_path, config.api, system)?
    } else {
        Session {
            session_id: new_session_id(),
            api: config.api,
            system,
            messages: Vec::new(),
            attached: BTreeMap::new(),
        }
    };
    let http = Http::new(&config);

    // Real CLIs ask for a title before the first turn; the harness must tell this side request
    // from the main ones, so it is sent even though its answer is not used.
    http.post(&config.api.url(&config.base, config.stream), &config.api.side_body(&args.prompt, config.stream))?;

    session.messages.push(config.api.user_turn(&args.prompt));
    session.save(&session_path)?;
    for round in 1..=MAX_ROUNDS {
        let body = config.api.main_body(&session.system, &session.messages, config.stream);
        let text = http.post(&config.api.url(&config.base, config.stream), &body)?;
        let reply = config.api.parse(&text, config.stream).map_err(Failure::wire)?;
        session.messages.push(reply.turn.clone());
        session.save(&session_path)?;
        if reply.calls.is_empty() {
            config.api.check_final(&reply).map_err(Failure::wire)?;
            let out = json!({"result": reply.texts.join("\n"), "session_id": session.session_id});
            return writeln!(io::stdout(), "{out}")
                .map_err(|e| Failure::setup(format!("cannot write the result: {e}")));
        }
        if round == MAX_ROUNDS {
            break;
        }
        let mut outcomes = Vec::new();
        for call in &reply.calls {
            let outcome = run_tool(&cwd, config.api, call);
            let reminders = match &outcome.touched {
                Some(path) if !outcome.is_error => project.reminders(path, &mut session.attached),
                _ => Vec::new(),
            };
            outcomes.push((outcome, reminders));
        }
        session.messages.push(config.api.results_turn(&reply.calls, &outcomes));
        session.save(&session_path)?;
    }
    Err(Failure { code: 3, message: format!("the model still asks for tools after {MAX_ROUNDS} rounds") })
}

struct Args {
    prompt: String,
    resume: bool,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, Failure> {
    let mut prompt = None;
    let mut resume = false;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-p" => match args.next() {
                Some(text) => prompt = Some(text),
                None => return Err(Failure::setup("'-p' needs a prompt")),
            },
            "--continue" => resume = true,
            other => {
                return Err(Failure::setup(format!(
                    "unknown argument '{other}' (usage: fake-agent [--continue] -p PROMPT)"
                )))
            }
        }
    }
    match prompt {
        Some(prompt) => Ok(Args { prompt, resume }),
        None => Err(Failure::setup("no prompt (usage: fake-agent [--continue] -p PROMPT)")),
    }
}

struct Config {
    base: String,
    api: Api,
    stream: bool,
    home: PathBuf,
}

impl Config {
    fn from_env() -> Result<Self, Failure> {
        let base = std::env::var("FAKE_AGENT_BASE_URL")
            .map_err(|_| Failure::setup("FAKE_AGENT_BASE_URL is not set (hint: http://127.0.0.1:PORT)"))?;
        if !base.starts_with("http://") {
            return Err(Failure::setup(format!(
                "FAKE_AGENT_BASE_URL '{base}' is not an http:// URL (there is no TLS)"
            )));
        }
        let api = match std::env::var("FAKE_AGENT_API").as_deref() {
            Err(_) | Ok("anthropic") => Api::Anthropic,
            Ok("gemini") => Api::Gemini,
            Ok(other) => {
                return Err(Failure::setup(format!("FAKE_AGENT_API '{other}' is unknown (anthropic or gemini)")))
            }
        };
        let stream = match std::env::var("FAKE_AGENT_STREAM").as_deref() {
            Err(_) | Ok("0") | Ok("") => false,
            Ok("1") => true,
            Ok(other) => return Err(Failure::setup(format!("FAKE_AGENT_STREAM '{other}' is not 0 or 1"))),
        };
        let home = match std::env::var_os("HOME") {
            Some(home) if !home.is_empty() => PathBuf::from(home),
            _ => return Err(Failure::setup("HOME is not set (sessions live in $HOME/.fake-agent)")),
        };
        Ok(Config { base: base.trim_end_matches('/').to_owned(), api, stream, home })
    }
}

fn to_hex(path: &Path) -> String {
    path.to_string_lossy().bytes().fold(String::new(), |mut out, byte| {
        let _ = write!(out, "{byte:02x}");
        out
    })
}

fn new_session_id() -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{nanos:x}-{:x}", std::process::id())
}

// ---------------------------------------------------------------------------------------------
// Instruction files

/// What a rule's frontmatter makes of it.
#[derive(Debug, PartialEq)]
enum Frontmatter<'a> {
    /// No frontmatter: the rule is unconditional, and its whole text is its body.
    Absent(&'a str),
    /// Only a `paths:` list: the rule is conditional on these globs.
    Paths(Vec<String>, &'a str),
    /// Anything else: the rule is ignored, for this reason.
    Other(String),
}

/// Splits a rule's text into its frontmatter and body. The grammar is deliberately small: a
/// first line `---`, then only `paths:` and its `  - glob` items (quotes optional), then `---`.
fn parse_frontmatter(text: &str) -> Frontmatter<'_> {
    let Some(rest) = text.strip_prefix("---\n").or_else(|| text.strip_prefix("---\r\n")) else {
        return Frontmatter::Absent(text);
    };
    let mut globs = Vec::new();
    let mut seen_paths = false;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        offset += line.len();
        let line = line.trim_end_matches(['\n', '\r']);
        if line == "---" {
            return match (seen_paths, globs.is_empty()) {
                (false, _) => Frontmatter::Other("frontmatter has no 'paths' key".into()),
                (true, true) => Frontmatter::Other("'paths' lists no glob".into()),
                (true, false) => Frontmatter::Paths(globs, rest.get(offset..).unwrap_or("")),
            };
        }
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        if line.trim_end() == "paths:" {
            seen_paths = true;
        } else if let (true, true, Some(item)) = (seen_paths, line.starts_with([' ', '\t']), trimmed.strip_prefix("- "))
        {
            globs.push(unquote(item.trim()).to_owned());
        } else {
            return Frontmatter::Other(format!("frontmatter line '{line}' is not allowed (only a 'paths:' list is)"));
        }
    }
    Frontmatter::Other("frontmatter is not closed".into())
}

fn unquote(text: &str) -> &str {
    for quote in ['"', '\''] {
        if let Some(inner) = text.strip_prefix(quote).and_then(|t| t.strip_suffix(quote)) {
            return inner;
        }
    }
    text
}

/// Reads a file whole if it is at most `limit` bytes; `Ok(None)` when it is bigger. Invalid
/// UTF-8 is replaced, since every wire format here carries JSON strings.
fn read_bounded(path: &Path, limit: u64) -> io::Result<Option<String>> {
    let mut bytes = Vec::new();
    fs::File::open(path)?.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Ok(None);
    }
    Ok(Some(String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())))
}

/// Reads an instruction file, or says on stderr why it is left out. A missing file is silent.
fn read_instruction(path: &Path) -> Option<String> {
    match read_bounded(path, INSTRUCTION_LIMIT) {
        Ok(Some(text)) => Some(text),
        Ok(None) => {
            warn(&format!("{}: skipped, over the {INSTRUCTION_LIMIT}-byte limit", path.display()));
            None
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => {
            warn(&format!("{}: cannot read: {e}", path.display()));
            None
        }
    }
}

/// The instruction file of one folder: the first of [`ROOT_NAMES`] that is a file there
/// (symlinks followed).
fn folder_file(folder: &Path) -> Option<PathBuf> {
    ROOT_NAMES.iter().map(|name| folder.join(name)).find(|path| path.is_file())
}

/// One rule module as read now.
enum Rule {
    Unconditional(String),
    Conditional(GlobSet, String),
    Ignored,
}

fn load_rule(path: &Path) -> Rule {
    let Some(text) = read_instruction(path) else { return Rule::Ignored };
    match parse_frontmatter(&text) {
        Frontmatter::Absent(body) => Rule::Unconditional(body.to_owned()),
        Frontmatter::Paths(globs, body) => {
            let mut set = GlobSetBuilder::new();
            for glob in &globs {
                match GlobBuilder::new(glob).literal_separator(true).build() {
                    Ok(glob) => {
                        set.add(glob);
                    }
                    Err(e) => {
                        warn(&format!("{}: ignored, glob '{glob}' is invalid: {e}", path.display()));
                        return Rule::Ignored;
                    }
                }
            }
            match set.build() {
                Ok(set) => Rule::Conditional(set, body.to_owned()),
                Err(e) => {
                    warn(&format!("{}: ignored, globs do not compile: {e}", path.display()));
                    Rule::Ignored
                }
            }
        }
        Frontmatter::Other(reason) => {
            warn(&format!("{}: ignored, {reason}", path.display()));
            Rule::Ignored
        }
    }
}

/// Every `*.md` under `dir`, recursively, following symlinks.
fn walk_rules(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        match fs::metadata(&path) {
            Ok(meta) if meta.is_dir() && depth < RULES_DEPTH => walk_rules(&path, depth + 1, out),
            Ok(meta) if meta.is_file() && path.extension().is_some_and(|ext| ext == "md") => out.push(path),
            _ => {}
        }
    }
}

/// The project's instruction files as read at startup.
struct Project {
    cwd: PathBuf,
    /// The root file and the unconditional rules, in system-prompt order.
    startup: Vec<(PathBuf, String)>,
    /// Conditional rules by path, read again at each touch so that an edit shows.
    conditional: Vec<PathBuf>,
}

impl Project {
    fn load(cwd: &Path) -> Self {
        let mut startup = Vec::new();
        if let Some(root) = folder_file(cwd) {
            if let Some(text) = read_instruction(&root) {
                startup.push((root, text));
            }
        }
        let mut rules = Vec::new();
        walk_rules(&cwd.join(RULES_DIR), 0, &mut rules);
        let mut rules: Vec<(String, PathBuf)> = rules.into_iter().map(|p| (slash_form(cwd, &p), p)).collect();
        rules.sort();
        let mut conditional = Vec::new();
        for (_, path) in rules {
            match load_rule(&path) {
                Rule::Unconditional(body) => startup.push((path, body)),
                Rule::Conditional(..) => conditional.push(path),
                Rule::Ignored => {}
            }
        }
        Project { cwd: cwd.to_owned(), startup, conditional }
    }

    fn system_prompt(&self) -> String {
        let mut out = SYSTEM_HEADER.to_owned();
        for (path, text) in &self.startup {
            let _ = write!(out, "Contents of {}:\n{text}\n", path.display());
        }
        out
    }

    /// The reminders a successful tool call on `touched` adds: the nested folder files from the
    /// first folder under the root down to the file's own, then the conditional rules that match
    /// its path, each only when it is not already attached with the same content.
    fn reminders(&self, touched: &Path, attached: &mut BTreeMap<String, String>) -> Vec<String> {
        let Some(parts) = relative_parts(&self.cwd, touched) else { return Vec::new() };
        let mut found = Vec::new();
        let mut folder = self.cwd.clone();
        for name in parts.iter().take(parts.len().saturating_sub(1)) {
            folder.push(name);
            if let Some(file) = folder_file(&folder) {
                if let Some(text) = read_instruction(&file) {
                    found.push((file, text));
                }
            }
        }
        let candidate = parts.join("/");
        for path in &self.conditional {
            if let Rule::Conditional(globs, body) = load_rule(path) {
                if globs.is_match(&candidate) {
                    found.push((path.clone(), body));
                }
            }
        }
        let mut out = Vec::new();
        for (path, text) in found {
            let key = path.display().to_string();
            if attached.get(&key) == Some(&text) {
                continue;
            }
            out.push(format!("<system-reminder>\nContents of {key}:\n{text}\n</system-reminder>"));
            attached.insert(key, text);
        }
        out
    }
}

/// The path's components below `cwd`, after resolving `.` and `..` lexically (symlinks are not
/// resolved: a link inside the project counts as inside), or `None` when it is not below `cwd`.
fn relative_parts(cwd: &Path, path: &Path) -> Option<Vec<String>> {
    let mut normal = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                normal.pop();
            }
            other => normal.push(other),
        }
    }
    let rest = normal.strip_prefix(cwd).ok()?;
    let parts: Vec<String> = rest.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if parts.is_empty() {
        None
    } else {
        Some(parts)
    }
}

fn slash_form(cwd: &Path, path: &Path) -> String {
    relative_parts(cwd, path).map(|parts| parts.join("/")).unwrap_or_else(|| path.display().to_string())
}

// ---------------------------------------------------------------------------------------------
// Tools

/// A tool call the model asked for.
struct Call {
    id: Option<String>,
    name: String,
    input: Value,
}

/// What a tool call did: its result text, and the file it read or wrote.
struct Outcome {
    text: String,
    is_error: bool,
    touched: Option<PathBuf>,
}

impl Outcome {
    fn error(text: impl Into<String>) -> Self {
        Outcome { text: text.into(), is_error: true, touched: None }
    }
}

enum Tool {
    Read,
    Write,
    Edit,
}

fn run_tool(cwd: &Path, api: Api, call: &Call) -> Outcome {
    let Some(tool) = api.tool(&call.name) else {
        return Outcome::error(format!("unknown tool '{}'", call.name));
    };
    let field = |name: &str| call.input.get(name).and_then(Value::as_str);
    let Some(file_path) = field("file_path") else {
        return Outcome::error("missing string parameter 'file_path'");
    };
    let path = cwd.join(file_path);
    let shown = path.display();
    let result = match tool {
        Tool::Read => match read_bounded(&path, TOOL_READ_LIMIT) {
            Ok(Some(text)) => Ok(text),
            Ok(None) => Err(format!("{shown}: file is over {TOOL_READ_LIMIT} bytes")),
            Err(e) => Err(format!("{shown}: {e}")),
        },
        Tool::Write => {
            let Some(content) = field("content") else { return Outcome::error("missing string parameter 'content'") };
            let made = match path.parent() {
                Some(parent) => fs::create_dir_all(parent),
                None => Ok(()),
            };
            made.and_then(|()| fs::write(&path, content))
                .map(|()| format!("wrote {} bytes to {shown}", content.len()))
                .map_err(|e| format!("{shown}: {e}"))
        }
        Tool::Edit => {
            let (Some(old), Some(new)) = (field("old_string"), field("new_string")) else {
                return Outcome::error("missing string parameter 'old_string' or 'new_string'");
            };
            edit(&path, old, new).map(|()| format!("edited {shown}"))
        }
    };
    match result {
        Ok(text) => Outcome { text, is_error: false, touched: Some(path) },
        Err(text) => Outcome::error(text),
    }
}

fn edit(path: &Path, old: &str, new: &str) -> Result<(), String> {
    let shown = path.display();
    if old.is_empty() {
        return Err("old_string is empty".into());
    }
    let text = match read_bounded(path, TOOL_READ_LIMIT) {
        Ok(Some(text)) => text,
        Ok(None) => return Err(format!("{shown}: file is over {TOOL_READ_LIMIT} bytes")),
        Err(e) => return Err(format!("{shown}: {e}")),
    };
    if !text.contains(old) {
        return Err(format!("{shown}: old_string not found"));
    }
    fs::write(path, text.replacen(old, new, 1)).map_err(|e| format!("{shown}: {e}"))
}

// ---------------------------------------------------------------------------------------------
// Sessions

struct Session {
    session_id: String,
    api: Api,
    system: String,
    messages: Vec<Value>,
    /// Attached files by absolute path, with the content attached.
    attached: BTreeMap<String, String>,
}

impl Session {
    /// Loads the last session of this cwd; the system prompt is the one built now, not the saved
    /// one, as a CLI that reads its files again at every start does.
    fn load(path: &Path, api: Api, system: String) -> Result<Self, Failure> {
        let shown = path.display();
        let text =
            fs::read_to_string(path).map_err(|e| Failure::setup(format!("{shown}: no session to continue: {e}")))?;
        let value: Value =
            serde_json::from_str(&text).map_err(|e| Failure::setup(format!("{shown}: session is not JSON: {e}")))?;
        let bad = |what: &str| Failure::setup(format!("{shown}: session has no {what}"));
        if value.get("api").and_then(Value::as_str) != Some(api.name()) {
            return Err(Failure::setup(format!("{shown}: session was not made with FAKE_AGENT_API={}", api.name())));
        }
        let session_id = value.get("session_id").and_then(Value::as_str).ok_or_else(|| bad("session_id"))?.to_owned();
        let messages = value.get("messages").and_then(Value::as_array).ok_or_else(|| bad("messages"))?.clone();
        let mut attached = BTreeMap::new();
        for (key, content) in value.get("attached").and_then(Value::as_object).ok_or_else(|| bad("attached"))? {
            let content = content.as_str().ok_or_else(|| bad("string content in attached"))?;
            attached.insert(key.clone(), content.to_owned());
        }
        Ok(Session { session_id, api, system, messages, attached })
    }

    fn save(&self, path: &Path) -> Result<(), Failure> {
        let value = json!({
            "session_id": self.session_id,
            "api": self.api.name(),
            "system": self.system,
            "messages": self.messages,
            "attached": self.attached,
        });
        let fail = |e: io::Error| Failure::setup(format!("{}: cannot save the session: {e}", path.display()));
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(fail)?;
        }
        fs::write(path, value.to_string()).map_err(fail)
    }
}

// ---------------------------------------------------------------------------------------------
// Wire

struct Http {
    agent: ureq::Agent,
    api: Api,
}

impl Http {
    fn new(config: &Config) -> Self {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .proxy(None)
            .max_redirects(0)
            .timeout_global(Some(HTTP_TIMEOUT))
            .build()
            .into();
        Http { agent, api: config.api }
    }

    /// Posts one JSON body and returns the reply's text; a status outside 2xx is an error.
    fn post(&self, url: &str, body: &Value) -> Result<String, Failure> {
        let payload = body.to_string();
        let request = self.agent.post(url).header("content-type", "application/json");
        let request = match self.api {
            Api::Anthropic => request.header("anthropic-version", "2023-06-01").header("x-api-key", "fake-agent"),
            Api::Gemini => request.header("x-goog-api-key", "fake-agent"),
        };
        let mut response = request.send(payload.as_str()).map_err(|e| Failure::wire(format!("POST {url}: {e}")))?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .with_config()
            .limit(REPLY_LIMIT)
            .read_to_string()
            .map_err(|e| Failure::wire(format!("POST {url}: cannot read the reply: {e}")))?;
        if !(200..300).contains(&status) {
            let head: String = text.chars().take(300).collect();
            return Err(Failure::wire(format!("POST {url}: HTTP {status}: {head}")));
        }
        Ok(text)
    }
}

/// One parsed model reply.
struct Reply {
    /// The assistant turn as it goes back into the history.
    turn: Value,
    texts: Vec<String>,
    calls: Vec<Call>,
    stop: Option<String>,
}

/// The data payloads of a server-sent-events stream, one per event.
fn sse_data(text: &str) -> Vec<String> {
    let mut events = Vec::new();
    let mut data: Option<String> = None;
    for line in text.lines() {
        if line.is_empty() {
            events.extend(data.take());
        } else if let Some(piece) = line.strip_prefix("data:") {
            let piece = piece.strip_prefix(' ').unwrap_or(piece);
            match &mut data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(piece);
                }
                None => data = Some(piece.to_owned()),
            }
        }
    }
    events.extend(data);
    events
}

fn parse_json(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| {
        let head: String = text.chars().take(200).collect();
        format!("reply is not JSON ({e}): {head}")
    })
}

#[derive(Clone, Copy)]
enum Api {
    Anthropic,
    Gemini,
}

impl Api {
    fn name(self) -> &'static str {
        match self {
            Api::Anthropic => "anthropic",
            Api::Gemini => "gemini",
        }
    }

    fn url(self, base: &str, stream: bool) -> String {
        match (self, stream) {
            (Api::Anthropic, _) => format!("{base}/v1/messages"),
            (Api::Gemini, false) => format!("{base}/v1beta/models/{MODEL}:generateContent"),
            (Api::Gemini, true) => format!("{base}/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"),
        }
    }

    fn tool(self, name: &str) -> Option<Tool> {
        match (self, name) {
            (Api::Anthropic, "Read") | (Api::Gemini, "read_file") => Some(Tool::Read),
            (Api::Anthropic, "Write") | (Api::Gemini, "write_file") => Some(Tool::Write),
            (Api::Anthropic, "Edit") | (Api::Gemini, "replace") => Some(Tool::Edit),
            _ => None,
        }
    }

    /// The tools offered, as (name, description, JSON schema).
    fn tools(self) -> Vec<(&'static str, &'static str, Value)> {
        let schema = |fields: &[&str]| {
            let properties: Map<String, Value> =
                fields.iter().map(|f| ((*f).to_owned(), json!({"type": "string"}))).collect();
            json!({"type": "object", "properties": properties, "required": fields})
        };
        let (read, write, edit) = match self {
            Api::Anthropic => ("Read", "Write", "Edit"),
            Api::Gemini => ("read_file", "write_file", "replace"),
        };
        vec![
            (read, "Reads a file and returns its content.", schema(&["file_path"])),
            (write, "Creates or overwrites a file, creating its folders.", schema(&["file_path", "content"])),
            (edit, "Replaces the first occurrence of old_string.", schema(&["file_path", "old_string", "new_string"])),
        ]
    }

    fn user_turn(self, text: &str) -> Value {
        match self {
            Api::Anthropic => json!({"role": "user", "content": [{"type": "text", "text": text}]}),
            Api::Gemini => json!({"role": "user", "parts": [{"text": text}]}),
        }
    }

    /// The title request: no system prompt, no tools.
    fn side_body(self, prompt: &str, stream: bool) -> Value {
        let turn = self.user_turn(&format!("Write a title for: {prompt}"));
        match self {
            Api::Anthropic => json!({"model": MODEL, "max_tokens": 1024, "messages": [turn], "stream": stream}),
            Api::Gemini => json!({"contents": [turn]}),
        }
    }

    fn main_body(self, system: &str, messages: &[Value], stream: bool) -> Value {
        match self {
            Api::Anthropic => {
                let tools: Vec<Value> = self
                    .tools()
                    .into_iter()
                    .map(|(name, description, schema)| {
                        json!({"name": name, "description": description, "input_schema": schema})
                    })
                    .collect();
                json!({
                    "model": MODEL,
                    "max_tokens": 1024,
                    "system": [{"type": "text", "text": system}],
                    "messages": messages,
                    "tools": tools,
                    "stream": stream,
                })
            }
            Api::Gemini => {
                let declarations: Vec<Value> = self
                    .tools()
                    .into_iter()
                    .map(|(name, description, schema)| {
                        json!({"name": name, "description": description, "parameters": schema})
                    })
                    .collect();
                json!({
                    "systemInstruction": {"parts": [{"text": system}]},
                    "contents": messages,
                    "tools": [{"functionDeclarations": declarations}],
                })
            }
        }
    }

    fn parse(self, text: &str, stream: bool) -> Result<Reply, String> {
        match (self, stream) {
            (Api::Anthropic, false) => anthropic_reply(&parse_json(text)?),
            (Api::Anthropic, true) => anthropic_stream(text),
            (Api::Gemini, false) => gemini_reply(&[parse_json(text)?]),
            (Api::Gemini, true) => {
                let chunks = sse_data(text).iter().map(|data| parse_json(data)).collect::<Result<Vec<_>, _>>()?;
                gemini_reply(&chunks)
            }
        }
    }

    /// A reply without tool calls ends the run only when the model said it was done.
    fn check_final(self, reply: &Reply) -> Result<(), String> {
        match (self, reply.stop.as_deref()) {
            (Api::Gemini, _) | (Api::Anthropic, Some("end_turn")) => Ok(()),
            (Api::Anthropic, stop) => {
                Err(format!("reply stopped with {stop:?} and asked for no tool (expected end_turn)"))
            }
        }
    }

    /// The user turn that answers the calls: Anthropic puts every reminder after the
    /// `tool_result` blocks; Gemini, as Gemini CLI does, appends them to the output of the
    /// function response whose call touched the file.
    fn results_turn(self, calls: &[Call], outcomes: &[(Outcome, Vec<String>)]) -> Value {
        match self {
            Api::Anthropic => {
                let mut content = Vec::new();
                for (call, (outcome, _)) in calls.iter().zip(outcomes) {
                    let mut block = Map::new();
                    block.insert("type".into(), json!("tool_result"));
                    block.insert("tool_use_id".into(), json!(call.id.as_deref().unwrap_or("")));
                    block.insert("content".into(), json!(outcome.text));
                    if outcome.is_error {
                        block.insert("is_error".into(), Value::Bool(true));
                    }
                    content.push(Value::Object(block));
                }
                for reminder in outcomes.iter().flat_map(|(_, reminders)| reminders) {
                    content.push(json!({"type": "text", "text": reminder}));
                }
                json!({"role": "user", "content": content})
            }
            Api::Gemini => {
                let parts: Vec<Value> = calls
                    .iter()
                    .zip(outcomes)
                    .map(|(call, (outcome, reminders))| {
                        let response = if outcome.is_error {
                            json!({"error": outcome.text})
                        } else {
                            let mut output = outcome.text.clone();
                            for reminder in reminders {
                                output.push('\n');
                                output.push_str(reminder);
                            }
                            json!({"output": output})
                        };
                        let mut function_response = Map::new();
                        if let Some(id) = &call.id {
                            function_response.insert("id".into(), json!(id));
                        }
                        function_response.insert("name".into(), json!(call.name));
                        function_response.insert("response".into(), response);
                        json!({"functionResponse": function_response})
                    })
                    .collect();
                json!({"role": "user", "parts": parts})
            }
        }
    }
}

/// Builds a reply from Anthropic content blocks (`text` and `tool_use`; others are dropped).
fn anthropic_blocks(blocks: Vec<Value>, stop: Option<String>) -> Result<Reply, String> {
    let mut content = Vec::new();
    let mut texts = Vec::new();
    let mut calls = Vec::new();
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                let text = block.get("text").and_then(Value::as_str).unwrap_or("").to_owned();
                content.push(json!({"type": "text", "text": text}));
                texts.push(text);
            }
            Some("tool_use") => {
                let id = block.get("id").and_then(Value::as_str).ok_or("tool_use block has no id")?.to_owned();
                let name = block.get("name").and_then(Value::as_str).ok_or("tool_use block has no name")?.to_owned();
                let input = block.get("input").cloned().unwrap_or_else(|| json!({}));
                content.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
                calls.push(Call { id: Some(id), name, input });
            }
            _ => {}
        }
    }
    Ok(Reply { turn: json!({"role": "assistant", "content": content}), texts, calls, stop })
}

fn anthropic_reply(value: &Value) -> Result<Reply, String> {
    if value.get("type").and_then(Value::as_str) == Some("error") {
        return Err(format!("the model answered an error: {}", value.get("error").unwrap_or(&Value::Null)));
    }
    let blocks = value.get("content").and_then(Value::as_array).ok_or("reply has no 'content' array")?.clone();
    anthropic_blocks(blocks, value.get("stop_reason").and_then(Value::as_str).map(str::to_owned))
}

/// Assembles a streamed Anthropic message: blocks by index, text from `text_delta`s, tool input
/// from the `input_json_delta.partial_json` pieces.
fn anthropic_stream(text: &str) -> Result<Reply, String> {
    let mut blocks: BTreeMap<u64, (Value, String)> = BTreeMap::new();
    let mut stop = None;
    for data in sse_data(text) {
        let event = parse_json(&data)?;
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        match event.get("type").and_then(Value::as_str) {
            Some("content_block_start") => {
                let block = event.get("content_block").cloned().ok_or("content_block_start has no content_block")?;
                blocks.insert(index, (block, String::new()));
            }
            Some("content_block_delta") => {
                let (block, json) = blocks.get_mut(&index).ok_or(format!("delta for unknown block {index}"))?;
                let delta = event.get("delta").ok_or("content_block_delta has no delta")?;
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        let piece = delta.get("text").and_then(Value::as_str).unwrap_or("");
                        let joined = format!("{}{piece}", block.get("text").and_then(Value::as_str).unwrap_or(""));
                        set_field(block, "text", Value::String(joined))?;
                    }
                    Some("input_json_delta") => {
                        json.push_str(delta.get("partial_json").and_then(Value::as_str).unwrap_or(""));
                    }
                    _ => {}
                }
            }
            Some("message_delta") => {
                if let Some(reason) = event.get("delta").and_then(|d| d.get("stop_reason")).and_then(Value::as_str) {
                    stop = Some(reason.to_owned());
                }
            }
            Some("error") => {
                return Err(format!("the stream carried an error: {}", event.get("error").unwrap_or(&Value::Null)))
            }
            _ => {}
        }
    }
    let mut assembled = Vec::new();
    for (_, (mut block, json)) in blocks {
        if !json.is_empty() {
            let input = serde_json::from_str(&json).map_err(|e| format!("tool input '{json}' is not JSON: {e}"))?;
            set_field(&mut block, "input", input)?;
        }
        assembled.push(block);
    }
    anthropic_blocks(assembled, stop)
}

/// Sets a field of a block the server sent; `value[key] = ..` would panic on a non-object.
fn set_field(block: &mut Value, key: &str, value: Value) -> Result<(), String> {
    let object = block.as_object_mut().ok_or("a content block is not an object")?;
    object.insert(key.to_owned(), value);
    Ok(())
}

/// Builds a reply from Gemini chunks (one for a plain reply): the first candidate's parts of
/// every chunk, adjacent texts joined.
fn gemini_reply(chunks: &[Value]) -> Result<Reply, String> {
    let mut parts: Vec<Value> = Vec::new();
    let mut calls = Vec::new();
    let mut stop = None;
    for chunk in chunks {
        if let Some(error) = chunk.get("error") {
            return Err(format!("the model answered an error: {error}"));
        }
        let Some(candidate) = chunk.get("candidates").and_then(|c| c.get(0)) else { continue };
        if let Some(reason) = candidate.get("finishReason").and_then(Value::as_str) {
            stop = Some(reason.to_owned());
        }
        let pieces = candidate.get("content").and_then(|c| c.get("parts")).and_then(Value::as_array);
        for part in pieces.into_iter().flatten() {
            if let Some(text) = part.get("text").and_then(Value::as_str) {
                match parts.last_mut().and_then(|last| last.get_mut("text")) {
                    Some(Value::String(last)) => last.push_str(text),
                    _ => parts.push(json!({"text": text})),
                }
            } else if let Some(call) = part.get("functionCall") {
                let name = call.get("name").and_then(Value::as_str).ok_or("functionCall has no name")?.to_owned();
                let input = call.get("args").cloned().unwrap_or_else(|| json!({}));
                let id = call.get("id").and_then(Value::as_str).map(str::to_owned);
                calls.push(Call { id, name, input });
                parts.push(part.clone());
            }
        }
    }
    if parts.is_empty() {
        return Err("reply has neither text nor a function call".into());
    }
    let texts = parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).map(str::to_owned).collect();
    Ok(Reply { turn: json!({"role": "model", "parts": parts}), texts, calls, stop })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::no_frontmatter("body\n", Frontmatter::Absent("body\n"))]
    #[case::paths_list("---\npaths:\n  - \"src/**\"\n  - lib/*.rs\n---\nbody\n", Frontmatter::Paths(vec!["src/**".into(), "lib/*.rs".into()], "body\n"))]
    #[case::crlf("---\r\npaths:\r\n  - 'a'\r\n---\r\nbody", Frontmatter::Paths(vec!["a".into()], "body"))]
    #[case::other_key("---\ndescription: x\n---\nbody\n", Frontmatter::Other("frontmatter line 'description: x' is not allowed (only a 'paths:' list is)".into()))]
    #[case::empty_paths("---\npaths:\n---\nbody\n", Frontmatter::Other("'paths' lists no glob".into()))]
    #[case::empty("---\n---\nbody\n", Frontmatter::Other("frontmatter has no 'paths' key".into()))]
    #[case::unclosed("---\npaths:\n  - a\n", Frontmatter::Other("frontmatter is not closed".into()))]
    fn frontmatter_decides_the_rule_kind(#[case] text: &str, #[case] expected: Frontmatter<'_>) {
        assert_eq!(parse_frontmatter(text), expected);
    }

    #[rstest]
    #[case::inside("/p/src/a.ts", Some("src/a.ts"))]
    #[case::dot_dot_back_inside("/p/x/../src/a.ts", Some("src/a.ts"))]
    #[case::dot_dot_outside("/p/../q/a.ts", None)]
    #[case::root_itself("/p", None)]
    fn relative_parts_are_lexical(#[case] path: &str, #[case] expected: Option<&str>) {
        assert_eq!(relative_parts(Path::new("/p"), Path::new(path)).map(|p| p.join("/")).as_deref(), expected);
    }

    #[test]
    fn sse_data_joins_multi_line_events_and_skips_other_fields() {
        let text = "event: a\ndata: {\"x\":\ndata: 1}\n\n: comment\ndata:2\n";
        assert_eq!(sse_data(text), vec!["{\"x\":\n1}".to_owned(), "2".to_owned()]);
    }
}
