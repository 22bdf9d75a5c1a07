//! The profiler: every thread records small events into its own lock-free ring; one
//! collector thread turns them into live statistics and a bounded trace window; exporters turn
//! those into a Chrome trace and an MXNet-style summary.
//!
//! ```text
//! pool / engine / device thread --record(Event)--> its own SPSC ring  (ring.rs, local.rs)
//!                                                       |  registered with the shared
//!                                                       |  state (core.rs), drained
//!                                                       |  every 1-10 ms
//!                                                 `profiler` thread   (collector.rs)
//!                                     +-----------------+------------------+
//!                               live Stats -> Snapshot            trace window (window.rs)
//!                               (stats.rs; dashboard, summary.rs)  -> Chrome JSON (chrome.rs)
//!                     sinks (EventSink): a recording; the op spans (spans.rs) of the
//!                     dashboard's timeline
//! ```
//!
//! # Recording
//! A [`Profiler`] is a cheap, cloneable handle. Recording through it never blocks and never
//! allocates (after a thread's first event, which registers its ring): it reads the clock
//! (see [`now_ns`]), finds the thread's ring through a (`const`-initialised) thread-local,
//! copies 32 bytes in and publishes them with one release store. A full ring drops the event
//! and counts it; the count is in every [`Snapshot`] (`dropped_events`) and every exported
//! trace. A disabled profiler ([`Profiler::disabled`], `--no-profile`) costs one branch per
//! recording site.
//!
//! Events that happen at one point of the code go in together
//! ([`Profiler::record_at_once`]): one clock read and one ring lookup for all of them. The
//! engine reports an op's end with the queueing of the ops its completion made ready that
//! way, so an op made ready by a completion costs two clock reads of its own (its start and
//! its end; its queueing rides on its predecessor's end), not three. Only such events share
//! a stamp; every other event reads the clock itself.
//!
//! `enginetop bench profiler` measures all this: `record_event` is the honest per-event
//! figure (clock read included, one event per read); its `engine_mix` variant is the
//! engine's mix per event (an op's start, then its end and its successor's queueing at once:
//! three events, two clock reads); `collect_event` is the collector's share,
//! and `random_dag` what profiling costs the engine benchmark (with the events dropped, which
//! make a ratio look better than it is).
//!
//! # What records what
//! - Pools: install [`Profiler::pool_observer`] (or [`Profiler::instrument_pool`], which adds
//!   nothing when profiling is off): task start/end, steals, spins, parks, resizes. Queue
//!   depths are sampled by the collector every 10 ms ([`Profiler::watch_queues`]) rather than
//!   recorded per push, so scheduling pays nothing for them; a sample is recorded when the
//!   depth changed.
//! - The engine and devices: [`Profiler::op_queued`], [`Profiler::op_start`],
//!   [`Profiler::op_end`], the `stream_*` calls for GPU streams, [`Profiler::queue_depth`].
//! - Users: `tracing` spans, through [`ProfilerLayer`].
//!
//! # Wiring the engine
//! The engine keeps a `Profiler` (a clone of the app's, or `Profiler::disabled()` for
//! `--no-profile`) and an `OpInfo` per op; a few lines cover it:
//! ```text
//! // per device, once:     let device = DeviceId::of(Device::Cpu(0));
//! // per pool, once:       PoolProbe::for_pool(&profiler, pool_id).task_events(false) (ops
//! //                       time themselves) as its observer, plus
//! //                       profiler.watch_queues(DeviceId::of_pool(pool_id), Arc::downgrade(&pool))
//! // per op:               let info = OpInfo::new(seq).priority(priority).property(prop as u8);
//! // ready, on its queue:  profiler.op_queued(device, name, info);
//! // worker, around body:  profiler.op_start(device, name, info); ... ;
//! //                       profiler.op_end(device, name, info, failed);
//! // GPU streams:          stream_submit(device, stream, name, id, ts) at launch;
//! //                       stream_start / stream_end(device, stream, name, id, ts_ns) when timed
//! ```
//! Names: events carry the engine's interned [`OpName`] (ops, spans, queue labels), one
//! process-wide table, so an engine op's name is recorded as it is pushed.
//!
//! ```
//! use enginetop::profiler::{DeviceId, OpName, OpInfo, Profiler, ProfilerOptions};
//! let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
//! let (cpu, gemm) = (DeviceId::register("cpu0"), OpName::new("gemm"));
//! let op = OpInfo::new(1);
//! profiler.op_queued(cpu, gemm, op);
//! profiler.op_start(cpu, gemm, op);
//! profiler.op_end(cpu, gemm, op, false);
//! profiler.flush();
//! assert_eq!(profiler.snapshot().op("gemm").unwrap().count, 1);
//! ```
// `unsafe` is denied here and forbidden in every submodule but `ring`, which allows it.
#![deny(unsafe_code)]

pub(crate) mod chrome;
pub(crate) mod clock;
mod collector;
mod core;
pub(crate) mod demo;
mod engine_probe;
pub(crate) mod event;
pub(crate) mod layer;
mod local;
mod names;
pub(crate) mod pairs;
mod pool_probe;
mod ring;
pub(crate) mod spans;
pub(crate) mod stats;
pub(crate) mod stream_probe;
mod summary;
mod task_counts;
mod timeline;
mod trace_time;
pub(crate) mod validate;
mod window;
mod work_states;

use std::io::Write;
use std::path::Path;
use std::time::Duration;

pub use crate::engine::OpName;
pub use chrome::ExportReport;
pub use clock::now_ns;
pub use core::{EventSink, Gap, QueueDepth, QueueDepthSource, Round};
pub use demo::{run_pool_demo, DemoOptions, DemoReport};
pub use engine_probe::EngineProbe;
pub use event::{Event, EventKind, OpInfo};
pub use layer::{init_logging, LevelFilter, LogTarget, LoggingGuard, ProfilerLayer};
pub use names::{name_current_thread, DeviceId, ThreadId};
pub use pool_probe::PoolProbe;
pub use spans::{OpSpan, SpanSnapshot};
pub use stats::{
    Activity, DeviceSnapshot, OpSnapshot, QueueSnapshot, Shares, Snapshot, Stats, StatsOptions,
    StealSnapshot, StreamSnapshot, WorkerSnapshot,
};
pub use stream_probe::StreamProbe;
pub use summary::{SortKey, Summary};
pub use task_counts::TaskSampling;
pub(crate) use task_counts::{TaskCounts, TaskReading};
pub use validate::{validate_file, validate_json, TraceProblem, TraceProblems, TraceSummary};
pub(crate) use window::is_worker_event;
pub use window::WindowOptions;
pub use work_states::{Readiness, StateTime, WorkState, WorkerStates};

use crate::pool::{PoolObserver, PoolOptions};
use crate::sync::{thread, Arc, Mutex};
use core::Core;

/// How a profiler is set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProfilerOptions {
    /// Events each thread's ring holds (rounded up to a power of two; 32 bytes each).
    pub ring_capacity: usize,
    /// How long the collector waits between rounds while the rings fill slowly.
    pub drain_interval: Duration,
    /// The shortest wait it shortens that to while a ring fills fast (at most
    /// `drain_interval`; see the collector's cadence).
    pub busy_drain_interval: Duration,
    /// How often the collector samples watched queue depths.
    pub queue_sample_interval: Duration,
    /// The sliding window of the live statistics.
    pub stats: StatsOptions,
    /// The trace window kept for export.
    pub window: WindowOptions,
    /// Whether pool probes may record a sample of their tasks' events when tasks come too
    /// fast to record them all (every task is still counted; see [`PoolProbe`]). Off, every
    /// task's start and end are recorded.
    pub sample_pool_tasks: bool,
}

impl Default for ProfilerOptions {
    /// 65,536-event rings (2 MiB per thread), drained every 10 ms, or down to every 1 ms
    /// while a ring fills fast (the collector's cadence), queues sampled every 10 ms, a 1 s
    /// statistics window, a 16 MiB / 10 s trace window, pool task events sampled when tasks
    /// come too fast.
    fn default() -> Self {
        ProfilerOptions {
            ring_capacity: 1 << 16,
            drain_interval: Duration::from_millis(10),
            busy_drain_interval: Duration::from_millis(1),
            queue_sample_interval: Duration::from_millis(10),
            stats: StatsOptions::default(),
            window: WindowOptions::default(),
            sample_pool_tasks: true,
        }
    }
}

impl ProfilerOptions {
    fn validate(&self) -> Result<(), ProfilerError> {
        let bad = |option, value: String, fix| Err(ProfilerError::BadOption { option, value, fix });
        if !(2..=1 << 24).contains(&self.ring_capacity) {
            let fix = "use between 2 and 16,777,216 events";
            return bad("ring_capacity", self.ring_capacity.to_string(), fix);
        }
        let intervals = [
            ("drain_interval", self.drain_interval),
            ("busy_drain_interval", self.busy_drain_interval),
            ("queue_sample_interval", self.queue_sample_interval),
        ];
        if let Some((option, _)) = intervals.iter().find(|(_, interval)| interval.is_zero()) {
            return bad(option, "0ns".into(), "use a positive duration");
        }
        if self.stats.window.is_zero() {
            return bad("stats.window", "0s".into(), "use a positive duration");
        }
        Ok(())
    }
}

/// Errors from starting, exporting or wiring the profiler.
#[derive(Debug, thiserror::Error)]
pub enum ProfilerError {
    /// An option out of range.
    #[error("profiler option `{option}` = {value} is out of range: {fix}")]
    BadOption {
        /// Which option.
        option: &'static str,
        /// Its value.
        value: String,
        /// What to use instead.
        fix: &'static str,
    },
    /// The collector thread could not be started.
    #[error("could not start the `profiler` collector thread: {0}; run with --no-profile")]
    Spawn(std::io::Error),
    /// Writing a trace failed. The OS error is the source (not quoted): print the chain.
    #[error(
        "could not write the trace to `{path}` (check that its directory exists and is \
         writable, and that the disk has room)"
    )]
    WriteTrace {
        /// Where.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Writing to a caller's writer failed. The I/O error is the source.
    #[error("could not write the trace")]
    Io(#[from] std::io::Error),
    /// A global `tracing` subscriber is already installed.
    #[error("a global tracing subscriber is already installed; add `ProfilerLayer` to it instead of calling init_logging")]
    SubscriberAlreadySet,
    /// The log file could not be opened. The OS error is the source (not quoted).
    #[error(
        "could not open the log file `{path}` (check that its directory exists and is \
         writable)"
    )]
    LogFile {
        /// Where.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A summary sort key that is not one of ours.
    #[error("unknown sort key `{0}`: use one of total, avg, min, max, count")]
    UnknownSortKey(String),
}

/// Stops and joins the collector when the last handle goes; keeps what the profiler was told
/// about its devices.
struct Owner {
    core: Arc<Core>,
    collector: Mutex<Option<thread::JoinHandle<()>>>,
    /// Device descriptions for the trace ([`Profiler::describe_device`]), in order given.
    labels: Mutex<Vec<(DeviceId, String)>>,
}

impl Owner {
    fn stop(&self) {
        self.core.request_stop();
        let Some(collector) = self.collector.lock().take() else {
            return;
        };
        // The last handle can go on the collector itself (it briefly owns a watched pool,
        // whose observer holds a handle): it is already stopping and cannot join itself.
        if collector.thread().id() != thread::current().id() {
            let _ = collector.join();
        }
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The handle everything records through; cheap to clone, one branch when disabled.
#[derive(Clone, Default)]
pub struct Profiler {
    core: Option<Arc<Core>>,
    owner: Option<Arc<Owner>>,
}

impl std::fmt::Debug for Profiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profiler")
            .field("enabled", &self.is_enabled())
            .finish()
    }
}

impl Profiler {
    /// Starts a profiler and its `profiler` collector thread.
    pub fn new(options: ProfilerOptions) -> Result<Profiler, ProfilerError> {
        options.validate()?;
        let core = Arc::new(Core::new(options));
        let collector = collector::spawn(core.clone()).map_err(ProfilerError::Spawn)?;
        Ok(Profiler {
            core: Some(core.clone()),
            owner: Some(Arc::new(Owner {
                core,
                collector: Mutex::new(Some(collector)),
                labels: Mutex::new(Vec::new()),
            })),
        })
    }

    /// A profiler that records nothing: every recording site costs one branch.
    ///
    /// ```
    /// let off = enginetop::profiler::Profiler::disabled();
    /// assert!(!off.is_enabled());
    /// assert_eq!(off.snapshot().events, 0);
    /// ```
    pub fn disabled() -> Profiler {
        Profiler::default()
    }

    /// Whether events are recorded.
    pub fn is_enabled(&self) -> bool {
        self.core.is_some()
    }

    /// Records `event` with the current time as its timestamp.
    #[inline]
    pub fn record(&self, event: Event) {
        if let Some(core) = &self.core {
            core.record_now(event);
        }
    }

    /// Records `events`, in order, with one reading of the current time as all their
    /// timestamps: for events that happen at one point of the code (an op's end and the
    /// queueing of the ops it made ready), so they pay for one clock read and one
    /// thread-local lookup between them.
    ///
    /// ```
    /// use enginetop::profiler::{DeviceId, Event, EventKind, OpName, OpInfo, Profiler};
    /// let profiler = Profiler::new(Default::default()).unwrap();
    /// let (cpu, op) = (DeviceId::register("doc-once"), OpName::new("doc-once"));
    /// profiler.op_start(cpu, op, OpInfo::new(1));
    /// profiler.record_at_once([
    ///     Event::op(EventKind::OpEnd, cpu, op, OpInfo::new(1)),
    ///     Event::op(EventKind::OpQueued, cpu, op, OpInfo::new(2)),
    /// ]);
    /// profiler.flush();
    /// assert_eq!(profiler.snapshot().events, 3);
    /// ```
    #[inline]
    pub fn record_at_once(&self, events: impl IntoIterator<Item = Event>) {
        if let Some(core) = &self.core {
            core.record_all_now(events);
        }
    }

    /// Records `event` with the timestamp it carries (for times measured elsewhere, e.g. a
    /// GPU's own clock converted to [`now_ns`]'s epoch).
    #[inline]
    pub fn record_at(&self, event: Event) {
        if let Some(core) = &self.core {
            core.record_at(event);
        }
    }

    /// Op `op` (named `name`) became ready and was put on `device`'s queue.
    #[inline]
    pub fn op_queued(&self, device: DeviceId, name: OpName, op: OpInfo) {
        self.record(Event::op(EventKind::OpQueued, device, name, op));
    }

    /// Op `op` starts running on the calling thread.
    #[inline]
    pub fn op_start(&self, device: DeviceId, name: OpName, op: OpInfo) {
        self.record(Event::op(EventKind::OpStart, device, name, op));
    }

    /// Op `op` finished on the calling thread (`error`: it failed).
    #[inline]
    pub fn op_end(&self, device: DeviceId, name: OpName, op: OpInfo, error: bool) {
        self.record(Event::op(EventKind::OpEnd, device, name, op).with_error(error));
    }

    /// GPU op `op` was submitted to `stream` of `device` (the host side of a launch) at
    /// `ts` (ns since the process epoch). The stream's start and end come on the same
    /// clock, so a kernel never appears to start before its launch.
    #[inline]
    pub fn stream_submit(&self, device: DeviceId, stream: u32, name: OpName, op: u64, ts: u64) {
        self.stream_event(EventKind::StreamSubmit, device, stream, name, op, ts);
    }

    /// GPU op `op` started on `stream` at `ts` (ns since the process epoch).
    #[inline]
    pub fn stream_start(&self, device: DeviceId, stream: u32, name: OpName, op: u64, ts: u64) {
        self.stream_event(EventKind::StreamStart, device, stream, name, op, ts);
    }

    /// GPU op `op` finished on `stream` at `ts` (ns since the process epoch).
    #[inline]
    pub fn stream_end(&self, device: DeviceId, stream: u32, name: OpName, op: u64, ts: u64) {
        self.stream_event(EventKind::StreamEnd, device, stream, name, op, ts);
    }

    #[inline]
    fn stream_event(
        &self,
        kind: EventKind,
        device: DeviceId,
        stream: u32,
        name: OpName,
        op: u64,
        ts: u64,
    ) {
        self.record_at(Event::new(kind, device, name, stream, op).at(ts));
    }

    /// `queue` of `device` holds `depth` entries now.
    #[inline]
    pub fn queue_depth(&self, device: DeviceId, queue: OpName, depth: u64) {
        self.record(Event::new(EventKind::QueueDepth, device, queue, 0, depth));
    }

    /// Describes `device` to whoever opens the trace: exported traces label its process
    /// with `label` (`process_labels` metadata, shown beside the process name) and list it in
    /// `otherData.device_labels`, if the device has events in the trace. A second call for
    /// the same device replaces the label. Nothing happens when profiling is off.
    ///
    /// ```
    /// use enginetop::profiler::{DeviceId, OpName, OpInfo, Profiler, ProfilerOptions};
    /// let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
    /// let gpu = DeviceId::register("doc-gpu0");
    /// profiler.describe_device(gpu, "simulated GPU, model: 670 GFLOP/s");
    /// profiler.op_start(gpu, OpName::new("k"), OpInfo::new(1));
    /// profiler.op_end(gpu, OpName::new("k"), OpInfo::new(1), false);
    /// let mut json = Vec::new();
    /// profiler.export_chrome(&mut json).unwrap();
    /// let trace: serde_json::Value = serde_json::from_slice(&json).unwrap();
    /// let label = &trace["otherData"]["device_labels"]["doc-gpu0"];
    /// assert_eq!(label, "simulated GPU, model: 670 GFLOP/s");
    /// ```
    pub fn describe_device(&self, device: DeviceId, label: impl Into<String>) {
        let Some(owner) = &self.owner else {
            return;
        };
        let label = label.into();
        let mut labels = owner.labels.lock();
        match labels.iter_mut().find(|(known, _)| *known == device) {
            Some((_, existing)) => *existing = label,
            None => labels.push((device, label)),
        }
    }

    /// The device descriptions given so far ([`describe_device`](Self::describe_device)).
    pub fn device_labels(&self) -> Vec<(DeviceId, String)> {
        self.owner
            .as_ref()
            .map_or_else(Vec::new, |owner| owner.labels.lock().clone())
    }

    /// Nanoseconds since the process epoch (the timestamps' clock).
    pub fn now_ns(&self) -> u64 {
        now_ns()
    }

    /// An observer that records a pool's events as `device`'s (task events included; see
    /// [`PoolProbe`] to leave them out).
    ///
    /// ```
    /// use enginetop::pool::{Pool, PoolKind, PoolOptions};
    /// use enginetop::profiler::{DeviceId, Profiler, ProfilerOptions};
    /// let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
    /// let cpu = DeviceId::register("doc-pool");
    /// let options = PoolOptions::new(PoolKind::Eigen, 2, "doc-pool")
    ///     .observer(profiler.pool_observer(cpu));
    /// let pool = Pool::new(options).unwrap();
    /// pool.spawn(|| ());
    /// drop(pool);
    /// profiler.flush();
    /// assert_eq!(profiler.snapshot().device("doc-pool").unwrap().tasks, 1);
    /// ```
    // std's Arc: a `dyn` trait object, which loom's `Arc` cannot hold.
    pub fn pool_observer(&self, device: DeviceId) -> std::sync::Arc<dyn PoolObserver> {
        PoolProbe::new(self, device).into_observer()
    }

    /// `options` with this profiler's pool observer installed, or unchanged when profiling
    /// is off (so a disabled profiler adds nothing to the pool, not even a call).
    pub fn instrument_pool(&self, options: PoolOptions, device: DeviceId) -> PoolOptions {
        if self.is_enabled() {
            options.observer(self.pool_observer(device))
        } else {
            options
        }
    }

    /// Samples `source`'s queue depths (as `device`'s) every `queue_sample_interval`, for as
    /// long as it lives.
    // std's Weak trait object: loom's `Arc` has no `Weak` and no `dyn` coercion.
    pub fn watch_queues(&self, device: DeviceId, source: std::sync::Weak<dyn QueueDepthSource>) {
        if let Some(core) = &self.core {
            core.watch(device, source);
        }
    }

    /// Hands every batch the collector drains from now on to `sink` (a recording), for as
    /// long as it lives. Nothing happens when profiling is off.
    // std's Weak trait object: loom's `Arc` has no `Weak` and no `dyn` coercion.
    pub fn add_sink(&self, sink: std::sync::Weak<dyn EventSink>) {
        if let Some(core) = &self.core {
            core.add_sink(sink);
        }
    }

    /// Every pool worker's exact task counts now (a recording keeps them at its end).
    pub(crate) fn task_readings(&self) -> Vec<task_counts::TaskReading> {
        self.core
            .as_ref()
            .map_or_else(Vec::new, |core| core.task_counts.readings())
    }

    /// How the live statistics cut their windows (a recording replays them the same way).
    pub(crate) fn stats_options(&self) -> StatsOptions {
        self.core
            .as_ref()
            .map_or_else(StatsOptions::default, |core| core.options.stats)
    }

    /// Waits until every event recorded before this call is in the statistics, the trace
    /// window and the sinks.
    pub fn flush(&self) {
        if let Some(core) = &self.core {
            core.flush();
        }
    }

    /// The live statistics now (empty when disabled). Does not flush.
    pub fn snapshot(&self) -> Snapshot {
        self.core
            .as_ref()
            .map_or_else(Snapshot::default, |core| core.snapshot())
    }

    /// Zeroes the live statistics (the dashboard's `r`): op and span tables, steal counts,
    /// device and stream counters, worker counts and state shares, dropped events. The known
    /// workers stay (with their current state), and the trace window is kept. Flushes first,
    /// so everything recorded before the call is left out.
    ///
    /// ```
    /// use enginetop::profiler::{DeviceId, OpName, OpInfo, Profiler, ProfilerOptions};
    /// let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
    /// let (cpu, op) = (DeviceId::register("doc-reset"), OpName::new("doc-reset-op"));
    /// profiler.op_start(cpu, op, OpInfo::new(1));
    /// profiler.op_end(cpu, op, OpInfo::new(1), false);
    /// profiler.reset_stats();
    /// assert!(profiler.snapshot().op("doc-reset-op").is_none());
    /// ```
    pub fn reset_stats(&self) {
        if let Some(core) = &self.core {
            core.flush();
            core.reset_stats();
        }
    }

    /// The aggregate table of ops and spans, like MXNet's `profiler.dumps()`. Flushes first.
    pub fn summary(&self) -> Summary {
        self.flush();
        Summary::from_snapshot(&self.snapshot())
    }

    /// Writes the trace window as Chrome trace JSON to `out`. Flushes first.
    pub fn export_chrome(&self, out: impl Write) -> Result<ExportReport, ProfilerError> {
        self.flush();
        let (events, evicted, threads) = match &self.core {
            Some(core) => core.window_events(),
            None => (Vec::new(), 0, Vec::new()),
        };
        let snapshot = self.snapshot();
        let context = chrome::TraceContext {
            dropped_events: snapshot.dropped_events,
            task_sampling: snapshot.task_sampling,
            evicted_events: evicted,
            device_labels: self.device_labels(),
            threads,
        };
        Ok(chrome::write_trace(&events, &context, out)?)
    }

    /// Writes the trace window as Chrome trace JSON to the file at `path`.
    pub fn export_chrome_file(
        &self,
        path: impl AsRef<Path>,
    ) -> Result<ExportReport, ProfilerError> {
        let path = path.as_ref();
        let write_error = |source| ProfilerError::WriteTrace {
            path: path.display().to_string(),
            source,
        };
        let file = std::fs::File::create(path).map_err(write_error)?;
        let mut out = std::io::BufWriter::new(file);
        let report = match self.export_chrome(&mut out) {
            Ok(report) => report,
            Err(ProfilerError::Io(source)) => return Err(write_error(source)),
            Err(other) => return Err(other),
        };
        out.flush().map_err(write_error)?;
        Ok(report)
    }

    /// Runs the collector's last round and stops it; later events stay in their rings. The
    /// statistics and the trace window stay readable.
    pub fn shutdown(&self) {
        if let Some(owner) = &self.owner {
            owner.stop();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use stats::Activity;

    fn small_options() -> ProfilerOptions {
        ProfilerOptions {
            ring_capacity: 64,
            ..ProfilerOptions::default()
        }
    }

    #[test]
    fn bad_options_are_refused_with_the_fix() {
        let options = ProfilerOptions {
            ring_capacity: 1,
            ..ProfilerOptions::default()
        };
        let message = Profiler::new(options).unwrap_err().to_string();
        assert!(
            message.contains("ring_capacity") && message.contains("between 2"),
            "{message}"
        );
        for zeroed in [
            ProfilerOptions {
                drain_interval: Duration::ZERO,
                ..ProfilerOptions::default()
            },
            ProfilerOptions {
                busy_drain_interval: Duration::ZERO,
                ..ProfilerOptions::default()
            },
        ] {
            let message = Profiler::new(zeroed).unwrap_err().to_string();
            assert!(message.contains("positive duration"), "{message}");
        }
    }

    #[test]
    fn an_op_whose_end_was_dropped_does_not_run_for_good() {
        let profiler = Profiler::new(ProfilerOptions {
            ring_capacity: 4,
            drain_interval: Duration::from_secs(3600), // only the flush drains
            busy_drain_interval: Duration::from_secs(3600),
            ..ProfilerOptions::default()
        })
        .unwrap();
        let (device, name) = (DeviceId::register("gap-cpu"), OpName::new("gap-op"));
        let recorder = profiler.clone();
        let (recorded, wait) = std::sync::mpsc::channel();
        let (release, hold) = std::sync::mpsc::channel::<()>();
        // The thread stays alive while the snapshot is taken (an exited thread is idle anyway).
        let thread = std::thread::spawn(move || {
            recorder.op_start(device, name, OpInfo::new(1));
            for k in 2..=4 {
                recorder.op_queued(device, name, OpInfo::new(k)); // the ring is full now
            }
            recorder.op_end(device, name, OpInfo::new(1), false); // dropped
            recorded.send(()).unwrap();
            let _ = hold.recv();
        });
        wait.recv().unwrap();
        profiler.flush();
        let snapshot = profiler.snapshot();
        release.send(()).unwrap();
        thread.join().unwrap();
        assert_eq!(snapshot.dropped_events, 1);
        let worker = snapshot
            .workers
            .iter()
            .find(|w| w.device.map(DeviceId::name) == Some("gap-cpu"));
        let worker = worker.unwrap();
        assert_eq!(worker.current_op, None);
        assert_ne!(worker.activity, Activity::Running);
    }

    /// A queue at a fixed depth, or at whatever the test sets.
    struct FixedQueue(std::sync::atomic::AtomicU64);

    impl QueueDepthSource for FixedQueue {
        fn queue_depths(&self, device: DeviceId, out: &mut Vec<QueueDepth>) {
            let depth = self.0.load(std::sync::atomic::Ordering::Relaxed);
            out.push((device, OpName::new("fixed-w0"), depth));
        }
    }

    /// Flushes until more than `span` has passed (each flush is a collector round, which
    /// samples the queues when their interval has passed).
    fn flush_for(profiler: &Profiler, span: Duration) {
        let start = std::time::Instant::now();
        while start.elapsed() <= span {
            profiler.flush();
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn an_idle_queue_after_the_ops_neither_repeats_nor_ages_them_out() {
        let window = WindowOptions {
            max_age: Duration::from_millis(20),
            ..WindowOptions::default()
        };
        let profiler = Profiler::new(ProfilerOptions {
            queue_sample_interval: Duration::from_millis(1),
            window,
            ..ProfilerOptions::default()
        })
        .unwrap();
        let (device, name) = (DeviceId::register("idle-cpu"), OpName::new("idle-op"));
        let queue = Arc::new(FixedQueue(0.into()));
        let watched: Arc<dyn QueueDepthSource> = queue.clone();
        profiler.watch_queues(device, Arc::downgrade(&watched));
        profiler.op_start(device, name, OpInfo::new(1));
        profiler.op_end(device, name, OpInfo::new(1), false);
        flush_for(&profiler, Duration::from_millis(60)); // 3 window ages of an idle queue
        let window = || profiler.core.as_ref().unwrap().window_events().0;
        let of_kind = |kind: EventKind| -> Vec<Event> {
            window()
                .into_iter()
                .filter(|event| event.kind == kind)
                .collect()
        };
        assert_eq!(
            of_kind(EventKind::OpEnd).len(),
            1,
            "the op stays in the window"
        );
        assert_eq!(
            of_kind(EventKind::QueueDepth).len(),
            1,
            "one sample of the idle queue"
        );
        queue.0.store(3, std::sync::atomic::Ordering::Relaxed);
        flush_for(&profiler, Duration::from_millis(5));
        // The new depth is recorded; it is newer than the window's age, so the rest went.
        let depths: Vec<u64> = of_kind(EventKind::QueueDepth)
            .iter()
            .map(|e| e.arg)
            .collect();
        assert_eq!(depths, [3], "the depth once it changed");
    }

    #[test]
    fn a_disabled_profiler_records_nothing() {
        let off = Profiler::disabled();
        off.op_start(DeviceId::HOST, OpName::UNNAMED, OpInfo::new(1));
        off.flush();
        off.shutdown();
        assert_eq!(off.snapshot(), Snapshot::default());
        let mut json = Vec::new();
        off.export_chrome(&mut json).unwrap();
        assert!(validate::validate_json(&json).is_ok());
    }

    #[test]
    fn events_from_many_threads_reach_the_statistics() {
        let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
        let name = OpName::new("profiler-test-many");
        let device = DeviceId::register("profiler-test-many");
        std::thread::scope(|scope| {
            for t in 0..4u64 {
                let profiler = profiler.clone();
                scope.spawn(move || {
                    for k in 0..1000 {
                        let op = OpInfo::new(t * 1000 + k);
                        profiler.op_start(device, name, op);
                        profiler.op_end(device, name, op, false);
                    }
                });
            }
        });
        profiler.flush();
        let snapshot = profiler.snapshot();
        assert_eq!(snapshot.op("profiler-test-many").unwrap().count, 4000);
        assert_eq!(snapshot.dropped_events, 0);
        assert_eq!(snapshot.events, 8000);
    }

    #[test]
    fn a_full_ring_counts_its_drops_in_the_snapshot() {
        let profiler = Profiler::new(ProfilerOptions {
            drain_interval: Duration::from_secs(3600), // only flushes drain
            busy_drain_interval: Duration::from_secs(3600),
            ..small_options()
        })
        .unwrap();
        let name = OpName::new("profiler-test-drops");
        for k in 0..100 {
            profiler.op_queued(DeviceId::HOST, name, OpInfo::new(k));
        }
        profiler.flush();
        let snapshot = profiler.snapshot();
        // 64 slots; the ring may have been drained once in between (the collector's start).
        assert_eq!(snapshot.events + snapshot.dropped_events, 100);
        assert!(snapshot.dropped_events >= 36, "{}", snapshot.dropped_events);
    }

    #[test]
    fn shutdown_drains_everything_first_and_exited_threads_are_drained() {
        let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
        let name = OpName::new("profiler-test-shutdown");
        let recorder = profiler.clone();
        std::thread::spawn(move || {
            for k in 0..10 {
                recorder.op_start(DeviceId::HOST, name, OpInfo::new(k));
                recorder.op_end(DeviceId::HOST, name, OpInfo::new(k), k == 0);
            }
        })
        .join()
        .unwrap();
        profiler.shutdown();
        let op = profiler
            .snapshot()
            .op("profiler-test-shutdown")
            .cloned()
            .unwrap();
        assert_eq!((op.count, op.errors), (10, 1));
        profiler.flush(); // returns at once: the collector is gone
    }
}
