//! GPU contexts in the per-device engine: where GPU ops run, and how dependencies between
//! them are kept without a host synchronization per op (MXNet's `Async` engines).
//!
//! # Dispatch
//! An op on `gpu(i)` goes to that GPU's workers (`device::gpu`), started the first time an
//! op names the GPU: `CopyToGpu` / `CopyFromGpu` ops to the copy workers (priority queue;
//! the h2d or the d2h stream of the worker), `GpuPrioritized` ops to the prioritized worker
//! (priority queue), everything else to the compute workers (FIFO). GPU ops never run
//! inline at push (not even `Async` or `DeleteVar` ones): their body needs a worker's stream.
//! The body runs on the worker thread; [`RunContext::stream`](super::RunContext::stream)
//! gives it an [`OpStream`] to launch device work on, and
//! [`OpStream::launch_host`] runs host code in the stream's order (how tests keep "data on
//! the GPU" exact). The body calls its completion once it has launched its work.
//!
//! # Two ways to keep dependencies ([`GpuSyncMode`])
//! - **per-op sync** (MXNet's default engines): when the body completes, the worker
//!   synchronizes its stream, then completes the op. A dependent op is dispatched only once
//!   the device work is done: simple, and every op pays a host round trip and, on an idle
//!   GPU, the launch latency.
//! - **events** (the default; MXNet's `Async` engines, RFC #18951): the op completes for the
//!   engine as soon as its work is *launched*, and its dependents wait on the device.
//!
//! # The event-mode protocol
//! For every var the engine keeps (in [`table`]) the last GPU writer and the GPU readers since
//! it, each as an *access record*: the stream, an event recorded on it after the op's work,
//! and the op's *fence*, a host-side flag set once the op's device work and host bodies have
//! finished (and any failure has been stored, see below).
//! 1. **Prologue** (on the GPU worker, before the body, before the error check): the op looks
//!    up the records its vars require (a read needs the last writer; a write needs the last
//!    writer and every reader since) and makes its stream `wait_event` on each one recorded
//!    on *another* stream (its own stream is FIFO already). The host does not block.
//! 2. **Body**: launches work on the op's stream.
//! 3. **Epilogue** (when the body completes): the pending count is raised by one for the
//!    device work; a *fence unit* is launched on the stream (it runs after the op's work; its
//!    callback stores failures, sets the fence, and lowers the pending count); an event is
//!    recorded after it; the op's record replaces the writer (or joins the readers) of its
//!    vars; then the op completes for the engine, which grants its dependents.
//! 4. **Host-side dependents**: an op on a CPU context (and a wait op, and `wait_for_var`'s
//!    fast path) first *host-waits the fences* of the records its vars require, before its
//!    error check. A GPU op that runs no stream (`DeleteVar` on a GPU context, which frees
//!    data) host-waits too.
//!
//! # Why it is safe
//! - *Every access is ordered after the accesses it conflicts with.* The engine dispatches an
//!   op only after every earlier conflicting op completed, and an op updates the table before
//!   it completes, so the prologue sees exactly the conflicting records. Nobody else updates a
//!   var's entry while the op holds it: writers are exclusive, and concurrent readers only add
//!   reader records, which a read does not need. Device-side, a wait on another stream's event
//!   orders the op's work after that record's work; on the same stream, FIFO does. Host-side,
//!   a fence orders after the work *and* the host bodies (on CUDA an event can fire before
//!   the stream's completion thread has run the callbacks in front of it; the fence cannot).
//!   Records from ops on other devices are waited on the same way (CUDA allows cross-device
//!   event waits; so does the simulator).
//! - *Transitively*: an op's fence is set only after its stream passed its waits, so it also
//!   covers everything it waited for; a CPU op made ready by a chain of GPU ops waits on the
//!   last one's fence, which is enough.
//! - *Nothing waits forever.* Every barrier waits on a marker enqueued before it, so the
//!   waits-for relation follows enqueue order and has no cycle; host bodies never block; a
//!   fence unit runs even on a poisoned device (its callback gets the error), so every fence
//!   is set and every raised pending count lowered.
//! - *Waits for everything mean everything.* The pending count stays raised until the fence,
//!   so `wait_for_all`, `stop` and dropping the engine wait for device work and host bodies,
//!   not just for launches; they then see every device failure.
//! - *Late failures are not lost.* A device fault or a failing host body is seen by the fence
//!   callback after the op completed for the engine: it records the failure (reported by
//!   `wait_for_all`) and taints the op's written vars before setting the fence, so host-side
//!   dependents (which wait for the fence before their error check) and `wait_for_var` see
//!   it. GPU ops already launched behind it are not skipped (the device is poisoned anyway:
//!   their own fences report that), but an op that inherited a failure reports no device
//!   failure of its own (a poisoned device is no news). Work launched through
//!   [`OpStream::launch`] reports its own fault, so the failure names the op that faulted.
//!   Per-op sync mode reports failures exactly, at the op.
//!
//! # Async bodies
//! A body may call its completion later, from another thread: event mode then records and
//! completes from that thread (the record covers everything on the stream so far, maybe
//! more than the op: over-synchronized, never under); per-op sync mode completes the op from
//! the callback of a fence unit instead of synchronizing (a completion called from the
//! stream's own callback must not wait for that stream).
#![forbid(unsafe_code)]

mod exec;
mod fence;
mod hub;
mod op_stream;
mod table;

pub(super) use crate::config::GpuSyncMode;
pub(crate) use hub::{GpuHub, GpuSetup};
pub use op_stream::OpStream;
