//! The harness under attack from the cases it runs and the adapters it starts: nothing outside
//! its sandbox is created, changed, moved or deleted whatever a case's links point to; hostile
//! sizes and linked case files are refused at load; adapters' stray processes, floods and fake
//! HOME leave nothing behind; SIGTERM cleans up.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A temporary world: `cases/` for case files, `outside/` with a secret that must stay as it is,
/// and `tmp/`, the harness's TMPDIR, which must be empty again after every run.
struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for d in ["cases", "outside", "tmp"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("outside/secret"), "CANARY-OUTSIDE").unwrap();
        World { _dir: dir, root }
    }

    fn outside(&self) -> PathBuf {
        self.root.join("outside")
    }

    fn case(&self, name: &str, body: &str) {
        let text = format!(
            "id: {name}\ntitle: t\nspec: [{{decision: D-X}}]\nprofile: modules\nplatform: posix\nrules: [hostile]\n{}",
            body.replace("OUT", &self.outside().display().to_string())
        );
        std::fs::write(self.root.join("cases").join(format!("{name}.yaml")), text).unwrap();
    }

    fn conformance(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_conformance"));
        cmd.args(args).env("TMPDIR", self.root.join("tmp"));
        cmd
    }

    fn run(&self, args: &[&str]) -> (i32, String) {
        let out = self.conformance(args).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        (out.status.code().unwrap_or(-1), text)
    }

    fn assert_outside_untouched(&self) {
        let names: Vec<String> = std::fs::read_dir(self.outside())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into())
            .collect();
        assert_eq!(names, vec!["secret".to_string()], "something was made or removed outside the sandbox");
        assert_eq!(std::fs::read_to_string(self.outside().join("secret")).unwrap(), "CANARY-OUTSIDE");
    }

    fn assert_tmp_empty(&self) {
        let left: Vec<_> = std::fs::read_dir(self.root.join("tmp")).unwrap().map(|e| e.unwrap().path()).collect();
        assert!(left.is_empty(), "left behind in TMPDIR: {left:?}");
    }
}

#[test]
fn steps_through_a_link_are_refused_and_touch_nothing_outside() {
    let w = World::new();
    let tree = "tree:\n  AGENTS.md: \"# r\\n\"\n  lnk: {symlink: \"OUT\"}\n";
    w.case("t-write", &format!("{tree}steps:\n  - start:\n  - write: {{path: lnk/x, text: \"x\"}}\n"));
    w.case("t-delete", &format!("{tree}steps:\n  - start:\n  - delete: lnk/secret\n"));
    w.case("t-rename", &format!("{tree}steps:\n  - start:\n  - rename: {{from: lnk/secret, to: src/AGENTS.md}}\n"));
    w.case(
        "t-link-itself",
        &format!("{tree}steps:\n  - start:\n  - delete: lnk\n  - write: {{path: lnk, text: \"x\"}}\n"),
    );
    let cases = w.root.join("cases");
    let (code, text) = w.run(&["run", "--cases", cases.to_str().unwrap()]);
    assert_eq!(code, 1, "{text}");
    for (id, what) in [("t-write", "step 1 (write)"), ("t-delete", "step 1 (delete)"), ("t-rename", "step 1 (rename)")]
    {
        let line = text.lines().position(|l| l.contains(&format!("[{id}]"))).unwrap_or_else(|| panic!("{id}: {text}"));
        let detail = text.lines().nth(line + 1).unwrap_or_default();
        assert!(text.lines().nth(line).unwrap().starts_with("ERROR"), "{id}: {text}");
        assert!(detail.contains(what) && detail.contains("link"), "{id}: {detail}");
    }
    assert!(!text.contains("[t-link-itself]"), "a step naming the link itself acts on the link: {text}");
    assert!(!text.contains("CANARY-OUTSIDE"), "{text}");
    w.assert_outside_untouched();
    w.assert_tmp_empty();
}

#[test]
fn hostile_sizes_and_linked_case_files_are_refused_at_load() {
    let w = World::new();
    w.case("t-below", "tree:\n  lnk: {symlink: \"OUT\"}\n  lnk/y: \"y\"\nsteps:\n  - start:\n");
    let (code, text) = w.run(&["list", "--cases", w.root.join("cases").to_str().unwrap()]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("'lnk/y' lies below the link 'lnk'"), "{text}");

    let w = World::new();
    w.case("t-file-and-folder", "tree:\n  a: \"a file\"\n  a/b/c.md: \"c\"\nsteps:\n  - start:\n");
    let (code, text) = w.run(&["list", "--cases", w.root.join("cases").to_str().unwrap()]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("'a/b/c.md' lies below the file 'a'"), "{text}");

    let w = World::new();
    w.case("t-huge", "tree:\n  big: {size: 1000000000000}\nsteps:\n  - start:\n");
    let (code, text) = w.run(&["list", "--cases", w.root.join("cases").to_str().unwrap()]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("t-huge.yaml") && text.contains("cap of a dense file"), "{text}");

    let w = World::new();
    std::fs::write(w.outside().join("elsewhere.yaml"), "SECRET-KEY: CANARY-LINKED\n").unwrap();
    std::os::unix::fs::symlink(w.outside().join("elsewhere.yaml"), w.root.join("cases/linked.yaml")).unwrap();
    let (code, text) = w.run(&["list", "--cases", w.root.join("cases").to_str().unwrap()]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("linked.yaml") && text.contains("symbolic link"), "{text}");
    assert!(!text.contains("CANARY-LINKED") && !text.contains("SECRET-KEY"), "{text}");
}

/// An adapter (a shell script) that answers hello for every capability, then runs `after`.
fn adapter(w: &World, after: &str) -> String {
    let caps: Vec<String> = harness::case::vocabulary::capabilities().keys().map(|c| format!("\"{c}\"")).collect();
    let hello = format!(
        r#"{{"seq":1,"ok":true,"hello":{{"name":"x","version":"0","language":"sh","profiles":["modules"],"capabilities":[{}]}}}}"#,
        caps.join(",")
    );
    let script = w.root.join("adapter.sh");
    std::fs::write(&script, format!("read l\necho '{hello}'\n{after}\n")).unwrap();
    format!("sh {}", script.display())
}

fn alive(pid: i32) -> bool {
    // A zombie is dead for this purpose: it runs nothing.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')))
}

fn pids_in(path: &Path) -> Vec<i32> {
    std::fs::read_to_string(path).unwrap_or_default().split_whitespace().filter_map(|p| p.parse().ok()).collect()
}

#[test]
fn stray_processes_and_the_fake_home_do_not_outlive_the_run() {
    let w = World::new();
    let pids = w.root.join("pids");
    // One child ignores SIGTERM in the adapter's group; one leaves the group with setsid.
    let after = format!(
        "sh -c 'trap \"\" TERM; echo $$ >> {p}; exec sleep 60' &\nsetsid sh -c 'echo $$ >> {p}; exec sleep 60' &\n\
         sleep 0.2\nwhile read l; do echo '{{\"seq\":0,\"ok\":false,\"error\":\"no\"}}'; done",
        p = pids.display()
    );
    let cmd = adapter(&w, &after);
    let (code, text) = w.run(&["run", "--filter", "m-fm-001", "--timeout", "2", "--adapter", &cmd]);
    assert_ne!(code, 0, "{text}");
    let started = pids_in(&pids);
    assert_eq!(started.len(), 2, "{text}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while started.iter().any(|p| alive(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    for p in started {
        assert!(!alive(p), "process {p} outlived the run");
    }
    w.assert_tmp_empty();
}

#[test]
fn a_flood_of_lines_is_a_crash_in_bounded_memory() {
    let w = World::new();
    let cmd = adapter(&w, "read l\nwhile :; do echo '{\"seq\":2,\"ok\":true,\"observation\":{}}'; done");
    let mut child = w
        .conformance(&["run", "--filter", "m-fm-001", "--timeout", "3", "--adapter", &cmd])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut peak_kib = 0u64;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
        if let Some(kib) = status.lines().find_map(|l| l.strip_prefix("VmRSS:")) {
            peak_kib = peak_kib.max(kib.trim().trim_end_matches("kB").trim().parse().unwrap_or(0));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("CRASH"), "{err}");
    assert!(peak_kib < 200 * 1024, "the harness grew to {peak_kib} KiB under a flood of lines");
    w.assert_tmp_empty();
}

#[test]
fn sigterm_removes_sandboxes_and_kills_the_adapter() {
    let w = World::new();
    let pids = w.root.join("pids");
    // The pid is written once the case is open, so its sandbox exists by then.
    let cmd = adapter(&w, &format!("read l\necho $$ >> {}\nsleep 60", pids.display()));
    let mut child = w
        .conformance(&["run", "--filter", "m-fm-001", "--timeout", "60", "--adapter", &cmd])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the case's sandbox exists and the adapter has said hello.
    let deadline = Instant::now() + Duration::from_secs(20);
    while pids_in(&pids).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 15));
    let adapter_pid = pids_in(&pids)[0];
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(adapter_pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!alive(adapter_pid), "the adapter outlived SIGTERM");
    w.assert_tmp_empty();
}

/// A case file of another profile than `World::case` writes.
fn case_of(w: &World, name: &str, profile: &str, body: &str) {
    let text = format!(
        "id: {name}\ntitle: t\nspec: [{{decision: D-X}}]\nprofile: {profile}\nplatform: posix\nrules: [hostile]\n{}",
        body.replace("OUT", &w.outside().display().to_string())
    );
    std::fs::write(w.root.join("cases").join(format!("{name}.yaml")), text).unwrap();
}

#[test]
fn a_case_tree_cannot_stand_where_the_harness_and_the_implementation_write_their_state() {
    // Before issue 21 the state directories lay beside the project, where a tree entry `../state`
    // could place a link: the root-file state's save then wrote through it, out of the sandbox
    // (and over any file, through a link at its temporary file's name).
    let w = World::new();
    std::fs::create_dir_all(w.outside().join("state-target")).unwrap();
    let out_dir = w.outside().join("state-target");
    let tree = |extra: &str| format!("tree:\n  AGENTS.md: \"# r\\n\"\n{extra}");
    case_of(
        &w,
        "t-state-link",
        "root-file",
        &format!(
            "capabilities: [restart]\n{}steps:\n  - start:\n  - restart:\n",
            tree(&format!("  ../state: {{symlink: \"{}\"}}\n", out_dir.display()))
        ),
    );
    case_of(
        &w,
        "t-state-tmp-link",
        "root-file",
        &format!("{}steps:\n  - start:\n", tree("  ../state/root-file.json.tmp: {symlink: \"OUT/secret\"}\n")),
    );
    case_of(
        &w,
        "t-journal-link",
        "modules",
        &format!("{}steps:\n  - start:\n", tree("  ../state/journal.jsonl: {symlink: \"OUT/secret\"}\n")),
    );
    case_of(
        &w,
        "t-fork-link",
        "modules",
        &format!(
            "capabilities: [fork]\n{}steps:\n  - start:\n  - fork:\n",
            tree(&format!("  ../state-fork-1: {{symlink: \"{}\"}}\n", out_dir.display()))
        ),
    );
    let cases = w.root.join("cases");
    let (_, text) = w.run(&["run", "--cases", cases.to_str().unwrap()]);
    for id in ["t-state-link", "t-state-tmp-link", "t-journal-link", "t-fork-link"] {
        let line = text.lines().find(|l| l.contains(&format!("[{id}]")));
        assert!(line.is_none_or(|l| l.starts_with("FAIL")), "{id} did not run: {text}");
    }
    assert!(!text.contains("CANARY-OUTSIDE"), "{text}");
    let made: Vec<_> = std::fs::read_dir(&out_dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(made.is_empty(), "state was written through a link the case placed: {made:?}");
    std::fs::remove_dir(&out_dir).unwrap();
    w.assert_outside_untouched();
    w.assert_tmp_empty();
}

/// How many entries stand below `dir`.
fn entries_below(dir: &Path) -> usize {
    let Ok(read) = std::fs::read_dir(dir) else { return 0 };
    read.flatten().map(|e| 1 + if e.path().is_dir() { entries_below(&e.path()) } else { 0 }).sum()
}

#[rstest::rstest]
fn a_signal_at_any_phase_of_a_run_leaves_nothing_behind(
    #[values(rustix::process::Signal::INT, rustix::process::Signal::TERM, rustix::process::Signal::HUP)]
    signal: rustix::process::Signal,
    #[values(1, 40, 1500)] entries_first: usize,
) {
    // A tree of 2,000 folders that takes a while to build: the signal falls before its sandbox
    // exists (1: as soon as its sandbox exists), while it is being built (40 entries made), or
    // while its steps run (1,500). Before issue 21 the folders the build went on making while
    // the cleanup removed the sandbox kept it in place.
    let w = World::new();
    let files: String = (0..2000).map(|i| format!("  .elowen/rules/d{i}/m.md: {{size: 20000}}\n")).collect();
    w.case(
        "t-big",
        &format!(
            "capabilities: [rule_modules]\ntree:\n  AGENTS.md: \"# r\\n\"\n{files}steps:\n  - start:\n  - touch: {{path: src/a.ts}}\n  - next_request:\n"
        ),
    );
    let cases = w.root.join("cases");
    let mut child = w
        .conformance(&["run", "--cases", cases.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while entries_below(&w.root.join("tmp")) < entries_first && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, signal).unwrap();
    let status = child.wait().unwrap();
    // The run may have ended by itself first, when the machine is quick: it left nothing then too.
    assert!(matches!(status.code(), Some(0..=2)) || status.code() == Some(128 + signal.as_raw()), "{status:?}");
    w.assert_tmp_empty();
}
