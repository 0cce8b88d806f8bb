//! A session: what a test drives step by step and observes (seed 000, "Triggers and timing" and
//! "Lifetime").
//!
//! - [`Session::start`] reads the root file and the unconditional modules once, as the fixed
//!   startup prefix, and journals it.
//! - [`Session::observe`] queues the path of a tool result that carries a file access, and does
//!   nothing else: "core triggers on that field and never on a tool name".
//! - [`Session::next_request`] drains the queue before the next model request, resolves the batch
//!   against a fresh discovery, drops what the active context already holds, and appends exactly
//!   one record, or none.
//! - [`Session::compact`], [`Session::resume`] and [`Session::fork`] change or restore the
//!   active context through the journal.

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::cache::DiscoveryCache;
use crate::config::Config;
use crate::diag::{Code, Diagnostic};
use crate::discover::{self, Loaded};
use crate::journal::{Identity, Journal, JournalError, Record, StartupFile};
use crate::relpath::RelPath;
use crate::render::{self, Part};
use crate::resolver;
use crate::source::Source;

/// A settled tool result as core sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The tool's name; never consulted for triggering.
    pub tool: String,
    /// `details.fileAccess.path`, present only on a successful, authorized file access.
    pub file_access: Option<String>,
}

/// What the session put in front of the model at spawn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Startup {
    /// The root file, then every unconditional module ordered by path.
    pub files: Vec<StartupFile>,
    /// What discovery refused.
    pub diagnostics: Vec<Diagnostic>,
}

/// One module of an activation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActivatedModule {
    /// The /-form root-relative path.
    pub path: String,
    /// SHA-256 of `content`.
    pub sha256: String,
    /// Whether it supersedes an earlier version in the active context.
    pub supersedes: bool,
    /// The sent content.
    pub content: String,
}

/// The one record an activation appended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Activation {
    /// The modules, in resolver order.
    pub modules: Vec<ActivatedModule>,
    /// The appended text.
    pub rendered: String,
}

/// What happened before one model request.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RequestOutcome {
    /// The appended record, if one was appended.
    pub activation: Option<Activation>,
    /// What the trigger pass refused or logged.
    pub diagnostics: Vec<Diagnostic>,
    /// The persistence latch holds the request back: a durable journal failure tripped it and
    /// the session has not been restored since (seed 000, "Lifetime").
    pub blocked: bool,
    /// The error with which the resolver rejected this request's batch: it escapes the hook, and
    /// the batch is drained, not requeued (seed 000, "Owning code").
    pub escaped: Option<String>,
}

/// How the next journal append fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AppendFailure {
    /// The append fails once: the batch goes back into the queue and the next request retries it
    /// (decision D-LIFE-4).
    Transient,
    /// The journal cannot persist at all: the batch is requeued as for a transient failure, and
    /// the persistence latch trips and blocks every provider request until the session is
    /// restored (decisions D-LATCH-1 to D-LATCH-3).
    Durable,
}

/// Why a local target's startup failed (seed 000, "Local CLI instruction sources"). It is one kind
/// of [`SessionError`], so it lives with it: the local target that produces it depends on the
/// session, never the other way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LocalError {
    /// No Sandbox owner holds the local target: there is no file client to read through.
    OwnerMissing,
    /// The bound connection was lost around the startup reads (`LOCAL_EXECUTION_LOST`).
    ExecutionLost,
}

impl std::fmt::Display for LocalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LocalError::OwnerMissing => f.write_str("the local target has no Sandbox owner (startup fails)"),
            LocalError::ExecutionLost => f.write_str("LOCAL_EXECUTION_LOST around the startup reads (startup fails)"),
        }
    }
}

impl std::error::Error for LocalError {}

/// Why a session could not start, resume or fork.
#[derive(Debug)]
#[non_exhaustive]
pub enum SessionError {
    /// The journal failed.
    Journal(JournalError),
    /// The state directory holds no session to resume.
    NothingToResume,
    /// A local CLI target's startup failed (seed 000, "Local CLI instruction sources").
    Local(LocalError),
}

impl std::fmt::Display for SessionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SessionError::Journal(e) => e.fmt(f),
            SessionError::NothingToResume => {
                f.write_str("the state directory holds no session to resume (start one first)")
            }
            SessionError::Local(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for SessionError {}

impl From<JournalError> for SessionError {
    fn from(e: JournalError) -> Self {
        SessionError::Journal(e)
    }
}

/// The trigger queue: touched paths in first-touch order, each once (decision D-TRIG-2), in
/// constant time per touch however large the batch.
#[derive(Debug, Default)]
struct Queue {
    order: Vec<RelPath>,
    seen: std::collections::HashSet<RelPath>,
}

impl Queue {
    fn push(&mut self, path: RelPath) {
        if self.seen.insert(path.clone()) {
            self.order.push(path);
        }
    }

    fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    fn take(&mut self) -> Vec<RelPath> {
        self.seen.clear();
        std::mem::take(&mut self.order)
    }

    /// Puts a failed batch back in front of what was queued since.
    fn requeue_front(&mut self, batch: Vec<RelPath>) {
        let later = self.take();
        for p in batch.into_iter().chain(later) {
            self.push(p);
        }
    }
}

/// One conversation's instruction state.
#[derive(Debug)]
pub struct Session {
    config: Config,
    source: Source,
    journal: Journal,
    queue: Queue,
    /// The armed fault of the next instruction-record append, if any.
    fail_next_append: Option<AppendFailure>,
    /// The resolver rejects the next batch it resolves (decision D-LATCH-4).
    reject_next_resolution: bool,
    /// The persistence latch: tripped by a durable journal failure, it blocks every provider
    /// request until the session is restored. It lives in memory only, so a resume (a restart of
    /// the same session) starts without it; a fork keeps it (decision D-LATCH-3).
    latched: bool,
    /// The local CLI target's root as placed at spawn, journaled so that a resume retains it
    /// (seed 000, "Local CLI instruction sources").
    target: Option<String>,
    /// The revalidating discovery cache, when the configuration asks for one.
    cache: Option<DiscoveryCache>,
}

fn startup_file(kind: &str, loaded: Loaded) -> StartupFile {
    StartupFile {
        path: loaded.path.as_str().to_string(),
        kind: kind.to_string(),
        sha256: loaded.sha256,
        content: loaded.content,
    }
}

fn new_cache(config: &Config) -> Option<DiscoveryCache> {
    config.discovery_cache.then(DiscoveryCache::new)
}

fn sorted(mut diags: Vec<Diagnostic>) -> Vec<Diagnostic> {
    diags.sort();
    diags.dedup();
    diags
}

impl Session {
    /// Spawns a session: reads the startup prefix and journals it in a new journal.
    pub fn start(config: Config, source: Source, state_dir: &Path) -> Result<(Session, Startup), SessionError> {
        Session::start_at(config, source, state_dir, None)
    }

    fn with(
        config: Config,
        source: Source,
        journal: Journal,
        cache: Option<DiscoveryCache>,
        target: Option<String>,
    ) -> Session {
        Session {
            config,
            source,
            journal,
            queue: Queue::default(),
            fail_next_append: None,
            reject_next_resolution: false,
            latched: false,
            target,
            cache,
        }
    }

    /// Spawns a session whose source is a local CLI target rooted at `target` (journaled with
    /// the startup prefix, so that a resume retains it).
    pub(crate) fn start_at(
        config: Config,
        source: Source,
        state_dir: &Path,
        target: Option<String>,
    ) -> Result<(Session, Startup), SessionError> {
        let mut diags = Vec::new();
        let mut files = Vec::new();
        if let Some(root) = discover::instruction_file(&source, &config, None, &mut diags) {
            files.push(startup_file("root", root));
        }
        let mut cache = new_cache(&config);
        let modules = match &mut cache {
            Some(c) => c.modules(&source, &config),
            // Only the prefix is kept of the walk: a trigger discovers afresh.
            None => Arc::new(discover::modules_keeping(&source, &config, discover::Keep::Unconditional)),
        };
        diags.extend(modules.diagnostics.iter().cloned());
        files.extend(modules.unconditional.iter().cloned().map(|m| startup_file("module", m)));
        let mut journal = Journal::create(state_dir)?;
        journal
            .append(Record::Startup { files: files.clone(), target: target.clone() })
            .map_err(|e| SessionError::Journal(JournalError::Io(e)))?;
        let session = Session::with(config, source, journal, cache, target);
        Ok((session, Startup { files, diagnostics: sorted(diags) }))
    }

    /// Resumes the session journaled in `state_dir` after a restart or respawn: the startup
    /// prefix is retained as stored and loaded modules are restored; the in-memory trigger queue
    /// is gone ("Known limits": a trigger caught before a pause is lost).
    pub fn resume(config: Config, source: Source, state_dir: &Path) -> Result<Session, SessionError> {
        let journal = Journal::open(state_dir)?;
        if journal.startup().is_none() {
            return Err(SessionError::NothingToResume);
        }
        let cache = new_cache(&config);
        let target = journal.target().map(str::to_string);
        Ok(Session::with(config, source, journal, cache, target))
    }

    /// Forks into `state_dir`: the fork keeps the parent's startup prefix and journal, not its
    /// in-memory queue.
    pub fn fork(&self, state_dir: &Path) -> Result<Session, SessionError> {
        let journal = self.journal.fork_into(state_dir)?;
        let mut fork = Session::with(
            self.config.clone(),
            self.source.clone(),
            journal,
            new_cache(&self.config),
            self.target.clone(),
        );
        // A fork is a new session over a copy of the journal, not the restore that releases the
        // latch: it keeps it (decision D-LATCH-3).
        fork.latched = self.latched;
        Ok(fork)
    }

    /// The local CLI target's root placed at spawn and retained by every resume, if the session
    /// has one.
    pub fn target(&self) -> Option<&str> {
        self.target.as_deref()
    }

    /// The retained startup prefix.
    pub fn startup(&self) -> Vec<StartupFile> {
        self.journal.startup().map(<[StartupFile]>::to_vec).unwrap_or_default()
    }

    /// The file source, for edits to an in-memory tree between steps.
    pub fn source_mut(&mut self) -> &mut Source {
        &mut self.source
    }

    /// Takes the source back, for a resume after the session is dropped.
    pub fn into_source(self) -> Source {
        self.source
    }

    /// The observer fed from the tool-result seam: queues the touched path of a result that
    /// carries a file access inside the root. Everything else is ignored without a diagnostic.
    pub fn observe(&mut self, result: &ToolResult) {
        let Some(path) = &result.file_access else { return };
        let Some(rel) = self.source.within(path) else { return };
        self.queue.push(rel);
    }

    /// Makes the next instruction-record append fail, as a full disk would (transient) or a
    /// journal that can no longer persist anything (durable). A request that appends nothing does
    /// not spend it (decision D-LIFE-4).
    pub fn fail_next_append(&mut self, failure: AppendFailure) {
        self.fail_next_append = Some(failure);
    }

    /// Makes the resolver reject the next batch it resolves; a request with an empty queue
    /// resolves nothing and does not spend it (decision D-LATCH-4).
    pub fn reject_next_resolution(&mut self) {
        self.reject_next_resolution = true;
    }

    /// Compaction: the summarized history, and the instruction records in it, leave the active
    /// context, so the next matching trigger loads the module again.
    pub fn compact(&mut self) -> std::io::Result<()> {
        self.journal.append(Record::Compaction)
    }

    /// Resolves one batch against the rule modules as they are now: a fresh discovery, or the
    /// cache's revalidated one.
    fn resolve(&mut self, batch: &[RelPath]) -> (Vec<Loaded>, Vec<Diagnostic>) {
        let (source, config) = (&self.source, &self.config);
        match &mut self.cache {
            Some(cache) => {
                let modules = cache.modules(source, config);
                let mut diags = modules.diagnostics.clone();
                let resolved = cache.for_paths(source, config, &modules, batch, &mut diags);
                (resolved, diags)
            }
            None => {
                // Only what this batch activates is kept of the fresh discovery.
                let modules = discover::modules_keeping(source, config, discover::Keep::Matching(batch));
                let mut diags = modules.diagnostics.clone();
                let resolved = resolver::for_paths(source, config, &modules, batch, &mut diags);
                (resolved, diags)
            }
        }
    }

    /// Drains the queue before the next model request (`context_with_system`).
    pub fn next_request(&mut self) -> RequestOutcome {
        if self.latched {
            // The latch blocks the provider request before it is composed: nothing is drained,
            // discovered or appended (decision D-LATCH-2).
            return RequestOutcome { blocked: true, ..RequestOutcome::default() };
        }
        if self.queue.is_empty() {
            return RequestOutcome::default();
        }
        let batch = self.queue.take();
        if std::mem::take(&mut self.reject_next_resolution) {
            // The batch is drained and the rejection escapes the hook; only a failed append
            // requeues (seed 000, "Owning code"; decision D-LATCH-4).
            let shown: Vec<&str> = batch.iter().take(10).map(RelPath::as_str).collect();
            return RequestOutcome {
                escaped: Some(format!("the instruction resolver rejected the batch {}", shown.join(", "))),
                ..RequestOutcome::default()
            };
        }
        let (resolved, mut diags) = self.resolve(&batch);
        let active = self.journal.active();
        let chosen: Vec<(Loaded, bool)> = resolved
            .into_iter()
            .filter_map(|m| match active.get(m.path.as_str()) {
                Some(hash) if *hash == m.sha256 => None,
                Some(_) => Some((m, true)),
                None => Some((m, false)),
            })
            .collect();
        if chosen.is_empty() {
            return RequestOutcome { diagnostics: sorted(diags), ..RequestOutcome::default() };
        }
        let root = self.source.root_display();
        let platform = self.source.platform();
        let sources: Vec<String> = chosen.iter().map(|(m, _)| platform.display_join(&root, &m.path)).collect();
        let parts: Vec<Part<'_>> = chosen
            .iter()
            .zip(&sources)
            .map(|((m, sup), src)| Part { source_path: src, content: &m.content, supersedes: *sup })
            .collect();
        let rendered = render::render(&parts);
        let instructions: Vec<Identity> = chosen
            .iter()
            .map(|(m, sup)| Identity {
                rel_path: m.path.as_str().to_string(),
                sha256: m.sha256.clone(),
                supersedes: *sup,
            })
            .collect();
        let record = Record::Instructions { instructions, rendered: rendered.clone() };
        let failure = self.fail_next_append.take();
        let appended = match failure {
            Some(AppendFailure::Transient) => Err(std::io::Error::other("journal append failed")),
            Some(AppendFailure::Durable) => Err(std::io::Error::other("the journal cannot persist (durable failure)")),
            None => self.journal.append(record),
        };
        if let Err(e) = appended {
            // A durable failure trips the persistence latch: this request and every later one is
            // blocked until the session is restored (decisions D-LATCH-1, D-LATCH-2).
            let latch = failure == Some(AppendFailure::Durable);
            // Nothing counts as loaded unless the append succeeded: the batch goes back to the
            // front of the queue and retries at the next context boundary.
            let shown: Vec<&str> = batch.iter().take(10).map(RelPath::as_str).collect();
            let more = batch.len().saturating_sub(shown.len());
            let more = if more > 0 { format!(" and {more} more") } else { String::new() };
            diags.push(Diagnostic::new(
                Code::InstructionActivationFailed,
                "",
                format!("instruction activation append failed ({e}); requeued {}{more}", shown.join(", ")),
            ));
            self.queue.requeue_front(batch);
            self.latched = latch;
            return RequestOutcome { diagnostics: sorted(diags), blocked: latch, ..RequestOutcome::default() };
        }
        let modules = chosen
            .into_iter()
            .map(|(m, supersedes)| ActivatedModule {
                path: m.path.as_str().to_string(),
                sha256: m.sha256,
                supersedes,
                content: m.content.to_string(),
            })
            .collect();
        RequestOutcome {
            activation: Some(Activation { modules, rendered }),
            diagnostics: sorted(diags),
            ..RequestOutcome::default()
        }
    }
}
