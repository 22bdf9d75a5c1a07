//! The engine's own queue of ready ops in front of a CPU worker pool, drained by a few
//! long-lived pool tasks.
//!
//! # Why not one pool task per op
//! A pool task is a boxed closure: handing each ready op to the pool as its own task costs an
//! allocation on the pushing thread that a worker frees (the allocator's worst pattern, a
//! third of a pusher's time when measured), the pool queue's lock, and the pool's wake-up
//! check, all on cache lines the workers write too. Instead a ready op (its handle, one
//! pointer; the body waits inline in its block) goes into a lock-free FIFO ([`Injector`]), and
//! workers take ops from it inside *drainer* tasks: a drainer runs ops until the queue is
//! empty, so one pool task and one wake-up serve a whole burst.
//!
//! # The drainer count, and why no op is stranded
//! `drainers` counts drainer tasks scheduled or running; a push schedules a new one while
//! fewer than the pool has workers. A drainer that finds the queue empty first decrements
//! `drainers`, then looks at the queue once more, and takes its place back (and goes on) if an
//! op arrived. A push appends first, then reads `drainers` (a sequentially consistent fence
//! between the two on the push side, a sequentially consistent decrement and load on the
//! drainer side): either the push sees the decrement and schedules a drainer, or the drainer's
//! last look sees the op. So an op in the queue always has a drainer coming for it.
//!
//! # Spinning, fairness
//! One drainer at a time may poll an empty queue for a short while before leaving
//! ([`SPIN_ROUNDS`]), so a pusher a little slower than the workers does not pay a task and a
//! wake-up per op; the others leave at once (two cores cannot afford two spinners next to the
//! pusher). A drainer that ran [`DRAIN_BUDGET`] ops in a row hands its place to a fresh task
//! on the same pool and returns, so the pool's own queue (and resizes) get a turn.
//!
//! # Stop and resize
//! The engine stops a pool only once no op is pending, so the queue is empty and every
//! drainer is leaving; the pool runs the tasks still queued before its threads exit. A resize
//! changes how many drainers a push may start; drainers above the new count finish their
//! burst and leave.
#![forbid(unsafe_code)]

use crossbeam_deque::{Injector, Steal};

use super::block::OpHandle;
use super::opr::{run_ready, OpBlock};
use super::{Context, FnProperty};
use crate::pool::{spawn_here, Pool, Task};
use crate::sync::{fence, spin_loop, thread_local, Arc, AtomicBool, AtomicUsize, Ordering};
use std::cell::Cell;

thread_local! {
    /// The queue whose drainer the calling thread is (its address; 0: none).
    #[allow(clippy::missing_const_for_thread_local)] // loom's thread_local! has no const form
    static DRAINING: Cell<usize> = Cell::new(0);
    /// Which ops the engine's dispatch sent back to the queue this thread drains: see
    /// [`learn_route`]. Cleared whenever the thread starts or stops draining a queue.
    #[allow(clippy::missing_const_for_thread_local)]
    static ROUTE: Cell<Option<Route>> = Cell::new(None);
}

/// An engine (its core's address), context and property whose ready ops the engine's
/// dispatch routes to the queue at `queue`.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Route {
    queue: usize,
    core: usize,
    ctx: Context,
    prop: FnProperty,
}

impl Route {
    fn of(queue: usize, op: &OpBlock) -> Self {
        Route {
            queue,
            core: &**op.core() as *const _ as usize,
            ctx: op.ctx,
            prop: op.prop,
        }
    }
}

/// Remembers that the engine's dispatch sent `op` to `queue`, which the calling thread
/// drains: until this thread stops draining `queue`, an op of the same engine, context and
/// property goes there too (the route is a function of those three while the queue's worker
/// pool exists, and the pool outlives its drainers), so [`routes_here`] lets the completing
/// worker offer it as its continuation without asking the dispatch again.
pub(crate) fn learn_route(queue: &Arc<ReadyQueue>, op: &OpBlock) {
    let address = Arc::as_ptr(queue) as usize;
    if DRAINING.with(Cell::get) == address {
        ROUTE.with(|route| route.set(Some(Route::of(address, op))));
    }
}

/// Whether the engine's dispatch would send `op` to the queue the calling thread drains (as
/// learnt by [`learn_route`]).
#[inline]
pub(crate) fn routes_here(op: &OpBlock) -> bool {
    ROUTE.with(Cell::get).is_some_and(|route| {
        route.queue == DRAINING.with(Cell::get) && route == Route::of(route.queue, op)
    })
}

/// Ops a drainer runs before it hands its place to a fresh task.
const DRAIN_BUDGET: usize = 1024;
/// Looks at an empty queue that the spinning drainer takes before it leaves (one under loom:
/// the protocol does not depend on the count).
const SPIN_ROUNDS: usize = if cfg!(loom) { 1 } else { 512 };

/// The ready ops of one worker pool and the drainers working on them.
pub(crate) struct ReadyQueue<T = OpHandle> {
    ops: Injector<T>,
    drainers: AtomicUsize,
    spinning: AtomicBool,
}

impl<T> Default for ReadyQueue<T> {
    fn default() -> Self {
        ReadyQueue {
            ops: Injector::new(),
            drainers: AtomicUsize::new(0),
            spinning: AtomicBool::new(false),
        }
    }
}

impl ReadyQueue {
    /// Queues a ready op for `pool`'s workers (which `queue` must be in front of).
    pub(crate) fn push(queue: &Arc<ReadyQueue>, pool: &Pool, op: OpHandle) {
        if queue.offer(op, pool.num_threads()) {
            pool.schedule(Task::new(drainer(queue.clone())));
        }
    }

    /// Whether the calling thread is a drainer of `queue` (so it looks at `queue` again
    /// after the op it runs: see [`requeue`](Self::requeue)).
    pub(crate) fn is_draining(queue: &Arc<ReadyQueue>) -> bool {
        DRAINING.with(Cell::get) == Arc::as_ptr(queue) as usize
    }

    /// Appends `op` without starting a drainer: only for a caller that
    /// [`is_draining`](Self::is_draining) this queue, whose own drainer will take it (or hand
    /// its place on) before it leaves.
    pub(crate) fn requeue(&self, op: OpHandle) {
        debug_assert!(DRAINING.with(Cell::get) == self as *const Self as usize);
        self.ops.push(op);
    }

    /// The body of a drainer task: runs ops until the queue is empty (and this drainer
    /// leaves) or the budget is spent (and a fresh task takes its place).
    fn drain(queue: Arc<ReadyQueue>) {
        let _replaced_if_unwinding = Successor(&queue);
        let _draining = Draining::enter(&queue);
        loop {
            for _ in 0..DRAIN_BUDGET {
                match queue.next_op() {
                    Some(op) => run_ready(op),
                    None if queue.leave() => return,
                    None => {}
                }
            }
            match spawn_here(drainer(queue.clone())) {
                Ok(()) => return,
                Err(_) => continue, // not on a pool worker: keep draining here
            }
        }
    }
}

impl<T> ReadyQueue<T> {
    /// Appends `op`; true if the caller must start a drainer (its place is counted already):
    /// fewer than `workers` drainers were at work.
    fn offer(&self, op: T, workers: usize) -> bool {
        self.ops.push(op);
        fence(Ordering::SeqCst); // the push, then the count (module docs)
        let mut drainers = self.drainers.load(Ordering::SeqCst);
        while drainers < workers {
            match self.drainers.compare_exchange_weak(
                drainers,
                drainers + 1,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return true,
                Err(now) => drainers = now,
            }
        }
        false
    }

    /// Ready ops waiting for a worker.
    pub(crate) fn len(&self) -> usize {
        self.ops.len()
    }

    /// The next op for a drainer: one queued now, or one that arrives while this drainer
    /// spins (if no other drainer does).
    fn next_op(&self) -> Option<T> {
        self.take().or_else(|| self.spin_for_op())
    }

    fn take(&self) -> Option<T> {
        loop {
            match self.ops.steal() {
                Steal::Success(op) => return Some(op),
                Steal::Empty => return None,
                Steal::Retry => spin_loop(),
            }
        }
    }

    /// Polls the empty queue for a while if no other drainer does; the op that arrived.
    fn spin_for_op(&self) -> Option<T> {
        if self.spinning.swap(true, Ordering::Acquire) {
            return None;
        }
        let mut found = None;
        for _ in 0..SPIN_ROUNDS {
            if !self.ops.is_empty() {
                found = self.take();
                if found.is_some() {
                    break;
                }
            }
            spin_loop();
        }
        self.spinning.store(false, Ordering::Release);
        found
    }

    /// Gives up this drainer's place; false if an op arrived meanwhile and the place was
    /// taken back (the caller goes on draining).
    fn leave(&self) -> bool {
        self.drainers.fetch_sub(1, Ordering::SeqCst);
        if self.ops.is_empty() {
            return true;
        }
        // An op arrived after our last look and its pusher may have seen us still counted:
        // come back, unless another drainer is at work or coming.
        self.drainers.load(Ordering::SeqCst) != 0
            || self
                .drainers
                .compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst)
                .is_err()
    }
}

/// Hands a drainer's place to a fresh task if the drainer unwinds (an op's body cannot
/// panic out of it, a panicking observer could): a place never scheduled again would leave
/// `drainers` counting a drainer that is gone, and ops unserved.
struct Successor<'a>(&'a Arc<ReadyQueue>);

impl Drop for Successor<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = spawn_here(drainer(self.0.clone()));
        }
    }
}

/// Marks the calling thread as a drainer of a queue until dropped.
struct Draining(usize);

impl Draining {
    fn enter(queue: &Arc<ReadyQueue>) -> Self {
        ROUTE.with(|route| route.set(None));
        Draining(DRAINING.with(|draining| draining.replace(Arc::as_ptr(queue) as usize)))
    }
}

impl Drop for Draining {
    fn drop(&mut self) {
        ROUTE.with(|route| route.set(None));
        DRAINING.with(|draining| draining.set(self.0));
    }
}

/// A drainer task's body for `queue` (its place in `drainers` is already counted).
fn drainer(queue: Arc<ReadyQueue>) -> impl FnOnce() + Send + 'static {
    move || ReadyQueue::drain(queue)
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! The drainer count protocol: pushes racing with drainers that find the queue empty and
    //! leave. The injector is not loom-aware: its operations count as single steps here, the
    //! count, the fence and the drainers' decisions are what the model explores.
    use super::*;
    use crate::sync::thread;

    /// A drainer thread: takes ops (recording each) until it leaves.
    fn drain_on_thread(queue: Arc<ReadyQueue<usize>>, taken: Arc<[AtomicUsize; 2]>) {
        loop {
            match queue.next_op() {
                Some(op) => {
                    taken[op].fetch_add(1, Ordering::SeqCst);
                }
                None if queue.leave() => return,
                None => {}
            }
        }
    }

    /// Two ops pushed from two threads while a drainer runs, one worker: each op is taken
    /// exactly once, whichever way the pushes, the drainer's last look and its leaving race.
    #[test]
    fn loom_ready_queue_strands_no_op() {
        loom::model(|| {
            let queue: Arc<ReadyQueue<usize>> = Arc::default();
            let taken: Arc<[AtomicUsize; 2]> = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
            let push = |op: usize| {
                let (queue, taken) = (queue.clone(), taken.clone());
                thread::spawn(move || {
                    let mut drainers = Vec::new();
                    if queue.offer(op, 1) {
                        let (queue, taken) = (queue.clone(), taken.clone());
                        drainers.push(thread::spawn(move || drain_on_thread(queue, taken)));
                    }
                    drainers.into_iter().for_each(|d| d.join().unwrap());
                })
            };
            let pushers = [push(0), push(1)];
            pushers.into_iter().for_each(|p| p.join().unwrap());
            for count in taken.iter() {
                assert_eq!(count.load(Ordering::SeqCst), 1);
            }
            assert_eq!(queue.drainers.load(Ordering::SeqCst), 0);
        });
    }
}
