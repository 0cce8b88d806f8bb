//! Replays every checked-in fuzz corpus file (fuzz/corpus/<target>/*) through the property its
//! target checks (harness::fuzzing), on the stable toolchain, so a finding once minimised stays
//! fixed. An empty corpus fails: a replay that replays nothing proves nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use std::path::Path;

fn replay(target: &str, check: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus").join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(!files.is_empty(), "no corpus for {target} in {}", dir.display());
    for f in files {
        let data = std::fs::read(&f).unwrap();
        let outcome = std::panic::catch_unwind(|| check(&data));
        assert!(outcome.is_ok(), "{target}: {} fails its property", f.display());
    }
}

#[test]
fn frontmatter_corpus() {
    replay("frontmatter", harness::fuzzing::frontmatter);
}

#[test]
fn glob_corpus() {
    replay("glob", harness::fuzzing::glob);
}

#[test]
fn glob_set_corpus() {
    replay("glob_set", harness::fuzzing::glob_set);
}

#[test]
fn modes_corpus() {
    replay("modes", harness::fuzzing::modes);
}

#[test]
fn within_corpus() {
    replay("within", harness::fuzzing::within);
}

#[test]
fn scenario_corpus() {
    replay("scenario", harness::fuzzing::scenario);
}

#[test]
fn protocol_corpus() {
    replay("protocol", harness::fuzzing::protocol);
}

#[test]
fn session_corpus() {
    replay("session", harness::fuzzing::session);
}

#[test]
fn confinement_corpus() {
    replay("confinement", harness::fuzzing::confinement);
}
