//! Recordings: every event of a run, streamed to a file while it runs, and read back to
//! export or compare.
//!
//! ```text
//! profiler collector --drained batch--> Sink (EventSink, never blocks) --bounded channel-->
//!     `recorder` thread: chunk -> postcard -> CRC-32 frame -> file            (writer.rs)
//! run driver --GraphObserver (shape once, then each op run)--> Sink --> graph frames (graph.rs)
//! file -> read_recording -> Recording (events + name/device/thread tables)    (reader.rs)
//!      -> export_chrome (the profiler's own exporter)                          (export.rs)
//! file -> export_perfetto: two streaming passes, TracePackets out             (perfetto/)
//!      -> compare                                                              (compare.rs)
//! recorder thread: Stats fed the same events -> checkpoint frames every so many bytes
//!                                                                          (checkpoints.rs)
//! file -> RecordingIndex (frame headers only) -> Replay: Stats at a cursor, from the
//!      checkpoint before it                                    (index.rs, replay.rs)
//! ```
//! The format (`format.rs`, version [`FORMAT_VERSION`]) is a versioned header and
//! self-contained, checksummed frames, so a run killed at any moment leaves a readable prefix
//! and a damaged file a clear error. The recording has its own event type
//! ([`RecordedEvent`]); the profiler's events become it in one place (`convert.rs`).
#![forbid(unsafe_code)]

mod checkpoints;
mod columns;
pub(crate) mod compare;
mod convert;
pub(crate) mod encode_bench;
mod export;
pub(crate) mod format;
pub(crate) mod graph;
pub(crate) mod index;
mod perfetto;
mod reader;
mod replay;
pub(crate) mod replay_bench;
#[cfg(any(test, feature = "test-fakes"))]
pub(crate) mod synthetic;
mod writer;

pub use checkpoints::{CHECKPOINT_BYTES, CHECKPOINT_RATIO};
pub use compare::{
    compare, load_profile, Comparison, ConfigRow, Delta, OpRow, OpTotals, RunProfile,
    RunSummaryLine, WorkerRow,
};
pub use export::export_chrome;
pub use format::{RecordKind, RecordedEvent, RecordingInfo, Setting, FORMAT_VERSION};
pub use graph::{
    load_graph_calls, GraphCalls, GraphDevice, GraphObserver, GraphOp, GraphShape, GraphSource,
    OpCall, OpRun,
};
pub use perfetto::{export_perfetto, PerfettoExport, PerfettoReport};
pub use reader::{parse_recording, read_recording, Ending, Recording};
pub use replay::{OpSearch, Replay, SearchStep, RESTORE_AHEAD_BYTES};
#[cfg(any(test, feature = "test-fakes"))]
pub use synthetic::{compare_table_names, record_compare_pair};
pub use writer::{RecordReport, Recorder};

/// Errors from writing or reading a recording.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The file could not be created or written. The OS error is the source.
    #[error(
        "could not write the recording `{path}` (check that its directory exists and is \
         writable, and that the disk has room)"
    )]
    Write {
        /// Where.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file could not be read. The OS error is the source.
    #[error("could not read the recording `{path}`")]
    Read {
        /// Where.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A frame could not be encoded.
    #[error("could not encode a frame of the recording")]
    Encode(#[source] postcard::Error),
    /// The `recorder` thread (or a thread naming a replayed one) could not be started.
    #[error("could not start a recording thread")]
    Spawn(#[source] std::io::Error),
    /// The `recorder` thread panicked.
    #[error("the `recorder` thread panicked: the recording ends where it stopped")]
    WriterPanicked,
    /// The file does not start with a recording's header.
    #[error(
        "`{path}` is not an enginetop recording (it does not start with one's header): pass a \
         file written by `enginetop --workload NAME --record FILE`"
    )]
    NotARecording {
        /// Which file.
        path: String,
    },
    /// The file ends inside its header.
    #[error(
        "`{path}` is cut off inside its header ({bytes} bytes): it holds no part of a run; \
         record the run again"
    )]
    NoHeader {
        /// Which file.
        path: String,
        /// Its size.
        bytes: usize,
    },
    /// A recording of another format version.
    #[error(
        "`{path}` is a recording of format version {found}, and this enginetop ({}) reads \
         version {}: open it with the enginetop that wrote it, or record the run again",
        env!("CARGO_PKG_VERSION"),
        FORMAT_VERSION
    )]
    Version {
        /// Which file.
        path: String,
        /// Its version.
        found: u32,
    },
    /// A frame whose checksum or decoding fails, or that is out of place.
    #[error(
        "`{path}` is corrupt: frame {frame} (at byte {offset}) {why}; the file was changed \
         after it was written: record the run again"
    )]
    Corrupt {
        /// Which file.
        path: String,
        /// The frame's index (0: the header frame).
        frame: u64,
        /// Its byte offset.
        offset: u64,
        /// What is wrong with it.
        why: String,
    },
    /// A file `compare` reads that is neither a recording nor a Chrome trace.
    #[error(
        "`{path}` is neither an enginetop recording nor a Chrome trace ({why}): pass a file \
         written by `--record FILE` or `--trace FILE`"
    )]
    Unrecognized {
        /// Which file.
        path: String,
        /// Why it is not a trace.
        why: String,
    },
    /// A file `analyze` reads that holds no op graph.
    #[error(
        "`{path}` has no op graph to analyze ({why}): pass a recording written by this \
         enginetop's `--record FILE`, or its Chrome export (`enginetop export FILE --to \
         chrome`); re-record a run recorded without one"
    )]
    NoGraph {
        /// Which file.
        path: String,
        /// What it is instead.
        why: String,
    },
    /// Writing the Chrome export failed. The I/O error is the source.
    #[error("could not write the Chrome trace")]
    Export(#[source] std::io::Error),
    /// Writing the Perfetto export failed. The I/O error is the source.
    #[error("could not write the Perfetto trace")]
    ExportPerfetto(#[source] std::io::Error),
}

#[cfg(all(test, not(loom)))]
pub(crate) mod tests;
