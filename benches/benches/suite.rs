//! The whole corpus in-process (the floor of this group) and the same corpus through
//! `reference-adapter`. Target: the adapter ≤ 1.5× in-process.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use harness::case::corpus::default_cases_dir;
use harness::case::load::load_dir;
use harness::judge::manifest::Manifest;
use harness::run::adapter::{reference_adapter_path, ProcessAdapter};
use harness::run::implementation::{Implementation, InProcess};
use harness::run::suite::run_all;

fn suite(c: &mut Criterion) {
    let cases = load_dir(&default_cases_dir()).expect("corpus");
    let exe = reference_adapter_path().expect("reference-adapter");
    let home = tempfile::tempdir().expect("home");
    let manifest = Manifest::default();
    let mut group = c.benchmark_group("suite");
    group.sample_size(10).throughput(Throughput::Elements(cases.len() as u64));
    group.bench_function("floor:in_process", |b| {
        b.iter(|| {
            let factory = || Ok(Box::new(InProcess::default()) as Box<dyn Implementation + Send>);
            run_all(&cases, &factory, 1, &manifest, harness::run::case::Level::All, false, false).expect("run")
        })
    });
    let command = exe.to_string_lossy().into_owned();
    group.bench_function("adapter", |b| {
        b.iter(|| {
            let factory = || {
                let imp = ProcessAdapter::new(command.clone(), home.path(), Duration::from_secs(20), 0);
                Ok(Box::new(imp) as Box<dyn Implementation + Send>)
            };
            run_all(&cases, &factory, 1, &manifest, harness::run::case::Level::All, false, false).expect("run")
        })
    });
    group.finish();
}

criterion_group!(benches, suite);
criterion_main!(benches);
