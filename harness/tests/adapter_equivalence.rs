//! The whole corpus through `reference-adapter` gives exactly the in-process results: the same
//! status for every case and the same observation at every step (temporary paths aside). This is
//! what makes the project's own CI exercise the adapter protocol.
//!
//! Two more passes of the whole corpus, which only CI needs (issue 25: README's test command stays
//! short): both tests are `#[ignore]`d, and `.ci/run` runs them with `--ignored`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use std::time::Duration;

use harness::case::corpus::default_cases_dir;
use harness::case::load::load_dir;
use harness::run::adapter::{reference_adapter_path, ProcessAdapter};
use harness::run::case::{run_case, RunContext};
use harness::run::implementation::{reference_hello, Implementation, InProcess};

/// Each case runs in its own `<tmp>/conformance-XXXXXX`; cut that segment out of every string.
fn redact(mut text: String) -> String {
    while let Some(pos) = text.find("/conformance-") {
        let end = text[pos + 1..].find(['/', '"']).map_or(text.len(), |e| pos + 1 + e);
        text.replace_range(pos..end, "/[sandbox]");
    }
    text
}

#[test]
#[ignore = "a whole corpus pass for CI: .ci/run runs it with --ignored"]
fn suite_through_reference_adapter_equals_in_process() {
    let cases = load_dir(&default_cases_dir()).unwrap();
    assert!(!cases.is_empty());
    let home = tempfile::tempdir().unwrap();
    let exe = reference_adapter_path().unwrap();
    let command = exe.to_string_lossy().into_owned();
    let mut adapter = ProcessAdapter::new(command, home.path(), Duration::from_secs(20), 0);
    let hello = adapter.hello().unwrap();
    assert_eq!(hello, reference_hello());
    let mut differences = Vec::new();
    for case in &cases {
        let inproc = run_case(&mut InProcess::default(), &RunContext::new(&reference_hello()), case);
        let through = run_case(&mut adapter, &RunContext::new(&hello), case);
        if inproc.status != through.status {
            differences.push(format!(
                "{}: in-process {:?}, adapter {:?} ({:?})",
                case.name, inproc.status, through.status, through.reason
            ));
            continue;
        }
        let a = redact(serde_json::to_string(&inproc.steps).unwrap());
        let b = redact(serde_json::to_string(&through.steps).unwrap());
        if a != b {
            differences.push(format!("{}: observations differ\n  in-process: {a}\n  adapter:    {b}", case.name));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

#[test]
#[ignore = "a whole corpus pass for CI: .ci/run runs it with --ignored"]
fn suite_through_one_shot_reference_adapter_equals_in_process() {
    use harness::run::adapter::OneShotAdapter;
    use harness::run::case::Status;
    let cases = load_dir(&default_cases_dir()).unwrap();
    let home = tempfile::tempdir().unwrap();
    let exe = reference_adapter_path().unwrap();
    let mut adapter =
        OneShotAdapter::new(format!("{} --one-shot", exe.display()), home.path(), Duration::from_secs(20));
    let hello = adapter.hello().unwrap();
    let mut differences = Vec::new();
    let mut unsupported = 0;
    for case in &cases {
        let through = run_case(&mut adapter, &RunContext::new(&hello), case);
        if through.status == Status::Unsupported {
            // Only cases that edit a host tree between steps or open a second session (FORMAT.md:
            // one-shot mode cannot express `new_session`); the live protocol covers them.
            let reason = through.reason.as_deref().unwrap_or("");
            assert!(
                reason.contains("host tree") || reason.contains("second session"),
                "{}: {:?}",
                case.name,
                through.reason
            );
            unsupported += 1;
            continue;
        }
        let inproc = run_case(&mut InProcess::default(), &RunContext::new(&reference_hello()), case);
        let a = redact(serde_json::to_string(&(inproc.status, &inproc.steps)).unwrap());
        let b = redact(serde_json::to_string(&(through.status, &through.steps)).unwrap());
        if a != b {
            differences.push(format!("{}:\n  in-process: {a}\n  one-shot:   {b}", case.name));
        }
    }
    assert!(unsupported < cases.len() / 4, "{unsupported} of {} cases unsupported in one-shot mode", cases.len());
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}
