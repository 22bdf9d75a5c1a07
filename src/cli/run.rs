//! The main command, `enginetop --workload NAME|PATH ...`: load the workload, run it on the
//! engine with real kernels, print the summary. On a terminal the run goes under the live
//! dashboard (until `q`, or for `--iterations`/`--duration`, then the final numbers stay until
//! `q`), with log lines in a file; with `--headless` or when stdout is not a terminal, a
//! progress bar on stderr.
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
// `std`'s Arc, not `crate::sync`'s: the run hooks and engine options take `std::sync::Arc`
// trait objects in every build (the binary never runs under loom).
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;

use crate::bench::gemm as gemm_bench;
use crate::config::{ConfigOverrides, RuntimeConfig};
use crate::engine::{EngineKind, GpuSyncMode};
use crate::pool::PoolKind;
use crate::profiler::{Profiler, ProfilerOptions, WindowOptions};
use crate::workload;
use crate::workload::run::{
    run_workload, ProfilerReport, Progress, RunHooks, RunLength, RunOptions, RunSummary,
};

use super::numbers;

mod dashboard;
mod gpus;

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
pub(super) struct RunArgs {
    /// Run this workload: a shipped name (see `enginetop workloads`) or a .toml path.
    #[arg(long, value_name = "NAME|PATH")]
    workload: Option<String>,

    /// Override one of the workload's [params] (repeatable), e.g. --set batch=4.
    #[arg(long = "set", value_name = "NAME=VALUE", requires = "workload")]
    set: Vec<String>,

    /// Iterations to run [default: as many as fit in 3 seconds; under the dashboard, until
    /// you quit].
    #[arg(
        long,
        value_name = "N",
        value_parser = parse_iterations,
        allow_negative_numbers = true,
        conflicts_with = "duration"
    )]
    iterations: Option<u64>,

    /// Run iterations until this many seconds have passed (e.g. 10 or 2.5).
    #[arg(long, value_name = "S", value_parser = parse_seconds, allow_negative_numbers = true)]
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
    #[arg(
        long = "inter",
        visible_alias = "inter-op-threads",
        value_name = "N",
        value_parser = numbers::thread_count(),
        allow_negative_numbers = true
    )]
    inter: Option<usize>,

    /// Intra-op threads: the kernels' pool, threads inside one op (0 = one per CPU)
    /// [env: ENGINETOP_INTRA_OP_THREADS, TF_NUM_INTRAOP_THREADS; default: 0].
    #[arg(
        long = "intra",
        visible_alias = "intra-op-threads",
        value_name = "M",
        value_parser = numbers::thread_count(),
        allow_negative_numbers = true
    )]
    intra: Option<usize>,

    /// The most threads one pool may have: larger --inter/--intra counts are refused
    /// (1 to 4096) [env: ENGINETOP_MAX_THREADS; default: 128 or one per CPU if more].
    #[arg(
        long,
        value_name = "N",
        value_parser = numbers::max_threads(),
        allow_negative_numbers = true,
    )]
    max_threads: Option<usize>,

    /// The engine's CPU workers per CPU device, used when no inter-op count is set (MXNet's
    /// name for the same threads; 0 = one per CPU) [env: ENGINETOP_CPU_WORKERS,
    /// MXNET_CPU_WORKER_NTHREADS].
    #[arg(
        long,
        value_name = "N",
        value_parser = numbers::thread_count(),
        allow_negative_numbers = true,
    )]
    cpu_workers: Option<usize>,

    /// Workers of the CPU priority pool, which runs prioritized ops (0 = MXNet's 4)
    /// [env: ENGINETOP_CPU_PRIORITY_WORKERS, MXNET_CPU_PRIORITY_NTHREADS].
    #[arg(
        long,
        value_name = "N",
        value_parser = numbers::thread_count(),
        allow_negative_numbers = true,
    )]
    cpu_priority_workers: Option<usize>,

    /// GPU compute workers per GPU, each with its own stream (0 = MXNet's 2)
    /// [env: ENGINETOP_GPU_WORKERS, MXNET_GPU_WORKER_NTHREADS].
    #[arg(
        long,
        value_name = "N",
        value_parser = numbers::thread_count(),
        allow_negative_numbers = true,
    )]
    gpu_workers: Option<usize>,

    /// GPU copy workers per GPU, each with its own stream (0 = MXNet's 2)
    /// [env: ENGINETOP_GPU_COPY_WORKERS, MXNET_GPU_COPY_NTHREADS].
    #[arg(
        long,
        value_name = "N",
        value_parser = numbers::thread_count(),
        allow_negative_numbers = true,
    )]
    gpu_copy_workers: Option<usize>,

    /// How GPU ops keep their dependencies: event (record an event, the next op waits on
    /// it) or sync (a host sync after every op) [env: ENGINETOP_GPU_SYNC; default: event].
    #[arg(long, value_name = "MODE", value_parser = crate::config::parse_gpu_sync_flag)]
    gpu_sync: Option<GpuSyncMode>,

    /// Whether one idle worker spins before parking: on or off
    /// [env: ENGINETOP_SPIN; default: on].
    #[arg(long, value_name = "on|off", value_parser = crate::config::parse_spin_flag)]
    spin: Option<bool>,

    /// Export a Chrome trace of the run (the profiler's last seconds) to FILE.
    #[arg(long, value_name = "FILE", conflicts_with = "no_profile")]
    trace: Option<PathBuf>,

    /// Record every event of the run, its configuration and its summary to FILE, streamed
    /// while it runs (see `enginetop export` and `enginetop compare`).
    #[arg(long, value_name = "FILE", conflicts_with = "no_profile")]
    record: Option<PathBuf>,

    /// Run without the profiler (each event site then costs one branch).
    #[arg(long)]
    no_profile: bool,

    /// Rows of the profiler's table in the summary, the ops with the most time first
    /// (0 = every op name)
    #[arg(
        long,
        value_name = "N",
        default_value_t = 40,
        value_parser = numbers::at_least(0),
        allow_negative_numbers = true,
        conflicts_with = "no_profile"
    )]
    profile_rows: usize,

    /// How to print the summary.
    #[arg(long, value_enum, default_value_t = SummaryFormat::Table)]
    summary: SummaryFormat,

    /// No dashboard: a progress bar on stderr (when it is a terminal), then the summary.
    /// Implied when stdout is not a terminal.
    #[arg(long)]
    headless: bool,

    /// Where the dashboard's `e` writes traces [default: the current directory].
    #[arg(long, value_name = "DIR")]
    trace_dir: Option<PathBuf>,

    /// Compare with this GEMM peak (GFLOP/s) instead of the measured one (measured once per
    /// machine and cached; `enginetop bench gemm` refreshes it).
    #[arg(long, value_name = "GFLOPS", value_parser = parse_gflops, allow_negative_numbers = true)]
    gemm_peak: Option<f64>,

    /// Measure the GEMM peak just before and just after the run and compare with their mean
    /// instead of the cached figure: a shared machine's speed drifts over the hours, so only
    /// a peak measured in the same minutes makes a fair ratio. (The dashboard measures it
    /// once, before it starts.)
    #[arg(long, conflicts_with = "gemm_peak")]
    measure_peak: bool,
}

/// How long a run goes when neither `--iterations` nor `--duration` is given.
const DEFAULT_RUN_SECONDS: u64 = 3;

fn parse_iterations(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(count) if count >= 1 => Ok(count),
        _ => Err(format!(
            "expected a whole number of iterations from 1 to {}",
            u64::MAX
        )),
    }
}

/// The shortest `--duration`: less is too short for one op to be measured.
const MIN_SECONDS: f64 = 0.001;
/// The longest `--duration` (about 31 years).
const MAX_SECONDS: f64 = 1e9;

fn parse_seconds(text: &str) -> Result<Duration, String> {
    let seconds = text.trim().trim_end_matches('s');
    match seconds.parse::<f64>() {
        Ok(value) if (MIN_SECONDS..=MAX_SECONDS).contains(&value) => {
            Ok(Duration::from_secs_f64(value))
        }
        _ => Err(format!(
            "expected a number of seconds from {MIN_SECONDS} to {MAX_SECONDS:e} (1 ms to about \
             31 years), e.g. 10 or 2.5"
        )),
    }
}

fn parse_gflops(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(value) if value > 0.0 && value.is_finite() => Ok(value),
        _ => Err("expected GFLOP/s above 0, e.g. 150".to_string()),
    }
}

/// `enginetop --workload ...`: load, run headless, print the summary.
pub(super) fn run_main(args: &RunArgs, overrides: ConfigOverrides) -> Result<()> {
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
    let config = RuntimeConfig::load(&ConfigOverrides {
        engine_kind: args.engine,
        pool_kind: args.pool,
        inter_op_threads: args.inter,
        intra_op_threads: args.intra,
        max_threads: args.max_threads,
        cpu_workers: args.cpu_workers,
        cpu_priority_workers: args.cpu_priority_workers,
        gpu_workers: args.gpu_workers,
        gpu_copy_workers: args.gpu_copy_workers,
        gpu_sync: args.gpu_sync,
        allow_spinning: args.spin,
        ..overrides
    })?;
    for warning in config.warnings() {
        eprintln!("warning: {warning}");
    }
    if let Some(path) = &args.trace {
        super::trace::check_trace_path("--trace", path)?;
    }
    let graph = workload::load_spec(spec, &workload::Overrides::from_args(&args.set)?)?;
    let gpu_warnings = gpus::check(&config, &graph, overrides.gpus.is_some())?;
    for warning in &gpu_warnings {
        eprintln!("warning: {warning}");
    }
    if !args.headless && std::io::stdout().is_terminal() {
        return dashboard::run(args, config, graph, gpu_warnings);
    }
    if let Some(dir) = &args.trace_dir {
        eprintln!(
            "warning: --trace-dir {} is where the dashboard's `e` writes traces; a headless run \
             writes none there (use --trace FILE)",
            dir.display()
        );
    }
    let peak_threads = config.kernel_threads();
    let peak_before = match args.measure_peak {
        true => Some(measure_peak(peak_threads)?),
        false => None,
    };
    let options = RunOptions {
        length: run_length(args),
        gemm_peak_gflops: peak_before
            .or(args.gemm_peak)
            .or_else(|| gemm_peak(peak_threads)),
        config,
    };
    let profiler = if args.no_profile {
        Profiler::disabled()
    } else {
        Profiler::new(headless_profiler_options(args))?
    };
    let recorder =
        super::record::start(args.record.as_deref(), &profiler, &graph, &options.config)?;
    let hooks = RunHooks {
        progress: std::io::stderr().is_terminal().then(progress_bar),
        graph: super::record::graph_observer(recorder.as_ref()),
        ..profiler_hooks(&profiler, args.profile_rows)
    };
    let show_progress = hooks.progress.is_some();
    let summary = run_workload(graph, &options, hooks).inspect_err(|_| {
        if show_progress {
            eprint!("\r\x1b[2K"); // the error goes on a clean line
        }
    })?;
    let summary = match (args.gemm_peak, peak_before) {
        (Some(_), _) => summary.with_given_peak(),
        (None, Some(before)) => {
            let after = measure_peak(peak_threads)?;
            summary.with_peak_measured_now((before + after) / 2.0)
        }
        (None, None) => summary,
    };
    if args.trace.is_some() {
        let engine = crate::engine::EngineOptions::from_config(&options.config);
        crate::profiler::stream_probe::describe_gpus(&profiler, &engine); // GPU models
    }
    // The summary first: a trace that cannot be written after all does not lose the run.
    print_summary(args, &summary)?;
    let exported = export_trace(args, &profiler);
    super::record::finish(recorder, &profiler, Some(summary.json()))?;
    exported
}

/// The run's hooks into `profiler`: engine ops, the intra-op pool's workers, the summary's
/// aggregate table. A disabled profiler gets none.
pub(super) fn profiler_hooks(profiler: &Profiler, table_rows: usize) -> RunHooks {
    if !profiler.is_enabled() {
        return RunHooks::default();
    }
    RunHooks {
        profiler: Some(Arc::new(ProfilerTable::new(profiler, table_rows))),
        ..RunHooks::profiled(profiler)
    }
}

/// The profiler's part of the summary: its table, at most `rows` op names (0: all).
pub(super) struct ProfilerTable {
    profiler: Profiler,
    rows: usize,
}

impl ProfilerTable {
    pub(super) fn new(profiler: &Profiler, rows: usize) -> Self {
        let rows = if rows == 0 { usize::MAX } else { rows };
        let profiler = profiler.clone();
        ProfilerTable { profiler, rows }
    }
}

impl ProfilerReport for ProfilerTable {
    fn aggregate_table(&self) -> String {
        self.profiler.flush();
        self.profiler.summary().table_top(self.rows)
    }

    fn aggregate_json(&self) -> serde_json::Value {
        self.profiler.flush();
        self.profiler.summary().to_json_top(self.rows)
    }

    fn dropped_events(&self) -> u64 {
        self.profiler.snapshot().dropped_events
    }

    fn ops_counted(&self) -> u64 {
        self.profiler.flush();
        self.profiler.snapshot().ops.iter().map(|op| op.count).sum()
    }

    fn snapshot(&self) -> Option<crate::profiler::Snapshot> {
        self.profiler.flush();
        Some(self.profiler.snapshot())
    }
}

/// `--iterations` or `--duration`, else `default`.
fn chosen_length(args: &RunArgs, default: RunLength) -> RunLength {
    match (args.iterations, args.duration) {
        (Some(iterations), _) => RunLength::Iterations(iterations),
        (None, Some(duration)) => RunLength::Duration(duration),
        (None, None) => default,
    }
}

fn run_length(args: &RunArgs) -> RunLength {
    chosen_length(
        args,
        RunLength::Duration(Duration::from_secs(DEFAULT_RUN_SECONDS)),
    )
}

/// Prints `summary` to stdout as `--summary` says.
fn print_summary(args: &RunArgs, summary: &RunSummary) -> Result<()> {
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

/// The profiler of a headless run: the trace window only when `--trace` will export it (a
/// recording takes its events from the collector, not from the window).
fn headless_profiler_options(args: &RunArgs) -> ProfilerOptions {
    let window = match args.trace {
        Some(_) => WindowOptions::default(),
        None => WindowOptions::none(),
    };
    ProfilerOptions {
        window,
        ..ProfilerOptions::default()
    }
}

/// Writes the profiler's trace window to `--trace FILE`, if given.
fn export_trace(args: &RunArgs, profiler: &Profiler) -> Result<()> {
    if let Some(path) = &args.trace {
        profiler.flush();
        let export = profiler.export_chrome_file(path)?;
        eprintln!(
            "trace: {} ({} events; open it in ui.perfetto.dev or chrome://tracing)",
            path.display(),
            export.trace_events
        );
    }
    Ok(())
}

/// This machine's GEMM peak on `threads` threads ([`RuntimeConfig::kernel_threads`]): from
/// the cache, or measured once (saying so on stderr); `None` with a warning if it cannot be
/// measured.
fn gemm_peak(threads: usize) -> Option<f64> {
    if !gemm_peak_is_cached(threads) {
        eprintln!("measuring this machine's GEMM peak once (cached)...");
    }
    match gemm_bench::cached_gemm_peak(threads) {
        Ok(peak) => Some(peak),
        Err(err) => {
            let err = crate::error_chain::text(&err);
            eprintln!("warning: no GEMM peak to compare with: {err}");
            None
        }
    }
}

/// A fresh GEMM peak on `threads` threads for `--measure-peak` (a few hundred milliseconds).
pub(super) fn measure_peak(threads: usize) -> Result<f64> {
    gemm_bench::measure_gemm_peak(threads).context("--measure-peak: measuring the GEMM peak")
}

/// Whether the GEMM peak cache holds a default-size figure for `threads` threads.
pub(super) fn gemm_peak_is_cached(threads: usize) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_outside_1_ms_to_1e9_s_are_refused_naming_the_range() {
        assert_eq!(parse_seconds("2.5s"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_seconds("0.001"), Ok(Duration::from_millis(1)));
        assert!(parse_seconds("1e9").is_ok());
        let range = "expected a number of seconds from 0.001 to 1e9 (1 ms to about 31 years)";
        for bad in ["1e10", "1e-12", "0", "-1", "nan", "inf", "soon"] {
            let message = parse_seconds(bad).unwrap_err();
            assert!(message.starts_with(range), "{bad}: {message}");
        }
    }

    #[test]
    fn iteration_counts_outside_1_to_u64_max_are_refused_naming_the_range() {
        assert_eq!(parse_iterations("7"), Ok(7));
        for bad in ["0", "99999999999999999999", "-1", "many"] {
            assert_eq!(
                parse_iterations(bad).unwrap_err(),
                "expected a whole number of iterations from 1 to 18446744073709551615",
                "{bad}"
            );
        }
    }
}
