//! A short profiled pool workload that produces every pool event: steals (a task tree spawned
//! from inside the pool), spins and parks (idle gaps, awaited rather than slept), resizes (up,
//! down and up again), queue-depth samples, ops with errors and their queueing flows, and a
//! `tracing`-style span. `enginetop trace demo` exports it; the trace tests validate it.
#![forbid(unsafe_code)]

// std's Arc: the pool is watched as a `std::sync::Weak` trait object (loom has neither).
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::event::{Event, EventKind, OpInfo};
use super::names::DeviceId;
use super::{Profiler, QueueDepthSource};
use crate::engine::OpName;
use crate::pool::{spawn_here, Pool, PoolError, PoolKind, PoolOptions, WorkerState};
use crate::sync::{AtomicU64, AtomicUsize, Ordering};

/// What the demo runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DemoOptions {
    /// The pool kind.
    pub kind: PoolKind,
    /// Workers to start with (the demo grows to twice this, shrinks back and grows again).
    pub threads: usize,
    /// Task trees per batch.
    pub roots: usize,
    /// Depth of each tree (a tree has `2^(depth+1) - 1` tasks).
    pub depth: u32,
}

impl Default for DemoOptions {
    /// An `eigen` pool of 2 workers, 4 batches of 16 trees of depth 5 (about 4,000 ops).
    fn default() -> Self {
        DemoOptions {
            kind: PoolKind::Eigen,
            threads: 2,
            roots: 16,
            depth: 5,
        }
    }
}

/// What the demo did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DemoReport {
    /// The pool's device.
    pub device: DeviceId,
    /// Ops run (one per task).
    pub ops: u64,
    /// Ops that ended with an error.
    pub failed_ops: u64,
    /// Resizes made (the pool's start not included).
    pub resizes: usize,
}

/// Every this-many ops, one fails.
const FAIL_EVERY: u64 = 13;

/// How long the demo waits for a condition before giving up with what it has.
const PATIENCE: Duration = Duration::from_secs(10);

struct Demo {
    profiler: Profiler,
    device: DeviceId,
    op_name: OpName,
    next_op: AtomicU64,
    done: AtomicUsize,
    failed: AtomicU64,
    depth: u32,
}

/// Runs the demo on a new pool instrumented by `profiler`; the pool is gone (every event
/// recorded) when it returns.
pub fn run_pool_demo(profiler: &Profiler, options: &DemoOptions) -> Result<DemoReport, PoolError> {
    let name = format!("{}-demo", options.kind);
    let device = DeviceId::register(&name);
    let threads = options.threads.max(1);
    let pool_options = PoolOptions::new(options.kind, threads, &name).max_threads(threads * 2);
    let pool = Arc::new(Pool::new(profiler.instrument_pool(pool_options, device))?);
    // A `Weak` trait object: std's (loom's `Arc` has no `Weak` and no `dyn` coercion).
    let watched: std::sync::Weak<dyn QueueDepthSource> = Arc::downgrade(&pool) as _;
    profiler.watch_queues(device, watched);
    let demo = Arc::new(Demo {
        profiler: profiler.clone(),
        device,
        op_name: OpName::new("demo_op"),
        next_op: AtomicU64::new(1),
        done: AtomicUsize::new(0),
        failed: AtomicU64::new(0),
        depth: options.depth,
    });
    let mut resizes = 0;
    // Ends on a grow: a worker retiring after a shrink can miss its wake-up (the pool's
    // EventCount lets a later waiter take the signal meant for it) and would then block the
    // pool's drop; a grow takes its slot back as an active worker.
    for batch_threads in [threads, threads * 2, threads, threads * 2] {
        if batch_threads != pool.num_threads() {
            pool.set_num_threads(batch_threads)?;
            resizes += 1;
        }
        demo.run_batch(&pool, options.roots);
        await_parks(&pool);
    }
    drop(wait_sole_owner(pool));
    Ok(DemoReport {
        device,
        ops: demo.next_op.load(Ordering::Relaxed) - 1,
        failed_ops: demo.failed.load(Ordering::Relaxed),
        resizes,
    })
}

impl Demo {
    /// Queues `roots` trees from this thread and waits until all their ops are done.
    fn run_batch(self: &Arc<Self>, pool: &Pool, roots: usize) {
        let span = OpName::new("demo batch");
        let span_id = self.next_op.load(Ordering::Relaxed);
        let enter = Event::new(EventKind::SpanEnter, DeviceId::HOST, span, 0, span_id);
        self.profiler.record(enter);
        let tasks_per_tree = (1usize << (self.depth + 1)) - 1;
        let target = self.done.load(Ordering::Acquire) + roots * tasks_per_tree;
        for _ in 0..roots {
            let (op, demo, depth) = (self.queue_op(), self.clone(), self.depth);
            pool.spawn(move || demo.run_op(op, depth));
        }
        let started = Instant::now();
        while self.done.load(Ordering::Acquire) < target && started.elapsed() < PATIENCE {
            std::thread::yield_now();
        }
        let exit = Event::new(EventKind::SpanExit, DeviceId::HOST, span, 0, span_id);
        self.profiler.record(exit);
    }

    fn queue_op(&self) -> OpInfo {
        let op = OpInfo::new(self.next_op.fetch_add(1, Ordering::Relaxed));
        self.profiler.op_queued(self.device, self.op_name, op);
        op
    }

    /// One op: a little work, then its two children (from inside the pool, so idle workers
    /// steal them).
    fn run_op(self: Arc<Self>, op: OpInfo, depth: u32) {
        self.profiler.op_start(self.device, self.op_name, op);
        let mut work = op.id;
        for _ in 0..2_000 {
            work = std::hint::black_box(work.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        if depth > 0 {
            for _ in 0..2 {
                let (child, demo) = (self.queue_op(), self.clone());
                // Always inside the pool here; the error branch cannot happen.
                let _ = spawn_here(move || demo.run_op(child, depth - 1));
            }
        }
        let failed = op.id % FAIL_EVERY == 0;
        self.failed.fetch_add(u64::from(failed), Ordering::Relaxed);
        self.profiler.op_end(self.device, self.op_name, op, failed);
        self.done.fetch_add(1, Ordering::Release);
    }
}

/// Waits (without sleeping blindly) until every active worker of `pool` is parked.
fn await_parks(pool: &Pool) {
    let all_parked = |pool: &Pool| {
        let stats = pool.stats();
        let active = &stats.workers[..stats.num_threads.min(stats.workers.len())];
        active
            .iter()
            .all(|worker| worker.state == WorkerState::Parked)
    };
    let started = Instant::now();
    while !all_parked(pool) && started.elapsed() < PATIENCE {
        std::thread::yield_now();
    }
}

/// Waits until the tasks holding clones of `shared` are done with them.
fn wait_sole_owner<T>(mut shared: Arc<T>) -> Option<T> {
    let started = Instant::now();
    loop {
        match Arc::try_unwrap(shared) {
            Ok(value) => return Some(value),
            Err(still_shared) if started.elapsed() < PATIENCE => shared = still_shared,
            Err(_) => return None,
        }
        std::thread::yield_now();
    }
}
