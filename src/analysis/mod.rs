//! Why a run does not scale: work and span of the graph that ran, the critical path, how
//! long the OS kept worker threads waiting for a core, and one verdict per device.
//!
//! Pure functions over plain inputs (ops in push order with their measured times, thread
//! counts, schedstat samples): the workload driver gathers them, this module judges them,
//! and the summary and the dashboard print the result.
//!
//! # Work, span, parallelism
//! The input is one iteration's ops in push order, each with the vars it reads, the vars it
//! writes and its measured time (its wall time on its inter-op or GPU worker, its intra-op
//! tasks included). The engine orders every var's accesses in push order, so the graph that
//! ran has exactly these edges, built in one pass with a last writer and the readers since
//! that write per var:
//! - **read-after-write**: an op that reads `v` (read-modify-write included) follows `v`'s
//!   last writer;
//! - **write-after-read**: an op that writes `v` follows every op that read `v` since its
//!   last write (a buffer is reused only when its readers are done);
//! - **write-after-write**: an op that writes `v` without reading it follows `v`'s last
//!   writer.
//!
//! Read-after-write edges are true dependencies; write-after-read and write-after-write
//! edges are false ones, made by reusing a var (more buffers remove them).
//!
//! Work `T1` is the sum of the op times; span `T∞` is the longest path through the edges
//! weighted by op times (one topological pass: push order is a topological order, since
//! every edge points from an earlier push to a later one); parallelism `T1 / T∞` bounds the
//! speedup any number of workers can give (Brent: `Tp >= max(T1 / p, T∞)`); achieved
//! parallelism is `T1 / wall`, the workers the step kept busy on average. The critical path
//! is the longest path itself, each op with its share of the span, and the false edges on
//! it name the vars whose reuse lengthens it.
//!
//! Per device (per worker pool), the same pass counts only that pool's ops: its work, its
//! span (other pools' ops weigh nothing) and its parallelism, compared with its workers.
//!
//! # Descheduled time
//! Linux keeps, per thread, the time it spent runnable but waiting for a core (the second
//! field of `/proc/self/task/TID/schedstat`, ns). `SchedSample::now` reads it for every
//! thread of the process; between two samples, a thread's descheduled share is its run-delay
//! growth over the window's wall time (a thread born in the window counts from zero, a
//! thread gone before its end is not seen). The figure behind a verdict is over the threads
//! that ran in the window: their summed run delay over their summed window time.
//!
//! # Verdicts
//! One per device, the first rule that holds, in this order:
//! 1. **oversubscribed** (CPU devices): threads runnable but descheduled at least
//!    `OVERSUBSCRIBED_SHARE` (a tenth) of their time: more threads want cores than there are
//!    (this process's, or other processes' on a shared machine). The line says which: when
//!    this process's threads want more cores on average (their time on a core plus their
//!    run delay, over the window) than there are, fewer threads would help; otherwise other
//!    processes hold the cores. The
//!    line goes on with what the next rules say (the verdict's `graph_bound`): what bounds
//!    the run once its threads have their cores.
//! 2. **light**: the device's ops are under 5% of the iteration's work (a priority pool's
//!    few updates): it does not bound the step.
//! 3. **starved**: the device's parallelism is below its workers + 1 (one more worker
//!    gains at most `1 - workers / parallelism` of the step, nothing where the parallelism
//!    does not exceed the workers; the line gives that bound, or the workers' time not in
//!    ops: `1 - achieved / workers`, whatever kept them out, which the attribution's buckets
//!    split) and the critical path crosses false edges: the vars they name are reused too
//!    soon; more buffers would let more ops run at once.
//! 4. **critical path**: the same bound with only true edges on the path: more inter-op
//!    workers cannot help beyond that bound; shorter ops on the path (more intra-op
//!    threads) can.
//! 5. **upstream**: the device's own ops could keep its workers busy (the parallelism
//!    counting its ops alone is at least its workers + 1), but they wait on other devices'
//!    ops: over the whole graph's span, the shortest step its edges allow, its work keeps
//!    fewer than its workers busy on average (`work / graph span < workers`). More workers
//!    here cannot help; the devices it waits on bound it. (A priority pool's updates, each
//!    ready as the gradient it applies is computed, read so.)
//! 6. **overhead**: achieved parallelism below half of what the graph and the workers allow
//!    (`min(parallelism, workers)`): ready work exists, yet workers run no op; the time goes
//!    between ops (engine, queues, wake-ups).
//! 7. **busy**: the workers run ops and the graph has more parallelism than workers: more
//!    workers, on cores of their own, would help.
//!
//! # Where the time went
//! Per worker and per pool, over the sliding window or the whole run, each thread's time
//! cut into buckets that add up to all of it (op, intra-op, stealing, spinning, wake-up,
//! ready elsewhere, no ready op, descheduled) into an [`Attribution`]; the rules are in the
//! `attribution` module's docs.
//!
//! # What if
//! A discrete-event simulation of the engine over the same graph predicts the step for
//! other inter-op and intra-op counts ([`EngineModel`]; its algorithm and assumptions are in
//! its module's essay), with the engine's cost before each op measured from the run
//! (`dispatch_costs`).
#![forbid(unsafe_code)]

mod attribution;
mod dispatch;
mod schedstat;
mod simulate;
mod span;
mod verdict;

pub(crate) use attribution::{attribute, Period};
pub use attribution::{
    bucket, Attribution, Bucket, LiveScaling, PoolAttribution, WorkerAttribution, WorkerPool,
};
pub(crate) use dispatch::{dispatch_costs, IterationTimes, OpRunTimes};
pub use dispatch::{DispatchByWorkers, DispatchCost};
pub(crate) use schedstat::SchedSample;
pub use schedstat::{Descheduled, ThreadDelay};
pub(crate) use simulate::Waits;
pub use simulate::{
    EngineModel, OpSplit, ParallelLoop, PredictedStep, QueueOrder, SimDevice, Workers, ASSUMPTIONS,
    GRID,
};
pub use span::{analyze, DeviceScaling, Edge, EdgeKind, PathOp, RanGraph, RanOp, Scaling};
pub(crate) use span::{analyze_times, predecessors, Pred};
pub use verdict::{verdicts, Bound, DeviceFacts, Verdict};

/// Serializes a typed identity by its display name (a pool reads `cpu0 workers` in JSON).
fn display<T: std::fmt::Display, S: serde::Serializer>(
    value: &T,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_str(value)
}
