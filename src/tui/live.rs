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

use super::source::{
    Control, ControlError, DashboardData, DashboardSource, DeviceKind, DeviceLayout, Facts,
    StreamLayout,
};
use crate::engine::EngineKind;
use crate::profiler::{Profiler, Snapshot};
use crate::sync::{thread, Arc, Mutex};
use crate::workload::run::{
    Driver, DriverHandle, GflopsSplit, ProfilerReport, RunError, RunLength, RunSummary,
};

/// How long the header's GFLOP/s averages over.
const RATE_WINDOW: Duration = Duration::from_secs(1);

/// What the source shows that neither the profiler nor the driver's progress tells.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LiveInfo {
    /// The engine kind (what `+`/`-` can resize).
    pub engine: EngineKind,
    /// The pool kind's name.
    pub pool_kind: String,
    /// CPUs the process may use.
    pub cores: usize,
    /// The GEMM peak to compare with.
    pub peak_gflops: Option<f64>,
    /// Remarks for the header (`simulated GPU`).
    pub notices: Vec<String>,
    /// Start-up warnings, shown in the footer when the dashboard starts.
    pub warnings: Vec<String>,
    /// The CPU devices the workload's ops run on (panel `cpu<i>` each).
    pub cpu_devices: Vec<u32>,
    /// The GPUs the workload's ops run on.
    pub gpus: Vec<u32>,
    /// A GPU's description for its panel title: `simulated: ...` or the real GPU's name.
    pub gpu_model: Option<String>,
    /// Where `e` writes traces.
    pub trace_dir: PathBuf,
}

/// The final numbers, set by the driver thread when the run ends.
#[derive(Clone, Debug, PartialEq)]
struct Outcome {
    iterations: u64,
    elapsed: Duration,
    gflops: GflopsSplit,
    error: Option<String>,
}

type OutcomeSlot = Arc<Mutex<Option<Outcome>>>;

/// A workload running on its `driver` thread, for the dashboard.
#[derive(Debug)]
pub struct LiveRun {
    handle: DriverHandle,
    thread: thread::JoinHandle<Result<RunSummary, RunError>>,
}

impl LiveRun {
    /// Starts `driver` on a thread named `driver` for `length`; returns the run and the
    /// dashboard's source over it. `report` and `peak_gflops` go into the run's summary.
    pub fn start(
        mut driver: Driver,
        length: RunLength,
        profiler: &Profiler,
        report: Option<Arc<dyn ProfilerReport>>,
        info: LiveInfo,
    ) -> std::io::Result<(LiveRun, LiveSource)> {
        let handle = driver.handle();
        let outcome: OutcomeSlot = Arc::new(Mutex::new(None));
        let slot = outcome.clone();
        let peak = info.peak_gflops;
        let workload = driver.graph().name.clone();
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
            handle: handle.clone(),
            profiler: profiler.clone(),
            workload,
            info,
            outcome,
            samples: VecDeque::new(),
            exports: 0,
        };
        Ok((LiveRun { handle, thread }, source))
    }

    /// Stops the run (after the iterations it pushed), waits for it, and returns its summary.
    pub fn finish(self) -> Result<RunSummary, RunError> {
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
            error: None,
        },
        Err(error) => Outcome {
            iterations: 0,
            elapsed: Duration::ZERO,
            gflops: GflopsSplit::default(),
            error: Some(crate::error_chain::text(&error)),
        },
    }
}

/// The dashboard's source over a [`LiveRun`] (see the module docs).
pub struct LiveSource {
    handle: DriverHandle,
    profiler: Profiler,
    workload: String,
    info: LiveInfo,
    outcome: OutcomeSlot,
    /// (when, FLOPs done, of which on GPUs) over the last [`RATE_WINDOW`], oldest first.
    samples: VecDeque<(Instant, u64, u64)>,
    exports: u32,
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
                title: format!("cpu{id}"),
                kind: DeviceKind::Cpu,
                workers: cpu_profiler_device(id),
                priority: (engine == EngineKind::PerDevice && index == 0)
                    .then(|| PRIORITY_DEVICE.to_string()),
                streams: Vec::new(),
                inter_op: resizable.then_some(inter),
                model: None,
            })
            .collect();
        for &gpu in &self.info.gpus {
            layout.push(gpu_layout(gpu, snapshot, self.info.gpu_model.clone()));
        }
        layout.push(DeviceLayout {
            title: "intra-op".into(),
            kind: DeviceKind::IntraOp,
            workers: INTRA_DEVICE.into(),
            ..DeviceLayout::default()
        });
        layout
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

/// The profiler device of the engine's ops and workers on CPU `id` (what the engine probe
/// records ops under; the CLI names the engine's worker pools the same).
pub fn cpu_profiler_device(id: u32) -> String {
    format!("cpu({id})")
}

/// The profiler device of the engine's CPU priority pool.
pub const PRIORITY_DEVICE: &str = "cpu-prio";

/// The profiler device of the intra-op pool.
pub const INTRA_DEVICE: &str = "intra-op";

/// The profiler device name a pool the engine starts is recorded under (the profiler's
/// mapping, so the dashboard and the profiler's own pool probes agree).
pub use crate::profiler::pool_probe::engine_pool_device;

/// GPU `gpu`'s panel: its streams as the profiler has seen them (compute first).
fn gpu_layout(gpu: u32, snapshot: &Snapshot, model: Option<String>) -> DeviceLayout {
    let device = format!("gpu({gpu})");
    let mut streams: Vec<StreamLayout> = snapshot
        .streams
        .iter()
        .filter(|stream| stream.device == device)
        .map(|stream| StreamLayout::of_code(&device, stream.stream))
        .collect();
    streams.sort_by_key(|stream| stream.stream);
    DeviceLayout {
        title: format!("gpu{gpu}"),
        kind: DeviceKind::Gpu,
        workers: device,
        priority: None,
        streams,
        inter_op: None,
        model,
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
        let snapshot = self.profiler.snapshot();
        let devices = self.layout(&snapshot, self.handle.progress().inter);
        DashboardData {
            snapshot,
            facts,
            devices,
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
                Ok(format!("inter {threads} on {device}"))
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
        }
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
        let config = RuntimeConfig {
            inter_op_threads: 1,
            intra_op_threads: 1,
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
            device: "cpu0".into(),
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
        assert_eq!((summary.settings.inter, summary.settings.intra), (2, 2));
    }

    /// A scratch directory removed on drop (no tempfile crate in the dependencies).
    mod tempdir {
        pub struct Dir(std::path::PathBuf);

        impl Dir {
            pub fn new() -> Dir {
                use crate::sync::{AtomicU32, Ordering};
                static NEXT: AtomicU32 = AtomicU32::new(0);
                let n = NEXT.fetch_add(1, Ordering::Relaxed);
                let path = std::env::temp_dir()
                    .join(format!("enginetop-live-test-{}-{n}", std::process::id()));
                std::fs::create_dir_all(&path).unwrap();
                Dir(path)
            }

            pub fn path(&self) -> &std::path::Path {
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
