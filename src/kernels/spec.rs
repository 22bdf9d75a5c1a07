//! What the loader checks of a kernel before any run, from shapes alone: its operands, its
//! parameters, its shape rule and its FLOP estimate. Each kernel states these once, in a
//! [`KernelSpec`] ([`rules`]) that its [`KernelKind`] registration points to; the methods
//! on [`KernelKind`] read that table.
#![forbid(unsafe_code)]

use std::fmt;

use super::kind::KernelKind;

pub(crate) mod rules;

/// A shape check: reads, writes and parameters in; `Err` says which tensors disagree.
pub(crate) type ShapeCheck = fn(&[Operand], &[Operand], &KernelParams) -> Result<(), String>;

/// A FLOP count from the read and written shapes and the parameters.
pub(crate) type FlopCount = fn(&[&[usize]], &[&[usize]], &KernelParams) -> u64;

/// One kernel's facts: everything the loader and the FLOP estimate need, no code per kernel
/// elsewhere.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KernelSpec {
    /// The tensors `reads` holds, in order.
    pub(crate) reads: Operands,
    /// The tensors `writes` holds, in order.
    pub(crate) writes: Operands,
    /// Its parameters.
    pub(crate) params: &'static [ParamSpec],
    /// The shape rule, as the error message states it.
    pub(crate) shape_rule: &'static str,
    /// Checks the operands' shapes (arity already checked).
    pub(crate) check: ShapeCheck,
    /// Floating-point operations of one run, from the read and written shapes.
    pub(crate) flops: FlopCount,
}

/// How many tensors a kernel takes in `reads` or `writes`.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Operands {
    /// Exactly these, in this order.
    Exactly(&'static [&'static str]),
    /// At least this many.
    AtLeast(usize, &'static str),
}

impl Operands {
    /// Whether `count` tensors fit.
    pub(crate) fn accepts(self, count: usize) -> bool {
        match self {
            Operands::Exactly(names) => names.len() == count,
            Operands::AtLeast(min, _) => count >= min,
        }
    }

    /// What is expected, in words: `2 (a [m,k], b [k,n])`.
    pub(crate) fn describe(self) -> String {
        match self {
            Operands::Exactly(names) => format!("{} ({})", names.len(), names.join(", ")),
            Operands::AtLeast(min, what) => format!("at least {min} ({what})"),
        }
    }
}

/// The type and range of a kernel parameter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum ParamKind {
    /// An integer from `min` to `max`.
    Int {
        /// Smallest accepted value.
        min: i64,
        /// Largest accepted value (`i64::MAX`: no limit).
        max: i64,
    },
    /// A float greater than zero.
    PositiveFloat,
    /// A switch: `0`/`1` or `false`/`true` (also as strings, `"1"`, `"true"`), stored as 0 or 1.
    Flag,
}

/// One kernel parameter: name, type, and default (`None` = required).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ParamSpec {
    /// The key in an op's `params`.
    pub(crate) name: &'static str,
    /// Type and range.
    pub(crate) kind: ParamKind,
    /// Used when the op does not set it; `None` makes it required.
    pub(crate) default: Option<ParamValue>,
}

/// A kernel parameter's value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ParamValue {
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Int(value) => write!(f, "{value}"),
            ParamValue::Float(value) => write!(f, "{value}"),
        }
    }
}

/// A tensor handed to a shape rule: its name (for messages) and shape.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Operand<'a> {
    /// Tensor name.
    pub(crate) name: &'a str,
    /// Its shape.
    pub(crate) shape: &'a [usize],
}

impl fmt::Display for Operand<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.name, shape_text(self.shape))
    }
}

/// `[2,16,56,56]`.
pub(crate) fn shape_text(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    format!("[{}]", dims.join(","))
}

/// Named kernel parameters of one op, every default filled in.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KernelParams(pub Vec<(&'static str, ParamValue)>);

impl KernelParams {
    /// The value of `name`, if the kernel has that parameter.
    pub fn get(&self, name: &str) -> Option<ParamValue> {
        self.0
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| *value)
    }

    /// An integer parameter (`stride`, `pad`, `size`, `us`), or `fallback`.
    pub fn int(&self, name: &str, fallback: i64) -> i64 {
        match self.get(name) {
            Some(ParamValue::Int(value)) => value,
            _ => fallback,
        }
    }

    /// A float parameter (`lr`), or `fallback`.
    pub fn float(&self, name: &str, fallback: f64) -> f64 {
        match self.get(name) {
            Some(ParamValue::Float(value)) => value,
            Some(ParamValue::Int(value)) => value as f64,
            None => fallback,
        }
    }
}

impl KernelKind {
    /// The tensors `reads` holds, in order.
    pub(crate) fn reads(self) -> Operands {
        self.spec().reads
    }

    /// The tensors `writes` holds, in order.
    pub(crate) fn writes(self) -> Operands {
        self.spec().writes
    }

    /// Its parameters.
    pub(crate) fn params(self) -> &'static [ParamSpec] {
        self.spec().params
    }

    /// The shape rule, as the error message states it.
    pub(crate) fn shape_rule(self) -> &'static str {
        self.spec().shape_rule
    }

    /// Checks the shapes of an op's operands (arity already checked); the error says which
    /// tensors disagree and how.
    pub(crate) fn check_shapes(
        self,
        reads: &[Operand],
        writes: &[Operand],
        params: &KernelParams,
    ) -> Result<(), String> {
        (self.spec().check)(reads, writes, params)
    }

    /// Floating-point operations of one run, from the shapes (saturating): what the kernels
    /// count when they run (`tests/workload_run.rs` checks every shipped workload), so
    /// `enginetop workloads` and a run's GFLOP per iteration agree. The one place the
    /// count lives before a run.
    pub(crate) fn flops(
        self,
        reads: &[&[usize]],
        writes: &[&[usize]],
        params: &KernelParams,
    ) -> u64 {
        (self.spec().flops)(reads, writes, params)
    }

    /// For a parameter this kernel does not take but a kernel of its own provides (the fused
    /// relu of MXNet's and oneDNN's batch norms), that kernel's name.
    pub(crate) fn fused_instead(self, param: &str) -> Option<&'static str> {
        match (self, param) {
            (KernelKind::BatchNorm, "relu") => Some("batch_norm_relu"),
            (KernelKind::BatchNormGrad, "relu") => Some("batch_norm_relu_grad"),
            _ => None,
        }
    }

    /// Whether it is a host/device copy.
    pub(crate) fn is_copy(self) -> bool {
        matches!(self, KernelKind::CopyH2d | KernelKind::CopyD2h)
    }

    /// Whether its tensors must share one dtype (all but the engine-overhead kernels).
    pub(crate) fn needs_one_dtype(self) -> bool {
        !matches!(self, KernelKind::Fold | KernelKind::SleepUs)
    }
}

/// Elements in a tensor of `shape`, `None` on overflow.
pub(crate) fn numel(shape: &[usize]) -> Option<u64> {
    shape
        .iter()
        .try_fold(1u64, |acc, dim| acc.checked_mul(*dim as u64))
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn op<'a>(name: &'a str, shape: &'a [usize]) -> Operand<'a> {
        Operand { name, shape }
    }

    fn conv_params(stride: i64, pad: i64) -> KernelParams {
        KernelParams(vec![
            ("stride", ParamValue::Int(stride)),
            ("pad", ParamValue::Int(pad)),
        ])
    }

    #[test]
    fn conv_output_shape_follows_stride_and_pad() {
        let x = op("x", &[2, 16, 56, 56]);
        let w = op("w", &[32, 16, 3, 3]);
        let same = KernelKind::Conv2d.check_shapes(
            &[x, w],
            &[op("y", &[2, 32, 56, 56])],
            &conv_params(1, 1),
        );
        assert_eq!(same, Ok(()));
        let strided = KernelKind::Conv2d.check_shapes(
            &[x, w],
            &[op("y", &[2, 32, 28, 28])],
            &conv_params(2, 1),
        );
        assert_eq!(strided, Ok(()));
        let err = KernelKind::Conv2d
            .check_shapes(&[x, w], &[op("y", &[2, 32, 56, 56])], &conv_params(2, 1))
            .unwrap_err();
        assert!(err.contains("should be [2,32,28,28]"), "{err}");
        let flops =
            KernelKind::Conv2d.flops(&[x.shape, w.shape], &[&[2, 32, 56, 56]], &conv_params(1, 1));
        assert_eq!(flops, 2 * 2 * 32 * 56 * 56 * 16 * 9);
    }

    #[test]
    fn mismatches_name_both_tensors() {
        let err = KernelKind::Gemm
            .check_shapes(
                &[op("a", &[4, 8]), op("b", &[9, 2])],
                &[op("c", &[4, 2])],
                &KernelParams::default(),
            )
            .unwrap_err();
        assert_eq!(
            err,
            "a a [4,8] has k = 8 but b b [9,2] has k = 9 (transpose_a = 0, transpose_b = 0)"
        );
        let transposed = KernelParams(vec![
            ("transpose_a", ParamValue::Int(0)),
            ("transpose_b", ParamValue::Int(1)),
        ]);
        let ok = KernelKind::Gemm.check_shapes(
            &[op("q", &[4, 8]), op("k", &[6, 8])],
            &[op("s", &[4, 6])],
            &transposed,
        );
        assert_eq!(ok, Ok(()));
        let err = KernelKind::BatchNorm
            .check_shapes(
                &[op("x", &[2, 8, 4, 4]), op("bn", &[2, 4])],
                &[op("y", &[2, 8, 4, 4])],
                &KernelParams::default(),
            )
            .unwrap_err();
        assert!(err.contains("should be [2,8]"), "{err}");
    }

    /// The fused residual kernels check their third operand and count the FLOPs of their
    /// parts (batch_norm 5 + add 1 + relu 1; relu_grad 1 + add 1 a value).
    #[test]
    fn fused_residual_kernels_check_the_residual_and_the_addend() {
        let none = KernelParams::default();
        let (x, bn) = (op("y3", &[2, 8, 4, 4]), op("bn3", &[2, 8]));
        let out = op("out", &[2, 8, 4, 4]);
        let fused = KernelKind::BatchNormAddRelu;
        assert_eq!(fused.check_shapes(&[x, bn, x], &[out], &none), Ok(()));
        let short = op("short", &[2, 8, 4, 2]);
        let err = fused
            .check_shapes(&[x, bn, short], &[out], &none)
            .unwrap_err();
        assert_eq!(err, "y3 [2,8,4,4] and short [2,8,4,2] differ");
        let err = fused
            .check_shapes(&[x, op("bn3", &[2, 4]), x], &[out], &none)
            .unwrap_err();
        assert!(err.contains("should be [2,8]"), "{err}");
        assert_eq!(
            fused.flops(&[x.shape, bn.shape, x.shape], &[out.shape], &none),
            7 * 256
        );

        let grad = KernelKind::ReluGradAdd;
        assert_eq!(grad.check_shapes(&[x, out, x], &[out], &none), Ok(()));
        let err = grad
            .check_shapes(&[x, out, short], &[out], &none)
            .unwrap_err();
        assert_eq!(err, "y3 [2,8,4,4] and short [2,8,4,2] differ");
        assert_eq!(
            grad.flops(&[x.shape, x.shape, x.shape], &[out.shape], &none),
            2 * 256
        );
        assert!(fused.reads().accepts(3) && !fused.reads().accepts(2));
        assert!(grad.reads().accepts(3) && !grad.reads().accepts(2));
    }

    #[test]
    fn pool_window_larger_than_input_is_an_error_not_a_panic() {
        let params = KernelParams(vec![
            ("size", ParamValue::Int(9)),
            ("stride", ParamValue::Int(1)),
            ("pad", ParamValue::Int(0)),
        ]);
        let err = KernelKind::MaxPool
            .check_shapes(
                &[op("x", &[1, 1, 4, 4])],
                &[op("y", &[1, 1, 1, 1])],
                &params,
            )
            .unwrap_err();
        assert!(err.contains("does not fit"), "{err}");
    }
}
