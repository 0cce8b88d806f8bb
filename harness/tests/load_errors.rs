//! Bad scenarios get clear errors naming the file, the line and the field; a directory with no
//! case is not a silent success.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use harness::case::load::load_dir;

fn errors_for(text: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.yaml"), text).unwrap();
    match load_dir(dir.path()) {
        Ok(_) => Vec::new(),
        Err(errs) => errs.iter().map(ToString::to_string).collect(),
    }
}

const HEAD: &str =
    "id: x-1\ntitle: t\nspec: [{decision: D-FM-1}]\nprofile: modules\nplatform: posix\nrules: [frontmatter]\n";

#[test]
fn unknown_key_in_a_touch_names_file_line_and_field() {
    let errs = errors_for(&format!("{HEAD}steps:\n  - start:\n  - touch: {{pth: a.ts}}\n"));
    let e = errs.first().expect("an error");
    assert!(e.contains("bad.yaml:9:"), "{e}");
    assert!(e.contains("pth"), "{e}");
}

#[test]
fn unknown_action_is_named() {
    let errs = errors_for(&format!("{HEAD}steps:\n  - start:\n  - tuch: {{path: a.ts}}\n"));
    assert!(errs.iter().any(|e| e.contains("tuch") && e.contains("bad.yaml:9")), "{errs:?}");
}

#[test]
fn unknown_feature_is_located() {
    let errs = errors_for(&format!("{}steps:\n  - start:\n", HEAD.replace("[frontmatter]", "[frontmater]")));
    assert!(errs.iter().any(|e| e.contains("bad.yaml:6") && e.contains("frontmater")), "{errs:?}");
}

#[test]
fn unknown_diagnostic_code_is_refused() {
    let errs = errors_for(&format!(
        "{HEAD}steps:\n  - start:\n    expect:\n      diagnostics: [{{code: frontmatter.bogus, path: a.md}}]\n"
    ));
    assert!(errs.iter().any(|e| e.contains("frontmatter.bogus")), "{errs:?}");
}

#[test]
fn first_step_must_be_start() {
    let errs = errors_for(&format!("{HEAD}steps:\n  - next_request:\n"));
    assert!(errs.iter().any(|e| e.contains("first step must be start")), "{errs:?}");
}

#[test]
fn duplicate_ids_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let case = format!("{HEAD}steps:\n  - start:\n");
    std::fs::write(dir.path().join("a.yaml"), &case).unwrap();
    std::fs::write(dir.path().join("b.yaml"), &case).unwrap();
    let errs = load_dir(dir.path()).unwrap_err();
    assert!(errs.iter().any(|e| e.to_string().contains("also the id of")), "{errs:?}");
}

#[test]
fn an_in_place_write_on_a_file_client_tree_is_refused() {
    let head = HEAD.replace("platform: posix", "platform: windows");
    let errs = errors_for(&format!("{head}steps:\n  - start:\n  - write: {{path: a.md, text: x, in_place: true}}\n"));
    assert!(errs.iter().any(|e| e.contains("bad.yaml:9:") && e.contains("in_place")), "{errs:?}");
}

/// A message that quotes the case file is clipped: a 2 MB key made a 2 MB error line.
#[test]
fn an_error_quoting_a_huge_key_is_clipped() {
    let key = "a/".repeat(1_000_000);
    let errs = errors_for(&format!("{HEAD}tree:\n  {key}x: x\n  {key}: {{symlink: x}}\nsteps:\n  - start:\n"));
    let e = errs.first().expect("an error");
    assert!(e.len() < 2048 && e.contains("more bytes not shown)"), "{}", &e[..e.len().min(300)]);
}
