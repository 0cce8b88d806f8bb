//! `conformance`: the CI gate. Runs the suite against the reference in-process or against any
//! implementation through an adapter, and exits 0 when every result is as expected, 1 on
//! unexpected results, 2 on usage, manifest or protocol errors.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use harness::implementation::{Implementation, InProcess};
use harness::load::{default_cases_dir, load_dir, Case};
use harness::manifest::Manifest;
use harness::report::{self, Summary};
use harness::run::{Level, Status};
use harness::suite::{parse_shard, run_all, Factory, Selection};

#[derive(Parser)]
#[command(name = "conformance", version, about = "The conformance suite for project instruction loaders")]
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
        #[command(flatten)]
        cases: CasesArg,
    },
    /// Reports seed clauses and decisions no case covers, and cases that cover none; exit 1 on a gap.
    Coverage {
        /// Print every clause with the cases that cover it.
        #[arg(long)]
        verbose: bool,
        #[command(flatten)]
        cases: CasesArg,
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
    #[arg(long)]
    adapter: Option<String>,
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
    /// The expectations manifest.
    #[arg(long)]
    expectations: Option<PathBuf>,
    /// The report on stdout (a human summary also goes to stderr for the other formats).
    #[arg(long, value_enum, default_value = "human")]
    format: Format,
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

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Format {
    Human,
    Json,
    Junit,
    Markdown,
    Badge,
}

fn load(cases: &CasesArg) -> Result<Vec<Case>, String> {
    let dir = cases.cases.clone().unwrap_or_else(default_cases_dir);
    let cases = load_dir(&dir).map_err(|errs| errs.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))?;
    if cases.is_empty() {
        return Err(format!("no cases found under {} (a run that finds zero cases fails)", dir.display()));
    }
    Ok(cases)
}

/// The implementation factory of a run, and the fake HOME its adapters get (removed when the run
/// ends: the returned directory is dropped then).
fn factory(args: &RunArgs) -> Result<(Box<Factory<'static>>, Option<tempfile::TempDir>), String> {
    let timeout = Duration::from_secs(args.timeout);
    let Some(cmd) = args.adapter.clone() else {
        let make = move || Ok(Box::new(InProcess::with_timeout(timeout)) as Box<dyn Implementation + Send>);
        return Ok((Box::new(make), None));
    };
    let max_restarts = args.max_restarts;
    let home_dir = tempfile::Builder::new().prefix("conformance-home-").tempdir().map_err(|e| e.to_string())?;
    let home = home_dir.path().to_path_buf();
    let one_shot = args.one_shot;
    let make = move || {
        let imp: Box<dyn Implementation + Send> = if one_shot {
            Box::new(harness::adapter::OneShotAdapter::new(cmd.clone(), home.clone(), timeout))
        } else {
            Box::new(harness::adapter::ProcessAdapter::new(cmd.clone(), home.clone(), timeout, max_restarts))
        };
        Ok(imp)
    };
    Ok((Box::new(make), Some(home_dir)))
}

fn rewrite_hint(args: &RunArgs, path: &Path) -> String {
    let mut cmd = format!("conformance expectations --write {}", path.display());
    if let Some(a) = &args.adapter {
        cmd.push_str(&format!(" --adapter '{a}'"));
    }
    if let Some(c) = &args.cases.cases {
        cmd.push_str(&format!(" --cases {}", c.display()));
    }
    cmd
}

/// Runs the selection; `Err((message, code))` for exit-2 conditions.
fn execute(args: &RunArgs) -> Result<(harness::Hello, Vec<harness::run::CaseResult>, Manifest), String> {
    let cases = load(&args.cases)?;
    let shard = args.shard.as_deref().map(parse_shard).transpose()?;
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
    let (factory, home) = factory(args)?;
    let _home_guard = home.as_ref().map(|h| harness::cleanup::register_dir(h.path().to_path_buf()));
    let level = match args.level {
        LevelArg::All => Level::All,
        LevelArg::Seed => Level::Seed,
    };
    let outcome = run_all(&selected, factory.as_ref(), usize::try_from(args.jobs).unwrap_or(1), &manifest, level, true);
    // Every adapter has been stopped and reaped by now: any child left is a descendant that
    // escaped its process group, re-parented to the harness.
    drop(factory);
    let escaped = harness::cleanup::reap_orphans();
    if escaped > 0 {
        eprintln!("conformance: killed {escaped} process(es) the adapter left behind outside its process group");
    }
    let (hello, results) = outcome?;
    if let Some(r) = results.iter().find(|r| r.fatal) {
        return Err(format!("the run ended early: {}", r.reason.clone().unwrap_or_default()));
    }
    let executed = results.iter().filter(|r| !matches!(r.status, Status::Unsupported | Status::Skip)).count();
    if executed == 0 {
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

fn run(args: &RunArgs) -> Result<ExitCode, String> {
    let (hello, mut results, manifest) = execute(args)?;
    let unexpected: Vec<String> =
        results.iter_mut().filter_map(|r| (!manifest.apply(r)).then(|| r.id.clone())).collect();
    let dropped = manifest.dropped_support(&hello);
    let summary = Summary::new(&results, unexpected);
    use std::io::IsTerminal;
    let terminal =
        if args.format == Format::Human { std::io::stdout().is_terminal() } else { std::io::stderr().is_terminal() };
    let human = report::human(&results, &summary, report::use_colour(terminal));
    let out = match args.format {
        Format::Human => human.clone(),
        Format::Json => report::json(&hello, &results, &summary),
        Format::Junit => report::junit(&hello, &results, &summary),
        Format::Markdown => report::markdown(&hello, &results, &summary),
        Format::Badge => report::badge(&results),
    };
    println!("{out}");
    if args.format != Format::Human {
        eprint!("{human}");
    }
    if !dropped.is_empty() {
        eprintln!(
            "conformance: the implementation declares less than when its manifest was written: {} no longer \
             declared (cases needing them are now UNSUPPORTED, not run)",
            dropped.join(", ")
        );
    }
    if summary.unexpected.is_empty() && dropped.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(path) = &args.expectations {
        eprintln!("to accept these results, rewrite the manifest: {}", rewrite_hint(args, path));
    }
    Ok(ExitCode::from(1))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    harness::cleanup::become_subreaper();
    harness::cleanup::install_signal_handlers();
    let outcome = match cli.command {
        Command::Run(args) => run(&args),
        Command::List(c) => load(&c).map(|cases| {
            for case in cases {
                let s = &case.scenario;
                println!("{:<14} {:<60} [{}] {}", s.id, case.name, s.capabilities.join(","), s.title);
            }
            ExitCode::SUCCESS
        }),
        Command::Explain { id, cases } => load(&cases).and_then(|c| harness::explain::explain(&c, &id)).map(|text| {
            println!("{text}");
            ExitCode::SUCCESS
        }),
        Command::Repro { id, dir, cases } => {
            load(&cases).and_then(|c| harness::explain::repro(&c, &id, &dir)).map(|msg| {
                println!("{msg}");
                ExitCode::SUCCESS
            })
        }
        Command::Coverage { verbose, cases } => load(&cases).and_then(|loaded| {
            let dir = cases.cases.clone().unwrap_or_else(default_cases_dir);
            let clauses = harness::coverage::load_clauses(&dir)?;
            let cov = harness::coverage::coverage(&clauses, &loaded);
            if verbose {
                for (id, by) in &cov.clauses {
                    println!("{id:<14} {}", by.join(" "));
                }
            }
            print!("{}", harness::coverage::report(&cov));
            Ok(if cov.is_complete() { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }),
        Command::Expectations { write, run } => execute(&run).and_then(|(hello, results, _)| {
            let m = Manifest::from_results(&hello, &results);
            std::fs::write(&write, m.to_yaml()).map_err(|e| format!("{}: {e}", write.display()))?;
            eprintln!("wrote {} entries to {}", m.entries.len(), write.display());
            Ok(ExitCode::SUCCESS)
        }),
    };
    harness::cleanup::wait_if_stopping();
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("conformance: {e}");
            ExitCode::from(2)
        }
    }
}
