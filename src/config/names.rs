//! The names of the environment variables and command-line flags the configuration reads.

/// The environment variables we read.
pub mod env {
    /// TensorFlow's inter-op thread count.
    pub const TF_NUM_INTEROP_THREADS: &str = "TF_NUM_INTEROP_THREADS";
    /// TensorFlow's intra-op thread count.
    pub const TF_NUM_INTRAOP_THREADS: &str = "TF_NUM_INTRAOP_THREADS";
    /// Our inter-op thread count; wins over [`TF_NUM_INTEROP_THREADS`].
    pub const ENGINETOP_INTER_OP_THREADS: &str = "ENGINETOP_INTER_OP_THREADS";
    /// Our intra-op thread count; wins over [`TF_NUM_INTRAOP_THREADS`].
    pub const ENGINETOP_INTRA_OP_THREADS: &str = "ENGINETOP_INTRA_OP_THREADS";
    /// The pool kind: `simple`, `eigen` or `chase-lev`.
    pub const ENGINETOP_POOL: &str = "ENGINETOP_POOL";
    /// Whether idle workers may spin: `true/false`, `1/0`, `on/off`, `yes/no`.
    pub const ENGINETOP_SPIN: &str = "ENGINETOP_SPIN";
    /// The most threads any pool may be resized to.
    pub const ENGINETOP_MAX_THREADS: &str = "ENGINETOP_MAX_THREADS";
    /// MXNet's engine choice: `NaiveEngine`, `ThreadedEngine`, `ThreadedEnginePerDevice`.
    pub const MXNET_ENGINE_TYPE: &str = "MXNET_ENGINE_TYPE";
    /// Our engine choice (`naive`, `pooled`, `per-device`, or MXNet's names); wins over
    /// [`MXNET_ENGINE_TYPE`].
    pub const ENGINETOP_ENGINE: &str = "ENGINETOP_ENGINE";
    /// MXNet's CPU workers per device.
    pub const MXNET_CPU_WORKER_NTHREADS: &str = "MXNET_CPU_WORKER_NTHREADS";
    /// Our CPU workers per device; wins over [`MXNET_CPU_WORKER_NTHREADS`].
    pub const ENGINETOP_CPU_WORKERS: &str = "ENGINETOP_CPU_WORKERS";
    /// MXNet's CPU priority pool size.
    pub const MXNET_CPU_PRIORITY_NTHREADS: &str = "MXNET_CPU_PRIORITY_NTHREADS";
    /// Our CPU priority pool size; wins over [`MXNET_CPU_PRIORITY_NTHREADS`].
    pub const ENGINETOP_CPU_PRIORITY_WORKERS: &str = "ENGINETOP_CPU_PRIORITY_WORKERS";
    /// MXNet's GPU compute workers per device.
    pub const MXNET_GPU_WORKER_NTHREADS: &str = "MXNET_GPU_WORKER_NTHREADS";
    /// Our GPU compute workers per device; wins over [`MXNET_GPU_WORKER_NTHREADS`].
    pub const ENGINETOP_GPU_WORKERS: &str = "ENGINETOP_GPU_WORKERS";
    /// MXNet's GPU copy workers per device.
    pub const MXNET_GPU_COPY_NTHREADS: &str = "MXNET_GPU_COPY_NTHREADS";
    /// Our GPU copy workers per device; wins over [`MXNET_GPU_COPY_NTHREADS`].
    pub const ENGINETOP_GPU_COPY_WORKERS: &str = "ENGINETOP_GPU_COPY_WORKERS";
    /// Which GPUs: `none`, `auto`, `cuda` or `sim:N`.
    pub const ENGINETOP_GPUS: &str = "ENGINETOP_GPUS";
    /// How GPU dependencies are kept: `event` or `sync` (a host sync after every op).
    pub const ENGINETOP_GPU_SYNC: &str = "ENGINETOP_GPU_SYNC";
}

/// The command-line flags that fill [`ConfigOverrides`](crate::config::ConfigOverrides); errors and warnings name them.
pub mod flag {
    /// Sets [`ConfigOverrides::inter_op_threads`](crate::config::ConfigOverrides::inter_op_threads).
    pub(crate) const INTER_OP_THREADS: &str = "--inter-op-threads";
    /// Sets [`ConfigOverrides::intra_op_threads`](crate::config::ConfigOverrides::intra_op_threads).
    pub(crate) const INTRA_OP_THREADS: &str = "--intra-op-threads";
    /// Sets [`ConfigOverrides::pool_kind`](crate::config::ConfigOverrides::pool_kind).
    pub const POOL: &str = "--pool";
    /// Sets [`ConfigOverrides::allow_spinning`](crate::config::ConfigOverrides::allow_spinning).
    pub(crate) const SPIN: &str = "--spin";
    /// Sets [`ConfigOverrides::max_threads`](crate::config::ConfigOverrides::max_threads).
    pub(crate) const MAX_THREADS: &str = "--max-threads";
    /// Sets [`ConfigOverrides::engine_kind`](crate::config::ConfigOverrides::engine_kind).
    pub const ENGINE: &str = "--engine";
    /// Sets [`ConfigOverrides::cpu_workers`](crate::config::ConfigOverrides::cpu_workers).
    pub(crate) const CPU_WORKERS: &str = "--cpu-workers";
    /// Sets [`ConfigOverrides::cpu_priority_workers`](crate::config::ConfigOverrides::cpu_priority_workers).
    pub(crate) const CPU_PRIORITY_WORKERS: &str = "--cpu-priority-workers";
    /// Sets [`ConfigOverrides::gpu_workers`](crate::config::ConfigOverrides::gpu_workers).
    pub const GPU_WORKERS: &str = "--gpu-workers";
    /// Sets [`ConfigOverrides::gpu_copy_workers`](crate::config::ConfigOverrides::gpu_copy_workers).
    pub(crate) const GPU_COPY_WORKERS: &str = "--gpu-copy-workers";
    /// Sets [`ConfigOverrides::gpus`](crate::config::ConfigOverrides::gpus).
    pub const GPUS: &str = "--gpus";
    /// Sets [`ConfigOverrides::gpu_sync`](crate::config::ConfigOverrides::gpu_sync).
    pub(crate) const GPU_SYNC: &str = "--gpu-sync";
}
