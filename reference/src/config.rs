//! The engine's configuration: names, caps, directories and confinement as data, so that the
//! three profiles are one engine configured three ways rather than constants spread through the
//! code.

use std::sync::OnceLock;
use std::time::Duration;

use crate::relpath::RelPath;

/// The per-file cap of the modules profile: `CONTEXT_FILE_MAX_BYTES`, 256 KiB (seed 000, "Owning
/// code").
pub const CONTEXT_FILE_MAX_BYTES: u64 = 256 * 1024;

/// The root-file profile's cap: 32 KiB (seed 003, "Decision": "capped at 32 KiB"; D-RF-CUT-1).
pub const ROOT_FILE_CAP: u64 = 32 * 1024;

/// How one profile finds, confines and caps instruction files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The instruction file names, in priority order; the first present one wins in a folder.
    /// The default is AGENTS.override.md, AGENTS.md, AGENTS.MD, CLAUDE.md, CLAUDE.MD (seed 000,
    /// "Format and discovery").
    pub names: Vec<String>,
    /// The folder walked recursively for rule modules. The default is `.elowen/rules`.
    pub rules_dir: RelPath,
    /// The folder nested discovery never enters. The default is `.elowen`.
    pub private_dir: RelPath,
    /// The extension of a rule module. The default is `.md`.
    pub module_extension: String,
    /// Files above this many bytes are refused whole. The default is 256 KiB (262,144 bytes).
    pub file_cap: u64,
    /// Whether a session keeps a revalidating discovery cache on a host tree: every trigger
    /// checks each folder's and each file's identity (device, inode, size, modification and
    /// change time) and relists or rereads only what changed, instead of relisting and
    /// rereading the whole tree (seed 000, "Cost and limits"). The uncached walk stays the
    /// definition; the cache gives the same observations. The default is off, unless the
    /// environment variable `REFERENCE_DISCOVERY_CACHE` is `1` (read once per process), which
    /// turns it on for every configuration built afterwards (`REFERENCE_DISCOVERY_CACHE=1
    /// cargo run -p harness --bin conformance -- run` runs the whole corpus through it).
    pub discovery_cache: bool,
    /// How coarse the filesystem's timestamps may be. The cache trusts an unchanged identity
    /// only for an entry whose last modification or change lies more than this before the
    /// check that recorded it: a file written again within the same timestamp tick, with the
    /// same size, would otherwise look unchanged (the "racy" case git handles). The default is
    /// 2 seconds, the modification-time granularity of FAT, the coarsest filesystem a project
    /// is likely to sit on; Linux's native filesystems tick at most every 10 ms. The
    /// environment variable `REFERENCE_TIMESTAMP_GRANULARITY_MS` (read once per process, a
    /// number of milliseconds) sets it for every configuration built afterwards: the corpus's
    /// `aged` mode runs with 10 ms and waits out that window before every step, so that the
    /// cache's trust in an unchanged identity is judged by the corpus too.
    pub timestamp_granularity: Duration,
}

/// The granularity `REFERENCE_TIMESTAMP_GRANULARITY_MS` asks for, else 2 seconds
/// ([`Config::timestamp_granularity`]). A value that is not a number of milliseconds is ignored.
fn granularity_requested() -> Duration {
    static ENV: OnceLock<Duration> = OnceLock::new();
    *ENV.get_or_init(|| {
        std::env::var("REFERENCE_TIMESTAMP_GRANULARITY_MS")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map_or(Duration::from_secs(2), Duration::from_millis)
    })
}

/// Whether `REFERENCE_DISCOVERY_CACHE=1` asks for the discovery cache ([`Config::discovery_cache`]).
fn cache_requested() -> bool {
    static ENV: OnceLock<bool> = OnceLock::new();
    *ENV.get_or_init(|| std::env::var_os("REFERENCE_DISCOVERY_CACHE").is_some_and(|v| v == "1"))
}

impl Config {
    /// The modules profile (seed 000).
    pub fn modules() -> Config {
        Config {
            names: ["AGENTS.override.md", "AGENTS.md", "AGENTS.MD", "CLAUDE.md", "CLAUDE.MD"]
                .map(String::from)
                .to_vec(),
            rules_dir: RelPath::trusted(".elowen/rules"),
            private_dir: RelPath::trusted(".elowen"),
            module_extension: ".md".to_string(),
            file_cap: CONTEXT_FILE_MAX_BYTES,
            discovery_cache: cache_requested(),
            timestamp_granularity: granularity_requested(),
        }
    }
}

impl Config {
    /// The root-file profile (seed 003): AGENTS.md, else agents.md, capped at 32 KiB (cut at a
    /// line, not refused). It has no rule modules; the rules fields are unused.
    pub fn root_file() -> Config {
        Config {
            names: ["AGENTS.md", "agents.md"].map(String::from).to_vec(),
            file_cap: ROOT_FILE_CAP,
            ..Config::modules()
        }
    }
}

impl Default for Config {
    fn default() -> Config {
        Config::modules()
    }
}
