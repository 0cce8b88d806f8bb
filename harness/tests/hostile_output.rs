//! Reports on hostile input (issue #21, items 2 and 3): no report hangs or grows with what it is
//! fed; a diff of two multi-megabyte values renders within seconds.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use std::sync::mpsc;
use std::time::Duration;

/// Runs `f` on a thread and waits at most `secs` for it: a generous guard against a hang, not a
/// performance assertion.
fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs)).unwrap_or_else(|_| panic!("not done within {secs} s"))
}

fn bomb() -> (String, String) {
    let expected: String = (0..300_000).map(|i| format!("expected line {i}\n")).collect();
    let actual: String = (0..300_000).map(|i| format!("actual line {i}\n")).collect();
    (expected, actual)
}

#[test]
fn a_diff_of_300k_differing_lines_renders_within_five_seconds_and_says_it_was_cut() {
    let (expected, actual) = bomb();
    assert!(expected.len() > 5_000_000);
    let out = within(5, move || harness::diff::render(&expected, &actual, "  "));
    assert!(out.len() < 64 * 1024, "{} bytes", out.len());
    assert!(out.contains("cut"), "{out}");
}
