//! Shards merged over machines: the reference run as `--shard 1/3`, `2/3` and `3/3` merges into
//! the report of the unsharded run; shards of different suites, implementations, shard counts or
//! selections, a case in two shards and a missing shard are refused with a message that names
//! the files and the field; and the matrix builds from merged reports.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn conformance(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_conformance")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The profile the runs cover: small enough to run four times in a test, large enough that three
/// shards interleave.
const PROFILE: &str = "section";

/// Runs the reference in-process over [`PROFILE`] (as `shard`, when given) and writes the JSON
/// report to `path`.
fn run_to(path: &Path, shard: Option<&str>) {
    let output = format!("json={}", path.display());
    let mut args = vec!["run", "--profile", PROFILE, "--format", "badge", "--output", &output];
    if let Some(s) = shard {
        args.extend(["--shard", s]);
    }
    let (code, _, err) = conformance(&args);
    assert_eq!(code, 0, "{err}");
}

/// The three shards of one run, and the unsharded run, in `dir`.
struct Runs {
    whole: PathBuf,
    shards: [PathBuf; 3],
}

fn runs(dir: &Path) -> Runs {
    let whole = dir.join("whole.json");
    run_to(&whole, None);
    let shards = [1, 2, 3].map(|k| {
        let p = dir.join(format!("shard-{k}.json"));
        run_to(&p, Some(&format!("{k}/3")));
        p
    });
    Runs { whole, shards }
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn write(path: &Path, v: &Value) {
    std::fs::write(path, serde_json::to_string_pretty(v).unwrap()).unwrap();
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `merge FILES... [EXTRA...]`: the exit code, stdout and stderr.
fn merge(files: &[&Path], extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["report", "--merge"];
    args.extend(files.iter().map(|p| s(p)));
    args.extend(extra);
    conformance(&args)
}

/// The results with what differs from run to run taken out: the time of each case, and the name
/// of the temporary folder each case's tree is built in.
fn comparable(report: &Value) -> Value {
    let mut results = report["results"].clone();
    for r in results.as_array_mut().unwrap() {
        r.as_object_mut().unwrap().remove("millis");
    }
    let text = serde_json::to_string(&results).unwrap();
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("conformance-") {
        let (head, tail) = rest.split_at(i + "conformance-".len());
        out.push_str(head);
        out.push_str("TEMP");
        rest = tail.get(6..).unwrap_or_default();
    }
    out.push_str(rest);
    serde_json::from_str(&out).unwrap()
}

#[test]
fn three_shards_merge_into_the_report_of_the_unsharded_run() {
    let dir = tempfile::tempdir().unwrap();
    let runs = runs(dir.path());
    let whole = read(&runs.whole);
    assert!(whole.get("shard").is_none(), "an unsharded run records no shard");
    assert_eq!(whole["profile"], PROFILE);
    for (k, p) in runs.shards.iter().enumerate() {
        let shard = read(p);
        assert_eq!(shard["shard"], serde_json::json!({"index": k + 1, "of": 3}));
        assert_eq!(shard["suite_version"], whole["suite_version"]);
    }
    let merged_path = dir.path().join("merged.json");
    let output = format!("json={}", merged_path.display());
    // Given out of order: the order of the files does not matter.
    let [a, b, c] = &runs.shards;
    let (code, out, err) = merge(&[c, a, b], &["--format", "json", "--output", &output]);
    assert_eq!(code, 0, "{err}");
    let merged: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(merged, read(&merged_path));
    assert!(merged.get("shard").is_none(), "a merged report is whole: {}", merged["shard"]);
    assert_eq!(merged["merged"], serde_json::json!({"shards": 3}));
    assert_eq!(merged["profile"], PROFILE);
    assert_eq!(merged["implementation"], whole["implementation"]);
    assert_eq!(merged["suite_version"], whole["suite_version"]);
    assert_eq!(merged["summary"], whole["summary"]);
    assert_eq!(comparable(&merged), comparable(&whole));
    assert!(whole["results"].as_array().unwrap().len() > 3);
    // The merged report renders as any report does, and is merged no further.
    let (code, out, err) = conformance(&["report", s(&merged_path), "--format", "markdown"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("## Conformance: reference"), "{out}");
    let (code, _, err) = merge(&[&merged_path], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("merged.json: merged already (from 3 shards)"), "{err}");
    let (code, _, err) = merge(&[&runs.whole, a], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("whole.json: no 'shard' field"), "{err}");
}

#[test]
fn shards_of_different_runs_are_refused_naming_the_files_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let runs = runs(dir.path());
    let [a, b, c] = &runs.shards;
    type Change = fn(&mut Value);
    let cases: [(&str, Change, &str); 5] = [
        (
            "suite",
            |v| v["suite_version"] = "0.0.1".into(),
            concat!("'suite_version' is '", env!("CARGO_PKG_VERSION"), "' in"),
        ),
        ("name", |v| v["implementation"]["name"] = "other".into(), "'implementation.name' is 'reference' in"),
        ("version", |v| v["implementation"]["version"] = "9.9.9".into(), "'implementation.version' is"),
        ("filter", |v| v["filter"] = "s-".into(), "'filter' is none in"),
        ("count", |v| v["shard"] = serde_json::json!({"index": 2, "of": 4}), "'shard' is 1/3 in"),
    ];
    for (what, change, message) in cases {
        let mut v = read(b);
        change(&mut v);
        let changed = dir.path().join(format!("changed-{what}.json"));
        write(&changed, &v);
        let (code, _, err) = merge(&[a, &changed, c], &[]);
        assert_eq!(code, 2, "{what}: {err}");
        assert!(err.contains(message), "{what}: {err}");
        assert!(err.contains("shard-1.json and") && err.contains(&format!("changed-{what}.json")), "{what}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn a_case_in_two_shards_is_refused_naming_the_case_and_both_files() {
    let dir = tempfile::tempdir().unwrap();
    let runs = runs(dir.path());
    let [a, b, c] = &runs.shards;
    let again = dir.path().join("again.json");
    std::fs::copy(b, &again).unwrap();
    let first = read(b)["results"][0]["id"].as_str().unwrap().to_string();
    let (code, _, err) = merge(&[a, b, c, &again], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&format!("case '{first}' is in both")), "{err}");
    assert!(err.contains("shard-2.json and") && err.contains("again.json"), "{err}");
}

#[test]
fn a_missing_shard_is_named_and_merged_without_only_when_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let runs = runs(dir.path());
    let [a, _, c] = &runs.shards;
    let (code, _, err) = merge(&[a, c], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("shard 2/3 is missing"), "{err}");
    let (code, _, err) = merge(&[c], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("shards 1/3 and 2/3 are missing"), "{err}");
    let (code, out, err) = merge(&[a, c], &["--allow-missing", "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("shard 2/3 is missing"), "{err}");
    let merged: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(merged["merged"], serde_json::json!({"shards": 3, "missing": [2]}));
    let n = |p: &Path| read(p)["results"].as_array().unwrap().len();
    assert_eq!(merged["results"].as_array().unwrap().len(), n(a) + n(c));
}

#[test]
fn bad_reports_are_refused_naming_the_file_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let shard = dir.path().join("shard.json");
    run_to(&shard, Some("1/2"));
    let bad = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let mut no_results = read(&shard);
    no_results.as_object_mut().unwrap().remove("results");
    let mut out_of_range = read(&shard);
    out_of_range["shard"] = serde_json::json!({"index": 5, "of": 4});
    let mut bad_index = read(&shard);
    bad_index["shard"] = serde_json::json!({"index": "two", "of": 4});
    let files = [
        (bad("not-json.json", "{ not json"), "not-json.json: not a JSON report"),
        (
            bad("no-results.json", &no_results.to_string()),
            "no-results.json: not a JSON report: missing field `results`",
        ),
        (bad("range.json", &out_of_range.to_string()), "range.json: 'shard' is 5/4 (expected 1 <= index <= of)"),
        (bad("index.json", &bad_index.to_string()), "index.json: not a JSON report: invalid type: string \"two\""),
    ];
    for (file, message) in &files {
        for args in [vec!["report", "--merge", s(&shard), s(file)], vec!["report", s(file)]] {
            let (code, _, err) = conformance(&args);
            assert_eq!(code, 2, "{err}");
            assert!(err.contains(message), "{message}: {err}");
            assert!(!err.contains("panicked"), "{err}");
        }
    }
    let (code, _, err) = conformance(&["report", s(&shard), s(&shard)]);
    assert_eq!(code, 2);
    assert!(err.contains("2 reports given") && err.contains("--merge"), "{err}");
}

#[test]
fn an_old_report_without_the_run_fields_still_renders() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.json");
    run_to(&path, Some("2/3"));
    let mut v = read(&path);
    for field in ["shard", "profile", "suite_version"] {
        v.as_object_mut().unwrap().remove(field);
    }
    write(&path, &v);
    let (code, out, err) = conformance(&["report", s(&path)]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("passed"), "{out}");
    let (code, out, err) = conformance(&["report", s(&path), "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let again: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(again["suite_version"], env!("CARGO_PKG_VERSION"), "as before: this suite's version");
    assert!(again.get("shard").is_none());
}

#[test]
fn the_matrix_builds_from_merged_reports_beside_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let runs = runs(dir.path());
    let merged = dir.path().join("merged.json");
    let output = format!("json={}", merged.display());
    let [a, b, c] = &runs.shards;
    let (code, _, err) = merge(&[a, b, c], &["--output", &output]);
    assert_eq!(code, 0, "{err}");
    let out = dir.path().join("site");
    let (code, _, err) = conformance(&[
        "matrix",
        "--report",
        s(&merged),
        "--report",
        s(&runs.whole),
        "--impl",
        "ran=-",
        "--filter",
        "s-budget",
        "--out",
        s(&out),
    ]);
    assert_eq!(code, 0, "{err}");
    let index = std::fs::read_to_string(out.join("index.html")).unwrap();
    // Two reports of one implementation: the second is told apart by its version.
    for th in ["<th>ran<br>", "<th>reference<br>", "<th>reference 0."] {
        assert!(index.contains(th), "{th}: {index}");
    }
    let json: Value = serde_json::from_str(&std::fs::read_to_string(out.join("matrix.json")).unwrap()).unwrap();
    let columns = json["implementations"].as_array().unwrap();
    assert_eq!(columns.len(), 3);
    let n = |i: usize| columns[i]["results"].as_array().unwrap().len();
    assert!(n(0) > 0 && n(0) == n(1) && n(1) == n(2), "{} {} {}", n(0), n(1), n(2));
    // Only reports: nothing runs.
    let (code, _, err) = conformance(&["matrix", "--report", s(&merged), "--out", s(&dir.path().join("only"))]);
    assert_eq!(code, 0, "{err}");
    // A lone shard is not a column.
    let (code, _, err) = conformance(&["matrix", "--report", s(a), "--out", s(&dir.path().join("no"))]);
    assert_eq!(code, 2);
    assert!(err.contains("shard-1.json: shard 1/3 alone is not a column"), "{err}");
    assert!(!dir.path().join("no").exists());
}
