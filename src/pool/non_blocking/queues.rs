//! The two queue designs the work-stealing worker loop can run on.
//!
//! - [`EigenQueues`]: one bounded [`RunQueue`] per worker. The owner pushes and pops at the
//!   front without locks; outside producers push at the back of a random queue and thieves pop
//!   the back, both under that queue's mutex. A full queue refuses and the caller runs the task
//!   inline.
//! - [`ChaseLevQueues`]: crossbeam's unbounded Chase-Lev deques (owner LIFO, thieves CAS the
//!   top) and one [`Injector`] that every outside producer pushes into. The owner's `Worker`
//!   half is not `Sync`: it lives in a thread-local of the worker thread while the thread runs
//!   the slot, and is parked in the slot when the thread retires, so a successor takes it over.
//!
//! Both answer `is_empty` without false "empty" answers for work published before the caller's
//! last synchronization, which the pool's sleep protocol relies on.

use std::cell::RefCell;

use crossbeam_deque::{Injector, Steal, Stealer, Worker};

use super::super::run_queue::RunQueue;
use super::super::task::TaskWriter;
use super::super::{PoolKind, Task};
use crate::sync::{thread_local, Mutex};

/// Slots in each Eigen run queue (Eigen's `kSize`; tiny under loom to keep models small, which
/// also exercises the queue-full path).
pub(crate) const RUN_QUEUE_CAPACITY: usize = if cfg!(loom) { 2 } else { 1024 };

/// What the worker loop needs from a queue design. `index` is a worker slot; methods named
/// `*_local` may only be called by the thread currently running that slot.
///
/// The trait is public only so the pool types can name it; it lives in a private module, so
/// no code outside the crate can call its methods (it is sealed).
pub trait StealQueues: Send + Sync + Sized + 'static {
    /// The pool kind this design implements.
    const KIND: PoolKind;

    /// Queues for `slots` workers.
    fn with_slots(slots: usize) -> Self;
    /// The calling thread starts running slot `index`.
    fn attach(&self, index: usize);
    /// The calling thread stops running slot `index`.
    fn detach(&self, index: usize);
    /// Pushes onto the caller's own queue; `Err` gives the task back when it is full.
    fn push_local(&self, index: usize, task: Task) -> Result<(), Task>;
    /// Like `push_local`, with the task written by `write` straight into its final place
    /// where the design allows it; `Err` gives the task back when the queue is full.
    fn push_local_with(&self, index: usize, write: TaskWriter<'_>) -> Result<(), Task> {
        self.push_local(index, Task::from_writer(write))
    }
    /// Pops the caller's own queue (LIFO end).
    fn pop_local(&self, index: usize) -> Option<Task>;
    /// Pushes from outside the pool, aimed at slot `target`.
    fn push_outside(&self, target: usize, task: Task) -> Result<(), Task>;
    /// Takes one task from `victim`'s queue (the FIFO end). `thief` is the calling worker.
    fn steal(&self, thief: Option<usize>, victim: usize) -> Option<Task>;
    /// Takes a task from the shared injector, if the design has one.
    fn steal_shared(&self, thief: Option<usize>) -> Option<Task>;
    /// Tasks in slot `index`'s queue.
    fn depth(&self, index: usize) -> usize;
    /// Tasks in the shared injector.
    fn shared_depth(&self) -> usize;
    /// Whether slot `index`'s queue is empty; never "empty" for a visible task.
    fn is_empty(&self, index: usize) -> bool;
    /// Whether the shared injector is empty.
    fn shared_is_empty(&self) -> bool;
}

/// Eigen's design: a bounded [`RunQueue`] per worker.
pub struct EigenQueues {
    queues: Box<[RunQueue<Task>]>,
}

impl StealQueues for EigenQueues {
    const KIND: PoolKind = PoolKind::Eigen;

    fn with_slots(slots: usize) -> Self {
        Self {
            queues: (0..slots)
                .map(|_| RunQueue::new(RUN_QUEUE_CAPACITY))
                .collect(),
        }
    }

    fn attach(&self, _index: usize) {}

    fn detach(&self, _index: usize) {}

    #[inline]
    fn push_local(&self, index: usize, task: Task) -> Result<(), Task> {
        // SAFETY: only the thread running slot `index` calls `*_local` (trait contract, upheld
        // by the pool: one thread per slot at a time, handed over through a thread join).
        unsafe { self.queues[index].push_front(task) }
    }

    #[inline]
    fn push_local_with(&self, index: usize, write: TaskWriter<'_>) -> Result<(), Task> {
        // SAFETY: as in `push_local`, the caller owns slot `index`.
        unsafe { self.queues[index].push_front_with(write) }.map_err(Task::from_writer)
    }

    #[inline]
    fn pop_local(&self, index: usize) -> Option<Task> {
        // SAFETY: as in `push_local`, the caller owns slot `index`.
        unsafe { self.queues[index].pop_front() }
    }

    #[inline]
    fn push_outside(&self, target: usize, task: Task) -> Result<(), Task> {
        self.queues[target].push_back(task)
    }

    #[inline]
    fn steal(&self, _thief: Option<usize>, victim: usize) -> Option<Task> {
        self.queues[victim].pop_back()
    }

    fn steal_shared(&self, _thief: Option<usize>) -> Option<Task> {
        None
    }

    fn depth(&self, index: usize) -> usize {
        self.queues[index].size()
    }

    fn shared_depth(&self) -> usize {
        0
    }

    #[inline]
    fn is_empty(&self, index: usize) -> bool {
        self.queues[index].is_empty()
    }

    fn shared_is_empty(&self) -> bool {
        true
    }
}

/// crossbeam's Chase-Lev deques plus an injector for outside producers.
pub(crate) struct ChaseLevQueues {
    stealers: Box<[Stealer<Task>]>,
    /// Each slot's owner half while no thread runs the slot.
    parked_workers: Box<[Mutex<Option<Worker<Task>>>]>,
    injector: Injector<Task>,
}

// Thread-local: a Chase-Lev deque's owner half may be used only by its owning thread.
thread_local! {
    /// The owner half of the deque of the slot this thread runs.
    #[allow(clippy::missing_const_for_thread_local)] // loom's thread_local! has no const form
    static LOCAL_DEQUE: RefCell<Option<Worker<Task>>> = RefCell::new(None);
}

/// Runs `f` on the calling worker's own deque.
#[inline]
fn with_local<R>(f: impl FnOnce(&Worker<Task>) -> R) -> R {
    LOCAL_DEQUE.with(|local| {
        let local = local.borrow();
        f(local
            .as_ref()
            .expect("a chase-lev worker thread always holds its deque"))
    })
}

/// Retries a crossbeam steal until it is not `Retry`.
#[inline]
fn settle(mut attempt: impl FnMut() -> Steal<Task>) -> Option<Task> {
    loop {
        match attempt() {
            Steal::Success(task) => return Some(task),
            Steal::Empty => return None,
            Steal::Retry => continue,
        }
    }
}

impl StealQueues for ChaseLevQueues {
    const KIND: PoolKind = PoolKind::ChaseLev;

    fn with_slots(slots: usize) -> Self {
        let workers: Vec<Worker<Task>> = (0..slots).map(|_| Worker::new_lifo()).collect();
        Self {
            stealers: workers.iter().map(Worker::stealer).collect(),
            parked_workers: workers.into_iter().map(|w| Mutex::new(Some(w))).collect(),
            injector: Injector::new(),
        }
    }

    fn attach(&self, index: usize) {
        let deque = self.parked_workers[index].lock().take();
        LOCAL_DEQUE.with(|local| *local.borrow_mut() = deque);
    }

    fn detach(&self, index: usize) {
        let deque = LOCAL_DEQUE.with(|local| local.borrow_mut().take());
        *self.parked_workers[index].lock() = deque;
    }

    #[inline]
    fn push_local(&self, _index: usize, task: Task) -> Result<(), Task> {
        with_local(|deque| deque.push(task));
        Ok(())
    }

    #[inline]
    fn pop_local(&self, _index: usize) -> Option<Task> {
        with_local(Worker::pop)
    }

    #[inline]
    fn push_outside(&self, _target: usize, task: Task) -> Result<(), Task> {
        self.injector.push(task);
        Ok(())
    }

    #[inline]
    fn steal(&self, thief: Option<usize>, victim: usize) -> Option<Task> {
        match thief {
            Some(_) => {
                settle(|| with_local(|deque| self.stealers[victim].steal_batch_and_pop(deque)))
            }
            None => settle(|| self.stealers[victim].steal()),
        }
    }

    #[inline]
    fn steal_shared(&self, thief: Option<usize>) -> Option<Task> {
        match thief {
            Some(_) => settle(|| with_local(|deque| self.injector.steal_batch_and_pop(deque))),
            None => settle(|| self.injector.steal()),
        }
    }

    fn depth(&self, index: usize) -> usize {
        self.stealers[index].len()
    }

    fn shared_depth(&self) -> usize {
        self.injector.len()
    }

    #[inline]
    fn is_empty(&self, index: usize) -> bool {
        self.stealers[index].is_empty()
    }

    fn shared_is_empty(&self) -> bool {
        self.injector.is_empty()
    }
}
