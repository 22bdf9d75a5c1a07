//! What a GPU op's body sees: [`OpStream`], its worker's stream, through
//! [`RunContext::stream`].
#![forbid(unsafe_code)]

use std::fmt;
use std::panic::{self, AssertUnwindSafe};
// std's `Arc`: handles to trait objects, which loom's `Arc` cannot coerce to `dyn`.
use std::sync::Arc;

use super::exec::current_op_stream;
use super::fence::DeviceOutcome;
use crate::device::stream::{GpuDevice, Stream, StreamError, StreamId};
use crate::device::work::{GpuWork, HostGate, OpTag};
use crate::engine::error::FailureCause;
use crate::engine::opr::RunContext;
use crate::pool::panic_message;

/// One GPU op's view of its worker: the stream it launches on, and where its device work
/// reports failures.
pub(crate) struct OpState {
    pub(crate) tag: OpTag,
    pub(crate) stream: Arc<dyn Stream>,
    pub(crate) device: Arc<dyn GpuDevice>,
    pub(crate) outcome: Arc<DeviceOutcome>,
}

/// The stream a GPU op's body launches its work on (its worker's stream for the op's kind:
/// compute, h2d for `CopyToGpu`, d2h for `CopyFromGpu`).
///
/// Launch the op's work, then call the op's completion; the engine orders the stream after
/// the op's dependencies before the body runs and orders dependents after everything
/// launched here (see `engine::gpu`).
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::sync::Arc;
/// use enginetop::device::sim::{SimBackend, SimModel};
/// use enginetop::device::work::GpuWork;
/// use enginetop::engine::{Context, Engine, EngineKind, EngineOptions, OpSpec};
///
/// let options = EngineOptions::new(EngineKind::PerDevice, 1)
///     .gpu_backend(Arc::new(SimBackend::new(1, SimModel::instant())));
/// let engine = Engine::new(options).unwrap();
/// let x = engine.new_variable();
/// let data = Arc::new(AtomicU32::new(0));
/// let on_gpu = data.clone();
/// let spec = OpSpec::new("scale").ctx(Context::gpu(0)).writes(std::slice::from_ref(&x));
/// engine
///     .push_sync(spec, move |run| {
///         let stream = run.stream().expect("a GPU op runs on a GPU worker");
///         stream.launch(GpuWork::gemm(64, 64, 64))?;
///         stream.launch_host(move || on_gpu.store(7, Ordering::Relaxed))?; // in stream order
///         Ok(())
///     })
///     .unwrap();
/// engine.wait_for_var(&x).unwrap(); // waits for the device work too
/// assert_eq!(data.load(Ordering::Relaxed), 7);
/// ```
#[derive(Clone)]
pub struct OpStream(pub(crate) Arc<OpState>);

impl OpStream {
    /// The stream.
    pub fn stream(&self) -> &dyn Stream {
        &*self.0.stream
    }

    /// Which stream (`gpu0-compute-1`, `gpu0-h2d-0`, ...).
    pub fn id(&self) -> StreamId {
        self.0.stream.id()
    }

    /// The device (its info, its events).
    pub fn device(&self) -> &dyn GpuDevice {
        &*self.0.device
    }

    /// The op, as the stream's profiler events name it.
    pub fn op(&self) -> OpTag {
        self.0.tag
    }

    /// Launches `work`, tagged with the op unless it carries a tag already. If it faults (or
    /// is skipped on a poisoned device) the op fails with that error.
    pub fn launch(&self, mut work: GpuWork) -> Result<(), StreamError> {
        if work.op == OpTag::default() {
            work.op = self.0.tag;
        }
        let outcome = Arc::clone(&self.0.outcome);
        let callback = work.on_complete.take();
        work.on_complete = Some(Box::new(move |result: Result<(), StreamError>| {
            if let Err(error) = &result {
                outcome.note(FailureCause::Error(Arc::new(error.clone())));
            }
            if let Some(callback) = callback {
                callback(result);
            }
        }));
        self.0.stream.launch(work)
    }

    /// Runs `body` on the host in the stream's order: after everything launched before it
    /// has finished, and before anything launched after it starts (CUDA's
    /// `cuLaunchHostFunc`). It is skipped, and the op fails, if the device is poisoned by
    /// then; a panic in it fails the op. Keep it short: it holds up the stream.
    pub fn launch_host(&self, body: impl FnOnce() + Send + 'static) -> Result<(), StreamError> {
        // A callback runs `body` once the unit in front of it has finished; a gate right behind
        // holds the stream until it has (on CUDA the callback thread runs behind the device).
        let behind = HostGate::new();
        let release = behind.clone();
        let outcome = Arc::clone(&self.0.outcome);
        let run = marker_unit(self.0.tag).on_complete(move |result| {
            match result {
                Ok(()) => {
                    if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(body)) {
                        outcome.note(FailureCause::Panic(panic_message(&*payload)));
                    }
                }
                Err(error) => outcome.note(FailureCause::Error(Arc::new(error))),
            }
            release.open();
        });
        self.0.stream.launch(run)?;
        self.0
            .stream
            .launch(GpuWork::host_wait(&behind).op(self.0.tag))
    }
}

impl fmt::Debug for OpStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OpStream({}, {})", self.id(), self.op())
    }
}

/// A unit that takes no device time (a host function that returns at once), to hang a
/// callback on in the stream's order.
pub(crate) fn marker_unit(tag: OpTag) -> GpuWork {
    let open = HostGate::new();
    open.open();
    GpuWork::host_wait(&open).op(tag)
}

impl RunContext {
    /// The stream of the GPU worker running this op: `Some` in the body of an op on a GPU
    /// context (until the op completes), `None` for CPU ops.
    pub fn stream(&self) -> Option<OpStream> {
        if self.ctx.is_cpu() {
            return None;
        }
        current_op_stream()
    }
}
