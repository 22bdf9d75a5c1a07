//! The main command under the live dashboard: the workload runs on its `driver` thread, the
//! dashboard owns the terminal (log lines go to a file meanwhile), and when the user quits the
//! run is stopped, the summary printed, and `--trace` written.
use std::collections::BTreeSet;
use std::path::PathBuf;
// `std`'s Arc, not `crate::sync`'s: the run hooks and engine options take `std::sync::Arc`
// trait objects in every build (the binary never runs under loom).
use std::sync::Arc;

use anyhow::{Context as _, Result};

use crate::config::RuntimeConfig;
use crate::device::stream::BackendKind;
use crate::engine::{DeviceType, EngineOptions};
use crate::profiler::layer::{init_logging, LevelFilter, LogTarget};
use crate::profiler::{Profiler, ProfilerOptions};
use crate::tui::deps::RunLog;
use crate::tui::{self, LiveInfo, LiveRun};
use crate::workload::run::{Driver, RunHooks, RunLength};
use crate::workload::Graph;

use super::{chosen_length, export_trace, print_summary, profiler_hooks, ProfilerTable, RunArgs};

/// Runs `graph` under the dashboard until the user quits; then prints the summary.
/// `run_warnings`: the run's own warnings besides the configuration's (already printed).
pub(super) fn run(
    args: &RunArgs,
    config: RuntimeConfig,
    graph: Graph,
    run_warnings: Vec<String>,
) -> Result<()> {
    if args.no_profile {
        anyhow::bail!(
            "the dashboard draws the profiler's statistics, so it cannot run with --no-profile: \
             drop --no-profile, or add --headless"
        );
    }
    let profiler = Profiler::new(ProfilerOptions::default())?;
    let log = log_path();
    let _logging = init_logging(&profiler, LogTarget::File(log.clone()), LevelFilter::INFO)?;
    let recorder = super::super::record::start(args.record.as_deref(), &profiler, &graph, &config)?;
    // The op detail's graph, telling the recorder what it is told.
    let recorded = super::super::record::graph_observer(recorder.as_ref());
    let graph_log = Arc::new(RunLog::new(tui::deps::DEFAULT_CAPACITY, recorded));
    let hooks = RunHooks {
        graph: Some(graph_log.clone()),
        ..profiler_hooks(&profiler, args.profile_rows)
    };
    let mut info = live_info(args, &config, &graph)?;
    info.graph = Some(graph_log);
    let driver = Driver::new(graph, &config, &hooks)?;
    describe_gpus(&driver, &config, &mut info);
    // Traces exported with `e` (or --trace at the end) label the GPUs with their models.
    let engine = crate::engine::EngineOptions::from_config(&config);
    crate::profiler::stream_probe::describe_gpus(&profiler, &engine);
    info.notices.push(format!("log: {}", log.display()));
    // Printed before the dashboard took the screen (and seen again after it): also shown
    // at start in its footer, and logged.
    let config_warnings = config
        .warnings()
        .into_iter()
        .map(|warning| warning.to_string());
    for warning in config_warnings.chain(run_warnings) {
        tracing::warn!("{warning}");
        info.warnings.push(warning);
    }
    tracing::info!(workload = %driver.graph().name, log = %log.display(), "dashboard run");
    let length = chosen_length(args, RunLength::UntilStopped);
    let report = Arc::new(ProfilerTable::new(&profiler, args.profile_rows));
    let (live, source) = LiveRun::start(driver, length, &profiler, Some(report), info)
        .context("could not start the `driver` thread")?;
    let shown = tui::run(source, tui::RunOptions::default());
    let summary = live.finish();
    shown?;
    let summary = summary?;
    print_summary(args, &summary)?; // first: a trace that fails to write keeps the numbers
    eprintln!("log: {}", log.display());
    let exported = export_trace(args, &profiler);
    super::super::record::finish(recorder, &profiler, Some(summary.json()))?;
    exported
}

/// `enginetop-<pid>.log` in the temporary directory.
fn log_path() -> PathBuf {
    std::env::temp_dir().join(format!("enginetop-{}.log", std::process::id()))
}

/// What the dashboard shows besides the profiler's figures.
fn live_info(args: &RunArgs, config: &RuntimeConfig, graph: &Graph) -> Result<LiveInfo> {
    let peak_threads = config.kernel_threads();
    let mut notices = Vec::new();
    let peak_gflops = match args.gemm_peak {
        Some(peak) => Some(peak),
        None if args.measure_peak => Some(super::measure_peak(peak_threads)?),
        // Measuring would hold the dashboard back for seconds: use the cache or go without.
        None if super::gemm_peak_is_cached(peak_threads) => {
            crate::bench::gemm::cached_gemm_peak(peak_threads).ok()
        }
        None => {
            notices.push(format!(
                "no GEMM peak yet: `enginetop bench gemm --threads {peak_threads}` measures it"
            ));
            None
        }
    };
    let trace_dir = match &args.trace_dir {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().context("reading the current directory")?,
    };
    if !trace_dir.is_dir() {
        anyhow::bail!(
            "--trace-dir {} is not a directory: create it, or name another",
            trace_dir.display()
        );
    }
    let devices = |gpu: bool| -> Vec<u32> {
        let ids: BTreeSet<u32> = graph
            .ops
            .iter()
            .filter(|op| (op.device.device == DeviceType::Gpu) == gpu)
            .map(|op| op.device.id)
            .collect();
        ids.into_iter().collect()
    };
    let mut cpu_devices = devices(false);
    if cpu_devices.is_empty() {
        cpu_devices.push(0);
    }
    Ok(LiveInfo {
        engine: config.engine_kind,
        pool_kind: config.pool_kind.to_string(),
        cores: config.schedulable_cpus,
        peak_gflops,
        notices,
        warnings: Vec::new(), // filled by `run`, which also logs them
        cpu_devices,
        gpus: devices(true),
        gpu_model: None,
        trace_dir,
        tune: Some(crate::tune::TuneOptions::for_dashboard(config)),
        graph: None, // set by `run`, which hooks it into the run
    })
}

/// Names the GPU in `info` (a real one's name, or the simulated model's numbers).
fn describe_gpus(driver: &Driver, config: &RuntimeConfig, info: &mut LiveInfo) {
    if info.gpus.is_empty() {
        return;
    }
    let Ok(Some(choice)) = driver.engine().gpus() else {
        return; // the run reports it when the first GPU op is refused
    };
    if let Some(notice) = &choice.notice {
        tracing::info!("{notice}");
    }
    info.gpu_model = match choice.backend {
        Some(BackendKind::Sim) => {
            info.notices.push("simulated GPU".into());
            let model = EngineOptions::from_config(config).sim_model;
            Some(format!(
                "simulated: {:.0} GFLOP/s, {:.1} GB/s, copies {:.2} GB/s, launch {:.0} µs",
                model.compute_gflops, model.memory_gbs, model.copy_gbs, model.launch_overhead_us
            ))
        }
        Some(BackendKind::Cuda) => crate::device::cuda::probe()
            .devices
            .first()
            .map(|gpu| gpu.name.clone()),
        None => None,
    };
}
