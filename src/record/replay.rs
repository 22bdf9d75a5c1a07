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
//! un-fed, and far forward feeding would cost every event in between, so the replay starts
//! from a **checkpoint** (module `checkpoints`): a copy of the statistics at a chunk
//! boundary with the latest event time fed by then (its `reach`), built by a thread of its
//! own that folds the file once from the moment it opens. A jump to `T` restores the latest
//! built checkpoint whose reach is at or before `T` when the cursor is after `T`, or when
//! that checkpoint is more than one spacing ahead of the cursor, and feeds forward from
//! there: one spacing of events at most once the builder has passed `T`.
//! [`Replay::seek`] feeds until `T`; [`Replay::seek_within`] feeds for at most a budget (at
//! chunk boundaries) and says whether it got there, so a dashboard frame shows the nearest
//! state ready and the next frames go on from it. Only the chunk the cursor is in stays
//! decoded.
//!
//! Recorded names, devices and threads get this process's ids the first time a chunk
//! names them; threads get a thread of their recorded name (the final name when the
//! recording has it), as the Chrome export does, so the statistics name them as live.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::profiler::spans::{self, SpanSnapshot, SpanStore};
use crate::profiler::{
    DeviceId, Event, EventSink, OpName, Snapshot, Stats, StatsOptions, Summary, ThreadId,
};
use crate::sync::{Arc, Mutex};

use super::checkpoints::{spacing_for, Checkpoint, Checkpoints};
use super::convert::to_event;
use super::export::thread_named;
use super::format::RecordKind;
use super::index::{ChunkData, RecordingIndex};
use super::RecordError;

/// Where the statistics are: every frame before `frame` fed, and of `frame` the events at
/// or before `upto` (`None`: none of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Position {
    frame: usize,
    upto: Option<u64>,
}

/// This process's ids for the recording's (shared by the replay and its checkpoint builder).
#[derive(Debug, Default)]
pub(super) struct Ids {
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

/// Learns `chunk`'s tables and appends to `batch` its events after `after` (`None`: all)
/// and at or before `target`, in file order, with this process's ids; returns the chunk's
/// latest event time (0: no event).
pub(super) fn resolve(
    ids: &Mutex<Ids>,
    chunk: &ChunkData,
    after: Option<u64>,
    target: u64,
    batch: &mut Vec<Event>,
) -> Result<u64, RecordError> {
    let mut ids = ids.lock();
    ids.learn(chunk)?;
    let mut last = 0;
    for event in &chunk.events {
        last = last.max(event.ts_ns);
        let fresh = after.is_none_or(|upto| event.ts_ns > upto);
        if fresh && event.ts_ns <= target {
            let resolved = (
                ids.name(event.name),
                ids.device(event.device),
                ids.thread(event.thread)?,
            );
            batch.push(to_event(event, resolved));
        }
    }
    Ok(last)
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
    ids: Arc<Mutex<Ids>>,
    stats: Stats,
    /// The op spans fed since the last restore, for the timeline (see [`Replay::spans`]).
    spans: SpanStore,
    at: Position,
    cursor_ns: u64,
    reach_ns: u64,
    checkpoints: Checkpoints,
    /// Frame bytes between two checkpoints.
    spacing: u64,
    /// The chunk the cursor is in, decoded.
    current: Option<(usize, Rc<ChunkData>)>,
    /// Frames found damaged while replaying, and why.
    damaged: Vec<(usize, String)>,
    /// The events of the chunk being fed, resolved (kept for its allocation).
    batch: Vec<Event>,
}

impl Replay {
    /// Opens the recording at `path` with the cursor at its first event, and starts building
    /// its checkpoints in the background.
    pub fn open(path: impl AsRef<Path>) -> Result<Replay, RecordError> {
        Replay::open_spaced(path, None)
    }

    /// [`Replay::open`] with checkpoints every `spacing` frame bytes (`None`: the default,
    /// [`spacing_for`] the file).
    pub(crate) fn open_spaced(
        path: impl AsRef<Path>,
        spacing: Option<u64>,
    ) -> Result<Replay, RecordError> {
        let index = RecordingIndex::open(path)?;
        let frame_bytes = index.frames().iter().map(|f| u64::from(f.length)).sum();
        let spacing = spacing.unwrap_or_else(|| spacing_for(frame_bytes));
        let ids = Arc::new(Mutex::new(Ids {
            final_threads: index.final_threads.iter().cloned().collect(),
            ..Ids::default()
        }));
        let checkpoints = Checkpoints::start(index.frame_reader()?, ids.clone(), spacing)?;
        let mut replay = Replay {
            cursor_ns: index.first_ns.unwrap_or(0),
            index,
            ids,
            at: Position {
                frame: 1,
                upto: None,
            },
            reach_ns: 0,
            checkpoints,
            spacing,
            stats: Stats::new(StatsOptions::default()),
            spans: SpanStore::new(spans::DEFAULT_CAPACITY),
            current: None,
            damaged: Vec::new(),
            batch: Vec::new(),
        };
        replay.feed_until(replay.cursor_ns, None)?;
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

    /// The cursor: the moment the statistics are at (while a [`seek_within`] has not got
    /// there, the moment its feeding has reached).
    ///
    /// [`seek_within`]: Replay::seek_within
    pub fn cursor_ns(&self) -> u64 {
        self.cursor_ns
    }

    /// Frame bytes between two checkpoints.
    pub fn spacing(&self) -> u64 {
        self.spacing
    }

    /// Checkpoints built so far.
    pub fn checkpoints(&self) -> usize {
        self.checkpoints.ready()
    }

    /// The share of the file the checkpoint builder has folded, 0 to 1.
    pub fn checkpoints_built(&self) -> f64 {
        self.checkpoints.built()
    }

    /// Waits until every checkpoint is built.
    pub fn wait_for_checkpoints(&self) {
        self.checkpoints.wait_built();
    }

    /// What could not be read: the index's losses, then the damaged frames met so far (by
    /// the replay or its checkpoint builder).
    pub fn losses(&self) -> Vec<String> {
        let mut damaged = self.damaged.clone();
        for (frame, why) in self.checkpoints.damaged() {
            if !damaged.iter().any(|(seen, _)| *seen == frame) {
                damaged.push((frame, why));
            }
        }
        damaged.sort_by_key(|(frame, _)| *frame);
        let mut losses = self.index.losses.clone();
        losses.extend(damaged.into_iter().map(|(_, why)| why));
        losses
    }

    /// The statistics at the cursor, windows ending there.
    pub fn snapshot(&mut self) -> Snapshot {
        self.stats.snapshot(self.cursor_ns)
    }

    /// The op spans that ended by the cursor, for the op-by-op timeline: those fed since the
    /// statistics were last restored from a checkpoint (a jump restores the checkpoint at or
    /// before its target, at most one checkpoint spacing of events back), up to the store's
    /// capacity.
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
        self.start_toward(target);
        self.feed_until(target, None)?;
        self.cursor_ns = target;
        Ok(())
    }

    /// Moves the statistics toward `target_ns` (clamped to the run), feeding for about
    /// `budget` at most (whole chunks, at least one): `true` when they are at the target;
    /// `false` when the cursor stopped short, at the nearest state ready, and a next call
    /// goes on from there.
    pub fn seek_within(&mut self, target_ns: u64, budget: Duration) -> Result<bool, RecordError> {
        let deadline = Instant::now() + budget;
        let target = target_ns.clamp(self.start_ns(), self.end_ns());
        self.start_toward(target);
        let reached = self.feed_until(target, Some(deadline))?;
        self.cursor_ns = match reached {
            true => target,
            false => self.reach_ns.clamp(self.start_ns(), target),
        };
        Ok(reached)
    }

    /// Feeds every event left (also any after the last chunk's latest) and puts the cursor
    /// at the end: the state the live run ended with.
    pub fn seek_to_end(&mut self) -> Result<(), RecordError> {
        self.start_toward(u64::MAX);
        self.feed_until(u64::MAX, None)?;
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
            let mut ids = self.ids.lock();
            ids.learn(&chunk)?;
            let names = &ids.names;
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

    /// Whether feeding forward from where the statistics are reaches the state at `target`:
    /// every chunk fed whole ends by it, and the one fed in part was fed up to it at most.
    fn can_feed_to(&self, target: u64) -> bool {
        self.reach_ns <= target && self.at.upto.is_none_or(|upto| upto <= target)
    }

    /// Restores the best checkpoint for `target` when feeding from it is needed (the
    /// statistics are past the target) or saves more than a spacing of feeding.
    fn start_toward(&mut self, target: u64) {
        let checkpoint = self.checkpoints.best(target);
        let frames = self.index.frames();
        let offset = |frame: usize| frames.get(frame).map_or(u64::MAX, |entry| entry.offset);
        let ahead = offset(checkpoint.frame).saturating_sub(offset(self.at.frame));
        if !self.can_feed_to(target) || (checkpoint.frame > self.at.frame && ahead > self.spacing) {
            self.restore(&checkpoint);
        }
    }

    fn restore(&mut self, checkpoint: &Checkpoint) {
        self.stats = checkpoint.stats.clone();
        self.spans = SpanStore::new(spans::DEFAULT_CAPACITY);
        self.reach_ns = checkpoint.reach_ns;
        self.at = Position {
            frame: checkpoint.frame,
            upto: None,
        };
    }

    /// Feeds events forward from the position until the state at `target`; with a
    /// deadline, stops at the first chunk boundary past it. `true`: at the target.
    fn feed_until(&mut self, target: u64, deadline: Option<Instant>) -> Result<bool, RecordError> {
        while self.at.frame < self.index.frames().len() {
            if self.feed_frame(target)? {
                return Ok(true);
            }
            if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                return Ok(self.at.frame >= self.index.frames().len());
            }
        }
        Ok(true)
    }

    /// Feeds the frame at the position up to `target`: `true` when the target is inside it
    /// (the position stays there), `false` when it was fed whole (the position moves on).
    fn feed_frame(&mut self, target: u64) -> Result<bool, RecordError> {
        let frame = self.at.frame;
        let chunk = match self.chunk(frame) {
            Ok(Some(chunk)) => chunk,
            Ok(None) => {
                self.next_frame();
                return Ok(false);
            }
            Err(why) => {
                if !self.damaged.iter().any(|(seen, _)| *seen == frame) {
                    self.damaged.push((frame, why));
                }
                self.next_frame();
                return Ok(false);
            }
        };
        let mut batch = std::mem::take(&mut self.batch);
        batch.clear();
        let last = resolve(&self.ids, &chunk, self.at.upto, target, &mut batch)?;
        for event in &batch {
            self.stats.ingest(event);
        }
        if !batch.is_empty() {
            self.spans.drained(&batch, chunk.dropped);
        }
        self.batch = batch;
        self.stats.set_dropped(chunk.dropped);
        if last <= target {
            self.reach_ns = self.reach_ns.max(last);
            self.next_frame();
            Ok(false)
        } else {
            self.at.upto = Some(target);
            Ok(true)
        }
    }

    fn next_frame(&mut self) {
        self.at = Position {
            frame: self.at.frame + 1,
            upto: None,
        };
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

    /// The statistics at the cursor, every field but the threads' ids (two replays give the
    /// same recorded thread different ids; the order and names of the workers stay).
    fn state(replay: &mut Replay) -> String {
        let mut snapshot = replay.snapshot();
        for worker in &mut snapshot.workers {
            worker.thread = 0;
        }
        for states in &mut snapshot.work_states {
            states.thread = 0;
        }
        format!("{snapshot:?}")
    }

    /// The state at `target` folded from the first event (no checkpoint but the first).
    fn folded(path: &std::path::Path, target: u64) -> String {
        let mut fold = Replay::open_spaced(path, Some(u64::MAX)).unwrap();
        fold.seek(target).unwrap();
        assert_eq!(fold.checkpoints(), 1);
        state(&mut fold)
    }

    /// Moments of the run: its ends and `count` more drawn with a fixed seed, in drawn order.
    fn moments(replay: &Replay, count: usize) -> Vec<u64> {
        let mut rng = fastrand::Rng::with_seed(25);
        let (start, end) = (replay.start_ns(), replay.end_ns());
        let mut moments = vec![end, start];
        moments.extend((0..count).map(|_| rng.u64(start..=end)));
        moments
    }

    /// A real recording (a profiler's events through the recorder) of several chunks: ops of
    /// three names, drained batch by batch.
    fn real(name: &str) -> std::path::PathBuf {
        let path = scratch(name);
        let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
        let recorder = Recorder::start(&path, &profiler, RecordingInfo::default()).unwrap();
        let device = DeviceId::register("rp-real-cpu");
        let names = ["rp-real-a", "rp-real-b", "rp-real-c"].map(OpName::new);
        for id in 0..60_000u64 {
            let name = names[id as usize % 3];
            let start = Event::op(EventKind::OpStart, device, name, OpInfo::new(id));
            profiler.record_at(start.at(1_000 + id * 10_000));
            let mut end = start.at(1_000 + id * 10_000 + 1_000 + id % 7_000);
            end.kind = EventKind::OpEnd;
            profiler.record_at(end);
            if id % 1_000 == 999 {
                profiler.flush();
            }
        }
        profiler.flush();
        recorder.finish(&profiler, None).unwrap();
        path
    }

    /// Over a real recording, jumps in any order land where folding from the first event
    /// lands, whichever checkpoint they start from.
    #[test]
    fn a_state_reached_through_checkpoints_is_the_state_folded_from_the_start() {
        let path = real("replay-checkpoints");
        let mut jumping = Replay::open_spaced(&path, Some(1)).unwrap();
        jumping.wait_for_checkpoints();
        let frames = jumping.index().frames().len();
        assert!(frames >= 6, "{frames} frames");
        assert!(
            jumping.checkpoints() >= frames - 1,
            "{}",
            jumping.checkpoints()
        );
        for target in moments(&jumping, 12) {
            jumping.seek(target).unwrap();
            assert_eq!(state(&mut jumping), folded(&path, target), "at {target}");
        }
        std::fs::remove_file(&path).unwrap();
    }

    /// The cursor moved forward, back and forward again, while the checkpoints are still
    /// being built, shows what folding straight there shows.
    #[test]
    fn any_path_to_a_moment_gives_the_same_statistics() {
        let path = chunked("replay-paths", 1_000_000);
        let mut wandering = Replay::open_spaced(&path, Some(100_000)).unwrap();
        let (start, end) = (wandering.start_ns(), wandering.end_ns());
        let moments: Vec<u64> = (0..=10).map(|k| start + (end - start) * k / 10).collect();
        for &target in moments
            .iter()
            .rev()
            .chain(&moments)
            .chain(moments.iter().rev())
        {
            wandering.seek(target).unwrap();
            assert_eq!(state(&mut wandering), folded(&path, target), "at {target}");
        }
        wandering.wait_for_checkpoints();
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

    /// With no time to feed, each call still feeds a chunk and shows a state short of the
    /// target; the calls get to the state a whole jump gets to.
    #[test]
    fn a_jump_in_budgeted_steps_gets_where_a_whole_jump_does() {
        let path = chunked("replay-budget", 600_000);
        let mut stepping = Replay::open_spaced(&path, Some(u64::MAX)).unwrap();
        let target = stepping.end_ns() - (stepping.end_ns() - stepping.start_ns()) / 4;
        let mut calls = 0;
        let mut shown = stepping.cursor_ns();
        while !stepping.seek_within(target, Duration::ZERO).unwrap() {
            calls += 1;
            assert!(calls < stepping.index().frames().len(), "no progress");
            let cursor = stepping.cursor_ns();
            assert!(
                cursor >= shown && cursor < target,
                "{shown} {cursor} {target}"
            );
            shown = cursor;
        }
        assert!(calls >= 2, "{calls} calls");
        assert_eq!(stepping.cursor_ns(), target);
        assert_eq!(state(&mut stepping), folded(&path, target));
        std::fs::remove_file(&path).unwrap();
    }

    /// A chunk damaged in the middle: the checkpoint builder names it before the cursor gets
    /// there, and jumps past it land where folding past it does.
    #[test]
    fn a_corrupt_chunk_is_named_and_skipped_by_jumps_and_checkpoints() {
        let path = chunked("replay-corrupt", 600_000);
        let index = RecordingIndex::open(&path).unwrap();
        let middle = index.frames().len() / 2;
        let entry = index.frames()[middle];
        drop(index);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[entry.offset as usize + super::super::format::FRAME_HEADER_LEN + 9] ^= 0x5a;
        std::fs::write(&path, &bytes).unwrap();
        let mut replay = Replay::open_spaced(&path, Some(1)).unwrap();
        replay.wait_for_checkpoints();
        let losses = replay.losses().join("; ");
        assert!(
            losses.contains(&format!("frame {middle} (at byte {})", entry.offset))
                && losses.contains("left out"),
            "{losses}"
        );
        for target in moments(&replay, 6) {
            replay.seek(target).unwrap();
            assert_eq!(state(&mut replay), folded(&path, target), "at {target}");
        }
        assert_eq!(replay.losses().len(), 1, "{:?}", replay.losses());
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
