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
//! 1. **Push**: the pusher owns the block (a `Box` from the recycling cache), fills it
//!    (dependencies, header and the op's body) and makes an [`OpHandle`] of it. Then
//!    [`enqueue`] locks every var of the op (in lock order) and appends the op to each. A var
//!    that cannot grant the op at once queues a [`Waiter`], a non-owning pointer. If no var
//!    queued one, the pusher keeps the handle: the op is ready and nobody else knows it.
//!    Otherwise, still holding every lock, the pusher stores the number of waiters in the wait
//!    count and gives the handle up; only then does it release the locks, and it never
//!    touches the block again. No grant can happen before that: granting a waiter needs its
//!    var's lock.
//! 2. **Grant**: a thread that takes a waiter out of a var queue (under the var's lock) calls
//!    [`Waiter::grant`], one decrement of the wait count. The block is alive: the op cannot be
//!    dispatched, let alone complete, before this grant. The thread whose decrement brings the
//!    count to zero gets the handle back; for every other thread the decrement is its last
//!    access to the block (and it touches only the count, never a reference to the block).
//! 3. **Run and complete**: whoever holds the handle dispatches the op (a queue holds the
//!    handle), runs its body and gives the handle to the op's `Completion`, which releases the
//!    vars and turns the handle back into the `Box` for recycling.
//!
//! Outside [`enqueue`], a handle is held only for a ready op, and nothing else can reach its
//! block: every waiter was granted and the pusher has let go. That is why the holder may
//! change the block (take its body) through the handle.
//!
//! A handle that is dropped without completing (an op task dropped unrun) leaks its block
//! rather than freeing memory; the engine never drops ops.
//!
//! # Why the wait count needs no `+1` held by the pusher
//! MXNet starts the count one above the dependencies so that no completion can dispatch the op
//! while the pusher is still appending. Here the pusher holds every var lock of the op while
//! it appends and stores the count, and a grant needs one of those locks: the count is a plain
//! store, and an op ready at push never touches it at all.
//!
//! The loom models in `var.rs` run this protocol on real blocks with stand-in bodies: grants
//! racing with pushes and with each other, each op run exactly once and never too early.

use std::fmt;
use std::ptr::NonNull;

use smallbox::space::S8;
use smallbox::{smallbox, SmallBox};
use smallvec::SmallVec;

use super::opr::{Completion, OpBlock, RunContext, WaitCount};

/// An op's body, stored in its block: inline when it fits in 64 bytes (the common case, so a
/// push allocates nothing), boxed otherwise. `FnMut` over a taken `Option`, because a
/// `dyn FnOnce` cannot be called in place. (Defined here, not in `opr.rs`, because
/// `smallbox!` expands to `unsafe` code.)
pub(crate) struct Body(SmallBox<dyn FnMut(RunContext, Completion) + Send, S8>);

impl Body {
    pub(crate) fn new<F>(body: F) -> Self
    where
        F: FnOnce(RunContext, Completion) + Send + 'static,
    {
        let mut body = Some(body);
        Body(smallbox!(move |run, completion| {
            let body = body.take().expect("an op body runs once");
            body(run, completion)
        }))
    }

    pub(crate) fn call(mut self, run: RunContext, completion: Completion) {
        (self.0)(run, completion);
    }
}

/// The owning handle of a pushed op's block (see the module docs). Not `Clone`: there is one.
pub(crate) struct OpHandle(NonNull<OpBlock>);

// SAFETY: the handle owns its block (like a `Box`), and `OpBlock` holds only `Send` data; the
// only field other threads touch while a handle exists (inside `enqueue`) is the atomic wait
// count.
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
        // SAFETY: the handle owns the block, which `new` leaked from a `Box`; the op is past
        // its last grant, so no other pointer to it is in use.
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
        // SAFETY: the handle owns the block, so it is alive; other threads reach it only
        // through waiters, which touch nothing but the wait count (module docs).
        unsafe { self.0.as_ref() }
    }
}

impl std::ops::DerefMut for OpHandle {
    fn deref_mut(&mut self) -> &mut OpBlock {
        // SAFETY: outside `enqueue` (which never calls this) a handle exists only for an op no
        // waiter points to any more, so the holder's access is exclusive (module docs).
        unsafe { self.0.as_mut() }
    }
}

impl fmt::Debug for OpHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OpHandle({})", self.header.name)
    }
}

/// A queued dependency's pointer to its op: granting it is the only thing it can do.
pub(crate) struct Waiter(NonNull<OpBlock>);

// SAFETY: a waiter is granted from whichever thread completes the var's previous op; the
// block it points to is alive until the grant (module docs) and is touched only through its
// atomic wait count.
unsafe impl Send for Waiter {}

impl Waiter {
    /// Prefetches the waiting op's block (see [`prefetch`]).
    #[inline]
    pub(crate) fn prefetch(&self) {
        prefetch(self.0.as_ptr());
    }

    /// One grant; the op's handle if that was its last one (the caller dispatches it).
    pub(crate) fn grant(self) -> Option<OpHandle> {
        let block = self.0.as_ptr();
        // SAFETY: a waiter exists only while its op waits for this grant, so the op cannot
        // have completed and its block is alive (module docs, step 2). Only the count is
        // borrowed: the last granter may change the rest of the block while an earlier
        // granter is still returning from its decrement.
        let wait: &WaitCount = unsafe { &(*block).wait };
        wait.grant().then_some(OpHandle(self.0))
    }
}

/// Asks the CPU to fetch `block`'s cache lines ahead of their use (a hint: no effect on
/// what the program computes). A block cycles between threads (a worker completes and
/// recycles it, the pusher refills it; the pusher fills it, a worker runs it), so its lines
/// usually sit in another core's cache; a thread that knows which block it touches next
/// (the next free block of its cache, the op queued behind the one a completion grants)
/// fetches it while it still has other work, instead of stalling on it later.
#[inline]
pub(crate) fn prefetch(block: *const OpBlock) {
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        const LINE: usize = 64;
        let start = block.cast::<i8>();
        for offset in (0..std::mem::size_of::<OpBlock>()).step_by(LINE) {
            // SAFETY: a prefetch is a hint that never faults and reads nothing into the
            // program; the address only has to be computable (`wrapping_add` keeps it so).
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(offset)) };
        }
        let last = start.wrapping_add(std::mem::size_of::<OpBlock>() - 1);
        // SAFETY: as above (the line of the block's last byte, which a misaligned block
        // spreads onto one line more).
        unsafe { _mm_prefetch::<_MM_HINT_T0>(last) };
    }
    #[cfg(not(all(target_arch = "x86_64", not(loom))))]
    let _ = block;
}

/// Appends `handle`'s op to every var it depends on, holding all their locks at once (so two
/// threads pushing ops on shared vars get the same order on every one of them). The op's body
/// is already in its block (written before the locks are taken, so they are held only for
/// the appends). Returns the handle if every var granted the op at once (it is ready: the
/// caller runs or dispatches it); otherwise the block is left to whoever makes it ready.
/// The caller holds a handle on every var of the op until this returns (see `var.rs`, "Who
/// keeps a var alive while ops use it").
pub(crate) fn enqueue(handle: OpHandle) -> Option<OpHandle> {
    let block = handle.0.as_ptr();
    // SAFETY: the handle owns the block, so it is alive while this thread holds the handle or
    // any var lock of the op (no grant, so no completion, can happen before the locks go).
    // Only the dependencies and the wait count are borrowed, never the whole block.
    let (deps, wait) = unsafe { (&(*block).deps, &(*block).wait) };
    if let [only] = &deps[..] {
        // One var: no guard vector.
        let mut state = only.var.cell.lock();
        if only.var.append(&mut state, only.access, || handle.waiter()) {
            return Some(handle);
        }
        wait.set(1);
        drop(state); // the handle is given up (see below)
        return None;
    }
    // Each var is appended to as soon as it is locked: its lock stays held until the wait
    // count is set, so no grant can reach the op before that, as if every lock had been
    // taken first.
    let mut locked: SmallVec<[_; 4]> = SmallVec::new();
    let mut waiting = 0;
    for dep in deps {
        let mut state = dep.var.cell.lock();
        if !dep.var.append(&mut state, dep.access, || handle.waiter()) {
            waiting += 1;
        }
        locked.push(state);
    }
    if waiting == 0 {
        drop(locked);
        return Some(handle);
    }
    wait.set(waiting);
    drop(locked); // the handle is given up: from here on the block belongs to the grants
    None
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_body_of_48_captured_bytes_stays_inline() {
        let captured = [7u64; 6]; // the engine benchmark's bodies capture 40 bytes
        let body = Body::new(move |_, _| assert_eq!(captured[5], 7));
        assert!(!body.0.is_heap());
        let large = [7u64; 16];
        assert!(Body::new(move |_, _| assert_eq!(large[15], 7)).0.is_heap());
    }
}
