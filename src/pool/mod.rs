//! Thread pools: Eigen's work-sharing and work-stealing pools, and a Chase-Lev variant.
//!
//! # The three pools
//! All three sit behind the [`ThreadPool`] trait (Eigen's `ThreadPoolInterface`) and are made by
//! [`Pool::new`] from a [`PoolKind`] name:
//! - `simple` (`pool::simple`): one `Mutex<VecDeque>` shared by all workers and a LIFO stack of
//!   parked waiters; a task scheduled while somebody waits is handed straight to the most
//!   recently parked worker. The baseline.
//! - `eigen` ([`non_blocking`] over [`run_queue::RunQueue`]): one bounded queue per worker.
//!   A worker pushes and pops its own queue at the front without locks; every other thread
//!   pushes and steals at the back under the queue's mutex.
//! - `chase-lev` ([`non_blocking`] over `crossbeam-deque`): the same worker loop with
//!   unbounded Chase-Lev deques and one injector for outside threads.
//!
//! # Where a task goes, and where a worker looks
//! A task scheduled from inside the pool goes to the scheduling worker's own queue (hot in its
//! cache, and it keeps the LIFO order a recursive fork wants). A task from outside goes to a
//! random worker's queue (`eigen`, so producers do not contend on one lock) or to the injector
//! (`chase-lev`). If an `eigen` queue is full the caller runs the task inline: back-pressure
//! instead of unbounded memory; observers see that task start and end with no worker
//! (`None`), on the caller's thread.
//!
//! A worker takes work in this order: its own queue; then steals, starting at a random victim
//! and walking the queues with a random stride coprime with their number, so that one round
//! visits every queue exactly once; first inside its steal partition, then everywhere.
//!
//! # Sleeping without losing a wake-up
//! Idle workers sleep on an [`event_count::EventCount`]. A worker that found nothing calls
//! `prewait`, then looks at every queue once more with a check that never reports a non-empty
//! queue as empty; only if all are empty does it `commit_wait`. A producer pushes first and
//! `notify`s second. Whichever way the two race, either the worker's final check sees the task
//! or the producer's notify sees the worker's prewait: no task is stranded while a worker
//! sleeps. At most one worker spins (polls for a bounded number of rounds) before parking, so a
//! burst of tasks finds a thread awake. By default a producer notifies even while a worker
//! spins, as Eigen 3.4 does; newer Eigen's accounting, where a producer skips that notify and
//! the spinner owes it the task (one last global steal before it parks: Eigen's 2025 deadlock
//! fix), is an option ([`PoolOptions::skip_notify_when_spinning`]; measured here it costs
//! wake-up latency, see `non_blocking::spinning`). Spinning can be switched off ([`PoolOptions::allow_spinning`], TensorFlow's `low_latency_hint = false`).
//!
//! # Shutdown and cancel
//! Dropping a pool sets `done` and wakes everyone. A worker exits only when `done` is set and
//! every worker is idle *and* a final check finds every queue empty, so every task queued before
//! (or by tasks running during) the drop still runs. A drop by one of the pool's own tasks (the
//! last `Arc<Pool>` let go on a worker) cannot wait for its own thread: it hands the joins to a
//! shutdown thread and returns, and the pool drains and exits the same way. [`ThreadPool::cancel`] instead stops the
//! workers at their next loop turn and drops what is queued, returning how many it dropped.
//!
//! # Resizing a running pool
//! Worker slots (queue, counters) are allocated up to [`PoolOptions::max_threads`] at creation;
//! `set_num_threads(n)` moves the active count. Outside producers only pick queues below the
//! active count; stealers and the final emptiness check scan every slot ever started, so a task
//! left in a retired worker's queue is still found and run. A worker retires (exits) when it
//! sees its index at or above the active count, re-checked under the resize lock, so a grow
//! racing with a retirement either keeps the old thread or starts a new one, never both. Tasks
//! are never moved between queues by a resize, so none is lost or run twice.
//!
//! # Panics
//! Every task runs under `catch_unwind`: a panic is counted, its message kept for
//! [`PoolStats::last_panic`], and the worker goes on with the next task.

pub mod barrier;
pub(crate) mod counters;
mod current;
pub mod event_count;
pub mod non_blocking;
pub mod parallel_for;
pub mod run_queue;
pub mod session;
mod shutdown;
pub(crate) mod simple;
mod task;

use std::fmt;
// std's `Arc`: the observer is a trait object callers hand in; loom's `Arc` cannot coerce
// to `dyn`.
use std::sync::Arc;

pub use crate::config::{PoolKind, UnknownPoolKind, DEFAULT_MAX_THREADS};
pub use counters::{PoolStats, WorkerState, WorkerStats};
pub use current::spawn_here;
pub(crate) use task::panic_message;
pub use task::Task;

/// Eigen's `ThreadPoolInterface`, plus live resize, counters and a helping hand for waiters.
pub trait ThreadPool: Send + Sync {
    /// Runs `task` on some worker, eventually. From a worker of this pool the task goes to
    /// that worker's own queue.
    fn schedule(&self, task: Task);

    /// Like [`schedule`](Self::schedule), preferring a worker in `[start, limit)` when called
    /// from outside the pool (from a worker the hint is ignored, as in Eigen). Only `eigen`
    /// places outside tasks per worker; `simple` and `chase-lev` accept and ignore the hint.
    fn schedule_with_hint(&self, task: Task, start: usize, limit: usize);

    /// Active workers now.
    fn num_threads(&self) -> usize;

    /// The calling thread's worker index in this pool, or `None` outside it.
    fn current_thread_id(&self) -> Option<usize>;

    /// Stops the workers promptly and drops every queued task; returns how many it dropped.
    /// Tasks already running finish; tasks scheduled after the cancel are dropped too (counted
    /// in [`PoolStats::dropped`]).
    fn cancel(&self) -> usize;

    /// Grows or shrinks the pool while it runs; no queued task is lost or run twice.
    fn set_num_threads(&self, threads: usize) -> Result<(), PoolError>;

    /// Runs one queued task on the calling thread, if there is one; returns whether it did.
    /// A thread waiting for tasks of this pool (a `parallel_for` caller) helps with this.
    fn try_run_one(&self) -> bool;

    /// Live counters of every worker, read without stopping anything.
    fn stats(&self) -> PoolStats;

    /// The pool's name; worker threads are named `<name>-w<i>`.
    fn name(&self) -> &str;

    /// Which implementation this is.
    fn kind(&self) -> PoolKind;

    /// A parallel loop the calling thread ran on this pool finished (the kernels report
    /// each outermost loop, inline ones included): a measuring wrapper records it; a pool
    /// ignores it.
    fn loop_ran(&self, _run: &parallel_for::LoopRun) {}
}

/// Errors from making or resizing a pool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// More threads than the pool was created to hold.
    #[error(
        "pool `{pool}` cannot have {requested} threads: it was created with max_threads = {max}; \
         create it with a larger max_threads"
    )]
    TooManyThreads {
        /// The pool's name.
        pool: String,
        /// The count asked for.
        requested: usize,
        /// The pool's limit.
        max: usize,
    },
    /// A running pool resized to no workers would strand its queued tasks.
    #[error("pool `{0}` cannot be resized to 0 threads: a running pool needs at least 1")]
    ZeroThreads(String),
    /// The pool was cancelled or is shutting down.
    #[error("pool `{0}` was cancelled; create a new pool")]
    Cancelled(String),
    /// The OS refused to start a worker thread.
    #[error("pool `{pool}` could not start worker thread {index}: {reason}")]
    Spawn {
        /// The pool's name.
        pool: String,
        /// The worker index.
        index: usize,
        /// The OS error.
        reason: String,
    },
}

/// Something that pool workers report to (the profiler, later). Recording sites cost one
/// predictable branch when no observer is installed.
pub trait PoolObserver: Send + Sync {
    /// Called on the worker thread `worker`, or with `None` on a thread that is not acting
    /// as one of the pool's workers: a resize, or a task the calling thread ran itself (its
    /// `TaskStart` and `TaskEnd`: a full queue, a pool with no workers, a helping caller).
    fn on_event(&self, worker: Option<usize>, event: PoolEvent);

    /// Worker `worker` begins a streak: it runs tasks back to back, each taken from its own
    /// queue as the previous one ends, until [`on_streak_end`](Self::on_streak_end). The
    /// streak is the worker's `Running` state (`PoolStats`): its tasks' starts and ends come
    /// in between, and nothing else does. A pool that calls this calls `on_streak_end` on the
    /// same thread before its worker looks elsewhere for work, spins, parks or exits, so an
    /// observer may time the streak instead of each task. Pools without streaks never call
    /// either. Does nothing by default.
    fn on_streak_start(&self, _worker: usize) {}

    /// Worker `worker`'s streak ended (see [`on_streak_start`](Self::on_streak_start)).
    fn on_streak_end(&self, _worker: usize) {}
}

/// What pool workers report to a [`PoolObserver`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolEvent {
    /// The worker is about to run a task.
    TaskStart,
    /// The worker finished a task.
    TaskEnd {
        /// Whether the task panicked.
        panicked: bool,
    },
    /// A worker took a task from `victim`'s queue (`None`: the shared injector).
    Steal {
        /// Whose queue the task came from.
        victim: Option<usize>,
    },
    /// The worker became the spinning thread.
    SpinStart,
    /// It stopped spinning (found work or gave up).
    SpinEnd,
    /// The worker is going to sleep.
    Park,
    /// The worker woke up.
    Unpark,
    /// The pool changed its active worker count.
    Resized {
        /// Active workers before.
        from: usize,
        /// Active workers after.
        to: usize,
    },
}

/// How to build a pool.
#[derive(Clone)]
pub struct PoolOptions {
    /// Which implementation.
    pub kind: PoolKind,
    /// Workers to start with (0 runs every task inline on the scheduling thread).
    pub threads: usize,
    /// The most workers a later `set_num_threads` may ask for.
    pub max_threads: usize,
    /// Name of the pool; worker threads are `<name>-w<i>`.
    pub name: String,
    /// Let one idle worker spin before parking (TensorFlow's `low_latency_hint`).
    pub allow_spinning: bool,
    /// `eigen` pool: a producer skips waking a parked worker when a spinner will take its
    /// task (newer Eigen's no-notify accounting); off, it always notifies (Eigen 3.4).
    pub skip_notify_when_spinning: bool,
    /// Where workers report steals, spins and parks.
    pub observer: Option<Arc<dyn PoolObserver>>,
}

impl PoolOptions {
    /// Options for a `kind` pool of `threads` workers named `name`, spinning allowed, room to
    /// grow to `max(threads, 128)`.
    pub fn new(kind: PoolKind, threads: usize, name: impl Into<String>) -> Self {
        Self {
            kind,
            threads,
            max_threads: threads.max(DEFAULT_MAX_THREADS),
            name: name.into(),
            allow_spinning: true,
            skip_notify_when_spinning: false,
            observer: None,
        }
    }

    /// Sets whether an idle worker may spin before parking.
    pub fn allow_spinning(mut self, allow: bool) -> Self {
        self.allow_spinning = allow;
        self
    }

    /// Sets whether producers of an `eigen` pool skip the notify while a worker spins (newer
    /// Eigen's accounting; off by default, see `non_blocking::spinning` for why).
    pub fn skip_notify_when_spinning(mut self, skip: bool) -> Self {
        self.skip_notify_when_spinning = skip;
        self
    }

    /// Sets the most workers the pool may be resized to.
    pub fn max_threads(mut self, max: usize) -> Self {
        self.max_threads = max;
        self
    }

    /// Installs an observer for steals, spins and parks.
    pub fn observer(mut self, observer: Arc<dyn PoolObserver>) -> Self {
        self.observer = Some(observer);
        self
    }
}

impl fmt::Debug for PoolOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolOptions")
            .field("kind", &self.kind)
            .field("threads", &self.threads)
            .field("max_threads", &self.max_threads)
            .field("name", &self.name)
            .field("allow_spinning", &self.allow_spinning)
            .field("skip_notify_when_spinning", &self.skip_notify_when_spinning)
            .field("observer", &self.observer.is_some())
            .finish()
    }
}

/// A pool of any kind: the handle users hold.
///
/// ```
/// use enginetop::pool::{Pool, PoolKind, PoolOptions};
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
///
/// let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "doc")).unwrap();
/// let ran = Arc::new(AtomicUsize::new(0));
/// for _ in 0..100 {
///     let ran = ran.clone();
///     pool.spawn(move || { ran.fetch_add(1, Ordering::Relaxed); });
/// }
/// drop(pool); // runs every queued task first
/// assert_eq!(ran.load(Ordering::Relaxed), 100);
/// ```
pub struct Pool {
    inner: Box<dyn ThreadPool>,
}

impl Pool {
    /// Starts a pool as `options` describe.
    pub fn new(options: PoolOptions) -> Result<Pool, PoolError> {
        if options.threads > options.max_threads {
            return Err(PoolError::TooManyThreads {
                pool: options.name,
                requested: options.threads,
                max: options.max_threads,
            });
        }
        let inner: Box<dyn ThreadPool> = match options.kind {
            PoolKind::Simple => Box::new(simple::SimplePool::new(options)?),
            PoolKind::Eigen => Box::new(non_blocking::EigenPool::new(options)?),
            PoolKind::ChaseLev => Box::new(non_blocking::ChaseLevPool::new(options)?),
        };
        Ok(Pool { inner })
    }

    /// Schedules a closure.
    pub fn spawn(&self, f: impl FnOnce() + Send + 'static) {
        self.inner.schedule(Task::new(f));
    }

    /// The pool as a trait object.
    pub fn as_dyn(&self) -> &dyn ThreadPool {
        &*self.inner
    }
}

impl std::ops::Deref for Pool {
    type Target = dyn ThreadPool;

    fn deref(&self) -> &Self::Target {
        &*self.inner
    }
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("name", &self.inner.name())
            .field("kind", &self.inner.kind())
            .field("threads", &self.inner.num_threads())
            .finish()
    }
}

/// Validates a `set_num_threads` request against the pool's options.
pub(crate) fn check_resize(options: &PoolOptions, threads: usize) -> Result<(), PoolError> {
    if threads > options.max_threads {
        return Err(PoolError::TooManyThreads {
            pool: options.name.clone(),
            requested: threads,
            max: options.max_threads,
        });
    }
    if threads == 0 {
        return Err(PoolError::ZeroThreads(options.name.clone()));
    }
    Ok(())
}
