//! What the host source opens, and what it reports when it cannot: nothing but a regular file
//! on a real filesystem is read (a link onto /proc never brings the process environment into a
//! prompt, a device or a FIFO is never opened), a folder that cannot be listed is reported, never
//! silently absent, and a module deeper than PATH_MAX is found and loaded. Each test runs on
//! both resolvers: `openat2` and the forced fallback walk.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use reference::{
    instruction_file, modules, Code, Config, Confinement, HostSource, ReadOutcome, RelPath, Session, Source,
};

const BOTH: [Confinement; 2] = [Confinement::Kernel, Confinement::Fallback];

fn source(root: &Path, confinement: Confinement) -> Source {
    Source::Host(HostSource::with_confinement(root, confinement).unwrap())
}

fn rp(s: &str) -> RelPath {
    RelPath::parse(s).unwrap()
}

fn codes(diags: &[reference::Diagnostic]) -> Vec<(Code, String)> {
    diags.iter().map(|d| (d.code, d.path.clone())).collect()
}

/// A few bytes of this process's environment that a leak would carry.
fn environment_marker() -> String {
    let (k, v) = std::env::vars().find(|(k, v)| !k.is_empty() && v.len() > 3).expect("the test has an environment");
    format!("{k}={v}")
}

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

#[test]
fn a_root_agents_md_linked_to_proc_self_environ_is_refused_and_the_environment_never_reaches_a_prompt() {
    let marker = environment_marker();
    for confinement in BOTH {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        fs::create_dir_all(&root).unwrap();
        symlink("/proc/self/environ", root.join("AGENTS.md")).unwrap();
        // The modules profile: the root file follows links wherever they point (D-LINK-5).
        let state = tempfile::tempdir().unwrap();
        let (_session, startup) = Session::start(Config::modules(), source(&root, confinement), state.path()).unwrap();
        assert!(startup.files.is_empty(), "{confinement:?}: {:?}", startup.files);
        assert_eq!(codes(&startup.diagnostics), vec![(Code::FileNotRegular, "AGENTS.md".to_string())]);
        assert!(!format!("{startup:?}").contains(&marker), "{confinement:?}: the environment leaked");
        // The root-file profile: the link leaves the root, so it is an escape before anything.
        let rf = reference::rootfile::root_file(&source(&root, confinement), &Config::root_file());
        assert_eq!(rf.file, None);
        assert_eq!(codes(&rf.diagnostics), vec![(Code::InstructionModuleEscape, "AGENTS.md".to_string())]);
        assert!(!format!("{rf:?}").contains(&marker));
    }
}

#[test]
fn files_on_proc_are_refused_even_inside_the_root() {
    let marker = environment_marker();
    for confinement in BOTH {
        let s = source(Path::new("/proc/self"), confinement);
        for confined in [true, false] {
            let got = s.read(&rp("environ"), confined, 1 << 20);
            assert!(matches!(got, ReadOutcome::Refused(Code::FileNotRegular, _)), "{confinement:?}: {got:?}");
            assert!(!format!("{got:?}").contains(&marker));
        }
    }
}

#[test]
fn a_root_agents_md_linked_to_a_device_or_a_fifo_is_not_regular_and_never_blocks() {
    for confinement in BOTH {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        fs::create_dir_all(root.join("src")).unwrap();
        mkfifo(&dir.path().join("pipe"));
        symlink("/dev/zero", root.join("AGENTS.md")).unwrap();
        symlink(dir.path().join("pipe"), root.join("src/AGENTS.md")).unwrap();
        mkfifo(&root.join("CLAUDE.md"));
        let s = source(&root, confinement);
        let got = s.read(&rp("AGENTS.md"), false, 1 << 20);
        assert!(matches!(got, ReadOutcome::Refused(Code::FileNotRegular, _)), "{got:?}");
        let got = finishes(Duration::from_secs(20), move || s.read(&rp("CLAUDE.md"), true, 1 << 20));
        assert!(matches!(got, ReadOutcome::Refused(Code::FileNotRegular, _)), "{got:?}");
        // A nested file linked to a FIFO outside is an escape; it is never opened.
        let s = source(&root, confinement);
        let mut diags = Vec::new();
        let nested = finishes(Duration::from_secs(20), move || {
            let loaded = instruction_file(&s, &Config::modules(), Some(&rp("src")), &mut diags);
            (loaded, diags)
        });
        assert_eq!(nested.0, None);
        assert_eq!(codes(&nested.1), vec![(Code::InstructionModuleEscape, "src/AGENTS.md".to_string())]);
    }
}

/// Runs `f` with the calling thread's DAC-override capabilities dropped, so that permission
/// bits hold for it as for any user, also when the tests run as root (CI does). Capabilities are
/// per thread on Linux; they are restored before returning.
fn without_dac_override<T>(f: impl FnOnce() -> T) -> T {
    use rustix::thread::{capabilities, set_capabilities, CapabilitySet};
    let saved = capabilities(None).unwrap();
    let mut reduced = saved;
    reduced.effective.remove(CapabilitySet::DAC_OVERRIDE | CapabilitySet::DAC_READ_SEARCH);
    set_capabilities(None, reduced).unwrap();
    let out = f();
    set_capabilities(None, saved).unwrap();
    out
}

fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn an_unreadable_rules_folder_is_reported_not_silently_absent() {
    for confinement in BOTH {
        let dir = tempfile::tempdir().unwrap();
        let rules = dir.path().join(".elowen/rules");
        fs::create_dir_all(rules.join("locked")).unwrap();
        fs::write(rules.join("ok.md"), "ok\n").unwrap();
        fs::write(rules.join("locked/hidden.md"), "hidden\n").unwrap();
        chmod(&rules.join("locked"), 0o000);
        let s = source(dir.path(), confinement);
        let found = without_dac_override(|| modules(&s, &Config::modules()));
        chmod(&rules.join("locked"), 0o755);
        assert_eq!(found.unconditional.iter().map(|m| m.path.as_str()).collect::<Vec<_>>(), [".elowen/rules/ok.md"]);
        assert_eq!(codes(&found.diagnostics), vec![(Code::FileUnreadable, ".elowen/rules/locked".to_string())]);
    }
}

#[test]
fn an_unreadable_rules_directory_or_elowen_folder_is_reported() {
    for confinement in BOTH {
        for locked in [".elowen/rules", ".elowen"] {
            let dir = tempfile::tempdir().unwrap();
            let rules = dir.path().join(".elowen/rules");
            fs::create_dir_all(&rules).unwrap();
            fs::write(rules.join("a.md"), "a\n").unwrap();
            chmod(&dir.path().join(locked), 0o000);
            let s = source(dir.path(), confinement);
            let found = without_dac_override(|| modules(&s, &Config::modules()));
            chmod(&dir.path().join(locked), 0o755);
            assert!(found.unconditional.is_empty());
            assert_eq!(
                codes(&found.diagnostics),
                vec![(Code::FileUnreadable, ".elowen/rules".to_string())],
                "{confinement:?} {locked}"
            );
        }
    }
}

#[test]
fn a_nested_folder_that_cannot_be_searched_is_reported() {
    for confinement in BOTH {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("src")).unwrap();
        fs::write(dir.path().join("src/AGENTS.md"), "nested\n").unwrap();
        chmod(&dir.path().join("src"), 0o600);
        let s = source(dir.path(), confinement);
        let mut diags = Vec::new();
        let got = without_dac_override(|| instruction_file(&s, &Config::modules(), Some(&rp("src")), &mut diags));
        chmod(&dir.path().join("src"), 0o755);
        assert_eq!(got, None);
        assert_eq!(codes(&diags), vec![(Code::FileUnreadable, "src".to_string())]);
    }
}

/// Builds `levels` folders of 200-byte names below `base` through directory handles (a path
/// this long cannot be passed to the kernel whole), and writes `name` with `text` at the bottom.
fn deep_tree(base: &Path, levels: usize, name: &str, text: &str) -> String {
    use rustix::fs::{mkdirat, openat, Mode, OFlags};
    let segment = "d".repeat(200);
    let mut fd = openat(rustix::fs::CWD, base, OFlags::DIRECTORY | OFlags::RDONLY, Mode::empty()).unwrap();
    let mut rel = Vec::new();
    for _ in 0..levels {
        mkdirat(&fd, segment.as_str(), Mode::from_raw_mode(0o755)).unwrap();
        fd = openat(&fd, segment.as_str(), OFlags::DIRECTORY | OFlags::RDONLY, Mode::empty()).unwrap();
        rel.push(segment.clone());
    }
    let file = openat(&fd, name, OFlags::CREATE | OFlags::WRONLY, Mode::from_raw_mode(0o644)).unwrap();
    std::io::Write::write_all(&mut fs::File::from(file), text.as_bytes()).unwrap();
    rel.join("/")
}

#[test]
fn a_module_and_a_nested_file_deeper_than_path_max_are_loaded() {
    for confinement in BOTH {
        let dir = tempfile::tempdir().unwrap();
        let rules = dir.path().join(".elowen/rules");
        fs::create_dir_all(&rules).unwrap();
        let deep = deep_tree(&rules, 24, "deep.md", "deep rule\n");
        let module = format!(".elowen/rules/{deep}/deep.md");
        assert!(module.len() > 4096);
        let s = source(dir.path(), confinement);
        let found = modules(&s, &Config::modules());
        assert!(found.diagnostics.is_empty(), "{confinement:?}: {:?}", found.diagnostics);
        assert_eq!(found.unconditional.iter().map(|m| m.path.as_str()).collect::<Vec<_>>(), [module.as_str()]);
        assert_eq!(&*found.unconditional[0].content, "deep rule\n");

        let folder = deep_tree(dir.path(), 24, "AGENTS.md", "deep nested\n");
        let mut diags = Vec::new();
        let nested = instruction_file(&s, &Config::modules(), Some(&rp(&folder)), &mut diags).unwrap();
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(&*nested.content, "deep nested\n");
    }
}
