//! The work-sharing pool: Eigen's `SimpleThreadPool`, the baseline the stealing pools beat.
//!
//! # Protocol
//! All state lives under one mutex: a FIFO of tasks, a LIFO stack of parked workers, and one
//! hand-off slot per worker. `schedule` gives the task straight to the most recently parked
//! worker if there is one (its cache is the warmest of the sleepers), otherwise it appends it
//! to the FIFO. A worker pops the FIFO; when it is empty the worker pushes itself on the stack
//! and waits on its own condition variable until its hand-off slot is filled or it is told to
//! stop. Because every decision is made under the one lock, no task and no wake-up can be lost.
//!
//! # Shutdown, cancel, resize
//! Drop sets `done` and wakes every parked worker; workers keep popping until the FIFO is
//! empty, then exit, so every queued task runs. A drop inside one of the pool's own tasks
//! leaves the joins to a shutdown thread (`super::shutdown`): a worker cannot join itself. `cancel` empties the FIFO (counting what it
//! dropped) and stops the workers. A resize moves `active` under the lock; a worker whose index
//! is at or above it retires at its next look at the FIFO, and a parked one is woken to do so.
//! A worker whose index is below `active` again before it looked simply stays.
#![forbid(unsafe_code)]

use std::collections::VecDeque;

use super::counters::{PoolStats, WorkerCounters, WorkerState};
use super::task::{PanicLog, TaskWriter};
use super::{current, shutdown, PoolError, PoolEvent, PoolKind, PoolOptions, Task, ThreadPool};
use crate::sync::{thread, Arc, AtomicU64, Condvar, Mutex, MutexGuard, Ordering};

/// The work-sharing pool.
pub(crate) struct SimplePool {
    shared: Arc<Shared>,
    threads: Mutex<Vec<Option<thread::JoinHandle<()>>>>,
}

struct Shared {
    options: PoolOptions,
    state: Mutex<State>,
    wake: Vec<Condvar>,
    counters: Vec<crossbeam_utils::CachePadded<WorkerCounters>>,
    panics: PanicLog,
    inline_runs: AtomicU64,
}

struct State {
    queue: VecDeque<Task>,
    /// Parked workers, most recently parked last.
    parked: Vec<usize>,
    /// A task handed straight to a parked worker, per worker.
    handoff: Vec<Option<Task>>,
    /// Whether worker i's thread is running its loop.
    alive: Vec<bool>,
    active: usize,
    /// Slots ever started (stats cover these).
    started: usize,
    done: bool,
    cancelled: bool,
    /// Tasks dropped by cancel.
    dropped: u64,
}

impl SimplePool {
    /// Starts `options.threads` workers.
    pub(crate) fn new(options: PoolOptions) -> Result<Self, PoolError> {
        let max = options.max_threads;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                parked: Vec::with_capacity(max),
                handoff: (0..max).map(|_| None).collect(),
                alive: vec![false; max],
                active: 0,
                started: 0,
                done: false,
                cancelled: false,
                dropped: 0,
            }),
            wake: (0..max).map(|_| Condvar::new()).collect(),
            counters: (0..max).map(|_| Default::default()).collect(),
            panics: PanicLog::default(),
            inline_runs: AtomicU64::new(0),
            options,
        });
        let pool = SimplePool {
            shared,
            threads: Mutex::new((0..max).map(|_| None).collect()),
        };
        pool.resize_to(pool.shared.options.threads)?;
        Ok(pool)
    }

    fn pool_id(&self) -> usize {
        Arc::as_ptr(&self.shared) as usize
    }

    fn resize_to(&self, threads: usize) -> Result<(), PoolError> {
        let mut handles = self.threads.lock();
        let mut state = self.shared.state.lock();
        if state.cancelled || state.done {
            return Err(PoolError::Cancelled(self.shared.options.name.clone()));
        }
        let from = state.active;
        state.active = threads;
        state.started = state.started.max(threads);
        // Wake parked workers that must retire.
        let retiring: Vec<usize> = state
            .parked
            .iter()
            .copied()
            .filter(|&i| i >= threads)
            .collect();
        state.parked.retain(|&i| i < threads);
        for index in retiring {
            self.shared.wake[index].notify_one();
        }
        let mut to_start = Vec::new();
        for index in from..threads {
            if !state.alive[index] {
                state.alive[index] = true;
                to_start.push(index);
            }
        }
        drop(state);
        for index in to_start {
            if let Some(old) = handles[index].take() {
                let _ = old.join(); // it already left its loop; only the unlock remained
            }
            handles[index] = Some(self.spawn_worker(index)?);
        }
        if from != threads {
            self.shared
                .observe(None, PoolEvent::Resized { from, to: threads });
        }
        Ok(())
    }

    fn spawn_worker(&self, index: usize) -> Result<thread::JoinHandle<()>, PoolError> {
        let shared = self.shared.clone();
        let pool_id = self.pool_id();
        thread::Builder::new()
            .name(format!("{}-w{index}", shared.options.name))
            .spawn(move || {
                let scheduler = shared.clone();
                let scheduler: current::Scheduler = Box::new(move |write: TaskWriter<'_>| {
                    scheduler.schedule(Task::from_writer(write))
                });
                current::enter(pool_id, index, scheduler);
                shared.work(index)
            })
            .map_err(|err| {
                self.shared.state.lock().alive[index] = false;
                PoolError::Spawn {
                    pool: self.shared.options.name.clone(),
                    index,
                    reason: err.to_string(),
                }
            })
    }
}

impl Shared {
    fn observe(&self, worker: Option<usize>, event: PoolEvent) {
        if let Some(observer) = &self.options.observer {
            observer.on_event(worker, event);
        }
    }

    /// The worker loop.
    fn work(&self, index: usize) {
        let counters = &self.counters[index];
        let mut state = self.state.lock();
        loop {
            if state.cancelled || index >= state.active {
                break;
            }
            let task = match state.queue.pop_front() {
                Some(task) => task,
                None if state.done => break,
                None => match self.park(state, index) {
                    (next, Some(task)) => {
                        state = next;
                        task
                    }
                    (next, None) => {
                        state = next;
                        continue;
                    }
                },
            };
            drop(state);
            counters.set_state(WorkerState::Running);
            self.observe(Some(index), PoolEvent::TaskStart);
            let panicked = self.panics.run(task);
            if panicked {
                counters.panicked();
            }
            counters.task_ran();
            self.observe(Some(index), PoolEvent::TaskEnd { panicked });
            state = self.state.lock();
        }
        state.alive[index] = false;
        counters.set_state(WorkerState::Idle);
    }

    /// Parks worker `index` until a task is handed to it or it is told to look again.
    fn park<'a>(
        &'a self,
        mut state: MutexGuard<'a, State>,
        index: usize,
    ) -> (MutexGuard<'a, State>, Option<Task>) {
        let counters = &self.counters[index];
        state.parked.push(index);
        counters.parked();
        counters.set_state(WorkerState::Parked);
        self.observe(Some(index), PoolEvent::Park);
        loop {
            state = self.wake[index].wait(state);
            if let Some(task) = state.handoff[index].take() {
                break self.woken(state, index, Some(task));
            }
            if !state.parked.contains(&index) {
                // Removed from the stack by shutdown, cancel or resize: look again.
                break self.woken(state, index, None);
            }
        }
    }

    fn woken<'a>(
        &self,
        state: MutexGuard<'a, State>,
        index: usize,
        task: Option<Task>,
    ) -> (MutexGuard<'a, State>, Option<Task>) {
        self.counters[index].woke();
        self.observe(Some(index), PoolEvent::Unpark);
        (state, task)
    }

    fn schedule(&self, task: Task) {
        let mut state = self.state.lock();
        if state.cancelled {
            state.dropped += 1;
            return;
        }
        if state.active == 0 {
            drop(state);
            return self.run_inline(task);
        }
        if let Some(index) = state.parked.pop() {
            state.handoff[index] = Some(task);
            self.wake[index].notify_one();
        } else {
            state.queue.push_back(task);
        }
    }

    /// Runs `task` on the calling thread (no workers, or a helping caller), counted and
    /// reported to the observer as a task of no worker.
    fn run_inline(&self, task: Task) {
        self.inline_runs.fetch_add(1, Ordering::Relaxed);
        self.observe(None, PoolEvent::TaskStart);
        let panicked = self.panics.run(task);
        self.observe(None, PoolEvent::TaskEnd { panicked });
    }

    /// Wakes every parked worker so it re-reads the state (shutdown, cancel).
    fn wake_all(&self, state: &mut State) {
        for index in state.parked.drain(..) {
            self.wake[index].notify_one();
        }
    }
}

impl ThreadPool for SimplePool {
    fn schedule(&self, task: Task) {
        self.shared.schedule(task);
    }

    fn schedule_with_hint(&self, task: Task, _start: usize, _limit: usize) {
        // One shared queue: there is no per-worker placement to honour.
        self.schedule(task);
    }

    fn num_threads(&self) -> usize {
        self.shared.state.lock().active
    }

    fn current_thread_id(&self) -> Option<usize> {
        current::index_in(self.pool_id())
    }

    fn cancel(&self) -> usize {
        let mut state = self.shared.state.lock();
        state.cancelled = true;
        state.done = true;
        let dropped = std::mem::take(&mut state.queue);
        state.dropped += dropped.len() as u64;
        self.shared.wake_all(&mut state);
        drop(state);
        dropped.len()
    }

    fn set_num_threads(&self, threads: usize) -> Result<(), PoolError> {
        super::check_resize(&self.shared.options, threads)?;
        self.resize_to(threads)
    }

    fn try_run_one(&self) -> bool {
        let task = self.shared.state.lock().queue.pop_front();
        match task {
            Some(task) => {
                self.shared.run_inline(task);
                true
            }
            None => false,
        }
    }

    fn stats(&self) -> PoolStats {
        let state = self.shared.state.lock();
        let (active, started, depth) = (state.active, state.started, state.queue.len());
        let dropped = state.dropped;
        drop(state);
        PoolStats {
            name: self.shared.options.name.clone(),
            kind: PoolKind::Simple,
            num_threads: active,
            workers: (0..started)
                .map(|i| self.shared.counters[i].snapshot(i, 0))
                .collect(),
            unowned_queue_depth: depth,
            inline_runs: self.shared.inline_runs.load(Ordering::Relaxed),
            panics: self.shared.panics.count(),
            last_panic: self.shared.panics.last(),
            dropped,
        }
    }

    fn name(&self) -> &str {
        &self.shared.options.name
    }

    fn kind(&self) -> PoolKind {
        PoolKind::Simple
    }
}

impl Drop for SimplePool {
    fn drop(&mut self) {
        // Dropped by one of its own tasks, this thread is a worker the shutdown joins:
        // `drop_pool` then joins elsewhere while this task returns.
        let handles = std::mem::take(&mut *self.threads.lock());
        shutdown::drop_pool(&self.shared, self.pool_id(), handles);
    }
}

impl shutdown::ShutDown for Shared {
    fn name(&self) -> &str {
        &self.options.name
    }

    /// Sets `done` and wakes every parked worker: from here workers exit once the FIFO is empty.
    fn signal_done(&self) {
        let mut state = self.state.lock();
        state.done = true;
        self.wake_all(&mut state);
    }

    /// The drop: signal, join every worker, then run here whatever is left.
    fn shut_down(&self, handles: shutdown::Handles) {
        self.signal_done();
        for handle in handles.into_iter().flatten() {
            let _ = handle.join();
        }
        // A pool created with 0 threads, or every worker gone: run what is left here.
        // Those tasks may schedule more, which lands here too.
        loop {
            let task = self.state.lock().queue.pop_front();
            match task {
                Some(task) => self.run_inline(task),
                None => break,
            }
        }
    }
}
