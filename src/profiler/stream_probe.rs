//! The GPU streams' side of the profiler: a [`StreamObserver`] that records stream submit,
//! start and end events (Kineto style: one track per stream of a device in the trace, and the
//! live stream occupancy of the snapshot).
//!
//! Streams report device time as `Instant`s; the probe maps them onto the profiler's epoch
//! clock through one pairing of the two clocks taken when the probe is made.
#![forbid(unsafe_code)]

use std::time::Instant;

use super::{now_ns, DeviceId, NameId, Profiler};
use crate::device::stream::{StreamEvent, StreamObserver, StreamPhase};
use crate::engine::OpName;
use crate::sync::Mutex;

/// Records GPU stream events into a [`Profiler`]; GPU `d` becomes profiler device `gpu(d)`.
pub struct StreamProbe {
    profiler: Profiler,
    /// `Instant` and profiler-epoch ns read together once.
    clock_pair: (Instant, u64),
    devices: Mutex<Vec<(u32, DeviceId)>>,
}

impl StreamProbe {
    /// A probe recording into `profiler`.
    pub fn new(profiler: &Profiler) -> Self {
        StreamProbe {
            profiler: profiler.clone(),
            clock_pair: (Instant::now(), now_ns()),
            devices: Mutex::new(Vec::new()),
        }
    }

    fn device(&self, ordinal: u32) -> DeviceId {
        let mut devices = self.devices.lock();
        if let Some((_, id)) = devices.iter().find(|(known, _)| *known == ordinal) {
            return *id;
        }
        let id = DeviceId::register(&format!("gpu({ordinal})"));
        devices.push((ordinal, id));
        id
    }

    /// `at` in ns since the profiler's epoch.
    fn epoch_ns(&self, at: Instant) -> u64 {
        let (base_instant, base_ns) = self.clock_pair;
        match at.checked_duration_since(base_instant) {
            Some(after) => base_ns.saturating_add(after.as_nanos() as u64),
            None => base_ns.saturating_sub(base_instant.duration_since(at).as_nanos() as u64),
        }
    }
}

/// The profiler's name for an engine op name id (0 or unknown: `gpu-work`).
fn op_name(engine_name: u32) -> NameId {
    let text = OpName::from_id(engine_name).map_or("gpu-work", OpName::as_str);
    NameId::intern(text)
}

impl StreamObserver for StreamProbe {
    fn on_stream_event(&self, event: StreamEvent) {
        let device = self.device(event.stream.device);
        let stream = event.stream.code();
        let name = op_name(event.op.name);
        let op_id = event.op.id;
        match event.phase {
            StreamPhase::Submit => self.profiler.stream_submit(device, stream, name, op_id),
            StreamPhase::Start => {
                let ts = self.epoch_ns(event.at);
                self.profiler.stream_start(device, stream, name, op_id, ts);
            }
            StreamPhase::End { .. } => {
                let ts = self.epoch_ns(event.at);
                self.profiler.stream_end(device, stream, name, op_id, ts);
            }
        }
    }
}
