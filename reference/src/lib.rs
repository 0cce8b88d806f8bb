//! The reference resolver for project instruction files: the definition the conformance suite
//! measures every other implementation against.
//!
//! It implements "Project instruction modules" (`shared/seeds/000_b0d8dbd604886449.txt`) and
//! records every place the seed is silent in `spec-cases/DECISIONS.md`. The API is a
//! [`Session`] that a test drives step by step and observes; it never knows it is under test.
//!
//! ```
//! use reference::{Config, HostSource, Session, Source, ToolResult};
//! let dir = tempfile::tempdir().unwrap();
//! let root = dir.path().join("repo");
//! std::fs::create_dir_all(root.join(".elowen/rules")).unwrap();
//! std::fs::write(root.join("AGENTS.md"), "# Root\n").unwrap();
//! std::fs::write(root.join(".elowen/rules/api.md"), "---\npaths: [\"src/**/*.ts\"]\n---\nAPI\n").unwrap();
//! let source = Source::Host(HostSource::new(&root).unwrap());
//! let (mut session, startup) = Session::start(Config::modules(), source, &dir.path().join("state")).unwrap();
//! assert_eq!(startup.files[0].path, "AGENTS.md");
//! session.observe(&ToolResult { tool: "read".into(), file_access: Some("src/a.ts".into()) });
//! let out = session.next_request();
//! assert_eq!(out.activation.unwrap().modules[0].path, ".elowen/rules/api.md");
//! ```
//!
//! # Confinement
//! A [`HostSource`] lists and reads below its root through directory handles, never path
//! strings: with `openat2(RESOLVE_BENEATH)` where the kernel offers it, else with its own walk, one
//! component at a time from the held root ([`Confinement`]). Both give the same answers; to prove
//! it, a test can force the walk for the sources it opens with [`force_confinement_fallback`], or
//! for a whole run with the environment variable `REFERENCE_CONFINEMENT=fallback`:
//!
//! ```sh
//! REFERENCE_CONFINEMENT=fallback cargo test -p harness --test scenarios
//! ```
//!
//! # Platform behavior
//! The host source needs a POSIX system (it is built on rustix); file-client trees
//! ([`MemSource`]) are plain data and model Windows targets on any system.

#[cfg(not(unix))]
compile_error!(
    "the reference's host source confines reads through POSIX directory handles (rustix): build it on a POSIX system"
);

mod cache;
mod config;
mod confine;
mod diag;
mod discover;
mod eligibility;
pub mod frontmatter;
pub mod glob;
mod hash;
mod journal;
mod local;
mod placement;
mod platform;
pub mod prompt;
mod relpath;
mod render;
mod resolver;
pub mod rootfile;
pub mod section;
mod session;
mod source;
mod state;
mod winpath;
pub mod yaml;

pub use config::{Config, CONTEXT_FILE_MAX_BYTES};
pub use confine::{force_confinement_fallback, Confinement};
pub use diag::{Code, Diagnostic, Level};
pub use discover::{instruction_file, modules, Loaded, Modules};
pub use eligibility::{instruction_scope, Account, Conversation, Kind, Refusal, Role, Scope, Spawn, CRON_ROOT_PREFIX};
pub use hash::sha256_hex;
pub use journal::{Identity, Journal, JournalError, Record, StartupFile, JOURNAL_FILE, JOURNAL_MAX_LINE_BYTES};
pub use local::LocalTarget;
pub use placement::{admitted_root, place_root, Placement};
pub use relpath::{Platform, RelPath};
pub use render::{render, Part};
pub use resolver::{for_paths, nested_folders};
pub use section::Call;
pub use session::{
    ActivatedModule, Activation, AppendFailure, LocalError, RequestOutcome, Session, SessionError, Startup, ToolResult,
};
pub use source::{
    Entry, EntryKind, Environment, HostSource, MemSource, MemTree, Node, ReadOutcome, Source, TargetCheck,
    ROOT_LISTING_LIMIT,
};
pub use state::StateDir;
