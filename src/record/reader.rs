//! Reading a recording: the header, then frame after frame until the end frame, the end of
//! the file, or a frame that is not whole.
//!
//! A file that ends early (the run was killed, the disk filled) is read up to its last
//! whole frame, and [`Ending::CutOff`] says where it stopped and what is missing. A frame
//! whose checksum or decoding fails is corruption: an error naming the frame and its byte
//! offset, never a panic. The header's magic and version come first, so a file that is not
//! a recording, or one of another format version, is refused before anything else.
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;

use super::format::{
    decode_payload, unknown_device, Chunk, DeviceEntry, End, Frame, RecordedEvent, RecordingInfo,
    Runs, Tables, CHECKPOINT_BIT, FILE_HEADER_LEN, FORMAT_VERSION, FRAME_HEADER_LEN, MAGIC,
    MAX_FRAME_BYTES,
};
use super::graph::{GraphCalls, GraphShape, OpRun};
use super::RecordError;
use crate::device::identity::Device;
use crate::profiler::{DeviceId, TaskReading};

/// How a recording ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ending {
    /// With its end frame: the whole run.
    Complete,
    /// Before its end frame (the run was killed, or the disk filled): what is here is the
    /// run up to `last_ns`.
    CutOff {
        /// Bytes of whole frames read.
        read_bytes: u64,
        /// Bytes after them: the start of a frame whose rest is missing (0 when the file
        /// ends between frames).
        partial_bytes: u64,
        /// The last event's time (ns since the epoch), if any event was read.
        last_ns: Option<u64>,
    },
}

impl Ending {
    /// Whether the recording has its end frame.
    pub fn is_complete(&self) -> bool {
        matches!(self, Ending::Complete)
    }
}

impl fmt::Display for Ending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ending::Complete => f.write_str("complete"),
            Ending::CutOff {
                read_bytes,
                partial_bytes,
                last_ns,
            } => {
                write!(
                    f,
                    "cut off (the run was stopped before its recording ended)"
                )?;
                match last_ns {
                    Some(last) => write!(f, ": events after {:.6} s", *last as f64 / 1e9)?,
                    None => write!(f, ": every event")?,
                }
                write!(
                    f,
                    ", the thread names' final form and the run's summary are lost"
                )?;
                if *partial_bytes > 0 {
                    write!(
                        f,
                        "; the last {partial_bytes} bytes (a frame cut off after byte \
                         {read_bytes}) were left out"
                    )?;
                }
                Ok(())
            }
        }
    }
}

/// A recording read back: the run's events and what names them.
#[derive(Clone, Debug, Default)]
pub struct Recording {
    /// The run's description (version, workload, configuration at the start).
    pub info: RecordingInfo,
    /// Every event, in the order the collector drained them (by thread, then by time).
    pub events: Vec<RecordedEvent>,
    names: HashMap<u32, String>,
    devices: HashMap<u16, DeviceEntry>,
    threads: HashMap<u32, String>,
    /// Device descriptions by device id.
    pub device_labels: BTreeMap<u16, String>,
    /// The run's summary as JSON text, if the run got to write it.
    pub summary: Option<String>,
    /// Events the profiler dropped (full rings) during the recorded run.
    pub dropped_events: u64,
    /// Events the recorder let go (its writer fell behind).
    pub lost_events: u64,
    /// Whether the recording is whole.
    pub ending: Ending,
    /// The shape of the graph the run's iterations ran (`None`: the run reported none).
    pub graph: Option<GraphShape>,
    /// Which op of which iteration each op id was, as the ops ran.
    pub op_runs: Vec<OpRun>,
    /// Op runs the recorder let go (its writer fell behind).
    pub lost_op_runs: u64,
    /// Every pool worker's exact task counts at the end (empty: none counted, or the
    /// recording was cut off).
    pub(crate) tasks: Vec<TaskReading>,
}

impl Default for Ending {
    fn default() -> Self {
        Ending::CutOff {
            read_bytes: 0,
            partial_bytes: 0,
            last_ns: None,
        }
    }
}

impl Recording {
    /// The text of name `id` (`"unknown"` if the recording has none).
    pub fn name(&self, id: u32) -> &str {
        self.names.get(&id).map_or("unknown", String::as_str)
    }

    /// The name of device `id` (`"unknown"` if the recording has none).
    pub fn device_name(&self, id: u16) -> &str {
        self.devices
            .get(&id)
            .map_or("unknown", |entry| entry.name.as_str())
    }

    /// The typed device that device `id` stands for (`None`: a named device, or one the
    /// recording does not describe).
    pub fn device(&self, id: u16) -> Option<Device> {
        self.devices.get(&id).and_then(|entry| entry.device)
    }

    /// This process's id for device `id`, registered with the name and typed identity the
    /// recording gives it.
    pub(crate) fn device_id(&self, id: u16) -> DeviceId {
        self.devices
            .get(&id)
            .map_or_else(unknown_device, DeviceEntry::register)
    }

    /// The name of thread `id` (`thread-<id>` if the recording has none).
    pub fn thread_name(&self, id: u32) -> String {
        self.threads
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("thread-{id}"))
    }

    /// The device ids the recording names.
    pub fn device_ids(&self) -> impl Iterator<Item = u16> + '_ {
        self.devices.keys().copied()
    }

    /// The thread ids the recording names.
    pub fn thread_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.threads.keys().copied()
    }

    /// The graph that ran, each op run with its times from its events (`None` when the
    /// recording holds no graph).
    pub fn graph_calls(&self) -> Option<GraphCalls> {
        let shape = self.graph.clone()?;
        Some(GraphCalls::join(shape, &self.op_runs, &self.events))
    }

    fn add_runs(&mut self, runs: Runs) {
        self.lost_op_runs = self.lost_op_runs.max(runs.lost);
        self.op_runs.extend(runs.runs);
    }

    fn add_tables(&mut self, tables: Tables) {
        self.names.extend(tables.names);
        self.devices.extend(tables.devices);
        self.threads.extend(tables.threads);
        self.device_labels.extend(tables.device_labels);
    }

    fn add_chunk(&mut self, chunk: Chunk) {
        self.add_tables(chunk.tables);
        self.dropped_events = self.dropped_events.max(chunk.dropped);
        self.lost_events = self.lost_events.max(chunk.lost);
        self.events.extend(chunk.events);
    }

    fn add_end(&mut self, end: End) {
        self.dropped_events = self.dropped_events.max(end.dropped);
        self.lost_events = self.lost_events.max(end.lost);
        self.ending = Ending::Complete;
        self.tasks = end.tasks;
    }
}

/// Reads the recording at `path` (see [`parse_recording`]).
pub fn read_recording(path: impl AsRef<Path>) -> Result<Recording, RecordError> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|source| RecordError::Read {
        path: path.display().to_string(),
        source,
    })?;
    parse_recording(&bytes, &path.display().to_string())
}

/// Reads a recording from its bytes; `path` names it in errors. A file cut off between or
/// inside frames gives what its whole frames hold ([`Ending::CutOff`]); a corrupt one, one
/// of another format version, or one that is not a recording, an error.
pub fn parse_recording(bytes: &[u8], path: &str) -> Result<Recording, RecordError> {
    check_file_header(bytes, path)?;
    let mut recording = Recording::default();
    let mut offset = FILE_HEADER_LEN;
    let mut index = 0u64;
    loop {
        let rest = &bytes[offset..];
        if rest.is_empty() {
            break;
        }
        let corrupt = |why: String| RecordError::Corrupt {
            path: path.to_string(),
            frame: index,
            offset: offset as u64,
            why,
        };
        if recording.ending.is_complete() {
            return Err(corrupt(format!(
                "{} bytes follow the end frame",
                rest.len()
            )));
        }
        let Some(FrameHeader {
            length,
            crc,
            checkpoint,
        }) = frame_header(rest)
        else {
            return Ok(cut_off(recording, offset, rest.len()));
        };
        if length > MAX_FRAME_BYTES {
            let why = format!("declares {length} bytes, more than any recording's frame holds");
            return Err(corrupt(why));
        }
        let Some(payload) = rest.get(FRAME_HEADER_LEN..FRAME_HEADER_LEN + length) else {
            return Ok(cut_off(recording, offset, rest.len()));
        };
        let frame = decode_payload(payload, crc).map_err(|why| corrupt(why.to_string()))?;
        if checkpoint != matches!(frame, Frame::Checkpoint(_)) {
            let why = "has a length word whose checkpoint bit does not match its content";
            return Err(corrupt(why.to_string()));
        }
        match (index, frame) {
            (0, Frame::Header(info)) => recording.info = info,
            (0, _) | (1.., Frame::Header(_)) => {
                let why = "is out of place: a recording has one header frame, first";
                return Err(corrupt(why.to_string()));
            }
            (_, Frame::Chunk(chunk)) => recording.add_chunk(chunk),
            (_, Frame::Tables(tables)) => recording.add_tables(tables),
            (_, Frame::Summary(summary)) => recording.summary = Some(summary),
            (_, Frame::End(end)) => recording.add_end(end),
            (_, Frame::Shape(shape)) => recording.graph = Some(shape),
            (_, Frame::Runs(runs)) => recording.add_runs(runs),
            // The statistics at a point: a replay's, of nothing a whole read needs.
            (_, Frame::Checkpoint(_)) => {}
        }
        offset += FRAME_HEADER_LEN + length;
        index += 1;
    }
    if !recording.ending.is_complete() {
        return Ok(cut_off(recording, offset, 0));
    }
    Ok(recording)
}

pub(super) fn check_file_header(bytes: &[u8], path: &str) -> Result<(), RecordError> {
    let magic = &bytes[..bytes.len().min(MAGIC.len())];
    if bytes.is_empty() || magic != &MAGIC[..magic.len()] {
        return Err(RecordError::NotARecording {
            path: path.to_string(),
        });
    }
    let Some(version) = bytes.get(MAGIC.len()..FILE_HEADER_LEN) else {
        return Err(RecordError::NoHeader {
            path: path.to_string(),
            bytes: bytes.len(),
        });
    };
    let version = u32::from_le_bytes([version[0], version[1], version[2], version[3]]);
    if version != FORMAT_VERSION {
        return Err(RecordError::Version {
            path: path.to_string(),
            found: version,
        });
    }
    Ok(())
}

/// A frame's header: its payload's length and checksum, and whether it says it is a
/// checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FrameHeader {
    pub(super) length: usize,
    pub(super) crc: u32,
    pub(super) checkpoint: bool,
}

/// A frame's header, if `bytes` holds it whole.
pub(super) fn frame_header(bytes: &[u8]) -> Option<FrameHeader> {
    let header = bytes.get(..FRAME_HEADER_LEN)?;
    let word = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
    let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    Some(FrameHeader {
        length: (word & !CHECKPOINT_BIT) as usize,
        crc,
        checkpoint: word & CHECKPOINT_BIT != 0,
    })
}

fn cut_off(mut recording: Recording, read: usize, partial: usize) -> Recording {
    recording.ending = Ending::CutOff {
        read_bytes: read as u64,
        partial_bytes: partial as u64,
        last_ns: recording.events.iter().map(|event| event.ts_ns).max(),
    };
    recording
}
