//! Statistics as a recording's checkpoint holds them, and back under this process's ids.
//!
//! [`Stats`] serializes with serde; the parts serde cannot take as they are go through the
//! helpers here: a histogram as its recorded buckets (each bucket's highest value and count,
//! values as deltas from the one before), which records back into the same buckets, so every
//! percentile reads the same; an op name, a device and a pool role as their numbers (a
//! device's own serialization is its name, for snapshots). The ids inside
//! (threads, devices, op names) are the numbers of the process that made them; a replay
//! gives them its own through [`Stats::remap`], which rebuilds every table indexed or keyed
//! by one.
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{Durations, Stats, StatsOptions, StreamStats};
use crate::device::identity::PoolRole;
use crate::engine::OpName;
use crate::profiler::names::{DeviceId, ThreadId};

/// This process's ids for another's (a recording's).
pub(crate) trait IdMap {
    /// The op name recorded as `name`.
    fn name(&mut self, name: OpName) -> OpName;
    /// The device recorded as `device`.
    fn device(&mut self, device: DeviceId) -> DeviceId;
    /// The thread recorded as `thread`.
    fn thread(&mut self, thread: ThreadId) -> ThreadId;
}

impl Stats {
    /// The threads the statistics know, in order of first sight.
    pub(crate) fn thread_ids(&self) -> Vec<ThreadId> {
        self.threads.iter().map(|(thread, _)| *thread).collect()
    }

    /// The events ingested since the statistics were made or last reset: a recording
    /// takes the live statistics as a checkpoint only while this equals the events it holds.
    pub(crate) fn events_ingested(&self) -> u64 {
        self.events
    }

    /// Whether statistics read from a file can be fed on and read without a fault: their
    /// windows cut as `options` (the recording's) cuts a replay's, every timeline and
    /// counter cut the same way and in a state it has, every duration row's extremes in
    /// order.
    pub(crate) fn is_well_formed(&self, options: StatsOptions) -> bool {
        let geometry = self.geometry;
        let rows = |table: &[Option<Durations>]| {
            table
                .iter()
                .flatten()
                .all(|row| row.count == 0 || row.min_ns <= row.max_ns)
        };
        self.options == options
            && geometry == self.options.geometry()
            && self.threads.iter().all(|(_, thread)| {
                thread.timeline.is_well_formed(geometry)
                    && thread.cells.timeline.is_well_formed(geometry)
            })
            && self.devices.iter().flatten().all(|device| {
                device.ops.is_well_formed(geometry) && device.tasks.is_well_formed(geometry)
            })
            && self
                .streams
                .values()
                .all(|stream| stream.timeline.is_well_formed(geometry))
            && rows(&self.ops)
            && rows(&self.spans)
    }

    /// Gives every id inside the one `map` says: statistics deserialized from another
    /// process's checkpoint become the statistics this process would have fed from the same
    /// events under its own ids.
    pub(crate) fn remap(&mut self, map: &mut dyn IdMap) {
        for (thread, stats) in &mut self.threads {
            *thread = map.thread(*thread);
            stats.device = stats.device.map(|device| map.device(device));
            for open in &mut stats.open_ops {
                open.2 = map.name(open.2);
            }
        }
        self.thread_slots = self
            .threads
            .iter()
            .enumerate()
            .map(|(slot, (thread, _))| (*thread, slot))
            .collect();
        self.last_thread = None;
        self.devices = reindexed(std::mem::take(&mut self.devices), |index| {
            usize::from(map.device(DeviceId::from_raw(index as u16)).id())
        });
        for device in self.devices.iter_mut().flatten() {
            let queues = std::mem::take(&mut device.queues);
            device.queues = queues
                .into_iter()
                .map(|(name, depth)| (map.name(name), depth))
                .collect();
        }
        for table in [&mut self.ops, &mut self.spans] {
            *table = reindexed(std::mem::take(table), |index| {
                map.name(OpName::from_raw(index as u32)).id() as usize
            });
        }
        self.ready.remap(|device| map.device(device));
        let steals = std::mem::take(&mut self.steals);
        self.steals = steals
            .into_iter()
            .map(|((device, thief, victim), count)| ((map.device(device), thief, victim), count))
            .collect();
        let streams = std::mem::take(&mut self.streams);
        self.streams = streams
            .into_iter()
            .map(|((device, stream), stats)| ((map.device(device), stream), stats))
            .collect();
    }
}

/// `table`'s entries at the indexes `index` gives theirs.
fn reindexed<T>(table: Vec<Option<T>>, mut index: impl FnMut(usize) -> usize) -> Vec<Option<T>> {
    let mut moved: Vec<Option<T>> = Vec::new();
    for (old, entry) in table.into_iter().enumerate() {
        let Some(entry) = entry else { continue };
        let new = index(old);
        if moved.len() <= new {
            moved.resize_with(new + 1, || None);
        }
        moved[new] = Some(entry);
    }
    moved
}

/// [`Durations`] as serialized.
#[derive(Serialize, Deserialize)]
pub(super) struct DurationsImage {
    count: u64,
    errors: u64,
    total_ns: u64,
    min_ns: u64,
    max_ns: u64,
    pending: Vec<u64>,
    /// Each recorded bucket: its highest value as a delta from the previous one's, and its
    /// count.
    buckets: Vec<(u64, u64)>,
}

/// A row serializes as its [`DurationsImage`], written from the row in place (no copy: a
/// checkpoint writes every name's row).
impl Serialize for Durations {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut image = serializer.serialize_struct("DurationsImage", 7)?;
        image.serialize_field("count", &self.count)?;
        image.serialize_field("errors", &self.errors)?;
        image.serialize_field("total_ns", &self.total_ns)?;
        image.serialize_field("min_ns", &self.min_ns)?;
        image.serialize_field("max_ns", &self.max_ns)?;
        image.serialize_field("pending", &self.pending[..self.pending_len])?;
        image.serialize_field("buckets", &BucketDeltas(self))?;
        image.end()
    }
}

/// A row's recorded buckets as [`DurationsImage::buckets`] holds them.
struct BucketDeltas<'a>(&'a Durations);

impl Serialize for BucketDeltas<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.histogram.serialize_deltas(serializer)
    }
}

impl From<DurationsImage> for Durations {
    fn from(image: DurationsImage) -> Self {
        let mut durations = Durations::new();
        let mut value = 0u64;
        for (delta, count) in image.buckets {
            value = value.saturating_add(delta);
            durations.histogram.record_n(value, count);
        }
        let mut restored = Durations {
            count: image.count,
            errors: image.errors,
            total_ns: image.total_ns,
            min_ns: image.min_ns,
            max_ns: image.max_ns,
            ..durations
        };
        // A damaged image may hold more than `pending` fits: those settle as they come.
        for &ns in &image.pending {
            restored.hold(ns);
        }
        restored
    }
}

/// A worker's pool role as its code.
pub(super) mod role {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(
        role: &Option<PoolRole>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        role.map(PoolRole::code).serialize(serializer)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<PoolRole>, D::Error> {
        Ok(Option::<u8>::deserialize(deserializer)?.and_then(PoolRole::from_code))
    }
}

/// A thread's open ops, names as their ids.
pub(super) mod open_ops {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(
        open: &VecDeque<(u64, u64, OpName)>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(open.iter().map(|&(id, at, name)| (id, at, name.id())))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<VecDeque<(u64, u64, OpName)>, D::Error> {
        let open = Vec::<(u64, u64, u32)>::deserialize(deserializer)?;
        Ok(open
            .into_iter()
            .map(|(id, at, name)| (id, at, OpName::from_raw(name)))
            .collect())
    }
}

/// A device's queue depths, labels as their ids.
pub(super) mod queues {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(
        queues: &BTreeMap<OpName, u64>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(queues.iter().map(|(name, &depth)| (name.id(), depth)))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<BTreeMap<OpName, u64>, D::Error> {
        let queues = Vec::<(u32, u64)>::deserialize(deserializer)?;
        Ok(queues
            .into_iter()
            .map(|(name, depth)| (OpName::from_raw(name), depth))
            .collect())
    }
}

/// A worker's device as its id.
pub(super) mod device {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(
        device: &Option<DeviceId>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        device.map(DeviceId::id).serialize(serializer)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<DeviceId>, D::Error> {
        Ok(Option::<u16>::deserialize(deserializer)?.map(DeviceId::from_raw))
    }
}

/// Steal counts, devices as their ids.
pub(super) mod steals {
    use super::*;

    type Steals = BTreeMap<(DeviceId, u32, Option<u32>), u64>;

    pub(crate) fn serialize<S: Serializer>(
        steals: &Steals,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(
            steals
                .iter()
                .map(|(&(device, thief, victim), &count)| (device.id(), thief, victim, count)),
        )
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Steals, D::Error> {
        let steals = Vec::<(u16, u32, Option<u32>, u64)>::deserialize(deserializer)?;
        Ok(steals
            .into_iter()
            .map(|(device, thief, victim, count)| {
                ((DeviceId::from_raw(device), thief, victim), count)
            })
            .collect())
    }
}

/// GPU streams, devices as their ids.
pub(super) mod streams {
    use super::*;

    type Streams = BTreeMap<(DeviceId, u32), StreamStats>;

    pub(crate) fn serialize<S: Serializer>(
        streams: &Streams,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(
            streams
                .iter()
                .map(|(&(device, stream), stats)| (device.id(), stream, stats)),
        )
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Streams, D::Error> {
        let streams = Vec::<(u16, u32, StreamStats)>::deserialize(deserializer)?;
        Ok(streams
            .into_iter()
            .map(|(device, stream, stats)| ((DeviceId::from_raw(device), stream), stats))
            .collect())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::profiler::event::{Event, EventKind, OpInfo};
    use crate::profiler::Snapshot;

    /// Two pool workers running ops of three names on two devices, with queue samples,
    /// steals, a resize, a GPU stream and spans: every table the statistics keep.
    fn events(round: u64) -> Vec<Event> {
        let cpu = DeviceId::register("image-cpu");
        let gpu = DeviceId::register("image-gpu");
        let names = ["image-gemm", "image-relu", "image-sgd"].map(OpName::new);
        let mut events = Vec::new();
        let base = round * 50_000_000;
        let mut push = |thread: u32, ts: u64, event: Event| {
            let mut event = event.at(base + ts);
            event.thread = ThreadId::from_raw(thread);
            events.push(event);
        };
        push(
            1,
            0,
            Event::new(EventKind::PoolResized, cpu, OpName::UNNAMED, 0, 2),
        );
        for k in 0..40u64 {
            let (thread, name) = (1 + (k % 2) as u32, names[(k % 3) as usize]);
            let op = OpInfo::new(round * 1_000 + k);
            let start = k * 1_000_000;
            push(thread, start, Event::op(EventKind::OpQueued, cpu, name, op));
            push(
                thread,
                start + 10,
                Event::op(EventKind::OpStart, cpu, name, op),
            );
            let end = start + 20_000 + k * 7_919 % 300_000;
            push(thread, end, Event::op(EventKind::OpEnd, cpu, name, op));
            push(
                thread,
                end + 5,
                Event::worker_event(EventKind::Park, cpu, thread - 1),
            );
            let depth = Event::new(EventKind::QueueDepth, cpu, OpName::new("w0"), 0, k % 4);
            push(thread, end + 7, depth);
        }
        push(
            2,
            41_000_000,
            Event::new(EventKind::Steal, cpu, OpName::UNNAMED, 1, 0),
        );
        push(
            3,
            42_000_000,
            Event::new(EventKind::StreamStart, gpu, names[0], 1, 7),
        );
        push(
            3,
            43_000_000,
            Event::new(EventKind::StreamEnd, gpu, names[0], 1, 7),
        );
        push(
            1,
            44_000_000,
            Event::new(EventKind::SpanEnter, cpu, names[1], 0, 9),
        );
        push(
            1,
            45_000_000,
            Event::new(EventKind::SpanExit, cpu, names[1], 0, 9),
        );
        events
    }

    fn fed(rounds: std::ops::Range<u64>, stats: &mut Stats) {
        for round in rounds {
            for event in events(round) {
                stats.ingest(&event);
            }
        }
    }

    /// The same ids back.
    struct Same;

    impl IdMap for Same {
        fn name(&mut self, name: OpName) -> OpName {
            name
        }
        fn device(&mut self, device: DeviceId) -> DeviceId {
            device
        }
        fn thread(&mut self, thread: ThreadId) -> ThreadId {
            thread
        }
    }

    /// Every name, device and thread moved to another of this process.
    struct Moved;

    impl IdMap for Moved {
        fn name(&mut self, name: OpName) -> OpName {
            OpName::new(&format!("moved-{}", name.as_str()))
        }
        fn device(&mut self, device: DeviceId) -> DeviceId {
            DeviceId::register(&format!("moved-{}", device.name()))
        }
        fn thread(&mut self, thread: ThreadId) -> ThreadId {
            ThreadId::from_raw(thread.id() + 100)
        }
    }

    fn text(stats: &mut Stats, now: u64) -> String {
        format!("{:?}", stats.snapshot(now))
    }

    /// Serialized and back, the statistics read the same and, fed on, go on the same.
    #[test]
    fn statistics_read_back_read_and_feed_on_the_same() {
        let mut live = Stats::new(StatsOptions::default());
        fed(0..3, &mut live);
        let bytes = postcard::to_stdvec(&live).unwrap();
        let mut read: Stats = postcard::from_bytes(&bytes).unwrap();
        assert!(read.is_well_formed(StatsOptions::default()));
        read.remap(&mut Same);
        let now = 3 * 50_000_000;
        assert_eq!(text(&mut read, now), text(&mut live, now));
        fed(3..5, &mut live);
        fed(3..5, &mut read);
        let now = 5 * 50_000_000;
        assert_eq!(text(&mut read, now), text(&mut live, now));
        let ops = live.snapshot(now).ops;
        assert!(ops.iter().any(|op| op.p99_ns > op.p50_ns), "{ops:?}");
    }

    /// Under other ids, every row keeps its numbers under its new name, device and thread.
    #[test]
    fn remapped_statistics_name_everything_by_the_new_ids() {
        let mut live = Stats::new(StatsOptions::default());
        fed(0..2, &mut live);
        let now = 2 * 50_000_000;
        let before = live.snapshot(now);
        let bytes = postcard::to_stdvec(&live).unwrap();
        let mut moved: Stats = postcard::from_bytes(&bytes).unwrap();
        moved.remap(&mut Moved);
        let after = moved.snapshot(now);
        assert_eq!(after.ops.len(), before.ops.len());
        for op in &before.ops {
            let there = after.op(&format!("moved-{}", op.name)).unwrap();
            assert_eq!(
                (there.count, there.p50_ns, there.p99_ns),
                (op.count, op.p50_ns, op.p99_ns)
            );
        }
        let cpu = after.device("moved-image-cpu").unwrap();
        let was = before.device("image-cpu").unwrap();
        assert_eq!(
            (cpu.ops, cpu.queue_depth, cpu.workers),
            (was.ops, was.queue_depth, was.workers)
        );
        assert_eq!(cpu.queues[0].label, "moved-w0");
        assert_eq!(after.steals[0].device.name(), "moved-image-cpu");
        assert_eq!(after.streams[0].device.name(), "moved-image-gpu");
        let threads: Vec<u32> = after.workers.iter().map(|worker| worker.thread).collect();
        assert_eq!(threads, [101, 102]);
        // Fed on under the new ids, the restored rows go on counting.
        let mut event = Event::op(
            EventKind::OpStart,
            DeviceId::register("moved-image-cpu"),
            OpName::new("moved-image-gemm"),
            OpInfo::new(99_999),
        )
        .at(now);
        event.thread = ThreadId::from_raw(101);
        moved.ingest(&event);
        event.kind = EventKind::OpEnd;
        moved.ingest(&event.at(now + 1_000));
        let gemm = |snapshot: &Snapshot, name: &str| snapshot.op(name).unwrap().count;
        let counted = moved.snapshot(now + 2_000);
        assert_eq!(
            gemm(&counted, "moved-image-gemm"),
            gemm(&before, "image-gemm") + 1
        );
    }

    /// Bytes changed at random either fail to decode, fail the check, or give statistics
    /// that remap, feed on and snapshot without a fault.
    #[test]
    fn an_image_holding_more_pending_durations_than_fit_settles_them() {
        let us = 1_000;
        let image = DurationsImage {
            count: 40,
            errors: 0,
            total_ns: (1..=40).sum::<u64>() * us,
            min_ns: us,
            max_ns: 40 * us,
            pending: (1..=40).map(|n| n * us).collect(),
            buckets: Vec::new(),
        };
        let mut row = Durations::from(image);
        row.record(41 * us, false);
        let shown = row.snapshot("held");
        assert_eq!((shown.count, shown.max_ns), (41, 41 * us));
        let p50 = shown.p50_ns as f64 / us as f64;
        assert!((20.0..=22.0).contains(&p50), "p50 {p50} us");
    }

    #[test]
    fn damaged_statistics_are_refused_or_safe() {
        let mut live = Stats::new(StatsOptions::default());
        fed(0..2, &mut live);
        let original = postcard::to_stdvec(&live).unwrap();
        let mut rng = fastrand::Rng::with_seed(31);
        let (mut used, mut refused) = (0, 0);
        for _ in 0..3_000 {
            let mut bytes = original.clone();
            for _ in 0..rng.usize(1..=4) {
                let at = rng.usize(..bytes.len());
                bytes[at] = match rng.bool() {
                    true => bytes[at] ^ (1 << rng.u8(0..8)),
                    false => rng.u8(..),
                };
            }
            match postcard::from_bytes::<Stats>(&bytes) {
                Ok(mut stats) if stats.is_well_formed(StatsOptions::default()) => {
                    used += 1;
                    stats.remap(&mut Same);
                    fed(2..3, &mut stats);
                    let _ = stats.snapshot(3 * 50_000_000);
                }
                _ => refused += 1,
            }
        }
        // Both paths taken: some damage decodes into well-formed statistics, most is refused.
        assert!(used > 0 && refused > 100, "used {used}, refused {refused}");
    }
}
