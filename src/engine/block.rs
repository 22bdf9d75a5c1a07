//! Who may touch a pushed op's block, and when: the ownership protocol behind [`OpHandle`]
//! and [`Waiter`] (MXNet's raw `OprBlock*`, with its rules written down and carried by types).
//!
//! # Why not reference counting
//! A pushed op is reachable from several places at once: the queues of the vars it waits on,
//! the task that will run it, and its completion. Counting those references (an `Arc` per op)
//! costs an atomic read-modify-write per queued dependency, one more per task, and a
//! uniqueness check per recycle: on the engine's hot path these cost more than the
//! dependency bookkeeping itself. Instead, exactly one party owns the block at any time, and
//! the other references are plain pointers whose validity follows from the protocol below.
//!
//! # The protocol
//! 1. **Push**: the pusher owns the block (a `Box` from the recycling cache), fills it and
//!    makes an [`OpHandle`] of it. Then [`enqueue`] locks every var of the op (in lock order)
//!    and appends the op to each. A var that cannot grant the op at once queues a [`Waiter`],
//!    a non-owning pointer. If no var queued one, the pusher keeps the handle: the op is ready
//!    and nobody else knows it. Otherwise, still holding every lock, the pusher stores the
//!    number of waiters in the wait count, moves the handle into the op's task and parks the
//!    task in the block; only then does it release the locks, and it never touches the block
//!    again. No grant can happen before that: granting a waiter needs its var's lock.
//! 2. **Grant**: a thread that takes a waiter out of a var queue (under the var's lock) calls
//!    [`Waiter::grant`], one decrement of the wait count. The block is alive: the op cannot be
//!    dispatched, let alone complete, before this grant. The thread whose decrement brings the
//!    count to zero takes the parked task (and with it the handle) out of the block; for every
//!    other thread the decrement is its last access to the block.
//! 3. **Run and complete**: the task owns the handle and gives it to the op's `Completion`,
//!    which releases the vars and turns the handle back into the `Box` for recycling. No
//!    waiter of the op exists by then: every one was granted before the op was dispatched.
//!
//! A handle that is dropped without completing (a task dropped unrun) leaks its block rather
//! than freeing memory a waiter might point to; the engine never drops op tasks.
//!
//! # Why the wait count needs no `+1` held by the pusher
//! MXNet starts the count one above the dependencies so that no completion can dispatch the op
//! while the pusher is still appending. Here the pusher holds every var lock of the op while
//! it appends and stores the count, and a grant needs one of those locks: the count is a plain
//! store, and an op ready at push never touches it at all.
//!
//! The loom models in `var.rs` run this protocol (grants racing with pushes and with each
//! other) on stand-in ops.

use std::fmt;
use std::ptr::NonNull;

use smallvec::SmallVec;

use super::core::Target;
use super::opr::OpBlock;
use super::OpName;
use crate::pool::Task;

/// The owning handle of a pushed op's block (see the module docs). Not `Clone`: there is one.
pub(crate) struct OpHandle(NonNull<OpBlock>);

// SAFETY: the handle owns its block (like a `Box`); every field other threads may touch
// concurrently is atomic or behind the protocol above, and `OpBlock` holds only `Send` data.
unsafe impl Send for OpHandle {}

impl OpHandle {
    /// Takes ownership of a filled block.
    pub(crate) fn new(block: Box<OpBlock>) -> Self {
        OpHandle(NonNull::from(Box::leak(block)))
    }

    /// The block's address (identifies the op while it runs).
    pub(crate) fn address(&self) -> usize {
        self.0.as_ptr() as usize
    }

    /// Gives the block back as a `Box` (at completion, to recycle it).
    pub(crate) fn into_box(self) -> Box<OpBlock> {
        // SAFETY: the handle owns the block, which `new` leaked from a `Box`; at completion
        // every waiter of the op has been granted, so no other pointer to it is in use.
        unsafe { Box::from_raw(self.0.as_ptr()) }
    }

    /// A non-owning pointer for a var queue.
    fn waiter(&self) -> Waiter {
        Waiter(self.0)
    }
}

impl std::ops::Deref for OpHandle {
    type Target = OpBlock;

    fn deref(&self) -> &OpBlock {
        // SAFETY: the handle owns the block, so it is alive; other threads only reach it
        // through waiters, which read the atomic wait count and the parked task, never fields
        // a handle's owner writes.
        unsafe { self.0.as_ref() }
    }
}

impl fmt::Debug for OpHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OpHandle({})", self.name)
    }
}

/// A queued dependency's pointer to its op: granting it is the only thing it can do.
pub(crate) struct Waiter(NonNull<OpBlock>);

// SAFETY: a waiter is granted from whichever thread completes the var's previous op; the
// block it points to is alive until the grant (module docs) and is touched only through its
// atomic wait count and, by the last granter alone, its parked task.
unsafe impl Send for Waiter {}

/// An op made ready by a grant: its task and where it goes.
pub(crate) struct Ready {
    pub(crate) task: Task,
    pub(crate) name: OpName,
    pub(crate) target: Target,
}

impl Waiter {
    /// One grant; the op if that was its last one (the caller dispatches it).
    pub(crate) fn grant(self) -> Option<Ready> {
        // SAFETY: a waiter exists only while its op waits for this grant, so the op cannot
        // have completed and its block is alive (module docs, step 2).
        let block = unsafe { self.0.as_ref() };
        if !block.wait.grant() {
            return None; // the decrement was our last access
        }
        let task = block.task.with_mut(|task| {
            // SAFETY: the count reached zero here: every other waiter was granted and the
            // pusher left before any grant, so this thread alone touches the block now.
            unsafe { (*task).take() }
        });
        Some(Ready {
            task: task.expect("a queued op parks its task before any grant"),
            name: block.name,
            target: block.target(),
        })
    }
}

/// Appends `handle`'s op to every var it depends on, holding all their locks at once (so two
/// threads pushing ops on shared vars get the same order on every one of them). Returns the
/// handle and `body` if every var granted the op at once (it is ready; the caller dispatches
/// it); otherwise parks `into_task(handle, body)` in the block for the last grant.
pub(crate) fn enqueue<B>(
    handle: OpHandle,
    body: B,
    into_task: impl FnOnce(OpHandle, B) -> Task,
) -> Option<(OpHandle, B)> {
    // SAFETY: the handle owns the block, so it is alive now; after the handle moves into the
    // task below, this reference is used only while this thread still holds every var lock of
    // the op, and no grant (so no completion, so no recycling) can happen before they go.
    let block: &OpBlock = unsafe { handle.0.as_ref() };
    let mut locked: SmallVec<[_; 4]> = block.deps.iter().map(|dep| dep.var.0.cell.lock()).collect();
    let mut waiting = 0;
    for (state, dep) in locked.iter_mut().zip(&block.deps) {
        if !state.append(dep.access, || handle.waiter()) {
            waiting += 1;
        }
    }
    if waiting == 0 {
        drop(locked);
        return Some((handle, body));
    }
    block.wait.set(waiting);
    let task = into_task(handle, body);
    block.task.with_mut(|cell| {
        // SAFETY: this thread holds every var lock of the op, so no waiter can be granted yet:
        // nothing else touches the block, and the cell is empty (taken at the last dispatch).
        unsafe { *cell = Some(task) }
    });
    drop(locked); // from here on the block belongs to the grants
    None
}
