//! A synthetic recording of a given size, written frame by frame as the recorder writes
//! them (no profiler in between, checkpoints made the recorder's way), and the replay's
//! speed over it: opening; a first far jump as the dashboard makes it (frames of a feeding
//! budget each, right after opening); then [`RANDOM_JUMPS`] jumps to random moments, steps
//! forward and back, and the memory all that took. `enginetop replay --bench` runs it and
//! prints the figures; no test times anything.
//!
//! The run: [`THREADS`] workers, each running ops of [`OP_NAMES`] names (or as many as the
//! caller asks for) back to back (start,
//! end, and a steal now and then), 16,384 events a chunk, each thread's events together in
//! a chunk as the collector drains them.
#![forbid(unsafe_code)]

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use super::checkpoints::{CheckpointMaker, CHECKPOINT_BYTES};
use super::convert::to_event;
use super::format::{
    encode_frame, file_header, Chunk, DeviceEntry, End, Frame, RecordKind, RecordedEvent, Tables,
};
use super::{RecordError, RecordingInfo, Replay, Setting};
use crate::profiler::{DeviceId, OpName, Stats, StatsOptions, ThreadId};

/// Worker threads of the synthetic run.
pub(crate) const THREADS: u32 = 8;
/// Op names it uses.
pub(crate) const OP_NAMES: u32 = 32;
const CHUNK_EVENTS: u32 = 16_384;

/// Jumps to random moments timed once the checkpoints are built.
pub(crate) const RANDOM_JUMPS: usize = 25;

/// How long each part of the replay took.
#[derive(Clone, Debug)]
pub(crate) struct ReplayBench {
    /// The file's size.
    pub(crate) bytes: u64,
    /// Its events.
    pub(crate) events: u64,
    /// Its frames.
    pub(crate) frames: usize,
    /// Writing it.
    pub(crate) write: Duration,
    /// Checkpoints it holds.
    pub(crate) checkpoints: u64,
    /// Their bytes.
    pub(crate) checkpoint_bytes: u64,
    /// Opening it (scanning the frames, decoding the first and last chunks, the statistics
    /// at the first event).
    pub(crate) open: Duration,
    /// The feeding budget of a dashboard frame.
    pub(crate) budget: Duration,
    /// The first jump to nine tenths of the run, right after opening: its first frame (a
    /// budgeted feed from the checkpoint restored, and a snapshot).
    pub(crate) first_jump_frame: Duration,
    /// The same jump until the statistics are at its target, frame after frame.
    pub(crate) first_jump_reached: Duration,
    /// The frames that took.
    pub(crate) first_jump_frames: usize,
    /// Resident memory grown from before opening to after the jumps and steps (Linux;
    /// `None` elsewhere).
    pub(crate) memory: Option<u64>,
    /// Jumps to [`RANDOM_JUMPS`] random moments (whole: statistics at the target), sorted.
    pub(crate) random_jumps: Vec<Duration>,
    /// One 16x frame (1.6 s of run) forward from the middle.
    pub(crate) step: Duration,
    /// One 16x frame back from there.
    pub(crate) step_back: Duration,
}

impl ReplayBench {
    /// The median random jump.
    pub(crate) fn random_median(&self) -> Duration {
        self.random_jumps[self.random_jumps.len() / 2]
    }

    /// The slowest random jump.
    pub(crate) fn random_max(&self) -> Duration {
        self.random_jumps.iter().copied().max().unwrap_or_default()
    }
}

/// Writes a synthetic recording of about `bytes` bytes with ops of `names` names to `path`,
/// times the replay over it with frames feeding for `budget` each, and deletes it.
pub(crate) fn bench_replay(
    path: &Path,
    bytes: u64,
    budget: Duration,
    names: u32,
) -> Result<ReplayBench, RecordError> {
    let started = Instant::now();
    let written = write_synthetic_with(path, bytes, CHECKPOINT_BYTES, names)?;
    let write = started.elapsed();
    let result = time_replay(path, budget);
    let _ = std::fs::remove_file(path);
    let mut bench = result?;
    (bench.bytes, bench.events, bench.write) = (written.bytes, written.events, write);
    (bench.checkpoints, bench.checkpoint_bytes) = (written.checkpoints, written.checkpoint_bytes);
    Ok(bench)
}

/// One dashboard frame: a budgeted feed and a snapshot; whether the target is reached.
fn frame(replay: &mut Replay, target: u64, budget: Duration) -> Result<bool, RecordError> {
    let reached = replay.seek_within(target, budget)?;
    let _ = replay.snapshot();
    Ok(reached)
}

/// A whole jump: the statistics at `target` and their snapshot.
fn jump(replay: &mut Replay, target: u64) -> Result<Duration, RecordError> {
    let start = Instant::now();
    replay.seek(target)?;
    let _ = replay.snapshot();
    Ok(start.elapsed())
}

fn time_replay(path: &Path, budget: Duration) -> Result<ReplayBench, RecordError> {
    let opened = Instant::now();
    let memory_before = resident_bytes();
    let mut replay = Replay::open(path)?;
    let open = opened.elapsed();
    let (first, last) = (replay.start_ns(), replay.end_ns());
    let far = first + (last - first) / 10 * 9;
    let start = Instant::now();
    let mut reached = frame(&mut replay, far, budget)?;
    let first_jump_frame = start.elapsed();
    let mut first_jump_frames = 1;
    while !reached {
        reached = frame(&mut replay, far, budget)?;
        first_jump_frames += 1;
    }
    let first_jump_reached = start.elapsed();
    let mut rng = fastrand::Rng::with_seed(25);
    let mut random_jumps = (0..RANDOM_JUMPS)
        .map(|_| jump(&mut replay, rng.u64(first..=last)))
        .collect::<Result<Vec<_>, _>>()?;
    random_jumps.sort();
    let frame_16x = 1_600_000_000;
    let middle = first + (last - first) / 2;
    jump(&mut replay, middle)?;
    let step = jump(&mut replay, middle + frame_16x)?;
    let step_back = jump(&mut replay, middle)?;
    let memory = resident_bytes()
        .zip(memory_before)
        .map(|(after, before)| after.saturating_sub(before));
    Ok(ReplayBench {
        bytes: 0,
        events: 0,
        frames: replay.index().frames().len(),
        write: Duration::ZERO,
        checkpoints: 0,
        checkpoint_bytes: 0,
        open,
        budget,
        first_jump_frame,
        first_jump_reached,
        first_jump_frames,
        memory,
        random_jumps,
        step,
        step_back,
    })
}

/// This process's resident memory, from `/proc/self/status` (Linux only).
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// What [`write_synthetic`] wrote.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Written {
    pub(crate) bytes: u64,
    pub(crate) events: u64,
    pub(crate) checkpoints: u64,
    pub(crate) checkpoint_bytes: u64,
}

/// Writes the synthetic run until the file holds `bytes`, with the recorder's checkpoints.
#[cfg(all(test, not(loom)))]
pub(crate) fn write_synthetic(path: &Path, bytes: u64) -> Result<Written, RecordError> {
    write_synthetic_with(path, bytes, CHECKPOINT_BYTES, OP_NAMES)
}

/// [`write_synthetic`] with checkpoints every `checkpoint_bytes` of frames at least, and ops
/// of `names` names.
pub(crate) fn write_synthetic_with(
    path: &Path,
    bytes: u64,
    checkpoint_bytes: u64,
    names: u32,
) -> Result<Written, RecordError> {
    let write_error = |source| RecordError::Write {
        path: path.display().to_string(),
        source,
    };
    let file = std::fs::File::create(path).map_err(write_error)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    out.write_all(&file_header()).map_err(write_error)?;
    let mut size = file_header().len() as u64;
    let mut checkpoint = CheckpointMaker::new(checkpoint_bytes);
    let mut put = |frame: &Frame, size: &mut u64, checkpoint: &mut CheckpointMaker| {
        let encoded = encode_frame(frame).map_err(RecordError::Encode)?;
        out.write_all(&encoded).map_err(write_error)?;
        *size += encoded.len() as u64;
        checkpoint.wrote(encoded.len() as u64);
        Ok::<u64, RecordError>(encoded.len() as u64)
    };
    let info = RecordingInfo {
        enginetop: env!("CARGO_PKG_VERSION").into(),
        epoch_unix_ns: 0,
        workload: "replay-bench".into(),
        settings: vec![
            Setting::new("engine", "threaded"),
            Setting::new("inter", THREADS),
        ],
        stats: StatsOptions::default(),
    };
    let mut writer = Synthetic::new(names.max(1));
    // The collector's statistics of the run: fed every event, copied at each checkpoint.
    let mut stats = Stats::new(StatsOptions::default());
    put(&Frame::Header(info), &mut size, &mut checkpoint)?;
    let mut events = 0u64;
    let mut first = true;
    while size < bytes {
        let chunk = writer.chunk(first);
        first = false;
        events += chunk.events.len() as u64;
        feed(&mut stats, &mut checkpoint, &chunk);
        put(&Frame::Chunk(chunk), &mut size, &mut checkpoint)?;
        if checkpoint.due() {
            let frame = checkpoint
                .frame(&mut stats, &[])
                .map_err(RecordError::Encode)?;
            let written = put(&frame, &mut size, &mut checkpoint)?;
            checkpoint.written(frame, written);
        }
    }
    let end = End {
        events,
        dropped: 0,
        lost: 0,
        tasks: Vec::new(),
    };
    put(&Frame::End(end), &mut size, &mut checkpoint)?;
    out.flush().map_err(write_error)?;
    Ok(Written {
        bytes: size,
        events,
        checkpoints: checkpoint.written,
        checkpoint_bytes: checkpoint.bytes,
    })
}

/// Feeds `chunk` to `stats` as the collector fed the live statistics its events (its ids
/// are this process's: the names are interned, the device registered).
fn feed(stats: &mut Stats, checkpoint: &mut CheckpointMaker, chunk: &Chunk) {
    checkpoint.chunk(&chunk.tables);
    for recorded in &chunk.events {
        let ids = (
            OpName::from_raw(recorded.name),
            DeviceId::from_raw(recorded.device),
            ThreadId::from_raw(recorded.thread),
        );
        checkpoint.reach(recorded.ts_ns);
        stats.ingest(&to_event(recorded, ids));
    }
    stats.set_dropped(chunk.dropped);
}

/// The synthetic run's state: each thread's clock and next op, its names and device.
struct Synthetic {
    clock: Vec<u64>,
    op: u64,
    rng: fastrand::Rng,
    names: Vec<OpName>,
    device: DeviceId,
}

impl Synthetic {
    fn new(names: u32) -> Synthetic {
        Synthetic {
            clock: vec![1_000_000; THREADS as usize],
            op: 0,
            rng: fastrand::Rng::with_seed(7),
            names: (0..names)
                .map(|n| OpName::new(&format!("bench-op-{n}")))
                .collect(),
            device: DeviceId::register("bench-cpu"),
        }
    }

    /// The next chunk: each thread's share of events in turn.
    fn chunk(&mut self, with_tables: bool) -> Chunk {
        let mut events = Vec::with_capacity(CHUNK_EVENTS as usize);
        let per_thread = CHUNK_EVENTS / THREADS / 2;
        for thread in 0..THREADS {
            for _ in 0..per_thread {
                self.op += 1;
                let index = self.rng.u32(0..self.names.len() as u32);
                let name = self.names[index as usize].id();
                let start = self.clock[thread as usize] + self.rng.u64(200..2_000);
                let end = start + 10_000 + u64::from(index) * 3_000 + self.rng.u64(0..5_000);
                self.clock[thread as usize] = end;
                for (kind, ts) in [(RecordKind::OpStart, start), (RecordKind::OpEnd, end)] {
                    events.push(RecordedEvent {
                        ts_ns: ts,
                        kind,
                        thread,
                        device: self.device.id(),
                        name,
                        aux: thread,
                        arg: self.op,
                        flags: 0,
                    });
                }
            }
        }
        let tables = match with_tables {
            true => Tables {
                names: self
                    .names
                    .iter()
                    .map(|name| (name.id(), name.as_str().to_string()))
                    .collect(),
                devices: vec![(self.device.id(), DeviceEntry::of(self.device))],
                threads: (0..THREADS)
                    .map(|t| (t, format!("bench-worker-{t}")))
                    .collect(),
                device_labels: Vec::new(),
            },
            false => Tables::default(),
        };
        Chunk {
            tables,
            dropped: 0,
            lost: 0,
            events,
            marks: Vec::new(),
            tasks: Vec::new(),
        }
    }
}
