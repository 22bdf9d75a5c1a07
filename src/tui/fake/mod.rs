//! [`FakeSource`]: a synthetic, deterministic [`DashboardSource`] for snapshot tests, the
//! dashboard demo (`cargo run --features test-fakes -- demo`) and anyone working on the dashboard
//! without a workload.
//!
//! It models two CPU devices with four inter-op workers and a one-worker priority pool each,
//! a simulated GPU with two compute and two copy streams (fed by two compute workers and a
//! copy worker, named as the engine names them), and the intra-op pool, running a
//! dozen op names. Every call to [`snapshot`](DashboardSource::snapshot) advances the model
//! by one step ([`FakeOptions::step`], 100 ms by default) and everything it returns is a pure
//! function of the step count, the options and the controls applied so far: the same calls
//! give the same screens. It honours every [`Control`]: resizes change the worker rows and
//! the throughput (which saturates at the core count), pause parks the workers, export
//! writes a small Chrome trace through the profiler's exporter, reset zeroes the counters.
#![forbid(unsafe_code)]

mod model;
mod trace;

use std::path::PathBuf;
use std::time::Duration;

use super::source::{Control, ControlError, DashboardData, DashboardSource};
#[cfg(test)]
use crate::profiler::stats::DeviceSnapshot;
use crate::profiler::stats::{Activity, Shares, WorkerSnapshot};
use crate::profiler::DeviceId;
use model::Model;

/// The most workers a fake pool takes.
pub(crate) const MAX_WORKERS: usize = 32;

#[cfg(test)]
/// Profiler device `cpu0`, where the tests' workers record.
pub(crate) fn cpu0() -> DeviceId {
    DeviceId::of(crate::device::identity::Device::Cpu(0))
}

#[cfg(test)]
/// Profiler device `device` with nothing counted yet: the tests' devices start from it.
pub(crate) fn device_snapshot(device: DeviceId) -> DeviceSnapshot {
    DeviceSnapshot {
        id: device.id(),
        name: device.name().to_string(),
        ..DeviceSnapshot::default()
    }
}

/// Pool worker `index` recording on profiler device `device`, thread `thread`, named `name`
/// (for display), doing `activity`, with no time observed and nothing counted yet: the
/// model's rows and the tests' start from it.
pub(crate) fn worker_snapshot(
    thread: u32,
    name: impl Into<String>,
    device: DeviceId,
    index: u32,
    activity: Activity,
) -> WorkerSnapshot {
    WorkerSnapshot {
        thread,
        name: name.into(),
        device: Some(device),
        role: None,
        worker: Some(index),
        activity,
        shares: Shares::default(),
        shares_since_start: Shares::default(),
        lifetime_ns: 0,
        exited: false,
        tasks: 0,
        ops: 0,
        steals: 0,
        current_op: None,
    }
}

/// What the fake workload looks like.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Scenario {
    /// Within its cores, queues short, no worker spinning for long: no warnings.
    Steady,
    /// Every lint fires: more threads than cores, `cpu1-w3` spinning most of the time,
    /// `cpu0`'s queues growing without bound, and some dropped events.
    Overloaded,
}

/// How the fake is built.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct FakeOptions {
    /// The workload name in the header.
    pub(crate) workload: String,
    /// CPU devices (`cpu0`, `cpu1`, ...).
    pub(crate) cpu_devices: usize,
    /// Inter-op workers per CPU device at the start.
    pub(crate) inter_op: usize,
    /// Intra-op threads at the start.
    pub(crate) intra_op: usize,
    /// Workers in each CPU device's priority pool (0: none).
    pub(crate) priority_workers: usize,
    /// Whether there is a simulated GPU with two compute and two copy streams.
    pub(crate) gpu: bool,
    /// CPUs reported to the dashboard.
    pub(crate) cores: usize,
    /// What it behaves like.
    pub(crate) scenario: Scenario,
    /// Simulated time per snapshot.
    pub(crate) step: Duration,
    /// The workload ends after this many snapshots (never if `None`).
    pub(crate) finish_after: Option<u64>,
    /// Where exported traces go.
    pub(crate) trace_dir: PathBuf,
}

impl Default for FakeOptions {
    /// `resnet-like` on 2 CPU devices x 4 workers, intra 2, 24 cores, a GPU, steady.
    fn default() -> Self {
        FakeOptions {
            workload: "resnet-like".into(),
            cpu_devices: 2,
            inter_op: 4,
            intra_op: 2,
            priority_workers: 1,
            gpu: true,
            cores: 24,
            scenario: Scenario::Steady,
            step: Duration::from_millis(100),
            finish_after: None,
            trace_dir: std::env::temp_dir(),
        }
    }
}

impl FakeOptions {
    /// The [`Scenario::Overloaded`] workload on 4 cores.
    pub(crate) fn overloaded() -> Self {
        FakeOptions {
            scenario: Scenario::Overloaded,
            cores: 4,
            ..FakeOptions::default()
        }
    }
}

/// The synthetic source (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct FakeSource {
    options: FakeOptions,
    model: Model,
    /// The last frame once the workload finished (it no longer changes).
    finished: Option<DashboardData>,
    exports: u32,
}

impl FakeSource {
    /// A fake at step 0.
    pub(crate) fn new(options: FakeOptions) -> Self {
        FakeSource {
            model: Model::new(&options),
            options,
            finished: None,
            exports: 0,
        }
    }

    /// Snapshots taken so far.
    pub(crate) fn steps(&self) -> u64 {
        self.model.step
    }

    fn export(&mut self) -> Result<String, ControlError> {
        self.exports += 1;
        let path = self.options.trace_dir.join(format!(
            "enginetop-fake-{}-{}.trace.json",
            std::process::id(),
            self.exports
        ));
        let events = trace::write(&self.model, &self.options, &path)
            .map_err(|error| ControlError::Failed(format!("trace not written: {error}")))?;
        Ok(format!(
            "trace written to {} ({events} events)",
            path.display()
        ))
    }
}

impl DashboardSource for FakeSource {
    fn snapshot(&mut self) -> DashboardData {
        if let Some(last) = &self.finished {
            return last.clone();
        }
        self.model.advance(&self.options);
        let mut data = self.model.data(&self.options);
        if self
            .options
            .finish_after
            .is_some_and(|end| self.model.step >= end)
        {
            data.facts.finished = true;
            self.finished = Some(data.clone());
        }
        data
    }

    fn control(&mut self, control: Control) -> Result<String, ControlError> {
        match control {
            Control::SetInterOp { device, threads } => self.model.set_inter_op(device, threads),
            Control::SetIntraOp(threads) => self.model.set_intra_op(threads),
            Control::Pause(paused) => {
                self.model.paused = paused;
                Ok(if paused { "paused" } else { "resumed" }.to_string())
            }
            Control::ExportTrace => self.export(),
            Control::ResetStats => {
                self.model.reset();
                Ok("statistics reset".to_string())
            }
            Control::Tune(_) => Err(ControlError::Unsupported("tuning (it needs a live run)")),
            Control::Replay(_) => Err(ControlError::Unsupported("moving a replay's cursor")),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::device::identity::{Device, PoolRole};
    use crate::tui::{DashboardSource, FakeOptions, FakeSource};

    /// Each row records on the typed device of its pool, and its name is made from that
    /// pool: CPU workers on their CPU, GPU workers on the GPU, the intra-op pool on the host.
    #[test]
    fn workers_record_on_their_pools_typed_devices() {
        let data = FakeSource::new(FakeOptions::default()).snapshot();
        let workers = &data.snapshot.workers;
        let device_of = |name: &str| {
            let worker = workers.iter().find(|w| w.name == name).unwrap();
            (worker.device.and_then(|d| d.device()), worker.role)
        };
        let cpu1 = (Some(Device::Cpu(1)), Some(PoolRole::CpuWorker));
        assert_eq!(device_of("cpu1-w3"), cpu1);
        let copy = (Some(Device::Gpu(0)), Some(PoolRole::GpuCopy));
        assert_eq!(device_of("gpu0-copy-0"), copy);
        let intra = (Some(Device::Host), Some(PoolRole::IntraOp));
        assert_eq!(device_of("intra-1"), intra);
        let prio = device_of("cpu1-prio-0");
        assert_eq!(prio.1, Some(PoolRole::CpuPriority));
        let layout = &data.devices[1];
        let prio_device = workers
            .iter()
            .find(|w| w.name == "cpu1-prio-0")
            .unwrap()
            .device;
        assert_eq!(
            layout.priority, prio_device,
            "cpu1's panel lists its own priority pool"
        );
    }

    /// A resize through [`Control::SetInterOp`] shows in the next frame.
    #[test]
    fn a_resize_shows_in_the_next_frame() {
        use crate::tui::{Control, DashboardSource, FakeOptions, FakeSource};
        let mut fake = FakeSource::new(FakeOptions::default());
        let first = fake.snapshot();
        assert_eq!(first.devices[0].inter_op, Some(4));
        let cpu0 = first.devices[0].workers;
        fake.control(Control::SetInterOp {
            device: cpu0,
            threads: 5,
        })
        .unwrap();
        assert_eq!(fake.snapshot().devices[0].inter_op, Some(5));
    }
}
