//! The system prompts of the root-file profile (seed 003, "Decision" and "Amendment 2026-10-18:
//! the lean prompt carries it too"): where (project-instructions-section) stands in each prompt,
//! and a project's redefinition of it in `.nodwyn/init.scm`.
//!
//! There are three system prompts (D-RF-PROMPT-1): the two full ones of "both system prompts",
//! which hold the section "after the working rules, the git rule and the workspace's folders and
//! before the project notes", and lean-system-prompt, which "now ends with the same section ...
//! after its last fixed sentence" and "still has no project notes". An empty section is no part
//! (D-RF-PROMPT-2): "a repository without the file gets the lean prompt unchanged".
//!
//! A redefinition (D-RF-REDEF-1) is a top-level `(define (project-instructions-section) BODY)` or
//! `(define project-instructions-section (lambda () BODY))` in the root's `.nodwyn/init.scm`, read
//! as Scheme: comments and strings that mention the name are not one. The reference evaluates no
//! Scheme: a BODY of one string literal is that text, any other BODY takes the section out.

use crate::config::Config;
use crate::relpath::RelPath;
use crate::rootfile::{root_file, RootFile};
use crate::source::{ReadOutcome, Source};

/// The init file a project redefines parts of the prompt in (seed 003, "Decision").
pub const INIT_FILE: &str = ".nodwyn/init.scm";

/// The most of `.nodwyn/init.scm` the reference reads; a larger file is read as no init file
/// (the reference's bound, not a suite decision). The default is 256 KiB.
pub const INIT_FILE_MAX_BYTES: u64 = 256 * 1024;

/// The name a redefinition defines.
pub const SECTION_NAME: &str = "project-instructions-section";

/// Deepest nesting the init reader accepts; a deeper file does not read (no redefinition), so a
/// hostile file cannot exhaust the stack.
const MAX_DEPTH: usize = 128;

/// Which system prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptKind {
    /// One of the two full system prompts ("both system prompts").
    Full,
    /// lean-system-prompt, which a session nobody approves runs by default.
    Lean,
}

/// A part of a system prompt. Only the section's text is the seed's; the others are the
/// reference's own text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartKind {
    /// The working rules (ADR 32), the same for every repository.
    WorkingRules,
    /// The git rule.
    GitRule,
    /// The workspace's folders.
    WorkspaceFolders,
    /// (project-instructions-section).
    ProjectInstructions,
    /// The project notes, the agent's own.
    ProjectNotes,
    /// The lean prompt's fixed text, up to its last fixed sentence.
    LeanFixed,
}

impl PartKind {
    /// The part's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            PartKind::WorkingRules => "working_rules",
            PartKind::GitRule => "git_rule",
            PartKind::WorkspaceFolders => "workspace_folders",
            PartKind::ProjectInstructions => "project_instructions",
            PartKind::ProjectNotes => "project_notes",
            PartKind::LeanFixed => "lean_fixed",
        }
    }
}

/// One built system prompt: its parts in order, each with its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    /// Which prompt.
    pub kind: PromptKind,
    /// The parts, in order.
    pub parts: Vec<(PartKind, String)>,
}

impl Prompt {
    /// The whole prompt's text: the parts joined by a blank line.
    pub fn text(&self) -> String {
        self.parts.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>().join("\n\n")
    }
}

const WORKING_RULES: &str = "Work in small verified steps; run the repository's checks before you report a change.";
const GIT_RULE: &str = "Never rewrite published history; commit only what the task asks for.";
const WORKSPACE_FOLDERS: &str = "The workspace's folders are listed below.";
const PROJECT_NOTES: &str = "Your project notes are leads to check, not facts.";
const LEAN_FIXED: &str = "You are a coding agent in a lean session. Keep your answers short.";

/// Builds the system prompts of `kind` around `section`: the two full prompts, or the lean one.
pub fn prompts(kind: PromptKind, section: &str) -> Vec<Prompt> {
    // An empty section adds nothing: the prompt is what it is without it (D-RF-PROMPT-2).
    let section = (!section.is_empty()).then(|| (PartKind::ProjectInstructions, section.to_string()));
    match kind {
        // "after the working rules, the git rule and the workspace's folders and before the
        // project notes", in both full prompts.
        PromptKind::Full => {
            let one = || {
                let mut parts = vec![
                    (PartKind::WorkingRules, WORKING_RULES.to_string()),
                    (PartKind::GitRule, GIT_RULE.to_string()),
                    (PartKind::WorkspaceFolders, WORKSPACE_FOLDERS.to_string()),
                ];
                parts.extend(section.clone());
                parts.push((PartKind::ProjectNotes, PROJECT_NOTES.to_string()));
                Prompt { kind, parts }
            };
            vec![one(), one()]
        }
        // "It now ends with the same section, under the same heading, after its last fixed
        // sentence"; "The lean prompt still has no project notes".
        PromptKind::Lean => {
            let mut parts = vec![(PartKind::LeanFixed, LEAN_FIXED.to_string())];
            parts.extend(section);
            vec![Prompt { kind, parts }]
        }
    }
}

/// The section at session start: a project's redefinition in `.nodwyn/init.scm` where it has
/// one (then the root file is not read at all), else the root file (seed 003, "Decision").
pub fn section(source: &Source, config: &Config) -> RootFile {
    match redefinition_in(source) {
        Some(text) => RootFile { file: None, section: text, diagnostics: Vec::new() },
        None => root_file(source, config),
    }
}

/// The redefined section of the root's `.nodwyn/init.scm`, if it has one. The file is read as
/// the root file is, a regular file inside the root after links (D-RF-REDEF-2); one that cannot
/// be read so, is not UTF-8 or does not read as Scheme holds no redefinition, and reports nothing.
pub fn redefinition_in(source: &Source) -> Option<String> {
    let path = RelPath::trusted(INIT_FILE);
    let ReadOutcome::Bytes(bytes) = source.read(&path, true, INIT_FILE_MAX_BYTES) else { return None };
    redefinition(std::str::from_utf8(&bytes).ok()?)
}

/// A datum of the init file, as far as a redefinition needs one.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Datum {
    /// A list, `(...)` or `[...]`.
    List(Vec<Datum>),
    /// A string literal, its escapes decoded.
    Str(String),
    /// Any other atom (a symbol, a number, a boolean, a character), as written.
    Atom(String),
    /// A quoted datum (`'x`, `` `x ``, `,x`): never a definition.
    Quoted,
}

/// The redefined section of an init file's text: the last top-level redefinition's value
/// (D-RF-REDEF-1). `None` when the text holds none, or does not read as Scheme.
pub fn redefinition(text: &str) -> Option<String> {
    let forms = Reader { chars: text.chars().collect(), pos: 0 }.read_all()?;
    let mut found = None;
    visit(&forms, &mut found);
    found
}

/// Looks at top-level forms, and into a top-level `(begin ...)`, whose forms are top-level too.
fn visit(forms: &[Datum], found: &mut Option<String>) {
    for form in forms {
        let Datum::List(items) = form else { continue };
        match items.first() {
            Some(Datum::Atom(a)) if a == "begin" => visit(items.get(1..).unwrap_or(&[]), found),
            Some(Datum::Atom(a)) if a == "define" => {
                if let Some(body) = defined_body(items.get(1..).unwrap_or(&[])) {
                    *found = Some(value(body));
                }
            }
            _ => {}
        }
    }
}

/// The body of a definition of the section procedure, if `rest` (what follows `define`) is one.
fn defined_body(rest: &[Datum]) -> Option<&[Datum]> {
    match rest.first()? {
        // (define (project-instructions-section) BODY...)
        Datum::List(head) if head.len() == 1 && head.first() == Some(&Datum::Atom(SECTION_NAME.into())) => {
            rest.get(1..)
        }
        // (define project-instructions-section (lambda () BODY...))
        Datum::Atom(name) if name == SECTION_NAME && rest.len() == 2 => match rest.get(1)? {
            Datum::List(l)
                if l.first() == Some(&Datum::Atom("lambda".into())) && l.get(1) == Some(&Datum::List(vec![])) =>
            {
                l.get(2..)
            }
            _ => None,
        },
        _ => None,
    }
}

/// What a redefined section returns: the string of a body that is one string literal; "" for any
/// other body, which the reference does not evaluate (it takes the section out).
fn value(body: &[Datum]) -> String {
    match body {
        [Datum::Str(s)] => s.clone(),
        _ => String::new(),
    }
}

/// A small Scheme reader: enough to tell definitions from comments and strings.
struct Reader {
    chars: Vec<char>,
    pos: usize,
}

impl Reader {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn read_all(mut self) -> Option<Vec<Datum>> {
        let mut out = Vec::new();
        loop {
            self.skip_atmosphere(0)?;
            if self.peek().is_none() {
                return Some(out);
            }
            out.push(self.datum(0)?);
        }
    }

    /// Skips white space and comments: `; ...`, `#| ... |#` (nested) and `#;` datum comments.
    ///
    /// A `#;` only counts the datum it comments out; the data are read once the run of
    /// atmosphere in front of them ends, so a file of nothing but `#;` (131,072 of them in the
    /// 256 KiB the reader takes) is read in a loop, not by a recursion per `#;`, which overflowed
    /// the stack (r-prompt-026). `#; #; a b` comments out both `a` and `b`, as in R7RS.
    fn skip_atmosphere(&mut self, depth: usize) -> Option<()> {
        let mut commented = 0usize;
        loop {
            match self.peek() {
                Some(c) if c.is_whitespace() => self.pos += 1,
                Some(';') => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.pos += 1;
                    }
                }
                Some('#') if self.chars.get(self.pos + 1) == Some(&'|') => {
                    self.pos += 2;
                    let mut nest = 1usize;
                    while nest > 0 {
                        match (self.peek()?, self.chars.get(self.pos + 1)) {
                            ('|', Some('#')) => {
                                nest -= 1;
                                self.pos += 2;
                            }
                            ('#', Some('|')) => {
                                nest += 1;
                                self.pos += 2;
                            }
                            _ => self.pos += 1,
                        }
                    }
                }
                Some('#') if self.chars.get(self.pos + 1) == Some(&';') => {
                    self.pos += 2;
                    commented += 1;
                }
                // A datum comment with no datum left to comment out: not Scheme.
                None if commented > 0 => return None,
                Some(_) if commented > 0 => {
                    self.datum(depth)?;
                    commented -= 1;
                }
                _ => return Some(()),
            }
        }
    }

    fn datum(&mut self, depth: usize) -> Option<Datum> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            c @ ('(' | '[') => {
                let close = if c == '(' { ')' } else { ']' };
                self.pos += 1;
                let mut items = Vec::new();
                loop {
                    self.skip_atmosphere(depth + 1)?;
                    match self.peek()? {
                        c if c == close => {
                            self.pos += 1;
                            return Some(Datum::List(items));
                        }
                        ')' | ']' => return None,
                        _ => items.push(self.datum(depth + 1)?),
                    }
                }
            }
            ')' | ']' => None,
            '"' => self.string().map(Datum::Str),
            '\'' | '`' | ',' => {
                self.pos += 1;
                if self.peek() == Some('@') {
                    self.pos += 1;
                }
                self.skip_atmosphere(depth + 1)?;
                self.datum(depth + 1)?;
                Some(Datum::Quoted)
            }
            _ => {
                let start = self.pos;
                // `#\(` is a character, not a paren.
                if self.peek() == Some('#') && self.chars.get(self.pos + 1) == Some(&'\\') {
                    self.pos += 3;
                }
                while self.peek().is_some_and(|c| !c.is_whitespace() && !"()[]\";'`,".contains(c)) {
                    self.pos += 1;
                }
                let end = self.pos.min(self.chars.len());
                Some(Datum::Atom(self.chars.get(start..end)?.iter().collect()))
            }
        }
    }

    /// A string literal: `\"`, `\\`, `\n`, `\t` and `\r` are decoded; a `\` before a line end
    /// joins the lines (R7RS); an unterminated string does not read.
    fn string(&mut self) -> Option<String> {
        self.pos += 1;
        let mut out = String::new();
        loop {
            let c = self.peek()?;
            self.pos += 1;
            match c {
                '"' => return Some(out),
                '\\' => {
                    let e = self.peek()?;
                    self.pos += 1;
                    match e {
                        'n' => out.push('\n'),
                        't' => out.push('\t'),
                        'r' => out.push('\r'),
                        'a' => out.push('\u{7}'),
                        '\n' => {
                            while self.peek().is_some_and(|c| c == ' ' || c == '\t') {
                                self.pos += 1;
                            }
                        }
                        other => out.push(other),
                    }
                }
                c => out.push(c),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::procedure_form("(define (project-instructions-section) \"\")", Some(""))]
    #[case::lambda_form("(define project-instructions-section (lambda () \"See docs.\"))", Some("See docs."))]
    #[case::text_with_escapes("(define (project-instructions-section) \"a\\\"b\\nc\")", Some("a\"b\nc"))]
    #[case::other_body_takes_it_out("(define (project-instructions-section) (string-append \"a\" \"b\"))", Some(""))]
    #[case::inside_begin("(begin (define (project-instructions-section) \"x\"))", Some("x"))]
    #[case::last_wins(
        "(define (project-instructions-section) \"a\")\n(define (project-instructions-section) \"b\")",
        Some("b")
    )]
    #[case::line_comment("; (define (project-instructions-section) \"\")\n(display 1)", None)]
    #[case::block_comment("#| (define (project-instructions-section) \"\") |#", None)]
    #[case::datum_comment("#;(define (project-instructions-section) \"\")", None)]
    #[case::in_a_string("(display \"(define (project-instructions-section) \\\"\\\")\")", None)]
    #[case::quoted("'(define (project-instructions-section) \"\")", None)]
    #[case::nested_not_top_level("(let () (define (project-instructions-section) \"\") 1)", None)]
    #[case::with_a_parameter("(define (project-instructions-section x) \"\")", None)]
    #[case::other_name("(define (project-instructions-section2) \"\")", None)]
    #[case::unbalanced("(define (project-instructions-section) \"\"", None)]
    #[case::too_deep(&format!("{}(define (project-instructions-section) \"\")", "(".repeat(200)), None)]
    #[case::two_datum_comments(
        "(define (project-instructions-section) \"a\") #; #; 1 (define (project-instructions-section) \"b\")",
        Some("a")
    )]
    #[case::datum_comment_with_nothing_after("(define (project-instructions-section) \"a\") #;", None)]
    #[case::datum_comments_chained(&"#;".repeat(131_072), None)]
    #[case::datum_comments_chained_in_lists(&"(#;".repeat(87_381), None)]
    #[case::datum_comments_chained_in_quotes(&"'#;".repeat(87_381), None)]
    fn redefinitions(#[case] text: &str, #[case] want: Option<&str>) {
        assert_eq!(redefinition(text).as_deref(), want, "{text}");
    }

    #[test]
    fn the_section_stands_between_the_folders_and_the_notes_in_both_full_prompts() {
        let full = prompts(PromptKind::Full, "S");
        assert_eq!(full.len(), 2);
        for p in &full {
            let kinds: Vec<&str> = p.parts.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(
                kinds,
                ["working_rules", "git_rule", "workspace_folders", "project_instructions", "project_notes"]
            );
        }
        let lean = prompts(PromptKind::Lean, "");
        assert_eq!(lean.len(), 1);
        assert_eq!(lean[0].text(), LEAN_FIXED);
    }
}
