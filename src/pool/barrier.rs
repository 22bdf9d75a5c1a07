//! A one-shot countdown barrier (Eigen's `Barrier`): `n` notifications release the waiters.
//!
//! # Protocol
//! `state` holds `remaining << 1 | waiter_present`. `notify` subtracts 2 with release
//! ordering; the notifier that brings `remaining` to 0 while the waiter bit is set takes the
//! mutex, sets `released` and signals the condition variable. A waiter first sets the waiter
//! bit (acquire-release); if `remaining` was already 0 it returns without blocking, otherwise it
//! sleeps on the condition variable until `released`. The bit is set before the last notifier
//! reads it, or the last notifier's subtraction happens before the waiter's `fetch_or` sees zero:
//! either way exactly one side handles the release, so no wake-up is lost.
//!
//! The fast path (all notifications in before anyone waits) costs one atomic op per notify and
//! one per wait; the mutex is touched only when a thread actually has to sleep.
#![forbid(unsafe_code)]

use std::time::Duration;

use crate::sync::{AtomicUsize, Condvar, Mutex, Ordering};

/// Waits for `count` notifications.
///
/// ```
/// use enginetop::pool::barrier::Barrier;
/// let barrier = std::sync::Arc::new(Barrier::new(2));
/// let b = barrier.clone();
/// let t = std::thread::spawn(move || b.notify());
/// barrier.notify();
/// barrier.wait();
/// t.join().unwrap();
/// ```
#[derive(Debug)]
pub struct Barrier {
    state: AtomicUsize,
    released: Mutex<bool>,
    cv: Condvar,
}

const WAITER: usize = 1;

impl Barrier {
    /// A barrier released by `count` calls to [`notify`](Self::notify).
    pub fn new(count: usize) -> Self {
        Self {
            state: AtomicUsize::new(count << 1),
            released: Mutex::new(false),
            cv: Condvar::new(),
        }
    }

    /// Counts one notification. Notifying more than `count` times is a bug and panics in
    /// debug builds.
    pub fn notify(&self) {
        let before = self.state.fetch_sub(2, Ordering::AcqRel);
        debug_assert!(
            before >> 1 != 0,
            "Barrier notified more times than its count"
        );
        if before != 2 | WAITER {
            return; // not the last one, or nobody waits yet
        }
        *self.released.lock() = true;
        self.cv.notify_all();
    }

    /// Whether every notification has arrived.
    pub(crate) fn is_done(&self) -> bool {
        self.state.load(Ordering::Acquire) >> 1 == 0
    }

    /// Blocks until every notification has arrived.
    pub fn wait(&self) {
        if self.announce_waiter() {
            return;
        }
        let mut released = self.released.lock();
        while !*released {
            released = self.cv.wait(released);
        }
    }

    /// Blocks until every notification has arrived or `timeout` passed; returns whether done.
    /// Used by waiters that help run tasks between naps.
    pub(crate) fn wait_timeout(&self, timeout: Duration) -> bool {
        if self.announce_waiter() {
            return true;
        }
        let released = self.released.lock();
        if *released {
            return true;
        }
        drop(self.cv.wait_timeout(released, timeout));
        self.is_done()
    }

    /// Sets the waiter bit; returns true when the count is already zero.
    fn announce_waiter(&self) -> bool {
        self.state.fetch_or(WAITER, Ordering::AcqRel) >> 1 == 0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn zero_count_never_blocks() {
        Barrier::new(0).wait();
    }

    #[test]
    fn releases_after_all_notifications_from_many_threads() {
        let barrier = Arc::new(Barrier::new(64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let barrier = barrier.clone();
                std::thread::spawn(move || (0..16).for_each(|_| barrier.notify()))
            })
            .collect();
        barrier.wait();
        assert!(barrier.is_done());
        threads.into_iter().for_each(|t| t.join().unwrap());
    }

    #[test]
    fn timed_wait_reports_not_done() {
        let barrier = Barrier::new(1);
        assert!(!barrier.wait_timeout(Duration::from_millis(1)));
        barrier.notify();
        assert!(barrier.wait_timeout(Duration::from_millis(1)));
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync::{thread, Arc};

    /// Two notifiers racing a waiter: the waiter always wakes, never early.
    #[test]
    fn loom_barrier_no_lost_wakeup() {
        loom::model(|| {
            let barrier = Arc::new(Barrier::new(2));
            let notifiers: Vec<_> = (0..2)
                .map(|_| {
                    let barrier = barrier.clone();
                    thread::spawn(move || barrier.notify())
                })
                .collect();
            barrier.wait();
            assert!(barrier.is_done());
            notifiers.into_iter().for_each(|t| t.join().unwrap());
        });
    }
}
