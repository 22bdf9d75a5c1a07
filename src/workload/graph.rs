//! [`Graph`]: a loaded workload, flat and validated, ready for a driver to push.
//!
//! Tensors and ops are in vectors, referred to by index ([`TensorId`], [`OpId`]). Ops are in
//! push order: the `setup` ops (run once), then the `iteration` ops (run once per iteration).
//! Every op's tensors exist, fit its kernel's shape rule and live on its device (copies
//! bridge devices), and its property suits its device.
#![forbid(unsafe_code)]

use std::ops::Range;

use super::device::{is_gpu, Dtype, Init};
use super::expr::Value;
use crate::engine::{Context, FnProperty};
use crate::kernels::{numel, KernelKind, KernelParams};

/// Index of a tensor in [`Graph::tensors`] (one engine variable per tensor).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TensorId(pub u32);

/// Index of an op in [`Graph::ops`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(pub u32);

impl TensorId {
    /// As an index into [`Graph::tensors`].
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl OpId {
    /// As an index into [`Graph::ops`].
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A named tensor: one engine variable and its buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorDecl {
    /// Unique name.
    pub name: String,
    /// Dimensions, each >= 1 (empty for a scalar).
    pub shape: Vec<usize>,
    /// Element type.
    pub dtype: Dtype,
    /// Where its buffer lives.
    pub device: Context,
    /// Contents before the first op.
    pub init: Init,
}

impl TensorDecl {
    /// Number of elements.
    pub fn elements(&self) -> u64 {
        numel(&self.shape).unwrap_or(u64::MAX)
    }

    /// Its size at its declared dtype, in bytes.
    pub fn bytes(&self) -> u64 {
        self.elements().saturating_mul(self.dtype.size_bytes())
    }

    /// The bytes a run holds for it: every tensor is stored as `f32`, whatever its dtype.
    pub(crate) fn held_bytes(&self) -> u64 {
        held_bytes(self.elements())
    }
}

/// Bytes a run holds per element: it stores every tensor as `f32`.
pub(crate) const HELD_BYTES_PER_ELEMENT: u64 = std::mem::size_of::<f32>() as u64;

/// The bytes a run holds for `elements` elements of any dtype.
pub(crate) fn held_bytes(elements: u64) -> u64 {
    elements.saturating_mul(HELD_BYTES_PER_ELEMENT)
}

/// `bytes` for people: `512 B`, `3.0 KiB`, `1.5 MiB`, `22.4 GiB`.
pub(crate) fn bytes_text(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// One op to push: its kernel, operands, dependencies, device, property and priority.
#[derive(Clone, Debug, PartialEq)]
pub struct OpDecl {
    /// Unique name (the profiler's op name).
    pub name: String,
    /// What runs.
    pub kernel: KernelKind,
    /// Inputs the kernel reads, in its operand order (may repeat; may include a written one).
    pub reads: Vec<TensorId>,
    /// Outputs the kernel writes, in its operand order (distinct).
    pub writes: Vec<TensorId>,
    /// Read dependencies the kernel does not touch.
    pub also_reads: Vec<TensorId>,
    /// Write dependencies the kernel does not touch.
    pub also_writes: Vec<TensorId>,
    /// Where it runs.
    pub device: Context,
    /// Which queue it goes to.
    pub property: FnProperty,
    /// Priority (higher first, in priority queues).
    pub priority: i32,
    /// Kernel parameters, defaults filled in.
    pub params: KernelParams,
}

impl OpDecl {
    /// The engine's mutable vars: `writes` then `also_writes`, without repeats.
    pub fn mutable_vars(&self) -> Vec<TensorId> {
        let mut vars = Vec::with_capacity(self.writes.len() + self.also_writes.len());
        for id in self.writes.iter().chain(&self.also_writes) {
            if !vars.contains(id) {
                vars.push(*id);
            }
        }
        vars
    }

    /// The engine's const vars: `reads` then `also_reads`, without repeats and without the
    /// mutable ones (MXNet drops reads of a var the op also writes).
    pub fn const_vars(&self) -> Vec<TensorId> {
        let mutable = self.mutable_vars();
        let mut vars = Vec::with_capacity(self.reads.len() + self.also_reads.len());
        for id in self.reads.iter().chain(&self.also_reads) {
            if !vars.contains(id) && !mutable.contains(id) {
                vars.push(*id);
            }
        }
        vars
    }
}

/// A loaded workload. Build one with [`super::load_str`] or [`super::load_spec`].
///
/// ```
/// use enginetop::workload::{load_spec, Overrides};
///
/// let graph = load_spec("chain", &Overrides::default()).unwrap();
/// for op in graph.iteration_ops() {
///     let _reads = op.const_vars(); // push(op.kernel, op.const_vars(), op.mutable_vars(), ...)
/// }
/// assert!(graph.iteration_flops() > 0);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Graph {
    /// Display name.
    pub name: String,
    /// One line.
    pub description: String,
    /// The parameters as used (defaults with `--set` applied), sorted by name.
    pub params: Vec<(String, Value)>,
    /// Every tensor.
    pub tensors: Vec<TensorDecl>,
    /// Every op, in push order.
    pub ops: Vec<OpDecl>,
    /// The ops run once before the first iteration (a prefix of `ops`).
    pub setup: Range<usize>,
    /// The ops of one iteration (the rest of `ops`), repeated by the driver.
    pub iteration: Range<usize>,
}

impl Graph {
    /// The tensor `id` names.
    pub fn tensor(&self, id: TensorId) -> &TensorDecl {
        &self.tensors[id.index()]
    }

    /// The op `id` names.
    pub fn op(&self, id: OpId) -> &OpDecl {
        &self.ops[id.index()]
    }

    /// The tensor called `name`.
    pub fn tensor_id(&self, name: &str) -> Option<TensorId> {
        self.tensors
            .iter()
            .position(|tensor| tensor.name == name)
            .map(|index| TensorId(index as u32))
    }

    /// Ops run once, in push order.
    pub fn setup_ops(&self) -> &[OpDecl] {
        &self.ops[self.setup.clone()]
    }

    /// Ops of one iteration, in push order.
    pub fn iteration_ops(&self) -> &[OpDecl] {
        &self.ops[self.iteration.clone()]
    }

    /// Estimated floating-point operations of one run of `op` (the kernel's own count, `KernelKind::flops`).
    pub fn op_flops(&self, op: &OpDecl) -> u64 {
        let shapes = |ids: &[TensorId]| -> Vec<&[usize]> {
            ids.iter()
                .map(|id| self.tensor(*id).shape.as_slice())
                .collect()
        };
        op.kernel
            .flops(&shapes(&op.reads), &shapes(&op.writes), &op.params)
    }

    /// Estimated floating-point operations of one iteration.
    pub fn iteration_flops(&self) -> u64 {
        self.iteration_ops()
            .iter()
            .fold(0u64, |sum, op| sum.saturating_add(self.op_flops(op)))
    }

    /// Bytes of all tensor buffers as a run holds them (`f32`, whatever the dtypes).
    pub fn tensor_bytes(&self) -> u64 {
        self.tensors
            .iter()
            .fold(0u64, |sum, tensor| sum.saturating_add(tensor.held_bytes()))
    }

    /// Whether any tensor or op is on a GPU.
    pub fn uses_gpu(&self) -> bool {
        self.tensors.iter().any(|tensor| is_gpu(tensor.device))
            || self.ops.iter().any(|op| is_gpu(op.device))
    }
}

#[cfg(test)]
mod bytes_tests {
    use super::bytes_text;

    #[test]
    fn bytes_read_in_binary_units() {
        assert_eq!(bytes_text(512), "512 B");
        assert_eq!(bytes_text(3 << 10), "3.0 KiB");
        assert_eq!(bytes_text(3 << 19), "1.5 MiB");
        assert_eq!(bytes_text(64 << 30), "64.0 GiB");
        assert_eq!(bytes_text(u64::MAX), "16777216.0 TiB");
    }
}
