//! Materialising a scenario's tree. The harness owns the tree, so every implementation in every
//! language sees the same bytes, links and sizes: host cases get a real temporary directory
//! (`<sandbox>/project` is the root, `<sandbox>/home` a fake empty HOME); windows and managed
//! cases get an in-memory tree that is sent to the implementation.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Component, Path, PathBuf};

use crate::run::wire::{to_hex, WireEntry};
use crate::util::beneath::Beneath;

use crate::case::scenario::{Platform, Scenario, TreeValue};

/// The temporary directories a case's sandbox owns, removed when the last [`Lease`] on them
/// goes: the sandbox, which the case's tree lives in, and the harness's own directory for the
/// implementation's state, which lies outside it.
#[derive(Debug)]
struct Owned {
    _dirs: Vec<(tempfile::TempDir, crate::util::cleanup::Guard)>,
}

/// A share in a sandbox's temporary directories: they are removed only when the sandbox and
/// every lease on it are gone. An in-process worker holds one for the step it is running, so a
/// worker abandoned at a timeout finishes its step in directories that still exist, and never
/// writes into a name that a removal freed (issue 21: it used to recreate them, following
/// whatever another user had put at that name in a shared temporary directory).
#[derive(Debug, Clone)]
pub struct Lease {
    _owned: std::sync::Arc<Owned>,
}

/// A case's directories. Everything the harness makes or changes in them goes through a handle
/// on the sandbox ([`Beneath`]), never through a path that a link could redirect.
///
/// The tree lives in the sandbox (`project/`, `home/` and whatever the tree places beside the
/// project with `../`); what the harness and the implementation write for the case (the state
/// directory, a fork's, the root-file state and its temporary file) lies in a directory of the
/// harness's own outside it, so no entry of a case's tree can stand where they are written
/// (issue 21: a link placed at the state directory's name was written through).
#[derive(Debug)]
pub struct Sandbox {
    owned: Option<std::sync::Arc<Owned>>,
    fs: Beneath,
    /// The real path of the sandbox.
    pub dir: PathBuf,
    /// The real path of the project directory (the root of host cases).
    pub project: PathBuf,
    /// A fake, empty HOME.
    pub home: PathBuf,
    /// The real path of the directory the state directories are made in.
    state: PathBuf,
    forks: usize,
}

impl Sandbox {
    /// A new sandbox, with its state directory's parent beside it.
    pub fn new() -> Result<Sandbox, String> {
        // Each is registered as it is created, so a signal never leaves it behind.
        let (tree, tree_guard) = crate::util::cleanup::temp_dir("conformance-")?;
        let (state, state_guard) = crate::util::cleanup::temp_dir("conformance-state-")?;
        let state_dir = fs::canonicalize(state.path()).map_err(|e| format!("{}: {e}", state.path().display()))?;
        // Not `in_dir`: a signal's cleanup may remove the new folder at once, and a
        // `create_dir_all` here would make it again behind the cleanup's back.
        let mut sandbox = Sandbox::at(tree.path(), &state_dir)?;
        sandbox.owned = Some(std::sync::Arc::new(Owned { _dirs: vec![(tree, tree_guard), (state, state_guard)] }));
        Ok(sandbox)
    }

    /// A sandbox in `dir` that is kept (for a reproduction), its state directories made in
    /// `state`, which must exist and lie outside `dir`.
    pub fn in_dir(dir: &Path, state: &Path) -> Result<Sandbox, String> {
        fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Sandbox::at(dir, state)
    }

    /// A sandbox in the existing folder `dir`, its state directories made in `state`.
    fn at(dir: &Path, state: &Path) -> Result<Sandbox, String> {
        let dir = fs::canonicalize(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let state = fs::canonicalize(state).map_err(|e| format!("{}: {e}", state.display()))?;
        if state.starts_with(&dir) {
            return Err(format!("{}: the state directory must lie outside the sandbox", state.display()));
        }
        let beneath = Beneath::open(&dir)?;
        for d in ["project", "home"] {
            beneath.mkdir_all(d)?;
        }
        let (project, home) = (dir.join("project"), dir.join("home"));
        Ok(Sandbox { owned: None, fs: beneath, dir, project, home, state, forks: 0 })
    }

    /// A share in the sandbox's temporary directories (none for a kept sandbox).
    pub fn lease(&self) -> Option<Lease> {
        self.owned.clone().map(|owned| Lease { _owned: owned })
    }

    /// The first state directory. It does not exist yet; its parent does.
    pub fn state_dir(&self) -> PathBuf {
        self.state.join("state")
    }

    /// A fresh state directory for a fork. It does not exist yet; its parent does.
    pub fn fork_dir(&mut self) -> PathBuf {
        self.forks += 1;
        self.state.join(format!("state-fork-{}", self.forks))
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

    /// A tree path (relative to the project; `../` allowed within the sandbox) relative to the
    /// sandbox, normalised lexically.
    fn in_sandbox(&self, rel: &str) -> Result<String, String> {
        let mut parts: Vec<String> = vec!["project".into()];
        for c in Path::new(rel).components() {
            match c {
                Component::Normal(n) => parts.push(n.to_string_lossy().into_owned()),
                Component::CurDir => {}
                Component::ParentDir => {
                    parts.pop();
                }
                _ => return Err(format!("tree path '{rel}' must be relative")),
            }
        }
        if parts.is_empty() {
            return Err(format!("tree path '{rel}' leaves the sandbox"));
        }
        Ok(parts.join("/"))
    }

    /// Writes one entry on disk, beneath the sandbox and through no link.
    pub fn put(&self, rel: &str, value: &TreeValue) -> Result<(), String> {
        let at = self.in_sandbox(rel)?;
        let ctx = |e: String| format!("tree '{rel}': {e}");
        match value {
            TreeValue::File(bytes) => self.fs.write(&at, bytes),
            TreeValue::Sized { size, fill } => self.fs.write_repeated(&at, *size, fill.as_bytes()),
            TreeValue::Sparse(size) => self.fs.sparse(&at, *size),
            TreeValue::Dir => self.fs.mkdir_all(&at),
            TreeValue::Symlink(target) => self.fs.symlink(&at, &self.expand(target)),
            TreeValue::Fifo => self.fs.fifo(&at),
        }
        .map_err(ctx)
    }

    /// Makes a scenario's whole tree: directories and files before links, so that no entry is
    /// meant to go through a link (one that would is refused, not written through).
    pub fn build(&self, tree: &BTreeMap<String, TreeValue>) -> Result<(), String> {
        let link = |v: &TreeValue| matches!(v, TreeValue::Symlink(_));
        for (path, value) in tree.iter().filter(|(_, v)| !link(v)).chain(tree.iter().filter(|(_, v)| link(v))) {
            self.put(path, value)?;
        }
        Ok(())
    }

    /// Overwrites an existing regular file in place, beneath the sandbox and through no link
    /// ([`Beneath::overwrite`]).
    pub fn overwrite(&self, rel: &str, bytes: &[u8]) -> Result<(), String> {
        self.fs.overwrite(&self.in_sandbox(rel)?, bytes).map_err(|e| format!("write '{rel}' in place: {e}"))
    }

    /// Removes a file, link or folder (with everything below it), beneath the sandbox.
    pub fn delete(&self, rel: &str) -> Result<(), String> {
        self.fs.delete(&self.in_sandbox(rel)?).map_err(|e| format!("delete '{rel}': {e}"))
    }

    /// Moves an entry beneath the sandbox.
    pub fn rename(&self, from: &str, to: &str) -> Result<(), String> {
        self.fs.rename(&self.in_sandbox(from)?, &self.in_sandbox(to)?)
    }
}

/// The fake, empty HOME that adapters run with, so no user or global instruction file can reach a
/// result. It is registered for removal on a signal and removed when dropped.
#[derive(Debug)]
pub struct FakeHome {
    dir: tempfile::TempDir,
    _registered: crate::util::cleanup::Guard,
}

impl FakeHome {
    /// A new, empty HOME in the temporary directory.
    pub fn new() -> Result<FakeHome, String> {
        let (dir, _registered) = crate::util::cleanup::temp_dir("conformance-home-")?;
        Ok(FakeHome { dir, _registered })
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// The in-memory tree of a windows or managed case, kept by the harness so a restarted adapter
/// is sent the tree as it is now. It follows the tree's own name rules, so what it sends is what
/// the live tree holds: on a Windows target names compare case-insensitively (upper-cased as
/// D-GLOB-5 folds, D-WIN-1) and keep the case they were first written in, and `\` separates as
/// `/` does.
#[derive(Debug, Clone)]
pub struct MemModel {
    windows: bool,
    entries: BTreeMap<String, TreeValue>,
}

impl MemModel {
    /// The scenario's tree.
    pub fn new(s: &Scenario) -> MemModel {
        MemModel { windows: s.platform == Platform::Windows, entries: s.tree.clone() }
    }

    fn segments<'a>(&self, path: &'a str) -> Vec<&'a str> {
        let split: Vec<&str> = if self.windows { path.split(['/', '\\']).collect() } else { path.split('/').collect() };
        split.into_iter().filter(|s| !s.is_empty() && *s != ".").collect()
    }

    fn fold(&self, name: &str) -> String {
        if self.windows {
            reference::Platform::Windows.fold_case(name)
        } else {
            name.to_string()
        }
    }

    /// Whether `entry`'s first `n` segments name the same entry as `segs`.
    fn same_prefix(&self, entry: &[&str], segs: &[&str]) -> bool {
        entry.len() >= segs.len() && entry.iter().zip(segs).all(|(a, b)| self.fold(a) == self.fold(b))
    }

    /// `path` spelled as the tree stores it: each segment that names an existing entry (a file,
    /// or a folder holding entries) takes that entry's stored case.
    fn stored(&self, path: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for seg in self.segments(path) {
            let depth = out.len();
            let mut prefix: Vec<&str> = out.iter().map(String::as_str).collect();
            prefix.push(seg);
            let found = self.entries.keys().find_map(|k| {
                let ks = self.segments(k);
                if self.same_prefix(&ks, &prefix) {
                    ks.get(depth).map(|s| s.to_string())
                } else {
                    None
                }
            });
            out.push(found.unwrap_or_else(|| seg.to_string()));
        }
        out
    }

    /// The stored keys of `segs` and of everything below it.
    fn at_or_below(&self, segs: &[String]) -> Vec<String> {
        let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
        self.entries.keys().filter(|k| self.same_prefix(&self.segments(k), &segs)).cloned().collect()
    }

    /// Writes a file, replacing whatever stands at `path` (a folder with everything below it);
    /// a file in its way becomes a folder, as the harness does on a host tree. A link in its way
    /// is refused, as on a host tree.
    pub fn write(&mut self, path: &str, bytes: Vec<u8>) -> Result<(), String> {
        self.place(path, TreeValue::File(bytes))
    }

    /// The link among `segs`' folders, if any: nothing is placed through it.
    fn link_in_way(&self, segs: &[String]) -> Option<String> {
        (1..segs.len())
            .map(|n| segs.iter().take(n).map(String::as_str).collect::<Vec<_>>().join("/"))
            .find(|above| matches!(self.entries.get(above), Some(TreeValue::Symlink(_))))
    }

    fn place(&mut self, path: &str, value: TreeValue) -> Result<(), String> {
        let segs = self.stored(path);
        if let Some(link) = self.link_in_way(&segs) {
            return Err(format!("'{path}' crosses the link '{link}' (the harness never writes through a link)"));
        }
        // A file in the way becomes a folder; whatever stands at the path goes.
        for n in 1..segs.len() {
            let above = segs.iter().take(n).map(String::as_str).collect::<Vec<_>>().join("/");
            if !matches!(self.entries.get(&above), Some(TreeValue::Dir) | None) {
                self.entries.remove(&above);
            }
        }
        for k in self.at_or_below(&segs) {
            self.entries.remove(&k);
        }
        self.entries.insert(segs.join("/"), value);
        Ok(())
    }

    /// Removes an entry and everything below it; an error, as on a host tree, when there is
    /// none.
    pub fn delete(&mut self, path: &str) -> Result<(), String> {
        let segs = self.stored(path);
        let gone = self.at_or_below(&segs);
        if gone.is_empty() {
            return Err(format!("delete '{path}': '{path}' does not exist"));
        }
        for k in gone {
            self.entries.remove(&k);
        }
        Ok(())
    }

    /// Moves a file or link (a step renames no folder) to `to`, placed as [`MemModel::write`]
    /// places a file.
    pub fn rename(&mut self, from: &str, to: &str) -> Result<(), String> {
        let (from_segs, to_segs) = (self.stored(from), self.stored(to));
        let from_strs: Vec<&str> = from_segs.iter().map(String::as_str).collect();
        let to_strs: Vec<&str> = to_segs.iter().map(String::as_str).collect();
        if from_segs.len() > to_segs.len() && self.same_prefix(&from_strs, &to_strs) {
            return Err(format!("rename '{from}' to '{to}': '{to}' holds '{from}'"));
        }
        if let Some(link) = self.link_in_way(&to_segs) {
            return Err(format!("'{to}' crosses the link '{link}' (the harness never writes through a link)"));
        }
        let key = from_segs.join("/");
        match self.entries.remove(&key) {
            Some(TreeValue::Dir) => {
                self.entries.insert(key, TreeValue::Dir);
                Err(format!("rename: '{from}' is a directory (only files are renamed)"))
            }
            // No link lies in `to`'s way (checked above), so the placing cannot fail.
            Some(value) => self.place(to, value),
            None if self.at_or_below(&from_segs).is_empty() => Err(format!("rename: '{from}' does not exist")),
            None => Err(format!("rename: '{from}' is a directory (only files are renamed)")),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn model(windows: bool, files: &[&str]) -> MemModel {
        let entries = files.iter().map(|p| (p.to_string(), TreeValue::File(b"x".to_vec()))).collect();
        MemModel { windows, entries }
    }

    fn keys(m: &MemModel) -> Vec<&str> {
        m.entries.keys().map(String::as_str).collect()
    }

    #[test]
    fn a_windows_model_folds_names_and_keeps_the_stored_case() {
        let mut m = model(true, &[".elowen/rules/api/old.md", ".elowen/rules/keep.md"]);
        m.delete(r".ELOWEN\rules\API").unwrap();
        assert!(m.delete(".elowen/rules/api").unwrap_err().contains("does not exist"));
        assert_eq!(keys(&m), [".elowen/rules/keep.md"]);
        m.write(".Elowen/RULES/New.md", b"n".to_vec()).unwrap();
        m.write(".elowen/rules/KEEP.md", b"k".to_vec()).unwrap();
        assert_eq!(keys(&m), [".elowen/rules/New.md", ".elowen/rules/keep.md"]);
        m.rename(".elowen/rules/new.MD", "b/c.md").unwrap();
        assert_eq!(keys(&m), [".elowen/rules/keep.md", "b/c.md"]);
    }

    #[test]
    fn a_posix_model_is_case_sensitive() {
        let mut m = model(false, &["api/old.md"]);
        assert!(m.delete("API").is_err());
        assert_eq!(keys(&m), ["api/old.md"]);
        assert!(m.rename("API/old.md", "x").unwrap_err().contains("does not exist"));
    }

    #[test]
    fn a_write_replaces_a_folder_and_a_file_in_its_way() {
        let mut m = model(true, &["rules", "api/old.md", "api/deep/er.md", "apiary.md"]);
        m.write("rules/a.md", b"a".to_vec()).unwrap();
        m.write("API", b"now a file".to_vec()).unwrap();
        assert_eq!(keys(&m), ["api", "apiary.md", "rules/a.md"]);
        assert!(m.rename("rules", "x").unwrap_err().contains("directory"));
        m.rename("apiary.md", "api/x.md").unwrap();
        assert!(m.rename("api/x.md", "API").unwrap_err().contains("holds"));
        assert_eq!(keys(&m), ["api/x.md", "rules/a.md"]);
    }

    #[test]
    fn a_write_never_crosses_a_link() {
        let mut m = model(false, &[]);
        m.entries.insert("lnk".into(), TreeValue::Symlink("/etc".into()));
        m.entries.insert("f.md".into(), TreeValue::File(b"f".to_vec()));
        assert!(m.write("lnk/x.md", b"x".to_vec()).unwrap_err().contains("crosses the link 'lnk'"));
        assert!(m.rename("f.md", "lnk/f.md").is_err());
        assert_eq!(keys(&m), ["f.md", "lnk"]);
    }
}
