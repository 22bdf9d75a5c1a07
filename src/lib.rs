//! enginetop: the runtimes behind deep-learning frameworks, re-created in Rust and made
//! visible.
//!
//! - [`pool`]: Eigen's thread pools (work-sharing `simple`, work-stealing `eigen` over
//!   RunQueue + EventCount, and `chase-lev` over crossbeam's deques), live-resizable, with
//!   per-worker counters, a cost-model `parallel_for`, and TensorFlow's inter-op / intra-op
//!   pool configuration.
//! - [`engine`]: MXNet's dependency engine (naive, pooled, per-device) on our pools, with
//!   errors that name the failing op, bulking, live worker counts and a profiler hook.
//! - [`device`]: where engine ops execute: per-device CPU worker pools, the CPU priority pool,
//!   GPU streams with CUDA's semantics on real GPUs (cudarc) or a simulated one.
//! - [`kernels`]: real op bodies (GEMM, convolution, normalization, pooling, element-wise, SGD)
//!   on the CPU, parallelized through the intra-op pool's `parallel_for`, deterministic on
//!   every pool and thread count.
//! - [`profiler`]: per-thread lock-free event rings, a collector thread, live statistics,
//!   Chrome trace export and validation, an MXNet-style summary, a `tracing` layer.
//! - [`bench`](mod@bench): the benchmarks `enginetop bench` runs.
//! - [`workload`]: workload files (tensors and ops, repeated with blocks and templates) loaded
//!   into a validated [`workload::Graph`], and the workloads shipped in the binary.
//! - [`tune`]: the live search over inter-op x intra-op thread counts on a running workload.
//! - [`tui`]: the live dashboard over the profiler's statistics, and the seam
//!   ([`tui::DashboardSource`]) the workload driver plugs into.
//!
//! Data flow: workload file -> engine push -> device queue -> pool worker -> kernel (intra-op
//! `parallel_for`) -> profiler rings -> collector -> dashboard or headless summary, and the
//! Chrome trace export.
//! Every atomic goes through the `sync` facade so the loom models check the shipped code.
#![warn(missing_docs)]

pub mod bench;
pub mod config;
pub mod device;
pub mod engine;
pub mod error_chain;
pub mod kernels;
pub mod pool;
pub mod profiler;
mod sync;
pub mod tui;
pub mod tune;
pub mod workload;
