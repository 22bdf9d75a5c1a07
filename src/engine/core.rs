//! The engine's shared core: push, complete, the pending count and the waits, errors, and the
//! seam to the engine kinds ([`Dispatch`]).
//!
//! Above the op (`opr.rs`, `block.rs`) and the queues (`ready.rs`, `recycle.rs`); below the
//! bulk batches, the GPU path (which implements [`GpuPath`]), the dispatchers (`naive.rs`,
//! `threaded.rs`, which implement [`Dispatch`]) and the handle (whose bulk flush the waits,
//! stop and shutdown take as a closure).
#![forbid(unsafe_code)]

use std::cell::Cell;
use std::sync::LazyLock;

use crossbeam_utils::CachePadded;
// std's `Arc` for the GPU hub: the core holds it as a trait object, which loom's `Arc`
// cannot coerce to `dyn` (the hub is not part of the loom models).
use smallvec::SmallVec;
use std::sync::Arc as StdArc;

use super::block::Body;
use super::block::{self, OpHandle, Waiter};
use super::current::{self, Refused};
use super::error::{EngineError, ErrorRef, ErrorSlot, OpFailure};
use super::opr::{execute, Completion, Deps, OpBlock, OpHeader, RunContext};
use super::ready;
use super::recycle::{recycle, BlockPool};
use super::var::Var;
use super::{Context, EngineEvent, EngineKind, EngineObserver, FnProperty, OpName};
use crate::pool::PoolStats;
use crate::sync::{thread, Arc, AtomicBool, AtomicU64, AtomicUsize, Condvar, Mutex, Ordering};

/// How one engine kind runs ready ops: the seam between dependency tracking (shared) and
/// execution (naive, pooled, per-device).
pub(crate) trait Dispatch: Send + Sync {
    /// Refuses a context this engine cannot run (a GPU without a backend, a CPU device out of
    /// range) before anything is queued.
    /// May start the device's workers on first use.
    fn check(&self, name: OpName, ctx: Context, prop: FnProperty) -> Result<(), EngineError>;
    /// Whether an op ready at push runs its body right there on the pushing thread (the
    /// naive engine; `Async` and `DeleteVar` ops on the threaded ones).
    fn runs_at_push(&self, op: &OpHeader) -> bool;
    /// Enqueues (or runs) a ready op, its body in its block. `from_push`: the pushing thread
    /// made it ready (and [`runs_at_push`](Self::runs_at_push) said no).
    fn dispatch(&self, op: OpHandle, from_push: bool);
    /// Joins every worker thread (the engine is drained).
    fn stop(&self);
    /// Starts the worker threads again.
    fn start(&self) -> Result<(), EngineError>;
    /// Resizes the per-device CPU worker pools while they run.
    fn set_cpu_workers(&self, threads: usize) -> Result<(), EngineError>;
    /// Resizes the CPU priority pool.
    fn set_priority_workers(&self, threads: usize) -> Result<(), EngineError>;
    /// Live counters of the worker pools.
    fn stats(&self) -> DispatchStats;
    /// Workers per pool role, as configured now (resizes included).
    fn workers(&self) -> super::WorkerCounts;
}

/// What the engine's core and its ops ask of the engine's GPUs (`engine::gpu`'s hub): the
/// seam that keeps the GPU path above the core. Called only in an engine that has GPUs, and
/// only for what the GPU protocol adds around an op; a CPU op in an engine without GPUs
/// never reaches it.
pub(crate) trait GpuPath: Send + Sync {
    /// Called as `block` starts, before its error check: a CPU op waits on the host for the
    /// device work its vars need; a GPU op gets its stream, ordered after that work.
    fn before_run(&self, block: &OpBlock);
    /// Completes GPU op `block` whose completion was called: the epilogue of its sync mode,
    /// which ends in [`Core::complete`].
    fn finish(&self, block: OpHandle, inherited: Option<ErrorRef>, result: Result<(), OpFailure>);
    /// `wait_for_var`'s last step: waits on the host for the device work of the var's last
    /// GPU write (event mode).
    fn host_wait_var(&self, var: &Var);
}

/// What the workers of one engine look like right now.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct DispatchStats {
    /// Every worker pool (per CPU device, IO), with per-worker counters.
    pub pools: Vec<PoolStats>,
    /// Which pool each of `pools` is, in the same order.
    pub pool_ids: Vec<crate::device::identity::PoolId>,
    /// The CPU priority pool, if it was started.
    pub priority: Option<crate::device::cpu::PriorityPoolStats>,
    /// The GPU pools (compute, copy, prioritized) of every opened GPU.
    pub gpu: Vec<crate::device::gpu::GpuPoolStats>,
    /// Ready ops waiting in the engine's own queue in front of each pool of `pools`, in the
    /// same order (a worker pool's queue holds the tasks that drain them, not the ops).
    pub ready_ops: Vec<usize>,
}

/// The state every op of an engine shares.
///
/// The pending count is kept as two counters on cache lines of their own: `pushed`, written
/// only by pushing threads, and `completed`, written only by completing ones and striped by
/// thread ([`Completed`]). A push then never pulls a line a worker just wrote (one pushing
/// thread keeps `pushed` in its cache), two workers completing ops do not pass a line back
/// and forth,
/// and the read-mostly fields every op reads (`accepting`, `dispatcher`, `observer`) stay
/// apart from both.
pub(crate) struct Core {
    /// Ops admitted (and refused pushes, which count as completed at once).
    pushed: CachePadded<AtomicU64>,
    /// Ops completed (and refused pushes).
    completed: Completed,
    pub(crate) kind: EngineKind,
    /// False while stopped: pushes are refused.
    accepting: AtomicBool,
    idle: Mutex<()>,
    idle_cv: Condvar,
    idle_waiters: AtomicUsize,
    /// Failures not yet reported by `wait_for_all`.
    errors: Mutex<Vec<ErrorRef>>,
    failed_ops: AtomicU64,
    skipped_ops: AtomicU64,
    /// Set by `cancel` while it drains: ops that have not started skip their bodies.
    cancelling: AtomicBool,
    cancelled_ops: AtomicU64,
    next_var: AtomicU64,
    /// Serializes stop, start and shutdown.
    lifecycle: Mutex<()>,
    pub(crate) dispatcher: Box<dyn Dispatch>,
    observer: Option<Arc<dyn EngineObserver>>,
    pub(crate) blocks: BlockPool,
    /// The engine's GPUs (per-device engine with a GPU selection); see `engine::gpu`.
    // std's `Arc`: a trait object, which loom's `Arc` cannot coerce to `dyn`.
    pub(crate) gpu: Option<StdArc<dyn GpuPath>>,
    /// The high bits of this engine's op ids: its serial number in the process.
    id_base: u64,
}

/// Op ids: the engine's serial number above this many bits of push sequence number.
const OP_SEQUENCE_BITS: u32 = 40;
const OP_SEQUENCE_MASK: u64 = (1 << OP_SEQUENCE_BITS) - 1;

/// Engines started in this process so far (engine serial numbers start at 1).
static ENGINES: LazyLock<Mutex<u64>> = LazyLock::new(|| Mutex::new(0));

/// The next engine's serial number (wrapping within the bits an op id leaves it).
fn next_engine_serial() -> u64 {
    let mut engines = ENGINES.lock();
    *engines = (*engines % ((1 << (64 - OP_SEQUENCE_BITS)) - 1)) + 1;
    *engines
}

/// Events per [`EngineObserver::on_events_at_once`] call of a completion (its `Finished` and
/// the first `Queued`s; more go in further calls): what stays on the stack.
const COMPLETION_EVENTS: usize = 5;

impl Core {
    pub(crate) fn new(
        kind: EngineKind,
        dispatcher: Box<dyn Dispatch>,
        observer: Option<Arc<dyn EngineObserver>>,
        gpu: Option<StdArc<dyn GpuPath>>,
    ) -> Self {
        Core {
            pushed: CachePadded::new(AtomicU64::new(0)),
            completed: Completed::default(),
            kind,
            accepting: AtomicBool::new(true),
            idle: Mutex::new(()),
            idle_cv: Condvar::new(),
            idle_waiters: AtomicUsize::new(0),
            errors: Mutex::new(Vec::new()),
            failed_ops: AtomicU64::new(0),
            skipped_ops: AtomicU64::new(0),
            cancelling: AtomicBool::new(false),
            cancelled_ops: AtomicU64::new(0),
            next_var: AtomicU64::new(0),
            lifecycle: Mutex::new(()),
            dispatcher,
            observer,
            blocks: BlockPool::new(),
            gpu,
            id_base: next_engine_serial() << OP_SEQUENCE_BITS,
        }
    }

    pub(crate) fn new_variable(&self) -> Var {
        Var::new(self.next_var.fetch_add(1, Ordering::Relaxed))
    }

    /// Pushes one op: `fill` writes its deduplicated dependencies (in lock order), `body`
    /// runs it.
    pub(crate) fn push<F>(
        core: &Arc<Core>,
        header: OpHeader,
        fill: impl FnOnce(&mut Deps),
        body: F,
    ) -> Result<(), EngineError>
    where
        F: FnOnce(RunContext, Completion) + Send + 'static,
    {
        core.dispatcher
            .check(header.name, header.ctx, header.prop)?;
        let sequence = core.admit()?;
        let mut block = core
            .blocks
            .take()
            .unwrap_or_else(|| Box::new(OpBlock::empty()));
        if block.core.is_none() {
            // A new block; recycled ones keep their engine reference (see `recycle.rs`).
            block.core = Some(core.clone());
        }
        block.header = header;
        block.id = core.id_base | sequence;
        fill(&mut block.deps);
        // The body goes in first: whoever makes the op ready finds it there, and the var
        // locks are held only while appending.
        block.body = Some(Body::new(body));
        let Some(mut handle) = block::enqueue(OpHandle::new(block)) else {
            return Ok(()); // queued: the last grant dispatches it
        };
        core.observe_queued(&handle);
        if core.dispatcher.runs_at_push(&header) {
            let body = handle.body.take().expect("the body was stored above");
            execute(handle, |run, completion| body.call(run, completion));
        } else {
            core.dispatcher.dispatch(handle, true);
        }
        Ok(())
    }

    /// Counts a push as pending unless the engine is stopped. The push count goes up before
    /// `accepting` is read, and `stop` clears `accepting` before it waits for the counts to
    /// meet: one of the two always sees the other (both sequentially consistent).
    /// Returns the push's sequence number (the low bits of its op id).
    fn admit(&self) -> Result<u64, EngineError> {
        let sequence = self.pushed.fetch_add(1, Ordering::SeqCst);
        if self.accepting.load(Ordering::SeqCst) {
            return Ok(sequence & OP_SEQUENCE_MASK);
        }
        self.retire_one();
        Err(EngineError::Stopped { engine: self.kind })
    }

    fn observe_queued(&self, block: &OpBlock) {
        self.observe(|| Self::queued_event(block));
    }

    /// The `Queued` event of `block`.
    fn queued_event(block: &OpBlock) -> EngineEvent {
        EngineEvent::Queued {
            id: block.id,
            op: block.name,
            ctx: block.ctx,
            prop: block.prop,
            priority: block.priority,
        }
    }

    /// Reports `block`'s `Finished` and the `Queued` of the ops its completion made ready as
    /// events of one instant (an observer may stamp them once), in batches of at most
    /// [`COMPLETION_EVENTS`] so that a wide fan-out never allocates.
    fn observe_completion(&self, block: &OpBlock, failed: bool, ready: &[OpHandle]) {
        let Some(observer) = &self.observer else {
            return;
        };
        let mut events: SmallVec<[EngineEvent; COMPLETION_EVENTS]> = SmallVec::new();
        events.push(EngineEvent::Finished {
            id: block.id,
            op: block.name,
            ctx: block.ctx,
            prop: block.prop,
            priority: block.priority,
            failed,
        });
        for op in ready {
            if events.len() == COMPLETION_EVENTS {
                observer.on_events_at_once(&events);
                events.clear();
            }
            events.push(Self::queued_event(op));
        }
        observer.on_events_at_once(&events);
    }

    /// Hands an op made ready by a grant (its `Queued` already reported) to its queue. When
    /// the calling worker drains the queue the dispatch would send it to
    /// (`ready::routes_here`), it is offered straight as this worker's continuation, without
    /// the dispatch's lookups; a refused offer goes the dispatch's way (which refuses it the
    /// same way and queues it).
    fn dispatch_granted(&self, op: OpHandle) {
        let op = if ready::routes_here(&op) {
            match current::offer_continuation(op) {
                Ok(()) => return,
                Err(Refused::Busy(op) | Refused::BudgetSpent(op)) => op,
            }
        } else {
            op
        };
        self.dispatcher.dispatch(op, false);
    }

    #[inline]
    fn observe(&self, event: impl FnOnce() -> EngineEvent) {
        if let Some(observer) = &self.observer {
            observer.on_event(event());
        }
    }

    /// Called by the executor as an op starts.
    pub(crate) fn op_started(&self, block: &OpBlock) {
        self.observe(|| EngineEvent::Started {
            id: block.id,
            op: block.name,
            ctx: block.ctx,
            prop: block.prop,
            priority: block.priority,
        });
    }

    /// Completes `block`: releases its vars (storing `error` on its writes), dispatches what
    /// that made ready, and counts the op as no longer pending.
    pub(crate) fn complete(
        mut block: OpHandle,
        inherited: Option<ErrorRef>,
        result: Result<(), OpFailure>,
    ) {
        let error = match result {
            Ok(()) => inherited,
            Err(failure) => Some(block.core().record_failure(failure)),
        };
        let mut granted = Granted::default();
        // Releasing a var spends the op's pointer to it (the var may be freed after it).
        for dep in block.deps.drain(..) {
            dep.var.release(dep.access, error.as_ref(), &mut granted);
        }
        let core = block.core();
        let ready = granted.0.into_iter().filter_map(Waiter::grant);
        if core.observer.is_some() {
            // Every grant first, then the events of this instant, then the dispatches: the
            // op's end and its successors' `Queued` share a point of the code (and may share
            // a timestamp), and no dispatch's wake-up falls between them.
            let ready: SmallVec<[OpHandle; 4]> = ready.collect();
            core.observe_completion(&block, error.is_some(), &ready);
            ready.into_iter().for_each(|op| core.dispatch_granted(op));
        } else {
            ready.for_each(|op| core.dispatch_granted(op));
        }
        core.retire_one();
        recycle(block.into_box());
    }

    pub(crate) fn is_cancelling(&self) -> bool {
        self.cancelling.load(Ordering::Relaxed)
    }

    pub(crate) fn count_cancelled(&self) {
        self.cancelled_ops.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an op skipped because an input carried a failure.
    pub(crate) fn count_skipped(&self) {
        self.skipped_ops.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether any op of this engine failed so far. Until one does, none of its vars carries
    /// a failure: each failure is counted by `record_failure` before any var carries it, and
    /// an op that checks its vars runs after the completion that stored it there, so it sees
    /// the count raised. (A failure a device reports after its op completed, `gpu/exec.rs`,
    /// is counted before it is stored too; an op that runs meanwhile may miss it either way.)
    pub(crate) fn has_failures(&self) -> bool {
        self.failed_ops.load(Ordering::Relaxed) != 0
    }

    /// Counts and keeps a failure; the slot the failed op's writes will carry.
    pub(crate) fn record_failure(&self, failure: OpFailure) -> ErrorRef {
        self.failed_ops.fetch_add(1, Ordering::Relaxed);
        let slot = ErrorSlot::new(failure);
        self.errors.lock().push(slot.clone());
        slot
    }

    /// One op fewer pending; wakes the waiters when none is left.
    fn retire_one(&self) {
        self.completed.add_one();
        if self.idle_waiters.load(Ordering::SeqCst) > 0 && self.is_idle() {
            let _idle = self.idle.lock();
            self.idle_cv.notify_all();
        }
    }

    /// Counts device work an op leaves running after it completed (event-mode GPU ops) as
    /// pending, so waits for all, stop and shutdown wait for it too. Raised before the op
    /// completes, so the counts never meet while the work is in flight.
    pub(crate) fn hold_pending(&self) {
        self.pushed.fetch_add(1, Ordering::SeqCst);
    }

    /// The device work counted by [`hold_pending`](Self::hold_pending) has finished.
    pub(crate) fn release_pending(&self) {
        self.retire_one();
    }

    /// Whether no op is pending. Every stripe of `completed` is read before `pushed`: each
    /// only grows, and completions never outrun pushes, so a sum equal to the later reading of
    /// `pushed` means nothing was pending when `pushed` was read.
    fn is_idle(&self) -> bool {
        let completed = self.completed.sum();
        completed == self.pushed.load(Ordering::SeqCst)
    }

    /// Blocks until no op is pending. A waiter announces itself before it reads the counts; a
    /// completer counts its op before it looks for waiters (all sequentially consistent), and
    /// notifies under the lock the waiter checks under: no wake-up is lost. A completer that
    /// finds the counts apart leaves the wake-up to the completion that closes the gap: of
    /// two completers racing to close it, the later increment (in the sequentially consistent
    /// order) is followed by a sum that sees both.
    pub(crate) fn wait_idle(&self) {
        if self.is_idle() {
            return;
        }
        self.idle_waiters.fetch_add(1, Ordering::SeqCst);
        let mut idle = self.idle.lock();
        while !self.is_idle() {
            idle = self.idle_cv.wait(idle);
        }
        drop(idle);
        self.idle_waiters.fetch_sub(1, Ordering::SeqCst);
    }

    /// Refuses waits from a thread that is running an op (it would wait for itself).
    pub(crate) fn refuse_inside_op() -> Result<(), EngineError> {
        match current::running_op() {
            Some(op) => Err(EngineError::WaitInsideWorker { op }),
            None => Ok(()),
        }
    }

    /// MXNet's `WaitForAll`: every op done; reports the first failure no wait has reported
    /// and forgets every failure (no var carries one after it). `flush` pushes every
    /// thread's bulk (the handle's, `bulk.rs`) before the wait.
    pub(crate) fn wait_for_all(
        core: &Arc<Core>,
        flush: impl FnOnce() -> Result<(), EngineError>,
    ) -> Result<(), EngineError> {
        Self::refuse_inside_op()?;
        flush()?;
        core.wait_idle();
        let slots = std::mem::take(&mut *core.errors.lock());
        let mut first = None;
        for slot in slots {
            let failure = slot.take_unreported();
            first = first.or(failure);
        }
        first.map_or(Ok(()), |failure| Err(failure.into()))
    }

    /// Drains (after `flush`, as in [`Core::wait_for_all`]), then joins every worker;
    /// pushes are refused until [`Core::start`].
    pub(crate) fn stop(
        core: &Arc<Core>,
        flush: impl FnOnce() -> Result<(), EngineError>,
    ) -> Result<(), EngineError> {
        Self::refuse_inside_op()?;
        let _lifecycle = core.lifecycle.lock();
        flush()?;
        core.accepting.store(false, Ordering::SeqCst);
        core.wait_idle();
        core.dispatcher.stop();
        Ok(())
    }

    /// Like [`Core::stop`], but ops that have not started yet skip their bodies (they still
    /// complete, so everything pushed drains at once). Returns how many were skipped.
    pub(crate) fn cancel(
        core: &Arc<Core>,
        flush: impl FnOnce() -> Result<(), EngineError>,
    ) -> Result<u64, EngineError> {
        Self::refuse_inside_op()?;
        let _lifecycle = core.lifecycle.lock();
        let before = core.cancelled_ops.load(Ordering::Relaxed);
        core.cancelling.store(true, Ordering::SeqCst);
        let flushed = flush();
        core.accepting.store(false, Ordering::SeqCst);
        core.wait_idle();
        core.dispatcher.stop();
        core.cancelling.store(false, Ordering::SeqCst);
        flushed?;
        Ok(core.cancelled_ops.load(Ordering::Relaxed) - before)
    }

    /// Starts the workers again after [`Core::stop`].
    pub(crate) fn start(&self) -> Result<(), EngineError> {
        let _lifecycle = self.lifecycle.lock();
        if !self.accepting.load(Ordering::SeqCst) {
            self.dispatcher.start()?;
            self.accepting.store(true, Ordering::SeqCst);
        }
        Ok(())
    }

    /// The last handle is gone: run everything pushed (unless called from inside an op,
    /// which cannot wait for itself), then join the workers. `close_bulks` is told whether
    /// this thread runs an op: it flushes every thread's bulk unless so, then closes them.
    pub(crate) fn shutdown(core: &Arc<Core>, close_bulks: impl FnOnce(bool)) {
        let inside_op = current::running_op().is_some();
        let _lifecycle = core.lifecycle.lock();
        close_bulks(inside_op);
        core.accepting.store(false, Ordering::SeqCst);
        if inside_op {
            // Joining the workers here would wait for the op this thread is running (a pool
            // dropped from one of its own workers waits for that worker to go idle): join them
            // from a helper thread instead. Ops still pending keep running until they are done.
            let engine = core.clone();
            let joiner = thread::Builder::new()
                .name("engine-shutdown".to_string())
                .spawn(move || engine.dispatcher.stop());
            if joiner.is_err() {
                core.dispatcher.stop(); // no thread to spare: the pool detaches this worker
            }
        } else {
            core.wait_idle();
            core.dispatcher.stop();
        }
        core.blocks.close();
    }

    pub(crate) fn pending(&self) -> usize {
        let completed = self.completed.sum();
        self.pushed
            .load(Ordering::Relaxed)
            .saturating_sub(completed) as usize
    }

    pub(crate) fn failed_ops(&self) -> u64 {
        self.failed_ops.load(Ordering::Relaxed)
    }

    pub(crate) fn cancelled_ops(&self) -> u64 {
        self.cancelled_ops.load(Ordering::Relaxed)
    }

    pub(crate) fn skipped_ops(&self) -> u64 {
        self.skipped_ops.load(Ordering::Relaxed)
    }

    pub(crate) fn is_stopped(&self) -> bool {
        !self.accepting.load(Ordering::SeqCst)
    }
}

/// The waiters a completion's vars grant, collected one push at a time: a var grants at
/// most a run of reads or one write, so `SmallVec::extend`'s reservation for the iterator's
/// size hint costs more than the pushes it prepares.
#[derive(Default)]
struct Granted(SmallVec<[Waiter; 4]>);

impl Extend<Waiter> for Granted {
    #[inline]
    fn extend<I: IntoIterator<Item = Waiter>>(&mut self, waiters: I) {
        for waiter in waiters {
            self.0.push(waiter);
        }
    }
}

/// Stripes of [`Completed`]: enough that a few workers rarely share one.
const COMPLETED_STRIPES: usize = 8;

// Thread-local: a thread keeps the stripe it was dealt, so its adds stay on one cache line.
engine_thread_local! {
    /// The calling thread's stripe of every engine's completed count (`usize::MAX`: none yet).
    static STRIPE: Cell<usize> = Cell::new(usize::MAX);
}

/// A count of completed ops striped over cache lines: each thread adds to its own stripe
/// (threads get stripes round-robin, so a few workers each have one), readers add them up.
#[derive(Default)]
struct Completed {
    stripes: [CachePadded<AtomicU64>; COMPLETED_STRIPES],
    next_stripe: AtomicUsize,
}

impl Completed {
    fn add_one(&self) {
        self.stripes[self.stripe()].fetch_add(1, Ordering::SeqCst);
    }

    fn sum(&self) -> u64 {
        self.stripes
            .iter()
            .map(|stripe| stripe.load(Ordering::SeqCst))
            .sum()
    }

    fn stripe(&self) -> usize {
        STRIPE.with(|stripe| {
            if stripe.get() == usize::MAX {
                let next = self.next_stripe.fetch_add(1, Ordering::Relaxed);
                stripe.set(next % COMPLETED_STRIPES);
            }
            stripe.get()
        })
    }
}

/// A one-shot flag a thread can wait on (the wait op of `wait_for_var`).
#[derive(Default)]
pub(crate) struct Latch {
    set: Mutex<bool>,
    cv: Condvar,
}

impl Latch {
    pub(crate) fn set(&self) {
        *self.set.lock() = true;
        self.cv.notify_all();
    }

    pub(crate) fn wait(&self) {
        let mut set = self.set.lock();
        while !*set {
            set = self.cv.wait(set);
        }
    }
}
