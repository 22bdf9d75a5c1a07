//! Replaying a recording: the profiler's statistics as they stood at any moment of the run,
//! rebuilt from the recorded events by the profiler's own [`Stats`].
//!
//! # What "the state at T" is
//! The collector fed the live statistics batch by batch, in the order it drained them, and
//! the recording holds those batches in that order, cut into chunks. The state at time `T`
//! is the statistics fed, in file order, with every chunk up to the first one whose latest
//! event is after `T`, and with that chunk's events at or before `T`. Each thread's events
//! are in time order within a chunk, so this feeds each thread a prefix of its own events,
//! as the collector did; an event drained late (in a later chunk, though it happened before
//! `T`) comes in when the cursor passes its chunk, as it came in late live. The whole
//! recording fed this way is what the live statistics ended with, so the replay's final
//! summary is the live run's.
//!
//! # Moving the cursor
//! Forward, the replay feeds the events between the old and the new cursor: playing and
//! stepping cost what the events in between cost. Backward, the statistics cannot be
//! un-fed, so the replay keeps **checkpoints**: a copy of the statistics at a chunk
//! boundary, taken the first time the cursor passes a boundary at least
//! [`CHECKPOINT_EVENTS`] events after the last checkpoint, with the latest event time fed
//! so far (its `reach`). Going back to `T` restores the last checkpoint whose reach is at
//! or before `T` (the first, the empty statistics, always is) and feeds forward from there:
//! at most [`CHECKPOINT_EVENTS`] events plus one chunk once the region was played through.
//! A first jump far ahead feeds every event up to there once (and leaves checkpoints
//! behind it). Only the chunk the cursor is in stays decoded.
//!
//! Recorded names, devices and threads get this process's ids the first time a chunk
//! names them; threads get a thread of their recorded name (the final name when the
//! recording has it), as the Chrome export does, so the statistics name them as live.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;

use crate::profiler::spans::{self, SpanSnapshot, SpanStore};
use crate::profiler::{
    DeviceId, EventSink, OpName, Snapshot, Stats, StatsOptions, Summary, ThreadId,
};

use super::convert::to_event;
use super::export::thread_named;
use super::format::RecordKind;
use super::index::{ChunkData, RecordingIndex};
use super::RecordError;

/// Events fed between two checkpoints at least.
pub const CHECKPOINT_EVENTS: u64 = 1 << 20;

/// The statistics at a chunk boundary.
#[derive(Clone, Debug)]
struct Checkpoint {
    /// Chunks before this frame are fed; none after.
    frame: usize,
    /// The latest event time among them (0: none).
    reach_ns: u64,
    stats: Stats,
}

/// Where the statistics are: every frame before `frame` fed, and of `frame` the events at
/// or before `upto` (`None`: none of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Position {
    frame: usize,
    upto: Option<u64>,
}

/// This process's ids for the recording's.
#[derive(Debug, Default)]
struct Ids {
    names: HashMap<u32, (OpName, String)>,
    devices: HashMap<u16, DeviceId>,
    threads: HashMap<u32, ThreadId>,
    final_threads: HashMap<u32, String>,
}

impl Ids {
    fn learn(&mut self, chunk: &ChunkData) -> Result<(), RecordError> {
        for (id, text) in &chunk.names {
            self.names
                .entry(*id)
                .or_insert_with(|| (OpName::new(text), text.clone()));
        }
        for (id, text) in &chunk.devices {
            self.devices
                .entry(*id)
                .or_insert_with(|| DeviceId::register(text));
        }
        for (id, text) in &chunk.threads {
            if !self.threads.contains_key(id) {
                let name = self.final_threads.get(id).unwrap_or(text);
                self.threads.insert(*id, thread_named(name)?);
            }
        }
        Ok(())
    }

    fn name(&mut self, id: u32) -> OpName {
        self.names
            .entry(id)
            .or_insert_with(|| (OpName::new("unknown"), "unknown".into()))
            .0
    }

    fn device(&mut self, id: u16) -> DeviceId {
        *self
            .devices
            .entry(id)
            .or_insert_with(|| DeviceId::register("unknown"))
    }

    fn thread(&mut self, id: u32) -> Result<ThreadId, RecordError> {
        if let Some(&thread) = self.threads.get(&id) {
            return Ok(thread);
        }
        let thread = thread_named(&format!("thread-{id}"))?;
        self.threads.insert(id, thread);
        Ok(thread)
    }
}

/// A recording being replayed: a cursor in its run, and the statistics at the cursor.
///
/// ```
/// # use enginetop::profiler::{DeviceId, OpName, OpInfo, Profiler};
/// # use enginetop::record::{Recorder, RecordingInfo, Replay};
/// let path = std::env::temp_dir().join(format!("doc-replay-{}.etrec", std::process::id()));
/// let profiler = Profiler::new(Default::default()).unwrap();
/// let recorder = Recorder::start(&path, &profiler, RecordingInfo::default()).unwrap();
/// let (cpu, op) = (DeviceId::register("doc-replay"), OpName::new("doc-replay-op"));
/// profiler.op_start(cpu, op, OpInfo::new(1));
/// profiler.op_end(cpu, op, OpInfo::new(1), false);
/// recorder.finish(&profiler, None).unwrap();
/// let mut replay = Replay::open(&path).unwrap();
/// assert_eq!(replay.snapshot().op("doc-replay-op").map(|op| op.count), None);
/// replay.seek(replay.end_ns()).unwrap();
/// assert_eq!(replay.snapshot().op("doc-replay-op").unwrap().count, 1);
/// # std::fs::remove_file(&path).unwrap();
/// ```
#[derive(Debug)]
pub struct Replay {
    index: RecordingIndex,
    ids: Ids,
    stats: Stats,
    /// The op spans fed since the last restore, for the timeline (see [`Replay::spans`]).
    spans: SpanStore,
    at: Position,
    cursor_ns: u64,
    reach_ns: u64,
    checkpoints: Vec<Checkpoint>,
    fed_since_checkpoint: u64,
    /// Events between checkpoints at least ([`CHECKPOINT_EVENTS`]; less in tests).
    checkpoint_every: u64,
    /// The chunk the cursor is in, decoded.
    current: Option<(usize, Rc<ChunkData>)>,
    /// Frames found damaged while replaying, and why.
    damaged: Vec<(usize, String)>,
}

impl Replay {
    /// Opens the recording at `path` with the cursor at its first event.
    pub fn open(path: impl AsRef<Path>) -> Result<Replay, RecordError> {
        let index = RecordingIndex::open(path)?;
        let stats = Stats::new(StatsOptions::default());
        let ids = Ids {
            final_threads: index.final_threads.iter().cloned().collect(),
            ..Ids::default()
        };
        let mut replay = Replay {
            cursor_ns: index.first_ns.unwrap_or(0),
            index,
            ids,
            at: Position {
                frame: 1,
                upto: None,
            },
            reach_ns: 0,
            checkpoints: vec![Checkpoint {
                frame: 1,
                reach_ns: 0,
                stats: stats.clone(),
            }],
            stats,
            spans: SpanStore::new(spans::DEFAULT_CAPACITY),
            fed_since_checkpoint: 0,
            checkpoint_every: CHECKPOINT_EVENTS,
            current: None,
            damaged: Vec::new(),
        };
        replay.feed_until(replay.cursor_ns)?;
        Ok(replay)
    }

    /// The index (the run's description, its frames, what its ends say).
    pub fn index(&self) -> &RecordingIndex {
        &self.index
    }

    /// The run's first event time (ns since the recording's epoch).
    pub fn start_ns(&self) -> u64 {
        self.index.first_ns.unwrap_or(0)
    }

    /// The run's last event time (as far as the recording holds it).
    pub fn end_ns(&self) -> u64 {
        self.index.last_ns.unwrap_or(0).max(self.start_ns())
    }

    /// The cursor.
    pub fn cursor_ns(&self) -> u64 {
        self.cursor_ns
    }

    /// Checkpoints kept so far.
    pub fn checkpoints(&self) -> usize {
        self.checkpoints.len()
    }

    /// What could not be read: the index's losses, then the damaged frames met so far.
    pub fn losses(&self) -> Vec<String> {
        let mut losses = self.index.losses.clone();
        losses.extend(self.damaged.iter().map(|(_, why)| why.clone()));
        losses
    }

    /// The statistics at the cursor, windows ending there.
    pub fn snapshot(&mut self) -> Snapshot {
        self.stats.snapshot(self.cursor_ns)
    }

    /// The op spans that ended by the cursor, for the op-by-op timeline: those fed since the
    /// statistics were last restored from a checkpoint (a seek backwards restores the
    /// checkpoint at or before its target, at most [`CHECKPOINT_EVENTS`] fed events back), up
    /// to the store's capacity.
    pub fn spans(&self) -> SpanSnapshot {
        self.spans.snapshot()
    }

    /// The profiler's summary at the cursor (every op ended by then).
    pub fn summary(&mut self) -> Summary {
        Summary::from_snapshot(&self.snapshot())
    }

    /// Moves the cursor to `target_ns` (clamped to the run) and the statistics with it.
    pub fn seek(&mut self, target_ns: u64) -> Result<(), RecordError> {
        let target = target_ns.clamp(self.start_ns(), self.end_ns());
        if target < self.cursor_ns {
            self.restore(target);
        }
        self.feed_until(target)?;
        self.cursor_ns = target;
        Ok(())
    }

    /// Feeds every event left (also any after the last chunk's latest) and puts the cursor
    /// at the end: the state the live run ended with.
    pub fn seek_to_end(&mut self) -> Result<(), RecordError> {
        self.feed_until(u64::MAX)?;
        self.cursor_ns = self.end_ns().max(self.reach_ns);
        Ok(())
    }

    /// The start time of the first op after the cursor whose name holds `query` (any case),
    /// if there is one.
    pub fn next_op(&mut self, query: &str) -> Result<Option<u64>, RecordError> {
        let query = query.to_lowercase();
        for frame in self.at.frame..self.index.frames().len() {
            let Ok(Some(chunk)) = self.chunk(frame) else {
                continue;
            };
            self.ids.learn(&chunk)?;
            let names = &self.ids.names;
            let found = chunk
                .events
                .iter()
                .filter(|event| event.kind == RecordKind::OpStart && event.ts_ns > self.cursor_ns)
                .filter(|event| {
                    names
                        .get(&event.name)
                        .is_some_and(|(_, text)| text.to_lowercase().contains(&query))
                })
                .map(|event| event.ts_ns)
                .min();
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }

    /// Back to the last checkpoint at or before `target`.
    fn restore(&mut self, target: u64) {
        let checkpoint = self
            .checkpoints
            .iter()
            .rev()
            .find(|checkpoint| checkpoint.reach_ns <= target)
            .unwrap_or(&self.checkpoints[0]);
        self.stats = checkpoint.stats.clone();
        self.spans = SpanStore::new(spans::DEFAULT_CAPACITY);
        self.reach_ns = checkpoint.reach_ns;
        self.at = Position {
            frame: checkpoint.frame,
            upto: None,
        };
        self.fed_since_checkpoint = 0;
    }

    /// Feeds events forward from the position until the state at `target`.
    fn feed_until(&mut self, target: u64) -> Result<(), RecordError> {
        while self.at.frame < self.index.frames().len() {
            let frame = self.at.frame;
            let chunk = match self.chunk(frame) {
                Ok(Some(chunk)) => chunk,
                Ok(None) => {
                    self.next_frame();
                    continue;
                }
                Err(why) => {
                    if !self.damaged.iter().any(|(seen, _)| *seen == frame) {
                        self.damaged.push((frame, why));
                    }
                    self.next_frame();
                    continue;
                }
            };
            self.ids.learn(&chunk)?;
            let after = self.at.upto;
            let mut last = 0;
            let mut batch = Vec::new();
            for event in &chunk.events {
                last = last.max(event.ts_ns);
                let fresh = after.is_none_or(|upto| event.ts_ns > upto);
                if fresh && event.ts_ns <= target {
                    let ids = (
                        self.ids.name(event.name),
                        self.ids.device(event.device),
                        self.ids.thread(event.thread)?,
                    );
                    let event = to_event(event, ids);
                    self.stats.ingest(&event);
                    batch.push(event);
                    self.fed_since_checkpoint += 1;
                }
            }
            if !batch.is_empty() {
                self.spans.drained(&batch, chunk.dropped);
            }
            self.stats.set_dropped(chunk.dropped);
            if last <= target {
                self.reach_ns = self.reach_ns.max(last);
                self.next_frame();
            } else {
                self.at.upto = Some(target);
                return Ok(());
            }
        }
        Ok(())
    }

    fn next_frame(&mut self) {
        self.at = Position {
            frame: self.at.frame + 1,
            upto: None,
        };
        let newest = self.checkpoints.last().map_or(0, |c| c.frame);
        if self.fed_since_checkpoint >= self.checkpoint_every && self.at.frame > newest {
            self.checkpoints.push(Checkpoint {
                frame: self.at.frame,
                reach_ns: self.reach_ns,
                stats: self.stats.clone(),
            });
            self.fed_since_checkpoint = 0;
        }
    }

    /// Chunk `frame`, decoded once while the cursor stays in it.
    fn chunk(&mut self, frame: usize) -> Result<Option<Rc<ChunkData>>, String> {
        if let Some((held, chunk)) = &self.current {
            if *held == frame {
                return Ok(Some(chunk.clone()));
            }
        }
        let Some(chunk) = self.index.chunk(frame)? else {
            return Ok(None);
        };
        let chunk = Rc::new(chunk);
        self.current = Some((frame, chunk.clone()));
        Ok(Some(chunk))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::profiler::{Event, EventKind, OpInfo, Profiler, ProfilerOptions};
    use crate::record::tests::{record_synthetic, scratch, Synthetic};
    use crate::record::{Recorder, RecordingInfo};

    const OPS: &[(&str, u64)] = &[("rp-gemm", 300), ("rp-relu", 40), ("rp-sgd", 120)];

    fn synthetic(name: &str, rounds: u64) -> std::path::PathBuf {
        let path = scratch(name);
        let run = Synthetic {
            worker: "rp-worker",
            ops: OPS,
            rounds,
        };
        record_synthetic(&path, &run);
        path
    }

    fn counts(snapshot: &Snapshot) -> Vec<(String, u64, u64)> {
        let mut rows: Vec<_> = snapshot
            .ops
            .iter()
            .map(|op| (op.name.clone(), op.count, op.total_ns))
            .collect();
        rows.sort();
        rows
    }

    /// A live profiler's op table and the replay's at the end are the same rows.
    #[test]
    fn the_replay_ends_with_the_live_statistics() {
        let path = scratch("replay-live");
        let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
        let recorder = Recorder::start(&path, &profiler, RecordingInfo::default()).unwrap();
        let device = DeviceId::register("rp-live-cpu");
        for id in 0..2_000u64 {
            let name = OpName::new(["rp-live-a", "rp-live-b"][id as usize % 2]);
            let start = Event::op(EventKind::OpStart, device, name, OpInfo::new(id));
            profiler.record_at(start.at(1_000 + id * 10_000));
            let mut end = start.at(1_000 + id * 10_000 + 1_000 + id);
            end.kind = EventKind::OpEnd;
            profiler.record_at(end);
        }
        profiler.flush();
        let live = profiler.summary();
        recorder.finish(&profiler, None).unwrap();
        let mut replay = Replay::open(&path).unwrap();
        replay.seek_to_end().unwrap();
        let replayed = replay.summary();
        let rows = |summary: &Summary| {
            summary
                .operators
                .iter()
                .filter(|op| op.name.starts_with("rp-live"))
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(rows(&replayed).len(), 2);
        assert_eq!(rows(&replayed), rows(&live));
        let spans = replay.spans();
        assert_eq!(
            spans.len(),
            2_000,
            "every op reaches the timeline as a span"
        );
        let last = spans.iter().find(|span| span.op == 1_999).unwrap();
        assert_eq!(last.duration_ns(), 1_000 + 1_999);
        replay.seek(1_000 + 1_000 * 10_000).unwrap();
        assert_eq!(
            replay.spans().len(),
            1_000,
            "a seek back keeps the spans ended by then"
        );
        std::fs::remove_file(&path).unwrap();
    }

    /// A synthetic recording of many chunks (8 threads, 16,384 events a chunk).
    fn chunked(name: &str, bytes: u64) -> std::path::PathBuf {
        let path = scratch(name);
        crate::record::replay_bench::write_synthetic(&path, bytes).unwrap();
        path
    }

    fn ops(replay: &mut Replay) -> u64 {
        replay.snapshot().ops.iter().map(|op| op.count).sum()
    }

    /// The cursor moved forward, back (through checkpoints) and forward again shows what a
    /// fresh replay moved straight there shows.
    #[test]
    fn any_path_to_a_moment_gives_the_same_statistics() {
        let path = chunked("replay-paths", 1_000_000);
        let mut wandering = Replay::open(&path).unwrap();
        wandering.checkpoint_every = 10_000;
        let (start, end) = (wandering.start_ns(), wandering.end_ns());
        let moments: Vec<u64> = (0..=10).map(|k| start + (end - start) * k / 10).collect();
        for &target in moments
            .iter()
            .rev()
            .chain(&moments)
            .chain(moments.iter().rev())
        {
            wandering.seek(target).unwrap();
            let mut fresh = Replay::open(&path).unwrap();
            fresh.seek(target).unwrap();
            let (seen, expected) = (wandering.snapshot(), fresh.snapshot());
            assert_eq!(counts(&seen), counts(&expected), "at {target}");
            assert_eq!(seen.events, expected.events, "at {target}");
        }
        assert!(wandering.checkpoints() > 3, "{}", wandering.checkpoints());
        wandering.seek_to_end().unwrap();
        let all = ops(&mut wandering);
        wandering.seek(moments[5]).unwrap();
        let half = ops(&mut wandering);
        assert!(
            half > all * 3 / 10 && half < all * 7 / 10,
            "{half} of {all} half-way"
        );
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_cut_off_recording_replays_its_prefix_and_says_what_it_lost() {
        let path = chunked("replay-cut", 400_000);
        let mut whole = Replay::open(&path).unwrap();
        whole.seek_to_end().unwrap();
        let all = ops(&mut whole);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() * 2 / 3]).unwrap();
        let mut cut = Replay::open(&path).unwrap();
        cut.seek_to_end().unwrap();
        let some = ops(&mut cut);
        assert!(some > all / 3 && some < all, "{some} of {all}");
        let losses = cut.losses().join("; ");
        assert!(
            losses.contains("cut off") && losses.contains("no end frame"),
            "{losses}"
        );
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn the_next_op_of_a_name_is_found_after_the_cursor() {
        let path = synthetic("replay-next-op", 50);
        let mut replay = Replay::open(&path).unwrap();
        let first = replay.next_op("RP-SGD").unwrap().unwrap();
        // The first sgd starts after a gemm (300 us) and a relu (40 us), 500 ns apart each.
        assert_eq!(first, replay.start_ns() + 341_000);
        replay.seek(first).unwrap();
        let second = replay.next_op("sgd").unwrap().unwrap();
        assert_eq!(second - first, 461_500);
        assert_eq!(replay.next_op("no-such-op").unwrap(), None);
        std::fs::remove_file(&path).unwrap();
    }
}
