//! The work-stealing pools: Eigen's `NonBlockingThreadPool` and its Chase-Lev twin.
//!
//! One generic pool, [`StealingPool`], runs the same worker loop over either queue design in
//! `queues`: `eigen` (bounded RunQueues, outside producers push to a random worker) and
//! `chase-lev` (crossbeam deques, outside producers push to an injector). The loop, the
//! stealing order, the sleep protocol and the spinning rules are described in the parent
//! module's essay; this file holds the parts that change the pool's shape: scheduling,
//! cancel, resize and drop. `worker` holds the loop itself.
//!
//! # Who runs a slot: the life cycle of a worker slot
//! Each slot has a `life` word: `VACANT` (no thread yet), `RUNNING` (a thread owns the slot,
//! including its queue's lock-free front), `RETIRED` (its thread decided to exit). Only one
//! thread may own a slot's queue front at a time, so a grow racing with a retirement must not
//! end with two threads on one slot or none. The retiring worker stores `RETIRED` and then
//! re-reads the active count; the grow stores the active count and then reads `life`. Both
//! sides are sequentially consistent, so at least one sees the other (the Dekker pattern):
//! - the grow sees `RUNNING`: the worker will see the new count and take the slot back with a
//!   CAS `RETIRED -> RUNNING`;
//! - the grow sees `RETIRED`: both may try the same CAS, exactly one wins; if the grow wins it
//!   joins the old thread (now certainly leaving) before starting the new one.
//!
//! # Shutdown with retired workers
//! A retired worker that is still finishing its last task may push new tasks onto its own
//! queue. Drop therefore first joins every thread of a slot at or above the active count, and
//! only then sets `done`: from that moment the only threads that can add work are the active
//! workers themselves, which is the situation Eigen's exit rule (all active workers blocked and
//! every queue empty) is proven for. A retiring worker may also be asleep with its wake-up
//! taken by another sleeper (EventCount signals are shared, "retire" is per worker), so drop
//! keeps notifying until each retiring slot reports it has left (`wake_until_retired`).
//!
//! # Dropped by one of its own tasks
//! The exit rule waits for every active worker to block, and the worker running the drop is
//! inside a task: a drop there that joined would wait for itself forever. Such a drop moves the
//! same protocol (retired joins, `done`, active joins) to a shutdown thread and returns; its
//! worker finishes the task, blocks with the others once the queues are empty, and exits, and
//! the shutdown thread joins it like any other (`super::shutdown`).

mod queues;
mod spinning;
mod victims;
mod worker;

use crossbeam_utils::CachePadded;

use super::counters::{PoolStats, WorkerCounters};
use super::event_count::EventCount;
use super::task::{PanicLog, TaskWriter};
use super::{current, shutdown, PoolError, PoolEvent, PoolKind, PoolOptions, Task, ThreadPool};
use crate::sync::{thread, Arc, AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Mutex, Ordering};
pub(crate) use queues::ChaseLevQueues;
#[cfg(all(test, not(loom)))]
pub(crate) use queues::RUN_QUEUE_CAPACITY;
pub use queues::{EigenQueues, StealQueues};
use spinning::SpinningState;
use victims::{encode_partition, reduce, VictimOrder};

/// Eigen's NonBlockingThreadPool: a RunQueue per worker.
pub type EigenPool = StealingPool<EigenQueues>;
/// The same worker loop over crossbeam's Chase-Lev deques and an injector.
pub(crate) type ChaseLevPool = StealingPool<ChaseLevQueues>;

const VACANT: u8 = 0;
const RUNNING: u8 = 1;
const RETIRED: u8 = 2;

/// A work-stealing pool over the queue design `Q`.
pub struct StealingPool<Q: StealQueues> {
    shared: Arc<Shared<Q>>,
    /// One join handle per slot; the lock also serializes resize, cancel and drop.
    handles: Mutex<Vec<Option<thread::JoinHandle<()>>>>,
}

/// What the workers and the handle share.
pub(crate) struct Shared<Q> {
    options: PoolOptions,
    queues: Q,
    slots: Box<[Slot]>,
    /// Written by every sleeper and by notifiers that find one: on its own cache line (as are
    /// `spinning` and `blocked`), so that the read-mostly fields beside them (`active`,
    /// `cancelled`, `started`, the queue pointers) stay cached in every worker. A spinner
    /// reads those on each round; sharing a line with the word a producer has just written
    /// would cost it a miss right when a task arrives.
    event_count: CachePadded<EventCount>,
    /// Written by spinners, and by producers only with `skip_notify_when_spinning`.
    spinning: CachePadded<SpinningState>,
    victims: VictimOrder,
    /// Workers that should be running.
    active: AtomicUsize,
    /// Slots ever started: thieves and the emptiness check scan all of them.
    started: AtomicUsize,
    /// Active workers inside `wait_for_work` (the exit condition counts them).
    blocked: CachePadded<AtomicUsize>,
    done: AtomicBool,
    cancelled: AtomicBool,
    panics: PanicLog,
    inline_runs: AtomicU64,
    dropped: AtomicU64,
}

/// Per-worker state other than the queue.
struct Slot {
    counters: CachePadded<WorkerCounters>,
    life: AtomicU8,
    /// The worker's steal partition, packed; 0 = none.
    partition: AtomicU64,
}

impl<Q: StealQueues> StealingPool<Q> {
    /// Starts `options.threads` workers with room for `options.max_threads`.
    pub fn new(options: PoolOptions) -> Result<Self, PoolError> {
        let slots = options.max_threads;
        let shared = Arc::new(Shared {
            queues: Q::with_slots(slots),
            slots: (0..slots)
                .map(|_| Slot {
                    counters: Default::default(),
                    life: AtomicU8::new(VACANT),
                    partition: AtomicU64::new(0),
                })
                .collect(),
            event_count: CachePadded::new(EventCount::new(slots.max(1))),
            spinning: CachePadded::new(SpinningState::default()),
            victims: VictimOrder::new(slots),
            active: AtomicUsize::new(0),
            started: AtomicUsize::new(0),
            blocked: CachePadded::new(AtomicUsize::new(0)),
            done: AtomicBool::new(false),
            cancelled: AtomicBool::new(false),
            panics: PanicLog::default(),
            inline_runs: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            options,
        });
        let pool = StealingPool {
            shared,
            handles: Mutex::new((0..slots).map(|_| None).collect()),
        };
        pool.resize_to(pool.shared.options.threads)?;
        Ok(pool)
    }

    /// Sets Eigen's steal partitions: worker `i` first steals inside `partitions[i]`, then
    /// everywhere. Out-of-range or empty ranges are ignored for that worker.
    pub fn set_steal_partitions(&self, partitions: &[(usize, usize)]) {
        let started = self.shared.started.load(Ordering::Acquire);
        for (slot, &(start, limit)) in self.shared.slots.iter().zip(partitions) {
            let valid = start < limit && limit <= started;
            let packed = if valid {
                encode_partition(start, limit)
            } else {
                0
            };
            slot.partition.store(packed, Ordering::Relaxed);
        }
    }

    fn pool_id(&self) -> usize {
        self.shared.pool_id()
    }

    fn resize_to(&self, threads: usize) -> Result<(), PoolError> {
        let mut handles = self.handles.lock();
        let shared = &self.shared;
        if shared.done.load(Ordering::SeqCst) {
            return Err(PoolError::Cancelled(shared.options.name.clone()));
        }
        let from = shared.active.load(Ordering::SeqCst);
        if threads == from {
            return Ok(());
        }
        shared.started.fetch_max(threads, Ordering::SeqCst);
        shared.active.store(threads, Ordering::SeqCst);
        if threads < from {
            // Parked workers above the new count must wake up to retire.
            shared.event_count.notify(true);
        }
        for index in from..threads {
            if let Err(err) = self.claim_slot(index, &mut handles) {
                shared.active.store(index, Ordering::SeqCst);
                return Err(err);
            }
        }
        shared.observe(None, PoolEvent::Resized { from, to: threads });
        Ok(())
    }

    /// Makes sure slot `index` has a running thread (see the module docs for the race).
    fn claim_slot(
        &self,
        index: usize,
        handles: &mut [Option<thread::JoinHandle<()>>],
    ) -> Result<(), PoolError> {
        let life = &self.shared.slots[index].life;
        let start_new = match life.load(Ordering::SeqCst) {
            VACANT => {
                life.store(RUNNING, Ordering::SeqCst);
                true
            }
            RETIRED => life
                .compare_exchange(RETIRED, RUNNING, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok(),
            _ => false, // still running: it sees the new count and stays
        };
        if !start_new {
            return Ok(());
        }
        if let Some(old) = handles[index].take() {
            let _ = old.join(); // it lost the slot and is leaving
        }
        match self.spawn_worker(index) {
            Ok(handle) => {
                handles[index] = Some(handle);
                Ok(())
            }
            Err(err) => {
                life.store(VACANT, Ordering::SeqCst);
                Err(err)
            }
        }
    }

    fn spawn_worker(&self, index: usize) -> Result<thread::JoinHandle<()>, PoolError> {
        let shared = self.shared.clone();
        thread::Builder::new()
            .name(format!("{}-w{index}", shared.options.name))
            .spawn(move || {
                let for_tasks = shared.clone();
                // This thread runs slot `index` for its whole life: its tasks push straight
                // onto that slot's queue, without looking the slot up again per task.
                let scheduler: current::Scheduler =
                    Box::new(move |write: TaskWriter<'_>| for_tasks.schedule_local(index, write));
                shared.run_worker(index, scheduler)
            })
            .map_err(|err| PoolError::Spawn {
                pool: self.shared.options.name.clone(),
                index,
                reason: err.to_string(),
            })
    }
}

/// A random number for a thread outside the pool (deterministic under loom).
fn outside_random() -> u32 {
    #[cfg(loom)]
    return 0;
    #[cfg(not(loom))]
    fastrand::u32(..)
}

impl<Q: StealQueues> Shared<Q> {
    fn pool_id(&self) -> usize {
        self as *const Self as usize
    }

    #[inline]
    fn observe(&self, worker: Option<usize>, event: PoolEvent) {
        if let Some(observer) = &self.options.observer {
            observer.on_event(worker, event);
        }
    }

    /// Runs `task` on the calling thread (a full queue, no workers, or a helping caller),
    /// counted and reported to the observer as a task of no worker: the caller's.
    fn run_inline(&self, task: Task) {
        self.inline_runs.fetch_add(1, Ordering::Relaxed);
        self.observe(None, PoolEvent::TaskStart);
        let panicked = self.panics.run(task);
        self.observe(None, PoolEvent::TaskEnd { panicked });
    }

    /// Picks the queue an outside producer pushes to, honouring a `[start, limit)` hint that
    /// fits inside the active workers.
    fn outside_target(&self, active: usize, start: usize, limit: usize) -> usize {
        let (start, limit) = if start < limit && limit <= active {
            (start, limit)
        } else {
            (0, active)
        };
        start + reduce(outside_random(), limit - start)
    }

    fn schedule(&self, task: Task, start: usize, limit: usize) {
        if self.cancelled.load(Ordering::Relaxed) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if let Some(index) = current::index_in(self.pool_id()) {
            return self.published(self.queues.push_local(index, task));
        }
        let active = self.active.load(Ordering::Relaxed);
        if active == 0 {
            return self.run_inline(task);
        }
        let target = self.outside_target(active, start, limit);
        self.published(self.queues.push_outside(target, task));
    }

    /// Schedules from worker `index` of this pool (the calling thread) onto its own queue,
    /// the task written straight into its slot.
    #[inline]
    fn schedule_local(&self, index: usize, write: TaskWriter<'_>) {
        if self.cancelled.load(Ordering::Relaxed) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            drop(Task::from_writer(write));
            return;
        }
        self.published(self.queues.push_local_with(index, write));
    }

    /// After a push: wake a sleeper for the task, or run it here if the queue was full.
    #[inline]
    fn published(&self, pushed: Result<(), Task>) {
        match pushed {
            // Notify even when a worker spins, unless asked to skip (see `spinning`'s docs).
            Ok(()) => {
                if !self.options.skip_notify_when_spinning || self.spinning.must_notify() {
                    self.event_count.notify(false);
                }
            }
            Err(task) => self.run_inline(task), // queue full: back-pressure
        }
    }

    /// Wakes sleepers until the worker of slot `index` (at or above the active count) has left
    /// its loop. One `notify(true)` is not enough: it signals the threads preparing to sleep
    /// at that moment, and a thread that starts to wait right after may take the signal meant
    /// for the retiring one, which then sleeps on (the condition "my index is retired" is per
    /// worker, while EventCount signals are shared). So keep notifying until it is out.
    fn wake_until_retired(&self, index: usize) {
        while self.slots[index].life.load(Ordering::SeqCst) != RETIRED {
            self.event_count.notify(true);
            if cfg!(loom) {
                thread::yield_now();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
    }

    /// Empties every queue, returning how many tasks it dropped.
    fn drain_all(&self) -> usize {
        let mut dropped = 0;
        while self.queues.steal_shared(None).is_some() {
            dropped += 1;
        }
        for victim in 0..self.started.load(Ordering::SeqCst) {
            while self.queues.steal(None, victim).is_some() {
                dropped += 1;
            }
        }
        dropped
    }
}

impl<Q: StealQueues> ThreadPool for StealingPool<Q> {
    fn schedule(&self, task: Task) {
        self.shared.schedule(task, 0, usize::MAX);
    }

    fn schedule_with_hint(&self, task: Task, start: usize, limit: usize) {
        self.shared.schedule(task, start, limit);
    }

    fn num_threads(&self) -> usize {
        self.shared.active.load(Ordering::Relaxed)
    }

    fn current_thread_id(&self) -> Option<usize> {
        current::index_in(self.pool_id())
    }

    fn cancel(&self) -> usize {
        let _serialized = self.handles.lock();
        let shared = &self.shared;
        shared.cancelled.store(true, Ordering::SeqCst);
        shared.done.store(true, Ordering::SeqCst);
        shared.event_count.notify(true);
        let dropped = shared.drain_all();
        shared.dropped.fetch_add(dropped as u64, Ordering::Relaxed);
        dropped
    }

    fn set_num_threads(&self, threads: usize) -> Result<(), PoolError> {
        super::check_resize(&self.shared.options, threads)?;
        self.resize_to(threads)
    }

    fn try_run_one(&self) -> bool {
        let shared = &self.shared;
        match current::index_in(self.pool_id()) {
            Some(index) => match shared.find_task(index, outside_random()) {
                Some(task) => shared.run_task(index, task),
                None => return false,
            },
            None => match shared.global_steal(None, outside_random()) {
                Some(task) => shared.run_inline(task),
                None => return false,
            },
        }
        true
    }

    fn stats(&self) -> PoolStats {
        let shared = &self.shared;
        let started = shared.started.load(Ordering::Acquire);
        PoolStats {
            name: shared.options.name.clone(),
            kind: Q::KIND,
            num_threads: shared.active.load(Ordering::Relaxed),
            workers: (0..started)
                .map(|i| shared.slots[i].counters.snapshot(i, shared.queues.depth(i)))
                .collect(),
            unowned_queue_depth: shared.queues.shared_depth(),
            inline_runs: shared.inline_runs.load(Ordering::Relaxed),
            panics: shared.panics.count(),
            last_panic: shared.panics.last(),
            dropped: shared.dropped.load(Ordering::Relaxed),
        }
    }

    fn name(&self) -> &str {
        &self.shared.options.name
    }

    fn kind(&self) -> PoolKind {
        Q::KIND
    }
}

impl<Q: StealQueues> Drop for StealingPool<Q> {
    fn drop(&mut self) {
        // Dropped by one of its own tasks, the exit rule would wait for this very worker to
        // block: `drop_pool` then joins on a shutdown thread while this task returns.
        let handles = std::mem::take(&mut *self.handles.lock());
        shutdown::drop_pool(&self.shared, self.pool_id(), handles);
    }
}

impl<Q: StealQueues> shutdown::ShutDown for Shared<Q> {
    fn name(&self) -> &str {
        &self.options.name
    }

    /// The drop's protocol: join the retired workers, set `done`, join the active ones.
    fn shut_down(&self, mut handles: shutdown::Handles) {
        let active = self.active.load(Ordering::SeqCst);
        // Retired workers first: once they are gone only active workers can add work.
        for (index, handle) in handles.iter_mut().enumerate().skip(active) {
            if let Some(handle) = handle.take() {
                self.wake_until_retired(index);
                let _ = handle.join();
            }
        }
        self.signal_done();
        for handle in handles.into_iter().flatten() {
            let _ = handle.join();
        }
    }

    fn signal_done(&self) {
        self.done.store(true, Ordering::SeqCst);
        self.event_count.notify(true);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Loom models of the worker protocol on the `eigen` pool (RunQueue + EventCount are
    //! modelled too; crossbeam's deques are not loom-aware, so `chase-lev` is not modelled).
    use super::*;
    use crate::sync::AtomicUsize;

    fn model_pool(threads: usize, max: usize) -> EigenPool {
        EigenPool::new(PoolOptions::new(PoolKind::Eigen, threads, "loom").max_threads(max))
            .expect("pool starts")
    }

    fn counting_task(runs: &Arc<Vec<AtomicUsize>>, index: usize) -> Task {
        let runs = runs.clone();
        Task::new(move || {
            runs[index].fetch_add(1, Ordering::SeqCst);
        })
    }

    fn assert_each_ran_once(runs: &[AtomicUsize]) {
        for (index, count) in runs.iter().enumerate() {
            assert_eq!(count.load(Ordering::SeqCst), 1, "task {index}");
        }
    }

    /// Park/wake/shutdown: tasks scheduled from outside right before the drop all run, whatever
    /// the worker was doing (spinning, parking, exiting).
    #[test]
    fn loom_pool_drop_runs_every_task() {
        loom::model(|| {
            let runs: Arc<Vec<AtomicUsize>> =
                Arc::new((0..2).map(|_| AtomicUsize::new(0)).collect());
            let pool = model_pool(1, 1);
            pool.schedule(counting_task(&runs, 0));
            pool.schedule(counting_task(&runs, 1));
            drop(pool);
            assert_each_ran_once(&runs);
        });
    }

    /// A task scheduled from inside a worker while the pool is being dropped still runs.
    #[test]
    fn loom_pool_task_scheduled_from_inside_during_drop_runs() {
        loom::model(|| inside_child_runs_during_drop(false));
    }

    /// The same through `spawn_here`, the path a task's children take: the child is written
    /// straight into the worker's queue slot, and still runs.
    #[test]
    fn loom_pool_task_spawned_here_during_drop_runs() {
        loom::model(|| inside_child_runs_during_drop(true));
    }

    /// One task that schedules a child from inside (through `spawn_here`, or through the
    /// pool's schedule), then the drop: both run exactly once.
    fn inside_child_runs_during_drop(via_spawn_here: bool) {
        let runs: Arc<Vec<AtomicUsize>> = Arc::new((0..2).map(|_| AtomicUsize::new(0)).collect());
        let pool = model_pool(1, 1);
        let (inner_runs, shared) = (runs.clone(), pool.shared.clone());
        pool.schedule(Task::new(move || {
            inner_runs[0].fetch_add(1, Ordering::SeqCst);
            if via_spawn_here {
                let child = inner_runs.clone();
                let spawned = current::spawn_here(move || {
                    child[1].fetch_add(1, Ordering::SeqCst);
                });
                assert!(spawned.is_ok(), "a task runs on a worker");
            } else {
                shared.schedule(counting_task(&inner_runs, 1), 0, usize::MAX);
            }
        }));
        drop(pool);
        assert_each_ran_once(&runs);
    }

    /// The last handle dropped inside one of the pool's own tasks: the drop returns at once,
    /// the task queued behind it still runs, and the shutdown thread joins the worker that ran
    /// the drop (a worker left blocked forever, or one joining itself, is a loom deadlock).
    #[test]
    fn loom_pool_dropped_inside_its_own_task_shuts_down() {
        loom::model(|| {
            let options = PoolOptions::new(PoolKind::Eigen, 1, "loom")
                .max_threads(1)
                .allow_spinning(false);
            let pool = Arc::new(EigenPool::new(options).expect("pool starts"));
            let ran = Arc::new(crate::pool::barrier::Barrier::new(1));
            let (last, signal) = (pool.clone(), ran.clone());
            pool.schedule(Task::new(move || drop(last)));
            pool.schedule(Task::new(move || signal.notify()));
            drop(pool);
            ran.wait();
        });
    }

    /// Newer Eigen's accounting: the producer skips its notify because the worker spins, so
    /// the spinner owes the task; its last global steal or its precise check before sleeping
    /// must find it. The main thread waits for the task without dropping the pool (a drop
    /// would run it anyway): a stranded task is a loom deadlock.
    #[test]
    fn loom_pool_skipped_notify_strands_no_task() {
        loom::model(|| {
            let options = PoolOptions::new(PoolKind::Eigen, 1, "loom")
                .max_threads(1)
                .skip_notify_when_spinning(true);
            let pool = EigenPool::new(options).expect("pool starts");
            let ran = Arc::new(crate::pool::barrier::Barrier::new(1));
            let signal = ran.clone();
            pool.schedule(Task::new(move || signal.notify()));
            ran.wait(); // a stranded task leaves this waiting: a loom deadlock
            drop(pool);
        });
    }

    /// Shrink then grow at once: the retiring worker and the grow race for slot 1; a task
    /// queued meanwhile runs exactly once, and exactly one thread ends up owning the slot
    /// (drop would hang or a queue front would be shared otherwise). Spinning is off to keep
    /// the state space small; the spinning protocol is covered by the drop models. With four
    /// threads in play this model takes minutes at two preemptions, so it runs with one (every
    /// single-preemption interleaving of the retire/grow race is still explored).
    #[test]
    fn loom_pool_resize_race_loses_nothing() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(1);
        builder.check(|| {
            let runs: Arc<Vec<AtomicUsize>> =
                Arc::new((0..1).map(|_| AtomicUsize::new(0)).collect());
            let pool = EigenPool::new(
                PoolOptions::new(PoolKind::Eigen, 2, "loom")
                    .max_threads(2)
                    .allow_spinning(false),
            )
            .expect("pool starts");
            pool.set_num_threads(1).unwrap();
            pool.schedule(counting_task(&runs, 0));
            pool.set_num_threads(2).unwrap();
            drop(pool);
            assert_each_ran_once(&runs);
        });
    }
}
