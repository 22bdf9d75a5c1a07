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
//! `T`) comes in when the cursor passes its chunk, as it came in late live. A chunk's marks
//! (a ring's gap, a thread's exit) are taken where the collector took them among its
//! events, each when the cursor passes its time; the statistics cut their windows as the
//! live ones did (the options are in the header). The whole recording fed this way is
//! what the live statistics ended with, so the replay's final summary is the live run's.
//!
//! Pool task events may be sampled (1 in N per worker, `profiler::task_counts`); the
//! recording's end frame holds the workers' exact counts, and once every frame is fed the
//! snapshot takes them as the live one did, so the final task counts, shares and
//! `task_sampling` are the live run's. Before the end, task figures are the sample's.
//!
//! # Moving the cursor
//! Forward, the replay feeds the events between the old and the new cursor: playing and
//! stepping cost what the events in between cost. Backward, the statistics cannot be
//! un-fed, and far forward feeding would cost every event in between, so the replay starts
//! from a **checkpoint** the recorder wrote into the file (module `checkpoints`): the
//! statistics after every chunk before it, and the latest event time among them (its
//! `reach`). A jump to `T` restores the latest checkpoint whose reach is at or before `T`
//! when the statistics are past `T`, or when that checkpoint lies more than
//! [`RESTORE_AHEAD_BYTES`] ahead of them, and feeds forward from there: one checkpoint
//! interval of events at most, from the moment the file opens. [`Replay::seek`] feeds until
//! `T`; [`Replay::seek_within`] feeds for at most a budget (at chunk boundaries) and says
//! whether it got there, so a dashboard frame shows the nearest state ready and the next
//! frames go on from it. Only the chunk the cursor is in stays decoded.
//!
//! # Ids
//! Recorded names, devices and threads get this process's ids the first time a chunk or a restored
//! checkpoint names them. Devices are registered with their recorded name and typed identity, so a
//! replayed device is the live one (`DeviceId::device` and all); threads get a thread of their
//! recorded name (the final name when the recording has it), as the Chrome export does, so the
//! statistics name them as live. A restored checkpoint's statistics carry the recording's ids and
//! are given this process's ([`Stats::remap`]).
//!
//! # Searching
//! [`Replay::search_within`] looks for the next start of an op of a name chunk after chunk
//! from the cursor, for at most a budget per call, so the dashboard stays live on a file of
//! any size; [`Replay::next_op`] searches to the end at once.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::profiler::spans::{self, SpanSnapshot, SpanStore};
use crate::profiler::stats::IdMap;
use crate::profiler::{
    DeviceId, Event, EventSink, OpName, Snapshot, Stats, Summary, TaskCounts, TaskReading, ThreadId,
};

use super::checkpoints::{Checkpoints, CHECKPOINT_BYTES};
use super::convert::to_event;
use super::export::thread_named;
use super::format::{unknown_device, CheckpointFrame, DeviceEntry, Mark, RecordKind, Tables};
use super::index::{ChunkData, RecordingIndex};
use super::RecordError;

/// Frame bytes a checkpoint must lie ahead of the statistics for a forward jump to restore
/// it rather than feed up to it (decoding a checkpoint costs about what feeding this does).
pub const RESTORE_AHEAD_BYTES: u64 = CHECKPOINT_BYTES / 4;

/// Where the statistics are: every frame before `frame` fed, and of `frame` the events at
/// or before `upto` (`None`: none of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Position {
    frame: usize,
    upto: Option<u64>,
}

/// This process's ids for the recording's.
#[derive(Debug, Default)]
pub(super) struct Ids {
    names: HashMap<u32, (OpName, String)>,
    devices: HashMap<u16, DeviceId>,
    threads: HashMap<u32, ThreadId>,
    final_threads: HashMap<u32, String>,
}

impl Ids {
    fn learn(&mut self, chunk: &ChunkData) -> Result<(), RecordError> {
        self.learn_entries(&chunk.names, &chunk.devices, &chunk.threads)
    }

    fn learn_tables(&mut self, tables: &Tables) -> Result<(), RecordError> {
        self.learn_entries(&tables.names, &tables.devices, &tables.threads)
    }

    fn learn_names(&mut self, names: &[(u32, String)]) {
        for (id, text) in names {
            self.names
                .entry(*id)
                .or_insert_with(|| (OpName::new(text), text.clone()));
        }
    }

    fn learn_entries(
        &mut self,
        names: &[(u32, String)],
        devices: &[(u16, DeviceEntry)],
        threads: &[(u32, String)],
    ) -> Result<(), RecordError> {
        self.learn_names(names);
        for (id, entry) in devices {
            self.devices.entry(*id).or_insert_with(|| entry.register());
        }
        for (id, text) in threads {
            if !self.threads.contains_key(id) {
                let name = self.final_threads.get(id).unwrap_or(text);
                self.threads.insert(*id, thread_named(name)?);
            }
        }
        Ok(())
    }

    fn name_of(&mut self, id: u32) -> OpName {
        self.names
            .entry(id)
            .or_insert_with(|| (OpName::new("unknown"), "unknown".into()))
            .0
    }

    fn device_of(&mut self, id: u16) -> DeviceId {
        *self.devices.entry(id).or_insert_with(unknown_device)
    }

    fn thread_of(&mut self, id: u32) -> Result<ThreadId, RecordError> {
        if let Some(&thread) = self.threads.get(&id) {
            return Ok(thread);
        }
        let thread = thread_named(&format!("thread-{id}"))?;
        self.threads.insert(id, thread);
        Ok(thread)
    }
}

impl IdMap for Ids {
    fn name(&mut self, name: OpName) -> OpName {
        self.name_of(name.id())
    }

    fn device(&mut self, device: DeviceId) -> DeviceId {
        self.device_of(device.id())
    }

    /// Every thread of a restored checkpoint is learned before its statistics are remapped
    /// (naming one may fail, which this cannot say), so each is found here.
    fn thread(&mut self, thread: ThreadId) -> ThreadId {
        self.threads.get(&thread.id()).copied().unwrap_or(thread)
    }
}

/// A chunk's events after `after` (`None`: all) and at or before `target`, in file order,
/// with this process's ids, and its marks in the same window, each with the count of those
/// events before it.
#[derive(Debug, Default)]
struct Resolved {
    events: Vec<Event>,
    marks: Vec<(usize, Mark)>,
}

/// Learns `chunk`'s tables and fills `resolved` with its events and marks after `after`
/// and at or before `target`; returns the chunk's latest event or mark time (0: none).
fn resolve(
    ids: &mut Ids,
    chunk: &ChunkData,
    after: Option<u64>,
    target: u64,
    resolved: &mut Resolved,
) -> Result<u64, RecordError> {
    ids.learn(chunk)?;
    let in_window = |ts: u64| after.is_none_or(|upto| ts > upto) && ts <= target;
    let mut marks = chunk.marks.iter().copied().peekable();
    let mut last = 0;
    for (index, event) in chunk.events.iter().enumerate() {
        while let Some(mark) = marks.next_if(|mark| mark.at() <= index) {
            last = last.max(mark.ts_ns());
            if in_window(mark.ts_ns()) {
                resolved.marks.push((resolved.events.len(), mark));
            }
        }
        last = last.max(event.ts_ns);
        if in_window(event.ts_ns) {
            let ids = (
                ids.name_of(event.name),
                ids.device_of(event.device),
                ids.thread_of(event.thread)?,
            );
            resolved.events.push(to_event(event, ids));
        }
    }
    for mark in marks {
        last = last.max(mark.ts_ns());
        if in_window(mark.ts_ns()) {
            resolved.marks.push((resolved.events.len(), mark));
        }
    }
    Ok(last)
}

/// Feeds `resolved` to `stats`: its events, and its marks where the live statistics took
/// them (a mark of a thread the replay never met is one the live statistics passed by).
fn fold(stats: &mut Stats, ids: &Ids, resolved: &Resolved) {
    let mut marks = resolved.marks.iter().peekable();
    for index in 0..=resolved.events.len() {
        while let Some((_, mark)) = marks.next_if(|(at, _)| *at <= index) {
            apply(stats, ids, *mark);
        }
        if let Some(event) = resolved.events.get(index) {
            stats.ingest(event);
        }
    }
}

fn apply(stats: &mut Stats, ids: &Ids, mark: Mark) {
    match mark {
        Mark::Lost {
            thread, last_ns, ..
        } => {
            if let Some(&thread) = ids.threads.get(&thread) {
                stats.events_lost(thread, last_ns);
            }
        }
        Mark::Exited { thread, ts_ns, .. } => {
            if let Some(&thread) = ids.threads.get(&thread) {
                stats.thread_exited(thread, ts_ns);
            }
        }
        Mark::Reset { ts_ns, .. } => stats.reset(ts_ns),
    }
}

/// A search for the next start of an op whose name holds a text, made a slice at a time
/// ([`Replay::search_within`]).
#[derive(Debug)]
pub struct OpSearch {
    /// The text, lowercase.
    query: String,
    /// Op starts at or before this are passed by.
    after_ns: u64,
    /// The next frame to look through.
    frame: usize,
    /// Whether each recorded name id holds the text, once seen.
    matches: HashMap<u32, bool>,
}

impl OpSearch {
    /// The text searched for, as typed.
    pub fn query(&self) -> &str {
        &self.query
    }
}

/// Where a search stands after a slice.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SearchStep {
    /// The op starts then (ns since the recording's epoch).
    Found(u64),
    /// No op of the name starts after the cursor.
    Missing,
    /// Not done: the share of the file looked through, 0 to 1.
    Searching(f64),
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
    checkpoints: Checkpoints,
    /// Checkpoints restored so far.
    restores: u64,
    /// The chunk the cursor is in, decoded.
    current: Option<(usize, Rc<ChunkData>)>,
    /// Frames found damaged while replaying, and why.
    damaged: Vec<(usize, String)>,
    /// The events and marks of the chunk being fed, resolved (kept for its allocation).
    batch: Resolved,
    /// The exact task counts of the last chunk fed whole (or of the checkpoint restored).
    tasks: Vec<TaskReading>,
}

impl Replay {
    /// Opens the recording at `path` with the cursor at its first event.
    pub fn open(path: impl AsRef<Path>) -> Result<Replay, RecordError> {
        Replay::open_with(path, true)
    }

    /// [`Replay::open`] with the file's checkpoints left unused: every jump back feeds from
    /// the first event (what the checkpoints are checked against).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn open_from_start(path: impl AsRef<Path>) -> Result<Replay, RecordError> {
        Replay::open_with(path, false)
    }

    fn open_with(path: impl AsRef<Path>, checkpoints: bool) -> Result<Replay, RecordError> {
        let index = RecordingIndex::open(path)?;
        let ids = Ids {
            final_threads: index.final_threads.iter().cloned().collect(),
            ..Ids::default()
        };
        let checkpoints = match checkpoints {
            true => Checkpoints::of(&index),
            false => Checkpoints::none(),
        };
        let options = index.info.stats;
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
            restores: 0,
            stats: Stats::new(options),
            spans: SpanStore::new(spans::DEFAULT_CAPACITY),
            current: None,
            damaged: Vec::new(),
            batch: Resolved::default(),
            tasks: Vec::new(),
        };
        replay.feed_until(replay.cursor_ns, None)?;
        Ok(replay)
    }

    /// The index (the run's description, its frames, what its ends say).
    pub(crate) fn index(&self) -> &RecordingIndex {
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

    /// The checkpoints the file holds (used by this replay).
    pub fn checkpoints(&self) -> usize {
        self.checkpoints.len()
    }

    /// Checkpoints restored so far (jumps that started from one).
    pub fn restores(&self) -> u64 {
        self.restores
    }

    /// What could not be read: the index's losses, then the damaged frames and checkpoints
    /// met so far.
    pub fn losses(&self) -> Vec<String> {
        let mut damaged = self.damaged.clone();
        damaged.extend(self.checkpoints.damaged().iter().cloned());
        damaged.sort_by_key(|(frame, _)| *frame);
        let mut losses = self.index.losses.clone();
        losses.extend(damaged.into_iter().map(|(_, why)| why));
        losses
    }

    /// The statistics at the cursor, windows ending there, with the pool workers' exact
    /// task counts put in as the live snapshot puts them in: those of the last chunk fed
    /// whole, or once every frame is fed, those the recording ends with.
    pub fn snapshot(&mut self) -> Snapshot {
        let mut snapshot = self.stats.snapshot(self.cursor_ns);
        let readings = match self.at.frame >= self.index.frames().len() {
            true if !self.index.tasks.is_empty() => self.index.tasks.clone(),
            _ => self.tasks.clone(),
        };
        if !readings.is_empty() {
            self.task_counts(&readings).apply(&mut snapshot);
        }
        snapshot
    }

    /// Task counts `readings` of the recording under this process's ids (a thread the
    /// replay never met counts in the totals only).
    fn task_counts(&mut self, readings: &[TaskReading]) -> TaskCounts {
        let readings: Vec<TaskReading> = readings
            .iter()
            .map(|reading| TaskReading {
                thread: self
                    .ids
                    .threads
                    .get(&reading.thread)
                    .map_or(u32::MAX, |thread| thread.id()),
                device: self.ids.device_of(reading.device).id(),
                ..*reading
            })
            .collect();
        TaskCounts::read_back(&readings)
    }

    /// The op spans that ended by the cursor, for the op-by-op timeline: those fed since the
    /// statistics were last restored from a checkpoint (a jump restores the checkpoint at or
    /// before its target, at most one checkpoint interval of events back), up to the store's
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
        self.start_toward(target)?;
        self.feed_until(target, None)?;
        self.cursor_ns = target;
        Ok(())
    }

    /// Moves the statistics toward `target_ns` (clamped to the run), feeding for about
    /// `budget` at most (whole chunks, at least one): `true` when they are at the target;
    /// `false` when the cursor stopped short, at the nearest state ready, and a next call
    /// goes on from there.
    pub fn seek_within(&mut self, target_ns: u64, budget: Duration) -> Result<bool, RecordError> {
        let deadline = Instant::now().checked_add(budget);
        let target = target_ns.clamp(self.start_ns(), self.end_ns());
        self.start_toward(target)?;
        let reached = self.feed_until(target, deadline)?;
        self.cursor_ns = match reached {
            true => target,
            false => self.reach_ns.clamp(self.start_ns(), target),
        };
        Ok(reached)
    }

    /// Feeds every event left (also any after the last chunk's latest) and puts the cursor
    /// at the end: the state the live run ended with.
    pub fn seek_to_end(&mut self) -> Result<(), RecordError> {
        self.start_toward(u64::MAX)?;
        self.feed_until(u64::MAX, None)?;
        self.cursor_ns = self.end_ns().max(self.reach_ns);
        Ok(())
    }

    /// A search for the next start of an op whose name holds `query` (any case), after the
    /// cursor; [`search_within`](Replay::search_within) makes it.
    pub fn search_op(&self, query: &str) -> OpSearch {
        OpSearch {
            query: query.to_lowercase(),
            after_ns: self.cursor_ns,
            frame: self.at.frame,
            matches: HashMap::new(),
        }
    }

    /// Goes on with `search` for about `budget` at most (whole chunks, at least one): in the
    /// first chunk from the cursor's that holds a start of a matching op after the cursor,
    /// the earliest such start.
    pub fn search_within(&mut self, search: &mut OpSearch, budget: Duration) -> SearchStep {
        let deadline = Instant::now().checked_add(budget);
        let frames = self.index.frames().len();
        while search.frame < frames {
            let frame = search.frame;
            search.frame += 1;
            if let Some(found) = self.search_chunk(search, frame) {
                return SearchStep::Found(found);
            }
            if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                return SearchStep::Searching(search.frame as f64 / frames as f64);
            }
        }
        SearchStep::Missing
    }

    /// The start time of the next op after the cursor whose name holds `query` (any case),
    /// searched to the end at once (see [`search_within`](Replay::search_within)).
    pub fn next_op(&mut self, query: &str) -> Option<u64> {
        let mut search = self.search_op(query);
        loop {
            match self.search_within(&mut search, Duration::MAX) {
                SearchStep::Found(at) => return Some(at),
                SearchStep::Missing => return None,
                SearchStep::Searching(_) => {}
            }
        }
    }

    /// The earliest matching op start after the search's time in chunk `frame`.
    fn search_chunk(&mut self, search: &mut OpSearch, frame: usize) -> Option<u64> {
        let chunk = match &self.current {
            Some((held, chunk)) if *held == frame => chunk.clone(),
            _ => Rc::new(self.index.chunk(frame).ok()??),
        };
        self.ids.learn_names(&chunk.names);
        let names = &self.ids.names;
        let OpSearch {
            query,
            after_ns,
            matches,
            ..
        } = search;
        chunk
            .events
            .iter()
            .filter(|event| event.kind == RecordKind::OpStart && event.ts_ns > *after_ns)
            .filter(|event| {
                *matches.entry(event.name).or_insert_with(|| {
                    names
                        .get(&event.name)
                        .is_some_and(|(_, text)| text.to_lowercase().contains(query.as_str()))
                })
            })
            .map(|event| event.ts_ns)
            .min()
    }

    /// Whether feeding forward from where the statistics are reaches the state at `target`:
    /// every chunk fed whole ends by it, and the one fed in part was fed up to it at most.
    fn can_feed_to(&self, target: u64) -> bool {
        self.reach_ns <= target && self.at.upto.is_none_or(|upto| upto <= target)
    }

    /// Restores the best checkpoint for `target` when feeding from it is needed (the
    /// statistics are past the target) or saves feeding more than [`RESTORE_AHEAD_BYTES`].
    fn start_toward(&mut self, target: u64) -> Result<(), RecordError> {
        let feedable = self.can_feed_to(target);
        loop {
            let Some(k) = self.checkpoints.best(&self.index, target) else {
                if !feedable {
                    self.restart();
                }
                return Ok(());
            };
            let frame = self.checkpoints.frame(k);
            if feedable && !self.far_ahead(frame) {
                return Ok(());
            }
            let Some(checkpoint) = self.checkpoints.load(&self.index, k) else {
                continue; // marked damaged: the next search passes it by
            };
            match self.restore(frame, &checkpoint)? {
                Ok(()) => return Ok(()),
                Err(why) => self.checkpoints.mark_damaged(frame, why),
            }
        }
    }

    /// Whether frame `frame` lies more than [`RESTORE_AHEAD_BYTES`] ahead of the position.
    fn far_ahead(&self, frame: usize) -> bool {
        let frames = self.index.frames();
        match frames.get(self.at.frame) {
            Some(at) => frames[frame].offset > at.offset + RESTORE_AHEAD_BYTES,
            None => false,
        }
    }

    /// The statistics of the checkpoint at frame `frame`, under this process's ids; the
    /// inner `Err` says why the checkpoint cannot be used.
    fn restore(
        &mut self,
        frame: usize,
        checkpoint: &CheckpointFrame,
    ) -> Result<Result<(), String>, RecordError> {
        let offset = self.index.frames()[frame].offset;
        let unusable = |why: &str| {
            Ok(Err(format!(
                "checkpoint frame {frame} (at byte {offset}) {why}: jumps restore an earlier one"
            )))
        };
        let Ok(mut stats) = postcard::from_bytes::<Stats>(&checkpoint.stats) else {
            return unusable("holds statistics that do not decode");
        };
        if !stats.is_well_formed(self.index.info.stats) {
            return unusable("holds statistics that do not hold together");
        }
        self.ids.learn_tables(&checkpoint.tables)?;
        for thread in stats.thread_ids() {
            self.ids.thread_of(thread.id())?;
        }
        stats.remap(&mut self.ids);
        self.stats = stats;
        self.tasks = checkpoint.tasks.clone();
        self.spans = SpanStore::new(spans::DEFAULT_CAPACITY);
        self.reach_ns = checkpoint.reach_ns;
        self.at = Position {
            frame: frame + 1,
            upto: None,
        };
        self.restores += 1;
        Ok(Ok(()))
    }

    /// Empty statistics before the first chunk.
    fn restart(&mut self) {
        self.stats = Stats::new(self.index.info.stats);
        self.tasks.clear();
        self.spans = SpanStore::new(spans::DEFAULT_CAPACITY);
        self.reach_ns = 0;
        self.at = Position {
            frame: 1,
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
        batch.events.clear();
        batch.marks.clear();
        let last = resolve(&mut self.ids, &chunk, self.at.upto, target, &mut batch)?;
        fold(&mut self.stats, &self.ids, &batch);
        if !batch.events.is_empty() {
            self.spans.drained(&batch.events, chunk.dropped);
        }
        self.batch = batch;
        self.stats.set_dropped(chunk.dropped);
        if last <= target {
            self.reach_ns = self.reach_ns.max(last);
            self.tasks.clone_from(&chunk.tasks);
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
    use crate::record::format::FRAME_HEADER_LEN;
    use crate::record::replay_bench::write_synthetic_with;
    use crate::record::tests::{record_synthetic, scratch, Synthetic};
    use crate::record::writer::Limits;
    use crate::record::{read_recording, RecordReport, Recorder, RecordingInfo};

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

    /// A synthetic recording of many chunks (8 threads, 16,384 events a chunk), with the
    /// recorder's checkpoints every `checkpoint_bytes` of frames at least.
    fn chunked(name: &str, bytes: u64, checkpoint_bytes: u64) -> std::path::PathBuf {
        let path = scratch(name);
        let names = crate::record::replay_bench::OP_NAMES;
        write_synthetic_with(&path, bytes, checkpoint_bytes, names).unwrap();
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

    /// The state at `target` folded from the first event (no checkpoint).
    fn folded(path: &std::path::Path, target: u64) -> String {
        let mut fold = Replay::open_from_start(path).unwrap();
        fold.seek(target).unwrap();
        assert_eq!(fold.restores(), 0);
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
    /// three names, drained batch by batch, checkpoints every `checkpoint_bytes` at least.
    fn real(name: &str, checkpoint_bytes: u64) -> (std::path::PathBuf, RecordReport) {
        let path = scratch(name);
        let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
        let info = RecordingInfo::default();
        let limits = Limits {
            checkpoint_bytes,
            chunk_events: 4_000,
        };
        let recorder = Recorder::start_with(&path, &profiler, info, limits).unwrap();
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
                recorder.settle(); // the writer asks for a checkpoint before the next round
            }
        }
        profiler.flush();
        let report = recorder.finish(&profiler, None).unwrap();
        (path, report)
    }

    /// Over a real recording, jumps in any order, each restoring the recorder's checkpoint
    /// before it, land where folding from the first event lands.
    #[test]
    fn a_state_reached_through_checkpoints_is_the_state_folded_from_the_start() {
        let (path, report) = real("replay-checkpoints", 1);
        let mut jumping = Replay::open(&path).unwrap();
        assert!(jumping.checkpoints() >= 5, "{}", jumping.checkpoints());
        assert_eq!(jumping.checkpoints() as u64, report.checkpoints);
        assert!(
            report.checkpoint_bytes * 8 < report.bytes,
            "checkpoints {} of {} bytes",
            report.checkpoint_bytes,
            report.bytes
        );
        for target in moments(&jumping, 12) {
            jumping.seek(target).unwrap();
            assert_eq!(state(&mut jumping), folded(&path, target), "at {target}");
        }
        assert!(jumping.restores() >= 3, "{} restores", jumping.restores());
        assert!(jumping.losses().is_empty(), "{:?}", jumping.losses());
        std::fs::remove_file(&path).unwrap();
    }

    /// A real recording whose live statistics took marks: worker threads that each record
    /// ops, overflow their small ring once (a gap) and exit, the collector draining only on
    /// flushes; a checkpoint asked for after every chunk. Returns the path, the report and
    /// the live snapshot at the end.
    fn real_with_marks(name: &str) -> (std::path::PathBuf, RecordReport, Snapshot) {
        let path = scratch(name);
        let hour = Duration::from_secs(3600);
        let options = ProfilerOptions {
            ring_capacity: 64,
            drain_interval: hour,
            busy_drain_interval: hour,
            ..ProfilerOptions::default()
        };
        let profiler = Profiler::new(options).unwrap();
        let info = RecordingInfo::default();
        let limits = Limits {
            checkpoint_bytes: 1,
            chunk_events: 1,
        };
        let recorder = Recorder::start_with(&path, &profiler, info, limits).unwrap();
        let device = DeviceId::register("rp-mark-cpu");
        let names = ["rp-mark-a", "rp-mark-b"].map(OpName::new);
        for worker in 0..24u64 {
            let recording = profiler.clone();
            let run = move || {
                let mut op = |id: u64| {
                    let name = names[id as usize % 2];
                    let start = Event::op(EventKind::OpStart, device, name, OpInfo::new(id));
                    let at = 1_000 + id * 10_000;
                    recording.record_at(start.at(at));
                    let mut end = start.at(at + 2_000 + id % 3_000);
                    end.kind = EventKind::OpEnd;
                    recording.record_at(end);
                };
                let first = worker * 1_000;
                for id in first..first + 60 {
                    op(id);
                    if id % 10 == 9 {
                        recording.flush();
                    }
                }
                (first + 60..first + 200).for_each(&mut op); // past the ring: a gap
                recording.flush();
            };
            recorder.settle();
            std::thread::Builder::new()
                .name(format!("rp-mark-{worker}"))
                .spawn(run)
                .unwrap()
                .join()
                .unwrap();
            profiler.flush(); // the ring closed: the thread is marked exited
            recorder.settle();
            if worker % 10 == 9 {
                profiler.reset_stats(); // the dashboard's `r`: a mark in the next chunk
            }
        }
        profiler.flush();
        let live = profiler.snapshot();
        let report = recorder.finish(&profiler, None).unwrap();
        (path, report, live)
    }

    /// Each checkpoint the live statistics made is the fold of exactly the frames before it
    /// (gaps, exits and resets included, checkpoints going on after a reset), and the replay
    /// ends with the live statistics.
    #[test]
    fn every_checkpoint_is_the_fold_of_the_frames_before_it() {
        let (path, report, live) = real_with_marks("replay-marks");
        assert!(live.dropped_events > 0, "the rings overflowed");
        let mut restored = Replay::open(&path).unwrap();
        let mut fold = Replay::open_from_start(&path).unwrap();
        let count = restored.checkpoints.len();
        assert!(count >= 4, "{count} checkpoints");
        assert_eq!(count as u64, report.checkpoints);
        let (frames, last) = (
            restored.index.frames().len(),
            restored.checkpoints.frame(count - 1),
        );
        assert!(
            last > frames / 2,
            "the last checkpoint at frame {last} of {frames}"
        );
        let (mut marks, mut resets) = (0, 0);
        for k in 0..count {
            let frame = restored.checkpoints.frame(k);
            let checkpoint = restored.checkpoints.load(&restored.index, k).unwrap();
            restored.restore(frame, &checkpoint).unwrap().unwrap();
            while fold.at.frame <= frame {
                if let Ok(Some(chunk)) = fold.index.chunk(fold.at.frame) {
                    marks += chunk.marks.len();
                    let reset = |mark: &&Mark| matches!(mark, Mark::Reset { .. });
                    resets += chunk.marks.iter().filter(reset).count();
                }
                fold.feed_frame(u64::MAX).unwrap();
            }
            assert_eq!(
                restored.stats.events_ingested(),
                fold.stats.events_ingested(),
                "checkpoint {k} at frame {frame}"
            );
            restored.cursor_ns = checkpoint.reach_ns;
            fold.cursor_ns = checkpoint.reach_ns;
            assert_eq!(state(&mut restored), state(&mut fold), "checkpoint {k}");
        }
        assert!(marks >= 12, "{marks} marks before the last checkpoint");
        // Where the writer puts its checkpoints depends on how the collector's rounds fall;
        // at least one after a reset shows checkpoints go on past it.
        assert!(resets >= 1, "{resets} resets before the last checkpoint");
        let workers = |snapshot: &Snapshot| {
            let mut workers: Vec<_> = snapshot
                .workers
                .iter()
                .filter(|worker| worker.name.starts_with("rp-mark-"))
                .map(|worker| (worker.name.clone(), worker.exited, worker.ops))
                .collect();
            workers.sort();
            workers
        };
        let mut replay = Replay::open(&path).unwrap();
        replay.seek_to_end().unwrap();
        let replayed = replay.snapshot();
        assert_eq!(workers(&replayed).len(), 24);
        assert!(
            workers(&replayed).iter().all(|worker| worker.1),
            "all exited"
        );
        assert_eq!(workers(&replayed), workers(&live));
        let ops = |snapshot: &Snapshot| {
            let mut ops: Vec<_> = snapshot
                .ops
                .iter()
                .filter(|op| op.name.starts_with("rp-mark-"))
                .map(|op| (op.name.clone(), op.count, op.total_ns))
                .collect();
            ops.sort();
            ops
        };
        assert_eq!(ops(&replayed), ops(&live));
        std::fs::remove_file(&path).unwrap();
    }

    /// The most frames between two checkpoints (or the first one and the file's start).
    fn widest_interval(index: &RecordingIndex) -> usize {
        let mut last = 0;
        let mut widest = 0;
        for (frame, entry) in index.frames().iter().enumerate() {
            if entry.checkpoint {
                widest = widest.max(frame - last);
                last = frame;
            }
        }
        widest.max(index.frames().len() - last)
    }

    /// Right after opening, a jump to nine tenths of the run restores the checkpoint before
    /// it and feeds no more than one checkpoint interval of frames (a frame a call here).
    #[test]
    fn a_far_jump_right_after_opening_feeds_one_interval_at_most() {
        let path = chunked("replay-far", 4_000_000, 100_000);
        let mut replay = Replay::open(&path).unwrap();
        let frames = replay.index().frames().len();
        let widest = widest_interval(replay.index());
        assert!(
            replay.checkpoints() >= 3 && widest * 3 < frames,
            "{widest} of {frames}"
        );
        let target = replay.start_ns() + (replay.end_ns() - replay.start_ns()) / 10 * 9;
        let mut calls = 1;
        while !replay.seek_within(target, Duration::ZERO).unwrap() {
            calls += 1;
        }
        assert!(
            calls <= widest,
            "{calls} calls, {widest} frames between checkpoints, from {:?} to {:?}",
            replay
                .index()
                .frames()
                .iter()
                .position(|entry| entry.checkpoint),
            replay.at
        );
        assert_eq!(replay.restores(), 1);
        assert_eq!(state(&mut replay), folded(&path, target));
        std::fs::remove_file(&path).unwrap();
    }

    /// The cursor moved forward, back and forward again shows what folding straight there
    /// shows.
    #[test]
    fn any_path_to_a_moment_gives_the_same_statistics() {
        let path = chunked("replay-paths", 1_000_000, 100_000);
        let mut wandering = Replay::open(&path).unwrap();
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
        assert!(wandering.restores() > 3, "{}", wandering.restores());
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
        let path = chunked("replay-budget", 600_000, CHECKPOINT_BYTES);
        let mut stepping = Replay::open_from_start(&path).unwrap();
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

    /// Flips a byte inside the payload of frame `frame` of the file at `path`; returns the
    /// frame's offset.
    fn damage(path: &std::path::Path, frame: usize) -> u64 {
        let index = RecordingIndex::open(path).unwrap();
        let entry = index.frames()[frame];
        drop(index);
        let mut bytes = std::fs::read(path).unwrap();
        bytes[entry.offset as usize + FRAME_HEADER_LEN + 9] ^= 0x5a;
        std::fs::write(path, &bytes).unwrap();
        entry.offset
    }

    /// A chunk damaged in the middle: a replay feeding through it names it and goes on; a
    /// jump past the checkpoint after it loses nothing (the checkpoint holds its events).
    #[test]
    fn a_corrupt_chunk_is_named_when_fed_and_a_checkpoint_after_it_holds_its_events() {
        let path = chunked("replay-corrupt", 800_000, 100_000);
        let mut whole = Replay::open_from_start(&path).unwrap();
        whole.seek_to_end().unwrap();
        let all = ops(&mut whole);
        let index = RecordingIndex::open(&path).unwrap();
        let middle = (index.frames().len() / 2..)
            .find(|&frame| !index.frames()[frame].checkpoint)
            .unwrap();
        let after = (middle..index.frames().len()).any(|frame| index.frames()[frame].checkpoint);
        assert!(after, "a checkpoint follows frame {middle}");
        drop(index);
        let offset = damage(&path, middle);
        let mut fed = Replay::open_from_start(&path).unwrap();
        fed.seek_to_end().unwrap();
        let losses = fed.losses().join("; ");
        assert!(
            losses.contains(&format!("frame {middle} (at byte {offset})"))
                && losses.contains("left out"),
            "{losses}"
        );
        assert!(ops(&mut fed) < all);
        let mut jumping = Replay::open(&path).unwrap();
        jumping.seek_to_end().unwrap();
        assert_eq!(ops(&mut jumping), all);
        std::fs::remove_file(&path).unwrap();
    }

    /// A damaged checkpoint is named when a jump meets it, and the jump restores the one
    /// before: every moment still shows what folding from the start shows.
    #[test]
    fn a_damaged_checkpoint_is_named_and_jumps_restore_an_earlier_one() {
        let path = chunked("replay-bad-checkpoint", 1_200_000, 100_000);
        let index = RecordingIndex::open(&path).unwrap();
        let checkpoints: Vec<usize> = (0..index.frames().len())
            .filter(|&frame| index.frames()[frame].checkpoint)
            .collect();
        assert!(checkpoints.len() >= 3, "{checkpoints:?}");
        let bad = checkpoints[checkpoints.len() / 2];
        let reach = index.checkpoint(bad).unwrap().reach_ns;
        drop(index);
        let offset = damage(&path, bad);
        let mut replay = Replay::open(&path).unwrap();
        for target in [reach, reach + 1].into_iter().chain(moments(&replay, 6)) {
            replay.seek(target).unwrap();
            assert_eq!(state(&mut replay), folded(&path, target), "at {target}");
        }
        let losses = replay.losses().join("; ");
        assert!(
            losses.contains(&format!("checkpoint frame {bad} (at byte {offset})"))
                && losses.contains("restore an earlier one"),
            "{losses}"
        );
        assert!(replay.restores() > 0);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_cut_off_recording_replays_its_prefix_and_says_what_it_lost() {
        let path = chunked("replay-cut", 1_000_000, CHECKPOINT_BYTES);
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

    /// A file cut inside a checkpoint (a run killed while it was written) replays its
    /// prefix through the checkpoints before the cut, and says a checkpoint was cut off.
    #[test]
    fn a_recording_cut_inside_a_checkpoint_replays_its_prefix_and_says_so() {
        let path = chunked("replay-cut-checkpoint", 1_200_000, 100_000);
        let index = RecordingIndex::open(&path).unwrap();
        let checkpoints: Vec<usize> = (0..index.frames().len())
            .filter(|&frame| index.frames()[frame].checkpoint)
            .collect();
        assert!(checkpoints.len() >= 3, "{checkpoints:?}");
        let entry = index.frames()[checkpoints[checkpoints.len() - 1]];
        drop(index);
        let bytes = std::fs::read(&path).unwrap();
        let cut_at = entry.offset as usize + FRAME_HEADER_LEN + entry.length as usize / 2;
        std::fs::write(&path, &bytes[..cut_at]).unwrap();
        let mut cut = Replay::open(&path).unwrap();
        let losses = cut.losses().join("; ");
        assert!(
            losses.contains(&format!("a checkpoint cut off after byte {}", entry.offset))
                && losses.contains("no end frame"),
            "{losses}"
        );
        assert_eq!(cut.checkpoints(), checkpoints.len() - 1);
        for target in moments(&cut, 8) {
            cut.seek(target).unwrap();
            assert_eq!(state(&mut cut), folded(&path, target), "at {target}");
        }
        assert!(cut.restores() > 0);
        cut.seek_to_end().unwrap();
        assert!(ops(&mut cut) > 0);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn the_next_op_of_a_name_is_found_after_the_cursor() {
        let path = synthetic("replay-next-op", 50);
        let mut replay = Replay::open(&path).unwrap();
        let first = replay.next_op("RP-SGD").unwrap();
        // The first sgd starts after a gemm (300 us) and a relu (40 us), 500 ns apart each.
        assert_eq!(first, replay.start_ns() + 341_000);
        replay.seek(first).unwrap();
        let second = replay.next_op("sgd").unwrap();
        assert_eq!(second - first, 461_500);
        assert_eq!(replay.next_op("no-such-op"), None);
        std::fs::remove_file(&path).unwrap();
    }

    /// The next op of a name after `after` by a plain scan of the file's chunks in order:
    /// in the first chunk holding a start of a matching op after `after`, the earliest.
    fn scanned(path: &std::path::Path, after: u64, query: &str) -> Option<u64> {
        let names = read_recording(path).unwrap();
        let mut index = RecordingIndex::open(path).unwrap();
        let query = query.to_lowercase();
        (1..index.frames().len()).find_map(|frame| {
            let chunk = index.chunk(frame).ok()??;
            chunk
                .events
                .iter()
                .filter(|event| event.kind == RecordKind::OpStart && event.ts_ns > after)
                .filter(|event| names.name(event.name).to_lowercase().contains(&query))
                .map(|event| event.ts_ns)
                .min()
        })
    }

    /// `o`'s search, a chunk a slice, finds at every cursor what a plain scan finds.
    #[test]
    fn a_search_in_slices_finds_the_op_a_plain_scan_finds() {
        let path = chunked("replay-search", 1_500_000, CHECKPOINT_BYTES);
        let mut replay = Replay::open(&path).unwrap();
        let mut slices_seen = 0;
        for target in moments(&replay, 5) {
            replay.seek(target).unwrap();
            for query in ["bench-op-7", "OP-3", "no-such-op"] {
                let mut search = replay.search_op(query);
                let found = loop {
                    match replay.search_within(&mut search, Duration::ZERO) {
                        SearchStep::Searching(done) => {
                            assert!((0.0..=1.0).contains(&done), "{done}");
                            slices_seen += 1;
                        }
                        SearchStep::Found(at) => break Some(at),
                        SearchStep::Missing => break None,
                    }
                };
                let expected = scanned(&path, replay.cursor_ns(), query);
                assert_eq!(found, expected, "`{query}` after {target}");
                if query == "no-such-op" {
                    assert_eq!(found, None);
                } else if target < replay.end_ns() - 10_000_000 {
                    assert!(found.is_some(), "`{query}` after {target}");
                }
            }
        }
        assert!(slices_seen > 10, "{slices_seen} slices");
        std::fs::remove_file(&path).unwrap();
    }
}
