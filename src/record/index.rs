//! The index of a recording: where each frame lies, found without reading the payloads, so
//! a replay opens a file of any size at once and reads only the frames it shows.
//!
//! # Algorithm
//! Opening reads the file header (magic, version), then hops from frame header to frame
//! header (`offset += 8 + length`): one small read per frame, no payload read, decompressed
//! or checked. That gives every whole frame's offset, length and checksum, and which frames
//! are checkpoints (their length word's bit, see [`super::format`]). Then it decodes
//! only the frames it needs to say what the file holds: the header frame (the run's
//! configuration), the first chunk (when the run starts), and the frames at the end back to
//! the last chunk (when it ends; the final thread names, the summary and the end frame of a
//! finished recording). Everything else is decoded when the replay reaches it
//! ([`RecordingIndex::chunk`], `RecordingIndex::checkpoint`), and each chunk's first and
//! last event time and event count are kept in its entry then ([`FrameEntry::span`]), so the
//! replay can tell which frames hold a moment it has seen before.
//!
//! # Damage
//! A file cut off inside a frame (a killed run) ends at its last whole frame (the loss says
//! whether the cut frame was a checkpoint or events); a frame header
//! that declares an impossible length ends the scan there (its length is unknown, so no later
//! frame can be found); a frame whose checksum or decoding fails is left out when read and
//! the replay goes on with the next. Each of these is kept as a sentence in
//! [`RecordingIndex::losses`], which the footer and the summary show. Only a file that is not
//! a recording, of another format version, or whose header frame is damaged is refused.
#![forbid(unsafe_code)]

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use crate::profiler::{StatsOptions, TaskReading};

use super::format::{
    decode_payload, CheckpointFrame, Chunk, DeviceEntry, Frame, Mark, RecordedEvent, RecordingInfo,
    Tables, FILE_HEADER_LEN, FRAME_HEADER_LEN, MAX_FRAME_BYTES,
};
use super::reader::{check_file_header, frame_header, FrameHeader};
use super::RecordError;

/// How many frames at the end are decoded at most, looking for the last chunk.
const TAIL_FRAMES: usize = 16;

/// One whole frame of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FrameEntry {
    /// Byte offset of its header.
    pub(crate) offset: u64,
    /// Its payload's length.
    pub(crate) length: u32,
    crc: u32,
    /// Whether its header marks it a checkpoint.
    pub(crate) checkpoint: bool,
    /// For a chunk decoded once: its first and last event time and its event count.
    pub(crate) span: Option<ChunkSpan>,
}

/// The times and size of a chunk's events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ChunkSpan {
    /// Its earliest event's time (ns since the epoch).
    pub(crate) first_ns: u64,
    /// Its latest event's time.
    pub(crate) last_ns: u64,
    /// Its events.
    pub(crate) events: u32,
}

/// A chunk's content, with absolute times.
#[derive(Clone, Debug, Default)]
pub(crate) struct ChunkData {
    /// Its events, in the order the collector drained them.
    pub(crate) events: Vec<RecordedEvent>,
    /// Names first used in it: (id, text).
    pub(crate) names: Vec<(u32, String)>,
    /// Devices first used in it.
    pub(crate) devices: Vec<(u16, DeviceEntry)>,
    /// Threads first seen in it.
    pub(crate) threads: Vec<(u32, String)>,
    /// Events the profiler had dropped by its end.
    pub(crate) dropped: u64,
    /// What the live statistics took among its events besides them, in order.
    pub(crate) marks: Vec<Mark>,
    /// The exact pool task counts after it.
    pub(crate) tasks: Vec<TaskReading>,
}

/// A recording opened for replay: its frames' places, and what its ends say.
#[derive(Debug)]
pub(crate) struct RecordingIndex {
    path: String,
    file: File,
    frames: Vec<FrameEntry>,
    /// The run's description.
    pub(crate) info: RecordingInfo,
    /// The first chunk's earliest event time (`None`: no event).
    pub(crate) first_ns: Option<u64>,
    /// The last chunk's latest event time.
    pub(crate) last_ns: Option<u64>,
    /// Thread names in their final form (a finished recording's last table frame).
    pub(crate) final_threads: Vec<(u32, String)>,
    /// Device descriptions (a finished recording's last table frame).
    pub(crate) device_labels: Vec<(u16, String)>,
    /// The live run's summary as JSON text, when the run wrote it.
    pub(crate) summary: Option<String>,
    /// Every pool worker's exact task counts at the end (the end frame's).
    pub(crate) tasks: Vec<TaskReading>,
    /// Whether the end frame is there.
    pub(crate) complete: bool,
    /// What could not be read, one sentence each.
    pub(crate) losses: Vec<String>,
}

impl RecordingIndex {
    /// Opens the recording at `path`: scans its frame headers and decodes its first and last
    /// frames (see the module docs).
    pub(crate) fn open(path: impl AsRef<Path>) -> Result<RecordingIndex, RecordError> {
        let shown = path.as_ref().display().to_string();
        let read_error = |source| RecordError::Read {
            path: shown.clone(),
            source,
        };
        let file = File::open(path.as_ref()).map_err(read_error)?;
        let size = file.metadata().map_err(read_error)?.len();
        let mut head = vec![0; FILE_HEADER_LEN.min(size as usize)];
        (&file).read_exact(&mut head).map_err(read_error)?;
        check_file_header(&head, &shown)?;
        let mut index = RecordingIndex {
            path: shown.clone(),
            file,
            frames: Vec::new(),
            info: RecordingInfo::default(),
            first_ns: None,
            last_ns: None,
            final_threads: Vec::new(),
            device_labels: Vec::new(),
            summary: None,
            tasks: Vec::new(),
            complete: false,
            losses: Vec::new(),
        };
        index.scan(size).map_err(read_error)?;
        index.read_header()?;
        index.read_first_chunk();
        index.read_tail();
        if !index.complete {
            index.losses.push(
                "the recording has no end frame (the run was stopped before it ended): the \
                 thread names' final form and the run's summary are lost"
                    .to_string(),
            );
        }
        Ok(index)
    }

    /// The file's name as given.
    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    /// Every whole frame (the header frame first).
    pub(crate) fn frames(&self) -> &[FrameEntry] {
        &self.frames
    }

    /// Frame header after frame header, from the file header to the end of the file.
    fn scan(&mut self, size: u64) -> std::io::Result<()> {
        let mut offset = FILE_HEADER_LEN as u64;
        let mut header = [0u8; FRAME_HEADER_LEN];
        while offset < size {
            let rest = size - offset;
            if rest < FRAME_HEADER_LEN as u64 {
                self.note_cut(offset, rest);
                break;
            }
            (&self.file).seek(SeekFrom::Start(offset))?;
            (&self.file).read_exact(&mut header)?;
            let Some(FrameHeader {
                length,
                crc,
                checkpoint,
            }) = frame_header(&header)
            else {
                break;
            };
            if length > MAX_FRAME_BYTES {
                self.losses.push(format!(
                    "frame {} (at byte {offset}) declares {length} bytes, more than any \
                     frame holds: the {rest} bytes from there on are left out",
                    self.frames.len()
                ));
                break;
            }
            let whole = (FRAME_HEADER_LEN + length) as u64;
            if whole > rest {
                let what = match checkpoint {
                    true => "a checkpoint",
                    false => "a frame",
                };
                self.losses.push(format!(
                    "the last {rest} bytes ({what} cut off after byte {offset}) are left out"
                ));
                break;
            }
            self.frames.push(FrameEntry {
                offset,
                length: length as u32,
                crc,
                checkpoint,
                span: None,
            });
            offset += whole;
        }
        Ok(())
    }

    fn note_cut(&mut self, offset: u64, rest: u64) {
        self.losses.push(format!(
            "the last {rest} bytes (a frame cut off after byte {offset}) are left out"
        ));
    }

    /// Reads and decodes frame `frame`; `Err` says why it could not be.
    fn decode(&self, frame: usize) -> Result<Frame, String> {
        decode_at(&self.file, self.frames[frame])
    }

    fn damaged(&self, frame: usize, why: &str) -> String {
        damaged(frame, self.frames[frame], why)
    }

    fn read_header(&mut self) -> Result<(), RecordError> {
        let corrupt = |why: String| RecordError::Corrupt {
            path: self.path.clone(),
            frame: 0,
            offset: FILE_HEADER_LEN as u64,
            why,
        };
        if self.frames.is_empty() {
            return Err(corrupt(
                "is missing: the file holds no part of a run".into(),
            ));
        }
        match self.decode(0) {
            Ok(Frame::Header(info)) if !stats_options_fit(info.stats) => Err(corrupt(format!(
                "cuts the statistics' window of {:?} into {} buckets, which no run records",
                info.stats.window, info.stats.buckets
            ))),
            Ok(Frame::Header(info)) => {
                self.info = info;
                Ok(())
            }
            Ok(_) => Err(corrupt(
                "is out of place: a recording starts with its header frame".into(),
            )),
            Err(why) => Err(corrupt(why)),
        }
    }

    /// Finds the first chunk with events (its time is the run's start).
    fn read_first_chunk(&mut self) {
        for frame in (1..self.frames.len()).take(TAIL_FRAMES) {
            if let Ok(Some(chunk)) = self.chunk(frame) {
                if let Some(first) = chunk.events.iter().map(|event| event.ts_ns).min() {
                    self.first_ns = Some(first);
                    return;
                }
            }
        }
    }

    /// Decodes frames from the end back to the last chunk: the end frame, the summary, the
    /// final tables, and the run's last event time.
    fn read_tail(&mut self) {
        let count = self.frames.len();
        for frame in (1..count).rev().take(TAIL_FRAMES) {
            if self.frames[frame].checkpoint {
                continue;
            }
            match self.decode(frame) {
                Ok(Frame::End(end)) => {
                    self.complete = true;
                    self.tasks = end.tasks;
                }
                Ok(Frame::Summary(summary)) => self.summary = Some(summary),
                Ok(Frame::Tables(tables)) => self.take_final_tables(tables),
                Ok(Frame::Chunk(chunk)) if !chunk.events.is_empty() => {
                    if let Ok(Some(chunk)) = self.chunk(frame) {
                        self.last_ns = chunk.events.iter().map(|event| event.ts_ns).max();
                        return;
                    }
                }
                // A damaged frame is reported when the replay reaches it.
                Ok(_) | Err(_) => {}
            }
        }
    }

    fn take_final_tables(&mut self, tables: Tables) {
        self.final_threads = tables.threads;
        self.device_labels = tables.device_labels;
    }

    /// Frame `frame`'s events and table entries if it is a chunk (`Ok(None)`: another kind
    /// of frame), with its [`span`](FrameEntry::span) noted; `Err` is the sentence saying
    /// why it is left out.
    pub(crate) fn chunk(&mut self, frame: usize) -> Result<Option<ChunkData>, String> {
        if self.frames[frame].checkpoint {
            return Ok(None);
        }
        let chunk = match self.decode(frame) {
            Ok(Frame::Chunk(chunk)) => chunk_data(chunk),
            Ok(_) => return Ok(None),
            Err(why) => return Err(self.damaged(frame, &why)),
        };
        let times = chunk.events.iter().map(|event| event.ts_ns);
        let first_ns = times.clone().min().unwrap_or(0);
        let last_ns = times.max().unwrap_or(0);
        self.frames[frame].span = Some(ChunkSpan {
            first_ns,
            last_ns,
            events: chunk.events.len() as u32,
        });
        Ok(Some(chunk))
    }

    /// Frame `frame`'s checkpoint; `Err` is the sentence saying why it is left out (it
    /// cannot be read, or is not a checkpoint though its header says so).
    pub(crate) fn checkpoint(&self, frame: usize) -> Result<CheckpointFrame, String> {
        match self.decode(frame) {
            Ok(Frame::Checkpoint(checkpoint)) => Ok(checkpoint),
            Ok(_) => Err(self.damaged_checkpoint(frame, "is not a checkpoint")),
            Err(why) => Err(self.damaged_checkpoint(frame, &why)),
        }
    }

    fn damaged_checkpoint(&self, frame: usize, why: &str) -> String {
        format!(
            "checkpoint frame {frame} (at byte {}) {why}: jumps restore an earlier one",
            self.frames[frame].offset
        )
    }
}

/// Reads and decodes the frame at `entry` through `file`; `Err` says why it could not be.
fn decode_at(file: &File, entry: FrameEntry) -> Result<Frame, String> {
    let mut payload = vec![0; entry.length as usize];
    let start = entry.offset + FRAME_HEADER_LEN as u64;
    let mut file = file;
    let read = file
        .seek(SeekFrom::Start(start))
        .and_then(|_| file.read_exact(&mut payload));
    read.map_err(|error| format!("could not be read ({error})"))?;
    decode_payload(&payload, entry.crc).map_err(|why| why.to_string())
}

/// Buckets a recorded window may be cut into at most.
const MAX_WINDOW_BUCKETS: u32 = 1 << 16;

/// Whether a header's statistics options are ones a replay can cut its windows by: a
/// window and at most [`MAX_WINDOW_BUCKETS`] buckets, none shorter than a nanosecond.
fn stats_options_fit(options: StatsOptions) -> bool {
    let window_ns = options.window.as_nanos();
    (1..=MAX_WINDOW_BUCKETS).contains(&options.buckets) && window_ns >= u128::from(options.buckets)
}

fn damaged(frame: usize, entry: FrameEntry, why: &str) -> String {
    format!(
        "frame {frame} (at byte {}) {why}: its events are left out",
        entry.offset
    )
}

/// A decoded chunk with absolute times.
fn chunk_data(chunk: Chunk) -> ChunkData {
    ChunkData {
        events: chunk.events,
        names: chunk.tables.names,
        devices: chunk.tables.devices,
        threads: chunk.tables.threads,
        dropped: chunk.dropped,
        marks: chunk.marks,
        tasks: chunk.tasks,
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::record::tests::{record_synthetic, scratch, Synthetic};

    const OPS: &[(&str, u64)] = &[("idx-gemm", 300), ("idx-relu", 40)];

    fn recorded(name: &str, rounds: u64) -> std::path::PathBuf {
        let path = scratch(name);
        let run = Synthetic {
            worker: "idx-worker",
            ops: OPS,
            rounds,
        };
        record_synthetic(&path, &run);
        path
    }

    #[test]
    fn a_whole_recording_is_indexed_with_its_ends_read() {
        let path = recorded("index-whole", 50);
        let mut index = RecordingIndex::open(&path).unwrap();
        assert!(index.complete, "{:?}", index.losses);
        assert!(index.losses.is_empty(), "{:?}", index.losses);
        assert_eq!(index.info.workload, "synthetic");
        assert!(index.summary.is_some());
        assert_eq!(index.first_ns, Some(1_000_000));
        let (first, last) = (index.first_ns.unwrap(), index.last_ns.unwrap());
        assert!(last > first + 50 * 340_000, "{first} {last}");
        let whole = crate::record::read_recording(&path).unwrap();
        let mut events = 0;
        for frame in 0..index.frames().len() {
            if let Ok(Some(chunk)) = index.chunk(frame) {
                events += chunk.events.len();
            }
        }
        assert_eq!(events, whole.events.len());
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_cut_off_recording_keeps_its_whole_frames_and_says_what_is_lost() {
        let path = recorded("index-cut", 20);
        let bytes = std::fs::read(&path).unwrap();
        let whole = RecordingIndex::open(&path).unwrap().frames().len();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        let index = RecordingIndex::open(&path).unwrap();
        assert_eq!(index.frames().len(), whole - 1);
        assert!(!index.complete);
        let losses = index.losses.join("; ");
        assert!(losses.contains("cut off after byte"), "{losses}");
        assert!(losses.contains("no end frame"), "{losses}");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_corrupt_chunk_is_left_out_and_named_and_not_a_recording_is_refused() {
        let path = recorded("index-corrupt", 20);
        let mut bytes = std::fs::read(&path).unwrap();
        let index = RecordingIndex::open(&path).unwrap();
        let chunk = index.frames()[1];
        let inside = (chunk.offset + FRAME_HEADER_LEN as u64 + 5) as usize;
        bytes[inside] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let mut index = RecordingIndex::open(&path).unwrap();
        let why = index.chunk(1).unwrap_err();
        assert!(why.contains("frame 1") && why.contains("checksum"), "{why}");
        std::fs::write(&path, b"not a recording at all").unwrap();
        let error = RecordingIndex::open(&path).unwrap_err();
        assert!(
            matches!(error, RecordError::NotARecording { .. }),
            "{error}"
        );
        std::fs::remove_file(&path).unwrap();
    }
}
