//! A session: 1,000 triggers of already loaded modules, deduped against a journal of 1,000 and of
//! 10,000 records. Target: the cost per module does not grow with the journal. The floor is the
//! walk-read-hash of the same tree, which every trigger pass pays at least once.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;

use benches::{floor, generate};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use reference::{Config, HostSource, Identity, Record, Session, Source, ToolResult, JOURNAL_FILE};

/// Starts a session, loads the modules `touched` activates, then pads the journal to `records`
/// records of other paths, and resumes it.
fn session_with_journal(root: &std::path::Path, touched: &[String], records: usize) -> (tempfile::TempDir, Session) {
    let state = tempfile::tempdir().expect("state");
    let source = || Source::Host(HostSource::new(root).expect("root"));
    let (mut s, _) = Session::start(Config::modules(), source(), state.path()).expect("start");
    for p in touched {
        s.observe(&ToolResult { tool: "read".into(), file_access: Some(p.clone()) });
    }
    s.next_request();
    drop(s);
    let mut f = std::fs::OpenOptions::new().append(true).open(state.path().join(JOURNAL_FILE)).expect("journal");
    for i in 0..records {
        let r = Record::Instructions {
            instructions: vec![Identity {
                rel_path: format!("pad/{i}.md"),
                sha256: format!("{i:064x}"),
                supersedes: false,
            }],
            rendered: String::new(),
        };
        writeln!(f, "{}", serde_json::to_string(&r).expect("json")).expect("write");
    }
    drop(f);
    let s = Session::resume(Config::modules(), source(), state.path()).expect("resume");
    (state, s)
}

fn dedupe(c: &mut Criterion) {
    let tree = generate(1_000, 5).expect("generate");
    let touched: Vec<String> = tree.touched.iter().take(1_000).cloned().collect();
    let mut group = c.benchmark_group("session/1000-triggers");
    group.sample_size(10).throughput(Throughput::Elements(touched.len() as u64));
    group.bench_function("floor", |b| b.iter(|| floor(&tree.root).expect("floor")));
    for records in [1_000usize, 10_000] {
        let (_state, mut session) = session_with_journal(&tree.root, &touched, records);
        group.bench_with_input(BenchmarkId::new("dedupe", records), &touched, |b, touched| {
            b.iter(|| {
                for p in touched {
                    session.observe(&ToolResult { tool: "read".into(), file_access: Some(p.clone()) });
                }
                let out = session.next_request();
                assert!(out.activation.is_none(), "everything was loaded already");
            })
        });
    }
    group.finish();
}

criterion_group!(benches, dedupe);
criterion_main!(benches);
