//! Pointer files and the journal, read as instruction files are: placement reads `.git`,
//! `commondir` and the journal only as regular files, never more than their cap and one byte (a
//! FIFO there never hangs placement, `/dev/zero` never fills memory), a journal that is a symlink
//! is refused rather than followed, and a resume streams the journal one bounded line at a time.
//! A pointer file or a state directory reached through a procfs magic link is never followed
//! (D-CAP-4 extended).

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use reference::{place_root, Config, HostSource, Journal, JournalError, Placement, Session, Source};

/// Runs `f` on a thread and waits at most `limit` for it: a hang fails the test instead of
/// hanging the suite. The limit bounds a hang, not how fast the code is.
fn finishes<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).expect("the call did not return (it blocked)")
}

fn mkfifo(path: &Path) {
    rustix::fs::mknodat(rustix::fs::CWD, path, rustix::fs::FileType::Fifo, rustix::fs::Mode::from_raw_mode(0o644), 0)
        .unwrap();
}

fn worktree(dir: &Path) -> (PathBuf, PathBuf) {
    let project = dir.join("project");
    let admin = project.join(".git/worktrees/wt");
    fs::create_dir_all(&admin).unwrap();
    let wt = dir.join("wt");
    fs::create_dir_all(&wt).unwrap();
    fs::write(wt.join(".git"), format!("gitdir: {}\n", admin.display())).unwrap();
    (project, wt)
}

#[test]
fn a_fifo_as_git_or_as_commondir_does_not_hang_placement() {
    let dir = tempfile::tempdir().unwrap();
    // A `.git` that is a FIFO: not a `.git` file, so no linked worktree.
    let repo = dir.path().join("repo");
    fs::create_dir_all(repo.join("src")).unwrap();
    mkfifo(&repo.join(".git"));
    let p = Placement { cwd: repo.join("src"), projects: vec![repo.clone()], bound: None, policies: vec![] };
    let got = finishes(Duration::from_secs(20), move || place_root(&p));
    assert_eq!(got, Some(fs::canonicalize(&repo).unwrap()));
    // A `commondir` that is a FIFO: unreadable, so the `.git` file is no linked worktree's.
    let (project, wt) = worktree(dir.path());
    mkfifo(&project.join(".git/worktrees/wt/commondir"));
    let p = Placement { cwd: wt.clone(), projects: vec![project.clone()], bound: None, policies: vec![] };
    assert_eq!(finishes(Duration::from_secs(20), move || place_root(&p)), None);
}

#[test]
fn a_commondir_linked_to_dev_zero_is_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let (project, wt) = worktree(dir.path());
    symlink("/dev/zero", project.join(".git/worktrees/wt/commondir")).unwrap();
    let p = Placement { cwd: wt, projects: vec![project], bound: None, policies: vec![] };
    assert_eq!(finishes(Duration::from_secs(20), move || place_root(&p)), None);
    // And one of gigabytes is refused by its size, unread.
    let dir = tempfile::tempdir().unwrap();
    let (project, wt) = worktree(dir.path());
    fs::File::create(project.join(".git/worktrees/wt/commondir")).unwrap().set_len(4 << 30).unwrap();
    let p = Placement { cwd: wt, projects: vec![project], bound: None, policies: vec![] };
    assert_eq!(place_root(&p), None);
}

#[test]
fn a_linked_worktree_still_places_its_own_root() {
    let dir = tempfile::tempdir().unwrap();
    let (project, wt) = worktree(dir.path());
    fs::write(project.join(".git/worktrees/wt/commondir"), "../..\n").unwrap();
    let p = Placement { cwd: wt.clone(), projects: vec![project], bound: None, policies: vec![] };
    assert_eq!(place_root(&p), Some(fs::canonicalize(&wt).unwrap()));
}

#[test]
fn a_journal_that_is_a_symlink_is_refused_and_its_target_is_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let precious = dir.path().join("precious.txt");
    let text = "{\"type\":\"compaction\"}\nnot a record and no newline";
    fs::write(&precious, text).unwrap();
    let state = dir.path().join("state");
    fs::create_dir_all(&state).unwrap();
    symlink(&precious, state.join(reference::JOURNAL_FILE)).unwrap();
    assert!(matches!(Journal::open(&state), Err(JournalError::Io(_))));
    assert!(matches!(Journal::create(&state), Err(JournalError::Io(_))));
    assert_eq!(fs::read_to_string(&precious).unwrap(), text);
    // A session cannot start on it either, and the target stays as it was.
    let root = dir.path().join("repo");
    fs::create_dir_all(&root).unwrap();
    assert!(Session::start(Config::modules(), Source::Host(HostSource::new(&root).unwrap()), &state).is_err());
    assert_eq!(fs::read_to_string(&precious).unwrap(), text);
}

#[test]
fn a_fifo_journal_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    mkfifo(&dir.path().join(reference::JOURNAL_FILE));
    let state = dir.path().to_path_buf();
    let got = finishes(Duration::from_secs(20), move || Journal::open(&state).map(|j| j.len()));
    assert!(matches!(got, Err(JournalError::Io(_))), "{got:?}");
}

fn journal_with_a_huge_line(dir: &Path, then: &str) -> PathBuf {
    let path = dir.join(reference::JOURNAL_FILE);
    fs::write(&path, "{\"type\":\"compaction\"}\n").unwrap();
    let f = fs::OpenOptions::new().append(true).open(&path).unwrap();
    // A sparse hole of 80 MiB reads as NUL bytes with no newline: one line above the limit.
    let len = f.metadata().unwrap().len();
    f.set_len(len + (80 << 20)).unwrap();
    drop(f);
    let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
    std::io::Write::write_all(&mut f, then.as_bytes()).unwrap();
    path
}

#[test]
fn an_oversize_torn_last_line_is_cut_as_a_torn_line_is() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_with_a_huge_line(dir.path(), "");
    let j = Journal::open(dir.path()).unwrap();
    assert_eq!(j.len(), 1);
    assert_eq!(fs::read_to_string(&path).unwrap(), "{\"type\":\"compaction\"}\n");
}

#[test]
fn an_oversize_line_before_the_last_is_a_corrupt_journal() {
    let dir = tempfile::tempdir().unwrap();
    journal_with_a_huge_line(dir.path(), "\n{\"type\":\"compaction\"}\n");
    assert!(matches!(Journal::open(dir.path()), Err(JournalError::Corrupt { line: 2, .. })));
}

#[test]
fn placement_writes_nothing_where_a_pointer_file_is_missing() {
    // A worktree whose administrative directory has no `commondir`: placement reads, and a read
    // of a missing pointer file is a missing file, never one it creates.
    let dir = tempfile::tempdir().unwrap();
    let (project, wt) = worktree(dir.path());
    let admin = project.join(".git/worktrees/wt");
    let p = Placement { cwd: wt.clone(), projects: vec![project.clone()], bound: None, policies: vec![] };
    assert_eq!(place_root(&p), None);
    assert!(!admin.join("commondir").exists(), "placement created the missing commondir");
    assert_eq!(fs::read_dir(&admin).unwrap().count(), 0, "placement wrote into the administrative directory");
}

#[test]
fn a_commondir_linked_through_a_proc_magic_link_is_not_followed() {
    use std::os::fd::AsRawFd;
    // The file the magic link names holds the commondir a linked worktree needs: followed, it
    // would place the worktree's root from a file no path in the tree leads to.
    let dir = tempfile::tempdir().unwrap();
    let (project, wt) = worktree(dir.path());
    let pointer = dir.path().join("held-commondir");
    fs::write(&pointer, "../..\n").unwrap();
    let held = fs::File::open(&pointer).unwrap();
    symlink(format!("/proc/self/fd/{}", held.as_raw_fd()), project.join(".git/worktrees/wt/commondir")).unwrap();
    let p = Placement { cwd: wt, projects: vec![project], bound: None, policies: vec![] };
    assert_eq!(place_root(&p), None);
    drop(held);
}

#[test]
fn a_state_directory_reached_through_a_proc_magic_link_is_refused_and_nothing_is_written() {
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("held-state");
    fs::create_dir_all(&target).unwrap();
    let held = fs::File::open(&target).unwrap();
    let through = PathBuf::from(format!("/proc/self/fd/{}", held.as_raw_fd()));
    let err = Journal::create(&through).expect_err("a journal through /proc/self/fd was created");
    assert!(err.to_string().contains(&*through.to_string_lossy()), "the error names no file: {err}");
    assert!(Journal::open(&through).is_err());
    assert_eq!(fs::read_dir(&target).unwrap().count(), 0, "a journal was written through the magic link");
    drop(held);
}

fn compaction() -> reference::Record {
    reference::Record::Compaction
}

#[test]
fn a_state_directory_whose_parent_is_missing_is_an_error_and_nothing_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("gone");
    let state = missing.join("state");
    let err = Journal::create(&state).expect_err("a journal was created below a missing parent");
    assert!(matches!(&err, JournalError::Io(e) if e.kind() == std::io::ErrorKind::NotFound), "{err}");
    assert!(err.to_string().contains(&*state.to_string_lossy()), "the error names no file: {err}");
    assert!(Journal::open(&state).is_err());
    let root = dir.path().join("repo");
    fs::create_dir_all(&root).unwrap();
    assert!(Session::start(Config::modules(), Source::Host(HostSource::new(&root).unwrap()), &state).is_err());
    // A fork into a missing parent creates nothing either.
    let journal = Journal::create(&dir.path().join("state")).unwrap();
    assert!(journal.fork_into(&state).is_err());
    assert!(!missing.exists(), "a missing parent of the state directory was created");
}

#[test]
fn a_state_directory_that_is_a_symlink_is_refused_and_its_target_is_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = dir.path().join("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    let state = dir.path().join("state");
    symlink(&elsewhere, &state).unwrap();
    assert!(matches!(Journal::create(&state), Err(JournalError::Io(_))));
    assert!(matches!(Journal::open(&state), Err(JournalError::Io(_))));
    let journal = Journal::create(&dir.path().join("real-state")).unwrap();
    assert!(journal.fork_into(&state).is_err());
    let root = dir.path().join("repo");
    fs::create_dir_all(&root).unwrap();
    assert!(Session::start(Config::modules(), Source::Host(HostSource::new(&root).unwrap()), &state).is_err());
    assert!(reference::StateDir::open_or_create(&state).is_err());
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0, "a state file was written through the link");
    // A dangling link is refused too, and nothing is created at its target.
    let dangling = dir.path().join("state-dangling");
    symlink(dir.path().join("nowhere"), &dangling).unwrap();
    assert!(Journal::create(&dangling).is_err());
    assert!(!dir.path().join("nowhere").exists());
}

#[test]
fn after_the_state_directory_is_removed_mid_session_an_append_fails_and_nothing_reappears() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let mut journal = Journal::create(&state).unwrap();
    journal.append(compaction()).unwrap();
    // The host removes the directory (a harness abandoning a timed-out case).
    fs::remove_dir_all(&state).unwrap();
    assert!(journal.append(compaction()).is_err(), "an append into a removed state directory succeeded");
    assert!(!state.exists(), "the removed state directory reappeared");
    // Someone else's directory, or a link to it, now stands at the name: the journal is never
    // written there, it was the removed directory's.
    let elsewhere = dir.path().join("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    symlink(&elsewhere, &state).unwrap();
    assert!(journal.append(compaction()).is_err(), "an append went through the link at the state directory's name");
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0, "the journal was written into the new directory");
    assert_eq!(journal.len(), 1, "a failed append counted");
}

#[test]
fn a_state_file_is_replaced_atomically_through_the_handle_and_never_written_through_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let state_path = dir.path().join("state");
    let state = reference::StateDir::open_or_create(&state_path).unwrap();
    let precious = dir.path().join("precious.txt");
    fs::write(&precious, "precious").unwrap();
    // A stale temporary name that is a link, and a link at the name itself: both are replaced,
    // neither is followed.
    symlink(&precious, state_path.join("root-file.json.tmp")).unwrap();
    symlink(&precious, state_path.join("root-file.json")).unwrap();
    assert!(state.read_bounded("root-file.json", 1 << 20).is_err(), "a state file that is a link was read");
    state.replace_atomically("root-file.json", b"{\"v\":1}").unwrap();
    assert_eq!(fs::read_to_string(&precious).unwrap(), "precious");
    assert_eq!(state.read_bounded("root-file.json", 1 << 20).unwrap(), b"{\"v\":1}");
    state.replace_atomically("root-file.json", b"{\"v\":2}").unwrap();
    assert_eq!(state.read_bounded("root-file.json", 1 << 20).unwrap(), b"{\"v\":2}");
    assert!(!state_path.join("root-file.json.tmp").exists(), "the temporary name was left behind");
    assert!(!fs::symlink_metadata(state_path.join("root-file.json")).unwrap().file_type().is_symlink());
    // Bounded: one byte over is refused; a missing file is NotFound; a name with a slash is no
    // state file.
    let err = state.read_bounded("root-file.json", 6).expect_err("a file above the cap was read");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData, "{err}");
    assert!(err.to_string().contains("root-file.json"), "{err}");
    assert_eq!(state.read_bounded("absent.json", 10).unwrap_err().kind(), std::io::ErrorKind::NotFound);
    assert!(state.replace_atomically("../escape.json", b"x").is_err());
    assert!(!dir.path().join("escape.json").exists());
    // After the directory is removed, a replace creates nothing anywhere.
    fs::remove_dir_all(&state_path).unwrap();
    assert!(state.replace_atomically("root-file.json", b"{}").is_err());
    assert!(!state_path.exists(), "the removed state directory reappeared");
}

#[test]
fn a_fifo_state_file_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let state = reference::StateDir::open_or_create(dir.path()).unwrap();
    mkfifo(&dir.path().join("root-file.json"));
    let got = finishes(Duration::from_secs(20), move || state.read_bounded("root-file.json", 1 << 20).map(|b| b.len()));
    assert!(got.is_err(), "{got:?}");
}
