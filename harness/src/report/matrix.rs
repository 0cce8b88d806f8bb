//! `conformance matrix`: several implementations run over the same corpus, written as one static
//! site — `index.html` (implementations × profiles × areas, seed violations apart from differences
//! with the suite's decisions, unsupported cases apart from both), `matrix.json` (every result),
//! and a page per non-passing case with its reason and diff. No script, no external asset: the
//! pages open from disk in any browser.
//!
//! Every text from a case or an implementation is cut to its cap and escaped by
//! [`crate::report::escape::html`] (markup, control and bidi characters); `matrix.json` carries the same
//! caps as the JSON report.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::fs;
use std::path::Path;

use crate::report::escape::{cut, FIELD_MAX, MESSAGE_MAX, REASON_MAX};
use crate::run::case::{CaseResult, Status, Verdict};
use crate::run::wire::Hello;

/// One implementation's run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Column {
    /// The name given on the command line.
    pub name: String,
    /// Its hello.
    pub hello: Hello,
    /// Its results, one per case, in corpus order.
    pub results: Vec<CaseResult>,
}

/// A label from data (a name, an id, an area, a hello field), cut to its cap and escaped for
/// HTML.
fn esc(s: &str) -> String {
    crate::report::escape::html(&cut(s, FIELD_MAX))
}

/// A name safe as a file name.
fn slug(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' { c } else { '_' }).collect()
}

/// Counts of one cell.
#[derive(Debug, Default, Clone, Copy)]
struct Cell {
    total: usize,
    passed: usize,
    seed: usize,
    decision: usize,
    other: usize,
    unsupported: usize,
}

impl Cell {
    fn add(&mut self, r: &CaseResult) {
        self.total += 1;
        match r.status {
            Status::Pass | Status::Xpass => self.passed += 1,
            Status::Unsupported | Status::Skip => self.unsupported += 1,
            Status::Fail | Status::Xfail if r.basis == Some(Verdict::Seed) => self.seed += 1,
            Status::Fail | Status::Xfail => self.decision += 1,
            _ => self.other += 1,
        }
    }

    fn html(&self) -> String {
        if self.total > 0 && self.unsupported == self.total {
            return format!("<span class=\"unsup\">not run ({} unsupported)</span>", self.total);
        }
        let mut out = format!("<span class=\"pass\">{}/{}</span>", self.passed, self.total);
        for (n, class, what) in [
            (self.seed, "seed", "violate the seed"),
            (self.decision, "decision", "differ from a decision"),
            (self.other, "other", "error, crash or timeout"),
            (self.unsupported, "unsup", "unsupported"),
        ] {
            if n > 0 {
                let _ = write!(out, " <span class=\"{class}\" title=\"{what}\">{n} {}</span>", esc(what));
            }
        }
        out
    }
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#222}\
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left}\
th{background:#f4f4f4}.pass{font-weight:600}.seed{color:#b00020}.decision{color:#a05a00}\
.other{color:#6a1b9a}.unsup{color:#777}pre{background:#f8f8f8;padding:1em;overflow:auto}";

fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head>\n<body>\n{body}</body></html>\n",
        esc(title)
    )
}

/// Writes the site into `dir` (created if missing).
pub fn write(dir: &Path, columns: &[Column]) -> Result<(), String> {
    let put = |p: &Path, text: String| fs::write(p, text).map_err(|e| format!("{}: {e}", p.display()));
    fs::create_dir_all(dir.join("cases")).map_err(|e| format!("{}: {e}", dir.display()))?;
    // Rows: profile/area → column index → counts.
    let mut rows: BTreeMap<String, Vec<Cell>> = BTreeMap::new();
    let mut totals = vec![Cell::default(); columns.len()];
    for (i, col) in columns.iter().enumerate() {
        for r in &col.results {
            let row =
                rows.entry(format!("{}/{}", r.profile, r.area)).or_insert_with(|| vec![Cell::default(); columns.len()]);
            if let Some(cell) = row.get_mut(i) {
                cell.add(r);
            }
            if let Some(t) = totals.get_mut(i) {
                t.add(r);
            }
        }
    }
    let mut body = String::from("<h1>Conformance matrix</h1>\n");
    let _ = writeln!(
        body,
        "<p>Suite {}, adapter protocol {}. Each cell: cases passed of the cases run there; then those that \
         <span class=\"seed\">violate the seed</span>, that only <span class=\"decision\">differ from a decision</span> \
         of this suite, that <span class=\"other\">errored, crashed or timed out</span>, and that are \
         <span class=\"unsup\">unsupported</span> (a capability the implementation does not declare).</p>",
        env!("CARGO_PKG_VERSION"),
        crate::run::wire::PROTOCOL_VERSION
    );
    body.push_str("<table>\n<tr><th>profile/area</th>");
    for col in columns {
        let _ = write!(
            body,
            "<th>{}<br><small>{} {} ({})</small></th>",
            esc(&col.name),
            esc(&col.hello.name),
            esc(&col.hello.version),
            esc(&col.hello.language)
        );
    }
    body.push_str("</tr>\n");
    for (area, cells) in &rows {
        let _ = write!(body, "<tr><td>{}</td>", esc(area));
        for c in cells {
            let _ = write!(body, "<td>{}</td>", c.html());
        }
        body.push_str("</tr>\n");
    }
    body.push_str("<tr><th>all</th>");
    for t in &totals {
        let _ = write!(body, "<th>{}</th>", t.html());
    }
    body.push_str("</tr>\n</table>\n");
    for col in columns {
        let failing: Vec<&CaseResult> = col
            .results
            .iter()
            .filter(|r| !matches!(r.status, Status::Pass | Status::Unsupported | Status::Skip))
            .collect();
        let _ = writeln!(body, "<h2>{}: {} not passing</h2>", esc(&col.name), failing.len());
        if failing.is_empty() {
            continue;
        }
        body.push_str("<ul>\n");
        let col_dir = dir.join("cases").join(slug(&col.name));
        fs::create_dir_all(&col_dir).map_err(|e| format!("{}: {e}", col_dir.display()))?;
        for r in failing {
            let href = format!("cases/{}/{}.html", slug(&col.name), slug(&r.id));
            let class = match r.basis {
                Some(Verdict::Seed) => "seed",
                Some(Verdict::Decision) => "decision",
                None => "other",
            };
            let _ = writeln!(
                body,
                "<li><a href=\"{href}\">{}</a> <span class=\"{class}\">{}</span> {} — {}</li>",
                esc(&r.id),
                r.status.as_str(),
                esc(&r.name),
                crate::report::escape::html(&cut(r.reason.as_deref().unwrap_or(""), MESSAGE_MAX))
            );
            let detail = crate::report::formats::case_detail(r);
            let case_page = format!(
                "<p><a href=\"../../index.html\">matrix</a></p>\n<h1>{} on {}</h1>\n<p class=\"{class}\">{}</p>\n<pre>{}</pre>\n",
                esc(&r.id),
                esc(&col.name),
                crate::report::escape::html(&cut(r.reason.as_deref().unwrap_or(""), REASON_MAX)),
                crate::report::escape::html(&detail)
            );
            put(
                &col_dir.join(format!("{}.html", slug(&r.id))),
                page(&format!("{} on {}", cut(&r.id, FIELD_MAX), cut(&col.name, FIELD_MAX)), &case_page),
            )?;
        }
        body.push_str("</ul>\n");
    }
    put(&dir.join("index.html"), page("Conformance matrix", &body))?;
    let bounded: Vec<Column> = columns
        .iter()
        .map(|c| Column {
            name: c.name.clone(),
            hello: crate::report::formats::bounded_hello(&c.hello),
            results: c.results.iter().map(crate::report::formats::bounded_result).collect(),
        })
        .collect();
    let json = serde_json::to_string_pretty(&serde_json::json!({
        "suite_version": env!("CARGO_PKG_VERSION"),
        "protocol": crate::run::wire::PROTOCOL_VERSION,
        "implementations": bounded,
    }))
    .map_err(|e| e.to_string())?;
    put(&dir.join("matrix.json"), crate::report::escape::json(json))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_is_escaped() {
        assert_eq!(esc("<a href=\"x\">&'\u{1b}"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;\\x1b");
        assert_eq!(slug("my impl/1"), "my_impl_1");
    }
}
