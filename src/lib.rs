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
//! - [`record`]: recordings of every event of a run, streamed to a compact checksummed file
//!   while it runs; their Chrome export and the comparison of two runs
//!   ([`record::load_profile`] reads a recording or a trace, [`record::compare`] lines two up
//!   into a [`record::Comparison`]).
//! - [`analysis`]: why a run does not scale: [`analysis::analyze`] takes the graph that ran
//!   ([`analysis::RanGraph`]) to its work, span and critical path ([`analysis::Scaling`]);
//!   [`analysis::verdicts`] gives one [`analysis::Verdict`] per device, with the threads'
//!   descheduled time ([`analysis::Descheduled`]); [`analysis::Attribution`] says where each
//!   worker's time went; [`analysis::EngineModel`] predicts other thread counts.
//! - [`workload`]: workload files (tensors and ops, repeated with blocks and templates) loaded
//!   into a validated [`workload::Graph`], the workloads shipped in the binary, and the run
//!   driver that runs one ([`workload::run`]).
//! - [`config`]: the runtime's settings ([`config::RuntimeConfig`]): defaults, then
//!   environment variables, then flags.
//! - [`error_chain`]: an error and its causes as one line.
//! - [`cli`]: the `enginetop` binary's entry, [`cli::main`]; `src/main.rs` only calls it.
//!
//! That is the whole public API, one level deep: each module's API is named at its top
//! (`enginetop::profiler::OpSnapshot`, `enginetop::kernels::conv2d`,
//! `enginetop::record::Comparison`) and its files are private, but for these chosen
//! namespaces:
//! - `pool::{barrier, event_count, non_blocking, parallel_for, run_queue, session}`: Eigen's
//!   and TensorFlow's pieces, one per header they port;
//! - `device::{cpu, gpu, stream, cuda, sim, work, discover, identity}`: the device layer's
//!   parts, listed in [`device`]'s docs;
//! - `workload::run`: the run driver; `config::{env, flag}`: the settings' names.
//!
//! The binary's own parts stay inside the crate: the dashboard
//! (`tui`), the benchmarks `enginetop bench` runs (`bench`), the live search over thread
//! counts (`tune`) and the command line's modules (`cli`'s commands); their tests sit beside
//! them, and the end-to-end tests in `tests/` drive the binary. The dashboard's fake source
//! (the `test-fakes` feature) adds a hidden `enginetop demo` that shows it without a workload.
//!
//! Data flow: workload file -> engine push -> device queue -> pool worker -> kernel (intra-op
//! `parallel_for`) -> profiler rings -> collector -> dashboard or headless summary, and the
//! Chrome trace export.
//! Every atomic goes through the `sync` facade so the loom models check the shipped code.
//!
//! # Using it as a library
//! A pool: spawn closures; dropping the pool runs everything queued, then joins its threads.
//! ```
//! use enginetop::pool::{Pool, PoolKind, PoolOptions};
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use std::sync::Arc;
//!
//! let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "example")).unwrap();
//! let sum = Arc::new(AtomicU64::new(0));
//! for i in 1..=100 {
//!     let sum = sum.clone();
//!     pool.spawn(move || { sum.fetch_add(i, Ordering::Relaxed); });
//! }
//! pool.set_num_threads(4).unwrap(); // resized live, nothing queued is lost
//! drop(pool);
//! assert_eq!(sum.load(Ordering::Relaxed), 5050);
//! ```
//!
//! An engine: each op names the vars it reads and writes; ops run in parallel where their
//! vars allow, and a write waits for the reads before it.
//! ```
//! use enginetop::engine::{Engine, EngineKind, EngineOptions, OpSpec};
//! use std::sync::{Arc, Mutex};
//!
//! let engine = Engine::new(EngineOptions::new(EngineKind::PerDevice, 2)).unwrap();
//! let (a, b) = (engine.new_variable(), engine.new_variable());
//! let data = Arc::new(Mutex::new((0, 0)));
//! let d = data.clone();
//! engine
//!     .push_sync(OpSpec::new("fill_a").writes(&a), move |_| {
//!         d.lock().unwrap().0 = 21;
//!         Ok(())
//!     })
//!     .unwrap();
//! let d = data.clone();
//! engine
//!     .push_sync(OpSpec::new("double").reads(&a).writes(&b), move |_| {
//!         let mut data = d.lock().unwrap();
//!         data.1 = data.0 * 2; // runs after fill_a: it reads a
//!         Ok(())
//!     })
//!     .unwrap();
//! engine.wait_for_var(&b).unwrap();
//! assert_eq!(data.lock().unwrap().1, 42);
//! assert_eq!(engine.workers().cpu, 2);
//! ```
//!
//! Profiling and a trace: hand the engine the profiler's probes, run, then read the
//! statistics or export a Chrome trace (open it in Perfetto or `chrome://tracing`).
//! ```
//! use enginetop::engine::{Engine, EngineKind, EngineOptions, OpSpec};
//! use enginetop::profiler::{EngineProbe, PoolProbe, Profiler, ProfilerOptions};
//! use std::sync::Arc;
//!
//! let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
//! let mut options = EngineOptions::new(EngineKind::PerDevice, 2)
//!     .observer(Arc::new(EngineProbe::new(&profiler)));
//! options.pool_observers = PoolProbe::engine_pools(&profiler);
//! let engine = Engine::new(options).unwrap();
//! let x = engine.new_variable();
//! for _ in 0..10 {
//!     engine.push_sync(OpSpec::new("step").writes(&x), |_| Ok(())).unwrap();
//! }
//! engine.wait_for_all().unwrap();
//! drop(engine);
//!
//! let summary = profiler.summary(); // MXNet's profiler table; summary.table() prints it
//! let step = summary.operators.iter().find(|op| op.name == "step").unwrap();
//! assert_eq!(step.count, 10);
//! let mut trace = Vec::new();
//! profiler.export_chrome(&mut trace).unwrap(); // or export_chrome_file(path)
//! enginetop::profiler::validate_json(&trace).unwrap();
//! ```
//! `examples/pool.rs` and `examples/engine.rs` are the same as small programs
//! (`cargo run --release --example engine`).
#![warn(missing_docs)]
#![warn(unreachable_pub)]
#![warn(unnameable_types)]
// Loom builds compile the library for its models alone, without the binary's layers (below):
// what only those layers use is dead there. The normal build still reports dead code.
#![cfg_attr(loom, allow(dead_code, unused_imports))]

pub mod analysis;
// The binary's layers (the benchmarks, the command line, the dashboard, the live tuner) drive
// whole runs on `std`'s threads and `Arc`s, which loom does not model and no loom model
// covers, so `--cfg loom` builds leave them out.
#[cfg(not(loom))]
pub(crate) mod bench;
#[cfg(not(loom))]
pub mod cli;
pub mod config;
pub mod device;
pub mod engine;
pub mod error_chain;
pub mod kernels;
pub mod pool;
pub mod profiler;
pub mod record;
mod sync;
#[cfg(not(loom))]
pub(crate) mod tui;
#[cfg(not(loom))]
pub(crate) mod tune;
pub mod workload;
