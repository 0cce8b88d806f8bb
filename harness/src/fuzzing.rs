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
    let upper = |s: &str| -> String { s.chars().flat_map(char::to_uppercase).collect() };
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
