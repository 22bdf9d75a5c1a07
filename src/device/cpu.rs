//! CPU devices: a worker pool per device, and the CPU priority pool.
//!
//! # Per-device worker pools
//! Each CPU device `cpu(i)` the engine sees gets one of our pools ([`cpu_pool`]), named
//! `cpu<i>` (threads `cpu<i>-w<k>`), of the configured kind and size, resizable while ops
//! run. The engine puts ready ops in its own queue in front of the pool and schedules a few
//! tasks that drain it (see the engine's `ready.rs`); the pool itself sees only those tasks.
//!
//! # The priority pool ([`PriorityPool`])
//! MXNet runs `CPUPrioritized` ops on one small pool whose queue is a max-heap by priority.
//! Ours: a `BinaryHeap` of `(priority, sequence, task)` under one lock, highest priority first
//! and, among equal priorities, first pushed first (the sequence number breaks ties). Workers
//! sleep on one condition variable; `schedule` pushes under the lock and notifies one, so a
//! task queued while every worker sleeps always wakes one. A resize moves the active count
//! under the lock: a worker whose index is at or above it leaves when it next looks for work
//! (the others keep draining the heap); a grow starts threads for the new slots. Dropping the
//! pool sets `done`: workers drain the heap, then exit, so nothing queued is lost.
//!
//! # Observing the engine's pools ([`PoolObservers`])
//! The engine builds these pools itself, so whoever wants their workers' events (the
//! profiler, the dashboard) hands the engine a [`PoolObservers`] factory: it is asked once per
//! pool the engine starts, with the pool's name (`cpu<i>`, `cpu-prio`, and for the pooled
//! engine `engine` and `io`), and the observer it returns is installed on that pool.
#![forbid(unsafe_code)]

use std::cell::Cell;
use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;

use crate::pool::{Pool, PoolError, PoolEvent, PoolKind, PoolObserver, PoolOptions, Task};
use crate::sync::{thread, thread_local, Arc, Condvar, Mutex};

/// Makes the observer of each pool the engine starts, given the pool's name (`cpu<i>`,
/// `cpu-prio`, `engine`, `io`); `None` leaves that pool unobserved.
pub type PoolObservers =
    std::sync::Arc<dyn Fn(&str) -> Option<std::sync::Arc<dyn PoolObserver>> + Send + Sync>;

/// The observer `observers` gives the pool `name`, if any.
pub fn observer_for(
    observers: Option<&PoolObservers>,
    name: &str,
) -> Option<std::sync::Arc<dyn PoolObserver>> {
    observers.and_then(|make| make(name))
}

/// How to build the worker pool of one CPU device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuWorkerOptions {
    /// Which pool implementation.
    pub pool_kind: PoolKind,
    /// Workers (at least 1).
    pub threads: usize,
    /// The most workers a live resize may ask for.
    pub max_threads: usize,
    /// Let one idle worker spin before parking.
    pub allow_spinning: bool,
}

/// Starts the worker pool of CPU device `device`: named `cpu<device>`, threads
/// `cpu<device>-w<k>`, observed by what `observers` gives the name.
pub fn cpu_pool(
    device: u32,
    options: &CpuWorkerOptions,
    observers: Option<&PoolObservers>,
) -> Result<Pool, PoolError> {
    let threads = options.threads.max(1);
    let name = format!("cpu{device}");
    let mut pool_options = PoolOptions::new(options.pool_kind, threads, name.as_str())
        .max_threads(options.max_threads.max(threads))
        .allow_spinning(options.allow_spinning);
    if let Some(observer) = observer_for(observers, &name) {
        pool_options = pool_options.observer(observer);
    }
    Pool::new(pool_options)
}

/// The most threads a priority pool may be resized to.
pub const MAX_PRIORITY_THREADS: usize = 1024;

/// A live view of a [`PriorityPool`].
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PriorityPoolStats {
    /// The pool's name (threads are `<name>-<k>`).
    pub name: String,
    /// Active workers.
    pub num_threads: usize,
    /// Tasks waiting in the heap.
    pub queued: usize,
    /// Tasks run so far.
    pub tasks_run: u64,
}

/// A small pool that runs the highest-priority task first (FIFO among equals).
///
/// ```
/// use enginetop::device::cpu::PriorityPool;
/// use enginetop::pool::Task;
/// let pool = PriorityPool::new("doc-prio", 1).unwrap();
/// let (tx, rx) = std::sync::mpsc::channel();
/// pool.schedule(5, Task::new(move || tx.send("ran").unwrap()));
/// assert_eq!(rx.recv().unwrap(), "ran");
/// ```
pub struct PriorityPool {
    shared: Arc<Shared>,
    handles: Mutex<Vec<Option<thread::JoinHandle<()>>>>,
}

struct Shared {
    name: String,
    state: Mutex<State>,
    work: Condvar,
    /// Where workers report task start/end, park/unpark and resizes.
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

thread_local! {
    /// The priority pool the calling thread works for (its shared state's address), or 0.
    #[allow(clippy::missing_const_for_thread_local)] // loom's thread_local! has no const form
    static WORKER_OF: Cell<usize> = Cell::new(0);
}

impl PriorityPool {
    /// Starts `threads` (at least 1) workers named `<name>-<k>`.
    pub fn new(name: impl Into<String>, threads: usize) -> Result<Self, PoolError> {
        Self::with_observer(name, threads, None)
    }

    /// [`new`](Self::new), with workers reporting to `observer` as a pool's do.
    pub fn with_observer(
        name: impl Into<String>,
        threads: usize,
        observer: Option<std::sync::Arc<dyn PoolObserver>>,
    ) -> Result<Self, PoolError> {
        let pool = PriorityPool {
            shared: Arc::new(Shared {
                name: name.into(),
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
        };
        pool.set_num_threads(threads.max(1))?;
        Ok(pool)
    }

    /// Queues `task` at `priority` (higher runs first).
    pub fn schedule(&self, priority: i32, task: Task) {
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

    /// Active workers.
    pub fn num_threads(&self) -> usize {
        self.shared.state.lock().active
    }

    /// Grows or shrinks the pool while it runs; nothing queued is lost.
    pub fn set_num_threads(&self, threads: usize) -> Result<(), PoolError> {
        if threads == 0 {
            return Err(PoolError::ZeroThreads(self.shared.name.clone()));
        }
        if threads > MAX_PRIORITY_THREADS {
            return Err(PoolError::TooManyThreads {
                pool: self.shared.name.clone(),
                requested: threads,
                max: MAX_PRIORITY_THREADS,
            });
        }
        let mut handles = self.handles.lock();
        let mut state = self.shared.state.lock();
        let from = state.active;
        state.active = threads;
        if from != 0 && from != threads {
            self.shared
                .report(None, PoolEvent::Resized { from, to: threads });
        }
        if state.alive.len() < threads {
            state.alive.resize(threads, false);
            handles.resize_with(threads, || None);
        }
        let to_start: Vec<usize> = (0..threads).filter(|&i| !state.alive[i]).collect();
        to_start.iter().for_each(|&i| state.alive[i] = true);
        drop(state);
        self.shared.work.notify_all(); // retiring workers leave
        for index in to_start {
            if let Some(old) = handles[index].take() {
                let _ = old.join(); // it left its loop already
            }
            handles[index] = Some(self.spawn_worker(index)?);
        }
        Ok(())
    }

    fn spawn_worker(&self, index: usize) -> Result<thread::JoinHandle<()>, PoolError> {
        let shared = self.shared.clone();
        thread::Builder::new()
            .name(format!("{}-{index}", self.shared.name))
            .spawn(move || shared.work_loop(index))
            .map_err(|err| {
                self.shared.state.lock().alive[index] = false;
                PoolError::Spawn {
                    pool: self.shared.name.clone(),
                    index,
                    reason: err.to_string(),
                }
            })
    }

    /// A live view of the pool.
    pub fn stats(&self) -> PriorityPoolStats {
        let state = self.shared.state.lock();
        PriorityPoolStats {
            name: self.shared.name.clone(),
            num_threads: state.active,
            queued: state.heap.len(),
            tasks_run: state.tasks_run,
        }
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
        WORKER_OF.with(|worker_of| worker_of.set(self.address()));
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
                None => {
                    self.report(Some(index), PoolEvent::Park);
                    state = self.work.wait(state);
                    self.report(Some(index), PoolEvent::Unpark);
                }
            }
        }
        if index < state.alive.len() {
            state.alive[index] = false;
        }
    }
}

impl Drop for PriorityPool {
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// Blocks the pool's only worker until the returned sender is used.
    fn block_worker(pool: &PriorityPool) -> mpsc::Sender<()> {
        let (release, wait) = mpsc::channel::<()>();
        let (started, is_started) = mpsc::channel();
        pool.schedule(
            i32::MAX,
            Task::new(move || {
                started.send(()).unwrap();
                let _ = wait.recv();
            }),
        );
        is_started.recv().unwrap();
        release
    }

    #[test]
    fn runs_highest_priority_first_and_fifo_among_equals() {
        let pool = PriorityPool::new("t-prio", 1).unwrap();
        let release = block_worker(&pool);
        let order = Arc::new(Mutex::new(Vec::new()));
        for (label, priority) in [("low", 0), ("high-1", 9), ("mid", 5), ("high-2", 9)] {
            let order = order.clone();
            pool.schedule(priority, Task::new(move || order.lock().push(label)));
        }
        release.send(()).unwrap();
        drop(pool); // drains
        assert_eq!(*order.lock(), ["high-1", "high-2", "mid", "low"]);
    }

    #[test]
    fn resize_keeps_every_task() {
        let pool = PriorityPool::new("t-prio-resize", 2).unwrap();
        let ran = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        for round in 0..20 {
            pool.set_num_threads(1 + round % 4).unwrap();
            for _ in 0..50 {
                let ran = ran.clone();
                pool.schedule(
                    round as i32,
                    Task::new(move || {
                        ran.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }),
                );
            }
        }
        assert!(pool.set_num_threads(0).is_err());
        drop(pool);
        assert_eq!(ran.load(std::sync::atomic::Ordering::Relaxed), 1000);
    }
}
