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
//! - it **counts** it: the clock is read at the task's start and end, and the thread adds one
//!   task and the time between to its own counters (`task_counts`), which the snapshot
//!   reads: task counts and task time are exact whatever is recorded;
//! - it **records** the task's start and end (stamped with those same readings) for 1 in N
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
use super::task_counts::ThreadTasks;
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
    /// assert!(profiler.snapshot().device("cpu(0)").is_some());
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
        let worker = worker.map_or(NO_WORKER, |worker| worker as u32);
        match event {
            PoolEvent::TaskStart if self.task_events => self.task_started(worker),
            PoolEvent::TaskEnd { .. } if self.task_events => self.task_ended(worker, event),
            _ => {
                if let Some(event) = self.event(worker, event) {
                    self.profiler.record(event);
                }
            }
        }
    }
}

impl PoolProbe {
    /// A task starts on this worker thread: counted, and recorded if its turn came.
    #[inline]
    fn task_started(&self, worker: u32) {
        let Some(core) = &self.profiler.core else {
            return;
        };
        let stamp = Epoch::get().raw_stamp();
        let record = LOCAL_TASKS
            .try_with(|local| {
                let mut local = local.borrow_mut();
                if local.as_ref().is_none_or(|l| l.profiler != core.id()) {
                    let counts = core.task_counts.register(self.device);
                    *local = Some(LocalTasks::new(core.id(), counts, self.sample_tasks));
                }
                local.as_mut().is_some_and(|local| local.start(stamp))
            })
            .unwrap_or(false);
        if record {
            if let Some(event) = self.event(worker, PoolEvent::TaskStart) {
                self.profiler.record_at(event.at(stamp));
            }
        }
    }

    /// The task this worker thread started ends (`event`: its `TaskEnd`).
    #[inline]
    fn task_ended(&self, worker: u32, event: PoolEvent) {
        let Some(core) = &self.profiler.core else {
            return;
        };
        let stamp = Epoch::get().raw_stamp();
        let record = LOCAL_TASKS
            .try_with(|local| match local.borrow_mut().as_mut() {
                Some(local) if local.profiler == core.id() => {
                    local.end(stamp, event == PoolEvent::TaskEnd { panicked: true })
                }
                _ => false,
            })
            .unwrap_or(false);
        if record {
            if let Some(event) = self.event(worker, event) {
                self.profiler.record_at(event.at(stamp));
            }
        }
    }
}

// Outside loom the thread-local is `const`-initialised (no "built yet?" check per task);
// loom's `thread_local!` has no `const` form.
#[cfg(not(loom))]
thread_local! {
    /// The calling worker thread's task counting and sampling, for the profiler it counts for.
    static LOCAL_TASKS: RefCell<Option<LocalTasks>> = const { RefCell::new(None) };
}

#[cfg(loom)]
thread_local! {
    #[allow(clippy::missing_const_for_thread_local)] // loom's thread_local! has no const form
    static LOCAL_TASKS: RefCell<Option<LocalTasks>> = RefCell::new(None);
}

/// One worker thread's task state: the running task, its totals (published after each
/// task) and where its sampling stands.
struct LocalTasks {
    /// The profiler (`Core::id`) these are counted for.
    profiler: u64,
    counts: Arc<ThreadTasks>,
    /// Whether the rate adapts (off: every task recorded).
    sampling: bool,
    /// `SAMPLE_PERIOD_NS` in counter ticks.
    period_ticks: u64,
    /// The running task's start (counter ticks) and whether it is recorded.
    start: u64,
    recording: bool,
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

impl LocalTasks {
    fn new(profiler: u64, counts: Arc<ThreadTasks>, sampling: bool) -> Self {
        LocalTasks {
            profiler,
            counts,
            sampling,
            period_ticks: Epoch::get().ns_as_ticks(SAMPLE_PERIOD_NS),
            start: 0,
            recording: false,
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

    /// A task starts at `stamp` (a raw stamp); returns whether it is recorded.
    #[inline]
    fn start(&mut self, stamp: u64) -> bool {
        self.start = stamp & !RAW_STAMP;
        self.recording = self.skip == 0;
        self.skip = if self.recording {
            self.rate - 1
        } else {
            self.skip - 1
        };
        self.recording
    }

    /// The running task ends at `stamp` (`panicked`: it panicked): counted and published;
    /// returns whether it is recorded.
    #[inline]
    fn end(&mut self, stamp: u64, panicked: bool) -> bool {
        let now = stamp & !RAW_STAMP;
        self.busy_ticks += now.saturating_sub(self.start);
        self.tasks += 1;
        self.recorded += u64::from(self.recording);
        self.counts
            .publish(self.tasks, self.recorded, self.busy_ticks);
        if panicked {
            self.panics += 1;
            self.counts.publish_panics(self.panics);
        }
        let period_over = now.saturating_sub(self.period_start) >= self.period_ticks;
        if self.sampling
            && (period_over || self.recorded - self.period_recorded >= RECORDED_PER_PERIOD)
        {
            self.adapt(now);
        }
        self.recording
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

    /// Runs `tasks` no-op tasks on a 2-worker `eigen` pool observed by `probe`, from this
    /// thread, and drops the pool (every worker gone). Returns the tasks each worker ran, by
    /// worker index, as the pool counts them (a full queue runs a task on this thread
    /// instead: no worker's, and not reported to observers).
    fn run_tiny_tasks(probe: PoolProbe, tasks: usize) -> Vec<u64> {
        let options =
            PoolOptions::new(PoolKind::Eigen, 2, "probe-tiny").observer(probe.into_observer());
        let pool = Pool::new(options).unwrap();
        for _ in 0..tasks {
            pool.spawn(|| ());
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let stats = loop {
            let stats = pool.stats();
            if stats.tasks_run() + stats.inline_runs == tasks as u64 {
                break stats;
            }
            assert!(std::time::Instant::now() < deadline, "tasks never ran");
            std::thread::yield_now();
        };
        drop(pool);
        stats
            .workers
            .iter()
            .map(|worker| worker.tasks_run)
            .collect()
    }

    /// Tasks per worker index as the profiler's snapshot counts them.
    fn counted_per_worker(snapshot: &Snapshot, device: DeviceId) -> Vec<u64> {
        let mut counted = vec![0; 2];
        for worker in snapshot.workers.iter().filter(|w| w.device == Some(device)) {
            counted[worker.worker.unwrap() as usize] += worker.tasks;
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
        let tasks: u64 = ran.iter().sum();
        profiler.flush();
        let snapshot = profiler.snapshot();
        assert_eq!(counted_per_worker(&snapshot, device), ran);
        let on_device = snapshot.device("probe-tiny-sampled").unwrap();
        assert_eq!(on_device.tasks, tasks);
        let sampling = snapshot.task_sampling;
        assert_eq!(sampling.tasks, tasks);
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
        let tasks: u64 = ran.iter().sum();
        profiler.flush();
        let snapshot = profiler.snapshot();
        assert_eq!(snapshot.dropped_events, 0);
        assert_eq!(counted_per_worker(&snapshot, device), ran);
        for kind in [EventKind::TaskStart, EventKind::TaskEnd] {
            assert_eq!(task_events(&profiler, device, kind), tasks, "{kind:?}");
        }
        let sampling = snapshot.task_sampling;
        assert_eq!((sampling.tasks, sampling.recorded), (tasks, tasks));
        assert!(!profiler.summary().table().contains("sampled"));
    }

    /// `tasks` tasks on `local`, `step` ticks apart (half running, half between), from
    /// `now`; returns the time after them and how many were recorded.
    fn pace(local: &mut LocalTasks, mut now: u64, step: u64, tasks: u64) -> (u64, u64) {
        let mut recorded = 0;
        for _ in 0..tasks {
            now += step / 2;
            let start = local.start(now | RAW_STAMP);
            now += step - step / 2;
            assert_eq!(
                local.end(now | RAW_STAMP, false),
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
        let mut local = LocalTasks::new(1, counts.register(DeviceId::HOST), true);
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
        let mut every = LocalTasks::new(1, counts.register(DeviceId::HOST), false);
        let start = every.period_start;
        let (_, recorded) = pace(&mut every, start, 1, 1_000);
        assert_eq!((recorded, every.rate), (1_000, 1));
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
            let cpu = snapshot.device("cpu(0)")?;
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
