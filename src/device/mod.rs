//! Where ops execute: the worker pools behind the engine's device queues, and the GPU streams.
//!
//! - [`cpu`]: per CPU device a worker pool (one of our [`Pool`](crate::pool::Pool)s, kind
//!   selectable, live-resizable), and the one CPU priority pool that runs `CpuPrioritized`
//!   ops highest priority first.
//! - [`gpu`]: GPU compute and copy workers for the engine's GPU contexts.
//! - [`stream`]: GPU streams with CUDA's semantics (FIFO, async launch, events, cross-stream
//!   waits, sticky faults) over two backends, [`cuda`] (cudarc, loaded at run time) and
//!   [`sim`] (a simulated GPU with a roofline cost model); [`work`] describes a unit of GPU
//!   work; [`discover`] lists devices and picks the backend for `--gpus`.
//!
//! - [`identity`]: the typed device, pool and lane every layer above names them by.
//!
//! Threads are named so traces and the dashboard read well, from their pool's identity
//! ([`identity::PoolId::thread_name`]): `cpu0-w3`, `engine-w0`, `cpu-prio-1`,
//! `gpu0-compute-0`.

pub mod cpu;
pub mod cuda;
pub mod discover;
pub mod gpu;
pub mod identity;
mod priority;
mod queue;
pub mod sim;
pub mod stream;
pub mod work;
