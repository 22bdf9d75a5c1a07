//! Event mode against per-op host sync, on a chain of dependent GPU ops (behind
//! `enginetop bench gpu`).
//!
//! The chain alternates between two compute streams of one device, each op depending on the
//! one before, so every step crosses streams:
//! - **events** (MXNet's `Async` engines): before op `i` its stream waits on an event recorded
//!   after op `i - 1`; the host launches the whole chain without blocking and synchronizes
//!   once at the end. The device runs the ops back to back.
//! - **host sync** (MXNet's default): the host launches op `i` and synchronizes its stream
//!   before launching op `i + 1`. Every op pays a host round trip and, on an idle device, the
//!   launch latency (mxnet RFC #18951 found this starves the GPU).
//!
//! The two events are reused: op `i` waits on the generation recorded after op `i - 1`, then
//! records the other event, which the next op waits on; a wait captures the generation current
//! when it is issued, so re-recording an event never moves an earlier barrier.
#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use crate::device::stream::{GpuDevice, StreamError, StreamKind};
use crate::device::work::GpuWork;

/// How dependencies between the chain's ops are enforced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChainMode {
    /// Cross-stream event waits, one host sync at the end.
    Events,
    /// A host synchronize after every op.
    HostSync,
}

/// Both modes' wall times on the same chain.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ChainReport {
    /// The device's name (a simulated one carries its model).
    pub device: String,
    /// Ops in the chain.
    pub ops: usize,
    /// Wall time in event mode.
    pub events: Duration,
    /// Wall time with a host sync per op.
    pub host_sync: Duration,
}

impl ChainReport {
    /// `host_sync / events`: how much slower per-op syncing is (above 1 is slower).
    pub fn slowdown(&self) -> f64 {
        self.host_sync.as_secs_f64() / self.events.as_secs_f64().max(1e-9)
    }
}

/// Runs a chain of `ops` ops made by `make_op(i)` in `mode` on two new compute streams of
/// `device`; returns the wall time from the first launch to the last op finishing.
///
/// ```
/// use enginetop::bench::gpu::{run_chain, ChainMode};
/// use enginetop::device::sim::{SimBackend, SimModel};
/// use enginetop::device::stream::GpuBackend;
/// use enginetop::device::work::GpuWork;
///
/// let device = SimBackend::new(1, SimModel::instant()).open(0, None).unwrap();
/// run_chain(&*device, ChainMode::Events, 8, &|_| GpuWork::gemm(64, 64, 64)).unwrap();
/// ```
pub fn run_chain(
    device: &dyn GpuDevice,
    mode: ChainMode,
    ops: usize,
    make_op: &dyn Fn(usize) -> GpuWork,
) -> Result<Duration, StreamError> {
    let streams = [
        device.new_stream(StreamKind::Compute)?,
        device.new_stream(StreamKind::Compute)?,
    ];
    let events = [device.new_event()?, device.new_event()?];
    let started = Instant::now();
    for i in 0..ops {
        let stream = &streams[i % 2];
        match mode {
            ChainMode::Events => {
                if i > 0 {
                    stream.wait_event(&events[(i - 1) % 2])?;
                }
                stream.launch(make_op(i))?;
                stream.record(&events[i % 2])?;
            }
            ChainMode::HostSync => {
                stream.launch(make_op(i))?;
                stream.synchronize()?;
            }
        }
    }
    for stream in &streams {
        stream.synchronize()?;
    }
    Ok(started.elapsed())
}

/// Runs the same chain in both modes (events first) and reports both times.
pub fn compare_chain(
    device: &dyn GpuDevice,
    ops: usize,
    make_op: &dyn Fn(usize) -> GpuWork,
) -> Result<ChainReport, StreamError> {
    let events = run_chain(device, ChainMode::Events, ops, make_op)?;
    let host_sync = run_chain(device, ChainMode::HostSync, ops, make_op)?;
    Ok(ChainReport {
        device: device.info().name.clone(),
        ops,
        events,
        host_sync,
    })
}
