//! [`tune_driver`]: a whole tuning run: the workload runs on its `driver` thread until the
//! search ends, then stops and reports its iterations and checksum.
//!
//! ```text
//! driver thread: Driver::run(UntilStopped) -> RunReport (iterations, checksum)
//! caller:        search(DriverProbe(handle)) -> TuneReport ; handle.stop() ; join
//! ```
//! The probe watches a flag the driver thread sets when `run` returns, so a run that fails
//! mid-search ends the search at once with what it had (`Outcome::Ended`); the run's own
//! error comes back beside the report.
//!
//! [`tune_settings`]: the same, one run per visit of a search over settings
//! ([`search_settings`]): each built from the workload's graph and the configuration with
//! the visit's setting and counts, stopped and joined when the visit ends, all measured on
//! one clock.
#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use super::probe::{DriverProbe, IterationWork};
use super::rebuild::{search_settings, Rebuild, SettingsReport};
use super::search::{search, Basis, Halt, Probe, ProbeEvent, TuneOptions, TuneReport};
use super::setting::Setting;
use super::space::{Objective, Point, Space};
use super::{TuneError, TuneStop};
use crate::config::RuntimeConfig;
use crate::engine::EngineKind;
use crate::sync::{thread, Arc, AtomicBool, Ordering};
use crate::workload::run::{Driver, RunError, RunHooks, RunLength, RunReport};
use crate::workload::Graph;

impl TuneOptions {
    /// Options for a run configured by `config` (its counts are the start, its CPUs and
    /// `max_threads` the bounds); refuses an inter-op search on the naive engine.
    pub(crate) fn for_config(
        config: &RuntimeConfig,
        budget: Duration,
        objective: Objective,
        space: Space,
    ) -> Result<TuneOptions, TuneError> {
        if space.inter && config.engine_kind == EngineKind::Naive {
            return Err(TuneError::NoInterOpPool);
        }
        let threads = config.resolved();
        Ok(TuneOptions {
            budget,
            objective,
            space,
            start: Point {
                inter: threads.inter_op,
                intra: threads.intra_op,
            },
            cpus: config.schedulable_cpus.max(1),
            max_threads: config.max_threads,
        })
    }
}

/// The dashboard's search budget (`enginetop tune`'s default).
pub(crate) const DASHBOARD_BUDGET: Duration = Duration::from_secs(60);

impl TuneOptions {
    /// The search the dashboard's `t` runs on a run configured by `config`: throughput,
    /// `DASHBOARD_BUDGET`, both counts (only the intra-op count on the naive engine, which
    /// has no inter-op pool).
    pub(crate) fn for_dashboard(config: &RuntimeConfig) -> TuneOptions {
        let space = Space {
            inter: config.engine_kind != EngineKind::Naive,
            ..Space::default()
        };
        TuneOptions::for_config(config, DASHBOARD_BUDGET, Objective::Throughput, space)
            .expect("the naive engine's space leaves out the inter-op count")
    }
}

/// What a tuning run found, and what the run did meanwhile.
#[derive(Debug)]
pub(crate) struct TunedRun {
    /// The search's findings.
    pub(crate) report: TuneReport,
    /// The run: its iterations and checksum, or why it failed.
    pub(crate) run: Result<RunReport, RunError>,
}

/// Runs `driver` until the search over `options` ends (`stop`, the budget, or the run
/// failing), telling `observe` about each window. A refused search (a budget too short)
/// stops the run and returns the refusal.
pub(crate) fn tune_driver(
    driver: Driver,
    options: &TuneOptions,
    stop: &TuneStop,
    observe: &mut dyn FnMut(&ProbeEvent),
) -> Result<TunedRun, TuneError> {
    let mut running = RunningDriver::start(driver, options.objective, stop, Instant::now())
        .map_err(TuneError::Thread)?;
    let report = search(&mut running.probe, options, stop, observe);
    let run = running.finish();
    Ok(TunedRun {
        report: report?,
        run,
    })
}

/// A workload running on its `driver` thread, measured through its probe.
struct RunningDriver {
    probe: DriverProbe<'static>,
    runner: thread::JoinHandle<Result<RunReport, RunError>>,
}

impl RunningDriver {
    /// Starts `driver` on its thread; the probe's clock runs from `started`.
    fn start(
        mut driver: Driver,
        objective: Objective,
        stop: &TuneStop,
        started: Instant,
    ) -> std::io::Result<RunningDriver> {
        let handle = driver.handle();
        let work = IterationWork::of(driver.graph());
        let ended = Arc::new(AtomicBool::new(false));
        let ended_here = Arc::clone(&ended);
        let runner = thread::Builder::new()
            .name("driver".into())
            .spawn(move || {
                let result = driver.run(RunLength::UntilStopped, &mut |_| {});
                ended_here.store(true, Ordering::Release);
                result
            })?;
        let running = move || !ended.load(Ordering::Acquire);
        let probe = DriverProbe::new(handle, work, objective, stop.clone(), running).since(started);
        Ok(RunningDriver { probe, runner })
    }

    /// Stops the run and waits for it: its iterations and checksum, or why it failed.
    fn finish(self) -> Result<RunReport, RunError> {
        self.probe.handle().stop();
        match self.runner.join() {
            Ok(run) => run,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

impl Probe for RunningDriver {
    fn calibrate(&mut self, window: Duration) -> Result<Basis, Halt> {
        self.probe.calibrate(window)
    }

    fn measure(&mut self, point: Point, window: Duration) -> Result<f64, Halt> {
        self.probe.measure(point, window)
    }

    fn elapsed(&self) -> Duration {
        self.probe.elapsed()
    }
}

/// One run of a search over settings: its setting, and its iterations and checksum or why
/// it failed (to build, or while it ran).
#[derive(Debug)]
pub(crate) struct SettingRun {
    /// The setting it was built with.
    pub(crate) setting: Setting,
    /// What it did.
    pub(crate) run: Result<RunReport, RunError>,
}

/// What a search over settings found, and every run it built.
#[derive(Debug)]
pub(crate) struct TunedSettings {
    /// The search's findings.
    pub(crate) report: SettingsReport,
    /// Every run, in the order built.
    pub(crate) runs: Vec<SettingRun>,
}

impl TunedSettings {}

/// Searches `options`' space on `graph`, rebuilding a run configured as `config` says for
/// each setting of the space (`config`'s own first), telling `observe` about each window.
pub(crate) fn tune_settings(
    graph: &Graph,
    config: &RuntimeConfig,
    options: &TuneOptions,
    stop: &TuneStop,
    observe: &mut dyn FnMut(Setting, &ProbeEvent),
) -> Result<TunedSettings, TuneError> {
    let settings = options.space.settings(Setting::of(config));
    let mut rebuild = DriverRebuild {
        graph,
        config,
        objective: options.objective,
        stop: stop.clone(),
        started: Instant::now(),
        runs: Vec::new(),
    };
    let report = search_settings(&mut rebuild, options, &settings, stop, observe)?;
    Ok(TunedSettings {
        report,
        runs: rebuild.runs,
    })
}

/// Builds real runs of one workload, one per visit.
struct DriverRebuild<'a> {
    graph: &'a Graph,
    config: &'a RuntimeConfig,
    objective: Objective,
    stop: TuneStop,
    started: Instant,
    runs: Vec<SettingRun>,
}

impl Rebuild for DriverRebuild<'_> {
    type Run = RunningDriver;

    fn build(
        &mut self,
        setting: Setting,
        start: Point,
        basis: Option<Basis>,
    ) -> Result<RunningDriver, Halt> {
        let config = RuntimeConfig {
            inter_op_threads: start.inter,
            intra_op_threads: start.intra,
            ..setting.apply(self.config)
        };
        let failed = |why: String| Halt::Ended(format!("building the run for {setting}: {why}"));
        let driver = match Driver::new(self.graph.clone(), &config, &RunHooks::default()) {
            Ok(driver) => driver,
            Err(error) => {
                let why = crate::error_chain::text(&error);
                self.runs.push(SettingRun {
                    setting,
                    run: Err(error),
                });
                return Err(failed(why));
            }
        };
        let mut running = RunningDriver::start(driver, self.objective, &self.stop, self.started)
            .map_err(|error| failed(error.to_string()))?;
        running.probe = running.probe.on_basis(basis);
        Ok(running)
    }

    fn finish(&mut self, setting: Setting, run: RunningDriver) {
        let run = run.finish();
        self.runs.push(SettingRun { setting, run });
    }

    fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}
