//! GPU workers: the threads behind the engine's GPU contexts, each owning its streams.
//!
//! # What runs where (MXNet's per-device engine)
//! Every opened GPU gets three small pools of [`GpuWorkers`], started the first time an op
//! names the device:
//! - **compute** (`MXNET_GPU_WORKER_NTHREADS`, default 2): threads `gpu0-compute-0`, ...,
//!   one FIFO queue; each thread owns one compute stream (`gpu0-compute-<k>`);
//! - **copy** (`MXNET_GPU_COPY_NTHREADS`, default 2): threads `gpu0-copy-0`, ..., one queue
//!   ordered by priority; each thread owns a host-to-device stream (`gpu0-h2d-<k>`, used by
//!   `CopyToGpu` ops) and a device-to-host one (`gpu0-d2h-<k>`, `CopyFromGpu`), so the two
//!   directions have their own profiler tracks and overlap like a GPU's two copy engines;
//! - **prioritized** ([`GPU_PRIORITY_WORKERS`] thread, `gpu0-prio-0`): `GpuPrioritized`
//!   ops, highest priority first, on a compute stream of its own (numbered after the compute
//!   workers' streams: with two compute workers it is `gpu0-compute-2`).
//!
//! A worker's streams are made on the starting thread, in thread order, before any worker
//! runs, so thread `k` owns stream index `k`. While a worker runs a task, [`current_lane`]
//! gives that task the worker's [`Lane`] (its device and streams): that is how an engine op
//! body finds the stream to launch on. The streams live as long as the worker thread.
//!
//! # Queue protocol
//! Each pool is the priority worker pool (`device::priority`) the CPU priority pool also uses,
//! with a [`Lane`] per worker: one max-heap of `(priority, sequence, task)` under one lock (a
//! FIFO pool queues everything at priority 0, so the sequence number alone orders it), workers
//! sleeping on one condition variable, nothing queued lost on drop. Started with
//! [`GpuWorkers::start_observed`], the workers report task start/end and park/unpark to a
//! [`PoolObserver`](crate::pool::PoolObserver) (worker `k` is thread `gpu<d>-<role>-<k>`),
//! outside the queue lock, as the CPU pools' workers do.
#![forbid(unsafe_code)]

mod workers;

use std::cell::RefCell;
// std's `Arc`: handles to trait objects, which loom's `Arc` cannot coerce to `dyn`.
use std::sync::Arc;

use super::stream::{GpuDevice, Stream, StreamError, StreamId, StreamKind};
use crate::sync::thread_local;

pub use workers::{GpuPoolStats, GpuWorkers};

/// Worker threads of a GPU's prioritized pool (not configurable yet).
pub const GPU_PRIORITY_WORKERS: usize = 1;

/// Worker counts a GPU device gets (from the configuration).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuWorkerCounts {
    /// Compute workers per GPU (`MXNET_GPU_WORKER_NTHREADS`).
    pub compute: usize,
    /// Copy workers per GPU (`MXNET_GPU_COPY_NTHREADS`).
    pub copy: usize,
}

impl Default for GpuWorkerCounts {
    /// MXNet's defaults: 2 compute and 2 copy workers per GPU.
    fn default() -> Self {
        GpuWorkerCounts {
            compute: 2,
            copy: 2,
        }
    }
}

/// Which of a GPU's pools a worker belongs to: the GPU part of
/// [`PoolRole`](crate::device::identity::PoolRole) (`GpuCompute`, `GpuCopy`, `GpuPriority`),
/// as a type of its own so GPU code matches only roles a GPU has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuRole {
    /// Ordinary ops, FIFO, one compute stream per worker.
    Compute,
    /// `CopyToGpu` / `CopyFromGpu` ops by priority; an h2d and a d2h stream per worker.
    Copy,
    /// `GpuPrioritized` ops by priority, one compute stream per worker.
    Prioritized,
}

impl GpuRole {
    /// `compute`, `copy` or `prio` (thread names are `gpu<d>-<role>-<k>`).
    pub const fn as_str(self) -> &'static str {
        match self {
            GpuRole::Compute => "compute",
            GpuRole::Copy => "copy",
            GpuRole::Prioritized => "prio",
        }
    }

    /// The streams each worker of this role owns.
    pub(crate) const fn stream_kinds(self) -> &'static [StreamKind] {
        match self {
            GpuRole::Compute | GpuRole::Prioritized => &[StreamKind::Compute],
            GpuRole::Copy => &[StreamKind::CopyH2D, StreamKind::CopyD2H],
        }
    }

    /// Whether the pool's queue is ordered by the ops' priorities (else FIFO).
    pub(crate) const fn by_priority(self) -> bool {
        !matches!(self, GpuRole::Compute)
    }
}

/// One GPU worker's device and streams.
pub struct Lane {
    role: GpuRole,
    device: Arc<dyn GpuDevice>,
    streams: Vec<Arc<dyn Stream>>,
}

impl Lane {
    /// Makes a new stream on `device` for every stream kind `role` needs.
    fn open(device: &Arc<dyn GpuDevice>, role: GpuRole) -> Result<Self, StreamError> {
        let streams = role
            .stream_kinds()
            .iter()
            .map(|&kind| device.new_stream(kind).map(Arc::from))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Lane {
            role,
            device: Arc::clone(device),
            streams,
        })
    }

    /// The worker's role.
    pub fn role(&self) -> GpuRole {
        self.role
    }

    /// The device the worker's streams belong to.
    pub fn device(&self) -> &Arc<dyn GpuDevice> {
        &self.device
    }

    /// The worker's stream of `kind`, or its first stream if it has none of that kind (a
    /// compute worker asked for a copy stream runs the copy on its compute stream).
    pub fn stream(&self, kind: StreamKind) -> &Arc<dyn Stream> {
        self.streams
            .iter()
            .find(|stream| stream.id().kind == kind)
            .unwrap_or(&self.streams[0])
    }

    /// Every stream of the worker.
    pub fn stream_ids(&self) -> Vec<StreamId> {
        self.streams.iter().map(|stream| stream.id()).collect()
    }
}

// Thread-local: a GPU worker owns its streams for its whole life; an op body running on it
// finds them here, as CUDA code finds its current device.
thread_local! {
    /// The lane of the GPU worker running on this thread (for its whole life).
    #[allow(clippy::missing_const_for_thread_local)] // loom's thread_local! has no const form
    static CURRENT_LANE: RefCell<Option<Arc<Lane>>> = RefCell::new(None);
}

/// The lane of the GPU worker the calling thread is, if it is one.
pub fn current_lane() -> Option<Arc<Lane>> {
    CURRENT_LANE.with(|lane| lane.borrow().clone())
}
