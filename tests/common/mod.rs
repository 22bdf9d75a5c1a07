//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use enginetop::pool::{Pool, PoolKind, PoolOptions};

pub mod cli;
pub mod rand_sum;
pub mod sources;
pub mod streams;
pub mod tmux;

/// Generous bound for conditions that must become true; a hang fails instead of blocking CI.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// A pool of `kind` with `threads` workers.
pub fn pool(kind: PoolKind, threads: usize, spinning: bool) -> Pool {
    Pool::new(PoolOptions::new(kind, threads, format!("t-{kind}")).allow_spinning(spinning))
        .expect("pool starts")
}

/// Spins (yielding) until `counter` reaches `target`; panics after [`DEADLINE`].
pub fn await_count(counter: &AtomicUsize, target: usize, what: &str) {
    let start = Instant::now();
    while counter.load(Ordering::SeqCst) != target {
        assert!(
            start.elapsed() < DEADLINE,
            "{what}: stuck at {} of {target}",
            counter.load(Ordering::SeqCst)
        );
        std::thread::yield_now();
    }
}

/// Spins (yielding) until `value` is at least `target`; panics after [`DEADLINE`].
pub fn await_at_least(value: &AtomicUsize, target: usize, what: &str) {
    let start = Instant::now();
    while value.load(Ordering::SeqCst) < target {
        assert!(
            start.elapsed() < DEADLINE,
            "{what}: stuck at {}",
            value.load(Ordering::SeqCst)
        );
        std::thread::yield_now();
    }
}

/// Runs `body` on its own thread and fails if it does not finish within [`DEADLINE`]
/// (a deadlock fails the test instead of hanging it). Panics in `body` propagate.
pub fn within_deadline<T: Send + 'static>(
    what: &str,
    body: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let out = body();
        let _ = tx.send(());
        out
    });
    match rx.recv_timeout(DEADLINE) {
        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => worker
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p)),
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: did not finish within {DEADLINE:?} (deadlock?)")
        }
    }
}

/// Waits until the tasks holding clones of `shared` have finished with them and returns the
/// value, so a test can drop a pool (running every queued task) at a point it chooses.
pub fn sole_owner<T>(mut shared: std::sync::Arc<T>) -> T {
    let start = Instant::now();
    loop {
        match std::sync::Arc::try_unwrap(shared) {
            Ok(value) => return value,
            Err(still_shared) => shared = still_shared,
        }
        assert!(
            start.elapsed() < DEADLINE,
            "tasks still hold the pool after {DEADLINE:?}"
        );
        std::thread::yield_now();
    }
}
