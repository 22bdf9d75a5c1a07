//! A unit of work, and running it so that a panic never kills the thread that runs it.
//!
//! A [`Task`] keeps a closure of up to 32 bytes inline (as C++'s `std::function` does for
//! Eigen's pool), so scheduling a small task allocates nothing: with a `Box` per task the
//! scheduling thread always allocates and a worker always frees, which costs a malloc arena
//! round trip and a cache miss per task (measured as the whole gap in wake-up latency to
//! Eigen's pool). Larger closures are boxed. The storage is `smallbox`'s; its `smallbox!`
//! macro expands to `unsafe` code, the only reason this file does not forbid it.

use std::any::Any;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};

use smallbox::space::S4;
use smallbox::{smallbox, SmallBox};

use crate::sync::{AtomicU64, Mutex, Ordering};

/// A closure scheduled on a pool: inline when it fits in 32 bytes, boxed otherwise.
///
/// The closure is stored as `FnMut` over a taken `Option`, because a `dyn FnOnce` cannot be
/// called in place; [`run_caught`](Task::run_caught) consumes the task, so it runs once.
pub struct Task(SmallBox<dyn FnMut() + Send + 'static, S4>);

impl Task {
    /// Wraps a closure.
    pub fn new(f: impl FnOnce() + Send + 'static) -> Self {
        let mut f = Some(f);
        Task(smallbox!(move || {
            if let Some(f) = f.take() {
                f()
            }
        }))
    }

    /// Whether the closure lives inside the task (no allocation).
    pub fn is_inline(&self) -> bool {
        !self.0.is_heap()
    }

    /// Runs the task, catching a panic; returns the panic's message if it panicked.
    pub fn run_caught(mut self) -> Result<(), String> {
        panic::catch_unwind(AssertUnwindSafe(|| (self.0)())).map_err(|p| panic_message(&*p))
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    #[test]
    fn small_closures_are_inline_and_large_ones_boxed_and_both_run_once() {
        let runs = Arc::new(AtomicUsize::new(0));
        let small = {
            let runs = runs.clone();
            Task::new(move || {
                runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            })
        };
        let big_capture = [7u64; 8];
        let large = {
            let runs = runs.clone();
            Task::new(move || {
                let sum: u64 = big_capture.iter().sum();
                runs.fetch_add(sum as usize, std::sync::atomic::Ordering::Relaxed);
            })
        };
        assert!(small.is_inline());
        assert!(!large.is_inline());
        small.run_caught().unwrap();
        large.run_caught().unwrap();
        assert_eq!(runs.load(std::sync::atomic::Ordering::Relaxed), 1 + 56);
    }

    #[test]
    fn a_dropped_task_drops_its_closure_without_running_it() {
        let token = Arc::new(());
        let held = token.clone();
        let task = Task::new(move || panic!("must not run {held:?}"));
        assert_eq!(Arc::strong_count(&token), 2);
        drop(task);
        assert_eq!(Arc::strong_count(&token), 1);
    }

    #[test]
    fn a_panic_is_caught_with_its_message() {
        let task = Task::new(|| panic!("boom {}", 7));
        assert_eq!(task.run_caught().unwrap_err(), "boom 7");
    }
}
