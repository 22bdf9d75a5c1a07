//! `parallel_for` on every pool kind: Eigen's fork_join suite ported, parallel_fors started
//! from inside pool tasks and nested, worker ids, panics and a cancel in the middle of a call.
//!
//! Anything that could deadlock runs on its own thread under a 60 s limit, so a deadlock fails
//! the test instead of hanging it. Sizes are for a 2-core machine.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use enginetop::pool::barrier::Barrier;
use enginetop::pool::parallel_for::{
    parallel_for, parallel_for_scheduled, parallel_for_scheduled_with_worker_id,
    parallel_for_with_worker_id, Cost, Schedule,
};
use enginetop::pool::{Pool, PoolKind, PoolOptions, ThreadPool};

const DEADLOCK_LIMIT: Duration = Duration::from_secs(60);

fn new_pool(kind: PoolKind, threads: usize) -> Pool {
    Pool::new(PoolOptions::new(kind, threads, format!("pf-{kind}"))).unwrap()
}

fn fixed(block_size: usize) -> Schedule {
    Schedule::FixedBlockSize { block_size }
}

/// Runs `body` on its own thread; if it has not finished within 60 s it is deadlocked, and
/// the test fails (a panic in `body` fails it with that panic).
fn finishes_in_time(what: &str, body: impl FnOnce() + Send + 'static) {
    let (done_tx, done_rx) = mpsc::channel();
    let runner = std::thread::spawn(move || {
        body();
        let _ = done_tx.send(());
    });
    match done_rx.recv_timeout(DEADLOCK_LIMIT) {
        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => {
            if let Err(payload) = runner.join() {
                panic::resume_unwind(payload);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what} did not finish within {DEADLOCK_LIMIT:?}: deadlock")
        }
    }
}

/// How often each index was visited.
struct Visits(Vec<AtomicU32>);

impl Visits {
    fn new(n: usize) -> Self {
        Visits((0..n).map(|_| AtomicU32::new(0)).collect())
    }

    fn visit(&self, first: usize, last: usize) {
        for count in &self.0[first..last] {
            count.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn total(&self) -> u64 {
        self.0
            .iter()
            .map(|c| u64::from(c.load(Ordering::Relaxed)))
            .sum()
    }

    fn assert_each_once(&self, what: &str) {
        let wrong: Vec<(usize, u32)> = (self.0.iter().map(|c| c.load(Ordering::Relaxed)))
            .enumerate()
            .filter(|&(_, count)| count != 1)
            .take(5)
            .collect();
        assert!(wrong.is_empty(), "{what}: (index, visits) not 1: {wrong:?}");
    }
}

fn sum_of(first: usize, last: usize) -> u64 {
    (first as u64..last as u64).sum()
}

/// Notifies a barrier when dropped, so a task that panics still counts.
struct NotifyOnDrop(Arc<Barrier>);

impl Drop for NotifyOnDrop {
    fn drop(&mut self) {
        self.0.notify();
    }
}

/// Spawns `count` tasks on `pool`, each running `work(pool)`, and waits for all of them.
fn run_in_tasks(
    pool: &Arc<Pool>,
    count: usize,
    work: impl Fn(&dyn ThreadPool) + Send + Sync + 'static,
) {
    let barrier = Arc::new(Barrier::new(count));
    let work = Arc::new(work);
    for _ in 0..count {
        let (task_pool, work) = (Arc::clone(pool), Arc::clone(&work));
        let notify = NotifyOnDrop(Arc::clone(&barrier));
        pool.spawn(move || {
            work(task_pool.as_dyn());
            // The last pool handle must not drop on a worker: the drop joins every worker.
            drop(task_pool);
            drop(notify);
        });
    }
    barrier.wait();
}

/// Eigen's fork_join `test_parallel_for` (granularity 1 and 2): exact sum, every index once.
#[test]
fn fork_join_fixed_granularity_visits_every_index_once() {
    const ITEMS: usize = 100_000;
    for kind in PoolKind::ALL {
        finishes_in_time("fork_join", move || {
            let pool = new_pool(kind, 4);
            for granularity in [1, 2] {
                let (sum, visits) = (AtomicU64::new(0), Visits::new(ITEMS));
                parallel_for_scheduled(pool.as_dyn(), ITEMS, fixed(granularity), |first, last| {
                    assert!(last - first <= granularity);
                    sum.fetch_add(sum_of(first, last), Ordering::Relaxed);
                    visits.visit(first, last);
                });
                let expected = (ITEMS * (ITEMS - 1) / 2) as u64;
                assert_eq!(
                    sum.into_inner(),
                    expected,
                    "{kind}, granularity {granularity}"
                );
                visits.assert_each_once(&format!("{kind}, granularity {granularity}"));
            }
        });
    }
}

/// The same over Eigen's cost model, plain and with worker ids.
#[test]
fn cost_model_loops_visit_every_index_once() {
    const ITEMS: usize = 100_000;
    let streaming = Cost {
        bytes_loaded: 8.0,
        bytes_stored: 8.0,
        compute_cycles: 100.0,
    };
    for kind in PoolKind::ALL {
        finishes_in_time("cost-model loop", move || {
            let pool = new_pool(kind, 4);
            let visits = Visits::new(ITEMS);
            parallel_for(pool.as_dyn(), ITEMS, streaming, |a, b| visits.visit(a, b));
            visits.assert_each_once(&format!("{kind} parallel_for"));

            let visits = Visits::new(ITEMS);
            parallel_for_with_worker_id(pool.as_dyn(), ITEMS, 100.0, |a, b, id| {
                assert!(id <= 4, "worker id {id} out of [0, 4]");
                visits.visit(a, b);
            });
            visits.assert_each_once(&format!("{kind} parallel_for_with_worker_id"));
        });
    }
}

/// Eigen's fork_join `test_async_parallel_for`: 16 parallel_fors started from inside pool
/// tasks on 4 threads, joined with a Barrier. Every worker waits inside a parallel_for while
/// the blocks sit in the queues: only a helping caller gets them run.
#[test]
fn parallel_fors_started_inside_pool_tasks_complete() {
    const CALLS: usize = 16;
    const ITEMS: usize = 100;
    for kind in PoolKind::ALL {
        finishes_in_time("16 parallel_fors inside pool tasks", move || {
            let pool = Arc::new(new_pool(kind, 4));
            let sum = Arc::new(AtomicU64::new(0));
            let task_sum = Arc::clone(&sum);
            run_in_tasks(&pool, CALLS, move |pool| {
                parallel_for_scheduled(pool, ITEMS, fixed(1), |first, last| {
                    task_sum.fetch_add(sum_of(first, last), Ordering::Relaxed);
                });
            });
            let expected = (CALLS * ITEMS * (ITEMS - 1) / 2) as u64;
            assert_eq!(sum.load(Ordering::Relaxed), expected, "{kind}");
        });
    }
}

/// Two workers, eight outer tasks, each running a parallel_for whose blocks run another:
/// both workers block inside nested calls, which Eigen's sleeping caller cannot survive.
#[test]
fn nested_parallel_fors_on_two_threads_complete() {
    const OUTER: usize = 8;
    const MIDDLE: usize = 8;
    const INNER: usize = 8;
    for kind in PoolKind::ALL {
        finishes_in_time("nested parallel_for", move || {
            let pool = Arc::new(new_pool(kind, 2));
            let visits = Arc::new(Visits::new(OUTER * MIDDLE * INNER));
            let next_outer = Arc::new(AtomicUsize::new(0));
            let task_visits = Arc::clone(&visits);
            run_in_tasks(&pool, OUTER, move |pool| {
                let outer = next_outer.fetch_add(1, Ordering::Relaxed);
                parallel_for_scheduled(pool, MIDDLE, fixed(1), |first, last| {
                    for middle in first..last {
                        let base = (outer * MIDDLE + middle) * INNER;
                        // The inner loop through the cost model: 8 items of 1e6 cycles.
                        parallel_for(pool, INNER, Cost::compute(1e6), |a, b| {
                            task_visits.visit(base + a, base + b);
                        });
                    }
                });
            });
            visits.assert_each_once(&format!("{kind} nested"));
        });
    }
}

#[test]
fn worker_ids_are_in_range_and_the_callers_is_num_threads() {
    for kind in PoolKind::ALL {
        finishes_in_time("worker ids", move || {
            let pool = Arc::new(new_pool(kind, 3));
            let max_id = AtomicUsize::new(0);
            parallel_for_with_worker_id(pool.as_dyn(), 3_000, 10_000.0, |_, _, id| {
                max_id.fetch_max(id, Ordering::Relaxed);
            });
            assert!(max_id.into_inner() <= 3, "{kind}: id above num_threads");

            // 3 blocks on 3 threads: the caller runs the root and its first block.
            assert_eq!(first_block_id(pool.as_dyn()), 3, "{kind}: caller's id");
            // From inside a worker, the first block is that worker's.
            let (id_tx, id_rx) = mpsc::channel();
            let task_pool = Arc::clone(&pool);
            pool.spawn(move || {
                let me = task_pool.current_thread_id();
                let first = first_block_id(task_pool.as_dyn());
                drop(task_pool);
                id_tx.send((me, first)).unwrap();
            });
            let (me, first) = id_rx.recv_timeout(DEADLOCK_LIMIT).unwrap();
            assert_eq!(me, Some(first), "{kind}: a worker caller's id");
        });
    }
}

/// The id `f` got for the block starting at 0 of a 3-block loop.
fn first_block_id(pool: &dyn ThreadPool) -> usize {
    let id_of_first = AtomicUsize::new(usize::MAX);
    parallel_for_scheduled_with_worker_id(pool, 3_000, fixed(1_000), |first, _, id| {
        if first == 0 {
            id_of_first.store(id, Ordering::Relaxed);
        }
    });
    id_of_first.into_inner()
}

/// A block holds its id across a nested parallel_for, during which its thread helps and may
/// pick up another block of the same call: that one must not run with the same id.
#[test]
fn worker_ids_never_overlap_even_when_helping_nests_blocks() {
    const ITEMS: usize = 64;
    for kind in PoolKind::ALL {
        finishes_in_time("worker id exclusivity", move || {
            let pool = new_pool(kind, 2);
            let in_use: Vec<AtomicBool> = (0..=2).map(|_| AtomicBool::new(false)).collect();
            let (visits, overlaps) = (Visits::new(ITEMS), AtomicUsize::new(0));
            let inner_items = AtomicUsize::new(0);
            parallel_for_scheduled_with_worker_id(pool.as_dyn(), ITEMS, fixed(1), |a, b, id| {
                if in_use[id].swap(true, Ordering::Acquire) {
                    overlaps.fetch_add(1, Ordering::Relaxed);
                }
                parallel_for_scheduled(pool.as_dyn(), 8, fixed(1), |x, y| {
                    inner_items.fetch_add(y - x, Ordering::Relaxed);
                });
                visits.visit(a, b);
                in_use[id].store(false, Ordering::Release);
            });
            assert_eq!(
                overlaps.into_inner(),
                0,
                "{kind}: two blocks ran with one id at once"
            );
            visits.assert_each_once(&format!("{kind} worker-id blocks"));
            assert_eq!(inner_items.into_inner(), ITEMS * 8);
        });
    }
}

#[test]
fn a_panicking_block_is_reraised_after_every_other_block_ran() {
    const ITEMS: usize = 10_000;
    for kind in PoolKind::ALL {
        finishes_in_time("panicking block", move || {
            let pool = new_pool(kind, 2);
            let visits = Visits::new(ITEMS);
            let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
                parallel_for_scheduled(pool.as_dyn(), ITEMS, fixed(100), |first, last| {
                    if first == 0 {
                        panic!("block 0 failed");
                    }
                    visits.visit(first, last);
                });
            }));
            let payload = outcome.expect_err("the block's panic must reach the caller");
            assert_eq!(payload.downcast_ref::<&str>(), Some(&"block 0 failed"));
            // Every other block had finished before the panic was re-raised.
            assert_eq!(visits.total(), (ITEMS - 100) as u64, "{kind}");

            // The pool still works.
            let sum = AtomicU64::new(0);
            parallel_for(pool.as_dyn(), ITEMS, Cost::compute(1e4), |first, last| {
                sum.fetch_add(sum_of(first, last), Ordering::Relaxed);
            });
            assert_eq!(sum.into_inner(), (ITEMS * (ITEMS - 1) / 2) as u64, "{kind}");
        });
    }
}

/// A cancel drops the queued blocks of a running call; the caller runs them itself, so the
/// call still covers every index exactly once.
#[test]
fn blocks_dropped_by_a_cancel_are_run_by_the_caller() {
    const ITEMS: usize = 1_000;
    for kind in PoolKind::ALL {
        finishes_in_time("cancel during parallel_for", move || {
            let pool = new_pool(kind, 2);
            let visits = Visits::new(ITEMS);
            parallel_for_scheduled(pool.as_dyn(), ITEMS, fixed(10), |first, last| {
                if first == 0 {
                    pool.cancel();
                }
                visits.visit(first, last);
            });
            visits.assert_each_once(&format!("{kind} cancelled"));
        });
    }
}
