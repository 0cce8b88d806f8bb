//! The section profile (seed 002, "@alvin0/ai-agent-sdk-instructions-node"): project
//! instructions as one context section that the turn loop re-resolves before every model round.
//!
//! Discovery: the global file, then the candidates of every folder from the project root (the
//! first folder at or above the working directory that holds a root marker) down to the working
//! directory, then the folders of subtrees a committed tool call reached into, which stay in
//! scope for the rest of that conversation. The section is rewritten only when its text changes.
//! Everything the seed leaves open is decided in spec-cases/DECISIONS.md (D-SEC-*).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::diag::{Code, Diagnostic};
use crate::frontmatter::strip_bom;
use crate::hash::sha256_hex;
use crate::relpath::{Platform, RelPath};
use crate::source::{HostSource, ReadOutcome, Source};

/// The default intro paragraph (D-SEC-RENDER-1).
pub const DEFAULT_INTRO: &str = "Project instructions from the AGENTS.md files of this workspace follow, \
broadest first. A more specific file refines a broader one; follow them where they apply.";

/// The default retraction text (D-SEC-RENDER-3).
pub const DEFAULT_RETRACTION: &str =
    "The project instructions shown earlier no longer apply: none of their files is in scope now.";

/// `perDirectory`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PerDirectory {
    /// The first present candidate of a folder. The default.
    #[default]
    First,
    /// Every present candidate.
    All,
}

/// The section's options, each with the seed table's default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionOptions {
    /// The session working directory (absolute). The default is the case's root.
    pub cwd: Option<String>,
    /// An absolute path read before any project file. There is no default.
    pub global_file: Option<String>,
    /// Entries that stop the upward walk. The default is `[".git"]`.
    pub project_root_markers: Vec<String>,
    /// Same-directory candidates, in precedence order. The default is AGENTS.override.md,
    /// AGENTS.md.
    pub file_names: Vec<String>,
    /// `first` (the default) or `all` present candidates per directory.
    pub per_directory: PerDirectory,
    /// Total UTF-8 ceiling of the rendered section. The default is 65536.
    pub max_bytes: u64,
    /// Per-file UTF-8 ceiling. The default is `max_bytes`.
    pub max_file_bytes: Option<u64>,
    /// Scan subtrees a tool call reaches into. The default is true.
    pub nested: bool,
    /// Most subtree directories kept in scope at once. The default is 256.
    pub max_nested_dirs: usize,
    /// Conversations whose subtrees this instance remembers. The default is 64.
    pub max_tracked_scopes: usize,
    /// The paragraph placed above the files. The default is [`DEFAULT_INTRO`].
    pub intro: String,
    /// Written when every file leaves scope. The default is [`DEFAULT_RETRACTION`].
    pub retraction_text: String,
}

impl Default for SectionOptions {
    fn default() -> Self {
        SectionOptions {
            cwd: None,
            global_file: None,
            project_root_markers: vec![".git".into()],
            file_names: vec!["AGENTS.override.md".into(), "AGENTS.md".into()],
            per_directory: PerDirectory::First,
            max_bytes: 65536,
            max_file_bytes: None,
            nested: true,
            max_nested_dirs: 256,
            max_tracked_scopes: 64,
            intro: DEFAULT_INTRO.into(),
            retraction_text: DEFAULT_RETRACTION.into(),
        }
    }
}

/// What one model round observed of the section.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SectionRound {
    /// The section's text ("" when it has never had a file).
    pub text: String,
    /// Whether the node on the model surface was rewritten this round.
    pub rewritten: bool,
    /// The files rendered, in order, as their headers name them.
    pub files: Vec<String>,
    /// The files that did not fit, as the closing line names them.
    pub omitted: Vec<String>,
}

/// One conversation's remembered state.
#[derive(Debug, Clone, Default)]
struct Scope {
    /// Subtree folders in scope (root-relative), in the order they joined.
    dirs: Vec<RelPath>,
    limit_fired: bool,
    /// The revision (hash of the text) last written, if any.
    revision: Option<String>,
    /// Whether a round ever rendered a file.
    had_files: bool,
}

/// A committed tool call, as the turn loop hands it to the section with the next round.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Call {
    /// The call failed (errored or was refused): it contributes no path.
    pub failed: bool,
    /// The call's arguments; `filePathFromTouch` reads `file_path`, `path` or `filePath`.
    pub args: serde_json::Map<String, serde_json::Value>,
}

/// A mounted section: one instance shared by every conversation of a definition.
#[derive(Debug)]
pub struct Section {
    options: SectionOptions,
    source: Source,
    /// The working directory relative to the root (`None`: it is the root).
    cwd_rel: Option<RelPath>,
    cwd: PathBuf,
    /// Every bucket, the unscoped one (`None`) among them: seed 002 calls it "one unscoped
    /// bucket", and buckets are bounded by maxTrackedScopes (D-SEC-SCOPE-3).
    scopes: HashMap<Option<String>, Scope>,
    /// Bucket keys, least recently used first.
    lru: Vec<Option<String>>,
}

/// The project root: the first folder at or above `cwd` that holds a root marker; `cwd` itself
/// when none does (D-SEC-ROOT-1). The walk never passes the root it finds.
pub fn project_root(cwd: &Path, markers: &[String]) -> PathBuf {
    cwd.ancestors()
        .find(|dir| markers.iter().any(|m| std::fs::symlink_metadata(dir.join(m)).is_ok()))
        .unwrap_or(cwd)
        .to_path_buf()
}

impl Section {
    /// Mounts a section for the working directory in `options` (else `default_cwd`).
    pub fn new(options: SectionOptions, default_cwd: &Path) -> Result<Section, String> {
        let cwd = options.cwd.as_ref().map_or_else(|| default_cwd.to_path_buf(), PathBuf::from);
        let cwd =
            std::fs::canonicalize(&cwd).map_err(|e| format!("cwd '{}' cannot be resolved: {e}", cwd.display()))?;
        let root = project_root(&cwd, &options.project_root_markers);
        let source = Source::Host(HostSource::new(&root).map_err(|e| format!("root '{}': {e}", root.display()))?);
        let cwd_rel = Platform::Posix.within(&root.to_string_lossy(), &cwd.to_string_lossy());
        Ok(Section { options, source, cwd_rel, cwd, scopes: HashMap::new(), lru: Vec::new() })
    }

    /// The bucket of `key`, marked most recently used; the least recently used bucket beyond
    /// maxTrackedScopes is dropped whole.
    fn scope(&mut self, key: Option<&str>) -> &mut Scope {
        let key = key.map(str::to_string);
        self.lru.retain(|k| *k != key);
        self.lru.push(key.clone());
        while self.lru.len() > self.options.max_tracked_scopes.max(1) {
            let evicted = self.lru.remove(0);
            self.scopes.remove(&evicted);
        }
        self.scopes.entry(key).or_default()
    }

    /// One model round of the conversation `scope`: the tool calls committed in it since its last
    /// round join the scope, then every folder in scope is re-probed and the section rendered.
    /// The section sees a call only here, with the round (seed 002: "a callback the turn loop
    /// re-runs before every model round"), so whatever a call causes is observed at this round.
    pub fn round(&mut self, scope: Option<&str>, calls: &[Call]) -> (SectionRound, Vec<Diagnostic>) {
        let mut diags = Vec::new();
        for call in calls {
            diags.extend(self.observe(scope, call.failed, &call.args));
        }
        let (round, more) = self.resolve(scope);
        diags.extend(more);
        (round, diags)
    }

    /// A settled tool call. A failed call, or one whose arguments carry a skill id, contributes
    /// nothing; otherwise the path its arguments name (`file_path`, `path`, `filePath`, the first
    /// present) brings the folders between the working directory and the file into scope.
    fn observe(
        &mut self,
        scope: Option<&str>,
        failed: bool,
        args: &serde_json::Map<String, serde_json::Value>,
    ) -> Vec<Diagnostic> {
        if failed || !self.options.nested || args.contains_key("skillId") {
            return Vec::new();
        }
        let Some(path) = ["file_path", "path", "filePath"].iter().find_map(|k| args.get(*k).and_then(|v| v.as_str()))
        else {
            return Vec::new();
        };
        let Some(below_cwd) = Platform::Posix.within(&self.cwd.to_string_lossy(), path) else { return Vec::new() };
        let folders: Vec<RelPath> = below_cwd
            .ancestor_folders()
            .into_iter()
            .filter_map(|f| match &self.cwd_rel {
                Some(c) => RelPath::from_segments(c.segments().chain(f.segments())),
                None => Some(f),
            })
            .collect();
        let max = self.options.max_nested_dirs;
        let state = self.scope(scope);
        let mut diags = Vec::new();
        for folder in folders {
            if state.dirs.contains(&folder) {
                continue;
            }
            if state.dirs.len() >= max {
                // The directories already in scope win; the limit is reported once.
                if !state.limit_fired {
                    state.limit_fired = true;
                    diags.push(Diagnostic::new(
                        Code::SectionNestedLimit,
                        folder.as_str(),
                        format!("'{folder}' did not join the scope: {max} subtree directories are in scope already"),
                    ));
                }
                continue;
            }
            state.dirs.push(folder);
        }
        diags
    }

    /// The folders scanned for a scope, broad to specific: the root, each folder down to the
    /// working directory, then the subtree folders by depth and path.
    fn folders(&self, dirs: &[RelPath]) -> Vec<Option<RelPath>> {
        let mut out: Vec<Option<RelPath>> = vec![None];
        if let Some(c) = &self.cwd_rel {
            out.extend(c.ancestor_folders().into_iter().map(Some));
            out.push(Some(c.clone()));
        }
        let mut subtree: Vec<&RelPath> = dirs.iter().collect();
        subtree.sort_by(|a, b| a.depth().cmp(&b.depth()).then_with(|| a.cmp(b)));
        out.extend(subtree.into_iter().cloned().map(Some));
        out
    }

    /// Re-probes every folder in scope before a model round and renders the section.
    fn resolve(&mut self, scope: Option<&str>) -> (SectionRound, Vec<Diagnostic>) {
        let dirs = self.scope(scope).dirs.clone();
        let mut diags = Vec::new();
        let max_bytes = self.options.max_bytes;
        let file_cap = self.options.max_file_bytes.unwrap_or(max_bytes).min(max_bytes);
        // Candidates in order: (header, content or None when it cannot fit).
        let mut candidates: Vec<(String, Option<String>)> = Vec::new();
        if let Some(global) = &self.options.global_file {
            match read_global(Path::new(global), file_cap) {
                GlobalRead::Text(t) => candidates.push((global.clone(), Some(t))),
                GlobalRead::TooBig => candidates.push((global.clone(), None)),
                GlobalRead::Absent => {}
            }
        }
        for folder in self.folders(&dirs) {
            // What a folder's lookup reports (an unlistable folder, D-DIAG-2) is the round's too;
            // with `all`, one listing answers every name, so it is reported once.
            let (names, found): (Vec<String>, Option<Diagnostic>) = match self.options.per_directory {
                PerDirectory::First => {
                    let (path, d) = self.source.find_first(folder.as_ref(), &self.options.file_names);
                    (path.into_iter().map(|p| p.to_string()).collect(), d)
                }
                PerDirectory::All => {
                    let mut first = None;
                    let names = self
                        .options
                        .file_names
                        .iter()
                        .filter_map(|n| {
                            let (path, d) = self.source.find_first(folder.as_ref(), std::slice::from_ref(n));
                            first.get_or_insert(d);
                            path
                        })
                        .map(|p| p.to_string())
                        .collect();
                    (names, first.flatten())
                }
            };
            diags.extend(found);
            for name in names {
                let Some(path) = RelPath::parse(&name) else { continue };
                match self.source.read(&path, true, file_cap) {
                    ReadOutcome::Bytes(bytes) => match String::from_utf8(bytes) {
                        Ok(text) => candidates.push((name, Some(strip_bom(&text).to_string()))),
                        Err(e) => diags.push(Diagnostic::new(
                            Code::FileNotUtf8,
                            name.as_str(),
                            format!(
                                "'{name}' is not valid utf-8 (first invalid byte at offset {})",
                                e.utf8_error().valid_up_to()
                            ),
                        )),
                    },
                    // Too big for the section: named in the closing line, never read.
                    ReadOutcome::Refused(Code::ContextFileOversized, _) => candidates.push((name, None)),
                    ReadOutcome::Refused(code, message) => diags.push(Diagnostic::new(code, name.as_str(), message)),
                    ReadOutcome::Absent => {}
                }
            }
        }
        // Identical trimmed content collapses to its first occurrence.
        let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
        candidates.retain(|(_, content)| match content {
            Some(c) => {
                let key = sha256_hex(c.trim().as_bytes());
                seen.insert(key)
            }
            None => true,
        });
        let (text, files, omitted) = fit(&self.options.intro, candidates, max_bytes);
        let retraction = self.options.retraction_text.clone();
        let state = self.scope(scope);
        let text = if files.is_empty() && omitted.is_empty() {
            if state.had_files {
                retraction
            } else {
                String::new()
            }
        } else {
            state.had_files = true;
            text
        };
        let revision = (!text.is_empty()).then(|| sha256_hex(text.as_bytes()));
        let rewritten = revision.is_some() && revision != state.revision;
        if revision.is_some() {
            state.revision = revision;
        }
        (SectionRound { text, rewritten, files, omitted }, diags)
    }
}

/// Lays out the section under `max_bytes`, which bounds the whole rendered text: the intro, every
/// admitted block and the closing line (seed 002: "Total UTF-8 ceiling for the rendered section";
/// D-SEC-BUDGET-4). Files are admitted whole and greedily in order; while the closing line for the
/// files left out would push the section over the ceiling, the last admitted file joins them.
/// A file that does not fit is always named, so when even the intro and the closing line exceed
/// the ceiling, the section is those two.
fn fit(intro: &str, candidates: Vec<(String, Option<String>)>, max_bytes: u64) -> (String, Vec<String>, Vec<String>) {
    let blocks: Vec<(String, Option<String>)> = candidates
        .into_iter()
        .map(|(header, content)| {
            // The content loses its own final newline (D-SEC-RENDER-1), never the blank line
            // after the header: an empty file still renders as its header and a blank line
            // (D-SEC-DIR-4).
            let block = content.map(|c| {
                let c = c.strip_suffix('\n').unwrap_or(&c);
                format!("\n\nInstructions from: {header}\n\n{c}")
            });
            (header, block)
        })
        .collect();
    let mut admitted = vec![false; blocks.len()];
    let mut used = intro.len() as u64;
    for (i, (_, block)) in blocks.iter().enumerate() {
        if let Some(b) = block {
            if used + b.len() as u64 <= max_bytes {
                used += b.len() as u64;
                if let Some(slot) = admitted.get_mut(i) {
                    *slot = true;
                }
            }
        }
    }
    loop {
        let omitted: Vec<&str> =
            blocks.iter().zip(&admitted).filter(|(_, a)| !**a).map(|((h, _), _)| h.as_str()).collect();
        let closing = closing_line(&omitted, max_bytes);
        if used + closing.len() as u64 <= max_bytes {
            break;
        }
        let Some(last) = admitted.iter().rposition(|a| *a) else { break };
        if let (Some(slot), Some((_, Some(b)))) = (admitted.get_mut(last), blocks.get(last)) {
            *slot = false;
            used -= b.len() as u64;
        }
    }
    let mut text = intro.to_string();
    let mut files = Vec::new();
    let mut omitted = Vec::new();
    for ((header, block), a) in blocks.into_iter().zip(admitted) {
        match block {
            Some(b) if a => {
                text.push_str(&b);
                files.push(header);
            }
            _ => omitted.push(header),
        }
    }
    let names: Vec<&str> = omitted.iter().map(String::as_str).collect();
    text.push_str(&closing_line(&names, max_bytes));
    (text, files, omitted)
}

/// The closing line naming the files that did not fit, with its separator; empty when every file
/// fits (D-SEC-BUDGET-2).
fn closing_line(omitted: &[&str], max_bytes: u64) -> String {
    if omitted.is_empty() {
        return String::new();
    }
    format!("\n\nNot included, over the {max_bytes}-byte budget: {}", omitted.join(", "))
}

enum GlobalRead {
    Text(String),
    TooBig,
    Absent,
}

/// The global file is the host's own choice, read as configured (links followed), under the
/// per-file cap.
fn read_global(path: &Path, cap: u64) -> GlobalRead {
    let Some(parent) = path.parent() else { return GlobalRead::Absent };
    let Some(name) = path.file_name().and_then(|n| n.to_str()).and_then(RelPath::parse) else {
        return GlobalRead::Absent;
    };
    let Ok(host) = HostSource::new(parent) else { return GlobalRead::Absent };
    match Source::Host(host).read(&name, false, cap) {
        ReadOutcome::Bytes(b) => {
            String::from_utf8(b).map_or(GlobalRead::Absent, |t| GlobalRead::Text(strip_bom(&t).to_string()))
        }
        ReadOutcome::Refused(Code::ContextFileOversized, _) => GlobalRead::TooBig,
        _ => GlobalRead::Absent,
    }
}
