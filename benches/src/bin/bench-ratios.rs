//! Prints each benchmark's mean time as a ratio to the floor of its group, from criterion's
//! `target/criterion/**/new/estimates.json`, plus the 10k → 100k growth of full discovery.
//! Run after `cargo bench -p benches`: `cargo run -p benches --bin bench-ratios`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

fn estimates(dir: &Path, out: &mut Vec<(PathBuf, f64)>) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.filter_map(Result::ok) {
        let p = e.path();
        if p.is_dir() {
            estimates(&p, out);
        } else if p.ends_with("new/estimates.json") {
            let mean = fs::read_to_string(&p)
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .and_then(|v| v.pointer("/mean/point_estimate").and_then(serde_json::Value::as_f64));
            if let Some(m) = mean {
                out.push((p, m));
            }
        }
    }
}

fn main() {
    let root = std::env::args().nth(1).map_or_else(|| PathBuf::from("target/criterion"), PathBuf::from);
    let mut all = Vec::new();
    estimates(&root, &mut all);
    // group → bench → mean ns
    let mut groups: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
    for (path, mean) in all {
        let Ok(rel) = path.strip_prefix(&root) else { continue };
        let parts: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        let Some((group, rest)) = parts.split_first() else { continue };
        let bench = rest.iter().take(rest.len().saturating_sub(2)).cloned().collect::<Vec<_>>().join("/");
        groups.entry(group.clone()).or_default().insert(bench, mean);
    }
    for (group, benches) in &groups {
        let floor = benches.iter().find(|(name, _)| name.starts_with("floor")).map(|(_, m)| *m);
        println!("{group}");
        for (name, mean) in benches {
            let ratio = floor.map_or(String::new(), |f| format!("{:>8.2}× floor", mean / f));
            println!("  {name:<28} {:>12.3} ms {ratio}", mean / 1e6);
        }
    }
    let get = |g: &str| groups.get(g).and_then(|b| b.get("reference")).copied();
    if let (Some(a), Some(b)) = (get("discovery_10000"), get("discovery_100000")) {
        println!("discovery growth 10k → 100k: {:.2}×", b / a);
    }
}
