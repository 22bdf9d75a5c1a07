//! GPU streams with CUDA's semantics over two backends, real (cudarc) and simulated, and
//! device discovery. [`stream`] has the semantics; [`discover`] picks the backend.

pub mod cuda;
pub mod discover;
mod queue;
pub mod sim;
pub mod stream;
pub mod work;
