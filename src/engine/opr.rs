//! Op blocks: one pushed op's dependencies, wait count and body, and its completion.
//!
//! # An op's life
//! 1. **Push** builds an [`OpBlock`]: the deduplicated dependencies sorted in lock order, a
//!    wait count of `dependencies + 1`, and the op's one boxed task (the user's closure and a
//!    handle to the block, in a single allocation).
//! 2. **Append**: the pusher locks every var of the op (always in address order, so two pushers
//!    sharing vars cannot deadlock and get one consistent order on all of them), appends a read
//!    or write on each, counts the grants it got at once, unlocks, and subtracts
//!    `grants + 1` from the wait count.
//! 3. **Dispatch**: whoever brings the wait count to zero (the pusher, or a thread completing
//!    an earlier op) takes the task out of the block and hands it to the op's queue. A count
//!    reaches zero exactly once, so an op is dispatched exactly once, and never under a var
//!    lock (an inline run would otherwise re-enter the lock it holds).
//! 4. **Run**: the executor checks the op's vars for errors (reads first), skips the body if
//!    one is tainted (unless the op is `NoSkip` or a wait), and otherwise runs it under
//!    `catch_unwind` with a [`Completion`].
//! 5. **Complete**: [`Completion::done`] / [`Completion::fail`] (or a panic, or dropping the
//!    completion) releases every var: a read completes its read, a write stores the op's
//!    error (if any), bumps the version and grants the next ops. Then the engine's pending
//!    count drops by one.
#![forbid(unsafe_code)]

use std::fmt;
use std::panic::{self, AssertUnwindSafe};

use smallvec::SmallVec;

use super::core::Core;
use super::current::{self, RunningOp};
use super::error::{ErrorRef, FailureCause, OpFailure};
use super::var::{Access, Var};
use super::{Context, DeviceType, FnProperty, OpName};
use crate::pool::Task;
use crate::sync::{Arc, AtomicUsize, Mutex, Ordering};

/// An op's count of grants still missing, plus one held by the pusher until it has appended
/// every dependency.
#[derive(Debug)]
pub(crate) struct WaitCount(AtomicUsize);

impl WaitCount {
    /// For an op with `deps` dependencies.
    pub(crate) fn new(deps: usize) -> Self {
        WaitCount(AtomicUsize::new(deps + 1))
    }

    /// Counts `grants` grants; true if they brought the count to zero: the caller, and only
    /// the caller, dispatches the op.
    pub(crate) fn grant(&self, grants: usize) -> bool {
        let before = self.0.fetch_sub(grants, Ordering::AcqRel);
        debug_assert!(
            before >= grants,
            "an op was granted more often than it waits"
        );
        before == grants
    }
}

/// One dependency of an op.
#[derive(Clone)]
pub(crate) struct Dep {
    pub(crate) var: Var,
    pub(crate) access: Access,
}

/// An op's dependencies, sorted in lock order; inline up to four.
pub(crate) type Deps = SmallVec<[Dep; 4]>;

/// MXNet's dedup: a var both read and written counts as a write; duplicates count once.
/// The result is sorted in lock order.
pub(crate) fn dedup_deps<'a>(
    reads: impl IntoIterator<Item = &'a Var>,
    writes: impl IntoIterator<Item = &'a Var>,
) -> Deps {
    let mut deps = Deps::new();
    for var in writes {
        deps.push(Dep {
            var: var.clone(),
            access: Access::Write,
        });
    }
    for var in reads {
        deps.push(Dep {
            var: var.clone(),
            access: Access::Read,
        });
    }
    if deps.len() > 1 {
        // Writes sort before reads of the same var, and dedup keeps the first.
        deps.sort_unstable_by_key(|dep| (dep.var.lock_order(), dep.access == Access::Read));
        deps.dedup_by(|later, earlier| later.var.same(&earlier.var));
    }
    deps
}

/// A pushed op: shared by the vars it waits on and the task that runs it.
pub(crate) struct OpBlock {
    pub(crate) wait: WaitCount,
    /// The engine; `None` only while the block sits recycled in a cache.
    pub(crate) core: Option<Arc<Core>>,
    pub(crate) deps: Deps,
    pub(crate) ctx: Context,
    pub(crate) prop: FnProperty,
    pub(crate) priority: i32,
    pub(crate) name: OpName,
    /// A wait op: runs even when its var carries an error.
    pub(crate) is_wait: bool,
    /// The op's task until it is dispatched.
    pub(crate) task: Mutex<Option<Task>>,
}

/// A shared handle to an op block.
pub(crate) type OpRef = Arc<OpBlock>;

impl OpBlock {
    /// A block to fill in (new, or for the recycling caches).
    pub(crate) fn empty() -> Self {
        OpBlock {
            wait: WaitCount::new(0),
            core: None,
            deps: Deps::new(),
            ctx: Context::default(),
            prop: FnProperty::Normal,
            priority: 0,
            name: OpName::UNNAMED,
            is_wait: false,
            task: Mutex::new(None),
        }
    }

    /// The engine the op was pushed to.
    pub(crate) fn core(&self) -> &Core {
        self.core
            .as_ref()
            .expect("a pushed op belongs to an engine")
    }

    fn address(block: &OpRef) -> usize {
        Arc::as_ptr(block) as usize
    }

    /// The first unreported error on the op's reads, then on its writes.
    fn inherited_error(&self) -> Option<ErrorRef> {
        let on = |access| {
            self.deps
                .iter()
                .filter(move |dep| dep.access == access)
                .find_map(|dep| dep.var.0.cell.error())
        };
        on(Access::Read).or_else(|| on(Access::Write))
    }

    fn runs_despite_errors(&self) -> bool {
        self.is_wait || self.prop == FnProperty::NoSkip
    }

    /// Where the op goes when it is ready.
    pub(crate) fn target(&self) -> super::core::Target {
        super::core::Target {
            ctx: self.ctx,
            prop: self.prop,
            priority: self.priority,
        }
    }

    /// Takes the task out for dispatch (exactly once).
    pub(crate) fn take_task(&self) -> Task {
        self.task
            .lock()
            .take()
            .expect("an op is dispatched exactly once")
    }
}

/// What an op's body is told about where it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunContext {
    /// The context the op was pushed to.
    pub ctx: Context,
    /// The op's name.
    pub name: OpName,
}

/// The handle an async op calls exactly once when it is finished: [`done`](Self::done) or
/// [`fail`](Self::fail), from any thread.
///
/// Dropping it without calling either fails the op ("op `x` dropped its completion without
/// calling it"): the engine never hangs on a forgotten completion.
pub struct Completion {
    block: Option<OpRef>,
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
        self.finish(Err(FailureCause::Error(error.into())));
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
        let name = self.name();
        self.finish_as(result.map_err(|cause| OpFailure { op: name, cause }));
    }

    pub(crate) fn finish_as(&mut self, result: Result<(), OpFailure>) {
        if let Some(block) = self.block.take() {
            if block.ctx.device == DeviceType::Gpu {
                return super::gpu::finish(block, self.inherited.take(), result);
            }
            Core::complete(block, self.inherited.take(), result);
        }
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        let Some(block) = &self.block else { return };
        if std::thread::panicking() && current::is_running(OpBlock::address(block)) {
            let stashed = Completion {
                block: self.block.take(),
                inherited: self.inherited.take(),
            };
            current::stash_panicked(stashed);
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

/// Runs op `block` with `body` on the calling thread (the body of every op task).
pub(crate) fn execute<F>(block: OpRef, body: F)
where
    F: FnOnce(RunContext, Completion),
{
    let _running = RunningOp::enter(block.name, OpBlock::address(&block));
    block.core().op_started(&block);
    if let Some(gpu) = &block.core().gpu {
        gpu.before_run(&block); // orders the op after device work on its vars (engine::gpu)
    }
    let inherited = block.inherited_error();
    let skip = inherited.is_some() && !block.runs_despite_errors();
    let run = RunContext {
        ctx: block.ctx,
        name: block.name,
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
        if let Some(mut stashed) = current::take_panicked() {
            stashed.finish(Err(FailureCause::Panic(panic_message(&*payload))));
        }
    }
}

/// The task that runs a one-shot async body.
pub(crate) fn async_task<F>(block: OpRef, body: F) -> Task
where
    F: FnOnce(RunContext, Completion) + Send + 'static,
{
    Task::new(move || current::run_with_continuations(|| execute(block, body)))
}

/// A reusable op ([`Engine::new_operator`](super::Engine::new_operator)): its body and
/// dependencies are fixed; each push runs it once more.
#[derive(Clone)]
pub struct Operator(pub(crate) Arc<OperatorInner>);

pub(crate) struct OperatorInner {
    pub(crate) body: Box<dyn Fn(RunContext, Completion) + Send + Sync>,
    pub(crate) deps: Deps,
    pub(crate) prop: FnProperty,
    pub(crate) name: OpName,
}

impl Operator {
    /// The operator's name.
    pub fn name(&self) -> OpName {
        self.0.name
    }

    /// The task that runs this operator once for `block`.
    pub(crate) fn task(&self, block: OpRef) -> Task {
        let operator = self.0.clone();
        Task::new(move || {
            current::run_with_continuations(|| {
                execute(block, |run, completion| (operator.body)(run, completion))
            })
        })
    }
}

impl fmt::Debug for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Operator({})", self.0.name)
    }
}

/// The text of a panic payload (`&str` and `String` payloads; others get a placeholder).
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic with a non-string payload".to_string()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn wait_count_reaches_zero_once() {
        let wait = WaitCount::new(2);
        assert!(!wait.grant(1));
        assert!(!wait.grant(1));
        assert!(wait.grant(1));
    }

    #[test]
    fn dedup_turns_read_and_write_of_one_var_into_a_write() {
        let (a, b) = (Var::new(1), Var::new(2));
        let deps = dedup_deps([&a, &a, &b], [&b, &b]);
        assert_eq!(deps.len(), 2);
        let access_of = |var: &Var| deps.iter().find(|d| d.var.same(var)).unwrap().access;
        assert_eq!(access_of(&a), Access::Read);
        assert_eq!(access_of(&b), Access::Write);
        assert!(deps
            .windows(2)
            .all(|w| w[0].var.lock_order() < w[1].var.lock_order()));
    }
}
