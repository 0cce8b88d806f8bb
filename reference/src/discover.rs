//! Discovery (seed 000, "Format and discovery"): the root instruction file by name priority, the
//! rule modules under `.elowen/rules`, and the nested instruction files of touched folders.
//!
//! Discovery is not cached ("Cost and limits": "Every trigger re-lists and re-reads, which is what
//! makes a changed file visible on the next access"): this walk is the definition. The opt-in
//! revalidating cache (cache.rs, which uses this file) reuses its pieces and must give the same answers.
//! Partial success is a value: every function returns what it found and the diagnostics of what
//! it refused.

use std::sync::Arc;

use crate::config::Config;
use crate::diag::{Code, Diagnostic};
use crate::frontmatter::{self, Kind};
use crate::glob::{BatchMatcher, CompiledGlobs, CompiledRules, RulesBuilder};
use crate::hash::sha256_hex;
use crate::relpath::{Platform, RelPath};
use crate::source::{Entry, EntryKind, ReadOutcome, Source};

/// An instruction file as it is sent: its path, its content and the SHA-256 of that content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// The /-form root-relative path.
    pub path: RelPath,
    /// The sent content (BOM and, for rule modules, frontmatter stripped), held once and shared
    /// by every module list, activation and record that carries it.
    pub content: Arc<str>,
    /// Lower-case hex SHA-256 of `content`.
    pub sha256: String,
}

impl Loaded {
    pub(crate) fn new(path: RelPath, content: &str) -> Loaded {
        Loaded { path, sha256: sha256_hex(content.as_bytes()), content: Arc::from(content) }
    }
}

/// The rule modules of one walk of `.elowen/rules`.
#[derive(Debug, Clone)]
pub struct Modules {
    /// Modules without a condition, ordered by path.
    pub unconditional: Vec<Loaded>,
    /// Modules with `paths`, ordered by path; the index is the owner in `rules`.
    pub conditional: Vec<Loaded>,
    /// Every conditional module's globs, compiled into one set.
    pub rules: CompiledRules,
    /// What was refused.
    pub diagnostics: Vec<Diagnostic>,
}

/// Reads one instruction file and decodes it, turning every refusal into a diagnostic.
pub(crate) fn read_text(
    source: &Source,
    path: &RelPath,
    confined: bool,
    cap: u64,
    diags: &mut Vec<Diagnostic>,
) -> Option<String> {
    decode(source.read(path, confined, cap), path, diags)
}

/// Decodes a read, turning every refusal into a diagnostic.
fn decode(outcome: ReadOutcome, path: &RelPath, diags: &mut Vec<Diagnostic>) -> Option<String> {
    match outcome {
        ReadOutcome::Absent => None,
        ReadOutcome::Refused(code, message) => {
            diags.push(Diagnostic::new(code, path.as_str(), message));
            None
        }
        ReadOutcome::Bytes(bytes) => match String::from_utf8(bytes) {
            Ok(text) => Some(text),
            Err(e) => {
                let at = e.utf8_error().valid_up_to();
                diags.push(Diagnostic::new(
                    Code::FileNotUtf8,
                    path.as_str(),
                    format!("'{path}' is not valid utf-8 (first invalid byte at offset {at})"),
                ));
                None
            }
        },
    }
}

/// Loads the instruction file of `dir` (`None`: the root) by name priority. The first name
/// present as a non-directory wins the folder, even when it is then refused (decision D-ROOT-2:
/// a refused winner never falls back to a lower-priority name).
pub fn instruction_file(
    source: &Source,
    config: &Config,
    dir: Option<&RelPath>,
    diags: &mut Vec<Diagnostic>,
) -> Option<Loaded> {
    let (found, diag) = source.find_first(dir, &config.names);
    diags.extend(diag);
    let path = found?;
    // The root file follows a symlink as PI's own loader does; a nested one is confined.
    let confined = dir.is_some();
    let text = read_text(source, &path, confined, config.file_cap, diags)?;
    Some(Loaded::new(path, frontmatter::strip_bom(&text)))
}

pub(crate) fn is_module_name(platform: Platform, name: &str, ext: &str) -> bool {
    match platform {
        Platform::Posix => name.ends_with(ext),
        Platform::Windows => {
            name.len() >= ext.len()
                && name.get(name.len() - ext.len()..).is_some_and(|tail| tail.eq_ignore_ascii_case(ext))
        }
    }
}

/// The module files of `.elowen/rules`, each read and parsed, sorted by path, with what the
/// listing refused. Of each parse, only what `sieve` keeps is kept: a fresh sieve judges each
/// share of the work, so a discovery that needs some modules drops the others as they are
/// parsed (refusals are always kept: they are reported).
fn found_modules<S, F>(source: &Source, config: &Config, sieve: F) -> (Vec<(RelPath, Parsed)>, Vec<Diagnostic>)
where
    F: Fn() -> S + Sync,
    S: FnMut(Parsed) -> Option<Parsed>,
{
    let mut diags = Vec::new();
    let mut found: Vec<(RelPath, Parsed)> = Vec::new();
    // A failed managed listing is logged once by every discovery, whatever it then looks up
    // (decision D-MAN-1); the session's sort and dedup fold it with the lookups' own reports.
    if let Err(diag) = source.available() {
        diags.extend(diag);
    } else if rules_dir_walkable(source, config, &mut diags) {
        walk(source, config, &sieve, &mut found, &mut diags);
    }
    // One walk lists every path once, so no two are equal and the unstable sort is exact.
    found.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    (found, diags)
}

/// Walks `.elowen/rules` recursively and parses every module.
pub fn modules(source: &Source, config: &Config) -> Modules {
    modules_keeping(source, config, Keep::All)
}

/// Which modules a discovery keeps ([`modules_keeping`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Keep<'a> {
    /// Every module: the whole discovery ([`modules`]).
    All,
    /// The unconditional modules, for a session's startup prefix.
    Unconditional,
    /// The conditional modules with a pattern that matches a path of one trigger's batch.
    Matching(&'a [RelPath]),
}

/// A discovery that keeps only what its caller uses: the same walk, reads and diagnostics for
/// every `keep`, but of the modules only those `keep` names; every other module is dropped as
/// soon as it is parsed, so the discovery holds the content it returns and one share's module
/// at a time, not the whole tree's content (issue 13). A trigger keeps what its batch
/// activates: resolving the batch against that gives what resolving it against [`modules`]
/// gives (a trigger never returns an unconditional module; the startup prefix holds them). A
/// startup keeps the unconditional modules, the prefix.
pub(crate) fn modules_keeping(source: &Source, config: &Config, keep: Keep<'_>) -> Modules {
    let platform = source.platform();
    let (found, mut diags) = found_modules(source, config, || {
        let mut matcher = match keep {
            Keep::Matching(batch) => Some(BatchMatcher::new(platform, batch)),
            Keep::All | Keep::Unconditional => None,
        };
        move |parsed| match (keep, parsed) {
            (Keep::All, parsed) | (_, parsed @ Parsed::Refused(_)) => Some(parsed),
            (Keep::Unconditional, parsed @ Parsed::Unconditional(_)) => Some(parsed),
            (Keep::Matching(_), Parsed::Conditional(m, globs)) if matcher.as_mut().is_some_and(|b| b.any(&globs)) => {
                Some(Parsed::Conditional(m, globs))
            }
            (_, Parsed::Conditional(..) | Parsed::Unconditional(_) | Parsed::Absent) => None,
        }
    });
    // Each share's globs compiled into one set on its own thread, owners counted from the
    // share's first conditional module, then the sets put end to end.
    let compiled = par_chunks(&found, PARALLEL_FROM, |part| {
        let count = part.iter().filter(|(_, p)| matches!(p, Parsed::Conditional(..))).count();
        (compile_share(platform, part.iter().map(|(_, p)| p)), count)
    });
    let mut shares = Vec::with_capacity(compiled.len());
    let mut before = 0;
    for (rules, count) in compiled {
        shares.push((rules, before));
        before += count;
    }
    let (mut unconditional, mut conditional) = (Vec::new(), Vec::new());
    for (_, parsed) in found {
        match parsed {
            Parsed::Unconditional(m) => unconditional.push(m),
            Parsed::Conditional(m, _) => conditional.push(m),
            Parsed::Refused(d) => diags.push(d),
            Parsed::Absent => {}
        }
    }
    Modules { unconditional, conditional, rules: CompiledRules::concat(shares), diagnostics: diags }
}

/// One module file, read and parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Parsed {
    Unconditional(Loaded),
    /// A conditional module and its validated globs.
    Conditional(Loaded, Vec<String>),
    Refused(Diagnostic),
    Absent,
}

/// Reads and parses one module file. `plain`: it was listed as a regular file in a walk of real
/// directories under the real root, so no realpath is needed (D-LINK; the read still refuses to
/// follow a link that replaced it since).
pub(crate) fn parse_one(source: &Source, config: &Config, path: &RelPath, plain: bool) -> Parsed {
    let outcome =
        if plain { source.read_listed_file(path, config.file_cap) } else { source.read(path, true, config.file_cap) };
    parse_read(path, outcome)
}

/// Parses what reading the module file `path` gave.
fn parse_read(path: &RelPath, outcome: ReadOutcome) -> Parsed {
    let mut diags = Vec::new();
    let Some(text) = decode(outcome, path, &mut diags) else {
        return diags.pop().map_or(Parsed::Absent, Parsed::Refused);
    };
    match frontmatter::parse(&text) {
        Ok(parsed) => match parsed.kind {
            Kind::Unconditional => Parsed::Unconditional(Loaded::new(path.clone(), parsed.body)),
            Kind::Conditional(globs) => Parsed::Conditional(Loaded::new(path.clone(), parsed.body), globs),
        },
        Err(r) => Parsed::Refused(Diagnostic::new(r.code, path.as_str(), r.message).with_line(r.line)),
    }
}

/// Below this many files one thread reads them all; above it the files are shared out among the
/// machine's cores (at most four), in order-preserving chunks.
pub(crate) const PARALLEL_FROM: usize = 256;

/// The set of one share's conditional modules' globs, owners counted from its first module.
pub(crate) fn compile_share<'a>(platform: Platform, parsed: impl Iterator<Item = &'a Parsed>) -> CompiledRules {
    let mut rules = RulesBuilder::new(platform);
    for (next, globs) in
        parsed.filter_map(|p| if let Parsed::Conditional(_, g) = p { Some(g) } else { None }).enumerate()
    {
        rules.add_compiled(next, CompiledGlobs::validated(globs.clone()));
    }
    rules.build()
}

/// `.elowen` and `.elowen/rules` must be real directories. A link at either is not walked, and
/// one that leaves the root is reported as an escape (decision D-LINK-3).
pub(crate) fn rules_dir_walkable(source: &Source, config: &Config, diags: &mut Vec<Diagnostic>) -> bool {
    let mut prefix: Option<RelPath> = None;
    for seg in config.rules_dir.segments() {
        let path = match &prefix {
            None => RelPath::parse(seg),
            Some(p) => p.join(seg),
        };
        let Some(path) = path else { return false };
        match source.entry_kind(&path) {
            Some(EntryKind::Dir) => {}
            Some(EntryKind::LinkOutside | EntryKind::LinkRefused) => {
                diags.push(Diagnostic::new(
                    Code::InstructionModuleEscape,
                    path.as_str(),
                    format!("'{path}' is a link out of the project (symlinks out of the project are refused)"),
                ));
                return false;
            }
            _ => return false,
        }
        prefix = Some(path);
    }
    true
}

/// What listing one directory found.
#[derive(Default)]
pub(crate) struct Listed {
    pub(crate) dirs: Vec<RelPath>,
    /// Module files, each with whether it is a plain file (`false`: a link to a file inside).
    pub(crate) files: Vec<(RelPath, bool)>,
    pub(crate) diags: Vec<Diagnostic>,
}

/// Sorts one listed entry of `dir` into what the walk enters, what it reads and what it reports.
pub(crate) fn sort_entry(platform: Platform, config: &Config, dir: &RelPath, entry: &Entry, out: &mut Listed) {
    let Some(path) = dir.join(&entry.name) else { return };
    let is_module = is_module_name(platform, &entry.name, &config.module_extension);
    // Per-entry refusals are reported before Markdown names are filtered.
    match entry.kind {
        EntryKind::Dir => out.dirs.push(path),
        EntryKind::File if is_module => out.files.push((path, true)),
        EntryKind::LinkInsideFile if is_module => out.files.push((path, false)),
        EntryKind::LinkOutside | EntryKind::LinkRefused => out.diags.push(Diagnostic::new(
            Code::InstructionModuleEscape,
            path.as_str(),
            format!("'{path}' is a symlink out of the project (it is not loaded)"),
        )),
        EntryKind::LinkBroken(ref reason) if is_module => out.diags.push(Diagnostic::new(
            Code::FileUnreadable,
            path.as_str(),
            format!("'{path}' is a link that does not resolve ({reason})"),
        )),
        EntryKind::Other if is_module => out.diags.push(Diagnostic::new(
            Code::FileNotRegular,
            path.as_str(),
            format!("'{path}' is not a regular file"),
        )),
        // Directory links inside the rules tree stay unwalked.
        _ => {}
    }
}

/// What one level of the walk found: the folders of the next level, the module files read and
/// parsed (what the sieve kept), and what was refused.
#[derive(Default)]
struct Level {
    dirs: Vec<RelPath>,
    found: Vec<(RelPath, Parsed)>,
    diags: Vec<Diagnostic>,
}

/// Lists the directories of one level of the walk and reads each one's module files as soon as
/// it is listed, through the handle it was listed through ([`Source::read_in`]): a file is not
/// reached from the root again, and a folder's handle is closed before the next is opened. A
/// link to a file inside is read by its path, resolved beneath the root. `spread`: the level is
/// listed on one thread, so a folder of many files has them read on several.
fn list_level<S>(
    source: &Source,
    config: &Config,
    level: &[RelPath],
    sieve: &(impl Fn() -> S + Sync),
    spread: bool,
) -> Level
where
    S: FnMut(Parsed) -> Option<Parsed>,
{
    let platform = source.platform();
    let mut out = Level::default();
    let mut keep = sieve();
    for dir in level {
        let (entries, folder) = match source.list_folder(Some(dir)) {
            Ok(listed) => listed,
            Err(diag) => {
                out.diags.extend(diag);
                continue;
            }
        };
        let mut listed = Listed::default();
        for entry in &entries {
            sort_entry(platform, config, dir, entry, &mut listed);
        }
        drop(entries);
        out.dirs.append(&mut listed.dirs);
        out.diags.append(&mut listed.diags);
        let read = |path: &RelPath, plain: bool| {
            if plain {
                parse_read(path, source.read_in(&folder, path, config.file_cap))
            } else {
                parse_one(source, config, path, false)
            }
        };
        if spread && listed.files.len() >= PARALLEL_FROM {
            let shares = par_chunks(&listed.files, PARALLEL_FROM, |part| {
                let mut keep = sieve();
                part.iter()
                    .filter_map(|(path, plain)| keep(read(path, *plain)).map(|p| (path.clone(), p)))
                    .collect::<Vec<_>>()
            });
            for share in shares {
                out.found.extend(share);
            }
        } else {
            for (path, plain) in listed.files {
                if let Some(kept) = keep(read(&path, plain)) {
                    out.found.push((path, kept));
                }
            }
        }
    }
    out
}

/// Walks the rules tree level by level, reading each folder's module files as it is listed; a
/// wide level is listed on several threads. Only real directories are entered, so the walk ends
/// on any tree, links and loops included.
fn walk<S>(
    source: &Source,
    config: &Config,
    sieve: &(impl Fn() -> S + Sync),
    found: &mut Vec<(RelPath, Parsed)>,
    diags: &mut Vec<Diagnostic>,
) where
    S: FnMut(Parsed) -> Option<Parsed>,
{
    let mut level = vec![config.rules_dir.clone()];
    while !level.is_empty() {
        let mut next = Vec::new();
        let spread = level.len() < PARALLEL_DIRS_FROM;
        for listed in par_chunks(&level, PARALLEL_DIRS_FROM, |part| list_level(source, config, part, sieve, spread)) {
            next.extend(listed.dirs);
            found.extend(listed.found);
            diags.extend(listed.diags);
        }
        level = next;
    }
}

/// Below this many directories in a level, one thread lists them all.
pub(crate) const PARALLEL_DIRS_FROM: usize = 64;

/// Applies `f` to consecutive chunks of `items`, on up to four threads when there are at least
/// `from` items, and returns the results in order.
pub(crate) fn par_chunks<T: Sync, R: Send>(items: &[T], from: usize, f: impl Fn(&[T]) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(4);
    if items.len() < from || threads < 2 {
        return vec![f(items)];
    }
    let chunk = items.len().div_ceil(threads);
    let f = &f;
    std::thread::scope(|scope| {
        let handles: Vec<_> = items.chunks(chunk).map(|part| scope.spawn(move || f(part))).collect();
        handles
            .into_iter()
            .zip(items.chunks(chunk))
            // A worker that panicked (the callers have no panicking path) would lose its share;
            // redo it here rather than lose it.
            .map(|(h, part)| h.join().unwrap_or_else(|_| f(part)))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::HostSource;

    /// Above `PARALLEL_FROM` files discovery reads on several threads; what it finds must be what
    /// one thread finds, in the same order.
    #[test]
    fn parallel_discovery_finds_what_sequential_discovery_finds() {
        let dir = tempfile::tempdir().unwrap();
        let rules = dir.path().join(".elowen/rules");
        for i in 0..(PARALLEL_FROM * 2) {
            let sub = rules.join(format!("d{}", i % 7));
            std::fs::create_dir_all(&sub).unwrap();
            let text = match i % 4 {
                0 => format!("---\npaths: [\"src/m{i}/**\"]\n---\nrule {i}\n"),
                1 => format!("plain {i}\n"),
                2 => format!("---\npath: [x]\n---\nbad {i}\n"),
                _ => format!("---\npaths: [\"**/*.t{i}\"]\n---\nrule {i}\n"),
            };
            std::fs::write(sub.join(format!("m{i}.md")), text).unwrap();
        }
        let source = Source::Host(HostSource::new(dir.path()).unwrap());
        let config = Config::modules();
        let parallel = modules(&source, &config);
        // One thread, one file at a time, each reached from the root by its path.
        let mut files: Vec<RelPath> = (0..(PARALLEL_FROM * 2))
            .filter_map(|i| RelPath::parse(&format!(".elowen/rules/d{}/m{i}.md", i % 7)))
            .collect();
        files.sort();
        let sequential: Vec<Parsed> = files.iter().map(|p| parse_one(&source, &config, p, true)).collect();
        let unconditional: Vec<&Loaded> =
            sequential.iter().filter_map(|p| if let Parsed::Unconditional(m) = p { Some(m) } else { None }).collect();
        let conditional: Vec<&Loaded> =
            sequential.iter().filter_map(|p| if let Parsed::Conditional(m, _) = p { Some(m) } else { None }).collect();
        let refused = sequential.iter().filter(|p| matches!(p, Parsed::Refused(_))).count();
        assert_eq!(parallel.unconditional.iter().collect::<Vec<_>>(), unconditional);
        assert_eq!(parallel.conditional.iter().collect::<Vec<_>>(), conditional);
        assert_eq!(parallel.diagnostics.len(), refused);
        assert_eq!(parallel.conditional.len(), PARALLEL_FROM);
        // Every conditional module is matched through its share's set under its global index.
        for (i, m) in parallel.conditional.iter().enumerate() {
            let n: usize = m.content.trim_start_matches("rule ").trim().parse().unwrap();
            let touched = if n.is_multiple_of(4) { format!("src/m{n}/x") } else { format!("a/b.t{n}") };
            let mut hits = Vec::new();
            parallel.rules.matching(&RelPath::parse(&touched).unwrap(), &mut hits);
            assert!(hits.contains(&i), "module {n} (index {i}) not matched by {touched}: {hits:?}");
        }
    }
}
