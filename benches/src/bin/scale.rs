//! The scale tool (issue 13): generates the bench tree of `--modules N`, starts a session on it
//! (one discovery), runs `--triggers K` triggers and prints one JSON line. Every trigger touches
//! the same source path, so the first one loads its modules and the others are re-triggers of an
//! unchanged tree, deduped against the journal; with `--new-paths` each touches the next of the
//! tree's source paths instead, and most append a record.
//!
//! One session (uncached, or `--cached`): `modules`, `content_bytes` (the module files' bytes),
//! `discovery_ms` (the session's start: root file, one full discovery, the startup record),
//! `trigger_ms` and `trigger_cpu_ms` (the median trigger, `observe` then `next_request`, in wall
//! and in process CPU time), `first_trigger_ms`, `start_peak_rss_bytes` (the high-water mark of
//! the start, `VmHWM` of /proc/self/status reset after the tree was written) and
//! `trigger_peak_rss_bytes` (the high-water mark of the triggers, reset after the start); and,
//! counted by the allocator, the heap's share of each: `start_peak_heap_bytes`,
//! `trigger_peak_heap_bytes` (the most bytes live on the heap at once), and
//! `held_after_start_heap_bytes` and `held_after_triggers_heap_bytes` (what stays live). Where
//! the RSS exceeds the heap's peak, the difference is the allocator's own (freed memory it has
//! not returned, per-thread arenas), the stacks and the binary.
//!
//! `--compare`: an uncached and a cached session on the same tree, triggered in turn, so that
//! both carry the same load; the medians of their re-triggers (the first trigger left out) and
//! the ratios uncached / cached, wall and CPU; and beside them `stat_floor_ms` and
//! `stat_floor_cpu_ms`, one `lstat` by full path of each of the rules tree's `entries` (folders
//! and files) on the reference's thread count (`threads`), the floor of any revalidation that
//! checks every identity, and `cached_vs_stat_floor` (and `_cpu`), the cached re-trigger over
//! that floor (issue 25's target: at most 1.2). No memory figures (two sessions share a process).
//!
//! `--discovery`: no session; `--triggers K` rounds on the tree, each timing in turn the I/O
//! floor (`benches::floor_threaded`: walk, read, hash), the loader floor (`benches::loader_floor`:
//! the same plus serde_yaml and globset for every module) and one full discovery
//! (`reference::modules`), all on the reference's thread count; the medians, wall and CPU, and
//! the ratios of the discovery to each floor (issue 25's targets: at most 1.3 and 1.0). What a
//! discovery returns is dropped after its timing. The counting allocator below counts for every
//! figure of the run, the floors' too.
//!
//! ```sh
//! cargo run --release -p benches --bin scale -- --modules 100000 --triggers 7 --compare
//! cargo run --release -p benches --bin scale -- --modules 100000 --triggers 7 --discovery
//! ```

use std::time::Instant;

use benches::{floor_threaded, generate, loader_floor, reference_threads};
use peak_alloc::PeakAlloc;
use reference::{Config, HostSource, Session, Source, ToolResult};

/// The system allocator, counting the bytes live on the heap and their high-water mark, so that
/// the RSS figures split into what the reference holds and what the allocator keeps besides.
#[global_allocator]
static HEAP: PeakAlloc = PeakAlloc;

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
    HEAP.reset_peak_usage();
}

/// The process's CPU time so far (user and system, every thread), in milliseconds, from
/// /proc/self/stat; 0 where it cannot be read. On a loaded machine a trigger's wall time carries
/// the waits for a core, its CPU time much less so.
fn cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name and state.
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // USER_HZ is 100 on every Linux the project runs on.
    (ticks(11) + ticks(12)) * 10.0
}

/// Every folder and file below `.elowen/rules`, the rules folder included (not timed).
fn entries(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![root.join(".elowen/rules")];
    let mut at = 0;
    while let Some(dir) = out.get(at).cloned() {
        at += 1;
        if let Ok(list) = std::fs::read_dir(&dir) {
            out.extend(list.flatten().map(|e| e.path()));
        }
    }
    out
}

/// The revalidation floor: one `lstat` of every entry by its full path, on `threads` threads in
/// contiguous shares (the reference's thread count, as its cache shares its checks), as (wall,
/// CPU) milliseconds. The least a check of every identity can cost without a handle.
fn stat_floor(paths: &[std::path::PathBuf], threads: usize) -> (f64, f64) {
    let (t, c) = (Instant::now(), cpu_ms());
    let chunk = paths.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|s| {
        for part in paths.chunks(chunk) {
            s.spawn(move || {
                for p in part {
                    std::hint::black_box(std::fs::symlink_metadata(p).ok());
                }
            });
        }
    });
    (t.elapsed().as_secs_f64() * 1e3, cpu_ms() - c)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.get(v.len() / 2).copied().unwrap_or(0.0);
    (m * 1000.0).round() / 1000.0
}

fn start(
    tree: &benches::Generated,
    cached: bool,
    state: &std::path::Path,
) -> Result<Session, Box<dyn std::error::Error>> {
    let config = Config { discovery_cache: cached, ..Config::modules() };
    // The startup prefix is the caller's to keep or drop; the tool drops it, as the driver does
    // once it has answered it.
    let (session, _) = Session::start(config, Source::Host(HostSource::new(&tree.root)?), state)?;
    Ok(session)
}

/// One trigger: wall and CPU milliseconds.
fn trigger(session: &mut Session, path: &std::path::Path) -> (f64, f64) {
    let (t, c) = (Instant::now(), cpu_ms());
    session.observe(&ToolResult { tool: "read".into(), file_access: Some(path.to_string_lossy().into_owned()) });
    std::hint::black_box(session.next_request());
    (t.elapsed().as_secs_f64() * 1e3, cpu_ms() - c)
}

/// Wall and CPU milliseconds of `f`; what it returns is dropped after the timing (a discovery's
/// modules are the session's to keep, and freeing them is no part of finding them).
fn timed<T>(f: impl FnOnce() -> T) -> (f64, f64) {
    let (t, c) = (Instant::now(), cpu_ms());
    let kept = std::hint::black_box(f());
    let took = (t.elapsed().as_secs_f64() * 1e3, cpu_ms() - c);
    drop(kept);
    took
}

/// `--discovery`: `rounds` rounds of the two floors and one discovery, in turn.
fn discoveries(tree: &benches::Generated, rounds: usize) -> Result<(), Box<dyn std::error::Error>> {
    let source = Source::Host(HostSource::new(&tree.root)?);
    let config = Config::modules();
    let threads = reference_threads();
    let (mut io, mut loader, mut reference) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        io.push(timed(|| floor_threaded(&tree.root, threads).map(|(files, _)| files)));
        loader.push(timed(|| loader_floor(&tree.root, threads).map(|(files, _)| files)));
        reference.push(timed(|| reference::modules(&source, &config)));
    }
    let wall = |v: &[(f64, f64)]| median(v.iter().map(|t| t.0).collect());
    let cpu = |v: &[(f64, f64)]| median(v.iter().map(|t| t.1).collect());
    let ratio = |a: f64, b: f64| if b > 0.0 { (a / b * 100.0).round() / 100.0 } else { 0.0 };
    println!(
        "{}",
        serde_json::json!({
            "modules": tree.modules,
            "discovery": true,
            "rounds": rounds,
            "threads": threads,
            "content_bytes": tree.bytes,
            "io_floor_ms": wall(&io),
            "io_floor_cpu_ms": cpu(&io),
            "loader_floor_ms": wall(&loader),
            "loader_floor_cpu_ms": cpu(&loader),
            "discovery_ms": wall(&reference),
            "discovery_cpu_ms": cpu(&reference),
            "vs_io_floor": ratio(wall(&reference), wall(&io)),
            "vs_loader_floor": ratio(wall(&reference), wall(&loader)),
        })
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut modules = 10_000usize;
    let mut triggers = 10usize;
    let mut cached = false;
    let mut compare = false;
    let mut discovery = false;
    let mut new_paths = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--modules" => modules = args.next().ok_or("--modules needs a number")?.parse()?,
            "--triggers" => triggers = args.next().ok_or("--triggers needs a number")?.parse()?,
            "--cached" => cached = true,
            "--compare" => compare = true,
            "--discovery" => discovery = true,
            "--new-paths" => new_paths = true,
            other => {
                return Err(format!(
                    "unknown argument '{other}' (--modules N --triggers K [--cached | --compare | --discovery] [--new-paths])"
                )
                .into())
            }
        }
    }
    let tree = generate(modules, 7)?;
    // For a profiler to attach once the tree is written (`perf record -p PID`).
    eprintln!("scale: {modules} modules generated, pid {}", std::process::id());
    if discovery {
        return discoveries(&tree, triggers);
    }
    let state = tempfile::tempdir()?;
    let touched = |i: usize| {
        let at = if new_paths { i % tree.touched.len().max(1) } else { 0 };
        tree.touched.get(at).map(|rel| tree.root.join(rel))
    };
    if compare {
        // Both sessions on one tree, triggered in turn, so that both see the same load.
        let mut uncached = start(&tree, false, &state.path().join("u"))?;
        let mut cached = start(&tree, true, &state.path().join("c"))?;
        let (mut uw, mut uc, mut cw, mut cc) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let all = entries(&tree.root);
        let (mut fw, mut fc) = (Vec::new(), Vec::new());
        for i in 0..triggers {
            let Some(path) = touched(i) else { break };
            let (w, c) = stat_floor(&all, reference_threads());
            fw.push(w);
            fc.push(c);
            let (w, c) = trigger(&mut uncached, &path);
            uw.push(w);
            uc.push(c);
            let (w, c) = trigger(&mut cached, &path);
            cw.push(w);
            cc.push(c);
        }
        // The first trigger of each loads the touched path's modules; the rest are re-triggers.
        let skip = |v: Vec<f64>| if new_paths || v.len() < 2 { v } else { v.get(1..).unwrap_or_default().to_vec() };
        let (uw, uc, cw, cc) = (median(skip(uw)), median(skip(uc)), median(skip(cw)), median(skip(cc)));
        let ratio = |a: f64, b: f64| if b > 0.0 { (a / b * 10.0).round() / 10.0 } else { 0.0 };
        let ratio2 = |a: f64, b: f64| if b > 0.0 { (a / b * 100.0).round() / 100.0 } else { 0.0 };
        println!(
            "{}",
            serde_json::json!({
                "modules": modules,
                "compare": true,
                "new_paths": new_paths,
                "triggers": triggers,
                "content_bytes": tree.bytes,
                "uncached_trigger_ms": uw,
                "uncached_trigger_cpu_ms": uc,
                "cached_trigger_ms": cw,
                "cached_trigger_cpu_ms": cc,
                "entries": all.len(),
                "threads": reference_threads(),
                "stat_floor_ms": median(fw.clone()),
                "stat_floor_cpu_ms": median(fc.clone()),
                "cached_vs_stat_floor": ratio2(cw, median(fw)),
                "cached_vs_stat_floor_cpu": ratio2(cc, median(fc)),
                "wall_ratio": ratio(uw, cw),
                "cpu_ratio": ratio(uc, cc),
            })
        );
        return Ok(());
    }
    reset_peak();
    let started = Instant::now();
    let mut session = start(&tree, cached, state.path())?;
    let discovery_ms = started.elapsed().as_secs_f64() * 1e3;
    let start_peak = peak_rss();
    let (start_heap_peak, start_held) = (HEAP.peak_usage(), HEAP.current_usage());
    reset_peak();
    let mut times = Vec::with_capacity(triggers);
    let mut cpu = Vec::with_capacity(triggers);
    for i in 0..triggers {
        let Some(path) = touched(i) else { break };
        let (w, c) = trigger(&mut session, &path);
        times.push(w);
        cpu.push(c);
    }
    let first_trigger_ms = times.first().copied().unwrap_or(0.0);
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
            "trigger_ms": median(times),
            "trigger_cpu_ms": median(cpu),
            "start_peak_rss_bytes": start_peak,
            "trigger_peak_rss_bytes": peak_rss(),
            "start_peak_heap_bytes": start_heap_peak,
            "held_after_start_heap_bytes": start_held,
            "trigger_peak_heap_bytes": HEAP.peak_usage(),
            "held_after_triggers_heap_bytes": HEAP.current_usage(),
        })
    );
    Ok(())
}
