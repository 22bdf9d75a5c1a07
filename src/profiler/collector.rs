//! The collector: one thread, named `profiler`, that drains every ring of a [`Core`] into
//! the live statistics and the trace window.
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
//! # Back-pressure
//! The cadence assumes the collector runs when its wait is over. It may not: when the
//! workload's threads hold every core (an engine's workers and its pusher on two cores), a
//! woken collector waits for a core, and under a real-time policy (`chrt -f`), where threads
//! of one priority never preempt each other, it waits until one of them blocks, while the
//! rings fill and drop. So a recording thread whose ring is half full or more wakes the
//! collector and yields its core once ([`Core::backed_up`]), again every 1/64th of its ring
//! while it stays backed up, and after each drop. The collector then drains every ring, and
//! the time it takes is charged to the workload as a time slice it gave up, not hidden as
//! dropped events. The recording thread never waits for the collector: a yield returns at
//! once when no thread wants its core, and a ring the collector still does not drain fills
//! and drops, counted, as before.
//!
//! Each round it adopts the rings registered since the last
//! one, drains every ring (oldest events first, each stamped with the ring's thread), samples
//! the watched queue depths when `queue_sample_interval` has passed (keeping the ones that
//! changed since their last record), feeds the batch to
//! [`Stats`], to the trace window and to any [`EventSink`] (a recording), and sums the
//! rings' drop counts. A sink is handed the whole round as the statistics took it
//! ([`Round`]: the resets before it, gaps and exits too), the pool workers' exact task
//! counts after it, and, when it asked, a copy of the statistics taken
//! under the same lock hold as the round's feeding (a recording's checkpoint). A ring whose thread
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
use std::time::Duration;

use super::core::{Core, Drained, Gap, QueueDepth, Round};
use super::event::{Event, EventKind};
use super::names::{DeviceId, ThreadId};
use super::ProfilerOptions;
use crate::engine::OpName;
use crate::sync::{thread, Arc, Ordering};

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
    #[inline(never)]
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
            let from = batch.len();
            let drained = ring.consumer.drain_into(batch);
            for event in &mut batch[from..] {
                event.thread = thread;
                event.ts_ns = epoch.resolve(event.ts_ns); // raw stamps to ns (clock.rs)
            }
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
        let mut gaps = Vec::new();
        let (now, image, resets) = {
            let mut stats = self.core.stats.lock();
            // Resets since the last round came before this round's events.
            let resets = std::mem::take(&mut *self.core.resets.lock());
            let handed = !self.batch.is_empty() || !exited.is_empty() || !resets.is_empty();
            let wanted = handed && self.sinks_want_stats();
            let mut ingested = 0;
            for &(end, thread) in &self.gaps {
                stats.ingest_all(&self.batch[ingested..end]);
                ingested = end;
                let last = self.batch[..end].last().filter(|e| e.thread == thread);
                let last_ns = last.map(|event| event.ts_ns);
                stats.events_lost(thread, last_ns);
                gaps.push(Gap {
                    at: end,
                    thread,
                    last_ns,
                });
            }
            stats.ingest_all(&self.batch[ingested..]);
            let now = self.core.epoch.now_ns();
            for &thread in exited {
                stats.thread_exited(thread, now);
            }
            stats.set_dropped(dropped);
            // A sink's checkpoint: the statistics exactly as this round left them.
            (now, wanted.then(|| stats.clone()), resets)
        };
        let mut window = self.core.window.lock();
        window.extend(&self.batch);
        window.threads_exited(exited);
        drop(window);
        let round = Round {
            events: &self.batch,
            gaps: &gaps,
            exited,
            exited_ns: now,
            dropped,
            stats: image,
            resets: &resets,
            tasks: &[],
        };
        self.feed_sinks(round);
    }

    /// Whether a live sink wants the statistics after this round.
    fn sinks_want_stats(&self) -> bool {
        let sinks = self.core.sinks.lock();
        // std's Weak: sinks are `std::sync::Weak` trait objects in every build (no sink runs
        // under loom), as `feed_sinks` below.
        let mut live = sinks.iter().filter_map(std::sync::Weak::upgrade);
        live.any(|sink| sink.wants_stats())
    }

    /// Hands the round to every live sink (the statistics to the first that wants them),
    /// letting go of the ones dropped.
    fn feed_sinks(&self, round: Round<'_>) {
        let mut sinks = self.core.sinks.lock();
        sinks.retain(|sink| sink.strong_count() > 0);
        let idle = round.events.is_empty() && round.exited.is_empty() && round.resets.is_empty();
        if idle || sinks.is_empty() {
            return;
        }
        let tasks = self.core.task_counts.readings();
        let mut stats = round.stats;
        // Sinks are `std::sync::Weak` trait objects (loom's `Arc` has no `Weak`).
        for sink in sinks.iter().filter_map(std::sync::Weak::upgrade) {
            let stats = match sink.wants_stats() {
                true => stats.take(),
                false => None,
            };
            sink.round(Round {
                stats,
                tasks: &tasks,
                ..round
            });
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
