//! The agent runner end to end and offline: `conformance --agent` runs the fake agent of
//! harness/src/bin/fake-agent.rs, an unmodified CLI as far as the runner knows, against its fake
//! model endpoint. The whole modules profile gates on a checked-in manifest over both wire APIs
//! and both encodings; a passing case says how the CLI was confined and where each file sat;
//! cases a black box cannot take are UNSUPPORTED with the reason; transcripts and reproductions
//! hold the CLI's requests; a run leaves no process and no temporary folder behind; bad recipes
//! and missing CLIs are refused with a way out; a restart resumes the CLI's own session.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

const CONFORMANCE: &str = env!("CARGO_BIN_EXE_conformance");
const FAKE_AGENT: &str = env!("CARGO_BIN_EXE_fake-agent");
/// The fake agent's recipe, whose `path = "fake-agent"` each world points at the built binary.
const TEMPLATE: &str = include_str!("agents/fake-agent.toml");
/// What the fake agent is expected to get wrong over the modules profile, and why.
const MANIFEST: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/agents/fake-agent.expectations.yaml");
/// The words a run uses for a CLI confined to a network namespace with only loopback.
const ISOLATED: &str = "network: loopback only (a network namespace of its own)";

/// A temporary world: recipes, `bin/fake-agent` (a link to the built binary, so that every
/// fake-agent process names this world in its command line), `tmp/` (the harness's TMPDIR, which
/// must be empty again after every run) and whatever a test writes.
struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for d in ["bin", "tmp"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::os::unix::fs::symlink(FAKE_AGENT, root.join("bin/fake-agent")).unwrap();
        World { _dir: dir, root }
    }

    fn path(&self, rel: &str) -> String {
        self.root.join(rel).to_string_lossy().into_owned()
    }

    /// Writes the fake agent's recipe as `NAME.toml`, with each `(line, replacement)` of `edits`
    /// applied to a line that must occur exactly once, so that a changed template fails loudly
    /// instead of leaving a variant silently the same as the original.
    fn recipe(&self, name: &str, edits: &[(&str, &str)]) -> String {
        let program = format!("path = \"{}\"", self.path("bin/fake-agent"));
        let mut text = replace_line(TEMPLATE, "path = \"fake-agent\"", &program);
        for (from, to) in edits {
            text = replace_line(&text, from, to);
        }
        let path = self.path(&format!("{name}.toml"));
        std::fs::write(&path, text).unwrap();
        path
    }

    /// A `conformance` command whose temporary folders go to this world's `tmp/`.
    fn conformance(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(CONFORMANCE);
        cmd.args(args).env("TMPDIR", self.root.join("tmp")).stdin(Stdio::null());
        cmd
    }

    fn run(&self, args: &[&str]) -> Run {
        Run::of(self.conformance(args).output().unwrap())
    }

    /// Writes a case file into `cases/` (a flat folder of cases, as `--cases` takes it).
    fn case(&self, id: &str, body: &str) {
        let dir = self.root.join("cases");
        std::fs::create_dir_all(&dir).unwrap();
        let text = format!("id: {id}\ntitle: t\nspec: [{{decision: D-X}}]\nprofile: modules\n{body}");
        std::fs::write(dir.join(format!("{id}.yaml")), text).unwrap();
    }

    /// The live processes whose command line names this world: the fake agents a run started
    /// (their program is `bin/fake-agent` here) and any `conformance` still running on it. A
    /// zombie has an empty command line, so only a process that still runs counts.
    fn processes(&self) -> Vec<String> {
        let needle = self.root.to_string_lossy().into_owned();
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.bytes().all(|b| b.is_ascii_digit()) || name == std::process::id().to_string() {
                continue;
            }
            // A process may end between the listing and the read; that is not a leak.
            let Ok(bytes) = std::fs::read(entry.path().join("cmdline")) else { continue };
            let line = String::from_utf8_lossy(&bytes).replace('\0', " ");
            if line.contains(&needle) {
                found.push(format!("{name}: {line}"));
            }
        }
        found
    }

    /// Nothing of a finished run is left: no process naming this world and nothing in its TMPDIR
    /// (each case's `conformance-*` sandbox, the CLI's HOME and its sessions live there).
    fn assert_clean(&self) {
        assert_eq!(self.processes(), Vec::<String>::new(), "processes left running");
        let left: Vec<_> = std::fs::read_dir(self.root.join("tmp")).unwrap().map(|e| e.unwrap().path()).collect();
        assert!(left.is_empty(), "left behind in TMPDIR: {left:?}");
    }
}

fn replace_line(text: &str, from: &str, to: &str) -> String {
    let hits = text.lines().filter(|l| *l == from).count();
    assert_eq!(hits, 1, "the recipe template has {hits} lines '{from}'");
    let lines: Vec<&str> = text.lines().map(|l| if l == from { to } else { l }).collect();
    lines.join("\n") + "\n"
}

/// A finished `conformance` process.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn of(out: Output) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// The end of stderr, for assertion messages: a whole profile's summary is long.
    fn tail(&self) -> &str {
        let mut from = self.stderr.len().saturating_sub(4000);
        while !self.stderr.is_char_boundary(from) {
            from += 1;
        }
        &self.stderr[from..]
    }

    /// The results of a `--format json` report.
    fn results(&self) -> Vec<Value> {
        let report: Value = serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not a JSON report ({e}): {}", self.tail()));
        report["results"].as_array().unwrap().clone()
    }

    /// Case id → status of a `--format json` report.
    fn statuses(&self) -> BTreeMap<String, String> {
        self.results()
            .iter()
            .map(|r| (r["id"].as_str().unwrap().to_owned(), r["status"].as_str().unwrap().to_owned()))
            .collect()
    }

    /// The results a manifest did not expect, with their reasons, for assertion messages.
    fn unexpected(&self) -> Vec<String> {
        let Ok(report) = serde_json::from_str::<Value>(&self.stdout) else { return Vec::new() };
        let results = report["results"].as_array().cloned().unwrap_or_default();
        results
            .iter()
            .filter(|r| !matches!(r["status"].as_str(), Some("PASS" | "XFAIL" | "UNSUPPORTED")))
            .map(|r| format!("{} {} {}", r["id"], r["status"], r["reason"]))
            .collect()
    }

    fn result(&self, id: &str) -> Value {
        self.results().into_iter().find(|r| r["id"] == id).unwrap_or_else(|| panic!("no result for {id}"))
    }
}

/// The notes of a result.
fn notes(result: &Value) -> Vec<String> {
    result["notes"].as_array().map(|n| n.iter().map(|v| v.as_str().unwrap().to_owned()).collect()).unwrap_or_default()
}

/// The requests of a transcript, one JSON object per line, each with the request the CLI sent.
fn transcript(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let lines: Vec<Value> = text
        .lines()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: a line is not JSON ({e}): {l}", path.display()))
        })
        .collect();
    assert!(!lines.is_empty(), "{} is empty", path.display());
    for line in &lines {
        assert!(line["request"].is_object(), "{}: a line has no request: {line}", path.display());
    }
    lines
}

/// Whether this machine lets a process make a network namespace with loopback up, as the
/// runner's jail does (`unshare(CLONE_NEWNET)`, then `ip link set lo up`).
fn namespaces_work() -> bool {
    Command::new("unshare")
        .args(["-n", "ip", "link", "set", "lo", "up"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The three ways the fake agent talks to the model: Anthropic Messages streamed (the template),
/// the same as one JSON reply, and Gemini (streamed), with Gemini CLI's tool names.
fn variants(w: &World) -> [(&'static str, String); 3] {
    let plain = [("FAKE_AGENT_STREAM = \"1\"", "FAKE_AGENT_STREAM = \"0\"")];
    let gemini = [
        ("api = \"anthropic-messages\"", "api = \"gemini\""),
        ("FAKE_AGENT_API = \"anthropic\"", "FAKE_AGENT_API = \"gemini\""),
        ("name = \"Read\"", "name = \"read_file\""),
        ("name = \"Write\"", "name = \"write_file\""),
        ("name = \"Edit\"", "name = \"replace\""),
    ];
    [
        ("anthropic streamed", w.recipe("streamed", &[])),
        ("anthropic plain", w.recipe("plain", &plain)),
        ("gemini", w.recipe("gemini", &gemini)),
    ]
}

#[test]
fn the_modules_profile_gives_the_manifests_statuses_over_both_apis_and_both_encodings() {
    let w = World::new();
    // The three runs go at once: each waits on its CLIs far more than it computes.
    let children: Vec<_> = variants(&w)
        .into_iter()
        .map(|(name, recipe)| {
            let manifest = MANIFEST.to_owned();
            let args = [
                "run",
                "--agent",
                &recipe,
                "--profile",
                "modules",
                "--jobs",
                "2",
                "--format",
                "json",
                "--expectations",
            ];
            let mut cmd = w.conformance(&args);
            let child = cmd.arg(&manifest).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
            (name, child)
        })
        .collect();
    let mut statuses = BTreeMap::new();
    for (name, child) in children {
        let run = Run::of(child.wait_with_output().unwrap());
        assert_eq!(run.code, 0, "{name}: {:?}\n{}", run.unexpected(), run.tail());
        statuses.insert(name, run.statuses());
    }
    let streamed = &statuses["anthropic streamed"];
    let count = |status: &str| streamed.values().filter(|s| *s == status).count();
    assert!(count("PASS") > 100 && count("XFAIL") > 50 && count("UNSUPPORTED") > 100, "{streamed:?}");
    assert_eq!(&statuses["anthropic plain"], streamed, "plain JSON replies change a status");
    assert_eq!(&statuses["gemini"], streamed, "the Gemini API changes a status");
    w.assert_clean();
}

#[test]
fn a_passing_case_notes_its_network_and_the_root_file_in_the_system_prompt() {
    let w = World::new();
    let recipe = w.recipe("fake", &[]);
    let run = w.run(&["run", "--agent", &recipe, "--filter", "x-001", "--format", "json"]);
    assert_eq!(run.code, 0, "{}", run.tail());
    let result = run.result("x-001");
    assert_eq!(result["status"], "PASS", "{result}");
    let notes = notes(&result);
    assert!(notes.iter().any(|n| n == "request 1 (startup): AGENTS.md in the system"), "{notes:?}");
    let network = notes.iter().find(|n| n.starts_with("network: ")).unwrap_or_else(|| panic!("{notes:?}"));
    if namespaces_work() {
        assert_eq!(network, ISOLATED);
    } else {
        assert!(network.starts_with("network: the host's network"), "{network}");
    }
}

#[test]
fn cases_a_black_box_cannot_take_are_unsupported_saying_why() {
    let w = World::new();
    // Each expects its root file at startup but the last, which expects only a diagnostic: a
    // CLI's requests show what it loaded, never what it reported.
    let startup = |root: &str| {
        format!(
            r##"steps:
  - start:
    expect:
      startup:
        - {{path: {root}, kind: root, content: "# Root\n"}}
"##
        )
    };
    let posix = "platform: posix\nrules: [nested]\n";
    w.case("t-root", &format!("{posix}tree:\n  AGENTS.md: \"# Root\\n\"\n{}", startup("AGENTS.md")));
    w.case(
        "t-override",
        &format!("{posix}tree:\n  AGENTS.override.md: \"# Root\\n\"\n{}", startup("AGENTS.override.md")),
    );
    w.case(
        "t-windows",
        &format!(
            "platform: windows\ncapabilities: [windows_targets]\nrules: [nested]\n{}{}",
            "tree:\n  AGENTS.md: \"# Root\\n\"\n",
            startup("AGENTS.md")
        ),
    );
    w.case(
        "t-diagnostics",
        r##"platform: posix
capabilities: [rule_modules]
rules: [frontmatter]
tree:
  AGENTS.md: "# Root\n"
  .elowen/rules/bad.md: "---\npath: x\n---\n# Bad\n"
steps:
  - start:
    expect:
      diagnostics:
        - {code: frontmatter.unknown_key, path: .elowen/rules/bad.md}
"##,
    );
    let recipe = w.recipe("fake", &[]);
    let cases = w.path("cases");
    let base = ["run", "--agent", &recipe, "--cases", &cases, "--format", "json"];
    let run = w.run(&base);
    assert_eq!(run.code, 0, "{}", run.tail());
    let reason = |id: &str| {
        let r = run.result(id);
        assert_eq!(r["status"], "UNSUPPORTED", "{r}");
        r["reason"].as_str().unwrap().to_owned()
    };
    assert_eq!(run.result("t-root")["status"], "PASS");
    assert!(reason("t-override").contains("has no name for AGENTS.override.md"));
    assert!(reason("t-windows").contains("windows_targets"));
    assert!(reason("t-diagnostics").contains("(diagnostics) is invisible in what the implementation sends"));
    // Given the capability, the Windows case is still one no CLI on this host can be given.
    let caps = "rule_modules,nested_files,restart,windows_targets";
    let run = w.run(&[&base[..], &["--capabilities", caps][..]].concat());
    assert_eq!(run.code, 0, "{}", run.tail());
    let r = run.result("t-windows");
    assert_eq!(r["status"], "UNSUPPORTED", "{r}");
    assert!(r["reason"].as_str().unwrap().contains("a Windows target cannot be given"), "{r}");
}

#[test]
fn transcripts_are_written_for_the_cases_that_do_not_pass_and_hold_each_request() {
    let w = World::new();
    let recipe = w.recipe("fake", &[]);
    let dir = w.path("transcripts");
    let run = w.run(&[
        "run",
        "--agent",
        &recipe,
        "--filter",
        "m-fm-00",
        "--format",
        "json",
        "--expectations",
        MANIFEST,
        "--transcripts",
        &dir,
    ]);
    assert_eq!(run.code, 0, "{}", run.tail());
    let statuses = run.statuses();
    let failing: Vec<String> =
        statuses.iter().filter(|(_, s)| *s != "PASS").map(|(id, _)| format!("{id}.jsonl")).collect();
    assert!(statuses.values().any(|s| s == "PASS") && !failing.is_empty(), "{statuses:?}");
    let mut written: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    written.sort();
    assert_eq!(written, failing);
    for name in &written {
        transcript(&Path::new(&dir).join(name));
    }
    w.assert_clean();
}

#[test]
fn repro_with_an_agent_writes_the_transcript_of_its_startup_request() {
    let w = World::new();
    let recipe = w.recipe("fake", &[]);
    let out = w.path("repro");
    let run = w.run(&["repro", "m-fm-002", &out, "--transcript", "--agent", &recipe]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.tail());
    let result = std::fs::read_to_string(w.root.join("repro/result.txt")).unwrap();
    assert!(result.starts_with("FAIL ") && result.contains("[m-fm-002]"), "{result}");
    let lines = transcript(&w.root.join("repro/transcript.jsonl"));
    let startup = lines.iter().find(|l| l["request"]["system"].is_array()).unwrap_or_else(|| panic!("{lines:?}"));
    let system = startup["request"]["system"].to_string();
    assert!(system.contains("/project/AGENTS.md:") && system.contains("# Root"), "{system}");
    w.assert_clean();
}

#[test]
fn a_run_leaves_no_agent_process_and_no_temporary_folder() {
    let w = World::new();
    let recipe = w.recipe("fake", &[]);
    assert_eq!(w.processes(), Vec::<String>::new());
    // Lifetime cases start, resume and stop the CLI many times, some of them failing.
    let run = w.run(&[
        "run",
        "--agent",
        &recipe,
        "--filter",
        "m-life-0",
        "--jobs",
        "2",
        "--format",
        "json",
        "--expectations",
        MANIFEST,
    ]);
    assert_eq!(run.code, 0, "{}", run.tail());
    assert!(run.statuses().values().any(|s| s == "PASS"), "{}", run.tail());
    w.assert_clean();
}

#[test]
fn a_recipe_with_an_unknown_field_is_refused_naming_its_file_and_line() {
    let w = World::new();
    let recipe = w.recipe("bad", &[("[package]", "flavour = \"mint\"\n\n[package]")]);
    let line = std::fs::read_to_string(&recipe).unwrap().lines().position(|l| l == "flavour = \"mint\"").unwrap() + 1;
    let run = w.run(&["run", "--agent", &recipe, "--filter", "x-001"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains(&format!("{recipe}:{line}: unknown field `flavour`")), "{}", run.stderr);
    w.assert_clean();
}

#[test]
fn an_npm_agent_that_is_not_installed_is_refused_saying_how_to_install_it() {
    let w = World::new();
    let cache = w.path("empty-cache");
    std::fs::create_dir(&cache).unwrap();
    let run = w
        .conformance(&["run", "--agent", "claude-code", "--filter", "x-001"])
        .env("CONFORMANCE_AGENT_CACHE", &cache)
        .output()
        .unwrap();
    let run = Run::of(run);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("is not installed"), "{}", run.stderr);
    assert!(run.stderr.contains("install it with `.ci/agents claude-code@"), "{}", run.stderr);
    w.assert_clean();
}

#[test]
fn a_restart_resumes_the_agents_own_session_with_continue() {
    let w = World::new();
    let recipe = w.recipe("fake", &[]);
    // m-life-007: after a restart, a touch of a loaded, unchanged rule appends nothing.
    let run = w.run(&["run", "--agent", &recipe, "--filter", "m-life-007", "--format", "json"]);
    assert_eq!(run.code, 0, "{}", run.tail());
    assert_eq!(run.result("m-life-007")["status"], "PASS");
    let out = w.path("repro");
    let run = w.run(&["repro", "m-life-007", &out, "--transcript", "--agent", &recipe]);
    assert_eq!(run.code, 0, "{}", run.tail());
    // The resumed CLI (`--continue -p "go on"`) sends the first conversation with the new prompt
    // after it: the session was the agent's own, not a new one.
    let lines = transcript(&w.root.join("repro/transcript.jsonl"));
    let user_texts = |line: &Value| -> Vec<String> {
        let messages = line["request"]["messages"].as_array().cloned().unwrap_or_default();
        messages
            .iter()
            .filter(|m| m["role"] == "user")
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .filter_map(|c| c["text"].as_str().map(str::to_owned))
            .collect()
    };
    assert!(
        lines.iter().any(|l| {
            let texts = user_texts(l);
            texts.first().is_some_and(|t| t == "go") && texts.last().is_some_and(|t| t == "go on")
        }),
        "no request carries the first prompt and the resumed one: {:?}",
        lines.iter().map(user_texts).collect::<Vec<_>>()
    );
    w.assert_clean();
}

#[test]
fn a_canary_the_agent_reads_through_a_folder_link_out_of_the_project_fails_the_case() {
    let w = World::new();
    let recipe = w.recipe("fake", &[]);
    let out = w.path("repro");
    let run = w.run(&["repro", "m-link-005", &out, "--transcript", "--agent", &recipe]);
    assert_eq!(run.code, 0, "{}", run.tail());
    // fake-agent follows the folder link .fake/rules/shared out of the project and puts the
    // outside rule, canary and all, in its system prompt.
    let text = std::fs::read_to_string(w.root.join("repro/transcript.jsonl")).unwrap();
    assert!(text.contains("/project/.fake/rules/shared/secret.md:\\nCANARY-LINK-005"), "{text}");
    // The tree walk never goes below a folder link, but the canary is looked for in the requests
    // themselves: the text the CLI put in front of the model is observed at the path it names.
    let result = std::fs::read_to_string(w.root.join("repro/result.txt")).unwrap();
    assert!(result.starts_with("FAIL "), "{result}");
    assert!(result.contains("a canary reached the model: .fake/rules/shared/secret.md"), "{result}");
    w.assert_clean();
}
