//! Checkpoints of a replay, built by a thread of their own right after the recording opens,
//! so that a jump to any moment feeds at most one checkpoint's spacing of events.
//!
//! # Algorithm
//! A replay's statistics can only be fed forward (module `replay`), so the state at a moment
//! far from the cursor costs every event in between. The **builder** thread folds the whole
//! recording once, from its first chunk, in file order, with statistics of its own and a
//! [`FrameReader`] of its own (its own file handle, so its reads never move the replay's
//! file position). Every [`spacing`](Checkpoints::start) bytes of frames it passes, it
//! appends a [`Checkpoint`] (a copy of its statistics at a chunk boundary, and the latest
//! event time fed by then, its `reach`) to the shared list. The replay, on each jump, takes
//! the latest checkpoint whose reach is at or before the target ([`Checkpoints::best`]) and
//! feeds forward from it; while the builder has not yet passed the target, that is the
//! nearest state that is ready, and the replay feeds forward from it a frame's budget at a
//! time (`Replay::seek_within`) until the target is reached or a nearer checkpoint is.
//!
//! # Shared state and why nothing is lost
//! - The recorded names, devices and threads become this process's ids through one `Ids`
//!   behind a [`Mutex`], shared by the builder and the replay: a recorded thread gets one
//!   `ThreadId` in both, so a checkpoint's statistics and the replay's agree on every key.
//!   Each side locks it once per chunk (to learn its tables and resolve its events).
//! - The list of checkpoints, the builder's progress and what it found damaged sit in one
//!   [`Mutex`]`<Progress>`. The list only grows, in fold order, so reach never decreases
//!   along it; the first entry (empty statistics at the first chunk, reach 0) is there
//!   before the thread starts, so [`best`](Checkpoints::best) always has an answer.
//!   Checkpoints are shared as `Arc`s: taking one holds the lock only to clone a pointer.
//! - Waiters ([`Checkpoints::wait_built`]) check `done` under the mutex and wait on the
//!   [`Condvar`]; the builder sets `done` under the same mutex and then notifies all, so a
//!   waiter either sees `done` or is already waiting when the notification comes.
//! - Dropping [`Checkpoints`] sets `stop` (an `AtomicBool`, relaxed: a request, read between
//!   chunks; the join is what orders the thread's end before the drop returns) and joins the
//!   builder, which is at most one chunk away from reading it.
//!
//! # Memory
//! The spacing is [`CHECKPOINT_BYTES`] of frames, or more for a file so large that this
//! would give more than [`MAX_CHECKPOINTS`]: at most `MAX_CHECKPOINTS + 1` checkpoints are
//! kept whatever the file's size, each one statistics object, whose size grows with the
//! run's threads, devices and op names but not with its length.
#![forbid(unsafe_code)]

use crate::profiler::{Event, Stats, StatsOptions};
use crate::sync::thread::{self, JoinHandle};
use crate::sync::{Arc, AtomicBool, Condvar, Mutex, Ordering};

use super::index::FrameReader;
use super::replay::{resolve, Ids};
use super::RecordError;

/// Frame bytes between two checkpoints at least.
pub const CHECKPOINT_BYTES: u64 = 1 << 20;
/// Checkpoints kept at most (besides the first), whatever the file's size.
pub const MAX_CHECKPOINTS: u64 = 1024;

/// The statistics at a chunk boundary.
#[derive(Debug)]
pub(crate) struct Checkpoint {
    /// Chunks before this frame are fed; none after.
    pub(crate) frame: usize,
    /// The latest event time among them (0: none).
    pub(crate) reach_ns: u64,
    pub(crate) stats: Stats,
}

/// What the builder has done, shared with the replay.
#[derive(Debug)]
struct Progress {
    ready: Vec<Arc<Checkpoint>>,
    /// Frames folded (the next one to fold).
    frame: usize,
    done: bool,
    /// Frames it could not read, and why; or why it stopped.
    damaged: Vec<(usize, String)>,
}

#[derive(Debug)]
struct Shared {
    progress: Mutex<Progress>,
    changed: Condvar,
    stop: AtomicBool,
}

/// The checkpoints of one replay and the thread building them.
#[derive(Debug)]
pub(crate) struct Checkpoints {
    shared: Arc<Shared>,
    frames: usize,
    builder: Option<JoinHandle<()>>,
}

/// The spacing for a file whose frames hold `frame_bytes`: [`CHECKPOINT_BYTES`], or wider
/// so that at most [`MAX_CHECKPOINTS`] are kept.
pub(crate) fn spacing_for(frame_bytes: u64) -> u64 {
    CHECKPOINT_BYTES.max(frame_bytes.div_ceil(MAX_CHECKPOINTS))
}

impl Checkpoints {
    /// Starts the builder over `reader`'s frames, a checkpoint every `spacing` frame bytes.
    pub(crate) fn start(
        reader: FrameReader,
        ids: Arc<Mutex<Ids>>,
        spacing: u64,
    ) -> Result<Checkpoints, RecordError> {
        let first = Checkpoint {
            frame: 1,
            reach_ns: 0,
            stats: Stats::new(StatsOptions::default()),
        };
        let frames = reader.frames().len();
        let shared = Arc::new(Shared {
            progress: Mutex::new(Progress {
                ready: vec![Arc::new(first)],
                frame: 1,
                done: frames <= 1,
                damaged: Vec::new(),
            }),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let builder = Builder {
            shared: shared.clone(),
            reader,
            ids,
            spacing: spacing.max(1),
        };
        let handle = thread::Builder::new()
            .name("replay-checkpoints".into())
            .spawn(move || builder.run())
            .map_err(RecordError::Spawn)?;
        Ok(Checkpoints {
            shared,
            frames,
            builder: Some(handle),
        })
    }

    /// The latest checkpoint built whose reach is at or before `target_ns`.
    pub(crate) fn best(&self, target_ns: u64) -> Arc<Checkpoint> {
        let progress = self.shared.progress.lock();
        let ready = &progress.ready;
        let after = ready.partition_point(|checkpoint| checkpoint.reach_ns <= target_ns);
        ready[after.saturating_sub(1)].clone()
    }

    /// Checkpoints built so far.
    pub(crate) fn ready(&self) -> usize {
        self.shared.progress.lock().ready.len()
    }

    /// The share of the file folded so far, 0 to 1.
    pub(crate) fn built(&self) -> f64 {
        let progress = self.shared.progress.lock();
        match progress.done {
            true => 1.0,
            false => progress.frame as f64 / self.frames.max(1) as f64,
        }
    }

    /// Frames the builder could not read, and why (the builder's failure too).
    pub(crate) fn damaged(&self) -> Vec<(usize, String)> {
        self.shared.progress.lock().damaged.clone()
    }

    /// Waits until every checkpoint is built (or the builder stopped).
    pub(crate) fn wait_built(&self) {
        let mut progress = self.shared.progress.lock();
        while !progress.done {
            progress = self.shared.changed.wait(progress);
        }
    }
}

impl Drop for Checkpoints {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(builder) = self.builder.take() {
            // A panic in the builder has already ended it; nothing is left to undo.
            let _ = builder.join();
        }
    }
}

/// The builder thread's side.
struct Builder {
    shared: Arc<Shared>,
    reader: FrameReader,
    ids: Arc<Mutex<Ids>>,
    spacing: u64,
}

impl Builder {
    fn run(self) {
        let failure = self.fold().err();
        let mut progress = self.shared.progress.lock();
        if let Some(error) = failure {
            let why = format!(
                "checkpoints stopped at frame {}: {}; jumps past it feed from there",
                progress.frame,
                crate::error_chain::text(&error)
            );
            progress.damaged.push((usize::MAX, why));
        }
        progress.done = true;
        drop(progress);
        self.shared.changed.notify_all();
    }

    /// Folds every frame in order, appending a checkpoint every `spacing` bytes.
    fn fold(&self) -> Result<(), RecordError> {
        let mut stats = Stats::new(StatsOptions::default());
        let mut batch: Vec<Event> = Vec::new();
        let (mut reach_ns, mut since) = (0u64, 0u64);
        let frames = self.reader.frames();
        for (frame, entry) in frames.iter().enumerate().skip(1) {
            if self.shared.stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            let damaged = match self.reader.chunk(frame) {
                Ok(Some(chunk)) => {
                    batch.clear();
                    let last = resolve(&self.ids, &chunk, None, u64::MAX, &mut batch)?;
                    for event in &batch {
                        stats.ingest(event);
                    }
                    stats.set_dropped(chunk.dropped);
                    reach_ns = reach_ns.max(last);
                    None
                }
                Ok(None) => None,
                Err(why) => Some((frame, why)),
            };
            since += u64::from(entry.length);
            let checkpoint = (since >= self.spacing).then(|| {
                since = 0;
                Arc::new(Checkpoint {
                    frame: frame + 1,
                    reach_ns,
                    stats: stats.clone(),
                })
            });
            self.publish(frame + 1, checkpoint, damaged);
        }
        Ok(())
    }

    fn publish(
        &self,
        frame: usize,
        checkpoint: Option<Arc<Checkpoint>>,
        damaged: Option<(usize, String)>,
    ) {
        let mut progress = self.shared.progress.lock();
        progress.frame = frame;
        progress.ready.extend(checkpoint);
        progress.damaged.extend(damaged);
    }
}
