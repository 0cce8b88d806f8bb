//! Full discovery (list, bounded read, frontmatter, hash, one compiled glob set) beside two floors
//! at 1k, 10k and 100k modules: the I/O floor (walk, read and SHA-256 every rule file) on one
//! thread and on the reference's thread count, and the loader floor (the same, plus each
//! frontmatter parsed with serde_yaml and each module's globs built with globset) on the
//! reference's thread count; and `for_paths` with 1,
//! 100 and 10,000 touched paths on the 10k tree, beside the same floor.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use benches::{floor, floor_threaded, generate, loader_floor, reference_threads};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use reference::{Config, HostSource, RelPath, Source};

fn discovery(c: &mut Criterion) {
    for n in [1_000usize, 10_000, 100_000] {
        let tree = generate(n, 7).expect("generate");
        let source = Source::Host(HostSource::new(&tree.root).expect("root"));
        let config = Config::modules();
        let mut group = c.benchmark_group(format!("discovery/{n}"));
        group.sample_size(10).measurement_time(Duration::from_secs(if n >= 100_000 { 30 } else { 8 }));
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function("floor", |b| b.iter(|| floor(&tree.root).expect("floor")));
        let threads = reference_threads();
        group.bench_function(format!("floor_threads_{threads}"), |b| {
            b.iter(|| floor_threaded(&tree.root, threads).expect("floor"))
        });
        group.bench_function(format!("loader_floor_threads_{threads}"), |b| {
            b.iter(|| loader_floor(&tree.root, threads).expect("loader floor"))
        });
        // The modules found are dropped outside the timing: a session keeps them, and freeing
        // them is no part of finding them (the floors keep nothing).
        group.bench_function("reference", |b| b.iter_with_large_drop(|| reference::modules(&source, &config)));
        group.finish();
        // Bytes per second follow from the files per second: criterion takes one throughput per
        // group, and the tree's size is printed here for the conversion.
        eprintln!("discovery/{n}: {} module files, {} bytes", tree.modules, tree.bytes);
    }
}

fn for_paths(c: &mut Criterion) {
    let tree = generate(10_000, 11).expect("generate");
    let source = Source::Host(HostSource::new(&tree.root).expect("root"));
    let config = Config::modules();
    let modules = reference::modules(&source, &config);
    let mut group = c.benchmark_group("for_paths/10000");
    group.sample_size(10);
    group.bench_function("floor", |b| b.iter(|| floor(&tree.root).expect("floor")));
    for k in [1usize, 100, 10_000] {
        let touched: Vec<RelPath> = tree.touched.iter().take(k).filter_map(|p| RelPath::parse(p)).collect();
        group.throughput(Throughput::Elements(k as u64));
        group.bench_with_input(BenchmarkId::new("reference", k), &touched, |b, touched| {
            b.iter(|| {
                let mut diags = Vec::new();
                reference::for_paths(&source, &config, &modules, touched, &mut diags)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, discovery, for_paths);
criterion_main!(benches);
