//! [`OpTimes`]: each iteration op's measured time, per iteration in flight and summed over
//! the run, for the scaling analysis ([`crate::analysis`]).
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

use std::time::{Duration, Instant};

use crate::sync::{AtomicU64, Ordering};

/// Iteration slots kept: the ones in flight, the last finished one and a spare.
const SLOTS: u64 = 4;

/// The ops' times of the iterations in flight and of the whole run.
#[derive(Debug)]
pub(super) struct OpTimes {
    ops: usize,
    /// `SLOTS` rows of `ops` times, in ns.
    slots: Vec<AtomicU64>,
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
            ends: zeros(SLOTS as usize),
            totals: zeros(ops),
            epoch: Instant::now(),
        }
    }

    /// Op `op` (its index in the iteration) of iteration `iteration` took `time`.
    pub(super) fn record(&self, iteration: u64, op: usize, time: Duration) {
        let nanos = u64::try_from(time.as_nanos()).unwrap_or(u64::MAX);
        self.slots[self.cell(iteration, op)].store(nanos, Ordering::Relaxed);
        self.totals[op].fetch_add(nanos, Ordering::Relaxed);
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    #[test]
    fn iterations_keep_their_own_times_and_the_run_sums_them() {
        let times = OpTimes::new(2);
        times.record(0, 0, 3 * US);
        times.record(0, 1, 4 * US);
        times.record(1, 0, 5 * US);
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
