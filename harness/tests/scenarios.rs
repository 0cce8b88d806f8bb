//! Every scenario in spec-cases/ as its own named test (`cargo test -- frontmatter` filters),
//! run against the reference in-process, with an insta snapshot of the reference's full
//! observation for review (`cargo insta review`). CI never writes snapshots. Finding zero
//! scenarios fails.
//!
//! `CONFORMANCE_SNAPSHOTS=off` checks the YAML expectations only, never the snapshots: the
//! mutation pass (`.ci/mutants`) measures what the corpus pins, and a snapshot is a copy of the
//! reference's output, so a mutant it alone catches is not one the corpus kills.
//! `CONFORMANCE_REFERENCE_MODES=default,fallback,cached,aged` runs the corpus once in each of the
//! reference's modes (see `run_modes`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::ExitCode;

use std::time::Duration;

use harness::case::corpus::default_cases_dir;
use harness::case::load::load_dir;
use harness::report::formats::case_detail;
use harness::run::case::{run_case, RunContext, Status};
use harness::run::implementation::{reference_hello, ImplError, Implementation, InProcess};
use harness::run::wire::{Hello, Observation, OpenCase, StepOp};
use libtest_mimic::{Arguments, Failed, Trial};

/// Replaces the temporary sandbox path in every string, so snapshots do not depend on it.
fn redact(value: &mut serde_json::Value, sandbox_prefix: &str) {
    match value {
        serde_json::Value::String(s) => {
            // The sandbox is `<tmp>/conformance-XXXXXX`; every occurrence becomes `[sandbox]`.
            let mut from = 0;
            while let Some(found) = s[from..].find(sandbox_prefix) {
                let pos = from + found;
                let end = s[pos + sandbox_prefix.len()..].find('/').map_or(s.len(), |e| pos + sandbox_prefix.len() + e);
                s.replace_range(pos..end, "[sandbox]");
                from = pos + "[sandbox]".len();
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(|v| redact(v, sandbox_prefix)),
        serde_json::Value::Object(map) => map.values_mut().for_each(|v| redact(v, sandbox_prefix)),
        _ => {}
    }
}

/// The reference's configurations a run can judge the corpus in, each by the switches the
/// reference reads once per process: the default, its own confinement walk, the discovery cache,
/// and the discovery cache aged (see [`Paced`]).
const MODES: &[(&str, &[(&str, &str)])] = &[
    ("default", &[]),
    ("fallback", &[("REFERENCE_CONFINEMENT", "fallback")]),
    ("cached", &[("REFERENCE_DISCOVERY_CACHE", "1")]),
    ("aged", &[("REFERENCE_DISCOVERY_CACHE", "1"), ("REFERENCE_TIMESTAMP_GRANULARITY_MS", "10"), (PACE_VAR, "15")]),
];

/// Milliseconds to wait before every call to the reference ([`Paced`]).
const PACE_VAR: &str = "CONFORMANCE_REFERENCE_PACE_MS";

/// `CONFORMANCE_REFERENCE_MODES=default,fallback,cached,aged` (any of them, in any order) runs
/// the whole corpus once per mode, each in a child process of this binary with the mode's
/// switches set, and fails when any fails: the mutation pass (`.ci/mutants --modes`) judges the
/// cache's and the confinement walk's mutants in the mode that runs their code. Without the
/// variable (as in each child) the corpus runs here, in the mode the environment already selects.
fn run_modes(modes: &str) -> ExitCode {
    let names: Vec<&str> = MODES.iter().map(|(m, _)| *m).collect();
    let mut failed = false;
    for name in modes.split(',').map(str::trim).filter(|m| !m.is_empty()) {
        let Some(&(_, vars)) = MODES.iter().find(|(m, _)| *m == name) else {
            eprintln!("CONFORMANCE_REFERENCE_MODES: unknown mode '{name}' ({})", names.join(", "));
            return ExitCode::FAILURE;
        };
        let exe = match std::env::current_exe() {
            Ok(exe) => exe,
            Err(e) => {
                eprintln!("CONFORMANCE_REFERENCE_MODES: cannot find this test binary ({e})");
                return ExitCode::FAILURE;
            }
        };
        let mut child = std::process::Command::new(exe);
        child.args(std::env::args_os().skip(1)).env_remove("CONFORMANCE_REFERENCE_MODES");
        for (var, _) in MODES.iter().flat_map(|(_, vars)| vars.iter()) {
            child.env_remove(var);
        }
        child.envs(vars.iter().copied());
        eprintln!("corpus in the reference's {name} mode");
        match child.status() {
            Ok(status) if status.success() => {}
            Ok(_) => failed = true,
            Err(e) => {
                eprintln!("CONFORMANCE_REFERENCE_MODES: cannot run the {name} mode ({e})");
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The reference with a wait before every call, so that what the case wrote before a step has
/// aged past the timestamp granularity when the step's check looks at it. In the `aged` mode
/// (the granularity 10 ms, a wait of 15 ms) the discovery cache's check records an entry it
/// finds unchanged as trusted, and the next check trusts it without reading: the corpus then
/// judges the cache's identity trust, which in the `cached` mode (2 s) no step ever reaches,
/// since every step runs within 2 s of the one before. Entries written within a step are still
/// read again (the racy guard). The waits cost about 15 ms a step.
struct Paced {
    inner: InProcess,
    pace: Duration,
}

impl Paced {
    fn wait(&self) {
        std::thread::sleep(self.pace);
    }
}

impl Implementation for Paced {
    fn hello(&mut self) -> Result<Hello, ImplError> {
        self.inner.hello()
    }
    fn open(&mut self, open: &OpenCase) -> Result<Observation, ImplError> {
        self.wait();
        self.inner.open(open)
    }
    fn step(&mut self, op: &StepOp) -> Result<Observation, ImplError> {
        self.wait();
        self.inner.step(op)
    }
    fn restart(&mut self, open: &OpenCase) -> Result<Observation, ImplError> {
        self.wait();
        self.inner.restart(open)
    }
    fn close(&mut self) -> Result<(), ImplError> {
        self.inner.close()
    }
    fn lend(&mut self, lease: Option<harness::case::tree::Lease>) {
        self.inner.lend(lease);
    }
}

/// The wait [`PACE_VAR`] asks for: none when it is unset, an error when it is not a number,
/// or when the reference did not take the granularity the mode asks for (it ignores a value it
/// cannot read, and the aged mode would then quietly be the cached one).
fn pace_requested() -> Result<Option<Duration>, String> {
    if let Ok(asked) = std::env::var("REFERENCE_TIMESTAMP_GRANULARITY_MS") {
        let taken = reference::Config::modules().timestamp_granularity;
        if asked.trim().parse::<u64>().map(Duration::from_millis) != Ok(taken) {
            return Err(format!("REFERENCE_TIMESTAMP_GRANULARITY_MS={asked}: the reference runs with {taken:?}"));
        }
    }
    match std::env::var(PACE_VAR) {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Ok(v) => v
            .trim()
            .parse::<u64>()
            .map(|ms| Some(Duration::from_millis(ms)))
            .map_err(|_| format!("{PACE_VAR}: '{v}' is not a number of milliseconds")),
        Err(e) => Err(format!("{PACE_VAR}: {e}")),
    }
}

fn main() -> ExitCode {
    if let Some(modes) = std::env::var_os("CONFORMANCE_REFERENCE_MODES") {
        return run_modes(&modes.to_string_lossy());
    }
    // A run stopped by SIGINT, SIGTERM or SIGHUP (a timeout of `.ci/mutants`, Ctrl-C) removes
    // the sandboxes of the cases in flight, as the `conformance` CLI does.
    harness::util::cleanup::install_signal_handlers();
    harness::run::adapter::export_env_canary();
    let args = Arguments::from_args();
    let pace = match pace_requested() {
        Ok(pace) => pace,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let dir = default_cases_dir();
    let cases = match load_dir(&dir) {
        Ok(cases) => cases,
        Err(errors) => {
            for e in errors {
                eprintln!("{e}");
            }
            return ExitCode::FAILURE;
        }
    };
    if cases.is_empty() {
        eprintln!("no scenarios found under {} (a runner that finds zero cases fails)", dir.display());
        return ExitCode::FAILURE;
    }
    let snapshots = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("snapshots");
    let compare_snapshots = std::env::var_os("CONFORMANCE_SNAPSHOTS").is_none_or(|v| v != "off");
    let tmp = std::env::temp_dir().canonicalize().unwrap_or_else(|_| std::env::temp_dir());
    let prefix = format!("{}/conformance-", tmp.display());
    let trials = cases
        .into_iter()
        .map(|case| {
            let snapshots = snapshots.clone();
            let prefix = prefix.clone();
            Trial::test(format!("{} {}", case.scenario.id, case.name), move || {
                let hello = reference_hello();
                let context = RunContext::new(&hello);
                let result = match pace {
                    Some(pace) => run_case(&mut Paced { inner: InProcess::default(), pace }, &context, &case),
                    None => run_case(&mut InProcess::default(), &context, &case),
                };
                if result.status != Status::Pass {
                    return Err(Failed::from(case_detail(&result)));
                }
                if !compare_snapshots {
                    return Ok(());
                }
                let observed: Vec<serde_json::Value> = result
                    .steps
                    .iter()
                    .map(|s| serde_json::json!({"step": s.index, "action": s.action, "observation": s.observation}))
                    .collect();
                let mut observed = serde_json::Value::Array(observed);
                redact(&mut observed, &prefix);
                let mut settings = insta::Settings::clone_current();
                settings.set_snapshot_path(&snapshots);
                settings.set_prepend_module_to_snapshot(false);
                settings.set_description(format!("{} — {}", case.scenario.id, case.scenario.title));
                settings.set_omit_expression(true);
                let id = case.scenario.id.clone();
                catch_unwind(AssertUnwindSafe(|| {
                    settings.bind(|| insta::assert_yaml_snapshot!(id, observed));
                }))
                .map_err(|_| Failed::from("the reference's observation differs from its snapshot (cargo insta review)"))
            })
        })
        .collect();
    libtest_mimic::run(&args, trials).exit_code()
}
