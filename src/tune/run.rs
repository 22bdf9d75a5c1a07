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
#![forbid(unsafe_code)]

use std::time::Duration;

use super::probe::{DriverProbe, IterationWork};
use super::search::{search, ProbeEvent, TuneOptions, TuneReport};
use super::space::{Objective, Point, Space};
use super::{TuneError, TuneStop};
use crate::config::RuntimeConfig;
use crate::engine::EngineKind;
use crate::sync::{thread, Arc, AtomicBool, Ordering};
use crate::workload::run::{Driver, RunError, RunLength, RunReport};

impl TuneOptions {
    /// Options for a run configured by `config` (its counts are the start, its CPUs and
    /// `max_threads` the bounds); refuses an inter-op search on the naive engine.
    pub fn for_config(
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
pub const DASHBOARD_BUDGET: Duration = Duration::from_secs(60);

impl TuneOptions {
    /// The search the dashboard's `t` runs on a run configured by `config`: throughput,
    /// [`DASHBOARD_BUDGET`], both counts (only the intra-op count on the naive engine, which
    /// has no inter-op pool).
    pub fn for_dashboard(config: &RuntimeConfig) -> TuneOptions {
        let space = Space {
            inter: config.engine_kind != EngineKind::Naive,
            intra: true,
        };
        TuneOptions::for_config(config, DASHBOARD_BUDGET, Objective::Throughput, space)
            .expect("the naive engine's space leaves out the inter-op count")
    }
}

/// What a tuning run found, and what the run did meanwhile.
#[derive(Debug)]
pub struct TunedRun {
    /// The search's findings.
    pub report: TuneReport,
    /// The run: its iterations and checksum, or why it failed.
    pub run: Result<RunReport, RunError>,
}

/// Runs `driver` until the search over `options` ends (`stop`, the budget, or the run
/// failing), telling `observe` about each window. A refused search (a budget too short)
/// stops the run and returns the refusal.
pub fn tune_driver(
    mut driver: Driver,
    options: &TuneOptions,
    stop: &TuneStop,
    observe: &mut dyn FnMut(&ProbeEvent),
) -> Result<TunedRun, TuneError> {
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
        })
        .map_err(TuneError::Thread)?;
    let running = move || !ended.load(Ordering::Acquire);
    let mut probe = DriverProbe::new(
        handle.clone(),
        work,
        options.objective,
        stop.clone(),
        running,
    );
    let report = search(&mut probe, options, stop, observe);
    handle.stop();
    let run = match runner.join() {
        Ok(run) => run,
        Err(panic) => std::panic::resume_unwind(panic),
    };
    Ok(TunedRun {
        report: report?,
        run,
    })
}
