//! Prints each benchmark's mean time as a ratio to the floor of its group, from criterion's
//! `target/criterion/**/new/estimates.json` (against every floor of the group: one thread, and
//! the reference's thread count where the group measures it), plus the 10k → 100k growth of full
//! discovery and the cached trigger's speed-up.
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
        // Every floor of the group: the single-thread one, and the one on the reference's
        // thread count where the group has it.
        let floors: Vec<(&String, f64)> =
            benches.iter().filter(|(name, _)| name.starts_with("floor")).map(|(n, m)| (n, *m)).collect();
        println!("{group}");
        for (name, mean) in benches {
            let ratios: Vec<String> = floors.iter().map(|(f, m)| format!("{:>8.2}× {f}", mean / m)).collect();
            println!("  {name:<28} {:>12.4} ms {}", mean / 1e6, ratios.join("  "));
        }
    }
    let get = |g: &str, b: &str| groups.get(g).and_then(|m| m.get(b)).copied();
    if let (Some(a), Some(b)) = (get("discovery_10000", "reference"), get("discovery_100000", "reference")) {
        println!("discovery growth 10k → 100k: {:.2}×", b / a);
    }
    for n in ["10000", "100000"] {
        let g = format!("trigger_{n}");
        if let (Some(u), Some(c)) = (get(&g, "uncached"), get(&g, "cached")) {
            println!("trigger {n}: cached re-trigger {:.1}× faster than uncached", u / c);
        }
    }
}
