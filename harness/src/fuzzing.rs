//! The properties the fuzz targets check (fuzz/fuzz_targets/*), kept here so that a stable
//! `cargo test` replays every checked-in corpus file through the very same code
//! (harness/tests/fuzz_corpus.rs). Every function takes arbitrary bytes, must never panic on them,
//! and panics only when a property fails (that is how a fuzzer learns of a finding).

#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::run::driver::Driver;
use crate::run::wire::{CasePlatform, OpenCase, StepOp, TreeEdit, WireEntry};
use reference::frontmatter::{self, Kind};
use reference::glob::RulesBuilder;
use reference::{Code, Platform, RelPath};

/// Frontmatter: never panics; parsing is deterministic; an accepted module's body is a suffix of
/// the text, and each of its globs validates on its own; and the YAML layer's shortcut for plain
/// `paths:` lists answers as the parser does (`yaml::parse` against `yaml::parse_full`), on the
/// text and on the block between its first two `---` lines.
pub fn frontmatter(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let block =
        text.strip_prefix("---\n").and_then(|rest| rest.split_once("\n---").map(|(yaml, _)| format!("{yaml}\n")));
    for yaml in std::iter::once(text).chain(block.as_deref()) {
        assert_eq!(reference::yaml::parse(yaml), reference::yaml::parse_full(yaml), "the shortcut differs on {yaml:?}");
    }
    let first = frontmatter::parse(text);
    let again = frontmatter::parse(text);
    assert_eq!(first, again, "parsing is not deterministic");
    if let Ok(parsed) = first {
        assert!(text.ends_with(parsed.body), "the body is not a suffix of the text");
        assert_eq!(
            reference::sha256_hex(parsed.body.as_bytes()),
            reference::sha256_hex(again.unwrap().body.as_bytes())
        );
        if let Kind::Conditional(globs) = parsed.kind {
            assert!(!globs.is_empty());
            for g in globs {
                assert!(reference::glob::validate(&g).is_ok(), "accepted glob {g:?} does not validate");
            }
        }
    }
}

/// A plainly correct matcher for the glob rules of DECISIONS.md (D-GLOB-1..8), written for the
/// fuzzer: recursion over characters and segments, no cleverness.
pub fn oracle(pattern: &str, path: &str) -> bool {
    fn seg(p: &[char], s: &[char]) -> bool {
        match p.first() {
            None => s.is_empty(),
            Some('*') => seg(&p[1..], s) || (!s.is_empty() && seg(p, &s[1..])),
            Some('?') => !s.is_empty() && seg(&p[1..], &s[1..]),
            Some(c) => s.first() == Some(c) && seg(&p[1..], &s[1..]),
        }
    }
    fn segs(p: &[&str], s: &[&str]) -> bool {
        match p.first() {
            None => s.is_empty(),
            // D-GLOB-1: a last `**` is one or more folders, any other zero or more.
            Some(&"**") => (usize::from(p.len() == 1)..=s.len()).any(|k| segs(&p[1..], &s[k..])),
            Some(first) => {
                !s.is_empty() && {
                    let pc: Vec<char> = first.chars().collect();
                    let sc: Vec<char> = s[0].chars().collect();
                    seg(&pc, &sc) && segs(&p[1..], &s[1..])
                }
            }
        }
    }
    let p: Vec<&str> = pattern.split('/').collect();
    let s: Vec<&str> = path.split('/').collect();
    segs(&p, &s)
}

/// Globs: the first line is a pattern, the others are paths. A pattern that validates matches,
/// through the compiled set, exactly the paths the oracle says it matches, and so does the exact
/// matcher with case folding on upper-cased text. On every input, however hostile, the exact
/// matcher takes at most 5 · (p + 1) · (q + 1) steps (`reference::glob::exact_match_counted`; p
/// and q the lengths in characters of the pattern and the path, upper-cased when folding): a
/// bound on its work that does not depend on the machine, so a matcher that is exponential again
/// (issue 10: sixteen `**` against 24 folders ran for minutes) fails here rather than hanging a
/// discovery.
pub fn glob(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut lines = text.lines();
    let Some(pattern) = lines.next() else { return };
    if reference::glob::validate(pattern).is_err() {
        return;
    }
    // The oracle is exponential in the number of `*`; consult it only where it stays fast.
    let oracle_fits = pattern.len() <= 48 && pattern.matches('*').count() <= 6;
    let mut builder = RulesBuilder::new(Platform::Posix);
    builder.add(0, &[pattern.to_string()]).expect("a validated pattern compiles");
    let rules = builder.build();
    let upper = |s: &str| Platform::Windows.fold_case(s);
    for line in lines.take(16) {
        let Some(path) = RelPath::parse(line) else { continue };
        let mut hits = Vec::new();
        rules.matching(&path, &mut hits);
        let hit = !hits.is_empty();
        for fold in [false, true] {
            let (exact, steps) = reference::glob::exact_match_counted(pattern, path.as_str(), fold);
            let (p, q) =
                if fold { (upper(pattern), upper(path.as_str())) } else { (pattern.into(), path.as_str().into()) };
            let bound = 5 * (p.chars().count() as u64 + 1) * (q.chars().count() as u64 + 1);
            assert!(steps <= bound, "{steps} steps > {bound} for {pattern:?} against {path:?} (fold {fold})");
            if !fold {
                assert_eq!(exact, hit, "exact matcher and set disagree on {pattern:?} against {path:?}");
            }
            if oracle_fits && path.as_str().len() <= 64 {
                assert_eq!(exact, oracle(&p, &q), "pattern {pattern:?} against {path:?} (fold {fold})");
            }
        }
    }
}

/// The literal folders a glob starts with, as the compiled index keys it: its leading segments up
/// to the first with a wildcard, never its last. The padding of [`glob_set`] shares them.
fn literal_folders(pattern: &str) -> String {
    let segs: Vec<&str> = pattern.split('/').collect();
    let lead = segs.len().saturating_sub(1);
    segs.iter().take(lead).take_while(|s| !s.contains(['*', '?'])).copied().collect::<Vec<_>>().join("/")
}

/// How many globs one folder of the compiled index holds at least before they are matched as one
/// globset (`glob.rs`, `SET_FROM`); the property pads each folder to it.
const SET_PADDING: usize = 16;

/// One matcher, one answer (issue 26): the lines before the first empty line are globs (up to
/// 12), the rest touched paths (up to 16). On POSIX and on Windows, every glob's module is
/// matched four ways: all of them in one index with sixteen more globs in every folder they
/// start in (a globset per folder), each on its own (tried one by one), by `exact_match`, and by
/// `OneAtATime` (one globset matcher per module). All four give the same modules for every
/// path, so how many globs share a folder never changes what a path activates.
pub fn glob_set(data: &[u8]) {
    use reference::glob::{exact_match, OneAtATime};
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (globs, paths) = text.split_once("\n\n").unwrap_or((text, ""));
    let patterns: Vec<String> =
        globs.lines().filter(|p| reference::glob::validate(p).is_ok()).take(12).map(String::from).collect();
    let paths: Vec<RelPath> = paths.lines().filter_map(RelPath::parse).take(16).collect();
    if patterns.is_empty() || paths.is_empty() {
        return;
    }
    for platform in [Platform::Posix, Platform::Windows] {
        let fold = platform == Platform::Windows;
        let mut padded = RulesBuilder::new(platform);
        for (i, p) in patterns.iter().enumerate() {
            padded.add(i, std::slice::from_ref(p)).unwrap();
        }
        let mut folders: Vec<String> = patterns.iter().map(|p| literal_folders(p)).collect();
        folders.sort();
        folders.dedup();
        let mut owner = patterns.len();
        for folder in &folders {
            for k in 0..SET_PADDING {
                let pad = if folder.is_empty() { format!("pad-{k}-*") } else { format!("{folder}/pad-{k}-*") };
                padded.add(owner, &[pad]).unwrap();
                owner += 1;
            }
        }
        let padded = padded.build();
        let alone: Vec<_> = patterns
            .iter()
            .map(|p| {
                let mut b = RulesBuilder::new(platform);
                b.add(0, std::slice::from_ref(p)).unwrap();
                b.build()
            })
            .collect();
        let modules: Vec<Vec<String>> = patterns.iter().map(|p| vec![p.clone()]).collect();
        let one_at_a_time = OneAtATime::new(&modules, platform).unwrap();
        for path in &paths {
            let mut in_set = Vec::new();
            padded.matching(path, &mut in_set);
            in_set.retain(|&o| o < patterns.len());
            let mut one_by_one = Vec::new();
            for (i, rules) in alone.iter().enumerate() {
                let mut hit = Vec::new();
                rules.matching(path, &mut hit);
                if !hit.is_empty() {
                    one_by_one.push(i);
                }
            }
            let exact: Vec<usize> =
                (0..patterns.len()).filter(|&i| exact_match(&patterns[i], path.as_str(), fold)).collect();
            let mut separate = Vec::new();
            one_at_a_time.matching(path, &mut separate);
            let shown = || format!("{patterns:?} against {path:?} on {platform:?}");
            assert_eq!(in_set, exact, "the set and exact_match disagree: {}", shown());
            assert_eq!(one_by_one, exact, "one by one and exact_match disagree: {}", shown());
            assert_eq!(separate, exact, "OneAtATime and exact_match disagree: {}", shown());
        }
    }
}

/// `within` on Windows and POSIX: the first line is a root, the second a path. An answer is a
/// normal relative path, and is idempotent: the root joined with the answer answers the same.
pub fn within(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut lines = text.lines();
    let (Some(root), Some(path)) = (lines.next(), lines.next()) else { return };
    // A backslash separates on Windows only; on POSIX it is part of a name and is never trimmed.
    for (platform, sep, trim) in [(Platform::Windows, "\\", &['/', '\\'][..]), (Platform::Posix, "/", &['/'][..])] {
        if let Some(rel) = platform.within(root, path) {
            assert_eq!(RelPath::parse(rel.as_str()).as_ref(), Some(&rel), "not a normal relative path");
            let rejoined = format!("{}{sep}{}", root.trim_end_matches(trim), rel.as_str().replace('/', sep));
            assert_eq!(platform.within(root, &rejoined).as_ref(), Some(&rel), "{platform:?}: {root:?} + {rel:?}");
            assert_eq!(platform.within(root, rel.as_str()).as_ref(), Some(&rel), "{platform:?}: relative {rel:?}");
        }
    }
}

/// Scenario YAML: loading never panics, whatever the text.
pub fn scenario(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = crate::case::load::parse(text);
}

/// Adapter protocol messages: decoding never panics, and a decoded message encodes to JSON that
/// decodes to the same message.
pub fn protocol(data: &[u8]) {
    use crate::run::adapter::{OneShotReply, OneShotRequest, Reply, Request};
    fn roundtrip<T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug>(data: &[u8]) {
        if let Ok(v) = serde_json::from_slice::<T>(data) {
            let back: T = serde_json::from_slice(&serde_json::to_vec(&v).unwrap()).unwrap();
            assert_eq!(back, v);
        }
    }
    roundtrip::<Request>(data);
    roundtrip::<Reply>(data);
    roundtrip::<OneShotRequest>(data);
    roundtrip::<OneShotReply>(data);
}

const FILES: [&str; 5] = ["AGENTS.md", "src/AGENTS.md", "src/x/AGENTS.md", ".elowen/rules/a.md", ".elowen/rules/b.md"];
const TEXTS: [&str; 6] = [
    "---\npaths: [\"src/**\"]\n---\nA\n",
    "---\npaths: [\"src/x/*\"]\n---\nB\n",
    "---\npath: [\"src/**\"]\n---\nbroken\n",
    "plain\n",
    "---\npaths: [\"src/**\"]\n---\nA2\n",
    "",
];
const TOUCHES: [&str; 4] = ["src/a.ts", "src/x/b.ts", "/elsewhere/c.ts", "top.ts"];

/// What one step of the session model does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Touch(usize),
    Request,
    Compact,
    Edit(usize, usize),
    FailNext,
    ColdClear,
}

fn ops(data: &[u8]) -> (Vec<(usize, usize)>, Vec<Op>) {
    let mut it = data.iter().copied();
    let tree: Vec<(usize, usize)> =
        (0..FILES.len()).filter_map(|f| it.next().map(|b| (f, usize::from(b) % (TEXTS.len() + 1)))).collect();
    let mut out = Vec::new();
    while let Some(b) = it.next() {
        out.push(match b % 8 {
            0 | 1 => Op::Touch(usize::from(b / 8) % TOUCHES.len()),
            2 | 3 => Op::Request,
            4 => Op::Compact,
            5 => Op::Edit(usize::from(b / 8) % FILES.len(), usize::from(it.next().unwrap_or(0)) % TEXTS.len()),
            6 => Op::FailNext,
            _ => Op::ColdClear,
        });
        if out.len() >= 48 {
            break;
        }
    }
    (tree, out)
}

fn step_op(op: Op) -> StepOp {
    match op {
        Op::Touch(i) => StepOp::Touch(crate::run::wire::ToolCall {
            tool: "read".into(),
            path: TOUCHES[i].into(),
            outcome: crate::run::wire::Outcome::Ok,
            file_access: Some(TOUCHES[i].into()),
            args: None,
        }),
        Op::Request => StepOp::NextRequest { scope: None, calls: Vec::new() },
        Op::Compact => StepOp::Compact,
        Op::Edit(f, t) => StepOp::EditTree(TreeEdit::Write {
            path: FILES[f].into(),
            hex: crate::run::wire::to_hex(TEXTS[t].as_bytes()),
        }),
        Op::FailNext => StepOp::FailNextAppend { durable: false },
        Op::ColdClear => StepOp::ColdClear,
    }
}

/// Runs the model; `restart_after_quiet_requests` inserts a restart after every request that left
/// nothing queued and nothing armed. Returns the observations of the model's own steps.
fn run_model(
    tree: &[(usize, usize)],
    ops: &[Op],
    restart_after_quiet_requests: bool,
) -> Vec<crate::run::wire::Observation> {
    let state = tempfile::tempdir().unwrap();
    let entries = tree
        .iter()
        .filter(|(_, t)| *t < TEXTS.len())
        .map(|&(f, t)| WireEntry::File { path: FILES[f].into(), hex: crate::run::wire::to_hex(TEXTS[t].as_bytes()) })
        .collect();
    let open = OpenCase {
        profile: "modules".into(),
        platform: CasePlatform::Managed,
        root: "/workspace".into(),
        state_dir: state.path().to_string_lossy().into_owned(),
        tree: Some(entries),
        environment: None,
        placement: None,
        session: None,
        local: None,
        resume: false,
        options: None,
        prompt: None,
    };
    let (mut driver, _) = Driver::open(open).unwrap();
    let mut out = vec![driver.step(&StepOp::Start).unwrap()];
    let mut armed = false;
    for &op in ops {
        let obs = driver.step(&step_op(op)).unwrap();
        match op {
            Op::FailNext => armed = true,
            Op::Request => {
                let failed = obs.diagnostics.iter().any(|d| d.code == Code::InstructionActivationFailed.as_str());
                if obs.activation.is_some() || failed {
                    armed = false;
                }
                if restart_after_quiet_requests && !armed && !failed {
                    driver.restart().unwrap();
                }
            }
            _ => {}
        }
        out.push(obs);
    }
    out
}

/// The session model: random small trees and step sequences never panic; a module whose latest
/// active version is unchanged is never appended again (and a superseding one always is marked);
/// and a restart inserted where nothing is queued changes no later observation.
pub fn session(data: &[u8]) {
    let (tree, ops) = ops(data);
    let plain = run_model(&tree, &ops, false);
    let mut active: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    for (op, obs) in std::iter::once(None).chain(ops.iter().copied().map(Some)).zip(&plain) {
        match op {
            Some(Op::Compact) => active.clear(),
            Some(Op::Request) => {
                for m in obs.activation.iter().flat_map(|a| &a.modules) {
                    let before = active.insert(m.path.clone(), m.sha256.clone());
                    assert_ne!(before.as_ref(), Some(&m.sha256), "unchanged loaded module {} appended again", m.path);
                    assert_eq!(m.supersedes, before.is_some(), "supersedes marker of {} is wrong", m.path);
                }
            }
            _ => {}
        }
    }
    let restarted = run_model(&tree, &ops, true);
    assert_eq!(plain, restarted, "a restart where nothing was queued changed a later observation");
}

/// The entries a [`modes`] tree is made of: modules at two depths, a rules sub-folder, nested
/// instruction files, and the folders they sit in.
const MODES_PATHS: [&str; 10] = [
    ".elowen/rules/a.md",
    ".elowen/rules/b.md",
    ".elowen/rules/sub/c.md",
    ".elowen/rules/sub",
    ".elowen/rules/sub/d.md",
    "src/AGENTS.md",
    "src/api/AGENTS.md",
    "src/api",
    "lib/CLAUDE.md",
    ".elowen/rules",
];
/// What a [`modes`] file holds: globs for either source folder, the first rewritten with one
/// letter changed and the same size (a write the cache must not take for no change), a
/// frontmatter that does not parse, a module without frontmatter, and nothing.
const MODES_TEXTS: [&str; 6] = [
    "---\npaths: [\"src/**\"]\n---\nrule src\n",
    "---\npaths: [\"lib/*.ts\"]\n---\nrule lib\n",
    "---\npaths: [\"src/**\"]\n---\nrule SRC\n",
    "---\npaths: [unclosed\n---\nbad\n",
    "always\n",
    "",
];
const MODES_TARGETS: [&str; 4] = ["../src", "missing", "a.md", "."];
const MODES_TOUCHED: [&str; 4] = ["src/x.ts", "lib/y.ts", "src/api/z.ts", "README.md"];

/// The reference's four modes observe alike (issue 26): on a tree edited between triggers (files
/// written, rewritten in place at the same size, removed, folders made, links), a session in the
/// default mode, one on the fallback confinement walk, one with the discovery cache (2 s
/// granularity: it revalidates whatever changed near a check) and one with the cache aged (10 ms,
/// every trigger waited out past it, so that the cache trusts what it found unchanged) give the
/// same startup and, trigger by trigger, the same activations and diagnostics. Each byte pair is
/// one operation: the first byte's low three bits say which, its others which path (or which
/// touched file), the second which text or link target. At most 24.
pub fn modes(data: &[u8]) {
    use reference::{Confinement, HostSource, Session, Source, ToolResult};
    let dir = tempfile::tempdir().unwrap();
    let sandbox = crate::util::beneath::Beneath::open(dir.path()).unwrap();
    sandbox.write("root/AGENTS.md", b"# Root\n").unwrap();
    sandbox.write("root/.elowen/rules/a.md", MODES_TEXTS[0].as_bytes()).unwrap();
    let root = dir.path().join("root");
    let modes: [(&str, Confinement, bool, u64); 4] = [
        ("default", Confinement::Kernel, false, 2000),
        ("fallback", Confinement::Fallback, false, 2000),
        ("cached", Confinement::Kernel, true, 2000),
        ("aged", Confinement::Kernel, true, 10),
    ];
    let key = |d: &[reference::Diagnostic]| {
        let mut v: Vec<String> = d.iter().map(|d| format!("{} {} {:?}", d.code, d.path, d.line)).collect();
        v.sort();
        v
    };
    let mut sessions = Vec::new();
    let mut startups = Vec::new();
    for (name, confinement, cache, granularity) in modes {
        let mut config = reference::Config::modules();
        config.discovery_cache = cache;
        config.timestamp_granularity = std::time::Duration::from_millis(granularity);
        let source = HostSource::with_confinement(&root, confinement).unwrap();
        let (session, startup) = Session::start(config, Source::Host(source), &dir.path().join(name)).unwrap();
        startups.push(format!("{:?} {:?}", startup.files, key(&startup.diagnostics)));
        sessions.push((name, session));
    }
    for (i, s) in startups.iter().enumerate().skip(1) {
        assert_eq!(&startups[0], s, "startup differs between default and {}", modes[i].0);
    }
    for pair in data.chunks(2).take(24) {
        let (byte, second) = (pair[0], usize::from(pair.get(1).copied().unwrap_or(0)));
        let arg = usize::from(byte >> 3);
        let path = format!("root/{}", MODES_PATHS[arg % MODES_PATHS.len()]);
        let text = MODES_TEXTS[second % MODES_TEXTS.len()].as_bytes();
        // An edit that cannot be made (its folder is a file or a link) leaves the tree as it is.
        let _ = match byte & 7 {
            0 | 1 => sandbox.write(&path, text),
            2 => sandbox.overwrite(&path, text),
            3 => sandbox.delete(&path),
            4 => sandbox.mkdir_all(&path),
            5 => sandbox.symlink(&path, MODES_TARGETS[second % MODES_TARGETS.len()]),
            _ => {
                // Waited out past the aged mode's granularity, as its corpus mode waits.
                std::thread::sleep(std::time::Duration::from_millis(15));
                let touched = root.join(MODES_TOUCHED[arg % MODES_TOUCHED.len()]);
                let mut seen = Vec::new();
                for (_, session) in &mut sessions {
                    session
                        .observe(&ToolResult { tool: "read".into(), file_access: Some(touched.display().to_string()) });
                    let out = session.next_request();
                    seen.push(format!(
                        "{:?} {:?} {} {:?}",
                        out.activation,
                        key(&out.diagnostics),
                        out.blocked,
                        out.escaped
                    ));
                }
                for (i, s) in seen.iter().enumerate().skip(1) {
                    assert_eq!(&seen[0], s, "default and {} observe differently, after {data:?}", sessions[i].0);
                }
                Ok(())
            }
        };
    }
}

/// The names a confinement tree is made of: files and folders where discovery looks, and the
/// places links point to (inside, outside where a canary lives, nowhere, themselves).
const CONFINE_PATHS: [&str; 8] =
    ["AGENTS.md", "src", "src/AGENTS.md", ".elowen", ".elowen/rules", ".elowen/rules/a.md", "lib", "lib/CLAUDE.md"];
const CONFINE_TARGETS: [&str; 6] = ["src", "../outside", "../outside/AGENTS.md", "missing", "lib", "."];
const CONFINE_CANARY: &str = "CANARY-CONFINE-OUTSIDE";

/// Confinement: the reference's own walk (the fallback where `openat2` is missing or refused) and
/// `openat2` observe the same startup, activations and diagnostics (codes and paths) on any tree
/// of files, folders, links and FIFOs, and neither ever lets the outside canary in. Each byte pair
/// makes one entry: which path, and what it is.
pub fn confinement(data: &[u8]) {
    use reference::{Confinement, HostSource, Session, Source, ToolResult};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("AGENTS.md"), CONFINE_CANARY).unwrap();
    let sandbox = crate::util::beneath::Beneath::open(dir.path()).unwrap();
    for pair in data.chunks(2).take(12) {
        let path = format!("root/{}", CONFINE_PATHS[usize::from(pair[0]) % CONFINE_PATHS.len()]);
        let kind = pair.get(1).copied().unwrap_or(0);
        // A failure to make an entry (its folder is a file or a link) leaves the tree as it is.
        let _ = match kind % 4 {
            0 => sandbox.write(&path, b"---\npaths: [\"src/**\"]\n---\nrule\n"),
            1 => sandbox.mkdir_all(&path),
            2 => sandbox.symlink(&path, CONFINE_TARGETS[usize::from(kind / 4) % CONFINE_TARGETS.len()]),
            _ => sandbox.fifo(&path),
        };
    }
    let observe = |confinement: Confinement, state: &str| {
        let source = HostSource::with_confinement(&root, confinement).unwrap();
        let (mut session, startup) =
            Session::start(reference::Config::modules(), Source::Host(source), &dir.path().join(state)).unwrap();
        // The root file follows a link wherever it points (seed 000: "the root file, which
        // follows a symlink as PI's own loader does"); everything else must stay inside.
        let confined: Vec<_> = startup.files.iter().filter(|f| f.kind != "root").collect();
        assert!(!format!("{confined:?}").contains(CONFINE_CANARY), "outside content reached a module at startup");
        let mut seen = vec![format!("{:?}", startup.files)];
        let key = |d: &[reference::Diagnostic]| {
            let mut v: Vec<String> = d.iter().map(|d| format!("{} {}", d.code, d.path)).collect();
            v.sort();
            v
        };
        seen.push(format!("{:?}", key(&startup.diagnostics)));
        for touched in ["src/x.ts", "lib/y.ts", "src/AGENTS.md/z"] {
            session.observe(&ToolResult { tool: "read".into(), file_access: Some(touched.into()) });
            let out = session.next_request();
            seen.push(format!("{:?} {:?}", out.activation, key(&out.diagnostics)));
        }
        seen
    };
    let kernel = observe(Confinement::Kernel, "state-kernel");
    let fallback = observe(Confinement::Fallback, "state-fallback");
    for (k, f) in kernel.iter().zip(&fallback).skip(1) {
        assert!(!k.contains(CONFINE_CANARY) && !f.contains(CONFINE_CANARY), "outside content reached an observation");
    }
    assert_eq!(kernel, fallback, "openat2 and the fallback walk observe differently");
}
