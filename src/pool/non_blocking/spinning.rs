//! The spinning protocol: at most one idle worker polls for work before it parks.
//!
//! # Why spin
//! Parking and waking a thread costs microseconds; a burst of tasks scheduled just after the
//! last worker went to sleep pays that on every task. Keeping one worker polling for a bounded
//! number of steal rounds lets such a burst find a thread awake: a spinning worker starts a
//! task far sooner than a parked one woken for it (`enginetop bench pool --bench
//! wake_hot,wake_cold`), for a small share of the cores. The budget is Eigen's: no spinning,
//! a longer budget, and a spinner that yields the core ran no faster on a training step (the
//! figures: `bench/README.md`).
//!
//! # Two notify policies
//! **Eigen 3.4's (the default).** A producer always calls `EventCount::notify` after
//! publishing a task. That costs a fence and one load when nobody sleeps, and wakes one parked
//! worker when somebody does, even if a spinner is about to take the task. Producers never
//! touch the spinners' word, so on the wake-up path nothing but the task itself moves between
//! cores.
//!
//! **Newer Eigen's no-notify accounting** ([`PoolOptions::skip_notify_when_spinning`]). One
//! atomic word holds two counters: `spinning`, the workers in the spin loop, and `no_notify`,
//! tasks scheduled *without* waking a parked worker because a spinner was expected to take
//! them. A producer calls [`SpinningState::must_notify`]: while `no_notify < spinning` it
//! increments `no_notify` and skips the notify; once every spinner is already "owed" a task it
//! must notify. A spinner leaving the loop calls [`SpinningState::stop`]; if it still owed a
//! task it pays the debt by one more *global* steal before parking (Eigen's 2025 deadlock fix:
//! retrying only its own queue could miss the task another producer put elsewhere, and with
//! the notify skipped nobody else would wake up). If that last steal also misses, the
//! worker's `WaitForWork` still makes the precise emptiness check before it sleeps, so the
//! task is found either way.
//!
//! # Why the default is Eigen 3.4's
//! The accounting puts a read-modify-write by the producer and one by the spinner on the same
//! cache line between the push and the task's start, so the line moves between cores on the
//! wake-up path: it makes `wake_hot`'s wake-up slower and saves nothing on spawn, tree or
//! parallel_for, where workers rarely sleep. Its gain, one wake-up fewer, shows
//! only while one worker spins and another sleeps, that is, when the pool is nearly idle.
//! With the default, `no_notify` stays 0 and `stop` never reports a debt.
//!
//! [`PoolOptions::skip_notify_when_spinning`]: crate::pool::PoolOptions::skip_notify_when_spinning
#![forbid(unsafe_code)]

use crate::sync::{AtomicU64, Ordering};

/// At most this many workers spin at once.
pub(super) const MAX_SPINNING: u64 = 1;
/// Spinning is skipped when more than this many workers are awake anyway.
pub(super) const MAX_AWAKE_FOR_SPINNING: usize = 4;
/// Steal rounds a spinner makes in total, divided by the worker count (Eigen's kSpinCount).
pub(super) const SPIN_BUDGET: usize = 5000;

const NO_NOTIFY_BITS: u32 = 32;
const NO_NOTIFY_MASK: u64 = (1 << NO_NOTIFY_BITS) - 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Counts {
    spinning: u64,
    no_notify: u64,
}

impl Counts {
    fn decode(word: u64) -> Self {
        Counts {
            spinning: word >> NO_NOTIFY_BITS,
            no_notify: word & NO_NOTIFY_MASK,
        }
    }

    fn encode(self) -> u64 {
        (self.spinning << NO_NOTIFY_BITS) | self.no_notify
    }
}

/// The packed spinning counters of one pool.
#[derive(Debug, Default)]
pub(super) struct SpinningState {
    word: AtomicU64,
}

impl SpinningState {
    /// Applies `change` atomically; `change` returns `None` to leave the word as it is.
    /// Returns the counts seen before the (attempted) change.
    fn update(&self, change: impl Fn(Counts) -> Option<Counts>) -> (Counts, bool) {
        let mut word = self.word.load(Ordering::Relaxed);
        loop {
            let before = Counts::decode(word);
            let Some(after) = change(before) else {
                return (before, false);
            };
            match self.word.compare_exchange_weak(
                word,
                after.encode(),
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return (before, true),
                Err(actual) => word = actual,
            }
        }
    }

    /// Enters the spin loop if fewer than [`MAX_SPINNING`] workers spin without being owed a
    /// task; returns whether the caller may spin.
    pub(super) fn start(&self) -> bool {
        self.update(|c| {
            (c.spinning - c.no_notify < MAX_SPINNING).then_some(Counts {
                spinning: c.spinning + 1,
                ..c
            })
        })
        .1
    }

    /// Leaves the spin loop; returns true when this spinner was owed a task scheduled without
    /// a notify, so it must make one more global steal before parking.
    pub(super) fn stop(&self) -> bool {
        let (before, _) = self.update(|c| {
            Some(Counts {
                spinning: c.spinning - 1,
                no_notify: c.no_notify.saturating_sub(1),
            })
        });
        before.no_notify > 0
    }

    /// Called by a producer after publishing a task: true means it must wake a parked worker,
    /// false means a spinner has been made to owe it the task.
    pub(super) fn must_notify(&self) -> bool {
        if self.word.load(Ordering::Relaxed) == 0 {
            return true; // nobody spins: the common fast path, no read-modify-write
        }
        let (_, owed) = self.update(|c| {
            (c.no_notify < c.spinning).then_some(Counts {
                no_notify: c.no_notify + 1,
                ..c
            })
        });
        !owed
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
        assert!(!state.stop(), "nothing was scheduled without a notify");
        assert!(state.start());
    }

    #[test]
    fn producers_skip_notify_once_per_spinner() {
        let state = SpinningState::default();
        assert!(state.must_notify(), "no spinner: must notify");
        assert!(state.start());
        assert!(!state.must_notify(), "the spinner takes the first task");
        assert!(state.must_notify(), "the spinner is owed one task already");
        assert!(
            state.stop(),
            "the spinner leaves owing a task: one more global steal"
        );
        assert!(state.must_notify());
    }

    #[test]
    fn an_owing_spinner_frees_the_spin_slot_for_another() {
        let state = SpinningState::default();
        assert!(state.start());
        assert!(!state.must_notify());
        // spinning - no_notify == 0: another worker may spin while the first is owed a task.
        assert!(state.start());
    }
}
