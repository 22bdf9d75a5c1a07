//! The recording writer: a sink on the profiler's collector and a `recorder` thread that
//! encodes and writes what it is handed.
//!
//! # Protocol
//! The collector calls [`EventSink::drained`] with each batch it drains. The sink copies the
//! batch into buffers the writer gave back emptied (`Spares`) and sends them on a bounded
//! channel: it never blocks the collector, and neither thread allocates once the buffers
//! have room. The events queued but not yet written are counted (`pending`); a batch that
//! would take them past [`MAX_PENDING_EVENTS`], or that finds the channel full or the
//! writer gone, is let go and counted as lost, and every later frame carries that count, so
//! memory stays bounded and the recording says what it is missing.
//!
//! The `recorder` thread gathers events into a chunk and writes it as one frame when it
//! holds [`CHUNK_EVENTS`] events, or when [`FLUSH_EVERY`] passed with no new batch. Each
//! frame goes to the file in one write, so a run killed at any moment leaves whole frames
//! and at most one cut-off frame at the end, which the reader reports.
//!
//! The run's graph ([`GraphObserver`], see [`super::graph`]) goes the same way: the shape
//! (unless it equals the one kept before: a driver's runs with the same settings share it)
//! and each op run are kept in the sink (an op run is one short lock and a push, on the
//! worker that ran the op, under one of [`RUN_SHARDS`] locks picked by the worker's thread
//! id) and leave with the next batch; at most [`MAX_PENDING_RUNS`] wait, more are let go
//! and counted. The thread writes the shape as soon as it comes and the op
//! runs in a frame beside each chunk.
//!
//! The sink is handed each collector round whole ([`EventSink::round`]): the statistics'
//! resets before it, its batch, the rings' gaps among the events and the threads that
//! exited after them, which go into the chunk as marks, so a replay takes them where the
//! live statistics did; and the pool workers' exact task counts after it, which the next
//! chunk (and checkpoint) written carries. Every so many
//! bytes the thread asks the sink for the live statistics, and writes the copy that comes
//! with the next round as a checkpoint frame right after the chunk that ends with that
//! round (module `checkpoints` says when, why, and why the copy is exactly the fold of the
//! chunks before it): the replay's jumps start from them. The copy is the collector's one
//! clone per checkpoint; the encoding is the thread's.
//!
//! [`Recorder::finish`] closes the channel: the thread writes what it holds, the latest
//! thread names and device labels, the run's summary and the end frame, then exits. A
//! recorder dropped without `finish` writes what it holds and no end frame (the reader
//! says the recording was cut off).
#![forbid(unsafe_code)]

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
// `std`'s Arc and channel: the collector holds sinks as `std::sync::Weak` trait objects in
// every build (the recorder is never run under loom).
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::profiler::{
    DeviceId, Event, EventSink, Gap, OpName, Profiler, Round, Stats, TaskReading, ThreadId,
};
use crate::sync::{thread, AtomicBool, AtomicU64, Mutex, Ordering};

use super::checkpoints::{CheckpointMaker, CHECKPOINT_BYTES};
use super::convert::recorded;
use super::format::{
    encode_frame, file_header, Chunk, DeviceEntry, End, Frame, FrameEncoder, Mark, RecordedEvent,
    RecordingInfo, Runs, Tables,
};
use super::graph::{GraphObserver, GraphShape, OpRun};
use super::RecordError;

/// Events a chunk holds before it is written.
pub(crate) const CHUNK_EVENTS: usize = 16_384;
/// How long events wait for more before their chunk is written anyway.
pub(crate) const FLUSH_EVERY: Duration = Duration::from_millis(200);
/// Events queued for the writer at most (32 MiB of events); more are let go and counted.
pub(crate) const MAX_PENDING_EVENTS: u64 = 1 << 20;
/// Op runs kept for the writer at most; more are let go and counted.
pub(crate) const MAX_PENDING_RUNS: usize = 1 << 20;
/// Batches the channel holds at most.
const CHANNEL_BATCHES: usize = 4096;

/// When the writer cuts chunks and checkpoints.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Frame bytes between two checkpoints at least.
    pub(crate) checkpoint_bytes: u64,
    /// Events a chunk holds before it is written.
    pub(crate) chunk_events: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            checkpoint_bytes: CHECKPOINT_BYTES,
            chunk_events: CHUNK_EVENTS,
        }
    }
}

/// What a finished recording wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordReport {
    /// Where.
    pub path: PathBuf,
    /// The file's size.
    pub bytes: u64,
    /// Events written.
    pub events: u64,
    /// Frames written.
    pub frames: u64,
    /// Events the profiler dropped (full rings): in no trace and no recording.
    pub dropped: u64,
    /// Events the recorder let go because its writer fell behind.
    pub lost: u64,
    /// Checkpoints written.
    pub checkpoints: u64,
    /// Their bytes (part of `bytes`).
    pub checkpoint_bytes: u64,
}

enum Message {
    Round(Box<Handed>),
    Finish {
        labels: Vec<(DeviceId, String)>,
        tasks: Vec<TaskReading>,
        summary: Option<String>,
        graph: PendingGraph,
    },
}

/// A collector round, as the sink hands it to the writer. The writer gives each back
/// emptied ([`Spares`]), so rounds are handed in buffers that already have room.
#[derive(Default)]
struct Handed {
    events: Vec<Event>,
    gaps: Vec<Gap>,
    exited: Vec<ThreadId>,
    exited_ns: u64,
    dropped: u64,
    graph: PendingGraph,
    /// The live statistics after the round, when the writer asked for them.
    stats: Option<Stats>,
    /// The statistics' resets before the round's events.
    resets: Vec<u64>,
    /// The exact task counts after the round.
    tasks: Vec<TaskReading>,
}

impl Handed {
    /// Empties it, keeping its buffers.
    fn clear(&mut self) {
        self.events.clear();
        self.gaps.clear();
        self.exited.clear();
        self.graph.shape = None;
        self.graph.runs.clear();
        self.stats = None;
        self.resets.clear();
        self.tasks.clear();
    }
}

/// Emptied rounds the writer gave back, for the sink's next rounds: a round then costs the
/// collector copies into buffers that have room, and neither thread an allocation or a
/// free. At most [`Spares::KEEP`] wait, each holding at most [`Spares::KEEP_EVENTS`]
/// events' room, so what they keep stays small.
#[derive(Default)]
// Boxed: a kept round goes whole into a channel message and comes back, never copied.
#[allow(clippy::vec_box)]
struct Spares(Mutex<Vec<Box<Handed>>>);

impl Spares {
    /// Rounds kept at most.
    const KEEP: usize = 4;
    /// The most events' room a kept round holds (1 MiB of events).
    const KEEP_EVENTS: usize = 1 << 15;

    /// An empty round: a kept one, or a new one.
    fn take(&self) -> Box<Handed> {
        self.0.lock().pop().unwrap_or_default()
    }

    /// Keeps `round`, emptied, unless enough are kept or it holds too much room.
    fn give(&self, mut round: Box<Handed>) {
        if round.events.capacity() > Self::KEEP_EVENTS
            || round.graph.runs.capacity() > Self::KEEP_EVENTS
        {
            return;
        }
        round.clear();
        let mut kept = self.0.lock();
        if kept.len() < Self::KEEP {
            kept.push(round);
        }
    }
}

/// The graph's parts not yet handed to the writer.
#[derive(Default)]
struct PendingGraph {
    shape: Option<GraphShape>,
    runs: Vec<OpRun>,
}

/// Locks the op runs are kept under: each worker takes the one of its thread id, so the
/// run's workers do not all meet on one lock at every op.
const RUN_SHARDS: usize = 16;

/// The collector's side: hands batches to the writer without blocking.
struct Sink {
    sender: Mutex<Option<SyncSender<Message>>>,
    pending: Arc<AtomicU64>,
    lost: Arc<AtomicU64>,
    shape: Mutex<Option<GraphShape>>,
    /// The latest shape kept for the writer: a run whose shape equals it (the driver's next
    /// run with the same settings) adds no shape frame.
    kept_shape: Mutex<Option<GraphShape>>,
    /// Op runs not handed yet, by the thread that ran them ([`RUN_SHARDS`]).
    runs: Box<[CachePadded<Mutex<Vec<OpRun>>>]>,
    lost_runs: Arc<AtomicU64>,
    /// Set by the writer when a checkpoint is due; cleared when the statistics go to it.
    want_stats: Arc<AtomicBool>,
    /// Rounds the writer emptied, to hand the next ones in.
    spares: Arc<Spares>,
}

impl Sink {
    /// Moves the shape and the op runs kept since the last call into `graph` (the runs in
    /// no order: the writer sorts them).
    fn take_graph(&self, graph: &mut PendingGraph) {
        if let Some(shape) = self.shape.lock().take() {
            graph.shape = Some(shape);
        }
        for shard in self.runs.iter() {
            graph.runs.append(&mut *shard.lock());
        }
    }
}

impl EventSink for Sink {
    fn drained(&self, events: &[Event], dropped: u64) {
        self.round(Round {
            events,
            gaps: &[],
            exited: &[],
            exited_ns: 0,
            dropped,
            stats: None,
            resets: &[],
            tasks: &[],
        });
    }

    fn wants_stats(&self) -> bool {
        self.want_stats.load(Ordering::Relaxed)
    }

    fn round(&self, round: Round<'_>) {
        if round.stats.is_some() {
            self.want_stats.store(false, Ordering::Relaxed);
        }
        let mut handed = self.spares.take();
        self.take_graph(&mut handed.graph);
        let mut count = round.events.len() as u64;
        if self.pending.load(Ordering::Relaxed) + count > MAX_PENDING_EVENTS {
            self.lost.fetch_add(count, Ordering::Relaxed);
            count = 0;
        } else {
            handed.events.extend_from_slice(round.events);
            handed.gaps.extend_from_slice(round.gaps);
            handed.exited.extend_from_slice(round.exited);
            handed.stats = round.stats;
        }
        handed.exited_ns = round.exited_ns;
        handed.dropped = round.dropped;
        handed.resets.extend_from_slice(round.resets);
        handed.tasks.extend_from_slice(round.tasks);
        let sender = self.sender.lock();
        let Some(sender) = sender.as_ref() else {
            return; // finished: later events are not part of the recording
        };
        self.pending.fetch_add(count, Ordering::Relaxed);
        let runs = handed.graph.runs.len() as u64;
        let message = Message::Round(handed);
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = sender.try_send(message)
        {
            self.pending.fetch_sub(count, Ordering::Relaxed);
            self.lost.fetch_add(count, Ordering::Relaxed);
            self.lost_runs.fetch_add(runs, Ordering::Relaxed);
        }
    }
}

impl GraphObserver for Sink {
    fn shape(&self, shape: &GraphShape) {
        let mut kept = self.kept_shape.lock();
        if kept.as_ref() == Some(shape) {
            return; // the recording holds it already
        }
        *kept = Some(shape.clone());
        *self.shape.lock() = Some(shape.clone());
    }

    fn ran(&self, run: OpRun) {
        let shard = ThreadId::current().id() as usize % self.runs.len();
        let mut runs = self.runs[shard].lock();
        if runs.len() < MAX_PENDING_RUNS / RUN_SHARDS {
            runs.push(run);
        } else {
            self.lost_runs.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A recording in progress: every event the profiler drains, streamed to a file.
///
/// ```
/// use enginetop::profiler::{DeviceId, OpName, OpInfo, Profiler};
/// use enginetop::record::{read_recording, Recorder, RecordingInfo};
/// let path = std::env::temp_dir().join(format!("doc-{}.etrec", std::process::id()));
/// let profiler = Profiler::new(Default::default()).unwrap();
/// let recorder = Recorder::start(&path, &profiler, RecordingInfo::default()).unwrap();
/// let (cpu, op) = (DeviceId::register("doc-rec"), OpName::new("doc-rec-op"));
/// profiler.op_start(cpu, op, OpInfo::new(1));
/// profiler.op_end(cpu, op, OpInfo::new(1), false);
/// let report = recorder.finish(&profiler, None).unwrap();
/// assert_eq!(report.events, 2);
/// let recording = read_recording(&path).unwrap();
/// assert_eq!(recording.events.len(), 2);
/// assert!(recording.ending.is_complete());
/// # std::fs::remove_file(&path).unwrap();
/// ```
pub struct Recorder {
    sink: Arc<Sink>,
    writer: Option<thread::JoinHandle<Result<RecordReport, RecordError>>>,
    path: PathBuf,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("path", &self.path)
            .finish()
    }
}

impl Recorder {
    /// Creates `path`, writes the header and `info`, and records every batch `profiler`'s
    /// collector drains from now on. A disabled profiler records nothing (the file has
    /// its header only).
    pub fn start(
        path: impl AsRef<Path>,
        profiler: &Profiler,
        info: RecordingInfo,
    ) -> Result<Recorder, RecordError> {
        Recorder::start_with(path, profiler, info, Limits::default())
    }

    /// [`Recorder::start`] with chunks and checkpoints cut at `limits`.
    pub(crate) fn start_with(
        path: impl AsRef<Path>,
        profiler: &Profiler,
        info: RecordingInfo,
        limits: Limits,
    ) -> Result<Recorder, RecordError> {
        let path = path.as_ref().to_path_buf();
        let write_error = |source| RecordError::Write {
            path: path.display().to_string(),
            source,
        };
        let mut file = std::fs::File::create(&path).map_err(write_error)?;
        file.write_all(&file_header()).map_err(write_error)?;
        let info = RecordingInfo {
            stats: profiler.stats_options(),
            ..info
        };
        let header = encode_frame(&Frame::Header(info)).map_err(RecordError::Encode)?;
        file.write_all(&header).map_err(write_error)?;
        let (sender, receiver) = std::sync::mpsc::sync_channel(CHANNEL_BATCHES);
        let sink = Arc::new(Sink {
            sender: Mutex::new(Some(sender)),
            pending: Arc::new(AtomicU64::new(0)),
            lost: Arc::new(AtomicU64::new(0)),
            shape: Mutex::new(None),
            kept_shape: Mutex::new(None),
            runs: (0..RUN_SHARDS)
                .map(|_| CachePadded::new(Mutex::new(Vec::new())))
                .collect(),
            lost_runs: Arc::new(AtomicU64::new(0)),
            want_stats: Arc::new(AtomicBool::new(false)),
            spares: Arc::default(),
        });
        let writer = Writer {
            file,
            path: path.clone(),
            bytes: (file_header().len() + header.len()) as u64,
            frames: 1,
            events: 0,
            dropped: 0,
            pending: sink.pending.clone(),
            lost: sink.lost.clone(),
            lost_runs: sink.lost_runs.clone(),
            runs: Vec::new(),
            chunk: Vec::new(),
            marks: Vec::new(),
            tables: Tables::default(),
            seen: Seen::default(),
            checkpoint: CheckpointMaker::new(limits.checkpoint_bytes),
            chunk_events: limits.chunk_events,
            want_stats: sink.want_stats.clone(),
            received: 0,
            exact: true,
            tasks: Vec::new(),
            encoder: FrameEncoder::default(),
            run_order: RunOrder::default(),
            spares: sink.spares.clone(),
        };
        let writer = thread::Builder::new()
            .name("recorder".to_string())
            .spawn(move || writer.run(receiver))
            .map_err(RecordError::Spawn)?;
        let as_sink: Arc<dyn EventSink> = sink.clone();
        profiler.add_sink(Arc::downgrade(&as_sink));
        Ok(Recorder {
            sink,
            writer: Some(writer),
            path,
        })
    }

    /// What a run's driver reports its graph to ([`RunHooks::graph`]), so the recording
    /// holds the graph that ran.
    ///
    /// [`RunHooks::graph`]: crate::workload::run::RunHooks::graph
    pub fn graph_observer(&self) -> Arc<dyn GraphObserver> {
        self.sink.clone()
    }

    /// Flushes `profiler` (so every event recorded before the call is in), writes the
    /// rest, `profiler`'s device labels and `summary` (the run's summary as JSON), and
    /// closes the file.
    pub fn finish(
        mut self,
        profiler: &Profiler,
        summary: Option<String>,
    ) -> Result<RecordReport, RecordError> {
        profiler.flush();
        let labels = profiler.device_labels();
        let tasks = profiler.task_readings();
        if let Some(sender) = self.sink.sender.lock().take() {
            let mut graph = PendingGraph::default();
            self.sink.take_graph(&mut graph);
            // A writer that already stopped on an error returns it below.
            let _ = sender.send(Message::Finish {
                labels,
                tasks,
                summary,
                graph,
            });
        }
        self.join()
    }

    /// Waits until the writer has handled every round handed to it (at most ten seconds).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn settle(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.sink.pending.load(Ordering::Relaxed) > 0 && Instant::now() < deadline {
            std::thread::yield_now();
        }
    }

    fn join(&mut self) -> Result<RecordReport, RecordError> {
        match self.writer.take().map(thread::JoinHandle::join) {
            Some(Ok(report)) => report,
            Some(Err(_)) => Err(RecordError::WriterPanicked),
            None => Ok(RecordReport::default()),
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.sink.sender.lock().take();
        let _ = self.join();
    }
}

/// The ids whose text the file already holds.
#[derive(Default)]
struct Seen {
    names: IdSet,
    devices: IdSet,
    threads: IdSet,
}

/// A set of registry ids. The registries number their entries from 0 up, so a flag per id
/// up to the largest seen answers each event's three lookups with an index, not a hash;
/// an id past [`IdSet::DENSE`] (only a test's made-up one) goes to a hash set.
#[derive(Default)]
struct IdSet {
    dense: Vec<bool>,
    sparse: HashSet<u32>,
}

impl IdSet {
    /// Ids held as flags at most (a 4 MiB vector).
    const DENSE: u32 = 1 << 22;

    /// Adds `id`; returns whether it is new.
    #[inline]
    fn insert(&mut self, id: u32) -> bool {
        if id >= Self::DENSE {
            return self.sparse.insert(id);
        }
        let at = id as usize;
        if at >= self.dense.len() {
            self.dense.resize(at + 1, false);
        }
        !std::mem::replace(&mut self.dense[at], true)
    }

    /// Every id held, in increasing order.
    fn ids(&self) -> Vec<u32> {
        let dense = (0..self.dense.len()).filter(|&at| self.dense[at]);
        let mut ids: Vec<u32> = dense.map(|at| at as u32).collect();
        let mut sparse: Vec<u32> = self.sparse.iter().copied().collect();
        sparse.sort_unstable();
        ids.extend(sparse);
        ids
    }
}

/// Sorts op runs by op id. The engine numbers its pushes in order, so the runs of a chunk
/// (the ops that ran in its time, in the order they became ready) have op ids in a range not
/// much wider than their number: each run goes straight to its id's slot in a table as long
/// as that range, and the table read in order gives them sorted, in time linear in the
/// range. Runs whose ids spread wider than [`RunOrder::SPREAD`] slots a run, or that hold an
/// op id twice, are sorted by comparisons instead.
#[derive(Debug, Default)]
struct RunOrder {
    /// Per op id from the least: the index of its run plus one (0: no run).
    slots: Vec<u32>,
    /// The runs in order, before they are swapped in.
    sorted: Vec<OpRun>,
}

impl RunOrder {
    /// Slots a run at most for the table.
    const SPREAD: u64 = 8;

    /// Sorts `runs` by op id (the buffers kept for the next call).
    fn sort(&mut self, runs: &mut Vec<OpRun>) {
        if !self.sort_by_slots(runs) {
            runs.sort_unstable_by_key(|run| run.op_id);
        }
    }

    /// Sorts `runs` through the table; false, with `runs` untouched, where their ids spread
    /// too wide or repeat.
    fn sort_by_slots(&mut self, runs: &mut Vec<OpRun>) -> bool {
        let (Some(least), Some(most)) = (
            runs.iter().map(|run| run.op_id).min(),
            runs.iter().map(|run| run.op_id).max(),
        ) else {
            return true;
        };
        let count = runs.len() as u64;
        let span = most - least;
        if span >= count.saturating_mul(Self::SPREAD) || count >= u64::from(u32::MAX) {
            return false;
        }
        self.slots.clear();
        self.slots.resize(span as usize + 1, 0);
        for (at, run) in runs.iter().enumerate() {
            let slot = &mut self.slots[(run.op_id - least) as usize];
            if *slot != 0 {
                return false;
            }
            *slot = at as u32 + 1;
        }
        self.sorted.clear();
        self.sorted.extend(
            self.slots
                .iter()
                .filter(|&&slot| slot != 0)
                .map(|&slot| runs[slot as usize - 1]),
        );
        std::mem::swap(runs, &mut self.sorted);
        true
    }
}

/// The `recorder` thread's state.
struct Writer {
    file: std::fs::File,
    path: PathBuf,
    bytes: u64,
    frames: u64,
    events: u64,
    dropped: u64,
    pending: Arc<AtomicU64>,
    lost: Arc<AtomicU64>,
    lost_runs: Arc<AtomicU64>,
    /// Op runs not written yet.
    runs: Vec<OpRun>,
    chunk: Vec<RecordedEvent>,
    /// The chunk's marks.
    marks: Vec<Mark>,
    tables: Tables,
    seen: Seen,
    /// When the next checkpoint is due.
    checkpoint: CheckpointMaker,
    /// Asks the sink for the live statistics after the next round.
    want_stats: Arc<AtomicBool>,
    /// Events a chunk holds before it is written.
    chunk_events: usize,
    /// Events handed to the writer so far.
    received: u64,
    /// Whether the live statistics have been the fold of the recording so far (module
    /// `checkpoints`): no checkpoint is taken once they were not.
    exact: bool,
    /// The exact task counts of the latest round.
    tasks: Vec<TaskReading>,
    /// Every frame's bytes are made in its buffers.
    encoder: FrameEncoder,
    /// Puts the op runs in op id order.
    run_order: RunOrder,
    /// Where handled rounds go back to the sink.
    spares: Arc<Spares>,
}

impl Writer {
    fn run(mut self, receiver: Receiver<Message>) -> Result<RecordReport, RecordError> {
        let mut last_write = Instant::now();
        loop {
            match receiver.recv_timeout(FLUSH_EVERY) {
                Ok(Message::Round(mut round)) => {
                    let stats = round.stats.take();
                    self.dropped = round.dropped;
                    if !round.tasks.is_empty() {
                        // The latest counts stay; the buffer of the ones before goes back.
                        std::mem::swap(&mut self.tasks, &mut round.tasks);
                    }
                    self.add_graph(&mut round.graph)?;
                    self.add_round(&round);
                    if let Some(mut stats) = stats {
                        self.checkpoint_at(&mut stats)?;
                        last_write = Instant::now();
                    } else if self.chunk.len() >= self.chunk_events
                        || last_write.elapsed() >= FLUSH_EVERY
                    {
                        self.write_chunk()?;
                        last_write = Instant::now();
                    }
                    // Handled: the round no longer counts as waiting.
                    self.pending
                        .fetch_sub(round.events.len() as u64, Ordering::Relaxed);
                    self.spares.give(round);
                }
                Ok(Message::Finish {
                    labels,
                    tasks,
                    summary,
                    mut graph,
                }) => {
                    self.add_graph(&mut graph)?;
                    return self.finish(labels, tasks, summary);
                }
                Err(RecvTimeoutError::Timeout) => {
                    self.write_chunk()?;
                    last_write = Instant::now();
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.write_chunk()?;
                    return Ok(self.report());
                }
            }
        }
    }

    /// Adds a round to the chunk: its resets, its events with its gaps among them, then its
    /// exits, as the collector fed them to the live statistics.
    fn add_round(&mut self, round: &Handed) {
        let base = self.chunk.len();
        let mark_at = |at: usize| u32::try_from(base + at).unwrap_or(u32::MAX);
        for &ts_ns in &round.resets {
            let mark = Mark::Reset {
                at: mark_at(0),
                ts_ns,
            };
            self.checkpoint.reach(ts_ns);
            self.marks.push(mark);
            // The statistics count their events from the reset on.
            self.received = 0;
        }
        let mut from = 0;
        for gap in &round.gaps {
            self.add(&round.events[from..gap.at]);
            from = gap.at;
            let mark = Mark::Lost {
                at: mark_at(gap.at),
                thread: gap.thread.id(),
                last_ns: gap.last_ns,
            };
            self.checkpoint.reach(mark.ts_ns());
            self.marks.push(mark);
        }
        self.add(&round.events[from..]);
        for thread in &round.exited {
            let mark = Mark::Exited {
                at: mark_at(round.events.len()),
                thread: thread.id(),
                ts_ns: round.exited_ns,
            };
            self.checkpoint.reach(mark.ts_ns());
            self.marks.push(mark);
        }
        self.received += round.events.len() as u64;
    }

    /// Adds `events` to the chunk, and the table entries of ids seen for the first time.
    /// An event with the ids of the one before it (its thread's next event of the same op)
    /// is not looked up.
    fn add(&mut self, events: &[Event]) {
        let mut before = None;
        for event in events {
            let ids = (event.name, event.device, event.thread);
            if before != Some(ids) {
                before = Some(ids);
                self.describe(ids);
            }
        }
        if let Some(latest) = events.iter().map(|event| event.ts_ns).max() {
            self.checkpoint.reach(latest);
        }
        self.chunk.extend(events.iter().map(recorded));
    }

    /// Adds the table entries of those of `ids` seen for the first time.
    fn describe(&mut self, (name, device, thread): (OpName, DeviceId, ThreadId)) {
        if self.seen.names.insert(name.id()) {
            self.tables
                .names
                .push((name.id(), name.as_str().to_string()));
        }
        if self.seen.devices.insert(u32::from(device.id())) {
            self.tables
                .devices
                .push((device.id(), DeviceEntry::of(device)));
        }
        if self.seen.threads.insert(thread.id()) {
            self.tables.threads.push((thread.id(), thread.name()));
        }
    }

    /// The live statistics after the round just added came: writes the chunk that ends
    /// with it and, when they are the fold of every event written, the checkpoint.
    fn checkpoint_at(&mut self, stats: &mut Stats) -> Result<(), RecordError> {
        self.exact &= stats.events_ingested() == self.received;
        self.write_chunk()?;
        if !self.exact {
            return Ok(());
        }
        let frame = self
            .checkpoint
            .frame(stats, &self.tasks)
            .map_err(RecordError::Encode)?;
        let bytes = self.write(&frame)?;
        self.checkpoint.written(frame, bytes);
        Ok(())
    }

    /// Writes a shape at once; keeps op runs for the next chunk (`graph` is left empty).
    fn add_graph(&mut self, graph: &mut PendingGraph) -> Result<(), RecordError> {
        self.runs.append(&mut graph.runs);
        match graph.shape.take() {
            Some(shape) => self.write(&Frame::Shape(shape)).map(drop),
            None => Ok(()),
        }
    }

    /// Writes the events held, then the op runs held (events first: a file cut between
    /// the two frames keeps the events, whose ops' runs come in later frames).
    fn write_chunk(&mut self) -> Result<(), RecordError> {
        self.write_events()?;
        if !self.runs.is_empty() {
            // Engine op ids grow with the pushes: in their order, each is a small delta.
            self.run_order.sort(&mut self.runs);
            let frame = Frame::Runs(Runs {
                lost: self.lost_runs.load(Ordering::Relaxed),
                runs: std::mem::take(&mut self.runs),
            });
            let written = self.write(&frame);
            if let Frame::Runs(runs) = frame {
                // The next runs fill the same buffer.
                self.runs = runs.runs;
                self.runs.clear();
            }
            written?;
        }
        if self.exact && self.checkpoint.due() {
            self.want_stats.store(true, Ordering::Relaxed);
        }
        Ok(())
    }

    fn write_events(&mut self) -> Result<(), RecordError> {
        if self.chunk.is_empty() && self.marks.is_empty() && self.tables == Tables::default() {
            return Ok(());
        }
        self.checkpoint.chunk(&self.tables);
        self.events += self.chunk.len() as u64;
        let frame = Frame::Chunk(Chunk {
            tables: std::mem::take(&mut self.tables),
            dropped: self.dropped,
            lost: self.lost.load(Ordering::Relaxed),
            events: std::mem::take(&mut self.chunk),
            marks: std::mem::take(&mut self.marks),
            tasks: self.tasks.clone(),
        });
        let written = self.write(&frame);
        if let Frame::Chunk(chunk) = frame {
            // The next chunk fills the same buffer.
            self.chunk = chunk.events;
            self.chunk.clear();
        }
        written.map(drop)
    }

    fn finish(
        mut self,
        labels: Vec<(DeviceId, String)>,
        tasks: Vec<TaskReading>,
        summary: Option<String>,
    ) -> Result<RecordReport, RecordError> {
        self.write_chunk()?;
        let threads = self.seen.threads.ids();
        // Threads can be renamed after their first event; names and devices never change.
        let tables = Tables {
            threads: threads
                .into_iter()
                .map(|id| (id, ThreadId::from_raw(id).name()))
                .collect(),
            devices: labels
                .iter()
                .filter(|(device, _)| self.seen.devices.insert(u32::from(device.id())))
                .map(|(device, _)| (device.id(), DeviceEntry::of(*device)))
                .collect(),
            device_labels: labels
                .into_iter()
                .map(|(device, label)| (device.id(), label))
                .collect(),
            names: Vec::new(),
        };
        self.write(&Frame::Tables(tables))?;
        if let Some(summary) = summary {
            self.write(&Frame::Summary(summary))?;
        }
        let end = End {
            events: self.events,
            dropped: self.dropped,
            lost: self.lost.load(Ordering::Relaxed),
            tasks,
        };
        self.write(&Frame::End(end))?;
        Ok(self.report())
    }

    /// Writes `frame`; returns its size.
    fn write(&mut self, frame: &Frame) -> Result<u64, RecordError> {
        let bytes = self.encoder.encode(frame).map_err(RecordError::Encode)?;
        self.file
            .write_all(bytes)
            .map_err(|source| RecordError::Write {
                path: self.path.display().to_string(),
                source,
            })?;
        let size = bytes.len() as u64;
        self.bytes += size;
        self.frames += 1;
        self.checkpoint.wrote(size);
        Ok(size)
    }

    fn report(&self) -> RecordReport {
        RecordReport {
            path: self.path.clone(),
            bytes: self.bytes,
            events: self.events,
            frames: self.frames,
            dropped: self.dropped,
            lost: self.lost.load(Ordering::Relaxed),
            checkpoints: self.checkpoint.written,
            checkpoint_bytes: self.checkpoint.bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs of the op ids `ids`, each told apart by its iteration and index.
    fn runs_of(ids: impl IntoIterator<Item = u64>) -> Vec<OpRun> {
        ids.into_iter()
            .enumerate()
            .map(|(at, op_id)| OpRun {
                op_id,
                iteration: at as u64,
                index: at as u32 * 3,
            })
            .collect()
    }

    /// Dense ids through the table, spread or repeated ones by comparisons: every run is
    /// kept, in op id order (a repeated id's runs in either order).
    #[test]
    fn runs_are_sorted_by_op_id_whatever_their_ids() {
        let mut rng = fastrand::Rng::with_seed(25);
        let mut order = RunOrder::default();
        let mut dense: Vec<u64> = (1_000..3_000).filter(|_| rng.bool()).collect();
        rng.shuffle(&mut dense);
        let spread: Vec<u64> = (0..500).map(|_| rng.u64(..)).collect();
        let mut repeated = dense.clone();
        repeated.extend([dense[0], dense[7]]);
        rng.shuffle(&mut repeated);
        let cases = [
            (dense.clone(), true),
            (spread, false),
            (repeated, false),
            (vec![u64::MAX, 0], false),
            (vec![u64::MAX - 1, u64::MAX], true),
            (vec![], true),
            (vec![7, 5, 6], true),
        ];
        for (ids, by_slots) in cases {
            let runs = runs_of(ids);
            let mut expected = runs.clone();
            expected.sort_by_key(|run| (run.op_id, run.iteration));
            let mut sorted = runs.clone();
            assert_eq!(order.sort_by_slots(&mut sorted), by_slots, "{runs:?}");
            if !by_slots {
                assert_eq!(sorted, runs, "left untouched");
            }
            order.sort(&mut sorted);
            sorted.sort_by_key(|run| (run.op_id, run.iteration));
            assert_eq!(sorted, expected);
            let mut sorted = runs.clone();
            order.sort(&mut sorted);
            assert!(sorted.is_sorted_by_key(|run| run.op_id));
            assert_eq!(sorted.len(), runs.len());
        }
    }
}
