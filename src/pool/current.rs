//! Which pool worker the calling thread is, if any (Eigen's per-thread `PerThread`), and a way
//! for a task to schedule more work on the pool it runs on ([`spawn_here`]).
//!
//! A pool is identified by the address of its shared state, unique while the pool lives; its
//! workers are gone before that address can be reused, so a stale mark is never consulted.
//! Each worker thread also keeps a scheduling closure for its own pool in a thread-local: the
//! closure owns a reference to the pool's shared state for the thread's whole life, so a task
//! can spawn children without cloning any handle (no reference-count traffic per task). The
//! closure knows the worker's slot, so a spawn goes straight to that slot's queue, and it takes
//! the task as a [`TaskWriter`]: the work-stealing pools build the task in the queue slot it
//! waits in, after claiming the slot, instead of copying it down from the spawning frame.
#![forbid(unsafe_code)]

use std::cell::{Cell, RefCell};

use super::task::TaskWriter;
use super::Task;
use crate::sync::thread_local;

/// Schedules a task on the pool whose worker this thread is. The task comes as a writer, so
/// the pool can build it straight into the queue slot it lands in (see [`TaskWriter`]).
pub(crate) type Scheduler = Box<dyn Fn(TaskWriter<'_>)>;

// Thread-local: Eigen's CurrentThreadId. A task scheduled from a worker goes to that
// worker's own queue, and only the thread knows which worker it is.
thread_local! {
    /// (pool id, worker index) of the calling thread; id 0 = not a pool worker.
    #[allow(clippy::missing_const_for_thread_local)] // loom's thread_local! has no const form
    static CURRENT: Cell<(usize, usize)> = Cell::new((0, 0));
    /// How this worker schedules onto its own pool.
    #[allow(clippy::missing_const_for_thread_local)]
    static SCHEDULER: RefCell<Option<Scheduler>> = RefCell::new(None);
}

/// Marks the calling thread as worker `index` of pool `pool_id`, scheduling with `scheduler`
/// (called once by each worker, before its loop).
pub(crate) fn enter(pool_id: usize, index: usize, scheduler: Scheduler) {
    CURRENT.with(|current| current.set((pool_id, index)));
    SCHEDULER.with(|slot| *slot.borrow_mut() = Some(scheduler));
}

/// The calling thread's index in pool `pool_id`, or `None` if it is not one of its workers.
#[inline]
pub(crate) fn index_in(pool_id: usize) -> Option<usize> {
    CURRENT.with(|current| {
        let (pool, index) = current.get();
        (pool == pool_id).then_some(index)
    })
}

/// Schedules `f` on the pool the calling thread is a worker of (like `rayon::spawn`), onto the
/// worker's own queue. Outside any pool it gives the task back as `Err`.
///
/// ```
/// use enginetop::pool::{spawn_here, Pool, PoolKind, PoolOptions};
/// let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "doc")).unwrap();
/// let (tx, rx) = std::sync::mpsc::channel();
/// pool.spawn(move || {
///     spawn_here(move || tx.send("child ran").unwrap()).expect("inside a pool");
/// });
/// assert_eq!(rx.recv().unwrap(), "child ran");
/// assert!(spawn_here(|| ()).is_err(), "the main thread is in no pool");
/// ```
pub fn spawn_here(f: impl FnOnce() + Send + 'static) -> Result<(), Task> {
    let mut f = Some(f);
    SCHEDULER.with(|slot| match &*slot.borrow() {
        Some(schedule) => {
            let write: TaskWriter<'_> = &mut |storage| {
                storage.write(Task::new(f.take().expect("a pool writes a task once")))
            };
            schedule(write);
            Ok(())
        }
        None => Err(Task::new(f.take().expect("not taken: no pool to write it"))),
    })
}
