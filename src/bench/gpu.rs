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
//!
//! # Through the engine ([`run_engine_chain`], what `enginetop bench gpu` runs)
//! The same comparison with the dependency engine in between: a chain of ops that each write
//! one var, alternating a GEMM on the compute workers (`Normal`) and a host-to-device copy on
//! the copy workers (`CopyToGpu`), so every step crosses from a compute stream to a copy
//! stream or back. In the engine's event mode an op completes at launch and the next one is
//! launched behind an event; in per-op sync mode the worker synchronizes its stream after
//! every op before the next one is dispatched. Each rep uses a fresh engine, warmed up (every
//! worker and stream started) before the clock starts; the clock stops when `wait_for_all`
//! returns, which includes the device work.
#![forbid(unsafe_code)]

// std's `Arc`: handles to trait objects, which loom's `Arc` cannot coerce to `dyn`.
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::device::stream::GpuBackend;
#[cfg(test)]
use crate::device::stream::{GpuDevice, StreamError, StreamKind};
use crate::device::work::{CopyDir, GpuWork};
use crate::engine::{
    Context, Engine, EngineError, EngineKind, EngineOptions, FnProperty, GpuSyncMode, OpSpec, Var,
};

#[cfg(test)]
/// How dependencies between the chain's ops are enforced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ChainMode {
    /// Cross-stream event waits, one host sync at the end.
    Events,
    /// A host synchronize after every op.
    HostSync,
}

#[cfg(test)]
/// Both modes' wall times on the same chain.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub(crate) struct ChainReport {
    /// The device's name (a simulated one carries its model).
    pub(crate) device: String,
    /// Ops in the chain.
    pub(crate) ops: usize,
    /// Wall time in event mode.
    pub(crate) events: Duration,
    /// Wall time with a host sync per op.
    pub(crate) host_sync: Duration,
}

#[cfg(test)]
impl ChainReport {
    /// `host_sync / events`: how much slower per-op syncing is (above 1 is slower).
    pub(crate) fn slowdown(&self) -> f64 {
        self.host_sync.as_secs_f64() / self.events.as_secs_f64().max(1e-9)
    }
}

#[cfg(test)]
/// Runs a chain of `ops` ops made by `make_op(i)` in `mode` on two new compute streams of
/// `device`; returns the wall time from the first launch to the last op finishing.
pub(crate) fn run_chain(
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

#[cfg(test)]
/// Runs the same chain in both modes (events first) and reports both times.
pub(crate) fn compare_chain(
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

/// The engine chain's op `i`: a GEMM on a compute stream (even `i`) or a host-to-device copy
/// on a copy stream (odd `i`), with their property.
pub(crate) fn engine_chain_op(i: usize) -> (FnProperty, GpuWork) {
    if i % 2 == 0 {
        (FnProperty::Normal, GpuWork::gemm(256, 256, 256))
    } else {
        (
            FnProperty::CopyToGpu,
            GpuWork::copy(CopyDir::HostToDevice, 64 << 10),
        )
    }
}

/// Pushes `ops` chain ops on `gpu0` writing `var` (see the module docs).
fn push_engine_chain(engine: &Engine, var: &Var, ops: usize) -> Result<(), EngineError> {
    for i in 0..ops {
        let (prop, work) = engine_chain_op(i);
        let spec = OpSpec::new("chain")
            .ctx(Context::gpu(0))
            .prop(prop)
            .writes(std::slice::from_ref(var));
        engine.push_sync(spec, move |run| {
            let stream = run.stream().ok_or("a GPU op runs on a GPU worker")?;
            stream.launch(work)?;
            Ok(())
        })?;
    }
    Ok(())
}

/// Runs the engine chain of `ops` ops once in `mode` on `backend`'s GPU 0 (a fresh per-device
/// engine, warmed up first); returns the wall time from the first push until `wait_for_all`
/// returned.
pub(crate) fn run_engine_chain(
    backend: Arc<dyn GpuBackend>,
    mode: GpuSyncMode,
    ops: usize,
) -> Result<Duration, EngineError> {
    let options = EngineOptions::new(EngineKind::PerDevice, 1)
        .gpu_backend(backend)
        .gpu_sync(mode);
    let engine = Engine::new(options)?;
    let var = engine.new_variable();
    push_engine_chain(&engine, &var, 8)?; // starts every worker and stream
    engine.wait_for_all()?;
    let started = Instant::now();
    push_engine_chain(&engine, &var, ops)?;
    engine.wait_for_all()?;
    Ok(started.elapsed())
}

/// One mode's figures on the engine chain.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub(crate) struct EngineChainResult {
    /// `gpu_chain`.
    pub(crate) bench: &'static str,
    /// The sync mode.
    pub(crate) mode: GpuSyncMode,
    /// The GPU's name (a simulated one carries its model).
    pub(crate) device: String,
    /// Ops per chain.
    pub(crate) ops: usize,
    /// Reps measured.
    pub(crate) reps: usize,
    /// Median wall time per op, nanoseconds.
    pub(crate) ns_per_op: f64,
    /// Fastest rep, nanoseconds per op.
    pub(crate) ns_per_op_min: f64,
    /// Slowest rep, nanoseconds per op.
    pub(crate) ns_per_op_max: f64,
}

/// Runs the engine chain `reps` times in each of `modes` (interleaved rep by rep).
pub(crate) fn compare_engine_chain(
    backend: Arc<dyn GpuBackend>,
    modes: &[GpuSyncMode],
    ops: usize,
    reps: usize,
) -> Result<Vec<EngineChainResult>, EngineError> {
    let device = backend
        .devices()
        .first()
        .map_or_else(|| "no GPU".to_string(), |gpu| gpu.name.clone());
    let mut samples = vec![Vec::new(); modes.len()];
    for _ in 0..reps.max(1) {
        for (mode, samples) in modes.iter().zip(&mut samples) {
            let wall = run_engine_chain(Arc::clone(&backend), *mode, ops)?;
            samples.push(wall.as_nanos() as f64 / ops.max(1) as f64);
        }
    }
    Ok(modes
        .iter()
        .zip(samples)
        .map(|(&mode, samples)| EngineChainResult {
            bench: "gpu_chain",
            mode,
            device: device.clone(),
            ops,
            reps: samples.len(),
            ns_per_op: super::stats::median(&samples).unwrap_or(0.0),
            ns_per_op_min: samples.iter().copied().fold(f64::INFINITY, f64::min),
            ns_per_op_max: samples.iter().copied().fold(0.0, f64::max),
        })
        .collect())
}

/// Per-op sync's median ns/op over event mode's (above 1: per-op sync is slower), when both
/// were measured.
pub(crate) fn sync_over_event(results: &[EngineChainResult]) -> Option<f64> {
    let of = |mode| results.iter().find(|result| result.mode == mode);
    let (event, sync) = (of(GpuSyncMode::Event)?, of(GpuSyncMode::PerOp)?);
    Some(sync.ns_per_op / event.ns_per_op.max(1e-9))
}

/// The human table of [`compare_engine_chain`]'s results.
pub(crate) fn engine_chain_table(results: &[EngineChainResult]) -> String {
    let Some(first) = results.first() else {
        return String::new();
    };
    let mut out = format!(
        "gpu chain: {} dependent ops alternating a compute and a copy stream of gpu0, through \
         the engine\ndevice: {}\n\n{:<6} {:>12} {:>12} {:>12}\n",
        first.ops, first.device, "mode", "ns/op", "min", "max"
    );
    for result in results {
        out += &format!(
            "{:<6} {:>12.0} {:>12.0} {:>12.0}\n",
            result.mode.as_str(),
            result.ns_per_op,
            result.ns_per_op_min,
            result.ns_per_op_max
        );
    }
    if let Some(ratio) = sync_over_event(results) {
        out += &format!(
            "\nper-op sync / event: {ratio:.2}x (median of {} reps)\n",
            first.reps
        );
    }
    out
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::device::cuda::{probe as probe_cuda, CudaBackend};
    use crate::device::sim::{SimBackend, SimModel};
    use crate::device::work::{ElementwiseOp, OpTag};
    use crate::sync::Mutex;

    /// A small use of `run_chain`.
    #[test]
    fn run_chain_example() {
        use crate::bench::gpu::{run_chain, ChainMode};
        use crate::device::sim::{SimBackend, SimModel};
        use crate::device::stream::GpuBackend;
        use crate::device::work::GpuWork;

        let device = SimBackend::new(1, SimModel::instant())
            .open(0, None)
            .unwrap();
        run_chain(&*device, ChainMode::Events, 8, &|_| {
            GpuWork::gemm(64, 64, 64)
        })
        .unwrap();
    }

    /// A small use of `run_engine_chain`.
    #[test]
    fn run_engine_chain_example() {
        use crate::bench::gpu::run_engine_chain;
        use crate::device::sim::{SimBackend, SimModel};
        use crate::engine::GpuSyncMode;
        use std::sync::Arc;

        let backend = Arc::new(SimBackend::new(1, SimModel::instant()));
        run_engine_chain(backend, GpuSyncMode::Event, 16).unwrap();
    }

    /// GPU 0 of `backend`, unobserved.
    fn open(backend: &dyn GpuBackend) -> Arc<dyn GpuDevice> {
        backend
            .open(0, None)
            .unwrap_or_else(|err| panic!("opening {:?} GPU 0: {err}", backend.kind()))
    }

    /// A small op tagged `i`, that appends `i` to `log` when it completes.
    fn logged_op(i: usize, log: &Arc<Mutex<Vec<usize>>>) -> GpuWork {
        let work = match i % 3 {
            0 => GpuWork::gemm(64, 64, 64),
            1 => GpuWork::elementwise(ElementwiseOp::Add, 4096),
            _ => GpuWork::elementwise(ElementwiseOp::Relu, 1024),
        };
        let log = Arc::clone(log);
        work.op(OpTag::new(i as u64)).on_complete(move |result| {
            result.unwrap_or_else(|err| panic!("op {i} failed: {err}"));
            log.lock().push(i);
        })
    }

    /// Both modes of [`run_chain`] run every op, in order.
    fn both_chain_modes_run_every_op_in_order(backend: &dyn GpuBackend) {
        let device = open(backend);
        for mode in [ChainMode::Events, ChainMode::HostSync] {
            let log = Arc::new(Mutex::new(Vec::new()));
            run_chain(&*device, mode, 12, &|i| logged_op(i, &log)).unwrap();
            assert_eq!(*log.lock(), (0..12).collect::<Vec<_>>(), "{mode:?}");
        }
    }

    #[test]
    fn sim_both_chain_modes_run_every_op_in_order() {
        both_chain_modes_run_every_op_in_order(&SimBackend::new(2, SimModel::default()));
    }

    /// On a usable GPU; says why it was skipped otherwise.
    #[test]
    fn cuda_both_chain_modes_run_every_op_in_order() {
        let probe = probe_cuda();
        if !probe.usable() {
            let reason = probe
                .problem
                .map_or("the CUDA driver found no GPU".to_string(), |p| {
                    p.to_string()
                });
            eprintln!("cuda_both_chain_modes_run_every_op_in_order: skipped: {reason}");
            return;
        }
        both_chain_modes_run_every_op_in_order(&CudaBackend::from_probe(probe));
    }

    /// The measurement behind `enginetop bench gpu`, printed, with only ordering facts
    /// asserted: both modes finish the chain. Run with `--nocapture` to see the figures.
    #[test]
    fn sim_chain_report_measures_both_modes() {
        let device = open(&SimBackend::new(1, SimModel::default()));
        let report = compare_chain(&*device, 24, &|i| {
            GpuWork::gemm(256, 256, 256).op(OpTag::new(i as u64))
        })
        .unwrap();
        assert_eq!(report.ops, 24);
        println!(
            "chain of {} ops on {}: events {:?}, host sync per op {:?} ({:.2}x)",
            report.ops,
            report.device,
            report.events,
            report.host_sync,
            report.slowdown()
        );
    }

    #[test]
    fn both_modes_run_the_engine_chain_and_the_table_shows_the_ratio() {
        let backend: Arc<dyn GpuBackend> = Arc::new(SimBackend::new(1, SimModel::instant()));
        let modes = [GpuSyncMode::Event, GpuSyncMode::PerOp];
        let results = compare_engine_chain(backend, &modes, 12, 2).unwrap();
        assert_eq!(results.len(), 2);
        assert!(results.iter().all(|r| r.ns_per_op > 0.0 && r.reps == 2));
        assert!(sync_over_event(&results).is_some());
        let table = engine_chain_table(&results);
        assert!(table.contains("per-op sync / event: "), "{table}");
        assert!(table.contains("\nsync "), "{table}");
        let json = serde_json::to_value(&results[1]).unwrap();
        assert_eq!(
            (json["bench"].as_str(), json["mode"].as_str()),
            (Some("gpu_chain"), Some("sync"))
        );
    }
}
