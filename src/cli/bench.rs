//! `enginetop bench ...`: the benchmark families, each measured by the library and printed
//! here as a table or as JSON lines.
use std::io::Write;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::builder::PossibleValuesParser;
use clap::{Args, Subcommand};

use crate::bench::engine::{self as engine_bench, EngineBenchConfig, EngineBenchResult, Shape};
use crate::bench::gemm::{self as gemm_bench, GemmBenchConfig};
use crate::bench::gpu as gpu_bench;
use crate::bench::overhead::{self as overhead_bench, OverheadBenchConfig};
use crate::bench::pool::{run_bench, Bench, BenchResult, Contender, PoolBenchConfig, Sizes};
use crate::bench::profiler::{self as profiler_bench, ProfilerBenchConfig};
use crate::bench::report;
use crate::bench::scaling::{self as scaling_bench, ScalingBenchConfig};
use crate::bench::tune as tune_bench;
use crate::config::{ConfigOverrides, RuntimeConfig};
use crate::device::cuda;
use crate::device::discover;
use crate::device::sim::SimModel;
use crate::engine::{EngineKind, GpuSyncMode};
use crate::pool::PoolKind;
use crate::tune::Space;

/// How a benchmark family prints its results: the flag every family takes.
#[derive(Debug, Args)]
struct Output {
    /// Print JSON, one object per line for each result, instead of text.
    #[arg(long)]
    json: bool,
}

/// How much work a benchmark family does: the smoke-run flag the micro-benchmarks take.
#[derive(Debug, Args)]
struct Size {
    /// About a tenth of the work, for smoke runs.
    #[arg(long)]
    quick: bool,
}

#[derive(Debug, Args)]
pub(super) struct BenchArgs {
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
    /// Profiler benchmarks: ns per recorded event, and profiled vs unprofiled ratios.
    Profiler(ProfilerBenchArgs),
    /// A chain of dependent GPU ops through the engine, alternating compute and copy streams:
    /// event mode against a host sync per op (uses --gpus; auto falls back to a simulated GPU).
    Gpu(GpuBenchArgs),
    /// The tuner's pick against the default: tune each workload, then fresh runs of both,
    /// interleaved round by round; the gain with its spread.
    ///
    /// Run it on a quiet machine, e.g. `enginetop bench tune --workload
    /// resnet-like,transformer-like --budget 60 --rounds 5`. Per workload it prints the pick
    /// and the default (iterations/s, median ± median absolute deviation over the rounds),
    /// the gain (the median of the rounds' paired pick/default ratios ± their median
    /// absolute deviation), the rounds, and the tuner's own paired estimate; --json gives
    /// the same per workload (`gain`, `gain_spread`, `rounds`, `tuner_gain`).
    Tune(TuneBenchArgs),
    /// The predicted scaling curve against measured steps: resnet-like, transformer-like,
    /// random-dag and wavefront at 1x1, 1x2 and 2x1, each predicted from each one's runs.
    Scaling(ScalingBenchArgs),
    /// What the scaling analysis, --record and the Chrome window each add to a profiled step
    /// (resnet-like, random-dag; interleaved rounds, ratios of medians against the issues'
    /// targets), and the dashboard's frame cost in % of one core.
    Overhead(OverheadBenchArgs),
}

#[derive(Debug, Args)]
struct OverheadBenchArgs {
    #[command(flatten)]
    output: Output,

    /// Small workloads, 3 rounds of 2 iterations, 1 s of frames: a smoke run.
    #[arg(long)]
    quick: bool,

    /// Rounds (default 9, 3 with --quick).
    #[arg(
        long,
        value_parser = super::numbers::whole::<u32>(1, 1000),
        allow_negative_numbers = true,
    )]
    rounds: Option<u32>,

    /// Iterations per variant per round (default 3, 2 with --quick).
    #[arg(
        long,
        value_parser = super::numbers::whole::<u32>(1, 100_000),
        allow_negative_numbers = true,
    )]
    iterations: Option<u32>,

    /// Seconds of dashboard frames on resnet-like (default 10, 1 with --quick; 0: skip).
    #[arg(
        long,
        value_parser = super::numbers::whole::<u32>(0, 3600),
        allow_negative_numbers = true,
    )]
    seconds: Option<u32>,
}

impl OverheadBenchArgs {
    fn config(&self) -> OverheadBenchConfig {
        let mut config = if self.quick {
            OverheadBenchConfig::quick()
        } else {
            OverheadBenchConfig::full()
        };
        if let Some(rounds) = self.rounds {
            config.rounds = rounds as usize;
        }
        if let Some(iterations) = self.iterations {
            config.iterations = u64::from(iterations);
        }
        if let Some(seconds) = self.seconds {
            config.frame = match (seconds, config.frame.take()) {
                (0, _) | (_, None) => None,
                (seconds, Some((workload, _))) => {
                    Some((workload, Duration::from_secs(u64::from(seconds))))
                }
            };
        }
        config
    }
}

/// `enginetop bench overhead`: one JSON line per workload and one for the frames, or a table.
fn bench_overhead(args: &OverheadBenchArgs) -> Result<()> {
    let report = overhead_bench::run(&args.config(), &mut |name| {
        eprintln!("overhead: {name} ...");
    })
    .context("the overhead benchmark failed")?;
    let mut stdout = std::io::stdout().lock();
    if args.output.json {
        for workload in &report.workloads {
            let line = serde_json::to_string(workload).context("serializing a result")?;
            writeln!(stdout, "{line}").context("writing to stdout")?;
        }
        if let Some(frame) = &report.frame {
            let line = serde_json::to_string(frame).context("serializing a result")?;
            writeln!(stdout, "{line}").context("writing to stdout")?;
        }
    } else {
        write!(stdout, "{}", overhead_bench::table(&report)).context("writing to stdout")?;
    }
    stdout.flush().context("writing to stdout")
}

#[derive(Debug, Args)]
struct ScalingBenchArgs {
    /// Check only these of its workloads (comma-separated names; default: all four).
    #[arg(long, value_delimiter = ',')]
    workload: Vec<String>,

    #[command(flatten)]
    output: Output,

    /// Rounds per point (the median is reported).
    #[arg(
        long,
        default_value_t = 5,
        value_parser = super::numbers::whole::<u32>(1, 1000),
        allow_negative_numbers = true,
    )]
    rounds: u32,
}

/// Runs the chosen benchmark family.
pub(super) fn run(args: &BenchArgs) -> Result<()> {
    match &args.target {
        BenchTarget::Pool(args) => bench_pool(args),
        BenchTarget::Engine(args) => bench_engine(args),
        BenchTarget::Gemm(args) => bench_gemm(args),
        BenchTarget::Profiler(args) => bench_profiler(args),
        BenchTarget::Gpu(args) => bench_gpu(args),
        BenchTarget::Scaling(args) => bench_scaling(args),
        BenchTarget::Tune(args) => bench_tune(args),
        BenchTarget::Overhead(args) => bench_overhead(args),
    }
}

#[derive(Debug, Args)]
struct GpuBenchArgs {
    /// Which sync modes to measure.
    #[arg(
        long,
        default_value = "both",
        value_parser = PossibleValuesParser::new(["event", "sync", "both"]),
    )]
    mode: String,

    #[command(flatten)]
    output: Output,

    /// Ops in the chain.
    #[arg(
        long,
        default_value_t = 200,
        value_parser = super::numbers::whole::<u32>(1, 1_000_000),
        allow_negative_numbers = true,
    )]
    ops: u32,

    /// Reps per mode (the median is reported).
    #[arg(
        long,
        default_value_t = 3,
        value_parser = super::numbers::whole::<u32>(1, 1000),
        allow_negative_numbers = true,
    )]
    reps: u32,
    #[command(flatten)]
    gpus: super::GpuArgs,
}

impl GpuBenchArgs {
    fn modes(&self) -> Vec<GpuSyncMode> {
        match self.mode.as_str() {
            "event" => vec![GpuSyncMode::Event],
            "sync" => vec![GpuSyncMode::PerOp],
            _ => vec![GpuSyncMode::Event, GpuSyncMode::PerOp],
        }
    }
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
    #[arg(
        long,
        default_value = "eigen",
        value_parser = PossibleValuesParser::new(engine_pool_choices()),
    )]
    pool: String,

    /// CPU worker threads.
    #[arg(
        long,
        default_value_t = 2,
        value_parser = super::numbers::whole::<u16>(1, 1024),
        allow_negative_numbers = true,
    )]
    threads: u16,

    #[command(flatten)]
    output: Output,

    /// Reps per benchmark.
    #[arg(
        long,
        default_value_t = 5,
        value_parser = super::numbers::whole::<u32>(1, 10_000),
        allow_negative_numbers = true,
    )]
    reps: u32,

    /// Benchmarks to run (comma-separated).
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = PossibleValuesParser::new(shape_choices()),
    )]
    bench: Vec<String>,

    #[command(flatten)]
    size: Size,

    /// Also time the floors, interleaved with the engines: the cheapest handoff of the same
    /// ops from the pushing thread to one worker on this machine (`floor-spsc`, a lock-free
    /// ring; `floor-pingpong`, a cache-line round trip per op).
    #[arg(long)]
    floor: bool,
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
            scale: if self.size.quick { 0.1 } else { 1.0 },
            floors: if self.floor {
                engine_bench::Floor::ALL.to_vec()
            } else {
                Vec::new()
            },
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
    #[arg(
        long,
        default_value_t = 2,
        value_parser = super::numbers::whole::<u16>(1, 1024),
        allow_negative_numbers = true,
    )]
    threads: u16,

    #[command(flatten)]
    output: Output,

    /// Side of the square matrices.
    #[arg(
        long,
        default_value_t = gemm_bench::DEFAULT_SIZE as u32,
        value_parser = super::numbers::whole::<u32>(1, 16_384),
        allow_negative_numbers = true,
    )]
    size: u32,

    /// Timed reps; the figure is over the median.
    #[arg(
        long,
        default_value_t = gemm_bench::DEFAULT_REPS as u32,
        value_parser = super::numbers::whole::<u32>(1, 10_000),
        allow_negative_numbers = true,
    )]
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
    #[arg(
        long,
        default_value_t = 2,
        value_parser = super::numbers::whole::<u16>(1, 1024),
        allow_negative_numbers = true,
    )]
    threads: u16,

    #[command(flatten)]
    output: Output,

    /// Reps per benchmark (default: 5, and 9 for parallel_for).
    #[arg(
        long,
        value_parser = super::numbers::whole::<u32>(1, 10_000),
        allow_negative_numbers = true,
    )]
    reps: Option<u32>,

    /// Benchmarks to run (comma-separated).
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = PossibleValuesParser::new(bench_choices()),
    )]
    bench: Vec<String>,

    #[command(flatten)]
    size: Size,
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
            sizes: if self.size.quick {
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
            let bench = name.trim().parse::<Bench>()?;
            if !benches.contains(&bench) {
                benches.push(bench);
            }
        }
        Ok(benches)
    }
}

#[derive(Debug, Args)]
struct ProfilerBenchArgs {
    #[command(flatten)]
    output: Output,

    /// Reps per benchmark (default 5, 3 with --quick).
    #[arg(
        long,
        value_parser = super::numbers::whole::<u32>(1, 10_000),
        allow_negative_numbers = true,
    )]
    reps: Option<u32>,

    /// Threads recording at once for the all-threads figure (default: every core).
    #[arg(
        long,
        value_parser = super::numbers::whole::<u16>(1, 1024),
        allow_negative_numbers = true,
    )]
    threads: Option<u16>,

    #[command(flatten)]
    size: Size,

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
        let mut config = if self.size.quick {
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

/// `enginetop bench pool`: JSON lines as each benchmark finishes, or a table at the end.
fn bench_pool(args: &PoolBenchArgs) -> Result<()> {
    let config = args.config()?;
    let mut results: Vec<BenchResult> = Vec::new();
    for bench in args.benches()? {
        if !args.output.json {
            eprintln!("running {bench} ...");
        }
        let bench_results =
            run_bench(bench, &config).with_context(|| format!("benchmark `{bench}` failed"))?;
        if args.output.json {
            print_json_lines(&bench_results)?;
        }
        results.extend(bench_results);
    }
    if !args.output.json {
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
        if !args.output.json {
            eprintln!("running {shape} ...");
        }
        let shape_results = engine_bench::run_shape(shape, &config)
            .with_context(|| format!("engine benchmark `{shape}` failed"))?;
        if args.output.json {
            let mut stdout = std::io::stdout().lock();
            for result in &shape_results {
                writeln!(stdout, "{}", engine_bench::json_line(result))
                    .context("writing to stdout")?;
            }
            stdout.flush().context("writing to stdout")?;
        }
        results.extend(shape_results);
    }
    if !args.output.json {
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

/// `enginetop bench gpu`: the engine chain on GPU 0 of the configured GPUs, per mode.
fn bench_gpu(args: &GpuBenchArgs) -> Result<()> {
    let config = RuntimeConfig::load(&args.gpus.overrides())?;
    let probe = cuda::probe();
    let choice = discover::choose(config.gpus, &probe)?;
    if let Some(notice) = &choice.notice {
        eprintln!("notice: {notice}");
    }
    let Some(backend) = discover::backend_for(&choice, probe, SimModel::default()) else {
        anyhow::bail!("bench gpu needs a GPU and --gpus is none: pass --gpus auto, cuda or sim:1");
    };
    if !args.output.json {
        eprintln!("running the gpu chain ...");
    }
    let results = gpu_bench::compare_engine_chain(
        backend,
        &args.modes(),
        args.ops as usize,
        args.reps as usize,
    )
    .context("GPU chain benchmark failed")?;
    if !args.output.json {
        print!("{}", gpu_bench::engine_chain_table(&results));
        return Ok(());
    }
    let ratio = gpu_bench::sync_over_event(&results);
    let mut stdout = std::io::stdout().lock();
    for result in &results {
        let mut line = serde_json::to_value(result)?;
        if let Some(ratio) = ratio {
            line["sync_over_event"] = ratio.into();
        }
        writeln!(stdout, "{line}").context("writing to stdout")?;
    }
    stdout.flush().context("writing to stdout")
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
    let line = if args.output.json {
        peak.json_line()
    } else {
        peak.text_line()
    };
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}").context("writing to stdout")?;
    stdout.flush().context("writing to stdout")
}

/// `enginetop bench scaling`: one JSON line per workload and point, or a table.
fn bench_scaling(args: &ScalingBenchArgs) -> Result<()> {
    let config = ScalingBenchConfig {
        rounds: args.rounds as usize,
        ..ScalingBenchConfig::two_cores()
    };
    let config = config.only(&args.workload)?;
    let results = scaling_bench::run(&config, &mut |name| {
        eprintln!("scaling: {name} ...");
    })
    .context("the scaling benchmark failed")?;
    let mut stdout = std::io::stdout().lock();
    if args.output.json {
        for result in &results {
            let line = serde_json::to_string(result).context("serializing a result")?;
            writeln!(stdout, "{line}").context("writing to stdout")?;
        }
    } else {
        write!(stdout, "{}", scaling_bench::table(&results)).context("writing to stdout")?;
    }
    stdout.flush().context("writing to stdout")
}

/// `enginetop bench profiler`: one JSON line per figure, or a table.
fn bench_profiler(args: &ProfilerBenchArgs) -> Result<()> {
    let mut config = args.config();
    if !args.output.json {
        eprintln!("running profiler benchmarks ...");
    }
    let selected: Vec<&str> = if args.bench.is_empty() {
        profiler_bench::BENCHES.to_vec()
    } else {
        args.bench.iter().map(String::as_str).collect()
    };
    let results = profiler_bench::run_selected(&mut config, &selected)
        .context("profiler benchmark failed")?;
    if args.output.json {
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

#[derive(Debug, Args)]
struct TuneBenchArgs {
    /// Workloads to tune and measure (comma-separated names or .toml paths).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "resnet-like,transformer-like"
    )]
    workload: Vec<String>,

    /// The tuner's budget per workload, in seconds.
    #[arg(
        long,
        default_value_t = 60,
        value_parser = super::numbers::whole::<u32>(1, 86_400),
        allow_negative_numbers = true,
    )]
    budget: u32,

    /// What the tuner searches (as `enginetop tune --space`).
    #[arg(long, value_name = "DIMS", default_value = "inter,intra", value_parser = |text: &str| text.parse::<Space>().map_err(|error| error.to_string()))]
    space: Space,

    /// Rounds of the side-by-side measurement (each runs the pick and the default).
    #[arg(
        long,
        default_value_t = 5,
        value_parser = super::numbers::whole::<u32>(1, 1000),
        allow_negative_numbers = true,
    )]
    rounds: u32,

    /// About how long one measured run takes, in milliseconds.
    #[arg(
        long,
        default_value_t = 2000,
        value_parser = super::numbers::whole::<u32>(10, 600_000),
        allow_negative_numbers = true,
    )]
    window_ms: u32,

    /// The most threads one pool may have [env: ENGINETOP_MAX_THREADS].
    #[arg(
        long,
        value_name = "N",
        value_parser = super::numbers::max_threads(),
        allow_negative_numbers = true
    )]
    max_threads: Option<usize>,

    #[command(flatten)]
    output: Output,
}

/// `enginetop bench tune`: per workload, the tuner then the side-by-side rounds.
fn bench_tune(args: &TuneBenchArgs) -> Result<()> {
    let config = tune_bench::TuneBenchConfig {
        runtime: RuntimeConfig::load(&ConfigOverrides {
            max_threads: args.max_threads,
            ..Default::default()
        })?,
        budget: Duration::from_secs(u64::from(args.budget)),
        space: args.space,
        rounds: args.rounds as usize,
        window: Duration::from_millis(u64::from(args.window_ms)),
    };
    let mut results = Vec::new();
    for name in &args.workload {
        if !args.output.json {
            eprintln!(
                "tuning {name} ({} s), then {} rounds ...",
                args.budget, args.rounds
            );
        }
        let result = tune_bench::run_tune_bench(name, &config)
            .with_context(|| format!("tune benchmark on `{name}` failed"))?;
        if args.output.json {
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{}", serde_json::to_string(&result)?).context("writing to stdout")?;
            stdout.flush().context("writing to stdout")?;
        }
        results.push(result);
    }
    if !args.output.json {
        print!("{}", tune_bench::table(&results));
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
