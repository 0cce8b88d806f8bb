//! Diagnostics: the closed set of codes the resolver reports, and the value that carries one.
//!
//! A code is a stable string that is never reused for another meaning. The three `brain.*` codes
//! are the seed's own names (000, "Boundaries and authority", "Lifetime"); the rest are this
//! project's, one per way a file can be refused (see `spec-cases/DECISIONS.md`). Partial success
//! is a value: discovery returns what it found *and* these, so one bad module never hides another.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What went wrong, as a stable code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Code {
    /// A module or nested instruction file resolves outside the root, or is a symlink entry in a
    /// managed tree.
    #[serde(rename = "brain.instruction_module_escape")]
    InstructionModuleEscape,
    /// A file is larger than the per-file cap and was refused whole.
    #[serde(rename = "brain.context_file_oversized")]
    ContextFileOversized,
    /// The journal append of an activation failed; the touched paths went back into the queue.
    #[serde(rename = "brain.instruction_activation_failed")]
    InstructionActivationFailed,
    /// The frontmatter opens with `---` but no closing `---` line follows.
    #[serde(rename = "frontmatter.unterminated")]
    FrontmatterUnterminated,
    /// The file opens like frontmatter but not well: a `---` line with more on it, `----`, or a
    /// `---` line after blank lines.
    #[serde(rename = "frontmatter.malformed_opening")]
    FrontmatterMalformedOpening,
    /// The frontmatter is not valid YAML (this includes duplicate keys and alias bombs).
    #[serde(rename = "frontmatter.invalid_yaml")]
    FrontmatterInvalidYaml,
    /// The frontmatter is a YAML document that is not a mapping.
    #[serde(rename = "frontmatter.not_a_mapping")]
    FrontmatterNotAMapping,
    /// The frontmatter carries a key other than `paths`.
    #[serde(rename = "frontmatter.unknown_key")]
    FrontmatterUnknownKey,
    /// `paths` is not a YAML list.
    #[serde(rename = "frontmatter.paths_not_a_list")]
    PathsNotAList,
    /// `paths` has no value or is an empty list.
    #[serde(rename = "frontmatter.paths_empty")]
    PathsEmpty,
    /// An item of `paths` is not a string.
    #[serde(rename = "frontmatter.path_not_a_string")]
    PathNotAString,
    /// An item of `paths` is an empty (or whitespace-only) string.
    #[serde(rename = "frontmatter.path_empty")]
    PathEmpty,
    /// A glob starts with `/`.
    #[serde(rename = "glob.absolute")]
    GlobAbsolute,
    /// A glob contains a backslash.
    #[serde(rename = "glob.backslash")]
    GlobBackslash,
    /// A glob has a `..` segment.
    #[serde(rename = "glob.parent_segment")]
    GlobParentSegment,
    /// A glob uses `**` inside a path segment, or is otherwise not a glob.
    #[serde(rename = "glob.invalid")]
    GlobInvalid,
    /// An instruction file is not valid UTF-8.
    #[serde(rename = "file.not_utf8")]
    FileNotUtf8,
    /// An instruction file name is present but is not a regular file (a FIFO, a device).
    #[serde(rename = "file.not_regular")]
    FileNotRegular,
    /// An instruction file could not be read (a dangling link, a link loop, an I/O error).
    #[serde(rename = "file.unreadable")]
    FileUnreadable,
    /// A managed project's listing failed for a reason other than a stopped environment.
    #[serde(rename = "managed.listing_failed")]
    ManagedListingFailed,
    /// The root listing held more than 1,000 names before the candidates.
    #[serde(rename = "root.listing_limit")]
    RootListingLimit,
    /// The root-file profile's file (or its link's target) is refused by the credential denylist.
    #[serde(rename = "rootfile.denied")]
    RootFileDenied,
    /// The section profile's subtree scope reached `maxNestedDirs` (logged once per conversation).
    #[serde(rename = "section.nested_limit")]
    SectionNestedLimit,
}

impl Code {
    /// The code's stable string.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::InstructionModuleEscape => "brain.instruction_module_escape",
            Code::ContextFileOversized => "brain.context_file_oversized",
            Code::InstructionActivationFailed => "brain.instruction_activation_failed",
            Code::FrontmatterUnterminated => "frontmatter.unterminated",
            Code::FrontmatterMalformedOpening => "frontmatter.malformed_opening",
            Code::FrontmatterInvalidYaml => "frontmatter.invalid_yaml",
            Code::FrontmatterNotAMapping => "frontmatter.not_a_mapping",
            Code::FrontmatterUnknownKey => "frontmatter.unknown_key",
            Code::PathsNotAList => "frontmatter.paths_not_a_list",
            Code::PathsEmpty => "frontmatter.paths_empty",
            Code::PathNotAString => "frontmatter.path_not_a_string",
            Code::PathEmpty => "frontmatter.path_empty",
            Code::GlobAbsolute => "glob.absolute",
            Code::GlobBackslash => "glob.backslash",
            Code::GlobParentSegment => "glob.parent_segment",
            Code::GlobInvalid => "glob.invalid",
            Code::FileNotUtf8 => "file.not_utf8",
            Code::FileNotRegular => "file.not_regular",
            Code::FileUnreadable => "file.unreadable",
            Code::ManagedListingFailed => "managed.listing_failed",
            Code::RootListingLimit => "root.listing_limit",
            Code::RootFileDenied => "rootfile.denied",
            Code::SectionNestedLimit => "section.nested_limit",
        }
    }

    /// Every code, in declaration order; the harness checks scenario expectations against it.
    pub const ALL: &'static [Code] = &[
        Code::InstructionModuleEscape,
        Code::ContextFileOversized,
        Code::InstructionActivationFailed,
        Code::FrontmatterUnterminated,
        Code::FrontmatterMalformedOpening,
        Code::FrontmatterInvalidYaml,
        Code::FrontmatterNotAMapping,
        Code::FrontmatterUnknownKey,
        Code::PathsNotAList,
        Code::PathsEmpty,
        Code::PathNotAString,
        Code::PathEmpty,
        Code::GlobAbsolute,
        Code::GlobBackslash,
        Code::GlobParentSegment,
        Code::GlobInvalid,
        Code::FileNotUtf8,
        Code::FileNotRegular,
        Code::FileUnreadable,
        Code::ManagedListingFailed,
        Code::RootListingLimit,
        Code::RootFileDenied,
        Code::SectionNestedLimit,
    ];

    /// The level the code is logged at. Facts about a directory are `info`, refusals `error`.
    pub fn level(self) -> Level {
        match self {
            Code::ManagedListingFailed | Code::RootListingLimit | Code::SectionNestedLimit => Level::Info,
            _ => Level::Error,
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How loud a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// A fact about a directory, not a fault.
    Info,
    /// A refusal or a failure.
    Error,
}

/// One diagnostic: a code, the /-form root-relative path it concerns, and a line where the
/// problem has one.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Diagnostic {
    /// The stable code.
    pub code: Code,
    /// The /-form, root-relative path of the file (empty for the root directory itself).
    pub path: String,
    /// The 1-based line in the file, where there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// The level, derived from the code.
    pub level: Level,
    /// A lowercase message that quotes the offending input.
    pub message: String,
}

impl Diagnostic {
    /// A diagnostic for `path` with the code's level and no line.
    pub fn new(code: Code, path: impl Into<String>, message: impl Into<String>) -> Diagnostic {
        Diagnostic { code, path: path.into(), line: None, level: code.level(), message: message.into() }
    }

    /// The same diagnostic, located at `line`.
    pub fn with_line(mut self, line: u32) -> Diagnostic {
        self.line = Some(line);
        self
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}: {} [{}]", self.path, line, self.message, self.code),
            None => write!(f, "{}: {} [{}]", self.path, self.message, self.code),
        }
    }
}
