//! The simulated GPU (`--gpus sim:N`): CUDA's stream semantics, with device time from a
//! model instead of a device.
//!
//! # Executor protocol
//! Every stream owns one executor thread (named after the stream, `gpu0-compute-1-exec`;
//! the plain stream name is left for the engine worker that owns the stream) and a FIFO of
//! items (see `queue.rs`). `launch`, `record` and `wait_event` only append an item and
//! return. The executor pops items front to back and, for each:
//! - **work**: waits until `launch_overhead_us` after the item was submitted (the latency from
//!   a launch to the kernel starting on an idle GPU; on a busy stream it has long passed), then
//!   reports `Start`, sleeps for the model's duration, reports `End`, and runs the completion
//!   callback. A host gate ([`Kernel::HostWait`]) blocks instead of sleeping.
//! - **record** (a marker of one event generation): fires the marker, stamping the time.
//! - **wait** (a barrier): blocks the executor until the marker it names has fired.
//!
//! One executor per stream gives FIFO order within a stream and concurrency between streams.
//! Markers are objects: a `record` makes a new one and makes it the event's latest
//! generation; a `wait` captures the latest at call time, so a later record does not move an
//! existing barrier, and an event with no marker (never recorded) is complete. Sleeping is how
//! the simulator spends modelled device time; it is never how anything is synchronized.
//!
//! # Errors
//! A faulting item poisons the device's [`FaultLatch`](super::stream): from then on every item
//! that starts on any of the device's streams is skipped at once with `Poisoned`, an item that
//! was running when the fault happened ends with `Poisoned` too (a real fault kills the whole
//! context), and markers still fire, so barriers pass and nothing hangs. See the
//! [stream docs](super::stream) for how the host hears of it.
//!
//! # The model
//! A kernel takes the roofline time `max(flops / compute, bytes / memory bandwidth)`, a copy
//! `bytes / copy bandwidth`. The default model is an H100 (SXM) slowed down 100x, so kernels
//! last long enough to see in the dashboard and for `sleep` to time them well; see
//! [`SimModel::default`]. Streams do not slow each other down: a real GPU's streams share its
//! SMs and copy engines, the simulated ones do not.
#![forbid(unsafe_code)]

use std::any::Any;
use std::fmt;
// std's `Arc`: handles to trait objects, which loom's `Arc` cannot coerce to `dyn`.
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::queue::WorkQueue;
use super::stream::{
    notify, BackendKind, Event, EventImpl, Fault, FaultLatch, GpuBackend, GpuDevice, GpuInfo,
    Stream, StreamError, StreamId, StreamKind, StreamObserver, StreamPhase, StreamRegistry,
};
use super::work::{GpuWork, Kernel};
use crate::sync::{thread, Condvar, Mutex};

/// The numbers the simulated GPU takes its time from. Shown to the user with the device
/// ([`GpuInfo::name`], [`GpuInfo::model`]), never hidden.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct SimModel {
    /// f32 arithmetic throughput, GFLOP/s.
    pub compute_gflops: f64,
    /// Device memory bandwidth, GB/s (bounds elementwise kernels).
    pub memory_gbs: f64,
    /// Host-to-device and device-to-host bandwidth, GB/s, per direction.
    pub copy_gbs: f64,
    /// Latency from a launch to the work starting on an idle stream, microseconds.
    pub launch_overhead_us: f64,
    /// Device memory, bytes (work that needs more is refused at launch).
    pub memory_bytes: u64,
    /// How many times slower than the reference GPU these numbers are (1 = real speed, 0 =
    /// no modelled time); for display.
    pub slowdown: f64,
}

/// The reference GPU: an H100 SXM. FP32 (non-tensor-core) peak, HBM3 bandwidth, what pinned
/// PCIe Gen5 x16 copies reach, a typical launch-to-start latency, 80 GB.
const H100: SimModel = SimModel {
    compute_gflops: 67_000.0,
    memory_gbs: 3_350.0,
    copy_gbs: 55.0,
    launch_overhead_us: 5.0,
    memory_bytes: 80_000_000_000,
    slowdown: 1.0,
};

impl Default for SimModel {
    /// An H100 slowed down 100x: 670 GFLOP/s, 33.5 GB/s device memory, 0.55 GB/s copies,
    /// 500 us launch latency, 80 GB. A 1024^3 GEMM takes about 3.2 ms, a 4 MB copy 7.6 ms.
    fn default() -> Self {
        SimModel::h100_class(100.0)
    }
}

impl SimModel {
    /// The H100 reference with every time stretched `slowdown` times (throughputs divided,
    /// latency multiplied; memory size unchanged).
    ///
    /// ```
    /// use enginetop::device::sim::SimModel;
    /// let model = SimModel::h100_class(100.0);
    /// assert_eq!(model.compute_gflops, 670.0);
    /// assert_eq!(model.launch_overhead_us, 500.0);
    /// ```
    pub fn h100_class(slowdown: f64) -> Self {
        SimModel {
            compute_gflops: H100.compute_gflops / slowdown,
            memory_gbs: H100.memory_gbs / slowdown,
            copy_gbs: H100.copy_gbs / slowdown,
            launch_overhead_us: H100.launch_overhead_us * slowdown,
            slowdown,
            ..H100
        }
    }

    /// Infinitely fast: every item takes no modelled time (semantics tests).
    pub fn instant() -> Self {
        SimModel {
            compute_gflops: f64::INFINITY,
            memory_gbs: f64::INFINITY,
            copy_gbs: f64::INFINITY,
            launch_overhead_us: 0.0,
            slowdown: 0.0,
            ..H100
        }
    }

    /// The modelled device time of `kernel` (a host gate takes as long as it is held).
    ///
    /// ```
    /// use enginetop::device::sim::SimModel;
    /// use enginetop::device::work::{CopyDir, Kernel};
    /// use std::time::Duration;
    ///
    /// let model = SimModel { copy_gbs: 1.0, ..SimModel::default() };
    /// let copy = Kernel::Copy { dir: CopyDir::HostToDevice, bytes: 1_000_000 };
    /// assert_eq!(model.duration(&copy), Duration::from_millis(1));
    /// ```
    pub fn duration(&self, kernel: &Kernel) -> Duration {
        let seconds = match kernel {
            Kernel::Gemm { .. } | Kernel::Elementwise { .. } => {
                let compute = kernel.flops() as f64 / (self.compute_gflops * 1e9);
                let memory = kernel.memory_bytes() as f64 / (self.memory_gbs * 1e9);
                compute.max(memory)
            }
            Kernel::Copy { .. } => kernel.transfer_bytes() as f64 / (self.copy_gbs * 1e9),
            Kernel::HostWait(_) => 0.0,
        };
        Duration::try_from_secs_f64(seconds).unwrap_or(Duration::ZERO)
    }

    /// The launch latency.
    pub(crate) fn launch_latency(&self) -> Duration {
        Duration::try_from_secs_f64(self.launch_overhead_us / 1e6).unwrap_or(Duration::ZERO)
    }
}

impl fmt::Display for SimModel {
    /// `670 GFLOP/s, 33.5 GB/s memory, 0.55 GB/s copies, 500 us launch latency (H100 / 100)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.compute_gflops.is_infinite() {
            return f.write_str("no modelled time: every item is instant");
        }
        write!(
            f,
            "{} GFLOP/s, {} GB/s memory, {} GB/s copies, {} us launch latency",
            self.compute_gflops, self.memory_gbs, self.copy_gbs, self.launch_overhead_us
        )?;
        if self.slowdown == 1.0 {
            f.write_str(" (H100 speed)")
        } else if self.slowdown > 0.0 {
            write!(f, " (H100 / {})", self.slowdown)
        } else {
            Ok(())
        }
    }
}

/// `count` simulated GPUs with one model.
///
/// ```
/// use enginetop::device::sim::{SimBackend, SimModel};
/// use enginetop::device::stream::GpuBackend;
///
/// let backend = SimBackend::new(2, SimModel::default());
/// let gpus = backend.devices();
/// assert_eq!(gpus.len(), 2);
/// assert!(gpus[0].simulated && gpus[0].name.starts_with("simulated H100-class GPU"));
/// ```
#[derive(Clone, Debug)]
pub struct SimBackend {
    count: u32,
    model: SimModel,
}

impl SimBackend {
    /// `count` simulated GPUs timed by `model`.
    pub fn new(count: u32, model: SimModel) -> Self {
        SimBackend { count, model }
    }

    /// The model.
    pub fn model(&self) -> SimModel {
        self.model
    }

    fn info(&self, ordinal: u32) -> GpuInfo {
        GpuInfo {
            ordinal,
            backend: BackendKind::Sim,
            simulated: true,
            name: format!("simulated H100-class GPU (model: {})", self.model),
            memory_bytes: self.model.memory_bytes,
            compute_capability: None,
            driver_version: None,
            model: Some(self.model),
        }
    }
}

impl GpuBackend for SimBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Sim
    }

    fn devices(&self) -> Vec<GpuInfo> {
        (0..self.count).map(|ordinal| self.info(ordinal)).collect()
    }

    fn open(
        &self,
        ordinal: u32,
        observer: Option<Arc<dyn StreamObserver>>,
    ) -> Result<Arc<dyn GpuDevice>, StreamError> {
        if ordinal >= self.count {
            return Err(StreamError::NoSuchDevice {
                backend: BackendKind::Sim,
                ordinal,
                count: self.count,
            });
        }
        Ok(Arc::new(SimDevice {
            shared: Arc::new(DeviceShared {
                info: self.info(ordinal),
                model: self.model,
                latch: FaultLatch::default(),
                observer,
            }),
            streams: StreamRegistry::new(),
        }))
    }
}

/// What a device's streams and events share.
struct DeviceShared {
    info: GpuInfo,
    model: SimModel,
    latch: FaultLatch,
    observer: Option<Arc<dyn StreamObserver>>,
}

/// An open simulated GPU.
struct SimDevice {
    shared: Arc<DeviceShared>,
    /// Every stream made, for [`GpuDevice::synchronize`], and the next index per role.
    streams: StreamRegistry<StreamShared>,
}

impl GpuDevice for SimDevice {
    fn info(&self) -> &GpuInfo {
        &self.shared.info
    }

    fn new_stream(&self, kind: StreamKind) -> Result<Box<dyn Stream>, StreamError> {
        let id = self.streams.next_id(self.shared.info.ordinal, kind);
        let stream = SimStream::start(id, Arc::clone(&self.shared))?;
        self.streams.register(&stream.shared);
        Ok(Box::new(stream))
    }

    fn new_event(&self) -> Result<Event, StreamError> {
        Ok(Event(Arc::new(SimEvent {
            device: Arc::clone(&self.shared),
            state: Mutex::new(EventState::default()),
        })))
    }

    fn synchronize(&self) -> Result<(), StreamError> {
        for stream in self.streams.live() {
            stream.queue.wait_idle();
        }
        self.shared.latch.report()
    }
}

/// One queue item.
enum Item {
    Work { work: GpuWork, submitted: Instant },
    Record(Arc<Marker>),
    Wait(Arc<Marker>),
}

/// What a stream's host side and executor share.
struct StreamShared {
    id: StreamId,
    device: Arc<DeviceShared>,
    queue: WorkQueue<Item>,
}

/// A simulated stream: a queue and its executor thread.
struct SimStream {
    shared: Arc<StreamShared>,
    executor: Option<thread::JoinHandle<()>>,
}

impl SimStream {
    fn start(id: StreamId, device: Arc<DeviceShared>) -> Result<Self, StreamError> {
        let shared = Arc::new(StreamShared {
            id,
            device,
            queue: WorkQueue::new(),
        });
        let executor = {
            let shared = Arc::clone(&shared);
            thread::Builder::new()
                .name(format!("{id}-exec"))
                .spawn(move || run_executor(&shared))
                .map_err(|err| StreamError::Thread {
                    thread: format!("{id}-exec"),
                    reason: err.to_string(),
                })?
        };
        Ok(SimStream {
            shared,
            executor: Some(executor),
        })
    }

    /// Appends `item`. The queue is closed only by `Drop`, which cannot run while `&self` is
    /// borrowed, so the push always succeeds.
    fn enqueue(&self, item: Item) {
        let pushed = self.shared.queue.push(item);
        debug_assert!(pushed.is_ok(), "a live stream's queue is open");
    }

    fn sim_event<'a>(&self, event: &'a Event) -> Result<&'a SimEvent, StreamError> {
        event
            .downcast::<SimEvent>()
            .ok_or_else(|| StreamError::ForeignEvent {
                used_with: self.shared.id.to_string(),
                what: "backend",
            })
    }
}

impl Stream for SimStream {
    fn id(&self) -> StreamId {
        self.shared.id
    }

    fn launch(&self, work: GpuWork) -> Result<(), StreamError> {
        let device = &self.shared.device;
        device.latch.refuse_if_poisoned()?;
        work.kernel
            .check(device.model.memory_bytes)
            .map_err(|reason| StreamError::InvalidWork {
                stream: self.shared.id,
                what: work.kernel.label(),
                reason,
            })?;
        let submitted = Instant::now();
        let observer = device.observer.as_ref();
        notify(
            observer,
            self.shared.id,
            work.op,
            StreamPhase::Submit,
            submitted,
        );
        self.enqueue(Item::Work { work, submitted });
        Ok(())
    }

    fn record(&self, event: &Event) -> Result<(), StreamError> {
        self.shared.device.latch.refuse_if_poisoned()?;
        let event = self.sim_event(event)?;
        if !Arc::ptr_eq(&event.device, &self.shared.device) {
            return Err(StreamError::ForeignEvent {
                used_with: self.shared.id.to_string(),
                what: "device",
            });
        }
        self.enqueue(Item::Record(event.next_generation()));
        Ok(())
    }

    fn wait_event(&self, event: &Event) -> Result<(), StreamError> {
        self.shared.device.latch.refuse_if_poisoned()?;
        // Waiting on another simulated device's event is allowed, as in CUDA.
        if let Some(marker) = self.sim_event(event)?.latest() {
            if marker.fired_at().is_none() {
                self.enqueue(Item::Wait(marker));
            }
        }
        Ok(())
    }

    fn synchronize(&self) -> Result<(), StreamError> {
        self.shared.queue.wait_idle();
        self.shared.device.latch.report()
    }

    fn query(&self) -> bool {
        self.shared.queue.is_idle()
    }
}

impl Drop for SimStream {
    /// Lets the executor finish what is queued, then joins it (unlike `cuStreamDestroy`,
    /// which returns at once) so no executor outlives its stream. Dropped on its own executor
    /// (from a callback), it detaches instead.
    fn drop(&mut self) {
        self.shared.queue.close();
        if let Some(executor) = self.executor.take() {
            if executor.thread().id() != thread::current().id() {
                let _ = executor.join();
            }
        }
    }
}

/// The executor loop (see the module docs).
fn run_executor(shared: &StreamShared) {
    while let Some(item) = shared.queue.pop() {
        match item {
            Item::Work { work, submitted } => run_work(shared, work, submitted),
            Item::Record(marker) => marker.fire(),
            Item::Wait(marker) => {
                marker.wait();
            }
        }
        shared.queue.done();
    }
}

/// Runs one unit: latency, start, modelled time (or a fault, or a skip), end, callback.
fn run_work(shared: &StreamShared, mut work: GpuWork, submitted: Instant) {
    let device = &shared.device;
    let observer = device.observer.as_ref();
    let result = if let Some(fault) = device.latch.current() {
        let now = Instant::now();
        notify(observer, shared.id, work.op, StreamPhase::Start, now);
        Err(StreamError::Poisoned(fault))
    } else {
        sleep_until(submitted + device.model.launch_latency());
        notify(
            observer,
            shared.id,
            work.op,
            StreamPhase::Start,
            Instant::now(),
        );
        execute(shared, &work)
    };
    let ok = result.is_ok();
    notify(
        observer,
        shared.id,
        work.op,
        StreamPhase::End { ok },
        Instant::now(),
    );
    // A panicking callback must not kill the executor (every later synchronize would hang);
    // the panic hook has already printed it.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work.complete(result)));
}

/// The unit's device time, or its fault. Work that was running when the device faulted ends
/// `Poisoned`, as a real fault takes down everything in flight.
fn execute(shared: &StreamShared, work: &GpuWork) -> Result<(), StreamError> {
    let device = &shared.device;
    if let Some(message) = &work.fault {
        let ours = Fault::on_stream(shared.id, work.op, message.to_string());
        let in_force = device.latch.poison(ours.clone());
        return Err(if in_force == ours {
            StreamError::Fault(ours)
        } else {
            StreamError::Poisoned(in_force)
        });
    }
    match &work.kernel {
        Kernel::HostWait(gate) => gate.pass(),
        kernel => sleep_for(device.model.duration(kernel)),
    }
    match device.latch.current() {
        Some(fault) => Err(StreamError::Poisoned(fault)),
        None => Ok(()),
    }
}

/// Spends modelled device time (`std::thread::sleep`: time passing, not synchronization).
fn sleep_for(duration: Duration) {
    if !duration.is_zero() {
        std::thread::sleep(duration);
    }
}

fn sleep_until(deadline: Instant) {
    sleep_for(deadline.saturating_duration_since(Instant::now()));
}

/// One generation of an event: fired once, when the executor reaches it.
#[derive(Debug, Default)]
struct Marker {
    fired: Mutex<Option<Instant>>,
    changed: Condvar,
}

impl Marker {
    fn fire(&self) {
        *self.fired.lock() = Some(Instant::now());
        self.changed.notify_all();
    }

    fn fired_at(&self) -> Option<Instant> {
        *self.fired.lock()
    }

    /// Blocks until fired; returns when it fired.
    fn wait(&self) -> Instant {
        let mut fired = self.fired.lock();
        loop {
            if let Some(at) = *fired {
                return at;
            }
            fired = self.changed.wait(fired);
        }
    }
}

/// A simulated event: its latest marker, if it has been recorded.
struct SimEvent {
    device: Arc<DeviceShared>,
    state: Mutex<EventState>,
}

#[derive(Default)]
struct EventState {
    generation: u64,
    latest: Option<Arc<Marker>>,
}

impl SimEvent {
    /// Starts a new generation and returns its marker.
    fn next_generation(&self) -> Arc<Marker> {
        let marker = Arc::new(Marker::default());
        let mut state = self.state.lock();
        state.generation += 1;
        state.latest = Some(Arc::clone(&marker));
        marker
    }

    fn latest(&self) -> Option<Arc<Marker>> {
        self.state.lock().latest.clone()
    }

    /// When the latest generation fired (waiting for it); `None` if never recorded.
    fn completed_at(&self) -> Option<Instant> {
        self.latest().map(|marker| marker.wait())
    }
}

impl fmt::Debug for SimEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimEvent")
            .field("device", &self.device.info.ordinal)
            .field("generation", &self.generation())
            .finish()
    }
}

impl EventImpl for SimEvent {
    fn query(&self) -> bool {
        self.latest()
            .is_none_or(|marker| marker.fired_at().is_some())
    }

    fn synchronize(&self) -> Result<(), StreamError> {
        self.completed_at();
        self.device.latch.report()
    }

    fn elapsed_ms(&self, end: &Event) -> Result<f32, StreamError> {
        let end = end
            .downcast::<SimEvent>()
            .ok_or(StreamError::ForeignEvent {
                used_with: "a simulated event".to_string(),
                what: "backend",
            })?;
        let (Some(from), Some(to)) = (self.completed_at(), end.completed_at()) else {
            return Err(StreamError::EventNotRecorded);
        };
        self.device.latch.refuse_if_poisoned()?;
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let elapsed =
            ms(to.saturating_duration_since(from)) - ms(from.saturating_duration_since(to));
        Ok(elapsed as f32)
    }

    fn generation(&self) -> u64 {
        self.state.lock().generation
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::device::work::{CopyDir, ElementwiseOp};

    #[test]
    fn the_default_model_is_an_h100_slowed_100x() {
        let model = SimModel::default();
        assert_eq!(model.compute_gflops, 670.0);
        assert_eq!(model.memory_gbs, 33.5);
        assert_eq!(model.copy_gbs, 0.55);
        assert_eq!(model.launch_latency(), Duration::from_micros(500));
        assert_eq!(
            model.to_string(),
            "670 GFLOP/s, 33.5 GB/s memory, 0.55 GB/s copies, 500 us launch latency (H100 / 100)"
        );
    }

    #[test]
    fn kernels_take_their_roofline_time() {
        let model = SimModel {
            compute_gflops: 1.0,
            memory_gbs: 1.0,
            copy_gbs: 2.0,
            ..SimModel::default()
        };
        // 2 * 100^3 = 2e6 FLOPs at 1 GFLOP/s = 2 ms; 3 * 4e4 B = 120 kB at 1 GB/s = 0.12 ms.
        let gemm = Kernel::Gemm {
            m: 100,
            n: 100,
            k: 100,
        };
        assert_eq!(model.duration(&gemm), Duration::from_millis(2));
        // 1e6 elements, 3 arrays of 4 B = 12 MB at 1 GB/s = 12 ms (memory bound).
        let add = Kernel::Elementwise {
            op: ElementwiseOp::Add,
            len: 1_000_000,
        };
        assert_eq!(model.duration(&add), Duration::from_millis(12));
        let copy = Kernel::Copy {
            dir: CopyDir::DeviceToHost,
            bytes: 2_000_000,
        };
        assert_eq!(model.duration(&copy), Duration::from_millis(1));
        assert_eq!(SimModel::instant().duration(&gemm), Duration::ZERO);
    }

    #[test]
    fn the_simulated_device_says_it_is_simulated() {
        let info = &SimBackend::new(1, SimModel::default()).devices()[0];
        assert!(info.simulated);
        assert_eq!(info.backend, BackendKind::Sim);
        assert!(info.name.contains("simulated"), "{}", info.name);
        assert!(info.name.contains("670 GFLOP/s"), "{}", info.name);
    }

    #[test]
    fn opening_a_missing_ordinal_names_the_count() {
        let err = SimBackend::new(2, SimModel::instant())
            .open(2, None)
            .err()
            .unwrap();
        assert_eq!(
            err.to_string(),
            "no sim GPU 2: the backend has 2; pick an ordinal below 2"
        );
    }
}
