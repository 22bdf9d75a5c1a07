//! Where ops execute: the worker pools behind the engine's device queues.
//!
//! - [`cpu`]: per CPU device a worker pool (one of our [`Pool`](crate::pool::Pool)s, kind
//!   selectable, live-resizable), and the one CPU priority pool that runs `CpuPrioritized`
//!   ops highest priority first.
//! - [`gpu`]: GPU compute and copy workers arrive with the GPU backend; until then a push to a
//!   GPU context is refused with [`EngineError::NoGpuBackend`](crate::engine::EngineError).
//!
//! Threads are named so traces and the dashboard read well: `cpu0-w3`, `cpu-prio-1`.

pub mod cpu;
pub mod gpu;
