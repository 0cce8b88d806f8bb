//! The adapter protocol end to end: broken adapters (made with `sh -c`) end as CRASH or TIMEOUT
//! quickly and never hang the harness, the process is started again for the next request, and
//! `reference-adapter` behind the protocol observes exactly what the reference does in-process.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use std::path::Path;
use std::time::{Duration, Instant};

use harness::run::adapter::{reference_adapter_path, run_one_shot, shell_quote, ProcessAdapter, ScriptStep};
use harness::run::implementation::reference_hello;
use harness::run::wire::{to_hex, CasePlatform, Observation, OpenCase, StepOp, TreeEdit, WireEntry};
use harness::{ImplError, Implementation, InProcess};

const SHORT: Duration = Duration::from_secs(2);
const LONG: Duration = Duration::from_secs(60);
/// Far less than the 30 s the broken adapters would sleep: a failure must not wait for them.
const QUICK: Duration = Duration::from_secs(10);

fn adapter(home: &Path, command: &str, max_restarts: u32) -> ProcessAdapter {
    ProcessAdapter::new(command, home, SHORT, max_restarts)
}

fn reference_command() -> String {
    shell_quote(&reference_adapter_path().unwrap().to_string_lossy())
}

fn expect_crash(result: Result<impl std::fmt::Debug, ImplError>) -> (String, String) {
    match result {
        Err(ImplError::Crash { reason, stderr }) => (reason, stderr),
        other => panic!("expected a crash, got {other:?}"),
    }
}

#[test]
fn adapter_that_exits_is_a_crash_with_its_stderr_and_restarts_for_the_next_call() {
    let home = tempfile::tempdir().unwrap();
    let mut imp = adapter(home.path(), "read l; echo boom >&2; exit 3", 5);
    let started = Instant::now();
    let (reason, stderr) = expect_crash(imp.hello());
    assert!(reason.contains("exit status: 3"), "{reason}");
    assert_eq!(stderr, "boom");
    assert_eq!(imp.restarts(), 0);
    expect_crash(imp.hello());
    assert_eq!(imp.restarts(), 1);
    assert!(started.elapsed() < QUICK);
}

#[test]
fn adapter_that_hangs_is_a_timeout() {
    let home = tempfile::tempdir().unwrap();
    let mut imp = adapter(home.path(), "echo waiting >&2; sleep 30", 5);
    let started = Instant::now();
    match imp.hello() {
        Err(ImplError::Timeout { stderr }) => assert_eq!(stderr, "waiting"),
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(started.elapsed() >= SHORT && started.elapsed() < QUICK, "{:?}", started.elapsed());
}

#[test]
fn adapter_that_prints_garbage_is_a_crash_without_waiting_for_it() {
    let home = tempfile::tempdir().unwrap();
    let mut imp = adapter(home.path(), "read l; echo not-json; sleep 30", 5);
    let started = Instant::now();
    let (reason, _) = expect_crash(imp.hello());
    assert!(reason.contains("'not-json' is not a reply"), "{reason}");
    expect_crash(imp.hello());
    assert_eq!(imp.restarts(), 1);
    assert!(started.elapsed() < QUICK, "{:?}", started.elapsed());
}

#[test]
fn reply_with_the_wrong_seq_is_a_crash() {
    let home = tempfile::tempdir().unwrap();
    let mut imp = adapter(home.path(), r#"read l; echo '{"seq":99,"ok":true}'; sleep 30"#, 5);
    let (reason, _) = expect_crash(imp.hello());
    assert_eq!(reason, "a reply with seq 99 to request 1");
}

#[test]
fn refused_hello_is_fatal() {
    let home = tempfile::tempdir().unwrap();
    let mut imp = adapter(home.path(), r#"read l; echo '{"seq":1,"ok":false,"error":"no"}'; sleep 30"#, 5);
    match imp.hello() {
        Err(ImplError::Fatal(m)) => assert!(m.ends_with("refused hello: no"), "{m}"),
        other => panic!("expected fatal, got {other:?}"),
    }
}

#[test]
fn too_many_restarts_are_fatal() {
    let home = tempfile::tempdir().unwrap();
    let mut imp = adapter(home.path(), "exit 1", 1);
    expect_crash(imp.hello());
    expect_crash(imp.hello());
    assert_eq!(imp.restarts(), 1);
    match imp.hello() {
        Err(ImplError::Fatal(m)) => assert!(m.contains("(the limit is 1 restarts)"), "{m}"),
        other => panic!("expected fatal, got {other:?}"),
    }
}

#[test]
fn adapter_runs_with_the_fake_home_and_without_xdg_config_home() {
    let home = tempfile::tempdir().unwrap();
    let hello =
        r#"{"seq":1,"ok":true,"hello":{"name":"%s","version":"%s","language":"sh","profiles":[],"capabilities":[]}}"#;
    let command = format!(r#"read l; printf '{hello}\n' "$HOME" "${{XDG_CONFIG_HOME-unset}}"; sleep 30"#);
    std::env::set_var("XDG_CONFIG_HOME", "/nonexistent/xdg");
    let mut imp = adapter(home.path(), &command, 5);
    let hello = imp.hello().unwrap();
    assert_eq!(Path::new(&hello.name), home.path());
    assert_eq!(hello.version, "unset");
}

#[test]
fn adapter_that_crashed_once_works_after_its_restart() {
    let home = tempfile::tempdir().unwrap();
    let marker = home.path().join("crashed-once");
    let command = format!(
        "if [ -e {m} ]; then exec {r}; else touch {m}; exit 3; fi",
        m = shell_quote(&marker.to_string_lossy()),
        r = reference_command()
    );
    let mut imp = ProcessAdapter::new(command, home.path(), LONG, 5);
    expect_crash(imp.hello());
    assert_eq!(imp.hello().unwrap(), reference_hello());
    assert_eq!(imp.restarts(), 1);
}

/// A posix case: a project with an AGENTS.md, and a state directory beside it.
fn posix_case(dir: &Path, state: &str) -> OpenCase {
    let project = dir.join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("AGENTS.md"), "# Project\n").unwrap();
    OpenCase {
        profile: "modules".into(),
        platform: CasePlatform::Posix,
        root: project.to_string_lossy().into_owned(),
        state_dir: dir.join(state).to_string_lossy().into_owned(),
        tree: None,
        environment: None,
        placement: None,
        session: None,
        local: None,
        resume: false,
        options: None,
        prompt: None,
    }
}

/// A managed case with an AGENTS.md and one module, all in memory.
fn managed_case(dir: &Path, state: &str) -> OpenCase {
    let file = |path: &str, text: &str| WireEntry::File { path: path.into(), hex: to_hex(text.as_bytes()) };
    OpenCase {
        profile: "modules".into(),
        platform: CasePlatform::Managed,
        root: "/workspace".into(),
        state_dir: dir.join(state).to_string_lossy().into_owned(),
        tree: Some(vec![
            file("AGENTS.md", "# Guest\n"),
            file(".elowen/rules/api.md", "---\npaths: [\"src/**\"]\n---\nAPI\n"),
        ]),
        environment: None,
        placement: None,
        session: None,
        local: None,
        resume: false,
        options: None,
        prompt: None,
    }
}

/// Opens `open` and runs `steps` (`None` is a restart), collecting every step's observation. Like
/// the runner, it keeps `open.tree` up to date, so that a restarted process gets the tree as it
/// is now.
fn drive(imp: &mut dyn Implementation, open: &OpenCase, steps: &[Option<StepOp>]) -> Vec<Observation> {
    assert_eq!(imp.open(open).unwrap(), Observation::default());
    let mut open = open.clone();
    let mut observations = Vec::new();
    for step in steps {
        observations.push(match step {
            Some(op) => imp.step(op).unwrap(),
            None => imp.restart(&OpenCase { resume: true, ..open.clone() }).unwrap(),
        });
        if let Some(StepOp::EditTree(TreeEdit::Write { path, hex })) = step {
            let tree = open.tree.as_mut().unwrap();
            tree.retain(|e| !matches!(e, WireEntry::File { path: p, .. } if p == path));
            tree.push(WireEntry::File { path: path.clone(), hex: hex.clone() });
        }
    }
    imp.close().unwrap();
    observations
}

fn managed_steps() -> Vec<Option<StepOp>> {
    let touch = StepOp::Touch(harness::run::wire::ToolCall {
        tool: "read".into(),
        path: "src/a.ts".into(),
        outcome: harness::run::wire::Outcome::Ok,
        file_access: Some("src/a.ts".into()),
        args: None,
    });
    let edit =
        TreeEdit::Write { path: ".elowen/rules/api.md".into(), hex: to_hex(b"---\npaths: [\"src/**\"]\n---\nv2\n") };
    vec![
        Some(StepOp::Start),
        Some(touch.clone()),
        Some(StepOp::NextRequest { scope: None, calls: Vec::new() }),
        Some(StepOp::EditTree(edit)),
        None,
        Some(touch),
        Some(StepOp::NextRequest { scope: None, calls: Vec::new() }),
    ]
}

#[test]
fn reference_adapter_says_hello_and_observes_the_startup_of_a_posix_case() {
    let dir = tempfile::tempdir().unwrap();
    let mut imp = ProcessAdapter::new(reference_command(), dir.path(), LONG, 0);
    assert_eq!(imp.hello().unwrap(), reference_hello());
    imp.set_case("posix-startup");
    let observations = drive(&mut imp, &posix_case(dir.path(), "state"), &[Some(StepOp::Start), None]);
    for startup in observations.iter().map(|o| o.startup.as_deref().unwrap()) {
        assert_eq!(startup.len(), 1);
        assert_eq!(startup[0].path, "AGENTS.md");
        assert_eq!(startup[0].content, "# Project\n");
    }
    assert_eq!(imp.restarts(), 0);
}

#[test]
fn reference_adapter_observes_exactly_what_the_reference_does_in_process() {
    let dir = tempfile::tempdir().unwrap();
    let steps = managed_steps();
    let expected = drive(&mut InProcess::default(), &managed_case(dir.path(), "in-process"), &steps);
    assert!(expected.iter().any(|o| o.activation.is_some()), "the case activates a module");
    let mut imp = ProcessAdapter::new(reference_command(), dir.path(), LONG, 0);
    assert_eq!(drive(&mut imp, &managed_case(dir.path(), "adapter"), &steps), expected);
}

#[test]
fn reference_adapter_refuses_a_step_without_an_open_case() {
    let dir = tempfile::tempdir().unwrap();
    let mut imp = ProcessAdapter::new(reference_command(), dir.path(), LONG, 0);
    let not_running = "no case is open (the implementation's process is not running)";
    assert_eq!(imp.step(&StepOp::Start), Err(ImplError::Refused(not_running.into())));
    assert_eq!(imp.hello().unwrap(), reference_hello());
    assert_eq!(imp.step(&StepOp::Start), Err(ImplError::Refused("no case is open (open one first)".into())));
    // A refusal leaves the process running.
    assert_eq!(imp.hello().unwrap(), reference_hello());
    assert_eq!(imp.restarts(), 0);
}

#[test]
fn reference_adapter_in_one_shot_mode_observes_what_the_reference_does_in_process() {
    let dir = tempfile::tempdir().unwrap();
    let steps = managed_steps();
    let expected = drive(&mut InProcess::default(), &managed_case(dir.path(), "in-process"), &steps);
    let script: Vec<ScriptStep> = steps.into_iter().map(|s| s.map_or(ScriptStep::Restart, ScriptStep::Step)).collect();
    let command = format!("{} --one-shot", reference_command());
    let open = managed_case(dir.path(), "one-shot");
    assert_eq!(run_one_shot(&command, dir.path(), "managed", &open, &script, LONG).unwrap(), expected);
}

#[test]
fn one_shot_failures_are_crash_timeout_and_error() {
    let dir = tempfile::tempdir().unwrap();
    let open = managed_case(dir.path(), "state");
    let steps = [ScriptStep::Step(StepOp::Start)];
    let run = |command: &str| run_one_shot(command, dir.path(), "c", &open, &steps, SHORT);
    let started = Instant::now();
    let (reason, stderr) = expect_crash(run("cat >/dev/null; echo bad >&2; exit 1"));
    assert_eq!((reason.as_str(), stderr.as_str()), ("the process exited with exit status: 1", "bad"));
    let (reason, _) = expect_crash(run(r#"cat >/dev/null; echo '{"observations":[]}'"#));
    assert_eq!(reason, "0 observations for 1 steps");
    assert!(matches!(run("sleep 30"), Err(ImplError::Timeout { .. })));
    let refused = run(r#"cat >/dev/null; echo '{"observations":[],"error":"no"}'"#);
    assert_eq!(refused, Err(ImplError::Refused("no".into())));
    assert!(started.elapsed() < QUICK + SHORT, "{:?}", started.elapsed());
}
