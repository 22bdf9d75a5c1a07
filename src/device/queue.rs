//! The FIFO between a stream's host side and the one thread that works through it (the
//! simulated stream's executor, the CUDA stream's completion thread).
//!
//! # Protocol
//! The host `push`es items; the worker thread `pop`s them front to back, handles one, and
//! calls `done`. `pop` marks the item in progress under the same lock that removes it, and
//! `done` clears the mark under the lock and wakes idle-waiters when nothing is left, so
//! "idle" (`queue empty and nothing in progress`) is never seen between a pop and its done:
//! `wait_idle` cannot return while an item is still being handled. `close` refuses further
//! pushes and lets `pop` return `None` once the queue is empty, so everything pushed before
//! the close is still handled.
#![forbid(unsafe_code)]

use std::collections::VecDeque;

use crate::sync::{Condvar, Mutex};

/// A blocking FIFO with an "idle" condition (see the module docs).
#[derive(Debug)]
pub(crate) struct WorkQueue<T> {
    state: Mutex<State<T>>,
    /// Signalled when an item is pushed or the queue is closed.
    pushed: Condvar,
    /// Signalled when the queue becomes idle.
    idle: Condvar,
}

#[derive(Debug)]
struct State<T> {
    items: VecDeque<T>,
    in_progress: bool,
    closed: bool,
}

impl<T> WorkQueue<T> {
    pub(crate) fn new() -> Self {
        WorkQueue {
            state: Mutex::new(State {
                items: VecDeque::new(),
                in_progress: false,
                closed: false,
            }),
            pushed: Condvar::new(),
            idle: Condvar::new(),
        }
    }

    /// Appends `item`; gives it back if the queue is closed.
    pub(crate) fn push(&self, item: T) -> Result<(), T> {
        let mut state = self.state.lock();
        if state.closed {
            return Err(item);
        }
        state.items.push_back(item);
        drop(state);
        self.pushed.notify_one();
        Ok(())
    }

    /// The next item, marked in progress; blocks while the queue is empty and open. `None`
    /// once it is closed and empty.
    pub(crate) fn pop(&self) -> Option<T> {
        let mut state = self.state.lock();
        loop {
            if let Some(item) = state.items.pop_front() {
                state.in_progress = true;
                return Some(item);
            }
            if state.closed {
                return None;
            }
            state = self.pushed.wait(state);
        }
    }

    /// The popped item has been handled.
    pub(crate) fn done(&self) {
        let mut state = self.state.lock();
        state.in_progress = false;
        let idle = state.items.is_empty();
        drop(state);
        if idle {
            self.idle.notify_all();
        }
    }

    /// Whether nothing is queued or in progress.
    pub(crate) fn is_idle(&self) -> bool {
        let state = self.state.lock();
        state.items.is_empty() && !state.in_progress
    }

    /// Blocks until nothing is queued or in progress.
    pub(crate) fn wait_idle(&self) {
        let mut state = self.state.lock();
        while state.in_progress || !state.items.is_empty() {
            state = self.idle.wait(state);
        }
    }

    /// Refuses further pushes; `pop` drains what is queued, then returns `None`.
    pub(crate) fn close(&self) {
        self.state.lock().closed = true;
        self.pushed.notify_all();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn items_come_out_in_order_and_close_drains_first() {
        let queue = WorkQueue::new();
        for i in 0..5 {
            queue.push(i).unwrap();
        }
        queue.close();
        assert_eq!(queue.push(9), Err(9));
        let mut seen = Vec::new();
        while let Some(item) = queue.pop() {
            seen.push(item);
            queue.done();
        }
        assert_eq!(seen, [0, 1, 2, 3, 4]);
        assert!(queue.is_idle());
    }

    #[test]
    fn not_idle_while_an_item_is_in_progress() {
        let queue = Arc::new(WorkQueue::new());
        queue.push(1).unwrap();
        assert_eq!(queue.pop(), Some(1));
        assert!(!queue.is_idle(), "popped but not done");
        let worker = {
            let queue = Arc::clone(&queue);
            std::thread::spawn(move || queue.done())
        };
        queue.wait_idle();
        worker.join().unwrap();
        assert!(queue.is_idle());
    }
}
