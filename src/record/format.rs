//! The recording's file format: a header, then self-contained, checksummed frames.
//!
//! ```text
//! file   = MAGIC (8 bytes: "ENGTREC\0") | FORMAT_VERSION (u32 LE) | frame*
//! frame  = length word (u32 LE) | CRC-32 of the payload (u32 LE) | payload
//! length word = payload length | CHECKPOINT_BIT when the frame is a checkpoint
//! payload = PLAIN | postcard(Frame)                             (event chunks, op runs)
//!         | LZ4   | lz4 block (uncompressed size prepended) of postcard(Frame) (the rest)
//! ```
//! Every frame decodes on its own: a reader that stops at any frame boundary has read a
//! valid recording of the run up to then, and a frame cut off by a kill is told apart from a
//! corrupt one (its bytes end early; a corrupt one's checksum or decoding fails).
//!
//! The first frame is a header frame (the configuration at the start), the last of a
//! finished recording an end frame. The configuration's changes are the run's
//! `PoolResized` events, recorded with the rest. Event chunks carry the name, device and
//! thread table entries first used in them, so the tables of any prefix cover its events. A
//! device's entry holds its name and its typed identity (`DeviceEntry`), so a replay
//! registers the live run's device, never one made from its name. Times are nanoseconds since the
//! recording process's epoch. A chunk stores its events column by column (module
//! `columns`): each field of every event in turn, times and args as deltas from the event
//! before (zig-zag varints: a byte or two each), every column in postcard's encoding.
//!
//! Event chunks and op runs are postcard alone: its varints already make an event about 10
//! bytes (a tenth of its Chrome JSON) and an op run about 4, and lz4 over them would cost the
//! `recorder` thread about as much again as the encoding, on cores the run's workers
//! need; every other frame (checkpoints above all: large and repetitive) is
//! lz4-compressed. The payload's first byte says which, and the checksum covers it; a reader
//! takes either for any frame.
//!
//! The op graph ([`super::graph`]) comes in two frame kinds: a shape frame (the iteration's
//! ops, their reads, writes, vars and worker pools) when a run starts, and op-run frames
//! (which op of which iteration each engine op id was) beside the event chunks, so any prefix
//! holds the graph of the ops it ran.
//!
//! **Checkpoints** (`CheckpointFrame`) come every so many bytes of frames (module
//! `checkpoints`): the statistics fed with every chunk before them, so a replay jumps to any
//! moment by restoring the latest checkpoint before it and feeding at most one checkpoint
//! interval of events. Their length word carries `CHECKPOINT_BIT`, so the index finds
//! them from the frame headers alone. A chunk also carries its **marks**: what the live
//! statistics took among its events that is not an event (a ring's gap, a thread's exit,
//! a reset of the statistics), so a replay takes them too and ends where the live
//! statistics (and the checkpoints taken from them) are; and the pool workers' exact task
//! counts after its last round, so a replay shows exact counts where task events were
//! sampled. Files of earlier versions are refused with the version error.
#![forbid(unsafe_code)]

use serde::{Deserialize, Serialize};

use crate::config::RuntimeConfig;
use crate::device::identity::Device;
use crate::profiler::clock::Epoch;
use crate::profiler::{DeviceId, StatsOptions, TaskReading};

use super::graph::{GraphShape, OpRun};

/// The first bytes of every recording.
pub(crate) const MAGIC: [u8; 8] = *b"ENGTREC\0";
/// The format this build writes and reads; bumped whenever a frame changes.
pub const FORMAT_VERSION: u32 = 8;
/// Bytes before the first frame (magic and version).
pub(crate) const FILE_HEADER_LEN: usize = MAGIC.len() + 4;
/// Bytes before each frame's payload (length and checksum).
pub(crate) const FRAME_HEADER_LEN: usize = 8;
/// The largest payload a frame may have (compressed or not): a larger length is corruption.
pub(crate) const MAX_FRAME_BYTES: usize = 256 << 20;
/// The length word's bit that marks a checkpoint frame (above any length a frame may have).
pub(crate) const CHECKPOINT_BIT: u32 = 1 << 31;
/// A payload's first byte: postcard follows as it is.
const PLAIN: u8 = 0;
/// A payload's first byte: an lz4 block of postcard follows.
const LZ4: u8 = 1;

/// One setting of the run's configuration (`inter` = `2`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Setting {
    /// Its name.
    pub key: String,
    /// Its value, as shown to people.
    pub value: String,
}

impl Setting {
    /// `key` = `value`.
    pub fn new(key: impl Into<String>, value: impl ToString) -> Self {
        Setting {
            key: key.into(),
            value: value.to_string(),
        }
    }
}

/// What a recording says about its run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordingInfo {
    /// The enginetop version that wrote it.
    pub enginetop: String,
    /// When the process's clock epoch was, in ns since the Unix epoch.
    pub epoch_unix_ns: i64,
    /// The workload's name.
    pub workload: String,
    /// The configuration at the start.
    pub settings: Vec<Setting>,
    /// How the live statistics cut their windows: the replay's statistics cut them the
    /// same way, so that the live run's checkpoints restore into them.
    pub stats: StatsOptions,
}

impl RecordingInfo {
    /// What a run of `workload` under `config` records about itself: this build's version,
    /// the clock's epoch, and the configuration with its thread counts resolved.
    pub fn for_run(workload: &str, config: &RuntimeConfig) -> Self {
        let threads = config.resolved();
        let workers = config.resolved_engine_workers();
        let settings = vec![
            Setting::new("engine", config.engine_kind),
            Setting::new("pool", config.pool_kind),
            Setting::new("inter", threads.inter_op),
            Setting::new("intra", threads.intra_op),
            Setting::new("cpu priority workers", workers.cpu_priority),
            Setting::new("gpus", config.gpus),
            Setting::new("gpu workers", workers.gpu),
            Setting::new("gpu copy workers", workers.gpu_copy),
            Setting::new("gpu sync", config.gpu_sync),
            Setting::new("spin", if config.allow_spinning { "on" } else { "off" }),
            Setting::new("max threads", config.max_threads),
        ];
        RecordingInfo {
            enginetop: env!("CARGO_PKG_VERSION").to_string(),
            epoch_unix_ns: Epoch::get().wall_at(0).timestamp_nanos_opt().unwrap_or(0),
            workload: workload.to_string(),
            settings,
            stats: StatsOptions::default(),
        }
    }
}

/// What happened: the profiler's event kinds, as the file spells them (in the same order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[repr(u8)]
pub enum RecordKind {
    /// An op was put on a device queue.
    OpQueued,
    /// An op started.
    OpStart,
    /// An op ended.
    OpEnd,
    /// A pool task started.
    TaskStart,
    /// A pool task ended.
    TaskEnd,
    /// A steal.
    Steal,
    /// A worker began spinning.
    SpinStart,
    /// It stopped spinning.
    SpinEnd,
    /// A worker parked.
    Park,
    /// A worker woke.
    Unpark,
    /// A pool was resized.
    PoolResized,
    /// A queue depth sample.
    QueueDepth,
    /// A GPU op was submitted to a stream.
    StreamSubmit,
    /// It started on its stream.
    StreamStart,
    /// It ended on its stream.
    StreamEnd,
    /// A `tracing` span was entered.
    SpanEnter,
    /// It was exited.
    SpanExit,
}

/// One recorded event, with its absolute time. The ids index the recording's tables
/// ([`Recording::name`](super::Recording::name) and friends); `aux`, `arg` and `flags` mean
/// what the profiler's event table says for the kind.
///
/// Its fields lie as the profiler's [`Event`](crate::profiler::Event)'s do (`repr(C)`, the
/// same order, and kinds numbered alike), so the recorder's conversion of each event is a
/// copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct RecordedEvent {
    /// Nanoseconds since the recording process's epoch.
    pub ts_ns: u64,
    /// The main argument (op id, victim, depth, workers after a resize).
    pub arg: u64,
    /// The name's id in the name table.
    pub name: u32,
    /// The recording thread's id in the recording's thread table.
    pub thread: u32,
    /// The small argument (worker, stream, priority, workers before a resize).
    pub aux: u32,
    /// The device's id in the device table.
    pub device: u16,
    /// What happened.
    pub kind: RecordKind,
    /// The error bit and op property.
    pub flags: u8,
}

/// Table entries: ids and what they stand for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Tables {
    pub(crate) names: Vec<(u32, String)>,
    pub(crate) devices: Vec<(u16, DeviceEntry)>,
    pub(crate) threads: Vec<(u32, String)>,
    pub(crate) device_labels: Vec<(u16, String)>,
}

/// A device as the recording describes it: what the live registry held for its id, so a
/// replay registers the same device ([`DeviceId::restore`]), typed identity and all.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct DeviceEntry {
    /// The name it is shown by (`gpu0`, `cpu-prio`, a demo's own).
    pub(crate) name: String,
    /// The typed device it stands for (`None`: a named device).
    pub(crate) device: Option<Device>,
}

impl DeviceEntry {
    /// What the live registry holds for `id`.
    pub(crate) fn of(id: DeviceId) -> DeviceEntry {
        DeviceEntry {
            name: id.name().to_string(),
            device: id.device(),
        }
    }

    /// This process's id for it, registered on first use.
    pub(crate) fn register(&self) -> DeviceId {
        DeviceId::restore(&self.name, self.device)
    }
}

/// The device an event names whose id the recording's tables do not describe (a damaged
/// or synthetic recording): a named device, shown as `unknown`.
pub(crate) fn unknown_device() -> DeviceId {
    DeviceId::register("unknown")
}

/// A run of events and the table entries they use first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Chunk {
    pub(crate) tables: Tables,
    /// Events the profiler had dropped by the end of this chunk (full rings).
    pub(crate) dropped: u64,
    /// Events the recorder had let go by the end of this chunk (its writer fell behind).
    pub(crate) lost: u64,
    /// Its events, column by column on the wire (module `columns`).
    #[serde(with = "super::columns::events")]
    pub(crate) events: Vec<RecordedEvent>,
    /// What the live statistics took between the events besides them, in order.
    pub(crate) marks: Vec<Mark>,
    /// Every counted thread's exact pool task counts after the chunk's last round: a
    /// replay's snapshot puts them in, as the live one put the counters in.
    pub(crate) tasks: Vec<TaskReading>,
}

/// Something the live statistics took among a chunk's events that is not an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Mark {
    /// After the chunk's first `at` events, `thread`'s ring dropped events after its last
    /// one then (`last_ns`, when the batch held one).
    Lost {
        at: u32,
        thread: u32,
        last_ns: Option<u64>,
    },
    /// After the chunk's first `at` events, `thread`'s ring closed; it was marked exited at
    /// `ts_ns`.
    Exited { at: u32, thread: u32, ts_ns: u64 },
    /// After the chunk's first `at` events, the statistics were reset (the dashboard's `r`)
    /// at `ts_ns`.
    Reset { at: u32, ts_ns: u64 },
}

impl Mark {
    /// The events of the chunk before it.
    pub(crate) fn at(self) -> usize {
        match self {
            Mark::Lost { at, .. } | Mark::Exited { at, .. } | Mark::Reset { at, .. } => at as usize,
        }
    }

    /// The time it counts at: a replay up to a moment applies the marks at or before it,
    /// as it feeds the events at or before it.
    pub(crate) fn ts_ns(self) -> u64 {
        match self {
            Mark::Lost { last_ns, .. } => last_ns.unwrap_or(0),
            Mark::Exited { ts_ns, .. } | Mark::Reset { ts_ns, .. } => ts_ns,
        }
    }
}

/// The last frame of a finished recording.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct End {
    pub(crate) events: u64,
    pub(crate) dropped: u64,
    pub(crate) lost: u64,
    /// Every pool worker's exact task counts at the end: where task events were sampled,
    /// the replay's and compare's task figures are these, as the live run's were.
    pub(crate) tasks: Vec<TaskReading>,
}

/// One frame's content. New kinds go at the end, with [`FORMAT_VERSION`] bumped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Frame {
    Header(RecordingInfo),
    Chunk(Chunk),
    /// Table entries that changed (threads renamed, devices described) at the end.
    Tables(Tables),
    /// The run's summary, as JSON text.
    Summary(String),
    End(End),
    /// The shape of the graph a run's iterations run.
    Shape(GraphShape),
    /// Op runs: which op of which iteration each engine op id was.
    Runs(Runs),
    /// The statistics at this point of the file.
    Checkpoint(CheckpointFrame),
}

/// The replay's state after every chunk before it: what a jump restores.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CheckpointFrame {
    /// The latest event time of those chunks (0: none).
    pub(crate) reach_ns: u64,
    /// Every name, device and thread those chunks use, in order of first use.
    pub(crate) tables: Tables,
    /// The statistics fed with them ([`Stats`](crate::profiler::Stats), postcard), with the
    /// recording's ids.
    #[serde(with = "byte_vec")]
    pub(crate) stats: Vec<u8>,
    /// The exact pool task counts of the chunk before it.
    pub(crate) tasks: Vec<TaskReading>,
}

/// A batch of op runs, in op id order (the engine numbers its pushes in order, so each op
/// id and iteration is a small delta from the one before: module `columns`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Runs {
    /// Op runs the recorder had let go by the end of this frame (its writer fell behind).
    pub(crate) lost: u64,
    #[serde(with = "super::columns::runs")]
    pub(crate) runs: Vec<OpRun>,
}

/// A byte vector as serde bytes. In postcard these are the bytes of a sequence of `u8` (its
/// length, then each byte as it is), written in one copy rather than a call a byte.
mod byte_vec {
    use serde::de::{Deserializer, Error, Visitor};
    use serde::Serializer;

    pub(super) fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(bytes)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<u8>, D::Error> {
        deserializer.deserialize_byte_buf(Bytes)
    }

    struct Bytes;

    impl<'de> Visitor<'de> for Bytes {
        type Value = Vec<u8>;

        fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
            formatter.write_str("bytes")
        }

        fn visit_bytes<E: Error>(self, bytes: &[u8]) -> Result<Vec<u8>, E> {
            Ok(bytes.to_vec())
        }

        fn visit_byte_buf<E: Error>(self, bytes: Vec<u8>) -> Result<Vec<u8>, E> {
            Ok(bytes)
        }
    }
}

/// The bytes of the file's header.
pub(crate) fn file_header() -> [u8; FILE_HEADER_LEN] {
    let mut header = [0; FILE_HEADER_LEN];
    header[..MAGIC.len()].copy_from_slice(&MAGIC);
    header[MAGIC.len()..].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    header
}

/// `frame` as the bytes of a whole frame (header and payload).
pub(crate) fn encode_frame(frame: &Frame) -> Result<Vec<u8>, postcard::Error> {
    let mut encoder = FrameEncoder::default();
    encoder.encode(frame)?;
    Ok(encoder.bytes)
}

/// Encodes frames into buffers it keeps from one frame to the next, so a writer's frames
/// allocate nothing once the buffers hold its largest frame (which they keep).
#[derive(Debug, Default)]
pub(crate) struct FrameEncoder {
    /// The latest frame's bytes.
    bytes: Vec<u8>,
    /// An lz4 frame's postcard, before compression.
    plain: Vec<u8>,
}

impl FrameEncoder {
    /// `frame` as the bytes of a whole frame (header and payload), until the next call.
    pub(crate) fn encode(&mut self, frame: &Frame) -> Result<&[u8], postcard::Error> {
        let mut bytes = std::mem::take(&mut self.bytes);
        bytes.clear();
        bytes.resize(FRAME_HEADER_LEN, 0);
        match frame {
            Frame::Chunk(_) | Frame::Runs(_) => {
                bytes.push(PLAIN);
                bytes = postcard::to_extend(frame, bytes)?;
            }
            _ => {
                bytes.push(LZ4);
                let mut plain = std::mem::take(&mut self.plain);
                plain.clear();
                let plain = postcard::to_extend(frame, plain)?;
                // lz4_flex's `compress_prepend_size`: the size (u32 LE), then the block.
                bytes.extend_from_slice(&(plain.len() as u32).to_le_bytes());
                let at = bytes.len();
                bytes.resize(
                    at + lz4_flex::block::get_maximum_output_size(plain.len()),
                    0,
                );
                let written = lz4_flex::block::compress_into(&plain, &mut bytes[at..])
                    .map_err(|_| postcard::Error::SerializeBufferFull)?;
                bytes.truncate(at + written);
                self.plain = plain;
            }
        }
        let payload = &bytes[FRAME_HEADER_LEN..];
        let length = u32::try_from(payload.len())
            .ok()
            .filter(|&length| length as usize <= MAX_FRAME_BYTES)
            .ok_or(postcard::Error::SerializeBufferFull)?;
        let length = match frame {
            Frame::Checkpoint(_) => length | CHECKPOINT_BIT,
            _ => length,
        };
        let crc = crc32fast::hash(payload);
        bytes[..4].copy_from_slice(&length.to_le_bytes());
        bytes[4..FRAME_HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
        self.bytes = bytes;
        Ok(&self.bytes)
    }
}

/// Why a frame's payload could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PayloadError {
    #[error("its checksum does not match its bytes")]
    Checksum,
    #[error("it does not decompress: {0}")]
    Decompress(#[from] lz4_flex::block::DecompressError),
    #[error("it does not decode: {0}")]
    Decode(#[from] postcard::Error),
    #[error("its encoding tag {0} is none this version writes")]
    Tag(u8),
}

/// Decodes a frame's payload whose checksum is `crc`.
pub(crate) fn decode_payload(payload: &[u8], crc: u32) -> Result<Frame, PayloadError> {
    if crc32fast::hash(payload) != crc {
        return Err(PayloadError::Checksum);
    }
    let (&tag, body) = payload.split_first().ok_or(PayloadError::Decode(
        postcard::Error::DeserializeUnexpectedEnd,
    ))?;
    match tag {
        PLAIN => Ok(postcard::from_bytes(body)?),
        LZ4 => {
            let size = body.get(..4).map_or(0, |head| {
                u32::from_le_bytes([head[0], head[1], head[2], head[3]])
            });
            if size as usize > MAX_FRAME_BYTES {
                return Err(PayloadError::Decode(
                    postcard::Error::DeserializeBadEncoding,
                ));
            }
            let plain = lz4_flex::block::decompress_size_prepended(body)?;
            Ok(postcard::from_bytes(&plain)?)
        }
        other => Err(PayloadError::Tag(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `frame` encoded on a thread of its own: by an encoder and column buffer never used.
    fn fresh(frame: &Frame) -> Vec<u8> {
        let frame = frame.clone();
        std::thread::spawn(move || encode_frame(&frame).unwrap())
            .join()
            .unwrap()
    }

    fn chunk(count: u64) -> Frame {
        let events = (0..count)
            .map(|at| RecordedEvent {
                ts_ns: at * at * 7_919,
                kind: RecordKind::OpEnd,
                thread: (at % 5) as u32,
                device: (at % 3) as u16,
                name: (at * 31 % 1_000) as u32,
                aux: at as u32,
                arg: u64::MAX - at * 104_729,
                flags: at as u8,
            })
            .collect();
        Frame::Chunk(Chunk {
            events,
            ..Chunk::default()
        })
    }

    fn checkpoint(bytes: usize) -> Frame {
        Frame::Checkpoint(CheckpointFrame {
            reach_ns: bytes as u64,
            stats: (0..bytes).map(|at| (at * at % 251) as u8).collect(),
            ..CheckpointFrame::default()
        })
    }

    /// A checkpoint's statistics are written as bytes: what postcard writes for the same
    /// `Vec<u8>` as a sequence, so either reads the other's frames.
    #[test]
    fn checkpoint_statistics_are_postcard_of_a_byte_sequence() {
        let Frame::Checkpoint(frame) = checkpoint(1_000) else {
            unreachable!()
        };
        let as_sequence = (
            frame.reach_ns,
            &frame.tables,
            frame.stats.clone(),
            &frame.tasks,
        );
        let bytes = postcard::to_stdvec(&frame).unwrap();
        assert_eq!(bytes, postcard::to_stdvec(&as_sequence).unwrap());
        assert_eq!(
            postcard::from_bytes::<CheckpointFrame>(&bytes).unwrap(),
            frame
        );
    }

    /// An encoder (and the thread's column buffer) reused from larger frames to smaller ones
    /// of every encoding writes each exactly as a fresh one does, and the lz4 frames hold
    /// lz4_flex's `compress_prepend_size` of their postcard.
    #[test]
    fn a_reused_encoder_writes_the_bytes_of_a_fresh_one() {
        let runs = |count: u64| {
            let runs = (0..count)
                .map(|at| OpRun {
                    op_id: at * 3,
                    iteration: at / 7,
                    index: (at % 11) as u32,
                })
                .collect();
            Frame::Runs(Runs { lost: 1, runs })
        };
        let frames = [
            chunk(5_000),
            checkpoint(300_000),
            runs(2_000),
            chunk(3),
            checkpoint(10),
            runs(1),
            Frame::End(End::default()),
            chunk(0),
        ];
        let mut encoder = FrameEncoder::default();
        for frame in &frames {
            let bytes = encoder.encode(frame).unwrap().to_vec();
            assert_eq!(bytes, fresh(frame), "{frame:?}");
            let payload = &bytes[FRAME_HEADER_LEN..];
            let crc = u32::from_le_bytes(bytes[4..FRAME_HEADER_LEN].try_into().unwrap());
            assert_eq!(&decode_payload(payload, crc).unwrap(), frame);
            if payload[0] == LZ4 {
                let plain = postcard::to_stdvec(frame).unwrap();
                assert_eq!(
                    payload[1..],
                    lz4_flex::block::compress_prepend_size(&plain)[..]
                );
            }
        }
    }
}
