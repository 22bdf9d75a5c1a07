//! [`LiveSource`]: the dashboard over a real run. The workload's [`Driver`] runs on its own
//! `driver` thread ([`LiveRun::start`]); the source reads the profiler's live [`Snapshot`]
//! and the driver's progress through a [`DriverHandle`], and applies the dashboard's
//! controls through the same handle.
//!
//! It lives in `tui` rather than `workload` so the data flow stays one-way: the workload
//! knows nothing of the dashboard (it offers a handle); the dashboard adapts that handle to
//! its [`DashboardSource`] seam.
//!
//! ```text
//! driver thread: Driver::run(length) -> Driver::summary -> outcome slot (final numbers)
//! dashboard:     LiveSource::snapshot  <- Profiler::snapshot + DriverHandle::progress
//!                                      <- SpanStore (op spans) + RunLog (graph, op runs)
//!                LiveSource::control   -> DriverHandle (resize, pause) / Profiler (export, reset)
//! ```
//! The header's GFLOP/s is a [`GflopsSplit`] (CPU-context ops, compared with the CPU peak;
//! GPU-context ops apart) over the last second of the driver's FLOP counts while the run
//! goes, and the summary's own figures once it ends, so the final screen and the headless
//! summary print the same numbers.
#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::deps::RunLog;
use super::source::{
    Control, ControlError, DashboardData, DashboardSource, DeviceKind, DeviceLayout, Facts,
    PoolUsage, StreamLayout,
};
use super::tuner::TuneControl;
use crate::device::identity::{Device, PoolId};
use crate::engine::EngineKind;
use crate::profiler::spans::{self, SpanStore};
use crate::profiler::{DeviceId, EventSink, Profiler, Snapshot};
use crate::sync::{thread, Arc, Mutex};
use crate::tune::{DriverProbe, IterationWork, LiveTuner, TuneOptions, TuneProgress, TuneStop};
use crate::workload::run::{
    Driver, DriverHandle, GflopsSplit, GpuWorkerRoles, ProfilerReport, RunError, RunLength,
    RunSummary,
};

/// How long the header's GFLOP/s averages over.
const RATE_WINDOW: Duration = Duration::from_secs(1);

/// What the source shows that neither the profiler nor the driver's progress tells.
#[derive(Clone, Debug, Default)]
pub(crate) struct LiveInfo {
    /// The engine kind (what `+`/`-` can resize).
    pub(crate) engine: EngineKind,
    /// The pool kind's name.
    pub(crate) pool_kind: String,
    /// CPUs the process may use.
    pub(crate) cores: usize,
    /// The GEMM peak to compare with.
    pub(crate) peak_gflops: Option<f64>,
    /// Remarks for the header (`simulated GPU`).
    pub(crate) notices: Vec<String>,
    /// Start-up warnings, shown in the footer when the dashboard starts.
    pub(crate) warnings: Vec<String>,
    /// The CPU devices the workload's ops run on (panel `cpu<i>` each).
    pub(crate) cpu_devices: Vec<u32>,
    /// The GPUs the workload's ops run on.
    pub(crate) gpus: Vec<u32>,
    /// A GPU's description for its panel title: `simulated: ...` or the real GPU's name.
    pub(crate) gpu_model: Option<String>,
    /// Where `e` writes traces.
    pub(crate) trace_dir: PathBuf,
    /// The search `t` runs (budget, objective, space, CPUs, `max_threads`; its start is the
    /// run's counts when `t` is pressed). `None`: `t` says why it cannot tune.
    pub(crate) tune: Option<TuneOptions>,
    /// The run's graph and op runs, for the op detail's reads, writes and waits: the log
    /// hooked as the driver's graph observer ([`RunHooks::graph`]) when it was made.
    /// `None`: the detail says they were not recorded.
    ///
    /// [`RunHooks::graph`]: crate::workload::run::RunHooks::graph
    // std's `Arc`: the same log is the run's observer, a trait object.
    pub(crate) graph: Option<std::sync::Arc<RunLog>>,
}

/// The final numbers, set by the driver thread when the run ends.
#[derive(Clone, Debug, PartialEq)]
struct Outcome {
    iterations: u64,
    elapsed: Duration,
    gflops: GflopsSplit,
    /// The counts the run had for the longest time, when it was resized.
    threads_over_run: Option<(usize, usize)>,
    pool_usage: Vec<PoolUsage>,
    error: Option<String>,
}

type OutcomeSlot = Arc<Mutex<Option<Outcome>>>;

/// A workload running on its `driver` thread, for the dashboard.
#[derive(Debug)]
pub(crate) struct LiveRun {
    handle: DriverHandle,
    thread: thread::JoinHandle<Result<RunSummary, RunError>>,
}

impl LiveRun {
    /// Starts `driver` on a thread named `driver` for `length`; returns the run and the
    /// dashboard's source over it. `report` and `peak_gflops` go into the run's summary.
    pub(crate) fn start(
        mut driver: Driver,
        length: RunLength,
        profiler: &Profiler,
        report: Option<Arc<dyn ProfilerReport>>,
        info: LiveInfo,
    ) -> std::io::Result<(LiveRun, LiveSource)> {
        let handle = driver.handle();
        let gpu_workers = driver.settings().gpu_workers;
        let outcome: OutcomeSlot = Arc::new(Mutex::new(None));
        let slot = outcome.clone();
        let peak = info.peak_gflops;
        let workload = driver.graph().name.clone();
        let work = IterationWork::of(driver.graph());
        // std's Arc: the collector holds its sinks as `std::sync::Weak` trait objects in every
        // build, which loom's `Arc` cannot make (no `Weak`, no coercion to `dyn`).
        let spans = std::sync::Arc::new(SpanStore::new(spans::DEFAULT_CAPACITY));
        let as_sink: std::sync::Arc<dyn EventSink> = spans.clone();
        // Added before the run starts, so the spans hold its first ops too.
        profiler.add_sink(std::sync::Arc::downgrade(&as_sink));
        let thread = thread::Builder::new()
            .name("driver".into())
            .spawn(move || {
                let result = driver
                    .run(length, &mut |_| {})
                    .map(|run| driver.summary(&run, peak, report.as_deref()));
                *slot.lock() = Some(outcome_of(&result));
                result
            })?;
        let source = LiveSource {
            spans,
            handle: handle.clone(),
            profiler: profiler.clone(),
            workload,
            info,
            outcome,
            samples: VecDeque::new(),
            exports: 0,
            gpu_workers,
            work,
            tuner: None,
        };
        Ok((LiveRun { handle, thread }, source))
    }

    /// Stops the run (after the iterations it pushed), waits for it, and returns its summary.
    pub(crate) fn finish(self) -> Result<RunSummary, RunError> {
        self.handle.stop();
        match self.thread.join() {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

fn outcome_of(result: &Result<RunSummary, RunError>) -> Outcome {
    match result {
        Ok(summary) => Outcome {
            iterations: summary.iterations,
            elapsed: Duration::from_secs_f64(summary.elapsed_s),
            gflops: GflopsSplit {
                cpu: summary.cpu_gflops,
                gpu: summary.gpu_gflops,
            },
            threads_over_run: (summary.config_history.len() > 1)
                .then_some((summary.settings.inter, summary.settings.intra)),
            pool_usage: summary
                .utilization
                .iter()
                .filter_map(|lane| {
                    Some(PoolUsage {
                        device: DeviceId::of(lane.kind.device()?),
                        workers: lane.workers,
                        busy: lane.utilization,
                    })
                })
                .collect(),
            error: None,
        },
        Err(error) => Outcome {
            iterations: 0,
            elapsed: Duration::ZERO,
            gflops: GflopsSplit::default(),
            threads_over_run: None,
            pool_usage: Vec::new(),
            error: Some(crate::error_chain::text(&error)),
        },
    }
}

/// The dashboard's source over a [`LiveRun`] (see the module docs).
pub(crate) struct LiveSource {
    handle: DriverHandle,
    profiler: Profiler,
    workload: String,
    info: LiveInfo,
    outcome: OutcomeSlot,
    /// (when, FLOPs done, of which on GPUs) over the last [`RATE_WINDOW`], oldest first.
    samples: VecDeque<(Instant, u64, u64)>,
    exports: u32,
    /// A GPU's workers by role (the driver's settings), when the run has GPUs.
    gpu_workers: Option<GpuWorkerRoles>,
    /// The graph's work per iteration (what the tuner's windows count).
    work: IterationWork,
    /// The live search, from `t` until the user keeps its best or goes back.
    tuner: Option<LiveTuner>,
    /// The recent op spans, fed by the profiler's collector (the timeline's ops).
    // std's Arc: the collector's sink is this store's `std::sync::Weak` (see `start`).
    spans: std::sync::Arc<SpanStore>,
}

impl std::fmt::Debug for LiveSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSource")
            .field("workload", &self.workload)
            .field("info", &self.info)
            .finish()
    }
}

impl LiveSource {
    /// GFLOP/s over the last second of samples, `flops` (`gpu_flops` on GPUs) done now.
    fn windowed_gflops(&mut self, flops: u64, gpu_flops: u64) -> GflopsSplit {
        let now = Instant::now();
        self.samples.push_back((now, flops, gpu_flops));
        while self.samples.len() > 2 && self.samples[1].0 + RATE_WINDOW <= now {
            self.samples.pop_front();
        }
        let (then, before, gpu_before) = self.samples[0];
        GflopsSplit::of(
            flops.saturating_sub(before),
            gpu_flops.saturating_sub(gpu_before),
            now - then,
            !self.info.gpus.is_empty(),
        )
    }

    fn facts(&mut self) -> Facts {
        let progress = self.handle.progress();
        let rates = self.windowed_gflops(progress.flops, progress.gpu_flops);
        let mut facts = Facts {
            workload: self.workload.clone(),
            engine: self.info.engine.to_string(),
            pool_kind: self.info.pool_kind.clone(),
            elapsed: progress.elapsed,
            iterations: progress.iterations,
            gflops: Some(rates.cpu),
            gpu_gflops: rates.gpu,
            peak_gflops: self.info.peak_gflops,
            intra_op: progress.intra,
            cores: self.info.cores,
            finished: false,
            notices: self.info.notices.clone(),
            warnings: self.info.warnings.clone(),
            threads_over_run: None,
            pool_usage: Vec::new(),
            verdicts: self.handle.verdicts(),
            scaling: self.handle.scaling(),
            predicted: self.handle.predicted(),
            replay: None,
        };
        if let Some(outcome) = self.outcome.lock().clone() {
            facts.finished = true;
            match outcome.error {
                Some(error) => facts.notices.push(format!("failed: {error}")),
                None => {
                    facts.iterations = outcome.iterations;
                    facts.elapsed = outcome.elapsed;
                    facts.gflops = Some(outcome.gflops.cpu);
                    facts.gpu_gflops = outcome.gflops.gpu;
                    facts.threads_over_run = outcome.threads_over_run;
                    facts.pool_usage = outcome.pool_usage;
                }
            }
        }
        facts
    }

    /// The panels: each CPU device the ops run on, each GPU, the intra-op pool.
    fn layout(&self, snapshot: &Snapshot, inter: usize) -> Vec<DeviceLayout> {
        let engine = self.info.engine;
        let resizable = engine != EngineKind::Naive;
        let mut layout: Vec<DeviceLayout> = self
            .info
            .cpu_devices
            .iter()
            .enumerate()
            .map(|(index, &id)| DeviceLayout {
                title: Device::Cpu(id).to_string(),
                kind: DeviceKind::Cpu,
                workers: DeviceId::of(Device::Cpu(id)),
                priority: (engine == EngineKind::PerDevice && index == 0)
                    .then(|| DeviceId::of_pool(PoolId::CPU_PRIORITY)),
                streams: Vec::new(),
                inter_op: resizable.then_some(inter),
                model: None,
                gpu_workers: None,
            })
            .collect();
        for &gpu in &self.info.gpus {
            let (model, roles) = (self.info.gpu_model.clone(), self.gpu_workers);
            layout.push(gpu_layout(gpu, snapshot, model, roles));
        }
        layout.push(DeviceLayout {
            title: "intra-op".into(),
            kind: DeviceKind::IntraOp,
            workers: DeviceId::of_pool(PoolId::INTRA_OP),
            ..DeviceLayout::default()
        });
        layout
    }

    /// `t` and what follows it (see [`tuner`](super::tuner)).
    fn tune(&mut self, control: TuneControl) -> Result<String, ControlError> {
        let failed = |error: RunError| ControlError::Failed(crate::error_chain::text(&error));
        match control {
            TuneControl::Start => self.start_tuner(),
            TuneControl::Stop => match &self.tuner {
                Some(tuner) => {
                    tuner.stop();
                    Ok("stopping the tuner: Enter keeps its best, b goes back".into())
                }
                None => Err(ControlError::Failed("no search runs".into())),
            },
            TuneControl::Keep(point) | TuneControl::Back(point) => {
                self.tuner = None; // stops and joins a search still running
                let now = self.handle.progress();
                if now.inter != point.inter {
                    self.handle
                        .set_inter_op_threads(point.inter)
                        .map_err(failed)?;
                }
                if now.intra != point.intra {
                    self.handle
                        .set_intra_op_threads(point.intra)
                        .map_err(failed)?;
                }
                let done = match control {
                    TuneControl::Keep(_) => "kept the tuner's best",
                    _ => "back to",
                };
                Ok(format!("{done}: {point}"))
            }
        }
    }

    /// Starts a search from the run's counts now, unless one runs or it cannot.
    fn start_tuner(&mut self) -> Result<String, ControlError> {
        let refuse = |why: &str| Err(ControlError::Failed(why.to_string()));
        let Some(mut options) = self.info.tune.clone() else {
            return refuse("this run has no tuner");
        };
        if self
            .tuner
            .as_ref()
            .is_some_and(|t| t.progress().is_running())
        {
            return refuse("the tuner already runs: t or Esc stops it");
        }
        let now = self.handle.progress();
        if now.paused {
            return refuse("the run is paused: resume it (space) to tune");
        }
        options.start = crate::tune::Point {
            inter: now.inter,
            intra: now.intra,
        };
        let stop = TuneStop::new();
        let outcome = self.outcome.clone();
        let running = move || outcome.lock().is_none();
        let probe = DriverProbe::new(
            self.handle.clone(),
            self.work,
            options.objective,
            stop.clone(),
            running,
        );
        let budget = options.budget.as_secs_f64();
        self.tuner = Some(LiveTuner::start(probe, options, stop).map_err(|error| {
            ControlError::Failed(format!("could not start the `tuner` thread: {error}"))
        })?);
        Ok(format!("tuning for up to {budget:.0} s: t or Esc stops it"))
    }

    fn export(&mut self) -> Result<String, ControlError> {
        self.exports += 1;
        let path = trace_path(&self.info.trace_dir, self.exports);
        let report = self.profiler.export_chrome_file(&path).map_err(|error| {
            let error = crate::error_chain::text(&error);
            ControlError::Failed(format!("trace not written: {error}"))
        })?;
        Ok(format!(
            "trace written to {} ({} events)",
            path.display(),
            report.trace_events
        ))
    }
}

/// GPU `gpu`'s panel: its streams as the profiler has seen them (compute first).
fn gpu_layout(
    gpu: u32,
    snapshot: &Snapshot,
    model: Option<String>,
    gpu_workers: Option<GpuWorkerRoles>,
) -> DeviceLayout {
    let device = DeviceId::of(Device::Gpu(gpu));
    let mut streams: Vec<StreamLayout> = snapshot
        .streams
        .iter()
        .filter(|stream| stream.device == device)
        .map(|stream| StreamLayout::of_code(Device::Gpu(gpu), stream.stream))
        .collect();
    streams.sort_by_key(|stream| stream.stream);
    DeviceLayout {
        title: Device::Gpu(gpu).to_string(),
        kind: DeviceKind::Gpu,
        workers: device,
        priority: None,
        streams,
        inter_op: None,
        model,
        gpu_workers,
    }
}

/// `dir/enginetop-trace-<local time>.json`, with `-<n>` when that name is taken.
fn trace_path(dir: &Path, export: u32) -> PathBuf {
    let stamp = chrono::Local::now().format("%Y%m%d-%H%M%S");
    let plain = dir.join(format!("enginetop-trace-{stamp}.json"));
    if !plain.exists() {
        return plain;
    }
    dir.join(format!("enginetop-trace-{stamp}-{export}.json"))
}

impl DashboardSource for LiveSource {
    fn snapshot(&mut self) -> DashboardData {
        let facts = self.facts();
        // Spans first: every span held ends before the snapshot's time.
        let spans = self.spans.snapshot();
        let snapshot = self.profiler.snapshot();
        let devices = self.layout(&snapshot, self.handle.progress().inter);
        DashboardData {
            snapshot,
            facts,
            devices,
            spans,
            deps: self
                .info
                .graph
                .as_ref()
                .map(|graph| graph.snapshot())
                .unwrap_or_default(),
        }
    }

    fn control(&mut self, control: Control) -> Result<String, ControlError> {
        let failed = |error: RunError| ControlError::Failed(crate::error_chain::text(&error));
        match control {
            Control::SetInterOp { .. } if self.info.engine == EngineKind::Naive => Err(
                ControlError::Failed("the naive engine runs ops on the driver thread: it has no inter-op pool to resize (use --engine per-device)".into()),
            ),
            Control::SetInterOp { device, threads } => {
                self.handle.set_inter_op_threads(threads).map_err(failed)?;
                Ok(format!("inter {threads} on {}", device_title(device)))
            }
            Control::SetIntraOp(threads) => {
                self.handle.set_intra_op_threads(threads).map_err(failed)?;
                Ok(format!("intra {threads}"))
            }
            Control::Pause(pause) => {
                self.handle.pause(pause);
                Ok(if pause {
                    "paused: running ops finish, no new ops are pushed"
                } else {
                    "resumed"
                }
                .to_string())
            }
            Control::ExportTrace => self.export(),
            Control::ResetStats => {
                self.profiler.reset_stats();
                Ok("statistics reset".to_string())
            }
            Control::Tune(tune) => self.tune(tune),
            Control::Replay(_) => Err(ControlError::Unsupported("moving a replay's cursor")),
        }
    }

    fn tuner(&mut self) -> Option<TuneProgress> {
        self.tuner.as_ref().map(LiveTuner::progress)
    }
}

/// How a control's message names `device`: as its panel is titled (its typed device's
/// display, `cpu0`), or by its registered name.
fn device_title(device: DeviceId) -> String {
    match device.device() {
        Some(typed) => typed.to_string(),
        None => device.name().to_string(),
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::config::RuntimeConfig;
    use crate::profiler::ProfilerOptions;
    use crate::workload::run::RunHooks;
    use crate::workload::{load_spec, Overrides};

    fn live(length: RunLength) -> (LiveRun, LiveSource, tempdir::Dir) {
        let graph = load_spec("chain", &Overrides::from_args(["length=20"]).unwrap()).unwrap();
        live_on(graph, (1, 1), length)
    }

    /// `graph` on `threads` (inter, intra), with a profiler.
    fn live_on(
        graph: crate::workload::Graph,
        (inter, intra): (usize, usize),
        length: RunLength,
    ) -> (LiveRun, LiveSource, tempdir::Dir) {
        let config = RuntimeConfig {
            inter_op_threads: inter,
            intra_op_threads: intra,
            ..RuntimeConfig::default()
        };
        let driver = Driver::new(graph, &config, &RunHooks::default()).unwrap();
        let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
        let dir = tempdir::Dir::new();
        let info = LiveInfo {
            engine: config.engine_kind,
            notices: vec!["simulated GPU".into()],
            warnings: vec!["inter-op threads = 4 and engine CPU workers = 2".into()],
            cpu_devices: vec![0],
            trace_dir: dir.path().to_path_buf(),
            ..LiveInfo::default()
        };
        let (run, source) = LiveRun::start(driver, length, &profiler, None, info).unwrap();
        (run, source, dir)
    }

    /// A run to its end: the last frame is finished and carries the summary's numbers.
    #[test]
    fn the_final_frame_has_the_summary_numbers() {
        let (run, mut source, _dir) = live(RunLength::Iterations(3));
        let mut data = source.snapshot();
        while !data.facts.finished {
            std::thread::yield_now();
            data = source.snapshot();
        }
        let summary = run.finish().unwrap();
        assert_eq!(data.facts.iterations, summary.iterations);
        assert_eq!(data.facts.gflops, Some(summary.cpu_gflops));
        assert_eq!(data.facts.gpu_gflops, summary.gpu_gflops);
        let titles: Vec<&str> = data.devices.iter().map(|d| d.title.as_str()).collect();
        assert_eq!(titles, ["cpu0", "intra-op"]);
        // The start-up warnings come apart from the header's notices.
        assert_eq!(data.facts.notices, ["simulated GPU"]);
        assert_eq!(
            data.facts.warnings,
            ["inter-op threads = 4 and engine CPU workers = 2"]
        );
    }

    /// The run's ops reach the dashboard as whole spans: each on the thread that ran it,
    /// queued before it started, one span per op id, named as the workload names its ops.
    #[test]
    fn a_runs_ops_reach_the_frames_as_spans() {
        let graph = load_spec("chain", &Overrides::from_args(["length=20"]).unwrap()).unwrap();
        let config = RuntimeConfig {
            inter_op_threads: 1,
            intra_op_threads: 1,
            ..RuntimeConfig::default()
        };
        let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
        let hooks = RunHooks {
            engine_observer: Some(Arc::new(crate::profiler::EngineProbe::new(&profiler))),
            ..RunHooks::default()
        };
        let driver = Driver::new(graph, &config, &hooks).unwrap();
        let info = LiveInfo {
            engine: config.engine_kind,
            cpu_devices: vec![0],
            ..LiveInfo::default()
        };
        let length = RunLength::Iterations(3);
        let (run, mut source) = LiveRun::start(driver, length, &profiler, None, info).unwrap();
        let summary = run.finish().unwrap();
        profiler.flush();
        let data = source.snapshot();
        let spans: Vec<_> = data.spans.iter().copied().collect();
        let ops: u64 = data.snapshot.ops.iter().map(|op| op.count).sum();
        assert_eq!(spans.len() as u64, ops, "{summary:?}");
        assert!(spans.len() >= 20, "{} spans", spans.len());
        let mut ids: Vec<u64> = spans.iter().map(|s| s.op).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), spans.len(), "one span per op");
        for span in &spans {
            assert!(span.start_ns <= span.end_ns, "{span:?}");
            let queued = span.queued_ns.expect("the queueing was seen");
            assert!(queued <= span.start_ns, "{span:?}");
            assert!(data.snapshot.op(span.name.as_str()).is_some(), "{span:?}");
            assert!(span.end_ns <= data.snapshot.at_ns, "{span:?}");
        }
        assert_eq!(data.spans.dropped(), 0);
    }

    /// Waits (up to a minute) until the run has finished `count` more iterations.
    fn wait_for_iterations(source: &LiveSource, count: u64) {
        let target = source.handle.progress().iterations + count;
        let deadline = Instant::now() + Duration::from_secs(60);
        while source.handle.progress().iterations < target {
            assert!(Instant::now() < deadline, "no progress in a minute");
            std::thread::yield_now();
        }
    }

    /// The pipeline with reads (sleeps) that keep 4 workers busy whatever the CPUs do.
    fn busy_pipeline() -> crate::workload::Graph {
        let overrides = [
            "batches=16",
            "slots=8",
            "rows=8",
            "features=16",
            "hidden=16",
            "read_us=2000",
        ];
        load_spec("pipeline", &Overrides::from_args(overrides).unwrap()).unwrap()
    }

    /// Drives `keys` (`+`, `-`, `]`, `[`) through the dashboard's controls, a few
    /// iterations apart, from `threads`; returns the final frame and the summary.
    fn resized_run(
        threads: (usize, usize),
        keys: &[char],
    ) -> (DashboardData, RunSummary, (usize, usize)) {
        let (run, mut source, _dir) = live_on(busy_pipeline(), threads, RunLength::UntilStopped);
        let (mut inter, mut intra) = threads;
        wait_for_iterations(&source, 3);
        for key in keys {
            let control = match key {
                '+' | '-' => {
                    inter = if *key == '+' { inter + 1 } else { inter - 1 };
                    Control::SetInterOp {
                        device: DeviceId::of(Device::Cpu(0)),
                        threads: inter,
                    }
                }
                _ => {
                    intra = if *key == ']' { intra + 1 } else { intra - 1 };
                    Control::SetIntraOp(intra)
                }
            };
            source.control(control).unwrap();
            wait_for_iterations(&source, 2);
        }
        let summary = run.finish().unwrap();
        (source.snapshot(), summary, (inter, intra))
    }

    /// The figures of a resized run: the summary's history ends at the counts the keys left,
    /// its spans cover the run; every lane's busy time fits in the thread time its pool had
    /// (at most one op's tail per retired thread over) and every share is within [0, 1];
    /// each profiled worker's states add up over its lifetime; the final frame shows the
    /// summary's figures.
    fn check_resized_run(data: &DashboardData, summary: &RunSummary, end: (usize, usize)) {
        let history = &summary.config_history;
        let last = history.last().unwrap();
        assert_eq!((last.inter, last.intra), end, "{history:?}");
        assert_eq!(history[0].start_s, 0.0);
        for pair in history.windows(2) {
            assert_eq!(pair[0].end_s, pair[1].start_s, "{history:?}");
        }
        for lane in &summary.utilization {
            assert!((0.0..=1.0).contains(&lane.utilization), "{lane:?}");
            let tail_s = 0.05 * history.len() as f64;
            assert!(lane.busy_s <= lane.worker_s + tail_s, "{lane:?}");
        }
        assert!(data.facts.finished);
        for worker in &data.snapshot.workers {
            let s = worker.shares_since_start;
            let sum = s.running + s.stealing + s.spinning + s.parked + s.idle;
            if worker.lifetime_ns > 0 {
                assert!((sum - 1.0).abs() < 1e-9, "{worker:?}");
            }
            assert!(worker.lifetime_ns <= data.snapshot.at_ns, "{worker:?}");
            if worker.worker.is_some() && worker.exited {
                // A pool worker is never idle while it lives: only after its exit.
                assert_eq!(s.idle, 0.0, "{worker:?}");
            }
        }
        let mostly = (summary.settings.inter, summary.settings.intra);
        let resized = history.len() > 1;
        assert_eq!(data.facts.threads_over_run, resized.then_some(mostly));
        let lane = summary
            .utilization
            .iter()
            .find(|lane| lane.kind == crate::workload::run::Lane::CpuWorkers(0))
            .unwrap();
        let usage = &data.facts.pool_usage;
        assert_eq!(usage.len(), 1, "{usage:?}");
        assert_eq!(
            (usage[0].device, usage[0].workers, usage[0].busy),
            (DeviceId::of(Device::Cpu(0)), lane.workers, lane.utilization)
        );
    }

    /// The issue's run: 4 inter-op threads, then `-` three times. The summary divides the
    /// busy time by the threads the run had (4, 3, 2, 1 over time), not by the last count.
    #[test]
    fn a_shrunk_runs_busy_share_is_of_the_threads_it_had() {
        let (data, summary, end) = resized_run((4, 1), &['-', '-', '-']);
        check_resized_run(&data, &summary, end);
        let lane = &summary.utilization[0];
        assert!(lane.workers > 1.0 && lane.workers < 4.0, "{lane:?}");
        assert!(summary.config_history.len() == 4, "{summary:?}");
        let table = summary.to_string();
        assert!(table.contains("x 1 intra, 1 x 1 at the end)"), "{table}");
        assert!(table.contains("  inter x intra 4x1 0.00-"), "{table}");
    }

    /// Random `+`/`-`/`]`/`[` sequences (seeded): every figure stays within the run.
    #[test]
    fn random_live_resizes_keep_every_share_within_the_run() {
        for seed in 0..3 {
            let mut rng = fastrand::Rng::with_seed(seed);
            let (mut inter, mut intra) = (2, 1);
            let keys: Vec<char> = (0..6)
                .map(|_| {
                    let key = match rng.u8(0..4) {
                        0 if inter < 4 => '+',
                        1 if inter > 1 => '-',
                        2 if intra < 3 => ']',
                        _ if intra > 1 => '[',
                        _ => ']',
                    };
                    match key {
                        '+' => inter += 1,
                        '-' => inter -= 1,
                        ']' => intra += 1,
                        _ => intra -= 1,
                    }
                    key
                })
                .collect();
            let (data, summary, end) = resized_run((2, 1), &keys);
            assert_eq!(end, (inter, intra), "{keys:?}");
            check_resized_run(&data, &summary, end);
            let pool = &summary.intra_pool;
            assert_eq!(pool.threads_at_end, intra);
            assert_eq!(pool.tasks_per_worker.len(), pool.threads, "{keys:?}");
        }
    }

    /// A failed export says why, down to the OS error.
    #[test]
    fn a_failed_export_names_the_os_error() {
        let (run, mut source, dir) = live(RunLength::UntilStopped);
        source.info.trace_dir = dir.path().join("missing");
        let Err(ControlError::Failed(message)) = source.control(Control::ExportTrace) else {
            panic!("an export into a missing directory succeeded");
        };
        assert!(
            message.starts_with("trace not written: ") && message.contains("(os error 2)"),
            "{message}"
        );
        run.finish().unwrap();
    }

    /// Controls reach the driver: resizes show in the next frame, exports write a file.
    #[test]
    fn controls_resize_pause_export_and_stop() {
        let (run, mut source, dir) = live(RunLength::UntilStopped);
        let cpu0 = Control::SetInterOp {
            device: DeviceId::of(Device::Cpu(0)),
            threads: 2,
        };
        assert_eq!(source.control(cpu0).unwrap(), "inter 2 on cpu0");
        source.control(Control::SetIntraOp(2)).unwrap();
        let data = source.snapshot();
        assert_eq!(
            (data.devices[0].inter_op, data.facts.intra_op),
            (Some(2), 2)
        );
        assert!(source.control(Control::SetIntraOp(0)).is_err());
        source.control(Control::Pause(true)).unwrap();
        assert!(source.handle.progress().paused);
        let message = source.control(Control::ExportTrace).unwrap();
        assert!(
            message.contains(&dir.path().display().to_string()),
            "{message}"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        source.control(Control::ResetStats).unwrap();
        let summary = run.finish().unwrap(); // stopping resumes a paused run
        let last = summary.config_history.last().unwrap();
        assert_eq!((last.inter, last.intra), (2, 2));
    }

    /// A scratch directory removed on drop (no tempfile crate in the dependencies).
    mod tempdir {
        pub(crate) struct Dir(std::path::PathBuf);

        impl Dir {
            pub(super) fn new() -> Dir {
                use crate::sync::{AtomicU32, Ordering};
                static NEXT: AtomicU32 = AtomicU32::new(0);
                let n = NEXT.fetch_add(1, Ordering::Relaxed);
                let path = std::env::temp_dir()
                    .join(format!("enginetop-live-test-{}-{n}", std::process::id()));
                std::fs::create_dir_all(&path).unwrap();
                Dir(path)
            }

            pub(super) fn path(&self) -> &std::path::Path {
                &self.0
            }
        }

        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }
}
