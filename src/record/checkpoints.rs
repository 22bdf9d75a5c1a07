//! Checkpoints: the replay's statistics written into the recording while it is recorded, so
//! that a replay jumps to any moment of a file of any size by restoring the latest checkpoint
//! before it and feeding at most one checkpoint interval of events.
//!
//! # Writing ([`CheckpointMaker`], on the `recorder` thread)
//! A checkpoint is an image of the live statistics: the collector already feeds every
//! event to them, so the recorder folds none itself. When a checkpoint is due (the frames
//! written since the last one hold [`CHECKPOINT_BYTES`], and [`CHECKPOINT_RATIO`] times the
//! last checkpoint's size), the recorder's sink asks for the statistics; the collector
//! copies them under the same lock hold in which it fed them its round, and hands the copy
//! with that round. The recorder adds the round to its chunk, writes the chunk (and its op
//! runs) at once, and then the checkpoint frame: the statistics (postcard, inside the
//! frame's lz4; a duration row's pending durations folded into its histogram first, which
//! keeps the frame small and so the interval between checkpoints short), every table entry
//! used so far (a jump needs the names of ids first used before it), the latest time among
//! the events and marks written (its `reach`), and the pool workers' exact task counts the
//! chunk before it holds (a replay shows them).
//!
//! **Invariant: a checkpoint's statistics are the fold, in file order, of every chunk
//! before it, marks included.** It holds because (1) a round is never split across
//! chunks, and the chunk written right before the checkpoint ends with the round the copy
//! was taken after; (2) the statistics take nothing but rounds between two copies, and
//! each round's gaps and exits go into the chunk as marks, which a replay applies where the
//! collector did; (3) the replay's statistics cut their windows as the live ones (the
//! options are in the recording's header). What could break it, the recorder checks: the
//! copy's count of events ingested must equal the events the recorder was handed since the
//! last reset of the live statistics (the dashboard's `r`: the collector hands each reset
//! with the round after it, the chunk holds it as a mark, and a replay resets its
//! statistics there too). A round let go (the writer fell behind) or events fed before the
//! recording started make them differ, and from then on the recording has no more
//! checkpoints (its jumps feed from the last one). The ratio keeps the checkpoints' bytes a
//! small share of the file whatever the statistics' size (it grows with op names and
//! threads, not with the run's length). A run killed at any moment leaves the checkpoints
//! of its prefix: each is a whole frame.
//!
//! # Finding ([`Checkpoints`], in the replay)
//! The index knows which frames are checkpoints from their headers. Their reaches grow along
//! the file, so the latest one at or before a target is found by a binary search that reads
//! the checkpoints it probes (their reach is kept, a few bytes each; the statistics are
//! decoded only for the one restored): a handful of frame reads, whatever the file's size.
//! A checkpoint that cannot be read counts as past every target: the search lands on an
//! earlier one, and feeding from any checkpoint whose reach is at or before the target gives
//! the same state, only later. Memory: one reach per checkpoint, and the one restored.
#![forbid(unsafe_code)]

use crate::profiler::{Stats, TaskReading};

use super::format::{CheckpointFrame, Frame, Tables};
use super::index::RecordingIndex;

/// Frame bytes between two checkpoints at least.
pub const CHECKPOINT_BYTES: u64 = 1 << 20;
/// Frame bytes between two checkpoints, at least, per byte of the last checkpoint: the
/// checkpoints take at most about 1/16 of a file, and a run whose statistics are large (many
/// op names) gets its checkpoints further apart.
pub const CHECKPOINT_RATIO: u64 = 16;

/// When the next checkpoint is due, and what goes into it besides the statistics.
#[derive(Debug)]
pub(crate) struct CheckpointMaker {
    /// Every table entry written so far, in order of first use.
    tables: Tables,
    /// The buffer the statistics are encoded in (the last checkpoint's: the next, about as
    /// large, fills it without growing it).
    stats: Vec<u8>,
    reach_ns: u64,
    /// Frame bytes written since the last checkpoint.
    since: u64,
    /// Frame bytes after which the next checkpoint is due.
    every: u64,
    /// The least of `every`.
    min_bytes: u64,
    /// Checkpoints written.
    pub(crate) written: u64,
    /// Their bytes.
    pub(crate) bytes: u64,
}

impl CheckpointMaker {
    /// A maker whose checkpoints come every `min_bytes` of frames at least.
    pub(crate) fn new(min_bytes: u64) -> CheckpointMaker {
        CheckpointMaker {
            tables: Tables::default(),
            stats: Vec::new(),
            reach_ns: 0,
            since: 0,
            every: min_bytes,
            min_bytes,
            written: 0,
            bytes: 0,
        }
    }

    /// An event or a mark at `ts_ns` went into the chunk being gathered.
    pub(crate) fn reach(&mut self, ts_ns: u64) {
        self.reach_ns = self.reach_ns.max(ts_ns);
    }

    /// A chunk goes out with `tables` (the entries it uses first).
    pub(crate) fn chunk(&mut self, tables: &Tables) {
        self.tables.names.extend(tables.names.iter().cloned());
        self.tables.devices.extend(tables.devices.iter().cloned());
        self.tables.threads.extend(tables.threads.iter().cloned());
    }

    /// `bytes` of frames were written.
    pub(crate) fn wrote(&mut self, bytes: u64) {
        self.since += bytes;
    }

    /// Whether a checkpoint is due.
    pub(crate) fn due(&self) -> bool {
        self.since >= self.every
    }

    /// The checkpoint frame of the chunks written so far, whose fold is `stats`, and whose
    /// last holds the task counts `tasks`. The frame takes the tables (a checkpoint holds
    /// every name of the run) and the maker's buffer: hand it back to
    /// [`CheckpointMaker::written`]. The duration rows' pending durations go into their
    /// histograms first where those hold some already (no figure changes): a row's buckets
    /// are a few bytes, its pending durations a varint each.
    pub(crate) fn frame(
        &mut self,
        stats: &mut Stats,
        tasks: &[TaskReading],
    ) -> Result<Frame, postcard::Error> {
        stats.settle_durations();
        let mut buffer = std::mem::take(&mut self.stats);
        buffer.clear();
        let stats = postcard::to_extend(stats, buffer)?;
        Ok(Frame::Checkpoint(CheckpointFrame {
            reach_ns: self.reach_ns,
            tables: std::mem::take(&mut self.tables),
            stats,
            tasks: tasks.to_vec(),
        }))
    }

    /// `frame` (from [`CheckpointMaker::frame`]) was written in `bytes`: its tables and
    /// buffer come back, and the next checkpoint is due after the larger of the least
    /// interval and [`CHECKPOINT_RATIO`] times its size.
    pub(crate) fn written(&mut self, frame: Frame, bytes: u64) {
        if let Frame::Checkpoint(checkpoint) = frame {
            self.tables = checkpoint.tables;
            self.stats = checkpoint.stats;
        }
        self.since = 0;
        self.every = self.min_bytes.max(bytes.saturating_mul(CHECKPOINT_RATIO));
        self.written += 1;
        self.bytes += bytes;
    }
}

/// What is known of a checkpoint's reach.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reach {
    Unread,
    At(u64),
    Damaged,
}

/// A recording's checkpoints, found by their frame headers and read when a jump needs them.
#[derive(Debug)]
pub(crate) struct Checkpoints {
    /// Their frames, in file order.
    frames: Vec<usize>,
    reach: Vec<Reach>,
    /// Checkpoints that could not be read, and why.
    damaged: Vec<(usize, String)>,
}

impl Checkpoints {
    /// The checkpoints `index` found.
    pub(crate) fn of(index: &RecordingIndex) -> Checkpoints {
        let frames: Vec<usize> = (0..index.frames().len())
            .filter(|&frame| index.frames()[frame].checkpoint)
            .collect();
        Checkpoints {
            reach: vec![Reach::Unread; frames.len()],
            frames,
            damaged: Vec::new(),
        }
    }

    /// None: for a replay that feeds from the first event only.
    pub(crate) fn none() -> Checkpoints {
        Checkpoints {
            frames: Vec::new(),
            reach: Vec::new(),
            damaged: Vec::new(),
        }
    }

    /// How many the file holds.
    pub(crate) fn len(&self) -> usize {
        self.frames.len()
    }

    /// Those that could not be read, and why.
    pub(crate) fn damaged(&self) -> &[(usize, String)] {
        &self.damaged
    }

    /// Checkpoint `k`'s reach, read once (`None`: it cannot be read).
    fn reach(&mut self, index: &RecordingIndex, k: usize) -> Option<u64> {
        if self.reach[k] == Reach::Unread {
            self.reach[k] = match index.checkpoint(self.frames[k]) {
                Ok(checkpoint) => Reach::At(checkpoint.reach_ns),
                Err(why) => {
                    self.damaged.push((self.frames[k], why));
                    Reach::Damaged
                }
            };
        }
        match self.reach[k] {
            Reach::At(reach) => Some(reach),
            Reach::Unread | Reach::Damaged => None,
        }
    }

    /// The latest checkpoint whose reach is at or before `target_ns`, found by the reaches
    /// alone (`None`: none is; feed from the first event).
    pub(crate) fn best(&mut self, index: &RecordingIndex, target_ns: u64) -> Option<usize> {
        let (mut low, mut high) = (0, self.frames.len());
        while low < high {
            let middle = (low + high) / 2;
            match self.reach(index, middle) {
                Some(reach) if reach <= target_ns => low = middle + 1,
                _ => high = middle,
            }
        }
        low.checked_sub(1)
    }

    /// Checkpoint `k`'s frame.
    pub(crate) fn frame(&self, k: usize) -> usize {
        self.frames[k]
    }

    /// Checkpoint `k`, read whole (`None`: it cannot be, and later searches pass it by).
    pub(crate) fn load(&mut self, index: &RecordingIndex, k: usize) -> Option<CheckpointFrame> {
        match index.checkpoint(self.frames[k]) {
            Ok(checkpoint) => Some(checkpoint),
            Err(why) => {
                self.set_damaged(k, why);
                None
            }
        }
    }

    /// Checkpoint frame `frame` turned out unusable: later searches pass it by.
    pub(crate) fn mark_damaged(&mut self, frame: usize, why: String) {
        if let Ok(k) = self.frames.binary_search(&frame) {
            self.set_damaged(k, why);
        }
    }

    fn set_damaged(&mut self, k: usize, why: String) {
        if self.reach[k] != Reach::Damaged {
            self.reach[k] = Reach::Damaged;
            self.damaged.push((self.frames[k], why));
        }
    }
}
