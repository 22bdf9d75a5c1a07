//! What the calling thread is doing for the engine: the op it is running (so a wait from
//! inside an op is refused instead of deadlocking), and the ready ops it runs next
//! (continuations). How an op runs is `opr.rs`'s, which comes after this file: the
//! continuation loop takes the runner as a parameter (a generic one, so the call is direct).
#![forbid(unsafe_code)]

use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};

use super::block::OpHandle;
use super::OpName;

// Thread-local: an op runs on one thread (ops run inline nest on its stack), so "which op
// is running here" is the thread's.
engine_thread_local! {
    /// The op this thread is running, innermost first (ops run inline can nest).
    static RUNNING: Cell<Option<(OpName, usize)>> = Cell::new(None);
}

/// Marks the calling thread as running op `name` (block address `block`) until dropped.
pub(crate) struct RunningOp {
    previous: Option<(OpName, usize)>,
}

impl RunningOp {
    pub(crate) fn enter(name: OpName, block: usize) -> Self {
        RunningOp {
            previous: RUNNING.with(|running| running.replace(Some((name, block)))),
        }
    }
}

impl Drop for RunningOp {
    fn drop(&mut self) {
        RUNNING.with(|running| running.set(self.previous));
    }
}

/// The op the calling thread is running, if any.
pub(crate) fn running_op() -> Option<OpName> {
    RUNNING.with(|running| running.get().map(|(name, _)| name))
}

/// Whether the calling thread is running the op whose block is at `block`.
pub(crate) fn is_running(block: usize) -> bool {
    RUNNING.with(|running| running.get().is_some_and(|(_, address)| address == block))
}

/// How many ready ops a worker may run back to back as continuations before it goes back to
/// its pool's queue (so queued ops are not starved by a long chain).
const CONTINUATION_BUDGET: u32 = 64;

// Thread-local: a continuation is the op this worker runs next; no other thread may take it.
engine_thread_local! {
    /// A ready op this worker will run right after the current one, instead of queueing it.
    static CONTINUATION: RefCell<Option<OpHandle>> = RefCell::new(None);
    /// Continuations this thread may still take, plus one; 0 while it runs no op.
    static CONTINUATIONS_LEFT: Cell<u32> = Cell::new(0);
}

/// Why [`offer_continuation`] gave an op back.
pub(crate) enum Refused {
    /// The thread runs no op, or the slot holds another continuation: queue the op where
    /// another worker may take it.
    Busy(OpHandle),
    /// The thread ran its budget of continuations: queue the op behind the others (the
    /// thread's drainer comes back to the queue right after the op it runs).
    BudgetSpent(OpHandle),
}

/// Offers a ready op to run right after the op this worker is running. Refused (the op is
/// given back, to be queued) while no op runs here, when the slot is taken, or when the budget
/// is spent.
pub(crate) fn offer_continuation(op: OpHandle) -> Result<(), Refused> {
    let left = CONTINUATIONS_LEFT.with(Cell::get);
    match left {
        0 => return Err(Refused::Busy(op)),
        1 => return Err(Refused::BudgetSpent(op)),
        _ => {}
    }
    CONTINUATION.with(|slot| {
        let mut slot = slot.borrow_mut();
        if slot.is_some() {
            return Err(Refused::Busy(op));
        }
        *slot = Some(op);
        CONTINUATIONS_LEFT.with(|cell| cell.set(left - 1));
        Ok(())
    })
}

/// Runs `op` (running a ready op), then every continuation it and its successors offered,
/// each through `run` (which runs a ready op: `opr::run_ready`). Nested calls (an op run
/// inline inside another, a continuation) leave the draining to the outermost. The count of
/// continuations left stays at 1 or above while the outermost call runs (a spent budget
/// refuses offers at 1), so a continuation never becomes an outermost call of its own: a
/// chain runs at one stack depth however long it is.
pub(crate) fn run_with_continuations(op: impl FnOnce(), run: impl Fn(OpHandle)) {
    if CONTINUATIONS_LEFT.with(Cell::get) != 0 {
        return op();
    }
    CONTINUATIONS_LEFT.with(|cell| cell.set(CONTINUATION_BUDGET + 1));
    op();
    while let Some(next) = CONTINUATION.with(|slot| slot.borrow_mut().take()) {
        // Ops report their own panics; this only keeps a panicking observer from stranding
        // the continuations after it.
        let _ = panic::catch_unwind(AssertUnwindSafe(|| run(next)));
    }
    CONTINUATIONS_LEFT.with(|cell| cell.set(0));
}
