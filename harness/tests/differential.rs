//! Differential properties on generated inputs (issue 26): the properties of `harness::fuzzing`
//! that compare two ways of computing one answer, run here on a few thousand inputs generated
//! from a fixed seed, so that `cargo test` checks them on every change and not only where a
//! fuzzer runs. The same seed gives the same inputs; a failure names the input.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use harness::util::generate::Rng;

/// The letters the globs and paths are made of: ASCII in both cases, and the letters whose case
/// folds differently by ASCII, simple and full upper-casing (`ä`, `é`, `ß` and its `SS` and
/// `ẞ`, the dotless `ı`, the long `ſ`, the Kelvin sign), a letter with no case, and a dot.
const LETTERS: &[&str] =
    &["a", "A", "s", "S", "ä", "Ä", "é", "É", "ß", "SS", "ss", "ẞ", "ı", "I", "i", "ſ", "K", "k", "日", "."];

/// The folders the globs and paths start in: few, so that globs share them.
const FOLDERS: &[&str] = &["docs", "Docs", "DÖCS", "döcs", "src/api", "SRC/Api"];

fn pick<'a>(rng: &mut Rng, from: &[&'a str]) -> &'a str {
    from[rng.below(from.len())]
}

fn name(rng: &mut Rng) -> String {
    (0..1 + rng.below(4)).map(|_| pick(rng, LETTERS)).collect()
}

/// A glob: a folder (or none), then one to three segments of letters, `*`, `?` or `**`, or
/// empty (D-GLOB-6: never matches; globset read `**/` as every path).
fn glob(rng: &mut Rng) -> String {
    let mut out = String::from(if rng.below(8) == 0 { "" } else { pick(rng, FOLDERS) });
    for i in 0..1 + rng.below(3) {
        if i > 0 || !out.is_empty() {
            out.push('/');
        }
        match rng.below(7) {
            0 => out.push_str("**"),
            6 => {}
            1 => out.push_str(&format!("*{}", name(rng))),
            2 => out.push_str(&format!("{}?", name(rng))),
            _ => out.push_str(&name(rng)),
        }
    }
    out
}

/// A path: a folder and one to three named segments.
fn path(rng: &mut Rng) -> String {
    let mut out = String::from(pick(rng, FOLDERS));
    for _ in 0..1 + rng.below(3) {
        out.push('/');
        out.push_str(&name(rng));
    }
    out
}

#[test]
fn the_set_and_the_one_by_one_matchers_agree_on_generated_globs() {
    let mut rng = Rng::new(26);
    for _ in 0..600 {
        let globs: Vec<String> = (0..1 + rng.below(8)).map(|_| glob(&mut rng)).collect();
        // Half the paths are a glob with its wildcards filled in, so that many of them match.
        let paths: Vec<String> = (0..8)
            .map(|_| match rng.below(2) {
                0 => path(&mut rng),
                _ => {
                    let g = &globs[rng.below(globs.len())];
                    g.replace("**", "x").replace('*', &name(&mut rng)).replace('?', pick(&mut rng, LETTERS))
                }
            })
            .collect();
        let input = format!("{}\n\n{}\n", globs.join("\n"), paths.join("\n"));
        let outcome = std::panic::catch_unwind(|| harness::fuzzing::glob_set(input.as_bytes()));
        assert!(outcome.is_ok(), "glob_set fails on the input {input:?}");
    }
}

#[test]
fn the_four_modes_observe_alike_on_generated_edit_sequences() {
    let mut rng = Rng::new(2026);
    for _ in 0..40 {
        // About one operation in three is a trigger; the last always is.
        let mut ops: Vec<u8> = (0..6 + rng.below(14))
            .flat_map(|_| {
                let op = if rng.below(3) == 0 { 6 } else { rng.below(6) as u8 };
                [((rng.below(32) as u8) << 3) | op, rng.below(256) as u8]
            })
            .collect();
        ops.extend([((rng.below(32) as u8) << 3) | 7, 0]);
        let outcome = std::panic::catch_unwind(|| harness::fuzzing::modes(&ops));
        assert!(outcome.is_ok(), "modes fails on the operations {ops:?}");
    }
}
