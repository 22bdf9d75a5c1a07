//! Real GPUs through cudarc: the same [`Stream`] semantics as the simulated GPU, on CUDA
//! streams and events.
//!
//! # Loading and detection
//! cudarc is built with `dynamic-loading`: libcuda, libnvrtc and libcublas are opened at run
//! time, so the crate builds and runs where there is no CUDA at all. [`probe`] never panics:
//! it asks whether libcuda can be loaded *before* any call that would load it (cudarc panics
//! when a library is missing), then counts devices (`CUDA_ERROR_NO_DEVICE` when the driver is
//! there but no GPU is), then checks libnvrtc and libcublas. Every way it can fail becomes a
//! [`CudaProblem`] whose text says what is missing and how to fix it. Driver errors are kept
//! as their raw code and symbolic name; formatting a cudarc `DriverError` would call into the
//! driver.
//!
//! # Mirroring the simulated stream
//! | simulated stream | CUDA stream |
//! |---|---|
//! | executor thread runs items in order | the GPU runs the stream in order |
//! | `record`: marker item | `cuEventRecord` |
//! | `wait_event`: barrier item | `cuStreamWaitEvent` |
//! | modelled sleep | cuBLAS SGEMM, NVRTC kernels, pinned async copies |
//! | host gate blocks the executor | `cuLaunchHostFunc` blocks the stream |
//! | start / end when run | timing events around each unit, read once it is done |
//! | callback on the executor | callback on the stream's completion thread |
//!
//! `launch` records a timing event, enqueues the work and records a second, blocking-sync
//! event, then hands both with the callback to the stream's completion thread. That thread
//! waits on the end events in launch order (so callbacks run in order), converts the events to
//! host instants for the [`StreamObserver`], and runs the callback: the host never
//! synchronizes per unit.
//!
//! # Contexts, threads and drop order
//! Each [`GpuBackend::open`] creates its own (non-primary) context, so a sticky fault in one
//! opened device does not take down another. cudarc's per-allocation event tracking is
//! switched off before anything is allocated: every scratch buffer belongs to one stream, and
//! cross-stream order is explicit (events). cuBLAS does not bind the context to the calling
//! thread, so every launch binds it first (engine workers call `launch` from their own
//! threads), and the completion thread binds it once. A stream's cuBLAS handle and buffers
//! are dropped with the stream, before the context (which the stream keeps alive); after a
//! fault the cuBLAS handle is leaked instead, because cudarc unwraps its destroy status.
//!
//! # Scratch buffers
//! Work units describe sizes, not tensors: each stream keeps device buffers and one pinned
//! host buffer, grown to the largest unit seen (the stream is synchronized before a buffer is
//! replaced, so no queued copy reads freed memory).
//!
//! This module cannot be exercised without a GPU; the stream semantics suite runs against it
//! when one is present and prints why it was skipped otherwise.

use std::any::Any;
use std::ffi::c_void;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::cublas::{sys as blas_sys, CudaBlas, Gemm, GemmConfig};
use cudarc::driver::{
    result as cu, sys, CudaContext, CudaEvent, CudaFunction, CudaSlice, CudaStream, DriverError,
    LaunchConfig, PinnedHostSlice, PushKernelArg,
};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileError, CompileOptions};

use super::queue::WorkQueue;
use super::stream::{
    notify, BackendKind, Event, EventImpl, Fault, FaultLatch, GpuBackend, GpuDevice, GpuInfo,
    Stream, StreamError, StreamId, StreamKind, StreamObserver, StreamPhase,
};
use super::work::{CopyDir, ElementwiseOp, GpuWork, HostGate, Kernel, OpTag};
use crate::sync::{thread, AtomicU64, Mutex, Ordering};

/// Why the CUDA backend cannot be used here.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CudaProblem {
    /// libcuda could not be loaded: no NVIDIA driver.
    #[error("no CUDA driver found (libcuda.so not loadable)")]
    NoDriver,
    /// The driver is there but reports no GPU.
    #[error("the CUDA driver found no GPU (CUDA_ERROR_NO_DEVICE)")]
    NoDevice,
    /// A driver call failed during detection.
    #[error("{call} failed: {name} ({code})")]
    Driver {
        /// The call.
        call: &'static str,
        /// The raw `CUresult`.
        code: u32,
        /// Its symbolic name.
        name: String,
    },
    /// A CUDA library the kernels need could not be loaded.
    #[error(
        "{0} not loadable (the kernels need it); add the CUDA toolkit's lib64 to \
         LD_LIBRARY_PATH, e.g. /usr/local/cuda/lib64"
    )]
    MissingLibrary(&'static str),
}

/// What detection found: the GPUs the driver reports, and what (if anything) keeps the
/// backend from being used. Devices may be listed while `problem` is set (a driver without
/// libnvrtc).
#[derive(Clone, Debug, PartialEq)]
pub struct CudaProbe {
    /// The driver's version, `13.0`.
    pub driver_version: Option<String>,
    /// The GPUs.
    pub devices: Vec<GpuInfo>,
    /// Why the backend cannot be used, if it cannot.
    pub problem: Option<CudaProblem>,
}

impl CudaProbe {
    /// Whether the backend can open a device.
    pub fn usable(&self) -> bool {
        self.problem.is_none() && !self.devices.is_empty()
    }
}

/// Looks for the CUDA driver, its GPUs and the libraries the kernels need; never panics.
pub fn probe() -> CudaProbe {
    let mut probe = CudaProbe {
        driver_version: None,
        devices: Vec::new(),
        problem: None,
    };
    // SAFETY: only tries to open the library by name with libloading and closes it again.
    if !unsafe { sys::is_culib_present() } {
        probe.problem = Some(CudaProblem::NoDriver);
        return probe;
    }
    let count = match CudaContext::device_count() {
        Ok(count) => count.max(0) as u32,
        Err(err) if err.0 == sys::CUresult::CUDA_ERROR_NO_DEVICE => 0,
        Err(err) => {
            probe.problem = Some(detection_error("cuDeviceGetCount", &err));
            return probe;
        }
    };
    probe.driver_version = driver_version();
    for ordinal in 0..count {
        match device_info(ordinal, probe.driver_version.clone()) {
            Ok(info) => probe.devices.push(info),
            Err(err) => {
                probe.problem = Some(detection_error("cuDeviceGet*", &err));
                return probe;
            }
        }
    }
    probe.problem = if count == 0 {
        Some(CudaProblem::NoDevice)
    } else {
        missing_library()
    };
    probe
}

fn detection_error(call: &'static str, err: &DriverError) -> CudaProblem {
    CudaProblem::Driver {
        call,
        code: err.0 as u32,
        name: format!("{:?}", err.0),
    }
}

/// libnvrtc or libcublas, if one cannot be loaded.
fn missing_library() -> Option<CudaProblem> {
    // SAFETY: only tries to open the library by name with libloading and closes it again.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Some(CudaProblem::MissingLibrary("libnvrtc"));
    }
    // SAFETY: as above.
    if !unsafe { cudarc::cublas::sys::is_culib_present() } {
        return Some(CudaProblem::MissingLibrary("libcublas"));
    }
    None
}

/// `13.0` for driver API version 13000.
fn driver_version() -> Option<String> {
    let mut version: std::ffi::c_int = 0;
    // SAFETY: libcuda is loaded and initialized (device_count called cuInit); the call writes
    // one int through a pointer to a live local.
    let status = unsafe { sys::cuDriverGetVersion(&mut version) };
    (status == sys::CUresult::CUDA_SUCCESS)
        .then(|| format!("{}.{}", version / 1000, (version % 1000) / 10))
}

fn device_info(ordinal: u32, driver_version: Option<String>) -> Result<GpuInfo, DriverError> {
    let device = cu::device::get(ordinal as i32)?;
    let name = cu::device::get_name(device)?;
    let attribute = |attribute| {
        // SAFETY: `device` came from cuDeviceGet.
        unsafe { cu::device::get_attribute(device, attribute) }
    };
    use sys::CUdevice_attribute::*;
    let major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    // SAFETY: `device` came from cuDeviceGet.
    let memory = unsafe { cu::device::total_mem(device) }?;
    Ok(GpuInfo {
        ordinal,
        backend: BackendKind::Cuda,
        simulated: false,
        name,
        memory_bytes: memory as u64,
        compute_capability: Some((major, minor)),
        driver_version,
        model: None,
    })
}

/// The real GPUs, as [`probe`] found them.
#[derive(Clone, Debug)]
pub struct CudaBackend {
    probe: CudaProbe,
}

impl CudaBackend {
    /// Probes now (see [`probe`]).
    pub fn detect() -> Self {
        CudaBackend { probe: probe() }
    }

    /// A backend over an earlier probe.
    pub fn from_probe(probe: CudaProbe) -> Self {
        CudaBackend { probe }
    }

    /// What detection found.
    pub fn probe(&self) -> &CudaProbe {
        &self.probe
    }
}

impl GpuBackend for CudaBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn devices(&self) -> Vec<GpuInfo> {
        self.probe.devices.clone()
    }

    fn open(
        &self,
        ordinal: u32,
        observer: Option<Arc<dyn StreamObserver>>,
    ) -> Result<Arc<dyn GpuDevice>, StreamError> {
        if let Some(problem) = &self.probe.problem {
            return Err(StreamError::CudaUnavailable {
                reason: problem.to_string(),
            });
        }
        let info =
            self.probe
                .devices
                .get(ordinal as usize)
                .cloned()
                .ok_or(StreamError::NoSuchDevice {
                    backend: BackendKind::Cuda,
                    ordinal,
                    count: self.probe.devices.len() as u32,
                })?;
        Ok(Arc::new(CudaDevice::open(info, observer)?))
    }
}

/// A failed CUDA call as a [`StreamError`] (raw code and symbolic name, no driver call).
fn driver(call: &'static str) -> impl Fn(DriverError) -> StreamError {
    move |err| StreamError::Driver {
        call,
        code: err.0 as u32,
        name: format!("{:?}", err.0),
        hint: match err.0 {
            sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                "; the GPU is out of memory: use smaller work or fewer streams".to_string()
            }
            _ => String::new(),
        },
    }
}

/// Errors that poison a context (CUDA's sticky errors): once one is seen, every later call
/// on the context fails with it.
fn is_sticky(err: &DriverError) -> bool {
    use sys::CUresult::*;
    matches!(
        err.0,
        CUDA_ERROR_ILLEGAL_ADDRESS
            | CUDA_ERROR_LAUNCH_FAILED
            | CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUDA_ERROR_MISALIGNED_ADDRESS
            | CUDA_ERROR_INVALID_ADDRESS_SPACE
            | CUDA_ERROR_INVALID_PC
            | CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUDA_ERROR_ASSERT
            | CUDA_ERROR_LAUNCH_TIMEOUT
    )
}

fn fault_text(err: &DriverError) -> String {
    format!("{:?} ({})", err.0, err.0 as u32)
}

/// The elementwise kernels and the trap kernel `fail_with` launches.
const KERNELS: &str = r#"
extern "C" __global__ void relu(float* y, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
extern "C" __global__ void add(float* y, const float* a, const float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a[i] + b[i];
}
extern "C" __global__ void axpy(float* y, const float* x, float alpha, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = alpha * x[i] + y[i];
}
extern "C" __global__ void fault() { __trap(); }
"#;

/// The compiled kernels of one context.
struct Kernels {
    relu: CudaFunction,
    add: CudaFunction,
    axpy: CudaFunction,
    fault: CudaFunction,
}

impl Kernels {
    /// Compiles [`KERNELS`] with NVRTC (for NVRTC's default virtual architecture, which the
    /// driver JIT-compiles for the actual GPU) and loads them into `ctx`.
    fn compile(ctx: &Arc<CudaContext>) -> Result<Self, StreamError> {
        let ptx = compile_ptx_with_opts(KERNELS, CompileOptions::default()).map_err(|err| {
            StreamError::CudaUnavailable {
                reason: format!(
                    "NVRTC could not compile the kernels: {}",
                    compile_text(&err)
                ),
            }
        })?;
        let module = ctx.load_module(ptx).map_err(driver("cuModuleLoadData"))?;
        let load = |name| {
            module
                .load_function(name)
                .map_err(driver("cuModuleGetFunction"))
        };
        Ok(Kernels {
            relu: load("relu")?,
            add: load("add")?,
            axpy: load("axpy")?,
            fault: load("fault")?,
        })
    }
}

/// NVRTC's status and log, without calling into NVRTC.
fn compile_text(err: &CompileError) -> String {
    match err {
        CompileError::CompileError { nvrtc, log, .. } => {
            format!("{:?}: {}", nvrtc.0, log.to_string_lossy())
        }
        CompileError::CreationError(e)
        | CompileError::GetLogError(e)
        | CompileError::GetPtxError(e)
        | CompileError::DestroyError(e) => format!("{:?}", e.0),
    }
}

/// What a device's streams and events share. Field order is drop order: the kernels go
/// before the context.
struct CudaShared {
    kernels: Kernels,
    clock: DeviceClock,
    ctx: Arc<CudaContext>,
    info: GpuInfo,
    latch: FaultLatch,
    observer: Option<Arc<dyn StreamObserver>>,
}

impl CudaShared {
    /// Poisons the device with a fault CUDA reported without a stream or op; returns the
    /// fault in force.
    fn poison(&self, err: &DriverError) -> Fault {
        self.latch.poison(Fault {
            device: self.info.ordinal,
            stream: None,
            op: None,
            message: fault_text(err),
        })
    }
}

/// An open GPU.
struct CudaDevice {
    shared: Arc<CudaShared>,
    streams: Mutex<Vec<std::sync::Weak<WorkQueue<Pending>>>>,
    next_index: Mutex<[u32; 3]>,
}

impl CudaDevice {
    fn open(info: GpuInfo, observer: Option<Arc<dyn StreamObserver>>) -> Result<Self, StreamError> {
        let ctx = CudaContext::new_non_primary(info.ordinal as usize, 0)
            .map_err(driver("cuCtxCreate"))?;
        // SAFETY: called before anything is allocated in this context. Every buffer is used
        // by the one stream that made it, and cross-stream order is explicit (events), so the
        // per-allocation events cudarc would record are not needed.
        unsafe { ctx.disable_event_tracking() };
        let kernels = Kernels::compile(&ctx)?;
        let clock = DeviceClock::new(&ctx)?;
        Ok(CudaDevice {
            shared: Arc::new(CudaShared {
                kernels,
                clock,
                ctx,
                info,
                latch: FaultLatch::default(),
                observer,
            }),
            streams: Mutex::new(Vec::new()),
            next_index: Mutex::new([0; 3]),
        })
    }
}

impl GpuDevice for CudaDevice {
    fn info(&self) -> &GpuInfo {
        &self.shared.info
    }

    fn new_stream(&self, kind: StreamKind) -> Result<Box<dyn Stream>, StreamError> {
        self.shared.latch.refuse_if_poisoned()?;
        let index = {
            let mut next = self.next_index.lock();
            let slot = &mut next[kind as usize];
            *slot += 1;
            *slot - 1
        };
        let id = StreamId {
            device: self.shared.info.ordinal,
            kind,
            index,
        };
        let stream = CudaGpuStream::start(id, Arc::clone(&self.shared))?;
        let mut streams = self.streams.lock();
        streams.retain(|queue| queue.strong_count() > 0);
        streams.push(Arc::downgrade(&stream.pending));
        Ok(Box::new(stream))
    }

    fn new_event(&self) -> Result<Event, StreamError> {
        let event = self
            .shared
            .ctx
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(driver("cuEventCreate"))?;
        Ok(Event(Arc::new(CudaEventImpl {
            event,
            shared: Arc::clone(&self.shared),
            generation: AtomicU64::new(0),
        })))
    }

    fn synchronize(&self) -> Result<(), StreamError> {
        // Completion threads first: they attribute a fault to the unit that hit it.
        let queues: Vec<_> = self
            .streams
            .lock()
            .iter()
            .filter_map(std::sync::Weak::upgrade)
            .collect();
        for queue in queues {
            queue.wait_idle();
        }
        if let Err(err) = self.shared.ctx.synchronize() {
            self.shared.poison(&err);
        }
        self.shared.latch.report()
    }
}

/// A launched unit waiting for its end event, on the completion thread's queue.
struct Pending {
    work: GpuWork,
    start: CudaEvent,
    end: CudaEvent,
}

/// Maps GPU timing events onto the host clock: one event recorded (on a stream made for it)
/// and waited for when the device was opened, and the host instant right after. One clock
/// per context, so timestamps of different streams compare.
struct DeviceClock {
    base: CudaEvent,
    base_at: Instant,
}

impl DeviceClock {
    fn new(ctx: &Arc<CudaContext>) -> Result<Self, StreamError> {
        let stream = ctx.new_stream().map_err(driver("cuStreamCreate"))?;
        let base = ctx
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(driver("cuEventCreate"))?;
        base.record(&stream).map_err(driver("cuEventRecord"))?;
        base.synchronize().map_err(driver("cuEventSynchronize"))?;
        Ok(DeviceClock {
            base,
            base_at: Instant::now(),
        })
    }

    /// When `event` completed, on the host clock (f32 milliseconds: about 60 us resolution
    /// after 1000 s); now if CUDA cannot say.
    fn at(&self, event: &CudaEvent) -> Instant {
        match self.base.elapsed_ms(event) {
            Ok(ms) if ms >= 0.0 => self.base_at + Duration::from_secs_f64(f64::from(ms) / 1e3),
            _ => Instant::now(),
        }
    }
}

/// A stream's scratch: device buffers and one pinned host buffer, grown on demand.
#[derive(Default)]
struct Scratch {
    a: Option<CudaSlice<f32>>,
    b: Option<CudaSlice<f32>>,
    c: Option<CudaSlice<f32>>,
    host: Option<PinnedHostSlice<f32>>,
}

/// What `launch` needs exclusively: the cuBLAS handle (made on first GEMM) and scratch.
#[derive(Default)]
struct Resources {
    blas: Option<CudaBlas>,
    scratch: Scratch,
}

/// A CUDA stream, its scratch, and the completion thread that runs its callbacks.
struct CudaGpuStream {
    id: StreamId,
    resources: Mutex<Resources>,
    stream: Arc<CudaStream>,
    pending: Arc<WorkQueue<Pending>>,
    completer: Option<thread::JoinHandle<()>>,
    shared: Arc<CudaShared>,
}

impl CudaGpuStream {
    fn start(id: StreamId, shared: Arc<CudaShared>) -> Result<Self, StreamError> {
        let stream = shared.ctx.new_stream().map_err(driver("cuStreamCreate"))?;
        let pending = Arc::new(WorkQueue::new());
        let completer = {
            let (pending, shared) = (Arc::clone(&pending), Arc::clone(&shared));
            thread::Builder::new()
                .name(format!("{id}-done"))
                .spawn(move || run_completer(id, &shared, &pending))
                .map_err(|err| StreamError::Thread {
                    thread: format!("{id}-done"),
                    reason: err.to_string(),
                })?
        };
        Ok(CudaGpuStream {
            id,
            resources: Mutex::new(Resources::default()),
            stream,
            pending,
            completer: Some(completer),
            shared,
        })
    }

    fn cuda_event<'a>(&self, event: &'a Event) -> Result<&'a CudaEventImpl, StreamError> {
        event
            .downcast::<CudaEventImpl>()
            .ok_or_else(|| StreamError::ForeignEvent {
                used_with: self.id.to_string(),
                what: "backend",
            })
    }

    /// A driver error from a host call: poisons the device if it is sticky.
    fn fail(&self, call: &'static str, err: DriverError) -> StreamError {
        if is_sticky(&err) {
            return StreamError::Poisoned(self.shared.poison(&err));
        }
        driver(call)(err)
    }

    fn timing_event(&self, flags: sys::CUevent_flags) -> Result<CudaEvent, StreamError> {
        let event = self.shared.ctx.new_event(Some(flags));
        event.map_err(|err| self.fail("cuEventCreate", err))
    }

    /// Enqueues the unit's device work on the stream.
    fn enqueue(&self, work: &GpuWork) -> Result<(), StreamError> {
        if work.fault.is_some() {
            return self
                .launch_trap()
                .map_err(|err| self.fail("cuLaunchKernel", err));
        }
        let mut resources = self.resources.lock();
        match work.kernel {
            Kernel::Gemm { m, n, k } => self.gemm(&mut resources, m, n, k),
            Kernel::Elementwise { op, len } => self.elementwise(&mut resources.scratch, op, len),
            Kernel::Copy { dir, bytes } => self.copy(&mut resources.scratch, dir, bytes),
            Kernel::HostWait(ref gate) => self
                .launch_host_wait(gate)
                .map_err(|err| self.fail("cuLaunchHostFunc", err)),
        }
    }

    /// Makes sure `buffer` holds at least `len` f32s (synchronizing before replacing one).
    fn ensure_device(
        &self,
        buffer: &mut Option<CudaSlice<f32>>,
        len: usize,
    ) -> Result<(), StreamError> {
        if buffer.as_ref().is_some_and(|b| b.len() >= len) {
            return Ok(());
        }
        if buffer.is_some() {
            self.stream
                .synchronize()
                .map_err(|err| self.fail("cuStreamSynchronize", err))?;
        }
        *buffer = Some(
            self.stream
                .alloc_zeros::<f32>(len.max(1))
                .map_err(|err| self.fail("cuMemAlloc", err))?,
        );
        Ok(())
    }

    /// Makes sure the pinned host buffer holds at least `len` f32s, zeroed.
    fn ensure_host(&self, scratch: &mut Scratch, len: usize) -> Result<(), StreamError> {
        if scratch.host.as_ref().is_some_and(|h| h.len() >= len) {
            return Ok(());
        }
        if scratch.host.is_some() {
            self.stream
                .synchronize()
                .map_err(|err| self.fail("cuStreamSynchronize", err))?;
        }
        // Write-combined memory is fast for the GPU to read but slow for the CPU to read:
        // use it for uploads only.
        let flags = match self.id.kind {
            StreamKind::CopyD2H => 0,
            _ => sys::CU_MEMHOSTALLOC_WRITECOMBINED,
        };
        let len = len.max(1);
        // SAFETY: the memory is zeroed below before anything reads it.
        let mut host = unsafe { self.shared.ctx.alloc_pinned_with_flags::<f32>(len, flags) }
            .map_err(|err| self.fail("cuMemHostAlloc", err))?;
        let ptr = host
            .as_mut_ptr()
            .map_err(|err| self.fail("cuEventSynchronize", err))?;
        // SAFETY: `ptr` points to `len` f32s of page-locked memory that `host` owns and
        // nothing else uses yet; all-zero bytes are a valid f32.
        unsafe { std::ptr::write_bytes(ptr, 0, len) };
        scratch.host = Some(host);
        Ok(())
    }

    fn gemm(&self, resources: &mut Resources, m: u32, n: u32, k: u32) -> Result<(), StreamError> {
        if m == 0 || n == 0 || k == 0 {
            return Ok(());
        }
        let (mu, nu, ku) = (m as usize, n as usize, k as usize);
        let scratch = &mut resources.scratch;
        self.ensure_device(&mut scratch.a, mu * ku)?;
        self.ensure_device(&mut scratch.b, ku * nu)?;
        self.ensure_device(&mut scratch.c, mu * nu)?;
        if resources.blas.is_none() {
            let blas =
                CudaBlas::new(Arc::clone(&self.stream)).map_err(|err| StreamError::Driver {
                    call: "cublasCreate",
                    code: err.0 as u32,
                    name: format!("{:?}", err.0),
                    hint: String::new(),
                })?;
            resources.blas = Some(blas);
        }
        let (Some(blas), Some(a), Some(b), Some(c)) = (
            &resources.blas,
            &resources.scratch.a,
            &resources.scratch.b,
            &mut resources.scratch.c,
        ) else {
            unreachable!("ensured above");
        };
        // Row-major C = A B is column-major C^T = B^T A^T: pass (B, A) with m = N, n = M.
        let config = GemmConfig {
            transa: blas_sys::cublasOperation_t::CUBLAS_OP_N,
            transb: blas_sys::cublasOperation_t::CUBLAS_OP_N,
            m: n as i32,
            n: m as i32,
            k: k as i32,
            alpha: 1.0f32,
            lda: n as i32,
            ldb: k as i32,
            beta: 0.0f32,
            ldc: n as i32,
        };
        self.shared
            .ctx
            .bind_to_thread()
            .map_err(|err| self.fail("cuCtxSetCurrent", err))?;
        // SAFETY: `b` holds k*n, `a` m*k and `c` m*n f32s (ensured above); the leading
        // dimensions describe exactly those row-major matrices (Kernel::check bounded every
        // dimension by i32::MAX); all three buffers belong to this stream, which the handle
        // is bound to, so no other stream touches them.
        unsafe { blas.gemm(config, b, a, c) }.map_err(|err| StreamError::Driver {
            call: "cublasSgemm",
            code: err.0 as u32,
            name: format!("{:?}", err.0),
            hint: String::new(),
        })
    }

    fn elementwise(
        &self,
        scratch: &mut Scratch,
        op: ElementwiseOp,
        len: u32,
    ) -> Result<(), StreamError> {
        if len == 0 {
            return Ok(());
        }
        let elements = len as usize;
        self.ensure_device(&mut scratch.a, elements)?;
        self.ensure_device(&mut scratch.b, elements)?;
        self.ensure_device(&mut scratch.c, elements)?;
        let (Some(x), Some(b), Some(y)) = (&scratch.a, &scratch.b, &mut scratch.c) else {
            unreachable!("ensured above");
        };
        let kernels = &self.shared.kernels;
        let n = len as i32;
        let alpha = 0.5f32;
        let mut args = match op {
            ElementwiseOp::Relu => self.stream.launch_builder(&kernels.relu),
            ElementwiseOp::Add => self.stream.launch_builder(&kernels.add),
            ElementwiseOp::Axpy => self.stream.launch_builder(&kernels.axpy),
        };
        args.arg(y).arg(x);
        match op {
            ElementwiseOp::Relu => {}
            ElementwiseOp::Add => {
                args.arg(b);
            }
            ElementwiseOp::Axpy => {
                args.arg(&alpha);
            }
        }
        args.arg(&n);
        // SAFETY: the arguments match the kernels' C signatures in KERNELS (float* y, then
        // const float* inputs or a float, then int n); every buffer holds at least n f32s and
        // belongs to this stream; the kernels guard i < n.
        unsafe { args.launch(LaunchConfig::for_num_elems(len)) }
            .map(drop)
            .map_err(|err| self.fail("cuLaunchKernel", err))
    }

    fn copy(&self, scratch: &mut Scratch, dir: CopyDir, bytes: u64) -> Result<(), StreamError> {
        let len = bytes.div_ceil(4) as usize;
        if len == 0 {
            return Ok(());
        }
        self.ensure_device(&mut scratch.a, len)?;
        self.ensure_host(scratch, len)?;
        let (Some(device), Some(host)) = (&mut scratch.a, &mut scratch.host) else {
            unreachable!("ensured above");
        };
        let sync_error = |err| self.fail("cuEventSynchronize", err);
        let copied = match dir {
            CopyDir::HostToDevice => {
                let host = &host.as_slice().map_err(sync_error)?[..len];
                self.stream.memcpy_htod(host, &mut device.slice_mut(..len))
            }
            CopyDir::DeviceToHost => {
                let host = &mut host.as_mut_slice().map_err(sync_error)?[..len];
                self.stream.memcpy_dtoh(&device.slice(..len), host)
            }
        };
        copied.map_err(|err| self.fail("cuMemcpyAsync", err))
    }

    /// A one-thread kernel that traps: a real sticky fault for `GpuWork::fail_with`.
    fn launch_trap(&self) -> Result<(), DriverError> {
        let config = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (1, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut args = self.stream.launch_builder(&self.shared.kernels.fault);
        // SAFETY: `fault` takes no arguments and touches no memory; it traps on purpose.
        unsafe { args.launch(config) }.map(drop)
    }

    /// `cuLaunchHostFunc` with a function that holds the stream at `gate`.
    fn launch_host_wait(&self, gate: &HostGate) -> Result<(), DriverError> {
        let data = Box::into_raw(Box::new(gate.clone()));
        // SAFETY: the stream is live; `pass_gate` makes no CUDA call; on success the driver
        // calls it exactly once with `data`, and it takes ownership of the box.
        let launched = unsafe {
            cu::stream::launch_host_function(self.stream.cu_stream(), pass_gate, data.cast())
        };
        if launched.is_err() {
            // SAFETY: the launch failed, so the driver never got `data`: it is still ours.
            drop(unsafe { Box::from_raw(data) });
        }
        launched
    }
}

/// The host function of a [`Kernel::HostWait`].
///
/// # Safety
/// `data` must come from `Box::into_raw(Box::new(HostGate))` and be passed exactly once.
unsafe extern "C" fn pass_gate(data: *mut c_void) {
    // SAFETY: guaranteed by the caller (`launch_host_wait`).
    let gate = unsafe { Box::from_raw(data.cast::<HostGate>()) };
    gate.pass();
}

impl Stream for CudaGpuStream {
    fn id(&self) -> StreamId {
        self.id
    }

    fn launch(&self, work: GpuWork) -> Result<(), StreamError> {
        let shared = &self.shared;
        shared.latch.refuse_if_poisoned()?;
        work.kernel
            .check(shared.info.memory_bytes)
            .map_err(|reason| StreamError::InvalidWork {
                stream: self.id,
                what: work.kernel.label(),
                reason,
            })?;
        shared
            .ctx
            .bind_to_thread()
            .map_err(|err| self.fail("cuCtxSetCurrent", err))?;
        let submitted = Instant::now();
        notify(
            shared.observer.as_ref(),
            self.id,
            work.op,
            StreamPhase::Submit,
            submitted,
        );
        let start = self.timing_event(sys::CUevent_flags::CU_EVENT_DEFAULT)?;
        // Blocking sync: the completion thread sleeps on it instead of spinning.
        let end = self.timing_event(sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC)?;
        start
            .record(&self.stream)
            .map_err(|err| self.fail("cuEventRecord", err))?;
        self.enqueue(&work)?;
        end.record(&self.stream)
            .map_err(|err| self.fail("cuEventRecord", err))?;
        let queued = self.pending.push(Pending { work, start, end });
        debug_assert!(queued.is_ok(), "a live stream's queue is open");
        Ok(())
    }

    fn record(&self, event: &Event) -> Result<(), StreamError> {
        self.shared.latch.refuse_if_poisoned()?;
        let event = self.cuda_event(event)?;
        if !Arc::ptr_eq(&event.shared, &self.shared) {
            return Err(StreamError::ForeignEvent {
                used_with: self.id.to_string(),
                what: "device",
            });
        }
        event
            .event
            .record(&self.stream)
            .map_err(|err| self.fail("cuEventRecord", err))?;
        event.generation.fetch_add(1, Ordering::Release);
        Ok(())
    }

    fn wait_event(&self, event: &Event) -> Result<(), StreamError> {
        self.shared.latch.refuse_if_poisoned()?;
        let event = self.cuda_event(event)?;
        self.stream
            .wait(&event.event)
            .map_err(|err| self.fail("cuStreamWaitEvent", err))
    }

    fn synchronize(&self) -> Result<(), StreamError> {
        // The completion thread first: it attributes a fault to the unit that hit it.
        self.pending.wait_idle();
        if let Err(err) = self.stream.synchronize() {
            self.shared.poison(&err);
        }
        self.shared.latch.report()
    }

    fn query(&self) -> bool {
        self.pending.is_idle()
    }
}

impl Drop for CudaGpuStream {
    /// Lets the completion thread finish (it waits for the GPU), then drops the cuBLAS handle
    /// here with the context bound, or leaks it on a poisoned device (its destroy would fail
    /// and cudarc unwraps it).
    fn drop(&mut self) {
        self.pending.close();
        if let Some(completer) = self.completer.take() {
            if completer.thread().id() != thread::current().id() {
                let _ = completer.join();
            }
        }
        let blas = self.resources.lock().blas.take();
        if self.shared.latch.current().is_some() {
            std::mem::forget(blas);
        } else {
            let _ = self.shared.ctx.bind_to_thread();
            drop(blas);
        }
    }
}

/// The completion thread: waits for each unit's end event in launch order, reports its
/// start and end, runs its callback.
fn run_completer(id: StreamId, shared: &CudaShared, pending: &WorkQueue<Pending>) {
    let _ = shared.ctx.bind_to_thread();
    let clock = &shared.clock;
    let observer = shared.observer.as_ref();
    while let Some(Pending {
        mut work,
        start,
        end,
    }) = pending.pop()
    {
        let result = match end.synchronize() {
            Ok(()) => {
                notify(observer, id, work.op, StreamPhase::Start, clock.at(&start));
                notify(
                    observer,
                    id,
                    work.op,
                    StreamPhase::End { ok: true },
                    clock.at(&end),
                );
                Ok(())
            }
            Err(err) => {
                let now = Instant::now();
                notify(observer, id, work.op, StreamPhase::Start, now);
                notify(observer, id, work.op, StreamPhase::End { ok: false }, now);
                Err(fault_of(id, shared, work.op, &err))
            }
        };
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work.complete(result)));
        pending.done();
    }
}

/// The error a unit whose end event failed completes with: its own fault if it is the first
/// the device saw, the poisoning otherwise.
fn fault_of(id: StreamId, shared: &CudaShared, op: OpTag, err: &DriverError) -> StreamError {
    let ours = Fault::on_stream(id, op, fault_text(err));
    let in_force = shared.latch.poison(ours.clone());
    if in_force == ours {
        StreamError::Fault(ours)
    } else {
        StreamError::Poisoned(in_force)
    }
}

/// A CUDA event with its record count.
struct CudaEventImpl {
    event: CudaEvent,
    shared: Arc<CudaShared>,
    generation: AtomicU64,
}

impl fmt::Debug for CudaEventImpl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaEvent")
            .field("device", &self.shared.info.ordinal)
            .field("generation", &self.generation())
            .finish()
    }
}

impl EventImpl for CudaEventImpl {
    fn query(&self) -> bool {
        self.event.try_is_complete().unwrap_or(true)
    }

    fn synchronize(&self) -> Result<(), StreamError> {
        if let Err(err) = self.event.synchronize() {
            self.shared.poison(&err);
        }
        self.shared.latch.report()
    }

    fn elapsed_ms(&self, end: &Event) -> Result<f32, StreamError> {
        let end = end
            .downcast::<CudaEventImpl>()
            .ok_or(StreamError::ForeignEvent {
                used_with: "a CUDA event".to_string(),
                what: "backend",
            })?;
        if self.generation() == 0 || end.generation() == 0 {
            return Err(StreamError::EventNotRecorded);
        }
        self.shared.latch.refuse_if_poisoned()?;
        self.event
            .elapsed_ms(&end.event)
            .map_err(driver("cuEventElapsedTime"))
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn probing_never_panics_and_explains_itself() {
        let probe = probe();
        match &probe.problem {
            Some(problem) => {
                assert!(!probe.usable());
                assert!(!problem.to_string().is_empty());
            }
            None => assert!(probe.usable() && !probe.devices.is_empty()),
        }
    }

    #[test]
    fn an_unusable_backend_refuses_to_open_with_the_reason() {
        let backend = CudaBackend::from_probe(CudaProbe {
            driver_version: None,
            devices: Vec::new(),
            problem: Some(CudaProblem::NoDriver),
        });
        let err = backend.open(0, None).err().unwrap();
        assert_eq!(
            err.to_string(),
            "CUDA is not available: no CUDA driver found (libcuda.so not loadable); use --gpus \
             sim:1 for a simulated GPU"
        );
    }

    #[test]
    fn driver_errors_keep_the_raw_code_and_name() {
        let err = driver("cuMemAlloc")(DriverError(sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY));
        assert_eq!(
            err.to_string(),
            "CUDA cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (2); the GPU is out of memory: use \
             smaller work or fewer streams"
        );
    }
}
