//! The revalidating discovery cache ([`Config::discovery_cache`], off by default): what one
//! session keeps between triggers so that a trigger pays for what changed, not for the whole
//! rules tree (seed 000, "Cost and limits": "a very large .elowen/rules tree costs a directory
//! walk per trigger").
//!
//! The uncached walk of [`crate::discover`] stays the definition, and the cache must give the
//! same observations: every trigger still visits every folder and every module file, but asks
//! each only for its identity ([`Ident`]: device, inode, kind, size, modification and change
//! time). The kept tree mirrors the rules tree, and a trigger walks it from the top down,
//! looking at each folder and each module file with one `fstatat` (last component not followed,
//! nothing opened) below the nearest held directory handle: the rules folder's, one per folder
//! of the first wide level, and a new one every [`REOPEN_EVERY`] levels further down, so that
//! a lookup walks at most that many components (opening a handle per folder costs about three
//! lookups' worth: measured, benches/README.md). A folder is
//! relisted only when its own identity changed (an entry added, removed or renamed changes it);
//! a file is reread and parsed again only when its identity changed; the modules and their
//! compiled glob index are rebuilt only when some outcome did, else the last ones are answered
//! as they are. The walk is shared out over the reference's threads as discovery is, and holds
//! a bounded number of handles: the parents of one level of fewer than
//! [`discover::PARALLEL_DIRS_FROM`] folders, then one chain of folders per thread.
//!
//! Three guards keep it the definition's equal:
//!
//! 1. The racy case (git's): a timestamp has the filesystem's granularity, so a file written,
//!    checked, and written again within one tick with the same size keeps its identity. An
//!    entry whose last change lies within [`Config::timestamp_granularity`] of the check that
//!    recorded it is not trusted at the next check, and is read again until it has aged.
//! 2. Links are never cached across: a link entry is classified again on every trigger and a
//!    module reached through a link is reread every time, because its target can change while
//!    the link itself does not.
//! 3. Confinement is not weakened: identities only decide whether a version read before may be
//!    reused. Every listing and every read still goes through the confined source (held
//!    directory handles, `openat2(RESOLVE_BENEATH)` or the reference's walk), so nothing reaches
//!    content by a path string or by the revalidation's handles, which only ever ask for
//!    metadata. The rules folder's handle is opened through real directories only; every other
//!    lookup passes only folders checked before it in the same walk (top down) and trusted: a
//!    trusted folder's entries are the ones it was listed with, since replacing, renaming or
//!    linking an entry changes the folder's own change time, which no caller can set back. A
//!    lookup that passes a folder swapped for a link meanwhile answers the identity of another
//!    entry or none, which matches nothing kept, so the entry is relisted or reread through the
//!    confined source, which refuses the link; a folder that is not trusted is relisted, and
//!    what it holds is checked again below it the same way. One window stays, and it reads
//!    nothing: a folder moved away and replaced by a link to it between the check of its parent
//!    and the lookups below it, within one walk, lets that walk keep the versions read before
//!    (inside the root, by the confined source) of the entries that moved; the next check sees
//!    the parent's change. A handle per folder would close it at about three lookups' cost.
//!    Should a worker fail, the kept tree is dropped and the definition's walk answers.
//!
//! What is kept of a module is its outcome, without a conditional module's content: its hash
//! and globs decide activation and dedupe, and the content of the modules a batch activates is
//! read again when they are resolved, so the tree does not hold the content of every
//! conditional module for the session's life. A module that changed between the check and that
//! read is taken as the read finds it ([`DiscoveryCache::for_paths`]).
//!
//! Nested instruction files are kept per folder the same way: the folder's identity decides
//! whether its winning name still wins, the winner's identity whether its content is the one
//! read before. Only a chain of real folders and a winner that is a regular file are kept.
//!
//! A file client's tree (a Windows computer's, a managed project's guest) offers no identity;
//! there the cache is not used and every trigger walks as the definition does.
//!
//! # Limit: a change that moves no identity
//! The cache trusts identities, as git's index trusts its stat data (git's racy-clean rule): a
//! change that moves no device, inode, kind, size, modification or change time is not seen.
//! Ordinary writes, renames, replacements and relinks all move one; a write through a shared
//! memory map may not. Linux stamps a mapped file at the first write to a clean page, so later
//! writes to the same page, until it is written back, leave every timestamp as it was (checked
//! on ext4 and tmpfs, Linux 6.x). Such a write to a nested AGENTS.md keeps the version read
//! before served, and to a module file keeps its old `paths:`, until some change moves the
//! identity; the content of a conditional module a batch activates is read again when it is
//! resolved ([`DiscoveryCache::for_paths`]), so a module is never sent stale. The uncached walk,
//! the definition, re-reads every file at every trigger and sees every such write (seed 000,
//! "Cost and limits": "Every trigger re-lists and re-reads, which is what makes a changed file
//! visible on the next access"; decision D-CACHE-1).
//!
//! The content is not revalidated instead, because reading every kept file on every trigger is
//! the cost the cache exists to avoid ("a very large .elowen/rules tree costs a directory walk
//! per trigger"), and reading only the files already sent would leave a module's `paths:` as
//! blind as before while making the nested-file cache save nothing but a few lookups. The cache
//! is off by default; a host whose instruction files are written through mappings leaves it off.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustix::fd::OwnedFd;

use crate::config::Config;
use crate::confine::{open_subdir, stat_entry, stat_handle};
use crate::diag::Diagnostic;
use crate::discover::{self, Listed, Loaded, Modules, Parsed};
use crate::glob::{BatchMatcher, CompiledRules};
use crate::relpath::{Platform, RelPath};
use crate::resolver;
use crate::source::{Entry, EntryKind, Ident, Source};

/// One folder of the rules tree as last listed, and what it holds.
#[derive(Debug)]
struct DirNode {
    /// Its name in its parent (empty for the rules folder itself).
    name: Box<str>,
    /// Its identity when it was listed; `None`: never listed, or listed without an identity
    /// (its handle could not be opened), so it is listed again at the next check.
    ident: Option<Ident>,
    /// Changed within the timestamp granularity of the check that listed it: list it again.
    racy: bool,
    /// The listing failed: its diagnostic, if it gave one; the folder then holds nothing. Boxed,
    /// since every folder of the tree carries the field and almost none a failure.
    failed: Option<Box<Option<Diagnostic>>>,
    /// The sub-folders the walk enters, in listing order.
    dirs: Vec<DirNode>,
    /// The module files listed as regular files, in listing order.
    files: Vec<FileNode>,
    /// The links (classified again at every check) and the module names that are no regular
    /// file, in listing order: the entries that report or may turn into a module.
    specials: Vec<Special>,
}

/// One module file listed as a regular file, as last read.
#[derive(Debug)]
struct FileNode {
    name: Box<str>,
    /// Its identity, taken before the read; `None`: not trusted (it was no regular file when
    /// looked at), read again at every check.
    ident: Option<Ident>,
    racy: bool,
    /// The outcome; `None` before the first read.
    parsed: Option<Parsed>,
}

/// A link entry, or a module name that is neither a regular file nor a folder.
#[derive(Debug)]
struct Special {
    name: Box<str>,
    /// What it is at this check; `None`: it went away (a link judged again and found gone).
    kind: Option<EntryKind>,
    /// The module it leads to at this check (a link to a file inside, read every time).
    parsed: Option<Parsed>,
}

impl DirNode {
    fn new(name: &str) -> DirNode {
        DirNode {
            name: name.into(),
            ident: None,
            racy: false,
            failed: None,
            dirs: Vec::new(),
            files: Vec::new(),
            specials: Vec::new(),
        }
    }

    /// Whether two listings of one folder hold the same entries, as the walk sorts them.
    fn same_listing(&self, other: &DirNode) -> bool {
        self.failed == other.failed
            && self.dirs.iter().map(|d| &d.name).eq(other.dirs.iter().map(|d| &d.name))
            && self.files.iter().map(|f| &f.name).eq(other.files.iter().map(|f| &f.name))
            && self.specials.iter().map(|s| (&s.name, &s.kind)).eq(other.specials.iter().map(|s| (&s.name, &s.kind)))
    }
}

/// One folder's nested instruction file as last looked up.
#[derive(Debug, Clone)]
struct CachedNested {
    dir: Ident,
    /// The winner's identity when there is one; `None` when no name was present.
    file: Option<Ident>,
    racy: bool,
    found: Option<Loaded>,
}

/// What one session keeps between triggers ([`crate::Session`] holds one when
/// [`Config::discovery_cache`] is on).
#[derive(Debug, Default)]
pub(crate) struct DiscoveryCache {
    /// The rules folder as last walked; `None` when it was not walkable.
    tree: Option<DirNode>,
    nested: HashMap<RelPath, CachedNested>,
    /// The diagnostics of the last check of the rules folder's own path, and what it answered.
    top_diags: Vec<Diagnostic>,
    last: Option<Arc<Modules>>,
}

/// What the cache keeps of a parse: all of it, but for a conditional module's content, which is
/// dropped (its hash stays) and read again only when a trigger activates the module
/// ([`DiscoveryCache::for_paths`]). A session over a large rules tree then holds the content of
/// its startup prefix, which the journal keeps anyway, and not the content of every conditional
/// module besides (issue 13). The kept module's `content` is empty and is never sent.
fn kept(parsed: Parsed) -> Parsed {
    static EMPTY: std::sync::OnceLock<Arc<str>> = std::sync::OnceLock::new();
    match parsed {
        Parsed::Conditional(m, globs) => {
            Parsed::Conditional(Loaded { content: Arc::clone(EMPTY.get_or_init(|| Arc::from(""))), ..m }, globs)
        }
        other => other,
    }
}

/// The time a check starts, in nanoseconds since the epoch, less the granularity: an entry last
/// changed at or after it is racy.
fn racy_from(granularity: Duration) -> i128 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    i128::try_from(now).unwrap_or(i128::MAX) - i128::try_from(granularity.as_nanos()).unwrap_or(i128::MAX)
}

fn is_link(kind: &EntryKind) -> bool {
    matches!(
        kind,
        EntryKind::LinkInsideFile
            | EntryKind::LinkInsideDir
            | EntryKind::LinkOutside
            | EntryKind::LinkBroken(_)
            | EntryKind::LinkRefused
    )
}

/// The root-relative path of `name` in the folder `dir` (both from listings, so normal).
fn child_path(dir: &str, name: &str) -> RelPath {
    RelPath::trusted(&format!("{dir}/{name}"))
}

/// One check's fixed inputs.
struct Check<'a> {
    source: &'a Source,
    config: &'a Config,
    platform: Platform,
    racy: i128,
}

/// How many levels below a handle the revalidation looks before it opens the next handle.
const REOPEN_EVERY: usize = 8;

/// A folder of one level of the walk, with its parent's handle to open it from.
struct Item<'t> {
    node: &'t mut DirNode,
    parent: Option<Arc<OwnedFd>>,
    path: String,
}

impl Check<'_> {
    /// Checks one folder and its files and specials, not its sub-folders: the folder is `rel`
    /// below the handle `fd` (`rel` empty: `fd` is the folder's own handle), and each lookup
    /// starts from that handle. Answers whether any outcome changed.
    fn folder(&self, node: &mut DirNode, fd: Option<&OwnedFd>, rel: &mut String, path: &str) -> bool {
        let stat = |rel: &str| {
            let fd = fd?;
            let st = if rel.is_empty() { stat_handle(fd) } else { stat_entry(fd, rel) };
            st.ok().map(|st| Ident::of(&st))
        };
        let ident = stat(rel).filter(Ident::is_dir);
        let trusted = ident.is_some() && ident == node.ident && !node.racy;
        let mut changed = false;
        if !trusted {
            changed |= self.relist(node, ident, path);
        }
        let len = rel.len();
        for file in &mut node.files {
            if len > 0 {
                rel.push('/');
            }
            rel.push_str(&file.name);
            let now = stat(rel).filter(Ident::is_file);
            rel.truncate(len);
            if file.parsed.is_some() && now.is_some() && now == file.ident && !file.racy {
                continue;
            }
            let parsed = kept(discover::parse_one(self.source, self.config, &child_path(path, &file.name), true));
            changed |= file.parsed.as_ref() != Some(&parsed);
            file.ident = now;
            file.racy = now.is_some_and(|i| i.changed_ns() >= self.racy);
            file.parsed = Some(parsed);
        }
        for special in &mut node.specials {
            let at = child_path(path, &special.name);
            let kind = match &special.kind {
                Some(kind) if !is_link(kind) => Some(kind.clone()),
                // A link's target can change while the folder does not: judge it again.
                _ if trusted => self.source.entry_kind(&at),
                listed => listed.clone(),
            };
            let module = discover::is_module_name(self.platform, &special.name, &self.config.module_extension);
            let parsed = (module && kind == Some(EntryKind::LinkInsideFile))
                .then(|| kept(discover::parse_one(self.source, self.config, &at, false)));
            changed |= kind != special.kind || parsed != special.parsed;
            special.kind = kind;
            special.parsed = parsed;
        }
        changed
    }

    /// Lists `node` again through the confined source, keeping what it held before under the
    /// same names (their identities are checked next). Answers whether the listing differs.
    fn relist(&self, node: &mut DirNode, ident: Option<Ident>, path: &str) -> bool {
        let mut fresh = DirNode::new(&node.name);
        fresh.ident = ident;
        fresh.racy = ident.is_some_and(|i| i.changed_ns() >= self.racy);
        let differs = match self.source.list(Some(&RelPath::trusted(path))) {
            Err(diag) => {
                fresh.failed = Some(Box::new(diag));
                !fresh.same_listing(node)
            }
            Ok(entries) => {
                let mut old_dirs: HashMap<Box<str>, DirNode> =
                    std::mem::take(&mut node.dirs).into_iter().map(|d| (d.name.clone(), d)).collect();
                let mut old_files: HashMap<Box<str>, FileNode> =
                    std::mem::take(&mut node.files).into_iter().map(|f| (f.name.clone(), f)).collect();
                // An entry the last listing did not hold under its name and kind.
                let mut added = false;
                for Entry { name, kind } in entries {
                    let module = discover::is_module_name(self.platform, &name, &self.config.module_extension);
                    match kind {
                        EntryKind::Dir => fresh.dirs.push(old_dirs.remove(name.as_str()).unwrap_or_else(|| {
                            added = true;
                            DirNode::new(&name)
                        })),
                        EntryKind::File if module => {
                            fresh.files.push(old_files.remove(name.as_str()).unwrap_or_else(|| {
                                added = true;
                                FileNode { name: name.into(), ident: None, racy: false, parsed: None }
                            }))
                        }
                        kind if is_link(&kind) || (kind == EntryKind::Other && module) => {
                            fresh.specials.push(Special { name: name.into(), kind: Some(kind), parsed: None });
                        }
                        _ => {}
                    }
                }
                // The listing is the same when nothing was added, nothing of the last one is
                // left over, and the specials and the failure are as they were (the entries come
                // sorted by name, so the same names are in the same order).
                added
                    || !old_dirs.is_empty()
                    || !old_files.is_empty()
                    || node.failed.is_some()
                    || !fresh
                        .specials
                        .iter()
                        .map(|s| (&s.name, &s.kind))
                        .eq(node.specials.iter().map(|s| (&s.name, &s.kind)))
            }
        };
        // Held for the session's life: no spare capacity (a folder of one sub-folder would
        // otherwise hold room for four, and the tree has as many folders as the rules tree).
        fresh.dirs.shrink_to_fit();
        fresh.files.shrink_to_fit();
        fresh.specials.shrink_to_fit();
        // The specials' modules are read by the caller; keep the last ones to compare with.
        for special in &mut fresh.specials {
            if let Some(old) = node.specials.iter_mut().find(|s| s.name == special.name) {
                special.parsed = old.parsed.take();
            }
        }
        *node = fresh;
        differs
    }

    /// Checks `node` and everything below it, depth first: `node` is `rel` below the handle
    /// `fd`, `levels` folders down from it. A new handle is opened every [`REOPEN_EVERY`]
    /// levels, so that a lookup walks a few components, and one chain of handles is open.
    fn subtree(
        &self,
        node: &mut DirNode,
        fd: Option<&OwnedFd>,
        rel: &mut String,
        levels: usize,
        path: &mut String,
    ) -> bool {
        let mut changed = self.folder(node, fd, rel, path);
        let (rel_len, path_len) = (rel.len(), path.len());
        for child in &mut node.dirs {
            path.push('/');
            path.push_str(&child.name);
            if rel_len > 0 {
                rel.push('/');
            }
            rel.push_str(&child.name);
            if levels + 1 >= REOPEN_EVERY {
                let handle = fd.and_then(|fd| open_subdir(fd, rel).ok());
                changed |= self.subtree(child, handle.as_ref(), &mut String::new(), 0, path);
            } else {
                changed |= self.subtree(child, fd, rel, levels + 1, path);
            }
            rel.truncate(rel_len);
            path.truncate(path_len);
        }
        changed
    }

    /// Checks the whole tree below `root` (its handle `fd`): level by level while levels are
    /// narrow, then each folder of the first wide level with its subtree, on several threads.
    /// `None` when a worker failed (the caller then answers the definition's walk).
    fn tree(&self, root: &mut DirNode, fd: Option<Arc<OwnedFd>>, path: &str) -> Option<bool> {
        let mut changed = self.folder(root, fd.as_deref(), &mut String::new(), path);
        let mut level: Vec<Item<'_>> = root
            .dirs
            .iter_mut()
            .map(|node| {
                let path = format!("{path}/{}", node.name);
                Item { node, parent: fd.clone(), path }
            })
            .collect();
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(4);
        while !level.is_empty() {
            if level.len() >= discover::PARALLEL_DIRS_FROM && threads > 1 {
                let chunk = level.len().div_ceil(threads);
                let results = std::thread::scope(|scope| {
                    let handles: Vec<_> = level
                        .chunks_mut(chunk)
                        .map(|part| scope.spawn(move || part.iter_mut().fold(false, |c, item| c | self.item(item))))
                        .collect();
                    handles.into_iter().map(|h| h.join().ok()).collect::<Vec<_>>()
                });
                for r in results {
                    changed |= r?;
                }
                break;
            }
            let mut next = Vec::new();
            for Item { node, parent, path } in level {
                let own = parent.and_then(|p| open_subdir(&p, &node.name).ok()).map(Arc::new);
                changed |= self.folder(node, own.as_deref(), &mut String::new(), &path);
                for child in &mut node.dirs {
                    let path = format!("{path}/{}", child.name);
                    next.push(Item { node: child, parent: own.clone(), path });
                }
            }
            level = next;
        }
        Some(changed)
    }

    fn item(&self, item: &mut Item<'_>) -> bool {
        let own = item.parent.as_ref().and_then(|p| open_subdir(p, &item.node.name).ok());
        let mut path = std::mem::take(&mut item.path);
        self.subtree(item.node, own.as_ref(), &mut String::new(), 0, &mut path)
    }
}

impl DiscoveryCache {
    /// An empty cache.
    pub(crate) fn new() -> DiscoveryCache {
        DiscoveryCache::default()
    }

    /// The rule modules, as [`discover::modules`] finds them, revalidated against what the
    /// last check kept.
    pub(crate) fn modules(&mut self, source: &Source, config: &Config) -> Arc<Modules> {
        let Source::Host(host) = source else {
            return Arc::new(discover::modules(source, config));
        };
        let check =
            Check { source, config, platform: source.platform(), racy: racy_from(config.timestamp_granularity) };
        let mut top = Vec::new();
        let mut changed = self.last.is_none();
        if discover::rules_dir_walkable(source, config, &mut top) {
            let root = self.tree.get_or_insert_with(|| DirNode::new(""));
            let fd = host.dir_handle(&config.rules_dir);
            match check.tree(root, fd, config.rules_dir.as_str()) {
                Some(c) => changed |= c,
                None => {
                    // A worker failed: what it kept is not to be trusted.
                    self.tree = None;
                    self.last = None;
                    return Arc::new(discover::modules(source, config));
                }
            }
        } else {
            changed |= self.tree.take().is_some();
        }
        changed |= top != self.top_diags;
        match &self.last {
            Some(last) if !changed => Arc::clone(last),
            _ => {
                let built = Arc::new(self.build(source, config, top.clone()));
                self.top_diags = top;
                self.last = Some(Arc::clone(&built));
                built
            }
        }
    }

    /// The modules of the kept outcomes: the walk's diagnostics in the walk's order (level by
    /// level, each folder's entries in listing order), then the modules ordered by path, with
    /// one compiled glob index built on as many threads as discovery uses.
    fn build(&self, source: &Source, config: &Config, mut diagnostics: Vec<Diagnostic>) -> Modules {
        let platform = source.platform();
        let mut parsed: Vec<&Parsed> = Vec::new();
        let mut level: Vec<(&DirNode, String)> =
            self.tree.iter().map(|t| (t, config.rules_dir.as_str().to_string())).collect();
        while !level.is_empty() {
            let mut next = Vec::new();
            for (node, path) in level {
                if let Some(diag) = &node.failed {
                    diagnostics.extend(diag.as_ref().iter().cloned());
                }
                let dir = RelPath::trusted(&path);
                for special in &node.specials {
                    let Some(kind) = &special.kind else { continue };
                    let mut listed = Listed::default();
                    discover::sort_entry(
                        platform,
                        config,
                        &dir,
                        &Entry { name: special.name.to_string(), kind: kind.clone() },
                        &mut listed,
                    );
                    diagnostics.extend(listed.diags);
                    parsed.extend(special.parsed.iter());
                }
                parsed.extend(node.files.iter().filter_map(|f| f.parsed.as_ref()));
                for child in &node.dirs {
                    next.push((child, format!("{path}/{}", child.name)));
                }
            }
            level = next;
        }
        fn key(p: &Parsed) -> Option<&str> {
            match p {
                Parsed::Unconditional(m) | Parsed::Conditional(m, _) => Some(m.path.as_str()),
                Parsed::Refused(d) => Some(d.path.as_str()),
                Parsed::Absent => None,
            }
        }
        let mut files: Vec<(&str, &Parsed)> = parsed.into_iter().filter_map(|p| key(p).map(|k| (k, p))).collect();
        files.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let shares = discover::par_chunks(&files, discover::PARALLEL_FROM, |part| {
            (discover::compile_share(platform, part.iter().map(|(_, p)| *p)), part.len())
        });
        let mut unconditional = Vec::new();
        let mut conditional = Vec::new();
        let mut parts = Vec::new();
        let mut at = 0;
        for (rules, len) in shares {
            parts.push((rules, conditional.len()));
            for (_, parsed) in files.get(at..at + len).unwrap_or(&[]) {
                match parsed {
                    Parsed::Unconditional(m) => unconditional.push(m.clone()),
                    Parsed::Conditional(m, _) => conditional.push(m.clone()),
                    Parsed::Refused(d) => diagnostics.push(d.clone()),
                    Parsed::Absent => {}
                }
            }
            at += len;
        }
        let rules = if parts.is_empty() { CompiledRules::empty() } else { CompiledRules::concat(parts) };
        Modules { unconditional, conditional, rules, diagnostics }
    }

    /// [`resolver::for_paths`] with each folder's nested instruction file revalidated.
    pub(crate) fn for_paths(
        &mut self,
        source: &Source,
        config: &Config,
        modules: &Modules,
        touched: &[RelPath],
        diags: &mut Vec<Diagnostic>,
    ) -> Vec<Loaded> {
        if !matches!(source, Source::Host(_)) {
            return resolver::for_paths(source, config, modules, touched, diags);
        }
        let racy = racy_from(config.timestamp_granularity);
        // Folders seen to be real directories in this batch: a folder is kept only below them.
        let mut real: HashSet<String> = HashSet::new();
        let nested = &mut self.nested;
        let mut lookup = |folder: &RelPath, diags: &mut Vec<Diagnostic>| {
            let parent_real = folder.as_str().rsplit_once('/').is_none_or(|(p, _)| real.contains(p));
            let Some(ident) = source.identity(folder).filter(|i| i.is_dir() && parent_real) else {
                nested.remove(folder);
                return discover::instruction_file(source, config, Some(folder), diags);
            };
            real.insert(folder.as_str().to_string());
            if let Some(k) = nested.get(folder).filter(|k| k.dir == ident && !k.racy) {
                let still = match (&k.file, &k.found) {
                    (Some(file), Some(found)) => source.identity(&found.path) == Some(*file),
                    (None, None) => true,
                    _ => false,
                };
                if still {
                    return k.found.clone();
                }
            }
            let found = discover::instruction_file(source, config, Some(folder), diags);
            match keepable(source, config, folder, ident, found.as_ref(), racy) {
                Some(cached) => nested.insert(folder.clone(), cached),
                None => nested.remove(folder),
            };
            found
        };
        let resolved = resolver::for_paths_with(source, config, modules, touched, diags, &mut lookup);
        self.read_activated(source, config, resolved, touched, diags)
    }

    /// Reads the content of each conditional module a batch activates, which the kept tree does
    /// not hold ([`kept`]). A module read as the version the check kept (the same hash) is sent
    /// as read. One that changed since the check is taken as this read finds it, as a walk that
    /// read it at this moment would: sent when it is still a conditional module that the batch
    /// matches, reported when it is refused now, dropped otherwise; and it is read again at the
    /// next check. Nested instruction files, read by the lookups, pass as they are.
    fn read_activated(
        &mut self,
        source: &Source,
        config: &Config,
        resolved: Vec<Loaded>,
        touched: &[RelPath],
        diags: &mut Vec<Diagnostic>,
    ) -> Vec<Loaded> {
        let below = format!("{}/", config.rules_dir.as_str());
        let mut matcher = None;
        let mut out = Vec::with_capacity(resolved.len());
        for module in resolved {
            if !module.path.as_str().starts_with(&below) {
                out.push(module);
                continue;
            }
            match discover::parse_one(source, config, &module.path, false) {
                Parsed::Conditional(fresh, _) if fresh.sha256 == module.sha256 => out.push(fresh),
                now => {
                    self.forget(config, &module.path);
                    match now {
                        Parsed::Conditional(fresh, globs)
                            if matcher
                                .get_or_insert_with(|| BatchMatcher::new(source.platform(), touched))
                                .any(&globs) =>
                        {
                            out.push(fresh);
                        }
                        Parsed::Refused(d) => diags.push(d),
                        _ => {}
                    }
                }
            }
        }
        out
    }

    /// Makes the next check read the module file at `path` again, whatever its identity.
    fn forget(&mut self, config: &Config, path: &RelPath) {
        let Some(rest) = path.as_str().strip_prefix(config.rules_dir.as_str()).and_then(|r| r.strip_prefix('/')) else {
            return;
        };
        let mut segments: Vec<&str> = rest.split('/').collect();
        let Some(name) = segments.pop() else { return };
        let mut node = self.tree.as_mut();
        for segment in segments {
            node = node.and_then(|n| n.dirs.iter_mut().find(|d| &*d.name == segment));
        }
        if let Some(file) = node.and_then(|n| n.files.iter_mut().find(|f| &*f.name == name)) {
            file.ident = None;
        }
    }
}

/// What to keep of a folder's fresh lookup, taken after it: `None` when it must not be kept.
/// Kept are a folder with none of the names, and one whose winner is a regular file that was
/// read without a diagnostic, when no candidate name is a link (a link to a directory is passed
/// over today and could point at a file tomorrow while the folder stays the same). Identities
/// taken after the lookup can only be newer than what it read, so a change in between is seen
/// at the next check.
fn keepable(
    source: &Source,
    config: &Config,
    folder: &RelPath,
    dir: Ident,
    found: Option<&Loaded>,
    racy: i128,
) -> Option<CachedNested> {
    let mut newest = dir.changed_ns();
    let mut file = None;
    for name in &config.names {
        let path = folder.join(name)?;
        let Some(ident) = source.identity(&path) else { continue };
        if !(ident.is_file() || ident.is_dir()) {
            return None;
        }
        if file.is_none() && ident.is_file() {
            file = Some((path, ident));
        }
    }
    let file = match (file, found) {
        (None, None) => None,
        (Some((path, ident)), Some(f)) if path == f.path => {
            newest = newest.max(ident.changed_ns());
            Some(ident)
        }
        // The winner was refused (too large, not UTF-8) or changed meanwhile: not kept.
        _ => return None,
    };
    // The folder's identity must still be the one the lookup started from.
    if source.identity(folder) != Some(dir) {
        return None;
    }
    Some(CachedNested { dir, file, racy: newest >= racy, found: found.cloned() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::HostSource;

    /// The kept tree holds no conditional module's content, so the modules a batch activates are
    /// read when resolved; one that changed after the check is taken as that read finds it, and
    /// read again at the next check.
    #[test]
    fn activated_modules_are_read_as_they_are_when_resolved() {
        let dir = tempfile::tempdir().unwrap();
        let rules = dir.path().join(".elowen/rules");
        std::fs::create_dir_all(&rules).unwrap();
        let module = rules.join("a.md");
        std::fs::write(&module, "---\npaths: [\"src/**\"]\n---\nfirst\n").unwrap();
        let source = Source::Host(HostSource::new(dir.path()).unwrap());
        let config = Config { discovery_cache: true, ..Config::modules() };
        let batch = [RelPath::parse("src/x.ts").unwrap()];
        let mut cache = DiscoveryCache::new();
        let resolve = |cache: &mut DiscoveryCache, modules: &Modules| {
            let mut diags = Vec::new();
            let got = cache.for_paths(&source, &config, modules, &batch, &mut diags);
            (got.iter().map(|m| (m.content.to_string(), m.sha256.clone())).collect::<Vec<_>>(), diags)
        };
        let checked = cache.modules(&source, &config);
        assert!(checked.conditional.iter().all(|m| m.content.is_empty()), "the kept tree holds no content");
        let (got, diags) = resolve(&mut cache, &checked);
        assert_eq!(got, vec![("first\n".to_string(), sha256_of("first\n"))]);
        assert!(diags.is_empty());
        // Changed after the check, resolved against the checked modules: the read decides.
        std::fs::write(&module, "---\npaths: [\"src/**\"]\n---\nsecond\n").unwrap();
        let (got, _) = resolve(&mut cache, &checked);
        assert_eq!(got, vec![("second\n".to_string(), sha256_of("second\n"))]);
        std::fs::write(&module, "---\npath: [\"src/**\"]\n---\nthird\n").unwrap();
        let (got, diags) = resolve(&mut cache, &checked);
        assert!(got.is_empty());
        assert_eq!(diags.iter().map(|d| d.code).collect::<Vec<_>>(), vec![crate::Code::FrontmatterUnknownKey]);
        std::fs::write(&module, "---\npaths: [\"docs/**\"]\n---\nfourth\n").unwrap();
        let (got, diags) = resolve(&mut cache, &checked);
        assert!(got.is_empty() && diags.is_empty());
        // The next check finds the version now there (its identity changed, and the resolution
        // that saw it change made the kept version untrusted besides).
        std::fs::write(&module, "---\npaths: [\"src/**\"]\n---\nfifth!\n").unwrap();
        let again = cache.modules(&source, &config);
        assert_eq!(again.conditional.iter().map(|m| m.sha256.clone()).collect::<Vec<_>>(), vec![sha256_of("fifth!\n")]);
        let (got, _) = resolve(&mut cache, &again);
        assert_eq!(got, vec![("fifth!\n".to_string(), sha256_of("fifth!\n"))]);
    }

    /// A folder listed again with the same entries (here every check lists every folder again:
    /// all of them changed within the granularity) is no change, and the last modules are
    /// answered as they are; one that lost an entry is a change.
    #[test]
    fn a_relisting_with_the_same_entries_is_no_change() {
        let dir = tempfile::tempdir().unwrap();
        let rules = dir.path().join(".elowen/rules");
        std::fs::create_dir_all(rules.join("a/b")).unwrap();
        std::fs::write(rules.join("a/b/x.md"), "---\npaths: [\"src/**\"]\n---\nx\n").unwrap();
        std::fs::write(rules.join("a/y.md"), "y\n").unwrap();
        let source = Source::Host(HostSource::new(dir.path()).unwrap());
        let config =
            Config { discovery_cache: true, timestamp_granularity: Duration::from_secs(3600), ..Config::modules() };
        let mut cache = DiscoveryCache::new();
        let first = cache.modules(&source, &config);
        let second = cache.modules(&source, &config);
        assert!(Arc::ptr_eq(&first, &second), "an unchanged relisting rebuilt the modules");
        std::fs::remove_file(rules.join("a/y.md")).unwrap();
        let third = cache.modules(&source, &config);
        assert!(!Arc::ptr_eq(&second, &third));
        assert!(third.unconditional.is_empty() && third.conditional.len() == 1);
        std::fs::remove_dir_all(rules.join("a/b")).unwrap();
        assert!(cache.modules(&source, &config).conditional.is_empty());
    }

    /// The racy window, which no scenario can reach: on a filesystem whose change times are
    /// coarser than the edits (FAT's two seconds, a kernel without fine-grained timestamps), a
    /// file rewritten in place with the same size within the tick of the check that kept it
    /// keeps its identity. This machine's kernel gives every change after a `stat` a new change
    /// time, so the test forges it: after each edit the kept identity is set to the one the edit
    /// left. An entry changed within the granularity of its check is read or listed again
    /// whatever its identity; once it has aged past it, an unchanged identity is trusted.
    #[test]
    fn an_entry_changed_within_the_granularity_is_checked_again_whatever_its_identity() {
        let dir = tempfile::tempdir().unwrap();
        let rules = dir.path().join(".elowen/rules");
        std::fs::create_dir_all(&rules).unwrap();
        let file = rules.join("g.md");
        std::fs::write(&file, "v1 always\n").unwrap();
        let source = Source::Host(HostSource::new(dir.path()).unwrap());
        let ident = |path: &std::path::Path| Ident::of(&rustix::fs::lstat(path).unwrap());
        let bodies = |m: &Modules| m.unconditional.iter().map(|m| m.content.to_string()).collect::<Vec<_>>();
        let forge = |cache: &mut DiscoveryCache| {
            let root = cache.tree.as_mut().unwrap();
            root.ident = Some(ident(&rules));
            for f in &mut root.files {
                f.ident = Some(ident(&rules.join(&*f.name)));
            }
        };
        // Everything is within an hour of its check: racy, so checked again.
        let config =
            Config { discovery_cache: true, timestamp_granularity: Duration::from_secs(3600), ..Config::modules() };
        let mut cache = DiscoveryCache::new();
        assert_eq!(bodies(&cache.modules(&source, &config)), vec!["v1 always\n"]);
        std::fs::write(&file, "v2 always\n").unwrap();
        forge(&mut cache);
        assert_eq!(bodies(&cache.modules(&source, &config)), vec!["v2 always\n"], "a racy file was trusted");
        std::fs::write(rules.join("h.md"), "h always\n").unwrap();
        forge(&mut cache);
        assert_eq!(
            bodies(&cache.modules(&source, &config)),
            vec!["v2 always\n", "h always\n"],
            "a racy folder was trusted"
        );
        // No granularity and a pause: every entry has aged past its check, so an identity that
        // did not change is trusted (here, forged, it hides the edit and the new file).
        let config = Config { timestamp_granularity: Duration::ZERO, ..config };
        let mut cache = DiscoveryCache::new();
        let first = bodies(&cache.modules(&source, &config));
        // A second check after the pause keeps every entry as aged past it.
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(bodies(&cache.modules(&source, &config)), first, "an unchanged tree was read differently");
        std::fs::write(&file, "v3 always\n").unwrap();
        std::fs::write(rules.join("i.md"), "i always\n").unwrap();
        forge(&mut cache);
        assert_eq!(bodies(&cache.modules(&source, &config)), first, "an aged, unchanged identity was not trusted");
        // A modification time ahead of the clock (skew, an unpacked archive) is racy however
        // small the granularity: the file is read again at each check. It is set to the last
        // nanosecond of the next second, which a change time read as seconds less nanoseconds
        // would put behind the clock.
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let ahead = UNIX_EPOCH + Duration::new(now.as_secs() + 1, 999_999_999);
        let write_ahead = |text: &str| {
            std::fs::write(&file, text).unwrap();
            let times = std::fs::FileTimes::new().set_modified(ahead);
            std::fs::File::options().write(true).open(&file).unwrap().set_times(times).unwrap();
        };
        write_ahead("v4 always\n");
        let mut cache = DiscoveryCache::new();
        assert!(bodies(&cache.modules(&source, &config)).contains(&"v4 always\n".to_string()));
        write_ahead("v5 always\n");
        forge(&mut cache);
        assert!(
            bodies(&cache.modules(&source, &config)).contains(&"v5 always\n".to_string()),
            "a file changed ahead of the clock was trusted"
        );
    }

    fn sha256_of(text: &str) -> String {
        crate::hash::sha256_hex(text.as_bytes())
    }
}
