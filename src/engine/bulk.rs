//! Bulk execution (MXNet's `ImperativeBulk`): small synchronous ops pushed by one thread are
//! batched and pushed as one op.
//!
//! # Rules (MXNet's)
//! Per pushing thread and engine, with a bulk size `n > 0` set by that thread: a `push_sync` of
//! a `Normal` op with priority 0 is appended to the thread's bulk instead of being pushed. The
//! bulk is flushed (pushed as one op named `ImperativeBulk`, reading and writing the union of
//! its ops' vars, deduplicated) when it holds `n` ops, when an op for another context arrives,
//! before any other push from the thread, before a wait, and when the size changes. The
//! bulk's body runs its ops in order; the first one that fails or panics stops it, and the
//! failure names that op.
//!
//! # Nothing is lost
//! Each thread's bulk is registered with its engine (the registry is held by the engine's
//! handle, `handle.rs`), so `wait_for_all`, `stop` and the engine's shutdown flush every
//! thread's bulk, including those of threads that have exited.
//! A flush pushes while holding that bulk's lock, so a thread flushing its own bulk before a
//! later push waits for a concurrent flush by another thread: its ops keep their order.
//! A thread running an op never bulks (an op run inline during a flush may push).
//!
//! # Place
//! Above the core (a flush is a push) and the op spec (what `push_sync` appends); the core
//! does not know bulks: its waits, stop and shutdown take the handle's flush as a closure.
#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};

use super::core::Core;
use super::current;
use super::error::{EngineError, FailureCause, OpFailure, OpResult, SharedOpError};
use super::opr::{fill_deps, Deps, OpHeader};
use super::spec::OpSpec;
use super::var::Var;
use super::{Context, FnProperty, OpName, RunContext};
use crate::sync::{thread_local, Arc, AtomicUsize, Mutex, Ordering};

/// A synchronous op body, boxed for the bulk.
pub(crate) type SyncBody = Box<dyn FnOnce(RunContext) -> OpResult + Send>;

/// One thread's bulk for one engine.
#[derive(Default)]
struct Bulk {
    size: usize,
    ctx: Context,
    ops: Vec<(OpName, SyncBody)>,
    reads: Vec<Var>,
    writes: Vec<Var>,
    /// The engine shut down: the thread's entry may be forgotten.
    closed: bool,
}

type BulkRef = Arc<Mutex<Bulk>>;

// Thread-local: as in MXNet, a bulk gathers the ops one thread pushes back to back, so each
// pushing thread has its own.
thread_local! {
    /// This thread's bulks, by engine key.
    #[allow(clippy::missing_const_for_thread_local)] // loom's thread_local! has no const form
    static MY_BULKS: RefCell<Vec<(u64, BulkRef)>> = RefCell::new(Vec::new());
}

/// Every thread's bulk for one engine.
pub(crate) struct BulkRegistry {
    key: u64,
    bulks: Mutex<Vec<BulkRef>>,
    /// Threads with a bulk size above 0: while 0, pushes skip every bulk check.
    bulking_threads: AtomicUsize,
}

impl BulkRegistry {
    pub(crate) fn new() -> Self {
        BulkRegistry {
            key: fastrand::u64(..),
            bulks: Mutex::new(Vec::new()),
            bulking_threads: AtomicUsize::new(0),
        }
    }

    /// Whether any thread bulks (one relaxed load; the calling thread sees its own setting).
    #[inline]
    pub(crate) fn is_active(&self) -> bool {
        self.bulking_threads.load(Ordering::Relaxed) > 0
    }

    /// This thread's bulk, registered on first use.
    fn mine(&self) -> BulkRef {
        MY_BULKS.with(|mine| {
            let mut mine = mine.borrow_mut();
            if let Some((_, bulk)) = mine.iter().find(|(key, _)| *key == self.key) {
                return bulk.clone();
            }
            mine.retain(|(_, bulk)| !bulk.lock().closed);
            let bulk = BulkRef::default();
            self.bulks.lock().push(bulk.clone());
            mine.push((self.key, bulk.clone()));
            bulk
        })
    }

    /// The calling thread's bulk size.
    pub(super) fn size(&self) -> usize {
        if !self.is_active() {
            return 0;
        }
        self.mine().lock().size
    }

    /// Sets the calling thread's bulk size; returns the previous one.
    pub(crate) fn set_size(&self, core: &Arc<Core>, size: usize) -> Result<usize, EngineError> {
        let bulk = self.mine();
        let mut locked = bulk.lock();
        let previous = std::mem::replace(&mut locked.size, size);
        match (previous > 0, size > 0) {
            (false, true) => {
                self.bulking_threads.fetch_add(1, Ordering::Relaxed);
            }
            (true, false) => {
                self.bulking_threads.fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
        }
        if locked.ops.len() >= size {
            flush(core, &mut locked)?;
        }
        Ok(previous)
    }

    /// Appends a `push_sync` to the calling thread's bulk if the rules allow; otherwise hands
    /// the body back (after flushing the bulk, so the op keeps its place in push order).
    pub(crate) fn try_append(
        &self,
        core: &Arc<Core>,
        spec: &OpSpec<'_>,
        body: SyncBody,
    ) -> Result<Option<SyncBody>, EngineError> {
        if current::running_op().is_some() {
            return Ok(Some(body));
        }
        let bulk = self.mine();
        let mut locked = bulk.lock();
        let bulkable = locked.size > 0 && spec.prop == FnProperty::Normal && spec.priority == 0;
        if !bulkable || (!locked.ops.is_empty() && locked.ctx != spec.ctx) {
            flush(core, &mut locked)?;
        }
        if !bulkable {
            return Ok(Some(body));
        }
        locked.ctx = spec.ctx;
        locked.ops.push((spec.name, body));
        locked.reads.extend(spec.reads.iter().cloned());
        locked.writes.extend(spec.writes.iter().cloned());
        if locked.ops.len() >= locked.size {
            flush(core, &mut locked)?;
        }
        Ok(None)
    }

    /// Flushes the calling thread's bulk (before another push or a wait).
    pub(crate) fn flush_mine(&self, core: &Arc<Core>) -> Result<(), EngineError> {
        if !self.is_active() || current::running_op().is_some() {
            return Ok(());
        }
        flush(core, &mut self.mine().lock())
    }

    /// Flushes every thread's bulk (`wait_for_all`, `stop`, shutdown).
    pub(crate) fn flush_all(&self, core: &Arc<Core>) -> Result<(), EngineError> {
        let bulks = self.bulks.lock().clone();
        for bulk in bulks {
            flush(core, &mut bulk.lock())?;
        }
        Ok(())
    }

    /// The engine is gone: threads may forget their entries.
    pub(crate) fn close(&self) {
        for bulk in self.bulks.lock().drain(..) {
            bulk.lock().closed = true;
        }
    }
}

/// Pushes the bulk's ops as one op (nothing if it is empty).
fn flush(core: &Arc<Core>, bulk: &mut Bulk) -> Result<(), EngineError> {
    if bulk.ops.is_empty() {
        return Ok(());
    }
    let ops = std::mem::take(&mut bulk.ops);
    let header = OpHeader {
        ctx: bulk.ctx,
        prop: FnProperty::Normal,
        priority: 0,
        name: OpName::IMPERATIVE_BULK,
        is_wait: false,
    };
    let fill = |deps: &mut Deps| fill_deps(deps, &bulk.reads, &bulk.writes);
    let pushed = Core::push(core, header, fill, move |run, mut completion| {
        let result = run_in_order(run, ops);
        completion.finish_as(result);
    });
    bulk.reads.clear();
    bulk.writes.clear();
    pushed
}

/// Runs a bulk's ops in order until one fails or panics; the failure names that op.
fn run_in_order(run: RunContext, ops: Vec<(OpName, SyncBody)>) -> Result<(), OpFailure> {
    for (name, body) in ops {
        let run = RunContext { name, ..run };
        let cause = match panic::catch_unwind(AssertUnwindSafe(|| body(run))) {
            Ok(Ok(())) => continue,
            Ok(Err(error)) => FailureCause::Error(SharedOpError::from(error)),
            Err(payload) => FailureCause::Panic(crate::pool::panic_message(&*payload)),
        };
        return Err(OpFailure { op: name, cause });
    }
    Ok(())
}
