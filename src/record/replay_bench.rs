//! A synthetic recording of a given size, written frame by frame as the recorder writes
//! them (no profiler in between), and the replay's speed over it: opening, a step, a first
//! jump far ahead, a jump back, a step back. `enginetop replay --bench` runs it and prints
//! the figures; no test times anything.
//!
//! The run: [`THREADS`] workers, each running ops of [`OP_NAMES`] names back to back (start,
//! end, and a steal now and then), 16,384 events a chunk, each thread's events together in
//! a chunk as the collector drains them.
#![forbid(unsafe_code)]

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use super::format::{encode_frame, file_header, Chunk, End, Frame, RecordKind, Tables, WireEvent};
use super::{RecordError, RecordingInfo, Replay, Setting};

/// Worker threads of the synthetic run.
pub const THREADS: u32 = 8;
/// Op names it uses.
pub const OP_NAMES: u32 = 32;
const CHUNK_EVENTS: u32 = 16_384;

/// How long each part of the replay took.
#[derive(Clone, Debug)]
pub struct ReplayBench {
    /// The file's size.
    pub bytes: u64,
    /// Its events.
    pub events: u64,
    /// Its frames.
    pub frames: usize,
    /// Writing it.
    pub write: Duration,
    /// Opening it (scanning the frames, decoding the first and last chunks, the statistics
    /// at the first event).
    pub open: Duration,
    /// One 16x frame forward from the start (1.6 s of run).
    pub step: Duration,
    /// The first jump to the middle (feeds half the events).
    pub first_jump: Duration,
    /// A jump back a tenth of the run (from a checkpoint).
    pub jump_back: Duration,
    /// One 16x frame back from there.
    pub step_back: Duration,
    /// Checkpoints kept by then.
    pub checkpoints: usize,
}

/// Writes a synthetic recording of about `bytes` bytes to `path`, times the replay over it,
/// and deletes it.
pub fn bench_replay(path: &Path, bytes: u64) -> Result<ReplayBench, RecordError> {
    let started = Instant::now();
    let (size, events) = write_synthetic(path, bytes)?;
    let write = started.elapsed();
    let result = time_replay(path);
    let _ = std::fs::remove_file(path);
    let mut bench = result?;
    (bench.bytes, bench.events, bench.write) = (size, events, write);
    Ok(bench)
}

fn time_replay(path: &Path) -> Result<ReplayBench, RecordError> {
    let timed = |start: Instant| start.elapsed();
    let start = Instant::now();
    let mut replay = Replay::open(path)?;
    let open = timed(start);
    let (first, last) = (replay.start_ns(), replay.end_ns());
    let frame_16x = 1_600_000_000;
    let start = Instant::now();
    replay.seek(first + frame_16x)?;
    let _ = replay.snapshot();
    let step = timed(start);
    let middle = first + (last - first) / 2;
    let start = Instant::now();
    replay.seek(middle)?;
    let _ = replay.snapshot();
    let first_jump = timed(start);
    let back = middle - (last - first) / 10;
    let start = Instant::now();
    replay.seek(back)?;
    let _ = replay.snapshot();
    let jump_back = timed(start);
    let start = Instant::now();
    replay.seek(back.saturating_sub(frame_16x))?;
    let _ = replay.snapshot();
    let step_back = timed(start);
    Ok(ReplayBench {
        bytes: 0,
        events: 0,
        frames: replay.index().frames().len(),
        write: Duration::ZERO,
        open,
        step,
        first_jump,
        jump_back,
        step_back,
        checkpoints: replay.checkpoints(),
    })
}

/// Writes the synthetic run until the file holds `bytes`; returns its size and events.
pub(crate) fn write_synthetic(path: &Path, bytes: u64) -> Result<(u64, u64), RecordError> {
    let write_error = |source| RecordError::Write {
        path: path.display().to_string(),
        source,
    };
    let file = std::fs::File::create(path).map_err(write_error)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    out.write_all(&file_header()).map_err(write_error)?;
    let mut size = file_header().len() as u64;
    let mut put = |frame: &Frame, size: &mut u64| -> Result<(), RecordError> {
        let encoded = encode_frame(frame).map_err(RecordError::Encode)?;
        out.write_all(&encoded).map_err(write_error)?;
        *size += encoded.len() as u64;
        Ok(())
    };
    let info = RecordingInfo {
        enginetop: env!("CARGO_PKG_VERSION").into(),
        epoch_unix_ns: 0,
        workload: "replay-bench".into(),
        settings: vec![
            Setting::new("engine", "threaded"),
            Setting::new("inter", THREADS),
        ],
    };
    let mut writer = Synthetic::new();
    put(&Frame::Header(info), &mut size)?;
    let mut events = 0u64;
    let mut first = true;
    while size < bytes {
        let chunk = writer.chunk(first);
        first = false;
        events += chunk.events.len() as u64;
        put(&Frame::Chunk(chunk), &mut size)?;
    }
    let end = End {
        events,
        dropped: 0,
        lost: 0,
    };
    put(&Frame::End(end), &mut size)?;
    out.flush().map_err(write_error)?;
    Ok((size, events))
}

/// The synthetic run's state: each thread's clock and next op.
struct Synthetic {
    clock: Vec<u64>,
    op: u64,
    rng: fastrand::Rng,
}

impl Synthetic {
    fn new() -> Synthetic {
        Synthetic {
            clock: vec![1_000_000; THREADS as usize],
            op: 0,
            rng: fastrand::Rng::with_seed(7),
        }
    }

    /// The next chunk: each thread's share of events in turn.
    fn chunk(&mut self, with_tables: bool) -> Chunk {
        let mut events = Vec::with_capacity(CHUNK_EVENTS as usize);
        let mut previous = self.clock[0];
        let base_ns = previous;
        let per_thread = CHUNK_EVENTS / THREADS / 2;
        for thread in 0..THREADS {
            for _ in 0..per_thread {
                self.op += 1;
                let name = self.rng.u32(0..OP_NAMES);
                let start = self.clock[thread as usize] + self.rng.u64(200..2_000);
                let end = start + 10_000 + u64::from(name) * 3_000 + self.rng.u64(0..5_000);
                self.clock[thread as usize] = end;
                for (kind, ts) in [(RecordKind::OpStart, start), (RecordKind::OpEnd, end)] {
                    events.push(WireEvent {
                        dt_ns: ts.wrapping_sub(previous) as i64,
                        kind,
                        thread,
                        device: 0,
                        name,
                        aux: thread,
                        arg: self.op,
                        flags: 0,
                    });
                    previous = ts;
                }
            }
        }
        let tables = match with_tables {
            true => Tables {
                names: (0..OP_NAMES)
                    .map(|n| (n, format!("bench-op-{n}")))
                    .collect(),
                devices: vec![(0, "bench-cpu".into())],
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
            base_ns,
            events,
        }
    }
}
