//! The engine's configuration: names, caps, directories and confinement as data, so that the
//! three profiles are one engine configured three ways rather than constants spread through the
//! code.

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
