//! The priority worker pool behind the CPU priority pool and the GPU compute/copy/prio
//! workers: [`PriorityWorkers<W>`], where every worker thread owns a `W` for its whole life
//! (nothing for a CPU priority worker, its stream [`Lane`](super::gpu::Lane) for a GPU one).
//!
//! # Queue protocol
//! One queue per pool: a max-heap of `(priority, sequence, task)` under one lock, highest
//! priority first and, among equal priorities, first pushed first (the sequence number breaks
//! ties; a FIFO pool queues everything at one priority, so the sequence alone orders it).
//! Workers sleep on one condition variable; `schedule` pushes under the lock and notifies one.
//! A worker waits only after it saw, under the lock, that there is nothing for it to do (heap
//! empty, pool not done, its slot still active), so a task queued while every worker sleeps
//! always wakes one: the push comes after that check and its notification finds the worker
//! waiting (the wait releases the lock atomically).
//!
//! # Resize and shutdown
//! `set_num_threads` moves the active count under the lock, then wakes everyone: a worker
//! whose index is at or above it leaves when it next looks for work (a retiring worker never
//! waits, so it never swallows a notification meant for the others, which keep draining the
//! heap); a grow starts threads for the slots that have none, each given what it owns by the
//! caller's `owns(slot)`. Dropping the pool sets `done` under the lock and wakes everyone:
//! workers drain the heap first, then exit, so nothing queued is lost; the drop joins them
//! (except the calling thread, when a pool is dropped from one of its own tasks).
//!
//! # Observer reports, outside the lock
//! Workers report task start/end, park/unpark and resizes to the pool's
//! [`PoolObserver`] (the profiler's probe, the dashboard), never while holding the queue lock:
//! an observer may take locks of its own or look at the pool. Park is reported before the
//! worker waits and Unpark after it woke: a parking worker drops the lock, reports Park, takes
//! the lock again and re-checks (a task pushed meanwhile is found there, so its notification,
//! sent while nobody waited, is not needed), waits only if there is still nothing to do, then
//! drops the lock to report Unpark. Without an observer a worker waits straight away. A
//! resize is reported after the queue lock is dropped but under the resize lock, so
//! concurrent resizes report their `from -> to` in the order they happened.
#![forbid(unsafe_code)]

use std::cell::Cell;
use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::marker::PhantomData;

use crate::pool::{PoolError, PoolEvent, PoolObserver, Task};
use crate::sync::{thread, thread_local, Arc, Condvar, Mutex, MutexGuard};

/// The most workers a priority pool may have.
pub(crate) const MAX_WORKERS: usize = 1024;

/// What each worker thread of a [`PriorityWorkers`] owns: installed on the thread before it
/// takes work, removed when it leaves.
pub(crate) trait WorkerOwns: Send + 'static {
    /// Runs on the new worker thread before its first task.
    fn enter(self);
    /// Runs on the worker thread after it left its loop (drops what `enter` installed).
    fn leave();
}

/// A CPU priority worker owns nothing.
impl WorkerOwns for () {
    fn enter(self) {}
    fn leave() {}
}

/// A snapshot of a pool's counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Active workers.
    pub(crate) active: usize,
    /// Tasks waiting in the heap.
    pub(crate) queued: usize,
    /// Tasks run so far.
    pub(crate) tasks_run: u64,
}

/// Worker threads named `<name>-<k>` draining one priority heap (see the module docs).
pub(crate) struct PriorityWorkers<W: WorkerOwns> {
    shared: Arc<Shared>,
    /// One slot per worker index ever started; also the resize lock.
    handles: Mutex<Vec<Option<thread::JoinHandle<()>>>>,
    owns: PhantomData<fn(W)>,
}

struct Shared {
    name: String,
    state: Mutex<State>,
    work: Condvar,
    // std's `Arc`: a trait object, which loom's `Arc` cannot coerce to `dyn`.
    observer: Option<std::sync::Arc<dyn PoolObserver>>,
}

struct State {
    heap: BinaryHeap<Queued>,
    next_seq: u64,
    active: usize,
    alive: Vec<bool>,
    done: bool,
    tasks_run: u64,
}

impl State {
    /// Whether worker `index` has a reason to look at the heap again (else it may wait).
    fn has_news_for(&self, index: usize) -> bool {
        !self.heap.is_empty() || self.done || index >= self.active
    }
}

struct Queued {
    priority: i32,
    seq: u64,
    task: Task,
}

impl Ord for Queued {
    fn cmp(&self, other: &Self) -> CmpOrdering {
        // Max-heap: higher priority first, then the lower (earlier) sequence number.
        self.priority
            .cmp(&other.priority)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Queued {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == CmpOrdering::Equal
    }
}

impl Eq for Queued {}

// Thread-local: whether the caller is one of this pool's workers is a fact about the
// thread, read without touching the pool's shared state.
thread_local! {
    /// The priority pool the calling thread works for (its shared state's address), or 0.
    #[allow(clippy::missing_const_for_thread_local)] // loom's thread_local! has no const form
    static WORKER_OF: Cell<usize> = Cell::new(0);
}

impl<W: WorkerOwns> PriorityWorkers<W> {
    /// A pool named `name` with no workers yet (start them with
    /// [`set_num_threads`](Self::set_num_threads)), reporting to `observer`.
    // std's `Arc`: a trait object (see `Shared::observer`).
    pub(crate) fn new(name: String, observer: Option<std::sync::Arc<dyn PoolObserver>>) -> Self {
        PriorityWorkers {
            shared: Arc::new(Shared {
                name,
                state: Mutex::new(State {
                    heap: BinaryHeap::new(),
                    next_seq: 0,
                    active: 0,
                    alive: Vec::new(),
                    done: false,
                    tasks_run: 0,
                }),
                work: Condvar::new(),
                observer,
            }),
            handles: Mutex::new(Vec::new()),
            owns: PhantomData,
        }
    }

    /// The pool's name.
    pub(crate) fn name(&self) -> &str {
        &self.shared.name
    }

    /// Queues `task` at `priority` (higher runs first, FIFO among equals).
    pub(crate) fn schedule(&self, priority: i32, task: Task) {
        let mut state = self.shared.state.lock();
        let seq = state.next_seq;
        state.next_seq += 1;
        state.heap.push(Queued {
            priority,
            seq,
            task,
        });
        drop(state);
        self.shared.work.notify_one();
    }

    /// The pool's counters now.
    pub(crate) fn counts(&self) -> Counts {
        let state = self.shared.state.lock();
        Counts {
            active: state.active,
            queued: state.heap.len(),
            tasks_run: state.tasks_run,
        }
    }

    /// Grows or shrinks the pool to `threads` active workers; a worker started for slot `k`
    /// owns `owns(k)`. Nothing queued is lost.
    pub(crate) fn set_num_threads(
        &self,
        threads: usize,
        mut owns: impl FnMut(usize) -> W,
    ) -> Result<(), PoolError> {
        if threads == 0 {
            return Err(PoolError::ZeroThreads(self.shared.name.clone()));
        }
        if threads > MAX_WORKERS {
            return Err(PoolError::TooManyThreads {
                pool: self.shared.name.clone(),
                requested: threads,
                max: MAX_WORKERS,
            });
        }
        let mut handles = self.handles.lock();
        let mut state = self.shared.state.lock();
        let from = state.active;
        state.active = threads;
        if state.alive.len() < threads {
            state.alive.resize(threads, false);
            handles.resize_with(threads, || None);
        }
        let to_start: Vec<usize> = (0..threads).filter(|&i| !state.alive[i]).collect();
        to_start.iter().for_each(|&i| state.alive[i] = true);
        drop(state);
        self.shared.work.notify_all(); // retiring workers leave
        if from != 0 && from != threads {
            self.shared
                .report(None, PoolEvent::Resized { from, to: threads });
        }
        for (started, &index) in to_start.iter().enumerate() {
            if let Some(old) = handles[index].take() {
                let _ = old.join(); // it left its loop already
            }
            match self.spawn_worker(index, owns(index)) {
                Ok(handle) => handles[index] = Some(handle),
                Err(err) => {
                    // The slots not reached have no thread: mark them so a later resize
                    // starts them (spawn_worker already marked the one that failed).
                    let mut state = self.shared.state.lock();
                    to_start[started..]
                        .iter()
                        .for_each(|&i| state.alive[i] = false);
                    return Err(err);
                }
            }
        }
        Ok(())
    }

    fn spawn_worker(&self, index: usize, owns: W) -> Result<thread::JoinHandle<()>, PoolError> {
        let shared = Arc::clone(&self.shared);
        thread::Builder::new()
            .name(format!("{}-{index}", self.shared.name))
            .spawn(move || {
                WORKER_OF.with(|worker_of| worker_of.set(shared.address()));
                owns.enter();
                shared.work_loop(index);
                W::leave();
            })
            .map_err(|err| {
                self.shared.state.lock().alive[index] = false;
                PoolError::Spawn {
                    pool: self.shared.name.clone(),
                    index,
                    reason: err.to_string(),
                }
            })
    }
}

impl Shared {
    fn address(&self) -> usize {
        self as *const Self as usize
    }

    fn report(&self, worker: Option<usize>, event: PoolEvent) {
        if let Some(observer) = &self.observer {
            observer.on_event(worker, event);
        }
    }

    fn work_loop(&self, index: usize) {
        let mut state = self.state.lock();
        loop {
            if index >= state.active && !state.done {
                break;
            }
            match state.heap.pop() {
                Some(queued) => {
                    drop(state);
                    self.report(Some(index), PoolEvent::TaskStart);
                    let panicked = queued.task.run_caught().is_err(); // ops report their own
                    self.report(Some(index), PoolEvent::TaskEnd { panicked });
                    state = self.state.lock();
                    state.tasks_run += 1;
                }
                None if state.done => break,
                None => state = self.park(index, state),
            }
        }
        if index < state.alive.len() {
            state.alive[index] = false;
        }
    }

    /// Waits for news (the caller saw none under `state`); reports Park before the wait and
    /// Unpark after it, both outside the lock (see the module docs).
    fn park<'a>(&'a self, index: usize, state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        let Some(observer) = &self.observer else {
            return self.work.wait(state);
        };
        drop(state);
        observer.on_event(Some(index), PoolEvent::Park);
        let mut state = self.state.lock();
        if !state.has_news_for(index) {
            state = self.work.wait(state);
        }
        drop(state);
        observer.on_event(Some(index), PoolEvent::Unpark);
        self.state.lock()
    }
}

impl<W: WorkerOwns> Drop for PriorityWorkers<W> {
    fn drop(&mut self) {
        self.shared.state.lock().done = true;
        self.shared.work.notify_all();
        let me = WORKER_OF.with(Cell::get) == self.shared.address();
        for handle in self.handles.lock().iter_mut().filter_map(Option::take) {
            if !me || handle.thread().id() != thread::current().id() {
                let _ = handle.join();
            }
        }
    }
}

/// Test support shared by the pools built on [`PriorityWorkers`].
#[cfg(all(test, not(loom)))]
pub(crate) mod testing {
    use std::sync::{mpsc, Arc, Mutex};

    use crate::pool::Task;

    /// The order in which `pool` (one worker) runs `low` (priority 0), `high-1` (9), `mid` (5)
    /// and `high-2` (9), queued with `schedule` while its worker is blocked; the pool is
    /// dropped (drained) before the order is read.
    pub(crate) fn run_order_of_four<P>(pool: P, schedule: fn(&P, i32, Task)) -> Vec<&'static str> {
        let (release, wait) = mpsc::channel::<()>();
        let (started, is_started) = mpsc::channel();
        let block = Task::new(move || {
            started.send(()).unwrap();
            let _ = wait.recv();
        });
        schedule(&pool, i32::MAX, block);
        is_started.recv().unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        for (label, priority) in [("low", 0), ("high-1", 9), ("mid", 5), ("high-2", 9)] {
            let order = Arc::clone(&order);
            schedule(
                &pool,
                priority,
                Task::new(move || order.lock().unwrap().push(label)),
            );
        }
        release.send(()).unwrap();
        drop(pool); // drains, then joins
        let order = order.lock().unwrap().clone();
        order
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// Every event the pool reported, with the worker.
    #[derive(Default)]
    struct Log(std::sync::Mutex<Vec<(Option<usize>, PoolEvent)>>);

    impl PoolObserver for Log {
        fn on_event(&self, worker: Option<usize>, event: PoolEvent) {
            self.0.lock().unwrap().push((worker, event));
        }
    }

    /// Takes the queue lock of the pool it observes from inside every report: a report made
    /// under that lock deadlocks the test (the deadline in `recv_timeout` fails it).
    #[derive(Default)]
    struct Reentrant {
        shared: std::sync::OnceLock<std::sync::Weak<Shared>>,
        log: Log,
    }

    impl PoolObserver for Reentrant {
        fn on_event(&self, worker: Option<usize>, event: PoolEvent) {
            if let Some(shared) = self.shared.get().and_then(std::sync::Weak::upgrade) {
                drop(shared.state.lock());
            }
            self.log.on_event(worker, event);
        }
    }

    /// Reports (task start/end, park/unpark, resize) arrive outside the queue lock, each
    /// worker's in a meaningful order. Run on a thread of its own: a report made under the
    /// lock deadlocks it, which fails the test instead of hanging it.
    #[test]
    fn reports_are_made_outside_the_lock_and_in_order() {
        let (finished, is_finished) = mpsc::channel();
        std::thread::spawn(move || {
            finished.send(observe_a_pool()).unwrap();
        });
        let events = is_finished
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("no report deadlocked on the queue lock");
        let of_worker_0: Vec<PoolEvent> = events
            .iter()
            .filter(|(worker, _)| *worker == Some(0))
            .map(|&(_, event)| event)
            .collect();
        let tasks = of_worker_0
            .iter()
            .filter(|e| matches!(e, PoolEvent::TaskEnd { panicked: false }))
            .count();
        assert_eq!(tasks, 20);
        // A worker's events pair up: task start/end and park/unpark, never a task in a park.
        for pair in of_worker_0.chunks(2) {
            assert!(
                matches!(
                    pair,
                    [PoolEvent::TaskStart, PoolEvent::TaskEnd { .. }]
                        | [PoolEvent::Park, PoolEvent::Unpark]
                ),
                "{of_worker_0:?}"
            );
        }
        assert!(events.contains(&(None, PoolEvent::Resized { from: 1, to: 2 })));
    }

    /// Runs 20 tasks one at a time on one worker, grows to two, drops; returns the reports.
    fn observe_a_pool() -> Vec<(Option<usize>, PoolEvent)> {
        let observer = std::sync::Arc::new(Reentrant::default());
        let pool = PriorityWorkers::<()>::new("t-reentrant".into(), Some(observer.clone()));
        let _ = observer.shared.set(std::sync::Arc::downgrade(&pool.shared));
        pool.set_num_threads(1, |_| ()).unwrap();
        for round in 0..20 {
            let (done, is_done) = mpsc::channel();
            pool.schedule(round, Task::new(move || done.send(()).unwrap()));
            is_done.recv().unwrap();
        }
        pool.set_num_threads(2, |_| ()).unwrap();
        drop(pool);
        let events = observer.log.0.lock().unwrap().clone();
        events
    }
}

#[cfg(all(loom, test))]
mod loom_tests {
    use super::*;
    use crate::sync::{AtomicUsize, Ordering};

    /// Checks that every worker's reports alternate Park/Unpark and TaskStart/TaskEnd.
    #[derive(Default)]
    struct Balance {
        parked: AtomicUsize,
        in_task: AtomicUsize,
    }

    impl PoolObserver for Balance {
        fn on_event(&self, _worker: Option<usize>, event: PoolEvent) {
            let (flag, on) = match event {
                PoolEvent::Park => (&self.parked, true),
                PoolEvent::Unpark => (&self.parked, false),
                PoolEvent::TaskStart => (&self.in_task, true),
                PoolEvent::TaskEnd { .. } => (&self.in_task, false),
                _ => return,
            };
            assert_eq!(
                flag.swap(usize::from(on), Ordering::SeqCst),
                usize::from(!on)
            );
            assert_eq!(
                self.parked.load(Ordering::SeqCst) & self.in_task.load(Ordering::SeqCst),
                0
            );
        }
    }

    /// A task scheduled while the observed worker is anywhere in its park (before its Park
    /// report, between the report and the wait, waiting) runs without the drop's wake-up:
    /// the test waits for it first, so a lost notification leaves every thread blocked, which
    /// loom reports as a deadlock. Then the drop joins, and the reports stayed in balance.
    #[test]
    fn loom_priority_park_outside_the_lock_loses_no_wakeup() {
        loom::model(|| {
            let observer = std::sync::Arc::new(Balance::default());
            let pool = PriorityWorkers::<()>::new("loom-prio".into(), Some(observer.clone()));
            pool.set_num_threads(1, |_| ()).unwrap();
            let ran = Arc::new(crate::pool::barrier::Barrier::new(1));
            let signal = Arc::clone(&ran);
            pool.schedule(0, Task::new(move || signal.notify()));
            ran.wait();
            drop(pool);
            assert_eq!(observer.in_task.load(Ordering::SeqCst), 0);
            assert_eq!(observer.parked.load(Ordering::SeqCst), 0);
        });
    }
}
