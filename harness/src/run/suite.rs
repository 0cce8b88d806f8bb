//! Running a selection of the corpus through implementations, in parallel jobs, each job with its
//! own implementation instance (for adapters, its own process).

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::case::load::Case;
use crate::judge::manifest::Manifest;
use crate::run::case::{run_case, CaseResult, Level, RunContext, Status};
use crate::run::implementation::Implementation;
use crate::run::wire::Hello;

/// Which cases to run.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// A substring of the case's name or id.
    pub filter: Option<String>,
    /// Only this profile.
    pub profile: Option<String>,
    /// Shard `k` of `n` (1-based `k`).
    pub shard: Option<(usize, usize)>,
}

impl Selection {
    /// The selected cases, in corpus order.
    pub fn apply(&self, cases: Vec<Case>) -> Vec<Case> {
        cases
            .into_iter()
            .filter(|c| {
                self.filter.as_ref().is_none_or(|f| c.name.contains(f.as_str()) || c.scenario.id.contains(f.as_str()))
            })
            .filter(|c| self.profile.as_ref().is_none_or(|p| c.scenario.profile == *p))
            .enumerate()
            .filter(|(i, _)| self.shard.is_none_or(|(k, n)| i % n == k - 1))
            .map(|(_, c)| c)
            .collect()
    }
}

/// Parses `K/N`.
pub fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let (k, n) = s.split_once('/').ok_or_else(|| format!("--shard '{s}': expected K/N"))?;
    let k: usize = k.parse().map_err(|_| format!("--shard '{s}': K is not a number"))?;
    let n: usize = n.parse().map_err(|_| format!("--shard '{s}': N is not a number"))?;
    if n == 0 || k == 0 || k > n {
        return Err(format!("--shard '{s}': expected 1 <= K <= N"));
    }
    Ok((k, n))
}

/// How the reason of a case that `--fail-fast` kept from running begins.
pub const FAIL_FAST_NOT_RUN: &str = "not run: --fail-fast stopped the run after";

/// Makes one implementation instance per job.
pub type Factory<'a> = dyn Fn() -> Result<Box<dyn Implementation + Send>, String> + Sync + 'a;

/// Runs `cases` with `jobs` parallel instances. Results come back in corpus order, one per case.
/// With `fail_fast`, no case is started after the first result the manifest does not expect (the
/// cases already running finish); the cases not run are SKIP, with that reason. `Err` when no
/// instance could be made or said hello.
pub fn run_all(
    cases: &[Case],
    factory: &Factory<'_>,
    jobs: usize,
    manifest: &Manifest,
    level: Level,
    progress: bool,
    fail_fast: bool,
) -> Result<(Hello, Vec<CaseResult>), String> {
    let mut first = factory()?;
    let hello = first.hello().map_err(|e| format!("hello failed: {e}"))?;
    crate::run::implementation::validate_hello(&hello)?;
    let ctx = RunContext { hello: &hello, level, keep_transcript: false };
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    // The case whose result stopped a fail-fast run.
    let stopped_at: Mutex<Option<String>> = Mutex::new(None);
    let results: Mutex<Vec<Option<CaseResult>>> = Mutex::new(vec![None; cases.len()]);
    let progress = progress && std::io::stderr().is_terminal();
    let worker = |mut imp: Box<dyn Implementation + Send>| loop {
        let i = next.fetch_add(1, Ordering::SeqCst);
        let Some(case) = cases.get(i) else { break };
        let result = if manifest.skips(&case.scenario.id) { skipped(case) } else { run_case(imp.as_mut(), &ctx, case) };
        let fatal = result.fatal;
        let unexpected = fail_fast && !manifest.apply(&mut result.clone());
        if let Ok(mut r) = results.lock() {
            if let Some(slot) = r.get_mut(i) {
                *slot = Some(result);
            }
        }
        let n = done.fetch_add(1, Ordering::SeqCst) + 1;
        if progress {
            let _ = write!(std::io::stderr(), "\r\x1b[K[{n}/{}] {}", cases.len(), case.name);
        }
        if fatal {
            // Stop handing out cases; the rest are reported as not run.
            next.store(cases.len(), Ordering::SeqCst);
            break;
        }
        if unexpected {
            if let Ok(mut at) = stopped_at.lock() {
                at.get_or_insert_with(|| case.name.clone());
            }
            next.store(cases.len(), Ordering::SeqCst);
            break;
        }
    };
    std::thread::scope(|scope| {
        let jobs = jobs.max(1).min(cases.len().max(1));
        let mut handles = Vec::new();
        for _ in 1..jobs {
            if let Ok(imp) = factory() {
                handles.push(scope.spawn(|| worker(imp)));
            }
        }
        worker(first);
        for h in handles {
            let _ = h.join();
        }
    });
    if progress {
        let _ = write!(std::io::stderr(), "\r\x1b[K");
    }
    let results = results.into_inner().unwrap_or_default();
    let stopped_at = stopped_at.into_inner().unwrap_or_default();
    let out = results
        .into_iter()
        .zip(cases)
        .map(|(r, case)| {
            r.unwrap_or_else(|| {
                let mut r = skipped(case);
                if let Some(at) = &stopped_at {
                    r.reason = Some(format!("{FAIL_FAST_NOT_RUN} {at}, the first unexpected result"));
                    return r;
                }
                r.status = Status::Error;
                r.reason = Some("not run: the run ended early (the implementation could not be restarted)".into());
                r.fatal = true;
                r
            })
        })
        .collect();
    Ok((hello, out))
}

fn skipped(case: &Case) -> CaseResult {
    CaseResult {
        id: case.scenario.id.clone(),
        name: case.name.clone(),
        profile: case.scenario.profile.clone(),
        area: crate::run::case::area(&case.name),
        status: Status::Skip,
        reason: Some("skipped by the expectations manifest".into()),
        basis: None,
        decision: None,
        decision_differences: Vec::new(),
        steps: Vec::new(),
        notes: Vec::new(),
        transcript: None,
        millis: 0,
        fatal: false,
    }
}
