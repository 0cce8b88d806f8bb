//! Differences people can read: invisible bytes made visible and marked, multi-line values diffed
//! as text with context (the `similar` crate, as insta uses it), and long values cut around the
//! first difference, so that a CRLF, a missing final newline or a BOM is never shown as two
//! identical-looking strings.
//!
//! A diff is bounded whatever it is given (issue #21: a reply of a few MB with hundreds of
//! thousands of lines hung the report): the lines both values share at the start and at the end
//! are skipped in one pass, at most [`DIFF_LINES`] lines and [`DIFF_BYTES`] bytes of each side are
//! diffed after that, the diff has a deadline of [`DIFF_DEADLINE`], at most [`MAX_LINES`] lines
//! of it are shown, and the rendering is cut at [`DIFF_OUTPUT_MAX`] bytes; each cut says so.

use std::fmt::Write;
use std::time::{Duration, Instant};

use similar::{Algorithm, ChangeTag, TextDiff};

/// How many characters of a long one-line value are shown on each side of its first difference.
const WINDOW: usize = 80;
/// The most diff lines shown for one value. The default is 60.
pub const MAX_LINES: usize = 60;
/// Unchanged lines shown around a change.
const CONTEXT: usize = 3;
/// The most lines of each side diffed, from the first line that differs (less its context). The
/// default is 2,000: the Myers diff of two such sides takes milliseconds.
pub const DIFF_LINES: usize = 2_000;
/// The most bytes of each side diffed, from the first line that differs. The default is 256 KiB.
pub const DIFF_BYTES: usize = 256 << 10;
/// How long the line diff may take; past it, `similar` gives a correct but longer diff. The
/// default is one second.
pub const DIFF_DEADLINE: Duration = Duration::from_secs(1);
/// The most bytes of one rendered diff. The default is 32 KiB.
pub const DIFF_OUTPUT_MAX: usize = 32 << 10;

/// Whether `c` is a bidi or zero-width format character, which [`visible`] marks.
fn is_format(c: char) -> bool {
    matches!(c, '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{61c}')
}

/// `s` with every invisible or ambiguous character shown as a visible mark: `␍` (CR), `→` (tab),
/// `⟨BOM⟩`, `⍽` (no-break space), `⟨U+XXXX⟩` for other control and format characters (the bidi
/// overrides and isolates among them).
pub fn visible(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\r' => out.push('␍'),
            '\t' => out.push('→'),
            '\u{feff}' => out.push_str("⟨BOM⟩"),
            '\u{a0}' => out.push('⍽'),
            '\n' => out.push('\n'),
            c if c.is_control() || is_format(c) => {
                let _ = write!(out, "⟨U+{:04X}⟩", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// Whether `s` holds anything [`visible`] marks.
fn has_invisible(s: &str) -> bool {
    s.chars().any(|c| matches!(c, '\r' | '\t' | '\u{feff}' | '\u{a0}') || (c.is_control() && c != '\n') || is_format(c))
}

/// The byte offset of the first character where `a` and `b` differ.
fn first_difference(a: &str, b: &str) -> usize {
    a.char_indices().zip(b.chars()).find(|((_, x), y)| x != y).map_or_else(|| a.len().min(b.len()), |((i, _), _)| i)
}

/// A window of `s` around byte `at` (a char boundary), with `…` where it was cut. It walks at most
/// [`WINDOW`] characters each way from `at`, and counts the rest without collecting them.
fn around(s: &str, at: usize) -> String {
    let at = (0..=at.min(s.len())).rev().find(|i| s.is_char_boundary(*i)).unwrap_or(0);
    let (head, tail) = (s.get(..at).unwrap_or_default(), s.get(at..).unwrap_or_default());
    let from = head.char_indices().rev().nth(WINDOW - 1).map_or(0, |(i, _)| i);
    let to = tail.char_indices().nth(WINDOW).map_or(s.len(), |(i, _)| at + i);
    let mut out = String::new();
    if from > 0 {
        let _ = write!(out, "…[{} chars] ", s.get(..from).unwrap_or_default().chars().count());
    }
    out.push_str(s.get(from..to).unwrap_or_default());
    if to < s.len() {
        let _ = write!(out, " …[{} more chars]", s.get(to..).unwrap_or_default().chars().count());
    }
    out
}

/// The byte offset after the `n`th newline of `s` at or after `from`, or `s.len()`.
fn after_lines(s: &[u8], from: usize, n: usize) -> usize {
    let mut at = from;
    for _ in 0..n {
        match s.get(at..).and_then(|rest| rest.iter().position(|b| *b == b'\n')) {
            Some(i) => at += i + 1,
            None => return s.len(),
        }
    }
    at
}

/// The start of the line `n` lines before the line that holds byte `at`.
fn lines_before(s: &[u8], at: usize, n: usize) -> usize {
    let mut start = s.get(..at).and_then(|h| h.iter().rposition(|b| *b == b'\n')).map_or(0, |i| i + 1);
    for _ in 0..n {
        if start == 0 {
            break;
        }
        start = s.get(..start - 1).and_then(|h| h.iter().rposition(|b| *b == b'\n')).map_or(0, |i| i + 1);
    }
    start
}

/// The part of two multi-line values worth diffing: both without the lines they share at the
/// start and the end (less [`CONTEXT`] lines), each cut to [`DIFF_LINES`] lines and
/// [`DIFF_BYTES`] bytes. Returns the parts, how many lines were skipped at the start, and how
/// many bytes of each side were left out at the end by the caps.
fn window<'a>(expected: &'a str, actual: &'a str) -> (&'a str, &'a str, usize, usize, usize) {
    let (e, a) = (expected.as_bytes(), actual.as_bytes());
    let prefix = e.iter().zip(a).take_while(|(x, y)| x == y).count();
    let room = e.len().min(a.len()) - prefix;
    let suffix = e.iter().rev().zip(a.iter().rev()).take(room).take_while(|(x, y)| x == y).count();
    // Both values are the same up to `prefix` and from their ends back `suffix` bytes, so lines
    // found in one are found at the same offsets in the other.
    let start = lines_before(e, prefix, CONTEXT);
    let e_end = after_lines(e, e.len() - suffix, CONTEXT + 1).max(e.len() - suffix);
    let a_end = a.len() - (e.len() - e_end);
    let skipped = e.get(..start).map_or(0, |h| h.iter().filter(|b| **b == b'\n').count());
    let cap = |s: &'a str, end: usize| -> (&'a str, usize) {
        let bytes = s.as_bytes();
        let mut to = after_lines(bytes, start, DIFF_LINES).min(end);
        if to - start > DIFF_BYTES {
            let limit = start + DIFF_BYTES;
            // At the last line end within the cap, else at a char boundary (one huge line).
            to = bytes.get(start..limit).and_then(|w| w.iter().rposition(|b| *b == b'\n')).map_or_else(
                || (start..=limit).rev().find(|i| s.is_char_boundary(*i)).unwrap_or(start),
                |i| start + i + 1,
            );
        }
        (s.get(start..to).unwrap_or_default(), end - to)
    };
    let (e_part, e_left) = cap(expected, e_end);
    let (a_part, a_left) = cap(actual, a_end);
    (e_part, a_part, skipped, e_left, a_left)
}

/// Renders the difference between an expected and an actual value, indented by `indent`. It
/// takes a bounded time and gives a bounded text whatever the values (see the module's docs).
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
        return crate::report::escape::cut(&out, DIFF_OUTPUT_MAX).into_owned();
    }
    let (e_part, a_part, skipped, e_left, a_left) = window(expected, actual);
    let began = Instant::now();
    let diff = TextDiff::configure().algorithm(Algorithm::Myers).timeout(DIFF_DEADLINE).diff_lines(e_part, a_part);
    let _ = writeln!(out, "{indent}--- expected");
    let _ = writeln!(out, "{indent}+++ actual");
    if skipped > 0 {
        let _ = writeln!(out, "{indent}({skipped} lines the same in both are not shown)");
    }
    let mut shown = 0;
    let mut total = 0;
    for group in diff.grouped_ops(CONTEXT) {
        if shown < MAX_LINES {
            let _ = writeln!(out, "{indent}@@");
        }
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
                let body = text.strip_suffix('\n').unwrap_or(text);
                let line = if body.len() > 2 * WINDOW { visible(&around(body, 0)) } else { visible(body) };
                let end = if text.ends_with('\n') { "" } else { " ⟨no newline at end⟩" };
                let _ = writeln!(out, "{indent}{sign} {line}{end}");
            }
        }
    }
    if total > shown {
        let _ = writeln!(out, "{indent}… {} more diff lines", total - shown);
    }
    if e_left > 0 || a_left > 0 {
        let _ = writeln!(
            out,
            "{indent}(the diff was cut at {DIFF_LINES} lines or {} KiB a side: {e_left} more bytes of expected and \
             {a_left} of actual not compared)",
            DIFF_BYTES >> 10
        );
    }
    if began.elapsed() >= DIFF_DEADLINE {
        let _ = writeln!(out, "{indent}(the diff ran out of time: it is correct, but may not be the shortest)");
    }
    if has_invisible(e_part) || has_invisible(a_part) {
        let _ = writeln!(out, "{indent}(invisible characters are marked: ␍ CR, → tab, ⍽ no-break space, ⟨BOM⟩)");
    }
    crate::report::escape::cut(&out, DIFF_OUTPUT_MAX).into_owned()
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
    fn a_change_deep_in_a_long_value_is_shown_after_the_lines_both_share() {
        let a: String = (0..200_000).map(|i| format!("line {i}\n")).collect();
        let b = a.replace("line 150000\n", "line 150000 changed\n");
        let out = render(&a, &b, "");
        assert!(out.contains("(149997 lines the same in both are not shown)"), "{out}");
        assert!(out.contains("- line 150000\n+ line 150000 changed"), "{out}");
        assert!(out.contains("  line 149999\n") && out.contains("  line 150003\n"), "{out}");
        assert!(!out.contains("cut"), "{out}");
    }

    #[rstest::rstest]
    #[case::a_prefix_of_the_other("a\nb\n", "a\nb\nc\n", "+ c")]
    #[case::inside_a_multibyte_char("x\né\ny\n", "x\nè\ny\n", "+ è")]
    #[case::a_suffix_of_the_other("b\nc\n", "a\nb\nc\n", "+ a")]
    #[case::a_bidi_override("a\nb\n", "a\n\u{202e}b\n", "+ ⟨U+202E⟩b")]
    fn the_window_keeps_the_change(#[case] expected: &str, #[case] actual: &str, #[case] shown: &str) {
        let out = render(expected, actual, "");
        assert!(out.contains(shown), "{out}");
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
