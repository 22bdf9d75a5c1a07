//! Command-line interface: clap parses, the library measures, this module prints.
//!
//! ```text
//! enginetop bench pool [--pool simple|eigen|chase-lev|rayon|all] [--threads T] [--json]
//!                      [--reps N] [--bench spawn,tree,parallel_for,wake_hot,wake_cold] [--quick]
//! enginetop bench gemm [--threads T] [--json] [--size N] [--reps N]
//! ```
//! New commands go in [`Command`], new benchmark families in [`BenchTarget`].
use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::builder::PossibleValuesParser;
use clap::{Args, Parser, Subcommand};

use enginetop::bench::gemm::{self as gemm_bench, GemmBenchConfig};
use enginetop::bench::pool::{run_bench, Bench, BenchResult, Contender, PoolBenchConfig, Sizes};
use enginetop::bench::report;

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
    /// This machine's square f32 GEMM peak in GFLOP/s through the intra-op pool.
    Gemm(GemmBenchArgs),
}

#[derive(Debug, Args)]
struct GemmBenchArgs {
    /// Workers of the intra-op pool (the GEMM is called from one of them).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: u16,

    /// Print one JSON object instead of a line of text.
    #[arg(long)]
    json: bool,

    /// Side of the square matrices.
    #[arg(long, default_value_t = gemm_bench::DEFAULT_SIZE as u32,
          value_parser = clap::value_parser!(u32).range(1..=16_384))]
    size: u32,

    /// Timed reps; the figure is over the median.
    #[arg(long, default_value_t = gemm_bench::DEFAULT_REPS as u32,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    reps: u32,
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
            target: BenchTarget::Gemm(args),
        })) => bench_gemm(&args),
        None => Ok(()),
    }
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

/// `enginetop bench gemm`: one measurement, printed; at the default size it also refreshes the
/// cached peak the workload summary reads.
fn bench_gemm(args: &GemmBenchArgs) -> Result<()> {
    let config = GemmBenchConfig {
        threads: usize::from(args.threads),
        size: args.size as usize,
        reps: args.reps as usize,
        ..GemmBenchConfig::new(usize::from(args.threads))
    };
    let peak = gemm_bench::run_gemm_bench(&config).context("the GEMM benchmark failed")?;
    if config.size == gemm_bench::DEFAULT_SIZE {
        if let Some(dir) = gemm_bench::default_cache_dir() {
            // Best-effort, like the cache itself: a read-only home still gets its figure.
            let _ = gemm_bench::store_in_cache(&dir, &peak);
        }
    }
    let line = if args.json {
        peak.json_line()
    } else {
        peak.text_line()
    };
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}").context("writing to stdout")?;
    stdout.flush().context("writing to stdout")
}

fn print_json_lines(results: &[BenchResult]) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    for result in results {
        writeln!(stdout, "{}", report::json_line(result)).context("writing to stdout")?;
    }
    stdout.flush().context("writing to stdout")
}
