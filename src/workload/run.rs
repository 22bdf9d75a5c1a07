//! The workload driver: runs a loaded [`Graph`] on the dependency engine with real kernels,
//! and measures it (`enginetop --workload resnet-like`).
//!
//! # Data flow
//! [`Driver::new`] allocates one storage cell per tensor (a kernels [`Tensor`] of `f32`,
//! filled per its `init`: zeros, ones, or `Tensor::random` seeded by a hash of the tensor's
//! name, so every run starts from the same bits), one engine [`Var`] per tensor, and
//! prepares every op once: its interned [`OpName`], its engine context, property and
//! priority, its const and mutable vars (operands plus `also_*` dependencies), its lock plan
//! and its decoded kernel call. [`Driver::run`] pushes the setup ops once, then the iteration
//! ops per iteration, each with `push_sync`; an op's body locks its tensors, calls its kernel
//! on the shared intra-op pool ([`crate::kernels`], through `parallel_for`) and adds its time
//! and FLOPs to the run's counters. After the run, [`Driver::summary`] turns the counters,
//! the pools' stats and the tensors' [`checksum`](Driver::checksum) into a [`RunSummary`].
//!
//! # Threads
//! The engine's CPU workers are the inter-op threads (`--inter`, TensorFlow's
//! `inter_op_parallelism_threads`); every kernel shares one intra-op pool of `--intra`
//! threads. An op running on an engine worker calls `parallel_for` from outside the intra-op
//! pool and helps with its own blocks while it waits, so up to `inter x (intra + 1)` threads
//! compute at once: the oversubscription [`RuntimeConfig::warnings`] reports.
//!
//! # Locking rule
//! Every tensor sits behind its own reader-writer lock. An op locks the tensors its kernel
//! touches (`reads` and `writes`, not the `also_*` dependencies) in ascending tensor id
//! order: a read lock for a tensor it only reads, one write lock for a tensor it writes
//! (read or not). One global order means two ops can never hold locks the other waits for.
//! The engine already guarantees that no two ops with conflicting accesses run at once, so
//! the locks are never contended; they exist to make the shared borrow safe without `unsafe`.
//! A kernel input that is also its output (`relu` in place, a `sum_expr` term that is its
//! own result) is copied before the kernel runs, so the kernel reads the value from before
//! the op, as a sequential run would.
//!
//! # Iteration pipelining
//! After the ops of iteration `i`, the driver pushes a sentinel op that reads every tensor,
//! with property `no_skip` (it runs even after a failure, so the driver never waits
//! forever). It runs once every op of iteration `i` that writes a tensor has finished, and
//! counts the iteration done. Before pushing iteration `i`, the driver waits for iteration
//! `i - 2` ([`ITERATIONS_IN_FLIGHT`]): iteration `i`'s forward ops may start while iteration
//! `i - 1`'s backward tail drains (the engine orders every tensor's accesses in push order,
//! so results are the same as a sequential run's), and the engine's queue and memory stay
//! bounded. The run ends with `wait_for_all`, which also reports the first op failure.
//!
//! # Results are checked
//! Kernels are deterministic (see [`crate::kernels`]), and the engine makes every tensor see
//! its accesses in push order, so a run's [`checksum`](Driver::checksum) (a hash of every
//! tensor in id order) is the naive engine's, bit for bit, on every engine, pool kind and
//! thread count (on one machine).
//!
//! # Errors
//! A bad setting or workload is a [`RunError`] before anything runs: a tensor of a dtype the
//! kernels cannot compute, an op on a device the engine refuses (a GPU without a GPU
//! backend). An op that fails (kernel error or panic) is reported by `wait_for_all` as
//! [`RunError::OpFailed`], naming the op: `op "conv3" failed: ...`.
//!
//! # Hooks
//! [`RunHooks`] carries what the profiler and the binary plug in: an engine observer and an
//! intra-op pool observer (op, steal and park events), a progress callback, and a
//! [`ProfilerReport`] asked once for the aggregate table and dropped events of the summary.
//!
//! # Example
//! ```
//! use enginetop::config::RuntimeConfig;
//! use enginetop::workload::run::{run_workload, RunHooks, RunLength, RunOptions};
//! use enginetop::workload::{load_spec, Overrides};
//!
//! let graph = load_spec("chain", &Overrides::from_args(["length=50"]).unwrap()).unwrap();
//! let config = RuntimeConfig { inter_op_threads: 2, intra_op_threads: 1, ..Default::default() };
//! let options = RunOptions::new(config, RunLength::Iterations(3));
//! let summary = run_workload(graph, &options, RunHooks::default()).unwrap();
//! assert_eq!((summary.iterations, summary.ops), (3, 150));
//! assert!(summary.ops_per_s > 0.0);
//! ```
//!
//! [`Graph`]: super::Graph
//! [`Tensor`]: crate::kernels::Tensor
//! [`Var`]: crate::engine::Var
//! [`OpName`]: crate::engine::OpName
//! [`RuntimeConfig::warnings`]: crate::config::RuntimeConfig::warnings
#![forbid(unsafe_code)]

mod call;
mod counters;
mod device_work;
mod driver;
mod error;
mod handoff_probe;
mod history;
mod hooks;
mod intra_split;
mod live;
mod op_times;
mod plan;
mod predict;
mod scaling;
mod storage;
mod summary;
mod wake_probe;

#[cfg(all(test, not(loom)))]
pub(crate) use counters::Lane; // the dashboard tests find a lane by its kind
pub use driver::{Driver, RunLength, RunReport, ITERATIONS_IN_FLIGHT, ITERATION_END};
pub use error::RunError;
pub use hooks::{ProfilerReport, Progress, QueueWatch, RunHooks};
pub use intra_split::WaitStats;
pub use live::{DriverHandle, LiveProgress};
pub use predict::{LoopWakeSource, PoolDispatch, PredictedCurve};
pub use scaling::ScalingSummary;
pub use storage::memory_available;
pub use summary::{
    gflops_rate, peak_fraction, ConfigSpan, GflopsSplit, GpuWorkerRoles, IntraPoolSummary,
    LaneUsage, PeakSource, RunSettings, RunSummary,
};
pub(crate) use summary::{plural, worker_count};

use crate::config::RuntimeConfig;

use super::Graph;

/// What [`run_workload`] runs: the runtime settings, how long, and the GEMM peak to compare
/// with (measured by the caller, e.g. `cached_gemm_peak`; `None` leaves the ratio out).
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Engine, pool kind, inter- and intra-op threads.
    pub config: RuntimeConfig,
    /// How many iterations, or for how long.
    pub length: RunLength,
    /// This machine's GEMM peak at the intra-op thread count, in GFLOP/s.
    pub gemm_peak_gflops: Option<f64>,
}

impl RunOptions {
    /// `config` for `length`, no GEMM peak.
    pub fn new(config: RuntimeConfig, length: RunLength) -> Self {
        RunOptions {
            config,
            length,
            gemm_peak_gflops: None,
        }
    }
}

/// Runs a loaded `graph` as `options` say, and summarises the run.
pub fn run_workload(
    graph: Graph,
    options: &RunOptions,
    mut hooks: RunHooks,
) -> Result<RunSummary, RunError> {
    let mut driver = Driver::new(graph, &options.config, &hooks)?;
    let mut no_progress = |_: Progress| {};
    let progress: &mut dyn FnMut(Progress) = match hooks.progress.as_mut() {
        Some(progress) => progress,
        None => &mut no_progress,
    };
    let report = driver.run(options.length, progress)?;
    Ok(driver.summary(&report, options.gemm_peak_gflops, hooks.profiler.as_deref()))
}
