//! The CLI against deliberately broken adapters: one that crashes, one that hangs and one that
//! prints garbage after a correct `hello`. Each yields CRASH or TIMEOUT for the case and exit 1,
//! never a hang; an adapter that cannot even say hello is exit 2.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use std::process::Command;

fn hello_line() -> String {
    let features: Vec<String> = reference::driver::FEATURES.iter().map(|f| format!("\"{f}\"")).collect();
    format!(
        r#"{{"seq":1,"ok":true,"hello":{{"name":"broken","version":"0","language":"sh","profiles":["modules"],"features":[{}]}}}}"#,
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
