//! GPU devices: the placeholder until the GPU backend lands.
//!
//! MXNet gives each GPU compute workers (`MXNET_GPU_WORKER_NTHREADS`, default 2) and copy
//! workers (`MXNET_GPU_COPY_NTHREADS`, default 2), each thread owning a stream. Those need
//! streams, which come with the GPU backend. Until then this module does not pretend: a push
//! to `gpu(i)` is refused with a clear error naming the fix, and the configured worker counts
//! are only recorded.
#![forbid(unsafe_code)]

use crate::engine::{Context, EngineError, OpName};

/// Worker counts a GPU device will get (recorded from the configuration).
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

/// The refusal for an op pushed to a GPU context.
pub fn no_gpu_backend(op: OpName, context: Context) -> EngineError {
    EngineError::NoGpuBackend { op, context }
}
