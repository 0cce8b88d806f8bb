//! The other two profiles beside floors of their own: the section profile's walk-up discovery
//! and render (root to a deep working directory, plus 200 subtree folders in scope), beside
//! reading and hashing the same AGENTS.md files; and the root-file profile's 32 KiB cut of a
//! large AGENTS.md, beside reading and hashing its first 32 KiB.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::io::Read;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use reference::section::{Section, SectionOptions};
use reference::{Config, HostSource, Source};
use sha2::{Digest, Sha256};

fn section(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = fs::canonicalize(dir.path()).expect("root");
    fs::create_dir_all(root.join(".git")).expect("marker");
    let mut files = vec![root.join("AGENTS.md")];
    let mut cwd = root.clone();
    for depth in 0..8 {
        cwd = cwd.join(format!("level{depth}"));
        files.push(cwd.join("AGENTS.md"));
    }
    for i in 0..200 {
        files.push(cwd.join(format!("pkg{i}")).join("AGENTS.md"));
    }
    for (i, f) in files.iter().enumerate() {
        fs::create_dir_all(f.parent().expect("parent")).expect("dir");
        fs::write(f, format!("# Rules {i}\n{}\n", "Keep it small. ".repeat(8))).expect("write");
    }
    let options = SectionOptions { cwd: Some(cwd.to_string_lossy().into_owned()), ..SectionOptions::default() };
    let mut section = Section::new(options, &root).expect("section");
    let calls: Vec<reference::Call> = (0..200)
        .map(|i| {
            let mut args = serde_json::Map::new();
            args.insert("file_path".into(), format!("pkg{i}/x.ts").into());
            reference::Call { failed: false, args }
        })
        .collect();
    section.round(None, &calls);
    let mut group = c.benchmark_group("section/209-files");
    group.sample_size(20).throughput(Throughput::Elements(files.len() as u64));
    group.bench_function("floor", |b| {
        b.iter(|| {
            for f in &files {
                std::hint::black_box(Sha256::digest(fs::read(f).expect("read")));
            }
        })
    });
    group.bench_function("reference", |b| b.iter(|| section.round(None, &[])));
    group.finish();
}

fn root_file_cut(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let line = "Run the checks before you push; keep commits small and honest.\n";
    fs::write(dir.path().join("AGENTS.md"), line.repeat(160_000)).expect("write");
    let source = Source::Host(HostSource::new(dir.path()).expect("root"));
    let config = Config::root_file();
    let mut group = c.benchmark_group("root-file/10MiB-cut");
    group.sample_size(50).throughput(Throughput::Bytes(32 * 1024));
    group.bench_function("floor", |b| {
        b.iter(|| {
            let mut buf = Vec::new();
            fs::File::open(dir.path().join("AGENTS.md"))
                .expect("open")
                .take(32 * 1024 + 1)
                .read_to_end(&mut buf)
                .expect("read");
            std::hint::black_box(Sha256::digest(&buf))
        })
    });
    group.bench_function("reference", |b| b.iter(|| reference::rootfile::root_file(&source, &config)));
    group.finish();
}

criterion_group!(benches, section, root_file_cut);
criterion_main!(benches);
