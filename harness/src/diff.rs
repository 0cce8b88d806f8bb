//! Differences people can read: invisible bytes made visible and marked, multi-line values diffed
//! as text with context (the `similar` crate, as insta uses it), and long values cut around the
//! first difference, so that a CRLF, a missing final newline or a BOM is never shown as two
//! identical-looking strings.

use std::fmt::Write;

use similar::{ChangeTag, TextDiff};

/// How many characters of a long one-line value are shown on each side of its first difference.
const WINDOW: usize = 80;
/// The most diff lines shown for one value.
const MAX_LINES: usize = 60;

/// `s` with every invisible or ambiguous character shown as a visible mark: `␍` (CR), `→` (tab),
/// `⟨BOM⟩`, `⍽` (no-break space), `⟨U+XXXX⟩` for other control and format characters.
pub fn visible(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\r' => out.push('␍'),
            '\t' => out.push('→'),
            '\u{feff}' => out.push_str("⟨BOM⟩"),
            '\u{a0}' => out.push('⍽'),
            '\n' => out.push('\n'),
            c if c.is_control() || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2028}' | '\u{2029}') => {
                let _ = write!(out, "⟨U+{:04X}⟩", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// Whether `s` holds anything [`visible`] marks.
fn has_invisible(s: &str) -> bool {
    s.chars().any(|c| matches!(c, '\r' | '\t' | '\u{feff}' | '\u{a0}') || (c.is_control() && c != '\n'))
}

/// The byte offset of the first character where `a` and `b` differ.
fn first_difference(a: &str, b: &str) -> usize {
    a.char_indices().zip(b.chars()).find(|((_, x), y)| x != y).map_or_else(|| a.len().min(b.len()), |((i, _), _)| i)
}

/// A window of `s` around byte `at`, with `…` where it was cut.
fn around(s: &str, at: usize) -> String {
    let chars: Vec<(usize, char)> = s.char_indices().collect();
    let pos = chars.iter().position(|(i, _)| *i >= at).unwrap_or(chars.len());
    let from = pos.saturating_sub(WINDOW);
    let to = (pos + WINDOW).min(chars.len());
    let mut out = String::new();
    if from > 0 {
        let _ = write!(out, "…[{from} chars] ");
    }
    out.extend(chars.get(from..to).unwrap_or_default().iter().map(|(_, c)| *c));
    if to < chars.len() {
        let _ = write!(out, " …[{} more chars]", chars.len() - to);
    }
    out
}

/// Renders the difference between an expected and an actual value, indented by `indent`.
pub fn render(expected: &str, actual: &str, indent: &str) -> String {
    let mut out = String::new();
    let one_line = |s: &str| !s.trim_end_matches('\n').contains('\n');
    if one_line(expected) && one_line(actual) {
        let at = first_difference(expected, actual);
        let (e, a) = if expected.len().max(actual.len()) > 2 * WINDOW {
            (around(expected, at), around(actual, at))
        } else {
            (expected.to_string(), actual.to_string())
        };
        let _ = writeln!(out, "{indent}expected: {}", quoted(&e));
        let _ = writeln!(out, "{indent}actual:   {}", quoted(&a));
        let mut notes = Vec::new();
        if has_invisible(expected) || has_invisible(actual) {
            notes.push("invisible characters are marked: ␍ CR, → tab, ⍽ no-break space, ⟨BOM⟩");
        }
        if expected.trim_end_matches('\n') == actual.trim_end_matches('\n') && expected != actual {
            notes.push("they differ only in the newline at the end");
        }
        for n in notes {
            let _ = writeln!(out, "{indent}({n})");
        }
        return out;
    }
    let diff = TextDiff::from_lines(expected, actual);
    let _ = writeln!(out, "{indent}--- expected");
    let _ = writeln!(out, "{indent}+++ actual");
    let mut shown = 0;
    let mut total = 0;
    for group in diff.grouped_ops(3) {
        let _ = writeln!(out, "{indent}@@");
        for op in group {
            for change in diff.iter_changes(&op) {
                total += 1;
                if shown >= MAX_LINES {
                    continue;
                }
                shown += 1;
                let sign = match change.tag() {
                    ChangeTag::Delete => '-',
                    ChangeTag::Insert => '+',
                    ChangeTag::Equal => ' ',
                };
                let text = change.value();
                let body = visible(text.strip_suffix('\n').unwrap_or(text));
                let line = if text.len() > 2 * WINDOW { around(&body, 0) } else { body };
                let end = if text.ends_with('\n') { "" } else { " ⟨no newline at end⟩" };
                let _ = writeln!(out, "{indent}{sign} {line}{end}");
            }
        }
    }
    if total > shown {
        let _ = writeln!(out, "{indent}… {} more diff lines", total - shown);
    }
    if has_invisible(expected) || has_invisible(actual) {
        let _ = writeln!(out, "{indent}(invisible characters are marked: ␍ CR, → tab, ⍽ no-break space, ⟨BOM⟩)");
    }
    out
}

fn quoted(s: &str) -> String {
    let v = visible(s).replace('\n', "⏎");
    format!("«{v}»")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crlf_and_a_final_newline_are_visible() {
        let out = render("a\r\nb\r\n", "a\nb\n", "");
        assert!(out.contains("- a␍") && out.contains("+ a"), "{out}");
        let out = render("# Root\n", "# Root", "");
        assert!(out.contains("«# Root⏎»") && out.contains("only in the newline at the end"), "{out}");
        let out = render("\u{feff}x", "x", "");
        assert!(out.contains("⟨BOM⟩"), "{out}");
    }

    #[test]
    fn an_inserted_line_marks_only_that_line() {
        let out = render("a\nb\nc\n", "a\nx\nb\nc\n", "");
        assert_eq!(out.lines().filter(|l| l.starts_with('+') && !l.starts_with("+++")).count(), 1, "{out}");
        assert_eq!(out.lines().filter(|l| l.starts_with('-') && !l.starts_with("---")).count(), 0, "{out}");
    }

    #[test]
    fn a_long_value_is_cut_around_its_first_difference() {
        let a = "a".repeat(300_000);
        let mut b = a.clone();
        b.replace_range(150_000..150_001, "b");
        let out = render(&a, &b, "");
        assert!(out.len() < 1_000, "{} bytes", out.len());
        assert!(out.contains("more chars"), "{out}");
    }
}
