//! A GPU op's fence (set once its device work and host bodies have finished) and the slot
//! where that work reports its first failure.
//!
//! The fence is set exactly once, by the callback of the op's fence unit, after the failure
//! (if any) has been stored and the op's vars tainted; host waiters block on a condition
//! variable until then. `is_set` reads an atomic flag, written under the lock before the
//! notification, so a waiter that sees the flag also sees everything stored before `set`.
#![forbid(unsafe_code)]

use super::super::error::FailureCause;
use crate::sync::{AtomicBool, Condvar, Mutex, Ordering};

/// Set once when an op's device work has finished; host-side dependents wait for it.
#[derive(Debug, Default)]
pub(crate) struct Fence {
    set: AtomicBool,
    lock: Mutex<()>,
    changed: Condvar,
}

impl Fence {
    /// Marks the fence passed and wakes every waiter.
    pub(crate) fn set(&self) {
        let guard = self.lock.lock();
        self.set.store(true, Ordering::Release);
        drop(guard);
        self.changed.notify_all();
    }

    /// Whether the fence has passed (never blocks).
    pub(crate) fn is_set(&self) -> bool {
        self.set.load(Ordering::Acquire)
    }

    /// Blocks until the fence has passed.
    pub(crate) fn wait(&self) {
        if self.is_set() {
            return;
        }
        let mut guard = self.lock.lock();
        while !self.is_set() {
            guard = self.changed.wait(guard);
        }
    }
}

/// The first failure of one op's device work or host bodies.
#[derive(Debug, Default)]
pub(crate) struct DeviceOutcome(Mutex<Option<FailureCause>>);

impl DeviceOutcome {
    /// Keeps `cause` unless a failure is stored already.
    pub(crate) fn note(&self, cause: FailureCause) {
        let mut slot = self.0.lock();
        if slot.is_none() {
            *slot = Some(cause);
        }
    }

    /// Takes the stored failure out.
    pub(crate) fn take(&self) -> Option<FailureCause> {
        self.0.lock().take()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_waiter_returns_once_the_fence_is_set() {
        let fence = Arc::new(Fence::default());
        assert!(!fence.is_set());
        let waiter = {
            let fence = Arc::clone(&fence);
            std::thread::spawn(move || fence.wait())
        };
        fence.set();
        waiter.join().unwrap();
        assert!(fence.is_set());
        fence.wait(); // set: returns at once
    }

    #[test]
    fn the_outcome_keeps_the_first_failure() {
        let outcome = DeviceOutcome::default();
        outcome.note(FailureCause::Panic("first".into()));
        outcome.note(FailureCause::Panic("second".into()));
        assert!(matches!(outcome.take(), Some(FailureCause::Panic(m)) if m == "first"));
        assert!(outcome.take().is_none());
    }
}
