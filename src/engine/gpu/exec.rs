//! Running one op with GPUs around: the prologue before its body (`before_run`) and the
//! epilogue when it completes (`finish`), per the protocol of the [module docs](super).
#![forbid(unsafe_code)]

use std::cell::RefCell;
// std's `Arc`: handles to trait objects, which loom's `Arc` cannot coerce to `dyn`.
use std::sync::Arc;

use smallvec::SmallVec;

use super::fence::{DeviceOutcome, Fence};
use super::hub::GpuHub;
use super::op_stream::{marker_unit, OpState, OpStream};
use super::table::AccessRecord;
use super::GpuSyncMode;
use crate::device::gpu::current_lane;
use crate::device::stream::{StreamError, StreamKind};
use crate::device::work::OpTag;
use crate::engine::block::OpHandle;
use crate::engine::core::{Core, GpuPath};
use crate::engine::current;
use crate::engine::error::{ErrorRef, FailureCause, OpFailure};
use crate::engine::opr::OpBlock;
use crate::engine::var::{Access, Var};
use crate::engine::{FnProperty, OpName};
use crate::sync::{thread_local, Arc as SyncArc, Mutex};

// Thread-local: an op body finds its stream the way a CUDA kernel finds the current stream,
// from the worker thread running it, without a parameter through every kernel call.
thread_local! {
    /// The stream of the GPU op this worker is running (set by its prologue).
    #[allow(clippy::missing_const_for_thread_local)] // loom's thread_local! has no const form
    static CURRENT: RefCell<Option<OpStream>> = RefCell::new(None);
}

/// The stream of the GPU op the calling thread is running, if any.
pub(super) fn current_op_stream() -> Option<OpStream> {
    CURRENT.with(|current| current.borrow().clone())
}

fn address(block: &OpBlock) -> usize {
    block as *const OpBlock as usize
}

/// The stream kind an op of property `prop` runs on.
fn stream_kind(prop: FnProperty) -> StreamKind {
    match prop {
        FnProperty::CopyToGpu => StreamKind::CopyH2D,
        FnProperty::CopyFromGpu => StreamKind::CopyD2H,
        _ => StreamKind::Compute,
    }
}

/// A stream error as an op's failure cause.
fn stream_failure(error: StreamError) -> FailureCause {
    FailureCause::Error(Arc::new(error))
}

impl GpuPath for GpuHub {
    /// A CPU op (or a GPU op without a stream) waits on the host for the device work its vars
    /// need; a GPU op on a worker gets its stream and orders it after that work (event mode).
    fn before_run(&self, block: &OpBlock) {
        if block.ctx.is_cpu() {
            if self.table.is_tracking() {
                self.table.host_wait(&block.deps);
            }
            return;
        }
        self.start_gpu_op(block);
    }

    fn finish(&self, block: OpHandle, inherited: Option<ErrorRef>, result: Result<(), OpFailure>) {
        let state = self.in_flight.lock().remove(&address(&block));
        let Some(state) = state else {
            // No stream was used (the op did not run on a GPU worker): nothing on the device.
            return Core::complete(block, inherited, result);
        };
        let on_worker = current::is_running(address(&block));
        if on_worker {
            CURRENT.with(|current| current.borrow_mut().take());
        }
        let done = Done {
            block,
            inherited,
            result,
        };
        match (self.sync(), on_worker) {
            (GpuSyncMode::Event, _) => self.complete_early(done, &state),
            (GpuSyncMode::PerOp, true) => complete_after_sync(done, &state),
            (GpuSyncMode::PerOp, false) => complete_behind_fence(done, &state),
        }
    }

    fn host_wait_var(&self, var: &Var) {
        if self.table.is_tracking() {
            self.table.host_wait_var(var);
        }
    }
}

impl GpuHub {
    fn start_gpu_op(&self, block: &OpBlock) {
        let Some(lane) = current_lane() else {
            // Not on a GPU worker (the workers are gone): the body gets no stream.
            self.table.host_wait(&block.deps);
            return;
        };
        let state = Arc::new(OpState {
            // The op's own id: its stream events then name the op its events name.
            tag: OpTag::named(block.id, block.name.id()),
            stream: Arc::clone(lane.stream(stream_kind(block.prop))),
            device: Arc::clone(lane.device()),
            outcome: Arc::new(DeviceOutcome::default()),
        });
        if self.sync() == GpuSyncMode::Event {
            self.order_after_producers(block, &state);
        }
        self.in_flight
            .lock()
            .insert(address(block), Arc::clone(&state));
        CURRENT.with(|current| *current.borrow_mut() = Some(OpStream(state)));
    }

    /// The prologue: the op's stream waits for the records its vars need.
    fn order_after_producers(&self, block: &OpBlock, state: &OpState) {
        let required = self.table.required(&block.deps);
        if block.prop == FnProperty::DeleteVar {
            // Its body frees data on the host: the device work on it must be finished.
            required.iter().for_each(|record| record.fence.wait());
            return;
        }
        let own = state.stream.id();
        for record in required.iter().filter(|record| record.stream != own) {
            match &record.event {
                Some(event) => {
                    if let Err(error) = state.stream.wait_event(event) {
                        state.outcome.note(stream_failure(error));
                    }
                }
                None => record.fence.wait(),
            }
        }
    }
}

/// An op whose completion was called, waiting for its epilogue.
struct Done {
    block: OpHandle,
    inherited: Option<ErrorRef>,
    result: Result<(), OpFailure>,
}

impl Done {
    /// Completes the op for the engine, failing it with the device's `cause` unless it failed
    /// already or inherited a failure (a device poisoned by that failure is no news).
    fn complete(self, cause: Option<FailureCause>) {
        let name = self.block.name;
        let cause = cause.filter(|_| self.inherited.is_none());
        let result = self.result.and_then(|()| match cause {
            Some(cause) => Err(OpFailure { op: name, cause }),
            None => Ok(()),
        });
        Core::complete(self.block, self.inherited, result);
    }
}

impl GpuHub {
    /// Event mode: fence unit, event, records, then the op completes (work still in flight).
    fn complete_early(&self, done: Done, state: &OpState) {
        let core = SyncArc::clone(done.block.core.as_ref().expect("a pushed op has an engine"));
        core.hold_pending(); // lowered by the fence unit's callback
        let fence = Arc::new(Fence::default());
        let on_fence = fence_callback(
            SyncArc::clone(&core),
            done.block.name,
            Arc::clone(&fence),
            Arc::clone(&state.outcome),
            // An op that inherited a failure reports no device failure of its own.
            (done.inherited.is_none()).then(|| written_vars(&done.block)),
        );
        if let Err(error) = state
            .stream
            .launch(marker_unit(state.tag).on_complete(on_fence))
        {
            // Nothing will call the callback: fail the op now (its writes carry the error).
            fence.set();
            core.release_pending();
            let cause = state.outcome.take().unwrap_or(stream_failure(error));
            return done.complete(Some(cause));
        }
        let record = AccessRecord {
            stream: state.stream.id(),
            event: record_event(state),
            fence,
        };
        self.table.record(&done.block.deps, &record);
        done.complete(None);
    }
}

/// An event recorded on the op's stream now, or `None` (the failure goes to the outcome,
/// which the fence reports; waiters fall back to the fence).
fn record_event(state: &OpState) -> Option<crate::device::stream::Event> {
    let recorded = state
        .device
        .new_event()
        .and_then(|event| state.stream.record(&event).map(|()| event));
    match recorded {
        Ok(event) => Some(event),
        Err(error) => {
            state.outcome.note(stream_failure(error));
            None
        }
    }
}

/// The vars `block` writes (the fence taints them if its device work fails).
fn written_vars(block: &OpBlock) -> SmallVec<[Var; 2]> {
    block
        .deps
        .iter()
        .filter(|dep| dep.access == Access::Write)
        .map(|dep| dep.var.to_var())
        .collect()
}

/// The callback of an event-mode op's fence unit: stores a failure (engine list, the written
/// vars `reports_to`, unless `None`), sets the fence, then lowers the pending count (last: a
/// waiter for all may return then).
fn fence_callback(
    core: SyncArc<Core>,
    name: OpName,
    fence: Arc<Fence>,
    outcome: Arc<DeviceOutcome>,
    reports_to: Option<SmallVec<[Var; 2]>>,
) -> impl FnOnce(Result<(), StreamError>) + Send + 'static {
    move |unit| {
        let cause = outcome.take().or(unit.err().map(stream_failure));
        if let (Some(cause), Some(writes)) = (cause, reports_to) {
            let slot = core.record_failure(OpFailure { op: name, cause });
            writes.iter().for_each(|var| var.0.cell.taint(&slot));
        }
        fence.set();
        core.release_pending();
    }
}

/// Per-op sync mode, on the worker: synchronize the stream, then complete.
fn complete_after_sync(done: Done, state: &OpState) {
    let synced = state.stream.synchronize();
    let cause = state.outcome.take().or(synced.err().map(stream_failure));
    done.complete(cause);
}

/// Per-op sync mode, completion called elsewhere (maybe from this stream's own callback,
/// which must not wait for the stream): complete from a fence unit's callback.
fn complete_behind_fence(done: Done, state: &OpState) {
    let slot = Arc::new(Mutex::new(Some(done)));
    let waiting = Arc::clone(&slot);
    let outcome = Arc::clone(&state.outcome);
    let unit = marker_unit(state.tag).on_complete(move |unit| {
        if let Some(done) = waiting.lock().take() {
            done.complete(outcome.take().or(unit.err().map(stream_failure)));
        }
    });
    if let Err(error) = state.stream.launch(unit) {
        if let Some(done) = slot.lock().take() {
            done.complete(Some(state.outcome.take().unwrap_or(stream_failure(error))));
        }
    }
}
