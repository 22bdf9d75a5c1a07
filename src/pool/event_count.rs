//! PLACEHOLDER (being replaced by Eigen's lock-free EventCount): same API, a locked epoch.

use crate::sync::{Condvar, Mutex};

/// Eigen's EventCount API.
#[derive(Debug)]
pub struct EventCount {
    state: Mutex<(u64, usize)>, // (epoch, prewaiting)
    cv: Condvar,
}

thread_local! { static TICKET: std::cell::Cell<u64> = const { std::cell::Cell::new(0) }; }

impl EventCount {
    /// For up to `max_waiters` waiter slots.
    pub fn new(max_waiters: usize) -> Self {
        let _ = max_waiters;
        Self {
            state: Mutex::new((0, 0)),
            cv: Condvar::new(),
        }
    }
    /// Announce an intent to wait.
    pub fn prewait(&self) {
        let mut s = self.state.lock();
        s.1 += 1;
        let e = s.0;
        TICKET.with(|t| t.set(e));
    }
    /// Sleep until notified since prewait.
    pub fn commit_wait(&self, waiter: usize) {
        let _ = waiter;
        let e = TICKET.with(|t| t.get());
        let mut s = self.state.lock();
        while s.0 == e {
            s = self.cv.wait(s);
        }
        s.1 -= 1;
    }
    /// Give up on waiting.
    pub fn cancel_wait(&self) {
        self.state.lock().1 -= 1;
    }
    /// Wake one (or all) waiters.
    pub fn notify(&self, all: bool) {
        let mut s = self.state.lock();
        if s.1 > 0 {
            s.0 += 1;
            if all {
                self.cv.notify_all()
            } else {
                self.cv.notify_all()
            }
        }
    }
}
