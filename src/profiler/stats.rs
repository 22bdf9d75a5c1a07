//! Live statistics, computed by the collector from the event stream, read at any time as a
//! plain-data [`Snapshot`].
//!
//! - **Workers** (one per recording thread): what share of the sliding window it spent
//!   running, stealing, spinning, parked or idle, from its state changes:
//!   `TaskStart`/`OpStart` -> running (nested starts count once), the matching end ->
//!   stealing for a pool worker and idle for any other thread (a GPU worker, the driver: they
//!   wait without reporting it, so "looking for work" would be a guess), `SpinStart` -> spinning, `SpinEnd` -> stealing, `Park` -> parked, `Unpark` ->
//!   stealing, thread exit -> idle. "Stealing" is "looking for work between tasks": popping
//!   its own queue is too short to tell apart from trying other queues. Shares are of the time
//!   observed in the window (a thread first seen half-way through has half a window), and
//!   again over its lifetime since the start (or the last reset), for a finished run's
//!   figures: from its first state change to its exit (a resize's retired thread stops
//!   counting when it exits), so each thread's shares add up to 1 over the time it lived. When a thread's
//!   ring dropped events (`Stats::events_lost`) its open ops are forgotten and it counts as
//!   between tasks until its next event: a lost end must not leave it running for good.
//! - **Work states** per worker: the same time, with running split into ops and tasks
//!   outside ops, crossed with whether work was ready for it or elsewhere
//!   ([`work_states`](super::work_states) says how): what the scaling analysis attributes
//!   each worker's time from.
//! - **Steals** thief -> victim per pool, counted since the start.
//! - **Devices**: ops and tasks per second over the window, errors and panics, queue depths
//!   (the latest `QueueDepth` sample per queue), the pool's worker count (from resizes).
//! - **Ops** per name, counted once at their `OpEnd`: count, errors, total, min, max, mean,
//!   p50, p99 (an hdrhistogram's buckets at 2 significant digits, so percentiles are within
//!   1%, and kept within [min, max]; held sparse while a name has few buckets, see
//!   `histogram.rs`; a row hands its durations to the histogram in batches of 32, since
//!   with thousands of op names each single record missed the caches). The duration
//!   is `OpEnd - OpStart` matched by op id (looked up on the ending thread's own stack of
//!   open ops first, then among the others); an end whose start was dropped has no
//!   duration: it counts in its device's totals, not in the table.
//!   `tracing` spans get the same table, keyed by span name.
//! - **GPU streams**: occupancy (share of the window a kernel was running) and ops.
//! - **Dropped events**: the rings' drop counts plus events lost on exiting threads.
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::time::Duration;

use super::event::{Event, EventKind};
use super::names::{DeviceId, ThreadId};
use super::timeline::{Buckets, RateCounter, StateTimeline};
use super::work_states::{Cells, ReadyWork, WorkState, WorkerStates};
use crate::device::identity::PoolRole;
use crate::engine::OpName;

mod histogram;
mod image;

use histogram::DurationHistogram;
pub(crate) use image::IdMap;

/// How the sliding windows are cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StatsOptions {
    /// Length of the sliding window (shares, rates, occupancy).
    pub window: Duration,
    /// Buckets the window is cut into (its resolution).
    pub buckets: u32,
    /// Whether each thread's work-state cells are kept (the scaling analysis's attribution
    /// reads them); off, the snapshot's `work_states` stay empty of time.
    pub work_states: bool,
}

impl Default for StatsOptions {
    /// A one-second window in ten buckets, work states kept.
    fn default() -> Self {
        StatsOptions {
            window: Duration::from_secs(1),
            buckets: 10,
            work_states: true,
        }
    }
}

impl StatsOptions {
    fn geometry(self) -> Buckets {
        let count = u64::from(self.buckets.max(1));
        let window_ns = u64::try_from(self.window.as_nanos()).unwrap_or(u64::MAX);
        Buckets {
            bucket_ns: (window_ns / count).max(1),
            count,
        }
    }
}

/// What a worker is doing, as the events tell it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Activity {
    /// Running a task or an op.
    Running,
    /// Looking for work between tasks.
    Stealing,
    /// Its pool's spinning thread.
    Spinning,
    /// Asleep.
    Parked,
    /// Not seen doing anything yet, or exited.
    Idle,
}

const STATES: [Activity; 5] = [
    Activity::Running,
    Activity::Stealing,
    Activity::Spinning,
    Activity::Parked,
    Activity::Idle,
];

/// `activity`'s index in [`STATES`] (its declaration order, checked below).
#[inline]
fn state_index(activity: Activity) -> usize {
    activity as usize
}

const _: () = {
    let mut index = 0;
    while index < STATES.len() {
        assert!(
            STATES[index] as usize == index,
            "STATES is in declaration order"
        );
        index += 1;
    }
};

/// Share of the window per activity (they add up to 1 once anything was observed).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Shares {
    /// Running tasks or ops.
    pub running: f64,
    /// Looking for work.
    pub stealing: f64,
    /// Spinning.
    pub spinning: f64,
    /// Parked.
    pub parked: f64,
    /// Idle (exited).
    pub idle: f64,
}

impl From<[f64; 5]> for Shares {
    /// Shares in the order of the timeline's states (running, stealing, spinning, parked,
    /// idle).
    fn from(shares: [f64; 5]) -> Self {
        let [running, stealing, spinning, parked, idle] = shares;
        Shares {
            running,
            stealing,
            spinning,
            parked,
            idle,
        }
    }
}

/// One worker (a recording thread) in a [`Snapshot`].
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct WorkerSnapshot {
    /// Its thread id (the `tid` of a trace).
    pub thread: u32,
    /// Its thread name (`cpu0-w3`).
    pub name: String,
    /// The device it works for, if it recorded a worker event: its pool's (a pool worker),
    /// else the device of the ops it ran. The registry gives its name and typed device.
    pub device: Option<DeviceId>,
    /// Its pool's role, if it is a pool worker whose probe knew the pool.
    pub role: Option<PoolRole>,
    /// Its worker index in that pool, if it is a pool worker.
    pub worker: Option<u32>,
    /// What it is doing now.
    pub activity: Activity,
    /// Share of the window per activity.
    pub shares: Shares,
    /// Share of its lifetime since the run started (or the statistics were reset) per
    /// activity: from its first state change to its exit, or to now while it lives.
    pub shares_since_start: Shares,
    /// That lifetime, in nanoseconds (what `shares_since_start` add up over).
    pub lifetime_ns: u64,
    /// Whether its thread has exited (a resize retired it, or its pool stopped).
    pub exited: bool,
    /// Pool tasks it finished.
    pub tasks: u64,
    /// Ops it finished.
    pub ops: u64,
    /// Tasks it stole.
    pub steals: u64,
    /// The op it is running now (the innermost one it started and has not ended), if any.
    pub current_op: Option<String>,
}

/// Steals from one queue to one thief, since the start.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct StealSnapshot {
    /// The pool (device).
    pub device: DeviceId,
    /// The thief's worker index.
    pub thief: u32,
    /// The victim's worker index, `None` for the shared injector.
    pub victim: Option<u32>,
    /// How many.
    pub count: u64,
}

/// One queue's depth.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct QueueSnapshot {
    /// The queue's label (`w0`, `shared`, `priority`, ...).
    pub label: String,
    /// Tasks waiting at the last sample.
    pub depth: u64,
}

/// One device in a [`Snapshot`].
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct DeviceSnapshot {
    /// The device id (the `pid` of a trace is this plus one).
    pub id: u16,
    /// Its name.
    pub name: String,
    /// Ops finished per second over the window.
    pub ops_per_s: f64,
    /// Pool tasks finished per second over the window.
    pub tasks_per_s: f64,
    /// Ops finished since the start.
    pub ops: u64,
    /// Ops that ended with an error.
    pub op_errors: u64,
    /// Pool tasks finished since the start.
    pub tasks: u64,
    /// Pool tasks that panicked.
    pub task_panics: u64,
    /// Ops queued since the start.
    pub queued: u64,
    /// Latest depth per queue.
    pub queues: Vec<QueueSnapshot>,
    /// Sum of the latest depths.
    pub queue_depth: u64,
    /// Workers after the latest resize, if the pool reported one.
    pub workers: Option<u64>,
    /// Resizes seen (a pool's start counts as one).
    pub resizes: u64,
}

impl DeviceSnapshot {
    /// Its typed id.
    pub fn device(&self) -> DeviceId {
        DeviceId::from_raw(self.id)
    }
}

/// Aggregates for one op (or span) name; durations in nanoseconds.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct OpSnapshot {
    /// The op's name.
    pub name: String,
    /// Ops finished (each counted once, at its end).
    pub count: u64,
    /// Of which ended with an error.
    pub errors: u64,
    /// Sum of durations.
    pub total_ns: u64,
    /// Shortest.
    pub min_ns: u64,
    /// Longest.
    pub max_ns: u64,
    /// Mean.
    pub mean_ns: f64,
    /// Median (within 1%).
    pub p50_ns: u64,
    /// 99th percentile (within 1%).
    pub p99_ns: u64,
}

/// One GPU stream in a [`Snapshot`].
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct StreamSnapshot {
    /// The GPU (device).
    pub device: DeviceId,
    /// The stream's index.
    pub stream: u32,
    /// Share of the window a kernel was running on it.
    pub occupancy: f64,
    /// Kernels finished since the start.
    pub ops: u64,
    /// Kernels submitted since the start.
    pub submitted: u64,
}

/// Everything the collector knows, as plain data: what the dashboard renders.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Snapshot {
    /// When it was taken (ns since the process epoch).
    pub at_ns: u64,
    /// The sliding window's nominal length.
    pub window_ns: u64,
    /// Every thread that recorded a state change, by thread id.
    pub workers: Vec<WorkerSnapshot>,
    /// The same threads' time against the work that was ready, by thread id.
    pub work_states: Vec<WorkerStates>,
    /// Steal counts.
    pub steals: Vec<StealSnapshot>,
    /// Every device that saw an event, by id.
    pub devices: Vec<DeviceSnapshot>,
    /// Ops by name.
    pub ops: Vec<OpSnapshot>,
    /// `tracing` spans by name.
    pub spans: Vec<OpSnapshot>,
    /// GPU streams.
    pub streams: Vec<StreamSnapshot>,
    /// Events the collector processed.
    pub events: u64,
    /// Events lost: full rings, exiting threads.
    pub dropped_events: u64,
    /// Pool tasks counted and recorded, and the sampling rate (filled from the workers'
    /// counters by the profiler, see `task_counts`; empty from the events alone).
    pub task_sampling: super::task_counts::TaskSampling,
}

impl Snapshot {
    /// The op named `name`, if any finished.
    pub fn op(&self, name: &str) -> Option<&OpSnapshot> {
        self.ops.iter().find(|op| op.name == name)
    }

    /// The device named `name`, if it saw an event.
    pub fn device(&self, name: &str) -> Option<&DeviceSnapshot> {
        self.devices.iter().find(|device| device.name == name)
    }

    /// Device `id`, if it saw an event.
    pub fn device_of(&self, id: DeviceId) -> Option<&DeviceSnapshot> {
        self.devices.iter().find(|device| device.id == id.id())
    }
}

/// Durations an op name's row holds before its histogram takes them, at most.
///
/// A histogram is an allocation per op name: up to 1 KiB of sparse buckets, or a few KiB of
/// dense counts (2 significant digits from 1 ns up to the longest duration seen). With thousands of names (a graph whose every
/// op has its own name) recording each duration into its histogram at once misses the caches
/// and the TLB on nearly every event. Held in the row (beside the count and total, which each
/// recording touches anyway) and recorded [`PENDING_DURATIONS`] at a time, a histogram is
/// touched once per batch, its counts' lines and pages then warm for the rest of it, for 256
/// bytes a row (the figures are in `bench/README.md`, "Profiler statistics").
const PENDING_DURATIONS: usize = 32;

/// Count, extremes and a histogram of durations.
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(from = "image::DurationsImage")]
struct Durations {
    count: u64,
    errors: u64,
    total_ns: u64,
    min_ns: u64,
    max_ns: u64,
    /// Recorded, not yet in `histogram` (the first `pending_len`).
    pending: [u64; PENDING_DURATIONS],
    pending_len: usize,
    histogram: DurationHistogram,
}

impl Durations {
    fn new() -> Self {
        Durations {
            count: 0,
            errors: 0,
            total_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
            pending: [0; PENDING_DURATIONS],
            pending_len: 0,
            histogram: DurationHistogram::new(),
        }
    }

    #[inline]
    fn record(&mut self, ns: u64, error: bool) {
        self.count += 1;
        self.errors += u64::from(error);
        self.total_ns = self.total_ns.saturating_add(ns);
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
        self.hold(ns);
    }

    /// Keeps `ns` for the histogram, settling the held ones when they fill `pending`.
    #[inline]
    fn hold(&mut self, ns: u64) {
        self.pending[self.pending_len] = ns;
        self.pending_len += 1;
        if self.pending_len == PENDING_DURATIONS {
            self.settle();
        }
    }

    /// Moves the pending durations into the histogram.
    #[inline(never)]
    fn settle(&mut self) {
        self.histogram
            .record_each(&self.pending[..self.pending_len]);
        self.pending_len = 0;
    }

    fn snapshot(&mut self, name: &str) -> OpSnapshot {
        self.settle();
        // A histogram bucket reports its highest value, which can lie past the largest
        // duration recorded (or below the smallest): percentiles stay within [min, max].
        let min_ns = if self.count == 0 { 0 } else { self.min_ns };
        let quantile = |q| {
            self.histogram
                .value_at_quantile(q)
                .clamp(min_ns, self.max_ns)
        };
        OpSnapshot {
            name: name.to_string(),
            count: self.count,
            errors: self.errors,
            total_ns: self.total_ns,
            min_ns,
            max_ns: self.max_ns,
            mean_ns: self.total_ns as f64 / self.count.max(1) as f64,
            p50_ns: quantile(0.5),
            p99_ns: quantile(0.99),
        }
    }
}

/// Per recording thread.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct ThreadStats {
    timeline: StateTimeline<5>,
    /// Its time against the ready work.
    cells: Cells,
    /// Nested task/op starts not yet ended.
    running_depth: u32,
    /// Of which op starts.
    ops_open: u32,
    #[serde(with = "image::device")]
    device: Option<DeviceId>,
    #[serde(with = "image::role")]
    role: Option<PoolRole>,
    worker: Option<u32>,
    tasks: u64,
    ops: u64,
    steals: u64,
    /// Open spans: (span id, entered at).
    spans: Vec<(u64, u64)>,
    /// Ops started here and not ended yet: (op id, started at, name), newest last.
    #[serde(with = "image::open_ops")]
    open_ops: VecDeque<(u64, u64, OpName)>,
}

impl ThreadStats {
    /// What it does when it runs nothing: a pool worker looks for work, any other thread
    /// idles (see the module docs).
    fn between_tasks(&self) -> Activity {
        if self.worker.is_some() {
            Activity::Stealing
        } else {
            Activity::Idle
        }
    }

    /// What it does now, ops and tasks apart (`None` before its first state change).
    #[inline]
    fn work_state(&self) -> Option<WorkState> {
        const RUNNING: usize = Activity::Running as usize;
        const STEALING: usize = Activity::Stealing as usize;
        const SPINNING: usize = Activity::Spinning as usize;
        const PARKED: usize = Activity::Parked as usize;
        Some(match self.timeline.state()? {
            RUNNING if self.ops_open > 0 => WorkState::Op,
            RUNNING => WorkState::Task,
            STEALING => WorkState::Stealing,
            SPINNING => WorkState::Spinning,
            PARKED => WorkState::Parked,
            _ => WorkState::Idle,
        })
    }

    /// Puts it in the cell its state and the ready work say, as of `ts`.
    #[inline(always)]
    fn refresh_cell(&mut self, ready: &ReadyWork, ts: u64) {
        if let Some(state) = self.work_state() {
            self.cells.set(state, ready.readiness(self.device), ts);
        }
    }

    /// The op it runs now: the newest op it started and has not ended, while it is running
    /// (an op whose end was dropped is forgotten once the thread stops running).
    fn current_op(&self) -> Option<OpName> {
        if self.running_depth == 0 {
            return None;
        }
        self.open_ops.back().map(|&(_, _, name)| name)
    }
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct DeviceStats {
    ops: RateCounter,
    tasks: RateCounter,
    op_total: u64,
    op_errors: u64,
    task_total: u64,
    task_panics: u64,
    queued: u64,
    #[serde(with = "image::queues")]
    queues: BTreeMap<OpName, u64>,
    workers: Option<u64>,
    resizes: u64,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct StreamStats {
    /// Busy (0) or idle (1).
    timeline: StateTimeline<2>,
    ops: u64,
    submitted: u64,
}

/// A hasher for op ids (already well spread; SipHash would cost more than the lookup).
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u64(self.0.rotate_left(8) ^ u64::from(byte));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (n ^ (n >> 32)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
}

/// Ops started and not yet ended past this many are forgotten (their ends were dropped).
const MAX_IN_FLIGHT: usize = 1 << 20;

/// Open ops kept on a thread's own stack before the oldest spill to the shared map.
const MAX_OPEN_PER_THREAD: usize = 64;

/// The collector's statistics: fed with [`ingest`](Stats::ingest), read with
/// [`snapshot`](Stats::snapshot).
///
/// ```
/// use enginetop::profiler::{DeviceId, Event, EventKind, OpName, OpInfo, Stats, StatsOptions};
/// let mut stats = Stats::new(StatsOptions::default());
/// let (cpu, add) = (DeviceId::register("doc-cpu"), OpName::new("add"));
/// stats.ingest(&Event::op(EventKind::OpStart, cpu, add, OpInfo::new(1)).at(1_000));
/// stats.ingest(&Event::op(EventKind::OpEnd, cpu, add, OpInfo::new(1)).at(4_000));
/// let snapshot = stats.snapshot(10_000);
/// assert_eq!(snapshot.op("add").unwrap().total_ns, 3_000);
/// ```
///
/// Statistics serialize (serde) with the ids they hold as plain numbers: a recording's
/// checkpoints carry them, and `remap` gives them this process's ids.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Stats {
    options: StatsOptions,
    geometry: Buckets,
    /// Per thread, in order of first sight; found through `thread_slots` and a one-entry
    /// cache (a batch holds runs of one thread's events).
    threads: Vec<(ThreadId, ThreadStats)>,
    #[serde(skip)]
    thread_slots: HashMap<ThreadId, usize, BuildHasherDefault<IdHasher>>,
    #[serde(skip)]
    last_thread: Option<(ThreadId, usize)>,
    /// Indexed by device id.
    devices: Vec<Option<DeviceStats>>,
    /// Indexed by name id.
    ops: Vec<Option<Durations>>,
    spans: Vec<Option<Durations>>,
    in_flight: HashMap<u64, u64, BuildHasherDefault<IdHasher>>,
    /// Ready work per device, for the work states.
    ready: ReadyWork,
    #[serde(with = "image::steals")]
    steals: BTreeMap<(DeviceId, u32, Option<u32>), u64>,
    #[serde(with = "image::streams")]
    streams: BTreeMap<(DeviceId, u32), StreamStats>,
    events: u64,
    dropped: u64,
    /// The dropped-events figure at the last [`reset`](Stats::reset) (the rings' counts
    /// only grow; a reset shows the drops since).
    dropped_before_reset: u64,
}

impl Stats {
    /// Empty statistics with windows cut as `options` says.
    pub fn new(options: StatsOptions) -> Self {
        Stats {
            options,
            geometry: options.geometry(),
            threads: Vec::new(),
            thread_slots: HashMap::default(),
            last_thread: None,
            devices: Vec::new(),
            ops: Vec::new(),
            spans: Vec::new(),
            in_flight: HashMap::default(),
            ready: ReadyWork::default(),
            steals: BTreeMap::new(),
            streams: BTreeMap::new(),
            events: 0,
            dropped: 0,
            dropped_before_reset: 0,
        }
    }

    /// Zeroes every counter, histogram and window as of `now_ns` (the dashboard's `r`): the
    /// op and span tables, steal counts, device and stream counters and rates, worker task,
    /// op and steal counts and state shares, events and dropped events. What is live stays:
    /// the known workers (thread, device, worker index, current state, open ops and spans),
    /// queue depths and pool sizes. Ops that started before the reset and end after it count.
    pub fn reset(&mut self, now_ns: u64) {
        let geometry = self.geometry;
        self.ops.clear();
        self.spans.clear();
        self.steals.clear();
        self.events = 0;
        self.dropped_before_reset = self.dropped.max(self.dropped_before_reset);
        for (_, thread) in &mut self.threads {
            thread.timeline = restarted(&thread.timeline, geometry, now_ns);
            thread.cells =
                Cells::restarted(restarted(&thread.cells.timeline, geometry, now_ns), now_ns);
            (thread.tasks, thread.ops, thread.steals) = (0, 0, 0);
        }
        for device in self.devices.iter_mut().flatten() {
            device.ops = RateCounter::new(geometry);
            device.tasks = RateCounter::new(geometry);
            (device.op_total, device.op_errors, device.queued) = (0, 0, 0);
            (device.task_total, device.task_panics, device.resizes) = (0, 0, 0);
        }
        for stream in self.streams.values_mut() {
            stream.timeline = restarted(&stream.timeline, geometry, now_ns);
            (stream.ops, stream.submitted) = (0, 0);
        }
    }

    /// Sets the dropped-events figure (the collector sums it from the rings).
    pub(crate) fn set_dropped(&mut self, dropped: u64) {
        self.dropped = dropped;
    }

    /// Takes one event into account.
    pub fn ingest(&mut self, event: &Event) {
        self.events += 1;
        self.take(event);
    }

    /// Takes `events` into account, in order: the same as [`ingest`](Self::ingest) of each,
    /// in one loop (a collector round's batch), so the dispatch is set up once a batch.
    pub(crate) fn ingest_all(&mut self, events: &[Event]) {
        self.events += events.len() as u64;
        for event in events {
            self.take(event);
        }
    }

    /// [`ingest`](Self::ingest) but the event count.
    #[inline(always)]
    fn take(&mut self, event: &Event) {
        // An engine op's three events take one path each (an op's start and end find their
        // thread once); every other kind counts, then tracks work states.
        match event.kind {
            EventKind::OpQueued => self.op_queued(event),
            EventKind::OpStart => self.op_started(event),
            EventKind::OpEnd => self.op_ended(event),
            _ => {
                self.count(event);
                if self.options.work_states {
                    self.track_work_states(event);
                }
            }
        }
    }

    /// The counters and the activity timelines.
    fn count(&mut self, event: &Event) {
        match event.kind {
            EventKind::OpQueued | EventKind::OpStart | EventKind::OpEnd => {} // `take` takes them
            EventKind::TaskStart => self.start_running(event),
            EventKind::TaskEnd => self.task_ended(event),
            EventKind::Steal => self.stolen(event),
            EventKind::SpinStart => self.enter(event, Activity::Spinning),
            EventKind::SpinEnd | EventKind::Unpark => self.enter(event, Activity::Stealing),
            EventKind::Park => self.enter(event, Activity::Parked),
            EventKind::PoolResized => {
                let device = self.device(event.device);
                device.workers = Some(event.arg);
                device.resizes += 1;
            }
            EventKind::QueueDepth => {
                self.device(event.device)
                    .queues
                    .insert(event.name, event.arg);
            }
            EventKind::StreamSubmit => self.stream(event).submitted += 1,
            EventKind::StreamStart => self.stream(event).timeline.enter(0, event.ts_ns),
            EventKind::StreamEnd => {
                let stream = self.stream(event);
                stream.timeline.enter(1, event.ts_ns);
                stream.ops += 1;
            }
            EventKind::SpanEnter => self
                .thread(event.thread)
                .spans
                .push((event.arg, event.ts_ns)),
            EventKind::SpanExit => self.span_exited(event),
        }
    }

    /// The work states after `event` (counted already): the ready work it changes, then its
    /// thread's cell, or every thread's when a device's readiness flipped.
    fn track_work_states(&mut self, event: &Event) {
        let flipped = match event.kind {
            EventKind::QueueDepth => {
                let tasks = self.device(event.device).queues.values().sum();
                self.ready.tasks_sampled(event.device, tasks)
            }
            _ => false,
        };
        if flipped {
            self.refresh_all_cells(event.ts_ns);
        } else if changes_state(event.kind) {
            let slot = self.thread_slot_cached(event.thread);
            self.refresh_cell(slot, event.ts_ns);
        }
    }

    /// Puts every thread in the cell its state and the ready work say, as of `ts` (a
    /// device's readiness flipped).
    #[inline(never)]
    fn refresh_all_cells(&mut self, ts: u64) {
        for slot in 0..self.threads.len() {
            self.refresh_cell(slot, ts);
        }
    }

    /// Puts the thread in `slot` in the cell its state and the ready work say, as of `ts`.
    #[inline]
    fn refresh_cell(&mut self, slot: usize, ts: u64) {
        self.threads[slot].1.refresh_cell(&self.ready, ts);
    }

    /// `thread`'s ring dropped events after the last one ingested (at `last_ts`, if any):
    /// what it did since is unknown. Its open ops and spans are forgotten (their ends may be
    /// among the lost events, and a lost end would leave it running for good) and it counts
    /// as between tasks until its next event; ops that started before the gap and end after
    /// it count in their device's totals but not in the op table (their start is unknown).
    pub(crate) fn events_lost(&mut self, thread: ThreadId, last_ts: Option<u64>) {
        let Some(&slot) = self.thread_slots.get(&thread) else {
            return;
        };
        let stats = &mut self.threads[slot].1;
        stats.running_depth = 0;
        stats.ops_open = 0;
        stats.open_ops.clear();
        stats.spans.clear();
        if let Some(ts) = last_ts {
            stats.timeline.enter(state_index(stats.between_tasks()), ts);
        }
    }

    /// Marks `thread` as exited at `ts` (its ring closed): idle from then on.
    pub(crate) fn thread_exited(&mut self, thread: ThreadId, ts: u64) {
        if let Some(&slot) = self.thread_slots.get(&thread) {
            let stats = &mut self.threads[slot].1;
            stats.running_depth = 0;
            stats.ops_open = 0;
            stats.timeline.end(state_index(Activity::Idle), ts);
            let ready = self.ready.readiness(stats.device);
            stats.cells.set(WorkState::Idle, ready, ts);
            stats.cells.end(ts);
        }
    }

    fn thread(&mut self, thread: ThreadId) -> &mut ThreadStats {
        let slot = self.thread_slot_cached(thread);
        &mut self.threads[slot].1
    }

    #[inline]
    fn thread_slot_cached(&mut self, thread: ThreadId) -> usize {
        match self.last_thread {
            Some((last, slot)) if last == thread => slot,
            _ => {
                let slot = self.thread_slot(thread);
                self.last_thread = Some((thread, slot));
                slot
            }
        }
    }

    #[cold]
    fn thread_slot(&mut self, thread: ThreadId) -> usize {
        let (threads, geometry) = (&mut self.threads, self.geometry);
        *self.thread_slots.entry(thread).or_insert_with(|| {
            threads.push((
                thread,
                ThreadStats {
                    timeline: StateTimeline::new(geometry),
                    cells: Cells::new(geometry),
                    running_depth: 0,
                    ops_open: 0,
                    device: None,
                    role: None,
                    worker: None,
                    tasks: 0,
                    ops: 0,
                    steals: 0,
                    spans: Vec::new(),
                    open_ops: VecDeque::new(),
                },
            ));
            threads.len() - 1
        })
    }

    #[inline]
    fn device(&mut self, device: DeviceId) -> &mut DeviceStats {
        let (index, geometry) = (usize::from(device.id()), self.geometry);
        if self.devices.len() <= index {
            self.devices.resize_with(index + 1, || None);
        }
        self.devices[index].get_or_insert_with(|| new_device(geometry))
    }

    fn stream(&mut self, event: &Event) -> &mut StreamStats {
        let geometry = self.geometry;
        self.streams
            .entry((event.device, event.stream()))
            .or_insert_with(|| StreamStats {
                timeline: StateTimeline::new(geometry),
                ops: 0,
                submitted: 0,
            })
    }

    /// The worker-ish thread behind `event`, bound to its device (and worker index). A pool
    /// worker stays bound to its pool's device: the ops it runs (recorded on the op's device,
    /// an engine pool's `cpu-prio` worker running a `cpu0` op) do not move it.
    fn worker_thread(&mut self, event: &Event) -> &mut ThreadStats {
        let thread = self.thread(event.thread);
        let pool_worker = event.worker().filter(|_| !is_op(event.kind));
        if pool_worker.is_some() || thread.worker.is_none() {
            thread.device = Some(event.device);
        }
        if pool_worker.is_some() {
            thread.worker = pool_worker;
            thread.role = event.pool_role();
        }
        thread
    }

    fn enter(&mut self, event: &Event, activity: Activity) {
        let thread = self.worker_thread(event);
        if thread.running_depth == 0 {
            thread.timeline.enter(state_index(activity), event.ts_ns);
        }
    }

    fn start_running(&mut self, event: &Event) {
        let thread = self.worker_thread(event);
        thread.running_depth += 1;
        if thread.running_depth == 1 {
            thread
                .timeline
                .enter(state_index(Activity::Running), event.ts_ns);
        }
    }

    /// Ends one level of running; returns the thread for counting.
    fn stop_running(&mut self, event: &Event) -> &mut ThreadStats {
        let thread = self.worker_thread(event);
        thread.running_depth = thread.running_depth.saturating_sub(1);
        if thread.running_depth == 0 {
            let between_tasks = state_index(thread.between_tasks());
            thread.timeline.enter(between_tasks, event.ts_ns);
        }
        thread
    }

    /// The thread of op event `event`, found once: bound to the op's device unless it is a
    /// pool worker (see [`worker_thread`](Self::worker_thread)).
    fn op_thread(&mut self, event: &Event) -> usize {
        let slot = self.thread_slot_cached(event.thread);
        let thread = &mut self.threads[slot].1;
        if thread.worker.is_none() {
            thread.device = Some(event.device);
        }
        slot
    }

    /// The op's device counts it queued; its ready work grows (every thread's cell is
    /// refreshed when that flips the device's readiness).
    #[inline]
    fn op_queued(&mut self, event: &Event) {
        self.device(event.device).queued += 1;
        if self.options.work_states && self.ready.op_queued(event.device) {
            self.refresh_all_cells(event.ts_ns);
        }
    }

    /// The op's thread runs (one level more); its start goes on the thread's stack (no
    /// hashing: almost every op ends on the thread that started it), the oldest of too many
    /// open ops moving to `in_flight`. Then the ready work and the work-state cells.
    fn op_started(&mut self, event: &Event) {
        let slot = self.op_thread(event);
        let thread = &mut self.threads[slot].1;
        thread.running_depth += 1;
        if thread.running_depth == 1 {
            thread
                .timeline
                .enter(state_index(Activity::Running), event.ts_ns);
        }
        thread.ops_open += 1;
        let spilled = if thread.open_ops.len() >= MAX_OPEN_PER_THREAD {
            thread.open_ops.pop_front()
        } else {
            None
        };
        thread
            .open_ops
            .push_back((event.op_id(), event.ts_ns, event.name));
        let flipped = self.options.work_states && self.ready.op_started(event.device);
        if self.options.work_states && !flipped {
            thread.refresh_cell(&self.ready, event.ts_ns);
        }
        if let Some((id, started, _)) = spilled {
            self.spill(id, started);
        }
        if flipped {
            self.refresh_all_cells(event.ts_ns);
        }
    }

    /// Keeps the start of an open op its thread's stack had no room for.
    #[cold]
    #[inline(never)]
    fn spill(&mut self, id: u64, started: u64) {
        if self.in_flight.len() >= MAX_IN_FLIGHT {
            self.in_flight.clear(); // their ends were dropped; forget them
        }
        self.in_flight.insert(id, started);
    }

    /// When op `id` was started, when it is not the innermost open op of its ending thread
    /// (in `slot`): deeper in that thread's stack, spilled to `in_flight`, or on another
    /// thread (an op completed asynchronously).
    #[cold]
    #[inline(never)]
    fn op_start_time_elsewhere(&mut self, slot: usize, id: u64) -> Option<u64> {
        let thread = &mut self.threads[slot].1;
        if let Some(position) = thread.open_ops.iter().rposition(|&(open, ..)| open == id) {
            return thread
                .open_ops
                .remove(position)
                .map(|(_, started, _)| started);
        }
        if let Some(started) = self.in_flight.remove(&id) {
            return Some(started);
        }
        self.threads.iter_mut().find_map(|(_, other)| {
            let position = other.open_ops.iter().rposition(|&(open, ..)| open == id)?;
            other
                .open_ops
                .remove(position)
                .map(|(_, started, _)| started)
        })
    }

    /// The op's thread runs one level less (between tasks at none) and takes its work-state
    /// cell (an end changes no device's ready work); the op's duration goes to its name's
    /// row and its end to its device. Its start is found on the thread's stack of open ops
    /// (the innermost, nearly always), else elsewhere.
    fn op_ended(&mut self, event: &Event) {
        let slot = self.op_thread(event);
        let thread = &mut self.threads[slot].1;
        thread.running_depth = thread.running_depth.saturating_sub(1);
        if thread.running_depth == 0 {
            let between_tasks = state_index(thread.between_tasks());
            thread.timeline.enter(between_tasks, event.ts_ns);
        }
        thread.ops += 1;
        thread.ops_open = thread.ops_open.saturating_sub(1);
        if self.options.work_states {
            thread.refresh_cell(&self.ready, event.ts_ns);
        }
        let id = event.op_id();
        let start = match thread.open_ops.back() {
            Some(&(open, started, _)) if open == id => {
                thread.open_ops.pop_back();
                Some(started)
            }
            _ => self.op_start_time_elsewhere(slot, id),
        };
        if let Some(start) = start {
            let duration = event.ts_ns.saturating_sub(start);
            durations(&mut self.ops, event.name).record(duration, event.is_error());
        }
        let device = self.device(event.device);
        device.ops.add(event.ts_ns);
        device.op_total += 1;
        device.op_errors += u64::from(event.is_error());
    }

    fn task_ended(&mut self, event: &Event) {
        self.stop_running(event).tasks += 1;
        let device = self.device(event.device);
        device.tasks.add(event.ts_ns);
        device.task_total += 1;
        device.task_panics += u64::from(event.is_error());
    }

    fn stolen(&mut self, event: &Event) {
        self.worker_thread(event).steals += 1;
        let key = (event.device, event.aux, event.victim());
        *self.steals.entry(key).or_insert(0) += 1;
    }

    fn span_exited(&mut self, event: &Event) {
        let thread = self.thread(event.thread);
        let Some(position) = thread.spans.iter().rposition(|&(id, _)| id == event.arg) else {
            return; // entered before the profiler saw it
        };
        let (_, entered) = thread.spans.remove(position);
        let duration = event.ts_ns.saturating_sub(entered);
        durations(&mut self.spans, event.name).record(duration, false);
    }

    /// Moves the pending durations of every duration row whose histogram already holds some
    /// into it; no figure changes. A recording's checkpoint does this before it writes the
    /// statistics, so that it holds such a row's few buckets rather than its raw durations.
    /// A row with pending durations only keeps them: folding would allocate its histogram,
    /// for buckets about as large as the durations.
    pub(crate) fn settle_durations(&mut self) {
        let rows = self.ops.iter_mut().chain(self.spans.iter_mut()).flatten();
        for row in rows.filter(|row| row.count > row.pending_len as u64) {
            row.settle();
        }
    }

    /// Everything, as plain data, with windows ending at `now_ns`.
    pub fn snapshot(&mut self, now_ns: u64) -> Snapshot {
        Snapshot {
            at_ns: now_ns,
            window_ns: u64::try_from(self.options.window.as_nanos()).unwrap_or(u64::MAX),
            workers: self.workers(now_ns),
            work_states: self.work_states(now_ns),
            steals: self.steal_list(),
            devices: self.device_list(now_ns),
            ops: durations_list(&mut self.ops),
            spans: durations_list(&mut self.spans),
            streams: self.stream_list(now_ns),
            events: self.events,
            dropped_events: self.dropped.saturating_sub(self.dropped_before_reset),
            task_sampling: Default::default(),
        }
    }

    fn workers(&self, now: u64) -> Vec<WorkerSnapshot> {
        let mut threads: Vec<&(ThreadId, ThreadStats)> = self.threads.iter().collect();
        threads.sort_by_key(|(thread, _)| *thread);
        threads
            .into_iter()
            .filter_map(|&(thread, ref stats)| {
                let state = stats.timeline.state()?;
                Some(WorkerSnapshot {
                    thread: thread.id(),
                    name: thread.name(),
                    device: stats.device,
                    role: stats.role,
                    worker: stats.worker,
                    activity: STATES[state],
                    shares: Shares::from(stats.timeline.shares(now)),
                    shares_since_start: Shares::from(stats.timeline.shares_since_start(now)),
                    lifetime_ns: stats.timeline.observed_since_start(now),
                    exited: stats.timeline.has_ended(),
                    tasks: stats.tasks,
                    ops: stats.ops,
                    steals: stats.steals,
                    current_op: stats.current_op().map(|name| name.as_str().to_string()),
                })
            })
            .collect()
    }

    /// The cells of the threads [`workers`](Self::workers) lists, in the same order.
    fn work_states(&self, now: u64) -> Vec<WorkerStates> {
        let mut states: Vec<WorkerStates> = self
            .threads
            .iter()
            .filter(|(_, stats)| stats.timeline.state().is_some())
            .map(|(thread, stats)| stats.cells.snapshot(thread.id(), now))
            .collect();
        states.sort_by_key(|states| states.thread);
        states
    }

    fn steal_list(&self) -> Vec<StealSnapshot> {
        self.steals
            .iter()
            .map(|(&(device, thief, victim), &count)| StealSnapshot {
                device,
                thief,
                victim,
                count,
            })
            .collect()
    }

    fn device_list(&self, now: u64) -> Vec<DeviceSnapshot> {
        self.devices
            .iter()
            .enumerate()
            .filter_map(|(index, stats)| Some((DeviceId::from_raw(index as u16), stats.as_ref()?)))
            .map(|(id, stats)| {
                let queues: Vec<QueueSnapshot> = stats
                    .queues
                    .iter()
                    .map(|(label, &depth)| QueueSnapshot {
                        label: label.as_str().to_string(),
                        depth,
                    })
                    .collect();
                DeviceSnapshot {
                    id: id.id(),
                    name: id.name().to_string(),
                    ops_per_s: stats.ops.per_second(now),
                    tasks_per_s: stats.tasks.per_second(now),
                    ops: stats.op_total,
                    op_errors: stats.op_errors,
                    tasks: stats.task_total,
                    task_panics: stats.task_panics,
                    queued: stats.queued,
                    queue_depth: queues.iter().map(|queue| queue.depth).sum(),
                    queues,
                    workers: stats.workers,
                    resizes: stats.resizes,
                }
            })
            .collect()
    }

    fn stream_list(&self, now: u64) -> Vec<StreamSnapshot> {
        self.streams
            .iter()
            .map(|(&(device, stream), stats)| StreamSnapshot {
                device,
                stream,
                occupancy: stats.timeline.shares(now)[0],
                ops: stats.ops,
                submitted: stats.submitted,
            })
            .collect()
    }
}

/// A fresh timeline in `timeline`'s current state since `now` (none if it never had one).
fn restarted<const K: usize>(
    timeline: &StateTimeline<K>,
    geometry: Buckets,
    now: u64,
) -> StateTimeline<K> {
    let mut fresh = StateTimeline::new(geometry);
    if let Some(state) = timeline.state() {
        fresh.enter(state, now);
        if timeline.has_ended() {
            fresh.end(state, now); // an exited thread has no lifetime after a reset
        }
    }
    fresh
}

/// Whether `kind` can change its thread's state.
fn changes_state(kind: EventKind) -> bool {
    use EventKind::*;
    matches!(
        kind,
        OpStart | OpEnd | TaskStart | TaskEnd | SpinStart | SpinEnd | Park | Unpark
    )
}

fn is_op(kind: EventKind) -> bool {
    matches!(kind, EventKind::OpStart | EventKind::OpEnd)
}

/// The durations of `name` in a table indexed by name id, created on first use.
#[inline]
fn durations(table: &mut Vec<Option<Durations>>, name: OpName) -> &mut Durations {
    let index = name.id() as usize;
    if table.len() <= index {
        table.resize_with(index + 1, || None);
    }
    table[index].get_or_insert_with(new_durations)
}

/// A device's first event: its row is made here, off the common path.
#[cold]
#[inline(never)]
fn new_device(geometry: Buckets) -> DeviceStats {
    DeviceStats {
        ops: RateCounter::new(geometry),
        tasks: RateCounter::new(geometry),
        op_total: 0,
        op_errors: 0,
        task_total: 0,
        task_panics: 0,
        queued: 0,
        queues: BTreeMap::new(),
        workers: None,
        resizes: 0,
    }
}

/// A row's first duration: its histogram is allocated here, off the common path.
#[cold]
#[inline(never)]
fn new_durations() -> Durations {
    Durations::new()
}

fn durations_list(table: &mut [Option<Durations>]) -> Vec<OpSnapshot> {
    table
        .iter_mut()
        .enumerate()
        .filter_map(|(index, durations)| {
            let name = OpName::from_id(index as u32)?;
            Some(durations.as_mut()?.snapshot(name.as_str()))
        })
        .collect()
}

#[cfg(all(test, not(loom)))]
mod tests {
    //! The statistics against a synthetic event stream whose answers are known.
    use super::*;
    use crate::profiler::event::{OpInfo, FROM_INJECTOR};

    const MS: u64 = 1_000_000;

    struct Script {
        events: Vec<Event>,
    }

    impl Script {
        fn at(&mut self, ms: u64, thread: u32, event: Event) {
            let mut event = event.at(ms * MS);
            event.thread = ThreadId::from_raw(thread);
            self.events.push(event);
        }
    }

    fn stats_of(script: &Script) -> Stats {
        let mut stats = Stats::new(StatsOptions::default());
        for event in &script.events {
            stats.ingest(event);
        }
        stats
    }

    fn worker(kind: EventKind, device: DeviceId, index: u32) -> Event {
        Event::worker_event(kind, device, index)
    }

    fn close(actual: f64, expected: f64) -> bool {
        (actual - expected).abs() < 1e-9
    }

    /// A checkpoint's settling folds the rows whose histogram holds durations and leaves
    /// the rest; every figure reads the same after.
    #[test]
    fn settling_for_a_checkpoint_folds_rows_with_buckets_and_changes_no_figure() {
        let mut stats = Stats::new(StatsOptions::default());
        let many = OpName::new("stats-test-settle-many");
        let few = OpName::new("stats-test-settle-few");
        for us in 1..=40 {
            durations(&mut stats.ops, many).record(us * 1_000, false);
        }
        for us in 1..=3 {
            durations(&mut stats.ops, few).record(us * 1_000, false);
        }
        let pending = |stats: &Stats, name: OpName| {
            stats.ops[name.id() as usize]
                .as_ref()
                .map(|row| row.pending_len)
        };
        assert_eq!(pending(&stats, many), Some(8));
        let before = format!("{:?}", stats.clone().snapshot(0).ops);
        stats.settle_durations();
        assert_eq!(pending(&stats, many), Some(0));
        assert_eq!(pending(&stats, few), Some(3));
        assert_eq!(format!("{:?}", stats.clone().snapshot(0).ops), before);
    }

    /// A collector round's batch, taken at once, leaves the statistics exactly as its
    /// events taken one by one: ops queued, started and ended (on their threads and across
    /// them), tasks, parks, spans and queue samples over several windows' worth of buckets.
    #[test]
    fn a_batch_is_ingested_as_its_events_one_by_one() {
        let pool = DeviceId::register("stats-test-batch-pool");
        let cpu = DeviceId::register("stats-test-batch-cpu");
        let (add, span) = (OpName::new("batch-add"), OpName::new("batch-span"));
        let op = |kind, id| Event::op(kind, cpu, add, OpInfo::new(id));
        let mut script = Script { events: Vec::new() };
        for k in 0..400u64 {
            let (at, thread) = (k * 7, 1 + (k % 3) as u32);
            script.at(at, 9, op(EventKind::OpQueued, k));
            script.at(at + 1, thread, worker(EventKind::TaskStart, pool, thread));
            script.at(at + 2, thread, op(EventKind::OpStart, k));
            // Every fifth op ends on another thread (completed asynchronously).
            let ender = if k % 5 == 0 { 4 } else { thread };
            script.at(at + 4, ender, op(EventKind::OpEnd, k));
            script.at(at + 5, thread, worker(EventKind::TaskEnd, pool, thread));
            script.at(at + 6, thread, worker(EventKind::Park, pool, thread));
            if k % 50 == 0 {
                let depth = Event::new(EventKind::QueueDepth, pool, add, 0, k % 3);
                script.at(at + 6, 9, depth);
                script.at(at + 3, 5, Event::new(EventKind::SpanEnter, cpu, span, 0, k));
                script.at(at + 6, 5, Event::new(EventKind::SpanExit, cpu, span, 0, k));
            }
        }
        let each = stats_of(&script);
        let mut batched = Stats::new(StatsOptions::default());
        for round in script.events.chunks(97) {
            batched.ingest_all(round);
        }
        let now = 3_000 * MS;
        assert_eq!(batched.clone().snapshot(now), each.clone().snapshot(now));
        let image = |stats: &Stats| serde_json::to_string(stats).unwrap();
        assert_eq!(image(&batched), image(&each));
    }

    /// Worker 0 of a pool, in one second: runs 0-400 ms, looks for work 400-500, spins
    /// 500-600, parks 600-1000. Worker 1 runs all second long.
    #[test]
    fn worker_shares_come_from_state_changes() {
        let pool = DeviceId::register("stats-test-pool");
        let mut script = Script { events: Vec::new() };
        script.at(0, 901, worker(EventKind::TaskStart, pool, 0));
        script.at(0, 902, worker(EventKind::TaskStart, pool, 1));
        script.at(400, 901, worker(EventKind::TaskEnd, pool, 0));
        script.at(500, 901, worker(EventKind::SpinStart, pool, 0));
        script.at(600, 901, worker(EventKind::SpinEnd, pool, 0));
        script.at(600, 901, worker(EventKind::Park, pool, 0));
        let snapshot = stats_of(&script).snapshot(1000 * MS);
        // The window at 1000 ms is [100 ms, 1000 ms]: 900 ms observed.
        let zero = &snapshot.workers[0];
        assert_eq!((zero.thread, zero.worker), (901, Some(0)));
        assert_eq!(zero.device.map(DeviceId::name), Some("stats-test-pool"));
        assert_eq!(zero.activity, Activity::Parked);
        assert!(
            close(zero.shares.running, 300.0 / 900.0),
            "{:?}",
            zero.shares
        );
        assert!(
            close(zero.shares.stealing, 100.0 / 900.0),
            "{:?}",
            zero.shares
        );
        assert!(
            close(zero.shares.spinning, 100.0 / 900.0),
            "{:?}",
            zero.shares
        );
        assert!(
            close(zero.shares.parked, 400.0 / 900.0),
            "{:?}",
            zero.shares
        );
        assert_eq!(zero.tasks, 1);
        let one = &snapshot.workers[1];
        assert_eq!(one.activity, Activity::Running);
        assert!(close(one.shares.running, 1.0));
    }

    /// Worker 0 of pool `a` runs an op, waits, parks; an op queued on `a` while it sleeps,
    /// then one on `b`, whose worker sleeps throughout.
    #[test]
    fn work_states_split_ops_from_tasks_and_follow_the_ready_work() {
        use crate::profiler::work_states::{Readiness, WorkState};
        let (a, b) = (
            DeviceId::register("stats-ws-a"),
            DeviceId::register("stats-ws-b"),
        );
        let op = |kind, device, id| Event::op(kind, device, OpName::new("ws-op"), OpInfo::new(id));
        let mut script = Script { events: Vec::new() };
        script.at(0, 922, worker(EventKind::Park, b, 0));
        script.at(0, 911, worker(EventKind::TaskStart, a, 0));
        script.at(0, 911, op(EventKind::OpQueued, a, 1));
        script.at(0, 911, op(EventKind::OpStart, a, 1));
        script.at(100, 911, op(EventKind::OpEnd, a, 1));
        script.at(100, 911, worker(EventKind::TaskEnd, a, 0));
        script.at(150, 911, worker(EventKind::Park, a, 0));
        script.at(300, 922, op(EventKind::OpQueued, a, 2));
        script.at(400, 911, worker(EventKind::Unpark, a, 0));
        script.at(400, 911, worker(EventKind::TaskStart, a, 0));
        script.at(400, 911, op(EventKind::OpStart, a, 2));
        script.at(500, 911, op(EventKind::OpEnd, a, 2));
        script.at(500, 911, worker(EventKind::TaskEnd, a, 0));
        script.at(500, 911, worker(EventKind::Park, a, 0));
        script.at(600, 911, op(EventKind::OpQueued, b, 3));
        let snapshot = stats_of(&script).snapshot(1000 * MS);
        let ns = |thread: u32, state, own, elsewhere| {
            let states = snapshot
                .work_states
                .iter()
                .find(|s| s.thread == thread)
                .unwrap();
            let ready = Readiness { own, elsewhere };
            let cell = states
                .since_start
                .iter()
                .find(|t| t.state == state && t.ready == ready);
            cell.map_or(0, |time| time.ns / MS)
        };
        assert_eq!(ns(911, WorkState::Op, false, false), 200);
        assert_eq!(ns(911, WorkState::Stealing, false, false), 50);
        assert_eq!(ns(911, WorkState::Parked, false, false), 250);
        assert_eq!(ns(911, WorkState::Parked, true, false), 100, "woken late");
        assert_eq!(
            ns(911, WorkState::Parked, false, true),
            400,
            "work elsewhere"
        );
        assert_eq!(ns(922, WorkState::Parked, false, false), 500);
        assert_eq!(ns(922, WorkState::Parked, false, true), 100);
        assert_eq!(ns(922, WorkState::Parked, true, false), 400);
        for states in &snapshot.work_states {
            let total: u64 = states.since_start.iter().map(|t| t.ns).sum();
            assert_eq!(total, 1000 * MS, "thread {}", states.thread);
        }
    }

    /// With `work_states` off, the cells keep no time; the activity shares are unchanged.
    #[test]
    fn work_states_off_keeps_no_cells() {
        let pool = DeviceId::register("stats-ws-off");
        let op = |kind| Event::op(kind, pool, OpName::new("ws-off-op"), OpInfo::new(1));
        let mut script = Script { events: Vec::new() };
        script.at(0, 931, op(EventKind::OpQueued));
        script.at(0, 931, op(EventKind::OpStart));
        script.at(100, 931, op(EventKind::OpEnd));
        let options = StatsOptions {
            work_states: false,
            ..StatsOptions::default()
        };
        let (mut off, mut on) = (Stats::new(options), stats_of(&script));
        for event in &script.events {
            off.ingest(event);
        }
        let kept = |stats: &mut Stats| -> u64 {
            let snapshot = stats.snapshot(200 * MS);
            let states = snapshot.work_states.iter();
            states.flat_map(|s| &s.since_start).map(|t| t.ns).sum()
        };
        assert_eq!(kept(&mut off), 0);
        assert!(kept(&mut on) > 0, "the cells keep time when on");
        let total = |stats: &mut Stats| stats.snapshot(200 * MS).op("ws-off-op").unwrap().total_ns;
        assert_eq!(total(&mut off), total(&mut on));
    }

    #[test]
    fn nested_op_inside_a_task_counts_running_once_and_exit_is_idle() {
        let pool = DeviceId::register("stats-test-nested");
        let op = OpInfo::new(5);
        let name = OpName::new("stats-test-op");
        let mut script = Script { events: Vec::new() };
        script.at(0, 903, worker(EventKind::TaskStart, pool, 0));
        script.at(100, 903, Event::op(EventKind::OpStart, pool, name, op));
        script.at(300, 903, Event::op(EventKind::OpEnd, pool, name, op));
        script.at(500, 903, worker(EventKind::TaskEnd, pool, 0));
        let mut stats = stats_of(&script);
        stats.thread_exited(ThreadId::from_raw(903), 800 * MS);
        let snapshot = stats.snapshot(1000 * MS);
        let shares = snapshot.workers[0].shares;
        assert!(close(shares.running, 400.0 / 900.0), "{shares:?}");
        assert!(close(shares.stealing, 300.0 / 900.0), "{shares:?}");
        assert!(close(shares.idle, 200.0 / 900.0), "{shares:?}");
        assert_eq!(snapshot.workers[0].activity, Activity::Idle);
        assert_eq!(snapshot.op("stats-test-op").unwrap().total_ns, 200 * MS);
    }

    /// A thread a resize retired stops counting at its exit: its shares since the start are
    /// of its lifetime (they add up to 1 over it), not diluted by idle time after it.
    #[test]
    fn an_exited_threads_shares_since_the_start_are_of_its_lifetime() {
        let pool = DeviceId::register("stats-test-retired");
        let mut script = Script { events: Vec::new() };
        script.at(0, 905, worker(EventKind::TaskStart, pool, 1));
        script.at(300, 905, worker(EventKind::TaskEnd, pool, 1));
        script.at(400, 905, worker(EventKind::Park, pool, 1));
        let mut stats = stats_of(&script);
        stats.thread_exited(ThreadId::from_raw(905), 500 * MS);
        let snapshot = stats.snapshot(2000 * MS);
        let retired = &snapshot.workers[0];
        assert!(retired.exited);
        assert_eq!(retired.lifetime_ns, 500 * MS);
        let shares = retired.shares_since_start;
        assert!(close(shares.running, 0.6), "{shares:?}");
        assert!(close(shares.stealing, 0.2), "{shares:?}");
        assert!(close(shares.parked, 0.2), "{shares:?}");
        assert_eq!(shares.idle, 0.0, "{shares:?}");
        // A reset after the exit leaves it no lifetime, not a growing idle one.
        stats.reset(2000 * MS);
        assert_eq!(stats.snapshot(3000 * MS).workers[0].lifetime_ns, 0);
    }

    /// A thread outside any pool (a GPU worker) is idle between its ops, not "stealing".
    #[test]
    fn a_thread_outside_pools_is_idle_between_ops() {
        let gpu = DeviceId::register("stats-test-gpu");
        let name = OpName::new("stats-test-gpu-op");
        let mut script = Script { events: Vec::new() };
        script.at(
            100,
            904,
            Event::op(EventKind::OpStart, gpu, name, OpInfo::new(7)),
        );
        script.at(
            400,
            904,
            Event::op(EventKind::OpEnd, gpu, name, OpInfo::new(7)),
        );
        let snapshot = stats_of(&script).snapshot(1000 * MS);
        let thread = &snapshot.workers[0];
        assert_eq!(thread.worker, None);
        assert_eq!(thread.activity, Activity::Idle);
        assert!(
            close(thread.shares.running, 300.0 / 900.0),
            "{:?}",
            thread.shares
        );
        assert!(close(thread.shares.stealing, 0.0), "{:?}", thread.shares);
        assert!(
            close(thread.shares.idle, 600.0 / 900.0),
            "{:?}",
            thread.shares
        );
    }

    /// A worker's current op is the innermost op it runs; none between ops or in a bare task.
    #[test]
    fn current_op_is_the_innermost_running_op() {
        let pool = DeviceId::register("stats-test-current");
        let (outer, inner) = (
            OpName::new("stats-test-outer"),
            OpName::new("stats-test-inner"),
        );
        let current_after = |events: &[(u64, Event)]| {
            let mut script = Script { events: Vec::new() };
            for (ms, event) in events {
                script.at(*ms, 970, *event);
            }
            stats_of(&script).snapshot(100 * MS).workers[0]
                .current_op
                .clone()
        };
        let task = worker(EventKind::TaskStart, pool, 0);
        let outer_start = Event::op(EventKind::OpStart, pool, outer, OpInfo::new(1));
        let inner_start = Event::op(EventKind::OpStart, pool, inner, OpInfo::new(2));
        let inner_end = Event::op(EventKind::OpEnd, pool, inner, OpInfo::new(2));
        let outer_end = Event::op(EventKind::OpEnd, pool, outer, OpInfo::new(1));
        let mut events = vec![(0, task)];
        assert_eq!(current_after(&events), None, "a task without an op");
        events.push((1, outer_start));
        assert_eq!(current_after(&events).as_deref(), Some("stats-test-outer"));
        events.push((2, inner_start));
        assert_eq!(current_after(&events).as_deref(), Some("stats-test-inner"));
        events.push((3, inner_end));
        assert_eq!(current_after(&events).as_deref(), Some("stats-test-outer"));
        events.push((4, outer_end));
        assert_eq!(current_after(&events), None, "between ops");
    }

    #[test]
    fn percentiles_count_durations_still_waiting_for_the_histogram() {
        let mut durations = Durations::new();
        let check = |durations: &mut Durations, median_ms: u64, longest_ms: u64| {
            let row = durations.snapshot("batched");
            let near =
                |ns: u64, ms: u64| (ns as f64 - (ms * MS) as f64).abs() <= 0.01 * (ms * MS) as f64;
            assert!(
                near(row.p50_ns, median_ms) && near(row.p99_ns, longest_ms),
                "{row:?}"
            );
        };
        for ms in 1..=3 {
            durations.record(ms * MS, false);
        }
        check(&mut durations, 2, 3); // all three pending
                                     // After that snapshot took them: a batch, then two more pending. Odd: the median is
                                     // one of them.
        let recorded = PENDING_DURATIONS as u64 + 5;
        for ms in 4..=recorded {
            durations.record(ms * MS, false);
        }
        check(&mut durations, recorded.div_ceil(2), recorded);
        let row = durations.snapshot("batched");
        assert_eq!(row.count, recorded, "a snapshot settles each once");
    }

    /// Ten ops of 1..=10 ms, the third one failing, on two threads; one end without a start.
    #[test]
    fn op_table_counts_each_op_once_with_known_aggregates() {
        let cpu = DeviceId::register("stats-test-cpu");
        let name = OpName::new("stats-test-gemm");
        let mut script = Script { events: Vec::new() };
        for k in 1..=10u64 {
            let op = OpInfo::new(k);
            let thread = 910 + (k % 2) as u32;
            script.at(k * 20, 1, Event::op(EventKind::OpQueued, cpu, name, op));
            script.at(
                k * 20 + 1,
                thread,
                Event::op(EventKind::OpStart, cpu, name, op),
            );
            let end = Event::op(EventKind::OpEnd, cpu, name, op).with_error(k == 3);
            script.at(k * 20 + 1 + k, thread, end);
        }
        let orphan = OpName::new("stats-test-orphan");
        script.at(
            400,
            912,
            Event::op(EventKind::OpEnd, cpu, orphan, OpInfo::new(99)),
        );
        let snapshot = stats_of(&script).snapshot(500 * MS);
        let gemm = snapshot.op("stats-test-gemm").unwrap();
        assert_eq!((gemm.count, gemm.errors), (10, 1));
        assert_eq!(gemm.total_ns, 55 * MS);
        assert_eq!((gemm.min_ns, gemm.max_ns), (MS, 10 * MS));
        assert!(close(gemm.mean_ns, 5.5 * MS as f64));
        // hdrhistogram at 2 significant digits: within 1%.
        assert!((gemm.p50_ns as f64 - 5.0 * MS as f64).abs() <= 0.01 * 5.0 * MS as f64);
        assert!((gemm.p99_ns as f64 - 10.0 * MS as f64).abs() <= 0.01 * 10.0 * MS as f64);
        // The bucket holding 10 ms reports a value above it; the table never shows one.
        assert_eq!(gemm.p99_ns, gemm.max_ns);
        // An end whose start was never seen has no duration: the device counts it, the op
        // table (durations) does not.
        assert!(snapshot.op("stats-test-orphan").is_none());
        let device = snapshot.device("stats-test-cpu").unwrap();
        assert_eq!((device.ops, device.op_errors, device.queued), (11, 1, 10));
        // 11 ops ended between 22 ms and 400 ms, seen at 500 ms: 11 / 0.478 s.
        assert!(
            close(device.ops_per_s, 11.0 / 0.478),
            "{}",
            device.ops_per_s
        );
    }

    /// Each op's end pairs with its own start however the ends come: the innermost first
    /// (the common case), an outer one first, on another thread, or after more starts than a
    /// thread's stack holds (the oldest spilled to the shared map).
    #[test]
    fn op_ends_pair_with_their_own_starts_in_any_order() {
        let cpu = DeviceId::register("stats-test-pairing");
        let name = OpName::new("stats-test-paired");
        let mut script = Script { events: Vec::new() };
        let op = |kind, k| Event::op(kind, cpu, name, OpInfo::new(k));
        // Thread 930: ops 1..=opened all open at once (the oldest three spilled), ended
        // oldest first: op k from k ms to 1000 + 2k ms, 1000 + k ms long.
        let opened = MAX_OPEN_PER_THREAD as u64 + 3;
        for k in 1..=opened {
            script.at(k, 930, op(EventKind::OpStart, k));
        }
        for k in 1..=opened {
            script.at(1_000 + 2 * k, 930, op(EventKind::OpEnd, k));
        }
        // Thread 931: op 1001 inside op 1000, the outer ending first; op 1002 ends on thread
        // 932; op 1003 ends where it started, nothing else open.
        script.at(2_000, 931, op(EventKind::OpStart, 1_000));
        script.at(2_500, 931, op(EventKind::OpStart, 1_001));
        script.at(3_000, 931, op(EventKind::OpEnd, 1_000)); // 1000 ms
        script.at(3_001, 931, op(EventKind::OpEnd, 1_001)); // 501 ms
        script.at(3_100, 931, op(EventKind::OpStart, 1_002));
        script.at(3_200, 932, op(EventKind::OpEnd, 1_002)); // 100 ms
        script.at(3_300, 931, op(EventKind::OpStart, 1_003));
        script.at(3_307, 931, op(EventKind::OpEnd, 1_003)); // 7 ms
        let snapshot = stats_of(&script).snapshot(5_000 * MS);
        let row = snapshot.op("stats-test-paired").unwrap();
        let total_ms = opened * 1_000 + opened * (opened + 1) / 2 + 1_000 + 501 + 100 + 7;
        assert_eq!(row.count, opened + 4);
        assert_eq!(row.total_ns, total_ms * MS);
        assert_eq!((row.min_ns, row.max_ns), (7 * MS, (1_000 + opened) * MS));
    }

    #[test]
    fn steals_queues_resizes_and_streams() {
        let pool = DeviceId::register("stats-test-steals");
        let gpu = DeviceId::register("stats-test-gpu");
        let depth =
            |label: &str, n| Event::new(EventKind::QueueDepth, pool, OpName::new(label), 0, n);
        let kernel = OpName::new("stats-test-kernel");
        let stream = |kind| Event::new(kind, gpu, kernel, 1, 7);
        let mut script = Script { events: Vec::new() };
        for _ in 0..3 {
            script.at(
                1,
                920,
                Event::new(EventKind::Steal, pool, OpName::UNNAMED, 1, 0),
            );
        }
        script.at(
            2,
            921,
            Event::new(EventKind::Steal, pool, OpName::UNNAMED, 0, FROM_INJECTOR),
        );
        script.at(
            3,
            1,
            Event::new(EventKind::PoolResized, pool, OpName::UNNAMED, 0, 2),
        );
        script.at(
            4,
            1,
            Event::new(EventKind::PoolResized, pool, OpName::UNNAMED, 2, 4),
        );
        script.at(5, 1, depth("w0", 3));
        script.at(6, 1, depth("w1", 4));
        script.at(7, 1, depth("w0", 1));
        script.at(100, 930, stream(EventKind::StreamSubmit));
        script.at(200, 930, stream(EventKind::StreamStart));
        script.at(500, 930, stream(EventKind::StreamEnd));
        let snapshot = stats_of(&script).snapshot(1000 * MS);
        let steals: Vec<(u32, Option<u32>, u64)> = snapshot
            .steals
            .iter()
            .map(|steal| (steal.thief, steal.victim, steal.count))
            .collect();
        assert_eq!(steals, [(0, None, 1), (1, Some(0), 3)]);
        let device = snapshot.device("stats-test-steals").unwrap();
        assert_eq!((device.workers, device.resizes), (Some(4), 2));
        assert_eq!(device.queue_depth, 5);
        let streams = &snapshot.streams[0];
        assert_eq!((streams.stream, streams.ops, streams.submitted), (1, 1, 1));
        // Busy 200-500 ms of the observed 200-1000 ms.
        assert!(
            close(streams.occupancy, 300.0 / 800.0),
            "{}",
            streams.occupancy
        );
    }

    /// After a reset every count is zero, shares restart from the reset, and the workers,
    /// their states and open ops are still known (an op open across the reset counts once).
    #[test]
    fn reset_zeroes_counts_and_keeps_live_workers() {
        let pool = DeviceId::register("stats-test-reset");
        let name = OpName::new("stats-test-reset-op");
        let mut script = Script { events: Vec::new() };
        script.at(0, 950, worker(EventKind::TaskStart, pool, 2));
        script.at(
            1,
            950,
            Event::new(EventKind::Steal, pool, OpName::UNNAMED, 2, 0),
        );
        script.at(10, 950, worker(EventKind::TaskEnd, pool, 2));
        script.at(
            20,
            950,
            Event::op(EventKind::OpStart, pool, name, OpInfo::new(1)),
        );
        script.at(
            30,
            950,
            Event::op(EventKind::OpEnd, pool, name, OpInfo::new(1)),
        );
        script.at(
            40,
            950,
            Event::op(EventKind::OpStart, pool, name, OpInfo::new(2)),
        );
        let mut stats = stats_of(&script);
        stats.set_dropped(7);
        stats.reset(100 * MS);
        let snapshot = stats.snapshot(100 * MS);
        assert_eq!((snapshot.events, snapshot.dropped_events), (0, 0));
        assert!(snapshot.ops.is_empty() && snapshot.steals.is_empty());
        let device = snapshot.device("stats-test-reset").unwrap();
        assert_eq!((device.ops, device.tasks, device.queued), (0, 0, 0));
        let kept = &snapshot.workers[0];
        assert_eq!((kept.thread, kept.worker), (950, Some(2)));
        assert_eq!(kept.activity, Activity::Running);
        assert_eq!((kept.tasks, kept.ops, kept.steals), (0, 0, 0));
        // The drops since the reset, and the op open across it.
        stats.set_dropped(9);
        let mut end = Event::op(EventKind::OpEnd, pool, name, OpInfo::new(2)).at(200 * MS);
        end.thread = ThreadId::from_raw(950);
        stats.ingest(&end);
        let snapshot = stats.snapshot(300 * MS);
        assert_eq!(snapshot.dropped_events, 2);
        let op = snapshot.op("stats-test-reset-op").unwrap();
        assert_eq!((op.count, op.total_ns), (1, 160 * MS));
        // Running 100-200 ms, then looking for work 200-300 ms: shares since the reset.
        let shares = snapshot.workers[0].shares;
        assert!(close(shares.running, 0.5), "{shares:?}");
        assert!(close(shares.stealing, 0.5), "{shares:?}");
    }

    /// A priority-pool worker running an op recorded on another device stays in its pool;
    /// a thread that is no pool's worker (the naive engine's driver) goes with its ops.
    #[test]
    fn pool_workers_stay_bound_to_their_pool() {
        let prio = DeviceId::register("stats-test-prio");
        let cpu = DeviceId::register("stats-test-cpu0");
        let name = OpName::new("stats-test-prio-op");
        let mut script = Script { events: Vec::new() };
        script.at(0, 960, worker(EventKind::TaskStart, prio, 1));
        script.at(
            1,
            960,
            Event::op(EventKind::OpStart, cpu, name, OpInfo::new(1)),
        );
        script.at(
            2,
            961,
            Event::op(EventKind::OpStart, cpu, name, OpInfo::new(2)),
        );
        let snapshot = stats_of(&script).snapshot(10 * MS);
        let bound: Vec<(u32, Option<&str>, Option<u32>)> = snapshot
            .workers
            .iter()
            .map(|w| (w.thread, w.device.map(DeviceId::name), w.worker))
            .collect();
        assert_eq!(
            bound,
            [
                (960, Some("stats-test-prio"), Some(1)),
                (961, Some("stats-test-cpu0"), None)
            ]
        );
    }

    /// The role a pool's probe stamps on its events is the worker's in the snapshot, and
    /// the ops it runs on another device change neither its device nor its role.
    #[test]
    fn pool_workers_carry_their_pools_role() {
        use crate::device::identity::{Device, PoolId};
        let gpu = DeviceId::of(Device::Gpu(0));
        let prio = DeviceId::of_pool(PoolId::CPU_PRIORITY);
        let cpu = DeviceId::of(Device::Cpu(0));
        let name = OpName::new("stats-test-role-op");
        let mut script = Script { events: Vec::new() };
        let copy = worker(EventKind::Park, gpu, 1).with_pool_role(PoolRole::GpuCopy);
        let compute = worker(EventKind::Park, gpu, 1).with_pool_role(PoolRole::GpuCompute);
        let priority = worker(EventKind::TaskStart, prio, 0).with_pool_role(PoolRole::CpuPriority);
        script.at(0, 970, copy);
        script.at(0, 971, compute);
        script.at(0, 972, priority);
        script.at(
            1,
            972,
            Event::op(EventKind::OpStart, cpu, name, OpInfo::new(1)),
        );
        let snapshot = stats_of(&script).snapshot(10 * MS);
        let roles: Vec<_> = snapshot
            .workers
            .iter()
            .map(|w| {
                (
                    w.thread,
                    w.device.and_then(DeviceId::device),
                    w.role,
                    w.worker,
                )
            })
            .collect();
        assert_eq!(
            roles,
            [
                (970, Some(Device::Gpu(0)), Some(PoolRole::GpuCopy), Some(1)),
                (
                    971,
                    Some(Device::Gpu(0)),
                    Some(PoolRole::GpuCompute),
                    Some(1)
                ),
                (
                    972,
                    Some(Device::Cpu(0)),
                    Some(PoolRole::CpuPriority),
                    Some(0)
                ),
            ]
        );
        assert_eq!(snapshot.workers[2].device, Some(prio));
    }

    #[test]
    fn spans_are_timed_by_name_per_thread() {
        let span = OpName::new("stats-test-span");
        let enter = |id| Event::new(EventKind::SpanEnter, DeviceId::HOST, span, 0, id);
        let exit = |id| Event::new(EventKind::SpanExit, DeviceId::HOST, span, 0, id);
        let mut script = Script { events: Vec::new() };
        script.at(10, 940, enter(1));
        script.at(12, 940, enter(2));
        script.at(15, 940, exit(2));
        script.at(20, 940, exit(1));
        script.at(30, 940, exit(3)); // entered before we looked
        let snapshot = stats_of(&script).snapshot(100 * MS);
        let spans = &snapshot.spans[0];
        assert_eq!((spans.count, spans.total_ns), (2, 13 * MS));
        assert!(snapshot.workers.is_empty(), "spans are not worker states");
    }
}
