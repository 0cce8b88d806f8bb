//! Reports on hostile input (issue #21, items 2 and 3): text from a case file or an implementation
//! never acts on what displays it — no escape sequence reaches a terminal, no HTML, heading, table
//! cell, link or image comes out of the Markdown summary, JUnit stays valid XML whose attributes
//! read back as the escaped text, the matrix page holds no element from data, the JSON report
//! holds no raw control or bidi character — and no report hangs or grows with what it is fed:
//! a diff of two multi-megabyte values renders within seconds, and a 13 MiB hello gives a JUnit
//! file of a few KiB. The command line too: `smoke`, a refused hello and a saved report rendered
//! again print nothing a terminal acts on.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use std::sync::mpsc;
use std::time::Duration;

use harness::case::corpus::default_cases_dir;
use harness::case::load::load_dir;
use harness::case::scenario::Basis;
use harness::judge::compare::Mismatch;
use harness::report::formats::{self, Summary};
use harness::run::case::{run_case, CaseResult, RunContext, Status, Verdict};
use harness::run::implementation::{reference_hello, InProcess};
use harness::Hello;

/// Each payload the audit found reaching a reader.
const PAYLOADS: &[&str] = &[
    "\u{1b}[2J",                                                     // clear screen
    "\u{1b}]0;pwned\u{7}",                                           // OSC 0: the window title
    "\u{1b}]8;;http://evil.example/\u{1b}\\click\u{1b}]8;;\u{1b}\\", // OSC 8: a link
    "\u{9b}31m",                                                     // CSI as one C1 character
    "\u{202e}exe.txt\u{202c} \u{2066}iso\u{2069}",                   // bidi overrides and isolates
    "\u{7f}",                                                        // DEL
    "<img src=http://x.example/a.png>",
    "<script>alert(1)</script>",
    "\n# heading\n",
    "a | b | c",
    "![image](http://x.example/i.png) [link](http://x.example/) www.x.example http://x.example",
    "\"<&\u{0}\u{1}",
    "`` ``` ` $x$ ~~s~~ *e* _e_ [^1] [[wiki]]",
];

fn hostile() -> String {
    PAYLOADS.concat()
}

/// A case id with a backtick run, which must not close the code span it is shown in.
const TICK_ID: &str = "m-evil-``-```-001";

fn real_results() -> Vec<CaseResult> {
    let cases = load_dir(&default_cases_dir()).unwrap();
    cases.iter().take(6).map(|c| run_case(&mut InProcess::default(), &RunContext::new(&reference_hello()), c)).collect()
}

/// Real results with hostile text in every field a case or an implementation fills, the first
/// three unexpected: a seed failure, a decision failure and a crash.
fn hostile_results() -> (Vec<CaseResult>, Summary) {
    let mut results = real_results();
    let h = hostile();
    let r = &mut results[0];
    r.id = TICK_ID.into();
    r.name = format!("name {h}");
    r.area = "evil | area\n# heading".into();
    r.status = Status::Fail;
    r.basis = Some(Verdict::Seed);
    r.reason = Some(format!("reason {h}"));
    r.steps[0].mismatches.push(Mismatch {
        field: format!("field {h}"),
        expected: format!("expected {h}\nline two {h}\n"),
        actual: format!("actual {h}\nline two\n"),
        basis: Basis::Decision(format!("D-{h}")),
    });
    r.decision_differences.push(format!("difference {h}"));
    let r = &mut results[1];
    r.status = Status::Fail;
    r.basis = Some(Verdict::Decision);
    r.decision = Some(format!("D-{h}"));
    r.reason = Some(format!("decision reason {h}"));
    r.steps[0].mismatches.push(Mismatch {
        field: "one line".into(),
        expected: format!("e {h}").replace('\n', " "),
        actual: format!("a {h}").replace('\n', " "),
        basis: Basis::Seed,
    });
    let r = &mut results[2];
    r.status = Status::Crash;
    r.reason = Some(format!("crash: exit status: 3\nstderr tail:\n{h}\n{h}"));
    let unexpected = results.iter().take(3).map(|r| r.id.clone()).collect();
    let summary = Summary::new(&results, unexpected);
    (results, summary)
}

/// A hello whose name, version and language hold markup, NUL, \x01 and escape sequences.
fn hostile_hello() -> Hello {
    let mut hello = reference_hello();
    hello.name = "\"<&\u{0}\u{1} name \u{1b}[2J \u{9b}31m \u{202e}x".into();
    hello.version = "1.0\"<&\u{0}\u{1}".into();
    hello.language = "rust\n<script>alert(1)</script>\t\u{7f}".into();
    hello
}

/// What the hostile hello's fields read as, escaped.
const HELLO_NAME_SHOWN: &str = r#""<&\x00\x01 name \x1b[2J \u{9b}31m \u{202e}x"#;
const HELLO_VERSION_SHOWN: &str = r#"1.0"<&\x00\x01"#;
const HELLO_LANGUAGE_SHOWN: &str = r#"rust\n<script>alert(1)</script>\t\x7f"#;

/// A character a terminal acts on: C0 but newline and tab, DEL, C1 (U+009B is a CSI), and the
/// bidi overrides and isolates that reorder what is shown.
fn acts_on_a_terminal(c: char) -> bool {
    (c < ' ' && c != '\n' && c != '\t')
        || ('\u{7f}'..='\u{9f}').contains(&c)
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

fn assert_inert_on_a_terminal(what: &str, text: &str) {
    let bad: Vec<String> = text.chars().filter(|c| acts_on_a_terminal(*c)).map(|c| format!("{c:?}")).collect();
    assert!(bad.is_empty(), "{what} holds {} characters a terminal acts on: {:?}", bad.len(), &bad[..bad.len().min(8)]);
}

/// Runs `f` on a thread and waits at most `secs` for it: a generous guard against a hang, not a
/// performance assertion.
fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs)).unwrap_or_else(|_| panic!("not done within {secs} s"))
}

fn bomb() -> (String, String) {
    let expected: String = (0..300_000).map(|i| format!("expected line {i}\n")).collect();
    let actual: String = (0..300_000).map(|i| format!("actual line {i}\n")).collect();
    (expected, actual)
}

#[test]
fn a_diff_of_300k_differing_lines_renders_within_five_seconds_and_says_it_was_cut() {
    let (expected, actual) = bomb();
    assert!(expected.len() > 5_000_000);
    let out = within(5, move || harness::report::diff::render(&expected, &actual, "  "));
    assert!(out.len() < 64 * 1024, "{} bytes", out.len());
    assert!(out.contains("cut"), "{out}");
}

#[test]
fn a_report_of_a_diff_bomb_renders_within_five_seconds() {
    let (expected, actual) = bomb();
    let out = within(5, move || {
        let mut results = real_results();
        results[0].status = Status::Fail;
        results[0].steps[0].mismatches.push(Mismatch {
            field: "startup[0].content".into(),
            expected,
            actual,
            basis: Basis::Seed,
        });
        let summary = Summary::new(&results, vec![results[0].id.clone()]);
        // `conformance report SAVED.json` renders the same results through the same functions.
        let human = formats::human(&results, &summary, false);
        let junit = formats::junit(&reference_hello(), &results, &summary);
        (human, junit)
    });
    assert!(out.0.len() < 256 * 1024 && out.1.len() < 1024 * 1024, "{} and {} bytes", out.0.len(), out.1.len());
}

#[test]
fn the_human_report_and_a_case_detail_are_inert_on_a_terminal() {
    let (results, summary) = hostile_results();
    let human = formats::human(&results, &summary, false);
    assert_inert_on_a_terminal("the human report", &human);
    for r in &results {
        assert_inert_on_a_terminal("a case detail", &formats::case_detail(r));
    }
    // Painted, the only escape sequences are the harness's own colours.
    let painted = formats::human(&results, &summary, true);
    let without_colours = ["\u{1b}[31m", "\u{1b}[32m", "\u{1b}[33m", "\u{1b}[0m"]
        .iter()
        .fold(painted, |text, code| text.replace(code, ""));
    assert_inert_on_a_terminal("the painted human report", &without_colours);
    assert!(human.contains(r"\x1b[2J") && human.contains(r"\u{202e}"), "{human}");
}

#[test]
fn a_hostile_hello_and_results_give_markdown_with_no_html_link_image_or_broken_table() {
    use pulldown_cmark::{Event, Options, Parser, Tag};
    let (results, summary) = hostile_results();
    let md = formats::markdown(&hostile_hello(), &results, &summary);
    assert_inert_on_a_terminal("the Markdown summary", &md);
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_MATH
        | Options::ENABLE_GFM
        | Options::ENABLE_SUPERSCRIPT
        | Options::ENABLE_SUBSCRIPT
        | Options::ENABLE_WIKILINKS;
    let mut headings = 0;
    let mut header_cells = 0;
    let mut row_cells = Vec::new();
    let mut in_head = false;
    let mut codes = Vec::new();
    for event in Parser::new_ext(&md, options) {
        match event {
            Event::Html(h) | Event::InlineHtml(h) => panic!("HTML from data: {h:?}\n{md}"),
            Event::InlineMath(m) | Event::DisplayMath(m) => panic!("math from data: {m:?}\n{md}"),
            Event::FootnoteReference(f) => panic!("a footnote from data: {f:?}\n{md}"),
            Event::Start(Tag::Image { dest_url, .. }) => panic!("an image from data: {dest_url}\n{md}"),
            Event::Start(Tag::Link { dest_url, .. }) => panic!("a link from data: {dest_url}\n{md}"),
            Event::Start(
                Tag::Emphasis | Tag::Strikethrough | Tag::Superscript | Tag::Subscript | Tag::BlockQuote(_),
            ) => panic!("markup from data\n{md}"),
            Event::Start(Tag::Heading { .. }) => headings += 1,
            Event::Start(Tag::TableHead) => in_head = true,
            Event::End(pulldown_cmark::TagEnd::TableHead) => in_head = false,
            Event::Start(Tag::TableRow) => row_cells.push(0),
            Event::Start(Tag::TableCell) if in_head => header_cells += 1,
            Event::Start(Tag::TableCell) => *row_cells.last_mut().unwrap() += 1,
            Event::Code(c) => codes.push(c.to_string()),
            _ => {}
        }
    }
    // The title, and one heading per group: seed, decision, other.
    assert_eq!(headings, 4, "{md}");
    assert_eq!(header_cells, 10, "{md}");
    assert_eq!(row_cells.len(), summary.areas.len(), "{md}");
    assert!(row_cells.iter().all(|n| *n == header_cells), "{row_cells:?}\n{md}");
    assert!(codes.iter().any(|c| c == TICK_ID), "the id's code span was closed early: {codes:?}\n{md}");
}

#[test]
fn a_hostile_hello_gives_valid_junit_whose_attributes_read_back_escaped() {
    use quick_xml::events::Event;
    let (results, summary) = hostile_results();
    let xml = formats::junit(&hostile_hello(), &results, &summary);
    assert_inert_on_a_terminal("the JUnit report", &xml);
    let mut reader = quick_xml::Reader::from_str(&xml);
    let mut properties = std::collections::BTreeMap::new();
    loop {
        match reader.read_event().unwrap_or_else(|e| panic!("not XML: {e}\n{xml}")) {
            Event::Eof => break,
            Event::Start(e) | Event::Empty(e) => {
                let attrs: Vec<(String, String)> = e
                    .attributes()
                    .map(|a| {
                        let a = a.unwrap();
                        let key = String::from_utf8(a.key.as_ref().to_vec()).unwrap();
                        (key, a.unescape_value().unwrap().into_owned())
                    })
                    .collect();
                for (key, value) in &attrs {
                    // XML normalises a raw newline, tab or CR in an attribute to a space.
                    assert!(!value.contains(['\n', '\t', '\r']), "{key}={value:?}");
                }
                if e.name().as_ref() == b"property" {
                    properties.insert(attrs[0].1.clone(), attrs[1].1.clone());
                }
            }
            _ => {}
        }
    }
    assert_eq!(properties["implementation"], HELLO_NAME_SHOWN, "{xml}");
    assert_eq!(properties["implementation.version"], HELLO_VERSION_SHOWN, "{xml}");
    assert_eq!(properties["implementation.language"], HELLO_LANGUAGE_SHOWN, "{xml}");
}

#[test]
fn the_matrix_pages_hold_no_element_or_control_character_from_data() {
    let (results, _) = hostile_results();
    let dir = tempfile::tempdir().unwrap();
    let column = harness::report::matrix::Column {
        name: "<script>alert(1)</script>\u{202e}".into(),
        hello: hostile_hello(),
        results,
    };
    harness::report::matrix::write(dir.path(), &[column]).unwrap();
    let mut pages = vec![dir.path().join("index.html")];
    for entry in walk(&dir.path().join("cases")) {
        pages.push(entry);
    }
    assert!(pages.len() > 3, "{pages:?}");
    let forbidden =
        scraper::Selector::parse("script, img, iframe, object, embed, base, link, form, meta[http-equiv]").unwrap();
    let anchors = scraper::Selector::parse("a").unwrap();
    let styles = scraper::Selector::parse("style").unwrap();
    for page in pages {
        let text = std::fs::read_to_string(&page).unwrap();
        assert_inert_on_a_terminal(&page.display().to_string(), &text);
        let html = scraper::Html::parse_document(&text);
        assert_eq!(html.select(&forbidden).count(), 0, "{}: {text}", page.display());
        assert_eq!(html.select(&styles).count(), 1, "{}", page.display());
        for a in html.select(&anchors) {
            let href = a.value().attr("href").unwrap_or("");
            // A cell's page links its cases' pages beside it by their bare file names.
            let beside = !href.contains(['/', ':', '\\'])
                && href.ends_with(".html")
                && page.parent().is_some_and(|d| d.join(href).is_file());
            assert!(href.starts_with("cases/") || href == "../../index.html" || beside, "{href}");
        }
    }
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn the_json_report_and_a_badge_hold_no_raw_control_or_bidi_character_and_lose_nothing_short() {
    let (results, summary) = hostile_results();
    let hello = hostile_hello();
    let json = formats::json(&hello, &results, &summary);
    assert_inert_on_a_terminal("the JSON report", &json);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["implementation"]["name"], hello.name.as_str());
    assert_eq!(v["results"][0]["name"], results[0].name.as_str());
    assert_eq!(v["results"][0]["id"], TICK_ID);
    let badge = formats::badge(&results, Some(&hostile()));
    assert_inert_on_a_terminal("a badge", &badge);
    serde_json::from_str::<serde_json::Value>(&badge).unwrap();
}

#[test]
fn a_13_mib_hello_gives_reports_of_a_few_kib() {
    let mut hello = reference_hello();
    hello.name = "n".repeat(13 << 20);
    hello.version = "v".repeat(13 << 20);
    hello.language = "l".repeat(13 << 20);
    let results = real_results();
    let summary = Summary::new(&results, Vec::new());
    let junit = formats::junit(&hello, &results, &summary);
    assert!(junit.len() < 256 * 1024, "JUnit: {} bytes", junit.len());
    assert!(junit.contains("more bytes)"), "the cut is not marked");
    let md = formats::markdown(&hello, &results, &summary);
    assert!(md.len() < 64 * 1024, "Markdown: {} bytes", md.len());
    let json = formats::json(&hello, &results, &summary);
    assert!(json.len() < 1024 * 1024, "JSON: {} bytes", json.len());
}

#[test]
fn a_reason_of_megabytes_is_cut_with_a_marker_in_every_format() {
    let mut results = real_results();
    results[0].status = Status::Error;
    results[0].reason = Some(format!("implementation error: {}", "r".repeat(5 << 20)));
    let summary = Summary::new(&results, vec![results[0].id.clone()]);
    let hello = reference_hello();
    for (format, text) in [
        ("human", formats::human(&results, &summary, false)),
        ("junit", formats::junit(&hello, &results, &summary)),
        ("markdown", formats::markdown(&hello, &results, &summary)),
        ("json", formats::json(&hello, &results, &summary)),
    ] {
        assert!(text.len() < 512 * 1024, "{format}: {} bytes", text.len());
        assert!(text.contains("more bytes"), "{format}: the cut is not marked");
    }
}

/// A shell adapter whose hello is hostile and which answers its first `open` with a stray line of
/// escape sequences, writes more to stderr and exits.
fn hostile_adapter(dir: &std::path::Path, capabilities: &str) -> String {
    let script = dir.join("adapter.sh");
    let hello = format!(
        r#"{{"seq":1,"ok":true,"hello":{{"name":"evil\u001b]0;title\u0007\u001b[2J","version":"1\u009b31m","language":"sh\u202e","profiles":["modules"],"capabilities":[{capabilities}]}}}}"#
    );
    let body = format!(
        "#!/bin/sh\nread line\nprintf '%s\\n' '{hello}'\nread line\nprintf '\\033[2Jstray \\302\\233 31m\\n'\nprintf '\\033]0;title\\007\\033]8;;http://evil.example/\\033\\\\click\\033]8;;\\033\\\\ \\342\\200\\256 bidi\\n' >&2\nexit 3\n"
    );
    std::fs::write(&script, body).unwrap();
    format!("sh {}", script.display())
}

fn conformance(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_conformance")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn smoke_shows_a_hostile_adapter_and_its_stderr_inert() {
    let dir = tempfile::tempdir().unwrap();
    let adapter = hostile_adapter(dir.path(), "");
    let (code, out, err) = conformance(&["smoke", "--adapter", &adapter, "--timeout", "5"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("hello: evil") && out.contains("CRASH"), "{out}{err}");
    assert!(out.contains("the exchange:"), "{out}");
    assert_inert_on_a_terminal("smoke's stdout", &out);
    assert_inert_on_a_terminal("smoke's stderr", &err);
}

#[test]
fn a_refused_hostile_hello_is_reported_inert() {
    let dir = tempfile::tempdir().unwrap();
    let adapter = hostile_adapter(dir.path(), r#""\u001b[2Jno-such-capability\u202e""#);
    let (code, out, err) = conformance(&["run", "--adapter", &adapter, "--filter", "m-fm-00"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("not valid"), "{err}");
    assert_inert_on_a_terminal("run's stdout", &out);
    assert_inert_on_a_terminal("run's stderr", &err);
}

/// Runs the command line, killed if it takes more than `secs`: a guard against a hang.
fn conformance_within(secs: u64, args: &[&str]) -> (i32, String, String) {
    use std::io::Read;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_conformance"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (mut stdout, mut stderr) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("conformance {args:?} not done within {secs} s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status.code().unwrap_or(-1), out.join().unwrap(), err.join().unwrap())
}

#[test]
fn a_saved_report_with_a_diff_bomb_and_hostile_text_renders_again_inert_and_in_time() {
    let (mut results, summary) = hostile_results();
    // 80k lines a side, so that the saved report stays within the 4 MiB `report` reads.
    let expected: String = (0..80_000).map(|i| format!("expected line {i}\n")).collect();
    let actual: String = (0..80_000).map(|i| format!("actual line {i}\n")).collect();
    // A saved report's bases are read back as decision ids, which a hostile one is not.
    for m in results.iter_mut().flat_map(|r| r.steps.iter_mut()).flat_map(|s| s.mismatches.iter_mut()) {
        m.basis = Basis::Seed;
    }
    results[0].steps[0]
        .mismatches
        .insert(0, Mismatch { field: "startup[0].content".into(), expected, actual, basis: Basis::Seed });
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("saved.json");
    std::fs::write(&saved, formats::json(&hostile_hello(), &results, &summary)).unwrap();
    let saved = saved.to_string_lossy().into_owned();
    for format in ["human", "markdown", "junit", "json"] {
        let (code, out, err) = conformance_within(60, &["report", &saved, "--format", format]);
        assert_eq!(code, 0, "{format}: {err}");
        assert!(out.contains("x-002"), "{format}: {out}");
        assert_inert_on_a_terminal(&format!("report --format {format}"), &out);
        assert_inert_on_a_terminal(&format!("report --format {format} (stderr)"), &err);
    }
}
