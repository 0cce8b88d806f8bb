//! Frontmatter of rule modules (seed 000, "Format and discovery"): it decides whether a module is
//! unconditional or conditional, and an invalid one refuses the whole module, so "a misspelled
//! path: cannot quietly turn a scoped rule set into a global one".
//!
//! Decisions (spec-cases/DECISIONS.md, D-FM-*): a block opens only on the file's first line
//! (after a BOM) and opens and closes with a line that is `---` plus optional spaces or tabs and
//! `\n` or `\r\n`; a `---` anywhere else is Markdown. The body starts right after the closing
//! line and is sent verbatim (no trimming, CRLF kept).

use crate::diag::Code;
use crate::glob;
use crate::yaml::{self, Value};

/// The two kinds of rule module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// No frontmatter, or an empty one: loaded at spawn, never returned by a trigger pass.
    Unconditional,
    /// Loaded when a touched path matches one of these globs.
    Conditional(Vec<String>),
}

/// A module whose frontmatter was accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed<'a> {
    /// Which kind the frontmatter makes the module.
    pub kind: Kind,
    /// The sent content: the text with the BOM and the frontmatter stripped.
    pub body: &'a str,
}

/// Why a module was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The stable code.
    pub code: Code,
    /// The 1-based line of the file the refusal points at.
    pub line: u32,
    /// A lowercase message quoting the input.
    pub message: String,
}

impl Refusal {
    fn new(code: Code, line: usize, message: String) -> Refusal {
        Refusal { code, line: u32::try_from(line).unwrap_or(u32::MAX), message }
    }
}

/// Strips one leading byte-order mark.
pub fn strip_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// Whether `line` (without its `\n`) is a frontmatter delimiter.
fn is_delimiter(line: &str) -> bool {
    line.strip_suffix('\r').unwrap_or(line).trim_end_matches([' ', '\t']) == "---"
}

/// A file that looks like it opens frontmatter but does not open it well: its first line that is
/// not blank starts with `---` and is not a bare delimiter on the first line (`--- # note`,
/// `----`, or `---` after blank lines). Such a file is refused, never loaded as an unconditional
/// module whose "frontmatter" the model would read (D-FM-14), because seed 000 wants a malformed
/// block refused so that it "cannot quietly turn a scoped rule set into a global one".
fn malformed_opening(text: &str) -> Option<Refusal> {
    let (index, line) = text.split('\n').enumerate().find(|(_, l)| !l.trim().is_empty())?;
    if !line.trim_start().starts_with("---") || (index == 0 && is_delimiter(line)) {
        return None;
    }
    let shown = line.strip_suffix('\r').unwrap_or(line);
    let why = if index > 0 { "after blank lines" } else { "with more than '---' on the line" };
    Some(Refusal::new(
        Code::FrontmatterMalformedOpening,
        index + 1,
        format!("'{shown}' opens frontmatter {why} (a block opens with a bare '---' on the first line)"),
    ))
}

/// Splits `text` (BOM already stripped) into the frontmatter source and the body, when the
/// file opens a block. `Ok(None)`: no frontmatter.
fn split(text: &str) -> Result<Option<(&str, &str)>, Refusal> {
    if let Some(refusal) = malformed_opening(text) {
        return Err(refusal);
    }
    let Some(first_end) = text.find('\n') else {
        if is_delimiter(text) {
            return Err(Refusal::new(
                Code::FrontmatterUnterminated,
                1,
                "frontmatter opened with '---' is never closed (add a closing '---' line)".into(),
            ));
        }
        return Ok(None);
    };
    if !is_delimiter(text.get(..first_end).unwrap_or("")) {
        return Ok(None);
    }
    let yaml_start = first_end + 1;
    let mut pos = yaml_start;
    while pos <= text.len() {
        let rest = text.get(pos..).unwrap_or("");
        let (line, next) = match rest.find('\n') {
            Some(n) => (rest.get(..n).unwrap_or(""), pos + n + 1),
            None => (rest, text.len() + 1),
        };
        if is_delimiter(line) {
            let yaml = text.get(yaml_start..pos).unwrap_or("");
            let body = text.get(next.min(text.len())..).unwrap_or("");
            return Ok(Some((yaml, body)));
        }
        if rest.is_empty() {
            break;
        }
        pos = next;
    }
    Err(Refusal::new(
        Code::FrontmatterUnterminated,
        1,
        "frontmatter opened with '---' is never closed (add a closing '---' line)".into(),
    ))
}

/// The 1-based file line of the top-level key `key` (D-FM-11: the line of the offending key, or
/// of the `paths` key), else line 1. Only a top-level key counts: in a block mapping a key at the
/// document's own indentation, plain or quoted (`"paths":`); in a flow mapping document
/// (`{paths: [...]}`, on one line or several) a key right after its `{` or a `,` at its first
/// level. A same-named key nested deeper (`paths:\n  name: 1\nname: 2`), a comment and a quoted
/// string are never taken for it.
fn key_line(yaml: &str, key: &str) -> usize {
    let mut base: Option<usize> = None;
    let mut flow_doc: Option<bool> = None;
    let mut stack: Vec<char> = Vec::new();
    let mut quote: Option<char> = None;
    let mut expect = false;
    for (i, line) in yaml.lines().enumerate() {
        if quote.is_none() && stack.is_empty() {
            let text = line.trim_start_matches([' ', '\t']);
            if text.is_empty() || text.starts_with('#') {
                continue;
            }
            let indent = line.len() - text.len();
            flow_doc.get_or_insert(text.starts_with('{'));
            expect = indent == *base.get_or_insert(indent);
        }
        let flow_doc = flow_doc == Some(true);
        let mut escaped = false;
        let mut prev = ' ';
        for (j, c) in line.char_indices() {
            if expect && quote.is_none() && !matches!(c, ' ' | '\t') {
                expect = false;
                if c != '#' && starts_with_key(line.get(j..).unwrap_or(""), key) {
                    return i + 2;
                }
            }
            match (quote, c) {
                (Some('"'), _) if escaped => escaped = false,
                (Some('"'), '\\') => escaped = true,
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '"' | '\'') => quote = Some(c),
                (None, '#') if matches!(prev, ' ' | '\t') => break,
                (None, '{') => {
                    stack.push('{');
                    expect = flow_doc && stack.len() == 1;
                }
                (None, '[') => stack.push('['),
                (None, '}' | ']') => {
                    stack.pop();
                }
                (None, ',') => expect = flow_doc && stack == ['{'],
                _ => {}
            }
            prev = c;
        }
    }
    1
}

/// Whether `text` starts with the mapping key `key`, plain or quoted, and then its `:`.
fn starts_with_key(text: &str, key: &str) -> bool {
    let quoted = |q: char| text.strip_prefix(q).and_then(|r| r.strip_prefix(key)).and_then(|r| r.strip_prefix(q));
    let rest = quoted('"').or_else(|| quoted('\'')).or_else(|| text.strip_prefix(key));
    rest.is_some_and(|r| r.trim_start_matches([' ', '\t']).starts_with(':'))
}

fn key_name(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.clone(),
        Value::Bool(b) => b.to_string(),
        other => other.kind().to_string(),
    }
}

/// Parses a rule module's text: BOM, frontmatter, `paths`, and every glob.
pub fn parse(text: &str) -> Result<Parsed<'_>, Refusal> {
    let text = strip_bom(text);
    let Some((yaml, body)) = split(text)? else {
        return Ok(Parsed { kind: Kind::Unconditional, body: text });
    };
    // A block of blank lines or comments only is empty (D-FM-2), whatever the parser thinks of a
    // tab-only line. Its lines are YAML's: a lone carriage return ends one too, and with it a
    // comment, so `# note\rpaths: [...]` holds a key and is no comment (D-FM-15).
    if yaml.split(['\n', '\r']).all(|l| l.trim().is_empty() || l.trim_start().starts_with('#')) {
        return Ok(Parsed { kind: Kind::Unconditional, body });
    }
    let value = yaml::parse(yaml).map_err(|e| {
        let line = e.line.map_or(1, |l| l + 1);
        Refusal::new(Code::FrontmatterInvalidYaml, line, format!("frontmatter is not valid yaml: {}", e.message))
    })?;
    // An explicit null (`~`, `null`) is a document, and not a mapping: only a block with nothing
    // in it is "an empty one" (D-FM-15).
    let entries = match value {
        Value::Map(entries) => entries,
        other => {
            return Err(Refusal::new(
                Code::FrontmatterNotAMapping,
                2,
                format!("frontmatter is {} (it must be a mapping with the one key 'paths')", other.kind()),
            ));
        }
    };
    if entries.is_empty() {
        return Ok(Parsed { kind: Kind::Unconditional, body });
    }
    let mut paths = None;
    for (k, v) in entries {
        match k {
            Value::String(ref s) if s == "paths" => paths = Some(v),
            other => {
                let name = key_name(&other);
                return Err(Refusal::new(
                    Code::FrontmatterUnknownKey,
                    key_line(yaml, &name),
                    format!("frontmatter key '{name}' is not allowed (only 'paths' is)"),
                ));
            }
        }
    }
    let line = key_line(yaml, "paths");
    let items = match paths {
        Some(Value::Seq(items)) => items,
        Some(Value::Null) | None => {
            return Err(Refusal::new(Code::PathsEmpty, line, "'paths' has no value (give a list of globs)".into()));
        }
        Some(other) => {
            return Err(Refusal::new(
                Code::PathsNotAList,
                line,
                format!("'paths' is {} (it must be a list of globs)", other.kind()),
            ));
        }
    };
    if items.is_empty() {
        return Err(Refusal::new(Code::PathsEmpty, line, "'paths' is an empty list (give at least one glob)".into()));
    }
    let mut globs = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let pattern = match item {
            Value::String(s) => s,
            other => {
                return Err(Refusal::new(
                    Code::PathNotAString,
                    line,
                    format!("'paths' item {} is {} (it must be a string)", i + 1, other.kind()),
                ));
            }
        };
        if pattern.trim().is_empty() {
            return Err(Refusal::new(Code::PathEmpty, line, format!("'paths' item {} is an empty string", i + 1)));
        }
        glob::validate(&pattern).map_err(|(code, msg)| Refusal::new(code, line, msg))?;
        globs.push(pattern);
    }
    Ok(Parsed { kind: Kind::Conditional(globs), body })
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn globs(v: &[&str]) -> Kind {
        Kind::Conditional(v.iter().map(|s| s.to_string()).collect())
    }

    #[rstest]
    #[case("# rules\n", Kind::Unconditional, "# rules\n")]
    #[case("", Kind::Unconditional, "")]
    #[case("---\n---\nbody", Kind::Unconditional, "body")]
    #[case("---\n# comment\n---\nbody", Kind::Unconditional, "body")]
    #[case("---\n\n  \n---\nbody", Kind::Unconditional, "body")]
    #[case("---\n\t\n---\nbody", Kind::Unconditional, "body")]
    #[case("---\n{}\n---\nbody", Kind::Unconditional, "body")]
    #[case("\u{feff}---\npaths: [\"a/*\"]\n---\nbody", globs(&["a/*"]), "body")]
    #[case("---\r\npaths:\r\n  - \"a/*\"\r\n---\r\nbody\r\n", globs(&["a/*"]), "body\r\n")]
    #[case("--- \npaths: [a]\n---\t\nx", globs(&["a"]), "x")]
    #[case("---\npaths: [a]\n---", globs(&["a"]), "")]
    #[case("# t\n---\npaths: [a]\n---\nx", Kind::Unconditional, "# t\n---\npaths: [a]\n---\nx")]
    #[case("---\npaths: &p [a, b]\n---\n", globs(&["a", "b"]), "")]
    #[case("---\npaths: [!!str 1]\n---\n", globs(&["1"]), "")]
    // A lone carriage return ends a YAML line, and the comment on it (D-FM-15).
    #[case("---\n# note\rpaths: [\"src/**\"]\n---\nx", globs(&["src/**"]), "x")]
    #[case("---\n# a\r# b\r\n---\nx", Kind::Unconditional, "x")]
    fn accepted(#[case] text: &str, #[case] kind: Kind, #[case] body: &str) {
        let p = parse(text).unwrap();
        assert_eq!((p.kind, p.body), (kind, body));
    }

    #[rstest]
    #[case("\n---\npaths: [a]\n---\nx", Code::FrontmatterMalformedOpening, 2)]
    #[case("----\npaths: [a]\n----\nx", Code::FrontmatterMalformedOpening, 1)]
    #[case("--- # note\npaths: [a]\n---\nx", Code::FrontmatterMalformedOpening, 1)]
    #[case("  ---\npaths: [a]\n---\nx", Code::FrontmatterMalformedOpening, 1)]
    #[case("\u{a0}\n---\nx", Code::FrontmatterMalformedOpening, 2)]
    #[case("---\n~\n---\nx", Code::FrontmatterNotAMapping, 2)]
    #[case("---\npaths: [a]\n", Code::FrontmatterUnterminated, 1)]
    #[case("---", Code::FrontmatterUnterminated, 1)]
    #[case("---\npaths: [a\n---\n", Code::FrontmatterInvalidYaml, 3)]
    #[case("---\npaths: [a]\npaths: [b]\n---\n", Code::FrontmatterInvalidYaml, 2)]
    #[case("---\n- a\n---\n", Code::FrontmatterNotAMapping, 2)]
    #[case("---\njust text\n---\n", Code::FrontmatterNotAMapping, 2)]
    #[case("---\npath: [a]\n---\n", Code::FrontmatterUnknownKey, 2)]
    #[case("---\npaths: [a]\nname: x\n---\n", Code::FrontmatterUnknownKey, 3)]
    #[case("---\n<<: {paths: [a]}\n---\n", Code::FrontmatterUnknownKey, 2)]
    #[case("---\npaths:\n---\n", Code::PathsEmpty, 2)]
    #[case("---\npaths: []\n---\n", Code::PathsEmpty, 2)]
    #[case("---\npaths: src/*.ts\n---\n", Code::PathsNotAList, 2)]
    #[case("---\npaths: {a: b}\n---\n", Code::PathsNotAList, 2)]
    #[case("---\npaths: !globs [a]\n---\n", Code::PathsNotAList, 2)]
    #[case("---\npaths: [1]\n---\n", Code::PathNotAString, 2)]
    #[case("---\npaths: [[a]]\n---\n", Code::PathNotAString, 2)]
    #[case("---\npaths: [~]\n---\n", Code::PathNotAString, 2)]
    #[case("---\npaths: [true]\n---\n", Code::PathNotAString, 2)]
    #[case("---\npaths: [\"\"]\n---\n", Code::PathEmpty, 2)]
    #[case("---\npaths: [\" \"]\n---\n", Code::PathEmpty, 2)]
    #[case("---\npaths: [\"/a\"]\n---\n", Code::GlobAbsolute, 2)]
    #[case("---\n# scope\n\"paths\": [1]\n---\n", Code::PathNotAString, 3)]
    #[case("---\n# scope\n{paths: []}\n---\n", Code::PathsEmpty, 3)]
    #[case("---\n{\n  'paths': [1],\n}\n---\n", Code::PathNotAString, 3)]
    #[case("---\n{paths: [a], name: x}\n---\n", Code::FrontmatterUnknownKey, 2)]
    #[case("---\npaths:\n  name: 1\nname: 2\n---\n", Code::FrontmatterUnknownKey, 4)]
    #[case("---\n  paths: [1]\n---\n", Code::PathNotAString, 2)]
    #[case("---\npaths: \"a\n  name: b\"\nname: 1\n---\n", Code::FrontmatterUnknownKey, 4)]
    #[case("---\npaths: [a] # name: 1\nname: 1\n---\n", Code::FrontmatterUnknownKey, 3)]
    #[case("---\npaths: {name: 1}\nname: 2\n---\n", Code::FrontmatterUnknownKey, 3)]
    fn refused(#[case] text: &str, #[case] code: Code, #[case] line: u32) {
        let r = parse(text).unwrap_err();
        assert_eq!((r.code, r.line), (code, line), "{}", r.message);
    }
}
