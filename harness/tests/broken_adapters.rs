//! The CLI against deliberately broken adapters: one that crashes, one that hangs and one that
//! prints garbage after a correct `hello`. Each yields CRASH or TIMEOUT for the case and exit 1,
//! never a hang; an adapter that cannot even say hello is exit 2.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use std::process::Command;

fn hello_line() -> String {
    let features: Vec<String> = harness::case::vocabulary::capabilities().keys().map(|f| format!("\"{f}\"")).collect();
    format!(
        r#"{{"seq":1,"ok":true,"hello":{{"name":"broken","version":"0","language":"sh","profiles":["modules"],"capabilities":[{}]}}}}"#,
        features.join(",")
    )
}

fn run_with(script_after_hello: &str) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("adapter.sh");
    std::fs::write(&script, format!("read l\necho '{}'\n{script_after_hello}\n", hello_line())).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_conformance"))
        .args(["run", "--filter", "m-fm-001", "--timeout", "2", "--adapter"])
        .arg(format!("sh {}", script.display()))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn crashing_adapter_is_crash_and_exit_1() {
    let (code, out) = run_with("read l\necho 'dying' >&2\nexit 3");
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("CRASH") && out.contains("dying"), "{out}");
}

#[test]
fn hanging_adapter_is_timeout_and_exit_1() {
    let (code, out) = run_with("read l\nsleep 60");
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("TIMEOUT"), "{out}");
}

#[test]
fn garbage_printing_adapter_is_crash_and_exit_1() {
    let (code, out) = run_with("read l\necho 'this is not json'\nsleep 60");
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("CRASH"), "{out}");
}

#[test]
fn adapter_without_hello_is_exit_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_conformance"))
        .args(["run", "--filter", "m-fm-001", "--timeout", "2", "--adapter", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_reply_that_answers_no_request_is_a_crash() {
    // Two lines for one request: the second answers no request. Whether it is seen before the next
    // request is sent ("no request was waiting") or read as that request's reply (a reply with
    // the wrong seq) depends on timing; either way the case is a CRASH, never a pass.
    let (code, text) = run_with(
        r#"read l; echo '{"seq":2,"ok":true,"observation":{}}'; echo '{"seq":99,"ok":true,"observation":{}}'; read l; sleep 5"#,
    );
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("CRASH"), "{text}");
    assert!(text.contains("no request was waiting") || text.contains("seq 99"), "{text}");
}

/// The mutants of `mutant-adapter` wrap reference-adapter, each injecting one bug; the suite must
/// catch every one (exit 1 or 2), and let the unmutated proxy through (exit 0).
#[test]
fn every_injected_bug_fails_the_gate() {
    let reference = harness::run::adapter::reference_adapter_path().unwrap();
    let mutant = env!("CARGO_BIN_EXE_mutant-adapter");
    let list = Command::new(mutant).arg("--list").output().unwrap();
    let bugs = String::from_utf8(list.stdout).unwrap();
    assert!(bugs.lines().count() > 5, "{bugs}");
    // verdict_strength.rs runs these through the gate on the profile they touch and checks the
    // label of every failure besides: a second run of the corpus here adds nothing.
    const JUDGED_ELSEWHERE: &[&str] =
        &["section-append-4k", "section-drop-closing", "strip-final-newline", "refuse-zero-options", "write-project"];
    for bug in bugs.lines().filter(|b| !JUDGED_ELSEWHERE.contains(b)) {
        // A bug needs one unexpected result to fail the gate: `--fail-fast` stops there (the
        // unmutated proxy, which fails nothing, still runs the whole corpus).
        let out = Command::new(env!("CARGO_BIN_EXE_conformance"))
            .args(["run", "--jobs", "2", "--fail-fast", "--adapter"])
            .arg(format!("{mutant} {bug} -- {}", reference.display()))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        let code = out.status.code().unwrap_or(-1);
        if bug == "none" {
            assert_eq!(code, 0, "the unmutated proxy must pass:\n{text}");
        } else {
            assert!(code == 1 || code == 2, "bug '{bug}' was not caught (exit {code}):\n{text}");
            assert!(code == 2 || text.contains("--fail-fast stopped the run after"), "bug '{bug}': {text}");
        }
    }
}

#[test]
fn a_run_that_executes_nothing_fails() {
    // A hello that declares the modules profile but only a capability no modules case needs
    // alone still runs the cases needing nothing; a filter selecting only cases it lacks runs none.
    let (code, text) = {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("adapter.sh");
        let hello = r#"{"seq":1,"ok":true,"hello":{"name":"bare","version":"0","language":"sh","profiles":["modules"],"capabilities":[]}}"#;
        std::fs::write(&script, format!("read l\necho '{hello}'\nsleep 5\n")).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_conformance"))
            .args(["run", "--filter", "modules/lifetime/", "--adapter"])
            .arg(format!("sh {}", script.display()))
            .output()
            .unwrap();
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("no case executed"), "{text}");
}

/// A loader that shows what it must never read fails every case whose canary it shows, and each
/// failure says on what the canary rests: the seed by default (m-link-002: a link out of the
/// root), the case's `canary_basis` where the canary sits behind a decision (m-link-035 and
/// m-link-036: files that D-EXT-1 says are no modules), never the other way round.
#[test]
fn a_leaked_canary_is_labelled_by_its_basis() {
    let reference = harness::run::adapter::reference_adapter_path().unwrap();
    let mutant = env!("CARGO_BIN_EXE_mutant-adapter");
    let out = Command::new(env!("CARGO_BIN_EXE_conformance"))
        .args(["run", "--filter", "modules/symlinks/0", "--format", "json", "--adapter"])
        .arg(format!("{mutant} leak-canaries -- {}", reference.display()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let reason = |id: &str| {
        let results = report["results"].as_array().unwrap();
        let case = results.iter().find(|r| r["id"] == id).unwrap_or_else(|| panic!("{id} did not run"));
        assert_eq!(case["status"], "FAIL", "{id}: {case}");
        case["reason"].as_str().unwrap().to_string()
    };
    assert!(reason("m-link-002").contains("canary differs (violates the seed)"), "{}", reason("m-link-002"));
    for id in ["m-link-035", "m-link-036"] {
        let why = reason(id);
        assert!(why.contains("canary differs from decision D-EXT-1 (not from the seed)"), "{id}: {why}");
    }
}
