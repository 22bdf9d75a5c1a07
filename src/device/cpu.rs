//! CPU devices: a worker pool per device, and the CPU priority pool.
//!
//! # Per-device worker pools
//! Each CPU device `cpu(i)` the engine sees gets one of our pools ([`cpu_pool`]), named
//! `cpu<i>` (threads `cpu<i>-w<k>`), of the configured kind and size, resizable while ops
//! run. The engine puts ready ops in its own queue in front of the pool and schedules a few
//! tasks that drain it (see the engine's `ready.rs`); the pool itself sees only those tasks.
//!
//! # The priority pool ([`PriorityPool`])
//! MXNet runs `CPUPrioritized` ops on one small pool whose queue is a max-heap by priority.
//! Ours is the priority worker pool (`device::priority`) the GPU workers also use, with workers
//! that own nothing: one heap of `(priority, sequence, task)` under one lock, highest priority
//! first and FIFO among equals, workers sleeping on one condition variable, resizable while it
//! runs, drained on drop; its workers report task start/end, park/unpark and resizes to the
//! pool's observer, outside the lock (the protocol is in that module's docs).
//!
//! # Observing the engine's pools ([`PoolObservers`])
//! The engine builds these pools itself, so whoever wants their workers' events (the
//! profiler, the dashboard) hands the engine a [`PoolObservers`] factory: it is asked once per
//! pool the engine starts, with the pool's typed [`PoolId`] (its device and role), and the
//! observer it returns is installed on that pool.
#![forbid(unsafe_code)]

use super::identity::{Device, PoolId, PoolRole};
use super::priority::{PriorityWorkers, MAX_WORKERS};
use crate::pool::{Pool, PoolError, PoolKind, PoolObserver, PoolOptions, Task};
// std's `Arc`: observers are trait objects, which loom's `Arc` cannot coerce to `dyn`.
use std::sync::Arc;

/// Makes the observer of each pool the engine starts, given the pool's identity; `None`
/// leaves that pool unobserved.
pub type PoolObservers = Arc<dyn Fn(PoolId) -> Option<Arc<dyn PoolObserver>> + Send + Sync>;

/// The observer `observers` gives the pool `pool`, if any.
pub(crate) fn observer_for(
    observers: Option<&PoolObservers>,
    pool: PoolId,
) -> Option<Arc<dyn PoolObserver>> {
    observers.and_then(|make| make(pool))
}

/// How to build the worker pool of one CPU device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuWorkerOptions {
    /// Which pool implementation.
    pub pool_kind: PoolKind,
    /// Workers (at least 1).
    pub threads: usize,
    /// The most workers a live resize may ask for.
    pub max_threads: usize,
    /// Let one idle worker spin before parking.
    pub allow_spinning: bool,
}

/// Starts the worker pool of CPU device `device`: named `cpu<device>`, threads
/// `cpu<device>-w<k>`, observed by what `observers` gives the name.
pub fn cpu_pool(
    device: u32,
    options: &CpuWorkerOptions,
    observers: Option<&PoolObservers>,
) -> Result<Pool, PoolError> {
    let threads = options.threads.max(1);
    let pool = PoolId::new(Device::Cpu(device), PoolRole::CpuWorker);
    let mut pool_options = PoolOptions::new(options.pool_kind, threads, pool.thread_prefix())
        .max_threads(options.max_threads.max(threads))
        .allow_spinning(options.allow_spinning);
    if let Some(observer) = observer_for(observers, pool) {
        pool_options = pool_options.observer(observer);
    }
    Pool::new(pool_options)
}

/// The most threads a priority pool may be resized to.
pub const MAX_PRIORITY_THREADS: usize = MAX_WORKERS;

/// A live view of a [`PriorityPool`].
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PriorityPoolStats {
    /// The pool's name (threads are `<name>-<k>`).
    pub name: String,
    /// Active workers.
    pub num_threads: usize,
    /// Tasks waiting in the heap.
    pub queued: usize,
    /// Tasks run so far.
    pub tasks_run: u64,
}

/// A small pool that runs the highest-priority task first (FIFO among equals).
///
/// ```
/// use enginetop::device::cpu::PriorityPool;
/// use enginetop::pool::Task;
/// let pool = PriorityPool::new("doc-prio", 1).unwrap();
/// let (tx, rx) = std::sync::mpsc::channel();
/// pool.schedule(5, Task::new(move || tx.send("ran").unwrap()));
/// assert_eq!(rx.recv().unwrap(), "ran");
/// ```
pub struct PriorityPool {
    workers: PriorityWorkers<()>,
}

impl PriorityPool {
    /// Starts `threads` (at least 1) workers named `<name>-<k>`.
    pub fn new(name: impl Into<String>, threads: usize) -> Result<Self, PoolError> {
        Self::with_observer(name, threads, None)
    }

    /// [`new`](Self::new), with workers reporting to `observer` as a pool's do.
    pub(crate) fn with_observer(
        name: impl Into<String>,
        threads: usize,
        observer: Option<Arc<dyn PoolObserver>>,
    ) -> Result<Self, PoolError> {
        let pool = PriorityPool {
            workers: PriorityWorkers::new(name.into(), observer),
        };
        pool.set_num_threads(threads.max(1))?;
        Ok(pool)
    }

    /// Queues `task` at `priority` (higher runs first).
    pub fn schedule(&self, priority: i32, task: Task) {
        self.workers.schedule(priority, task);
    }

    /// Active workers.
    pub fn num_threads(&self) -> usize {
        self.workers.counts().active
    }

    /// Grows or shrinks the pool while it runs; nothing queued is lost.
    pub fn set_num_threads(&self, threads: usize) -> Result<(), PoolError> {
        self.workers.set_num_threads(threads, |_| ())
    }

    /// A live view of the pool.
    pub fn stats(&self) -> PriorityPoolStats {
        let counts = self.workers.counts();
        PriorityPoolStats {
            name: self.workers.name().to_string(),
            num_threads: counts.active,
            queued: counts.queued,
            tasks_run: counts.tasks_run,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::device::priority::testing::run_order_of_four;
    use crate::sync::Arc;

    #[test]
    fn runs_highest_priority_first_and_fifo_among_equals() {
        let pool = PriorityPool::new("t-prio", 1).unwrap();
        assert_eq!(
            run_order_of_four(pool, PriorityPool::schedule),
            ["high-1", "high-2", "mid", "low"]
        );
    }

    #[test]
    fn resize_keeps_every_task() {
        let pool = PriorityPool::new("t-prio-resize", 2).unwrap();
        let ran = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        for round in 0..20 {
            pool.set_num_threads(1 + round % 4).unwrap();
            for _ in 0..50 {
                let ran = ran.clone();
                pool.schedule(
                    round as i32,
                    Task::new(move || {
                        ran.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }),
                );
            }
        }
        assert!(pool.set_num_threads(0).is_err());
        drop(pool);
        assert_eq!(ran.load(std::sync::atomic::Ordering::Relaxed), 1000);
    }
}
