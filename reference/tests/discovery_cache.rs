//! The discovery cache against the definition (issue 13): two sessions on one tree, one with
//! the revalidating cache and one without, are touched alike after every edit, replacement,
//! rename and relink, and must observe the same thing at every step. Steps run both right after
//! a change (the racy case: the change lies within the timestamp granularity of the last check)
//! and after the entries have aged past it, when only their identities are compared.
//!
//! Nothing here is timed: the pauses only let timestamps age past the granularity the cached
//! session is configured with.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use std::fs::{self, File, FileTimes};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::Duration;

use reference::{Config, HostSource, RequestOutcome, Session, Source, ToolResult};

/// The cached session's timestamp granularity; the pauses are longer.
const GRANULARITY: Duration = Duration::from_millis(40);

fn pause() {
    std::thread::sleep(GRANULARITY * 2);
}

struct Pair {
    _state: tempfile::TempDir,
    root: PathBuf,
    cached: Session,
    uncached: Session,
    step: usize,
}

fn config(cached: bool) -> Config {
    Config { discovery_cache: cached, timestamp_granularity: GRANULARITY, ..Config::modules() }
}

impl Pair {
    fn start(root: &Path) -> Pair {
        let state = tempfile::tempdir().unwrap();
        let source = || Source::Host(HostSource::new(root).unwrap());
        let (cached, a) = Session::start(config(true), source(), &state.path().join("cached")).unwrap();
        let (uncached, b) = Session::start(config(false), source(), &state.path().join("uncached")).unwrap();
        assert_eq!(a, b, "startup");
        Pair { _state: state, root: root.to_path_buf(), cached, uncached, step: 0 }
    }

    /// Touches `paths` in both sessions and compares what the next request appends.
    fn trigger(&mut self, what: &str, paths: &[&str]) -> RequestOutcome {
        self.step += 1;
        let mut outs = Vec::new();
        for s in [&mut self.cached, &mut self.uncached] {
            for p in paths {
                let full = self.root.join(p).to_string_lossy().into_owned();
                s.observe(&ToolResult { tool: "read".into(), file_access: Some(full) });
            }
            outs.push(s.next_request());
        }
        assert_eq!(outs[0], outs[1], "step {} ({what}): cached (left) and uncached (right) differ", self.step);
        outs.pop().unwrap()
    }

    /// Triggers right after a change, again after a pause, and once more unchanged.
    fn check(&mut self, what: &str, paths: &[&str]) {
        self.trigger(what, paths);
        pause();
        self.trigger(&format!("{what}, aged"), paths);
        self.trigger(&format!("{what}, unchanged"), paths);
    }
}

const TOUCH: &[&str] = &["src/a/b/x.ts", "src/a/y.ts", "tests/t.ts"];

fn module(globs: &str, body: &str) -> String {
    format!("---\npaths: [{globs}]\n---\n{body}\n")
}

fn tree() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(dir.path()).unwrap().join("project");
    let rules = root.join(".elowen/rules");
    for sub in ["", "api", "api/deep", "other"] {
        fs::create_dir_all(rules.join(sub)).unwrap();
    }
    fs::create_dir_all(root.join("src/a/b")).unwrap();
    fs::create_dir_all(dir.path().join("outside")).unwrap();
    fs::write(root.join("AGENTS.md"), "# Root\n").unwrap();
    fs::write(root.join("src/a/AGENTS.md"), "nested a v1\n").unwrap();
    fs::write(root.join("src/a/b/AGENTS.md"), "nested b v1\n").unwrap();
    fs::write(rules.join("general.md"), "always on\n").unwrap();
    fs::write(rules.join("api/src.md"), module("\"src/**\"", "src rule v1")).unwrap();
    fs::write(rules.join("api/deep/b.md"), module("\"src/a/b/*.ts\"", "deep rule v1")).unwrap();
    fs::write(rules.join("other/tests.md"), module("\"tests/**\"", "tests rule v1")).unwrap();
    fs::write(rules.join("target-one.txt"), module("\"src/**\"", "link target one")).unwrap();
    fs::write(rules.join("target-two.txt"), module("\"src/**\"", "link target two")).unwrap();
    fs::write(dir.path().join("outside/secret.md"), module("\"src/**\"", "outside")).unwrap();
    (dir, root)
}

/// Rewrites `path` in place with `text` (same inode), then sets its modification time back to
/// what it was: only the change time tells the new version from the old.
fn edit_keeping_mtime(path: &Path, text: &str) {
    let before = fs::metadata(path).unwrap().modified().unwrap();
    fs::write(path, text).unwrap();
    File::options().write(true).open(path).unwrap().set_times(FileTimes::new().set_modified(before)).unwrap();
}

/// Replaces `path` by a new file renamed over it, of the same size and the same modification
/// time (to the nanosecond): only the inode and the change time tell them apart.
fn replace_keeping_mtime(path: &Path, text: &str) {
    let before = fs::metadata(path).unwrap().modified().unwrap();
    let tmp = path.with_extension("tmp-new");
    fs::write(&tmp, text).unwrap();
    File::options().write(true).open(&tmp).unwrap().set_times(FileTimes::new().set_modified(before)).unwrap();
    fs::rename(&tmp, path).unwrap();
}

#[test]
fn cached_and_uncached_sessions_observe_the_same_at_every_step() {
    let (dir, root) = tree();
    let rules = root.join(".elowen/rules");
    let mut pair = Pair::start(&root);
    pair.check("first touch", TOUCH);

    // Same-size edits in place, right away and after the entry aged.
    fs::write(rules.join("api/src.md"), module("\"src/**\"", "src rule v2")).unwrap();
    pair.check("same-size edit, racy", TOUCH);
    edit_keeping_mtime(&rules.join("api/src.md"), &module("\"src/**\"", "src rule v3"));
    pair.check("same-size edit, same mtime", TOUCH);
    pause();
    edit_keeping_mtime(&rules.join("api/src.md"), &module("\"src/**\"", "src rule v4"));
    pair.check("same-size edit of an aged entry, same mtime", TOUCH);

    // Replacement by rename: same size, same modification time.
    pause();
    replace_keeping_mtime(&rules.join("api/deep/b.md"), &module("\"src/a/b/*.ts\"", "deep rule v2"));
    pair.check("replaced, same size and mtime", TOUCH);
    // Reverting is a change too.
    replace_keeping_mtime(&rules.join("api/deep/b.md"), &module("\"src/a/b/*.ts\"", "deep rule v1"));
    pair.check("reverted", TOUCH);

    // Renames: a module moves within its folder, then to another folder; a folder moves.
    fs::rename(rules.join("api/src.md"), rules.join("api/src-renamed.md")).unwrap();
    pair.check("module renamed", TOUCH);
    fs::rename(rules.join("api/src-renamed.md"), rules.join("other/src.md")).unwrap();
    pair.check("module moved to another folder", TOUCH);
    fs::rename(rules.join("api/deep"), rules.join("other/deep")).unwrap();
    pair.check("folder moved", TOUCH);

    // Links: a module that is a link, relinked to another target of the same size, its target
    // edited in place behind an unchanged link, then a link out of the project.
    symlink("target-one.txt", rules.join("linked.md")).unwrap();
    pair.check("link added", TOUCH);
    let tmp = rules.join("linked.tmp");
    symlink("target-two.txt", &tmp).unwrap();
    fs::rename(&tmp, rules.join("linked.md")).unwrap();
    pair.check("relinked", TOUCH);
    pause();
    edit_keeping_mtime(&rules.join("target-two.txt"), &module("\"src/**\"", "link target 2!"));
    pair.check("link target edited behind the link", TOUCH);
    symlink(dir.path().join("outside/secret.md"), &tmp).unwrap();
    fs::rename(&tmp, rules.join("linked.md")).unwrap();
    pair.check("relinked out of the project", TOUCH);

    // A folder swapped for a link out of the project, then back.
    pause();
    fs::rename(rules.join("other"), root.join("other-moved")).unwrap();
    symlink(dir.path().join("outside"), rules.join("other")).unwrap();
    pair.check("folder swapped for a link out", TOUCH);
    fs::remove_file(rules.join("other")).unwrap();
    fs::rename(root.join("other-moved"), rules.join("other")).unwrap();
    pair.check("folder back", TOUCH);

    // A module becomes invalid, then unconditional, then conditional again.
    pause();
    edit_keeping_mtime(&rules.join("other/tests.md"), "---\npath: [\"tests/**\"]\n---\ntests rule v1\n");
    pair.check("module made invalid", TOUCH);
    fs::write(rules.join("other/tests.md"), "tests rule, unconditional\n").unwrap();
    pair.check("module made unconditional", TOUCH);
    fs::write(rules.join("other/tests.md"), module("\"tests/**\"", "tests rule v5")).unwrap();
    pair.check("module conditional again", TOUCH);
    fs::remove_file(rules.join("general.md")).unwrap();
    pair.check("module removed", TOUCH);

    // Nested instruction files: a same-size edit, a higher-priority name added and removed,
    // a link to a directory where a higher-priority name would be, then a link to a file.
    pause();
    edit_keeping_mtime(&root.join("src/a/AGENTS.md"), "nested a v2\n");
    pair.check("nested same-size edit", TOUCH);
    fs::write(root.join("src/a/b/AGENTS.override.md"), "override b\n").unwrap();
    pair.check("nested override added", TOUCH);
    fs::remove_file(root.join("src/a/b/AGENTS.override.md")).unwrap();
    pair.check("nested override removed", TOUCH);
    fs::create_dir_all(root.join("src/dir-target")).unwrap();
    symlink("../dir-target", root.join("src/a/AGENTS.override.md")).unwrap();
    pair.check("nested name linked to a folder", TOUCH);
    fs::write(root.join("src/file-target.md"), "linked nested file\n").unwrap();
    let tmp = root.join("src/a/override.tmp");
    symlink("../file-target.md", &tmp).unwrap();
    fs::rename(&tmp, root.join("src/a/AGENTS.override.md")).unwrap();
    pair.check("nested name relinked to a file", TOUCH);
    pause();
    edit_keeping_mtime(&root.join("src/file-target.md"), "linked nested file!\n");
    pair.check("nested link target edited", TOUCH);
    replace_keeping_mtime(&root.join("src/a/b/AGENTS.md"), "nested b v2\n");
    pair.check("nested replaced, same size and mtime", TOUCH);
    fs::rename(root.join("src/a/b"), root.join("src/a/c")).unwrap();
    fs::create_dir_all(root.join("src/a/b")).unwrap();
    pair.check("nested folder renamed, a new one in its place", TOUCH);

    // The rules folder itself goes away and comes back.
    fs::rename(root.join(".elowen/rules"), root.join(".elowen/rules-away")).unwrap();
    pair.check("rules folder gone", TOUCH);
    fs::rename(root.join(".elowen/rules-away"), root.join(".elowen/rules")).unwrap();
    pair.check("rules folder back", TOUCH);
    // After compaction everything matching is sent again, from the cache's kept versions.
    pair.cached.compact().unwrap();
    pair.uncached.compact().unwrap();
    let last = pair.trigger("after compaction", TOUCH);
    let sent = last.activation.map_or(0, |a| a.modules.len());
    assert!(sent >= 4, "nested files and matching rules are sent again ({sent} sent)");
}

/// Many modules, so the cache revalidates and rebuilds on several threads: one edit among
/// hundreds is seen, and so is one removal.
#[test]
fn one_change_among_many_modules_is_seen() {
    let dir = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(dir.path()).unwrap();
    for i in 0..600 {
        let sub = root.join(format!(".elowen/rules/d{}/e{}", i % 13, i % 5));
        fs::create_dir_all(&sub).unwrap();
        fs::write(sub.join(format!("m{i:03}.md")), module(&format!("\"src/m{i}/**\""), &format!("rule {i:03}")))
            .unwrap();
    }
    let mut pair = Pair::start(&root);
    pair.check("first", &["src/m7/x.ts", "src/m300/y.ts"]);
    pause();
    let path = root.join(".elowen/rules/d4/e0/m225.md");
    edit_keeping_mtime(&path, &module("\"src/m225/**\"", "rule 22X"));
    let out = pair.trigger("one edit", &["src/m225/z.ts"]);
    assert!(out.activation.is_some());
    pause();
    fs::remove_file(root.join(".elowen/rules/d1/e4/m014.md")).unwrap();
    pair.check("one removal", &["src/m14/z.ts", "src/m7/x.ts"]);
}

/// A deep tree (the revalidation looks below a handle a few levels at a time and opens the next
/// handle further down) beside a wide level (revalidated on several threads): edits, a folder
/// swapped for a file, a folder swapped for a link out and a new folder, all below the levels
/// where a handle is opened again, are each seen as the uncached walk sees them.
#[test]
fn changes_deep_below_the_held_handles_are_seen() {
    let dir = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(dir.path()).unwrap().join("project");
    let rules = root.join(".elowen/rules");
    let deep: PathBuf = (0..14).map(|i| format!("l{i}")).collect();
    for i in 0..14 {
        let folder = rules.join(deep.iter().take(i + 1).collect::<PathBuf>());
        fs::create_dir_all(&folder).unwrap();
        fs::write(folder.join(format!("d{i:02}.md")), module(&format!("\"src/d{i}/**\""), &format!("deep {i:02}")))
            .unwrap();
    }
    for i in 0..80 {
        let folder = rules.join(format!("w{i:02}/x"));
        fs::create_dir_all(&folder).unwrap();
        fs::write(folder.join("m.md"), module(&format!("\"src/w{i}/**\""), &format!("wide {i:02}"))).unwrap();
    }
    fs::create_dir_all(dir.path().join("outside")).unwrap();
    fs::write(dir.path().join("outside/secret.md"), module("\"src/**\"", "outside")).unwrap();
    let touch: &[&str] = &["src/d3/a.ts", "src/d9/a.ts", "src/d12/a.ts", "src/d13/a.ts", "src/w5/a.ts", "src/w70/a.ts"];
    let mut pair = Pair::start(&root);
    pair.check("first", touch);
    let at = |i: usize| rules.join(deep.iter().take(i + 1).collect::<PathBuf>());

    pause();
    edit_keeping_mtime(&at(12).join("d12.md"), &module("\"src/d12/**\"", "deep XX"));
    edit_keeping_mtime(&rules.join("w70/x/m.md"), &module("\"src/w70/**\"", "wide XX"));
    pair.check("deep and wide same-size edits", touch);
    pause();
    replace_keeping_mtime(&at(9).join("d09.md"), &module("\"src/d9/**\"", "deep YY"));
    pair.check("deep replacement", touch);
    fs::create_dir_all(at(13).join("new")).unwrap();
    fs::write(at(13).join("new/n.md"), module("\"src/d13/**\"", "new deep")).unwrap();
    pair.check("new deep folder", touch);
    fs::rename(at(11), at(10).join("away")).unwrap();
    fs::write(at(10).join("l11"), "a file where a folder was\n").unwrap();
    pair.check("deep folder swapped for a file", touch);
    fs::remove_file(at(10).join("l11")).unwrap();
    symlink(dir.path().join("outside"), at(10).join("l11")).unwrap();
    pair.check("deep folder swapped for a link out", touch);
    fs::remove_file(at(10).join("l11")).unwrap();
    fs::rename(at(10).join("away"), at(11)).unwrap();
    pair.check("deep folder back", touch);
    fs::remove_dir_all(rules.join("w05")).unwrap();
    pair.check("wide folder removed", touch);
}
