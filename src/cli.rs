//! Command-line interface: clap parses, the library measures, this module prints.
//!
//! ```text
//! enginetop bench pool [--pool simple|eigen|chase-lev|rayon|all] [--threads T] [--json]
//!                      [--reps N] [--bench spawn,tree,parallel_for,wake_hot,wake_cold] [--quick]
//! enginetop bench profiler [--json] [--reps N] [--threads T] [--quick]
//!                          [--bench record_event,record_disabled,clock_read,collect_event,
//!                                   pool_spawn,pool_tree,random_dag]
//! enginetop trace demo [--out FILE] [--pool simple|eigen|chase-lev] [--threads T]
//! enginetop trace validate FILE
//! ```
//! New commands go in [`Command`], new benchmark families in [`BenchTarget`].
use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::builder::PossibleValuesParser;
use clap::{Args, Parser, Subcommand};

use enginetop::bench::pool::{run_bench, Bench, BenchResult, Contender, PoolBenchConfig, Sizes};
use enginetop::bench::profiler::{self as profiler_bench, ProfilerBenchConfig};
use enginetop::bench::report;
use enginetop::pool::PoolKind;
use enginetop::profiler::demo::{run_pool_demo, DemoOptions};
use enginetop::profiler::{validate, Profiler, ProfilerOptions};

/// enginetop: Eigen's thread pools and MXNet's dependency engine, re-created and made visible.
#[derive(Debug, Parser)]
#[command(name = "enginetop", version, about, arg_required_else_help = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run benchmarks and print their figures.
    Bench(BenchArgs),
    /// Record and check Chrome traces.
    Trace(TraceArgs),
}

#[derive(Debug, Args)]
struct TraceArgs {
    #[command(subcommand)]
    action: TraceAction,
}

#[derive(Debug, Subcommand)]
enum TraceAction {
    /// Check a Chrome trace file: it must load cleanly in Perfetto and chrome://tracing.
    Validate {
        /// The trace (JSON).
        file: std::path::PathBuf,
    },
    /// Run a short profiled pool workload and export its Chrome trace.
    Demo(TraceDemoArgs),
}

#[derive(Debug, Args)]
struct TraceDemoArgs {
    /// Where to write the trace.
    #[arg(long, default_value = "enginetop-demo.trace.json")]
    out: std::path::PathBuf,

    /// The pool kind to run.
    #[arg(long, default_value = "eigen", value_parser = PossibleValuesParser::new(["simple", "eigen", "chase-lev"]))]
    pool: String,

    /// Worker threads (the demo grows the pool to twice this, back, and up again).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=512))]
    threads: u16,
}

#[derive(Debug, Args)]
struct BenchArgs {
    #[command(subcommand)]
    target: BenchTarget,
}

#[derive(Debug, Subcommand)]
enum BenchTarget {
    /// Thread pool benchmarks: every pool kind and rayon, interleaved rep by rep.
    Pool(PoolBenchArgs),
    /// Profiler benchmarks: ns per recorded event, and profiled vs unprofiled ratios.
    Profiler(ProfilerBenchArgs),
}

#[derive(Debug, Args)]
struct ProfilerBenchArgs {
    /// Print one JSON object per line instead of a table.
    #[arg(long)]
    json: bool,

    /// Reps per benchmark (default 5, 3 with --quick).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    reps: Option<u32>,

    /// Threads recording at once for the all-threads figure (default: every core).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: Option<u16>,

    /// About a tenth of the work, for smoke runs.
    #[arg(long)]
    quick: bool,

    /// Benchmarks to run (comma-separated; default all).
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = PossibleValuesParser::new(profiler_bench::BENCHES),
    )]
    bench: Vec<String>,
}

impl ProfilerBenchArgs {
    fn config(&self) -> ProfilerBenchConfig {
        let mut config = if self.quick {
            ProfilerBenchConfig::quick()
        } else {
            ProfilerBenchConfig::full()
        };
        if let Some(reps) = self.reps {
            config.reps = reps as usize;
        }
        if let Some(threads) = self.threads {
            config.threads = usize::from(threads);
        }
        config
    }
}

/// Pool names `--pool` accepts: every pool kind, rayon, and `all`.
fn pool_choices() -> Vec<&'static str> {
    let mut choices: Vec<&'static str> =
        Contender::all().into_iter().map(Contender::name).collect();
    choices.push("all");
    choices
}

fn bench_choices() -> Vec<&'static str> {
    Bench::ALL.into_iter().map(Bench::as_str).collect()
}

#[derive(Debug, Args)]
struct PoolBenchArgs {
    /// Pools to measure (comma-separated).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "all",
        value_parser = PossibleValuesParser::new(pool_choices()),
    )]
    pool: Vec<String>,

    /// Worker threads in every pool.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: u16,

    /// Print one JSON object per line instead of a table.
    #[arg(long)]
    json: bool,

    /// Reps per benchmark (default: 5, and 9 for parallel_for).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    reps: Option<u32>,

    /// Benchmarks to run (comma-separated).
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = PossibleValuesParser::new(bench_choices()),
    )]
    bench: Vec<String>,

    /// About a tenth of the work, for smoke runs.
    #[arg(long)]
    quick: bool,
}

impl PoolBenchArgs {
    fn config(&self) -> Result<PoolBenchConfig> {
        let mut contenders = Vec::new();
        for name in &self.pool {
            let named = if name == "all" {
                Contender::all()
            } else {
                vec![name.parse::<Contender>()?]
            };
            for contender in named {
                if !contenders.contains(&contender) {
                    contenders.push(contender);
                }
            }
        }
        Ok(PoolBenchConfig {
            threads: usize::from(self.threads),
            reps: self.reps.map(|reps| reps as usize),
            sizes: if self.quick {
                Sizes::quick()
            } else {
                Sizes::full()
            },
            contenders,
        })
    }

    fn benches(&self) -> Result<Vec<Bench>> {
        if self.bench.is_empty() {
            return Ok(Bench::ALL.to_vec());
        }
        let mut benches = Vec::new();
        for name in &self.bench {
            let bench = name.parse::<Bench>()?;
            if !benches.contains(&bench) {
                benches.push(bench);
            }
        }
        Ok(benches)
    }
}

/// Parses the command line and runs it; errors are printed with their causes.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Some(Command::Bench(BenchArgs {
            target: BenchTarget::Pool(args),
        })) => bench_pool(&args),
        Some(Command::Bench(BenchArgs {
            target: BenchTarget::Profiler(args),
        })) => bench_profiler(&args),
        Some(Command::Trace(TraceArgs { action })) => match action {
            TraceAction::Validate { file } => trace_validate(&file),
            TraceAction::Demo(args) => trace_demo(&args),
        },
        None => Ok(()),
    }
}

/// `enginetop bench profiler`: one JSON line per figure, or a table.
fn bench_profiler(args: &ProfilerBenchArgs) -> Result<()> {
    let mut config = args.config();
    if !args.json {
        eprintln!("running profiler benchmarks ...");
    }
    // The engine's random_dag runner is wired here once the engine is merged:
    // config.random_dag = Some(Box::new(|profiler| /* run random_dag with `profiler` */));
    let selected: Vec<&str> = if args.bench.is_empty() {
        profiler_bench::BENCHES.to_vec()
    } else {
        args.bench.iter().map(String::as_str).collect()
    };
    let results = profiler_bench::run_selected(&mut config, &selected)
        .context("profiler benchmark failed")?;
    if args.json {
        let mut stdout = std::io::stdout().lock();
        for result in &results {
            let line = serde_json::to_string(result).context("serializing a result")?;
            writeln!(stdout, "{line}").context("writing to stdout")?;
        }
        stdout.flush().context("writing to stdout")?;
    } else {
        print!("{}", profiler_bench::table(&results));
    }
    Ok(())
}

/// `enginetop trace validate FILE`: prints what the trace holds, or every problem (exit 1).
fn trace_validate(file: &std::path::Path) -> Result<()> {
    let summary = validate::validate_file(file)
        .map_err(|problems| anyhow::anyhow!("{}: {problems}", file.display()))?;
    println!(
        "{}: valid Chrome trace: {} events, {} named tracks, {} slices, {} flows",
        file.display(),
        summary.events,
        summary.tracks,
        summary.slices,
        summary.flows
    );
    Ok(())
}

/// `enginetop trace demo`: a profiled pool workload, exported and validated.
fn trace_demo(args: &TraceDemoArgs) -> Result<()> {
    let profiler = Profiler::new(ProfilerOptions::default())?;
    let options = DemoOptions {
        kind: args.pool.parse::<PoolKind>()?,
        threads: usize::from(args.threads),
        ..DemoOptions::default()
    };
    let report = run_pool_demo(&profiler, &options).context("the demo pool failed")?;
    let export = profiler.export_chrome_file(&args.out)?;
    eprint!("{}", profiler.summary().table());
    println!(
        "{}: {} ops ({} failed), {} resizes; {} trace events, {} flows, {} dropped",
        args.out.display(),
        report.ops,
        report.failed_ops,
        report.resizes,
        export.trace_events,
        export.flows,
        profiler.snapshot().dropped_events
    );
    trace_validate(&args.out)
}

/// `enginetop bench pool`: JSON lines as each benchmark finishes, or a table at the end.
fn bench_pool(args: &PoolBenchArgs) -> Result<()> {
    let config = args.config()?;
    let mut results: Vec<BenchResult> = Vec::new();
    for bench in args.benches()? {
        if !args.json {
            eprintln!("running {bench} ...");
        }
        let bench_results =
            run_bench(bench, &config).with_context(|| format!("benchmark `{bench}` failed"))?;
        if args.json {
            print_json_lines(&bench_results)?;
        }
        results.extend(bench_results);
    }
    if !args.json {
        print!("{}", report::table(&results));
    }
    Ok(())
}

fn print_json_lines(results: &[BenchResult]) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    for result in results {
        writeln!(stdout, "{}", report::json_line(result)).context("writing to stdout")?;
    }
    stdout.flush().context("writing to stdout")
}
