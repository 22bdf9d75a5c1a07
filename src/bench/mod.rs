//! The benchmarks behind `enginetop bench`.
//!
//! Each benchmark is a pure measuring function: it builds what it measures, runs it, and
//! returns result structs; printing lives in [`report`] and the binary. The definitions follow
//! the project's benchmark reference exactly, so the figures compare with the C++ peers in
//! `bench/peers/` (run side by side by `bench/compare-pools.sh`).
//!
//! - [`pool`]: spawn, tree, parallel_for, wake_hot and wake_cold on every pool kind and on
//!   rayon, interleaved rep by rep.
//! - [`profiler`]: ns per recorded event, clock costs, and profiled-vs-unprofiled ratios.
//! - [`stats`]: median and percentiles.
//! - [`report`]: the JSON line format and the human table.
#![forbid(unsafe_code)]

pub mod pool;
pub mod profiler;
pub mod report;
pub mod stats;
