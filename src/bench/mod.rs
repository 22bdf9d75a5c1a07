//! The benchmarks behind `enginetop bench`.
//!
//! Each benchmark is a pure measuring function: it builds what it measures, runs it, and
//! returns result structs; printing lives in [`report`] and the binary. The definitions follow
//! the project's benchmark reference exactly, so the figures compare with the C++ peers in
//! `bench/peers/` (run side by side by `bench/compare-pools.sh`).
//!
//! - [`pool`]: spawn, tree, parallel_for, wake_hot and wake_cold on every pool kind and on
//!   rayon, interleaved rep by rep.
//! - [`engine`]: independent, chain, random_dag, wavefront and binary_tree on every engine
//!   kind, each checked against a sequential run.
//! - [`gpu`]: a chain of dependent GPU ops with cross-stream events against a host sync per op.
//! - [`gemm`]: this machine's square `f32` GEMM peak through our kernels and intra-op pool,
//!   measured on demand or read from a per-machine cache.
//! - [`profiler`]: ns per recorded event, clock costs, and profiled-vs-unprofiled ratios.
//! - [`overhead`]: what the scaling analysis, `--record` and the Chrome window each add to a
//!   profiled step, and the dashboard's frame cost.
//! - [`scaling`]: the predicted scaling curve against measured steps, with the error.
//! - [`tune`]: the tuner's pick against the default, fresh runs interleaved round by round.
//! - [`stats`]: median and percentiles.
//! - [`report`]: the JSON line format and the human table.
#![forbid(unsafe_code)]

pub(crate) mod engine;
pub(crate) mod gemm;
pub(crate) mod gpu;
pub(crate) mod overhead;
pub(crate) mod pool;
pub(crate) mod profiler;
pub(crate) mod report;
pub(crate) mod scaling;
pub(crate) mod stats;
#[cfg(all(test, not(loom)))]
mod tests;
pub(crate) mod tune;
