//! The one YAML module of the workspace. Everything that depends on the YAML parser goes through
//! here, so replacing the parser (serde_yaml is deprecated upstream) is a change to this file.
//!
//! Parser-dependent behaviour is pinned by scenarios rather than assumed: duplicate keys are an
//! error, a document may be any node (the caller checks for a mapping), anchors and aliases
//! resolve, an unknown tag is kept as a tagged value (which no `paths` item accepts), the merge
//! key `<<` is an ordinary key, and nesting deeper than the parser's recursion limit or an alias
//! expansion past its repetition limit is an error, never a hang. Every text is checked for depth
//! before it is parsed, in one linear pass ([`MAX_DEPTH`]).

use serde::de::DeserializeOwned;

/// A YAML value, independent of the parser crate.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `~`, `null`, or nothing at all.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, as the parser printed it.
    Number(String),
    /// A string.
    String(String),
    /// A sequence.
    Seq(Vec<Value>),
    /// A mapping, in document order.
    Map(Vec<(Value, Value)>),
    /// A value with an explicit non-core tag such as `!glob`.
    Tagged(String, Box<Value>),
}

impl Value {
    /// A short name of the value's type for messages (`a string`, `a list`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(_) => "a number",
            Value::String(_) => "a string",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
            Value::Tagged(..) => "a tagged value",
        }
    }
}

/// A YAML error with the 1-based line and column where the parser stopped, when it knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// 1-based line.
    pub line: Option<usize>,
    /// 1-based column.
    pub column: Option<usize>,
    /// The parser's message, without its location suffix.
    pub message: String,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

fn convert_error(e: serde_yaml::Error) -> Error {
    let loc = e.location();
    let mut message = e.to_string();
    // serde_yaml appends " at line L column C"; the location is carried separately.
    if let Some(pos) = message.rfind(" at line ") {
        message.truncate(pos);
    }
    Error { line: loc.as_ref().map(|l| l.line()), column: loc.as_ref().map(|l| l.column()), message }
}

/// How deep a document may nest before it is refused without parsing: the parser's own
/// recursion limit, so the check refuses nothing the parser would take. The parser would refuse a
/// deeper document too, but only after a parse whose cost grows with the depth times the size
/// (libyaml rescans every open flow level at each token): 100,000 brackets took half a minute.
/// Below the limit the cost is linear: a 4 MiB document of tokens at depth 128 parses in under
/// two seconds, at depth 2 in about one.
pub const MAX_DEPTH: usize = 128;

/// The refusal of a document nested deeper than [`MAX_DEPTH`], at the line where it gets too deep.
fn too_deep_error(line: usize) -> Error {
    Error { line: Some(line), column: None, message: format!("nesting deeper than {MAX_DEPTH} levels") }
}

/// The 1-based line where `src` first nests deeper than [`MAX_DEPTH`], if it does, found in one
/// linear pass that follows libyaml's scanner (unsafe-libyaml's `scanner.rs`) on every path that
/// is not an error: flow collections, block collections (its stack of indentation columns), quoted
/// and plain scalars, block scalars, comments, tags, anchors and directives. A cheaper estimate is
/// unsound: one that takes every `'` for a quote misses the brackets after `it's`, and one that
/// ends a comment at `\n` only misses those after a `\r`. Where libyaml would stop with an error,
/// the pass goes on (what it finds there is never parsed), so it can only err towards refusing a
/// document the parser would refuse anyway.
///
/// The depth counted is the number of open flow collections plus the number of block collections
/// the scanner opened by indentation: never more than the document's real nesting.
fn too_deep(src: &str) -> Option<usize> {
    // The reader stops at the first character YAML does not allow, so the scanner never sees what
    // follows it.
    let end = src.char_indices().find(|&(_, c)| !allowed(c)).map_or(src.len(), |(i, _)| i);
    let bytes = src.as_bytes().get(..end).unwrap_or_default();
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    Scanner::new(bytes).run().err()
}

/// Whether libyaml's reader takes `c` (YAML 1.1's printable set).
fn allowed(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | ' '..='~' | '\u{85}' | '\u{A0}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}')
        || c >= '\u{10000}'
}

/// A position as libyaml keeps it: byte index, 0-based line, column in characters.
#[derive(Debug, Clone, Copy)]
struct Mark {
    index: usize,
    line: usize,
    column: usize,
}

/// The part of libyaml's scanner state that decides nesting.
struct Scanner<'a> {
    s: &'a [u8],
    at: Mark,
    /// Open flow collections.
    flow: usize,
    /// The current block indentation column (-1 at the top), and the ones below it.
    indent: isize,
    indents: Vec<isize>,
    simple_key_allowed: bool,
    /// The possible simple key of the block context: where it started. Only a key at flow level 0
    /// can open a block mapping, so the keys of flow levels are not kept.
    key: Option<Mark>,
}

impl<'a> Scanner<'a> {
    fn new(s: &'a [u8]) -> Self {
        Scanner {
            s,
            at: Mark { index: 0, line: 0, column: 0 },
            flow: 0,
            indent: -1,
            indents: Vec::new(),
            simple_key_allowed: true,
            key: None,
        }
    }

    /// The byte `k` ahead, `0` past the end (libyaml's `IS_Z`).
    fn peek(&self, k: usize) -> u8 {
        self.s.get(self.at.index + k).copied().unwrap_or(0)
    }

    fn is(&self, k: usize, set: &[u8]) -> bool {
        set.contains(&self.peek(k))
    }

    fn is_z(&self, k: usize) -> bool {
        self.peek(k) == 0
    }

    fn is_blank(&self, k: usize) -> bool {
        self.is(k, b" \t")
    }

    fn is_break(&self, k: usize) -> bool {
        match self.peek(k) {
            b'\r' | b'\n' => true,
            0xC2 => self.peek(k + 1) == 0x85,
            0xE2 => self.peek(k + 1) == 0x80 && matches!(self.peek(k + 2), 0xA8 | 0xA9),
            _ => false,
        }
    }

    fn is_blankz(&self, k: usize) -> bool {
        self.is_blank(k) || self.is_break(k) || self.is_z(k)
    }

    fn is_breakz(&self, k: usize) -> bool {
        self.is_break(k) || self.is_z(k)
    }

    fn is_alpha(&self, k: usize) -> bool {
        let c = self.peek(k);
        c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
    }

    /// libyaml's `SKIP`: one character.
    fn skip(&mut self) {
        let width = match self.peek(0) {
            0 => return,
            c if c < 0x80 => 1,
            c if c & 0xE0 == 0xC0 => 2,
            c if c & 0xF0 == 0xE0 => 3,
            _ => 4,
        };
        self.at.index += width;
        self.at.column += 1;
    }

    /// libyaml's `SKIP_LINE` (and `READ_LINE`): one line break, `\r\n` being one.
    fn skip_line(&mut self) {
        if self.peek(0) == b'\r' && self.peek(1) == b'\n' {
            self.at.index += 2;
        } else if self.is_break(0) {
            self.at.index += if self.peek(0) < 0x80 {
                1
            } else if self.peek(0) == 0xC2 {
                2
            } else {
                3
            };
        } else {
            return;
        }
        self.at.column = 0;
        self.at.line += 1;
    }

    fn skip_to_break(&mut self) {
        while !self.is_breakz(0) {
            self.skip();
        }
    }

    /// The depth now: open flow collections and block collections.
    fn check_depth(&self) -> Result<(), usize> {
        if self.flow + self.indents.len() > MAX_DEPTH {
            Err(self.at.line + 1)
        } else {
            Ok(())
        }
    }

    fn roll_indent(&mut self, column: usize) -> Result<(), usize> {
        let column = column as isize;
        if self.flow == 0 && self.indent < column {
            self.indents.push(self.indent);
            self.indent = column;
            self.check_depth()?;
        }
        Ok(())
    }

    fn unroll_indent(&mut self, column: isize) {
        if self.flow == 0 {
            while self.indent > column {
                self.indent = self.indents.pop().unwrap_or(-1);
            }
        }
    }

    fn save_simple_key(&mut self) {
        if self.simple_key_allowed && self.flow == 0 {
            self.key = Some(self.at);
        }
    }

    fn remove_simple_key(&mut self) {
        if self.flow == 0 {
            self.key = None;
        }
    }

    /// Runs the scanner to the end: `Err(line)` where the document gets too deep.
    fn run(mut self) -> Result<(), usize> {
        loop {
            self.scan_to_next_token();
            self.unroll_indent(self.at.column as isize);
            if self.is_z(0) {
                return Ok(());
            }
            let before = self.at.index;
            self.fetch_next_token()?;
            if self.at.index == before {
                // A character no token starts with: libyaml stops here with an error.
                self.skip();
            }
        }
    }

    fn scan_to_next_token(&mut self) {
        loop {
            if self.at.column == 0 && self.peek(0) == 0xEF && self.peek(1) == 0xBB && self.peek(2) == 0xBF {
                self.skip();
            }
            while self.peek(0) == b' ' || ((self.flow > 0 || !self.simple_key_allowed) && self.peek(0) == b'\t') {
                self.skip();
            }
            if self.peek(0) == b'#' {
                self.skip_to_break();
            }
            if !self.is_break(0) {
                return;
            }
            self.skip_line();
            if self.flow == 0 {
                self.simple_key_allowed = true;
            }
        }
    }

    fn fetch_next_token(&mut self) -> Result<(), usize> {
        let c = self.peek(0);
        let document_indicator = self.at.column == 0
            && (self.is(0, b"-") && self.is(1, b"-") && self.is(2, b"-")
                || self.is(0, b".") && self.is(1, b".") && self.is(2, b"."))
            && self.is_blankz(3);
        if self.at.column == 0 && c == b'%' || document_indicator {
            self.unroll_indent(-1);
            self.remove_simple_key();
            self.simple_key_allowed = false;
            if c == b'%' {
                // A directive ends at its line's end, or is an error.
                self.skip_to_break();
                self.skip_line();
            } else {
                self.skip();
                self.skip();
                self.skip();
            }
            return Ok(());
        }
        match c {
            b'[' | b'{' => {
                self.save_simple_key();
                self.flow += 1;
                self.check_depth()?;
                self.simple_key_allowed = true;
                self.skip();
            }
            b']' | b'}' => {
                self.remove_simple_key();
                self.flow = self.flow.saturating_sub(1);
                self.simple_key_allowed = false;
                self.skip();
            }
            b',' => {
                self.remove_simple_key();
                self.simple_key_allowed = true;
                self.skip();
            }
            b'-' if self.is_blankz(1) => {
                self.roll_indent(self.at.column)?;
                self.remove_simple_key();
                self.simple_key_allowed = true;
                self.skip();
            }
            b'?' if self.flow > 0 || self.is_blankz(1) => {
                self.roll_indent(self.at.column)?;
                self.remove_simple_key();
                self.simple_key_allowed = self.flow == 0;
                self.skip();
            }
            b':' if self.flow > 0 || self.is_blankz(1) => {
                self.fetch_value()?;
            }
            b'*' | b'&' => {
                self.save_simple_key();
                self.simple_key_allowed = false;
                self.skip();
                while self.is_alpha(0) {
                    self.skip();
                }
            }
            b'!' => {
                self.save_simple_key();
                self.simple_key_allowed = false;
                self.scan_tag();
            }
            b'|' | b'>' if self.flow == 0 => {
                self.remove_simple_key();
                self.simple_key_allowed = true;
                self.scan_block_scalar();
            }
            b'\'' | b'"' => {
                self.save_simple_key();
                self.simple_key_allowed = false;
                self.scan_flow_scalar(c == b'\'');
            }
            _ if self.plain_scalar_starts() => {
                self.save_simple_key();
                self.simple_key_allowed = false;
                self.scan_plain_scalar();
            }
            _ => {}
        }
        Ok(())
    }

    fn plain_scalar_starts(&self) -> bool {
        let c = self.peek(0);
        !(self.is_blankz(0) || b"-?:,[]{}#&*!|>'\"%@`".contains(&c))
            || c == b'-' && !self.is_blank(1)
            || self.flow == 0 && (c == b'?' || c == b':') && !self.is_blankz(1)
    }

    /// `:`: a simple key still possible (on this line, within 1024 bytes) opens a block mapping at
    /// its column; otherwise the `:` opens one at its own.
    fn fetch_value(&mut self) -> Result<(), usize> {
        if self.flow == 0 {
            let at = self.at;
            match self.key.take().filter(|k| k.line == at.line && k.index + 1024 >= at.index) {
                Some(key) => {
                    self.roll_indent(key.column)?;
                    self.simple_key_allowed = false;
                }
                None => {
                    self.roll_indent(at.column)?;
                    self.simple_key_allowed = true;
                }
            }
        } else {
            self.simple_key_allowed = false;
        }
        self.skip();
        Ok(())
    }

    /// A tag: `!<uri>`, or a handle and a suffix. A verbatim URI may hold `,`, `[` and `]`.
    fn scan_tag(&mut self) {
        let uri = |sc: &Self, flow_chars: bool| {
            sc.is_alpha(0) || sc.is(0, b";/?:@&=+$.%!~*'()") || flow_chars && sc.is(0, b",[]")
        };
        if self.peek(1) == b'<' {
            self.skip();
            self.skip();
            while uri(self, true) {
                self.skip_uri_char();
            }
            if self.peek(0) == b'>' {
                self.skip();
            }
        } else {
            self.skip();
            while self.is_alpha(0) {
                self.skip();
            }
            if self.peek(0) == b'!' {
                self.skip();
            }
            while uri(self, false) {
                self.skip_uri_char();
            }
        }
    }

    fn skip_uri_char(&mut self) {
        if self.peek(0) == b'%' {
            // An escape, `%XX`.
            for _ in 0..3 {
                self.skip();
            }
        } else {
            self.skip();
        }
    }

    /// A `|` or `>` scalar: its header line, then every line indented at least as far as its
    /// first non-empty one (or as its indentation indicator says), and more than its parent.
    fn scan_block_scalar(&mut self) {
        self.skip();
        let mut increment = 0isize;
        if self.is(0, b"+-") {
            self.skip();
            if self.peek(0).is_ascii_digit() {
                increment = isize::from(self.peek(0) - b'0');
                self.skip();
            }
        } else if self.peek(0).is_ascii_digit() {
            increment = isize::from(self.peek(0) - b'0');
            self.skip();
            if self.is(0, b"+-") {
                self.skip();
            }
        }
        while self.is_blank(0) {
            self.skip();
        }
        if self.peek(0) == b'#' {
            self.skip_to_break();
        }
        self.skip_line();
        let mut indent = if increment > 0 {
            if self.indent >= 0 {
                self.indent + increment
            } else {
                increment
            }
        } else {
            0
        };
        self.block_scalar_breaks(&mut indent);
        while self.at.column as isize == indent && !self.is_z(0) {
            self.skip_to_break();
            self.skip_line();
            self.block_scalar_breaks(&mut indent);
        }
    }

    fn block_scalar_breaks(&mut self, indent: &mut isize) {
        let mut max_indent = 0isize;
        loop {
            while (*indent == 0 || (self.at.column as isize) < *indent) && self.peek(0) == b' ' {
                self.skip();
            }
            max_indent = max_indent.max(self.at.column as isize);
            if !self.is_break(0) {
                break;
            }
            self.skip_line();
        }
        if *indent == 0 {
            *indent = max_indent.max(self.indent + 1).max(1);
        }
    }

    /// A quoted scalar, over any number of lines: `''` in a single-quoted one and `\` escapes in a
    /// double-quoted one do not end it.
    fn scan_flow_scalar(&mut self, single: bool) {
        let quote = if single { b'\'' } else { b'"' };
        self.skip();
        loop {
            if self.is_z(0) {
                return;
            }
            while !self.is_blankz(0) {
                if single && self.peek(0) == b'\'' && self.peek(1) == b'\'' {
                    self.skip();
                    self.skip();
                } else if self.peek(0) == quote {
                    break;
                } else if !single && self.peek(0) == b'\\' && self.is_break(1) {
                    self.skip();
                    self.skip_line();
                    break;
                } else if !single && self.peek(0) == b'\\' {
                    let code_length = match self.peek(1) {
                        b'x' => 2,
                        b'u' => 4,
                        b'U' => 8,
                        _ => 0,
                    };
                    for _ in 0..2 + code_length {
                        self.skip();
                    }
                } else {
                    self.skip();
                }
            }
            if self.peek(0) == quote {
                self.skip();
                return;
            }
            self.skip_blanks_and_breaks();
        }
    }

    /// Skips the blanks and line breaks inside a scalar, as libyaml's scanner does between its
    /// chunks; answers whether a line break was among them.
    fn skip_blanks_and_breaks(&mut self) -> bool {
        let mut broke = false;
        while self.is_blank(0) || self.is_break(0) {
            if self.is_blank(0) {
                self.skip();
            } else {
                self.skip_line();
                broke = true;
            }
        }
        broke
    }

    /// A plain scalar, over lines indented more than its parent (block context) or any lines
    /// (flow context); in a flow context `,[]{}` end it. `#` after a blank starts a comment.
    fn scan_plain_scalar(&mut self) {
        let indent = self.indent + 1;
        let mut leading_blanks = false;
        loop {
            let document_indicator = self.at.column == 0
                && (self.is(0, b"-") && self.is(1, b"-") && self.is(2, b"-")
                    || self.is(0, b".") && self.is(1, b".") && self.is(2, b"."))
                && self.is_blankz(3);
            if document_indicator || self.peek(0) == b'#' {
                break;
            }
            while !self.is_blankz(0) {
                let c = self.peek(0);
                let ends = c == b':' && self.is_blankz(1) || self.flow > 0 && b",[]{}".contains(&c);
                if ends {
                    break;
                }
                leading_blanks = false;
                self.skip();
            }
            if !(self.is_blank(0) || self.is_break(0)) {
                break;
            }
            if self.skip_blanks_and_breaks() {
                leading_blanks = true;
            }
            if self.flow == 0 && (self.at.column as isize) < indent {
                break;
            }
        }
        if leading_blanks {
            self.simple_key_allowed = true;
        }
    }
}

/// Parses one YAML document into a [`Value`]. A document nested deeper than [`MAX_DEPTH`] is
/// refused before it is parsed.
pub fn parse(src: &str) -> Result<Value, Error> {
    if let Some(value) = simple_paths(src) {
        return Ok(value);
    }
    parse_full(src)
}

/// [`parse`] without its shortcut for the plainest frontmatter: every text through the depth
/// check and the parser. The differential property (`harness::fuzzing::frontmatter`, run by
/// `cargo test` over the fuzz corpus and by the fuzz target) holds [`parse`] equal to this.
pub fn parse_full(src: &str) -> Result<Value, Error> {
    if let Some(line) = too_deep(src) {
        return Err(too_deep_error(line));
    }
    let v: serde_yaml::Value = serde_yaml::from_str(src).map_err(convert_error)?;
    Ok(convert(v))
}

/// The shortcut of [`parse`] for the frontmatter nearly every rule module has, a `paths:` key and
/// a block list of double-quoted globs, which answers without starting the parser (whose set-up
/// alone costs more than such a document's whole parse; issue 25's discovery target). It takes
/// only a document whose meaning no YAML reading could dispute, and leaves every other to the
/// parser:
///
/// ```text
/// paths:
///   - "src/**/*.ts"
///   - "tests/**"
/// ```
///
/// The first line is exactly `paths:`; then one or more items, each on its own line, all with the
/// same indentation of spaces, a `- ` and a double-quoted scalar of printable ASCII without `"`
/// or `\` (so it has no escapes, and its text is what it holds), and nothing after the closing
/// quote; every line ends with a line feed but perhaps the last; no blank line, tab, comment or
/// carriage return anywhere. Such a document is the mapping `{paths: [items...]}`.
fn simple_paths(src: &str) -> Option<Value> {
    let rest = src.strip_prefix("paths:\n")?;
    let rest = rest.strip_suffix('\n').unwrap_or(rest);
    let mut indent = None;
    let mut items = Vec::new();
    for line in rest.split('\n') {
        let text = line.trim_start_matches(' ');
        if *indent.get_or_insert(line.len() - text.len()) != line.len() - text.len() {
            return None;
        }
        let item = text.strip_prefix("- \"")?.strip_suffix('"')?;
        if !item.bytes().all(|b| (0x20..=0x7e).contains(&b) && b != b'"' && b != b'\\') {
            return None;
        }
        items.push(Value::String(item.to_string()));
    }
    Some(Value::Map(vec![(Value::String("paths".into()), Value::Seq(items))]))
}

/// Deserialises one YAML document into `T`, with the error located by line and column. A document
/// nested deeper than [`MAX_DEPTH`] is refused before it is parsed, as by [`parse`]: case files,
/// manifests and clause lists are checked as frontmatter is.
pub fn from_str<T: DeserializeOwned>(src: &str) -> Result<T, Error> {
    if let Some(line) = too_deep(src) {
        return Err(too_deep_error(line));
    }
    serde_yaml::from_str(src).map_err(convert_error)
}

/// Serialises `value` as YAML.
pub fn to_string<T: serde::Serialize>(value: &T) -> Result<String, Error> {
    serde_yaml::to_string(value).map_err(convert_error)
}

fn convert(v: serde_yaml::Value) -> Value {
    match v {
        serde_yaml::Value::Null => Value::Null,
        serde_yaml::Value::Bool(b) => Value::Bool(b),
        serde_yaml::Value::Number(n) => Value::Number(n.to_string()),
        serde_yaml::Value::String(s) => Value::String(s),
        serde_yaml::Value::Sequence(seq) => Value::Seq(seq.into_iter().map(convert).collect()),
        serde_yaml::Value::Mapping(m) => Value::Map(m.into_iter().map(|(k, v)| (convert(k), convert(v))).collect()),
        serde_yaml::Value::Tagged(t) => Value::Tagged(t.tag.to_string(), Box::new(convert(t.value))),
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[test]
    fn duplicate_keys_are_an_error() {
        assert!(parse("paths: [a]\npaths: [b]\n").is_err());
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let src = format!("paths: {}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse(&src).is_err());
    }

    #[test]
    fn nesting_at_the_limit_parses() {
        let src = format!("paths: {}{}", "[".repeat(MAX_DEPTH - 1), "]".repeat(MAX_DEPTH - 1));
        assert!(parse(&src).is_ok());
        let src = format!("paths:\n{}x\n", "- ".repeat(MAX_DEPTH + 1));
        assert!(parse(&src).is_err());
    }

    /// Runs `f` on a thread of its own, failing if it takes longer than `secs`: a depth check that
    /// lets a bomb through makes the parse take minutes, and the test fails rather than hangs.
    fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(f()));
        rx.recv_timeout(std::time::Duration::from_secs(secs)).expect("the depth check let a nesting bomb through")
    }

    /// Bombs that a line-by-line estimate missed, each refused at once at its line, by `parse` and
    /// by `from_str` alike: the check follows the scanner, not a guess of it.
    #[rstest]
    #[case::apostrophe_in_a_plain_scalar("x: [it's, ", 1)]
    #[case::hash_inside_a_plain_scalar("x: [a#b, ", 1)]
    #[case::quoted_scalar_over_two_lines("x: [\"a\n b\", ", 2)]
    #[case::single_quoted_over_two_lines("x: ['a\n b', ", 2)]
    #[case::comment_ended_by_a_carriage_return("# note\rx: ", 2)]
    #[case::comment_ended_by_a_line_separator("# note\u{2028}x: ", 2)]
    #[case::escaped_quote("x: [\"a\\\"\", ", 1)]
    #[case::after_a_block_scalar("a: |\n  text'\nb: ", 3)]
    #[case::after_a_directive("%YAML 1.1\n--- ", 2)]
    #[case::block_mapping("x:\n", MAX_DEPTH + 2)]
    fn a_nesting_bomb_is_refused_at_once(#[case] head: &str, #[case] line: usize) {
        let bomb = if head.ends_with('\n') {
            (0..200).map(|i| format!("{}k:\n", " ".repeat(i))).collect::<String>()
        } else {
            "[".repeat(100_000)
        };
        let src = format!("{head}{bomb}");
        let (parsed, typed) = within(20, move || (parse(&src), from_str::<serde_yaml::Value>(&src).map(|_| ())));
        for e in [parsed.map(|_| ()).unwrap_err(), typed.unwrap_err()] {
            assert_eq!(e.message, "nesting deeper than 128 levels");
            assert_eq!(e.line, Some(line));
        }
    }

    /// A verbatim tag's URI may hold `]`: `[!<]> [!<]> ...` nests, it does not close.
    #[test]
    fn brackets_in_a_verbatim_tag_do_not_close() {
        let src = format!("x: {}", "[!<]> ".repeat(50_000));
        let e = within(20, move || parse(&src)).unwrap_err();
        assert_eq!(e.line, Some(1), "{e:?}");
    }

    /// What only looks deep is parsed: brackets and deep indentation inside a block scalar, or in
    /// quotes, comments and plain scalars of the block context, are text.
    #[rstest]
    #[case::brackets_in_a_block_scalar(format!("a: |\n{}b: x\n", "  [[[[[[[[[[\n".repeat(50)))]
    #[case::indentation_in_a_block_scalar(format!("a: |\n  x\n{}y\nb: c\n", " ".repeat(400)))]
    #[case::brackets_in_quotes(format!("a: '{}'\nb: \"{}\"\n", "[".repeat(500), "{".repeat(500)))]
    #[case::brackets_in_a_comment(format!("a: b # {}\n", "[".repeat(500)))]
    #[case::brackets_in_a_plain_scalar(format!("a: b{}\n", "[".repeat(500)))]
    #[case::flow_at_the_limit(format!("a: {}{}\n", "[".repeat(MAX_DEPTH - 1), "]".repeat(MAX_DEPTH - 1)))]
    #[case::block_at_the_limit((0..MAX_DEPTH).map(|i| format!("{}k:\n", " ".repeat(i))).collect::<String>())]
    // The depth is the collections opened, not the columns: any indentation width (D-FM-16).
    #[case::four_spaces_a_level((0..MAX_DEPTH).map(|i| format!("{}k:\n", " ".repeat(4 * i))).collect::<String>())]
    #[case::eight_spaces_a_level((0..MAX_DEPTH).map(|i| format!("{}k:\n", " ".repeat(8 * i))).collect::<String>())]
    fn what_only_looks_deep_parses(#[case] src: String) {
        assert!(parse(&src).is_ok(), "{:?}", parse(&src).err());
    }

    #[test]
    fn one_level_past_the_limit_is_refused_by_the_check_itself() {
        let src = format!("a: {}{}\n", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert_eq!(too_deep(&src), Some(1));
        let src: String = (0..=MAX_DEPTH).map(|i| format!("{}k:\n", " ".repeat(i))).collect();
        assert_eq!(too_deep(&src), Some(MAX_DEPTH + 1));
    }

    #[test]
    fn alias_bomb_is_an_error() {
        let mut src = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 0..12 {
            let prev = if i == 0 { "a".to_string() } else { format!("a{}", i - 1) };
            src.push_str(&format!(
                "a{i}: &a{i} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"
            ));
        }
        assert!(parse(&src).is_err());
    }

    #[rstest]
    #[case("", Value::Null)]
    #[case("# only a comment\n", Value::Null)]
    #[case("!glob x", Value::Tagged("!glob".into(), Box::new(Value::String("x".into()))))]
    #[case("!!str 123", Value::String("123".into()))]
    #[case("123", Value::Number("123".into()))]
    #[case("yes", Value::String("yes".into()))]
    fn scalars_convert(#[case] src: &str, #[case] want: Value) {
        assert_eq!(parse(src).unwrap(), want);
    }

    #[test]
    fn errors_carry_a_line() {
        let e = parse("a: 1\nb: [\n").unwrap_err();
        assert!(e.line.is_some(), "{e:?}");
    }

    /// The shortcut takes the plain documents it is for, and answers for them what the parser
    /// answers.
    #[rstest]
    #[case("paths:\n  - \"src/**/*.ts\"\n")]
    #[case("paths:\n  - \"a\"\n  - \"b/*.md\"")]
    #[case("paths:\n- \"x: #y\"\n")]
    #[case("paths:\n    - \"\"\n")]
    fn the_shortcut_takes_plain_paths_lists_and_answers_as_the_parser(#[case] src: &str) {
        let value = simple_paths(src);
        assert!(value.is_some(), "the shortcut declined {src:?}");
        assert_eq!(value.map(Ok), Some(parse_full(src)));
    }

    /// Every one-character change of a plain document (a character inserted, deleted or
    /// replaced, from an alphabet of YAML's indicators, blanks, escapes and non-ASCII), and of
    /// those again: the shortcut either declines it or answers exactly what the parser answers.
    #[test]
    fn the_shortcut_declines_or_agrees_on_every_near_miss() {
        let alphabet = [
            ' ', '\t', '\n', '\r', '-', '"', '\'', '\\', '#', ':', '*', '&', '!', '|', '>', '[', '{', ',', 'a', 'é',
            '\u{85}', '\u{feff}', '0',
        ];
        let base = "paths:\n  - \"src/*\"\n  - \"b\"\n";
        let near = |src: &str| -> Vec<String> {
            let chars: Vec<char> = src.chars().collect();
            let mut out = Vec::new();
            for i in 0..=chars.len() {
                let (head, tail) = chars.split_at(i);
                for c in alphabet {
                    out.push(head.iter().chain([c].iter()).chain(tail).collect());
                    if let Some((_, rest)) = tail.split_first() {
                        out.push(head.iter().chain([c].iter()).chain(rest).collect());
                    }
                }
                if let Some((_, rest)) = tail.split_first() {
                    out.push(head.iter().chain(rest).collect());
                }
            }
            out
        };
        let (mut taken, mut tried) = (0, 0);
        let first = near(base);
        // Second-order changes of every fifth first-order one keep the run short in debug.
        let second: Vec<String> = first.iter().step_by(5).flat_map(|s| near(s)).step_by(7).collect();
        for src in first.iter().chain(&second) {
            tried += 1;
            if let Some(value) = simple_paths(src) {
                taken += 1;
                assert_eq!(Ok(value), parse_full(src), "the shortcut differs from the parser on {src:?}");
            }
        }
        assert!(taken > 50 && taken < tried / 4, "{taken} of {tried} taken: the search tests too little");
    }
}
