//! The seam between the dashboard and whatever it shows: a [`DashboardSource`] hands out
//! [`DashboardData`] (the profiler's [`Snapshot`] plus the facts only the driver knows) and
//! applies [`Control`]s. Data flows one way: the dashboard reads snapshots and sends controls;
//! the runtime never calls into the dashboard.
#![forbid(unsafe_code)]

use std::time::Duration;

use crate::device::identity::{Device, PoolId, PoolRole};
use crate::device::stream::{StreamId, StreamKind};
use crate::profiler::spans::SpanSnapshot;
use crate::profiler::{DeviceId, Snapshot};
use crate::workload::run::GpuWorkerRoles;

/// What the dashboard runs against: the workload driver (or the tests' `FakeSource`).
///
/// The dashboard calls both methods from its own thread, about ten times a second for
/// `snapshot` and once per key press for `control`; neither should block for long.
pub(crate) trait DashboardSource {
    /// Everything to show now.
    fn snapshot(&mut self) -> DashboardData;

    /// Applies `control`; `Ok` holds a status line for the footer (`"inter 5 on cpu0"`,
    /// `"trace written to /tmp/x.json"`), `Err` the reason it was not applied.
    fn control(&mut self, control: Control) -> Result<String, ControlError>;

    /// The thread-count search's progress, while this source has one ([`Control::Tune`]).
    fn tuner(&mut self) -> Option<crate::tune::TuneProgress> {
        None
    }
}

/// A request from the dashboard to the runtime.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Control {
    /// Resize the inter-op worker pool of device `device` to `threads`.
    SetInterOp {
        /// The device: its panel's [`DeviceLayout::workers`].
        device: DeviceId,
        /// The new worker count (at least 1).
        threads: usize,
    },
    /// Resize the intra-op pool (threads inside one op) to this many threads (at least 1).
    SetIntraOp(usize),
    /// Stop (`true`) or resume (`false`) pushing work; running ops finish.
    Pause(bool),
    /// Write the profiler's current trace window as a Chrome trace.
    ExportTrace,
    /// Zero the counters and histograms (ops table, steals, dropped events).
    ResetStats,
    /// Start, stop or settle the live thread-count search.
    Tune(super::tuner::TuneControl),
    /// Move a replay's cursor (only a replay takes it).
    Replay(super::replay::ReplayControl),
}

impl Control {
    #[cfg(test)]
    /// What the control does, in a few words (for messages).
    pub(crate) fn describe(&self) -> &'static str {
        match self {
            Control::SetInterOp { .. } => "resizing a device's inter-op pool",
            Control::SetIntraOp(_) => "resizing the intra-op pool",
            Control::Pause(true) => "pausing",
            Control::Pause(false) => "resuming",
            Control::ExportTrace => "exporting a trace",
            Control::ResetStats => "resetting statistics",
            Control::Tune(_) => "tuning the thread counts",
            Control::Replay(_) => "moving a replay's cursor",
        }
    }
}

/// Why a [`Control`] was not applied (shown in the footer).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ControlError {
    /// This source cannot do it at all.
    #[error("{0} is not supported here")]
    Unsupported(&'static str),
    /// It was tried and failed.
    #[error("{0}")]
    Failed(String),
}

/// One frame's worth of data: the profiler's statistics, the driver's facts, and how the
/// profiler's devices group into the panels the dashboard draws.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct DashboardData {
    /// The profiler's live statistics.
    pub(crate) snapshot: Snapshot,
    /// What only the driver knows: names, settings, progress.
    pub(crate) facts: Facts,
    /// One entry per device panel, in display order. Empty: one CPU panel per profiler
    /// device, without a priority pool or streams.
    pub(crate) devices: Vec<DeviceLayout>,
    /// The recent op spans (the timeline's ops when zoomed in).
    pub(crate) spans: SpanSnapshot,
    /// The run's graph and which op each op id was, where the source knows them: what the
    /// op detail asks for an op's reads, writes and waits (it says "not recorded" for an op
    /// the graph does not place).
    pub(crate) deps: super::deps::OpGraph,
}

/// The header's facts, supplied by the driver.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Facts {
    /// The workload's name (`resnet-like`).
    pub(crate) workload: String,
    /// The engine (`threaded`, `naive`, ...).
    pub(crate) engine: String,
    /// The pool kind (`eigen`, `simple`, `chase-lev`).
    pub(crate) pool_kind: String,
    /// Time since the workload started.
    pub(crate) elapsed: Duration,
    /// Iterations of the workload's graph completed.
    pub(crate) iterations: u64,
    /// Arithmetic throughput now of the ops on CPU contexts (what `% of peak` compares), if
    /// the workload knows its ops' FLOPs.
    pub(crate) gflops: Option<f64>,
    /// Arithmetic throughput now of the ops on GPU contexts, if the workload has any.
    pub(crate) gpu_gflops: Option<f64>,
    /// The machine's peak, for the `% of peak` figure.
    pub(crate) peak_gflops: Option<f64>,
    /// Intra-op threads (threads inside one op).
    pub(crate) intra_op: usize,
    /// CPUs the process may use (for the oversubscription lint).
    pub(crate) cores: usize,
    /// The workload has ended: the dashboard keeps the last frame until the user quits.
    pub(crate) finished: bool,
    /// Short remarks for the header (`simulated GPU`).
    pub(crate) notices: Vec<String>,
    /// Start-up warnings (conflicting settings): the footer shows them when the dashboard
    /// starts, the header leaves them out.
    pub(crate) warnings: Vec<String>,
    /// Once finished, the (inter, intra) counts the run had for the longest share of its
    /// time, when it was resized (the summary's headline figures).
    pub(crate) threads_over_run: Option<(usize, usize)>,
    /// Once finished, each worker pool's figures over the whole run (the summary's).
    pub(crate) pool_usage: Vec<PoolUsage>,
    /// Why it does not scale: one verdict line per device (`cpu0: critical path: ...`).
    pub(crate) verdicts: Vec<String>,
    /// What the verdicts were computed from, for the scaling view (`w`).
    pub(crate) scaling: Option<crate::analysis::LiveScaling>,
    /// The step predicted at other thread counts, today's marked (the scaling view's
    /// what-if block).
    pub(crate) predicted: Option<crate::workload::run::PredictedCurve>,
    /// In a replay: its cursor, length, speed and losses (the header says REPLAY).
    pub(crate) replay: Option<super::replay::ReplayFacts>,
}

/// How busy a panel's worker pool was over a finished run, time-weighted over the thread
/// counts it had: the summary's `utilization` row of the same pool.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct PoolUsage {
    /// The profiler device of the panel's workers ([`DeviceLayout::workers`]).
    pub(crate) device: DeviceId,
    /// Its threads on average over the run.
    pub(crate) workers: f64,
    /// The share of its threads' time spent in ops, within [0, 1].
    pub(crate) busy: f64,
}

/// Which kind of panel a device gets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum DeviceKind {
    /// Inter-op workers, an optional priority pool.
    #[default]
    Cpu,
    /// Compute and copy streams (and the workers feeding them).
    Gpu,
    /// The shared intra-op pool (resized with `]`/`[`).
    IntraOp,
}

/// One GPU stream: its GPU, the profiler device its events carry, its number there (the
/// packed [`StreamId::code`]: role in the high 16 bits, index in the low 16), and what that
/// number means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StreamLayout {
    /// The GPU it belongs to (a [`Device::Gpu`]): its feeding worker's pool is this GPU's.
    pub(crate) gpu: Device,
    /// The profiler device the stream events are recorded under (the GPU's).
    pub(crate) device: DeviceId,
    /// The stream number in those events ([`StreamId::code`]).
    pub(crate) stream: u32,
    /// Compute, host-to-device or device-to-host.
    pub(crate) kind: StreamKind,
    /// Index among the device's streams of that kind.
    pub(crate) index: u32,
}

impl StreamLayout {
    /// The stream numbered `code` (a [`StreamId::code`]) on GPU `gpu`; a role this build does
    /// not know reads as compute.
    pub(crate) fn of_code(gpu: Device, code: u32) -> StreamLayout {
        let (kind, index) = decode_stream_code(code);
        StreamLayout {
            gpu,
            device: DeviceId::of(gpu),
            stream: code,
            kind,
            index,
        }
    }

    /// The GPU worker that feeds the stream, as its pool's role and its index there
    /// (`device::gpu`): copy worker `k` owns the `k`th stream each way, compute worker `k`
    /// the `k`th compute stream, and the prioritized worker the compute stream after the
    /// `compute_workers` compute workers' (all compute streams are the compute workers' while
    /// their count is unknown).
    pub(crate) fn feeder(&self, compute_workers: Option<u32>) -> (PoolRole, u32) {
        match (self.kind, compute_workers) {
            (StreamKind::Compute, Some(workers)) if self.index >= workers => {
                (PoolRole::GpuPriority, self.index - workers)
            }
            (StreamKind::Compute, _) => (PoolRole::GpuCompute, self.index),
            (StreamKind::CopyH2D | StreamKind::CopyD2H, _) => (PoolRole::GpuCopy, self.index),
        }
    }

    /// The thread name of the worker that feeds the stream, made from its pool and index
    /// ([`feeder`](Self::feeder), [`PoolId::thread_name`]) as the engine names the thread
    /// and the timeline shows it. For display only: rows are matched to streams by the
    /// feeder.
    pub(crate) fn worker(&self, compute_workers: Option<u32>) -> String {
        let (role, index) = self.feeder(compute_workers);
        PoolId::new(self.gpu, role).thread_name(index)
    }

    /// The stream's name in the GPU panel: the stream, as the trace's stream track names it
    /// ([`StreamId::label`]), and the [`worker`](Self::worker) feeding it (the timeline's
    /// row): `stream compute1 (gpu0-compute-1)`, `stream h2d0 (gpu0-copy-0)`,
    /// `stream compute2 (gpu0-prio-0)`. Its figure is the stream's occupancy, not the
    /// worker thread's activity.
    pub(crate) fn label(&self, compute_workers: Option<u32>) -> String {
        let worker = self.worker(compute_workers);
        format!("{} ({worker})", self.stream_label())
    }

    /// The stream alone, as the trace's stream track names it (`stream h2d0`): the
    /// [`label`](Self::label) where that does not fit.
    pub(crate) fn stream_label(&self) -> String {
        stream_label(self.stream)
    }
}

/// Stream `code` (a [`StreamId::code`]) as the trace's stream track names it
/// (`stream h2d0`), whatever its device.
pub(crate) fn stream_label(code: u32) -> String {
    let (kind, index) = decode_stream_code(code);
    let stream = StreamId {
        device: 0,
        kind,
        index,
    };
    stream.label()
}

/// The role and index packed into a [`StreamId::code`]; the inverse of that packing (its
/// round trip is tested for every role). An unknown role reads as compute.
pub(crate) fn decode_stream_code(code: u32) -> (StreamKind, u32) {
    let id = StreamId::from_code(0, code);
    (id.kind, id.index)
}

/// One device panel and the profiler devices it is drawn from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct DeviceLayout {
    /// The panel's title (`cpu0`).
    pub(crate) title: String,
    /// The kind of panel.
    pub(crate) kind: DeviceKind,
    /// The profiler device whose workers and queues are this device's workers; the device
    /// a [`Control::SetInterOp`] names.
    pub(crate) workers: DeviceId,
    /// The profiler device of its priority pool, if it has one.
    pub(crate) priority: Option<DeviceId>,
    /// Its streams (GPU).
    pub(crate) streams: Vec<StreamLayout>,
    /// Its inter-op worker count as configured now, if `+`/`-` may resize it.
    pub(crate) inter_op: Option<usize>,
    /// What the device is, for its bottom border: a GPU's name, or `simulated: <model's
    /// numbers>`.
    pub(crate) model: Option<String>,
    /// A GPU's worker threads by role, as the engine started them (the run's settings).
    pub(crate) gpu_workers: Option<GpuWorkerRoles>,
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::device::gpu::GpuRole;

    /// The seam as a source implements it (the module docs' example).
    #[test]
    fn a_source_that_shows_nothing_refuses_every_control() {
        use crate::tui::{Control, ControlError, DashboardData, DashboardSource};

        /// A source with nothing to show, that refuses every control.
        struct Empty;

        impl DashboardSource for Empty {
            fn snapshot(&mut self) -> DashboardData {
                DashboardData::default()
            }
            fn control(&mut self, control: Control) -> Result<String, ControlError> {
                Err(ControlError::Unsupported(control.describe()))
            }
        }
        let mut source = Empty;
        assert!(source.control(Control::ResetStats).is_err());
    }

    /// [`StreamLayout::of_code`] on a copy stream.
    #[test]
    fn a_stream_layout_reads_its_kind_and_index_from_the_code() {
        let h2d = StreamId {
            device: 0,
            kind: StreamKind::CopyH2D,
            index: 1,
        };
        let layout = StreamLayout::of_code(Device::Gpu(0), h2d.code());
        assert_eq!((layout.kind, layout.index), (StreamKind::CopyH2D, 1));
        assert_eq!(layout.device, DeviceId::of(Device::Gpu(0)));
        assert_eq!(layout.label(Some(2)), "stream h2d1 (gpu0-copy-1)");
        let on_gpu3 = StreamLayout::of_code(Device::Gpu(3), h2d.code());
        assert_eq!(on_gpu3.label(Some(2)), "stream h2d1 (gpu3-copy-1)");
    }

    /// [`StreamLayout::feeder`] with and without the compute workers' count.
    #[test]
    fn the_feeder_of_a_stream_is_its_pool_role_and_index() {
        let third = StreamId {
            device: 0,
            kind: StreamKind::Compute,
            index: 2,
        };
        let layout = StreamLayout::of_code(Device::Gpu(0), third.code());
        assert_eq!(layout.feeder(Some(2)), (PoolRole::GpuPriority, 0));
        assert_eq!(layout.feeder(None), (PoolRole::GpuCompute, 2));
    }

    /// The decoding undoes `StreamId::code` for every role (the packing lives in
    /// `device::stream`; this fails if it changes).
    #[test]
    fn stream_codes_decode_to_the_role_and_index_they_pack() {
        for kind in [
            StreamKind::Compute,
            StreamKind::CopyH2D,
            StreamKind::CopyD2H,
        ] {
            for index in [0, 1, 7, 0xffff] {
                let code = StreamId {
                    device: 3,
                    kind,
                    index,
                }
                .code();
                assert_eq!(decode_stream_code(code), (kind, index), "{code:#x}");
            }
        }
        assert_eq!(decode_stream_code(0x9_0002), (StreamKind::Compute, 2));
    }

    #[test]
    fn streams_are_named_after_the_worker_feeding_them() {
        let labels = |compute_workers: Option<u32>| -> Vec<String> {
            [0, 2, 0x1_0000, 0x2_0000, 0x2_0001]
                .into_iter()
                .map(|code| StreamLayout::of_code(Device::Gpu(0), code).label(compute_workers))
                .collect()
        };
        let named = labels(Some(2));
        let expected = [
            "stream compute0 (gpu0-compute-0)",
            "stream compute2 (gpu0-prio-0)",
            "stream h2d0 (gpu0-copy-0)",
            "stream d2h0 (gpu0-copy-0)",
            "stream d2h1 (gpu0-copy-1)",
        ];
        assert_eq!(named, expected);
        assert_eq!(
            labels(None)[1],
            "stream compute2 (gpu0-compute-2)",
            "compute workers not seen yet"
        );
    }

    /// The engine's GPU workers, started as its hub starts them (compute, copy, then the
    /// prioritized pool, on one device), run on the threads the streams are named after.
    #[test]
    fn stream_workers_are_named_as_the_engine_names_its_threads() {
        use crate::device::gpu::{current_lane, GpuWorkers};
        use crate::device::sim::{SimBackend, SimModel};
        use crate::device::stream::GpuBackend;
        use crate::pool::Task;

        let device = SimBackend::new(1, SimModel::instant())
            .open(0, None)
            .unwrap();
        let roles = [GpuRole::Compute, GpuRole::Copy, GpuRole::Prioritized];
        let pools: Vec<GpuWorkers> = roles
            .iter()
            .map(|&role| GpuWorkers::start(&device, role, 1).unwrap())
            .collect();
        for pool in &pools {
            let (sender, receiver) = std::sync::mpsc::channel();
            pool.schedule(
                0,
                Task::new(move || {
                    let thread = std::thread::current().name().unwrap().to_string();
                    let streams = current_lane().unwrap().stream_ids();
                    sender.send((thread, streams)).unwrap();
                }),
            );
            let (thread, streams) = receiver.recv().unwrap();
            assert!(!streams.is_empty());
            for stream in streams {
                let layout = StreamLayout::of_code(Device::Gpu(0), stream.code());
                assert_eq!(layout.worker(Some(1)), thread, "{stream}");
            }
        }
    }
}
