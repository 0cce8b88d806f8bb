//! The files the CLI is given, as hostile input: a device, a FIFO or an oversize file is refused at
//! once with a message naming it, never read until memory runs out or waited on. Every command
//! runs under a deadline, so a regression fails here instead of hanging CI.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a run of the binary gave: exit code, stdout, stderr and how long it took.
struct Outcome {
    code: i32,
    out: String,
    err: String,
    took: Duration,
}

/// Runs `conformance ARGS`, killed (and the test failed) if it takes longer than `limit`.
fn conformance_within(limit: Duration, args: &[&str]) -> Outcome {
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_conformance"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The pipes are drained on threads of their own, so a chatty child never stalls on a full pipe.
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > limit {
            child.kill().unwrap();
            let _ = child.wait();
            panic!("conformance {args:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = start.elapsed();
    Outcome { code: status.code().unwrap_or(-1), out: out.join().unwrap(), err: err.join().unwrap(), took }
}

/// Long enough for a debug build on a busy machine, short enough that a blocking read fails.
const AT_ONCE: Duration = Duration::from_secs(30);

fn mkfifo(p: &Path) {
    let mode = rustix::fs::Mode::from_raw_mode(0o600);
    rustix::fs::mknodat(rustix::fs::CWD, p, rustix::fs::FileType::Fifo, mode, 0).unwrap();
}

#[test]
fn dev_zero_as_the_manifest_is_refused_at_once() {
    let o = conformance_within(AT_ONCE, &["run", "--filter", "m-fm-001", "--expectations", "/dev/zero"]);
    assert_eq!(o.code, 2, "{}{}", o.out, o.err);
    assert!(
        o.err.contains("/dev/zero: is a character device, not a regular file (only regular files are read)"),
        "{}",
        o.err
    );
}

#[test]
fn a_fifo_as_the_manifest_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("expectations.yaml");
    mkfifo(&fifo);
    let o = conformance_within(AT_ONCE, &["run", "--filter", "m-fm-001", "--expectations", fifo.to_str().unwrap()]);
    assert_eq!(o.code, 2, "{}{}", o.out, o.err);
    assert!(o.err.contains(&format!("{}: is a FIFO, not a regular file", fifo.display())), "{}", o.err);
}

#[test]
fn a_fifo_and_a_link_to_dev_zero_among_the_cases_are_refused_and_named() {
    let dir = tempfile::tempdir().unwrap();
    mkfifo(&dir.path().join("pipe.yaml"));
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.yaml")).unwrap();
    let o = conformance_within(AT_ONCE, &["list", "--cases", dir.path().to_str().unwrap()]);
    assert_eq!(o.code, 2, "{}{}", o.out, o.err);
    let pipe = format!("{}: is a FIFO, not a regular file", dir.path().join("pipe.yaml").display());
    let zero = format!("{}: is a symbolic link (links", dir.path().join("zero.yaml").display());
    assert!(o.err.contains(&pipe) && o.err.contains(&zero), "{}", o.err);
}

#[test]
fn an_oversize_saved_report_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("r.json");
    // A sparse file: refused by its size, never read.
    std::fs::File::create(&big).unwrap().set_len(harness::util::input::MAX_REPORT_BYTES + 1).unwrap();
    let o = conformance_within(AT_ONCE, &["report", big.to_str().unwrap()]);
    assert_eq!(o.code, 2, "{}{}", o.out, o.err);
    assert!(o.err.contains("is 67108865 bytes, over the 64 MiB a saved report may have"), "{}", o.err);
}

/// A saved report is held to its own bound, not to a case file's 4 MiB: the full corpus's JSON
/// report is about 6.4 MB.
#[test]
fn a_saved_report_of_several_megabytes_renders_again() {
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small.json");
    let o = conformance_within(
        Duration::from_secs(300),
        &["run", "--filter", "m-fm-00", "--output", &format!("json={}", small.display())],
    );
    assert_eq!(o.code, 0, "{}", o.err);
    let mut report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&small).unwrap()).unwrap();
    let one = report["results"].as_array().unwrap().clone();
    let size = serde_json::to_string(&one).unwrap().len();
    let copies = (7_000_000 / size).max(1) + 1;
    report["results"] = serde_json::Value::Array(one.iter().cycle().take(one.len() * copies).cloned().collect());
    let big = dir.path().join("big.json");
    std::fs::write(&big, serde_json::to_string(&report).unwrap()).unwrap();
    let len = std::fs::metadata(&big).unwrap().len();
    assert!((6_000_000..10_000_000).contains(&len), "{len}");
    let o = conformance_within(Duration::from_secs(120), &["report", big.to_str().unwrap(), "--format", "badge"]);
    assert_eq!(o.code, 0, "{}", o.err);
    assert!(o.out.contains("schemaVersion"), "{}", o.out);
}

/// A manifest and a case file nested 100,000 levels deep are refused at the line where they get
/// too deep, before they are parsed: the parse alone took over a minute.
#[test]
fn a_deeply_nested_manifest_and_case_file_are_refused_at_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let bomb = format!("{}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    let manifest = dir.path().join("expectations.yaml");
    std::fs::write(&manifest, format!("# expectations\nexpectations:\n  m-fm-001: {bomb}")).unwrap();
    let o = conformance_within(AT_ONCE, &["run", "--filter", "m-fm-001", "--expectations", manifest.to_str().unwrap()]);
    assert_eq!(o.code, 2, "{}{}", o.out, o.err);
    let want = format!("{}:3: nesting deeper than 128 levels", manifest.display());
    assert!(o.err.contains(&want), "{}", o.err);

    let cases = dir.path().join("cases");
    std::fs::create_dir(&cases).unwrap();
    std::fs::write(cases.join("deep.yaml"), format!("id: deep-1\ntitle: t\ntree:\n  a: {bomb}")).unwrap();
    let o = conformance_within(AT_ONCE, &["list", "--cases", cases.to_str().unwrap()]);
    assert_eq!(o.code, 2, "{}{}", o.out, o.err);
    let want = format!("{}:4: nesting deeper than 128 levels", cases.join("deep.yaml").display());
    assert!(o.err.contains(&want), "{}", o.err);
}

/// A case of 12,000 links is listed in well under a second (it took 30 s when each link was checked
/// against every entry): links to a folder of one file, and links to a file each.
#[test]
fn twelve_thousand_links_are_listed_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let head = |id: &str| {
        format!(
            "id: {id}\ntitle: many links\nspec: [{{decision: D-X}}]\nprofile: modules\nplatform: posix\n\
             rules: [symlinks]\ntree:\n"
        )
    };
    let mut one_folder = head("links-1") + "  target/AGENTS.md: x\n";
    let mut own_files = head("links-2");
    for i in 0..12_000 {
        one_folder.push_str(&format!("  l{i}: {{symlink: target}}\n"));
        own_files.push_str(&format!("  t/f{i}.md: x\n  l{i}: {{symlink: t/f{i}.md}}\n"));
    }
    for (name, text) in [("one-folder.yaml", one_folder), ("own-files.yaml", own_files)] {
        std::fs::write(dir.path().join(name), text + "steps:\n  - start:\n").unwrap();
    }
    let o = conformance_within(Duration::from_secs(60), &["list", "--cases", dir.path().to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}{}", o.out, o.err);
    assert!(o.out.contains("links-1") && o.out.contains("links-2"), "{}", o.out);
    eprintln!("12,000 links listed in {:?}", o.took);
    // Generous, for a debug build on a busy machine: it takes well under a second.
    assert!(o.took < Duration::from_secs(5), "{:?}", o.took);
}
