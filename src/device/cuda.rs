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

mod event;
mod stream;

// std's `Arc`: handles to trait objects, which loom's `Arc` cannot coerce to `dyn`.
use std::sync::Arc;

use cudarc::driver::{result as cu, sys, CudaContext, CudaFunction, DriverError};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileError, CompileOptions};

use self::event::{CudaEventImpl, DeviceClock};
use self::stream::{CudaGpuStream, Pending};
use super::queue::WorkQueue;
use super::stream::{
    BackendKind, Event, Fault, FaultLatch, GpuBackend, GpuDevice, GpuInfo, Stream, StreamError,
    StreamKind, StreamObserver, StreamRegistry,
};
use crate::sync::AtomicU64;

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
    /// Every stream's queue, for [`GpuDevice::synchronize`], and the next index per role.
    streams: StreamRegistry<WorkQueue<Pending>>,
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
            streams: StreamRegistry::new(),
        })
    }
}

impl GpuDevice for CudaDevice {
    fn info(&self) -> &GpuInfo {
        &self.shared.info
    }

    fn new_stream(&self, kind: StreamKind) -> Result<Box<dyn Stream>, StreamError> {
        self.shared.latch.refuse_if_poisoned()?;
        let id = self.streams.next_id(self.shared.info.ordinal, kind);
        let stream = CudaGpuStream::start(id, Arc::clone(&self.shared))?;
        self.streams.register(&stream.pending);
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
        for queue in self.streams.live() {
            queue.wait_idle();
        }
        if let Err(err) = self.shared.ctx.synchronize() {
            self.shared.poison(&err);
        }
        self.shared.latch.report()
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
