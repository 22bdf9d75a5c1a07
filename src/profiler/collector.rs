//! The collector: one thread, named `profiler`, that drains every ring into the live
//! statistics and the trace window.
//!
//! # Cadence
//! The collector wakes when its wait is over, or at once when somebody asks for a
//! [`flush`](Core::flush). The wait adapts to the fastest-filling ring ([`next_wait`]):
//! after each round the collector takes the most events one ring held and the time since
//! the last round, and waits as long as that ring would take to fill a sixteenth of its
//! capacity at that rate, but at most twice its last wait, within `[busy_drain_interval,
//! drain_interval]` (1 and 10 ms by default). It starts at the shortest wait. A workload of
//! few events per thread (a training step's large ops) soon has the collector waking at the
//! longest wait; one of millions of tiny ops fills a ring in milliseconds, so the collector
//! wakes every few milliseconds or, where draining takes longer than filling, hardly sleeps.
//!
//! Why adaptive: each wake-up takes a core from a worker (a GEMM thread) and runs the
//! statistics through that core's caches, so a short fixed wait slows compute-bound
//! workloads; a long fixed wait lets the rings of a fast-recording workload fill and drop
//! events. Waiting as long as the fastest ring allows keeps both low (the figures are in
//! `bench/README.md`, "Profiler collector cadence").
//!
//! Each round it adopts the rings registered since the last
//! one, drains every ring (oldest events first, each stamped with the ring's thread), samples
//! the watched queue depths when `queue_sample_interval` has passed (keeping the ones that
//! changed since their last record), feeds the batch to
//! [`Stats`], to the trace window and to any [`EventSink`] (a recording), and sums the
//! rings' drop counts. A ring whose thread
//! exited is drained one last time and let go.
//!
//! A ring that dropped events since its last drain (it was full: the collector fell behind)
//! leaves a gap after the events just drained from it. The statistics are told where
//! ([`Stats::events_lost`]), so a thread whose op end was lost is not shown running that op
//! for good.
//!
//! The batch is not sorted: each thread's events arrive in order, which is all the
//! statistics need (state changes are per thread; op starts and ends are matched by id; rate
//! buckets take late events), and the exporter sorts the window it exports. Sorting here
//! would be most of the collector's cost per event.
//!
//! # Who waits for whom
//! Recording threads never wait for the collector: they only touch their own ring. The
//! collector takes the statistics lock once per round, so a reader of [`Core::snapshot`]
//! waits at most for one batch. A flush is a generation counter under a mutex: the caller
//! bumps `requested` and waits until a round that started after its request has finished,
//! so every event recorded before the flush (by any thread whose records happen-before it)
//! is in the statistics when it returns.
//!
//! # Shutdown
//! Stopping sets `stop` and wakes the collector, which runs one last full round and exits;
//! the handle joins it. Events recorded after that stay in their rings (and count as dropped
//! once a ring fills).
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::Duration;

use super::chrome::WindowThread;
use super::clock::Epoch;
use super::event::{Event, EventKind};
use super::names::{DeviceId, ThreadId};
use super::ring::{self, Consumer, Producer};
use super::stats::{Snapshot, Stats};
use super::window::TraceWindow;
use super::ProfilerOptions;
use crate::engine::OpName;
use crate::sync::{thread, Arc, AtomicU64, Condvar, Mutex, Ordering};

/// One sampled queue: whose it is, its label and its depth.
pub type QueueDepth = (DeviceId, OpName, u64);

/// Something whose queue depths the collector samples (a pool, an engine's queues).
pub trait QueueDepthSource: Send + Sync {
    /// Appends every queue's depth now. `device` is the device it is watched as: a pool's
    /// queues are all that device's; a source that spans devices (an engine, a pool per
    /// device) names each queue's own.
    fn queue_depths(&self, device: DeviceId, out: &mut Vec<QueueDepth>);
}

/// Something that receives every batch the collector drains (a recording): the events in
/// the order drained, each stamped with its thread and its time in ns, and the count of
/// events dropped so far. It runs on the collector thread, so it must not block.
pub trait EventSink: Send + Sync {
    /// One drained batch (never empty) and the drop count so far.
    fn drained(&self, events: &[Event], dropped: u64);
}

/// A watched source: weak, so watching never keeps a pool alive.
struct Watched {
    device: DeviceId,
    source: std::sync::Weak<dyn QueueDepthSource>,
}

/// The collector's side of a ring.
struct Drained {
    thread: ThreadId,
    consumer: Consumer,
    /// The ring's drop count when it was last drained.
    dropped_seen: u64,
}

#[derive(Debug, Default)]
struct Signal {
    requested: u64,
    completed: u64,
    stop: bool,
    running: bool,
}

/// What recording threads, the collector and readers share.
pub(crate) struct Core {
    id: u64,
    pub(crate) epoch: &'static Epoch,
    options: ProfilerOptions,
    /// Rings registered since the collector last looked.
    new_rings: Mutex<Vec<Drained>>,
    signal: Mutex<Signal>,
    wake: Condvar,
    done: Condvar,
    stats: Mutex<Stats>,
    window: Mutex<TraceWindow>,
    watched: Mutex<Vec<Watched>>,
    /// Batch receivers ([`EventSink`]): weak, so a sink ends when its owner drops it.
    sinks: Mutex<Vec<std::sync::Weak<dyn EventSink>>>,
    /// Events with no ring to go to (recorded while a thread was exiting).
    lost: AtomicU64,
}

static NEXT_PROFILER: LazyLock<AtomicU64> = LazyLock::new(|| AtomicU64::new(1));

impl Core {
    pub(crate) fn new(options: ProfilerOptions) -> Self {
        Core {
            id: NEXT_PROFILER.fetch_add(1, Ordering::Relaxed),
            epoch: Epoch::get(),
            new_rings: Mutex::new(Vec::new()),
            signal: Mutex::new(Signal::default()),
            wake: Condvar::new(),
            done: Condvar::new(),
            stats: Mutex::new(Stats::new(options.stats)),
            window: Mutex::new(TraceWindow::new(options.window)),
            watched: Mutex::new(Vec::new()),
            sinks: Mutex::new(Vec::new()),
            lost: AtomicU64::new(0),
            options,
        }
    }

    /// This profiler's process-unique id (how threads find their ring for it).
    #[inline]
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Stamps `event` with the time (a raw counter stamp, resolved when drained) and pushes it into the calling thread's ring. (The
    /// epoch is read from its static, not through `self.epoch`: one pointer fewer to follow.)
    #[inline(always)]
    pub(crate) fn record_now(&self, event: Event) {
        super::local::push(self, event.at(Epoch::get().raw_stamp()));
    }

    /// Stamps every event of `events` with one reading of the time (a raw counter stamp)
    /// and pushes them, in order: for events that happen at one point of the code.
    #[inline]
    pub(crate) fn record_all_now(&self, events: impl IntoIterator<Item = Event>) {
        super::local::push_all_at(self, events, Epoch::get().raw_stamp());
    }

    /// Pushes `event` as it is (its timestamp already set).
    #[inline(always)]
    pub(crate) fn record_at(&self, event: Event) {
        super::local::push(self, event);
    }

    /// A new ring for the calling thread; the collector adopts it at its next round.
    pub(crate) fn register_ring(&self) -> Producer {
        let (producer, consumer) = ring::ring(self.options.ring_capacity);
        self.new_rings.lock().push(Drained {
            thread: ThreadId::current(),
            consumer,
            dropped_seen: 0,
        });
        producer
    }

    #[cold]
    pub(crate) fn count_lost(&self, events: u64) {
        self.lost.fetch_add(events, Ordering::Relaxed);
    }

    /// Samples `source`'s queue depths every `queue_sample_interval`, as `device`.
    pub(crate) fn watch(&self, device: DeviceId, source: std::sync::Weak<dyn QueueDepthSource>) {
        self.watched.lock().push(Watched { device, source });
    }

    /// Feeds every drained batch to `sink` from the next round on, for as long as it lives.
    pub(crate) fn add_sink(&self, sink: std::sync::Weak<dyn EventSink>) {
        self.sinks.lock().push(sink);
    }

    /// The statistics now.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let now = self.epoch.now_ns();
        self.stats.lock().snapshot(now)
    }

    /// Zeroes the statistics' counters, histograms and windows (see [`Stats::reset`]).
    pub(crate) fn reset_stats(&self) {
        let now = self.epoch.now_ns();
        self.stats.lock().reset(now);
    }

    /// The trace window, sorted by timestamp, how many events it let go, and the threads
    /// whose earlier events it let go.
    pub(crate) fn window_events(&self) -> (Vec<Event>, u64, Vec<WindowThread>) {
        let window = self.window.lock();
        (window.sorted(), window.evicted(), window.threads_before())
    }

    /// Waits until a collector round that started after this call has finished. Returns at
    /// once if the collector is not running.
    pub(crate) fn flush(&self) {
        let mut signal = self.signal.lock();
        if !signal.running {
            return;
        }
        signal.requested += 1;
        let target = signal.requested;
        self.wake.notify_all();
        while signal.running && signal.completed < target {
            signal = self.done.wait_timeout(signal, Duration::from_millis(100));
        }
    }

    /// Asks the collector to run its last round and exit.
    pub(crate) fn request_stop(&self) {
        self.signal.lock().stop = true;
        self.wake.notify_all();
    }
}

/// Starts the collector thread for `core`.
pub(crate) fn spawn(core: Arc<Core>) -> std::io::Result<thread::JoinHandle<()>> {
    core.signal.lock().running = true;
    let for_thread = core.clone();
    let spawned = thread::Builder::new()
        .name("profiler".to_string())
        .spawn(move || Collector::new(for_thread).run());
    if spawned.is_err() {
        core.signal.lock().running = false;
    }
    spawned
}

/// The collector thread's own state.
struct Collector {
    core: Arc<Core>,
    rings: Vec<Drained>,
    batch: Vec<Event>,
    /// Where in `batch` a ring's drops left a gap: (events before it, the ring's thread).
    gaps: Vec<(usize, ThreadId)>,
    depths: Vec<QueueDepth>,
    /// Each sampled queue's depth as last recorded: a sample enters the batch only when it
    /// differs (see [`Collector::sample_queues`]).
    last_depths: HashMap<(DeviceId, OpName), u64>,
    /// Drop counts of rings already let go.
    retired_drops: u64,
    next_sample_ns: u64,
    thread: ThreadId,
    /// How long the next wait lasts ([`next_wait`] of the last round).
    wait: Duration,
    /// When the last round ended, in the epoch's nanoseconds.
    last_round_ns: u64,
}

impl Collector {
    fn new(core: Arc<Core>) -> Self {
        Collector {
            rings: Vec::new(),
            batch: Vec::new(),
            gaps: Vec::new(),
            depths: Vec::new(),
            last_depths: HashMap::new(),
            retired_drops: 0,
            next_sample_ns: 0,
            thread: ThreadId::current(),
            wait: core
                .options
                .busy_drain_interval
                .min(core.options.drain_interval),
            last_round_ns: core.epoch.now_ns(),
            core,
        }
    }

    fn run(mut self) {
        let _running = RunningFlag(self.core.clone());
        loop {
            let (stop, generation) = self.wait_for_round();
            self.round();
            self.finish_round(generation);
            if stop {
                return;
            }
        }
    }

    /// Sleeps until the next round is due; returns whether to stop after it and the flush
    /// generation it serves.
    fn wait_for_round(&self) -> (bool, u64) {
        let core = &self.core;
        let mut signal = core.signal.lock();
        if !signal.stop && signal.requested == signal.completed {
            signal = core.wake.wait_timeout(signal, self.wait);
        }
        (signal.stop, signal.requested)
    }

    fn finish_round(&self, generation: u64) {
        let mut signal = self.core.signal.lock();
        signal.completed = signal.completed.max(generation);
        self.core.done.notify_all();
    }

    /// One round: adopt, drain, sample, feed; then set the next wait.
    fn round(&mut self) {
        self.rings.append(&mut self.core.new_rings.lock());
        self.batch.clear();
        self.gaps.clear();
        let mut exited = Vec::new();
        let mut fullest = 0;
        let (batch, gaps) = (&mut self.batch, &mut self.gaps);
        let epoch = self.core.epoch;
        self.rings.retain_mut(|ring| {
            let closed = ring.consumer.is_closed();
            let thread = ring.thread;
            let drained = ring.consumer.drain(|mut event| {
                event.thread = thread;
                event.ts_ns = epoch.resolve(event.ts_ns); // raw stamps to ns (clock.rs)
                batch.push(event);
            });
            // Drops happen while the ring is full, so before this drain freed it: the
            // missing events come after the ones just drained.
            let dropped = ring.consumer.dropped();
            if dropped > ring.dropped_seen {
                ring.dropped_seen = dropped;
                gaps.push((batch.len(), thread));
            }
            fullest = fullest.max(drained);
            if closed {
                exited.push(thread);
                self.retired_drops += ring.consumer.dropped();
            }
            !closed
        });
        self.sample_queues();
        self.feed(&exited);
        let now = epoch.now_ns();
        let since = Duration::from_nanos(now.saturating_sub(self.last_round_ns));
        self.last_round_ns = now;
        self.wait = next_wait(fullest, since, self.wait, &self.core.options);
    }

    /// Samples every watched queue's depth and records the ones that changed since their
    /// last record. A counter holds its value until the next, so a repeat says nothing; and
    /// repeats of idle queues after a run ended kept the trace window's newest timestamp
    /// moving, so ten seconds later its age bound had let every op of the run go (the
    /// dashboard's `e` on a finished run wrote a trace of counters alone).
    fn sample_queues(&mut self) {
        let now = self.core.epoch.now_ns();
        if now < self.next_sample_ns {
            return;
        }
        let interval = self.core.options.queue_sample_interval;
        self.next_sample_ns = now + u64::try_from(interval.as_nanos()).unwrap_or(u64::MAX);
        let mut watched = self.core.watched.lock();
        watched.retain(|watched| watched.source.strong_count() > 0);
        for watched in watched.iter() {
            let Some(source) = watched.source.upgrade() else {
                continue;
            };
            self.depths.clear();
            source.queue_depths(watched.device, &mut self.depths);
            for &(device, label, depth) in &self.depths {
                if self.last_depths.insert((device, label), depth) == Some(depth) {
                    continue;
                }
                let mut event = Event::new(EventKind::QueueDepth, device, label, 0, depth).at(now);
                event.thread = self.thread;
                self.batch.push(event);
            }
        }
    }

    fn feed(&mut self, exited: &[ThreadId]) {
        let dropped = self.retired_drops
            + self.core.lost.load(Ordering::Relaxed)
            + self
                .rings
                .iter()
                .map(|ring| ring.consumer.dropped())
                .sum::<u64>();
        {
            let mut stats = self.core.stats.lock();
            let mut ingested = 0;
            for &(end, thread) in &self.gaps {
                self.batch[ingested..end]
                    .iter()
                    .for_each(|e| stats.ingest(e));
                ingested = end;
                let last = self.batch[..end].last().filter(|e| e.thread == thread);
                stats.events_lost(thread, last.map(|event| event.ts_ns));
            }
            self.batch[ingested..].iter().for_each(|e| stats.ingest(e));
            let now = self.core.epoch.now_ns();
            for &thread in exited {
                stats.thread_exited(thread, now);
            }
            stats.set_dropped(dropped);
        }
        let mut window = self.core.window.lock();
        window.extend(&self.batch);
        window.threads_exited(exited);
        drop(window);
        self.feed_sinks(dropped);
    }

    /// Hands the batch to every live sink, letting go of the ones dropped.
    fn feed_sinks(&self, dropped: u64) {
        let mut sinks = self.core.sinks.lock();
        sinks.retain(|sink| sink.strong_count() > 0);
        if self.batch.is_empty() {
            return;
        }
        for sink in sinks.iter().filter_map(std::sync::Weak::upgrade) {
            sink.drained(&self.batch, dropped);
        }
    }
}

/// The fill of its ring the collector aims to wake at: a sixteenth of its capacity.
const WAKE_AT_FILL: f64 = 1.0 / 16.0;

/// How long the collector waits after a round that followed a wait of `last`, in which the
/// fullest ring held `fullest` events gathered over `since`: the time that ring takes to
/// fill [`WAKE_AT_FILL`] of its capacity at that rate, at most twice `last`, clamped to
/// `[busy_drain_interval, drain_interval]`.
fn next_wait(
    fullest: usize,
    since: Duration,
    last: Duration,
    options: &ProfilerOptions,
) -> Duration {
    let longest = options.drain_interval;
    let shortest = options.busy_drain_interval.min(longest);
    let capacity = options.ring_capacity.next_power_of_two() as f64;
    let to_fill = since.as_secs_f64() * capacity * WAKE_AT_FILL / fullest.max(1) as f64;
    Duration::try_from_secs_f64(to_fill)
        .unwrap_or(longest)
        .min(last.saturating_mul(2))
        .clamp(shortest, longest)
}

/// Clears `running` when the collector exits, even by a panic, so flushes never hang.
struct RunningFlag(Arc<Core>);

impl Drop for RunningFlag {
    fn drop(&mut self) {
        let mut signal = self.0.signal.lock();
        signal.running = false;
        self.0.done.notify_all();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn options(drain: Duration, busy: Duration) -> ProfilerOptions {
        ProfilerOptions {
            drain_interval: drain,
            busy_drain_interval: busy,
            ..ProfilerOptions::default()
        }
    }

    #[test]
    fn quiet_rings_double_the_wait_up_to_the_drain_interval() {
        let options = options(10 * MS, MS);
        assert_eq!(next_wait(0, MS, MS, &options), 2 * MS);
        // A training step's rate: 100 events in 10 ms fill a sixteenth of 65,536 in 410 ms.
        assert_eq!(next_wait(100, 10 * MS, 4 * MS, &options), 8 * MS);
        assert_eq!(next_wait(100, 10 * MS, 8 * MS, &options), 10 * MS);
        assert_eq!(next_wait(0, 10 * MS, 10 * MS, &options), 10 * MS);
    }

    #[test]
    fn a_fast_ring_shortens_the_wait_to_fill_a_sixteenth_of_it() {
        let options = options(10 * MS, MS);
        // 4096 events (a sixteenth of 65,536) in 10 ms: the next sixteenth comes in 10 ms.
        assert_eq!(next_wait(4_096, 10 * MS, 10 * MS, &options), 10 * MS);
        // Five times the rate: 2 ms, at once.
        assert_eq!(next_wait(20_480, 10 * MS, 10 * MS, &options), 2 * MS);
        // Faster than a sixteenth a millisecond: the shortest wait.
        assert_eq!(next_wait(65_536, 2 * MS, 2 * MS, &options), MS);
        // A ring of 100 slots counts as 128: 8 events in 4 ms fill its sixteenth in 4 ms.
        let small = ProfilerOptions {
            ring_capacity: 100,
            ..options
        };
        assert_eq!(next_wait(8, 4 * MS, 10 * MS, &small), 4 * MS);
    }

    #[test]
    fn a_busy_wait_no_shorter_than_the_drain_interval_never_adapts() {
        let long = Duration::from_secs(3600);
        let only_flushes = options(long, long);
        assert_eq!(next_wait(1 << 20, MS, long, &only_flushes), long);
        let inverted = options(5 * MS, 20 * MS);
        assert_eq!(next_wait(1 << 20, MS, 5 * MS, &inverted), 5 * MS);
    }
}
