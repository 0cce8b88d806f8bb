//! `forPaths` (seed 000, "Ordering and composition"): the instruction files one batch of touched
//! paths activates, in resolver order — nested instruction files shallow to deep, then every
//! conditional rule whose globs match at least one touched path, ordered by relative path.
//! Unconditional rules are never returned here.

use std::collections::BTreeSet;

use crate::config::Config;
use crate::diag::Diagnostic;
use crate::discover::{self, Loaded, Modules};
use crate::relpath::{Platform, RelPath};
use crate::source::Source;
use crate::winpath;

/// The folders whose instruction files a batch of touched paths brings in: every folder from the
/// first under the root down to each touched file's own, never the root (its file is already in
/// the system prompt) and never inside the private `.elowen` tree; shallow to deep, then by path
/// (decision D-ORDER-1), each folder once.
pub fn nested_folders(platform: Platform, config: &Config, touched: &[RelPath]) -> Vec<RelPath> {
    let key = |p: &RelPath| match platform {
        Platform::Posix => p.as_str().to_string(),
        Platform::Windows => winpath::fold(p.as_str()),
    };
    let private = key(&config.private_dir);
    let mut seen = BTreeSet::new();
    let mut out: Vec<RelPath> = Vec::new();
    for path in touched {
        for folder in path.ancestor_folders() {
            let k = key(&folder);
            let first = k.split('/').next().unwrap_or("");
            if first == private || !seen.insert(k) {
                continue;
            }
            out.push(folder);
        }
    }
    out.sort_by(|a, b| a.depth().cmp(&b.depth()).then_with(|| a.cmp(b)));
    out
}

/// Resolves one batch against a fresh discovery of the rule modules.
pub fn for_paths(
    source: &Source,
    config: &Config,
    modules: &Modules,
    touched: &[RelPath],
    diags: &mut Vec<Diagnostic>,
) -> Vec<Loaded> {
    let mut lookup =
        |folder: &RelPath, diags: &mut Vec<Diagnostic>| discover::instruction_file(source, config, Some(folder), diags);
    for_paths_with(source, config, modules, touched, diags, &mut lookup)
}

/// A folder's nested instruction file, by whatever means the caller keeps (a fresh lookup, or
/// the discovery cache's revalidated one).
pub(crate) type NestedLookup<'a> = dyn FnMut(&RelPath, &mut Vec<Diagnostic>) -> Option<Loaded> + 'a;

/// [`for_paths`] with the nested instruction files found by `nested`.
pub(crate) fn for_paths_with(
    source: &Source,
    config: &Config,
    modules: &Modules,
    touched: &[RelPath],
    diags: &mut Vec<Diagnostic>,
    nested: &mut NestedLookup<'_>,
) -> Vec<Loaded> {
    let mut out: Vec<Loaded> = Vec::new();
    for folder in nested_folders(source.platform(), config, touched) {
        if let Some(file) = nested(&folder, diags) {
            if !out.iter().any(|m| m.path == file.path) {
                out.push(file);
            }
        }
    }
    let mut owners = Vec::new();
    let mut hits = Vec::new();
    for path in touched {
        hits.clear();
        modules.rules.matching(path, &mut hits);
        owners.extend_from_slice(&hits);
    }
    owners.sort_unstable();
    owners.dedup();
    // `conditional` is ordered by path, so owner order is path order.
    out.extend(owners.into_iter().filter_map(|i| modules.conditional.get(i).cloned()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rps(v: &[&str]) -> Vec<RelPath> {
        v.iter().map(|s| RelPath::parse(s).unwrap()).collect()
    }

    #[test]
    fn folders_run_shallow_to_deep_across_the_batch_and_skip_elowen() {
        let touched = rps(&["b/c/x.ts", "a/y.ts", "b/z.ts", ".elowen/rules/r.md", "top.ts"]);
        let got = nested_folders(Platform::Posix, &Config::modules(), &touched);
        assert_eq!(got, rps(&["a", "b", "b/c"]));
    }

    #[test]
    fn windows_folders_are_one_folder_whatever_their_case() {
        let touched = rps(&["Src/x.ts", "src/y.ts"]);
        let got = nested_folders(Platform::Windows, &Config::modules(), &touched);
        assert_eq!(got, rps(&["Src"]));
    }

    /// A trigger's discovery keeps only what its batch activates; resolving a batch through it
    /// must give what resolving it through the whole discovery gives (and a startup's, the
    /// unconditional modules the whole discovery finds), on a POSIX host tree and on
    /// a Windows tree (case folded), below and above `PARALLEL_FROM` files.
    #[test]
    fn a_triggers_discovery_resolves_as_the_whole_discovery_does() {
        use crate::discover::{modules, modules_keeping, Keep, PARALLEL_FROM};
        use crate::source::{HostSource, MemSource, MemTree, Node};
        let text = |i: usize| match i % 6 {
            0 => format!("---\npaths: [\"src/m{}/**\"]\n---\nrule {i}\n", i % 5),
            1 => format!("plain {i}\n"),
            2 => format!("---\npath: [x]\n---\nbad {i}\n"),
            3 => format!("---\npaths: [\"**/*.t{}\", \"Docs/*.md\"]\n---\nrule {i}\n", i % 3),
            4 => format!("---\npaths: [\"src/?{}/*.ts\"]\n---\nrule {i}\n", i % 4),
            _ => format!("---\npaths: [\"src/m1/a.ts\"]\n---\nrule {i}\n"),
        };
        let batches: Vec<Vec<&str>> = vec![
            vec![],
            vec!["src/m1/a.ts"],
            vec!["SRC/M2/b.T1", "docs/x.md"],
            vec!["src/x3/c.ts", "src/m4/d/e.t0", "other/f.t2"],
            vec!["nothing/here"],
        ];
        for n in [40, PARALLEL_FROM * 3] {
            let dir = tempfile::tempdir().unwrap();
            let mut tree = MemTree::new(Platform::Windows);
            for i in 0..n {
                let rel = format!(".elowen/rules/d{}/m{i}.md", i % 7);
                let path = dir.path().join(&rel);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, text(i)).unwrap();
                tree.insert(&RelPath::parse(&rel).unwrap(), Node::File(text(i).into_bytes()));
            }
            let sources =
                [Source::Host(HostSource::new(dir.path()).unwrap()), Source::Mem(MemSource::windows("C:\\repo", tree))];
            let config = Config::modules();
            for source in &sources {
                let whole = modules(source, &config);
                let mut activated = 0;
                for batch in &batches {
                    let batch: Vec<RelPath> = batch.iter().map(|p| RelPath::parse(p).unwrap()).collect();
                    let (mut d1, mut d2) = (whole.diagnostics.clone(), Vec::new());
                    let want = for_paths(source, &config, &whole, &batch, &mut d1);
                    let part = modules_keeping(source, &config, Keep::Matching(&batch));
                    d2.extend(part.diagnostics.iter().cloned());
                    let got = for_paths(source, &config, &part, &batch, &mut d2);
                    assert_eq!(got, want, "{:?} with {n} modules, batch {batch:?}", source.platform());
                    assert_eq!(d2, d1, "{:?} with {n} modules, batch {batch:?}", source.platform());
                    assert!(part.unconditional.is_empty());
                    // Nothing the batch does not activate is kept.
                    assert!(part.conditional.len() <= want.len());
                    activated += want.len();
                }
                assert!(activated > 0 && !whole.diagnostics.is_empty());
                // A startup keeps the unconditional modules, in order, and every diagnostic.
                let prefix = modules_keeping(source, &config, Keep::Unconditional);
                assert_eq!(prefix.unconditional, whole.unconditional);
                assert_eq!(prefix.diagnostics, whole.diagnostics);
                assert!(prefix.conditional.is_empty() && !prefix.unconditional.is_empty());
            }
        }
    }
}
