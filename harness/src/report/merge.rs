//! Saved JSON reports (`conformance run --format json`) read back, and the shards of one run
//! (`run --shard K/N`, each perhaps on its own machine) merged into the report of the whole run
//! (`conformance report A.json B.json --merge`), which `conformance report` renders and
//! `conformance matrix --report` shows as a column.
//!
//! Shards merge only when they are of one run: the same suite version, the same implementation
//! (its whole hello), the same shard count, `--profile` and `--filter`, and no case in two of
//! them. A shard that is not there is named, and the merge refused unless the caller allows it;
//! the merged report then says which shards it lacks. Shard K of N holds the selected cases whose
//! 0-based position in corpus order is K-1 modulo N ([`crate::run::suite::Selection`]), so the
//! merged results are put back in corpus order from the shards alone, without the corpus.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::report::escape::{cut, FIELD_MAX};
use crate::report::formats::{Merged, RunInfo, Shard};
use crate::run::case::CaseResult;
use crate::run::wire::Hello;

/// A saved report: what rendering it again, merging it or showing it in a matrix needs.
#[derive(Debug, Clone)]
pub struct Saved {
    /// The file it was read from (`-` for one made by [`merge`]).
    pub path: PathBuf,
    /// How it was run.
    pub run: RunInfo,
    /// The implementation's hello.
    pub implementation: Hello,
    /// The ids of the cases whose result its manifest did not expect.
    pub unexpected: Vec<String>,
    /// Its results, in corpus order.
    pub results: Vec<CaseResult>,
}

/// The report as it is written; only the summary's `unexpected` is read back, every count is
/// worked out again from the results.
#[derive(serde::Deserialize)]
struct Wire {
    implementation: Hello,
    summary: WireSummary,
    results: Vec<CaseResult>,
    #[serde(flatten)]
    run: RunInfo,
}

#[derive(serde::Deserialize)]
struct WireSummary {
    unexpected: Vec<String>,
}

/// `s` quoted for an error message, cut to [`FIELD_MAX`].
fn quote(s: &str) -> String {
    format!("'{}'", cut(s, FIELD_MAX))
}

fn quote_opt(s: Option<&str>) -> String {
    s.map_or_else(|| "none".into(), quote)
}

/// Reads a saved report. The error names the file and, for a malformed one, the field
/// (`missing field `results``, `'shard' is 5/4`).
pub fn read(path: &Path) -> Result<Saved, String> {
    let wire: Wire = crate::util::input::read_json(path, crate::util::input::Kind::Report)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if let Some(s) = wire.run.shard {
        if s.of == 0 || s.index == 0 || s.index > s.of {
            return Err(format!("{}: 'shard' is {s} (expected 1 <= index <= of)", path.display()));
        }
    }
    Ok(Saved {
        path: path.to_path_buf(),
        run: wire.run,
        implementation: wire.implementation,
        unexpected: wire.summary.unexpected,
        results: wire.results,
    })
}

/// `shard 2/4 is missing`, `shards 2/4 and 4/4 are missing`, `shards 1/5, 2/5 and 4/5 are
/// missing`.
pub fn missing_message(missing: &[usize], of: usize) -> String {
    let names: Vec<String> = missing.iter().map(|k| format!("{k}/{of}")).collect();
    match names.as_slice() {
        [] => String::new(),
        [one] => format!("shard {one} is missing"),
        [init @ .., last] => format!("shards {} and {last} are missing", init.join(", ")),
    }
}

/// The first field of the hello in which `a` and `b` differ, with both values.
fn hello_difference(a: &Hello, b: &Hello) -> Option<(&'static str, String, String)> {
    let fields: [(&str, String, String); 7] = [
        ("implementation.name", a.name.clone(), b.name.clone()),
        ("implementation.version", a.version.clone(), b.version.clone()),
        ("implementation.language", a.language.clone(), b.language.clone()),
        ("implementation.profiles", a.profiles.join(","), b.profiles.join(",")),
        ("implementation.capabilities", a.capabilities.join(","), b.capabilities.join(",")),
        ("implementation.defaults", json(&a.defaults), json(&b.defaults)),
        ("implementation.codes", json(&a.codes), json(&b.codes)),
    ];
    fields.into_iter().find(|(_, x, y)| x != y)
}

/// A value as its JSON, for an error message.
fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Merges the shards of one run into its report, results in corpus order and `unexpected` the
/// union of the shards' (each shard was gated on its manifest). With `allow_missing`, shards not
/// given are left out and recorded in the merged report's `merged.missing`; without it, a missing
/// shard is an error. Every refusal names the files and the field.
pub fn merge(shards: &[Saved], allow_missing: bool) -> Result<Saved, String> {
    let Some(first) = shards.first() else {
        return Err("no report to merge".into());
    };
    let shard_of = |s: &Saved| -> Result<Shard, String> {
        if let Some(m) = &s.run.merged {
            return Err(format!(
                "{}: merged already (from {} shards), so it is no shard to merge (merge the shards themselves)",
                s.path.display(),
                m.shards
            ));
        }
        let shard = s.run.shard.ok_or_else(|| {
            format!(
                "{}: no 'shard' field: not a shard of a run (a run without --shard is whole already)",
                s.path.display()
            )
        })?;
        // [`read`] checks this too; a report made some other way must not index out of range.
        if shard.of == 0 || shard.index == 0 || shard.index > shard.of {
            return Err(format!("{}: 'shard' is {shard} (expected 1 <= index <= of)", s.path.display()));
        }
        Ok(shard)
    };
    let first_shard = shard_of(first)?;
    for s in shards {
        let shard = shard_of(s)?;
        let differ = |field: &str, a: String, b: String| {
            format!(
                "{} and {} are not shards of one run: '{field}' is {a} in {} and {b} in {}",
                first.path.display(),
                s.path.display(),
                first.path.display(),
                s.path.display()
            )
        };
        if s.run.suite_version != first.run.suite_version {
            return Err(differ(
                "suite_version",
                quote_opt(first.run.suite_version.as_deref()),
                quote_opt(s.run.suite_version.as_deref()),
            ));
        }
        if let Some((field, a, b)) = hello_difference(&first.implementation, &s.implementation) {
            return Err(differ(field, quote(&a), quote(&b)));
        }
        if shard.of != first_shard.of {
            return Err(differ("shard", first_shard.to_string(), shard.to_string()));
        }
        if s.run.profile != first.run.profile {
            return Err(differ(
                "profile",
                quote_opt(first.run.profile.as_deref()),
                quote_opt(s.run.profile.as_deref()),
            ));
        }
        if s.run.filter != first.run.filter {
            return Err(differ("filter", quote_opt(first.run.filter.as_deref()), quote_opt(s.run.filter.as_deref())));
        }
    }
    // A case in two shards: the same shard given twice, or shards of two selections.
    let mut seen: HashMap<&str, &Path> = HashMap::new();
    for s in shards {
        for r in &s.results {
            if let Some(other) = seen.insert(&r.id, &s.path) {
                return Err(format!(
                    "case {} is in both {} and {} (the shards of one run share no case)",
                    quote(&r.id),
                    other.display(),
                    s.path.display()
                ));
            }
        }
    }
    let of = first_shard.of;
    let mut by_index: Vec<Option<&Saved>> = vec![None; of];
    for s in shards {
        let k = shard_of(s)?.index;
        if let Some(slot) = by_index.get_mut(k - 1) {
            if let Some(other) = slot.replace(s) {
                return Err(format!(
                    "{} and {} are both shard {k}/{of} (the shards of one run are each given once)",
                    other.path.display(),
                    s.path.display()
                ));
            }
        }
    }
    let missing: Vec<usize> = (1..=of).filter(|k| by_index.get(k - 1).is_some_and(Option::is_none)).collect();
    if !missing.is_empty() && !allow_missing {
        return Err(format!(
            "{} (merged from {}; --allow-missing merges the shards there are)",
            missing_message(&missing, of),
            shards.iter().map(|s| s.path.display().to_string()).collect::<Vec<_>>().join(", ")
        ));
    }
    // Case i of the whole selection is case i / N of shard i % N + 1.
    let mut keyed: Vec<(usize, usize, &CaseResult)> = by_index
        .iter()
        .enumerate()
        .filter_map(|(k, s)| s.map(|s| (k, s)))
        .flat_map(|(k, s)| s.results.iter().enumerate().map(move |(j, r)| (j, k, r)))
        .collect();
    keyed.sort_by_key(|(j, k, _)| (*j, *k));
    let results: Vec<CaseResult> = keyed.into_iter().map(|(_, _, r)| r.clone()).collect();
    let flagged: std::collections::HashSet<&str> =
        shards.iter().flat_map(|s| s.unexpected.iter().map(String::as_str)).collect();
    let mut unexpected: Vec<String> =
        results.iter().filter(|r| flagged.contains(r.id.as_str())).map(|r| r.id.clone()).collect();
    // An id a hand-written report lists without a result is kept, not dropped.
    for s in shards {
        for id in &s.unexpected {
            if !unexpected.contains(id) {
                unexpected.push(id.clone());
            }
        }
    }
    Ok(Saved {
        path: PathBuf::from("-"),
        run: RunInfo {
            suite_version: first.run.suite_version.clone(),
            shard: None,
            profile: first.run.profile.clone(),
            filter: first.run.filter.clone(),
            merged: Some(Merged { shards: of, missing }),
        },
        implementation: first.implementation.clone(),
        unexpected,
        results,
    })
}

/// A saved report as a column of `conformance matrix`: a whole run or a merge of every shard of
/// one; `filter` keeps the results whose name or id contains it, as `matrix --filter` selects
/// the cases of the columns it runs. A lone shard is refused (it would show as the whole run), as
/// is a report of another suite version than this one's (the page names one suite).
pub fn matrix_results(saved: &Saved, filter: Option<&str>) -> Result<Vec<CaseResult>, String> {
    if let Some(s) = saved.run.shard {
        return Err(format!(
            "{}: shard {s} alone is not a column (merge its shards first: conformance report --merge)",
            saved.path.display()
        ));
    }
    let here = env!("CARGO_PKG_VERSION");
    if let Some(v) = &saved.run.suite_version {
        if v != here {
            return Err(format!(
                "{}: 'suite_version' is {}, this conformance is '{here}' (a matrix shows one suite)",
                saved.path.display(),
                quote(v)
            ));
        }
    }
    Ok(saved
        .results
        .iter()
        .filter(|r| filter.is_none_or(|f| r.name.contains(f) || r.id.contains(f)))
        .cloned()
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[rstest::rstest]
    #[case::one(&[2], 4, "shard 2/4 is missing")]
    #[case::two(&[2, 4], 4, "shards 2/4 and 4/4 are missing")]
    #[case::three(&[1, 2, 4], 5, "shards 1/5, 2/5 and 4/5 are missing")]
    fn missing_shards_are_named(#[case] missing: &[usize], #[case] of: usize, #[case] message: &str) {
        assert_eq!(missing_message(missing, of), message);
    }
}
