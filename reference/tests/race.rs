//! Folders swapped for links while discovery runs (issue 10): threads exchange folders inside
//! the root with links to an outside canary directory, atomically and in a loop, while the test
//! runs discovery, nested lookups, reads and listings over and over. Not one canary byte, and not
//! one canary name, may reach any result or diagnostic, on either resolver (`openat2` and the
//! forced fallback walk). The same holds for the root-file profile's denylist while AGENTS.md
//! is swapped between a link to notes.md and a link to .env. And a module file swapped for a
//! FIFO between the look that finds it regular and the open never blocks a discovery (the read's
//! `O_NONBLOCK`, and the look after the open, refuse what the open found).
//!
//! Each test runs for a bounded wall time (its loop ends at a deadline; nothing about speed is
//! asserted), at most 20 seconds for the whole file, and prints how many passes it made.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reference::{instruction_file, modules, Config, Confinement, HostSource, ReadOutcome, RelPath, Source};
use rustix::fd::OwnedFd;
use rustix::fs::{openat, renameat_with, Mode, OFlags, RenameFlags, CWD};

/// How long each test swaps and discovers; all of them together, on two test threads, stay
/// well within 20 seconds.
const RUN_FOR: Duration = Duration::from_secs(4);

/// What every outside file holds and every outside-only name contains.
const CANARY: &str = "CANARY";

fn rp(s: &str) -> RelPath {
    RelPath::parse(s).unwrap()
}

/// The folder `dir`, held open for a swapper. Every folder is opened before any swapper starts,
/// while each is still where the test put it.
fn held(dir: &Path) -> OwnedFd {
    openat(CWD, dir, OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NOFOLLOW, Mode::empty()).unwrap()
}

/// Swaps the entries `a` and `b` of the held folder `fd` (a folder and a link) atomically until
/// `stop`, counting the swaps. The folder is held open: swapping by path strings would let the
/// swappers themselves race, resolving one name through a link and the other not, and so move
/// the canary's own folders into the root, where reading them is no leak.
fn swapper(fd: OwnedFd, a: &str, b: &str, stop: Arc<AtomicBool>, swaps: Arc<AtomicU64>) -> std::thread::JoinHandle<()> {
    let (a, b) = (a.to_string(), b.to_string());
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            renameat_with(&fd, a.as_str(), &fd, b.as_str(), RenameFlags::EXCHANGE).unwrap();
            swaps.fetch_add(1, Ordering::Relaxed);
            std::thread::yield_now();
        }
    })
}

/// The outside canary tree: the names the inside tree has, and names of its own.
fn canary(dir: &Path) -> PathBuf {
    let c = dir.join("canary");
    for sub in ["", "deeper", "rules", "rules/sub", "api"] {
        fs::create_dir_all(c.join(sub)).unwrap();
    }
    for file in [
        "b.md",
        "deeper/c.md",
        "CANARYNAME.md",
        "AGENTS.md",
        "rules/a.md",
        "rules/CANARYRULE.md",
        "rules/sub/b.md",
        "api/AGENTS.md",
    ] {
        fs::write(c.join(file), format!("{CANARY} {file}\n")).unwrap();
    }
    symlink(c.join("CANARYNAME.md"), c.join("CANARYLINK.md")).unwrap();
    c
}

fn modules_race(confinement: Confinement) {
    let dir = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(dir.path()).unwrap();
    let canary = canary(&base);
    let root = base.join("root");
    let rules = root.join(".elowen/rules");
    fs::create_dir_all(rules.join("sub/deeper")).unwrap();
    fs::create_dir_all(root.join("src/api")).unwrap();
    fs::write(rules.join("a.md"), "inside a\n").unwrap();
    fs::write(rules.join("sub/b.md"), "inside b\n").unwrap();
    fs::write(rules.join("sub/deeper/c.md"), "---\npaths: [\"src/**\"]\n---\ninside c\n").unwrap();
    fs::write(root.join("src/api/AGENTS.md"), "inside nested\n").unwrap();
    fs::write(root.join("AGENTS.md"), "inside root\n").unwrap();
    // The links each folder is exchanged with: absolute and relative, to a folder and its parent.
    symlink(&canary, rules.join("sub.swap")).unwrap();
    symlink("../../../../canary/deeper", rules.join("sub/deeper.swap")).unwrap();
    symlink(canary.join("api"), root.join("src/api.swap")).unwrap();
    symlink(canary.join("rules"), root.join(".elowen/rules.swap")).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let pairs = [
        (held(&rules), "sub", "sub.swap"),
        (held(&rules.join("sub")), "deeper", "deeper.swap"),
        (held(&root.join("src")), "api", "api.swap"),
        (held(&root.join(".elowen")), "rules", "rules.swap"),
    ];
    let threads: Vec<_> =
        pairs.into_iter().map(|(fd, a, b)| swapper(fd, a, b, Arc::clone(&stop), Arc::clone(&swaps))).collect();

    let source = Source::Host(HostSource::with_confinement(&root, confinement).unwrap());
    let config = Config::modules();
    let mut passes = 0u64;
    let mut escapes = 0u64;
    let mut loaded = 0u64;
    let deadline = Instant::now() + RUN_FOR;
    while Instant::now() < deadline {
        let found = modules(&source, &config);
        let mut diags = found.diagnostics.clone();
        let mut seen: Vec<String> = Vec::new();
        for m in found.unconditional.iter().chain(&found.conditional) {
            seen.push(format!("{} {}", m.path, m.content));
        }
        if let Some(n) = instruction_file(&source, &config, Some(&rp("src/api")), &mut diags) {
            seen.push(format!("{} {}", n.path, n.content));
        }
        for path in [".elowen/rules/sub/b.md", ".elowen/rules/sub/deeper/c.md", "src/api/AGENTS.md"] {
            // The bytes as text: their `Debug` form is a list of numbers, which holds no canary.
            seen.push(match source.read(&rp(path), true, 1 << 20) {
                ReadOutcome::Bytes(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                other => format!("{other:?}"),
            });
        }
        for folder in [".elowen/rules/sub", ".elowen/rules/sub/deeper", ".elowen/rules"] {
            seen.push(format!("{:?}", source.list(Some(&rp(folder)))));
        }
        for d in &diags {
            seen.push(format!("{} {}", d.path, d.message));
        }
        for s in &seen {
            assert!(
                !s.contains(CANARY),
                "{confinement:?}, pass {passes}: outside content or name reached a result: {s}"
            );
        }
        escapes += diags.iter().filter(|d| d.code == reference::Code::InstructionModuleEscape).count() as u64;
        loaded += (found.unconditional.len() + found.conditional.len()) as u64;
        passes += 1;
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    eprintln!(
        "{confinement:?}: {passes} discovery passes, {} swaps, {escapes} escapes reported, {loaded} modules loaded",
        swaps.load(Ordering::Relaxed)
    );
    assert!(passes > 0 && swaps.load(Ordering::Relaxed) > 0);
}

fn root_file_race(confinement: Confinement) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fs::create_dir_all(&root).unwrap();
    fs::write(root.join("notes.md"), "maintainer notes\n").unwrap();
    fs::write(root.join(".env"), format!("{CANARY}_KEY=hunter2\n")).unwrap();
    symlink("notes.md", root.join("AGENTS.md")).unwrap();
    symlink(".env", root.join("AGENTS.swap")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let t = swapper(held(&root), "AGENTS.md", "AGENTS.swap", Arc::clone(&stop), Arc::clone(&swaps));
    let source = Source::Host(HostSource::with_confinement(&root, confinement).unwrap());
    let config = Config::root_file();
    let (mut passes, mut read, mut denied) = (0u64, 0u64, 0u64);
    let deadline = Instant::now() + RUN_FOR;
    while Instant::now() < deadline {
        let rf = reference::rootfile::root_file(&source, &config);
        let shown = format!("{:?} {}", rf.file, rf.section);
        assert!(!shown.contains(CANARY), "{confinement:?}, pass {passes}: .env reached the prompt: {shown}");
        read += u64::from(rf.file.is_some());
        denied += rf.diagnostics.iter().filter(|d| d.code == reference::Code::RootFileDenied).count() as u64;
        passes += 1;
    }
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
    eprintln!(
        "{confinement:?}: {passes} root-file passes, {} swaps, {read} read notes.md, {denied} denied",
        swaps.load(Ordering::Relaxed)
    );
    assert!(passes > 0 && swaps.load(Ordering::Relaxed) > 0);
}

/// A module file and the root file exchanged with FIFOs in a loop while discovery and reads run
/// on a thread of their own: every pass must return. A read that opened a FIFO without
/// `O_NONBLOCK` would wait for a writer that never comes; the watchdog then fails the test
/// (and opens the FIFOs for writing, so the blocked read ends and the thread with it).
fn fifo_race(confinement: Confinement) {
    let dir = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(dir.path()).unwrap().join("root");
    let rules = root.join(".elowen/rules");
    fs::create_dir_all(&rules).unwrap();
    fs::write(rules.join("a.md"), "inside a\n").unwrap();
    fs::write(root.join("AGENTS.md"), "inside root\n").unwrap();
    let fifo = |path: &Path| {
        rustix::fs::mknodat(CWD, path, rustix::fs::FileType::Fifo, Mode::from_raw_mode(0o644), 0).unwrap();
    };
    fifo(&rules.join("a.swap"));
    fifo(&root.join("AGENTS.swap"));
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let threads = [
        swapper(held(&rules), "a.md", "a.swap", Arc::clone(&stop), Arc::clone(&swaps)),
        swapper(held(&root), "AGENTS.md", "AGENTS.swap", Arc::clone(&stop), Arc::clone(&swaps)),
    ];
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let reader_root = root.clone();
    let reader = std::thread::spawn(move || {
        let source = Source::Host(HostSource::with_confinement(&reader_root, confinement).unwrap());
        let config = Config::modules();
        let (mut passes, mut loaded) = (0u64, 0u64);
        let deadline = Instant::now() + RUN_FOR / 2;
        while Instant::now() < deadline {
            let found = modules(&source, &config);
            loaded += found.unconditional.len() as u64;
            let mut diags = Vec::new();
            loaded += u64::from(instruction_file(&source, &config, None, &mut diags).is_some());
            let _ = source.read(&rp(".elowen/rules/a.md"), true, 1 << 20);
            passes += 1;
        }
        let _ = done_tx.send((passes, loaded));
    });
    let outcome = done_rx.recv_timeout(RUN_FOR / 2 + Duration::from_secs(10));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let Ok((passes, loaded)) = outcome else {
        // Unblock the read before failing, so that no thread is left waiting on a FIFO.
        for path in [rules.join("a.md"), rules.join("a.swap"), root.join("AGENTS.md"), root.join("AGENTS.swap")] {
            let _ = openat(CWD, &path, OFlags::WRONLY | OFlags::NONBLOCK, Mode::empty());
        }
        panic!("{confinement:?}: a discovery blocked on a module or root file swapped for a FIFO");
    };
    reader.join().unwrap();
    eprintln!(
        "{confinement:?}: {passes} passes over FIFO swaps, {} swaps, {loaded} files loaded",
        swaps.load(Ordering::Relaxed)
    );
    assert!(passes > 0 && swaps.load(Ordering::Relaxed) > 0);
}

#[test]
fn a_module_swapped_for_a_fifo_never_blocks_discovery_with_openat2() {
    fifo_race(Confinement::Kernel);
}

#[test]
fn a_module_swapped_for_a_fifo_never_blocks_discovery_with_the_fallback_walk() {
    fifo_race(Confinement::Fallback);
}

#[test]
fn folders_swapped_for_links_out_never_bring_outside_content_with_openat2() {
    modules_race(Confinement::Kernel);
}

#[test]
fn folders_swapped_for_links_out_never_bring_outside_content_with_the_fallback_walk() {
    modules_race(Confinement::Fallback);
}

#[test]
fn a_root_file_swapped_between_links_is_denied_as_the_file_it_opens_with_openat2() {
    root_file_race(Confinement::Kernel);
}

#[test]
fn a_root_file_swapped_between_links_is_denied_as_the_file_it_opens_with_the_fallback_walk() {
    root_file_race(Confinement::Fallback);
}
