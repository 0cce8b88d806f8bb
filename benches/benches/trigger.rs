//! One whole trigger (issue 13): `observe` then `next_request` — discovery, resolution, dedupe
//! against the journal — uncached and with the revalidating discovery cache, on 10k and 100k
//! module trees, beside the floor on one thread and on the reference's thread count. The touched
//! path's modules are loaded before measuring, so a trigger appends nothing (the re-trigger of an
//! unchanged tree). Then nested discovery alone (10,110 folders of AGENTS.md, no rules, one touch
//! three folders deep; target ≤ 30 µs warm, cached), and the pathological glob (`**/` sixteen
//! times against a path of 24 folders) beside a plain `**/*.ts` on the same path.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::time::Duration;

use benches::{floor, floor_threaded, generate, nested_tree, reference_threads};
use criterion::{criterion_group, criterion_main, Criterion};
use reference::glob::RulesBuilder;
use reference::{Config, HostSource, Platform, RelPath, Session, Source, ToolResult};
use sha2::{Digest, Sha256};

fn session(root: &std::path::Path, cached: bool, state: &std::path::Path) -> Session {
    let source = Source::Host(HostSource::new(root).expect("root"));
    let config = Config { discovery_cache: cached, ..Config::modules() };
    Session::start(config, source, state).expect("start").0
}

fn trigger_once(s: &mut Session, path: &str) -> bool {
    s.observe(&ToolResult { tool: "read".into(), file_access: Some(path.to_string()) });
    s.next_request().activation.is_some()
}

fn trigger(c: &mut Criterion) {
    for n in [10_000usize, 100_000] {
        let tree = generate(n, 7).expect("generate");
        let touched = tree.root.join(tree.touched.first().expect("touched")).to_string_lossy().into_owned();
        let state = tempfile::tempdir().expect("state");
        let mut uncached = session(&tree.root, false, &state.path().join("u"));
        let mut cached = session(&tree.root, true, &state.path().join("c"));
        // Load the touched path's modules, so that what is measured is a re-trigger.
        trigger_once(&mut uncached, &touched);
        trigger_once(&mut cached, &touched);
        let threads = reference_threads();
        let mut group = c.benchmark_group(format!("trigger/{n}"));
        group.sample_size(10).measurement_time(Duration::from_secs(if n >= 100_000 { 30 } else { 8 }));
        group.bench_function("floor", |b| b.iter(|| floor(&tree.root).expect("floor")));
        group.bench_function(format!("floor_threads_{threads}"), |b| {
            b.iter(|| floor_threaded(&tree.root, threads).expect("floor"))
        });
        group.bench_function("uncached", |b| b.iter(|| assert!(!trigger_once(&mut uncached, &touched))));
        group.bench_function("cached", |b| b.iter(|| assert!(!trigger_once(&mut cached, &touched))));
        group.finish();
    }
}

fn nested(c: &mut Criterion) {
    let tree = nested_tree().expect("generate");
    let touched = tree.root.join(&tree.touched).to_string_lossy().into_owned();
    let state = tempfile::tempdir().expect("state");
    let mut uncached = session(&tree.root, false, &state.path().join("u"));
    let mut cached = session(&tree.root, true, &state.path().join("c"));
    assert!(trigger_once(&mut uncached, &touched));
    assert!(trigger_once(&mut cached, &touched));
    let mut group = c.benchmark_group(format!("nested/{}-folders", tree.folders));
    group.sample_size(50);
    group.bench_function("floor", |b| {
        b.iter(|| {
            for f in &tree.nested {
                std::hint::black_box(Sha256::digest(fs::read(f).expect("read")));
            }
        })
    });
    group.bench_function("uncached", |b| b.iter(|| assert!(!trigger_once(&mut uncached, &touched))));
    group.bench_function("cached", |b| b.iter(|| assert!(!trigger_once(&mut cached, &touched))));
    group.finish();
}

fn pathological_glob(c: &mut Criterion) {
    let path = RelPath::parse(&format!("{}x.md", (0..24).map(|i| format!("d{i}/")).collect::<String>())).unwrap();
    let set = |pattern: String| {
        let mut b = RulesBuilder::new(Platform::Posix);
        b.add(0, &[pattern]).expect("valid glob");
        b.build()
    };
    let plain = set("**/*.ts".to_string());
    let hostile = set(format!("{}*.ts", "**/".repeat(16)));
    let mut group = c.benchmark_group("glob/16-double-stars-24-folders");
    group.sample_size(50);
    let mut out = Vec::new();
    group.bench_function("floor:plain_double_star", |b| {
        b.iter(|| {
            out.clear();
            plain.matching(&path, &mut out);
            out.len()
        })
    });
    group.bench_function("reference", |b| {
        b.iter(|| {
            out.clear();
            hostile.matching(&path, &mut out);
            out.len()
        })
    });
    group.bench_function("exact_match", |b| {
        b.iter(|| reference::glob::exact_match(&format!("{}*.ts", "**/".repeat(16)), path.as_str(), false))
    });
    group.finish();
}

criterion_group!(benches, nested, pathological_glob, trigger);
criterion_main!(benches);
