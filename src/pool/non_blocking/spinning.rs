//! The spinning protocol: at most one idle worker polls for work before it parks.
//!
//! # Why spin
//! Parking and waking a thread costs microseconds; a burst of tasks scheduled just after the
//! last worker went to sleep pays that on every task. Keeping one worker polling for a bounded
//! number of steal rounds lets such a burst find a thread awake.
//!
//! # The accounting (Eigen 3.4's `spinning_` flag)
//! One atomic word counts the workers in the spin loop; [`SpinningState::start`] admits a
//! worker only while fewer than [`MAX_SPINNING`] spin, [`SpinningState::stop`] lets it go. Only
//! spinners write the word: producers never read or write it. A producer always calls
//! `EventCount::notify` after publishing a task, which costs a fence and one load when nobody
//! sleeps, and wakes one parked worker when somebody does, even if a spinner is about to take
//! the task. Nothing needs to be "owed" to a spinner, and a spinner that stops needs no extra
//! steal: like any worker it parks through `WaitForWork`, whose prewait and precise emptiness
//! check pair with the producer's notify.
//!
//! # Why producers do not skip the notify
//! Newer Eigen (and this pool until it was measured) let a producer skip the notify when a
//! spinner would take its task: the producer then increments a "no notify" count in the
//! spinners' word, and a spinner must settle that debt atomically when it stops. That puts a
//! read-modify-write by the producer and one by the spinner on the same cache line between
//! the push and the task's start: the line moves between cores on the wake-up path. Measured on
//! a 2-core machine (wake_hot, Eigen 3.4 as the peer), skipping cost about 0.1 us of p50
//! wake-up latency and saved nothing on spawn, tree or parallel_for, where workers rarely
//! sleep; the extra wake-up of a parked worker is paid only while one worker spins and another
//! sleeps, that is, when the pool is nearly idle.
#![forbid(unsafe_code)]

use crate::sync::{AtomicUsize, Ordering};

/// At most this many workers spin at once.
pub(super) const MAX_SPINNING: usize = 1;
/// Spinning is skipped when more than this many workers are awake anyway.
pub(super) const MAX_AWAKE_FOR_SPINNING: usize = 4;
/// Steal rounds a spinner makes in total, divided by the worker count (Eigen's kSpinCount).
pub(super) const SPIN_BUDGET: usize = 5000;

/// The spinners of one pool.
#[derive(Debug, Default)]
pub(super) struct SpinningState {
    spinning: AtomicUsize,
}

impl SpinningState {
    /// Enters the spin loop if fewer than [`MAX_SPINNING`] workers spin; returns whether the
    /// caller may spin (and must call [`stop`](Self::stop) when it leaves).
    pub(super) fn start(&self) -> bool {
        let mut spinning = self.spinning.load(Ordering::Relaxed);
        while spinning < MAX_SPINNING {
            match self.spinning.compare_exchange_weak(
                spinning,
                spinning + 1,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(actual) => spinning = actual,
            }
        }
        false
    }

    /// Leaves the spin loop.
    pub(super) fn stop(&self) {
        self.spinning.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn one_spinner_at_a_time() {
        let state = SpinningState::default();
        assert!(state.start());
        assert!(!state.start(), "a second spinner must be refused");
        state.stop();
        assert!(
            state.start(),
            "the slot is free again once the spinner left"
        );
    }
}
