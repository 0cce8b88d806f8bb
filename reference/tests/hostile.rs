//! Hostile trees and inputs: each finishes with a clear diagnostic (or a clear answer), within
//! bounded memory, and without a panic. Memory is the process's peak resident size from
//! /proc/self/status, compared before and after; the bounds are generous so a noisy machine
//! cannot fail them, and far below what reading the inputs whole would cost.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use std::fs;
use std::path::Path;

use reference::{Code, Config, Confinement, HostSource, Session, Source, ToolResult};

/// Peak resident set size in KiB (Linux); 0 elsewhere, where the bound is not checked.
fn peak_kib() -> u64 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).map(str::to_string))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

fn start(root: &Path) -> (tempfile::TempDir, Session, reference::Startup) {
    let state = tempfile::tempdir().unwrap();
    let source = Source::Host(HostSource::new(root).unwrap());
    let (session, startup) = Session::start(Config::modules(), source, state.path()).unwrap();
    (state, session, startup)
}

fn codes(diags: &[reference::Diagnostic]) -> Vec<(Code, String)> {
    diags.iter().map(|d| (d.code, d.path.clone())).collect()
}

#[test]
fn symlink_loops_end_with_unreadable_diagnostics() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join(".elowen/rules");
    fs::create_dir_all(&rules).unwrap();
    std::os::unix::fs::symlink("b.md", rules.join("a.md")).unwrap();
    std::os::unix::fs::symlink("a.md", rules.join("b.md")).unwrap();
    std::os::unix::fs::symlink(".", rules.join("self")).unwrap();
    std::os::unix::fs::symlink("..", rules.join("up")).unwrap();
    let (_s, _session, startup) = start(dir.path());
    let got = codes(&startup.diagnostics);
    assert!(got.contains(&(Code::FileUnreadable, ".elowen/rules/a.md".into())), "{got:?}");
    assert!(got.contains(&(Code::FileUnreadable, ".elowen/rules/b.md".into())), "{got:?}");
    assert!(startup.files.is_empty());
}

#[test]
fn a_directory_of_100000_entries_is_walked_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join(".elowen/rules/big");
    fs::create_dir_all(&big).unwrap();
    for i in 0..100_000 {
        fs::write(big.join(format!("n{i}.txt")), "").unwrap();
    }
    fs::write(big.join("one.md"), "the only module\n").unwrap();
    let before = peak_kib();
    let (_s, _session, startup) = start(dir.path());
    let grown = peak_kib().saturating_sub(before);
    assert_eq!(startup.files.len(), 1);
    assert!(grown < 128 * 1024, "peak memory grew by {grown} KiB");
}

#[test]
fn a_sparse_8_gib_module_is_refused_without_being_read() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join(".elowen/rules");
    fs::create_dir_all(&rules).unwrap();
    fs::File::create(rules.join("huge.md")).unwrap().set_len(8 << 30).unwrap();
    let before = peak_kib();
    let (_s, _session, startup) = start(dir.path());
    let grown = peak_kib().saturating_sub(before);
    assert_eq!(codes(&startup.diagnostics), vec![(Code::ContextFileOversized, ".elowen/rules/huge.md".to_string())]);
    assert!(grown < 16 * 1024, "peak memory grew by {grown} KiB");
}

#[test]
fn alias_bomb_and_deep_nesting_in_frontmatter_are_invalid_yaml() {
    let mut bomb = String::from("---\na: &a [x, x, x, x, x, x, x, x, x]\n");
    for i in 0..9 {
        let prev = if i == 0 { "a".to_string() } else { format!("a{}", i - 1) };
        let refs = vec![format!("*{prev}"); 9].join(", ");
        bomb.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
    }
    bomb.push_str("paths: *a8\n---\nbody\n");
    let deep = format!("---\npaths: {}\"x\"{}\n---\nbody\n", "[".repeat(100_000), "]".repeat(100_000));
    let nested = {
        let mut s = String::from("---\npaths:\n");
        for level in 0..100 {
            s.push_str(&" ".repeat(2 * level + 2));
            s.push_str("-\n");
        }
        s.push_str("---\nbody\n");
        s
    };
    for (name, text) in [("bomb", bomb), ("deep", deep)] {
        let err = reference::frontmatter::parse(&text).expect_err(name);
        assert_eq!(err.code, Code::FrontmatterInvalidYaml, "{name}: {}", err.message);
    }
    // 100 levels are within the limit: parsed, and refused for what they are.
    let err = reference::frontmatter::parse(&nested).expect_err("nested");
    assert_ne!(err.code, Code::FrontmatterInvalidYaml, "{}", err.message);
}

#[test]
fn ten_thousand_touched_paths_in_one_batch_append_one_record() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join(".elowen/rules");
    fs::create_dir_all(&rules).unwrap();
    fs::write(rules.join("ts.md"), "---\npaths: [\"src/**/*.ts\"]\n---\nTS\n").unwrap();
    fs::create_dir_all(dir.path().join("src/a")).unwrap();
    fs::write(dir.path().join("src/a/AGENTS.md"), "A\n").unwrap();
    let (_s, mut session, _) = start(dir.path());
    for i in 0..10_000 {
        let folder = if i % 2 == 0 { "a" } else { "b" };
        session.observe(&ToolResult { tool: "read".into(), file_access: Some(format!("src/{folder}/f{i}.ts")) });
    }
    let out = session.next_request();
    let paths: Vec<String> = out.activation.expect("a record").modules.into_iter().map(|m| m.path).collect();
    assert_eq!(paths, vec!["src/a/AGENTS.md".to_string(), ".elowen/rules/ts.md".to_string()]);
}

/// What the outside canary file holds: it must never reach a startup file or a diagnostic.
#[cfg(target_os = "linux")]
const MAGIC_CANARY: &str = "CANARY-MAGIC-LINK-7d2c";

/// Link targets that reach `file` (absolute, real) only through procfs's magic links: the fd
/// `fd` the test holds open on it, and the process's cwd and root, in the `/proc/self`,
/// `/proc/thread-self` and `/proc/<pid>` forms.
#[cfg(target_os = "linux")]
fn magic_targets(file: &Path, fd: i32) -> Vec<String> {
    let cwd_depth = std::env::current_dir().unwrap().components().count();
    let below_slash = file.strip_prefix("/").unwrap().display().to_string();
    let pid = std::process::id();
    vec![
        format!("/proc/self/fd/{fd}"),
        format!("/proc/thread-self/fd/{fd}"),
        format!("/proc/{pid}/fd/{fd}"),
        // `..` from the cwd climbs to `/` (one more is `/` again), then down to the file.
        format!("/proc/self/cwd/{}{below_slash}", "../".repeat(cwd_depth)),
        format!("/proc/self/root/{below_slash}"),
    ]
}

#[cfg(target_os = "linux")]
fn start_with(root: &Path, confinement: Confinement) -> (tempfile::TempDir, Session, reference::Startup) {
    let state = tempfile::tempdir().unwrap();
    let source = Source::Host(HostSource::with_confinement(root, confinement).unwrap());
    let (session, startup) = Session::start(Config::modules(), source, state.path()).unwrap();
    (state, session, startup)
}

/// Fails when the canary reached any startup file or diagnostic message.
#[cfg(target_os = "linux")]
fn assert_no_canary(startup: &reference::Startup, what: &str) {
    for f in &startup.files {
        assert!(!f.content.contains(MAGIC_CANARY), "{what}: {} carries the canary", f.path);
    }
    for d in &startup.diagnostics {
        assert!(!d.message.contains(MAGIC_CANARY), "{what}: a diagnostic carries the canary: {}", d.message);
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_root_file_linked_through_a_proc_magic_link_is_refused_as_not_regular_on_both_resolvers() {
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(dir.path()).unwrap();
    let outside = base.join("outside.md");
    fs::write(&outside, format!("{MAGIC_CANARY}\n")).unwrap();
    // Held open for the whole test, so `/proc/self/fd/<n>` names it throughout.
    let held = fs::File::open(&outside).unwrap();
    let root = base.join("repo");
    fs::create_dir_all(&root).unwrap();
    let mut targets = magic_targets(&outside, held.as_raw_fd());
    // The test binary: a magic link to an executable above the cap, which must be refused as a
    // link through procfs, not weighed as a file.
    targets.push("/proc/self/exe".to_string());
    for confinement in [Confinement::Kernel, Confinement::Fallback] {
        for target in &targets {
            let link = root.join("AGENTS.md");
            let _ = fs::remove_file(&link);
            std::os::unix::fs::symlink(target, &link).unwrap();
            let what = format!("{confinement:?}, AGENTS.md -> {target}");
            let (_s, _session, startup) = start_with(&root, confinement);
            assert_no_canary(&startup, &what);
            assert!(startup.files.is_empty(), "{what}: {:?}", startup.files);
            assert_eq!(codes(&startup.diagnostics), vec![(Code::FileNotRegular, "AGENTS.md".to_string())], "{what}");
        }
    }
    drop(held);
}

#[cfg(target_os = "linux")]
#[test]
fn a_module_and_a_nested_file_linked_back_into_the_root_through_proc_are_escapes_on_both_resolvers() {
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(dir.path()).unwrap();
    let root = base.join("repo");
    fs::create_dir_all(root.join(".elowen/rules")).unwrap();
    fs::create_dir_all(root.join("docs")).unwrap();
    fs::create_dir_all(root.join("src")).unwrap();
    // Inside the root, but reached only through a magic link: realpath would place it inside,
    // and the link must not be followed to learn that.
    let inside = root.join("docs/inside.md");
    fs::write(&inside, format!("{MAGIC_CANARY}\n")).unwrap();
    let held = fs::File::open(&inside).unwrap();
    for confinement in [Confinement::Kernel, Confinement::Fallback] {
        for target in magic_targets(&inside, held.as_raw_fd()) {
            for link in [root.join(".elowen/rules/a.md"), root.join("src/AGENTS.md")] {
                let _ = fs::remove_file(&link);
                std::os::unix::fs::symlink(&target, &link).unwrap();
            }
            let what = format!("{confinement:?}, -> {target}");
            let (_s, mut session, startup) = start_with(&root, confinement);
            assert_no_canary(&startup, &what);
            assert!(startup.files.is_empty(), "{what}: {:?}", startup.files);
            assert_eq!(
                codes(&startup.diagnostics),
                vec![(Code::InstructionModuleEscape, ".elowen/rules/a.md".to_string())],
                "{what}"
            );
            session.observe(&ToolResult { tool: "read".into(), file_access: Some("src/main.rs".into()) });
            let out = session.next_request();
            let loaded: Vec<String> =
                out.activation.iter().flat_map(|a| a.modules.iter().map(|m| m.path.clone())).collect();
            assert!(loaded.is_empty(), "{what}: {loaded:?}");
            assert!(out.diagnostics.iter().all(|d| !d.message.contains(MAGIC_CANARY)), "{what}");
            let got = codes(&out.diagnostics);
            assert!(got.contains(&(Code::InstructionModuleEscape, "src/AGENTS.md".to_string())), "{what}: {got:?}");
        }
    }
    drop(held);
}
