//! The CLI as a new user meets it: smoke, several reports from one run and re-rendering a saved
//! one, badges that are shields endpoint documents, reproductions with a one-shot input and a
//! transcript, and hygiene (a closed pipe, bad flag values, unknown profiles).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use std::process::{Command, Stdio};

fn conformance(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_conformance")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn reference() -> String {
    harness::run::adapter::reference_adapter_path().unwrap().to_string_lossy().into_owned()
}

#[test]
fn smoke_passes_the_reference_and_shows_the_exchange_of_a_broken_one() {
    let (code, out, err) = conformance(&["smoke", "--adapter", &reference()]);
    assert_eq!(code, 0, "{out}{err}");
    for p in ["modules: PASS", "section: PASS", "root-file: PASS"] {
        assert!(out.contains(p), "{out}");
    }
    let mutant = format!("{} crlf -- {}", env!("CARGO_BIN_EXE_mutant-adapter"), reference());
    let (code, out, _) = conformance(&["smoke", "--adapter", &mutant]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("the exchange:") && out.contains("> {\"type\":\"open\""), "{out}");
}

#[test]
fn one_run_writes_every_format_and_a_saved_report_renders_again() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_string_lossy().into_owned();
    let (code, _, err) = conformance(&[
        "run",
        "--filter",
        "m-fm-00",
        "--output",
        &format!("json={}", p("r.json")),
        "--output",
        &format!("junit={}", p("r.xml")),
        "--output",
        &format!("badge={}/", p("badges")),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::read_to_string(p("r.xml")).unwrap().contains("<testsuites"));
    let badge: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("badges/modules.json")).unwrap()).unwrap();
    for key in ["schemaVersion", "label", "message", "color"] {
        assert!(badge.get(key).is_some(), "{badge}");
    }
    assert_eq!(badge["message"], "9/9");
    let (code, out, err) = conformance(&["report", &p("r.json"), "--format", "markdown"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("## Conformance: reference") && out.contains("modules/frontmatter"), "{out}");
}

#[test]
fn a_badge_counts_unsupported_cases() {
    let (code, out, err) = conformance(&["run", "--profile", "modules", "--capabilities", "", "--format", "badge"]);
    assert_eq!(code, 0, "{err}");
    let badge: serde_json::Value = serde_json::from_str(&out).unwrap();
    let message = badge["message"].as_str().unwrap();
    let (passed, rest) = message.split_once('/').unwrap();
    let total: usize = rest.split(',').next().unwrap().parse().unwrap();
    assert!(passed.parse::<usize>().unwrap() < total && message.contains("unsupported"), "{message}");
}

#[test]
fn repro_writes_a_one_shot_input_the_reference_answers_and_a_transcript() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("r");
    let (code, out, err) = conformance(&["repro", "m-fm-010", out_dir.to_str().unwrap(), "--transcript"]);
    assert_eq!(code, 0, "{out}{err}");
    let input = std::fs::read(out_dir.join("one-shot.json")).unwrap();
    let mut child =
        Command::new(reference()).arg("--one-shot").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), &input).unwrap();
    let reply = child.wait_with_output().unwrap();
    let reply: serde_json::Value = serde_json::from_slice(&reply.stdout).unwrap();
    assert!(reply.get("error").is_none(), "{reply}");
    assert_eq!(reply["observations"].as_array().unwrap().len(), 3, "{reply}");
    let transcript = std::fs::read_to_string(out_dir.join("transcript.jsonl")).unwrap();
    assert!(transcript.starts_with("> {\"type\":\"hello\""), "{transcript}");
}

#[test]
fn hygiene_closed_pipes_bad_values_and_unknown_profiles() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_conformance"))
        .arg("list")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    for bad in [["--jobs", "0"], ["--timeout", "0"]] {
        let (code, _, err) = conformance(&["run", bad[0], bad[1]]);
        assert_eq!(code, 2, "{err}");
    }
    let (code, _, err) = conformance(&["run", "--profile", "modulez"]);
    assert_eq!(code, 2);
    assert!(err.contains("did you mean 'modules'"), "{err}");
    // An output whose folder is missing is refused before any case runs, not after them all.
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-folder").join("report.json");
    let (code, out, err) = conformance(&["run", "--output", &format!("json={}", missing.display())]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("does not exist") && err.contains("no-such-folder"), "{err}");
    assert!(out.is_empty() && !err.contains("cases:"), "cases ran: {out}{err}");
    assert!(!dir.path().join("no-such-folder").exists());
    let (code, out, _) = conformance(&["--version"]);
    assert_eq!(code, 0);
    assert!(out.contains("adapter protocol 2") && out.contains("root-file"), "{out}");
}

#[test]
fn the_matrix_writes_a_page_per_failing_case() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m");
    let mutant = format!("{} flip-supersedes -- {}", env!("CARGO_BIN_EXE_mutant-adapter"), reference());
    let (code, _, err) = conformance(&[
        "matrix",
        "--impl",
        "reference=-",
        "--impl",
        &format!("flipped={mutant}"),
        "--filter",
        "m-life-0",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let index = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(index.contains("<th>reference<br>") && index.contains("<th>flipped<br>"), "{index}");
    assert!(index.contains("reference: 0 not passing"), "{index}");
    let pages = std::fs::read_dir(out.join("cases/flipped")).unwrap().count();
    assert!(pages > 0);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("matrix.json")).unwrap()).unwrap();
    assert_eq!(json["implementations"].as_array().unwrap().len(), 2);
}

/// The saved report of the whole corpus is bigger than any case file may be (4 MiB): `report`
/// renders it in every format, and the JSON it renders is the report again.
#[test]
fn the_whole_corpus_report_renders_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("all.json");
    let (code, _, err) = conformance(&["run", "--jobs", "2", "--output", &format!("json={}", saved.display())]);
    assert_eq!(code, 0, "{err}");
    let size = std::fs::metadata(&saved).unwrap().len();
    assert!(size > harness::util::input::MAX_CASE_FILE_BYTES, "the corpus's report is only {size} bytes");
    let path = saved.to_string_lossy().into_owned();
    let whole: serde_json::Value = serde_json::from_slice(&std::fs::read(&saved).unwrap()).unwrap();
    let cases = whole["results"].as_array().map_or(0, Vec::len);
    assert!(cases > 600, "{cases} results");
    for format in ["human", "json", "junit", "markdown", "badge"] {
        let (code, out, err) = conformance(&["report", &path, "--format", format]);
        assert_eq!(code, 0, "{format}: {err}");
        assert!(!out.is_empty(), "{format}: nothing rendered");
        match format {
            "json" => {
                let again: serde_json::Value = serde_json::from_str(&out).unwrap();
                assert_eq!(again["results"].as_array().map(Vec::len), Some(cases), "{format}");
            }
            "junit" => assert_eq!(out.matches("<testcase ").count(), cases, "{format}"),
            "human" => assert!(out.contains(&format!("{cases} cases")), "{format}: {out}"),
            "markdown" => {
                // Every case is counted once in its area's row.
                let counted: usize = out
                    .lines()
                    .filter(|l| l.starts_with("| ") && !l.starts_with("| area"))
                    .flat_map(|l| l.split('|').skip(2).filter_map(|c| c.trim().parse::<usize>().ok()))
                    .sum();
                assert_eq!(counted, cases, "{format}: {out}");
            }
            _ => assert!(out.contains("schemaVersion"), "{format}: {out}"),
        }
    }
}
