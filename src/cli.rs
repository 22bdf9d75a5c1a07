//! Command-line interface: clap parses, the library measures, this module prints.
//!
//! ```text
//! enginetop --workload NAME|PATH [--set NAME=VALUE]... [--iterations N | --duration S]
//!           [--engine naive|pooled|per-device] [--pool simple|eigen|chase-lev]
//!           [--inter N] [--intra M] [--gpus ...] [--trace FILE] [--summary table|json]
//!           [--headless] [--gemm-peak GFLOPS]
//! enginetop bench pool [--pool simple|eigen|chase-lev|rayon|all] [--threads T] [--json]
//!                      [--reps N] [--bench spawn,tree,parallel_for,wake_hot,wake_cold] [--quick]
//! enginetop bench engine [--engine naive|pooled|per-device|all] [--pool simple|eigen|chase-lev]
//!                        [--threads T] [--json] [--reps N]
//!                        [--bench independent,chain,random_dag,wavefront,binary_tree] [--quick]
//! enginetop workloads [WORKLOAD [--set NAME=VALUE]...]
//! enginetop devices [--json] [--gpus none|auto|cuda|sim:N]
//! enginetop bench gemm [--threads T] [--json] [--size N] [--reps N]
//! ```
//! New commands go in [`Command`], new benchmark families in [`BenchTarget`]; the main
//! command's flags are [`RunArgs`].
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::builder::PossibleValuesParser;
use clap::{Args, Parser, Subcommand};

use enginetop::bench::engine::{self as engine_bench, EngineBenchConfig, EngineBenchResult, Shape};
use enginetop::bench::gemm::{self as gemm_bench, GemmBenchConfig};
use enginetop::bench::pool::{run_bench, Bench, BenchResult, Contender, PoolBenchConfig, Sizes};
use enginetop::bench::report;
use enginetop::config::{ConfigOverrides, RuntimeConfig};
use enginetop::device::cuda;
use enginetop::device::discover::{self, GpuSelection};
use enginetop::engine::EngineKind;
use enginetop::pool::PoolKind;
use enginetop::workload;
use enginetop::workload::run::{run_workload, Progress, RunHooks, RunLength, RunOptions};

/// enginetop: Eigen's thread pools and MXNet's dependency engine, re-created and made visible.
///
/// Run a workload with `enginetop --workload resnet-like` (see `enginetop workloads`).
#[derive(Debug, Parser)]
#[command(
    name = "enginetop",
    version,
    about,
    arg_required_else_help = true,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,

    #[command(flatten)]
    run: RunArgs,

    /// GPUs: none, auto (CUDA if usable, else one simulated GPU), cuda, or sim:N
    /// [env: ENGINETOP_GPUS; default: auto].
    #[arg(long, global = true, value_name = "none|auto|cuda|sim:N")]
    gpus: Option<GpuSelection>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run benchmarks and print their figures.
    Bench(BenchArgs),
    /// List the shipped workloads, or load one (a name or a .toml path) and summarise it.
    Workloads(WorkloadsArgs),
    /// List CPU and GPU devices, and which GPU backend `auto` picks.
    Devices(DevicesArgs),
}

/// How `--summary` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum SummaryFormat {
    /// A table for people.
    Table,
    /// One JSON object.
    Json,
}

/// The main command: run a workload and summarise it.
#[derive(Debug, Args)]
struct RunArgs {
    /// Run this workload: a shipped name (see `enginetop workloads`) or a .toml path.
    #[arg(long, value_name = "NAME|PATH")]
    workload: Option<String>,

    /// Override one of the workload's [params] (repeatable), e.g. --set batch=4.
    #[arg(long = "set", value_name = "NAME=VALUE", requires = "workload")]
    set: Vec<String>,

    /// Iterations to run [default: as many as fit in 3 seconds].
    #[arg(long, value_name = "N", value_parser = parse_iterations, conflicts_with = "duration")]
    iterations: Option<u64>,

    /// Run iterations until this many seconds have passed (e.g. 10 or 2.5).
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    duration: Option<Duration>,

    /// The dependency engine: naive, pooled, per-device (or MXNet's names)
    /// [env: ENGINETOP_ENGINE, MXNET_ENGINE_TYPE; default: per-device].
    #[arg(long, value_name = "ENGINE", value_parser = |name: &str| name.parse::<EngineKind>())]
    engine: Option<EngineKind>,

    /// The pool kind of the engine's workers and of the intra-op pool: simple, eigen,
    /// chase-lev [env: ENGINETOP_POOL; default: eigen].
    #[arg(long, value_name = "POOL", value_parser = |name: &str| name.parse::<PoolKind>())]
    pool: Option<PoolKind>,

    /// Inter-op threads: the engine's CPU workers, ops running at once (0 = one per CPU)
    /// [env: ENGINETOP_INTER_OP_THREADS, TF_NUM_INTEROP_THREADS; default: 0].
    #[arg(long = "inter", visible_alias = "inter-op-threads", value_name = "N")]
    inter: Option<usize>,

    /// Intra-op threads: the kernels' pool, threads inside one op (0 = one per CPU)
    /// [env: ENGINETOP_INTRA_OP_THREADS, TF_NUM_INTRAOP_THREADS; default: 0].
    #[arg(long = "intra", visible_alias = "intra-op-threads", value_name = "M")]
    intra: Option<usize>,

    /// Export a Chrome trace of the run to FILE (arrives with the profiler).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,

    /// How to print the summary.
    #[arg(long, value_enum, default_value_t = SummaryFormat::Table)]
    summary: SummaryFormat,

    /// No dashboard: a progress bar on stderr (when it is a terminal), then the summary.
    /// Implied when stdout is not a terminal.
    #[arg(long)]
    headless: bool,

    /// Compare with this GEMM peak (GFLOP/s) instead of the measured one (measured once per
    /// machine and cached; `enginetop bench gemm` refreshes it).
    #[arg(long, value_name = "GFLOPS", value_parser = parse_gflops)]
    gemm_peak: Option<f64>,
}

/// How long a run goes when neither `--iterations` nor `--duration` is given.
const DEFAULT_RUN_SECONDS: u64 = 3;

fn parse_iterations(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(count) if count >= 1 => Ok(count),
        _ => Err("expected a whole number of iterations, at least 1".to_string()),
    }
}

fn parse_seconds(text: &str) -> Result<Duration, String> {
    let seconds = text.trim().trim_end_matches('s');
    match seconds.parse::<f64>() {
        Ok(value) if value > 0.0 && value <= 1e9 => Ok(Duration::from_secs_f64(value)),
        _ => Err("expected a number of seconds above 0, e.g. 10 or 2.5".to_string()),
    }
}

fn parse_gflops(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(value) if value > 0.0 && value.is_finite() => Ok(value),
        _ => Err("expected GFLOP/s above 0, e.g. 150".to_string()),
    }
}

#[derive(Debug, Args)]
struct WorkloadsArgs {
    /// A shipped workload's name or the path of a workload file to check and summarise.
    workload: Option<String>,

    /// Override one of the workload's [params] (repeatable), e.g. --set batch=16.
    #[arg(long = "set", value_name = "NAME=VALUE", requires = "workload")]
    set: Vec<String>,
}

#[derive(Debug, Args)]
struct DevicesArgs {
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
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
    /// Dependency engine benchmarks: every engine, interleaved rep by rep, checked against a
    /// sequential run.
    Engine(EngineBenchArgs),
    /// This machine's square f32 GEMM peak in GFLOP/s through the intra-op pool.
    Gemm(GemmBenchArgs),
}

fn engine_choices() -> Vec<&'static str> {
    let mut choices: Vec<&'static str> = EngineKind::ALL
        .into_iter()
        .map(EngineKind::as_str)
        .collect();
    choices.push("all");
    choices
}

fn engine_pool_choices() -> Vec<&'static str> {
    PoolKind::ALL.into_iter().map(PoolKind::as_str).collect()
}

fn shape_choices() -> Vec<&'static str> {
    Shape::ALL.into_iter().map(Shape::as_str).collect()
}

#[derive(Debug, Args)]
struct EngineBenchArgs {
    /// Engines to measure (comma-separated).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "all",
        value_parser = PossibleValuesParser::new(engine_choices()),
    )]
    engine: Vec<String>,

    /// The pool kind of the threaded engines' CPU workers.
    #[arg(long, default_value = "eigen", value_parser = PossibleValuesParser::new(engine_pool_choices()))]
    pool: String,

    /// CPU worker threads.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: u16,

    /// Print one JSON object per line instead of a table.
    #[arg(long)]
    json: bool,

    /// Reps per benchmark.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    reps: u32,

    /// Benchmarks to run (comma-separated).
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = PossibleValuesParser::new(shape_choices()),
    )]
    bench: Vec<String>,

    /// A tenth of the work, for smoke runs.
    #[arg(long)]
    quick: bool,
}

impl EngineBenchArgs {
    fn config(&self) -> Result<EngineBenchConfig> {
        let mut engines = Vec::new();
        for name in &self.engine {
            let named = if name == "all" {
                EngineKind::ALL.to_vec()
            } else {
                vec![name.parse::<EngineKind>()?]
            };
            for kind in named {
                if !engines.contains(&kind) {
                    engines.push(kind);
                }
            }
        }
        Ok(EngineBenchConfig {
            engines,
            pool_kind: self.pool.parse()?,
            threads: usize::from(self.threads),
            reps: self.reps as usize,
            scale: if self.quick { 0.1 } else { 1.0 },
        })
    }

    fn shapes(&self) -> Result<Vec<Shape>> {
        if self.bench.is_empty() {
            return Ok(Shape::ALL.to_vec());
        }
        let mut shapes = Vec::new();
        for name in &self.bench {
            let shape = name.parse::<Shape>()?;
            if !shapes.contains(&shape) {
                shapes.push(shape);
            }
        }
        Ok(shapes)
    }
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
    let overrides = ConfigOverrides {
        gpus: cli.gpus,
        ..Default::default()
    };
    match cli.command {
        Some(Command::Bench(BenchArgs {
            target: BenchTarget::Pool(args),
        })) => bench_pool(&args),
        Some(Command::Bench(BenchArgs {
            target: BenchTarget::Engine(args),
        })) => bench_engine(&args),
        Some(Command::Workloads(args)) => workloads(&args),
        Some(Command::Devices(args)) => devices(&args, &overrides),
        Some(Command::Bench(BenchArgs {
            target: BenchTarget::Gemm(args),
        })) => bench_gemm(&args),
        None => run_main(&cli.run, overrides),
    }
}

/// `enginetop --workload ...`: load, run headless, print the summary.
fn run_main(args: &RunArgs, overrides: ConfigOverrides) -> Result<()> {
    let Some(spec) = &args.workload else {
        anyhow::bail!(
            "--workload is required: name a shipped workload ({}) or a .toml file",
            workload::SHIPPED
                .iter()
                .map(|shipped| shipped.name)
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    if let Some(path) = &args.trace {
        anyhow::bail!(
            "--trace {}: trace export is not available yet; it arrives with the profiler",
            path.display()
        );
    }
    let config = RuntimeConfig::load(&ConfigOverrides {
        engine_kind: args.engine,
        pool_kind: args.pool,
        inter_op_threads: args.inter,
        intra_op_threads: args.intra,
        ..overrides
    })?;
    for warning in config.warnings() {
        eprintln!("warning: {warning}");
    }
    let graph = workload::load_spec(spec, &workload::Overrides::from_args(&args.set)?)?;
    if !args.headless && std::io::stdout().is_terminal() {
        eprintln!("note: the live dashboard arrives with the TUI; running headless for now");
    }
    let intra = config.effective_intra_op_threads();
    let options = RunOptions {
        length: run_length(args),
        gemm_peak_gflops: args.gemm_peak.or_else(|| gemm_peak(intra)),
        config,
    };
    let hooks = RunHooks {
        progress: std::io::stderr().is_terminal().then(progress_bar),
        ..RunHooks::default()
    };
    let show_progress = hooks.progress.is_some();
    let summary = run_workload(graph, &options, hooks).inspect_err(|_| {
        if show_progress {
            eprint!("\r\x1b[2K"); // the error goes on a clean line
        }
    })?;
    let text = match args.summary {
        SummaryFormat::Table => summary.to_string(),
        SummaryFormat::Json => format!("{}\n", summary.json()),
    };
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .context("writing to stdout")?;
    stdout.flush().context("writing to stdout")
}

fn run_length(args: &RunArgs) -> RunLength {
    match (args.iterations, args.duration) {
        (Some(iterations), _) => RunLength::Iterations(iterations),
        (None, Some(duration)) => RunLength::Duration(duration),
        (None, None) => RunLength::Duration(Duration::from_secs(DEFAULT_RUN_SECONDS)),
    }
}

/// This machine's GEMM peak on `threads` intra-op threads: from the cache, or measured once
/// (saying so on stderr); `None` with a warning if it cannot be measured.
fn gemm_peak(threads: usize) -> Option<f64> {
    if !gemm_peak_is_cached(threads) {
        eprintln!("measuring this machine's GEMM peak once (cached)...");
    }
    match gemm_bench::cached_gemm_peak(threads) {
        Ok(peak) => Some(peak),
        Err(err) => {
            eprintln!("warning: no GEMM peak to compare with: {err}");
            None
        }
    }
}

/// Whether the GEMM peak cache holds a default-size figure for `threads` threads.
fn gemm_peak_is_cached(threads: usize) -> bool {
    let Some(dir) = gemm_bench::default_cache_dir() else {
        return false;
    };
    std::fs::read_to_string(gemm_bench::cache_file(&dir))
        .ok()
        .and_then(|text| {
            serde_json::from_str::<std::collections::BTreeMap<String, gemm_bench::GemmPeak>>(&text)
                .ok()
        })
        .is_some_and(|entries| {
            entries.values().any(|peak| {
                peak.threads == threads
                    && peak.size == gemm_bench::DEFAULT_SIZE
                    && peak.pool == PoolKind::Eigen
            })
        })
}

/// A one-line progress bar on stderr, redrawn in place, cleared when the run ends.
fn progress_bar() -> Box<dyn FnMut(Progress) + Send> {
    Box::new(|progress: Progress| {
        let mut stderr = std::io::stderr().lock();
        let finished = progress.fraction() >= 1.0;
        // Best-effort: a progress bar that cannot be drawn is no reason to stop the run.
        let _ = if finished {
            write!(stderr, "\r\x1b[2K")
        } else {
            write!(stderr, "\r{}\x1b[K", progress.bar(30))
        };
        let _ = stderr.flush();
    })
}

/// `enginetop devices`: CPU cores and pools, GPUs per backend, what `auto` picks.
fn devices(args: &DevicesArgs, overrides: &ConfigOverrides) -> Result<()> {
    let config = RuntimeConfig::load(overrides)?;
    let report = discover::devices_report(&config, &cuda::probe());
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{report}");
    }
    Ok(())
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

/// `enginetop bench engine`: JSON lines as each benchmark finishes, or a table at the end;
/// fails when a result differs from the sequential run.
fn bench_engine(args: &EngineBenchArgs) -> Result<()> {
    let config = args.config()?;
    let mut results: Vec<EngineBenchResult> = Vec::new();
    for shape in args.shapes()? {
        if !args.json {
            eprintln!("running {shape} ...");
        }
        let shape_results = engine_bench::run_shape(shape, &config)
            .with_context(|| format!("engine benchmark `{shape}` failed"))?;
        if args.json {
            let mut stdout = std::io::stdout().lock();
            for result in &shape_results {
                writeln!(stdout, "{}", engine_bench::json_line(result))
                    .context("writing to stdout")?;
            }
            stdout.flush().context("writing to stdout")?;
        }
        results.extend(shape_results);
    }
    if !args.json {
        print!("{}", engine_bench::table(&results));
    }
    let wrong: Vec<String> = results
        .iter()
        .filter(|result| !result.correct)
        .map(|result| format!("{} on {}", result.bench, result.engine))
        .collect();
    if !wrong.is_empty() {
        anyhow::bail!(
            "results differ from the sequential run: {} (a dependency was not respected)",
            wrong.join(", ")
        );
    }
    Ok(())
}

/// `enginetop workloads`: the catalog, or one workload's summary (or its load error).
fn workloads(args: &WorkloadsArgs) -> Result<()> {
    let Some(spec) = &args.workload else {
        print!("{}", workload::catalog());
        return Ok(());
    };
    let overrides = workload::Overrides::from_args(&args.set)?;
    let graph = workload::load_spec(spec, &overrides)?;
    print!("{}", workload::summary(&graph));
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
