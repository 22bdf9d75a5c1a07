//! GPU streams with CUDA's semantics, over two backends: real GPUs through cudarc
//! ([`cuda`](super::cuda)) and a simulated GPU ([`sim`](super::sim)).
//!
//! # The model
//! A [`GpuBackend`] lists devices and opens one as a [`GpuDevice`]; a device makes
//! [`Stream`]s and [`Event`]s. A stream is a FIFO queue of device work: [`Stream::launch`]
//! appends a unit of [`GpuWork`] and returns at once; the device runs the units of one stream
//! one after another, in launch order, and the units of different streams concurrently.
//! Nothing orders two streams except events:
//! - [`Stream::record`] appends a *marker* to the stream: the event completes when every unit
//!   launched on that stream before the record has finished. Each record starts a new
//!   *generation* of the event; [`Event::query`] and [`Event::synchronize`] look at the latest.
//! - [`Stream::wait_event`] appends a *barrier* on the event's generation current at the time
//!   of the call: units launched on this stream after the wait start only once that
//!   generation has completed. The host does not block; a later record of the same event does
//!   not move the barrier (CUDA's `cuStreamWaitEvent`).
//! - An event never recorded is complete: waiting on it is a no-op, as in CUDA.
//!
//! So a dependency between ops on two streams costs one record and one wait, both
//! asynchronous, instead of a host synchronization per op (MXNet's `Async` engines).
//!
//! # Why FIFO and cross-stream order hold
//! Each stream has exactly one place that runs its units in order: the simulated stream's
//! executor thread pops its queue front to back; a CUDA stream is FIFO in hardware. A barrier
//! is itself a queue item, so the units behind it cannot start before it passes, and it only
//! passes once the marker it waits on has fired on the other stream, which happens only after
//! everything launched there before the record. A marker fires even on a poisoned device, so a
//! barrier never waits forever on a stream that skipped its work.
//!
//! # Completion callbacks
//! A unit may carry a callback ([`GpuWork::on_complete`]) run once when the unit finishes,
//! with its result. Callbacks of one stream run in launch order. [`Stream::synchronize`]
//! returns only after every unit launched before it has finished *and* its callback has run,
//! and [`Stream::query`] is true only then, so "synchronized" means "every callback ran".
//!
//! # Errors: synchronous, sticky, reported once
//! - A unit the device cannot run at all (a dimension over what cuBLAS takes, more memory than
//!   the device has) is refused by `launch` with [`StreamError::InvalidWork`]. Nothing is
//!   queued and nothing is poisoned (CUDA's launch-time errors are not sticky either).
//! - A unit that *faults* while running (CUDA: an illegal address, a trap; here also
//!   [`GpuWork::fail_with`]) poisons the whole device, as a sticky CUDA error poisons its
//!   context. Its callback gets [`StreamError::Fault`]. Every unit of every stream of that
//!   device that has not started yet is skipped: its callback gets [`StreamError::Poisoned`]
//!   and it takes no time. Markers still fire, so nothing hangs.
//! - The host learns of the fault at its next synchronization: the first
//!   [`Stream::synchronize`], [`GpuDevice::synchronize`] or [`Event::synchronize`] on the
//!   device that sees it returns [`StreamError::Fault`], **once**; every host call after that
//!   (launch, record, wait, synchronize) returns [`StreamError::Poisoned`], which names the
//!   original fault. The device stays poisoned: open it again to go on (CUDA: destroy and
//!   recreate the context). Query calls never report errors: failed work counts as finished.
//!
//! # Profiling
//! A [`StreamObserver`] given to [`GpuBackend::open`] hears every unit's submit (on the
//! launching thread), start and end (when they happen on the simulated GPU; from timing events
//! once the unit has finished on CUDA). Timestamps are [`Instant`]s; the profiler maps them
//! onto its own clock.
#![forbid(unsafe_code)]

use std::any::Any;
use std::fmt;
// std's `Arc` and `Weak`: trait-object handles and weak queue links, which loom's `Arc`
// cannot express (no coercion to `dyn`, no `Weak`).
use std::sync::{Arc, Weak};
use std::time::Instant;

use super::work::{GpuWork, OpTag};
use crate::sync::Mutex;

/// A stream's role. Any stream runs any work (as in CUDA); the role names its thread and its
/// profiler track, and tells the engine which worker pool the stream belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamKind {
    /// Kernels (GEMM, elementwise): the engine's GPU compute workers.
    Compute = 0,
    /// Host-to-device copies: the engine's copy workers (`CopyToGpu`).
    CopyH2D = 1,
    /// Device-to-host copies: the engine's copy workers (`CopyFromGpu`).
    CopyD2H = 2,
}

impl StreamKind {
    /// Every role, in the order of their codes.
    pub const ALL: [StreamKind; 3] = [
        StreamKind::Compute,
        StreamKind::CopyH2D,
        StreamKind::CopyD2H,
    ];

    /// `compute`, `h2d` or `d2h`.
    pub const fn as_str(self) -> &'static str {
        match self {
            StreamKind::Compute => "compute",
            StreamKind::CopyH2D => "h2d",
            StreamKind::CopyD2H => "d2h",
        }
    }
}

/// Which stream: device ordinal, role and index among the device's streams of that role.
/// Displays as its track name, `gpu0-compute-1`, `gpu0-h2d-0` (also the name of the engine
/// worker that owns it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct StreamId {
    /// The device's ordinal within its backend.
    pub device: u32,
    /// The stream's role.
    pub kind: StreamKind,
    /// Index among the device's streams of this role, from 0.
    pub index: u32,
}

impl StreamId {
    /// The stream's name wherever its occupancy shows (the dashboard's GPU panel, the
    /// trace's stream track): `stream compute0`, `stream h2d1`, apart from the worker
    /// threads' names (`gpu0-compute-0`) that host-side activity goes under.
    ///
    /// ```
    /// use enginetop::device::stream::{StreamId, StreamKind};
    /// let h2d = StreamId { device: 0, kind: StreamKind::CopyH2D, index: 1 };
    /// assert_eq!(h2d.label(), "stream h2d1");
    /// ```
    pub fn label(&self) -> String {
        format!("stream {}{}", self.kind.as_str(), self.index)
    }

    /// The stream within its device as one `u32` for compact event records: the role in the
    /// high 16 bits (0 compute, 1 h2d, 2 d2h), the index in the low 16.
    ///
    /// ```
    /// use enginetop::device::stream::{StreamId, StreamKind};
    /// let id = StreamId { device: 0, kind: StreamKind::CopyD2H, index: 1 };
    /// assert_eq!(id.code(), 0x2_0001);
    /// ```
    pub const fn code(&self) -> u32 {
        (self.kind as u32) << 16 | (self.index & 0xffff)
    }

    /// The stream [`code`](Self::code) packed, on `device`; an unknown role reads as compute.
    ///
    /// ```
    /// use enginetop::device::stream::{StreamId, StreamKind};
    /// let id = StreamId { device: 3, kind: StreamKind::CopyH2D, index: 2 };
    /// assert_eq!(StreamId::from_code(3, id.code()), id);
    /// ```
    pub fn from_code(device: u32, code: u32) -> StreamId {
        let role = code >> 16;
        let kind = StreamKind::ALL
            .into_iter()
            .find(|kind| *kind as u32 == role)
            .unwrap_or(StreamKind::Compute);
        StreamId {
            device,
            kind,
            index: code & 0xffff,
        }
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "gpu{}-{}-{}",
            self.device,
            self.kind.as_str(),
            self.index
        )
    }
}

/// A device's streams, as both backends keep them: the next index per [`StreamKind`] and a
/// weak handle to each stream's `Q` (what a backend waits on: the CUDA stream's queue of
/// pending work, the simulated stream's shared state), so that [`GpuDevice::synchronize`]
/// can wait for the streams still alive.
pub(crate) struct StreamRegistry<Q> {
    state: Mutex<RegistryState<Q>>,
}

struct RegistryState<Q> {
    next_index: [u32; StreamKind::ALL.len()],
    queues: Vec<Weak<Q>>,
}

impl<Q> StreamRegistry<Q> {
    pub(crate) fn new() -> Self {
        StreamRegistry {
            state: Mutex::new(RegistryState {
                next_index: [0; StreamKind::ALL.len()],
                queues: Vec::new(),
            }),
        }
    }

    /// The id of the next stream of `kind` on `device` (indices count from 0 per role).
    pub(crate) fn next_id(&self, device: u32, kind: StreamKind) -> StreamId {
        let mut state = self.state.lock();
        let slot = &mut state.next_index[kind as usize];
        *slot += 1;
        StreamId {
            device,
            kind,
            index: *slot - 1,
        }
    }

    /// Records a started stream's queue, forgetting those of streams since dropped.
    pub(crate) fn register(&self, queue: &Arc<Q>) {
        let mut state = self.state.lock();
        state.queues.retain(|queue| queue.strong_count() > 0);
        state.queues.push(Arc::downgrade(queue));
    }

    /// The `Q`s of the streams still alive.
    pub(crate) fn live(&self) -> Vec<Arc<Q>> {
        let state = self.state.lock();
        state.queues.iter().filter_map(Weak::upgrade).collect()
    }
}

/// Which backend a device comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendKind {
    /// A real GPU through cudarc.
    Cuda,
    /// The simulated GPU.
    Sim,
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BackendKind::Cuda => "cuda",
            BackendKind::Sim => "sim",
        })
    }
}

/// What a device is. A simulated device says so in `simulated` and in its `name`, which also
/// carries the model's numbers.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct GpuInfo {
    /// Ordinal within its backend.
    pub ordinal: u32,
    /// The backend.
    pub backend: BackendKind,
    /// Whether it is simulated.
    pub simulated: bool,
    /// The device's name (the simulated one includes its model).
    pub name: String,
    /// Device memory in bytes.
    pub(crate) memory_bytes: u64,
    /// Compute capability (`(9, 0)` for an H100), CUDA only.
    pub(crate) compute_capability: Option<(i32, i32)>,
    /// The CUDA driver's version (`13.0`), CUDA only.
    pub driver_version: Option<String>,
    /// The simulated device's model.
    pub model: Option<super::sim::SimModel>,
}

/// When a unit happened on its stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamPhase {
    /// Launched by the host (reported on the launching thread).
    Submit,
    /// Started on the device.
    Start,
    /// Finished on the device; `ok` is false when it faulted or was skipped.
    End {
        /// Whether the unit ran successfully.
        ok: bool,
    },
}

/// One stream event for the profiler: a unit of work `op` on `stream` reached `phase` at
/// `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamEvent {
    /// The stream.
    pub stream: StreamId,
    /// The unit's op.
    pub op: OpTag,
    /// What happened.
    pub phase: StreamPhase,
    /// When (device time mapped to the host clock on CUDA).
    pub at: Instant,
}

/// Receives stream events (the profiler implements it). Called on the launching thread for
/// `Submit` and on the stream's executor or completion thread for `Start` / `End`: it must
/// be quick and must not block or call back into the stream.
pub trait StreamObserver: Send + Sync {
    /// One event.
    fn on_stream_event(&self, event: StreamEvent);
}

/// A source of GPUs: the real ones ([`cuda::CudaBackend`](super::cuda::CudaBackend)) or
/// simulated ones ([`sim::SimBackend`](super::sim::SimBackend)).
pub trait GpuBackend: Send + Sync {
    /// Which backend.
    fn kind(&self) -> BackendKind;

    /// The devices it has.
    fn devices(&self) -> Vec<GpuInfo>;

    /// Opens device `ordinal`; every call gives an independent device (a fresh context on
    /// CUDA), with its own streams and its own error state. `observer` hears every stream
    /// event of the device.
    fn open(
        &self,
        ordinal: u32,
        observer: Option<Arc<dyn StreamObserver>>,
    ) -> Result<Arc<dyn GpuDevice>, StreamError>;
}

/// An open GPU: makes streams and events.
pub trait GpuDevice: Send + Sync {
    /// What it is.
    fn info(&self) -> &GpuInfo;

    /// A new stream of role `kind`, named by [`StreamId`] (`index` counts per role).
    fn new_stream(&self, kind: StreamKind) -> Result<Box<dyn Stream>, StreamError>;

    /// A new event, never recorded (so complete).
    fn new_event(&self) -> Result<Event, StreamError>;

    /// Waits until every stream of the device has drained (CUDA's `cuCtxSynchronize`);
    /// reports a fault like [`Stream::synchronize`].
    fn synchronize(&self) -> Result<(), StreamError>;
}

/// A FIFO queue of device work with CUDA's semantics (see the [module docs](self)).
///
/// ```
/// use enginetop::device::sim::{SimBackend, SimModel};
/// use enginetop::device::stream::{GpuBackend, StreamKind};
/// use enginetop::device::work::GpuWork;
///
/// let device = SimBackend::new(1, SimModel::instant()).open(0, None).unwrap();
/// let compute = device.new_stream(StreamKind::Compute).unwrap();
/// let copy = device.new_stream(StreamKind::CopyH2D).unwrap();
/// let loaded = device.new_event().unwrap();
///
/// copy.launch(GpuWork::copy(enginetop::device::work::CopyDir::HostToDevice, 1 << 20)).unwrap();
/// copy.record(&loaded).unwrap();
/// compute.wait_event(&loaded).unwrap(); // no host sync: the GEMM waits on the device
/// compute.launch(GpuWork::gemm(64, 64, 64)).unwrap();
/// compute.synchronize().unwrap();
/// assert!(loaded.query());
/// ```
pub trait Stream: Send + Sync {
    /// Which stream.
    fn id(&self) -> StreamId;

    /// Appends `work`; returns at once. Refuses work the device cannot run
    /// ([`StreamError::InvalidWork`]) and any work on a poisoned device; when it returns an
    /// error nothing was queued and the work's callback is dropped without being called.
    fn launch(&self, work: GpuWork) -> Result<(), StreamError>;

    /// Appends a marker: `event`'s new generation completes when everything launched here
    /// before it has finished.
    fn record(&self, event: &Event) -> Result<(), StreamError>;

    /// Appends a barrier: work launched here afterwards starts only once `event`'s current
    /// generation has completed. The host does not wait.
    fn wait_event(&self, event: &Event) -> Result<(), StreamError>;

    /// Waits until everything launched so far has finished and its callbacks have run;
    /// reports a device fault once, then [`StreamError::Poisoned`].
    fn synchronize(&self) -> Result<(), StreamError>;

    /// Whether everything launched so far has finished and its callbacks have run. Never
    /// blocks, never reports errors.
    fn query(&self) -> bool;
}

/// A backend's side of an [`Event`].
pub(crate) trait EventImpl: Send + Sync + fmt::Debug + 'static {
    /// Whether the latest generation has completed (never recorded: true).
    fn query(&self) -> bool;
    /// Waits for the latest generation; reports a device fault like a stream sync.
    fn synchronize(&self) -> Result<(), StreamError>;
    /// Milliseconds from this event's latest completion to `end`'s.
    fn elapsed_ms(&self, end: &Event) -> Result<f32, StreamError>;
    /// How many times it has been recorded.
    fn generation(&self) -> u64;
    /// For the backend to find its own type behind an [`Event`].
    fn as_any(&self) -> &dyn Any;
}

/// A CUDA-style event: recorded on a stream, waited on by other streams or the host.
/// Cloning gives another handle to the same event.
#[derive(Clone, Debug)]
pub struct Event(pub(crate) Arc<dyn EventImpl>);

impl Event {
    /// Whether the latest recorded generation has completed (true if never recorded).
    /// Never blocks, never reports errors.
    pub fn query(&self) -> bool {
        self.0.query()
    }

    /// Blocks until the latest recorded generation has completed.
    pub fn synchronize(&self) -> Result<(), StreamError> {
        self.0.synchronize()
    }

    /// Milliseconds between this event's latest generation completing and `end`'s (waits for
    /// both). Both must have been recorded, on the same device.
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32, StreamError> {
        self.0.elapsed_ms(end)
    }

    /// How many times the event has been recorded (0: never, so complete).
    pub fn generation(&self) -> u64 {
        self.0.generation()
    }

    /// The backend's implementation, if it is a `T`.
    pub(crate) fn downcast<T: 'static>(&self) -> Option<&T> {
        self.0.as_any().downcast_ref::<T>()
    }
}

/// A fault on the device: where, and what went wrong. CUDA reports some faults only at a
/// synchronization, without the stream or op; those say so by leaving them out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The device's ordinal.
    pub device: u32,
    /// The stream it happened on, when known.
    pub stream: Option<StreamId>,
    /// The op whose work faulted, when known.
    pub op: Option<OpTag>,
    /// What the device said.
    pub message: String,
}

impl Fault {
    /// A fault of `op`'s work on `stream`.
    pub(crate) fn on_stream(stream: StreamId, op: OpTag, message: impl Into<String>) -> Self {
        Fault {
            device: stream.device,
            stream: Some(stream),
            op: Some(op),
            message: message.into(),
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(op) = self.op {
            write!(f, "{op} on ")?;
        }
        match self.stream {
            Some(stream) => write!(f, "{stream}: {}", self.message),
            None => write!(f, "gpu{}: {}", self.device, self.message),
        }
    }
}

/// What a stream, event or device call can fail with. Messages name the thing and the fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    /// Work faulted on the device; reported once, by the first host synchronization after it.
    #[error(
        "device fault: {0}; the device is now poisoned (like a sticky CUDA error): open it \
         again to go on"
    )]
    Fault(Fault),
    /// The device was poisoned by an earlier fault; nothing runs on it any more.
    #[error(
        "gpu{device} is poisoned by an earlier fault ({fault}); its work is skipped: open the \
         device again to go on", device = .0.device, fault = .0
    )]
    Poisoned(Fault),
    /// `launch` refused work the device cannot run; nothing was queued or poisoned.
    #[error("{stream} cannot run {what}: {reason}; make it smaller or split it")]
    InvalidWork {
        /// The stream.
        stream: StreamId,
        /// The work's label.
        what: String,
        /// Why not.
        reason: String,
    },
    /// An event of another backend (or, for `record`, another device) was used here.
    #[error(
        "{used_with} cannot use an event of another {what}; make events with the device \
         whose streams use them (GpuDevice::new_event)"
    )]
    ForeignEvent {
        /// The stream or event it was used with.
        used_with: String,
        /// `backend` or `device`.
        what: &'static str,
    },
    /// `elapsed_ms` on an event that was never recorded.
    #[error("elapsed time needs both events recorded; record them on a stream first")]
    EventNotRecorded,
    /// No such device in this backend.
    #[error("no {backend} GPU {ordinal}: the backend has {count}; pick an ordinal below {count}")]
    NoSuchDevice {
        /// The backend.
        backend: BackendKind,
        /// The ordinal asked for.
        ordinal: u32,
        /// How many it has.
        count: u32,
    },
    /// The CUDA backend cannot be used here.
    #[error("CUDA is not available: {reason}; use --gpus sim:1 for a simulated GPU")]
    CudaUnavailable {
        /// Why (which library is missing, or what the driver said).
        reason: String,
    },
    /// A CUDA call failed (not a device fault: a setup or resource error).
    #[error("CUDA {call} failed: {name} ({code}){hint}")]
    Driver {
        /// The call, e.g. `cuStreamCreate`.
        call: &'static str,
        /// The raw `CUresult` / status code.
        code: u32,
        /// Its symbolic name, e.g. `CUDA_ERROR_OUT_OF_MEMORY`.
        name: String,
        /// A fix, when one is known (starts with `; `).
        hint: String,
    },
    /// The operating system would not start a stream thread.
    #[error("could not start thread {thread}: {reason}; lower the stream or worker counts")]
    Thread {
        /// The thread's name.
        thread: String,
        /// The OS error.
        reason: String,
    },
}

/// A device's sticky error: set by the first fault, reported once, then poisoned forever.
#[derive(Debug, Default)]
pub(crate) struct FaultLatch(Mutex<Option<LatchedFault>>);

#[derive(Debug)]
struct LatchedFault {
    fault: Fault,
    reported: bool,
}

impl FaultLatch {
    /// Records `fault` unless the device is already poisoned; returns the fault in force.
    /// A fault CUDA reported without its op (seen first by a host call) is replaced by the
    /// same fault seen with its op, as long as it has not been reported yet.
    pub(crate) fn poison(&self, fault: Fault) -> Fault {
        let mut slot = self.0.lock();
        let latched = match slot.take() {
            None => LatchedFault {
                fault,
                reported: false,
            },
            Some(mut latched) => {
                if latched.fault.op.is_none() && fault.op.is_some() && !latched.reported {
                    latched.fault = fault;
                }
                latched
            }
        };
        let in_force = latched.fault.clone();
        *slot = Some(latched);
        in_force
    }

    /// The fault in force, if any (does not count as reporting it).
    pub(crate) fn current(&self) -> Option<Fault> {
        self.0.lock().as_ref().map(|latched| latched.fault.clone())
    }

    /// `Err(Poisoned)` when poisoned (for calls that are not synchronizations).
    pub(crate) fn refuse_if_poisoned(&self) -> Result<(), StreamError> {
        match self.current() {
            Some(fault) => Err(StreamError::Poisoned(fault)),
            None => Ok(()),
        }
    }

    /// For a host synchronization: `Fault` the first time, `Poisoned` afterwards.
    pub(crate) fn report(&self) -> Result<(), StreamError> {
        let mut slot = self.0.lock();
        match slot.as_mut() {
            None => Ok(()),
            Some(latched) if !latched.reported => {
                latched.reported = true;
                Err(StreamError::Fault(latched.fault.clone()))
            }
            Some(latched) => Err(StreamError::Poisoned(latched.fault.clone())),
        }
    }
}

/// Tells `observer` (if any) that `op` on `stream` reached `phase` at `at`.
pub(crate) fn notify(
    observer: Option<&Arc<dyn StreamObserver>>,
    stream: StreamId,
    op: OpTag,
    phase: StreamPhase,
    at: Instant,
) {
    if let Some(observer) = observer {
        observer.on_stream_event(StreamEvent {
            stream,
            op,
            phase,
            at,
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn fault() -> Fault {
        let stream = StreamId {
            device: 0,
            kind: StreamKind::Compute,
            index: 1,
        };
        Fault::on_stream(stream, OpTag::new(9), "boom")
    }

    #[test]
    fn a_fault_is_reported_once_then_the_device_stays_poisoned() {
        let latch = FaultLatch::default();
        assert_eq!(latch.report(), Ok(()));
        latch.poison(fault());
        let mut later = fault();
        later.message = "later".into();
        assert_eq!(
            latch.poison(later),
            fault(),
            "the first fault stays in force"
        );
        let anonymous = FaultLatch::default();
        let mut without_op = fault();
        without_op.op = None;
        anonymous.poison(without_op);
        assert_eq!(anonymous.poison(fault()), fault(), "the op is filled in");
        assert_eq!(
            latch.refuse_if_poisoned(),
            Err(StreamError::Poisoned(fault()))
        );
        assert_eq!(latch.report(), Err(StreamError::Fault(fault())));
        assert_eq!(latch.report(), Err(StreamError::Poisoned(fault())));
    }

    #[test]
    fn errors_name_the_stream_and_the_fix() {
        assert_eq!(
            StreamError::Fault(fault()).to_string(),
            "device fault: op 9 on gpu0-compute-1: boom; the device is now poisoned (like a \
             sticky CUDA error): open it again to go on"
        );
        assert!(StreamError::Poisoned(fault())
            .to_string()
            .starts_with("gpu0 is poisoned by an earlier fault (op 9 on gpu0-compute-1: boom)"));
    }

    #[test]
    fn a_registry_counts_indices_per_role_and_forgets_dropped_queues() {
        let registry = StreamRegistry::<u8>::new();
        let ids: Vec<String> = [
            StreamKind::Compute,
            StreamKind::CopyH2D,
            StreamKind::Compute,
        ]
        .into_iter()
        .map(|kind| registry.next_id(1, kind).to_string())
        .collect();
        assert_eq!(ids, ["gpu1-compute-0", "gpu1-h2d-0", "gpu1-compute-1"]);
        let (kept, dropped) = (Arc::new(1), Arc::new(2));
        registry.register(&kept);
        registry.register(&dropped);
        drop(dropped);
        let live: Vec<u8> = registry.live().iter().map(|queue| **queue).collect();
        assert_eq!(live, [1]);
    }
}
