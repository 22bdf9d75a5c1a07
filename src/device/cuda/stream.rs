//! A CUDA stream: launch enqueues the unit between two timing events; the stream's
//! completion thread waits for each unit's end event in launch order, reports its start and
//! end, and runs its callback (see the [parent module](super) for the whole picture).

use std::ffi::c_void;
// std's `Arc`: cudarc hands out its contexts and streams as `std::sync::Arc`s.
use std::sync::Arc;
use std::time::Instant;

use cudarc::cublas::{sys as blas_sys, CudaBlas, Gemm, GemmConfig};
use cudarc::driver::{
    result as cu, sys, CudaEvent, CudaSlice, CudaStream, DriverError, LaunchConfig,
    PinnedHostSlice, PushKernelArg,
};

use super::event::CudaEventImpl;
use super::{driver, fault_text, is_sticky, CudaShared};
use crate::device::queue::WorkQueue;
use crate::device::stream::{
    notify, Event, Fault, Stream, StreamError, StreamId, StreamKind, StreamPhase,
};
use crate::device::work::{CopyDir, ElementwiseOp, GpuWork, HostGate, Kernel, OpTag};
use crate::sync::{thread, Mutex, Ordering};

/// A launched unit waiting for its end event, on the completion thread's queue.
pub(super) struct Pending {
    work: GpuWork,
    start: CudaEvent,
    end: CudaEvent,
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
pub(super) struct CudaGpuStream {
    id: StreamId,
    resources: Mutex<Resources>,
    stream: Arc<CudaStream>,
    pub(super) pending: Arc<WorkQueue<Pending>>,
    completer: Option<thread::JoinHandle<()>>,
    shared: Arc<CudaShared>,
}

impl CudaGpuStream {
    pub(super) fn start(id: StreamId, shared: Arc<CudaShared>) -> Result<Self, StreamError> {
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
