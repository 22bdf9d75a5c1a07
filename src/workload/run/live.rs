//! [`DriverHandle`]: a cloneable handle that retunes, pauses, stops and watches a
//! [`Driver`](super::Driver) while it runs on another thread (the dashboard's controls).
//!
//! # Protocol
//! The driver and every handle share one [`RunControl`]:
//! - **Thread counts** are applied by the handle directly to the engine
//!   (`Engine::set_cpu_workers`) and the intra-op pool (`Pool::set_num_threads`), both of
//!   which resize live without losing queued work; the new count is then stored in an atomic
//!   (what the dashboard shows now) and in the run's [`ConfigHistory`] (what the summary
//!   integrates over). Resizes hold the history's lock while they apply, so two handles
//!   resizing at once record in the order the pools saw them. A growing resize is recorded
//!   before its threads start and a shrinking one after the pool accepted it, so the history
//!   counts every thread for as long as it lived.
//! - **Pause** is a flag under a mutex with a condition variable. The driver checks it
//!   before every op push ([`RunControl::wait_while_paused`]): a relaxed atomic load when not
//!   paused, a wait on the condvar when paused. Ops already pushed run to the end; nothing
//!   new is pushed until the flag is cleared, which notifies every waiter.
//! - **Stop** sets a flag the driver checks before each iteration, and clears the pause so a
//!   paused driver wakes up to see it. The run then drains what it pushed (at most
//!   [`ITERATIONS_IN_FLIGHT`](super::ITERATIONS_IN_FLIGHT) iterations) and returns.
//! - **Progress** is read without locks from the run's counters (FLOPs, iterations finished);
//!   its elapsed time is the timed part's *active* time: the time since it started, less the
//!   time it spent paused (the pause clock sits with the pause flag, under the same mutex).
//!   The driver's own report uses the same clock, so rates are per active second.
//!
//! No wake-up is lost: the pause flag is only changed under the mutex, and the driver
//! re-checks it under the same mutex before waiting.
#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use crate::engine::Engine;
use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, Condvar, Mutex, Ordering};

use super::error::RunError;
use super::history::ConfigHistory;
use super::scaling::Probes;

/// What the driver and its handles share.
#[derive(Debug)]
pub(super) struct RunControl {
    inter: AtomicUsize,
    intra: AtomicUsize,
    /// Mirrors `pause_lock`'s flag for the driver's lock-free check.
    paused: AtomicBool,
    pause_lock: Mutex<PauseClock>,
    resumed: Condvar,
    stop: AtomicBool,
    /// Iterations finished before the current run started (the latch counts from the first).
    first_iteration: AtomicU64,
    /// When the current run's timed part started.
    started: Mutex<Option<Instant>>,
    /// The thread counts over the current run's wall-clock time.
    history: Mutex<ConfigHistory>,
}

/// Which pool a resize applies to.
#[derive(Clone, Copy, Debug)]
pub(super) enum Resize {
    /// The engine's CPU workers.
    Inter(usize),
    /// The intra-op pool.
    Intra(usize),
}

impl RunControl {
    pub(super) fn new(inter: usize, intra: usize) -> Self {
        RunControl {
            inter: AtomicUsize::new(inter),
            intra: AtomicUsize::new(intra),
            paused: AtomicBool::new(false),
            pause_lock: Mutex::new(PauseClock::default()),
            resumed: Condvar::new(),
            stop: AtomicBool::new(false),
            first_iteration: AtomicU64::new(0),
            started: Mutex::new(None),
            history: Mutex::new(ConfigHistory::new(inter, intra)),
        }
    }

    /// The inter-op threads now.
    pub(super) fn inter(&self) -> usize {
        self.inter.load(Ordering::Relaxed)
    }

    /// The intra-op threads now.
    pub(super) fn intra(&self) -> usize {
        self.intra.load(Ordering::Relaxed)
    }

    /// Applies `resize` with `apply` (the pool's own resize) and records it: the counts
    /// become the new ones, and the history gets a segment from when the threads existed
    /// (see the module docs).
    pub(super) fn resize<E>(
        &self,
        resize: Resize,
        apply: impl FnOnce() -> Result<(), E>,
    ) -> Result<(), E> {
        let mut history = self.history.lock();
        let (inter, intra) = (self.inter(), self.intra());
        let (to, grows) = match resize {
            Resize::Inter(threads) => ((threads, intra), threads > inter),
            Resize::Intra(threads) => ((inter, threads), threads > intra),
        };
        if grows {
            history.record(self.since_start(), to.0, to.1);
        }
        if let Err(error) = apply() {
            history.record(self.since_start(), inter, intra);
            return Err(error);
        }
        if !grows {
            history.record(self.since_start(), to.0, to.1);
        }
        self.inter.store(to.0, Ordering::Relaxed);
        self.intra.store(to.1, Ordering::Relaxed);
        Ok(())
    }

    /// Wall-clock time since the current run's timed part started (zero before).
    fn since_start(&self) -> Duration {
        self.started
            .lock()
            .map_or(Duration::ZERO, |started| started.elapsed())
    }

    /// The current run's thread counts over time, and its wall-clock time so far.
    pub(super) fn history(&self) -> (ConfigHistory, Duration) {
        let history = self.history.lock();
        (history.clone(), self.since_start())
    }

    /// Whether the run should end after what it pushed.
    pub(super) fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Blocks while paused (returns at once when not, or when a stop is requested).
    pub(super) fn wait_while_paused(&self) {
        if !self.paused.load(Ordering::Acquire) {
            return;
        }
        let mut clock = self.pause_lock.lock();
        while clock.since.is_some() {
            clock = self.resumed.wait(clock);
        }
    }

    fn set_paused(&self, pause: bool) {
        let mut clock = self.pause_lock.lock();
        clock.set(pause, Instant::now());
        self.paused.store(pause, Ordering::Release);
        if !pause {
            self.resumed.notify_all();
        }
    }

    fn is_paused(&self) -> bool {
        self.paused.load(Ordering::Acquire)
    }

    fn request_stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.set_paused(false);
    }

    /// The timed part of a run starts now, after `first` iterations of earlier runs.
    pub(super) fn run_started(&self, first: u64) {
        self.first_iteration.store(first, Ordering::Relaxed);
        let mut history = self.history.lock();
        let now = Instant::now();
        *self.started.lock() = Some(now);
        *history = ConfigHistory::new(self.inter(), self.intra());
        self.pause_lock.lock().restart(now);
    }

    /// The current run's active time: since it started, less the time it spent paused.
    pub(super) fn elapsed(&self) -> Duration {
        let Some(started) = *self.started.lock() else {
            return Duration::ZERO;
        };
        let now = Instant::now();
        let paused = self.pause_lock.lock().paused_for(now);
        now.saturating_duration_since(started)
            .saturating_sub(paused)
    }
}

/// The pause flag and the time spent paused since the run started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct PauseClock {
    /// Paused since then (`None`: running).
    since: Option<Instant>,
    /// Paused time of pauses that ended.
    total: Duration,
}

impl PauseClock {
    /// Pauses or resumes at `now` (pausing twice keeps the first start).
    fn set(&mut self, pause: bool, now: Instant) {
        match (pause, self.since) {
            (true, None) => self.since = Some(now),
            (false, Some(since)) => {
                self.total += now.saturating_duration_since(since);
                self.since = None;
            }
            _ => {}
        }
    }

    /// A run starts at `now`: earlier pauses no longer count (a pause in force does, from now).
    fn restart(&mut self, now: Instant) {
        self.total = Duration::ZERO;
        self.since = self.since.map(|_| now);
    }

    /// Time paused up to `now`, the pause in force included.
    fn paused_for(&self, now: Instant) -> Duration {
        let current = self
            .since
            .map_or(Duration::ZERO, |since| now.saturating_duration_since(since));
        self.total + current
    }
}

/// Where a running workload stands, read through a [`DriverHandle`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LiveProgress {
    /// Iterations finished in this run.
    pub iterations: u64,
    /// Ops finished in this run (the iteration markers not counted).
    pub ops: u64,
    /// FLOPs of the ops finished in this run.
    pub flops: u64,
    /// Of which ops on GPU contexts.
    pub gpu_flops: u64,
    /// The run's timed part's active time: since it started, paused time excluded (zero
    /// during setup).
    pub elapsed: Duration,
    /// Inter-op threads now.
    pub inter: usize,
    /// Intra-op threads now.
    pub intra: usize,
    /// Whether pushing is paused.
    pub paused: bool,
}

/// A cloneable handle on a [`Driver`](super::Driver) that may be running on another thread:
/// resize its pools, pause it, stop it, read its progress.
///
/// ```
/// use enginetop::config::RuntimeConfig;
/// use enginetop::workload::run::{Driver, RunHooks, RunLength};
/// use enginetop::workload::{load_spec, Overrides};
///
/// let graph = load_spec("chain", &Overrides::from_args(["length=20"]).unwrap()).unwrap();
/// let config = RuntimeConfig { inter_op_threads: 1, intra_op_threads: 1, ..Default::default() };
/// let mut driver = Driver::new(graph, &config, &RunHooks::default()).unwrap();
/// let handle = driver.handle();
/// let runner = std::thread::spawn(move || driver.run(RunLength::UntilStopped, &mut |_| {}));
/// handle.set_inter_op_threads(2).unwrap();
/// handle.stop();
/// let report = runner.join().unwrap().unwrap();
/// assert!(report.iterations >= 1);
/// assert_eq!(handle.progress().inter, 2);
/// ```
#[derive(Clone, Debug)]
pub struct DriverHandle {
    pub(super) engine: Engine,
    pub(super) shared: crate::sync::Arc<super::driver::Shared>,
    pub(super) control: crate::sync::Arc<RunControl>,
}

impl DriverHandle {
    /// Resizes the engine's CPU worker pools (the inter-op threads) while ops run.
    pub fn set_inter_op_threads(&self, threads: usize) -> Result<(), RunError> {
        self.control
            .resize(Resize::Inter(threads), || {
                self.engine.set_cpu_workers(threads)
            })
            .map_err(|source| RunError::Engine {
                what: "inter-op resize",
                source,
            })
    }

    /// Resizes the intra-op pool while ops run.
    pub(crate) fn set_intra_op_threads(&self, threads: usize) -> Result<(), RunError> {
        let pool = &self.shared.intra;
        self.control
            .resize(Resize::Intra(threads), || pool.set_num_threads(threads))
            .map_err(|source| RunError::IntraPool {
                kind: pool.kind(),
                threads,
                source,
            })
    }

    /// One verdict line per device on the last finished iteration (`cpu0: critical path:
    /// ...`), with the threads' descheduled time since the previous lines; recomputed at
    /// most once a second, empty until two iterations have finished.
    pub fn verdicts(&self) -> Vec<String> {
        let settings = super::summary::RunSettings {
            inter: self.control.inter(),
            intra: self.control.intra(),
            ..self.shared.settings.clone()
        };
        let shared = &self.shared;
        let probes = Probes {
            split: &shared.split,
            intra: shared.intra.as_dyn(),
            handoff: &shared.handoff,
        };
        shared.live_verdicts.lines(
            shared.iterations_done(),
            &shared.times,
            probes,
            &shared.shape,
            &settings,
        )
    }

    /// The step predicted for other thread counts from the run's op times and body splits
    /// so far (the summary's what-if grid), as of the latest verdict lines that recomputed
    /// it: at most every five seconds, and whenever the thread counts changed.
    pub fn predicted(&self) -> Option<super::PredictedCurve> {
        self.shared.live_verdicts.predicted()
    }

    /// The last finished iteration's work, span and critical path, and the threads'
    /// descheduled time, as of the latest verdict lines ([`verdicts`](Self::verdicts)).
    pub fn scaling(&self) -> Option<crate::analysis::LiveScaling> {
        self.shared.live_verdicts.scaling()
    }

    /// Stops (`true`) or resumes (`false`) pushing ops; ops already pushed finish.
    pub fn pause(&self, pause: bool) {
        self.control.set_paused(pause);
    }

    /// Ends the run after the iterations already pushed (resuming it if paused).
    pub fn stop(&self) {
        self.control.request_stop();
    }

    /// Where the run stands now.
    pub fn progress(&self) -> LiveProgress {
        let done = self.shared.iterations_done();
        LiveProgress {
            iterations: done.saturating_sub(self.control.first_iteration.load(Ordering::Relaxed)),
            ops: self.shared.counters.ops(),
            flops: self.shared.counters.flops(),
            gpu_flops: self.shared.gpu_flops.load(Ordering::Relaxed),
            elapsed: self.control.elapsed(),
            inter: self.control.inter(),
            intra: self.control.intra(),
            paused: self.control.is_paused(),
        }
    }

    /// Waits until `count` iterations of this run have finished, or until `deadline`;
    /// returns how many have (the tuner's measurement windows end on iteration ends).
    pub(crate) fn wait_for_iterations(&self, count: u64, deadline: Instant) -> u64 {
        let first = self.control.first_iteration.load(Ordering::Relaxed);
        let done = self
            .shared
            .wait_for_iterations(first.saturating_add(count), deadline);
        done.saturating_sub(first)
    }

    /// The engine (its stats).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::Arc;

    /// Paused time is left out of the elapsed time, the pause in force included; a new run
    /// starts from zero paused time.
    #[test]
    fn the_pause_clock_counts_paused_time() {
        let base = Instant::now();
        let at = |ms: u64| base + Duration::from_millis(ms);
        let mut clock = PauseClock::default();
        clock.set(true, at(1_000));
        clock.set(true, at(1_500)); // already paused: keeps the first start
        clock.set(false, at(3_000));
        clock.set(false, at(4_000)); // already running
        assert_eq!(clock.paused_for(at(5_000)), Duration::from_secs(2));
        clock.set(true, at(6_000));
        assert_eq!(clock.paused_for(at(7_000)), Duration::from_secs(3));
        clock.restart(at(8_000));
        assert_eq!(clock.paused_for(at(9_000)), Duration::from_secs(1));
    }

    /// While paused the run's elapsed time stands still (exactly: it is the time up to the
    /// pause), and it runs again after a resume.
    #[test]
    fn elapsed_stands_still_while_paused() {
        let control = RunControl::new(1, 1);
        control.run_started(0);
        control.set_paused(true);
        let frozen = control.elapsed();
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(control.elapsed(), frozen);
        control.set_paused(false);
        std::thread::sleep(Duration::from_millis(5));
        assert!(control.elapsed() > frozen);
    }

    #[test]
    fn a_paused_waiter_resumes_on_resume_and_on_stop() {
        let control = Arc::new(RunControl::new(1, 1));
        control.wait_while_paused(); // not paused: returns at once
        for stop in [false, true] {
            control.set_paused(true);
            let waiter = {
                let control = control.clone();
                std::thread::spawn(move || control.wait_while_paused())
            };
            if stop {
                control.request_stop();
            } else {
                control.set_paused(false);
            }
            waiter.join().unwrap();
            assert!(!control.is_paused());
        }
        assert!(control.stop_requested());
    }
}
