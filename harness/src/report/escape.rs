//! Text from outside made inert and bounded for the format it is written into: one function per
//! format (terminal, Markdown, XML, HTML, JSON), and the length caps every reporter applies before
//! it renders (house style, "Text from outside is data"). Every string that came from a case file
//! or an implementation — case ids, names, areas, reasons, mismatch values, diffs, stderr tails,
//! hello fields, decision names — passes through here on its way into a report.
//!
//! # What each format guards against
//! - A terminal acts on control characters: ESC starts CSI and OSC sequences (clear the screen,
//!   set the window title, OSC 8 links that show one address and open another), U+009B is a
//!   one-character CSI, and the bidi overrides and isolates reorder what is shown. [`terminal`]
//!   shows every such character as a visible escape (`\x1b`, `\u{9b}`, `\u{202e}`).
//! - Markdown turns data into HTML, headings, table cells, links, images and code spans that
//!   data can close. [`markdown_text`] backslash-escapes every character that means something
//!   inline, [`markdown_code`] picks a backtick fence longer than any run in the text, and
//!   [`markdown_block`] a code fence no line of the text can close.
//! - XML 1.0 cannot hold most C0 characters even escaped, and a parser turns a newline, tab or CR
//!   in an attribute into a space. [`xml_text`] and [`xml_attr`] escape those visibly; the XML
//!   writer (quick-xml) escapes the markup characters.
//! - HTML: [`html`] escapes markup and, as [`terminal`], the control and bidi characters.
//! - JSON: serde_json escapes C0; [`json`] also escapes DEL, C1 and the bidi characters as
//!   `\uXXXX`, so that a report printed to a terminal stays inert and still reads back the same.
//!
//! The escapes are not reversible: a backslash in the data is shown as it is, so `\x1b` in a
//! report is either an ESC or those four characters. Windows paths stay readable that way, and
//! what matters here is that nothing acts.
//!
//! # The caps
//! Each is a number of bytes of the source text, cut at a character boundary by [`cut`] with a
//! visible `… (N more bytes)` marker before the text is escaped. Escaping then grows a text at
//! most sixfold: a `"` becomes `&quot;` in XML and HTML, a C0 character the four characters
//! `\x01` (five in Markdown, `\\x01`). Diffs have bounds of their own, set by the diff renderer,
//! which cuts with [`cut`] (it uses this file, so this file does not link to it).
//!
//! So every rendered report but JSON — human, Markdown, JUnit, badge, the matrix pages — holds
//! at most 6 × ([`DETAIL_MAX`] + [`REASON_MAX`] + [`MESSAGE_MAX`] + 4 × [`FIELD_MAX`]) bytes and a
//! few hundred bytes of its own per case (about 1.1 MiB), and 6 × 4 × [`FIELD_MAX`] per area for
//! the hello fields and the area's name, whatever the implementation sent: a fixed size per case,
//! which no reply, stderr or hello can grow. A 13 MiB hello gives a JUnit file of a few KiB (it gave 364 MiB before, the hello repeated in
//! every area).
//!
//! The JSON report is the record that `conformance report` renders again, so it keeps every
//! observation and mismatch as sent; its hello fields and reasons are cut to their caps. It is
//! bounded by six times what the implementation sent — each observation once, the mismatches
//! that quote it about once more, each re-escaped at most threefold (`\u009b` is six bytes for
//! two) — plus what the case files hold (ids, names, expected values).

use std::borrow::Cow;
use std::fmt::Write;

/// The most bytes shown of one hello field (name, version, language) and of one label from a case
/// (its id, name, area, a decision's name, a mismatch's field). The default is 256 bytes.
pub const FIELD_MAX: usize = 256;
/// The most bytes shown of a reason. It holds a whole stderr tail (40 lines of at most 1 KiB,
/// harness/src/run/adapter.rs), the part of a crash that says most. The default is 48 KiB.
pub const REASON_MAX: usize = 48 << 10;
/// The most bytes of a JUnit `message` attribute, a reason in one line (the element's text holds
/// the whole detail). The default is 4 KiB.
pub const MESSAGE_MAX: usize = 4 << 10;
/// The most bytes of one case's detail (reason, decision differences, diffs). The default is
/// 128 KiB.
pub const DETAIL_MAX: usize = 128 << 10;
/// The most bytes of one line of an adapter's transcript shown by `smoke` (a reply may be 16 MiB).
/// The default is 4 KiB.
pub const TRANSCRIPT_LINE_MAX: usize = 4 << 10;
/// The most bytes of an error printed when the command fails. The default is 256 KiB.
pub const ERROR_MAX: usize = 256 << 10;

/// Room kept for the marker, so that a cut text is never longer than its cap and cutting it
/// again changes nothing: `… (` and ` more bytes)` are 17 bytes, the count at most 20.
const MARKER_ROOM: usize = 40;

/// `s` cut to at most `max` bytes (`max` ≥ 40) at a character boundary, ending in
/// `… (N more bytes)` when it was cut. A text within `max` is returned as it is, so cutting twice
/// is cutting once.
///
/// ```
/// use harness::report::escape::cut;
/// assert_eq!(cut("short", 64), "short");
/// let long = "é".repeat(100);
/// let shown = cut(&long, 64);
/// assert!(shown.len() <= 64 && shown.ends_with("more bytes)"), "{shown}");
/// assert_eq!(cut(&shown, 64), shown);
/// ```
pub fn cut(s: &str, max: usize) -> Cow<'_, str> {
    if s.len() <= max {
        return Cow::Borrowed(s);
    }
    let mut end = max.saturating_sub(MARKER_ROOM);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}… ({} more bytes)", s.get(..end).unwrap_or_default(), s.len() - end))
}

/// Whether a character acts on a terminal or cannot stand in XML: C0 (NUL to US), DEL, C1
/// (U+0080 to U+009F, U+009B being a CSI), the Arabic letter mark and the left-to-right and
/// right-to-left marks, the bidi embeddings, overrides and isolates (U+202A–U+202E,
/// U+2066–U+2069), the line and paragraph separators, and the non-characters U+FFFE and U+FFFF.
fn is_active(c: char) -> bool {
    matches!(
        c,
        '\0'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{61c}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
            | '\u{fffe}'
            | '\u{ffff}'
    )
}

/// Writes the visible escape of `c`: `\n`, `\t`, `\r`, `\xNN` for another ASCII character,
/// `\u{N}` for the rest.
fn push_escape(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        c if c.is_ascii() => {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
    }
}

/// `s` with every active character escaped, except newline and tab where `keep_lines`.
fn neutral(s: &str, keep_lines: bool) -> Cow<'_, str> {
    let escaped = |c: char| is_active(c) && !(keep_lines && matches!(c, '\n' | '\t'));
    if !s.chars().any(escaped) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if escaped(c) {
            push_escape(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `s` made inert on a terminal, its lines and tabs kept: every other control character, DEL,
/// C1 and the bidi characters shown as visible escapes.
///
/// ```
/// use harness::report::escape::terminal;
/// assert_eq!(terminal("a\u{1b}[2J\n\u{9b}1m \u{202e}b"), "a\\x1b[2J\n\\u{9b}1m \\u{202e}b");
/// ```
pub fn terminal(s: &str) -> Cow<'_, str> {
    neutral(s, true)
}

/// As [`terminal`], for a text that must stay on one line: a newline and a tab are escaped too.
pub fn terminal_line(s: &str) -> Cow<'_, str> {
    neutral(s, false)
}

/// The characters that mean something inline in CommonMark or GitHub's Markdown: emphasis,
/// code, links and images (`[`, `]`, `!`), raw HTML and autolinks (`<`, `>`), entities (`&`),
/// table cells (`|`), strikethrough and subscripts (`~`), superscripts (`^`), math (`$`), and the
/// starts of bare autolinks (`:` in `http:`, `.` in `www.`, `@` in an address), headings' closing
/// `#`s, and the backslash itself.
const MARKDOWN_ACTIVE: &[char] =
    &['\\', '`', '*', '_', '[', ']', '<', '>', '&', '!', '|', '~', '^', '$', ':', '.', '@', '#', '(', ')'];

/// `s` as Markdown inline text that renders as the text itself, on one line: active characters
/// escaped as for [`terminal_line`], then every character in `MARKDOWN_ACTIVE` backslash-escaped.
/// No raw HTML, link, image, heading, table cell or code span can come of it. It must not start a
/// line (where `-`, `+`, `=` and digits start blocks); the reports always put it after text of
/// their own.
///
/// A small function rather than a crate: no maintained crate escapes Markdown for GitHub's
/// dialect, and CommonMark allows a backslash before any ASCII punctuation.
pub fn markdown_text(s: &str) -> String {
    let s = terminal_line(s);
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if MARKDOWN_ACTIVE.contains(&c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The longest run of `c` in `s`.
fn longest_run(s: &str, c: char) -> usize {
    let (mut best, mut run) = (0, 0);
    for x in s.chars() {
        run = if x == c { run + 1 } else { 0 };
        best = best.max(run);
    }
    best
}

/// `s` as a Markdown code span on one line, fenced by more backticks than any run in it, so
/// nothing in it can close the span. Outside a table only (a `|` splits a GitHub table cell even
/// in a code span).
pub fn markdown_code(s: &str) -> String {
    let s = terminal_line(s);
    if s.is_empty() {
        return String::new();
    }
    let fence = "`".repeat(longest_run(&s, '`') + 1);
    // A span that starts or ends with a backtick needs a space, which CommonMark strips.
    let pad = if s.starts_with('`') || s.ends_with('`') { " " } else { "" };
    format!("{fence}{pad}{s}{pad}{fence}")
}

/// `s` as a fenced Markdown code block, every line prefixed by `indent` (the indentation of the
/// list item it belongs to), with a fence of more backticks than any run in `s` (three at
/// least), so no line can close it; active characters escaped as for [`terminal`]. Ends with a
/// newline.
pub fn markdown_block(s: &str, indent: &str) -> String {
    let s = terminal(s);
    let fence = "`".repeat((longest_run(&s, '`') + 1).max(3));
    let mut out = format!("{indent}{fence}\n");
    for line in s.lines() {
        let _ = writeln!(out, "{indent}{line}");
    }
    let _ = writeln!(out, "{indent}{fence}");
    out
}

/// `s` as XML text content: every character XML 1.0 forbids (and the others a terminal acts on)
/// shown as a visible escape, lines and tabs kept. The writer escapes `<`, `>` and `&`.
pub fn xml_text(s: &str) -> Cow<'_, str> {
    terminal(s)
}

/// `s` as an XML attribute value: as [`xml_text`], and a newline, tab or CR escaped visibly, as a
/// parser would turn them into spaces. The writer escapes `<`, `>`, `&`, `"` and `'`.
pub fn xml_attr(s: &str) -> Cow<'_, str> {
    terminal_line(s)
}

/// `s` as HTML text or a quoted attribute value: markup escaped, and the control and bidi
/// characters shown as for [`terminal`].
///
/// ```
/// use harness::report::escape::html;
/// assert_eq!(html("<a href=\"x\">&'\u{202e}"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;\\u{202e}");
/// ```
pub fn html(s: &str) -> String {
    let s = terminal(s);
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A JSON document as serde_json wrote it, with DEL, C1 and the bidi and separator characters
/// escaped as `\uXXXX` too (serde_json escapes only C0). Every character outside ASCII in
/// serde_json's output stands inside a string, where the escape reads back as the same
/// character, so the document means what it meant.
///
/// ```
/// use harness::report::escape::json;
/// let text = json(serde_json::to_string(&"a\u{9b}b\u{202e}").unwrap());
/// assert_eq!(text, r#""a\u009bb\u202e""#);
/// assert_eq!(serde_json::from_str::<String>(&text).unwrap(), "a\u{9b}b\u{202e}");
/// ```
pub fn json(text: String) -> String {
    let escaped = |c: char| is_active(c) && c > '\u{7e}';
    if !text.chars().any(escaped) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if escaped(c) {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::clear_screen("\u{1b}[2J", "\\x1b[2J")]
    #[case::osc_title("\u{1b}]0;t\u{7}", "\\x1b]0;t\\x07")]
    #[case::c1_csi("\u{9b}31m", "\\u{9b}31m")]
    #[case::bidi_override("\u{202e}x\u{202c}", "\\u{202e}x\\u{202c}")]
    #[case::bidi_isolate("\u{2066}x\u{2069}", "\\u{2066}x\\u{2069}")]
    #[case::del_nul_cr("\u{7f}\0\r", "\\x7f\\x00\\r")]
    #[case::lines_kept("a\n\tb", "a\n\tb")]
    #[case::plain("C:\\Users é", "C:\\Users é")]
    fn terminal_shows_active_characters_as_escapes(#[case] raw: &str, #[case] shown: &str) {
        assert_eq!(terminal(raw), shown);
    }

    #[test]
    fn terminal_line_escapes_lines_and_tabs() {
        assert_eq!(terminal_line("a\nb\tc"), "a\\nb\\tc");
    }

    #[rstest]
    #[case::exact(10, "0123456789", "0123456789")]
    #[case::multibyte(41, "ééé", "ééé")]
    fn cut_keeps_what_fits(#[case] max: usize, #[case] s: &str, #[case] shown: &str) {
        assert_eq!(cut(s, max), shown);
    }

    #[test]
    fn cut_marks_the_bytes_it_dropped_at_a_char_boundary() {
        let s = "ab€".repeat(100);
        for max in 40..80 {
            let c = cut(&s, max);
            assert!(c.len() <= max, "{max}: {c}");
            let kept = c.split('…').next().unwrap_or_default();
            assert!(c.ends_with(&format!("({} more bytes)", s.len() - kept.len())), "{c}");
        }
    }

    #[rstest]
    #[case::html("<b>", "\\<b\\>")]
    #[case::pipe("a|b", "a\\|b")]
    #[case::image("![x](y)", "\\!\\[x\\]\\(y\\)")]
    #[case::autolink("http://x.y", "http\\://x\\.y")]
    #[case::newline("a\n# h", "a\\\\n\\# h")]
    fn markdown_text_escapes_what_is_active_inline(#[case] raw: &str, #[case] shown: &str) {
        assert_eq!(markdown_text(raw), shown);
    }

    #[rstest]
    #[case::plain("m-fm-001", "`m-fm-001`")]
    #[case::run("a``b", "```a``b```")]
    #[case::edge("`a", "`` `a ``")]
    fn markdown_code_cannot_be_closed(#[case] raw: &str, #[case] shown: &str) {
        assert_eq!(markdown_code(raw), shown);
    }

    #[test]
    fn markdown_block_fences_past_any_run() {
        assert_eq!(markdown_block("x\n````\ny", "  "), "  `````\n  x\n  ````\n  y\n  `````\n");
    }

    #[test]
    fn json_keeps_structure_and_escapes_inside_strings() {
        let text =
            json(serde_json::to_string_pretty(&serde_json::json!({"a\u{7f}": ["\u{2028}"]})).unwrap_or_default());
        assert_eq!(text, "{\n  \"a\\u007f\": [\n    \"\\u2028\"\n  ]\n}");
    }
}
