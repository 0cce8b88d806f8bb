//! Deterministic generated rule trees and the floor every benchmark is measured beside.
//!
//! [`generate`] writes [`harness::util::generate::tree`] to a temporary folder: `n` rule modules
//! of about 1 KiB, 4 to 7 folders deep under `.elowen/rules`, half of them conditional, plus
//! nested AGENTS.md files in source folders. The same seed gives the same tree (`conformance
//! bench` runs agents and adapters on the same trees).
//! [`floor`] is the least any discovery can do: walk, read and SHA-256 every rule file, with std
//! only and one thread.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// A generated tree, written to a temporary folder of its own.
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

/// Generates `n` modules with `seed` ([`harness::util::generate::tree`]) and writes them.
pub fn generate(n: usize, seed: u64) -> io::Result<Generated> {
    let dir = tempfile::Builder::new().prefix("bench-tree-").tempdir()?;
    let root = fs::canonicalize(dir.path())?.join("project");
    // Generated and written on a thread of its own, which allocates from an allocator arena of
    // its own: once the texts are written and everything the thread made is let go, the arena
    // is wholly free and handed back to the system, and what is measured next does not carry
    // the generator's 110 MB (at 100k modules) in its RSS. Generated on this thread, the freed
    // texts stay resident below the globs and paths kept after them, and the reference's own
    // threads allocate elsewhere rather than reuse them. The globs and paths are copied here.
    let tree = std::thread::scope(|s| {
        s.spawn(|| -> io::Result<harness::util::generate::Tree> {
            let tree = harness::util::generate::tree(n, seed);
            for (rel, text) in &tree.files {
                let path = root.join(rel);
                if let Some(parent) = path.parent() {
                    fs::create_dir_all(parent)?;
                }
                fs::write(&path, text)?;
            }
            Ok(tree)
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("the tree generator panicked")))
    })?;
    let (patterns, touched) = (tree.patterns.clone(), tree.touched.clone());
    let (modules, bytes) = (tree.modules, tree.bytes);
    drop(tree);
    Ok(Generated { _dir: dir, root, modules, bytes, patterns, touched })
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
    let files = listed(root, threads)?;
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

/// `f` over `items` in up to `threads` contiguous shares, one thread each, the answers in order.
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

/// Every file below `.elowen/rules`, each level of folders listed on up to `threads` threads.
fn listed(root: &Path, threads: usize) -> io::Result<Vec<PathBuf>> {
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
    Ok(files)
}

/// The second floor: all the work a straightforward loader does, on `threads` threads shared as
/// [`floor_threaded`] shares them: the same walk, read and SHA-256 of every rule file, and then,
/// for each, its frontmatter cut at the `---` lines and parsed with serde_yaml, and its `paths:`
/// built with globset into one set per module. Where the reference is slower than this, it is
/// slower than the loader it exists to judge. Answers (files, globs built).
pub fn loader_floor(root: &Path, threads: usize) -> io::Result<(usize, usize)> {
    let files = listed(root, threads)?;
    let mut globs = 0;
    for built in shares(&files, threads, |part| -> io::Result<usize> {
        let mut globs = 0;
        for f in part {
            let data = fs::read(f)?;
            std::hint::black_box(Sha256::digest(&data));
            let text = String::from_utf8_lossy(&data);
            let Some(rest) = text.strip_prefix("---\n") else { continue };
            let Some((yaml, _body)) = rest.split_once("\n---\n") else { continue };
            let value: serde_yaml::Value =
                serde_yaml::from_str(yaml).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            let mut set = globset::GlobSetBuilder::new();
            for glob in value.get("paths").and_then(|p| p.as_sequence()).into_iter().flatten() {
                let glob = globset::GlobBuilder::new(glob.as_str().unwrap_or_default())
                    .literal_separator(true)
                    .build()
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                set.add(glob);
                globs += 1;
            }
            std::hint::black_box(set.build().map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?);
        }
        Ok(globs)
    }) {
        globs += built?;
    }
    Ok((files.len(), globs))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The floors do the work they are named for: every module file read, and the loader floor
    /// builds every conditional module's globs (a floor that skipped work would flatter the
    /// reference).
    #[test]
    fn the_floors_read_every_module_and_the_loader_floor_builds_every_glob() -> io::Result<()> {
        let tree = generate(60, 3)?;
        let globs: usize = tree.patterns.iter().map(Vec::len).sum();
        assert!(globs > 30, "half the modules are conditional, with 1 to 3 globs each");
        assert_eq!(floor(&tree.root)?, (60, tree.bytes));
        for threads in [1, 2, 3] {
            assert_eq!(floor_threaded(&tree.root, threads)?, (60, tree.bytes));
            assert_eq!(loader_floor(&tree.root, threads)?, (60, globs));
        }
        Ok(())
    }
}
