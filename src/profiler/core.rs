//! The profiler's shared state: what recording threads, the collector thread and readers
//! of the statistics share ([`Core`]), and the interfaces the collector feeds or samples
//! ([`EventSink`], [`QueueDepthSource`]).
//!
//! Recording threads reach the core only to register their ring and to count events that
//! had no ring to go to; every event goes through the thread's own ring (`local.rs`). The
//! collector thread (`collector.rs`) adopts the registered rings, drains them into the
//! statistics, the trace window and the sinks, and answers flushes through [`Signal`].
//! Readers take a statistics snapshot or the sorted trace window under their locks, each
//! held by the collector for one batch at most.
#![forbid(unsafe_code)]

use std::sync::LazyLock;
use std::time::Duration;

use super::chrome::WindowThread;
use super::clock::Epoch;
use super::event::Event;
use super::names::{DeviceId, ThreadId};
use super::ring::{self, Consumer, Producer};
use super::stats::{Snapshot, Stats};
use super::task_counts::{TaskCounts, TaskReading};
use super::window::TraceWindow;
use super::ProfilerOptions;
use crate::engine::OpName;
use crate::sync::{thread, AtomicU64, Condvar, Mutex, Ordering};

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

    /// Whether the sink wants the statistics as they stand after the next round it is
    /// handed ([`Round::stats`]).
    fn wants_stats(&self) -> bool {
        false
    }

    /// One round: everything the collector did to the statistics in it, in order. By
    /// default its batch goes to [`EventSink::drained`] when it has one.
    fn round(&self, round: Round<'_>) {
        if !round.events.is_empty() {
            self.drained(round.events, round.dropped);
        }
    }
}

/// One collector round as the statistics took it: the batch's events, in order, with the
/// rings' gaps among them; then the threads that exited; then the drop count.
#[derive(Debug)]
pub struct Round<'a> {
    /// The batch (maybe empty when threads exited).
    pub events: &'a [Event],
    /// Where a ring's drops left a gap in the batch.
    pub gaps: &'a [Gap],
    /// Threads whose rings closed, marked exited after the batch.
    pub exited: &'a [ThreadId],
    /// When they were marked exited (ns since the epoch).
    pub exited_ns: u64,
    /// Events dropped so far (full rings).
    pub dropped: u64,
    /// The statistics after this round, for a sink that asked ([`EventSink::wants_stats`]).
    pub stats: Option<Stats>,
    /// The statistics' resets ([`Stats::reset`], the dashboard's `r`) since the round
    /// before, at these times (ns since the epoch): they come before this round's events.
    pub resets: &'a [u64],
    /// Every counted thread's exact pool task counts after this round (module
    /// `task_counts`), when a sink is fed.
    pub(crate) tasks: &'a [TaskReading],
}

/// A gap a ring's drops left in a batch: its thread's events after `at` are not the ones
/// that followed its events before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gap {
    /// Events of the batch before the gap.
    pub at: usize,
    /// The ring's thread.
    pub thread: ThreadId,
    /// Its last event before the gap, when the batch holds one (ns since the epoch).
    pub last_ns: Option<u64>,
}

/// A watched source: weak, so watching never keeps a pool alive.
pub(super) struct Watched {
    pub(super) device: DeviceId,
    // std's Weak: loom's `Arc` has no `Weak` and no `dyn` coercion.
    pub(super) source: std::sync::Weak<dyn QueueDepthSource>,
}

/// The collector's side of a ring.
pub(super) struct Drained {
    pub(super) thread: ThreadId,
    pub(super) consumer: Consumer,
    /// The ring's drop count when it was last drained.
    pub(super) dropped_seen: u64,
}

#[derive(Debug, Default)]
pub(super) struct Signal {
    pub(super) requested: u64,
    pub(super) completed: u64,
    pub(super) stop: bool,
    pub(super) running: bool,
}

/// What recording threads, the collector and readers share.
pub(crate) struct Core {
    id: u64,
    pub(crate) epoch: &'static Epoch,
    pub(super) options: ProfilerOptions,
    /// Rings registered since the collector last looked.
    pub(super) new_rings: Mutex<Vec<Drained>>,
    pub(super) signal: Mutex<Signal>,
    pub(super) wake: Condvar,
    pub(super) done: Condvar,
    pub(super) stats: Mutex<Stats>,
    pub(super) window: Mutex<TraceWindow>,
    pub(super) watched: Mutex<Vec<Watched>>,
    /// Batch receivers ([`EventSink`]): weak, so a sink ends when its owner drops it.
    // std's Weak: loom's `Arc` has no `Weak` and no `dyn` coercion.
    pub(super) sinks: Mutex<Vec<std::sync::Weak<dyn EventSink>>>,
    /// Events with no ring to go to (recorded while a thread was exiting).
    pub(super) lost: AtomicU64,
    /// Pool workers' exact task counts (`task_counts`), put into every snapshot.
    pub(super) task_counts: TaskCounts,
    /// The times of the statistics' resets the collector has not handed to its sinks yet:
    /// pushed and taken under the statistics lock, so a sink learns each reset between the
    /// rounds it fell between.
    pub(super) resets: Mutex<Vec<u64>>,
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
            task_counts: TaskCounts::default(),
            resets: Mutex::new(Vec::new()),
            options,
        }
    }

    /// This profiler's process-unique id (how threads find their ring for it).
    #[inline]
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Stamps `event` with the time (a raw counter stamp, resolved when drained) and pushes
    /// it into the calling thread's ring. (The epoch is read from its static, not through
    /// `self.epoch`: one pointer fewer to follow.)
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

    /// The calling thread's ring is backed up (half full or more): the collector is behind,
    /// most often because the workload's threads hold every core. Wakes the collector and
    /// gives up this thread's time slice once, so that the collector can run (under a
    /// real-time policy, where threads of one priority never preempt each other, it would
    /// not run otherwise). Recording still never waits: if the collector does not catch up,
    /// the ring fills and drops as before. A profiler whose collector only drains on flushes
    /// (`busy_drain_interval` no shorter than `drain_interval`) is not woken.
    #[cold]
    #[inline(never)]
    pub(crate) fn backed_up(&self) {
        if self.options.busy_drain_interval < self.options.drain_interval {
            self.wake.notify_one();
            thread::yield_now();
        }
    }

    #[cold]
    pub(crate) fn count_lost(&self, events: u64) {
        self.lost.fetch_add(events, Ordering::Relaxed);
    }

    /// Samples `source`'s queue depths every `queue_sample_interval`, as `device`.
    // std's Weak trait object: loom's `Arc` has no `Weak` and no `dyn` coercion.
    pub(crate) fn watch(&self, device: DeviceId, source: std::sync::Weak<dyn QueueDepthSource>) {
        self.watched.lock().push(Watched { device, source });
    }

    /// Feeds every drained batch to `sink` from the next round on, for as long as it lives.
    // std's Weak trait object: loom's `Arc` has no `Weak` and no `dyn` coercion.
    pub(crate) fn add_sink(&self, sink: std::sync::Weak<dyn EventSink>) {
        self.sinks.lock().push(sink);
    }

    /// The statistics now.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let now = self.epoch.now_ns();
        let mut snapshot = self.stats.lock().snapshot(now);
        self.task_counts.apply(&mut snapshot);
        snapshot
    }

    /// Zeroes the statistics' counters, histograms and windows (see [`Stats::reset`]).
    pub(crate) fn reset_stats(&self) {
        let now = self.epoch.now_ns();
        let mut stats = self.stats.lock();
        stats.reset(now);
        self.resets.lock().push(now);
        drop(stats);
        self.task_counts.reset();
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
