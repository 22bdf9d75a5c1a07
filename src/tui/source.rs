//! The seam between the dashboard and whatever it shows: a [`DashboardSource`] hands out
//! [`DashboardData`] (the profiler's [`Snapshot`] plus the facts only the driver knows) and
//! applies [`Control`]s. Data flows one way: the dashboard reads snapshots and sends controls;
//! the runtime never calls into the dashboard.
//!
//! ```
//! use enginetop::tui::{Control, ControlError, DashboardData, DashboardSource};
//!
//! /// A source with nothing to show, that refuses every control.
//! struct Empty;
//!
//! impl DashboardSource for Empty {
//!     fn snapshot(&mut self) -> DashboardData {
//!         DashboardData::default()
//!     }
//!     fn control(&mut self, control: Control) -> Result<String, ControlError> {
//!         Err(ControlError::Unsupported(control.describe()))
//!     }
//! }
//! let mut source = Empty;
//! assert!(source.control(Control::ResetStats).is_err());
//! ```
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use crate::profiler::Snapshot;

/// What the dashboard runs against: the workload driver (or [`FakeSource`](super::FakeSource)).
///
/// The dashboard calls both methods from its own thread, about ten times a second for
/// `snapshot` and once per key press for `control`; neither should block for long.
pub trait DashboardSource {
    /// Everything to show now.
    fn snapshot(&mut self) -> DashboardData;

    /// Applies `control`; `Ok` holds a status line for the footer (`"inter 5 on cpu0"`,
    /// `"trace written to /tmp/x.json"`), `Err` the reason it was not applied.
    fn control(&mut self, control: Control) -> Result<String, ControlError>;
}

/// A request from the dashboard to the runtime.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Control {
    /// Resize the inter-op worker pool of the device titled `device` to `threads`.
    SetInterOp {
        /// The device's [`DeviceLayout::title`].
        device: String,
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
}

impl Control {
    /// What the control does, in a few words (for messages).
    pub fn describe(&self) -> &'static str {
        match self {
            Control::SetInterOp { .. } => "resizing a device's inter-op pool",
            Control::SetIntraOp(_) => "resizing the intra-op pool",
            Control::Pause(true) => "pausing",
            Control::Pause(false) => "resuming",
            Control::ExportTrace => "exporting a trace",
            Control::ResetStats => "resetting statistics",
        }
    }
}

/// Why a [`Control`] was not applied (shown in the footer).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
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
pub struct DashboardData {
    /// The profiler's live statistics.
    pub snapshot: Snapshot,
    /// What only the driver knows: names, settings, progress.
    pub facts: Facts,
    /// One entry per device panel, in display order. Empty: one CPU panel per profiler
    /// device, without a priority pool or streams.
    pub devices: Vec<DeviceLayout>,
    /// The op each thread is running now, by thread id (the profiler's `WorkerSnapshot`
    /// does not carry it yet; a thread missing here shows no op).
    pub current_ops: BTreeMap<u32, String>,
}

/// The header's facts, supplied by the driver.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Facts {
    /// The workload's name (`resnet-like`).
    pub workload: String,
    /// The engine (`threaded`, `naive`, ...).
    pub engine: String,
    /// The pool kind (`eigen`, `simple`, `chase-lev`).
    pub pool_kind: String,
    /// Time since the workload started.
    pub elapsed: Duration,
    /// Iterations of the workload's graph completed.
    pub iterations: u64,
    /// Arithmetic throughput now, if the workload knows its ops' FLOPs.
    pub gflops: Option<f64>,
    /// The machine's peak, for the `% of peak` figure.
    pub peak_gflops: Option<f64>,
    /// Intra-op threads (threads inside one op).
    pub intra_op: usize,
    /// CPUs the process may use (for the oversubscription lint).
    pub cores: usize,
    /// The workload has ended: the dashboard keeps the last frame until the user quits.
    pub finished: bool,
    /// Short remarks for the header (`simulated GPU`).
    pub notices: Vec<String>,
}

/// Which kind of panel a device gets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeviceKind {
    /// Inter-op workers, an optional priority pool.
    #[default]
    Cpu,
    /// Compute and copy streams (and the workers feeding them).
    Gpu,
    /// The shared intra-op pool (resized with `]`/`[`).
    IntraOp,
}

/// What a stream is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamRole {
    /// Runs kernels.
    Compute,
    /// Copies between host and device.
    Copy,
}

/// One GPU stream: the profiler device its events carry and its index there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamLayout {
    /// The profiler device name the stream events are recorded under.
    pub device: String,
    /// The stream index in those events.
    pub stream: u32,
    /// Compute or copy.
    pub role: StreamRole,
}

/// One device panel and the profiler devices it is drawn from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceLayout {
    /// The panel's title, also the device named in [`Control::SetInterOp`] (`cpu0`).
    pub title: String,
    /// The kind of panel.
    pub kind: DeviceKind,
    /// The profiler device whose workers and queues are this device's workers.
    pub workers: String,
    /// The profiler device of its priority pool, if it has one.
    pub priority: Option<String>,
    /// Its streams (GPU).
    pub streams: Vec<StreamLayout>,
    /// Its inter-op worker count as configured now, if `+`/`-` may resize it.
    pub inter_op: Option<usize>,
    /// What the device is, for its title: a GPU's name, or `simulated: <model's numbers>`.
    pub model: Option<String>,
}
