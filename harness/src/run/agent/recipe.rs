//! An agent CLI's recipe: what varies by product, as data a user can add without code — the npm
//! package and its pinned version, how to start the CLI (arguments, environment, files in its
//! fresh HOME), the wire API it speaks, each tool's name and argument shape, and its file-name
//! dialect. The built-in recipes are `harness/agents/*.toml`; `--agent FILE.toml` reads another.
//!
//! One loader reads them ([`Recipe::parse`]) and every error names the file, the line and the
//! field (`claude-code.toml:12: unknown field 'arg'`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::api::Api;

/// The recipes built into the binary: `harness/agents/*.toml`.
static BUILTIN: include_dir::Dir<'_> = include_dir::include_dir!("$CARGO_MANIFEST_DIR/agents");

/// An agent CLI's recipe.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recipe {
    /// The agent's name, as `--agent` takes it (`claude-code`).
    pub name: String,
    /// One line saying what it is.
    pub description: String,
    /// Where the CLI comes from.
    pub package: Package,
    /// The wire API it speaks to the model.
    pub api: Api,
    /// How it is started.
    pub launch: Launch,
    /// Its tools, keyed by the case's tool name (`read`, `write`, `edit`, `bash`, `list`) and
    /// `noop`, the call sent for a model request that follows no touch. A touch whose tool the
    /// recipe does not name is UNSUPPORTED.
    pub tools: BTreeMap<String, Tool>,
    /// Its file names and folders.
    pub dialect: DialectSpec,
    /// The capabilities of spec-cases/vocabulary.yaml it has (`rule_modules`, `nested_files`,
    /// `restart`); a case needing another is UNSUPPORTED.
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// The profiles whose cases it runs. The default is `["modules"]`.
    #[serde(default = "default_profiles")]
    pub profiles: Vec<String>,
    /// Where the recipe was read from, for messages (not in the file).
    #[serde(skip)]
    pub origin: String,
    /// The folder relative `package.path` is resolved against (not in the file).
    #[serde(skip)]
    pub dir: Option<PathBuf>,
}

fn default_profiles() -> Vec<String> {
    vec!["modules".into()]
}

/// Where the CLI comes from: an npm package installed by `.ci/agents` into the agent cache, or a
/// program on this machine (`path`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Package {
    /// The npm package (`@anthropic-ai/claude-code`).
    #[serde(default)]
    pub npm: Option<String>,
    /// The pinned version; `--agent NAME@VERSION` runs another one installed beside it.
    #[serde(default)]
    pub version: Option<String>,
    /// More npm packages installed with it (a platform binary package), each `name@version`;
    /// `{version}` is the version being installed.
    #[serde(default)]
    pub with: Vec<String>,
    /// The program, relative to the install prefix (`node_modules/.bin/claude`); `{version}` is
    /// replaced.
    #[serde(default)]
    pub bin: Option<String>,
    /// A program on this machine instead of an npm package: absolute, or relative to the
    /// recipe's folder.
    #[serde(default)]
    pub path: Option<String>,
}

/// How the CLI is started.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Launch {
    /// Its arguments at the start of a case.
    pub args: Vec<String>,
    /// Its arguments to resume the case's session after a restart; without them a case that
    /// restarts is UNSUPPORTED.
    #[serde(default)]
    pub resume_args: Option<Vec<String>>,
    /// Its environment, beside `HOME`, `PATH` (the folder of this machine's `node` and the system
    /// folders), `TMPDIR`, `LANG` and the suite's environment canary (`CONFORMANCE_ENV_CANARY`);
    /// nothing else of the harness's environment reaches it. Values may use `{base_url}` (the fake
    /// model endpoint), `{home}` and `{root}`; so may `args` and `resume_args`.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Files written into its fresh HOME before it starts (path relative to HOME → text, with the
    /// same placeholders).
    #[serde(default)]
    pub home_files: BTreeMap<String, String>,
}

/// One tool, as the scripted model calls it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tool {
    /// The tool's name in the CLI's `tools` list (`Read`).
    pub name: String,
    /// The arguments; string values may use `{path}` (absolute), `{path_shell}` (quoted for a
    /// shell), `{content}` (the file's current text), `{old}` and `{new}` (for an edit).
    #[serde(default)]
    pub args: serde_json::Map<String, serde_json::Value>,
    /// Whether the CLI refuses this tool on a file it has not read in the conversation (Claude
    /// Code's Write and Edit): the scripted model then reads the file first, in the same batch.
    #[serde(default)]
    pub read_first: bool,
}

/// The agent's file-name dialect.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DialectSpec {
    /// The seed's instruction-file names (`AGENTS.md`, `CLAUDE.md`, ...) → the agent's name for
    /// each. A seed name the map lacks makes a case that has such a file UNSUPPORTED; two seed
    /// names mapped to one agent name in one folder collide, and the case is UNSUPPORTED too.
    pub names: BTreeMap<String, String>,
    /// The agent's rules folder (`.claude/rules`), standing for seed 000's `.elowen/rules`; without
    /// it a case with rule modules is UNSUPPORTED.
    #[serde(default)]
    pub rules_dir: Option<String>,
    /// The frontmatter key that scopes a rule (`paths`, `globs`, `applyTo`). The default is
    /// `paths`.
    #[serde(default = "default_key")]
    pub frontmatter_key: String,
    /// Project paths the agent reads for a purpose of its own (Claude Code's second project
    /// memory `.claude/CLAUDE.md`): a case whose translation lands a file there is UNSUPPORTED.
    /// The default is none.
    #[serde(default)]
    pub reserved: Vec<String>,
    /// Whether the CLI names every instruction file it sends (a header with the file's path,
    /// `Contents of /…/CLAUDE.md:`), so that a blank file it does not name was not sent. A CLI
    /// that sends a file's text unnamed (Continue's `<context name="userRules">`) leaves nothing
    /// to see of a blank file: set it false, and an expected blank file that is not found is not
    /// compared. The default is true.
    #[serde(default = "yes")]
    pub names_files: bool,
}

fn yes() -> bool {
    true
}

fn default_key() -> String {
    "paths".into()
}

/// The tools a case's touch names that a recipe may map, beside `noop`.
const TOOL_KEYS: &[&str] = &["read", "write", "edit", "bash", "list", "grep", "noop"];

impl Recipe {
    /// Parses a recipe; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Recipe, String> {
        let mut recipe: Recipe = toml::from_str(text).map_err(|e| located(text, origin, &e))?;
        recipe.origin = origin.to_string();
        recipe.check(text)?;
        Ok(recipe)
    }

    /// A built-in recipe by name, or a recipe file (a path ending in `.toml`).
    pub fn find(name: &str) -> Result<Recipe, String> {
        if name.ends_with(".toml") || name.contains('/') {
            let path = Path::new(name);
            let text = crate::util::input::read_text(path, crate::util::input::Kind::Manifest)
                .map_err(|e| format!("{name}: {}", e.message))?;
            let mut recipe = Recipe::parse(&text, name)?;
            recipe.dir = path.parent().map(Path::to_path_buf);
            return Ok(recipe);
        }
        let file = format!("{name}.toml");
        match BUILTIN.get_file(&file).and_then(|f| f.contents_utf8()) {
            Some(text) => Recipe::parse(text, &format!("harness/agents/{file}")),
            None => Err(format!("no agent recipe named '{name}' (built in: {})", Recipe::builtin_names().join(", "))),
        }
    }

    /// The names of the built-in recipes.
    pub fn builtin_names() -> Vec<String> {
        let mut names: Vec<String> = BUILTIN
            .files()
            .filter_map(|f| f.path().to_str())
            .filter_map(|p| p.strip_suffix(".toml"))
            .map(str::to_string)
            .collect();
        names.sort();
        names
    }

    /// Every built-in recipe, parsed (for tests and `conformance agents`).
    pub fn builtin() -> Vec<Result<Recipe, String>> {
        Recipe::builtin_names().iter().map(|n| Recipe::find(n)).collect()
    }

    /// The checks serde cannot make, each naming the field and its line.
    fn check(&self, text: &str) -> Result<(), String> {
        let at = |field: &str, message: String| format!("{}:{}: {message}", self.origin, line_of(text, field));
        if self.name.trim().is_empty() {
            return Err(at("name", "field 'name' is empty".into()));
        }
        match (&self.package.npm, &self.package.path) {
            (Some(_), Some(_)) => return Err(at("path", "package takes 'npm' or 'path', not both".into())),
            (None, None) => {
                return Err(at("[package]", "package needs 'npm' (with 'version' and 'bin') or 'path'".into()))
            }
            (Some(_), None) if self.package.version.is_none() || self.package.bin.is_none() => {
                return Err(at("npm", "an npm package needs 'version' (the pin) and 'bin'".into()))
            }
            _ => {}
        }
        for key in self.tools.keys() {
            if !TOOL_KEYS.contains(&key.as_str()) {
                return Err(at(
                    &format!("[tools.{key}]"),
                    format!("tool '{key}' is not a case tool (one of {})", TOOL_KEYS.join(", ")),
                ));
            }
        }
        if !self.tools.contains_key("read") {
            return Err(at("[tools", "the recipe needs [tools.read]: every touch of a case is at least a read".into()));
        }
        for c in &self.capabilities {
            if !crate::case::vocabulary::is_capability(c) {
                return Err(at("capabilities", format!("capability '{c}' is not in spec-cases/vocabulary.yaml")));
            }
        }
        for p in &self.profiles {
            if crate::case::load::check_profile(p).is_err() {
                return Err(at("profiles", format!("profile '{p}' is not a profile (modules, section, root-file)")));
            }
        }
        for (seed, agent) in &self.dialect.names {
            if !SEED_NAMES.contains(&seed.as_str()) {
                return Err(at(
                    "names",
                    format!("'{seed}' is not one of the seed's instruction-file names ({})", SEED_NAMES.join(", ")),
                ));
            }
            if agent.is_empty() || agent.contains('/') {
                return Err(at("names", format!("'{agent}' is not a file name")));
            }
        }
        if let Some(dir) = &self.dialect.rules_dir {
            if dir.is_empty() || dir.starts_with('/') || dir.split('/').any(|c| c.is_empty() || c == "..") {
                return Err(at("rules_dir", format!("rules_dir '{dir}' is not a relative folder")));
            }
        }
        Ok(())
    }

    /// The name and version a run reports (`claude-code@2.1.332`).
    pub fn pin(&self, version: Option<&str>) -> String {
        match version.or(self.package.version.as_deref()) {
            Some(v) => format!("{}@{v}", self.name),
            None => self.name.clone(),
        }
    }

    /// The program to run: from the agent cache for an npm package (installed by `.ci/agents`),
    /// else `package.path`.
    pub fn program(&self, version: Option<&str>) -> Result<PathBuf, String> {
        if let Some(path) = &self.package.path {
            if version.is_some() {
                return Err(format!(
                    "{}: '{}' is a program on this machine, not a package: it takes no @VERSION",
                    self.origin, self.name
                ));
            }
            let p = PathBuf::from(path);
            let p = if p.is_absolute() { p } else { self.dir.clone().unwrap_or_default().join(p) };
            return if p.is_file() {
                Ok(p)
            } else {
                Err(format!("{}: package.path '{}' is not a file", self.origin, p.display()))
            };
        }
        let version = version.or(self.package.version.as_deref()).unwrap_or_default();
        let prefix = cache_dir().join(format!("{}@{version}", self.name));
        let bin = self.package.bin.as_deref().unwrap_or_default().replace("{version}", version);
        let program = prefix.join(bin);
        if program.is_file() {
            Ok(program)
        } else {
            Err(format!(
                "{}@{version} is not installed: no {} (install it with `.ci/agents {}@{version}`)",
                self.name,
                program.display(),
                self.name
            ))
        }
    }
}

/// The seed's instruction-file names (seed 000, "Format and discovery": "the same name priority
/// as the root loader (AGENTS.override.md, AGENTS.md, AGENTS.MD, CLAUDE.md, CLAUDE.MD)").
pub const SEED_NAMES: &[&str] = &["AGENTS.override.md", "AGENTS.md", "AGENTS.MD", "CLAUDE.md", "CLAUDE.MD"];

/// Where `.ci/agents` installs the pinned CLIs: `$CONFORMANCE_AGENT_CACHE`, else
/// `$XDG_CACHE_HOME/conformance/agents`, else `~/.cache/conformance/agents` — outside any source
/// tree.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CONFORMANCE_AGENT_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    base.join("conformance").join("agents")
}

/// A TOML error as `FILE:LINE: message`.
fn located(text: &str, origin: &str, e: &toml::de::Error) -> String {
    let line = e.span().map_or(1, |s| text.get(..s.start).map_or(1, |t| t.lines().count().max(1)));
    let line = match e.span() {
        Some(s) if text.get(..s.start).is_some_and(|t| t.ends_with('\n')) => line + 1,
        _ => line,
    };
    format!("{origin}:{line}: {}", e.message())
}

/// The line of the first occurrence of `needle` (1 when it does not occur), for errors serde
/// cannot place.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).map_or(1, |i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
name = "x"
description = "a test agent"
api = "anthropic-messages"
[package]
path = "/bin/true"
[launch]
args = ["-p", "go"]
[tools.read]
name = "Read"
args = { file_path = "{path}" }
[dialect]
names = { "AGENTS.md" = "CLAUDE.md" }
"#;

    #[test]
    fn a_minimal_recipe_parses_with_its_defaults() {
        let r = Recipe::parse(MINIMAL, "x.toml").unwrap();
        assert_eq!(r.profiles, vec!["modules".to_string()]);
        assert!(r.dialect.names_files, "a CLI names the files it sends unless its recipe says not");
        assert_eq!(r.dialect.frontmatter_key, "paths");
        assert_eq!(r.tools["read"].name, "Read");
    }

    #[rstest::rstest]
    #[case::unknown_field(
        "args = [\"-p\", \"go\"]\n",
        "args = [\"-p\", \"go\"]\narg = 1\n",
        "x.toml:9: unknown field `arg`"
    )]
    #[case::unknown_tool("[tools.read]", "[tools.reed]", "x.toml:9: tool 'reed' is not a case tool")]
    #[case::bad_name(
        "\"AGENTS.md\" = \"CLAUDE.md\"",
        "\"AGENT.md\" = \"CLAUDE.md\"",
        "'AGENT.md' is not one of the seed's"
    )]
    #[case::bad_api("anthropic-messages", "anthropic", "x.toml:4: unknown variant `anthropic`")]
    fn a_bad_recipe_is_refused_naming_its_line(#[case] from: &str, #[case] to: &str, #[case] wanted: &str) {
        let text = MINIMAL.replacen(from, to, 1);
        let err = Recipe::parse(&text, "x.toml").unwrap_err();
        assert!(err.contains(wanted), "{err}");
    }

    #[test]
    fn every_builtin_recipe_parses() {
        let all = Recipe::builtin();
        assert!(!all.is_empty());
        for r in all {
            r.unwrap();
        }
    }
}
