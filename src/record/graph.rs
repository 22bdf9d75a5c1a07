//! The op graph a run ran, as a recording and our Chrome export carry it: the iteration's
//! ops with their reads and writes ([`GraphShape`], once per run), and which op each run of
//! an op body was ([`OpRun`], streamed with the events).
//!
//! # Where the graph comes from
//! The workload's run driver reports it ([`GraphObserver`], a hook of its run). The driver
//! alone knows what an op *is* across iterations (op `k` of the iteration, whatever its
//! iteration), the names of its vars (the workload's tensors: `buf0`, `buf1`) and its worker
//! pool; the engine knows anonymous var numbers and one id per push, and the profiler's
//! events are small fixed records with no room for lists. So the driver sends the shape once
//! when a run starts, and each op body, as it runs, sends its op id (the engine's, as the
//! op's `OpQueued`/`OpStart`/`OpEnd` events carry it in `arg`), its iteration and its index:
//! one call per op run, and none at all when no observer is hooked (a run that is neither
//! recorded nor exported pays one branch).
//!
//! # Joining it to the events
//! [`GraphCalls::join`] pairs each [`OpRun`] with its op's `OpStart` and `OpEnd` events (by
//! op id): the op's time on its worker as the events measured it. A run with no events (the
//! recording was cut off, or the profiler dropped them) is left out and counted.
//!
//! # Reading them one frame at a time
//! A replay reads a recording by its index, frame by frame, and never whole: [`GraphFrames`]
//! reads the one frame it is asked for and keeps it if it is a shape or an op-run frame
//! (the dashboard's op detail asks for those beside the chunks the replay has read).
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::device::identity::Lane;

use super::format::{decode_payload, Frame, RecordKind, RecordedEvent, FRAME_HEADER_LEN, MAGIC};
use super::index::FrameEntry;
use super::reader::frame_header;
use super::{parse_recording, RecordError};

/// One iteration's ops, their vars and their worker pools: the graph without times.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphShape {
    /// Var names, by index (the workload's tensor names).
    pub vars: Vec<String>,
    /// Worker pools, by index.
    pub devices: Vec<GraphDevice>,
    /// The iteration's ops, in push order.
    pub ops: Vec<GraphOp>,
    /// The thread counts at the start, as verdicts name them (`2 inter x 1 intra`).
    pub threads: String,
}

/// A worker pool the iteration's ops run on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphDevice {
    /// Which pool.
    pub lane: Lane,
    /// Its workers when the run started.
    pub workers: u32,
}

/// One op of the iteration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphOp {
    /// Its name.
    pub name: String,
    /// Its worker pool (index into [`GraphShape::devices`]).
    pub device: u32,
    /// Vars it reads, read-modify-write ones included (indices into [`GraphShape::vars`]).
    pub reads: Vec<u32>,
    /// Vars it writes.
    pub writes: Vec<u32>,
}

#[cfg(test)]
impl GraphOp {
    /// Op `name` on the graph's first worker pool, reading `reads` and writing `writes`: the
    /// tests' graphs are built of it.
    pub(crate) fn on_first_pool(name: &str, reads: &[u32], writes: &[u32]) -> GraphOp {
        GraphOp {
            name: name.to_string(),
            device: 0,
            reads: reads.to_vec(),
            writes: writes.to_vec(),
        }
    }
}

/// One run of an op body: which op of which iteration the engine's op `op_id` was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OpRun {
    /// The engine's op id (the `arg` of the op's events).
    pub op_id: u64,
    /// The iteration (counted from the run's first).
    pub iteration: u64,
    /// The op's index in [`GraphShape::ops`].
    pub index: u32,
}

/// Receives a run's graph: the shape when a run starts, then each op run. Called on the
/// driver thread (`shape`) and on workers (`ran`): it must be quick and never block.
pub trait GraphObserver: Send + Sync {
    /// A run of `shape`'s iterations starts.
    fn shape(&self, shape: &GraphShape);
    /// An op body ran (called from the body, before its op ends).
    fn ran(&self, run: OpRun);
}

/// An op run with its times (ns since the recording process's epoch).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpCall {
    /// Which op of which iteration.
    #[serde(flatten)]
    pub run: OpRun,
    /// Its `OpStart`.
    pub start_ns: u64,
    /// Its `OpEnd`.
    pub end_ns: u64,
}

/// The graph that ran with each op run's times: what `enginetop analyze` rebuilds the
/// analysis from, and what our Chrome export writes as `otherData.graph`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphCalls {
    /// The iteration's shape.
    pub shape: GraphShape,
    /// Every op run whose start and end were recorded, in start order.
    pub calls: Vec<OpCall>,
    /// Op runs left out: their events were not recorded (dropped, lost or cut off).
    pub unmatched: u64,
}

impl GraphCalls {
    /// Whether every index points into the shape and every call ends after it starts:
    /// what the analysis may rely on.
    pub fn check(&self) -> Result<(), String> {
        let shape = &self.shape;
        let (ops, vars, devices) = (shape.ops.len(), shape.vars.len(), shape.devices.len());
        for (index, op) in shape.ops.iter().enumerate() {
            if op.device as usize >= devices {
                return Err(format!(
                    "its op {index} names pool {} of {devices}",
                    op.device
                ));
            }
            if let Some(var) = op
                .reads
                .iter()
                .chain(&op.writes)
                .find(|&&var| var as usize >= vars)
            {
                return Err(format!("its op {index} names var {var} of {vars}"));
            }
        }
        match self
            .calls
            .iter()
            .find(|call| call.run.index as usize >= ops || call.end_ns < call.start_ns)
        {
            Some(call) => Err(format!(
                "its op run {} is of op {} of {ops}, from {} to {} ns",
                call.run.op_id, call.run.index, call.start_ns, call.end_ns
            )),
            None => Ok(()),
        }
    }

    /// `runs` of `shape`'s ops joined with their start and end among `events`.
    pub fn join(shape: GraphShape, runs: &[OpRun], events: &[RecordedEvent]) -> GraphCalls {
        let mut times: HashMap<u64, (Option<u64>, Option<u64>)> = HashMap::new();
        for event in events {
            let slot = match event.kind {
                RecordKind::OpStart => &mut times.entry(event.arg).or_default().0,
                RecordKind::OpEnd => &mut times.entry(event.arg).or_default().1,
                _ => continue,
            };
            *slot = Some(event.ts_ns);
        }
        let ops = shape.ops.len();
        let mut calls: Vec<OpCall> = runs
            .iter()
            .filter(|run| (run.index as usize) < ops)
            .filter_map(|run| match times.get(&run.op_id) {
                Some(&(Some(start_ns), Some(end_ns))) if end_ns >= start_ns => Some(OpCall {
                    run: *run,
                    start_ns,
                    end_ns,
                }),
                _ => None,
            })
            .collect();
        calls.sort_by_key(|call| (call.start_ns, call.run.op_id));
        let unmatched = (runs.len() - calls.len()) as u64;
        GraphCalls {
            shape,
            calls,
            unmatched,
        }
    }
}

/// The graph that ran and its op runs' times, from a recording or from our Chrome export of
/// one (its `otherData.graph`).
pub fn load_graph_calls(path: impl AsRef<Path>) -> Result<(GraphCalls, GraphSource), RecordError> {
    let path = path.as_ref();
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| RecordError::Read {
        path: name.clone(),
        source,
    })?;
    let no_graph = |why: &str| RecordError::NoGraph {
        path: name.clone(),
        why: why.to_string(),
    };
    if bytes.starts_with(&MAGIC) {
        let recording = parse_recording(&bytes, &name)?;
        let calls = recording
            .graph_calls()
            .ok_or_else(|| no_graph("a recording of a run that reported no graph"))?;
        calls.check().map_err(|why| no_graph(&why))?;
        let source = GraphSource::Recording {
            cut_off: (!recording.ending.is_complete()).then(|| recording.ending.to_string()),
        };
        return Ok((calls, source));
    }
    let trace: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|_| no_graph("neither a recording nor JSON"))?;
    if trace.get("traceEvents").is_none() {
        return Err(no_graph("JSON, but not a Chrome trace: no `traceEvents`"));
    }
    let graph = trace
        .get("otherData")
        .and_then(|other| other.get("graph"))
        .ok_or_else(|| {
            no_graph("a Chrome trace without `otherData.graph`: `--trace` writes none")
        })?;
    let calls = GraphCalls::deserialize(graph)
        .map_err(|error| no_graph(&format!("its `otherData.graph` does not read: {error}")))?;
    calls.check().map_err(|why| no_graph(&why))?;
    Ok((calls, GraphSource::ChromeTrace))
}

/// A graph frame of a recording: its shape, or a batch of op runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum GraphFrame {
    /// The iteration's ops, vars and pools (once a run starts).
    Shape(GraphShape),
    /// Which op of which iteration each of these engine op ids was.
    Runs(Vec<OpRun>),
}

/// A recording's graph frames, read one at a time by their index entries (see the module
/// docs).
#[derive(Debug)]
pub(crate) struct GraphFrames {
    file: File,
}

impl GraphFrames {
    /// Opens the recording at `path` (its index has checked the file header).
    pub(crate) fn open(path: impl AsRef<Path>) -> Result<GraphFrames, RecordError> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|source| RecordError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Ok(GraphFrames { file })
    }

    /// The frame at `entry` if it is a graph frame (`Ok(None)`: another kind); `Err` says
    /// why it could not be read.
    pub(crate) fn read(&mut self, entry: &FrameEntry) -> Result<Option<GraphFrame>, String> {
        let mut header = [0u8; FRAME_HEADER_LEN];
        self.file
            .seek(SeekFrom::Start(entry.offset))
            .and_then(|_| self.file.read_exact(&mut header))
            .map_err(|error| format!("could not be read ({error})"))?;
        let header = frame_header(&header).ok_or("has no header")?;
        if header.checkpoint {
            return Ok(None);
        }
        let (length, crc) = (header.length, header.crc);
        if length != entry.length as usize {
            return Err(format!(
                "declares {length} bytes where the index has {}",
                entry.length
            ));
        }
        let mut payload = vec![0; length];
        self.file
            .read_exact(&mut payload)
            .map_err(|error| format!("could not be read ({error})"))?;
        match decode_payload(&payload, crc).map_err(|why| why.to_string())? {
            Frame::Shape(shape) => Ok(Some(GraphFrame::Shape(shape))),
            Frame::Runs(runs) => Ok(Some(GraphFrame::Runs(runs.runs))),
            _ => Ok(None),
        }
    }
}

/// What [`load_graph_calls`] read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GraphSource {
    /// A recording; `cut_off` says what a cut-off one lacks.
    Recording {
        /// How it ends, when it does not end whole.
        cut_off: Option<String>,
    },
    /// Our Chrome export of a recording.
    ChromeTrace,
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::profiler::{DeviceId, OpInfo, OpName, Profiler, ProfilerOptions};
    use crate::record::{Recorder, RecordingInfo};

    /// Two ops (`g-load` writes `buf`, `g-use` reads it) on one pool.
    fn shape() -> GraphShape {
        let op = GraphOp::on_first_pool;
        GraphShape {
            vars: vec!["buf".to_string()],
            devices: vec![GraphDevice {
                lane: Lane::CpuWorkers(0),
                workers: 2,
            }],
            ops: vec![op("g-load", &[], &[0]), op("g-use", &[0], &[])],
            threads: "2 inter x 1 intra".to_string(),
        }
    }

    /// Records `iterations` of [`shape`]'s ops (op ids from 1), reporting the graph when
    /// `with_graph`; returns the file's bytes.
    fn record(name: &str, iterations: u64, with_graph: bool) -> Vec<u8> {
        let path = crate::record::tests::scratch(name);
        let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
        let recorder = Recorder::start(&path, &profiler, RecordingInfo::default()).unwrap();
        let observer = recorder.graph_observer();
        if with_graph {
            observer.shape(&shape());
        }
        let device = DeviceId::register("graph-cpu");
        let names = [OpName::new("g-load"), OpName::new("g-use")];
        for iteration in 0..iterations {
            for (index, name) in names.into_iter().enumerate() {
                let op_id = 1 + iteration * 2 + index as u64;
                profiler.op_start(device, name, OpInfo::new(op_id));
                if with_graph {
                    let index = index as u32;
                    observer.ran(OpRun {
                        op_id,
                        iteration,
                        index,
                    });
                }
                profiler.op_end(device, name, OpInfo::new(op_id), false);
            }
        }
        recorder.finish(&profiler, None).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        bytes
    }

    #[test]
    fn a_recording_keeps_the_graph_and_which_op_each_op_id_was() {
        let bytes = record("graph-round-trip", 3, true);
        let recording = parse_recording(&bytes, "g.etrec").unwrap();
        assert_eq!(recording.graph, Some(shape()));
        let calls = recording.graph_calls().unwrap();
        assert_eq!(calls.unmatched, 0);
        let found: Vec<(u64, u64, u32)> = calls
            .calls
            .iter()
            .map(|call| (call.run.op_id, call.run.iteration, call.run.index))
            .collect();
        assert_eq!(
            found,
            [
                (1, 0, 0),
                (2, 0, 1),
                (3, 1, 0),
                (4, 1, 1),
                (5, 2, 0),
                (6, 2, 1)
            ]
        );
        for call in &calls.calls {
            let start = recording
                .events
                .iter()
                .find(|event| event.kind == RecordKind::OpStart && event.arg == call.run.op_id);
            assert_eq!(start.map(|event| event.ts_ns), Some(call.start_ns));
        }
        let json = serde_json::to_value(&calls).unwrap();
        assert_eq!(
            GraphCalls::deserialize(&json).unwrap(),
            calls,
            "JSON round trip"
        );
    }

    /// A run whose shape equals the one before it (a driver's next run with the same
    /// settings) adds no shape frame; a changed shape does.
    #[test]
    fn a_shape_is_written_again_only_when_it_changed() {
        let path = crate::record::tests::scratch("graph-shapes");
        let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
        let recorder = Recorder::start(&path, &profiler, RecordingInfo::default()).unwrap();
        let observer = recorder.graph_observer();
        let (device, name) = (DeviceId::register("graph-cpu"), OpName::new("g-load"));
        let mut wider = shape();
        wider.devices[0].workers = 3;
        for (op_id, shape) in [shape(), shape(), wider.clone(), wider, shape()]
            .iter()
            .enumerate()
        {
            observer.shape(shape);
            // A round takes the shape to the writer.
            profiler.op_start(device, name, OpInfo::new(op_id as u64));
            profiler.flush();
            recorder.settle();
        }
        recorder.finish(&profiler, None).unwrap();
        let index = crate::record::index::RecordingIndex::open(&path).unwrap();
        let mut frames = GraphFrames::open(&path).unwrap();
        let written: Vec<_> = index
            .frames()
            .iter()
            .filter_map(|entry| match frames.read(entry) {
                Ok(Some(GraphFrame::Shape(shape))) => Some(shape.devices[0].workers),
                _ => None,
            })
            .collect();
        assert_eq!(written, [2, 3, 2]);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_cut_off_recording_keeps_the_graph_of_its_prefix() {
        let bytes = record("graph-cut", 2, true);
        // Drop the end, summary and tables frames and the last runs: the shape stays.
        let mut with_graph = 0;
        for cut in (bytes.len() / 2..bytes.len()).step_by(7) {
            let recording = parse_recording(&bytes[..cut], "g.etrec").unwrap();
            assert!(!recording.ending.is_complete());
            if let Some(calls) = recording.graph_calls() {
                assert!(calls.check().is_ok());
                assert!(calls.calls.len() <= 4);
                with_graph += 1;
            }
        }
        assert!(with_graph > 0, "no prefix held the graph");
    }

    #[test]
    fn a_file_without_a_graph_names_the_fix() {
        let dir = std::env::temp_dir();
        let path = dir.join(format!("enginetop-graph-none-{}.etrec", std::process::id()));
        std::fs::write(&path, record("graph-none", 1, false)).unwrap();
        let message = load_graph_calls(&path).unwrap_err().to_string();
        assert!(
            message.contains("no op graph") && message.contains("--record FILE"),
            "{message}"
        );
        let mut old = record("graph-old", 1, true);
        old[MAGIC.len()] = 1; // a version 1 file: no graph frames
        std::fs::write(&path, old).unwrap();
        let message = load_graph_calls(&path).unwrap_err().to_string();
        assert!(message.contains("format version 1"), "{message}");
        std::fs::write(&path, br#"{"traceEvents":[],"otherData":{}}"#).unwrap();
        let message = load_graph_calls(&path).unwrap_err().to_string();
        assert!(message.contains("`otherData.graph`"), "{message}");
        let mut calls = GraphCalls {
            shape: shape(),
            ..GraphCalls::default()
        };
        calls.shape.ops[1].reads = vec![7];
        let trace = serde_json::json!({"traceEvents": [], "otherData": {"graph": calls}});
        std::fs::write(&path, trace.to_string()).unwrap();
        let message = load_graph_calls(&path).unwrap_err().to_string();
        assert!(message.contains("names var 7 of 1"), "{message}");
        std::fs::remove_file(&path).unwrap();
    }

    fn event(kind: RecordKind, arg: u64, ts_ns: u64) -> RecordedEvent {
        RecordedEvent {
            ts_ns,
            kind,
            thread: 0,
            device: 0,
            name: 0,
            aux: 0,
            arg,
            flags: 0,
        }
    }

    #[test]
    fn runs_join_their_start_and_end_and_the_rest_is_counted() {
        let shape = GraphShape {
            ops: vec![GraphOp::default(), GraphOp::default()],
            ..GraphShape::default()
        };
        let run = |op_id, iteration, index| OpRun {
            op_id,
            iteration,
            index,
        };
        let runs = [run(7, 0, 1), run(5, 0, 0), run(9, 1, 0), run(11, 1, 5)];
        let events = [
            event(RecordKind::OpQueued, 5, 1),
            event(RecordKind::OpStart, 5, 2),
            event(RecordKind::OpStart, 7, 3),
            event(RecordKind::OpEnd, 5, 4),
            event(RecordKind::OpEnd, 7, 8),
            event(RecordKind::OpStart, 9, 9), // its end is missing
        ];
        let joined = GraphCalls::join(shape, &runs, &events);
        let found: Vec<(u64, u64, u64)> = joined
            .calls
            .iter()
            .map(|call| (call.run.op_id, call.start_ns, call.end_ns))
            .collect();
        assert_eq!(found, [(5, 2, 4), (7, 3, 8)]);
        assert_eq!(joined.unmatched, 2, "op 9 has no end, op 11 no such index");
    }
}
