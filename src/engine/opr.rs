//! Op blocks: one pushed op's dependencies, wait count and body, and its completion.
//!
//! # An op's life
//! 1. **Push** fills a recycled [`OpBlock`] with the deduplicated dependencies, sorted in lock
//!    order ([`fill_deps`]), the op's header and its body (inline in the block when it fits,
//!    so a push allocates nothing). Ownership of the block follows the protocol of `block.rs`.
//! 2. **Append**: the pusher locks every var of the op (always in address order, so two pushers
//!    sharing vars cannot deadlock and get one consistent order on all of them) and appends a
//!    read or write on each. If every var granted it at once, the op is ready and the pusher
//!    dispatches it. Otherwise, still under the locks, it sets the wait count to the number of
//!    vars that queued it and gives the block up.
//! 3. **Dispatch**: whoever holds a ready op's handle (the pusher, or the thread whose grant
//!    brought the wait count to zero) hands it to the op's queue or runs it inline (naive
//!    engine, `Async` ops ready at push). A count reaches zero exactly once, so an op is
//!    dispatched exactly once, and never under a var lock (an inline run would otherwise
//!    re-enter the lock it holds).
//! 4. **Run**: the executor checks the op's vars for errors (reads first), skips the body if
//!    one is tainted (unless the op is `NoSkip` or a wait), and otherwise runs it under
//!    `catch_unwind` with a [`Completion`].
//! 5. **Complete**: [`Completion::done`] / [`Completion::fail`] (or a panic, or dropping the
//!    completion) releases every var: a read completes its read, a write stores the op's
//!    error (if any), bumps the version and grants the next ops. Then the engine's pending
//!    count drops by one.
#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};

use smallvec::SmallVec;

use super::block::{Body, OpHandle};
use super::core::Core;
use super::current::{self, RunningOp};
use super::error::{ErrorRef, FailureCause, OpError, OpFailure, SharedOpError};
use super::var::{Access, Var, VarRef};
use super::var_list::VarList;
use super::{Context, DeviceType, FnProperty, OpName};
use crate::pool::{panic_message, Task};
use crate::sync::{Arc, AtomicUsize, Ordering};

/// How many grants a queued op still waits for (see `block.rs` for who sets and counts it).
#[derive(Debug, Default)]
pub(crate) struct WaitCount(AtomicUsize);

impl WaitCount {
    /// Sets the count to the number of vars that queued the op. Called by the pusher while it
    /// holds every var lock of the op, so the locks publish it to the granters.
    pub(crate) fn set(&self, waiters: usize) {
        self.0.store(waiters, Ordering::Relaxed);
    }

    /// Counts one grant; true if it was the last: the caller, and only the caller, dispatches
    /// the op. The count only falls, and each grant still to come keeps it above zero, so a
    /// granter that reads 1 holds the only grant left and needs no read-modify-write.
    pub(crate) fn grant(&self) -> bool {
        if self.0.load(Ordering::Acquire) == 1 {
            return true;
        }
        let before = self.0.fetch_sub(1, Ordering::AcqRel);
        debug_assert!(before > 0, "an op was granted more often than it waits");
        before == 1
    }
}

/// One dependency of an op: the var, named by a pointer valid from the op's push to its
/// completion (see `var.rs`, "Who keeps a var alive while ops use it").
#[derive(Clone, Copy)]
pub(crate) struct Dep {
    pub(crate) var: VarRef,
    pub(crate) access: Access,
}

/// An op's dependencies, sorted in lock order; inline up to four.
pub(crate) type Deps = SmallVec<[Dep; 4]>;

/// Above this many vars, [`fill_deps`] sorts a collected list instead of ordering borrowed
/// vars on the stack.
const INSERTION_MAX: usize = 8;

/// Fills `deps` (empty) with MXNet's dedup of `reads` and `writes`: a var both read and
/// written counts as a write; duplicates count once. The result is sorted in lock order.
/// The caller keeps its handles on the vars until the op is enqueued (`block::enqueue`).
pub(crate) fn fill_deps<'r, 'w>(
    deps: &mut Deps,
    reads: impl Into<VarList<'r>>,
    writes: impl Into<VarList<'w>>,
) {
    let (reads, writes) = (reads.into(), writes.into());
    debug_assert!(deps.is_empty(), "a recycled block has no dependencies");
    if let (true, Some(only)) = (reads.is_empty(), writes.only()) {
        // The most common op: one output, no input.
        return deps.push(Dep {
            var: VarRef::of(only),
            access: Access::Write,
        });
    }
    if reads.len() + writes.len() > INSERTION_MAX {
        return sort_deps(deps, reads, writes);
    }
    insertion_deps(deps, reads, writes);
}

/// [`fill_deps`] for a few vars: orders the borrowed vars on the stack (an insertion sort on
/// lock order, a var's write before its reads), then names each var once in `deps`, which
/// is only appended to.
fn insertion_deps(deps: &mut Deps, reads: VarList<'_>, writes: VarList<'_>) {
    let mut sorted: [Option<(usize, Access, &Var)>; INSERTION_MAX] = [None; INSERTION_MAX];
    let mut count: usize = 0;
    let tagged = writes
        .iter()
        .map(|var| (var, Access::Write))
        .chain(reads.iter().map(|var| (var, Access::Read)));
    for (var, access) in tagged {
        let key = (var.lock_order(), access == Access::Read);
        let mut at = count;
        while let Some(Some((order, earlier, _))) = at.checked_sub(1).map(|before| sorted[before]) {
            if (order, earlier == Access::Read) <= key {
                break;
            }
            sorted[at] = sorted[at - 1];
            at -= 1;
        }
        sorted[at] = Some((key.0, access, var));
        count += 1;
    }
    let mut last = None;
    for &(order, access, var) in sorted[..count].iter().flatten() {
        if last != Some(order) {
            // The first of a var's entries: its write if it has one (writes sort first).
            deps.push(Dep {
                var: VarRef::of(var),
                access,
            });
            last = Some(order);
        }
    }
}

/// [`fill_deps`] for many vars: collect, sort, dedup.
fn sort_deps(deps: &mut Deps, reads: VarList<'_>, writes: VarList<'_>) {
    let tagged = |access| {
        move |var: &Var| Dep {
            var: VarRef::of(var),
            access,
        }
    };
    deps.extend(writes.iter().map(tagged(Access::Write)));
    deps.extend(reads.iter().map(tagged(Access::Read)));
    // Writes sort before reads of the same var, and dedup keeps the first.
    deps.sort_unstable_by_key(|dep| (dep.var.lock_order(), dep.access == Access::Read));
    deps.dedup_by(|later, earlier| later.var.same(earlier.var));
}

/// What a push says about its op besides the vars.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OpHeader {
    pub(crate) ctx: Context,
    pub(crate) prop: FnProperty,
    pub(crate) priority: i32,
    pub(crate) name: OpName,
    /// A wait op: runs even when its var carries an error.
    pub(crate) is_wait: bool,
}

/// A pushed op: its header, dependencies, wait count and body. Owned as `block.rs`
/// describes; recycled, never freed, while its engine lives.
pub(crate) struct OpBlock {
    pub(crate) wait: WaitCount,
    /// The engine; `None` only in a block never pushed.
    pub(crate) core: Option<Arc<Core>>,
    pub(crate) deps: Deps,
    pub(crate) header: OpHeader,
    /// The op's id in the engine's events (see [`EngineEvent`](super::EngineEvent)).
    pub(crate) id: u64,
    /// The op's body until it runs.
    pub(crate) body: Option<Body>,
}

impl std::ops::Deref for OpBlock {
    type Target = OpHeader;

    fn deref(&self) -> &OpHeader {
        &self.header
    }
}

impl OpBlock {
    /// A block to fill in (new, or for the recycling caches).
    pub(crate) fn empty() -> Self {
        OpBlock {
            wait: WaitCount::default(),
            core: None,
            deps: Deps::new(),
            header: OpHeader {
                ctx: Context::default(),
                prop: FnProperty::Normal,
                priority: 0,
                name: OpName::UNNAMED,
                is_wait: false,
            },
            id: 0,
            body: None,
        }
    }

    /// The engine the op was pushed to.
    pub(crate) fn core(&self) -> &Arc<Core> {
        self.core
            .as_ref()
            .expect("a pushed op belongs to an engine")
    }

    /// The first unreported error on the op's reads, then on its writes.
    fn inherited_error(&self) -> Option<ErrorRef> {
        if !self.core().has_failures() {
            // The common, clean path: no failure was recorded, so no var carries one, and
            // the op's vars stay untouched until its completion writes them (a read here
            // would fetch each var's lines shared from the thread that pushed the next op,
            // and the completion's lock would fetch them again, exclusive).
            return None;
        }
        if !self.deps.iter().any(|dep| dep.var.cell.may_carry_error()) {
            return None; // one load per var, no lock
        }
        let on = |access| {
            self.deps
                .iter()
                .filter(move |dep| dep.access == access)
                .find_map(|dep| dep.var.cell.error())
        };
        on(Access::Read).or_else(|| on(Access::Write))
    }

    fn runs_despite_errors(&self) -> bool {
        self.is_wait || self.prop == FnProperty::NoSkip
    }
}

// Thread-local: a panic unwinds the thread that runs the op, so the completion its body
// dropped while unwinding is found on that thread by the executor that caught the panic.
engine_thread_local! {
    /// A completion dropped while its op panicked on this thread.
    static PANICKED: RefCell<Option<Completion>> = RefCell::new(None);
}

/// Keeps `completion` for the executor, which reports the panic that dropped it.
fn stash_panicked(completion: Completion) {
    PANICKED.with(|slot| *slot.borrow_mut() = Some(completion));
}

/// The completion stashed by a panicking op on this thread.
fn take_panicked() -> Option<Completion> {
    PANICKED.with(|slot| slot.borrow_mut().take())
}

/// What an op's body is told about where it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunContext {
    /// The context the op was pushed to.
    pub ctx: Context,
    /// The op's name.
    pub name: OpName,
    /// The op's id, as its queued, started and finished events carry it (see
    /// [`EngineEvent`](super::EngineEvent)): what ties a run of a body to those events.
    pub id: u64,
}

/// The handle an async op calls exactly once when it is finished: [`done`](Self::done) or
/// [`fail`](Self::fail), from any thread.
///
/// Dropping it without calling either fails the op ("op `x` dropped its completion without
/// calling it"): the engine never hangs on a forgotten completion.
pub struct Completion {
    block: Option<OpHandle>,
    /// The error the op inherited from a var (a `NoSkip` or wait op that ran anyway).
    inherited: Option<ErrorRef>,
}

impl Completion {
    /// The op succeeded.
    pub fn done(mut self) {
        self.finish(Ok(()));
    }

    /// The op failed with `error`: the vars it writes carry the failure.
    pub fn fail(mut self, error: impl Into<super::OpError>) {
        let error: OpError = error.into();
        self.finish(Err(FailureCause::Error(SharedOpError::from(error))));
    }

    /// The op's name.
    pub fn name(&self) -> OpName {
        self.block
            .as_ref()
            .map_or(OpName::UNNAMED, |block| block.name)
    }

    fn core_of_block(&self) -> &Core {
        self.block
            .as_ref()
            .expect("an unfinished completion")
            .core()
    }

    pub(crate) fn finish(&mut self, result: Result<(), FailureCause>) {
        let result = result.map_err(|cause| OpFailure {
            op: self.name(),
            cause,
        });
        self.finish_as(result);
    }

    pub(crate) fn finish_as(&mut self, result: Result<(), OpFailure>) {
        if let Some(block) = self.block.take() {
            if block.ctx.device == DeviceType::Gpu {
                if let Some(gpu) = block.core().gpu.clone() {
                    return gpu.finish(block, self.inherited.take(), result);
                }
            }
            Core::complete(block, self.inherited.take(), result);
        }
    }
}

#[cfg(all(test, loom))]
impl Completion {
    /// A completion of no op (the loom models run stand-in bodies).
    pub(crate) fn detached() -> Self {
        Completion {
            block: None,
            inherited: None,
        }
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        let Some(block) = &self.block else { return };
        if std::thread::panicking() && current::is_running(block.address()) {
            let stashed = Completion {
                block: self.block.take(),
                inherited: self.inherited.take(),
            };
            stash_panicked(stashed);
        } else {
            self.finish(Err(FailureCause::DroppedCompletion));
        }
    }
}

impl fmt::Debug for Completion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Completion({})", self.name())
    }
}

/// Runs op `block` with `body` on the calling thread.
pub(crate) fn execute<F>(block: OpHandle, body: F)
where
    F: FnOnce(RunContext, Completion),
{
    let _running = RunningOp::enter(block.name, block.address());
    block.core().op_started(&block);
    if let Some(gpu) = &block.core().gpu {
        gpu.before_run(&block); // orders the op after device work on its vars (engine::gpu)
    }
    let inherited = block.inherited_error();
    let skip = inherited.is_some() && !block.runs_despite_errors();
    let run = RunContext {
        ctx: block.ctx,
        name: block.name,
        id: block.id,
    };
    let mut completion = Completion {
        block: Some(block),
        inherited,
    };
    if skip {
        completion.core_of_block().count_skipped();
        completion.finish(Ok(())); // carries the inherited error to its writes
        return;
    }
    if completion.core_of_block().is_cancelling() {
        // `Engine::cancel`: the body never runs; the op completes so its dependents drain.
        completion.core_of_block().count_cancelled();
        completion.finish(Ok(()));
        return;
    }
    if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| body(run, completion))) {
        if let Some(mut stashed) = take_panicked() {
            stashed.finish(Err(FailureCause::Panic(panic_message(&*payload))));
        }
    }
}

/// Runs a ready op (its body is in its block) on the calling thread, then the ops it made
/// ready for this worker (continuations).
pub(crate) fn run_ready(mut block: OpHandle) {
    let body = block.body.take().expect("a ready op has its body");
    current::run_with_continuations(
        || execute(block, |run, completion| body.call(run, completion)),
        run_ready,
    );
}

/// A pool task that runs the ready op `block`.
pub(crate) fn op_task(block: OpHandle) -> Task {
    Task::new(move || run_ready(block))
}

/// A reusable op ([`Engine::new_operator`](super::Engine::new_operator)): its body and
/// dependencies are fixed; each push runs it once more.
#[derive(Clone)]
pub struct Operator(pub(crate) Arc<OperatorInner>);

pub(crate) struct OperatorInner {
    pub(crate) body: Box<dyn Fn(RunContext, Completion) + Send + Sync>,
    /// Each push's dependencies, naming `vars`.
    pub(crate) deps: Deps,
    /// The handles that keep the vars of `deps` alive, in the same order.
    pub(crate) vars: Vec<Var>,
    pub(crate) prop: FnProperty,
    pub(crate) name: OpName,
}

impl Operator {
    /// The operator's name.
    pub fn name(&self) -> OpName {
        self.0.name
    }

    /// The body of one push of this operator.
    pub(crate) fn body(&self) -> impl FnOnce(RunContext, Completion) + Send + 'static {
        let operator = self.0.clone();
        move |run, completion| (operator.body)(run, completion)
    }
}

impl fmt::Debug for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Operator({})", self.0.name)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn wait_count_reaches_zero_once() {
        let wait = WaitCount::default();
        wait.set(3);
        assert!(!wait.grant());
        assert!(!wait.grant());
        assert!(wait.grant());
    }

    #[test]
    fn dedup_turns_read_and_write_of_one_var_into_a_write() {
        let (a, b) = (Var::new(1), Var::new(2));
        let mut deps = Deps::new();
        fill_deps(
            &mut deps,
            &[a.clone(), a.clone(), b.clone()],
            &[b.clone(), b.clone()],
        );
        assert_eq!(deps.len(), 2);
        let access_of = |var: &Var| {
            let var = VarRef::of(var);
            deps.iter().find(|d| d.var.same(var)).unwrap().access
        };
        assert_eq!(access_of(&a), Access::Read);
        assert_eq!(access_of(&b), Access::Write);
        assert!(deps
            .windows(2)
            .all(|w| w[0].var.lock_order() < w[1].var.lock_order()));
    }

    #[test]
    fn the_insertion_path_orders_and_dedups_as_the_sorting_path() {
        let vars: Vec<Var> = (0..5).map(Var::new).collect();
        let cases: [(&[usize], &[usize]); 6] = [
            (&[0, 1, 2], &[3]),
            (&[3, 3, 1], &[1, 0]),
            (&[4, 2, 0, 1], &[2, 4, 3, 0]), // 8 vars: the most the insertion path takes
            (&[], &[2, 2]),
            (&[1, 0, 1, 0], &[]),
            (&[4, 3, 2, 1, 0], &[0, 4]),
        ];
        let pick = |indices: &[usize]| indices.iter().map(|&i| vars[i].clone()).collect();
        let listed = |deps: &Deps| -> Vec<(u64, Access)> {
            deps.iter().map(|dep| (dep.var.id, dep.access)).collect()
        };
        for (reads, writes) in cases {
            let (reads, writes): (Vec<Var>, Vec<Var>) = (pick(reads), pick(writes));
            let (mut inserted, mut sorted) = (Deps::new(), Deps::new());
            insertion_deps(&mut inserted, (&reads[..]).into(), (&writes[..]).into());
            sort_deps(&mut sorted, (&reads[..]).into(), (&writes[..]).into());
            assert_eq!(listed(&inserted), listed(&sorted), "{reads:?} {writes:?}");
        }
    }

    #[test]
    fn dedup_of_many_vars_sorts_and_keeps_the_write() {
        let vars: Vec<Var> = (0..6).map(Var::new).collect();
        let reads: Vec<Var> = [0, 1, 2, 3, 1, 0, 5].map(|i| vars[i].clone()).to_vec();
        let writes: Vec<Var> = [3, 4, 3].map(|i| vars[i].clone()).to_vec();
        let mut many = Deps::new();
        fill_deps(&mut many, &reads, &writes); // 10 vars: the sorting path
        assert_eq!(many.len(), 6);
        for (index, var) in vars.iter().enumerate() {
            let dep = many.iter().find(|d| d.var.same(VarRef::of(var))).unwrap();
            let written = index == 3 || index == 4;
            assert_eq!(dep.access == Access::Write, written, "var {index}");
        }
        assert!(many
            .windows(2)
            .all(|w| w[0].var.lock_order() < w[1].var.lock_order()));
    }
}
