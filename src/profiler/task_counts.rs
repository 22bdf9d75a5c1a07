//! Exact pool task counts and task time, kept beside sampled task events.
//!
//! # Why
//! A pool whose tasks take tens of nanoseconds runs millions of them per second per worker;
//! two events each (start, end) cost the worker their pushes and the collector its share per
//! event, more than the tasks themselves, and a collector that falls behind drops events. So
//! a [`PoolProbe`](super::PoolProbe) records the events of 1 in N tasks (N adapts to the pace,
//! see `pool_probe`), and counts every task in the worker thread itself: what is recorded is
//! sampled, what is counted is exact.
//!
//! # Counters
//! Each worker thread that runs tasks under a probe owns one [`ThreadTasks`] per profiler,
//! registered once (its first task) in the profiler's [`TaskCounts`], in cache lines of its
//! own. Only that thread writes it: after each task it stores its running totals (tasks,
//! tasks recorded, busy ticks) with relaxed stores, and the rate in force when it changes.
//! A thread that runs tasks it scheduled itself (a full queue) counts them in counters of
//! its own marked [`Runner::Caller`]. Readers load them relaxed: each figure is exact as of
//! some task end of its thread, figures of different counters may be a task apart, which is
//! what a snapshot of a running pool can say.
//!
//! # Into the snapshot
//! [`TaskCounts::apply`] runs on every snapshot (after the statistics built it from the
//! events) and puts the counters in where events were sampled away:
//! - per worker thread and per device, the tasks since the start (or the last reset) are the
//!   counters' (a device's are the sum of its threads', and so are its panicked tasks);
//! - where some task of a thread was not recorded, its running share (over the window and
//!   since the start) and its task time in the work-state cells are raised to its counted
//!   busy time. The time comes out of "stealing": a task whose events are not recorded runs
//!   while the statistics see the worker between tasks, never parked or spinning (a worker
//!   ends its spin or park before it runs a task); cells of each readiness give up time in
//!   proportion to what they hold, the one split the counters cannot tell;
//! - a device's tasks per second over the window come from the counters too when sampled.
//!
//! Figures over the window need the counters as they were a window ago: each snapshot keeps
//! one reading per thread in a short history (at most one per 1/32 window), and the window's
//! figures are the change since the newest reading at least a window old (or the oldest).
//! [`Snapshot::task_sampling`](super::Snapshot) says what was counted, what recorded, and at
//! which rate.
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, VecDeque};

use super::clock::Epoch;
use super::names::{DeviceId, ThreadId};
use super::stats::{Shares, Snapshot};
use super::work_states::{StateTime, WorkState};
use crate::sync::{Arc, AtomicU64, Mutex, Ordering};

/// How pool task events were sampled: every task counted, some recorded.
///
/// ```
/// use enginetop::profiler::TaskSampling;
/// let sampling = TaskSampling {
///     tasks: 1000,
///     recorded: 10,
///     rate: 128,
///     max_rate: 128,
///     run_by_callers: 0,
/// };
/// assert!(sampling.is_sampled());
/// assert_eq!(sampling.describe(), "1 in 128 (10 of 1,000 tasks recorded)");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TaskSampling {
    /// Pool tasks run since the start (or the last reset), counted by the threads that ran
    /// them.
    pub tasks: u64,
    /// Of which had their start and end recorded as events.
    pub recorded: u64,
    /// The sparsest rate in force now, over the workers: 1 in `rate` tasks recorded (0 when
    /// no task was counted).
    pub rate: u64,
    /// The sparsest rate any worker used since the profiler started.
    pub max_rate: u64,
    /// Of `tasks`, those the thread that scheduled them ran itself (a full queue, a pool
    /// with no workers, a caller helping), counted as that thread's.
    pub run_by_callers: u64,
}

impl TaskSampling {
    /// Whether some counted task has no events: the trace and a recording hold a sample of
    /// the tasks (the snapshot's counts and times are the counters').
    pub fn is_sampled(&self) -> bool {
        self.recorded < self.tasks
    }

    /// `1 in N (R of T tasks recorded)`, with `up to 1 in M` when the sparsest rate used was
    /// sparser than the one in force.
    pub fn describe(&self) -> String {
        let mut text = format!("1 in {}", self.rate.max(1));
        if self.max_rate > self.rate.max(1) {
            text.push_str(&format!(", up to 1 in {}", self.max_rate));
        }
        text.push_str(&format!(
            " ({} of {} tasks recorded)",
            thousands(self.recorded),
            thousands(self.tasks)
        ));
        text
    }

    /// `N of T pool tasks ran inline on the thread that scheduled them`, when some did.
    pub fn describe_callers(&self) -> Option<String> {
        (self.run_by_callers > 0).then(|| {
            format!(
                "{} of {} pool tasks ran inline on the thread that scheduled them",
                thousands(self.run_by_callers),
                thousands(self.tasks)
            )
        })
    }
}

/// Who ran a counted pool task: one of the pool's workers, or the thread that scheduled it
/// (or helped), running it itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Runner {
    Worker,
    Caller,
}

/// `1234567` as `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// One worker thread's task counters (for one profiler); written only by that thread. Its
/// own cache lines (aligned to 128 bytes, the pair the prefetcher fetches together): the
/// thread stores to them after every task, and no other thread's counters share them.
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct ThreadTasks {
    thread: ThreadId,
    device: DeviceId,
    runner: Runner,
    tasks: AtomicU64,
    recorded: AtomicU64,
    busy_ticks: AtomicU64,
    panics: AtomicU64,
    rate: AtomicU64,
    max_rate: AtomicU64,
    /// Whether `busy_ticks` holds nanoseconds (counters read back from a recording).
    busy_in_ns: bool,
}

impl ThreadTasks {
    fn new(thread: ThreadId, device: DeviceId, runner: Runner) -> Self {
        ThreadTasks {
            thread,
            device,
            runner,
            tasks: AtomicU64::new(0),
            recorded: AtomicU64::new(0),
            busy_ticks: AtomicU64::new(0),
            panics: AtomicU64::new(0),
            rate: AtomicU64::new(1),
            max_rate: AtomicU64::new(1),
            busy_in_ns: false,
        }
    }

    /// Counters that hold `reading` for good.
    fn read_back(reading: &TaskReading) -> Self {
        ThreadTasks {
            thread: ThreadId::from_raw(reading.thread),
            device: DeviceId::from_raw(reading.device),
            runner: match reading.by_caller {
                true => Runner::Caller,
                false => Runner::Worker,
            },
            tasks: AtomicU64::new(reading.tasks),
            recorded: AtomicU64::new(reading.recorded),
            busy_ticks: AtomicU64::new(reading.busy_ns),
            panics: AtomicU64::new(reading.panics),
            rate: AtomicU64::new(reading.rate),
            max_rate: AtomicU64::new(reading.max_rate),
            busy_in_ns: true,
        }
    }

    /// Publishes the owner's running totals (owner only).
    #[inline(always)]
    pub(crate) fn publish(&self, tasks: u64, recorded: u64, busy_ticks: u64) {
        self.tasks.store(tasks, Ordering::Relaxed);
        self.recorded.store(recorded, Ordering::Relaxed);
        self.busy_ticks.store(busy_ticks, Ordering::Relaxed);
    }

    /// Publishes the owner's count of panicked tasks.
    pub(crate) fn publish_panics(&self, panics: u64) {
        self.panics.store(panics, Ordering::Relaxed);
    }

    /// Publishes the rate now in force (owner only).
    pub(crate) fn set_rate(&self, rate: u64) {
        self.rate.store(rate, Ordering::Relaxed);
        if rate > self.max_rate.load(Ordering::Relaxed) {
            self.max_rate.store(rate, Ordering::Relaxed);
        }
    }

    fn read(&self) -> Figures {
        Figures {
            tasks: self.tasks.load(Ordering::Relaxed),
            recorded: self.recorded.load(Ordering::Relaxed),
            busy_ns: match self.busy_in_ns {
                true => self.busy_ticks.load(Ordering::Relaxed),
                false => Epoch::get().ticks_as_ns(self.busy_ticks.load(Ordering::Relaxed)),
            },
            panics: self.panics.load(Ordering::Relaxed),
        }
    }
}

/// One counted thread's figures since the start (or the last reset) and its rates, with
/// its thread and device as numbers: what a recording keeps of the counters, so that a
/// replay's snapshot puts them in as the live one did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct TaskReading {
    pub(crate) thread: u32,
    pub(crate) device: u16,
    pub(crate) tasks: u64,
    pub(crate) recorded: u64,
    pub(crate) busy_ns: u64,
    pub(crate) panics: u64,
    pub(crate) rate: u64,
    pub(crate) max_rate: u64,
    /// Whether the thread ran tasks it scheduled itself (a [`Runner::Caller`]), not a pool
    /// worker.
    pub(crate) by_caller: bool,
}

/// A thread's totals at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Figures {
    tasks: u64,
    recorded: u64,
    busy_ns: u64,
    panics: u64,
}

impl Figures {
    fn since(self, base: Figures) -> Figures {
        Figures {
            tasks: self.tasks.saturating_sub(base.tasks),
            recorded: self.recorded.saturating_sub(base.recorded),
            busy_ns: self.busy_ns.saturating_sub(base.busy_ns),
            panics: self.panics.saturating_sub(base.panics),
        }
    }

    fn add(&mut self, other: Figures) {
        self.tasks += other.tasks;
        self.recorded += other.recorded;
        self.busy_ns += other.busy_ns;
        self.panics += other.panics;
    }
}

/// A registered thread: its counters, their values at the last reset, and readings for the
/// window's figures.
struct Counted {
    counts: Arc<ThreadTasks>,
    base: Figures,
    history: VecDeque<(u64, Figures)>,
}

impl Counted {
    /// The change over about the last `window_ns` (and the time it spans) after noting the
    /// reading `now` at `at_ns`.
    fn windowed(&mut self, at_ns: u64, window_ns: u64, now: Figures) -> (Figures, u64) {
        let spacing = (window_ns / 32).max(1);
        let due = self
            .history
            .back()
            .is_none_or(|&(last, _)| at_ns >= last.saturating_add(spacing));
        if due {
            self.history.push_back((at_ns, now));
        }
        let start = at_ns.saturating_sub(window_ns);
        while self.history.len() > 1 && self.history[1].0 <= start {
            self.history.pop_front();
        }
        let (from_ns, from) = self.history[0];
        (now.since(from), at_ns.saturating_sub(from_ns))
    }
}

/// One thread's figures for a snapshot.
#[derive(Clone, Copy, Debug, Default)]
struct ThreadFigures {
    since: Figures,
    window: Figures,
    window_ns: u64,
}

impl ThreadFigures {
    fn sampled(&self) -> bool {
        self.since.recorded < self.since.tasks
    }

    fn busy_share_in_window(&self) -> Option<f64> {
        (self.window_ns > 0).then(|| self.window.busy_ns as f64 / self.window_ns as f64)
    }

    fn add(&mut self, other: ThreadFigures) {
        self.since.add(other.since);
        self.window.add(other.window);
        self.window_ns = self.window_ns.max(other.window_ns);
    }
}

/// Every counted thread of one profiler.
#[derive(Default)]
pub(crate) struct TaskCounts {
    counted: Mutex<Vec<Counted>>,
}

impl TaskCounts {
    /// New counters for the tasks the calling thread runs on `device` as `runner`.
    pub(crate) fn register(&self, device: DeviceId, runner: Runner) -> Arc<ThreadTasks> {
        let counts = Arc::new(ThreadTasks::new(ThreadId::current(), device, runner));
        self.counted.lock().push(Counted {
            counts: counts.clone(),
            base: Figures::default(),
            history: VecDeque::new(),
        });
        counts
    }

    /// Every counted thread's reading now.
    pub(crate) fn readings(&self) -> Vec<TaskReading> {
        let counted = self.counted.lock();
        let reading = |counted: &Counted| {
            let figures = counted.counts.read().since(counted.base);
            TaskReading {
                thread: counted.counts.thread.id(),
                device: counted.counts.device.id(),
                tasks: figures.tasks,
                recorded: figures.recorded,
                busy_ns: figures.busy_ns,
                panics: figures.panics,
                rate: counted.counts.rate.load(Ordering::Relaxed),
                max_rate: counted.counts.max_rate.load(Ordering::Relaxed),
                by_caller: counted.counts.runner == Runner::Caller,
            }
        };
        counted.iter().map(reading).collect()
    }

    /// Counters that hold `readings` for good (their threads and devices this process's):
    /// a replay's, from a recording.
    pub(crate) fn read_back(readings: &[TaskReading]) -> TaskCounts {
        let counted = readings
            .iter()
            .map(|reading| Counted {
                counts: Arc::new(ThreadTasks::read_back(reading)),
                base: Figures::default(),
                history: VecDeque::new(),
            })
            .collect();
        TaskCounts {
            counted: Mutex::new(counted),
        }
    }

    /// Counts from zero again (the statistics' reset).
    pub(crate) fn reset(&self) {
        for counted in self.counted.lock().iter_mut() {
            counted.base = counted.counts.read();
            counted.history.clear();
        }
    }

    /// Puts the counters into `snapshot` (see the module docs).
    pub(crate) fn apply(&self, snapshot: &mut Snapshot) {
        let mut counted = self.counted.lock();
        if counted.is_empty() {
            return;
        }
        let (at_ns, window_ns) = (snapshot.at_ns, snapshot.window_ns);
        let mut threads: BTreeMap<u32, ThreadFigures> = BTreeMap::new();
        let mut devices: BTreeMap<u16, (ThreadFigures, f64)> = BTreeMap::new();
        let mut sampling = TaskSampling::default();
        for counted in counted.iter_mut() {
            let now = counted.counts.read();
            let (window, span) = counted.windowed(at_ns, window_ns, now);
            let figures = ThreadFigures {
                since: now.since(counted.base),
                window,
                window_ns: span,
            };
            threads
                .entry(counted.counts.thread.id())
                .or_default()
                .add(figures);
            let device = devices.entry(counted.counts.device.id()).or_default();
            device.0.add(figures);
            if span > 0 {
                device.1 += window.tasks as f64 * 1e9 / span as f64;
            }
            sampling.tasks += figures.since.tasks;
            sampling.recorded += figures.since.recorded;
            if counted.counts.runner == Runner::Caller {
                sampling.run_by_callers += figures.since.tasks;
            }
            sampling.rate = sampling
                .rate
                .max(counted.counts.rate.load(Ordering::Relaxed));
            sampling.max_rate = sampling
                .max_rate
                .max(counted.counts.max_rate.load(Ordering::Relaxed));
        }
        drop(counted);
        apply_threads(snapshot, &threads);
        for device in &mut snapshot.devices {
            if let Some((figures, per_s)) = devices.get(&device.id) {
                device.tasks = figures.since.tasks;
                device.task_panics = figures.since.panics;
                if figures.sampled() && figures.window_ns > 0 {
                    device.tasks_per_s = *per_s;
                }
            }
        }
        snapshot.task_sampling = sampling;
    }
}

fn apply_threads(snapshot: &mut Snapshot, threads: &BTreeMap<u32, ThreadFigures>) {
    for worker in &mut snapshot.workers {
        let Some(figures) = threads.get(&worker.thread) else {
            continue;
        };
        worker.tasks = figures.since.tasks;
        if !figures.sampled() {
            continue;
        }
        if worker.lifetime_ns > 0 {
            let share = figures.since.busy_ns as f64 / worker.lifetime_ns as f64;
            raise_running(&mut worker.shares_since_start, share);
        }
        if let Some(share) = figures.busy_share_in_window() {
            raise_running(&mut worker.shares, share);
        }
    }
    for states in &mut snapshot.work_states {
        let Some(figures) = threads.get(&states.thread) else {
            continue;
        };
        if !figures.sampled() {
            continue;
        }
        raise_task_time(&mut states.since_start, figures.since.busy_ns);
        if let Some(share) = figures.busy_share_in_window() {
            let observed: u64 = states.window.iter().map(|cell| cell.ns).sum();
            raise_task_time(
                &mut states.window,
                (share.min(1.0) * observed as f64) as u64,
            );
        }
    }
}

/// Raises the running share to `busy` (a share of the same time), taking the difference
/// from stealing (unrecorded tasks ran while the events said "between tasks").
fn raise_running(shares: &mut Shares, busy: f64) {
    let extra = (busy.min(1.0) - shares.running)
        .max(0.0)
        .min(shares.stealing);
    shares.running += extra;
    shares.stealing -= extra;
}

/// Raises the running time of `cells` (ops and tasks) to `busy_ns`, moving the difference
/// from stealing cells to task cells of the same readiness, in proportion to each stealing
/// cell's time.
fn raise_task_time(cells: &mut Vec<StateTime>, busy_ns: u64) {
    let time_in = |cells: &[StateTime], states: &[WorkState]| -> u64 {
        cells
            .iter()
            .filter(|cell| states.contains(&cell.state))
            .map(|cell| cell.ns)
            .sum()
    };
    let running = time_in(cells, &[WorkState::Op, WorkState::Task]);
    let stealing = time_in(cells, &[WorkState::Stealing]);
    let extra = busy_ns.saturating_sub(running).min(stealing);
    if extra == 0 {
        return;
    }
    let mut moved = Vec::new();
    for cell in cells.iter_mut().filter(|c| c.state == WorkState::Stealing) {
        let part = (u128::from(extra) * u128::from(cell.ns) / u128::from(stealing)) as u64;
        cell.ns -= part;
        moved.push((cell.ready, part));
    }
    for (ready, part) in moved {
        match cells
            .iter_mut()
            .find(|c| c.state == WorkState::Task && c.ready == ready)
        {
            Some(cell) => cell.ns += part,
            None => cells.push(StateTime {
                state: WorkState::Task,
                ready,
                ns: part,
            }),
        }
    }
    cells.retain(|cell| cell.ns > 0);
    cells.sort_by_key(|cell| (cell.state, cell.ready.own, cell.ready.elsewhere));
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::profiler::stats::{Activity, DeviceSnapshot, WorkerSnapshot};
    use crate::profiler::work_states::{Readiness, WorkerStates};

    fn worker(thread: u32, shares: Shares, lifetime_ns: u64) -> WorkerSnapshot {
        WorkerSnapshot {
            thread,
            name: format!("w{thread}"),
            device: None,
            role: None,
            worker: Some(0),
            activity: Activity::Stealing,
            shares,
            shares_since_start: shares,
            lifetime_ns,
            exited: false,
            tasks: 3,
            ops: 0,
            steals: 0,
            current_op: None,
        }
    }

    fn shares(running: f64, stealing: f64, parked: f64) -> Shares {
        Shares {
            running,
            stealing,
            spinning: 0.0,
            parked,
            idle: 0.0,
        }
    }

    #[test]
    fn running_is_raised_to_the_busy_share_out_of_stealing_only() {
        let mut raised = shares(0.1, 0.5, 0.4);
        raise_running(&mut raised, 0.4);
        assert!((raised.running - 0.4).abs() < 1e-9 && (raised.stealing - 0.2).abs() < 1e-9);
        assert_eq!(raised.parked, 0.4);
        let mut capped = shares(0.1, 0.2, 0.7);
        raise_running(&mut capped, 0.9);
        assert!((capped.running - 0.3).abs() < 1e-9 && capped.stealing.abs() < 1e-9);
        let mut kept = shares(0.5, 0.5, 0.0);
        raise_running(&mut kept, 0.2);
        assert_eq!(kept, shares(0.5, 0.5, 0.0), "never lowered");
    }

    #[test]
    fn task_time_moves_from_stealing_cells_in_proportion() {
        let (none, own) = (
            Readiness::default(),
            Readiness {
                own: true,
                elsewhere: false,
            },
        );
        let cell = |state, ready, ns| StateTime { state, ready, ns };
        let mut cells = vec![
            cell(WorkState::Task, own, 100),
            cell(WorkState::Stealing, none, 300),
            cell(WorkState::Stealing, own, 100),
            cell(WorkState::Parked, none, 500),
        ];
        raise_task_time(&mut cells, 300);
        assert_eq!(
            cells,
            vec![
                cell(WorkState::Task, none, 150),
                cell(WorkState::Task, own, 150),
                cell(WorkState::Stealing, none, 150),
                cell(WorkState::Stealing, own, 50),
                cell(WorkState::Parked, none, 500),
            ]
        );
        assert_eq!(cells.iter().map(|c| c.ns).sum::<u64>(), 1000);
    }

    #[test]
    fn counters_replace_sampled_counts_in_the_snapshot() {
        let counts = TaskCounts::default();
        let device = DeviceId::register("task-counts-test");
        let thread = counts.register(device, Runner::Worker);
        let id = ThreadId::current().id();
        thread.publish(1000, 10, Epoch::get().ns_as_ticks(600));
        thread.set_rate(128);
        let mut snapshot = Snapshot {
            at_ns: 5_000,
            window_ns: 1_000,
            workers: vec![worker(id, shares(0.1, 0.5, 0.4), 1_000)],
            work_states: vec![WorkerStates {
                thread: id,
                window: Vec::new(),
                since_start: vec![StateTime {
                    state: WorkState::Stealing,
                    ready: Readiness::default(),
                    ns: 1_000,
                }],
            }],
            devices: vec![DeviceSnapshot {
                id: device.id(),
                tasks: 20,
                ..DeviceSnapshot::default()
            }],
            ..Snapshot::default()
        };
        counts.apply(&mut snapshot);
        let sampling = snapshot.task_sampling;
        assert_eq!(
            (sampling.tasks, sampling.recorded, sampling.rate),
            (1000, 10, 128)
        );
        assert_eq!(
            (snapshot.workers[0].tasks, snapshot.devices[0].tasks),
            (1000, 1000)
        );
        let running = snapshot.workers[0].shares_since_start.running;
        assert!((running - 0.6).abs() < 0.01, "{running}");
        let task_ns = snapshot.work_states[0].since_start[0].ns;
        assert!((590..=600).contains(&task_ns), "{task_ns}");
        counts.reset();
        let mut after = Snapshot {
            workers: vec![worker(id, shares(0.1, 0.5, 0.4), 1_000)],
            ..Snapshot::default()
        };
        counts.apply(&mut after);
        assert_eq!(after.workers[0].tasks, 0, "counted from the reset");
        assert!(!after.task_sampling.is_sampled());
    }

    #[test]
    fn window_figures_are_the_change_since_a_window_ago() {
        let counts = TaskCounts::default();
        let device = DeviceId::register("task-counts-window");
        let thread = counts.register(device, Runner::Worker);
        let take = |at_ns: u64, tasks: u64| {
            thread.publish(tasks, 1, 0);
            let mut snapshot = Snapshot {
                at_ns,
                window_ns: 1_000_000_000,
                devices: vec![DeviceSnapshot {
                    id: device.id(),
                    ..DeviceSnapshot::default()
                }],
                ..Snapshot::default()
            };
            counts.apply(&mut snapshot);
            snapshot.devices[0].tasks_per_s
        };
        assert_eq!(take(1_000_000_000, 100), 0.0, "no span yet");
        let rate = take(1_500_000_000, 600);
        assert!((rate - 1000.0).abs() < 1e-6, "{rate}");
        let rate = take(2_500_000_000, 1600);
        assert!((rate - 1000.0).abs() < 1e-6, "{rate}");
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
