//! [`IntraSplit`]: how each iteration op's body divides over the intra-op pool, measured from
//! the intra-op tasks it hands out, for the what-if simulation
//! ([`crate::analysis::EngineModel`]).
//!
//! # What is measured
//! An iteration op's kernel gets a [`MeasuredPool`] instead of the intra-op pool itself: it
//! passes every call through, and wraps every task scheduled through it (the blocks
//! `parallel_for` hands out, and the halves those tasks split off, since a task schedules on
//! the pool its call was given) in a closure that times the task and adds its time to its
//! op's execution in progress:
//! - as **offloaded** time when another thread ran it, with that thread's bit in the
//!   execution's **helper** mask (a thread's bit is fixed when it first runs such a task);
//! - as **helped** time when the op's own thread ran it while waiting in `parallel_for`.
//!
//! When the op's body returns, its thread takes the execution's three figures (swapping
//! them back to zero) and adds to the op's run totals: the offloaded time, and its own share
//! of the parallel part, `max(helped, offloaded / helpers)` (a caller runs one block in place
//! when a loop has no more blocks than threads, and that block is no task: it is taken to be
//! as long as an average helper's share).
//!
//! # The split
//! Over the run, per op: the parallel part is the offloaded time plus the op thread's share,
//! the serial part is the op's time less its own share (what its thread did outside the
//! parallel loops). An op that handed out no task (every op of a run at intra 1, where
//! `parallel_for` runs inline) is all serial. See [`IntraSplit::splits`].
//!
//! # Cost and races
//! Per task: two clock reads, one thread-local read and two relaxed read-modify-writes on
//! the op's cells; per op execution: three swaps and two adds. Intra-op tasks are sized to
//! be worth at least 40,000 cycles, so this stays within about a percent of a task. A task
//! adds its time after its block has settled `parallel_for`'s barrier, so its op may have
//! returned already: that time then counts for the op's next execution (the run totals lose
//! nothing). Thread bits repeat after 64 threads: two helpers sharing a bit count as one.
#![forbid(unsafe_code)]

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use crate::analysis::OpSplit;
use crate::pool::{PoolError, PoolKind, PoolStats, Task, ThreadPool};
use crate::sync::{thread_local, Arc, AtomicU32, AtomicU64, Ordering};

/// Per iteration op, its intra-op tasks' time: the execution in progress and the run's totals.
#[derive(Debug)]
pub(super) struct IntraSplit {
    /// Per op, task time other threads ran in the execution in progress (ns).
    offloaded_now: Vec<AtomicU64>,
    /// Per op, task time its own thread ran in the execution in progress (ns).
    helped_now: Vec<AtomicU64>,
    /// Per op, the bits of the threads that ran its tasks in the execution in progress.
    helpers_now: Vec<AtomicU64>,
    /// Per op, offloaded time over the run (ns).
    offloaded: Vec<AtomicU64>,
    /// Per op, its own thread's share of the parallel part over the run (ns).
    own_share: Vec<AtomicU64>,
}

impl IntraSplit {
    /// Room for an iteration of `ops` ops.
    pub(super) fn new(ops: usize) -> Self {
        let zeros = || (0..ops).map(|_| AtomicU64::new(0)).collect();
        IntraSplit {
            offloaded_now: zeros(),
            helped_now: zeros(),
            helpers_now: zeros(),
            offloaded: zeros(),
            own_share: zeros(),
        }
    }

    /// The run totals back to zero (a new run starts).
    pub(super) fn reset(&self) {
        for cell in self.offloaded.iter().chain(&self.own_share) {
            cell.store(0, Ordering::Relaxed);
        }
    }

    /// A task of op `op` ran for `time` on the thread with bit `runner` (`owner`: the op's).
    fn task_ran(&self, op: usize, owner: u64, runner: u64, time: Duration) {
        let nanos = nanos(time);
        if runner == owner {
            self.helped_now[op].fetch_add(nanos, Ordering::Relaxed);
        } else {
            self.offloaded_now[op].fetch_add(nanos, Ordering::Relaxed);
            self.helpers_now[op].fetch_or(runner, Ordering::Relaxed);
        }
    }

    /// Op `op`'s body returned: its execution's figures join the run totals.
    fn finish(&self, op: usize) {
        let offloaded = self.offloaded_now[op].swap(0, Ordering::Relaxed);
        let helped = self.helped_now[op].swap(0, Ordering::Relaxed);
        let helpers = self.helpers_now[op].swap(0, Ordering::Relaxed).count_ones();
        let share = helped.max(offloaded / u64::from(helpers.max(1)));
        self.offloaded[op].fetch_add(offloaded, Ordering::Relaxed);
        self.own_share[op].fetch_add(share, Ordering::Relaxed);
    }

    /// Each op's split over `iterations` iterations whose op times summed to `totals`.
    pub(super) fn splits(&self, totals: &[Duration], iterations: u64) -> Vec<OpSplit> {
        let runs = u32::try_from(iterations.max(1)).unwrap_or(u32::MAX);
        let load = |cell: &AtomicU64| Duration::from_nanos(cell.load(Ordering::Relaxed));
        totals
            .iter()
            .zip(self.offloaded.iter().zip(&self.own_share))
            .map(|(total, (offloaded, share))| {
                let (offloaded, share) = (load(offloaded), load(share));
                OpSplit {
                    serial: total.saturating_sub(share) / runs,
                    parallel: (offloaded + share.min(*total)) / runs,
                }
            })
            .collect()
    }
}

fn nanos(time: Duration) -> u64 {
    u64::try_from(time.as_nanos()).unwrap_or(u64::MAX)
}

/// The next thread's bit number.
static NEXT_BIT: LazyLock<AtomicU32> = LazyLock::new(|| AtomicU32::new(0));

// Thread-local: which helper ran a task is a fact about the thread, so a task's runner
// marks its bit without touching shared state.
thread_local! {
    /// This thread's bit in the helper masks (0: not given yet).
    #[allow(clippy::missing_const_for_thread_local)] // loom's thread_local! has no const form
    static THREAD_BIT: std::cell::Cell<u64> = std::cell::Cell::new(0);
}

/// The calling thread's bit, given on first use.
fn thread_bit() -> u64 {
    THREAD_BIT.with(|bit| {
        if bit.get() == 0 {
            bit.set(1 << (NEXT_BIT.fetch_add(1, Ordering::Relaxed) % 64));
        }
        bit.get()
    })
}

/// The intra-op pool as one execution of an iteration op sees it: every call passes
/// through; every task is timed for the op (see the module docs).
pub(super) struct MeasuredPool<'a> {
    inner: &'a dyn ThreadPool,
    split: &'a Arc<IntraSplit>,
    op: usize,
    /// The op thread's bit.
    owner: u64,
}

impl<'a> MeasuredPool<'a> {
    /// `inner` measured for op `op`, on the op's own thread.
    pub(super) fn new(inner: &'a dyn ThreadPool, split: &'a Arc<IntraSplit>, op: usize) -> Self {
        MeasuredPool {
            inner,
            split,
            op,
            owner: thread_bit(),
        }
    }

    /// The op's body returned (on the op's thread).
    pub(super) fn finish(self) {
        self.split.finish(self.op);
    }

    fn wrap(&self, task: Task) -> Task {
        let (split, op, owner) = (Arc::clone(self.split), self.op, self.owner);
        Task::new(move || {
            let start = Instant::now();
            let outcome = task.run_caught();
            split.task_ran(op, owner, thread_bit(), start.elapsed());
            if let Err(message) = outcome {
                std::panic::resume_unwind(Box::new(message));
            }
        })
    }
}

impl ThreadPool for MeasuredPool<'_> {
    fn schedule(&self, task: Task) {
        self.inner.schedule(self.wrap(task));
    }

    fn schedule_with_hint(&self, task: Task, start: usize, limit: usize) {
        self.inner.schedule_with_hint(self.wrap(task), start, limit);
    }

    fn num_threads(&self) -> usize {
        self.inner.num_threads()
    }

    fn current_thread_id(&self) -> Option<usize> {
        self.inner.current_thread_id()
    }

    fn cancel(&self) -> usize {
        self.inner.cancel()
    }

    fn set_num_threads(&self, threads: usize) -> Result<(), PoolError> {
        self.inner.set_num_threads(threads)
    }

    fn try_run_one(&self) -> bool {
        self.inner.try_run_one()
    }

    fn stats(&self) -> PoolStats {
        self.inner.stats()
    }

    fn name(&self) -> &str {
        self.inner.name()
    }

    fn kind(&self) -> PoolKind {
        self.inner.kind()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::pool::parallel_for::{parallel_for, Cost};
    use crate::pool::{Pool, PoolOptions};
    use crate::sync::AtomicUsize;

    const US: Duration = Duration::from_micros(1);

    #[test]
    fn an_op_without_tasks_is_all_serial() {
        let split = IntraSplit::new(2);
        let totals = [30 * US, 8 * US];
        let splits = split.splits(&totals, 2);
        assert_eq!(splits[0], OpSplit::serial(15 * US));
        assert_eq!(splits[1], OpSplit::serial(4 * US));
    }

    #[test]
    fn offloaded_time_and_the_callers_share_make_the_parallel_part() {
        let split = IntraSplit::new(1);
        // One execution: two helpers ran 6 us each; the op thread helped 2 us.
        split.task_ran(0, 1, 2, 6 * US);
        split.task_ran(0, 1, 4, 6 * US);
        split.task_ran(0, 1, 1, 2 * US);
        split.finish(0);
        // The op took 10 us: its own share is max(2, 12 / 2) = 6 us of parallel work.
        let splits = split.splits(&[10 * US], 1);
        assert_eq!(
            splits[0],
            OpSplit {
                serial: 4 * US,
                parallel: 18 * US
            }
        );
        split.reset();
        assert_eq!(split.splits(&[10 * US], 1)[0], OpSplit::serial(10 * US));
    }

    #[test]
    fn one_thread_takes_the_sum_of_the_tasks_when_the_op_thread_never_waits() {
        // Blocks of 4, 1, 2 and 3 ms: the op thread ran the first itself, two helpers the
        // rest, and the op took 4 ms (no code outside the loop, no waiting).
        let ms = Duration::from_millis;
        let split = IntraSplit::new(1);
        split.task_ran(0, 1, 1, ms(4));
        for (task, helper) in [(1, 2), (2, 4), (3, 2)] {
            split.task_ran(0, 1, helper, ms(task));
        }
        split.finish(0);
        let body = split.splits(&[ms(4)], 1)[0];
        assert_eq!(body.time(1), ms(10), "the sum of the tasks");
        assert_eq!((body.serial, body.parallel), (Duration::ZERO, ms(10)));
        assert_eq!(body.time(2), ms(5));
    }

    #[test]
    fn a_measured_parallel_for_hands_its_blocks_to_helpers() {
        let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "split-test")).unwrap();
        let split = Arc::new(IntraSplit::new(1));
        let measured = MeasuredPool::new(pool.as_dyn(), &split, 0);
        let items = AtomicUsize::new(0);
        // Enough work per item that the cost model splits it over both threads.
        parallel_for(&measured, 64, Cost::compute(1e6), |first, last| {
            let mut x = 0u64;
            for i in 0..200_000u64 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
            }
            items.fetch_add(last - first, Ordering::Relaxed);
        });
        measured.finish();
        assert_eq!(items.load(Ordering::Relaxed), 64);
        let tasks =
            split.offloaded[0].load(Ordering::Relaxed) + split.own_share[0].load(Ordering::Relaxed);
        assert!(tasks > 0, "the blocks run as tasks were timed");
    }
}
