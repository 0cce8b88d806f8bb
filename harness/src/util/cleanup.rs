//! Leaving nothing behind. The harness starts third-party adapters and makes temporary trees; on
//! every way out — the end of a case, the end of a run, SIGINT, SIGTERM or SIGHUP — their process
//! groups are killed, escaped descendants are reaped, and the temporary directories removed.
//!
//! Live sandboxes and process groups are registered here while they exist (a guard unregisters
//! them when dropped). A signal thread, once installed, kills and removes whatever is registered
//! and exits with 128 + the signal. On Linux the harness also becomes a child subreaper, so a
//! process that left its adapter's process group (`setsid`) is re-parented to the harness
//! instead of to init, and [`reap_orphans`] can kill it.
//!
//! Three races are closed here, each of which used to leave a sandbox behind:
//! 1. A directory is created and registered under the registry's lock ([`temp_dir`]), and the
//!    signal thread marks the harness as stopping under the same lock: a directory is either
//!    registered before the cleanup reads the registry, or never created.
//! 2. Every change the harness makes to a tree holds the write gate ([`writing`]) for its
//!    duration, and is refused once the harness is stopping. The cleanup closes the gate (waiting
//!    for the changes in flight, each bounded by one entry) before it removes anything, so a tree
//!    being built cannot add entries to a folder that is being removed (`ENOTEMPTY` left the
//!    whole sandbox in place).
//! 3. The removal is tried again while it fails for anything but a missing directory: an
//!    implementation's own write into its state directory (a journal append) can still land
//!    between the listing and the removal of that directory.
//!
//! # Platform behavior
//! The subreaper and the list of children (`/proc/self/task/*/children`) are Linux's; elsewhere
//! only process groups are killed.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock, PoisonError};

#[derive(Debug, Default)]
struct Registry {
    next: u64,
    dirs: BTreeMap<u64, PathBuf>,
    groups: BTreeMap<u64, i32>,
}

fn registry() -> &'static Mutex<Registry> {
    static R: OnceLock<Mutex<Registry>> = OnceLock::new();
    R.get_or_init(Mutex::default)
}

fn with<T>(f: impl FnOnce(&mut Registry) -> T) -> T {
    f(&mut registry().lock().unwrap_or_else(PoisonError::into_inner))
}

/// Unregisters its directory or process group when dropped.
#[derive(Debug)]
pub struct Guard(u64);

impl Drop for Guard {
    fn drop(&mut self) {
        with(|r| {
            r.dirs.remove(&self.0);
            r.groups.remove(&self.0);
        });
    }
}

/// A new temporary directory named `prefix` and random characters, registered for removal in the
/// same step (under the registry's lock), so that no signal can fall between its creation and its
/// registration. Refused once a signal is stopping the harness.
pub fn temp_dir(prefix: &str) -> Result<(tempfile::TempDir, Guard), String> {
    with(|r| {
        if closed() {
            return Err("the harness is stopping".to_string());
        }
        let dir = tempfile::Builder::new().prefix(prefix).tempdir().map_err(|e| format!("tempdir: {e}"))?;
        r.next += 1;
        r.dirs.insert(r.next, dir.path().to_path_buf());
        Ok((dir, Guard(r.next)))
    })
}

/// The gate that every change to a tree the harness makes passes through: shared by the changes,
/// taken whole by the cleanup before it removes anything.
fn gate() -> &'static std::sync::RwLock<()> {
    static G: OnceLock<std::sync::RwLock<()>> = OnceLock::new();
    G.get_or_init(Default::default)
}

/// Leave to change a tree: held for the whole change, so the cleanup waits for it. `None` once a
/// signal is stopping the harness, or its run has ended: the change must then not be made.
pub fn writing() -> Option<std::sync::RwLockReadGuard<'static, ()>> {
    if closed() {
        return None;
    }
    let held = gate().read().unwrap_or_else(PoisonError::into_inner);
    // Checked again under the gate: the cleanup may have begun while this thread waited.
    (!closed()).then_some(held)
}

/// Removes `dir` and everything below it, trying again while something else still writes into
/// it (the removal fails with `ENOTEMPTY` when an entry appears after its folder was listed) or
/// removes it at the same time (a case's own guard, dropped as its build is refused, makes this
/// removal meet entries that are already gone). Done when `dir` is not there.
fn remove_dir(dir: &std::path::Path) {
    for _ in 0..100 {
        let _ = std::fs::remove_dir_all(dir);
        match std::fs::symlink_metadata(dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            _ => std::thread::sleep(std::time::Duration::from_millis(5)),
        }
    }
}

/// Removes whatever registered directories are left, at the end of a run: the sandbox of an
/// abandoned in-process worker (a step that timed out) is kept while that worker may still
/// write in it, and goes here once nothing of the run goes on. The harness is marked as
/// stopping first, so the worker changes no tree after this.
pub fn remove_leftovers() {
    let dirs = with(|r| {
        CLOSED.store(true, std::sync::atomic::Ordering::SeqCst);
        r.dirs.values().cloned().collect::<Vec<_>>()
    });
    let _closed = gate().write().unwrap_or_else(PoisonError::into_inner);
    for d in dirs {
        remove_dir(&d);
    }
}

/// Registers a process group (its leader's pid) to kill if the harness is stopped by a signal.
pub fn register_group(pgid: u32) -> Guard {
    with(|r| {
        r.next += 1;
        r.groups.insert(r.next, i32::try_from(pgid).unwrap_or(0));
        Guard(r.next)
    })
}

/// Sends SIGKILL to the process group led by `pgid`.
pub fn kill_group(pgid: i32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pgid) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// Kills every registered group and removes every registered directory. The harness is marked
/// as stopping under the registry's lock (no directory is created after this), and the tree gate
/// is closed before anything is removed (no tree changes while it is removed).
fn clean_all() {
    let (groups, dirs) = with(|r| {
        STOPPING.store(true, std::sync::atomic::Ordering::SeqCst);
        CLOSED.store(true, std::sync::atomic::Ordering::SeqCst);
        (r.groups.values().copied().collect::<Vec<_>>(), r.dirs.values().cloned().collect::<Vec<_>>())
    });
    for g in groups {
        kill_group(g);
    }
    reap_orphans();
    let _closed = gate().write().unwrap_or_else(PoisonError::into_inner);
    for d in dirs {
        remove_dir(&d);
    }
}

static STOPPING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// Set by a signal and at the end of a run: no temporary directory is created and no tree is
/// changed after it.
static CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn closed() -> bool {
    CLOSED.load(std::sync::atomic::Ordering::SeqCst)
}

/// Whether a signal is stopping the harness; the signal thread then decides the exit status, so
/// the main thread must not exit on its own (see [`wait_if_stopping`]).
pub fn stopping() -> bool {
    STOPPING.load(std::sync::atomic::Ordering::SeqCst)
}

/// Parks the calling thread for good when a signal is stopping the harness: the run's own end
/// (its adapters killed under it) must not win the race with the signal thread's exit.
pub fn wait_if_stopping() {
    while stopping() {
        std::thread::park();
    }
}

/// Installs the signal thread (once): SIGINT, SIGTERM and SIGHUP clean up and exit.
pub fn install_signal_handlers() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else { return };
        std::thread::spawn(move || {
            if let Some(sig) = signals.forever().next() {
                eprintln!("conformance: stopped by signal {sig}; cleaning up");
                clean_all();
                std::process::exit(128 + sig);
            }
        });
    });
}

/// Makes the harness the reaper of its orphaned descendants (Linux), so that a process that
/// escaped its adapter's process group can still be found and killed by [`reap_orphans`].
pub fn become_subreaper() {
    #[cfg(target_os = "linux")]
    {
        let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    }
}

/// The pids of the harness's own children (Linux); empty elsewhere.
fn children() -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return out };
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(text.split_whitespace().filter_map(|p| p.parse::<i32>().ok()));
        }
    }
    out
}

/// Whether `pid` has exited and only waits to be reaped.
fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')))
}

/// Kills and reaps every child the harness still has: at the end of a run, when every adapter has
/// been stopped and reaped, those are descendants that escaped their process group and were
/// re-parented here (and the exited members of killed groups, which are only reaped). Returns how
/// many were still running.
pub fn reap_orphans() -> usize {
    let mut running = 0;
    for pid in children() {
        let Some(p) = rustix::process::Pid::from_raw(pid) else { continue };
        if !is_zombie(pid) {
            running += 1;
            let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
        }
        let _ = rustix::process::waitpid(Some(p), rustix::process::WaitOptions::empty());
    }
    running
}
