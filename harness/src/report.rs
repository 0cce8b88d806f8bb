//! Reporters: human text with the first divergent step side by side.

use std::fmt::Write;

use crate::run::{CaseResult, Status};

/// The detail of one non-passing case: its reason and, for a failure, the first divergent step
/// with expected and actual side by side.
pub fn case_detail(r: &CaseResult) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{} {} [{}]", r.status.as_str(), r.name, r.id);
    if let Some(reason) = &r.reason {
        let _ = writeln!(out, "  {reason}");
    }
    if r.status == Status::Fail {
        if let Some(step) = r.first_divergence() {
            let _ = writeln!(out, "  first divergent step: {} ({})", step.index, step.action);
            for m in &step.mismatches {
                let _ = writeln!(out, "  {}:", m.field);
                side_by_side(&mut out, &m.expected, &m.actual);
            }
        }
    }
    out
}

fn side_by_side(out: &mut String, expected: &str, actual: &str) {
    let e: Vec<String> = expected.lines().map(|l| format!("{l:?}")).collect();
    let a: Vec<String> = actual.lines().map(|l| format!("{l:?}")).collect();
    let width = e.iter().map(String::len).max().unwrap_or(0).clamp(8, 60);
    let _ = writeln!(out, "    {:<width$} | {}", "expected", "actual");
    for i in 0..e.len().max(a.len()).max(1) {
        let l = e.get(i).map_or("", String::as_str);
        let r = a.get(i).map_or("", String::as_str);
        let mark = if l == r { ' ' } else { '!' };
        let _ = writeln!(out, "  {mark} {l:<width$} | {r}");
    }
}
