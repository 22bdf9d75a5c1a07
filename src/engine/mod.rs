//! The dependency engine (MXNet's): ops declare the vars they read and write, and run as soon
//! as their dependencies allow, in parallel where nothing orders them.
//!
//! # The rules
//! An op pushed with `reads` and `writes` runs after every earlier op that writes one of its
//! vars, and (if it writes a var) after every earlier op that reads or writes that var. Ops
//! that share no written var run in parallel; consecutive reads of a var run concurrently; a
//! write is exclusive. A var read and written by one op counts as written; a var listed twice
//! counts once. A var's `version` counts its completed writes.
//!
//! # An op's life
//! Push fills an op block (see `opr.rs`) with the deduplicated dependencies and the op's
//! header. The pusher locks all the op's vars at once, in address order, and appends a read or
//! write to each (the var state machine of `var.rs`); each var grants at once or queues the
//! op. An op every var granted is ready: the pusher dispatches it to its queue (inline for the
//! naive engine and for `Async` ops, the device's worker pool, the priority pool, or the IO
//! worker). Otherwise, still under the locks, the pusher sets the op's wait count to the
//! number of vars that queued it and gives the block up (its body waits in it). Every later
//! grant (when an earlier op completes) subtracts one; the thread that brings the count to
//! zero dispatches the op. The op runs, then completes (through its [`Completion`], from any
//! thread), which releases its vars, grants the next ops and dispatches those that became
//! ready (with an observer: every grant first, then the observer's events of that instant,
//! then the dispatches), and counts the op as no longer pending.
//!
//! # Why an op is dispatched exactly once, and never too early
//! The pusher holds every var lock of the op while it appends and sets the wait count, and a
//! grant needs one of those locks: no completion can see the op before it is complete, so
//! the count needs no `+1` held by the pusher (MXNet's trick). A count reaches
//! zero exactly once, and only the thread whose grant did so dispatches. Dispatch happens after
//! every var lock is released, so an op run inline (naive engine, `Async` ops, a full pool
//! queue) never re-enters a held lock. Because a push holds all its vars' locks while
//! appending, two threads pushing ops that share vars get the same relative order on every
//! shared var, so several client threads may push at once without the cross-order deadlock
//! MXNet's engine has (mxnet#16434). Who owns an op's block at each step, and why the plain
//! pointers to it in var queues stay valid, is `block.rs`'s essay.
//!
//! # Errors
//! An op fails by returning an error (`push_sync`), calling [`Completion::fail`], panicking, or
//! dropping its completion uncalled. Its failure goes into one shared slot that every var it
//! writes now carries. When an op is about to run it checks its reads, then its writes: if one
//! carries an unreported failure, the op inherits it and is skipped (its body does not run;
//! `NoSkip` ops and wait ops run anyway), and its writes carry the failure on. `wait_for_var`
//! reports the var's failure once and clears that var alone: every var a failure reached
//! reports it to its own waiter (MXNet clears every var at the first report);
//! `wait_for_all` reports the first failure no wait has reported and clears them all. Every error names the op that failed. A wait called on a thread that is running an op
//! returns [`EngineError::WaitInsideWorker`] instead of deadlocking (mxnet#10341). The engine
//! keeps working after errors: clean vars are unaffected.
//!
//! # Nothing is lost at shutdown
//! `stop` and dropping the last [`Engine`] handle flush every thread's bulk, refuse new
//! pushes, wait until no op is pending (the pending count goes up before a push checks that
//! the engine accepts, and `stop` stops accepting before it waits, so a push either is refused
//! or is waited for), and only then join the workers. Our pools themselves run every queued
//! task before their threads exit. A live resize of a worker pool moves no queued task, so it
//! loses none either. Only [`Engine::cancel`] skips work, and only when asked: ops that have
//! not started complete without running their bodies (MXNet's shutdown phase), so their
//! dependents drain at once; ops already running finish.
//!
//! # GPU contexts
//! The per-device engine runs ops on `gpu(i)` on that GPU's workers, each owning a stream;
//! by default a GPU op completes for the engine once its work is launched, and dependents
//! wait on events (device) or fences (host). The protocol and why it is safe are in the
//! `gpu` module (`src/engine/gpu/mod.rs`).
//!
//! # Performance
//! Per op: no allocation when the op's body fits in 64 bytes (it is stored inline in the op
//! block), else one. Op blocks are recycled through per-thread caches and keep their engine
//! reference (`recycle.rs`); they are owned, not reference counted (`block.rs`), so queueing
//! an op on a var costs no atomic beyond the var's lock; dependencies are deduplicated in
//! place in the recycled block; a var's waiting queue reuses its buffer; the pending count is
//! the only engine-wide counter, on a cache line of its own. An op ready at push never touches
//! its wait count, and a granter that holds the last grant dispatches without a
//! read-modify-write. Ready ops reach a CPU worker pool through the engine's lock-free queue
//! and a few draining tasks (`ready.rs`), not one pool task per op; a worker that makes an op
//! of its own pool ready runs it next as a continuation (`current.rs`). The profiler hook
//! ([`EngineObserver`]) costs one branch when none is installed.
//!
//! # Files, bottom first
//! Values: `name.rs` (interned op names), `types.rs` (contexts, properties), `event.rs` (the
//! observer's events), `settings.rs` (worker counts), `error.rs`. The var state: `var.rs`
//! (the var state machine and the var handle), `var_list.rs`. The op: `block.rs` (who owns
//! an op block, the appends under the var locks), then the thread's part, `current.rs` (the
//! op running here, continuations, which it runs through a runner it is given), then
//! `opr.rs` (the block's data, running it, its completion) and `spec.rs` (what a push
//! says). The queues: `ready.rs` (ready ops in front of a worker pool), `recycle.rs` (free op
//! blocks). Then `core.rs` (push, completion, the pending count, waits), `bulk.rs`, `gpu/`,
//! the dispatchers `threaded.rs` and `naive.rs`, and `handle.rs`.
//!
//! Each file imports only files before it, except for three edges of one cycle of types on
//! the per-op path, listed in `tests/module_layers.rs`. Each is a field or a signature that
//! names a type of a later file, and that type names the earlier file's type back:
//! - **var -> block**: a var's queue holds `Waiter`s, typed pointers to op
//!   blocks, and a block's dependencies hold [`Var`]s.
//! - **block -> opr**: `OpHandle` and `Waiter` point to an `OpBlock`, and
//!   `Body` is called with a [`Completion`] and a [`RunContext`]; the block holds its `Body`
//!   and the completion holds the block's handle.
//! - **opr -> core**: an op block holds its engine's core (recycling and every completion
//!   reach it through the block), and the core's fields hold op blocks (the free-block pool)
//!   and take op handles (the dispatcher); a completion completes through the core.
//!
//! A cycle of types spread over files cannot be ordered; it is cut only by one side not
//! naming the other's type. An erased pointer (a waiter as an untyped pointer with a grant
//! function beside it, a block's core behind a vtable) costs an indirect call or a pointer
//! load per op and per grant, on the path the benchmarks time. A type parameter costs
//! nothing at run time (`OpBlock<C>` over its core, `VarCell<T>` over its waiter, as the var
//! state machine already is): that is what removing these edges takes, with the parameter on
//! every signature that names a block, a completion or a var between these files. Moving a
//! type to the other file only moves the edge (the cycle is in the types, not in where they
//! are written). The GPU path is outside the cycle: the core holds it as a `GpuPath` trait
//! object (`core.rs`), called only in an engine with GPUs, and it imports the core, never
//! the other way.

/// Declares the engine's thread-locals (each says where it is declared why it is one):
/// `const`-initialised outside loom, so an access on the per-op path reads the cell without
/// checking that it was built; lazily initialised under loom, whose `thread_local!` has no
/// `const` form.
macro_rules! engine_thread_local {
    ($($(#[$attr:meta])* static $name:ident: $ty:ty = $init:expr;)*) => {$(
        #[cfg(not(loom))]
        std::thread_local! { $(#[$attr])* static $name: $ty = const { $init }; }
        #[cfg(loom)]
        loom::thread_local! { $(#[$attr])* static $name: $ty = $init; }
    )*};
}

mod block;
mod bulk;
mod core;
mod current;
mod error;
mod event;
mod gpu;
mod handle;
mod naive;
mod name;
pub(crate) mod opr;
mod ready;
mod recycle;
mod settings;
mod spec;
mod threaded;
mod types;
pub(crate) mod var;
mod var_list;

pub use self::core::DispatchStats;
pub use crate::config::{BadGpuSyncMode, EngineKind, GpuSyncMode, UnknownEngineKind};
pub use error::{EngineError, FailureCause, OpError, OpFailure, OpResult, SharedOpError};
pub use event::{EngineEvent, EngineObserver};
pub use gpu::OpStream;
pub use handle::{Engine, EngineOptions, EngineQueues, EngineStats};
pub use name::OpName;
pub use opr::{Completion, Operator, RunContext};
pub use settings::{EngineSetting, WorkerCounts};
pub use spec::OpSpec;
pub use threaded::MAX_CPU_DEVICES;
pub use types::{Context, DeviceType, FnProperty};
pub use var::Var;
pub use var_list::VarList;
