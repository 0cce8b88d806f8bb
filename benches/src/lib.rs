//! Deterministic generated rule trees and the floor every benchmark is measured beside.
//!
//! [`generate`] lays out `n` rule modules of about 1 KiB, 4 to 7 folders deep under
//! `.elowen/rules` (counting `.elowen` and `rules`), half of them conditional with 1 to 3 globs,
//! plus nested AGENTS.md files in source folders. The same seed gives the same tree.
//! [`floor`] is the least any discovery can do: walk, read and SHA-256 every rule file, with std
//! only and one thread.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// A small deterministic generator (xorshift64*): enough for shaping a tree, no crate needed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

const AREAS: &[&str] = &[
    "api", "auth", "billing", "cli", "core", "db", "docs", "events", "files", "gateway", "http", "i18n", "jobs", "kv",
    "logs", "mail", "metrics", "net", "orders", "pay", "queue", "rpc", "search", "sql", "storage", "sync", "tasks",
    "ui", "users", "web",
];
const SUBS: &[&str] = &["handlers", "models", "routes", "util", "v1", "v2", "internal", "public"];
const EXTS: &[&str] = &["ts", "rs", "go", "py"];

/// A generated tree.
#[derive(Debug)]
pub struct Generated {
    _dir: tempfile::TempDir,
    /// The project root (real path).
    pub root: PathBuf,
    /// How many rule modules.
    pub modules: usize,
    /// Their total size in bytes.
    pub bytes: u64,
    /// The conditional modules' globs, one list per conditional module.
    pub patterns: Vec<Vec<String>>,
    /// Source paths to touch, /-form and root-relative, many of them matching.
    pub touched: Vec<String>,
}

fn pick<'a>(rng: &mut Rng, from: &[&'a str]) -> &'a str {
    from.get(rng.below(from.len())).copied().unwrap_or("x")
}

/// Generates `n` modules with `seed`.
pub fn generate(n: usize, seed: u64) -> io::Result<Generated> {
    let dir = tempfile::Builder::new().prefix("bench-tree-").tempdir()?;
    let root = fs::canonicalize(dir.path())?.join("project");
    let mut rng = Rng::new(seed);
    let mut bytes = 0u64;
    let mut patterns = Vec::new();
    let filler = "Keep changes small, name things for what they hold, and test what you change. ".repeat(13);
    for i in 0..n {
        // `.elowen/rules` plus 2 to 5 folders: 4 to 7 deep.
        let depth = 2 + rng.below(4);
        let mut rel = PathBuf::from(".elowen/rules");
        for _ in 0..depth {
            rel.push(format!("{}-{}", pick(&mut rng, AREAS), rng.below(4)));
        }
        rel.push(format!("module-{i}.md"));
        let mut text = String::new();
        if i % 2 == 0 {
            let k = 1 + rng.below(3);
            let globs: Vec<String> = (0..k)
                .map(|_| match rng.below(3) {
                    0 => format!("src/{}/**/*.{}", pick(&mut rng, AREAS), pick(&mut rng, EXTS)),
                    1 => format!("src/{}/{}/*.{}", pick(&mut rng, AREAS), pick(&mut rng, SUBS), pick(&mut rng, EXTS)),
                    _ => format!("tests/{}/**", pick(&mut rng, AREAS)),
                })
                .collect();
            text.push_str("---\npaths:\n");
            for g in &globs {
                text.push_str(&format!("  - \"{g}\"\n"));
            }
            text.push_str("---\n");
            patterns.push(globs);
        }
        text.push_str(&format!("# Rule {i}\n\n{filler}\n"));
        let path = root.join(&rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::write(&path, &text)?;
        bytes += text.len() as u64;
    }
    for area in AREAS {
        let folder = root.join("src").join(area);
        fs::create_dir_all(&folder)?;
        fs::write(folder.join("AGENTS.md"), format!("# {area}\nConventions of {area}.\n"))?;
        let sub = folder.join(SUBS.first().copied().unwrap_or("sub"));
        fs::create_dir_all(&sub)?;
        fs::write(sub.join("AGENTS.md"), format!("# {area} handlers\n"))?;
    }
    fs::write(root.join("AGENTS.md"), "# Project\n")?;
    let touched = (0..10_000)
        .map(|_| {
            let (a, s, e) = (pick(&mut rng, AREAS), pick(&mut rng, SUBS), pick(&mut rng, EXTS));
            format!("src/{a}/{s}/file-{}.{e}", rng.below(100))
        })
        .collect();
    Ok(Generated { _dir: dir, root, modules: n, bytes, patterns, touched })
}

/// The floor: walks `.elowen/rules` under `root`, reads and hashes every file, std only, one
/// thread. Answers (files, bytes).
pub fn floor(root: &Path) -> io::Result<(usize, u64)> {
    let mut stack = vec![root.join(".elowen/rules")];
    let (mut files, mut bytes) = (0usize, 0u64);
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir)? {
            let entry = entry?;
            let ft = entry.file_type()?;
            if ft.is_dir() {
                stack.push(entry.path());
            } else if ft.is_file() {
                let data = fs::read(entry.path())?;
                std::hint::black_box(Sha256::digest(&data));
                bytes += data.len() as u64;
                files += 1;
            }
        }
    }
    Ok((files, bytes))
}

/// How many threads the reference's discovery uses: the machine's cores, at most four.
pub fn reference_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(4)
}

/// The floor on `threads` threads: the same walk, read and SHA-256 of every rule file, each
/// level of folders listed and then every file read on up to `threads` threads in contiguous
/// shares, as the reference shares its own work, std only. Answers (files, bytes).
pub fn floor_threaded(root: &Path, threads: usize) -> io::Result<(usize, u64)> {
    fn shares<T: Sync, R: Send>(items: &[T], threads: usize, f: impl Fn(&[T]) -> R + Sync) -> Vec<R> {
        if threads < 2 || items.len() < 2 {
            return vec![f(items)];
        }
        let chunk = items.len().div_ceil(threads);
        let f = &f;
        std::thread::scope(|s| {
            let handles: Vec<_> = items.chunks(chunk).map(|part| s.spawn(move || f(part))).collect();
            handles.into_iter().filter_map(|h| h.join().ok()).collect()
        })
    }
    let mut level = vec![root.join(".elowen/rules")];
    let mut files = Vec::new();
    while !level.is_empty() {
        let mut next = Vec::new();
        for listed in shares(&level, threads, |part| -> io::Result<(Vec<PathBuf>, Vec<PathBuf>)> {
            let (mut dirs, mut files) = (Vec::new(), Vec::new());
            for dir in part {
                for entry in fs::read_dir(dir)? {
                    let entry = entry?;
                    let ft = entry.file_type()?;
                    if ft.is_dir() {
                        dirs.push(entry.path());
                    } else if ft.is_file() {
                        files.push(entry.path());
                    }
                }
            }
            Ok((dirs, files))
        }) {
            let (dirs, found) = listed?;
            next.extend(dirs);
            files.extend(found);
        }
        level = next;
    }
    let mut bytes = 0;
    for read in shares(&files, threads, |part| -> io::Result<u64> {
        let mut bytes = 0;
        for f in part {
            let data = fs::read(f)?;
            std::hint::black_box(Sha256::digest(&data));
            bytes += data.len() as u64;
        }
        Ok(bytes)
    }) {
        bytes += read?;
    }
    Ok((files.len(), bytes))
}

/// A tree of nested instruction files and no rules: 10 × 10 × 100 folders three deep (10,110
/// folders with the inner ones), each with an AGENTS.md, and a root AGENTS.md.
#[derive(Debug)]
pub struct NestedTree {
    _dir: tempfile::TempDir,
    /// The project root (real path).
    pub root: PathBuf,
    /// How many folders hold an AGENTS.md.
    pub folders: usize,
    /// A touched file three folders deep.
    pub touched: String,
    /// The three AGENTS.md files that touch brings in, shallow to deep.
    pub nested: Vec<PathBuf>,
}

/// Generates the nested-only tree.
pub fn nested_tree() -> io::Result<NestedTree> {
    let dir = tempfile::Builder::new().prefix("bench-nested-").tempdir()?;
    let root = fs::canonicalize(dir.path())?.join("project");
    let mut folders = 0;
    let mut write = |folder: &Path, text: String| -> io::Result<()> {
        fs::create_dir_all(folder)?;
        fs::write(folder.join("AGENTS.md"), text)?;
        folders += 1;
        Ok(())
    };
    for a in 0..10 {
        let fa = root.join(format!("pkg{a}"));
        write(&fa, format!("# pkg{a}\nConventions of pkg{a}.\n"))?;
        for b in 0..10 {
            let fb = fa.join(format!("mod{b}"));
            write(&fb, format!("# pkg{a}/mod{b}\n"))?;
            for c in 0..100 {
                write(&fb.join(format!("part{c}")), format!("# pkg{a}/mod{b}/part{c}\n"))?;
            }
        }
    }
    fs::write(root.join("AGENTS.md"), "# Project\n")?;
    let nested = ["pkg3", "pkg3/mod7", "pkg3/mod7/part42"].iter().map(|f| root.join(f).join("AGENTS.md")).collect();
    Ok(NestedTree { _dir: dir, root, folders, touched: "pkg3/mod7/part42/file.ts".into(), nested })
}
