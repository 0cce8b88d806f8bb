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
}
