//! The small value types every push carries: where an op runs ([`Context`]), what kind of op
//! it is ([`FnProperty`]), and which engine runs it ([`EngineKind`]).
//!
//! The bottom of the engine's files: it imports none of them. Parsing a context fails with an
//! [`EngineError`](super::EngineError), which names contexts, so that `FromStr` impl is
//! written in `error.rs`, above this file.
#![forbid(unsafe_code)]

use std::fmt;

/// The kind of device a [`Context`] names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceType {
    /// A CPU device: ops run on its worker pool.
    Cpu,
    /// A GPU device: ops run on its compute and copy workers (needs the GPU backend).
    Gpu,
}

/// Where an op runs: MXNet's `Context`, CPU or GPU `i`. It displays as the dashboard names
/// devices (`cpu0`, `gpu1`) and parses that, MXNet's `gpu(1)` and the workload files' `gpu:1`.
///
/// ```
/// use enginetop::engine::Context;
/// assert_eq!(Context::cpu(0).to_string(), "cpu0");
/// assert_eq!("gpu(1)".parse::<Context>().unwrap(), Context::gpu(1));
/// assert_eq!("gpu:1".parse::<Context>().unwrap(), Context::gpu(1));
/// assert_eq!("gpu1".parse::<Context>().unwrap(), Context::gpu(1));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct Context {
    /// CPU or GPU.
    pub device: DeviceType,
    /// The device's index.
    pub id: u32,
}

impl Context {
    /// CPU device `id`.
    pub const fn cpu(id: u32) -> Self {
        Context {
            device: DeviceType::Cpu,
            id,
        }
    }

    /// GPU device `id`.
    pub const fn gpu(id: u32) -> Self {
        Context {
            device: DeviceType::Gpu,
            id,
        }
    }

    /// Whether this is a CPU context.
    pub fn is_cpu(self) -> bool {
        self.device == DeviceType::Cpu
    }
}

impl Default for Context {
    /// CPU 0, MXNet's default context.
    fn default() -> Self {
        Context::cpu(0)
    }
}

impl fmt::Display for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.device {
            DeviceType::Cpu => write!(f, "cpu{}", self.id),
            DeviceType::Gpu => write!(f, "gpu{}", self.id),
        }
    }
}

/// What kind of op a push is (MXNet's `FnProperty`); picks the queue it runs on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FnProperty {
    /// An ordinary op on its context's worker pool.
    #[default]
    Normal,
    /// A copy from a GPU to the CPU (GPU copy workers; the IO worker of `pooled`).
    CopyFromGpu,
    /// A copy from the CPU to a GPU (GPU copy workers; the IO worker of `pooled`).
    CopyToGpu,
    /// A CPU op for the priority pool, ordered by the push's priority.
    CpuPrioritized,
    /// A GPU op for the device's priority workers.
    GpuPrioritized,
    /// An op that completes asynchronously; run inline on the pusher when ready at push.
    Async,
    /// The op `delete_variable` pushes; run inline on the pusher when ready at push.
    DeleteVar,
    /// An op that runs even when an input carries an error (it still inherits the error).
    NoSkip,
}

impl FnProperty {
    /// Ops of this kind run inline on the pushing thread when they are ready at push.
    pub(crate) fn runs_inline_at_push(self) -> bool {
        matches!(self, FnProperty::Async | FnProperty::DeleteVar)
    }

    /// Ops of this kind are copies (GPU copy workers, or the pooled engine's IO worker).
    pub(crate) fn is_copy(self) -> bool {
        matches!(self, FnProperty::CopyFromGpu | FnProperty::CopyToGpu)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contexts_parse_and_print() {
        for text in ["cpu0", "cpu3", "gpu0", "gpu12"] {
            assert_eq!(text.parse::<Context>().unwrap().to_string(), text);
        }
        for (text, context) in [
            ("cpu", Context::cpu(0)),
            ("cpu(3)", Context::cpu(3)),
            ("gpu:12", Context::gpu(12)),
            ("GPU 2", Context::gpu(2)),
        ] {
            assert_eq!(text.parse::<Context>().unwrap(), context, "{text}");
        }
        for bad in ["tpu(0)", "cpu(x)", "cpu(1", "cpu:", "gpu-1", "cpu1)"] {
            assert!(bad.parse::<Context>().is_err(), "{bad}");
        }
    }
}
