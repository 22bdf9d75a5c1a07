//! [`OpTimes`]: each iteration op's measured time, per iteration in flight and summed over
//! the run, for the scaling analysis ([`crate::analysis`]), and when each was pushed,
//! started and on which worker thread, for the engine's measured cost between ops
//! ([`crate::analysis::dispatch_costs`]).
//!
//! # Protocol
//! An op body of iteration `i` stores its time in slot `i % SLOTS` at its op's index, and
//! adds it to the op's run total; the iteration's marker op stores the iteration's end time
//! in the same slot. Every cell is an atomic written by one op at a time (the engine runs
//! an op of one iteration once), so writers never contend. At most
//! [`ITERATIONS_IN_FLIGHT`](super::ITERATIONS_IN_FLIGHT) iterations run at once and
//! `SLOTS` is larger, so the slot of the last finished iteration is not rewritten until two
//! more iterations have finished: a reader (the summary after the run, or the dashboard
//! live) reads it whole, except for a reader that stalls that long (its analysis then mixes
//! two iterations' times of the same ops, never torn values).
#![forbid(unsafe_code)]

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use crate::analysis::{IterationTimes, OpRunTimes};
use crate::sync::{thread_local, AtomicU32, AtomicU64, Ordering};

/// Iteration slots kept: the ones in flight, the last finished one and a spare.
const SLOTS: u64 = 4;

/// The ops' times of the iterations in flight and of the whole run.
#[derive(Debug)]
pub(super) struct OpTimes {
    ops: usize,
    /// `SLOTS` rows of `ops` times, in ns.
    slots: Vec<AtomicU64>,
    /// Laid out as `slots`: when each op was pushed (ns since `epoch`).
    pushes: Vec<AtomicU64>,
    /// Laid out as `slots`: when each op started (ns since `epoch`).
    starts: Vec<AtomicU64>,
    /// Laid out as `slots`: the worker thread that ran each op ([`worker_number`]).
    workers: Vec<AtomicU32>,
    /// Per slot, when its iteration ended (ns since `epoch`; 0: not yet).
    ends: Vec<AtomicU64>,
    /// Per op, its time summed over the run, in ns.
    totals: Vec<AtomicU64>,
    epoch: Instant,
}

impl OpTimes {
    /// Room for an iteration of `ops` ops.
    pub(super) fn new(ops: usize) -> Self {
        let zeros = |count: usize| (0..count).map(|_| AtomicU64::new(0)).collect();
        OpTimes {
            ops,
            slots: zeros(ops * SLOTS as usize),
            pushes: zeros(ops * SLOTS as usize),
            starts: zeros(ops * SLOTS as usize),
            workers: (0..ops * SLOTS as usize)
                .map(|_| AtomicU32::new(0))
                .collect(),
            ends: zeros(SLOTS as usize),
            totals: zeros(ops),
            epoch: Instant::now(),
        }
    }

    /// Op `op` (its index in the iteration) of iteration `iteration`, pushed at `pushed`,
    /// started at `start` on the calling thread and took `time`.
    pub(super) fn record(
        &self,
        iteration: u64,
        op: usize,
        (pushed, start): (Instant, Instant),
        time: Duration,
    ) {
        let nanos = nanos(time);
        let cell = self.cell(iteration, op);
        self.slots[cell].store(nanos, Ordering::Relaxed);
        self.pushes[cell].store(self.since_epoch(pushed), Ordering::Relaxed);
        self.starts[cell].store(self.since_epoch(start), Ordering::Relaxed);
        self.workers[cell].store(worker_number(), Ordering::Relaxed);
        self.totals[op].fetch_add(nanos, Ordering::Relaxed);
    }

    fn since_epoch(&self, at: Instant) -> u64 {
        nanos(at.saturating_duration_since(self.epoch))
    }

    /// When each op of iteration `iteration` was pushed, started and ended, on which
    /// worker, and when the iteration before ended (read once the iteration and the one
    /// before are done, within [`SLOTS`]` - 1` iterations of the last one).
    pub(super) fn iteration_times(&self, iteration: u64) -> IterationTimes {
        let ops = (0..self.ops).map(|op| {
            let cell = self.cell(iteration, op);
            let start = self.starts[cell].load(Ordering::Relaxed);
            OpRunTimes {
                pushed: self.pushes[cell].load(Ordering::Relaxed),
                start,
                end: start + self.slots[cell].load(Ordering::Relaxed),
                worker: self.workers[cell].load(Ordering::Relaxed),
            }
        });
        let previous = iteration.checked_sub(1);
        let previous_end =
            previous.map(|before| self.ends[(before % SLOTS) as usize].load(Ordering::Acquire));
        IterationTimes {
            ops: ops.collect(),
            previous_end: previous_end.filter(|&end| end > 0),
        }
    }

    /// Iteration `iteration` ended now.
    pub(super) fn end(&self, iteration: u64) {
        let nanos = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.ends[(iteration % SLOTS) as usize].store(nanos.max(1), Ordering::Release);
    }

    /// The run totals back to zero (a new run starts).
    pub(super) fn reset(&self) {
        self.totals
            .iter()
            .for_each(|total| total.store(0, Ordering::Relaxed));
    }

    /// Each op's time in iteration `iteration`.
    pub(super) fn iteration(&self, iteration: u64) -> Vec<Duration> {
        (0..self.ops)
            .map(|op| self.slots[self.cell(iteration, op)].load(Ordering::Relaxed))
            .map(Duration::from_nanos)
            .collect()
    }

    /// Each op's time summed over the run.
    pub(super) fn totals(&self) -> Vec<Duration> {
        let load = |total: &AtomicU64| Duration::from_nanos(total.load(Ordering::Relaxed));
        self.totals.iter().map(load).collect()
    }

    /// The time between the ends of iterations `iteration - 1` and `iteration` (`None` when
    /// either is unknown).
    pub(super) fn step(&self, iteration: u64) -> Option<Duration> {
        let end = |iteration: u64| self.ends[(iteration % SLOTS) as usize].load(Ordering::Acquire);
        let (before, last) = (end(iteration.checked_sub(1)?), end(iteration));
        (before > 0 && last > before).then(|| Duration::from_nanos(last - before))
    }

    fn cell(&self, iteration: u64, op: usize) -> usize {
        (iteration % SLOTS) as usize * self.ops + op
    }
}

/// Iterations whose [`OpTimes::iteration_times`] stay readable after a run: the slot of the
/// iteration before the oldest must still hold its end.
pub(super) const READABLE_ITERATIONS: u64 = SLOTS - 1;

fn nanos(time: Duration) -> u64 {
    u64::try_from(time.as_nanos()).unwrap_or(u64::MAX)
}

/// The next thread's number.
static NEXT_WORKER: LazyLock<AtomicU32> = LazyLock::new(|| AtomicU32::new(1));

// Thread-local: which worker ran an op is a fact about the thread, so the op's body marks
// it without shared state.
thread_local! {
    /// This thread's number (0: not given yet).
    #[allow(clippy::missing_const_for_thread_local)] // loom's thread_local! has no const form
    static WORKER: std::cell::Cell<u32> = std::cell::Cell::new(0);
}

/// The calling thread's number, given on first use.
fn worker_number() -> u32 {
    WORKER.with(|number| {
        if number.get() == 0 {
            number.set(NEXT_WORKER.fetch_add(1, Ordering::Relaxed));
        }
        number.get()
    })
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    #[test]
    fn iterations_keep_their_own_times_and_the_run_sums_them() {
        let times = OpTimes::new(2);
        let now = (Instant::now(), Instant::now());
        times.record(0, 0, now, 3 * US);
        times.record(0, 1, now, 4 * US);
        times.record(1, 0, now, 5 * US);
        assert_eq!(times.iteration(0), [3 * US, 4 * US]);
        assert_eq!(times.iteration(1), [5 * US, Duration::ZERO]);
        assert_eq!(times.totals(), [8 * US, 4 * US]);
        times.reset();
        assert_eq!(times.totals(), [Duration::ZERO; 2]);
        assert_eq!(
            times.iteration(0),
            [3 * US, 4 * US],
            "a reset keeps the slots"
        );
    }

    #[test]
    fn an_iteration_keeps_when_each_op_was_pushed_and_ran_and_where() {
        let times = OpTimes::new(2);
        let pushed = times.epoch + 10 * US;
        let start = pushed + 5 * US;
        times.record(1, 0, (pushed, start), 3 * US);
        times.record(1, 1, (pushed, start + 3 * US), 2 * US);
        times.end(0);
        let iteration = times.iteration_times(1);
        let first = iteration.ops[0];
        assert_eq!(
            (first.pushed, first.start, first.end),
            (10_000, 15_000, 18_000)
        );
        assert_eq!(iteration.ops[1].end, 20_000);
        assert_eq!(first.worker, iteration.ops[1].worker, "one thread ran both");
        assert!(first.worker > 0);
        assert!(iteration.previous_end.is_some());
        assert_eq!(times.iteration_times(0).previous_end, None);
    }

    #[test]
    fn a_step_needs_both_ends() {
        let times = OpTimes::new(1);
        assert_eq!(times.step(0), None);
        times.end(0);
        assert_eq!(times.step(1), None);
        std::thread::yield_now();
        times.end(1);
        while times.step(1).is_none() {
            times.end(1); // the clock may not have moved yet
        }
        assert!(times.step(1).unwrap() > Duration::ZERO);
    }
}
