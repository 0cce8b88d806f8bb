//! The revalidating discovery cache ([`Config::discovery_cache`], off by default): what one
//! session keeps between triggers so that a trigger pays for what changed, not for the whole
//! rules tree (seed 000, "Cost and limits": "a very large .elowen/rules tree costs a directory
//! walk per trigger").
//!
//! The uncached walk of [`crate::discover`] stays the definition, and the cache must give the
//! same observations: every trigger still visits every folder and every module file, but asks
//! each only for its identity ([`Ident`]: device, inode, kind, size, modification and change
//! time, one `fstatat` below the held root that opens nothing). A folder is relisted only when
//! its own identity changed (an entry added, removed or renamed changes it); a file is reread
//! and parsed again only when its identity changed; the compiled glob index is rebuilt only when
//! some module's outcome did.
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
//!    content by a path string. Folders are checked from the top down and a folder is trusted
//!    only while its parent is, so an identity asked through a folder that was swapped for a
//!    link is the identity of a folder that changed (a rename changes the renamed folder's
//!    change time): it is relisted, through the confined source, which refuses the link.
//!
//! Nested instruction files are kept per folder the same way: the folder's identity decides
//! whether its winning name still wins, the winner's identity whether its content is the one
//! read before. Only a chain of real folders and a winner that is a regular file are kept.
//!
//! A file client's tree (a Windows computer's, a managed project's guest) offers no identity;
//! there the cache is not used and every trigger walks as the definition does.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::config::Config;
use crate::diag::Diagnostic;
use crate::discover::{self, Listed, Loaded, Modules, Parsed};
use crate::glob::CompiledRules;
use crate::relpath::RelPath;
use crate::resolver;
use crate::source::{Entry, EntryKind, Ident, Source};

/// One folder of the rules tree as last listed.
#[derive(Debug)]
struct CachedDir {
    ident: Ident,
    /// Changed within the timestamp granularity of the check that listed it: list it again.
    racy: bool,
    entries: Arc<[Entry]>,
    /// The pass that last visited it; what a pass did not visit is gone.
    seen: AtomicU64,
}

/// One module file as last read.
#[derive(Debug)]
struct CachedFile {
    /// `None`: never trusted (a module reached through a link, or a file that is no regular
    /// file any more); it is read again on every pass.
    ident: Option<Ident>,
    racy: bool,
    parsed: Arc<Parsed>,
    seen: AtomicU64,
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
    dirs: HashMap<RelPath, CachedDir>,
    files: HashMap<RelPath, CachedFile>,
    nested: HashMap<RelPath, CachedNested>,
    /// The diagnostics of the last pass's listings, and what it answered.
    walk_diags: Vec<Diagnostic>,
    last: Option<Arc<Modules>>,
    pass: u64,
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
        EntryKind::LinkInsideFile | EntryKind::LinkInsideDir | EntryKind::LinkOutside | EntryKind::LinkBroken(_)
    )
}

/// What revisiting one folder found, and what the cache must learn from it.
#[derive(Default)]
struct Visit {
    listed: Listed,
    dir: Option<(RelPath, CachedDir)>,
    /// Files read again: path, new state, whether the outcome differs from the one kept.
    files: Vec<(RelPath, CachedFile, bool)>,
}

impl DiscoveryCache {
    /// An empty cache.
    pub(crate) fn new() -> DiscoveryCache {
        DiscoveryCache::default()
    }

    /// The rule modules, as [`discover::modules`] finds them, revalidated against what the
    /// last pass kept.
    pub(crate) fn modules(&mut self, source: &Source, config: &Config) -> Arc<Modules> {
        if !matches!(source, Source::Host(_)) {
            return Arc::new(discover::modules(source, config));
        }
        self.pass += 1;
        let pass = self.pass;
        let racy = racy_from(config.timestamp_granularity);
        let mut diags = Vec::new();
        let mut changed = self.last.is_none();
        let mut level = Vec::new();
        if discover::rules_dir_walkable(source, config, &mut diags) {
            level.push(config.rules_dir.clone());
        }
        while !level.is_empty() {
            let visits = discover::par_chunks(&level, discover::PARALLEL_DIRS_FROM, |part| {
                part.iter().map(|dir| self.visit(source, config, dir, pass, racy)).collect::<Vec<_>>()
            });
            let mut next = Vec::new();
            for visit in visits.into_iter().flatten() {
                next.extend(visit.listed.dirs);
                diags.extend(visit.listed.diags);
                if let Some((path, dir)) = visit.dir {
                    self.dirs.insert(path, dir);
                }
                for (path, file, differs) in visit.files {
                    changed |= differs;
                    self.files.insert(path, file);
                }
            }
            level = next;
        }
        self.dirs.retain(|_, d| d.seen.load(Ordering::Relaxed) == pass);
        let before = self.files.len();
        self.files.retain(|_, f| f.seen.load(Ordering::Relaxed) == pass);
        changed |= self.files.len() != before || diags != self.walk_diags;
        match &self.last {
            Some(last) if !changed => Arc::clone(last),
            _ => {
                let built = Arc::new(self.build(source, diags.clone()));
                self.walk_diags = diags;
                self.last = Some(Arc::clone(&built));
                built
            }
        }
    }

    /// Revisits one folder: its entries as kept when its identity is unchanged (links classified
    /// again), else as listed now; and each module file's outcome.
    fn visit(&self, source: &Source, config: &Config, dir: &RelPath, pass: u64, racy: i128) -> Visit {
        let mut visit = Visit::default();
        let ident = source.identity(dir).filter(Ident::is_dir);
        let kept = self.dirs.get(dir).filter(|d| Some(d.ident) == ident && !d.racy);
        let entries = match kept {
            Some(d) => {
                d.seen.store(pass, Ordering::Relaxed);
                Arc::clone(&d.entries)
            }
            None => match source.list(Some(dir)) {
                Ok(list) => {
                    let entries: Arc<[Entry]> = list.into();
                    if let Some(ident) = ident {
                        let cached = CachedDir {
                            ident,
                            racy: ident.changed_ns() >= racy,
                            entries: Arc::clone(&entries),
                            seen: AtomicU64::new(pass),
                        };
                        visit.dir = Some((dir.clone(), cached));
                    }
                    entries
                }
                Err(diag) => {
                    visit.listed.diags.extend(diag);
                    return visit;
                }
            },
        };
        let platform = source.platform();
        for entry in entries.iter() {
            if kept.is_some() && is_link(&entry.kind) {
                // A link's target can change while the folder does not: judge it again.
                let Some(path) = dir.join(&entry.name) else { continue };
                let Some(kind) = source.entry_kind(&path) else { continue };
                let fresh = Entry { name: entry.name.clone(), kind };
                discover::sort_entry(platform, config, dir, &fresh, &mut visit.listed);
            } else {
                discover::sort_entry(platform, config, dir, entry, &mut visit.listed);
            }
        }
        for (path, plain) in &visit.listed.files {
            if let Some(update) = self.file(source, config, path, *plain, pass, racy) {
                visit.files.push(update);
            }
        }
        visit
    }

    /// One module file: `None` when the kept outcome still holds, else the outcome read now.
    fn file(
        &self,
        source: &Source,
        config: &Config,
        path: &RelPath,
        plain: bool,
        pass: u64,
        racy: i128,
    ) -> Option<(RelPath, CachedFile, bool)> {
        let kept = self.files.get(path);
        // Taken before the read: should the file change meanwhile, the next check sees another
        // identity and reads it again.
        let ident = if plain { source.identity(path).filter(Ident::is_file) } else { None };
        if let (Some(ident), Some(k)) = (ident, kept) {
            if k.ident == Some(ident) && !k.racy {
                k.seen.store(pass, Ordering::Relaxed);
                return None;
            }
        }
        let parsed = discover::parse_one(source, config, path, plain);
        let differs = kept.is_none_or(|k| *k.parsed != parsed);
        let cached = CachedFile {
            ident,
            racy: ident.is_some_and(|i| i.changed_ns() >= racy),
            parsed: Arc::new(parsed),
            seen: AtomicU64::new(pass),
        };
        Some((path.clone(), cached, differs))
    }

    /// The modules of the kept outcomes, ordered by path, with one compiled glob index built on
    /// as many threads as discovery uses.
    fn build(&self, source: &Source, mut diagnostics: Vec<Diagnostic>) -> Modules {
        let mut files: Vec<(&RelPath, &Parsed)> = self.files.iter().map(|(p, f)| (p, &*f.parsed)).collect();
        files.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let platform = source.platform();
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
        resolver::for_paths_with(source, config, modules, touched, diags, &mut lookup)
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
