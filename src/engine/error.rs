//! Engine errors, and the shared slot that carries an op's failure to the vars it wrote.
//!
//! A failing op gets one [`ErrorSlot`]; every var the op writes, every op that inherits the
//! error by reading or writing such a var, and the engine's list of failures all hold the same
//! slot. Reporting is per var: `wait_for_var` reports the failure to that var's waiter and
//! clears that var alone, so every var the failure reached reports it once (MXNet's shared
//! `exception_ptr` clears them all at the first report, which hides the failure from the
//! other vars' waiters). `wait_for_all` reports the first failure no wait has reported yet,
//! then empties every slot, so no var carries a failure after it.
//!
//! Above the value files (`name.rs`, `types.rs`, `settings.rs`), below everything that can
//! fail. The two checks of those values whose failure is an [`EngineError`] are written here:
//! parsing a [`Context`] and checking an [`EngineSetting`]'s worker count.
#![forbid(unsafe_code)]

use std::fmt;
use std::str::FromStr;

use super::settings::EngineSetting;
use super::types::{Context, DeviceType};
use super::OpName;
use crate::device::stream::{BackendKind, StreamError};
use crate::error_chain::Cut;
use crate::pool::PoolError;
use crate::sync::{Arc, AtomicBool, Mutex, Ordering};

/// The error an op reports through [`Completion::fail`](super::Completion::fail) or returns
/// from a `push_sync` body.
pub type OpError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What an op returns: `Ok(())` or the reason it failed.
pub type OpResult = Result<(), OpError>;

/// An op's error once it is stored: shared, so each var the failure reached can report it.
// std's `Arc`, not the loom facade's: a value handed to users, not a synchronization point.
pub type SharedOpError = std::sync::Arc<dyn std::error::Error + Send + Sync + 'static>;

/// Why an op failed.
#[derive(Clone, Debug)]
pub enum FailureCause {
    /// The op reported an error.
    Error(SharedOpError),
    /// The op panicked; the panic's message.
    Panic(String),
    /// The op dropped its [`Completion`](super::Completion) without calling it.
    DroppedCompletion,
}

impl fmt::Display for FailureCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FailureCause::Error(error) => write!(f, "{error}"),
            FailureCause::Panic(message) => write!(f, "panicked: {message}"),
            FailureCause::DroppedCompletion => {
                f.write_str("dropped its completion without calling it")
            }
        }
    }
}

/// One op's failure: the op's name and why.
#[derive(Clone, Debug)]
pub struct OpFailure {
    /// The name the failing op was pushed with.
    pub op: OpName,
    /// Why it failed.
    pub cause: FailureCause,
}

impl fmt::Display for OpFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.cause {
            FailureCause::DroppedCompletion => write!(f, "op `{}` {}", self.op, self.cause),
            cause => write!(f, "op `{}` failed: {cause}", self.op),
        }
    }
}

/// The message already quotes the op's error, so the chain goes on with that error's own
/// source: a `{:#}` or cause-by-cause print names each cause once.
impl std::error::Error for OpFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.cause {
            FailureCause::Error(error) => error.source(),
            _ => None,
        }
    }
}

/// A failure shared by everything it tainted: each var reports it once; `wait_for_all`
/// empties it.
#[derive(Debug)]
pub(crate) struct ErrorSlot {
    failure: Mutex<Option<OpFailure>>,
    /// Whether some wait has reported the failure (`wait_for_all` reports only those none has).
    reported: AtomicBool,
}

/// A handle to an [`ErrorSlot`].
pub(crate) type ErrorRef = Arc<ErrorSlot>;

impl ErrorSlot {
    pub(crate) fn new(failure: OpFailure) -> ErrorRef {
        Arc::new(ErrorSlot {
            failure: Mutex::new(Some(failure)),
            reported: AtomicBool::new(false),
        })
    }

    /// Whether the failure is still held (`wait_for_all` has not emptied the slot).
    pub(crate) fn is_set(&self) -> bool {
        self.failure.lock().is_some()
    }

    /// The failure, for one var's waiter; the slot keeps it for the other vars it reached.
    pub(crate) fn report(&self) -> Option<OpFailure> {
        let failure = self.failure.lock().clone();
        if failure.is_some() {
            self.reported.store(true, Ordering::Release);
        }
        failure
    }

    /// Empties the slot (later holders see no failure); returns the failure unless a wait has
    /// reported it already.
    pub(crate) fn take_unreported(&self) -> Option<OpFailure> {
        let failure = self.failure.lock().take()?;
        (!self.reported.swap(true, Ordering::AcqRel)).then_some(failure)
    }
}

/// Everything the engine API can refuse or report. Messages name the thing and the fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// An op failed (or inherited the failure of an op whose output it read or wrote).
    #[error(transparent)]
    OpFailed(#[from] OpFailure),
    /// A wait was called on a thread that is running an op: it would wait for itself.
    #[error(
        "wait called from inside op `{op}`, which is running on an engine thread: the wait would \
         deadlock on its own op; push a dependent op instead, or wait from outside the engine"
    )]
    WaitInsideWorker {
        /// The op running on the calling thread.
        op: OpName,
    },
    /// A push named a GPU context, but the engine has no GPUs (none selected, or an engine
    /// kind without GPU workers).
    #[error(
        "cannot run op `{op}` on {context}: this engine has no GPU backend; GPU ops run on the \
         per-device engine with --gpus auto, cuda or sim:N (ENGINETOP_GPUS, \
         EngineOptions::gpus), or run the op on cpu(i)"
    )]
    NoGpuBackend {
        /// The op pushed.
        op: OpName,
        /// The GPU context it named.
        context: Context,
    },
    /// The GPU backend could not be set up for an op, or a GPU's workers not started. The
    /// message quotes the GPU layer's error, which names the fix (so it is not also the
    /// error's `source`: a printed chain names it once).
    #[error("cannot run op `{op}` on {context}: {reason}")]
    Gpu {
        /// The op pushed.
        op: OpName,
        /// The GPU context it named.
        context: Context,
        /// What the GPU layer said (it names the fix).
        reason: StreamError,
    },
    /// A GPU index beyond the backend's devices.
    #[error(
        "cannot run op `{op}` on {context}: the {backend} backend has {count} GPU(s), gpu0 to \
         gpu{last}; use one of those (--gpus sim:N simulates N)", last = .count.saturating_sub(1)
    )]
    NoSuchGpu {
        /// The op pushed.
        op: OpName,
        /// The context it named.
        context: Context,
        /// The backend.
        backend: BackendKind,
        /// How many GPUs it has.
        count: u32,
    },
    /// The selected GPUs cannot be used (resolving the selection, reopening at start). The
    /// message quotes the GPU layer's error (which is therefore not its `source`).
    #[error("the GPUs asked for cannot be used: {0}")]
    GpuSetup(StreamError),
    /// A CPU device index beyond the engine's device slots.
    #[error("cannot run op `{op}` on {context}: only cpu0 to cpu{} exist; use one of those", .max - 1)]
    NoSuchDevice {
        /// The op pushed.
        op: OpName,
        /// The context it named.
        context: Context,
        /// How many CPU devices there are.
        max: u32,
    },
    /// A push or wait while the engine is stopped.
    #[error("the {engine} engine is stopped: call start() before pushing")]
    Stopped {
        /// The engine's kind.
        engine: super::EngineKind,
    },
    /// A push used a var that `delete_variable` already deleted.
    #[error("op `{op}` uses var #{var}, which was deleted; create a new var with new_variable()")]
    VarDeleted {
        /// The op pushed.
        op: OpName,
        /// The var's id.
        var: u64,
    },
    /// A context that is not a CPU or GPU with an index.
    #[error("`{}` is not a context: write cpu0, cpu1, gpu0, ...", Cut(.0))]
    BadContext(String),
    /// A worker pool could not be started or resized. The message quotes the pool's error,
    /// which names the limit and the fix (so it is not also the `source`: a printed chain
    /// names it once).
    #[error("the engine's worker pool could not be started or resized: {0}")]
    Pool(PoolError),
    /// A worker count out of its range (see [`EngineSetting`]).
    #[error(
        "the {engine} engine cannot have {setting} = {requested}: {}",
        super::settings::count_fix(*.requested, *.max)
    )]
    WorkerCount {
        /// The engine's kind.
        engine: super::EngineKind,
        /// Which count.
        setting: EngineSetting,
        /// The count asked for.
        requested: usize,
        /// The most this engine allows.
        max: usize,
    },
    /// A worker count the engine does not have.
    #[error("the {engine} engine has no {setting} to set: {}", .setting.instead(*.engine))]
    NoSuchSetting {
        /// The engine's kind.
        engine: super::EngineKind,
        /// The setting asked for.
        setting: EngineSetting,
    },
    /// A priority-pool thread could not be started.
    #[error("could not start engine thread `{name}`: {reason}")]
    Spawn {
        /// The thread's name.
        name: String,
        /// The OS error.
        reason: String,
    },
}

/// The worker-count check of `settings.rs`, here because its error names the setting.
impl EngineSetting {
    /// Checks `threads` for this setting of `engine` built with `max_threads`.
    pub(crate) fn check(
        self,
        engine: super::EngineKind,
        threads: usize,
        max_threads: usize,
    ) -> Result<(), EngineError> {
        let Some(max) = self.limit(engine, max_threads) else {
            return Err(EngineError::NoSuchSetting {
                engine,
                setting: self,
            });
        };
        if (1..=max).contains(&threads) {
            return Ok(());
        }
        Err(EngineError::WorkerCount {
            engine,
            setting: self,
            requested: threads,
            max,
        })
    }
}

/// Parsing a context of `types.rs`, here because its error names the text.
impl FromStr for Context {
    type Err = EngineError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || EngineError::BadContext(text.to_string());
        let trimmed = text.trim().to_ascii_lowercase();
        let (device, rest) = if let Some(rest) = trimmed.strip_prefix("cpu") {
            (DeviceType::Cpu, rest)
        } else if let Some(rest) = trimmed.strip_prefix("gpu") {
            (DeviceType::Gpu, rest)
        } else {
            return Err(bad());
        };
        let digits = match rest.strip_prefix('(') {
            Some(inner) => inner.strip_suffix(')').ok_or_else(bad)?,
            None => rest.strip_prefix(':').unwrap_or(rest),
        }
        .trim();
        let id = match digits {
            "" if rest.is_empty() => 0,
            _ => digits.parse().map_err(|_| bad())?,
        };
        Ok(Context { device, id })
    }
}

impl From<PoolError> for EngineError {
    fn from(error: PoolError) -> Self {
        EngineError::Pool(error)
    }
}

impl EngineError {
    /// The failure, if this error reports a failed op.
    pub fn failure(&self) -> Option<&OpFailure> {
        match self {
            EngineError::OpFailed(failure) => Some(failure),
            _ => None,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::error::Error;

    use super::*;

    /// The error's message and its causes', `: `-joined (what `{:#}` of anyhow prints).
    fn chain_text(error: &dyn Error) -> String {
        let mut text = error.to_string();
        let mut cause = error.source();
        while let Some(next) = cause {
            text = format!("{text}: {next}");
            cause = next.source();
        }
        text
    }

    fn no_cuda() -> StreamError {
        StreamError::CudaUnavailable {
            reason: "no driver".to_string(),
        }
    }

    #[test]
    fn gpu_errors_name_the_gpu_layers_error_once() {
        let gpu = EngineError::Gpu {
            op: OpName::from("h2d0"),
            context: Context::gpu(0),
            reason: no_cuda(),
        };
        assert_eq!(
            chain_text(&gpu),
            "cannot run op `h2d0` on gpu0: CUDA is not available: no driver; use --gpus \
             sim:1 for a simulated GPU"
        );
        assert_eq!(
            chain_text(&EngineError::GpuSetup(no_cuda())),
            "the GPUs asked for cannot be used: CUDA is not available: no driver; use --gpus \
             sim:1 for a simulated GPU"
        );
    }

    /// A pool refusal says why (the limit and the fix) in the engine error's own message, and
    /// a printed chain says it once.
    #[test]
    fn pool_errors_carry_their_reason_in_the_message_once() {
        let error = EngineError::from(PoolError::TooManyThreads {
            pool: "cpu0".to_string(),
            requested: 9,
            max: 8,
        });
        let message = error.to_string();
        assert!(
            message.contains("max_threads = 8") && message.contains("larger max_threads"),
            "{message}"
        );
        assert!(error.source().is_none());
        assert_eq!(chain_text(&error), message);
        assert_eq!(crate::error_chain::text(&error), message);
    }
}
