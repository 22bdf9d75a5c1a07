//! Timing the hand-off to a parked intra-op thread on the run's own pool, for a run where no
//! parallel loop split (every loop ran inline at intra 1), so the what-if simulation still
//! has a measured figure for what a split loop waits beyond its blocks
//! ([`crate::analysis::EngineModel::with_loop_wake`]).
//!
//! # The probe
//! A split loop hands blocks to the intra-op pool, where a parked worker must wake to take
//! one, and the op's thread, done with its own share, sleeps until the last block's thread
//! signals it. One probe reproduces that round trip with an empty block: it waits until a
//! worker of the pool is parked (its state in the pool's counters, polled with a yield
//! between reads), schedules a task that signals a condition variable, and sleeps on it;
//! the sample is the time from scheduling the task to the caller running again. The figure
//! is the median of [`WAKE_PROBES`] probes, so one probe whose thread the OS descheduled does
//! not stand for all.
//!
//! # Cost and races
//! Each probe waits at most [`PATIENCE`] for a parked worker and as long again for its task;
//! a pool none of whose workers parks in time (busy, or a kind that never parks) yields no
//! figure and the probes stop. The task and the caller share one `Arc` of a lock and a
//! condition variable: the task may outlive an impatient caller, and only touches the `Arc`.
//! The probe's tasks are empty, so a run whose pool is busy is only delayed by their wakes.
#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use crate::pool::{Task, ThreadPool, WorkerState};
use crate::sync::{thread, Arc, Condvar, Mutex};

/// How many wake-ups the figure is the median of.
pub(super) const WAKE_PROBES: usize = 15;

/// The longest a probe waits for a parked worker, and then for its task to start.
const PATIENCE: Duration = Duration::from_millis(50);

/// The median round trip from scheduling an empty task on a parked worker of `pool` to the
/// caller, asleep until the task signals it, running again (see the module docs); `None`
/// when no worker parked within [`PATIENCE`].
pub(super) fn parked_round_trip(pool: &dyn ThreadPool) -> Option<Duration> {
    let mut samples = Vec::with_capacity(WAKE_PROBES);
    for _ in 0..WAKE_PROBES {
        match probe(pool) {
            Some(sample) => samples.push(sample),
            None => break,
        }
    }
    samples.sort_unstable();
    samples.get(samples.len() / 2).copied()
}

/// One round trip through a parked worker of `pool`.
fn probe(pool: &dyn ThreadPool) -> Option<Duration> {
    if !wait_for_a_parked_worker(pool) {
        return None;
    }
    let done: Arc<(Mutex<bool>, Condvar)> = Arc::new(Default::default());
    let signal = Arc::clone(&done);
    let scheduled = Instant::now();
    pool.schedule(Task::new(move || {
        *signal.0.lock() = true;
        signal.1.notify_one();
    }));
    let deadline = scheduled + PATIENCE;
    let mut ran = done.0.lock();
    while !*ran {
        let left = deadline.checked_duration_since(Instant::now())?;
        ran = done.1.wait_timeout(ran, left);
    }
    Some(scheduled.elapsed())
}

/// Whether an active worker of `pool` is parked, within [`PATIENCE`].
fn wait_for_a_parked_worker(pool: &dyn ThreadPool) -> bool {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let stats = pool.stats();
        let active = stats.workers.iter().take(stats.num_threads);
        if active.into_iter().any(|w| w.state == WorkerState::Parked) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::yield_now();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::pool::{Pool, PoolKind, PoolOptions};

    fn wakeups(pool: &Pool) -> u64 {
        pool.stats().workers.iter().map(|w| w.wakeups).sum()
    }

    #[test]
    fn every_probe_wakes_a_parked_worker_of_the_pool() {
        let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 1, "probe-test")).unwrap();
        let before = wakeups(&pool);
        let wake = parked_round_trip(pool.as_dyn());
        assert!(wake.is_some(), "an idle pool's worker parks");
        let woken = wakeups(&pool) - before;
        assert!(
            woken >= WAKE_PROBES as u64,
            "each probe woke the worker from sleep, not a spinning one: {woken} wake-ups"
        );
    }
}
