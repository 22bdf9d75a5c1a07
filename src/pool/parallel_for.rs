//! `parallel_for`: Eigen's cost-model loop splitter with TensorFlow's scheduling options, a
//! caller that helps while it waits, and nesting that cannot deadlock.
//!
//! # The cost model (Eigen 3.4's `TensorCostModel`, what TensorFlow runs)
//! A [`Cost`] is the work of one item: bytes loaded, bytes stored, compute cycles. Memory is
//! priced as an L2 hit, 11 cycles per 64-byte line, so one item costs
//! `11/64 * (loaded + stored) + cycles` and `n` items `total = n * that`. Starting a parallel
//! loop costs about 100,000 cycles and each further thread another 100,000, so the loop gets
//! `(total - 100000) / 100000 + 0.9` threads, truncated and clamped to `[1, pool threads]`
//! ([`threads_for`]). A task pays off at about 40,000 cycles: [`task_size`] is `total / 40000`.
//!
//! # Block sizing ([`block_plan`])
//! Blocks must be big enough to pay for their task (`1 / task_size(1)` items), few enough
//! that scheduling them stays cheap (at most 4 per thread), yet not so big that one slow block
//! leaves the other threads idle, and their number should divide evenly over the threads. So
//! `size = min(n, max(ceil(n / (4 * threads)), 1 / task_size(1)))`; then, while the parallel
//! efficiency `count / (ceil(count / threads) * threads)` is below 1, try the next coarser size
//! (the smallest that makes fewer blocks), up to `min(n, 2 * size)`, and take it whenever its
//! efficiency is within 0.01 of the best seen. An optional `block_align` rounds every candidate
//! up (to a SIMD width, a cache line of items). TensorFlow's [`Schedule::FixedBlockSize`] skips
//! the model: `ceil(total / block_size)` blocks ([`num_shards_fixed_block`]).
//!
//! Small work runs inline on the caller, with no task at all: an empty range (no call), one
//! item, a pool of at most one thread, or a model that says one thread is enough.
//!
//! # Dispatch by recursive halving (Eigen's `handleRange`)
//! A range is cut at its midpoint rounded up to a multiple of the block size; the right half
//! becomes a pool task, the left half is cut again until one block is left, which runs in
//! place. Every cut lands on a block boundary, so the leaves are exactly the planned
//! `ceil(n / size)` blocks, and the tree spreads through the pool's own queues (in a
//! work-stealing pool a worker's cuts go to its own queue, where thieves find the biggest
//! halves first). With no more blocks than threads the caller runs the root itself (it would
//! only wait otherwise, and it saves a thread hop); with more, the root is a task too, as in
//! Eigen (our caller still helps while it waits, so it may run blocks as well). A [`Barrier`]
//! counting blocks tells the caller when all are done.
//!
//! # The helping wait, and why nesting cannot deadlock
//! Eigen's caller sleeps on the barrier. If every worker runs a block that itself calls
//! `parallel_for`, they all sleep while the inner blocks sit in the queues: a deadlock (Eigen
//! warns against nesting). Our caller loops instead: all blocks done? return; else run one
//! queued task of the pool ([`ThreadPool::try_run_one`]); if there was none, nap on the
//! barrier for 100 µs. The last block's notify ends a nap at once; the timeout only bounds
//! how late a newly queued task is noticed.
//!
//! This nap is where a training step's cores most often go idle (a caller whose last blocks
//! run elsewhere, nothing queued to help with), for about as long as waking a parked thread
//! takes. Yielding the core before napping, and cutting kernels' loops into blocks for twice
//! the pool's threads (a shorter tail), ran no faster on the whole step, so the wait stays
//! Eigen's plain nap (the figures: `bench/README.md`).
//!
//! Why that cannot deadlock: order the frames that can be stuck by when they started. A
//! `parallel_for` frame waits only for the blocks of its own call, created after it started;
//! any frame waits for the frames stacked above it on its thread (tasks it ran while helping),
//! which started after it. Every wait points forward in time, so waiting has no cycle. Take
//! the newest unfinished frame: nothing is stacked above it, so it is running; if it is user
//! code it makes progress; if it is a waiting caller, none of its blocks is running (a running
//! block would be a newer frame), so the unfinished ones are queued, and the caller's own help
//! loop (or an idle worker) runs a queued task. Every step runs one of finitely many tasks, so
//! every call completes. This asks two things of the pool: `try_run_one` finds any queued task,
//! also one in another worker's queue; and a task is run or dropped, never stranded. It costs
//! this: a helping caller may pick up an unrelated long task and return after its own blocks
//! finished (rayon's `join` makes the same trade), and deep nesting grows the helper's stack.
//! And, as with rayon, `f` must not hold a lock across a nested `parallel_for` that another
//! block takes: the waiting thread may run that block on top of itself, and wait for itself.
//! (The argument covers waits inside `parallel_for`; what `f` waits for otherwise is its own.)
//!
//! # Borrowed closures in `'static` tasks
//! Pool tasks are `'static`, but `f` and the pool are borrowed. A task reaches them through a
//! pointer to a `Job` on the caller's stack with its lifetime erased: the only `unsafe` here,
//! in `mod dispatch`. It is sound because:
//! 1. Every task owns a `PendingRange`, the blocks it still owes. Dropping it settles them on
//!    the barrier: once for the block it ran, once per block it never ran (a cancelled pool
//!    dropped the task, or a worker-id block was handed back; those ranges go on a list the
//!    caller runs itself afterwards). A task drops its `PendingRange` only after its last use
//!    of the `Job`.
//! 2. The caller leaves only once the barrier has counted every block, that is once every
//!    `PendingRange` is gone, and a guard holds even an unwinding caller until then. A panic
//!    in `f` is caught per block, so nothing ends a block early; the first one is re-raised on
//!    the caller ([`std::panic::resume_unwind`]) after all blocks are done.
//! 3. The barrier, the panic slot and the unrun list live in an `Arc` the tasks share, not on
//!    the caller's stack: the last notifier may still be inside `notify` when the caller
//!    returns.
//! 4. `Job` is `Sync` (checked at compile time), so sharing it between threads is sound.
//!
//! # Worker ids
//! [`parallel_for_with_worker_id`] passes the worker's index on a worker of the pool and
//! `num_threads` on any other thread (the caller), so ids lie in `[0, num_threads]` and equal
//! [`ThreadPool::current_thread_id`] where there is one (TensorFlow shifts every id up by one
//! and gives the caller 0 instead). Ids exist for per-thread scratch, so two calls of `f` with
//! the same id must never overlap, and helping could break that: a worker whose block waits
//! in a nested `parallel_for` may pick up another block of the same call, with the same id.
//! So each id is a slot claimed for the length of a block; a block whose slot is busy is
//! handed back unrun, and the caller runs it after the others, when every slot is free.
#![deny(unsafe_code)]

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::time::Duration;

use super::barrier::Barrier;
use super::ThreadPool;
use crate::sync::{AtomicBool, Ordering};

/// Cycles to load one byte: an L2 hit (11 cycles on Haswell) per 64-byte cache line.
const LOAD_CYCLES_PER_BYTE: f64 = 11.0 / 64.0;
/// Cycles to store one byte, priced like a load.
const STORE_CYCLES_PER_BYTE: f64 = 11.0 / 64.0;
/// Cycles a parallel loop costs before its first block runs.
const STARTUP_CYCLES: f64 = 100_000.0;
/// Cycles each further thread costs.
const PER_THREAD_CYCLES: f64 = 100_000.0;
/// Cycles of work that make a task worth scheduling.
const TASK_CYCLES: f64 = 40_000.0;
/// At most this many blocks per thread (Eigen's `max_oversharding_factor`).
const MAX_OVERSHARDING: usize = 4;
/// A coarser block size is taken while its efficiency is within this of the best.
const EFFICIENCY_SLACK: f64 = 0.01;
/// How long a waiting caller naps when the pool had no task for it to run.
const HELP_NAP: Duration = Duration::from_micros(100);

/// Eigen's `TensorOpCost`: the work of one item of a loop.
///
/// ```
/// use enginetop::pool::parallel_for::Cost;
/// // y[i] += a * x[i] on f32: load x and y, store y, one multiply-add.
/// let axpy = Cost { bytes_loaded: 8.0, bytes_stored: 4.0, compute_cycles: 1.0 };
/// assert_eq!(axpy.cycles_per_item(), 12.0 * 11.0 / 64.0 + 1.0);
/// assert_eq!(Cost::compute(3.0).cycles_per_item(), 3.0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cost {
    /// Bytes read per item.
    pub bytes_loaded: f64,
    /// Bytes written per item.
    pub bytes_stored: f64,
    /// Compute cycles per item.
    pub compute_cycles: f64,
}

impl Cost {
    /// A cost of `cycles` compute cycles and no memory traffic (TensorFlow's `cost_per_unit`).
    pub const fn compute(cycles: f64) -> Self {
        Self {
            bytes_loaded: 0.0,
            bytes_stored: 0.0,
            compute_cycles: cycles,
        }
    }

    /// Device cycles one item takes: memory priced as L2 hits, plus compute.
    pub fn cycles_per_item(&self) -> f64 {
        LOAD_CYCLES_PER_BYTE * self.bytes_loaded
            + STORE_CYCLES_PER_BYTE * self.bytes_stored
            + self.compute_cycles
    }
}

/// Cycles `n` items of `cost` take on one thread.
fn total_cycles(n: usize, cost: Cost) -> f64 {
    n as f64 * cost.cycles_per_item()
}

/// Eigen's `TensorCostModel::numThreads`: threads worth using for `n` items of `cost`, in
/// `[1, max_threads]` (1 when `max_threads` is 0).
///
/// ```
/// use enginetop::pool::parallel_for::{threads_for, Cost};
/// assert_eq!(threads_for(100, Cost::compute(1.0), 8), 1); // 100 cycles: not worth a thread
/// assert_eq!(threads_for(1_000, Cost::compute(1_000.0), 8), 8); // 1e6 cycles: 9, clamped
/// ```
pub fn threads_for(n: usize, cost: Cost, max_threads: usize) -> usize {
    let threads = (total_cycles(n, cost) - STARTUP_CYCLES) / PER_THREAD_CYCLES + 0.9;
    // `as` truncates toward zero (Eigen's int conversion) and maps negatives and NaN to 0.
    (threads as usize).max(1).min(max_threads.max(1))
}

/// Eigen's `TensorCostModel::taskSize`: `n` items of `cost` as a fraction of an ideal task
/// (below 1: too little work for a task of its own).
pub fn task_size(n: usize, cost: Cost) -> f64 {
    total_cycles(n, cost) / TASK_CYCLES
}

/// One parallel loop as it ran, for [`ThreadPool::loop_ran`]: its items and their cost
/// (what the cost model cuts) and two times.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoopRun {
    /// Items in the loop.
    pub items: usize,
    /// The cost of one item.
    pub cost: Cost,
    /// Its blocks' times summed, whatever thread ran each: the loop on one thread.
    pub busy: Duration,
    /// From the call to its return on the calling thread (its wait for other threads'
    /// blocks included).
    pub wall: Duration,
}

/// How a loop of `n` items is cut: `count` blocks of `size` items (the last may be shorter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockPlan {
    /// Items per block.
    pub size: usize,
    /// Blocks: `ceil(n / size)`.
    pub count: usize,
}

impl BlockPlan {
    fn with_size(n: usize, size: usize) -> Self {
        Self {
            size,
            count: n.div_ceil(size),
        }
    }
}

/// Eigen's block sizing for `n` items of `cost` on `threads` threads (see the module docs).
/// An empty loop gets no blocks.
///
/// ```
/// use enginetop::pool::parallel_for::{block_plan, BlockPlan, Cost};
/// // 1/task_size and ceil(100 / (4 * 7)) both say 4 items: 25 blocks fill 25 of 28 thread
/// // slots (89%); 20 blocks of 5 fill 20 of 21 (95%), so the plan coarsens to 5.
/// assert_eq!(block_plan(100, Cost::compute(10_000.0), 7), BlockPlan { size: 5, count: 20 });
/// ```
pub fn block_plan(n: usize, cost: Cost, threads: usize) -> BlockPlan {
    plan_blocks(n, cost, threads, None)
}

/// [`block_plan`] with Eigen's `block_align` hook: every candidate block size `s` becomes
/// `block_align(s)`, which must be `>= s` (a smaller answer is treated as `s`).
pub fn block_plan_aligned(
    n: usize,
    cost: Cost,
    threads: usize,
    block_align: impl Fn(usize) -> usize,
) -> BlockPlan {
    plan_blocks(n, cost, threads, Some(&block_align))
}

type Align<'a> = Option<&'a dyn Fn(usize) -> usize>;

fn plan_blocks(n: usize, cost: Cost, threads: usize, align: Align<'_>) -> BlockPlan {
    if n == 0 {
        return BlockPlan { size: 1, count: 0 };
    }
    let threads = threads.max(1);
    // Saturates to usize::MAX for a free item and to 0 for a nonsensical negative cost.
    let items_per_task = (1.0 / task_size(1, cost)) as usize;
    let oversharded = n.div_ceil(MAX_OVERSHARDING.saturating_mul(threads));
    let first_size = oversharded.max(items_per_task).min(n);
    let max_size = first_size.saturating_mul(2).min(n);
    let aligned = |size: usize| align.map_or(size, |align| aligned_size(align, size, n));

    let mut best = BlockPlan::with_size(n, aligned(first_size));
    let mut best_efficiency = efficiency(best.count, threads);
    let mut last_count = best.count;
    while best_efficiency < 1.0 && last_count > 1 {
        // The smallest size that makes fewer blocks than the last candidate.
        let coarser_size = aligned(n.div_ceil(last_count - 1));
        if coarser_size > max_size {
            break;
        }
        let coarser = BlockPlan::with_size(n, coarser_size);
        last_count = coarser.count;
        let coarser_efficiency = efficiency(coarser.count, threads);
        if coarser_efficiency + EFFICIENCY_SLACK >= best_efficiency {
            best = coarser;
            best_efficiency = best_efficiency.max(coarser_efficiency);
        }
    }
    best
}

/// `align(size)` kept within `[size, n]`.
fn aligned_size(align: &dyn Fn(usize) -> usize, size: usize, n: usize) -> usize {
    let aligned = align(size);
    debug_assert!(
        aligned >= size,
        "block_align({size}) = {aligned} shrank the block"
    );
    aligned.max(size).min(n)
}

/// The share of `threads * rounds` thread-slots that `count` equal blocks keep busy.
fn efficiency(count: usize, threads: usize) -> f64 {
    count as f64 / (count.div_ceil(threads) * threads) as f64
}

/// Runs `f(first, last)` over blocks covering `[0, n)` on `pool`, sized by Eigen's cost
/// model for items of `cost`, and returns when all have run. The caller runs queued tasks of
/// the pool while it waits, so this may be called from inside a pool task, nested to any
/// depth. A panic in `f` is re-raised here once every other block has finished.
///
/// ```
/// use enginetop::pool::parallel_for::{parallel_for, Cost};
/// use enginetop::pool::{Pool, PoolKind, PoolOptions};
/// use std::sync::atomic::{AtomicU64, Ordering};
///
/// let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "doc")).unwrap();
/// let sum = AtomicU64::new(0);
/// parallel_for(pool.as_dyn(), 10_000, Cost::compute(1_000.0), |first, last| {
///     sum.fetch_add((first as u64..last as u64).sum(), Ordering::Relaxed);
/// });
/// assert_eq!(sum.into_inner(), 10_000 * 9_999 / 2);
/// ```
pub fn parallel_for(pool: &dyn ThreadPool, n: usize, cost: Cost, f: impl Fn(usize, usize) + Sync) {
    let threads = pool.num_threads();
    run_adaptive(pool, threads, n, cost, None, &ran(&f));
}

/// [`parallel_for`] with Eigen's `block_align` hook: block sizes are rounded up by
/// `block_align` (see [`block_plan_aligned`]), e.g. to a multiple of a SIMD width.
///
/// ```
/// use enginetop::pool::parallel_for::{parallel_for_with_align, Cost};
/// use enginetop::pool::{Pool, PoolKind, PoolOptions};
///
/// let pool = Pool::new(PoolOptions::new(PoolKind::Simple, 2, "doc")).unwrap();
/// let to_multiple_of_8 = |size: usize| size.div_ceil(8) * 8;
/// let cost = Cost::compute(5_000.0);
/// parallel_for_with_align(pool.as_dyn(), 1_000, cost, to_multiple_of_8, |first, _| {
///     assert_eq!(first % 8, 0);
/// });
/// ```
pub fn parallel_for_with_align(
    pool: &dyn ThreadPool,
    n: usize,
    cost: Cost,
    block_align: impl Fn(usize) -> usize,
    f: impl Fn(usize, usize) + Sync,
) {
    let threads = pool.num_threads();
    run_adaptive(pool, threads, n, cost, Some(&block_align), &ran(&f));
}

/// TensorFlow's `SchedulingParams`: how [`parallel_for_scheduled`] cuts its range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Schedule {
    /// Eigen's cost model with `cost_per_unit` compute cycles per item.
    Adaptive {
        /// Compute cycles per item.
        cost_per_unit: f64,
    },
    /// Blocks of exactly `block_size` items (the last may be shorter), whatever the cost;
    /// a `block_size` of 0 means one block.
    FixedBlockSize {
        /// Items per block.
        block_size: usize,
    },
}

/// TensorFlow's `ThreadPool::ParallelFor(total, scheduling_params, fn)`; same guarantees as
/// [`parallel_for`]. `FixedBlockSize` is also TensorFlow's `TransformRangeConcurrently`.
///
/// ```
/// use enginetop::pool::parallel_for::{parallel_for_scheduled, Schedule};
/// use enginetop::pool::{Pool, PoolKind, PoolOptions};
/// use std::sync::atomic::{AtomicUsize, Ordering};
///
/// let pool = Pool::new(PoolOptions::new(PoolKind::ChaseLev, 2, "doc")).unwrap();
/// let blocks = AtomicUsize::new(0);
/// let schedule = Schedule::FixedBlockSize { block_size: 30 };
/// parallel_for_scheduled(pool.as_dyn(), 100, schedule, |first, last| {
///     assert!(last - first == 30 || (first, last) == (90, 100));
///     blocks.fetch_add(1, Ordering::Relaxed);
/// });
/// assert_eq!(blocks.into_inner(), 4);
/// ```
pub fn parallel_for_scheduled(
    pool: &dyn ThreadPool,
    total: usize,
    schedule: Schedule,
    f: impl Fn(usize, usize) + Sync,
) {
    let threads = pool.num_threads();
    run_scheduled(pool, threads, total, schedule, &ran(&f));
}

/// TensorFlow's `ParallelForWithWorkerId(total, cost_per_unit, fn)`: `f(first, last, id)`
/// where `id` is the worker index on a worker of `pool` and `num_threads` on any other thread,
/// so `id` is in `[0, num_threads]` (`num_threads` read at the call). Two calls of `f` with
/// the same id never overlap in time, so `id` can index per-thread scratch without locks.
///
/// ```
/// use enginetop::pool::parallel_for::parallel_for_with_worker_id;
/// use enginetop::pool::{Pool, PoolKind, PoolOptions};
/// use std::sync::Mutex;
///
/// let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "doc")).unwrap();
/// let scratch: Vec<Mutex<u64>> = (0..=pool.num_threads()).map(|_| Mutex::new(0)).collect();
/// parallel_for_with_worker_id(pool.as_dyn(), 1_000, 10_000.0, |first, last, id| {
///     *scratch[id].lock().unwrap() += (last - first) as u64;
/// });
/// assert_eq!(scratch.iter().map(|s| *s.lock().unwrap()).sum::<u64>(), 1_000);
/// ```
pub fn parallel_for_with_worker_id(
    pool: &dyn ThreadPool,
    total: usize,
    cost_per_unit: f64,
    f: impl Fn(usize, usize, usize) + Sync,
) {
    parallel_for_scheduled_with_worker_id(pool, total, Schedule::Adaptive { cost_per_unit }, f);
}

/// [`parallel_for_with_worker_id`] with TensorFlow's [`Schedule`] (its
/// `ParallelForWithWorkerId(total, scheduling_params, fn)`).
pub fn parallel_for_scheduled_with_worker_id(
    pool: &dyn ThreadPool,
    total: usize,
    schedule: Schedule,
    f: impl Fn(usize, usize, usize) + Sync,
) {
    let threads = pool.num_threads();
    let slots = WorkerIdSlots::new(threads);
    let body = |first: usize, last: usize| {
        let id = worker_id(pool, threads);
        match slots.claim(id) {
            Some(_claim) => {
                f(first, last, id);
                BlockRun::Ran
            }
            None => BlockRun::HandedBack,
        }
    };
    run_scheduled(pool, threads, total, schedule, &body);
}

/// TensorFlow's `NumShardsUsedByFixedBlockSizeScheduling`: how many blocks
/// [`Schedule::FixedBlockSize`] makes of `total` items on `pool`.
///
/// ```
/// use enginetop::pool::parallel_for::num_shards_fixed_block;
/// use enginetop::pool::{Pool, PoolKind, PoolOptions};
/// let pool = Pool::new(PoolOptions::new(PoolKind::Simple, 4, "doc")).unwrap();
/// assert_eq!(num_shards_fixed_block(pool.as_dyn(), 10, 3), 4);
/// assert_eq!(num_shards_fixed_block(pool.as_dyn(), 10, 10), 1);
/// ```
pub fn num_shards_fixed_block(pool: &dyn ThreadPool, total: usize, block_size: usize) -> usize {
    fixed_block_shards(total, block_size, pool.num_threads())
}

fn fixed_block_shards(total: usize, block_size: usize, threads: usize) -> usize {
    if block_size == 0 || total <= 1 || total <= block_size || threads <= 1 {
        1
    } else {
        total.div_ceil(block_size)
    }
}

/// What a block body did with its range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BlockRun {
    /// Ran it (or panicked trying).
    Ran,
    /// Could not run it now; the caller runs it after the other blocks.
    HandedBack,
}

/// A block body as the dispatcher sees it.
type BlockBody<'a> = dyn Fn(usize, usize) -> BlockRun + Sync + 'a;

/// A plain `f` as a block body that always runs its range.
fn ran(f: &(impl Fn(usize, usize) + Sync)) -> impl Fn(usize, usize) -> BlockRun + Sync + '_ {
    move |first, last| {
        f(first, last);
        BlockRun::Ran
    }
}

fn run_scheduled(
    pool: &dyn ThreadPool,
    threads: usize,
    total: usize,
    schedule: Schedule,
    body: &BlockBody<'_>,
) {
    match schedule {
        Schedule::Adaptive { cost_per_unit } => run_adaptive(
            pool,
            threads,
            total,
            Cost::compute(cost_per_unit),
            None,
            body,
        ),
        Schedule::FixedBlockSize { block_size } => {
            run_fixed(pool, threads, total, block_size, body)
        }
    }
}

/// Eigen's `parallelFor`: inline when small, else cost-model blocks.
fn run_adaptive(
    pool: &dyn ThreadPool,
    threads: usize,
    n: usize,
    cost: Cost,
    align: Align<'_>,
    body: &BlockBody<'_>,
) {
    if n == 0 {
        return;
    }
    if n == 1 || threads <= 1 || threads_for(n, cost, threads) == 1 {
        return run_inline(n, body);
    }
    let plan = plan_blocks(n, cost, threads, align);
    dispatch::run_blocks(pool, threads, n, plan.size, body);
}

/// TensorFlow's `ParallelForFixedBlockSizeScheduling`.
fn run_fixed(
    pool: &dyn ThreadPool,
    threads: usize,
    total: usize,
    block_size: usize,
    body: &BlockBody<'_>,
) {
    if total == 0 {
        return;
    }
    if fixed_block_shards(total, block_size, threads) == 1 {
        return run_inline(total, body);
    }
    dispatch::run_blocks(pool, threads, total, block_size, body);
}

/// The whole range on the caller, as one block.
fn run_inline(n: usize, body: &BlockBody<'_>) {
    let outcome = body(0, n);
    // Only a block that overlaps another of its own call is handed back; this one is alone.
    assert_eq!(
        outcome,
        BlockRun::Ran,
        "an inline parallel_for block was handed back"
    );
}

/// The worker-id of the calling thread: its index in `pool`, else `threads` (also for a
/// worker a resize added after the call read `threads`).
fn worker_id(pool: &dyn ThreadPool, threads: usize) -> usize {
    match pool.current_thread_id() {
        Some(index) if index < threads => index,
        _ => threads,
    }
}

/// One busy flag per worker id of a call: `f` runs with an id only while holding its slot.
struct WorkerIdSlots {
    busy: Vec<AtomicBool>,
}

impl WorkerIdSlots {
    fn new(threads: usize) -> Self {
        Self {
            busy: (0..=threads).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    /// Takes slot `id`, or `None` if a block with that id is running (or suspended) now.
    fn claim(&self, id: usize) -> Option<SlotClaim<'_>> {
        // Acquire pairs with the release in `SlotClaim::drop`: the previous holder's writes
        // to its scratch happen before ours.
        let was_busy = self.busy[id].swap(true, Ordering::Acquire);
        // Lazily: a `SlotClaim` built and dropped here would free the busy holder's slot.
        (!was_busy).then(|| SlotClaim(&self.busy[id]))
    }
}

/// A held worker-id slot; released on drop, also when `f` panics.
struct SlotClaim<'a>(&'a AtomicBool);

impl Drop for SlotClaim<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Running blocks on the pool while the caller helps: the one module with `unsafe` (the
/// lifetime erasure of [`Job`]; the soundness argument is in the file's docs).
#[allow(unsafe_code)]
mod dispatch {
    use super::*;
    use crate::pool::Task;
    use crate::sync::{Arc, Mutex};

    /// What every block task of one call borrows from the caller's frame.
    struct Job<'a> {
        pool: &'a dyn ThreadPool,
        body: &'a BlockBody<'a>,
    }

    fn is_sync<T: Sync>() {}
    /// `JobRef` hands `&Job` to other threads: that needs `Job: Sync`.
    const _: fn() = is_sync::<Job<'static>>;

    /// A pointer to a caller's [`Job`], its lifetime erased so a `'static` task can carry it.
    struct JobRef(*const Job<'static>);

    // SAFETY: a `JobRef` is only ever turned into a shared `&Job`, and `Job` is `Sync`
    // (asserted above), so moving the pointer to another thread is as sound as sending `&Job`.
    unsafe impl Send for JobRef {}

    impl JobRef {
        fn new(job: &Job<'_>) -> Self {
            JobRef((job as *const Job<'_>).cast::<Job<'static>>())
        }

        /// The erased pointer (a method, so a closure captures the whole `Send` wrapper).
        fn as_ptr(&self) -> *const Job<'static> {
            self.0
        }
    }

    /// What the tasks of one call share with its caller; owned jointly, so a notifier still
    /// inside the barrier never touches a frame that has returned.
    struct Progress {
        blocks_left: Barrier,
        block_size: usize,
        block_count: usize,
        first_panic: Mutex<Option<Box<dyn Any + Send>>>,
        /// Ranges settled without running (a dropped task, a handed-back block).
        unrun: Mutex<Vec<(usize, usize)>>,
    }

    impl Progress {
        fn new(n: usize, block_size: usize) -> Self {
            let block_count = n.div_ceil(block_size);
            Self {
                blocks_left: Barrier::new(block_count),
                block_size,
                block_count,
                first_panic: Mutex::new(None),
                unrun: Mutex::new(Vec::new()),
            }
        }

        fn keep_first_panic(&self, payload: Box<dyn Any + Send>) {
            self.first_panic.lock().get_or_insert(payload);
        }

        /// Runs one block, catching a panic; returns what the body did.
        fn run_block(&self, body: &BlockBody<'_>, first: usize, last: usize) -> BlockRun {
            match panic::catch_unwind(AssertUnwindSafe(|| body(first, last))) {
                Ok(outcome) => outcome,
                Err(payload) => {
                    self.keep_first_panic(payload);
                    BlockRun::Ran
                }
            }
        }

        /// Records `[first, last)` as unrun and counts its blocks as settled.
        fn settle_unrun(&self, first: usize, last: usize) {
            self.unrun.lock().push((first, last));
            for _ in 0..(last - first).div_ceil(self.block_size) {
                self.blocks_left.notify();
            }
        }

        /// The caller's wait: run queued pool tasks, nap when there are none.
        fn help_until_done(&self, pool: &dyn ThreadPool) {
            while !self.blocks_left.is_done() {
                if !pool.try_run_one() {
                    self.blocks_left.wait_timeout(HELP_NAP);
                }
            }
        }

        /// Runs, on the caller, every block that was settled unrun.
        fn run_unrun(&self, body: &BlockBody<'_>) {
            let unrun = std::mem::take(&mut *self.unrun.lock());
            for (first, last) in unrun {
                for start in (first..last).step_by(self.block_size) {
                    let end = last.min(start + self.block_size);
                    let outcome = self.run_block(body, start, end);
                    // Every block of the call has returned, so every worker-id slot is free.
                    assert_eq!(outcome, BlockRun::Ran, "a block was handed back twice");
                }
            }
        }

        fn resume_first_panic(&self) {
            if let Some(payload) = self.first_panic.lock().take() {
                panic::resume_unwind(payload);
            }
        }
    }

    /// The blocks `[first, last)` a task still owes. Dropping it settles them: one block if
    /// it ran, else all of them as unrun.
    struct PendingRange {
        progress: Arc<Progress>,
        first: usize,
        last: usize,
        ran: bool,
    }

    impl PendingRange {
        /// Gives `[mid, last)` to a new `PendingRange`, keeping `[first, mid)`.
        fn split_off(&mut self, mid: usize) -> PendingRange {
            let right = PendingRange {
                progress: Arc::clone(&self.progress),
                first: mid,
                last: self.last,
                ran: false,
            };
            self.last = mid;
            right
        }
    }

    impl Drop for PendingRange {
        fn drop(&mut self) {
            if self.ran {
                self.progress.blocks_left.notify();
            } else {
                self.progress.settle_unrun(self.first, self.last);
            }
        }
    }

    /// Keeps the caller's frame (and its `Job`) alive until every block has settled, even
    /// while a panic unwinds it.
    struct WaitForBlocks<'p>(&'p Progress);

    impl Drop for WaitForBlocks<'_> {
        fn drop(&mut self) {
            self.0.blocks_left.wait();
        }
    }

    /// Eigen's `handleRange`: schedule right halves until one block is left, then run it.
    fn run_range(job: &Job<'_>, pending: &mut PendingRange) {
        let block_size = pending.progress.block_size;
        while pending.last - pending.first > block_size {
            let half = (pending.last - pending.first) / 2;
            let mid = pending.first + half.div_ceil(block_size) * block_size;
            let right = pending.split_off(mid);
            job.pool.schedule(block_task(JobRef::new(job), right));
        }
        let outcome = pending
            .progress
            .run_block(job.body, pending.first, pending.last);
        pending.ran = outcome == BlockRun::Ran;
    }

    /// A pool task that runs the blocks of `pending`.
    fn block_task(job: JobRef, pending: PendingRange) -> Task {
        Task::new(move || {
            let mut pending = pending;
            // SAFETY: `job` points to the `Job` in `run_blocks`' frame, which does not return
            // or unwind before every `PendingRange` of the call has been dropped (it waits on
            // the barrier they settle, in `WaitForBlocks` if unwinding). `pending` is one of
            // them and is dropped only below, after the last use of `job`.
            let job = unsafe { &*job.as_ptr() };
            run_range(job, &mut pending);
            drop(pending);
        })
    }

    /// Runs `body` over the `ceil(n / block_size)` blocks of `[0, n)` on `pool` and waits,
    /// helping, until all are done; re-raises the first panic.
    pub(super) fn run_blocks(
        pool: &dyn ThreadPool,
        threads: usize,
        n: usize,
        block_size: usize,
        body: &BlockBody<'_>,
    ) {
        let progress = Arc::new(Progress::new(n, block_size));
        let job = Job { pool, body };
        let waiter = WaitForBlocks(&progress);
        let mut root = PendingRange {
            progress: Arc::clone(&progress),
            first: 0,
            last: n,
            ran: false,
        };
        if progress.block_count <= threads {
            run_range(&job, &mut root);
            drop(root);
        } else {
            pool.schedule(block_task(JobRef::new(&job), root));
        }
        progress.help_until_done(pool);
        drop(waiter);
        progress.run_unrun(body);
        progress.resume_first_panic();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::pool::{Pool, PoolKind, PoolOptions};
    use crate::sync::{AtomicUsize, Mutex};

    fn plan(size: usize, count: usize) -> BlockPlan {
        BlockPlan { size, count }
    }

    #[test]
    fn cost_model_prices_memory_as_l2_hits() {
        let cost = Cost {
            bytes_loaded: 8.0,
            bytes_stored: 4.0,
            compute_cycles: 1.0,
        };
        assert_eq!(cost.cycles_per_item(), 12.0 * 11.0 / 64.0 + 1.0);
        assert_eq!(task_size(40_000, Cost::compute(1.0)), 1.0);
    }

    #[test]
    fn thread_count_follows_eigen_formula() {
        let one_cycle = Cost::compute(1.0);
        // total 1e5: (0)/1e5 + 0.9 truncates to 0, clamped up to 1.
        assert_eq!(threads_for(100_000, one_cycle, 4), 1);
        assert_eq!(threads_for(0, one_cycle, 4), 1);
        // total 2e5: 1.9 -> 1.
        assert_eq!(threads_for(200_000, one_cycle, 4), 1);
        // total 1e6: 9.9 -> 9, clamped to the pool.
        assert_eq!(threads_for(1_000, Cost::compute(1_000.0), 16), 9);
        assert_eq!(threads_for(1_000, Cost::compute(1_000.0), 4), 4);
        assert_eq!(threads_for(1_000, Cost::compute(1_000.0), 0), 1);
    }

    #[test]
    fn block_plans_match_hand_computed_eigen_values() {
        let compute = Cost::compute;
        // 1/task_size = 40000 items dominates n/16 = 6250; 3 blocks: efficiency 0.75, and
        // 2 blocks (0.5) is worse; 1 block of 100000 exceeds 2 * 40000.
        assert_eq!(block_plan(100_000, compute(1.0), 4), plan(40_000, 3));
        // 1/task_size = 400; 3 blocks on 3 threads: efficiency 1.
        assert_eq!(block_plan(1_000, compute(100.0), 3), plan(400, 3));
        // n/(4*threads) = ceil(1000/12) = 84; 12 blocks on 3 threads.
        assert_eq!(block_plan(1_000, compute(10_000.0), 3), plan(84, 12));
        // ceil(100/28) = 4: 25 blocks (eff 25/28); 5 -> 20 blocks (20/21) taken; 6 -> 17
        // (17/21), 7 -> 15 (15/21), 8 -> 13 (13/14) all worse by more than 0.01; 9 > 2*4.
        assert_eq!(block_plan(100, compute(10_000.0), 7), plan(5, 20));
        // ceil(37/20) = 2: 19 blocks (19/20); 3 -> 13 (13/15) rejected; 4 -> 10 (10/10) taken.
        assert_eq!(block_plan(37, compute(1e6), 5), plan(4, 10));
        // 10 blocks (10/12); 2 -> 5 blocks (5/8) rejected; 3 > 2 * 1.
        assert_eq!(block_plan(10, compute(1e6), 4), plan(1, 10));
        // Memory traffic: 3.0625 cycles/item, 1/task_size = 13061 < 1e6/16 = 62500.
        let streaming = Cost {
            bytes_loaded: 8.0,
            bytes_stored: 4.0,
            compute_cycles: 1.0,
        };
        assert_eq!(block_plan(1_000_000, streaming, 4), plan(62_500, 16));
    }

    #[test]
    fn aligned_block_plan_rounds_every_candidate() {
        let to_8 = |size: usize| size.div_ceil(8) * 8;
        // 36 -> 40: 25 blocks (25/28); next ceil(1000/24) = 42 -> 48: 21 blocks (21/21).
        let aligned = block_plan_aligned(1_000, Cost::compute(10_000.0), 7, to_8);
        assert_eq!(aligned, plan(48, 21));
        // Alignment never exceeds n.
        let huge = block_plan_aligned(10, Cost::compute(1e6), 4, |_| 1_000);
        assert_eq!(huge, plan(10, 1));
    }

    #[test]
    fn degenerate_plans_stay_sane() {
        assert_eq!(block_plan(0, Cost::compute(1.0), 4).count, 0);
        assert_eq!(block_plan(5, Cost::default(), 4), plan(5, 1)); // free items: one block
        assert_eq!(block_plan(8, Cost::compute(1e9), 0), plan(2, 4)); // 0 threads acts as 1
    }

    #[test]
    fn fixed_block_shard_counts_follow_tensorflow() {
        assert_eq!(fixed_block_shards(10, 3, 4), 4);
        assert_eq!(fixed_block_shards(100, 1, 4), 100);
        assert_eq!(fixed_block_shards(10, 10, 4), 1); // total <= block_size
        assert_eq!(fixed_block_shards(10, 20, 4), 1);
        assert_eq!(fixed_block_shards(10, 0, 4), 1); // block_size 0
        assert_eq!(fixed_block_shards(1, 1, 4), 1); // total <= 1
        assert_eq!(fixed_block_shards(10, 3, 1), 1); // one thread
        assert_eq!(fixed_block_shards(10, 3, 0), 1);
        let pool = Pool::new(PoolOptions::new(PoolKind::Simple, 3, "shards")).unwrap();
        assert_eq!(num_shards_fixed_block(pool.as_dyn(), 10, 4), 3);
    }

    /// Records every `(first, last)` call and the thread it ran on.
    #[derive(Default)]
    struct Calls(Mutex<Vec<(usize, usize, std::thread::ThreadId)>>);

    impl Calls {
        fn record(&self, first: usize, last: usize) {
            let me = std::thread::current().id();
            self.0.lock().push((first, last, me));
        }

        fn take(&self) -> Vec<(usize, usize, std::thread::ThreadId)> {
            std::mem::take(&mut *self.0.lock())
        }
    }

    fn pool(threads: usize) -> Pool {
        Pool::new(PoolOptions::new(PoolKind::Simple, threads, "pf-unit")).unwrap()
    }

    #[test]
    fn small_work_runs_inline_on_the_caller() {
        let me = std::thread::current().id();
        let calls = Calls::default();
        let busy = Cost::compute(1e6);
        // One item.
        parallel_for(pool(4).as_dyn(), 1, busy, |a, b| calls.record(a, b));
        assert_eq!(calls.take(), vec![(0, 1, me)]);
        // One thread, zero threads.
        parallel_for(pool(1).as_dyn(), 1_000, busy, |a, b| calls.record(a, b));
        assert_eq!(calls.take(), vec![(0, 1_000, me)]);
        parallel_for(pool(0).as_dyn(), 1_000, busy, |a, b| calls.record(a, b));
        assert_eq!(calls.take(), vec![(0, 1_000, me)]);
        // The cost model says one thread: 1000 cycles in all.
        parallel_for(pool(4).as_dyn(), 1_000, Cost::compute(1.0), |a, b| {
            calls.record(a, b)
        });
        assert_eq!(calls.take(), vec![(0, 1_000, me)]);
        // One fixed block.
        let one_block = Schedule::FixedBlockSize { block_size: 50 };
        parallel_for_scheduled(pool(4).as_dyn(), 50, one_block, |a, b| calls.record(a, b));
        assert_eq!(calls.take(), vec![(0, 50, me)]);
        // Nothing to do: no call at all.
        parallel_for(pool(4).as_dyn(), 0, busy, |a, b| calls.record(a, b));
        assert_eq!(calls.take(), vec![]);
    }

    #[test]
    fn inline_worker_id_is_num_threads_for_the_caller() {
        let ids = Calls::default();
        parallel_for_with_worker_id(pool(1).as_dyn(), 10, 1.0, |_, _, id| ids.record(id, 0));
        parallel_for_with_worker_id(pool(0).as_dyn(), 10, 1.0, |_, _, id| ids.record(id, 0));
        let ids: Vec<usize> = ids.take().into_iter().map(|(id, _, _)| id).collect();
        assert_eq!(ids, vec![1, 0]);
    }

    #[test]
    fn blocks_cover_the_range_on_block_boundaries() {
        let pool = pool(3);
        let calls = Calls::default();
        let items = AtomicUsize::new(0);
        parallel_for(pool.as_dyn(), 1_000, Cost::compute(10_000.0), |a, b| {
            calls.record(a, b);
            items.fetch_add(b - a, Ordering::Relaxed);
        });
        let mut blocks: Vec<(usize, usize)> = calls.take().iter().map(|c| (c.0, c.1)).collect();
        blocks.sort_unstable();
        let expected: Vec<(usize, usize)> =
            (0..12).map(|i| (i * 84, 1_000.min(i * 84 + 84))).collect();
        assert_eq!(blocks, expected); // block_plan(1000, 1e4, 3) = 12 blocks of 84
        assert_eq!(items.into_inner(), 1_000);
    }

    #[test]
    fn caller_runs_the_root_when_blocks_fit_the_threads() {
        let pool = pool(4);
        let calls = Calls::default();
        let schedule = Schedule::FixedBlockSize { block_size: 25 };
        parallel_for_scheduled(pool.as_dyn(), 100, schedule, |a, b| calls.record(a, b));
        let me = std::thread::current().id();
        let first = calls.take().into_iter().find(|c| c.0 == 0).unwrap();
        assert_eq!(first, (0, 25, me)); // the root's leftmost block stays on the caller
    }

    #[test]
    fn worker_id_slots_refuse_a_second_holder() {
        let slots = WorkerIdSlots::new(2);
        let held = slots.claim(2).unwrap();
        assert!(slots.claim(2).is_none());
        assert!(
            slots.claim(2).is_none(),
            "a refused claim must not free the slot"
        );
        assert!(slots.claim(0).is_some());
        drop(held);
        assert!(slots.claim(2).is_some());
    }
}
