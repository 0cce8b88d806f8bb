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
    let caps: Vec<String> = harness::vocabulary::capabilities().keys().map(|c| format!("\"{c}\"")).collect();
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
