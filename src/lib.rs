//! enginetop: the runtimes behind deep-learning frameworks, re-created in Rust and made
//! visible.
//!
//! - [`pool`]: Eigen's thread pools (work-sharing `simple`, work-stealing `eigen` over
//!   RunQueue + EventCount, and `chase-lev` over crossbeam's deques), live-resizable, with
//!   per-worker counters, a cost-model `parallel_for`, and TensorFlow's inter-op / intra-op
//!   pool configuration.
//! - [`profiler`]: per-thread lock-free event rings, a collector thread, live statistics,
//!   Chrome trace export and validation, an MXNet-style summary, a `tracing` layer.
//! - [`bench`]: the benchmarks `enginetop bench` runs.
//! - [`tui`]: the live dashboard over the profiler's statistics, and the seam
//!   ([`tui::DashboardSource`]) the workload driver plugs into.
//!
//! Data flow (as the later parts land): workload file -> engine push -> device queue -> pool
//! worker -> kernel (intra-op `parallel_for`) -> profiler rings -> collector -> dashboard.
//! Every atomic goes through the `sync` facade so the loom models check the shipped code.
#![warn(missing_docs)]

pub mod bench;
pub mod config;
pub mod pool;
pub mod profiler;
mod sync;
pub mod tui;
