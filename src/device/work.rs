//! What a stream runs: [`GpuWork`], one unit of device work (a GEMM, an elementwise kernel, a
//! copy, or a host gate), tagged with the op it belongs to and an optional completion callback.
//!
//! A unit describes *sizes*, not buffers: the CUDA backend runs real kernels on per-stream
//! scratch buffers of those sizes, the simulated backend turns the sizes into modelled time.
//! Moving real tensors between ops is the engine's business, not the stream's.
#![forbid(unsafe_code)]

use crate::sync::Arc;
use std::fmt;
use std::time::Duration;

use super::stream::StreamError;
use crate::sync::{Condvar, Mutex};

/// The op a unit of work belongs to, as the profiler sees it.
///
/// `name` is an interned name id: the engine's `OpName::id()`, the id the profiler records.
/// `0` means unnamed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
pub struct OpTag {
    /// A process-unique op id (the engine's sequence number).
    pub id: u64,
    /// The interned op name id (0 = unnamed).
    pub name: u32,
}

impl OpTag {
    /// Op `id`, unnamed.
    pub const fn new(id: u64) -> Self {
        OpTag { id, name: 0 }
    }

    /// Op `id` with interned name `name`.
    pub const fn named(id: u64, name: u32) -> Self {
        OpTag { id, name }
    }
}

impl fmt::Display for OpTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "op {}", self.id)
    }
}

/// The elementwise kernels (f32, one thread per element).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ElementwiseOp {
    /// `y = max(x, 0)`: reads 1 array, writes 1.
    Relu,
    /// `y = a + b`: reads 2 arrays, writes 1.
    Add,
    /// `y = alpha * x + y`: reads 2 arrays, writes 1.
    Axpy,
}

impl ElementwiseOp {
    /// Arrays read per element.
    pub const fn inputs(self) -> u64 {
        match self {
            ElementwiseOp::Relu => 1,
            ElementwiseOp::Add | ElementwiseOp::Axpy => 2,
        }
    }
}

/// Which way a copy goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CopyDir {
    /// Host (pinned) memory to device memory.
    HostToDevice,
    /// Device memory to host (pinned) memory.
    DeviceToHost,
}

/// What a unit of work does.
#[derive(Clone, Debug)]
pub enum Kernel {
    /// Row-major f32 `C[m x n] = A[m x k] * B[k x n]`: `2 m n k` FLOPs (cuBLAS SGEMM on CUDA).
    Gemm {
        /// Rows of A and C.
        m: u32,
        /// Columns of B and C.
        n: u32,
        /// Columns of A, rows of B.
        k: u32,
    },
    /// An elementwise f32 kernel over `len` elements (NVRTC-compiled on CUDA).
    Elementwise {
        /// Which kernel.
        op: ElementwiseOp,
        /// Elements.
        len: u32,
    },
    /// A copy of `bytes` between pinned host memory and the device.
    Copy {
        /// Direction.
        dir: CopyDir,
        /// Bytes (rounded up to whole f32s on CUDA).
        bytes: u64,
    },
    /// A host function in the stream (CUDA's `cuLaunchHostFunc`) that holds the stream until
    /// the gate opens. Tests and demos use it to hold a stream without relying on timing.
    HostWait(HostGate),
}

impl Kernel {
    /// Floating-point operations (GEMM: `2 m n k`; elementwise: one per element).
    pub fn flops(&self) -> u64 {
        match *self {
            Kernel::Gemm { m, n, k } => 2 * u64::from(m) * u64::from(n) * u64::from(k),
            Kernel::Elementwise { len, .. } => u64::from(len),
            Kernel::Copy { .. } | Kernel::HostWait(_) => 0,
        }
    }

    /// Bytes of device memory the kernel reads and writes (f32 operands).
    pub(crate) fn memory_bytes(&self) -> u64 {
        match *self {
            Kernel::Gemm { m, n, k } => {
                let (m, n, k) = (u64::from(m), u64::from(n), u64::from(k));
                4 * (m * k + k * n + m * n)
            }
            Kernel::Elementwise { op, len } => 4 * u64::from(len) * (op.inputs() + 1),
            Kernel::Copy { bytes, .. } => bytes,
            Kernel::HostWait(_) => 0,
        }
    }

    /// Bytes moved between host and device (copies only).
    pub(crate) fn transfer_bytes(&self) -> u64 {
        match *self {
            Kernel::Copy { bytes, .. } => bytes,
            _ => 0,
        }
    }

    /// Why a device with `device_memory` bytes cannot run this at all, if it cannot: a
    /// dimension over what cuBLAS and the kernels take (`i32::MAX`), or more memory than the
    /// device has. Such work is refused at launch, like CUDA's launch-time errors.
    pub fn check(&self, device_memory: u64) -> Result<(), String> {
        let dims: &[u32] = match self {
            Kernel::Gemm { m, n, k } => &[*m, *n, *k],
            Kernel::Elementwise { len, .. } => &[*len],
            Kernel::Copy { .. } | Kernel::HostWait(_) => &[],
        };
        if let Some(too_big) = dims.iter().find(|&&dim| dim > i32::MAX as u32) {
            return Err(format!(
                "dimension {too_big} is over {}, the most cuBLAS and the kernels take",
                i32::MAX
            ));
        }
        let needed = self.memory_bytes();
        if needed > device_memory {
            return Err(format!(
                "it needs {needed} bytes of device memory and the device has {device_memory}"
            ));
        }
        Ok(())
    }

    /// A short name for labels and errors: `gemm 64x64x64`, `add[4096]`, `h2d 1048576 B`.
    pub fn label(&self) -> String {
        match self {
            Kernel::Gemm { m, n, k } => format!("gemm {m}x{n}x{k}"),
            Kernel::Elementwise { op, len } => format!("{op:?}[{len}]").to_lowercase(),
            Kernel::Copy {
                dir: CopyDir::HostToDevice,
                bytes,
            } => format!("h2d {bytes} B"),
            Kernel::Copy {
                dir: CopyDir::DeviceToHost,
                bytes,
            } => format!("d2h {bytes} B"),
            Kernel::HostWait(_) => "host wait".to_string(),
        }
    }
}

/// Called once when a unit of work has finished on its stream: `Ok` when it ran, the
/// [`StreamError`] when it faulted or was skipped on a poisoned device.
pub(crate) type OnComplete = Box<dyn FnOnce(Result<(), StreamError>) + Send>;

/// One unit of device work: a [`Kernel`], the op it belongs to, and an optional callback run
/// when it completes (the engine marks its op complete there, as MXNet's `on_complete` after a
/// stream sync, but without a host sync).
///
/// ```
/// use enginetop::device::work::{GpuWork, OpTag};
///
/// let work = GpuWork::gemm(256, 256, 256)
///     .op(OpTag::new(7))
///     .on_complete(|result| assert!(result.is_ok()));
/// assert_eq!(work.kernel.flops(), 2 * 256 * 256 * 256);
/// ```
pub struct GpuWork {
    /// What to run.
    pub kernel: Kernel,
    /// The op, for the profiler and errors.
    pub op: OpTag,
    /// Run when the work completes (on the stream's executor or completion thread: keep it
    /// short, it holds up the callbacks behind it).
    pub on_complete: Option<OnComplete>,
    /// When set, the work faults on the device with this message instead of completing (the
    /// simulated backend faults as modelled; CUDA launches a kernel that traps).
    pub fault: Option<Arc<str>>,
}

impl GpuWork {
    /// A unit running `kernel`, untagged, with no callback.
    pub fn new(kernel: Kernel) -> Self {
        GpuWork {
            kernel,
            op: OpTag::default(),
            on_complete: None,
            fault: None,
        }
    }

    /// Row-major f32 GEMM `[m x k] * [k x n]`.
    pub fn gemm(m: u32, n: u32, k: u32) -> Self {
        Self::new(Kernel::Gemm { m, n, k })
    }

    /// Elementwise `op` over `len` f32s.
    pub fn elementwise(op: ElementwiseOp, len: u32) -> Self {
        Self::new(Kernel::Elementwise { op, len })
    }

    /// A copy of `bytes` in direction `dir`.
    pub fn copy(dir: CopyDir, bytes: u64) -> Self {
        Self::new(Kernel::Copy { dir, bytes })
    }

    /// A host function that holds the stream until `gate` opens.
    pub fn host_wait(gate: &HostGate) -> Self {
        Self::new(Kernel::HostWait(gate.clone()))
    }

    /// Tags the work with its op.
    pub fn op(mut self, op: OpTag) -> Self {
        self.op = op;
        self
    }

    /// Runs `callback` when the work completes.
    pub fn on_complete(
        mut self,
        callback: impl FnOnce(Result<(), StreamError>) + Send + 'static,
    ) -> Self {
        self.on_complete = Some(Box::new(callback));
        self
    }

    /// Makes the work fault on the device (an injected sticky error; see the stream docs).
    pub fn fail_with(mut self, message: impl Into<Arc<str>>) -> Self {
        self.fault = Some(message.into());
        self
    }

    /// Runs the callback, if any, with `result`.
    pub(crate) fn complete(&mut self, result: Result<(), StreamError>) {
        if let Some(callback) = self.on_complete.take() {
            callback(result);
        }
    }
}

impl fmt::Debug for GpuWork {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuWork")
            .field("kernel", &self.kernel)
            .field("op", &self.op)
            .field("on_complete", &self.on_complete.is_some())
            .field("fault", &self.fault)
            .finish()
    }
}

/// A gate a [`Kernel::HostWait`] holds its stream at until [`HostGate::open`] is called.
///
/// `reached` tells the host that the stream got to the gate (every item before it on the
/// stream has finished), which lets a test order things without sleeping. A stream held at a
/// closed gate cannot be synchronized or dropped until someone opens it. On CUDA the gate is
/// a host function, which CUDA forbids to wait for other CUDA work: open it from the host,
/// never from the callback of work that needs the stream it holds.
///
/// ```
/// use enginetop::device::work::HostGate;
///
/// let gate = HostGate::new();
/// assert!(!gate.is_reached());
/// gate.open();
/// assert!(gate.is_open());
/// ```
#[derive(Clone, Debug, Default)]
pub struct HostGate(Arc<GateState>);

#[derive(Debug, Default)]
struct GateState {
    flags: Mutex<GateFlags>,
    changed: Condvar,
}

#[derive(Clone, Copy, Debug, Default)]
struct GateFlags {
    reached: bool,
    open: bool,
}

impl HostGate {
    /// A closed gate.
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens the gate: the stream holding at it (now or later) goes on.
    pub fn open(&self) {
        self.0.flags.lock().open = true;
        self.0.changed.notify_all();
    }

    /// Whether the gate is open.
    pub fn is_open(&self) -> bool {
        self.0.flags.lock().open
    }

    /// Whether a stream has reached the gate.
    pub fn is_reached(&self) -> bool {
        self.0.flags.lock().reached
    }

    /// Waits until a stream reaches the gate, at most `timeout`; returns whether it did.
    pub fn wait_reached(&self, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        let mut flags = self.0.flags.lock();
        while !flags.reached {
            let now = std::time::Instant::now();
            if now >= deadline {
                return false;
            }
            flags = self.0.changed.wait_timeout(flags, deadline - now);
        }
        true
    }

    /// Called by the stream: marks the gate reached, then blocks until it is open.
    pub(crate) fn pass(&self) {
        let mut flags = self.0.flags.lock();
        flags.reached = true;
        self.0.changed.notify_all();
        while !flags.open {
            flags = self.0.changed.wait(flags);
        }
    }
}
