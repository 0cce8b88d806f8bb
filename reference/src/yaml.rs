//! The one YAML module of the workspace. Everything that depends on the YAML parser goes through
//! here, so replacing the parser (serde_yaml is deprecated upstream) is a change to this file.
//!
//! Parser-dependent behaviour is pinned by scenarios rather than assumed: duplicate keys are an
//! error, a document may be any node (the caller checks for a mapping), anchors and aliases
//! resolve, an unknown tag is kept as a tagged value (which no `paths` item accepts), the merge
//! key `<<` is an ordinary key, and nesting deeper than the parser's recursion limit or an alias
//! expansion past its repetition limit is an error, never a hang.

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

/// How deep a document may nest before it is refused without parsing. The parser's own
/// recursion limit (128) would refuse it too, but only after a parse whose cost grows with the
/// square of the depth: 100,000 brackets take half a minute.
pub const MAX_DEPTH: usize = 128;

/// A cheap upper bound of each line's nesting: indentation, leading `- ` and `? ` indicators, and
/// open flow brackets outside quotes. `Some(line)` where it first exceeds [`MAX_DEPTH`].
fn too_deep(src: &str) -> Option<usize> {
    let mut flow = 0usize;
    for (i, line) in src.lines().enumerate() {
        let indent = line.len() - line.trim_start_matches([' ', '\t']).len();
        let mut rest = line.trim_start_matches([' ', '\t']);
        let mut block = 0usize;
        while let Some(r) = rest.strip_prefix("- ").or_else(|| rest.strip_prefix("? ")) {
            block += 1;
            rest = r.trim_start_matches(' ');
        }
        let mut quote: Option<char> = None;
        for c in rest.chars() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '"' | '\'') => quote = Some(c),
                (None, '#') => break,
                (None, '[' | '{') => flow += 1,
                (None, ']' | '}') => flow = flow.saturating_sub(1),
                _ => {}
            }
            if flow > MAX_DEPTH {
                return Some(i + 1);
            }
        }
        if indent / 2 + block + flow > MAX_DEPTH {
            return Some(i + 1);
        }
    }
    None
}

/// Parses one YAML document into a [`Value`].
pub fn parse(src: &str) -> Result<Value, Error> {
    if let Some(line) = too_deep(src) {
        return Err(Error {
            line: Some(line),
            column: None,
            message: format!("nesting deeper than {MAX_DEPTH} levels"),
        });
    }
    let v: serde_yaml::Value = serde_yaml::from_str(src).map_err(convert_error)?;
    Ok(convert(v))
}

/// Deserialises one YAML document into `T`, with the error located by line and column.
pub fn from_str<T: DeserializeOwned>(src: &str) -> Result<T, Error> {
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
}
