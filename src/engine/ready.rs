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
//! `drainers` counts drainer tasks scheduled or running, at most `workers` (the pool's worker
//! count, kept up to date by the engine on resize). A push schedules a new drainer while fewer
//! are counted, unless one is spinning on the empty queue (see below). A drainer that finds
//! the queue empty first decrements `drainers`, then looks at the queue once more, and takes
//! its place back (and goes on) if an op arrived and fewer than `workers` drainers are counted.
//! A push appends first, then reads `drainers` (a sequentially consistent fence between the two
//! on the push side, a sequentially consistent decrement and load on the drainer side): either
//! the push sees the decrement, or the drainer's last look sees the op. So an op in the queue
//! always has a drainer coming for it.
//!
//! # Spinning, and why two ready ops still run side by side
//! One drainer at a time may poll an empty queue for a short while before leaving
//! ([`SPIN_ROUNDS`]), so a pusher a little slower than the workers does not pay a task and a
//! wake-up per op; the others leave at once (two cores cannot afford two spinners next to the
//! pusher). While that drainer spins, a push starts no drainer: the spinner takes the op in a
//! moment, and a second worker woken for it would only spin beside the pusher (on two cores, a
//! third busy thread that makes the pusher and the first worker sleep on each other's locks).
//!
//! That must not leave a second ready op waiting behind the first one's run (two ops that
//! wait on each other would hang). So a drainer that takes an op looks at the queue again
//! before it runs it, and if more ops wait and fewer than `workers` drainers are counted, it
//! starts a helper drainer first; the helper does the same. The spinner clears its flag before
//! that look, and a push reads the flag after appending (both sequentially consistent, fenced):
//! either the push saw the flag cleared and started a drainer itself, or the spinner's look
//! sees the op. Every ready op therefore gets a drainer of its own while fewer than `workers`
//! are counted, as without the spinning shortcut.
//!
//! # Fairness
//! A drainer that ran [`DRAIN_BUDGET`] ops in a row hands its place to a fresh task on the
//! same pool and returns, so the pool's own queue (and resizes) get a turn.
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
use crate::sync::{fence, spin_loop, Arc, AtomicBool, AtomicUsize, Ordering};
use std::cell::Cell;

// Thread-local: draining is a role of the thread that runs the drain task, so asking "do I
// drain this queue?" on every completion reads a cell, not a field other workers write.
engine_thread_local! {
    /// The queue whose drainer the calling thread is (its address; 0: none).
    static DRAINING: Cell<usize> = Cell::new(0);
    /// Which ops the engine's dispatch sent back to the queue this thread drains: see
    /// [`learn_route`]. Cleared whenever the thread starts or stops draining a queue.
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
    /// The most drainers at work at once: the pool's worker count (module docs).
    workers: AtomicUsize,
}

impl<T> ReadyQueue<T> {
    /// A queue in front of a pool of `workers` workers.
    pub(crate) fn new(workers: usize) -> Self {
        ReadyQueue {
            ops: Injector::new(),
            drainers: AtomicUsize::new(0),
            spinning: AtomicBool::new(false),
            workers: AtomicUsize::new(workers),
        }
    }

    /// The pool was resized to `workers` workers.
    pub(crate) fn set_workers(&self, workers: usize) {
        self.workers.store(workers, Ordering::Relaxed);
    }
}

impl ReadyQueue {
    /// Queues a ready op for `pool`'s workers (which `queue` must be in front of).
    pub(crate) fn push(queue: &Arc<ReadyQueue>, pool: &Pool, op: OpHandle) {
        if queue.offer(op) {
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
                    Some(op) => {
                        if queue.wants_helper() {
                            ReadyQueue::start_helper(&queue);
                        }
                        run_ready(op);
                    }
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

    /// Starts the helper drainer whose place [`wants_helper`](Self::wants_helper) counted, on
    /// the calling worker's pool (a sleeping worker of the pool steals it from this worker's
    /// queue).
    fn start_helper(queue: &Arc<ReadyQueue>) {
        if spawn_here(drainer(queue.clone())).is_err() {
            // Not on a pool worker: give the place back; this drainer, still counted, comes
            // back to the queue after its op.
            queue.drainers.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl<T> ReadyQueue<T> {
    /// Appends `op`; true if the caller must start a drainer (its place is counted already):
    /// fewer than `workers` drainers were at work, and none of them was spinning on the queue
    /// (that one takes the op; module docs).
    fn offer(&self, op: T) -> bool {
        self.ops.push(op);
        fence(Ordering::SeqCst); // the push, then the count and the flag (module docs)
        let drainers = self.drainers.load(Ordering::SeqCst);
        if drainers > 0 && self.spinning.load(Ordering::SeqCst) {
            return false;
        }
        self.count_drainer(drainers)
    }

    /// Counts one more drainer if fewer than `workers` are counted (`drainers`: a recent
    /// reading of the count); true if the caller must start it.
    fn count_drainer(&self, mut drainers: usize) -> bool {
        let workers = self.workers.load(Ordering::Relaxed);
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

    /// Called by a drainer that just took an op, before it runs it: true if more ops wait and
    /// fewer than `workers` drainers are counted; a helper's place is then counted, and the
    /// caller must start it (module docs).
    fn wants_helper(&self) -> bool {
        let drainers = self.drainers.load(Ordering::SeqCst);
        if drainers >= self.workers.load(Ordering::Relaxed) || self.ops.is_empty() {
            return false;
        }
        self.count_drainer(drainers)
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
        // Cleared before the caller looks for a helper's work (`wants_helper`): a push that
        // saw the flag set started no drainer (module docs).
        self.spinning.store(false, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        found
    }

    /// Gives up this drainer's place; false if an op arrived meanwhile and the place was
    /// taken back (the caller goes on draining).
    fn leave(&self) -> bool {
        self.drainers.fetch_sub(1, Ordering::SeqCst);
        if self.ops.is_empty() {
            return true;
        }
        // An op arrived after our last look and its pusher may have seen us still counted (or
        // spinning): come back while fewer than `workers` drainers are counted, as the push
        // would have started one had it seen us gone.
        !self.count_drainer(self.drainers.load(Ordering::SeqCst))
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
    //! The drainer count protocol: pushes racing with drainers that spin on the empty queue,
    //! take ops, start helpers and leave. The injector is not loom-aware: its operations count
    //! as single steps here, the count, the flag, the fences and the drainers' decisions are
    //! what the models explore.
    use super::*;
    use crate::sync::{thread, Condvar, Mutex};

    /// What the model ops do when a drainer runs them.
    struct Ops {
        /// Runs of each op.
        taken: [AtomicUsize; 2],
        /// Whether op 0 waits until op 1 ran before it finishes (two ops waiting on each
        /// other: only two drainers side by side finish them).
        zero_waits_for_one: bool,
        one_ran: Mutex<bool>,
        one_ran_cv: Condvar,
    }

    impl Ops {
        fn new(zero_waits_for_one: bool) -> Arc<Self> {
            Arc::new(Ops {
                taken: [AtomicUsize::new(0), AtomicUsize::new(0)],
                zero_waits_for_one,
                one_ran: Mutex::new(false),
                one_ran_cv: Condvar::new(),
            })
        }

        fn run(&self, op: usize) {
            self.taken[op].fetch_add(1, Ordering::SeqCst);
            if op == 1 {
                *self.one_ran.lock() = true;
                self.one_ran_cv.notify_all();
            } else if self.zero_waits_for_one {
                let mut one_ran = self.one_ran.lock();
                while !*one_ran {
                    one_ran = self.one_ran_cv.wait(one_ran);
                }
            }
        }

        fn assert_each_ran_once(&self) {
            for count in &self.taken {
                assert_eq!(count.load(Ordering::SeqCst), 1);
            }
        }
    }

    /// A drainer thread (its place counted), the same loop as [`ReadyQueue::drain`]: takes ops
    /// until it leaves, starting a helper thread where the real one starts a helper task.
    fn spawn_drainer(queue: Arc<ReadyQueue<usize>>, ops: Arc<Ops>) -> thread::JoinHandle<()> {
        thread::spawn(move || {
            let mut helpers = Vec::new();
            loop {
                match queue.next_op() {
                    Some(op) => {
                        if queue.wants_helper() {
                            helpers.push(spawn_drainer(queue.clone(), ops.clone()));
                        }
                        ops.run(op);
                    }
                    None if queue.leave() => break,
                    None => {}
                }
            }
            helpers.into_iter().for_each(|h| h.join().unwrap());
        })
    }

    /// Pushes `op` as `ReadyQueue::push` does; the drainer it had to start, if any.
    fn push(
        queue: &Arc<ReadyQueue<usize>>,
        ops: &Arc<Ops>,
        op: usize,
    ) -> Option<thread::JoinHandle<()>> {
        queue
            .offer(op)
            .then(|| spawn_drainer(queue.clone(), ops.clone()))
    }

    /// Two ops pushed from two threads while a drainer runs, one worker: each op is taken
    /// exactly once, whichever way the pushes, the drainer's last look and its leaving race.
    #[test]
    fn loom_ready_queue_strands_no_op() {
        loom::model(|| {
            let queue: Arc<ReadyQueue<usize>> = Arc::new(ReadyQueue::new(1));
            let ops = Ops::new(false);
            let pushers: Vec<_> = (0..2)
                .map(|op| {
                    let (queue, ops) = (queue.clone(), ops.clone());
                    thread::spawn(move || {
                        if let Some(drainer) = push(&queue, &ops, op) {
                            drainer.join().unwrap();
                        }
                    })
                })
                .collect();
            pushers.into_iter().for_each(|p| p.join().unwrap());
            ops.assert_each_ran_once();
            assert_eq!(queue.drainers.load(Ordering::SeqCst), 0);
        });
    }

    /// Two workers, a drainer already at work (spinning on the empty queue, or leaving), two
    /// ops pushed back to back, op 0 waiting until op 1 ran: whichever way the pushes, the
    /// spin, the helper's start and the leaving race, op 1 gets a drainer of its own while
    /// op 0 runs (no hang: loom reports a deadlock otherwise), and each op runs once.
    #[test]
    fn loom_ready_queue_runs_two_ready_ops_side_by_side() {
        loom::model(|| {
            let queue: Arc<ReadyQueue<usize>> = Arc::new(ReadyQueue::new(2));
            let ops = Ops::new(true);
            assert!(queue.count_drainer(0));
            let first = spawn_drainer(queue.clone(), ops.clone());
            let started: Vec<_> = (0..2).filter_map(|op| push(&queue, &ops, op)).collect();
            first.join().unwrap();
            started.into_iter().for_each(|d| d.join().unwrap());
            ops.assert_each_ran_once();
            assert_eq!(queue.drainers.load(Ordering::SeqCst), 0);
        });
    }
}
