//! [`RunError`]: why a workload run could not start or did not finish.
#![forbid(unsafe_code)]

use crate::engine::Context;
use crate::engine::{EngineError, FailureCause, OpFailure};
use crate::pool::{PoolError, PoolKind};
use crate::workload::device::ContextText;
use crate::workload::graph::bytes_text;
use crate::workload::Dtype;

/// Why a run could not start or did not finish. Messages name the op, tensor or setting, and
/// the fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// An op failed: its kernel returned an error or panicked.
    #[error("op \"{op}\" failed: {cause}")]
    OpFailed {
        /// The op's name.
        op: String,
        /// Why (the kernel's message, or `panicked: ...`).
        cause: String,
    },
    /// The engine refuses an op's device (a GPU context without a GPU backend, a CPU device
    /// beyond the engine's).
    #[error(
        "op \"{op}\" runs on {shown}, which this run cannot use: {reason}; or run the \
         workload on the CPU (e.g. --set device=cpu if it has that parameter)",
        shown = ContextText(*device)
    )]
    DeviceRefused {
        /// The first op on that device.
        op: String,
        /// The device.
        device: Context,
        /// Which setting refuses it, and its flag.
        reason: String,
    },
    /// A tensor a compute kernel touches is not `f32`.
    #[error(
        "tensor \"{tensor}\" is {dtype}, but op \"{op}\" ({kernel}) computes in f32 only; \
         declare it with dtype = \"f32\""
    )]
    UnsupportedDtype {
        /// The tensor.
        tensor: String,
        /// Its dtype.
        dtype: Dtype,
        /// An op whose kernel touches it.
        op: String,
        /// That op's kernel.
        kernel: &'static str,
    },
    /// A tensor's buffer could not be allocated.
    #[error(
        "tensor \"{tensor}\" needs {} ({bytes} bytes), which could not be allocated; make the \
         workload smaller with --set (e.g. a smaller size or batch)",
        bytes_text(*bytes)
    )]
    OutOfMemory {
        /// The tensor.
        tensor: String,
        /// Its size in bytes.
        bytes: u64,
    },
    /// The tensors need more memory than the machine has available.
    #[error(
        "the workload's tensors need {needed}, but only {available} of memory is available \
         ({source_name}); make the workload smaller with --set (e.g. a smaller size or batch)",
        needed = bytes_text(*needed),
        available = bytes_text(*available),
    )]
    NotEnoughMemory {
        /// Bytes the tensors need.
        needed: u64,
        /// Bytes available.
        available: u64,
        /// Where `available` comes from (`MemAvailable in /proc/meminfo`).
        source_name: &'static str,
    },
    /// The engine could not be started (or failed outside an op).
    #[error("the {what} failed")]
    Engine {
        /// What was being done.
        what: &'static str,
        /// The engine's error.
        #[source]
        source: EngineError,
    },
    /// The intra-op pool could not be started or resized.
    #[error("the intra-op pool ({threads} `{kind}` threads) could not be started or resized")]
    IntraPool {
        /// The pool kind.
        kind: PoolKind,
        /// Threads asked for.
        threads: usize,
        /// Why.
        #[source]
        source: PoolError,
    },
    /// A run of no iterations.
    #[error("nothing to run: ask for at least 1 iteration, or a duration above 0")]
    NothingToRun,
}

impl RunError {
    /// An engine error, as an op failure when it is one.
    pub(super) fn from_engine(what: &'static str, error: EngineError) -> Self {
        match error {
            EngineError::OpFailed(failure) => Self::from_failure(failure),
            source => RunError::Engine { what, source },
        }
    }

    fn from_failure(failure: OpFailure) -> Self {
        let cause = match &failure.cause {
            FailureCause::DroppedCompletion => "it dropped its completion".to_string(),
            FailureCause::Error(error) => crate::error_chain::text(&**error),
            cause => cause.to_string(),
        };
        RunError::OpFailed {
            op: failure.op.as_str().to_string(),
            cause,
        }
    }

    /// The failed op's name, if this reports an op failure.
    pub fn failed_op(&self) -> Option<&str> {
        match self {
            RunError::OpFailed { op, .. } => Some(op),
            _ => None,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::engine::OpName;

    #[test]
    fn an_op_failure_keeps_its_errors_causes() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let reading = anyhow::Error::new(io).context("reading the weights");
        let failure = OpFailure {
            op: OpName::new("load"),
            cause: FailureCause::Error(crate::engine::OpError::from(reading).into()),
        };
        let error = RunError::from_engine("wait", EngineError::OpFailed(failure));
        assert_eq!(
            error.to_string(),
            "op \"load\" failed: reading the weights: no such file"
        );
        assert_eq!(error.failed_op(), Some("load"));
    }
}
