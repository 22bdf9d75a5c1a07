//! [`DriverProbe`]: measurement windows on a running workload, through its
//! [`DriverHandle`].
//!
//! A window first resizes the run (only the counts that change), then lets it settle for
//! [`SETTLE_FRACTION`] of the window (ops queued under the old counts drain, new workers
//! start; nothing of it is counted), then measures as the calibration decided:
//! - **whole iterations**: from one iteration end to the first iteration end at least a
//!   window later, waiting on the run's iteration latch; the figure is iterations over that
//!   time (throughput) or the median time between iteration ends (latency);
//! - **op throughput / GFLOP/s** (an iteration is long next to a window): ops or FLOPs done
//!   over the window, turned into iterations per second with the graph's work per iteration.
//!
//! A window that sees no iteration end in four windows' time falls back to the ops done, so
//! a very slow point still gets a figure. Every wait is in short steps that check the stop
//! button and whether the run still goes.
#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use super::search::{Basis, Halt, Probe, SETTLE_FRACTION};
use super::space::{Objective, Point};
use super::stats::median;
use super::TuneStop;
use crate::workload::run::{DriverHandle, LiveProgress};
use crate::workload::Graph;

/// The longest a wait goes before checking the stop button and the run.
const STEP: Duration = Duration::from_millis(20);
/// The fewest iterations a calibration window must see for windows of whole iterations.
const MIN_ITERATIONS: u64 = 4;
/// How many windows long a window of whole iterations may run before it falls back to ops.
const PATIENCE: u32 = 4;

/// The work of one iteration, to turn op or FLOP throughput into iterations per second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct IterationWork {
    /// Ops per iteration.
    pub(crate) ops: u64,
    /// FLOPs per iteration (0: the workload counts none).
    pub(crate) flops: u64,
}

impl IterationWork {
    /// `graph`'s work per iteration.
    pub(crate) fn of(graph: &Graph) -> Self {
        IterationWork {
            ops: graph.iteration.len() as u64,
            flops: graph.iteration_flops(),
        }
    }
}

/// Measures a running workload through `handle` (see the module docs).
pub(crate) struct DriverProbe<'a> {
    handle: DriverHandle,
    work: IterationWork,
    objective: Objective,
    stop: TuneStop,
    /// Whether the run still goes (its thread has not ended).
    running: Box<dyn Fn() -> bool + Send + 'a>,
    started: Instant,
    basis: Basis,
    /// The basis every window uses, whatever the calibration sees (a rebuilt run's figures
    /// compare with the first run's).
    fixed: Option<Basis>,
}

impl std::fmt::Debug for DriverProbe<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DriverProbe")
            .field("work", &self.work)
            .field("objective", &self.objective)
            .field("basis", &self.basis)
            .finish()
    }
}

impl<'a> DriverProbe<'a> {
    /// A probe on the run behind `handle`, whose graph does `work` per iteration; `running`
    /// says whether the run still goes.
    pub(crate) fn new(
        handle: DriverHandle,
        work: IterationWork,
        objective: Objective,
        stop: TuneStop,
        running: impl Fn() -> bool + Send + 'a,
    ) -> Self {
        DriverProbe {
            handle,
            work,
            objective,
            stop,
            running: Box::new(running),
            started: Instant::now(),
            basis: Basis::Iterations,
            fixed: None,
        }
    }

    /// The same probe with its clock from `started` (one clock over several runs).
    pub(crate) fn since(mut self, started: Instant) -> Self {
        self.started = started;
        self
    }

    /// The run's handle.
    pub(crate) fn handle(&self) -> &DriverHandle {
        &self.handle
    }

    /// The same probe measuring on `basis` when given: its calibration only warms up.
    pub(crate) fn on_basis(mut self, basis: Option<Basis>) -> Self {
        self.fixed = basis;
        self
    }

    /// Why waiting cannot go on, if it cannot.
    fn check(&self) -> Result<(), Halt> {
        if self.stop.is_stopped() {
            return Err(Halt::Stopped);
        }
        if !(self.running)() {
            return Err(Halt::Ended("the run ended".into()));
        }
        if self.handle.progress().paused {
            return Err(Halt::Ended("the run was paused".into()));
        }
        Ok(())
    }

    /// Waits until `deadline`, in steps.
    fn nap_until(&self, deadline: Instant) -> Result<(), Halt> {
        loop {
            self.check()?;
            let now = Instant::now();
            if now >= deadline {
                return Ok(());
            }
            std::thread::sleep(STEP.min(deadline - now));
        }
    }

    /// Waits for the next iteration end after `done`, until `deadline`; returns the count and
    /// when it was seen (`None` at the deadline).
    fn next_iteration(&self, done: u64, deadline: Instant) -> Result<Option<(u64, Instant)>, Halt> {
        loop {
            self.check()?;
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            let count = self
                .handle
                .wait_for_iterations(done + 1, (now + STEP).min(deadline));
            if count > done {
                return Ok(Some((count, Instant::now())));
            }
        }
    }

    fn resize(&self, point: Point) -> Result<(), Halt> {
        let now = self.handle.progress();
        let refused = |error| Halt::Ended(crate::error_chain::text(&error));
        if now.inter != point.inter {
            self.handle
                .set_inter_op_threads(point.inter)
                .map_err(refused)?;
        }
        if now.intra != point.intra {
            self.handle
                .set_intra_op_threads(point.intra)
                .map_err(refused)?;
        }
        Ok(())
    }

    fn settle(&self, window: Duration) -> Result<(), Halt> {
        self.nap_until(Instant::now() + window.mul_f64(SETTLE_FRACTION))
    }

    /// A window of whole iterations (falling back to ops when none ends in time).
    fn iterations_window(&self, window: Duration) -> Result<f64, Halt> {
        let begin = Instant::now();
        let patience = begin + window * PATIENCE;
        let done = self.handle.progress().iterations;
        let Some((first, t0)) = self.next_iteration(done, patience)? else {
            return self.rate_window(window, Basis::Ops);
        };
        let (mut count, mut at) = (first, t0);
        let mut steps = Vec::new();
        while at.duration_since(t0) < window {
            match self.next_iteration(count, patience.max(t0 + window * 2))? {
                Some((next, seen)) => {
                    let step = seen.duration_since(at).as_secs_f64() / (next - count) as f64;
                    steps.extend(std::iter::repeat_n(step, (next - count) as usize));
                    (count, at) = (next, seen);
                }
                None if count > first => break,
                None => return self.rate_window(window, Basis::Ops),
            }
        }
        let elapsed = at.duration_since(t0).as_secs_f64();
        Ok(match self.objective {
            Objective::Throughput => (count - first) as f64 / elapsed,
            Objective::Latency => median(&steps),
        })
    }

    /// A window of op or FLOP throughput, in iterations per second (or seconds per step).
    fn rate_window(&self, window: Duration, basis: Basis) -> Result<f64, Halt> {
        let (before, t0) = (self.handle.progress(), Instant::now());
        self.nap_until(t0 + window)?;
        let (after, t1) = (self.handle.progress(), Instant::now());
        let seconds = t1.duration_since(t0).as_secs_f64();
        let per_second = self.iterations_done(basis, &before, &after) / seconds;
        Ok(match self.objective {
            Objective::Throughput => per_second,
            Objective::Latency if per_second > 0.0 => 1.0 / per_second,
            Objective::Latency => seconds,
        })
    }

    /// Iterations' worth of work done between `before` and `after`, counted on `basis`.
    fn iterations_done(&self, basis: Basis, before: &LiveProgress, after: &LiveProgress) -> f64 {
        let per = |done: u64, per_iteration: u64| done as f64 / per_iteration.max(1) as f64;
        match basis {
            Basis::Iterations => after.iterations.saturating_sub(before.iterations) as f64,
            Basis::Flops => per(after.flops.saturating_sub(before.flops), self.work.flops),
            Basis::Ops => per(after.ops.saturating_sub(before.ops), self.work.ops),
        }
    }
}

impl Probe for DriverProbe<'_> {
    fn calibrate(&mut self, window: Duration) -> Result<Basis, Halt> {
        self.settle(window)?;
        let before = self.handle.progress();
        self.nap_until(Instant::now() + window)?;
        let after = self.handle.progress();
        self.basis = if let Some(fixed) = self.fixed {
            fixed
        } else if after.iterations.saturating_sub(before.iterations) >= MIN_ITERATIONS {
            Basis::Iterations
        } else if self.work.flops > 0 {
            Basis::Flops
        } else {
            Basis::Ops
        };
        Ok(self.basis)
    }

    fn measure(&mut self, point: Point, window: Duration) -> Result<f64, Halt> {
        self.check()?;
        self.resize(point)?;
        self.settle(window)?;
        match self.basis {
            Basis::Iterations => self.iterations_window(window),
            basis => self.rate_window(window, basis),
        }
    }

    fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}
