//! The scale tool (issue 13): generates the bench tree of `--modules N`, starts a session on it
//! (one discovery), runs `--triggers K` triggers and prints one JSON line. Every trigger touches
//! the same source path, so the first one loads its modules and the others are re-triggers of an
//! unchanged tree, deduped against the journal; with `--new-paths` each touches the next of the
//! tree's source paths instead, and most append a record. The line holds `modules`, `content_bytes` (the module files' bytes),
//! `discovery_ms` (the session's start: root file, one full discovery, the startup record),
//! `trigger_ms` (the median trigger: `observe` then `next_request`), `first_trigger_ms`, and
//! `peak_rss_bytes` (the process's high-water mark, `VmHWM` of /proc/self/status, taken after
//! the tree was written, so it is the peak of discovery and the triggers).
//!
//! ```sh
//! cargo run --release -p benches --bin scale -- --modules 100000 --triggers 20 --cached
//! ```

use std::time::Instant;

use benches::generate;
use reference::{Config, HostSource, Session, Source, ToolResult};

fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Resets the high-water mark to the current RSS (Linux: writing 5 to clear_refs).
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut modules = 10_000usize;
    let mut triggers = 10usize;
    let mut cached = false;
    let mut new_paths = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--modules" => modules = args.next().ok_or("--modules needs a number")?.parse()?,
            "--triggers" => triggers = args.next().ok_or("--triggers needs a number")?.parse()?,
            "--cached" => cached = true,
            "--new-paths" => new_paths = true,
            other => {
                return Err(
                    format!("unknown argument '{other}' (--modules N --triggers K [--cached] [--new-paths])").into()
                )
            }
        }
    }
    let tree = generate(modules, 7)?;
    let state = tempfile::tempdir()?;
    reset_peak();
    let config = Config { discovery_cache: cached, ..Config::modules() };
    let started = Instant::now();
    let (mut session, _startup) = Session::start(config, Source::Host(HostSource::new(&tree.root)?), state.path())?;
    let discovery_ms = started.elapsed().as_secs_f64() * 1e3;
    let mut times = Vec::with_capacity(triggers);
    for i in 0..triggers {
        let at = if new_paths { i % tree.touched.len().max(1) } else { 0 };
        let Some(rel) = tree.touched.get(at) else { break };
        let path = tree.root.join(rel);
        let t = Instant::now();
        session.observe(&ToolResult { tool: "read".into(), file_access: Some(path.to_string_lossy().into_owned()) });
        std::hint::black_box(session.next_request());
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let first_trigger_ms = times.first().copied().unwrap_or(0.0);
    times.sort_by(f64::total_cmp);
    let trigger_ms = times.get(times.len() / 2).copied().unwrap_or(0.0);
    println!(
        "{}",
        serde_json::json!({
            "modules": modules,
            "cached": cached,
            "new_paths": new_paths,
            "triggers": triggers,
            "content_bytes": tree.bytes,
            "discovery_ms": (discovery_ms * 100.0).round() / 100.0,
            "first_trigger_ms": (first_trigger_ms * 100.0).round() / 100.0,
            "trigger_ms": (trigger_ms * 1000.0).round() / 1000.0,
            "peak_rss_bytes": peak_rss(),
        })
    );
    Ok(())
}
