//! The root-file profile (seed 003, "ADR 0036: A repository's AGENTS.md joins the system
//! prompt"): the root's AGENTS.md, else agents.md, read once at session start as a regular file
//! inside the root after links, only when a credential denylist passes both its name and its
//! target's; redacted like a tool result; capped at 32 KiB, cut at a line, with a line saying the
//! file goes on; rendered under a heading that says these are the maintainers' instructions.
//!
//! The denylist, the redaction rules, the heading and the continuation line are this project's
//! decisions (spec-cases/DECISIONS.md, D-RF-*).

use std::sync::OnceLock;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use regex::Regex;

use crate::config::Config;
use crate::diag::{Code, Diagnostic};
use crate::frontmatter::strip_bom;
use crate::hash::sha256_hex;
use crate::relpath::RelPath;
use crate::source::{ReadOutcome, Source};

pub use crate::config::ROOT_FILE_CAP;

/// The heading of the rendered section (D-RF-RENDER-1).
pub const HEADING: &str = "# Maintainers' instructions";

/// The sentence under the heading (D-RF-RENDER-1).
pub const PREAMBLE: &str = "These are the instructions of this repository's maintainers, from its root AGENTS.md. \
Follow them where they apply; where they and the request differ, follow the request.";

/// Names (case-insensitive, matched against a file name) that a credential may hide behind
/// (D-RF-DENY-1). A path with a folder named like `.ssh`, `.aws`, `.gnupg` or `.docker` is
/// denied too.
pub const DENIED_NAMES: &[&str] = &[
    ".env",
    ".env.*",
    "*.env",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.kdbx",
    "*.keystore",
    "id_rsa",
    "id_rsa.*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    "credentials",
    "credentials.*",
    ".htpasswd",
    "*.tfvars",
];

/// Folder names below which everything is denied (D-RF-DENY-1).
pub const DENIED_FOLDERS: &[&str] = &[".ssh", ".aws", ".gnupg", ".docker", ".kube"];

fn denylist() -> &'static GlobSet {
    static SET: OnceLock<GlobSet> = OnceLock::new();
    SET.get_or_init(|| {
        let mut b = GlobSetBuilder::new();
        for name in DENIED_NAMES {
            if let Ok(g) = GlobBuilder::new(name).case_insensitive(true).literal_separator(true).build() {
                b.add(g);
            }
        }
        b.build().unwrap_or_else(|_| GlobSet::empty())
    })
}

/// Whether `path` (root-relative) is a name or lies in a folder the denylist refuses.
pub fn denied(path: &RelPath) -> bool {
    let folder_denied = path.segments().any(|seg| DENIED_FOLDERS.iter().any(|d| d.eq_ignore_ascii_case(seg)));
    folder_denied || denylist().is_match(path.file_name())
}

/// One redaction rule: what it finds, and what stands in its place.
struct Rule {
    pattern: Regex,
    replacement: &'static str,
}

/// How many redaction rules there are; a test checks that every one compiles.
const RULE_COUNT: usize = 7;

/// The redaction rules (D-RF-REDACT-1), in the order they apply.
fn rules() -> &'static [Rule] {
    static RULES: OnceLock<Vec<Rule>> = OnceLock::new();
    RULES.get_or_init(|| {
        let specs: [(&str, &str); RULE_COUNT] = [
            (
                r"(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?-----END [A-Z0-9 ]*PRIVATE KEY-----",
                "[REDACTED PRIVATE KEY]",
            ),
            // A block with no end line (the cut fell inside it, or the file breaks off) is
            // redacted to the end of the text: half a key is still a key (D-RF-REDACT-3).
            (r"(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*\z", "[REDACTED PRIVATE KEY]\n"),
            (r"\bAKIA[0-9A-Z]{16}\b", "[REDACTED]"),
            (r"\bgh[pousr]_[A-Za-z0-9]{36,}\b", "[REDACTED]"),
            (r"\bsk-[A-Za-z0-9_-]{20,}", "[REDACTED]"),
            (r"\bxox[abprs]-[A-Za-z0-9-]{10,}", "[REDACTED]"),
            // The NAME is matched whatever its case: `password=x` is as much a credential as
            // `PASSWORD=x` (D-RF-REDACT-3). The value is the rest of the line, spaces and quotes
            // included (`PASSWORD="a b"`): taking its first word would leak its tail
            // (D-RF-REDACT-4). Nothing here crosses a line end, and a CRLF's CR is kept.
            (
                r"(?m)^([ \t]*(?:export[ \t]+)?(?i:[A-Z0-9_]*(?:PASSWORD|SECRET|TOKEN|API_KEY)[A-Z0-9_]*)[ \t]*=[ \t]*)[^\r\n]+",
                "${1}[REDACTED]",
            ),
        ];
        specs.iter().filter_map(|(p, r)| Regex::new(p).ok().map(|pattern| Rule { pattern, replacement: r })).collect()
    })
}

/// Redacts `text` like a tool result.
pub fn redact(text: &str) -> String {
    let mut out = text.to_string();
    for rule in rules() {
        out = rule.pattern.replace_all(&out, rule.replacement).into_owned();
    }
    out
}

/// The line that follows a cut file (D-RF-CUT-2).
pub fn continuation_line(path: &RelPath, cap: u64) -> String {
    format!("[{path} goes on beyond {} KiB; read the rest with fs-read]", cap / 1024)
}

/// The profile's outcome at session start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootFile {
    /// The file read, with the sent content (cut and redacted) and its hash.
    pub file: Option<(RelPath, String, String)>,
    /// The rendered section; empty when there is no file.
    pub section: String,
    /// What was refused.
    pub diagnostics: Vec<Diagnostic>,
}

/// Reads and renders the root file (seed 003, "Decision").
pub fn root_file(source: &Source, config: &Config) -> RootFile {
    let mut diagnostics = Vec::new();
    let (found, diag) = source.find_first(None, &config.names);
    diagnostics.extend(diag);
    let none = |diagnostics| RootFile { file: None, section: String::new(), diagnostics };
    let Some(path) = found else { return none(diagnostics) };
    // Only a regular file inside the root after links are followed, and only when the denylist
    // passes both the name and the target's name: a link to a key elsewhere reads as no file.
    // The target is judged as the read resolves it, just before that very file is opened, so a
    // link swapped between a check and the open cannot slip a key past the denylist.
    let refusal = |d: &RelPath| {
        (Code::RootFileDenied, format!("'{path}' is refused by the credential denylist (it resolves to '{d}')"))
    };
    if denied(&path) {
        let (code, message) = refusal(&path);
        diagnostics.push(Diagnostic::new(code, path.as_str(), message));
        return none(diagnostics);
    }
    let check = |target: &RelPath| denied(target).then(|| refusal(target));
    let bytes = match source.read_head_checked(&path, config.file_cap, &check) {
        ReadOutcome::Bytes(b) => b,
        ReadOutcome::Absent => return none(diagnostics),
        ReadOutcome::Refused(code, message) => {
            diagnostics.push(Diagnostic::new(code, path.as_str(), message));
            return none(diagnostics);
        }
    };
    let cut = bytes.len() as u64 > config.file_cap;
    let kept: &[u8] = if cut {
        // Cut at a line: the longest run of whole lines within the cap.
        let head = bytes.get(..usize::try_from(config.file_cap).unwrap_or(usize::MAX)).unwrap_or(&bytes);
        head.iter().rposition(|&b| b == b'\n').map_or(&[][..], |i| head.get(..=i).unwrap_or(&[]))
    } else {
        &bytes
    };
    let text = match std::str::from_utf8(kept) {
        Ok(t) => t,
        Err(e) => {
            diagnostics.push(Diagnostic::new(
                Code::FileNotUtf8,
                path.as_str(),
                format!("'{path}' is not valid utf-8 (first invalid byte at offset {})", e.valid_up_to()),
            ));
            return none(diagnostics);
        }
    };
    let mut content = redact(strip_bom(text));
    if cut {
        content.push_str(&continuation_line(&path, config.file_cap));
        content.push('\n');
    }
    // An empty file gives what no file gives: "" (seed 003's primitive cannot tell them apart),
    // so the heading never stands over nothing (D-RF-RENDER-2).
    let section =
        if content.trim().is_empty() { String::new() } else { format!("{HEADING}\n\n{PREAMBLE}\n\n{content}") };
    let sha = sha256_hex(content.as_bytes());
    RootFile { file: Some((path, content, sha)), section, diagnostics }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case(".env", true)]
    #[case("config/.env.local", true)]
    #[case("keys/server.PEM", true)]
    #[case("home/.ssh/config", true)]
    #[case("id_ed25519.pub", true)]
    #[case("AGENTS.md", false)]
    #[case("docs/agents.md", false)]
    #[case("environment.md", false)]
    fn denylist_names(#[case] path: &str, #[case] want: bool) {
        assert_eq!(denied(&RelPath::parse(path).unwrap()), want, "{path}");
    }

    #[test]
    fn every_redaction_rule_compiles() {
        assert_eq!(rules().len(), RULE_COUNT);
    }

    #[rstest]
    #[case("key AKIAABCDEFGHIJKLMNOP here", "key [REDACTED] here")]
    #[case("DB_PASSWORD=hunter22\nok\n", "DB_PASSWORD=[REDACTED]\nok\n")]
    #[case("password=hunter2\nDb_Password=x\n", "password=[REDACTED]\nDb_Password=[REDACTED]\n")]
    #[case("export github_token=abc123\n", "export github_token=[REDACTED]\n")]
    #[case("export GITHUB_TOKEN = abc123\n", "export GITHUB_TOKEN = [REDACTED]\n")]
    #[case("-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----\n", "[REDACTED PRIVATE KEY]\n")]
    #[case("use sk-abcdefghijklmnopqrstuvwx now", "use [REDACTED] now")]
    #[case("the token is in the vault", "the token is in the vault")]
    #[case("a\n-----BEGIN PRIVATE KEY-----\nMIIE\nabc", "a\n[REDACTED PRIVATE KEY]\n")]
    #[case("DB_PASSWORD=\"a b\"\nok\n", "DB_PASSWORD=[REDACTED]\nok\n")]
    #[case("SECRET = two words\r\nok\r\n", "SECRET = [REDACTED]\r\nok\r\n")]
    #[case("PASSWORD=\nnext line\n", "PASSWORD=\nnext line\n")]
    fn redaction(#[case] text: &str, #[case] want: &str) {
        assert_eq!(redact(text), want);
    }
}
