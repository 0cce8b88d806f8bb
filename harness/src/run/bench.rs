//! `conformance bench`: how long an implementation takes to put a large tree's instructions in
//! front of the model. Each target runs one case per tree size, on the benches' generated trees
//! ([`crate::util::generate::tree`]): start, touch a source file that a module matches, and the
//! next request. Two times come of it, each the median of the repeats: from launch to the first
//! model request (the `start` step: an agent CLI's launch, an adapter's startup discovery), and
//! from the touch's tool result to the next request (the `next_request` step). An agent's case
//! runs in its dialect, as every case does.
//!
//! Every target is also run, in the same run, on the empty tree (a root AGENTS.md and nothing
//! else), so that each time is read beside the same target's floor (what it costs to start at
//! all), and beside the reference adapter's time on the same tree. Ratios against a floor in one
//! run, never absolute times: the machine is shared and noisy.

use std::fmt::Write as _;

use crate::case::load::Case;
use crate::case::scenario::TreeValue;
use crate::run::case::{run_case, RunContext, Status};
use crate::run::suite::Factory;
use crate::util::generate;

/// The generator's seed: every target gets the same trees.
pub const SEED: u64 = 0x5EED;

/// One target: a name for the table and how to make its implementation.
pub struct Target<'a> {
    /// As the table shows it (`claude-code@2.1.332`, `reference-adapter`).
    pub name: String,
    /// Makes a fresh implementation.
    pub make: &'a Factory<'a>,
}

/// One target's times on one tree.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// The target's name.
    pub target: String,
    /// How many rule modules the tree had (0: the empty tree).
    pub modules: usize,
    /// Launch to the first model request, one sample per repeat, in microseconds.
    pub first: Vec<u128>,
    /// The touch's tool result to the next request, one sample per repeat, in microseconds.
    pub next: Vec<u128>,
    /// Why a repeat did not give both times (the first such reason), if one did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Row {
    /// The median launch-to-first-request time, in microseconds.
    pub fn first_us(&self) -> Option<u128> {
        median(&self.first)
    }

    /// The median tool-result-to-next-request time, in microseconds.
    pub fn next_us(&self) -> Option<u128> {
        median(&self.next)
    }
}

fn median(samples: &[u128]) -> Option<u128> {
    let mut s = samples.to_vec();
    s.sort_unstable();
    s.get(s.len() / 2).copied()
}

/// A whole bench run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Bench {
    /// The tree sizes, the empty tree (0) first.
    pub sizes: Vec<usize>,
    /// The targets in the order given, the reference adapter's name among them.
    pub targets: Vec<String>,
    /// Which target the others are compared with.
    pub baseline: String,
    /// Every target on every size.
    pub rows: Vec<Row>,
}

/// The case a target runs on the tree of `modules` modules (0: the empty tree).
pub fn case(modules: usize) -> Result<Case, String> {
    let generated = generate::tree(modules, SEED);
    // A touched path that a conditional module matches, when there is one.
    let globs: Vec<globset::GlobMatcher> = generated
        .patterns
        .iter()
        .flatten()
        .filter_map(|p| globset::GlobBuilder::new(p).literal_separator(true).build().ok())
        .map(|g| g.compile_matcher())
        .collect();
    let touched = generated
        .touched
        .iter()
        .find(|t| globs.iter().any(|g| g.is_match(t.as_str())))
        .or(generated.touched.first())
        .cloned()
        .unwrap_or_else(|| "src/api/handlers/file-1.ts".into());
    let text = format!(
        "id: bench-{modules}\n\
         title: \"{modules} generated rule modules: launch to the first request, and a matching touch to the next\"\n\
         spec:\n  - decision: D-BENCH\n\
         basis: D-BENCH\n\
         profile: modules\n\
         platform: posix\n\
         capabilities: []\n\
         rules: [globs]\n\
         tree:\n  AGENTS.md: \"# Project\\n\"\n\
         steps:\n  - start:\n    expect:\n      startup:\n        - {{path: AGENTS.md, kind: root, content: \"# Project\\n\"}}\n  - touch: {{path: \"{touched}\"}}\n  - next_request:\n"
    );
    let mut scenario = crate::case::load::parse(&text).map_err(|problems| {
        let problems: Vec<String> = problems.into_iter().map(|(_, m)| m).collect();
        format!("the bench case does not load: {}", problems.join("; "))
    })?;
    // The tree goes in after the case is checked, which would otherwise have it use modules.
    if modules > 0 {
        for (rel, body) in generated.files {
            scenario.tree.insert(rel, TreeValue::File(body.into_bytes()));
        }
        scenario.capabilities = vec!["rule_modules".into()];
    }
    Ok(Case { file: format!("bench-{modules}.yaml").into(), name: format!("bench/{modules}"), scenario, text })
}

/// Runs every target `repeats` times on the empty tree and on each of `sizes`. `progress` is
/// told each row as it is done.
pub fn run(
    targets: &[Target<'_>],
    sizes: &[usize],
    repeats: usize,
    progress: &mut dyn FnMut(&Row),
) -> Result<Bench, String> {
    let mut all = vec![0];
    all.extend(sizes.iter().copied().filter(|&n| n > 0));
    all.dedup();
    let mut rows = Vec::new();
    for &modules in &all {
        let case = case(modules)?;
        for target in targets {
            let row = measure(target, &case, modules, repeats.max(1));
            progress(&row);
            rows.push(row);
        }
    }
    let names: Vec<String> = targets.iter().map(|t| t.name.clone()).collect();
    let baseline = names.last().cloned().unwrap_or_default();
    Ok(Bench { sizes: all, targets: names, baseline, rows })
}

fn measure(target: &Target<'_>, case: &Case, modules: usize, repeats: usize) -> Row {
    let mut row = Row { target: target.name.clone(), modules, first: Vec::new(), next: Vec::new(), error: None };
    for _ in 0..repeats {
        match once(target, case) {
            Ok((first, next)) => {
                row.first.push(first);
                row.next.push(next);
            }
            Err(why) => {
                row.error.get_or_insert(why);
            }
        }
    }
    row
}

/// One run of the case: (start, next request) in microseconds.
fn once(target: &Target<'_>, case: &Case) -> Result<(u128, u128), String> {
    let mut imp = (target.make)()?;
    let hello = imp.hello().map_err(|e| format!("hello: {e}"))?;
    let result = run_case(imp.as_mut(), &RunContext::new(&hello), case);
    // What was sent is not judged here, only when: a FAIL (the tree's unconditional modules at
    // startup, which the case's one expectation leaves out) is timed like a PASS. The start
    // step expects the root file so that an agent CLI, which shows no diagnostics, has an
    // expectation it can be seen to meet and the case is not UNSUPPORTED.
    if !matches!(result.status, Status::Pass | Status::Fail) {
        let why = result.reason.unwrap_or_else(|| result.status.as_str().to_string());
        return Err(format!("{}: {why}", result.status.as_str()));
    }
    let step = |action: &str| result.steps.iter().find(|s| s.action == action).map(|s| s.micros);
    match (step("start"), step("next_request")) {
        (Some(first), Some(next)) => Ok((first, next)),
        _ => Err("the case did not run its start and next_request steps".into()),
    }
}

/// `a / b` to two places, or `-` when either is missing or `b` is 0.
fn ratio(a: Option<u128>, b: Option<u128>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0 => format!("{:.2}", a as f64 / b as f64),
        (Some(_), Some(_)) => "-".into(),
        _ => "-".into(),
    }
}

/// Microseconds as milliseconds to one place.
pub fn ms(v: Option<u128>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{:.1}", v as f64 / 1000.0))
}

impl Bench {
    fn row(&self, target: &str, modules: usize) -> Option<&Row> {
        self.rows.iter().find(|r| r.target == target && r.modules == modules)
    }

    /// One row's cells, raw: the target, the tree size, then each median over the target's empty
    /// tree and over the baseline's time on the same tree, and the note.
    fn cells(&self, row: &Row) -> [String; 9] {
        use crate::report::escape::{cut, FIELD_MAX, REASON_MAX};
        let empty = self.row(&row.target, 0);
        let base = self.row(&self.baseline, row.modules);
        [
            cut(&row.target, FIELD_MAX).into_owned(),
            row.modules.to_string(),
            ms(row.first_us()),
            ratio(row.first_us(), empty.and_then(Row::first_us)),
            ratio(row.first_us(), base.and_then(Row::first_us)),
            ms(row.next_us()),
            ratio(row.next_us(), empty.and_then(Row::next_us)),
            ratio(row.next_us(), base.and_then(Row::next_us)),
            cut(row.error.as_deref().unwrap_or(""), REASON_MAX).into_owned(),
        ]
    }

    /// The table, in Markdown: per target and tree, both medians, each over the same target's
    /// empty tree and over the baseline's time on the same tree. A name's `|`, newlines and
    /// control characters are escaped so that each row stays one row.
    pub fn table(&self) -> String {
        let md = |s: &str| {
            s.chars()
                .flat_map(|c| match c {
                    '|' => vec!['\\', '|'],
                    c if c.is_control() => vec![' '],
                    c => vec![c],
                })
                .collect::<String>()
        };
        let b = md(&crate::report::escape::cut(&self.baseline, crate::report::escape::FIELD_MAX));
        let mut out = format!(
            "| target | modules | first request ms | × empty | × {b} | next request ms | × empty | × {b} | note |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|---|\n"
        );
        for row in &self.rows {
            let cells: Vec<String> = self.cells(row).iter().map(|c| md(c)).collect();
            let _ = writeln!(out, "| {} |", cells.join(" | "));
        }
        out
    }

    /// The table and the plot as a section of an HTML page (the matrix's index), every name
    /// from the command line escaped.
    pub fn html(&self) -> String {
        use crate::report::escape::{cut, html, FIELD_MAX};
        let mut out = String::from("<h2 id=\"bench\">Time to first request on large trees</h2>\n");
        let _ = writeln!(
            out,
            "<p>Median milliseconds from launch to the first model request, and from a matching touch's \
             tool result to the next request, on the generated trees of <code>conformance bench</code>; \
             each beside the same target on the empty tree (× empty) and {} on the same tree, all measured \
             in one run.</p>",
            html(&cut(&self.baseline, FIELD_MAX))
        );
        out.push_str(
            "<table>\n<tr><th>target</th><th>modules</th><th>first request ms</th><th>× empty</th><th>× baseline</th>\
             <th>next request ms</th><th>× empty</th><th>× baseline</th><th>note</th></tr>\n",
        );
        for row in &self.rows {
            let cells: Vec<String> = self.cells(row).iter().map(|c| format!("<td>{}</td>", html(c))).collect();
            let _ = writeln!(out, "<tr>{}</tr>", cells.concat());
        }
        out.push_str("</table>\n");
        out.push_str(&self.svg());
        out
    }

    /// The plot, as a standalone SVG: the median launch-to-first-request time of each target
    /// over the tree size, both axes logarithmic (the empty tree at the left edge).
    pub fn svg(&self) -> String {
        let (w, h, pad) = (640.0_f64, 400.0_f64, 56.0_f64);
        let points: Vec<(usize, u128)> =
            self.rows.iter().filter_map(|r| r.first_us().map(|v| (r.modules, v.max(1)))).collect();
        let top = points.iter().map(|p| p.1).max().unwrap_or(1).max(10_000) as f64;
        let widest = self.sizes.iter().copied().max().unwrap_or(1).max(10) as f64;
        let x = |n: usize| pad + (w - 2.0 * pad) * ((n as f64 + 1.0).log10() / (widest + 1.0).log10());
        // Microseconds on a log axis from 1 ms (values below sit on the axis).
        let y = |v: u128| h - pad - (h - 2.0 * pad) * ((v as f64 / 1000.0).max(1.0).log10() / (top / 1000.0).log10());
        let colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"];
        let mut out = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" \
             font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
             <text x=\"{pad}\" y=\"20\">launch to first model request (ms, log) over rule modules (log)</text>\n\
             <line x1=\"{pad}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\" stroke=\"black\"/>\n\
             <line x1=\"{pad}\" y1=\"{pad}\" x2=\"{pad}\" y2=\"{b}\" stroke=\"black\"/>\n",
            b = h - pad,
            r = w - pad
        );
        for &n in &self.sizes {
            let _ =
                writeln!(out, "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{n}</text>", x(n), h - pad + 16.0);
        }
        let _ = writeln!(out, "<text x=\"4\" y=\"{:.1}\">{} ms</text>", y(top as u128) + 4.0, ms(Some(top as u128)));
        let _ = writeln!(out, "<text x=\"4\" y=\"{:.1}\">1 ms</text>", h - pad);
        for (i, target) in self.targets.iter().enumerate() {
            let color = colors.get(i % colors.len()).copied().unwrap_or("black");
            let line: Vec<String> = self
                .sizes
                .iter()
                .filter_map(|&n| {
                    self.row(target, n).and_then(Row::first_us).map(|v| format!("{:.1},{:.1}", x(n), y(v.max(1))))
                })
                .collect();
            let _ = writeln!(
                out,
                "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>",
                line.join(" ")
            );
            let _ = writeln!(
                out,
                "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"{color}\">{}</text>",
                pad + 160.0 * (i % 3) as f64,
                h - 20.0 + 14.0 * (i / 3) as f64,
                crate::report::escape::html(&crate::report::escape::cut(target, 60))
            );
        }
        out.push_str("</svg>\n");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bench_case_loads_at_every_size_and_touches_a_matched_file() {
        let empty = case(0).expect("the empty case");
        assert_eq!(empty.scenario.tree.len(), 1);
        let c = case(100).expect("the case");
        let rules = c.scenario.tree.keys().filter(|k| k.starts_with(".elowen/rules/")).count();
        assert_eq!(rules, 100);
        assert_eq!(c.scenario.steps.len(), 3);
    }

    fn row(target: &str, modules: usize, first: u128, next: u128) -> Row {
        Row { target: target.into(), modules, first: vec![first, first + 10, first - 1], next: vec![next], error: None }
    }

    #[test]
    fn the_table_reads_each_time_beside_its_floor_and_the_baseline() {
        let bench = Bench {
            sizes: vec![0, 1000],
            targets: vec!["agent".into(), "reference-adapter".into()],
            baseline: "reference-adapter".into(),
            rows: vec![
                row("agent", 0, 400_000, 100_000),
                row("reference-adapter", 0, 20_000, 5_000),
                row("agent", 1000, 800_000, 150_000),
                Row { error: Some("TIMEOUT: slow".into()), ..row("reference-adapter", 1000, 40_000, 10_000) },
            ],
        };
        let table = bench.table();
        // The agent at 1000: 800 ms, 2.00 × its empty tree, 20.00 × the reference's 40 ms.
        assert!(table.contains("| agent | 1000 | 800.0 | 2.00 | 20.00 | 150.0 | 1.50 | 15.00 |"), "{table}");
        assert!(table.contains("TIMEOUT: slow"), "{table}");
        let hostile = Bench { rows: vec![Row { target: "a|b\nc".into(), ..row("x", 0, 1, 1) }], ..bench.clone() };
        assert!(hostile.table().contains("| a\\|b c | 0 |"), "{}", hostile.table());
        let page = Bench { targets: vec!["<b>".into(), "reference-adapter".into()], ..bench.clone() }.html();
        assert!(page.contains("<td>800.0</td><td>2.00</td><td>20.00</td>"), "{page}");
        assert!(!page.contains("<b>") && page.contains("TIMEOUT: slow"), "{page}");
        let svg = bench.svg();
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
    }

    #[test]
    fn a_median_of_nothing_is_nothing() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[5, 1, 3]), Some(3));
        assert_eq!(ratio(Some(1), Some(0)), "-");
    }
}
