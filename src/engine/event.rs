//! What the engine reports as ops move: [`EngineEvent`]s, delivered to an [`EngineObserver`].
#![forbid(unsafe_code)]

use super::name::OpName;
use super::types::{Context, FnProperty};

/// What the engine reports to an [`EngineObserver`] (the profiler records these).
///
/// Every op pushed gets an id unique in the process (`id`: the engine's serial number in the
/// high bits, the op's push sequence number in the low 40), the same in its three events, so
/// an observer can pair them across threads: `Queued` on the thread that made the op ready,
/// `Started` on the thread that runs it, `Finished` on the thread that called its completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineEvent {
    /// A ready op was handed to its queue (or run inline).
    Queued {
        /// The op's id.
        id: u64,
        /// The op.
        op: OpName,
        /// Its context.
        ctx: Context,
        /// Its property (which queue).
        prop: FnProperty,
        /// The push's priority.
        priority: i32,
    },
    /// An op started on the calling thread.
    Started {
        /// The op's id.
        id: u64,
        /// The op.
        op: OpName,
        /// Its context.
        ctx: Context,
        /// Its property.
        prop: FnProperty,
        /// The push's priority.
        priority: i32,
    },
    /// An op completed (on the thread that called its completion).
    Finished {
        /// The op's id.
        id: u64,
        /// The op.
        op: OpName,
        /// Its context.
        ctx: Context,
        /// Its property.
        prop: FnProperty,
        /// The push's priority.
        priority: i32,
        /// Whether it failed or inherited a failure.
        failed: bool,
    },
}

/// Receives op events; called on the thread where the event happens, so it must be quick and
/// must not block.
pub trait EngineObserver: Send + Sync {
    /// One event.
    fn on_event(&self, event: EngineEvent);

    /// Events that happen at one point of the engine's code, in order: an op's `Finished`
    /// and the `Queued` of the ops its completion made ready (reported after the grants,
    /// before any of them is dispatched; a wide fan-out comes in several calls of at most 5
    /// events, the first starting with the `Finished`). An observer may give them one
    /// timestamp; the default reports them one by one.
    fn on_events_at_once(&self, events: &[EngineEvent]) {
        for &event in events {
            self.on_event(event);
        }
    }
}
