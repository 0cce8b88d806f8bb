//! `conformance`: the CI gate. Runs the suite against the reference in-process or against any
//! implementation through an adapter, and exits 0 when every result is as expected, 1 on
//! unexpected results, 2 on usage, manifest or protocol errors.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use harness::case::corpus::Corpus;
use harness::case::load::Case;
use harness::case::tree::FakeHome;
use harness::judge::manifest::Manifest;
use harness::report::escape::{self, cut};
use harness::report::formats::{self, Summary};
use harness::run::case::{Level, Status};
use harness::run::implementation::{Implementation, InProcess};
use harness::run::suite::{parse_shard, run_all, Factory, Selection};

/// What `--version` says: the suite, the protocol and every profile, which move independently.
const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (suite ",
    env!("CARGO_PKG_VERSION"),
    "; adapter protocol 2; profiles: modules 2, section 2, root-file 2)"
);

#[derive(Parser)]
#[command(name = "conformance", version, long_version = LONG_VERSION, about = "The conformance suite for project instruction loaders")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the suite and gates on the expectations manifest.
    Run(RunArgs),
    /// Lists the cases.
    List(CasesArg),
    /// Shows a case beside the seed text it cites.
    Explain {
        /// The case id.
        id: String,
        #[command(flatten)]
        cases: CasesArg,
    },
    /// Writes a directory that reproduces one case: its tree, its scenario and a one-shot input.
    Repro {
        /// The case id.
        id: String,
        /// The directory to write (must not exist).
        dir: PathBuf,
        /// Also run the case through an adapter and write the protocol exchange to
        /// `transcript.jsonl` (`> ` requests, `< ` replies).
        #[arg(long)]
        transcript: bool,
        /// The adapter for `--transcript`; the default is reference-adapter.
        #[arg(long, requires = "transcript", conflicts_with = "agent")]
        adapter: Option<String>,
        /// An agent CLI for `--transcript` (as `run --agent`): `transcript.jsonl` then holds every
        /// request it sent to the fake model endpoint and every scripted reply.
        #[arg(long, requires = "transcript")]
        agent: Option<String>,
        #[command(flatten)]
        cases: CasesArg,
    },
    /// Reports seed clauses and decisions no case covers, cases that cover none, and quotes that are
    /// not verbatim under their cited heading of their cited seed; exit 1 on a gap.
    Coverage {
        /// Print every clause with the cases that cover it.
        #[arg(long)]
        verbose: bool,
        #[command(flatten)]
        cases: CasesArg,
    },
    /// A first check of an adapter: validates its hello, runs one small case per profile it
    /// declares, and prints the protocol exchange of the first failure; exit 0 only when all pass.
    Smoke {
        /// The adapter command (run with `sh -c`).
        #[arg(long)]
        adapter: String,
        /// Seconds the adapter may take to answer one request. The default is 10.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
        timeout: u64,
        #[command(flatten)]
        cases: CasesArg,
    },
    /// Runs several implementations over the same cases and writes a static site of the results:
    /// index.html (implementations × profiles × areas), matrix.json and a page per case.
    Matrix {
        /// An implementation: `NAME=CMD` (a persistent adapter run with `sh -c`; `NAME=-` is the
        /// reference in-process). Repeatable.
        #[arg(long = "impl", value_name = "NAME=CMD", required_unless_present_any = ["agents", "reports"])]
        implementations: Vec<String>,
        /// An agent CLI, as `run --agent` takes it (`claude-code`, `claude-code@2.1.197`, a recipe
        /// file). Repeatable, beside `--impl`.
        #[arg(long = "agent", value_name = "NAME[@VERSION]")]
        agents: Vec<String>,
        /// A saved JSON report (`run --format json`, or `report --merge` of a run's shards) shown
        /// as a column named by its implementation's hello name (and version, when two columns
        /// would share a name), instead of running it. Repeatable, beside `--impl` and `--agent`;
        /// the columns come in the order `--impl`, `--agent`, `--report`.
        #[arg(long = "report", value_name = "PATH")]
        reports: Vec<PathBuf>,
        /// A `conformance bench` run's bench.json: its table and plot end the index.
        #[arg(long, value_name = "BENCH.json")]
        bench: Option<PathBuf>,
        /// The directory to write.
        #[arg(long)]
        out: PathBuf,
        /// Parallel jobs per implementation. The default is 1.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=256))]
        jobs: u64,
        /// Seconds an implementation may take to answer one request. The default is 10.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
        timeout: u64,
        /// Only cases whose name or id contains this.
        #[arg(long)]
        filter: Option<String>,
        #[command(flatten)]
        cases: CasesArg,
    },
    /// Renders a saved JSON report (`run --format json`) again, in any format; with `--merge`, the
    /// shards of one run (`run --shard K/N`) as the report of the whole run.
    Report {
        /// The JSON report; with `--merge`, every shard's.
        #[arg(required = true)]
        results: Vec<PathBuf>,
        /// Merge the reports, each a shard of one run, into one: results in corpus order, the
        /// summary counted again, `unexpected` the union of the shards'. Refused for shards of
        /// different suite versions, implementations, shard counts, profiles or filters, for a
        /// case in two shards, and when a shard is missing (unless `--allow-missing`). The merged
        /// report has no `shard` and is not merged again.
        #[arg(long)]
        merge: bool,
        /// With `--merge`: merge the shards given when some are missing (named on stderr and in
        /// the report's `merged.missing`) instead of refusing. The default is to refuse.
        #[arg(long, requires = "merge")]
        allow_missing: bool,
        /// The format.
        #[arg(long, value_enum, default_value = "human")]
        format: Format,
        /// For `badge`: only this profile.
        #[arg(long)]
        profile: Option<String>,
        /// Also write `FORMAT=PATH`, repeatable.
        #[arg(long = "output", value_name = "FORMAT=PATH", value_parser = parse_output)]
        outputs: Vec<(Format, PathBuf)>,
    },
    /// Times implementations on the benches' generated trees: launch to the first model request,
    /// and a matching touch's tool result to the next request, each as the median of the repeats
    /// and read beside the same target on the empty tree and reference-adapter on the same tree,
    /// all in one run. Prints a table; writes bench.json, bench.md and bench.svg to --out.
    Bench {
        /// An agent CLI, as `run --agent` takes it. Repeatable.
        #[arg(long = "agent", value_name = "NAME[@VERSION]")]
        agents: Vec<String>,
        /// An adapter: `NAME=CMD` (run with `sh -c`). Repeatable.
        #[arg(long = "impl", value_name = "NAME=CMD")]
        implementations: Vec<String>,
        /// A tree size in rule modules (the empty tree is always run too). Repeatable; the
        /// default is 1000.
        #[arg(long = "modules", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        modules: Vec<u64>,
        /// Runs per target and tree. The default is 3.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=100))]
        repeats: u64,
        /// Seconds a target may take over one request. The default is 120.
        #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=3600))]
        timeout: u64,
        /// Where to write bench.json, bench.md and bench.svg. The default is target/bench.
        #[arg(long, default_value = "target/bench")]
        out: PathBuf,
    },
    /// Lists agent CLI recipes, one line each, tab-separated: the pin (`claude-code@2.1.332`), the
    /// folder `.ci/agents` installs it into, the program there, and the npm packages to install.
    /// Without pins, every built-in recipe at its pinned version.
    Agents {
        /// `NAME`, `NAME@VERSION` or a recipe file, as `run --agent` takes them.
        pins: Vec<String>,
    },
    /// Runs the suite and writes the manifest that expects exactly its results.
    Expectations {
        /// The manifest to write.
        #[arg(long)]
        write: PathBuf,
        #[command(flatten)]
        run: RunArgs,
    },
}

#[derive(Args, Clone)]
struct CasesArg {
    /// A directory of cases other than the built-in corpus.
    #[arg(long)]
    cases: Option<PathBuf>,
}

#[derive(Args, Clone)]
struct RunArgs {
    /// The adapter command (run with `sh -c`); without it, the reference runs in-process.
    #[arg(long, conflicts_with = "agent")]
    adapter: Option<String>,
    /// An agent CLI, run unmodified against a scripted fake model endpoint: `NAME` (a recipe of
    /// harness/agents/, at its pinned version), `NAME@VERSION` (another installed version), or a
    /// recipe file `PATH.toml` (harness/agents/README.md). Install npm CLIs with `.ci/agents`.
    #[arg(long)]
    agent: Option<String>,
    /// Write the raw exchange of every case that does not pass to `DIR/<id>.jsonl` (agent CLIs:
    /// every request they sent and every scripted reply).
    #[arg(long, value_name = "DIR")]
    transcripts: Option<PathBuf>,
    /// Run the adapter once per case with the whole case on stdin (harness/PROTOCOL.md, one-shot
    /// mode). Cases that edit a host tree between steps are UNSUPPORTED there.
    #[arg(long, requires = "adapter")]
    one_shot: bool,
    /// Only cases whose name or id contains this.
    #[arg(long)]
    filter: Option<String>,
    /// Only this profile.
    #[arg(long)]
    profile: Option<String>,
    /// The profiles the implementation implements, comma-separated, instead of what its hello
    /// says (a one-shot adapter has no hello: without this it is taken to implement all).
    #[arg(long, value_delimiter = ',')]
    profiles: Option<Vec<String>>,
    /// The capabilities the implementation has, comma-separated, instead of what its hello says
    /// (a one-shot adapter has no hello: without this it is taken to have all). Cases needing
    /// others are UNSUPPORTED.
    #[arg(long, value_delimiter = ',')]
    capabilities: Option<Vec<String>>,
    /// Capabilities to take away from what the implementation declares, comma-separated.
    #[arg(long, value_delimiter = ',')]
    exclude_capabilities: Vec<String>,
    /// The expectations manifest.
    #[arg(long)]
    expectations: Option<PathBuf>,
    /// The report on stdout (a human summary also goes to stderr for the other formats).
    #[arg(long, value_enum, default_value = "human")]
    format: Format,
    /// Also write a report to a file: `FORMAT=PATH` (human, json, junit, markdown, badge),
    /// repeatable, all from this one run. `badge=DIR/` writes one endpoint document per profile.
    #[arg(long = "output", value_name = "FORMAT=PATH", value_parser = parse_output)]
    outputs: Vec<(Format, PathBuf)>,
    /// Parallel jobs, each with its own implementation instance. The default is 1.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=256))]
    jobs: u64,
    /// Which expectations gate: `all` (the default) or `seed`, only those a seed sentence
    /// requires (a case that differs only from the suite's decisions then passes, its
    /// differences kept in the report).
    #[arg(long, value_enum, default_value = "all")]
    level: LevelArg,
    /// Run shard K of N (`--shard 2/4`).
    #[arg(long)]
    shard: Option<String>,
    /// Start no case after the first unexpected result (the cases already running finish); the
    /// cases not run are reported as SKIP, and the run still fails.
    #[arg(long)]
    fail_fast: bool,
    /// Seconds an implementation may take to answer one request (in-process too). The default is 10.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    timeout: u64,
    /// Adapter restarts after crashes or timeouts before the run ends with exit 2. The default is 20.
    #[arg(long, default_value_t = 20)]
    max_restarts: u32,
    #[command(flatten)]
    cases: CasesArg,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum LevelArg {
    All,
    Seed,
}

fn parse_output(s: &str) -> Result<(Format, PathBuf), String> {
    let (format, path) = s.split_once('=').ok_or_else(|| format!("'{s}': expected FORMAT=PATH"))?;
    let format = Format::from_str(format, true)
        .map_err(|_| format!("'{format}' is not a format (human, json, junit, markdown, badge)"))?;
    if path.is_empty() {
        return Err(format!("'{s}': the path is empty"));
    }
    Ok((format, PathBuf::from(path)))
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
enum Format {
    Human,
    Json,
    Junit,
    Markdown,
    Badge,
}

/// The corpus: `--cases DIR`, else the one built into this binary.
fn corpus(cases: &CasesArg) -> Corpus {
    match &cases.cases {
        Some(dir) => Corpus::read(dir),
        None => Corpus::builtin(),
    }
}

fn load(cases: &CasesArg) -> Result<Vec<Case>, String> {
    let corpus = corpus(cases);
    let cases = harness::case::load::load(&corpus)
        .map_err(|errs| errs.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))?;
    if cases.is_empty() {
        return Err(format!("no cases found under {} (a run that finds zero cases fails)", corpus.origin.display()));
    }
    Ok(cases)
}

fn declared(args: &RunArgs) -> harness::run::implementation::Declared {
    // `--capabilities ''` declares none.
    let words = |v: &Vec<String>| v.iter().filter(|w| !w.trim().is_empty()).map(|w| w.trim().to_string()).collect();
    harness::run::implementation::Declared {
        profiles: args.profiles.as_ref().map(words),
        capabilities: args.capabilities.as_ref().map(words),
        exclude: words(&args.exclude_capabilities),
    }
}

fn with_declared(
    imp: Box<dyn Implementation + Send>,
    declared: &harness::run::implementation::Declared,
) -> Box<dyn Implementation + Send> {
    if declared.is_empty() {
        imp
    } else {
        Box::new(harness::run::implementation::WithDeclared { inner: imp, declared: declared.clone() })
    }
}

/// The implementation factory of a run, and the fake HOME its adapters get (removed when the run
/// ends: the returned directory is dropped then).
fn factory(args: &RunArgs) -> Result<(Box<Factory<'static>>, Option<FakeHome>), String> {
    let timeout = Duration::from_secs(args.timeout);
    if let Some(spec) = &args.agent {
        let declared = declared(args);
        let make = agent_factory(spec, timeout)?;
        let make = move || Ok(with_declared(make()?, &declared));
        return Ok((Box::new(make), None));
    }
    let Some(cmd) = args.adapter.clone() else {
        let declared = declared(args);
        let make = move || Ok(with_declared(Box::new(InProcess::with_timeout(timeout)), &declared));
        return Ok((Box::new(make), None));
    };
    let max_restarts = args.max_restarts;
    let home_dir = FakeHome::new()?;
    let home = home_dir.path().to_path_buf();
    let one_shot = args.one_shot;
    let declared = declared(args);
    let make = move || {
        let imp: Box<dyn Implementation + Send> = if one_shot {
            Box::new(harness::run::adapter::OneShotAdapter::new(cmd.clone(), home.clone(), timeout))
        } else {
            Box::new(harness::run::adapter::ProcessAdapter::new(cmd.clone(), home.clone(), timeout, max_restarts))
        };
        Ok(with_declared(imp, &declared))
    };
    Ok((Box::new(make), Some(home_dir)))
}

/// A factory of an agent CLI's runs from `--agent NAME[@VERSION]` (or `PATH.toml[@VERSION]`);
/// fails when the recipe is bad or the CLI is not installed.
fn agent_factory(
    spec: &str,
    timeout: Duration,
) -> Result<impl Fn() -> Result<Box<dyn Implementation + Send>, String> + Send + Sync + 'static, String> {
    let (name, version) = match spec.rsplit_once('@') {
        Some((n, v)) if !n.is_empty() && !v.is_empty() => (n, Some(v.to_string())),
        _ => (spec, None),
    };
    let recipe = harness::run::agent::recipe::Recipe::find(name)?;
    // Fails now, not once per case, when the CLI is not installed.
    recipe.program(version.as_deref())?;
    Ok(move || -> Result<Box<dyn Implementation + Send>, String> {
        Ok(Box::new(harness::run::agent::runner::Agent::new(recipe.clone(), version.clone(), timeout)?))
    })
}

/// `conformance agents`: each recipe's install plan, for `.ci/agents`.
fn agents(pins: &[String]) -> Result<ExitCode, String> {
    use harness::run::agent::recipe::{cache_dir, Recipe};
    let pins: Vec<String> = if pins.is_empty() { Recipe::builtin_names() } else { pins.to_vec() };
    for spec in &pins {
        let (name, version) = match spec.rsplit_once('@') {
            Some((n, v)) if !n.is_empty() && !v.is_empty() => (n, Some(v)),
            _ => (spec.as_str(), None),
        };
        let recipe = Recipe::find(name)?;
        let Some(npm) = &recipe.package.npm else {
            emit(format_args!(
                "{}	-	{}	-
",
                recipe.pin(None),
                recipe.package.path.clone().unwrap_or_default()
            ));
            continue;
        };
        let version = version.or(recipe.package.version.as_deref()).unwrap_or_default();
        let dir = cache_dir().join(format!("{}@{version}", recipe.name));
        let bin = dir.join(recipe.package.bin.as_deref().unwrap_or_default().replace("{version}", version));
        let mut specs = vec![format!("{npm}@{version}")];
        specs.extend(recipe.package.with.iter().map(|w| w.replace("{version}", version)));
        emit(format_args!(
            "{}	{}	{}	{}
",
            recipe.pin(Some(version)),
            dir.display(),
            bin.display(),
            specs.join(" ")
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes the transcript of every case that has one to `dir/<id>.jsonl`.
fn write_transcripts(dir: &Path, results: &[harness::run::case::CaseResult]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for r in results {
        if let Some(t) = &r.transcript {
            let path = dir.join(format!("{}.jsonl", r.id));
            std::fs::write(&path, t).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    Ok(())
}

/// The command that rewrites the manifest at `path` from a run like this one: the binary that is
/// running, and every flag that selects or runs cases, exactly as given.
fn rewrite_hint(args: &RunArgs, path: &Path) -> String {
    use harness::run::adapter::shell_quote;
    let program = std::env::args().next().unwrap_or_else(|| "conformance".into());
    let mut cmd = format!("{} expectations --write {}", shell_quote(&program), shell_quote(&path.to_string_lossy()));
    let mut flag = |name: &str, value: Option<String>| {
        if let Some(v) = value {
            cmd.push_str(&format!(" --{name} {}", shell_quote(&v)));
        }
    };
    flag("adapter", args.adapter.clone());
    flag("agent", args.agent.clone());
    flag("cases", args.cases.cases.as_ref().map(|c| c.to_string_lossy().into_owned()));
    flag("profile", args.profile.clone());
    flag("filter", args.filter.clone());
    flag("shard", args.shard.clone());
    flag("jobs", (args.jobs != 1).then(|| args.jobs.to_string()));
    flag("timeout", (args.timeout != 10).then(|| args.timeout.to_string()));
    flag("max-restarts", (args.max_restarts != 20).then(|| args.max_restarts.to_string()));
    flag("level", (args.level == LevelArg::Seed).then(|| "seed".to_string()));
    flag("profiles", args.profiles.as_ref().map(|v| v.join(",")));
    flag("capabilities", args.capabilities.as_ref().map(|v| v.join(",")));
    flag("exclude-capabilities", (!args.exclude_capabilities.is_empty()).then(|| args.exclude_capabilities.join(",")));
    if args.one_shot {
        cmd.push_str(" --one-shot");
    }
    cmd
}

/// Runs the selection; `Err((message, code))` for exit-2 conditions.
fn execute(args: &RunArgs) -> Result<(harness::Hello, Vec<harness::run::case::CaseResult>, Manifest), String> {
    let cases = load(&args.cases)?;
    let shard = args.shard.as_deref().map(parse_shard).transpose()?;
    if let Some(p) = &args.profile {
        harness::case::load::check_profile(p).map_err(|e| format!("--profile {e}"))?;
    }
    let selection = Selection { filter: args.filter.clone(), profile: args.profile.clone(), shard };
    let manifest = match &args.expectations {
        Some(p) => Manifest::read(p)?,
        None => Manifest::default(),
    };
    let known = cases.iter().map(|c| c.scenario.id.clone()).collect();
    let unknown = manifest.unknown_ids(&known);
    if !unknown.is_empty() {
        let path = args.expectations.clone().unwrap_or_default();
        return Err(format!(
            "{}: unknown case ids: {} (stale entries; rewrite with: {})",
            path.display(),
            unknown.join(", "),
            rewrite_hint(args, &path)
        ));
    }
    let selected = selection.apply(cases);
    if selected.is_empty() {
        return Err("no case matches the selection".into());
    }
    let (factory, _home) = factory(args)?;
    let level = match args.level {
        LevelArg::All => Level::All,
        LevelArg::Seed => Level::Seed,
    };
    let outcome = run_all(
        &selected,
        factory.as_ref(),
        usize::try_from(args.jobs).unwrap_or(1),
        &manifest,
        level,
        true,
        args.fail_fast,
    );
    // Every adapter has been stopped and reaped by now: any child left is a descendant that
    // escaped its process group, re-parented to the harness.
    drop(factory);
    let escaped = harness::util::cleanup::reap_orphans();
    if escaped > 0 {
        eprintln!("conformance: killed {escaped} process(es) the adapter left behind outside its process group");
    }
    let (hello, results) = outcome?;
    let executed = results.iter().filter(|r| !matches!(r.status, Status::Unsupported | Status::Skip)).count();
    // A shard may hold only cases the implementation cannot be put to; the run as a whole is
    // judged when its shards are merged.
    if executed == 0 && !results.iter().any(|r| r.fatal) && args.shard.is_none() {
        return Err(format!(
            "no case executed: all {} selected cases were unsupported or skipped (hello from '{}' declares \
             profiles [{}] and capabilities [{}]); a run that runs nothing cannot pass",
            results.len(),
            hello.name,
            hello.profiles.join(", "),
            hello.capabilities.join(", ")
        ));
    }
    Ok((hello, results, manifest))
}

/// Refuses, before anything runs, an output file whose folder is not there: a long run would
/// otherwise end without its report.
fn check_outputs(outputs: &[(Format, PathBuf)]) -> Result<(), String> {
    for (_, path) in outputs {
        let folder = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        if !folder.is_dir() {
            return Err(format!("--output {}: the folder {} does not exist", path.display(), folder.display()));
        }
    }
    Ok(())
}

fn run(args: &RunArgs) -> Result<ExitCode, String> {
    check_outputs(&args.outputs)?;
    let (hello, mut results, manifest) = execute(args)?;
    // A run that ended early (the adapter could no longer be restarted) is still reported whole,
    // every CRASH with its stderr tail, before it ends with exit 2.
    let fatal = results.iter().find(|r| r.fatal).map(|r| r.reason.clone().unwrap_or_default());
    let unexpected: Vec<String> =
        results.iter_mut().filter_map(|r| (!manifest.apply(r)).then(|| r.id.clone())).collect();
    let dropped = manifest.dropped_support(&hello);
    let summary = Summary::new(&results, unexpected);
    use std::io::IsTerminal;
    let terminal =
        if args.format == Format::Human { std::io::stdout().is_terminal() } else { std::io::stderr().is_terminal() };
    let human = formats::human(&results, &summary, formats::use_colour(terminal));
    let info = formats::RunInfo {
        shard: args.shard.as_deref().map(parse_shard).transpose()?.map(|(index, of)| formats::Shard { index, of }),
        profile: args.profile.clone(),
        filter: args.filter.clone(),
        ..formats::RunInfo::current()
    };
    let rendered =
        Rendered { hello: &hello, run: &info, results: &results, summary: &summary, profile: args.profile.as_deref() };
    if args.format == Format::Human {
        emit_painted(&format!("{human}\n"));
    } else {
        emit(format_args!("{}\n", rendered.render(args.format)));
    }
    if args.format != Format::Human {
        eprint!("{human}");
    }
    for (format, path) in &args.outputs {
        rendered.write(*format, path)?;
    }
    if let Some(dir) = &args.transcripts {
        write_transcripts(dir, &results)?;
    }
    if !dropped.is_empty() {
        eprintln!(
            "conformance: the implementation declares less than when its manifest was written: {} no longer \
             declared (cases needing them are now UNSUPPORTED, not run)",
            line(&dropped.join(", "), escape::MESSAGE_MAX)
        );
    }
    let cut: Vec<&str> = results
        .iter()
        .filter_map(|r| r.reason.as_deref())
        .filter(|r| r.starts_with(harness::run::suite::FAIL_FAST_NOT_RUN))
        .collect();
    if let Some(why) = cut.first() {
        eprintln!("conformance: {} cases {}", cut.len(), line(why, escape::MESSAGE_MAX));
    }
    if let Some(why) = fatal {
        eprintln!("conformance: the run ended early: {}", escape::terminal(&escape::cut(&why, escape::REASON_MAX)));
        return Ok(ExitCode::from(2));
    }
    if summary.unexpected.is_empty() && dropped.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(path) = &args.expectations {
        eprintln!("to accept these results, rewrite the manifest: {}", rewrite_hint(args, path));
    }
    Ok(ExitCode::from(1))
}

/// One run's results, ready to be rendered in any format.
struct Rendered<'a> {
    hello: &'a harness::Hello,
    /// What the JSON report records of the run beside the hello.
    run: &'a formats::RunInfo,
    results: &'a [harness::run::case::CaseResult],
    summary: &'a Summary,
    profile: Option<&'a str>,
}

impl Rendered<'_> {
    fn render(&self, format: Format) -> String {
        match format {
            Format::Human => formats::human(self.results, self.summary, false),
            Format::Json => formats::json_of_run(self.hello, self.run, self.results, self.summary),
            Format::Junit => formats::junit(self.hello, self.results, self.summary),
            Format::Markdown => formats::markdown(self.hello, self.results, self.summary),
            Format::Badge => formats::badge(self.results, self.profile),
        }
    }

    /// Writes `format` to `path`; `badge` to a directory (a path ending in `/`, or one that
    /// exists) writes `<profile>.json` for each profile.
    fn write(&self, format: Format, path: &Path) -> Result<(), String> {
        let put = |p: &Path, text: String| std::fs::write(p, text + "\n").map_err(|e| format!("{}: {e}", p.display()));
        if format == Format::Badge && (path.to_string_lossy().ends_with('/') || path.is_dir()) {
            std::fs::create_dir_all(path).map_err(|e| format!("{}: {e}", path.display()))?;
            for p in formats::profiles(self.results) {
                put(&path.join(format!("{p}.json")), formats::badge(self.results, Some(&p)))?;
            }
            return Ok(());
        }
        put(path, self.render(format))
    }
}

/// The columns `conformance matrix` runs: `--impl` and `--agent`, with their jobs and timeout.
struct Runs<'a> {
    implementations: &'a [String],
    agents: &'a [String],
    jobs: u64,
    timeout: u64,
}

/// `conformance matrix`: each implementation over the same selection, then each saved report,
/// then the site.
fn matrix(
    cases: &[Case],
    runs: &Runs<'_>,
    reports: &[PathBuf],
    bench: Option<&Path>,
    out: &Path,
    filter: Option<String>,
) -> Result<ExitCode, String> {
    // Every report is read and checked before anything runs: a bad one fails at once, not after
    // an hour of agent CLIs.
    let bench = match bench {
        Some(path) => {
            let text = harness::util::input::read_text(path, harness::util::input::Kind::Report)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            let bench: harness::run::bench::Bench = serde_json::from_str(&text)
                .map_err(|e| format!("{}: not a bench.json of conformance bench: {e}", path.display()))?;
            Some(bench)
        }
        None => None,
    };
    let mut saved = Vec::new();
    for path in reports {
        let report = harness::report::merge::read(path)?;
        let results = harness::report::merge::matrix_results(&report, filter.as_deref())?;
        saved.push((path, report, results));
    }
    let mut columns = Vec::new();
    if !runs.implementations.is_empty() || !runs.agents.is_empty() {
        columns = run_columns(cases, runs, filter)?;
    }
    for (path, saved, results) in saved {
        if let Some(m) = saved.run.merged.as_ref().filter(|m| !m.missing.is_empty()) {
            eprintln!(
                "conformance: {}: merged without some shards ({}): its column lacks their cases",
                path.display(),
                harness::report::merge::missing_message(&m.missing, m.shards)
            );
        }
        let hello = saved.implementation;
        let taken = |n: &str| columns.iter().any(|c: &harness::report::matrix::Column| c.name == n);
        let mut name = hello.name.clone();
        if taken(&name) {
            name = format!("{} {}", hello.name, hello.version);
        }
        if taken(&name) {
            return Err(format!(
                "{}: a column named '{}' is there already (two reports of one implementation and version)",
                path.display(),
                cut(&name, escape::FIELD_MAX)
            ));
        }
        eprintln!("{}: {} cases from {}", field(&name), results.len(), path.display());
        columns.push(harness::report::matrix::Column { name, hello, results });
    }
    harness::report::matrix::write_with_bench(out, &columns, bench.as_ref())?;
    emit(format_args!("wrote {}\n", out.join("index.html").display()));
    Ok(ExitCode::SUCCESS)
}

/// The columns of `--impl` and `--agent`, each run over the same selection.
fn run_columns(
    cases: &[Case],
    runs: &Runs<'_>,
    filter: Option<String>,
) -> Result<Vec<harness::report::matrix::Column>, String> {
    let Runs { implementations, agents, jobs, timeout } = *runs;
    let selected = Selection { filter, ..Selection::default() }.apply(cases.to_vec());
    if selected.is_empty() {
        return Err("no case matches the selection".into());
    }
    let home = FakeHome::new()?;
    let mut columns = Vec::new();
    for spec in implementations {
        let (name, cmd) = spec.split_once('=').ok_or_else(|| format!("--impl '{spec}': expected NAME=CMD"))?;
        let timeout = Duration::from_secs(timeout);
        let home = home.path().to_path_buf();
        let cmd = cmd.to_string();
        let make = move || -> Result<Box<dyn Implementation + Send>, String> {
            if cmd == "-" {
                Ok(Box::new(InProcess::with_timeout(timeout)))
            } else {
                Ok(Box::new(harness::run::adapter::ProcessAdapter::new(cmd.clone(), home.clone(), timeout, 20)))
            }
        };
        let jobs = usize::try_from(jobs).unwrap_or(1);
        let (hello, results) = run_all(&selected, &make, jobs, &Manifest::default(), Level::All, true, false)
            .map_err(|e| format!("{name}: {e}"))?;
        eprintln!("{name}: {} cases run", results.len());
        columns.push(harness::report::matrix::Column { name: name.to_string(), hello, results });
    }
    for spec in agents {
        let make = agent_factory(spec, Duration::from_secs(timeout))?;
        let jobs = usize::try_from(jobs).unwrap_or(1);
        let (hello, results) = run_all(&selected, &make, jobs, &Manifest::default(), Level::All, true, false)
            .map_err(|e| format!("{spec}: {e}"))?;
        eprintln!("{spec}: {} cases run", results.len());
        columns.push(harness::report::matrix::Column { name: spec.to_string(), hello, results });
    }
    harness::util::cleanup::reap_orphans();
    Ok(columns)
}

/// `conformance bench`: every target, then reference-adapter, on the empty tree and each size.
fn bench(
    agents: &[String],
    implementations: &[String],
    modules: &[u64],
    repeats: u64,
    timeout: u64,
    out: &Path,
) -> Result<ExitCode, String> {
    use harness::run::bench::{self, Target};
    let timeout = Duration::from_secs(timeout);
    let home = FakeHome::new()?;
    let adapter = |cmd: String| {
        let home = home.path().to_path_buf();
        move || -> Result<Box<dyn Implementation + Send>, String> {
            Ok(Box::new(harness::run::adapter::ProcessAdapter::new(cmd.clone(), home.clone(), timeout, 0)))
        }
    };
    let mut makers: Vec<(String, Box<Factory<'static>>)> = Vec::new();
    for spec in agents {
        makers.push((spec.clone(), Box::new(agent_factory(spec, timeout)?)));
    }
    for spec in implementations {
        let (name, cmd) = spec.split_once('=').ok_or_else(|| format!("--impl '{spec}': expected NAME=CMD"))?;
        makers.push((name.to_string(), Box::new(adapter(cmd.to_string()))));
    }
    let reference =
        harness::run::adapter::shell_quote(&harness::run::adapter::reference_adapter_path()?.to_string_lossy());
    makers.push(("reference-adapter".into(), Box::new(adapter(reference))));
    let targets: Vec<Target<'_>> = makers.iter().map(|(name, make)| Target { name: name.clone(), make }).collect();
    let sizes: Vec<usize> = if modules.is_empty() {
        vec![1000]
    } else {
        modules.iter().map(|&n| usize::try_from(n).unwrap_or(usize::MAX)).collect()
    };
    let repeats = usize::try_from(repeats).unwrap_or(1);
    let result = bench::run(&targets, &sizes, repeats, &mut |row| {
        let first = bench::ms(row.first_us());
        let next = bench::ms(row.next_us());
        let error = row.error.as_deref().map(|e| format!(" ({})", line(e, 300))).unwrap_or_default();
        eprintln!(
            "{} at {} modules: first request {first} ms, next request {next} ms{error}",
            field(&row.target),
            row.modules
        );
    });
    harness::util::cleanup::reap_orphans();
    let result = result?;
    let table = result.table();
    emit(format_args!("{table}"));
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let json = serde_json::to_string_pretty(&result).map_err(|e| format!("bench.json: {e}"))?;
    for (file, text) in [("bench.json", json), ("bench.md", table), ("bench.svg", result.svg())] {
        let path = out.join(file);
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    emit(format_args!("wrote {}\n", out.join("bench.svg").display()));
    Ok(ExitCode::SUCCESS)
}

/// `conformance smoke`: hello, then the smallest runnable case of each declared profile.
fn smoke(cases: &[Case], command: &str, timeout: u64) -> Result<ExitCode, String> {
    let home = FakeHome::new()?;
    let mut imp = harness::run::adapter::ProcessAdapter::new(command, home.path(), Duration::from_secs(timeout), 0);
    let hello = imp.hello().map_err(|e| format!("hello failed: {e}"))?;
    harness::run::implementation::validate_hello(&hello)?;
    emit(format_args!(
        "hello: {} {} ({}), profiles [{}], capabilities [{}]\n",
        field(&hello.name),
        field(&hello.version),
        field(&hello.language),
        line(&hello.profiles.join(", "), escape::MESSAGE_MAX),
        line(&hello.capabilities.join(", "), escape::MESSAGE_MAX)
    ));
    let mut failed = false;
    for profile in &hello.profiles {
        // The smallest case that rests on the seed and checks sent content or rendered files,
        // so that a smoke run says something about what the model would read.
        let telling = |c: &&Case| {
            c.scenario.case_basis() == Some(harness::case::scenario::Basis::Seed)
                && (c.text.contains("content:") || c.text.contains("files:"))
        };
        let size = |c: &&Case| (!telling(c), c.scenario.steps.len(), c.text.len());
        let Some(case) = cases
            .iter()
            .filter(|c| {
                &c.scenario.profile == profile && harness::run::case::unsupported(&hello, &c.scenario).is_none()
            })
            .min_by_key(size)
        else {
            emit(format_args!("{profile}: no case runs with the declared capabilities\n"));
            failed = true;
            continue;
        };
        imp.record();
        let result = harness::run::case::run_case(&mut imp, &harness::run::case::RunContext::new(&hello), case);
        emit(format_args!(
            "{}: {} {} [{}]\n",
            field(profile),
            result.status.as_str(),
            field(&case.name),
            field(&case.scenario.id)
        ));
        if result.status != Status::Pass {
            if !failed {
                emit(format_args!("{}", formats::case_detail(&result)));
                let exchange: Vec<String> =
                    imp.transcript().iter().map(|l| line(l, escape::TRANSCRIPT_LINE_MAX)).collect();
                emit(format_args!("the exchange:\n{}\n", exchange.join("\n")));
            }
            failed = true;
        }
    }
    Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// Runs one case through an adapter (reference-adapter by default), recording the exchange into
/// `dir/transcript.jsonl`.
fn record_transcript(cases: &[Case], id: &str, dir: &Path, adapter: Option<String>) -> Result<String, String> {
    let case = cases.iter().find(|c| c.scenario.id == id).ok_or_else(|| format!("no case has the id '{id}'"))?;
    let command = match adapter {
        Some(a) => a,
        None => harness::run::adapter::shell_quote(&harness::run::adapter::reference_adapter_path()?.to_string_lossy()),
    };
    let home = FakeHome::new()?;
    let mut imp = harness::run::adapter::ProcessAdapter::new(command.clone(), home.path(), Duration::from_secs(10), 0);
    imp.record();
    let hello = imp.hello().map_err(|e| format!("hello failed: {e}"))?;
    let result = harness::run::case::run_case(&mut imp, &harness::run::case::RunContext::new(&hello), case);
    let path = dir.join("transcript.jsonl");
    std::fs::write(&path, imp.transcript().join("\n") + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(format!("transcript of '{command}' ({}): {}", result.status.as_str(), path.display()))
}

/// Runs one case through an agent CLI, writing its requests and the scripted replies into
/// `dir/transcript.jsonl` and the result into `dir/result.txt`.
fn agent_transcript(cases: &[Case], id: &str, dir: &Path, agent: &str) -> Result<String, String> {
    let case = cases.iter().find(|c| c.scenario.id == id).ok_or_else(|| format!("no case has the id '{id}'"))?;
    let make = agent_factory(agent, Duration::from_secs(30))?;
    let mut imp = make()?;
    let hello = imp.hello().map_err(|e| format!("hello failed: {e}"))?;
    let ctx = harness::run::case::RunContext { keep_transcript: true, ..harness::run::case::RunContext::new(&hello) };
    let result = harness::run::case::run_case(imp.as_mut(), &ctx, case);
    let path = dir.join("transcript.jsonl");
    let text = result.transcript.clone().unwrap_or_default();
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    let detail = dir.join("result.txt");
    std::fs::write(&detail, formats::case_detail(&result)).map_err(|e| format!("{}: {e}", detail.display()))?;
    Ok(format!("transcript of {agent} ({}): {}", result.status.as_str(), path.display()))
}

/// `conformance report`: a saved JSON report rendered again in any format, or, with `merge`,
/// the shards of one run merged and rendered.
fn report(
    files: &[PathBuf],
    merge: bool,
    allow_missing: bool,
    format: Format,
    profile: Option<&str>,
    outputs: &[(Format, PathBuf)],
) -> Result<ExitCode, String> {
    use harness::report::merge;
    let saved = match files {
        [one] if !merge => merge::read(one)?,
        _ if !merge => {
            return Err(format!(
                "{} reports given: one is rendered, several only merged (--merge, for the shards of one run)",
                files.len()
            ))
        }
        _ => {
            let shards = files.iter().map(|f| merge::read(f)).collect::<Result<Vec<_>, _>>()?;
            let merged = merge::merge(&shards, allow_missing)?;
            if let Some(m) = merged.run.merged.as_ref().filter(|m| !m.missing.is_empty()) {
                eprintln!(
                    "conformance: merged without the cases of the shards not given: {} (--allow-missing)",
                    merge::missing_message(&m.missing, m.shards)
                );
            }
            merged
        }
    };
    let summary = Summary::new(&saved.results, saved.unexpected.clone());
    // A report from before the suite version was recorded renders as it always did: with this
    // suite's.
    let mut run = saved.run.clone();
    run.suite_version = run.suite_version.or(formats::RunInfo::current().suite_version);
    let rendered =
        Rendered { hello: &saved.implementation, run: &run, results: &saved.results, summary: &summary, profile };
    emit(format_args!("{}\n", rendered.render(format)));
    for (format, path) in outputs {
        rendered.write(*format, path)?;
    }
    // A shard may run nothing; the whole run may not (as `run` refuses an unsharded one).
    let executed = saved.results.iter().filter(|r| !matches!(r.status, Status::Unsupported | Status::Skip)).count();
    if merge && executed == 0 {
        eprintln!(
            "conformance: no case executed in any shard: all {} cases were unsupported or skipped; a run that runs nothing cannot pass",
            saved.results.len()
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// A label from a case or an implementation on one line of the terminal: cut to
/// [`escape::FIELD_MAX`], its control and bidi characters (newlines too) shown as escapes.
fn field(s: &str) -> String {
    line(s, escape::FIELD_MAX)
}

/// `s` cut to `max` bytes and shown on one line of the terminal, as [`field`].
fn line(s: &str, max: usize) -> String {
    escape::terminal_line(&cut(s, max)).into_owned()
}

/// Writes to stdout, inert on a terminal: every control and bidi character in it, but newlines
/// and tabs, is shown as an escape ([`escape::terminal`]), whatever case or implementation it
/// came from. Only [`emit_painted`] writes escape sequences, the harness's own colours.
fn emit(text: std::fmt::Arguments<'_>) {
    emit_painted(&escape::terminal(&text.to_string()));
}

/// Writes `text` to stdout as it is: for the human report, whose text from data is escaped as it
/// is built ([`formats::human`]) and whose only escape sequences are its colours. A reader that
/// went away (`conformance list | head -1`) ends the program quietly with success, instead of a
/// panic on the broken pipe.
fn emit_painted(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("conformance: cannot write to stdout: {e}");
        std::process::exit(2);
    }
}

fn main() -> ExitCode {
    harness::run::adapter::export_env_canary();
    let cli = Cli::parse();
    harness::util::cleanup::become_subreaper();
    harness::util::cleanup::install_signal_handlers();
    let outcome = match cli.command {
        Command::Run(args) => run(&args),
        Command::List(c) => load(&c).map(|cases| {
            for case in cases {
                let s = &case.scenario;
                emit(format_args!(
                    "{:<14} {:<60} [{}] {}\n",
                    field(&s.id),
                    field(&case.name),
                    field(&s.capabilities.join(",")),
                    line(&s.title, escape::MESSAGE_MAX)
                ));
            }
            ExitCode::SUCCESS
        }),
        Command::Explain { id, cases } => {
            load(&cases).and_then(|c| harness::report::explain::explain(&corpus(&cases), &c, &id)).map(|text| {
                emit(format_args!("{text}\n"));
                ExitCode::SUCCESS
            })
        }
        Command::Repro { id, dir, transcript, adapter, agent, cases } => load(&cases).and_then(|c| {
            let mut msg = harness::report::explain::repro(&c, &id, &dir)?;
            if let (true, Some(agent)) = (transcript, &agent) {
                msg.push('\n');
                msg.push_str(&agent_transcript(&c, &id, &dir, agent)?);
            } else if transcript {
                msg.push('\n');
                msg.push_str(&record_transcript(&c, &id, &dir, adapter)?);
            }
            emit(format_args!("{msg}\n"));
            Ok(ExitCode::SUCCESS)
        }),
        Command::Coverage { verbose, cases } => load(&cases).and_then(|loaded| {
            let cov = harness::case::coverage::coverage_of(&corpus(&cases), &loaded)?;
            if verbose {
                for (id, by) in &cov.clauses {
                    emit(format_args!("{id:<14} {}\n", by.join(" ")));
                }
            }
            emit(format_args!("{}", harness::case::coverage::report(&cov)));
            Ok(if cov.is_complete() { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }),
        Command::Matrix { implementations, agents, reports, bench, out, jobs, timeout, filter, cases } => {
            let runs = Runs { implementations: &implementations, agents: &agents, jobs, timeout };
            load(&cases).and_then(|c| matrix(&c, &runs, &reports, bench.as_deref(), &out, filter))
        }
        Command::Smoke { adapter, timeout, cases } => load(&cases).and_then(|c| smoke(&c, &adapter, timeout)),
        Command::Agents { pins } => agents(&pins),
        Command::Bench { agents, implementations, modules, repeats, timeout, out } => {
            bench(&agents, &implementations, &modules, repeats, timeout, &out)
        }
        Command::Report { results, merge, allow_missing, format, profile, outputs } => {
            report(&results, merge, allow_missing, format, profile.as_deref(), &outputs)
        }
        Command::Expectations { write, run } => execute(&run).and_then(|(hello, results, _)| {
            if let Some(r) = results.iter().find(|r| r.fatal) {
                return Err(format!("the run ended early: {}", r.reason.clone().unwrap_or_default()));
            }
            let mut m = Manifest::from_results(&hello, &results);
            // A rewrite keeps what people wrote: the reason and link of every entry whose status
            // still holds, every SKIP, and every flaky entry whose case passed this time.
            if write.exists() {
                let passed = results
                    .iter()
                    .filter(|r| matches!(r.status, Status::Pass | Status::Xpass))
                    .map(|r| r.id.clone())
                    .collect();
                m.keep_notes_from(&Manifest::read(&write)?, &passed);
            }
            std::fs::write(&write, m.to_yaml()).map_err(|e| format!("{}: {e}", write.display()))?;
            eprintln!("wrote {} entries to {}", m.entries.len(), write.display());
            Ok(ExitCode::SUCCESS)
        }),
    };
    harness::util::cleanup::wait_if_stopping();
    // What an abandoned in-process worker still holds goes now: nothing of the run goes on.
    harness::util::cleanup::remove_leftovers();
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("conformance: {}", escape::terminal(&cut(&e, escape::ERROR_MAX)));
            ExitCode::from(2)
        }
    }
}
