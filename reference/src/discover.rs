//! Discovery (seed 000, "Format and discovery"): the root instruction file by name priority, the
//! rule modules under `.elowen/rules`, and the nested instruction files of touched folders.
//!
//! Discovery is not cached ("Cost and limits": "Every trigger re-lists and re-reads, which is what
//! makes a changed file visible on the next access"). Partial success is a value: every function
//! returns what it found and the diagnostics of what it refused.

use sha2::{Digest, Sha256};

use crate::config::Config;
use crate::diag::{Code, Diagnostic};
use crate::frontmatter::{self, Kind};
use crate::glob::{CompiledRules, RulesBuilder};
use crate::relpath::{Platform, RelPath};
use crate::source::{EntryKind, ReadOutcome, Source};

/// An instruction file as it is sent: its path, its content and the SHA-256 of that content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// The /-form root-relative path.
    pub path: RelPath,
    /// The sent content (BOM and, for rule modules, frontmatter stripped).
    pub content: String,
    /// Lower-case hex SHA-256 of `content`.
    pub sha256: String,
}

impl Loaded {
    fn new(path: RelPath, content: &str) -> Loaded {
        Loaded { path, sha256: sha256_hex(content.as_bytes()), content: content.to_string() }
    }
}

/// Lower-case hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// The rule modules of one walk of `.elowen/rules`.
#[derive(Debug, Clone)]
pub struct Modules {
    /// Modules without a condition, ordered by path.
    pub unconditional: Vec<Loaded>,
    /// Modules with `paths`, ordered by path; the index is the owner in `rules`.
    pub conditional: Vec<Loaded>,
    /// Every conditional module's globs, compiled into one set.
    pub rules: CompiledRules,
    /// What was refused.
    pub diagnostics: Vec<Diagnostic>,
}

/// Reads one instruction file and decodes it, turning every refusal into a diagnostic.
fn read_text(source: &Source, path: &RelPath, confined: bool, cap: u64, diags: &mut Vec<Diagnostic>) -> Option<String> {
    match source.read(path, confined, cap) {
        ReadOutcome::Absent => None,
        ReadOutcome::Refused(code, message) => {
            diags.push(Diagnostic::new(code, path.as_str(), message));
            None
        }
        ReadOutcome::Bytes(bytes) => match String::from_utf8(bytes) {
            Ok(text) => Some(text),
            Err(e) => {
                let at = e.utf8_error().valid_up_to();
                diags.push(Diagnostic::new(
                    Code::FileNotUtf8,
                    path.as_str(),
                    format!("'{path}' is not valid utf-8 (first invalid byte at offset {at})"),
                ));
                None
            }
        },
    }
}

/// Loads the instruction file of `dir` (`None`: the root) by name priority. The first name
/// present as a non-directory wins the folder, even when it is then refused (decision D-ROOT-2:
/// a refused winner never falls back to a lower-priority name).
pub fn instruction_file(
    source: &Source,
    config: &Config,
    dir: Option<&RelPath>,
    diags: &mut Vec<Diagnostic>,
) -> Option<Loaded> {
    let (found, diag) = source.find_first(dir, &config.names);
    diags.extend(diag);
    let path = found?;
    // The root file follows a symlink as PI's own loader does; a nested one is confined.
    let confined = dir.is_some();
    let text = read_text(source, &path, confined, config.file_cap, diags)?;
    Some(Loaded::new(path, frontmatter::strip_bom(&text)))
}

fn is_module_name(platform: Platform, name: &str, ext: &str) -> bool {
    match platform {
        Platform::Posix => name.ends_with(ext),
        Platform::Windows => {
            name.len() >= ext.len()
                && name.get(name.len() - ext.len()..).is_some_and(|tail| tail.eq_ignore_ascii_case(ext))
        }
    }
}

/// Walks `.elowen/rules` recursively and parses every module.
pub fn modules(source: &Source, config: &Config) -> Modules {
    let mut diags = Vec::new();
    let mut files: Vec<RelPath> = Vec::new();
    // A failed managed listing is logged once by every discovery, whatever it then looks up
    // (decision D-MAN-1); the session's sort and dedup fold it with the lookups' own reports.
    if let Err(diag) = source.available() {
        diags.extend(diag);
    } else if rules_dir_walkable(source, config, &mut diags) {
        walk(source, config, &mut files, &mut diags);
    }
    files.sort();
    let platform = source.platform();
    let mut unconditional = Vec::new();
    let mut conditional = Vec::new();
    let mut builder = RulesBuilder::new(platform);
    for path in files {
        let Some(text) = read_text(source, &path, true, config.file_cap, &mut diags) else { continue };
        match frontmatter::parse(&text) {
            Ok(parsed) => match parsed.kind {
                Kind::Unconditional => unconditional.push(Loaded::new(path, parsed.body)),
                Kind::Conditional(globs) => match builder.add(conditional.len(), &globs) {
                    Ok(()) => conditional.push(Loaded::new(path, parsed.body)),
                    Err((code, message)) => diags.push(Diagnostic::new(code, path.as_str(), message)),
                },
            },
            Err(r) => diags.push(Diagnostic::new(r.code, path.as_str(), r.message).with_line(r.line)),
        }
    }
    Modules { unconditional, conditional, rules: builder.build(), diagnostics: diags }
}

/// `.elowen` and `.elowen/rules` must be real directories. A link at either is not walked, and
/// one that leaves the root is reported as an escape (decision D-LINK-3).
fn rules_dir_walkable(source: &Source, config: &Config, diags: &mut Vec<Diagnostic>) -> bool {
    let mut prefix: Option<RelPath> = None;
    for seg in config.rules_dir.segments() {
        let path = match &prefix {
            None => RelPath::parse(seg),
            Some(p) => p.join(seg),
        };
        let Some(path) = path else { return false };
        match source.entry_kind(&path) {
            Some(EntryKind::Dir) => {}
            Some(EntryKind::LinkOutside | EntryKind::LinkRefused) => {
                diags.push(Diagnostic::new(
                    Code::InstructionModuleEscape,
                    path.as_str(),
                    format!("'{path}' is a link out of the project (symlinks out of the project are refused)"),
                ));
                return false;
            }
            _ => return false,
        }
        prefix = Some(path);
    }
    true
}

fn walk(source: &Source, config: &Config, files: &mut Vec<RelPath>, diags: &mut Vec<Diagnostic>) {
    let platform = source.platform();
    let mut stack = vec![config.rules_dir.clone()];
    while let Some(dir) = stack.pop() {
        let entries = match source.list(Some(&dir)) {
            Ok(entries) => entries,
            Err(diag) => {
                diags.extend(diag);
                continue;
            }
        };
        for entry in entries {
            let Some(path) = dir.join(&entry.name) else { continue };
            let is_module = is_module_name(platform, &entry.name, &config.module_extension);
            // Per-entry refusals are reported before Markdown names are filtered.
            match entry.kind {
                EntryKind::Dir => stack.push(path),
                EntryKind::File | EntryKind::LinkInsideFile if is_module => files.push(path),
                EntryKind::LinkOutside | EntryKind::LinkRefused => diags.push(Diagnostic::new(
                    Code::InstructionModuleEscape,
                    path.as_str(),
                    format!("'{path}' is a symlink out of the project (it is not loaded)"),
                )),
                EntryKind::LinkBroken(reason) if is_module => diags.push(Diagnostic::new(
                    Code::FileUnreadable,
                    path.as_str(),
                    format!("'{path}' is a link that does not resolve ({reason})"),
                )),
                EntryKind::Other if is_module => diags.push(Diagnostic::new(
                    Code::FileNotRegular,
                    path.as_str(),
                    format!("'{path}' is not a regular file"),
                )),
                // Directory links inside the rules tree stay unwalked.
                _ => {}
            }
        }
    }
}
