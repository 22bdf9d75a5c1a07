//! Pool instrumentation: a [`PoolObserver`] that records a pool's events into the profiler,
//! and queue-depth sampling of a [`Pool`].
//!
//! The pools call their observer at task start/end, steal, spin start/end, park/unpark and
//! resize, behind one `if let Some(observer)` branch each. [`PoolProbe`] maps each call to one
//! [`Event`] of the pool's device, with the worker index in `aux`. A pool whose tasks are
//! engine ops (which record their own start/end) leaves task events out with
//! [`PoolProbe::task_events`].
//!
//! # Tasks: every one counted, 1 in N recorded
//! Task events double the events per task, and a pool's tasks can be far cheaper than their
//! events (tens of nanoseconds each, millions per second per worker), so the probe does two
//! things per task on the worker thread:
//! - it **counts** it: the thread adds one task and its time to its own counters
//!   (`task_counts`), which the snapshot reads: task counts and task time are exact whatever
//!   is recorded. A task's time is read off the clock at its start and end; a worker of a
//!   pool with streaks (`PoolObserver::on_streak_start`: tasks taken back to back from its
//!   own queue) has its streak timed instead, so an unrecorded task in a streak costs a
//!   countdown and three relaxed stores, no clock read (`LocalTasks`);
//! - it **records** the task's start and end (stamped with clock readings) for 1 in N
//!   tasks. N starts at 1 and adapts per thread to the pace: each time the thread has
//!   recorded `RECORDED_PER_PERIOD` tasks, or `SAMPLE_PERIOD_NS` has passed, it sets N to
//!   the power of two that would record at most that many tasks per period at the pace of
//!   the tasks since the last adaptation (up to `MAX_RATE`). A pool of long tasks keeps
//!   N = 1; a burst of tiny ones reaches its N after `RECORDED_PER_PERIOD` tasks, so a
//!   worker records at most about 128,000 task events a second, which its ring (drained at
//!   least every 10 ms) holds with room to spare and the collector processes in a few
//!   milliseconds a second. The decision is made at the start (a recorded start always gets
//!   its end).
//!
//! A task the scheduling thread runs itself (its queue full, a pool with no workers, a
//! caller helping with `try_run_one`) reaches the probe as a task of no worker: it is
//! counted the same way, in counters of that thread marked as a caller's
//! (`Runner::Caller`), sampled at their own rate, and the snapshot says how many tasks ran
//! so ([`TaskSampling::run_by_callers`](super::TaskSampling::run_by_callers)). A task that
//! runs inside another task on the same thread is counted but neither timed again nor
//! recorded (`LocalThread`).
//!
//! The rate in force is published with the counters and shown wherever tasks are: the
//! dashboard's header, the summary, the trace's `otherData.task_sampling`.
//! [`PoolProbe::sample_tasks`] (`false`) or `ProfilerOptions::sample_pool_tasks` turn
//! sampling off: every task recorded, as the counters still count.
//!
//! Queue depths are not recorded per push: the collector samples [`ThreadPool::stats`] every
//! `queue_sample_interval` (10 ms by default) for pools registered with
//! [`Profiler::watch_queues`], one `QueueDepth` event per worker queue (`w0`, `w1`, ...) plus
//! the shared queue (`shared`).
//!
//! An engine's queues are sampled the same way ([`EngineQueues`] as a source): the ready ops
//! in front of each worker pool (`ready`), the pool's own queues (which hold the tasks that
//! drain them), the priority pool's heap and the GPU pools' queues, each on its pool's device.
//!
//! The engine builds its worker pools itself; [`PoolProbe::engine_pools`] is the factory it
//! takes (`EngineOptions::pool_observers`). The engine names each pool by its typed
//! [`PoolId`]; the probe records on the device [`DeviceId::of_pool`] gives it (a CPU's workers
//! and a GPU's pools on that device, with the ops [`EngineProbe`](super::EngineProbe) records
//! there, so a trace shows a device's ops, steals and parks in one process) and stamps the
//! pool's role on each event, so the snapshot knows each worker's role without its name.
//!
//! [`ThreadPool::stats`]: crate::pool::ThreadPool::stats
#![forbid(unsafe_code)]

use std::cell::RefCell;

use super::clock::{Epoch, RAW_STAMP};
use super::core::{QueueDepth, QueueDepthSource};
use super::event::{Event, EventKind, FROM_INJECTOR, NO_WORKER};
use super::names::DeviceId;
use super::task_counts::{Runner, ThreadTasks};
use super::Profiler;
use crate::device::cpu::PoolObservers;
use crate::device::identity::{PoolId, PoolRole};
use crate::engine::EngineQueues;
use crate::engine::OpName;
use crate::pool::{Pool, PoolEvent, PoolObserver, PoolStats};
use crate::sync::{thread_local, Arc};

/// Tasks a worker records per `SAMPLE_PERIOD_NS` at most, once sampling has adapted.
pub(crate) const RECORDED_PER_PERIOD: u64 = 64;

/// The period over which a worker's recorded tasks are budgeted.
pub(crate) const SAMPLE_PERIOD_NS: u64 = 1_000_000;

/// The sparsest rate: 1 in this many tasks recorded.
pub(crate) const MAX_RATE: u64 = 1 << 20;

/// Records one pool's events as `device`'s (and its role's, if it has one).
///
/// ```
/// use enginetop::pool::{Pool, PoolKind, PoolOptions};
/// use enginetop::profiler::{DeviceId, PoolProbe, Profiler, ProfilerOptions};
/// let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
/// let device = DeviceId::register("doc-probe");
/// let observer = PoolProbe::new(&profiler, device).task_events(false).into_observer();
/// let options = PoolOptions::new(PoolKind::Simple, 1, "doc-probe").observer(observer);
/// let pool = Pool::new(options).unwrap();
/// drop(pool);
/// profiler.flush();
/// assert_eq!(profiler.snapshot().device("doc-probe").unwrap().tasks, 0);
/// ```
#[derive(Clone, Debug)]
pub struct PoolProbe {
    profiler: Profiler,
    device: DeviceId,
    role: Option<PoolRole>,
    task_events: bool,
    sample_tasks: bool,
}

impl PoolProbe {
    /// A probe recording into `profiler` as `device`, task events included (sampled unless
    /// the profiler's `sample_pool_tasks` is off).
    pub fn new(profiler: &Profiler, device: DeviceId) -> Self {
        let sample_tasks = profiler
            .core
            .as_ref()
            .is_none_or(|core| core.options.sample_pool_tasks);
        PoolProbe {
            profiler: profiler.clone(),
            device,
            role: None,
            task_events: true,
            sample_tasks,
        }
    }

    /// A probe recording into `profiler` as pool `pool`: on the device the pool records on
    /// ([`DeviceId::of_pool`]), its role on every event; task events included.
    pub fn for_pool(profiler: &Profiler, pool: PoolId) -> Self {
        PoolProbe {
            role: Some(pool.role),
            ..PoolProbe::new(profiler, DeviceId::of_pool(pool))
        }
    }

    /// Whether to record task start/end (on by default). Off, tasks are neither recorded
    /// nor counted (an engine's pools: their ops time themselves).
    pub fn task_events(mut self, record: bool) -> Self {
        self.task_events = record;
        self
    }

    /// Whether task events may be sampled (on by default; see the module docs). Off, every
    /// task's start and end are recorded.
    pub fn sample_tasks(mut self, sample: bool) -> Self {
        self.sample_tasks = sample;
        self
    }

    /// The probe as the pool's observer type.
    // std's Arc: a `dyn` trait object, which loom's `Arc` cannot hold.
    pub fn into_observer(self) -> std::sync::Arc<dyn PoolObserver> {
        std::sync::Arc::new(self)
    }

    /// The engine's pool-observer factory for `profiler` (`None` when it is disabled, so the
    /// engine's pools get no observer at all). Task events are left out: the engine's ops
    /// record their own start and end.
    ///
    /// ```
    /// use enginetop::engine::{Engine, EngineKind, EngineOptions};
    /// use enginetop::profiler::{PoolProbe, Profiler, ProfilerOptions};
    /// let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
    /// let mut options = EngineOptions::new(EngineKind::PerDevice, 1);
    /// options.pool_observers = PoolProbe::engine_pools(&profiler);
    /// let engine = Engine::new(options).unwrap();
    /// engine.set_cpu_workers(2).unwrap();
    /// engine.wait_for_all().unwrap();
    /// profiler.flush();
    /// assert!(profiler.snapshot().device("cpu0").is_some());
    /// ```
    pub fn engine_pools(profiler: &Profiler) -> Option<PoolObservers> {
        if !profiler.is_enabled() {
            return None;
        }
        let profiler = profiler.clone();
        // std's Arc: a `dyn Fn` trait object, which loom's `Arc` cannot hold.
        Some(std::sync::Arc::new(move |pool: PoolId| {
            let probe = PoolProbe::for_pool(&profiler, pool).task_events(false);
            Some(probe.into_observer())
        }))
    }
}

impl PoolProbe {
    fn event(&self, worker: u32, event: PoolEvent) -> Option<Event> {
        let event = self.untagged_event(worker, event)?;
        Some(match self.role {
            Some(role) => event.with_pool_role(role),
            None => event,
        })
    }

    fn untagged_event(&self, worker: u32, event: PoolEvent) -> Option<Event> {
        let on_worker = |kind| Some(Event::worker_event(kind, self.device, worker));
        match event {
            PoolEvent::TaskStart if self.task_events => on_worker(EventKind::TaskStart),
            PoolEvent::TaskEnd { panicked } if self.task_events => {
                on_worker(EventKind::TaskEnd).map(|event| event.with_error(panicked))
            }
            PoolEvent::TaskStart | PoolEvent::TaskEnd { .. } => None,
            PoolEvent::Steal { victim } => {
                let victim = victim.map_or(FROM_INJECTOR, |victim| victim as u64);
                let kind = EventKind::Steal;
                Some(Event::new(
                    kind,
                    self.device,
                    OpName::UNNAMED,
                    worker,
                    victim,
                ))
            }
            PoolEvent::SpinStart => on_worker(EventKind::SpinStart),
            PoolEvent::SpinEnd => on_worker(EventKind::SpinEnd),
            PoolEvent::Park => on_worker(EventKind::Park),
            PoolEvent::Unpark => on_worker(EventKind::Unpark),
            PoolEvent::Resized { from, to } => {
                let kind = EventKind::PoolResized;
                let name = OpName::UNNAMED;
                Some(Event::new(kind, self.device, name, from as u32, to as u64))
            }
        }
    }
}

impl PoolObserver for PoolProbe {
    #[inline]
    fn on_event(&self, worker: Option<usize>, event: PoolEvent) {
        let runner = worker.map_or(Runner::Caller, |_| Runner::Worker);
        let worker = worker.map_or(NO_WORKER, |worker| worker as u32);
        match event {
            PoolEvent::TaskStart if self.task_events => self.task_started(worker, runner),
            PoolEvent::TaskEnd { .. } if self.task_events => self.task_ended(worker, runner, event),
            _ => {
                if let Some(event) = self.event(worker, event) {
                    self.profiler.record(event);
                }
            }
        }
    }

    #[inline]
    fn on_streak_start(&self, _worker: usize) {
        self.streak(true);
    }

    #[inline]
    fn on_streak_end(&self, _worker: usize) {
        self.streak(false);
    }
}

impl PoolProbe {
    /// A task starts on this thread (run by `runner`): counted, and recorded if its turn
    /// came.
    #[inline]
    fn task_started(&self, worker: u32, runner: Runner) {
        let Some(core) = &self.profiler.core else {
            return;
        };
        let key = Key {
            profiler: core.id(),
            device: self.device,
            runner,
        };
        let started = LOCAL_TASKS
            .try_with(|local| {
                let register = || core.task_counts.register(self.device, runner);
                local
                    .borrow_mut()
                    .start(key, register, self.sample_tasks, clock_now)
            })
            .ok()
            .flatten();
        if let Some(stamp) = started {
            if let Some(event) = self.event(worker, PoolEvent::TaskStart) {
                self.profiler.record_at(event.at(stamp));
            }
        }
    }

    /// A streak of this worker thread begins (`start`) or ends: its tasks are timed as one.
    #[inline]
    fn streak(&self, start: bool) {
        let Some(core) = self.profiler.core.as_ref().filter(|_| self.task_events) else {
            return;
        };
        let key = Key {
            profiler: core.id(),
            device: self.device,
            runner: Runner::Worker,
        };
        let _ = LOCAL_TASKS.try_with(|local| {
            let register = || core.task_counts.register(self.device, Runner::Worker);
            let mut local = local.borrow_mut();
            let tasks = local.entry(key, register, self.sample_tasks);
            let now = clock_now() & !RAW_STAMP;
            if start {
                tasks.streak_started(now);
            } else {
                tasks.streak_ended(now);
            }
        });
    }

    /// The task this thread started as `runner` ends (`event`: its `TaskEnd`).
    #[inline]
    fn task_ended(&self, worker: u32, runner: Runner, event: PoolEvent) {
        let Some(core) = &self.profiler.core else {
            return;
        };
        let key = Key {
            profiler: core.id(),
            device: self.device,
            runner,
        };
        let panicked = event == PoolEvent::TaskEnd { panicked: true };
        let ended = LOCAL_TASKS
            .try_with(|local| local.borrow_mut().end(key, panicked, clock_now))
            .ok()
            .flatten();
        if let Some(stamp) = ended {
            if let Some(event) = self.event(worker, event) {
                self.profiler.record_at(event.at(stamp));
            }
        }
    }
}

/// The clock now, as a raw stamp.
#[inline(always)]
fn clock_now() -> u64 {
    Epoch::get().raw_stamp()
}

// Outside loom the thread-local is `const`-initialised (no "built yet?" check per task);
// loom's `thread_local!` has no `const` form.
#[cfg(not(loom))]
thread_local! {
    /// The calling thread's task counting and sampling.
    static LOCAL_TASKS: RefCell<LocalThread> = const { RefCell::new(LocalThread::new()) };
}

#[cfg(loom)]
thread_local! {
    #[allow(clippy::missing_const_for_thread_local)] // loom's thread_local! has no const form
    static LOCAL_TASKS: RefCell<LocalThread> = RefCell::new(LocalThread::new());
}

/// Whose counters a task goes to: the profiler (`Core::id`), the device, and who ran it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Key {
    profiler: u64,
    device: DeviceId,
    runner: Runner,
}

/// One thread's task counting: its counters as a worker, its counters for tasks it ran
/// itself (per device), and how many counted tasks are running on it now.
///
/// A task can run inside another on the same thread: a task that schedules onto a full
/// queue runs the new task itself, and a task may help its pool (`try_run_one`). Such a
/// nested task is counted (in the counters of whoever ran it), but its time is already in
/// the outer task's and it is not recorded: the thread's task time counts each instant once
/// and its recorded starts and ends pair up.
struct LocalThread {
    depth: u32,
    worker: Option<LocalTasks>,
    callers: Vec<LocalTasks>,
}

impl LocalThread {
    const fn new() -> Self {
        LocalThread {
            depth: 0,
            worker: None,
            callers: Vec::new(),
        }
    }

    /// The counters for `key`, registered (`register`) on first use.
    #[inline]
    fn entry(
        &mut self,
        key: Key,
        register: impl FnOnce() -> Arc<ThreadTasks>,
        sampling: bool,
    ) -> &mut LocalTasks {
        let slot = match key.runner {
            Runner::Worker => {
                if self.worker.as_ref().is_none_or(|local| local.key != key) {
                    self.worker = Some(LocalTasks::new(key, register(), sampling));
                }
                self.worker.as_mut()
            }
            Runner::Caller => {
                let at = match self.callers.iter().position(|local| local.key == key) {
                    Some(at) => at,
                    None => {
                        self.callers
                            .push(LocalTasks::new(key, register(), sampling));
                        self.callers.len() - 1
                    }
                };
                self.callers.get_mut(at)
            }
        };
        slot.expect("the entry was just made")
    }

    /// A task for `key` starts; returns its start stamp if it is recorded (`now` reads the
    /// clock, only for an outermost task).
    #[inline]
    fn start(
        &mut self,
        key: Key,
        register: impl FnOnce() -> Arc<ThreadTasks>,
        sampling: bool,
        now: impl FnOnce() -> u64,
    ) -> Option<u64> {
        let nested = self.depth > 0;
        self.depth += 1;
        let tasks = self.entry(key, register, sampling);
        if nested {
            return None;
        }
        tasks.start(now)
    }

    /// The task this thread started for `key` ends; returns its end stamp if it is recorded.
    #[inline]
    fn end(&mut self, key: Key, panicked: bool, now: impl FnOnce() -> u64) -> Option<u64> {
        if self.depth == 0 {
            return None; // started before this thread counted (a probe installed mid-task)
        }
        self.depth -= 1;
        let nested = self.depth > 0;
        let tasks = match key.runner {
            Runner::Worker => self.worker.as_mut().filter(|local| local.key == key),
            Runner::Caller => self.callers.iter_mut().find(|local| local.key == key),
        }?;
        if nested {
            tasks.end_nested(panicked);
            return None;
        }
        tasks.end(panicked, now)
    }
}

/// One thread's counting for one key: the running task or streak, its totals (published
/// after each task) and where its sampling stands.
///
/// Outside a streak each task is timed from its start to its end (two clock reads). In a
/// streak (a worker's tasks taken back to back from its own queue) the streak is timed: the
/// clock is read where it starts and ends, for the events of a recorded task, and once every
/// `STREAK_CHECK_TASKS` unrecorded tasks (its time so far is added to the busy time then, and
/// the sampling period checked), so an unrecorded task costs no clock read; the decision to
/// record is a countdown. Busy time is the same either way: the worker's time in tasks, which
/// in a streak includes the pool taking the next task off its own queue.
struct LocalTasks {
    key: Key,
    counts: Arc<ThreadTasks>,
    /// Whether the rate adapts (off: every task recorded).
    sampling: bool,
    /// `SAMPLE_PERIOD_NS` in counter ticks.
    period_ticks: u64,
    /// In a streak (see above).
    streak: bool,
    /// Where busy time was last taken (counter ticks): the running task's start outside a
    /// streak, the streak's start or last check in one.
    start: u64,
    /// Whether the running task is recorded.
    recording: bool,
    /// Unrecorded tasks of the streak until its next clock read.
    until_check: u32,
    tasks: u64,
    recorded: u64,
    busy_ticks: u64,
    panics: u64,
    /// 1 in `rate` tasks recorded; `skip` tasks go unrecorded before the next one.
    rate: u64,
    skip: u64,
    /// Where the current period began: its start (ticks), tasks and recorded tasks then.
    period_start: u64,
    period_tasks: u64,
    period_recorded: u64,
}

/// In a streak, unrecorded tasks between clock reads.
const STREAK_CHECK_TASKS: u32 = 64;

impl LocalTasks {
    fn new(key: Key, counts: Arc<ThreadTasks>, sampling: bool) -> Self {
        LocalTasks {
            key,
            counts,
            sampling,
            period_ticks: Epoch::get().ns_as_ticks(SAMPLE_PERIOD_NS),
            streak: false,
            start: 0,
            recording: false,
            until_check: STREAK_CHECK_TASKS,
            tasks: 0,
            recorded: 0,
            busy_ticks: 0,
            panics: 0,
            rate: 1,
            skip: 0,
            period_start: Epoch::get().raw_stamp() & !RAW_STAMP,
            period_tasks: 0,
            period_recorded: 0,
        }
    }

    /// A streak begins at `now` (counter ticks).
    fn streak_started(&mut self, now: u64) {
        self.streak = true;
        self.start = now;
        self.until_check = STREAK_CHECK_TASKS;
    }

    /// The streak ends at `now` (counter ticks): its time since the last check is busy time.
    fn streak_ended(&mut self, now: u64) {
        if self.streak {
            self.checked(now);
            self.streak = false;
            self.publish();
        }
    }

    /// A task starts (`now` reads the clock, as a raw stamp); returns its start stamp if it
    /// is recorded.
    #[inline]
    fn start(&mut self, now: impl FnOnce() -> u64) -> Option<u64> {
        self.recording = self.skip == 0;
        self.skip = if self.recording {
            self.rate - 1
        } else {
            self.skip - 1
        };
        if self.streak {
            return self.recording.then(now);
        }
        let stamp = now();
        self.start = stamp & !RAW_STAMP;
        self.recording.then_some(stamp)
    }

    /// A task that ran inside another one on this thread ended: counted, neither timed nor
    /// recorded (see [`LocalThread`]).
    fn end_nested(&mut self, panicked: bool) {
        self.tasks += 1;
        self.count_panic(panicked);
        self.publish();
    }

    /// The running task ends (`panicked`: it panicked; `now` reads the clock, as a raw
    /// stamp): counted and published; returns its end stamp if it is recorded.
    #[inline]
    fn end(&mut self, panicked: bool, now: impl FnOnce() -> u64) -> Option<u64> {
        self.tasks += 1;
        self.recorded += u64::from(self.recording);
        self.count_panic(panicked);
        if self.streak && !self.recording {
            self.until_check -= 1;
            if self.until_check > 0 {
                self.publish();
                return None;
            }
        }
        let stamp = now();
        self.checked(stamp & !RAW_STAMP);
        self.publish();
        self.recording.then_some(stamp)
    }

    #[inline]
    fn count_panic(&mut self, panicked: bool) {
        if panicked {
            self.panics += 1;
            self.counts.publish_panics(self.panics);
        }
    }

    #[inline(always)]
    fn publish(&self) {
        self.counts
            .publish(self.tasks, self.recorded, self.busy_ticks);
    }

    /// The clock read `now` (counter ticks): the time since `start` is busy time, and the
    /// rate adapts if the period is over or its recorded tasks are in.
    fn checked(&mut self, now: u64) {
        self.busy_ticks += now.saturating_sub(self.start);
        self.start = now;
        self.until_check = STREAK_CHECK_TASKS;
        let period_over = now.saturating_sub(self.period_start) >= self.period_ticks;
        if self.sampling
            && (period_over || self.recorded - self.period_recorded >= RECORDED_PER_PERIOD)
        {
            self.adapt(now);
        }
    }

    /// Sets the rate to the power of two that records at most `RECORDED_PER_PERIOD` tasks
    /// per period at the pace of the tasks since the period began, and begins a new period.
    fn adapt(&mut self, now: u64) {
        let elapsed = now.saturating_sub(self.period_start).max(1);
        let tasks = self.tasks - self.period_tasks;
        let wanted = (u128::from(tasks) * u128::from(self.period_ticks))
            .div_ceil(u128::from(RECORDED_PER_PERIOD) * u128::from(elapsed));
        let rate = u64::try_from(wanted)
            .unwrap_or(MAX_RATE)
            .clamp(1, MAX_RATE)
            .next_power_of_two();
        if rate != self.rate {
            self.rate = rate;
            self.skip = self.skip.min(rate - 1);
            self.counts.set_rate(rate);
        }
        self.period_start = now;
        self.period_tasks = self.tasks;
        self.period_recorded = self.recorded;
    }
}

impl QueueDepthSource for Pool {
    fn queue_depths(&self, device: DeviceId, out: &mut Vec<QueueDepth>) {
        pool_queue_depths(device, &self.stats(), out);
    }
}

/// The engine's queues, each as the device its pool records on ([`DeviceId::of_pool`]):
/// per worker pool its workers' queues and `shared` (the tasks that drain the ready ops) and
/// `ready` (the ready ops waiting for them), the CPU priority pool's `heap`, and each GPU
/// pool's queue under its role (`compute`, `copy`, `prio`).
impl QueueDepthSource for EngineQueues {
    fn queue_depths(&self, _device: DeviceId, out: &mut Vec<QueueDepth>) {
        let stats = self.stats();
        let ready = stats.ready_ops.iter().copied().chain(std::iter::repeat(0));
        for ((pool, &id), ready) in stats.pools.iter().zip(&stats.pool_ids).zip(ready) {
            let device = DeviceId::of_pool(id);
            pool_queue_depths(device, pool, out);
            out.push((device, OpName::new("ready"), ready as u64));
        }
        if let Some(priority) = &stats.priority {
            let heap = priority.queued as u64;
            let device = DeviceId::of_pool(PoolId::CPU_PRIORITY);
            out.push((device, OpName::new("heap"), heap));
        }
        for gpu in &stats.gpu {
            let label = OpName::new(gpu.role.as_str());
            out.push((DeviceId::of_pool(gpu.pool), label, gpu.queued as u64));
        }
    }
}

/// A pool's queues as `device`'s: each worker's own (`w<i>`) and the shared one (`shared`).
pub(crate) fn pool_queue_depths(device: DeviceId, stats: &PoolStats, out: &mut Vec<QueueDepth>) {
    for worker in &stats.workers {
        let label = OpName::new(&format!("w{}", worker.index));
        out.push((device, label, worker.queue_depth as u64));
    }
    let shared = stats.unowned_queue_depth as u64;
    out.push((device, OpName::new("shared"), shared));
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::device::identity::Device;
    use crate::pool::{PoolKind, PoolOptions};
    use crate::profiler::{ProfilerOptions, Snapshot};
    use std::time::Duration;

    #[test]
    fn every_pool_event_maps_to_one_event_of_the_device() {
        let profiler = Profiler::disabled();
        let device = DeviceId::register("probe-test");
        let probe = PoolProbe::new(&profiler, device);
        let steal = probe
            .event(1, PoolEvent::Steal { victim: Some(0) })
            .unwrap();
        assert_eq!(
            (steal.kind, steal.worker(), steal.victim()),
            (EventKind::Steal, Some(1), Some(0))
        );
        let injector = probe.event(1, PoolEvent::Steal { victim: None }).unwrap();
        assert_eq!(injector.victim(), None);
        let end = probe
            .event(0, PoolEvent::TaskEnd { panicked: true })
            .unwrap();
        assert!(end.is_error() && end.device == device);
        let resized = probe
            .event(NO_WORKER, PoolEvent::Resized { from: 2, to: 4 })
            .unwrap();
        assert_eq!((resized.aux, resized.arg), (2, 4));
        let quiet = probe.clone().task_events(false);
        assert_eq!(quiet.event(0, PoolEvent::TaskStart), None);
        assert!(quiet.event(0, PoolEvent::Park).is_some());
    }

    /// Tasks run on a pool: by each worker (by index), and by the thread that scheduled
    /// them, as the pool counts them.
    #[derive(Debug)]
    struct Ran {
        workers: Vec<u64>,
        by_callers: u64,
    }

    impl Ran {
        fn total(&self) -> u64 {
            self.workers.iter().sum::<u64>() + self.by_callers
        }
    }

    /// Waits until `pool` has run `tasks` tasks in all, then drops it (every worker gone).
    fn ran_all(pool: Pool, tasks: u64) -> Ran {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let stats = loop {
            let stats = pool.stats();
            if stats.tasks_run() + stats.inline_runs == tasks {
                break stats;
            }
            assert!(std::time::Instant::now() < deadline, "tasks never ran");
            std::thread::yield_now();
        };
        drop(pool);
        Ran {
            workers: stats.workers.iter().map(|w| w.tasks_run).collect(),
            by_callers: stats.inline_runs,
        }
    }

    /// Runs `tasks` no-op tasks on a 2-worker `eigen` pool observed by `probe`, from this
    /// thread (a full queue runs a task on this thread instead).
    fn run_tiny_tasks(probe: PoolProbe, tasks: usize) -> Ran {
        let options =
            PoolOptions::new(PoolKind::Eigen, 2, "probe-tiny").observer(probe.into_observer());
        let pool = Pool::new(options).unwrap();
        for _ in 0..tasks {
            pool.spawn(|| ());
        }
        ran_all(pool, tasks as u64)
    }

    /// Tasks per worker index as the profiler's snapshot counts them (the pool's workers
    /// only).
    fn counted_per_worker(snapshot: &Snapshot, device: DeviceId, workers: usize) -> Vec<u64> {
        let mut counted = vec![0; workers];
        for worker in snapshot.workers.iter().filter(|w| w.device == Some(device)) {
            if let Some(index) = worker.worker {
                counted[index as usize] += worker.tasks;
            }
        }
        counted
    }

    fn task_events(profiler: &Profiler, device: DeviceId, kind: EventKind) -> u64 {
        let (events, _, _) = profiler.core.as_ref().unwrap().window_events();
        events
            .iter()
            .filter(|event| event.device == device && event.kind == kind)
            .count() as u64
    }

    #[test]
    fn every_tiny_task_is_counted_exactly_and_the_sample_is_said() {
        let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
        let device = DeviceId::register("probe-tiny-sampled");
        let ran = run_tiny_tasks(PoolProbe::new(&profiler, device), 200_000);
        let tasks = ran.total();
        assert_eq!(tasks, 200_000);
        profiler.flush();
        let snapshot = profiler.snapshot();
        assert_eq!(counted_per_worker(&snapshot, device, 2), ran.workers);
        let on_device = snapshot.device("probe-tiny-sampled").unwrap();
        assert_eq!(on_device.tasks, tasks);
        let sampling = snapshot.task_sampling;
        assert_eq!(sampling.tasks, tasks);
        assert_eq!(sampling.run_by_callers, ran.by_callers);
        assert!(
            sampling.is_sampled() && sampling.max_rate > 1,
            "{sampling:?}"
        );
        // Nothing lost: the recorded tasks' ends are all in the trace window.
        assert_eq!(snapshot.dropped_events, 0);
        let ends = task_events(&profiler, device, EventKind::TaskEnd);
        assert_eq!(ends, sampling.recorded);
        let table = profiler.summary().table();
        assert!(table.contains(&sampling.describe()), "{table}");
        let json = profiler.summary().to_json();
        assert_eq!(json["task_sampling"]["tasks"], tasks);
        let mut trace = Vec::new();
        profiler.export_chrome(&mut trace).unwrap();
        let trace: serde_json::Value = serde_json::from_slice(&trace).unwrap();
        assert_eq!(trace["otherData"]["task_sampling"]["sampled"], true);
    }

    #[test]
    fn with_sampling_off_every_tasks_events_are_recorded() {
        let off = ProfilerOptions {
            sample_pool_tasks: false,
            ..ProfilerOptions::default()
        };
        let by_option = Profiler::new(off).unwrap();
        assert!(!PoolProbe::new(&by_option, DeviceId::HOST).sample_tasks);
        let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
        let device = DeviceId::register("probe-tiny-every");
        let probe = PoolProbe::new(&profiler, device).sample_tasks(false);
        let ran = run_tiny_tasks(probe, 20_000);
        let tasks = ran.total();
        profiler.flush();
        let snapshot = profiler.snapshot();
        assert_eq!(snapshot.dropped_events, 0);
        assert_eq!(counted_per_worker(&snapshot, device, 2), ran.workers);
        for kind in [EventKind::TaskStart, EventKind::TaskEnd] {
            assert_eq!(task_events(&profiler, device, kind), tasks, "{kind:?}");
        }
        let sampling = snapshot.task_sampling;
        assert_eq!((sampling.tasks, sampling.recorded), (tasks, tasks));
        assert!(!profiler.summary().table().contains("sampled"));
    }

    /// A 1-worker pool whose worker is held by a gate task while this thread schedules
    /// `QUEUED` tasks (its queue holds `RUN_QUEUE_CAPACITY`: the rest run here), then, once
    /// they ran, a task that schedules `QUEUED` more from the worker (the ones its full queue
    /// refuses run inside it, on the worker). Every task is counted exactly: by the worker,
    /// or as its caller's.
    #[test]
    fn tasks_the_caller_runs_itself_are_counted_and_said() {
        use crate::pool::non_blocking::RUN_QUEUE_CAPACITY;
        const QUEUED: usize = RUN_QUEUE_CAPACITY + 300;
        let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
        let device = DeviceId::register("probe-caller-runs");
        let probe = PoolProbe::new(&profiler, device).into_observer();
        let options = PoolOptions::new(PoolKind::Eigen, 1, "probe-caller").observer(probe);
        let pool = Pool::new(options).unwrap();
        let (open, gate) = std::sync::mpsc::channel::<()>();
        let (entered, held) = std::sync::mpsc::channel::<()>();
        pool.spawn(move || {
            entered.send(()).unwrap();
            let _ = gate.recv();
        });
        held.recv().unwrap();
        for _ in 0..QUEUED {
            pool.spawn(|| ());
        }
        let by_caller = pool.stats().inline_runs;
        let overflow = (QUEUED - RUN_QUEUE_CAPACITY) as u64;
        assert_eq!(by_caller, overflow);
        open.send(()).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while pool.stats().tasks_run() + by_caller < 1 + QUEUED as u64 {
            assert!(
                std::time::Instant::now() < deadline,
                "the queue never drained"
            );
            std::thread::yield_now();
        }
        pool.spawn(|| {
            for _ in 0..QUEUED {
                crate::pool::spawn_here(|| ()).unwrap();
            }
        });
        let spawned = 2 + 2 * QUEUED as u64;
        let ran = ran_all(pool, spawned);
        assert_eq!(
            ran.by_callers,
            2 * overflow,
            "the worker ran its overflow: {ran:?}"
        );
        profiler.flush();
        let snapshot = profiler.snapshot();
        let sampling = snapshot.task_sampling;
        assert_eq!(
            (sampling.tasks, sampling.run_by_callers),
            (spawned, ran.by_callers)
        );
        assert_eq!(snapshot.device("probe-caller-runs").unwrap().tasks, spawned);
        let this_thread = crate::profiler::names::ThreadId::current().id();
        let mine: u64 = snapshot
            .workers
            .iter()
            .filter(|w| w.thread == this_thread)
            .map(|w| w.tasks)
            .sum();
        assert_eq!(mine, by_caller, "this thread's tasks are its own");
        let summary = profiler.summary();
        let line = sampling.describe_callers().unwrap();
        assert!(summary.table().contains(&line), "{}", summary.table());
        assert_eq!(
            summary.to_json()["task_sampling"]["run_by_callers"],
            ran.by_callers
        );
    }

    /// `tasks` tasks on `local`, `step` ticks apart (half running, half between), from
    /// `now`; returns the time after them and how many were recorded.
    fn pace(local: &mut LocalTasks, mut now: u64, step: u64, tasks: u64) -> (u64, u64) {
        let mut recorded = 0;
        for _ in 0..tasks {
            now += step / 2;
            let start = local.start(|| now | RAW_STAMP).is_some();
            now += step - step / 2;
            assert_eq!(
                local.end(false, || now | RAW_STAMP).is_some(),
                start,
                "a start gets its end"
            );
            recorded += u64::from(start);
        }
        (now, recorded)
    }

    #[test]
    fn the_rate_follows_the_pace_and_every_task_is_counted() {
        let counts = super::super::task_counts::TaskCounts::default();
        let key = Key {
            profiler: 1,
            device: DeviceId::HOST,
            runner: Runner::Worker,
        };
        let register = |counts: &super::super::task_counts::TaskCounts| {
            counts.register(DeviceId::HOST, Runner::Worker)
        };
        let mut local = LocalTasks::new(key, register(&counts), true);
        let period = local.period_ticks;
        // 1,000 tasks a period: 64 recorded at 1 in 1, then 1 in 16 (1000 / 64, rounded up
        // to a power of two).
        let start = local.period_start;
        let (now, fast) = pace(&mut local, start, period / 1000, 10_000);
        assert_eq!(local.rate, 16);
        assert!((64..64 + 10_000 / 16 + 2).contains(&fast), "{fast}");
        // 10 tasks a period: back to every task.
        let (_, slow) = pace(&mut local, now, period / 10, 100);
        assert_eq!(local.rate, 1);
        assert!(slow >= 80, "{slow}");
        let mut snapshot = Snapshot::default();
        counts.apply(&mut snapshot);
        let sampling = snapshot.task_sampling;
        assert_eq!((sampling.tasks, sampling.recorded), (10_100, fast + slow));
        assert_eq!((sampling.rate, sampling.max_rate), (1, 16));
        // Sampling off: every task recorded, however fast.
        let mut every = LocalTasks::new(key, register(&counts), false);
        let start = every.period_start;
        let (_, recorded) = pace(&mut every, start, 1, 1_000);
        assert_eq!((recorded, every.rate), (1_000, 1));
    }

    #[test]
    fn a_streak_is_timed_whole_and_its_unrecorded_tasks_read_no_clock() {
        let counts = super::super::task_counts::TaskCounts::default();
        let key = Key {
            profiler: 1,
            device: DeviceId::HOST,
            runner: Runner::Worker,
        };
        let mut local = LocalTasks::new(key, counts.register(DeviceId::HOST, Runner::Worker), true);
        let begin = local.period_start;
        local.streak_started(begin);
        let (reads, now) = (std::cell::Cell::new(0u64), std::cell::Cell::new(begin));
        let clock = || {
            reads.set(reads.get() + 1);
            now.get() | RAW_STAMP
        };
        let (tasks, step) = (100_000u64, local.period_ticks / 10_000);
        let mut recorded = 0;
        for _ in 0..tasks {
            now.set(now.get() + step);
            let start = local.start(clock);
            now.set(now.get() + step);
            let end = local.end(false, clock);
            assert_eq!(start.is_some(), end.is_some(), "a start gets its end");
            assert!(start <= end);
            recorded += u64::from(end.is_some());
        }
        now.set(now.get() + step);
        local.streak_ended(now.get());
        assert_eq!((local.tasks, local.recorded), (tasks, recorded));
        assert_eq!(local.busy_ticks, now.get() - begin, "the streak, whole");
        assert!(local.rate > 1 && recorded < tasks / 16, "{recorded}");
        let most = 2 * recorded + tasks / u64::from(STREAK_CHECK_TASKS) + 1;
        assert!(reads.get() <= most, "{} clock reads", reads.get());
        // Outside a streak every task is timed from its start to its end.
        local.start(|| (now.get() + 10) | RAW_STAMP);
        local.end(false, || (now.get() + 25) | RAW_STAMP);
        assert_eq!(local.busy_ticks, now.get() - begin + 15);
    }

    #[test]
    fn a_pools_probe_records_on_its_device_with_its_role() {
        let profiler = Profiler::disabled();
        let copy = PoolId::new(Device::Gpu(1), PoolRole::GpuCopy);
        let park = PoolProbe::for_pool(&profiler, copy)
            .event(1, PoolEvent::Park)
            .unwrap();
        assert_eq!(park.device, DeviceId::of(Device::Gpu(1)));
        assert_eq!(
            (park.pool_role(), park.worker()),
            (Some(PoolRole::GpuCopy), Some(1))
        );
        let prio = PoolProbe::for_pool(&profiler, PoolId::CPU_PRIORITY);
        let end = prio
            .event(0, PoolEvent::TaskEnd { panicked: true })
            .unwrap();
        assert_eq!(end.pool_role(), Some(PoolRole::CpuPriority));
        assert!(end.is_error());
        assert_eq!(end.device.name(), "cpu-prio");
        let unnamed = PoolProbe::new(&profiler, DeviceId::HOST);
        assert_eq!(unnamed.event(0, PoolEvent::Park).unwrap().pool_role(), None);
        assert!(PoolProbe::engine_pools(&Profiler::disabled()).is_none());
    }

    #[test]
    fn a_disabled_profiler_leaves_pool_options_alone() {
        let options = PoolOptions::new(PoolKind::Eigen, 1, "probe-off");
        let untouched = Profiler::disabled().instrument_pool(options, DeviceId::HOST);
        assert!(untouched.observer.is_none());
    }

    #[test]
    fn watched_pools_are_sampled_until_dropped() {
        let profiler = Profiler::new(ProfilerOptions {
            queue_sample_interval: Duration::from_millis(1),
            ..ProfilerOptions::default()
        })
        .unwrap();
        let device = DeviceId::register("probe-watched");
        let options = PoolOptions::new(PoolKind::Eigen, 2, "probe-watched");
        let pool = std::sync::Arc::new(Pool::new(options).unwrap());
        let weak: std::sync::Weak<dyn QueueDepthSource> = std::sync::Arc::downgrade(&pool) as _;
        profiler.watch_queues(device, weak);
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let mut labels: Vec<String> = Vec::new();
        while labels.len() < 3 {
            assert!(std::time::Instant::now() < deadline, "never sampled");
            profiler.flush();
            if let Some(device) = profiler.snapshot().device("probe-watched") {
                labels = device.queues.iter().map(|q| q.label.clone()).collect();
            }
        }
        labels.sort();
        assert_eq!(labels, ["shared", "w0", "w1"]);
        drop(pool);
        profiler.flush();
    }

    #[test]
    fn an_engines_ready_ops_are_sampled_on_their_cpu() {
        use crate::engine::{Engine, EngineKind, EngineOptions, OpSpec};
        let profiler = Profiler::new(ProfilerOptions {
            queue_sample_interval: Duration::from_millis(1),
            ..ProfilerOptions::default()
        })
        .unwrap();
        let engine = Engine::new(EngineOptions::new(EngineKind::PerDevice, 1)).unwrap();
        let source: std::sync::Arc<dyn QueueDepthSource> =
            std::sync::Arc::new(engine.queue_probe());
        profiler.watch_queues(DeviceId::HOST, std::sync::Arc::downgrade(&source));
        // One worker held by a gate op: the three ops after it wait as ready ops.
        let (open, gate) = std::sync::mpsc::channel::<()>();
        let gate = std::sync::Mutex::new(gate);
        engine
            .push_sync(OpSpec::new("gate"), move |_| {
                let _ = gate.lock().unwrap().recv();
                Ok(())
            })
            .unwrap();
        for _ in 0..3 {
            engine
                .push_sync(OpSpec::new("waiting"), |_| Ok(()))
                .unwrap();
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let ready = |profiler: &Profiler| {
            let snapshot = profiler.snapshot();
            let cpu = snapshot.device("cpu0")?;
            cpu.queues
                .iter()
                .find(|q| q.label == "ready")
                .map(|q| q.depth)
        };
        loop {
            assert!(
                std::time::Instant::now() < deadline,
                "ready ops never sampled"
            );
            profiler.flush();
            if ready(&profiler).is_some_and(|depth| depth > 0) {
                break;
            }
        }
        open.send(()).unwrap();
        engine.wait_for_all().unwrap();
    }
}
