//! Materialising a scenario's tree. The harness owns the tree, so every implementation in every
//! language sees the same bytes, links and sizes: host cases get a real temporary directory
//! (`<sandbox>/project` is the root, `<sandbox>/home` a fake empty HOME); windows and managed
//! cases get an in-memory tree that is sent to the implementation.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Component, Path, PathBuf};

use crate::wire::{to_hex, WireEntry};

use crate::scenario::{Platform, Scenario, TreeValue};

/// A case's directories.
#[derive(Debug)]
pub struct Sandbox {
    _tmp: Option<tempfile::TempDir>,
    /// The real path of the sandbox.
    pub dir: PathBuf,
    /// The real path of the project directory (the root of host cases).
    pub project: PathBuf,
    /// A fake, empty HOME.
    pub home: PathBuf,
    forks: usize,
}

impl Sandbox {
    /// A new sandbox.
    pub fn new() -> Result<Sandbox, String> {
        let tmp = tempfile::Builder::new().prefix("conformance-").tempdir().map_err(|e| format!("tempdir: {e}"))?;
        let mut sandbox = Sandbox::in_dir(tmp.path())?;
        sandbox._tmp = Some(tmp);
        Ok(sandbox)
    }

    /// A sandbox in `dir` that is kept (for a reproduction).
    pub fn in_dir(dir: &Path) -> Result<Sandbox, String> {
        fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let dir = fs::canonicalize(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let project = dir.join("project");
        let home = dir.join("home");
        for d in [&project, &home] {
            fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
        }
        Ok(Sandbox { _tmp: None, dir, project, home, forks: 0 })
    }

    /// The first state directory.
    pub fn state_dir(&self) -> PathBuf {
        self.dir.join("state")
    }

    /// A fresh state directory for a fork.
    pub fn fork_dir(&mut self) -> PathBuf {
        self.forks += 1;
        self.dir.join(format!("state-fork-{}", self.forks))
    }

    /// The sandbox path of a tree path (relative to the project; `../` allowed within the
    /// sandbox).
    pub fn resolve(&self, rel: &str) -> Result<PathBuf, String> {
        let mut out = self.project.clone();
        for c in Path::new(rel).components() {
            match c {
                Component::Normal(n) => out.push(n),
                Component::CurDir => {}
                Component::ParentDir => {
                    out.pop();
                }
                _ => return Err(format!("tree path '{rel}' must be relative")),
            }
        }
        if !out.starts_with(&self.dir) || out == self.dir {
            return Err(format!("tree path '{rel}' leaves the sandbox"));
        }
        Ok(out)
    }

    /// Expands `{project}` and `{sandbox}` in a symlink target.
    pub fn expand(&self, target: &str) -> String {
        target.replace("{project}", &self.project.to_string_lossy()).replace("{sandbox}", &self.dir.to_string_lossy())
    }

    /// Writes one entry on disk.
    pub fn put(&self, rel: &str, value: &TreeValue) -> Result<(), String> {
        let path = self.resolve(rel)?;
        let ctx = |e: std::io::Error| format!("tree '{rel}': {e}");
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(ctx)?;
        }
        match value {
            TreeValue::File(bytes) => fs::write(&path, bytes).map_err(ctx)?,
            TreeValue::Sized { size, fill } => {
                let mut f = fs::File::create(&path).map_err(ctx)?;
                // A whole number of fills per chunk, so every chunk starts where a fill starts.
                let chunk = fill.repeat((64 * 1024 / fill.len().max(1)).max(1)).into_bytes();
                let mut left = *size;
                while left > 0 {
                    let n = usize::try_from(left).unwrap_or(usize::MAX).min(chunk.len());
                    f.write_all(chunk.get(..n).unwrap_or(&[])).map_err(ctx)?;
                    left -= n as u64;
                }
            }
            TreeValue::Sparse(size) => fs::File::create(&path).and_then(|f| f.set_len(*size)).map_err(ctx)?,
            TreeValue::Dir => fs::create_dir_all(&path).map_err(ctx)?,
            TreeValue::Symlink(target) => symlink(&self.expand(target), &path).map_err(ctx)?,
            TreeValue::Fifo => {
                let status = std::process::Command::new("mkfifo").arg(&path).status().map_err(ctx)?;
                if !status.success() {
                    return Err(format!("tree '{rel}': mkfifo failed"));
                }
            }
        }
        Ok(())
    }
}

/// Makes a symlink with `target` as written.
///
/// # Platform behavior
/// POSIX only: the suite's host cases run on POSIX filesystems; Windows targets are in memory.
fn symlink(target: &str, path: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(target, path)
    }
    #[cfg(not(unix))]
    {
        let _ = (target, path);
        Err(std::io::Error::other("symlinks in host trees need a POSIX filesystem"))
    }
}

/// The in-memory tree of a windows or managed case, kept by the harness so a restarted adapter
/// is sent the tree as it is now.
#[derive(Debug, Clone, Default)]
pub struct MemModel {
    entries: BTreeMap<String, TreeValue>,
}

impl MemModel {
    /// The scenario's tree.
    pub fn new(s: &Scenario) -> MemModel {
        MemModel { entries: s.tree.clone() }
    }

    /// Writes a file.
    pub fn write(&mut self, path: &str, bytes: Vec<u8>) {
        self.entries.insert(path.to_string(), TreeValue::File(bytes));
    }

    /// Removes an entry and everything below it.
    pub fn delete(&mut self, path: &str) {
        let below = format!("{path}/");
        self.entries.retain(|k, _| k != path && !k.starts_with(&below));
    }

    /// Moves an entry.
    pub fn rename(&mut self, from: &str, to: &str) {
        if let Some(v) = self.entries.remove(from) {
            self.entries.insert(to.to_string(), v);
        }
    }

    /// The tree on the wire.
    pub fn wire(&self) -> Vec<WireEntry> {
        self.entries
            .iter()
            .map(|(path, v)| match v {
                TreeValue::File(b) => WireEntry::File { path: path.clone(), hex: to_hex(b) },
                TreeValue::Sized { size, fill } => {
                    let bytes: Vec<u8> = fill.as_bytes().iter().copied().cycle().take(*size as usize).collect();
                    WireEntry::File { path: path.clone(), hex: to_hex(&bytes) }
                }
                TreeValue::Dir | TreeValue::Sparse(_) | TreeValue::Fifo => WireEntry::Dir { path: path.clone() },
                TreeValue::Symlink(t) => WireEntry::Symlink { path: path.clone(), target: t.clone() },
            })
            .collect()
    }
}

/// The default root of an in-memory tree.
pub fn default_root(platform: Platform) -> &'static str {
    match platform {
        Platform::Windows => r"C:\work\repo",
        Platform::Managed => "/workspace",
        Platform::Posix => "",
    }
}

/// The root in display form, for `{root}` in expectations (decision D-RENDER-1).
pub fn display_root(platform: Platform, root: &str) -> String {
    match platform {
        Platform::Windows => {
            let slashed = root.replace('\\', "/");
            let plain = match slashed.strip_prefix("//?/UNC/") {
                Some(unc) => format!("//{unc}"),
                None => slashed.strip_prefix("//?/").unwrap_or(&slashed).to_string(),
            };
            plain.trim_end_matches('/').to_string()
        }
        _ => root.trim_end_matches('/').to_string(),
    }
}
