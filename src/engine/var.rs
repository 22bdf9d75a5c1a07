//! The var state machine: who may touch a var now, and who waits, in push order.
//!
//! # State
//! Each var keeps, under its own lock (uncontended unless a pusher and a completer meet):
//! - `queue`: the ops that asked for the var and were not granted it yet, in push order, each
//!   marked read or write (MXNet's chain of `VersionedVarBlock`s; here a `VecDeque` whose
//!   buffer is reused, so a var in steady state allocates nothing per op);
//! - `active_reads`: reads granted and not yet completed;
//! - `writing`: a write is granted and not yet completed (MXNet's `num_pending_reads == -1`);
//! - the var's error slot, if an op that wrote it failed (see `error.rs`).
//!
//! Invariants: `writing` and `active_reads > 0` never hold together; if the queue is not empty
//! then either a write is running or the queue starts with a write waiting for the active
//! reads to finish. So "granted at once" needs an empty queue, which keeps push order.
//!
//! # Transitions (each under the var's lock; grants are acted on after it is released)
//! - **append read**: nothing writing and nothing queued: grant (count the read); else queue.
//! - **append write**: nothing writing, no active read, nothing queued: grant; else queue.
//! - **complete read**: one read fewer; at zero, grant the write at the front of the queue.
//! - **complete write**: version + 1; grant every read at the front of the queue (they run
//!   together); if there were none, grant the write at the front.
//!
//! A grant is one decrement of the op's wait count (`opr.rs`); the op is dispatched by whoever
//! brings that count to zero, after every var lock is released.
//!
//! # The lock
//! The critical sections are a few dozen instructions, and the threads that meet on a var's
//! lock are a pusher appending and a worker completing (a chain of writes: every op). With
//! `std`'s futex mutex a lock taken after any contention stays marked contended, so its
//! unlock makes a wake-up system call whether or not anyone sleeps, and the next locker that
//! finds it so marked sleeps at once instead of spinning: on two cores that was a fifth of a
//! chain's time. `parking_lot`'s mutex spins briefly (then yields) before it parks, and its
//! unlock wakes only a thread that actually parked. (No poisoning either, as the `sync`
//! facade's locks. Under loom the facade's mutex stands in, so the models keep exploring
//! the protocol.)
//!
//! # Who keeps a var alive while ops use it
//! An op names its vars by [`VarRef`], a pointer, not a handle: a handle is a reference
//! count, and counting every op in and out of its vars would cost an atomic read-modify-write
//! on each side of every dependency, on the lines the pusher and the completing worker
//! already pass back and forth. Instead the var holds one count for all its ops, its *busy
//! count*, while it is in use (an op queued on it, or an access granted and not completed):
//! - the push that finds the var idle takes the busy count, under the var's lock, while the
//!   pusher still holds a handle of its own (so the var is alive);
//! - the completion that leaves the var idle gives it back after releasing the lock (it may
//!   be the last count: nothing touches the var after it).
//!
//! Both transitions happen under the lock, so they alternate. A `VarRef` is valid from the
//! op's push (the pusher's handle) until its completion releases the var (the busy count):
//! in between the op is queued or granted on it, so the var is in use.
//!
//! # Layout
//! The cell comes first in the var and the lock's state first in the cell (`repr(C)`), so
//! the lock and what it guards sit right after the reference counts, which the busy count's
//! transitions update together with them. The cell is not aligned to a line of its own:
//! that would part the lock from the counts and make every var a line larger.

use std::collections::VecDeque;
use std::fmt;
use std::ptr::NonNull;

use super::block::Waiter;
use super::error::{ErrorRef, OpFailure};
// A var's lock: see "The lock" in the module docs.
use crate::sync::{Arc, AtomicBool, AtomicU64, Ordering};
use crate::sync::{SpinMutex as VarLock, SpinMutexGuard as VarGuard};

/// Whether an op reads or writes a var.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Write,
}

/// A queued op that can be fetched into the cache ahead of its run: when a completion grants
/// a var, the op queued behind the granted one is likely next (a chain of writes), so its
/// block is prefetched while the granted op runs.
pub(crate) trait Prefetch {
    /// Hints the CPU to fetch the op's block; no effect on what the program computes.
    fn prefetch(&self) {}
}

impl Prefetch for Waiter {
    #[inline]
    fn prefetch(&self) {
        Waiter::prefetch(self);
    }
}

/// One queued request.
struct Waiting<T> {
    op: T,
    access: Access,
}

/// The lock-protected part of a var (see the module docs).
pub(crate) struct VarState<T> {
    queue: VecDeque<Waiting<T>>,
    active_reads: usize,
    writing: bool,
    error: Option<ErrorRef>,
}

impl<T: Prefetch> VarState<T> {
    fn new() -> Self {
        VarState {
            queue: VecDeque::new(),
            active_reads: 0,
            writing: false,
            error: None,
        }
    }

    /// Asks for the var on behalf of an op: returns true if granted now, otherwise queues
    /// `waiter()` (the op's waiter) to be granted later.
    pub(crate) fn append(&mut self, access: Access, waiter: impl FnOnce() -> T) -> bool {
        let free = !self.writing && self.queue.is_empty();
        let granted = match access {
            Access::Read => free,
            Access::Write => free && self.active_reads == 0,
        };
        if !granted {
            self.queue.push_back(Waiting {
                op: waiter(),
                access,
            });
        } else if access == Access::Read {
            self.active_reads += 1;
        } else {
            self.writing = true;
        }
        granted
    }

    /// A granted read finished; returns the write it unblocks, if any.
    pub(crate) fn complete_read(&mut self) -> Option<T> {
        debug_assert!(
            self.active_reads > 0 && !self.writing,
            "read completed twice"
        );
        self.active_reads -= 1;
        if self.active_reads == 0 {
            let granted = self.grant_front_write();
            if granted.is_some() {
                self.prefetch_next();
            }
            granted
        } else {
            None
        }
    }

    /// The granted write finished: grants the reads at the front of the queue, or the write
    /// there if no read comes first; appends what it granted to `granted`.
    pub(crate) fn complete_write(&mut self, granted: &mut impl Extend<T>) {
        debug_assert!(
            self.writing && self.active_reads == 0,
            "write completed twice"
        );
        self.writing = false;
        while self
            .queue
            .front()
            .is_some_and(|next| next.access == Access::Read)
        {
            let read = self.queue.pop_front().expect("front checked");
            self.active_reads += 1;
            granted.extend(Some(read.op));
        }
        if self.active_reads == 0 {
            granted.extend(self.grant_front_write());
        }
        self.prefetch_next();
    }

    /// Prefetches the op now at the front of the queue (the next one this var will grant).
    #[inline]
    fn prefetch_next(&self) {
        if let Some(next) = self.queue.front() {
            next.op.prefetch();
        }
    }

    fn grant_front_write(&mut self) -> Option<T> {
        if self.queue.front()?.access != Access::Write {
            return None;
        }
        self.writing = true;
        self.queue.pop_front().map(|write| write.op)
    }

    /// Some op waits for the var or holds a granted access to it.
    fn in_use(&self) -> bool {
        self.writing || self.active_reads > 0 || !self.queue.is_empty()
    }

    /// No write running or waiting: a read pushed now would be granted at once.
    pub(crate) fn ready_to_read(&self) -> bool {
        !self.writing && self.queue.is_empty()
    }

    /// The var's unreported error slot, if any (forgetting a slot already reported elsewhere).
    pub(crate) fn error(&mut self) -> Option<&ErrorRef> {
        if self.error.as_ref().is_some_and(|slot| !slot.is_set()) {
            self.error = None;
        }
        self.error.as_ref()
    }
}

/// A var's whole state: the locked machine, its version and a hint that it may carry an error.
/// The lock and its state come first (see "Layout" in the module docs).
#[repr(C)]
pub(crate) struct VarCell<T> {
    state: VarLock<VarState<T>>,
    version: AtomicU64,
    /// Set when a failure is stored; cleared lazily. Lets ops skip the lock on the common,
    /// clean path when they check their inputs for errors.
    maybe_tainted: AtomicBool,
}

impl<T: Prefetch> VarCell<T> {
    pub(crate) fn new() -> Self {
        VarCell {
            state: VarLock::new(VarState::new()),
            version: AtomicU64::new(0),
            maybe_tainted: AtomicBool::new(false),
        }
    }

    pub(crate) fn lock(&self) -> VarGuard<'_, VarState<T>> {
        self.state.lock()
    }

    /// Completes a write: stores `error` (the writer's failure, if any), bumps the version and
    /// grants what comes next into `granted`.
    #[cfg(test)]
    pub(crate) fn complete_write(&self, error: Option<&ErrorRef>, granted: &mut impl Extend<T>) {
        self.complete(&mut self.lock(), Access::Write, error, granted);
    }

    /// Completes one granted access, under the lock held as `state`: a read grants the write
    /// it unblocks; a write stores `error` (the writer's failure, if any), bumps the version
    /// and grants what comes next. What it grants goes into `granted`.
    fn complete(
        &self,
        state: &mut VarState<T>,
        access: Access,
        error: Option<&ErrorRef>,
        granted: &mut impl Extend<T>,
    ) {
        if access == Access::Read {
            return granted.extend(state.complete_read());
        }
        if let Some(slot) = error {
            state.error = Some(slot.clone());
            self.maybe_tainted.store(true, Ordering::Release);
        }
        // Only the writer holding the lock changes the version: no read-modify-write needed.
        let version = self.version.load(Ordering::Relaxed);
        self.version.store(version + 1, Ordering::Release);
        state.complete_write(granted);
    }

    /// Stores a failure found after the var's writer completed (a GPU op's device work
    /// failing in event mode): ops that check the var from now on inherit it.
    pub(crate) fn taint(&self, slot: &ErrorRef) {
        let mut state = self.lock();
        if state.error().is_none() {
            state.error = Some(slot.clone());
        }
        self.maybe_tainted.store(true, Ordering::Release);
    }

    /// Completes a read; returns the write it unblocks.
    #[cfg(test)]
    pub(crate) fn complete_read(&self) -> Option<T> {
        self.lock().complete_read()
    }

    /// Completed writes so far.
    pub(crate) fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Whether the var may carry an error (one load; `false` is certain for a var whose
    /// writers' completions happened before the caller's last synchronization with them).
    pub(crate) fn may_carry_error(&self) -> bool {
        self.maybe_tainted.load(Ordering::Acquire)
    }

    /// The var's unreported error slot (lock taken only when the hint says it may have one).
    pub(crate) fn error(&self) -> Option<ErrorRef> {
        if !self.maybe_tainted.load(Ordering::Acquire) {
            return None;
        }
        let mut state = self.lock();
        let slot = state.error().cloned();
        if slot.is_none() {
            self.maybe_tainted.store(false, Ordering::Relaxed);
        }
        slot
    }

    /// Reports the var's failure to its waiter and clears this var alone: every other var the
    /// failure reached still reports it to its own waiter.
    pub(crate) fn take_error(&self) -> Option<OpFailure> {
        let slot = self.error()?;
        let failure = slot.report();
        self.lock().error = None;
        failure
    }

    pub(crate) fn ready_to_read(&self) -> bool {
        self.lock().ready_to_read()
    }
}

/// A variable: something ops read and write, tracked by the engine.
///
/// Handles are cheap to clone; every clone names the same var. Create vars with
/// [`Engine::new_variable`](super::Engine::new_variable).
#[derive(Clone)]
pub struct Var(pub(crate) Arc<VarInner>);

/// A var's shared part: its cell first (see "Layout" in the module docs), then its id and
/// deletion flag.
#[repr(C)]
pub(crate) struct VarInner {
    pub(crate) cell: VarCell<Waiter>,
    pub(crate) id: u64,
    pub(crate) deleted: AtomicBool,
}

impl Var {
    pub(crate) fn new(id: u64) -> Var {
        Var(Arc::new(VarInner {
            id,
            cell: VarCell::new(),
            deleted: AtomicBool::new(false),
        }))
    }

    /// The var's id (unique within its engine).
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// Writes completed on this var so far (reads leave it unchanged).
    pub fn version(&self) -> u64 {
        self.0.cell.version()
    }

    /// Whether `delete_variable` was called on this var.
    pub(crate) fn is_deleted(&self) -> bool {
        self.0.deleted.load(Ordering::Acquire)
    }

    /// The key ops lock vars in: the var's address, unique while any handle lives.
    pub(crate) fn lock_order(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }
}

/// An op's pointer to one of its vars (see "Who keeps a var alive while ops use it" in the
/// module docs): valid from the op's push until its completion releases the var.
#[derive(Clone, Copy)]
pub(crate) struct VarRef(NonNull<VarInner>);

// SAFETY: a `VarRef` is used like a `&VarInner` (see `Deref`), and `VarInner` is `Sync` (its
// state is behind a lock, the rest atomics or immutable): sending or sharing the pointer
// between threads is sending or sharing that reference.
unsafe impl Send for VarRef {}
// SAFETY: as for `Send`.
unsafe impl Sync for VarRef {}

impl VarRef {
    /// Names `var` (the caller keeps the handle until the op's push has appended it).
    pub(crate) fn of(var: &Var) -> VarRef {
        VarRef(NonNull::from(&*var.0))
    }

    /// The key ops lock vars in: the same as [`Var::lock_order`].
    pub(crate) fn lock_order(self) -> usize {
        self.0.as_ptr() as usize
    }

    pub(crate) fn same(self, other: VarRef) -> bool {
        self.0 == other.0
    }

    /// A handle on the var (one more reference count).
    pub(crate) fn to_var(self) -> Var {
        let raw = self.0.as_ptr().cast_const();
        // SAFETY: `raw` points into a live `Arc<VarInner>` allocation (`of` took it from a
        // handle, and the `VarRef` is valid, so a count is held); the count taken here is the
        // one the rebuilt `Arc` gives back when the new handle is dropped.
        unsafe {
            Arc::increment_strong_count(raw);
            Var(Arc::from_raw(raw))
        }
    }

    /// Appends the op that `waiter` makes to the var, under the lock held as `state` (see
    /// [`VarState::append`]); the first op of an idle var takes its busy count.
    pub(crate) fn append(
        self,
        state: &mut VarState<Waiter>,
        access: Access,
        waiter: impl FnOnce() -> Waiter,
    ) -> bool {
        if !state.in_use() {
            // SAFETY: the pusher holds a handle on the var while it appends (`of`), so the
            // allocation is live; the count taken is the busy count, given back by the
            // completion that leaves the var idle (`release`).
            unsafe { Arc::increment_strong_count(self.0.as_ptr().cast_const()) };
        }
        state.append(access, waiter)
    }

    /// Completes an op's granted `access` to the var (with the op's failure, if it failed and
    /// writes the var: `error`); what that grants goes into `granted`. The op's `VarRef` is
    /// spent: if the var is left idle, its busy count is given back, after the unlock.
    pub(crate) fn release(
        self,
        access: Access,
        error: Option<&ErrorRef>,
        granted: &mut impl Extend<Waiter>,
    ) {
        let idle = {
            let mut state = self.cell.lock();
            self.cell.complete(&mut state, access, error, granted);
            !state.in_use()
        };
        if idle {
            // SAFETY: the var was in use until this completion (the op held an access), so
            // the busy count is held and the allocation is live; nothing touches the var
            // after this (it may be the last count).
            unsafe { Arc::decrement_strong_count(self.0.as_ptr().cast_const()) };
        }
    }
}

impl std::ops::Deref for VarRef {
    type Target = VarInner;

    fn deref(&self) -> &VarInner {
        // SAFETY: a `VarRef` is used only while valid (type docs): from the op's push, when
        // the pusher's handle keeps the var alive, until its completion releases the var,
        // the busy count does.
        unsafe { self.0.as_ref() }
    }
}

impl fmt::Debug for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Var(#{} v{})", self.id(), self.version())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    type State = VarState<u32>;

    impl Prefetch for u32 {}

    fn granted_by_write(state: &mut State) -> Vec<u32> {
        let mut granted = Vec::new();
        state.complete_write(&mut granted);
        granted
    }

    #[test]
    fn consecutive_reads_are_granted_together() {
        let mut state = State::new();
        assert!(state.append(Access::Read, || 1));
        assert!(state.append(Access::Read, || 2));
        assert!(!state.append(Access::Write, || 3));
        assert!(
            !state.append(Access::Read, || 4),
            "a read behind a write waits"
        );
        assert_eq!(state.complete_read(), None);
        assert_eq!(state.complete_read(), Some(3));
        assert_eq!(granted_by_write(&mut state), [4]);
        assert_eq!(state.complete_read(), None);
        assert!(state.ready_to_read());
    }

    #[test]
    fn writes_run_one_at_a_time_in_push_order() {
        let mut state = State::new();
        assert!(state.append(Access::Write, || 1));
        assert!(!state.append(Access::Write, || 2));
        assert!(!state.append(Access::Write, || 3));
        assert!(!state.ready_to_read());
        assert_eq!(granted_by_write(&mut state), [2]);
        assert_eq!(granted_by_write(&mut state), [3]);
        assert_eq!(granted_by_write(&mut state), Vec::<u32>::new());
        assert!(state.ready_to_read());
    }

    #[test]
    fn a_write_releases_the_read_run_up_to_the_next_write() {
        let mut state = State::new();
        assert!(state.append(Access::Write, || 1));
        for op in [2, 3, 4] {
            assert!(!state.append(Access::Read, || op));
        }
        assert!(!state.append(Access::Write, || 5));
        assert!(!state.append(Access::Read, || 6));
        assert_eq!(granted_by_write(&mut state), [2, 3, 4]);
        assert_eq!(state.complete_read(), None);
        assert_eq!(state.complete_read(), None);
        assert_eq!(state.complete_read(), Some(5));
        assert_eq!(granted_by_write(&mut state), [6]);
    }

    #[test]
    fn version_counts_completed_writes_only() {
        let cell: VarCell<u32> = VarCell::new();
        assert!(cell.lock().append(Access::Read, || 1));
        assert_eq!(cell.complete_read(), None);
        assert_eq!(cell.version(), 0);
        assert!(cell.lock().append(Access::Write, || 2));
        cell.complete_write(None, &mut Vec::new());
        assert_eq!(cell.version(), 1);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Models of the var protocol with real op blocks (`block.rs`): pushes through `enqueue`
    //! (all vars locked, wait count stored, handle given up), grants acted on outside the var
    //! lock, completions racing with pushes and with each other. A model op's body counts its
    //! runs and checks what it must see; the last granter takes it out of the block, so a
    //! handle that reached two threads would show up as two runs.
    use super::*;
    use crate::engine::block::{enqueue, Body, OpHandle, Waiter};
    use crate::engine::opr::{fill_deps, OpBlock};
    use crate::engine::var_list::VarList;
    use crate::engine::{Completion, OpName, RunContext};
    use crate::sync::{thread, AtomicUsize};

    /// Counts the runs of one op.
    type Runs = Arc<AtomicUsize>;

    /// Runs a model op made ready: takes its body out of the block (the body counts the run),
    /// runs it and frees the block (a model op completes through its vars, not its block).
    fn run(mut handle: OpHandle) {
        let body = handle.body.take().expect("a ready op has its body");
        drop(handle.into_box());
        let run = RunContext {
            ctx: Default::default(),
            name: OpName::UNNAMED,
            id: 0,
        };
        body.call(run, Completion::detached());
    }

    /// Pushes an op reading `reads` and writing `writes`; it runs `then` when dispatched.
    fn push_then(reads: &[Var], writes: &[Var], then: impl FnOnce() + Send + 'static) -> Runs {
        let runs = Runs::default();
        let mut block = Box::new(OpBlock::empty());
        fill_deps(&mut block.deps, reads, writes);
        let counted = runs.clone();
        block.body = Some(Body::new(move |_, _| {
            counted.fetch_add(1, Ordering::SeqCst);
            then();
        }));
        if let Some(handle) = enqueue(OpHandle::new(block)) {
            run(handle);
        }
        runs
    }

    fn push(reads: &[Var], writes: &[Var]) -> Runs {
        push_then(reads, writes, || ())
    }

    fn run_granted(granted: Vec<Waiter>) {
        for waiter in granted {
            if let Some(handle) = waiter.grant() {
                run(handle);
            }
        }
    }

    /// Completes a granted write of `var` as an op's completion does (`VarRef::release`).
    fn complete_write(var: &Var) {
        let mut granted = Vec::new();
        VarRef::of(var).release(Access::Write, None, &mut granted);
        run_granted(granted);
    }

    /// Completes a granted read of `var` as an op's completion does.
    fn complete_read(var: &Var) {
        let mut granted = Vec::new();
        VarRef::of(var).release(Access::Read, None, &mut granted);
        run_granted(granted);
    }

    fn runs(op: &Runs) -> usize {
        op.load(Ordering::SeqCst)
    }

    /// Pushes an op writing `var` that counts its runs in `runs`; returns it if it is ready.
    fn push_write(var: &Var, runs: &Runs) -> Option<OpHandle> {
        let mut block = Box::new(OpBlock::empty());
        fill_deps(&mut block.deps, VarList::EMPTY, std::slice::from_ref(var));
        let counted = runs.clone();
        block.body = Some(Body::new(move |_, _| {
            counted.fetch_add(1, Ordering::SeqCst);
        }));
        enqueue(OpHandle::new(block))
    }

    /// Runs a ready op and completes it as `Core::complete` does (releases its vars through
    /// its `VarRef`s), then runs and completes what that granted, the same way.
    fn run_and_release(mut handle: OpHandle) {
        let body = handle.body.take().expect("a ready op has its body");
        let run = RunContext {
            ctx: Default::default(),
            name: OpName::UNNAMED,
            id: 0,
        };
        body.call(run, Completion::detached());
        let mut granted = Vec::new();
        for dep in handle.deps.drain(..) {
            dep.var.release(dep.access, None, &mut granted);
        }
        drop(handle.into_box());
        for waiter in granted {
            if let Some(next) = waiter.grant() {
                run_and_release(next);
            }
        }
    }

    /// The busy count (module docs): a completion leaves the var idle or not depending on
    /// whether another thread's push of the next op came first, and that thread drops its
    /// own handle right after the push, so the busy count may be the var's last. Each op runs
    /// once, and the var is freed exactly once, after the last release: loom reports a
    /// leaked `Arc`, and its `Arc` panics on a count taken or given back after the free.
    #[test]
    fn loom_var_busy_count_keeps_the_var_alive() {
        loom::model(|| {
            let var = Var::new(0);
            let (first, second) = (Runs::default(), Runs::default());
            let ready = push_write(&var, &first).expect("nothing holds a new var");
            let completer = thread::spawn(move || run_and_release(ready));
            if let Some(ready) = push_write(&var, &second) {
                run_and_release(ready);
            }
            drop(var);
            completer.join().unwrap();
            assert_eq!((runs(&first), runs(&second)), (1, 1));
        });
    }

    /// Two readers complete concurrently; the waiting writer is dispatched exactly once, and
    /// only after both reads finished: the value it writes (relaxed, so only the var protocol
    /// orders it) is never seen by a read.
    #[test]
    fn loom_var_two_readers_then_writer() {
        loom::model(|| {
            let var = Var::new(0);
            let value = Arc::new(AtomicUsize::new(0));
            let readers = [push(&[var.clone()], &[]), push(&[var.clone()], &[])];
            let written = value.clone();
            let writer = push_then(&[], &[var.clone()], move || {
                written.store(1, Ordering::Relaxed); // the writer's body
            });
            assert!(readers.iter().all(|r| runs(r) == 1));
            assert_eq!(runs(&writer), 0);
            let threads: Vec<_> = (0..2)
                .map(|_| {
                    let (var, value) = (var.clone(), value.clone());
                    thread::spawn(move || {
                        assert_eq!(value.load(Ordering::Relaxed), 0, "a read saw a later write");
                        complete_read(&var);
                    })
                })
                .collect();
            threads.into_iter().for_each(|t| t.join().unwrap());
            assert_eq!(runs(&writer), 1);
            complete_write(&var);
            assert_eq!(var.version(), 1);
            assert!(var.0.cell.ready_to_read());
        });
    }

    /// A write completes while another thread pushes a read: the read runs exactly once,
    /// after the write (it sees version 1 when it is dispatched).
    #[test]
    fn loom_var_write_then_read() {
        loom::model(|| {
            let var = Var::new(0);
            let writer = push(&[], &[var.clone()]);
            assert_eq!(runs(&writer), 1);
            let completer = {
                let var = var.clone();
                thread::spawn(move || complete_write(&var))
            };
            let seen = var.clone();
            let reader = push_then(&[var.clone()], &[], move || {
                assert_eq!(seen.version(), 1, "a read ran before the write completed");
            });
            completer.join().unwrap();
            assert_eq!(runs(&reader), 1);
            complete_read(&var);
            assert!(var.0.cell.ready_to_read());
        });
    }

    /// An op reading `a` and writing `b`, both held by earlier writers whose completions race
    /// with its push: whatever the interleaving, it is dispatched exactly once, after both
    /// writes, and its parked task is published to whichever completer dispatches it.
    #[test]
    fn loom_var_op_dispatched_exactly_once() {
        loom::model(|| {
            let (a, b) = (Var::new(0), Var::new(1));
            push(&[], &[a.clone()]);
            push(&[], &[b.clone()]);
            let completers: Vec<_> = [a.clone(), b.clone()]
                .into_iter()
                .map(|var| thread::spawn(move || complete_write(&var)))
                .collect();
            let (seen_a, seen_b) = (a.clone(), b.clone());
            let both = push_then(&[a.clone()], &[b.clone()], move || {
                assert_eq!(
                    (seen_a.version(), seen_b.version()),
                    (1, 1),
                    "ran too early"
                );
            });
            completers.into_iter().for_each(|t| t.join().unwrap());
            assert_eq!(runs(&both), 1);
            // The op completes too, so both vars give their busy counts back.
            complete_read(&a);
            complete_write(&b);
        });
    }
}
