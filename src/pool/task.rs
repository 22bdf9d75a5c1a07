//! A unit of work, and running it so that a panic never kills the thread that runs it.
#![forbid(unsafe_code)]

use std::any::Any;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};

use crate::sync::{AtomicU64, Mutex, Ordering};

/// A boxed closure scheduled on a pool.
pub struct Task(Box<dyn FnOnce() + Send + 'static>);

impl Task {
    /// Wraps a closure.
    pub fn new(f: impl FnOnce() + Send + 'static) -> Self {
        Task(Box::new(f))
    }

    /// Runs the task, catching a panic; returns the panic's message if it panicked.
    pub fn run_caught(self) -> Result<(), String> {
        panic::catch_unwind(AssertUnwindSafe(self.0)).map_err(|payload| panic_message(&*payload))
    }
}

impl fmt::Debug for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Task")
    }
}

/// The text of a panic payload (`&str` and `String` payloads; others get a placeholder).
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic with a non-string payload".to_string()
    }
}

/// Panics seen by one pool: how many, and the latest message.
#[derive(Debug, Default)]
pub(crate) struct PanicLog {
    count: AtomicU64,
    last: Mutex<Option<String>>,
}

impl PanicLog {
    /// Runs `task`, recording a panic if it panics; returns whether it panicked.
    pub(crate) fn run(&self, task: Task) -> bool {
        match task.run_caught() {
            Ok(()) => false,
            Err(message) => {
                self.count.fetch_add(1, Ordering::Relaxed);
                *self.last.lock() = Some(message);
                true
            }
        }
    }

    pub(crate) fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    pub(crate) fn last(&self) -> Option<String> {
        self.last.lock().clone()
    }
}
