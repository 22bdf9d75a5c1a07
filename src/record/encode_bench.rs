//! What encoding a chunk of events costs, candidate by candidate, on the events of a real
//! recording: nanoseconds of one thread's time per event (the best of a few passes over
//! every chunk) and bytes per event. `enginetop replay FILE --bench-encoding` prints the
//! table; no test times anything.
//!
//! The candidates: the rows as postcard varints (one struct an event, times as deltas),
//! with and without lz4; the same rows behind the per-event table lookups the recorder
//! makes (a `HashSet` per id kind, or a bitmap indexed by the id); raw fixed-width rows (32
//! bytes an event) with lz4; columns (one `Vec` per field, times and op ids as deltas) as
//! postcard varints serialized value by value through serde, with and without lz4; the
//! same columns as the recorder writes them (module `columns`: each column's varints pushed
//! by a loop, postcard given the bytes), with and without lz4; and raw fixed-width columns
//! with lz4.
#![forbid(unsafe_code)]

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Serialize, Serializer};

use super::format::{RecordKind, RecordedEvent, FRAME_HEADER_LEN};
use super::index::RecordingIndex;
use super::writer::CHUNK_EVENTS;
use super::{read_recording, RecordError};

/// One candidate's figures.
#[derive(Clone, Debug)]
pub(crate) struct EncodingFigure {
    /// What it does.
    pub(crate) name: &'static str,
    /// One thread's time per event, best of the passes.
    pub(crate) ns_per_event: f64,
    /// Bytes per event written.
    pub(crate) bytes_per_event: f64,
}

/// One checkpoint of a recording: its frame's bytes, and the uncompressed bytes of its
/// table entries and of its statistics.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CheckpointSize {
    /// The frame (header, lz4 payload).
    pub(crate) frame_bytes: u64,
    /// Its name, device and thread entries (postcard).
    pub(crate) tables_bytes: u64,
    /// Its statistics (postcard).
    pub(crate) stats_bytes: u64,
    /// Names it holds.
    pub(crate) names: usize,
}

/// The size of every checkpoint of the recording at `path`, and what it is made of.
pub(crate) fn checkpoint_sizes(path: &Path) -> Result<Vec<CheckpointSize>, RecordError> {
    let index = RecordingIndex::open(path)?;
    let frames = index.frames();
    let sizes = (0..frames.len())
        .filter(|&frame| frames[frame].checkpoint)
        .filter_map(|frame| {
            let checkpoint = index.checkpoint(frame).ok()?;
            let tables = postcard::to_stdvec(&checkpoint.tables).ok()?;
            Some(CheckpointSize {
                frame_bytes: (FRAME_HEADER_LEN as u64 + u64::from(frames[frame].length)),
                tables_bytes: tables.len() as u64,
                stats_bytes: checkpoint.stats.len() as u64,
                names: checkpoint.tables.names.len(),
            })
        })
        .collect();
    Ok(sizes)
}

/// Passes over the events per candidate (the best counts).
const PASSES: usize = 5;

/// The figures of every candidate on the events of the recording at `path`.
pub(crate) fn bench_encodings(path: &Path) -> Result<(usize, Vec<EncodingFigure>), RecordError> {
    let events = read_recording(path)?.events;
    let chunks: Vec<&[RecordedEvent]> = events.chunks(CHUNK_EVENTS).collect();
    let candidates: [(&'static str, Encode); 10] = [
        ("rows postcard + lz4, HashSet tables (v4)", rows_hashset_lz4),
        ("rows postcard + lz4, bitmap tables", rows_bitmap_lz4),
        ("rows postcard, no lz4", rows_postcard),
        (
            "rows postcard, no lz4, bitmap tables (v5, v6)",
            rows_bitmap_postcard,
        ),
        ("rows raw 32 B + lz4", rows_raw_lz4),
        ("columns postcard, no lz4", columns_postcard),
        ("columns postcard + lz4", columns_postcard_lz4),
        ("columns by loop, no lz4 (v7)", columns_loop),
        ("columns by loop + lz4", columns_loop_lz4),
        ("columns raw + lz4", columns_raw_lz4),
    ];
    let figures = candidates
        .into_iter()
        .map(|(name, encode)| measure(name, &chunks, events.len(), encode))
        .collect();
    Ok((events.len(), figures))
}

/// A candidate: encodes a chunk's events into the buffer.
type Encode = fn(&[RecordedEvent], &mut Vec<u8>);

fn measure(
    name: &'static str,
    chunks: &[&[RecordedEvent]],
    events: usize,
    encode: Encode,
) -> EncodingFigure {
    let mut best = Duration::MAX;
    let mut bytes = 0;
    let mut out = Vec::new();
    for _ in 0..PASSES {
        bytes = 0;
        let start = Instant::now();
        for chunk in chunks {
            out.clear();
            encode(chunk, &mut out);
            bytes += out.len();
        }
        best = best.min(start.elapsed());
    }
    let events = events.max(1) as f64;
    EncodingFigure {
        name,
        ns_per_event: best.as_nanos() as f64 / events,
        bytes_per_event: bytes as f64 / events,
    }
}

fn lz4_into(plain: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&lz4_flex::block::compress_prepend_size(plain));
    let crc = crc32fast::hash(out);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// An event as a row stores it: its time as a delta from the event before.
#[derive(Serialize)]
struct Row {
    dt_ns: i64,
    kind: RecordKind,
    thread: u32,
    device: u16,
    name: u32,
    aux: u32,
    arg: u64,
    flags: u8,
}

fn rows(chunk: &[RecordedEvent]) -> Vec<Row> {
    let mut previous = chunk.first().map_or(0, |event| event.ts_ns);
    chunk
        .iter()
        .map(|event| {
            let dt_ns = event.ts_ns.wrapping_sub(previous) as i64;
            previous = event.ts_ns;
            Row {
                dt_ns,
                kind: event.kind,
                thread: event.thread,
                device: event.device,
                name: event.name,
                aux: event.aux,
                arg: event.arg,
                flags: event.flags,
            }
        })
        .collect()
}

fn rows_postcard(chunk: &[RecordedEvent], out: &mut Vec<u8>) {
    *out = postcard::to_extend(&rows(chunk), std::mem::take(out)).unwrap_or_default();
}

fn rows_postcard_lz4(chunk: &[RecordedEvent], out: &mut Vec<u8>) {
    let plain = postcard::to_stdvec(&rows(chunk)).unwrap_or_default();
    lz4_into(&plain, out);
}

type HashSeen = (HashSet<u32>, HashSet<u16>, HashSet<u32>);

thread_local! {
    /// The ids seen over every pass, as the recorder keeps them for a whole run.
    static HASH_SEEN: std::cell::RefCell<HashSeen> = std::cell::RefCell::default();
}

fn rows_hashset_lz4(chunk: &[RecordedEvent], out: &mut Vec<u8>) {
    let fresh = HASH_SEEN.with(|seen| {
        let seen = &mut *seen.borrow_mut();
        let mut fresh = 0usize;
        for event in chunk {
            fresh += usize::from(seen.0.insert(event.name));
            fresh += usize::from(seen.1.insert(event.device));
            fresh += usize::from(seen.2.insert(event.thread));
        }
        fresh
    });
    std::hint::black_box(fresh);
    rows_postcard_lz4(chunk, out);
}

fn rows_bitmap_lz4(chunk: &[RecordedEvent], out: &mut Vec<u8>) {
    bitmap_seen(chunk);
    rows_postcard_lz4(chunk, out);
}

fn rows_bitmap_postcard(chunk: &[RecordedEvent], out: &mut Vec<u8>) {
    bitmap_seen(chunk);
    rows_postcard(chunk, out);
}

fn bitmap_seen(chunk: &[RecordedEvent]) {
    let mut seen: Vec<bool> = Vec::new();
    let mut fresh = 0usize;
    for event in chunk {
        for id in [event.name, u32::from(event.device), event.thread] {
            let id = id as usize;
            if id >= seen.len() {
                seen.resize(id + 1, false);
            }
            fresh += usize::from(!std::mem::replace(&mut seen[id], true));
        }
    }
    std::hint::black_box(fresh);
}

fn rows_raw_lz4(chunk: &[RecordedEvent], out: &mut Vec<u8>) {
    let mut plain = Vec::with_capacity(chunk.len() * 32);
    for event in chunk {
        plain.extend_from_slice(&event.ts_ns.to_le_bytes());
        plain.extend_from_slice(&event.arg.to_le_bytes());
        plain.extend_from_slice(&event.thread.to_le_bytes());
        plain.extend_from_slice(&event.name.to_le_bytes());
        plain.extend_from_slice(&event.aux.to_le_bytes());
        plain.extend_from_slice(&event.device.to_le_bytes());
        plain.push(event.kind as u8);
        plain.push(event.flags);
    }
    lz4_into(&plain, out);
}

/// A chunk's events one column per field, times and op ids as deltas.
#[derive(Default, Serialize)]
struct Columns {
    dt_ns: Vec<i64>,
    kinds: Vec<RecordKind>,
    threads: Vec<u32>,
    devices: Vec<u16>,
    names: Vec<u32>,
    aux: Vec<u32>,
    arg: Vec<i64>,
    flags: Vec<u8>,
}

fn columns(chunk: &[RecordedEvent]) -> Columns {
    let mut columns = Columns::default();
    let (mut ts, mut arg) = (chunk.first().map_or(0, |event| event.ts_ns), 0u64);
    for event in chunk {
        columns.dt_ns.push(event.ts_ns.wrapping_sub(ts) as i64);
        columns.kinds.push(event.kind);
        columns.threads.push(event.thread);
        columns.devices.push(event.device);
        columns.names.push(event.name);
        columns.aux.push(event.aux);
        columns.arg.push(event.arg.wrapping_sub(arg) as i64);
        columns.flags.push(event.flags);
        (ts, arg) = (event.ts_ns, event.arg);
    }
    columns
}

fn columns_postcard(chunk: &[RecordedEvent], out: &mut Vec<u8>) {
    *out = postcard::to_extend(&columns(chunk), std::mem::take(out)).unwrap_or_default();
}

fn columns_postcard_lz4(chunk: &[RecordedEvent], out: &mut Vec<u8>) {
    let plain = postcard::to_stdvec(&columns(chunk)).unwrap_or_default();
    lz4_into(&plain, out);
}

/// A chunk's events as a chunk frame holds them.
struct LoopColumns<'a>(&'a [RecordedEvent]);

impl Serialize for LoopColumns<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        super::columns::events::serialize(self.0, serializer)
    }
}

fn columns_loop(chunk: &[RecordedEvent], out: &mut Vec<u8>) {
    *out = postcard::to_extend(&LoopColumns(chunk), std::mem::take(out)).unwrap_or_default();
}

fn columns_loop_lz4(chunk: &[RecordedEvent], out: &mut Vec<u8>) {
    let plain = postcard::to_stdvec(&LoopColumns(chunk)).unwrap_or_default();
    lz4_into(&plain, out);
}

fn columns_raw_lz4(chunk: &[RecordedEvent], out: &mut Vec<u8>) {
    let mut plain = Vec::with_capacity(chunk.len() * 32);
    let mut ts = chunk.first().map_or(0, |event| event.ts_ns);
    for event in chunk {
        plain.extend_from_slice(&(event.ts_ns.wrapping_sub(ts) as u32).to_le_bytes());
        ts = event.ts_ns;
    }
    let mut arg = 0u64;
    for event in chunk {
        plain.extend_from_slice(&event.arg.wrapping_sub(arg).to_le_bytes());
        arg = event.arg;
    }
    chunk
        .iter()
        .for_each(|e| plain.extend_from_slice(&e.thread.to_le_bytes()));
    chunk
        .iter()
        .for_each(|e| plain.extend_from_slice(&e.name.to_le_bytes()));
    chunk
        .iter()
        .for_each(|e| plain.extend_from_slice(&e.aux.to_le_bytes()));
    chunk
        .iter()
        .for_each(|e| plain.extend_from_slice(&e.device.to_le_bytes()));
    chunk.iter().for_each(|e| plain.push(e.kind as u8));
    chunk.iter().for_each(|e| plain.push(e.flags));
    lz4_into(&plain, out);
}
