//! Kernels a workload may name: THE one list ([`KernelKind`]), and per kernel its operands,
//! its parameters, its shape rule and its FLOP estimate. When the kernels module lands, its
//! `KernelKind` replaces this enum and the rules move next to the kernels.
#![forbid(unsafe_code)]

use std::fmt;

use super::device::vocabulary;

vocabulary! {
    /// The kernels a workload file may name.
    KernelKind {
        /// Matrix product: `a [m,k] x b [k,n] -> c [m,n]`.
        Gemm = "gemm",
        /// 2-D convolution, NCHW.
        Conv2d = "conv2d",
        /// Batch normalisation over N and the spatial dims, per channel.
        BatchNorm = "batch_norm",
        /// `relu(batch_norm(x))` in one pass (batch norm with a fused activation).
        BatchNormRelu = "batch_norm_relu",
        /// `relu(batch_norm(x) + residual)` in one pass: a residual block's last batch norm,
        /// its residual add and its relu.
        BatchNormAddRelu = "batch_norm_add_relu",
        /// `max(x, 0)`.
        Relu = "relu",
        /// Elementwise sum of two tensors.
        Add = "add",
        /// Max pooling, NCHW.
        MaxPool = "max_pool",
        /// Average pooling, NCHW.
        AvgPool = "avg_pool",
        /// Softmax over the last dimension.
        Softmax = "softmax",
        /// Layer normalisation over the last dimension.
        LayerNorm = "layer_norm",
        /// `weight -= lr * grad`, in place.
        Sgd = "sgd",
        /// Gradient of conv2d with respect to its input.
        Conv2dGradInput = "conv2d_grad_input",
        /// Gradient of conv2d with respect to its weight.
        Conv2dGradWeight = "conv2d_grad_weight",
        /// Gradient of training batch norm: input gradient and scale/shift gradients.
        BatchNormGrad = "batch_norm_grad",
        /// Gradient of `batch_norm_relu` (and of `batch_norm_add_relu` with respect to its
        /// input): the relu's gradient applied to the incoming one as it is read (the forward
        /// output is the mask), then batch_norm_grad's.
        BatchNormReluGrad = "batch_norm_relu_grad",
        /// Gradient of relu.
        ReluGrad = "relu_grad",
        /// `addend + relu_grad(grad_output, forward)` in one pass: where a residual block's
        /// shortcut gradient (the masked one) meets its main path's.
        ReluGradAdd = "relu_grad_add",
        /// Gradient of max pooling.
        MaxPoolGrad = "max_pool_grad",
        /// Gradient of average pooling.
        AvgPoolGrad = "avg_pool_grad",
        /// Gradient of softmax cross-entropy with respect to the logits.
        SoftmaxXentGrad = "softmax_xent_grad",
        /// Host-to-device copy (runs on the GPU's copy queue).
        CopyH2d = "copy_h2d",
        /// Device-to-host copy (runs on the GPU's copy queue).
        CopyD2h = "copy_d2h",
        /// MXNet's RandSumExpr step: `out = sum(terms) / (terms + 1)`, then sleep `us`.
        SumExpr = "sum_expr",
        /// A cheap hash fold of the inputs into the output (engine-overhead workloads).
        Fold = "fold",
        /// Sleeps `us` microseconds (IO-like stages).
        SleepUs = "sleep_us",
    }
}

/// How many tensors a kernel takes in `reads` or `writes`.
#[derive(Clone, Copy, Debug)]
pub enum Operands {
    /// Exactly these, in this order.
    Exactly(&'static [&'static str]),
    /// At least this many.
    AtLeast(usize, &'static str),
}

impl Operands {
    /// Whether `count` tensors fit.
    pub fn accepts(self, count: usize) -> bool {
        match self {
            Operands::Exactly(names) => names.len() == count,
            Operands::AtLeast(min, _) => count >= min,
        }
    }

    /// What is expected, in words: `2 (a [m,k], b [k,n])`.
    pub fn describe(self) -> String {
        match self {
            Operands::Exactly(names) => format!("{} ({})", names.len(), names.join(", ")),
            Operands::AtLeast(min, what) => format!("at least {min} ({what})"),
        }
    }
}

/// The type and range of a kernel parameter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ParamKind {
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
pub struct ParamSpec {
    /// The key in an op's `params`.
    pub name: &'static str,
    /// Type and range.
    pub kind: ParamKind,
    /// Used when the op does not set it; `None` makes it required.
    pub default: Option<ParamValue>,
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

const fn int(name: &'static str, min: i64, default: Option<i64>) -> ParamSpec {
    int_up_to(name, min, i64::MAX, default)
}

const fn int_up_to(name: &'static str, min: i64, max: i64, default: Option<i64>) -> ParamSpec {
    ParamSpec {
        name,
        kind: ParamKind::Int { min, max },
        default: match default {
            Some(value) => Some(ParamValue::Int(value)),
            None => None,
        },
    }
}

const GEMM_PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "transpose_a",
        kind: ParamKind::Flag,
        default: Some(ParamValue::Int(0)),
    },
    ParamSpec {
        name: "transpose_b",
        kind: ParamKind::Flag,
        default: Some(ParamValue::Int(0)),
    },
];
const CONV_PARAMS: &[ParamSpec] = &[int("stride", 1, Some(1)), int("pad", 0, Some(0))];
/// `stride` defaults to `size`: the loader fills it in.
const POOL_PARAMS: &[ParamSpec] = &[
    int("size", 1, Some(2)),
    int("stride", 1, None),
    int("pad", 0, Some(0)),
];
const SGD_PARAMS: &[ParamSpec] = &[ParamSpec {
    name: "lr",
    kind: ParamKind::PositiveFloat,
    default: Some(ParamValue::Float(0.01)),
}];
/// The longest sleep an op may ask for, in microseconds (60 s): more is a typo, not a
/// workload.
pub const MAX_SLEEP_US: i64 = 60_000_000;
const SUM_EXPR_PARAMS: &[ParamSpec] = &[int_up_to("us", 0, MAX_SLEEP_US, Some(0))];
const SLEEP_PARAMS: &[ParamSpec] = &[int_up_to("us", 0, MAX_SLEEP_US, None)];

/// A tensor handed to a shape rule: its name (for messages) and shape.
#[derive(Clone, Copy, Debug)]
pub struct Operand<'a> {
    /// Tensor name.
    pub name: &'a str,
    /// Its shape.
    pub shape: &'a [usize],
}

impl fmt::Display for Operand<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.name, shape_text(self.shape))
    }
}

/// `[2,16,56,56]`.
pub fn shape_text(shape: &[usize]) -> String {
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
    pub fn reads(self) -> Operands {
        use KernelKind::*;
        match self {
            Gemm => Operands::Exactly(&["a [m,k]", "b [k,n]"]),
            Conv2d => Operands::Exactly(&["input [N,C,H,W]", "weight [O,C,kh,kw]"]),
            BatchNorm | BatchNormRelu => {
                Operands::Exactly(&["input [N,C,...]", "scale_shift [2,C]"])
            }
            BatchNormAddRelu => {
                Operands::Exactly(&["input [N,C,...]", "scale_shift [2,C]", "residual [N,C,...]"])
            }
            LayerNorm => Operands::Exactly(&["input [...,D]", "scale_shift [2,D]"]),
            Relu | Softmax | MaxPool | AvgPool => Operands::Exactly(&["input"]),
            Add => Operands::Exactly(&["a", "b"]),
            Sgd => Operands::Exactly(&["grad"]),
            Conv2dGradInput => {
                Operands::Exactly(&["grad_output [N,O,Ho,Wo]", "weight [O,C,kh,kw]"])
            }
            Conv2dGradWeight => Operands::Exactly(&["input [N,C,H,W]", "grad_output [N,O,Ho,Wo]"]),
            BatchNormGrad => Operands::Exactly(&[
                "grad_output [N,C,...]",
                "forward input [N,C,...]",
                "scale_shift [2,C]",
            ]),
            BatchNormReluGrad => Operands::Exactly(&[
                "grad_output [N,C,...]",
                "forward input [N,C,...]",
                "scale_shift [2,C]",
                "forward output [N,C,...]",
            ]),
            ReluGrad => Operands::Exactly(&["grad_output", "forward input or output"]),
            ReluGradAdd => Operands::Exactly(&["grad_output", "forward input or output", "addend"]),
            MaxPoolGrad => Operands::Exactly(&["grad_output", "forward input [N,C,H,W]"]),
            AvgPoolGrad => Operands::Exactly(&["grad_output"]),
            SoftmaxXentGrad => Operands::Exactly(&[
                "logits [N,...]",
                "labels [N,...] (each row's class is its largest value)",
            ]),
            CopyH2d => Operands::Exactly(&["host source"]),
            CopyD2h => Operands::Exactly(&["device source"]),
            SumExpr => Operands::AtLeast(1, "terms, repeats and the result itself allowed"),
            Fold | SleepUs => Operands::AtLeast(0, "any tensors"),
        }
    }

    /// The tensors `writes` holds, in order.
    pub fn writes(self) -> Operands {
        use KernelKind::*;
        match self {
            Sgd => Operands::Exactly(&["weight, updated in place"]),
            BatchNormGrad | BatchNormReluGrad => {
                Operands::Exactly(&["grad_input", "grad_scale_shift [2,C]"])
            }
            CopyH2d => Operands::Exactly(&["device destination"]),
            CopyD2h => Operands::Exactly(&["host destination"]),
            SleepUs => Operands::AtLeast(0, "any tensors"),
            _ => Operands::Exactly(&["output"]),
        }
    }

    /// Its parameters.
    pub fn params(self) -> &'static [ParamSpec] {
        use KernelKind::*;
        match self {
            Gemm => GEMM_PARAMS,
            Conv2d | Conv2dGradInput | Conv2dGradWeight => CONV_PARAMS,
            MaxPool | AvgPool | MaxPoolGrad | AvgPoolGrad => POOL_PARAMS,
            Sgd => SGD_PARAMS,
            SumExpr => SUM_EXPR_PARAMS,
            SleepUs => SLEEP_PARAMS,
            _ => &[],
        }
    }

    /// For a parameter this kernel does not take but a kernel of its own provides (the fused
    /// relu of MXNet's and oneDNN's batch norms), that kernel's name.
    pub fn fused_instead(self, param: &str) -> Option<&'static str> {
        match (self, param) {
            (KernelKind::BatchNorm, "relu") => Some("batch_norm_relu"),
            (KernelKind::BatchNormGrad, "relu") => Some("batch_norm_relu_grad"),
            _ => None,
        }
    }

    /// Whether it is a host/device copy.
    pub fn is_copy(self) -> bool {
        matches!(self, KernelKind::CopyH2d | KernelKind::CopyD2h)
    }

    /// Whether its tensors must share one dtype (all but the engine-overhead kernels).
    pub fn needs_one_dtype(self) -> bool {
        !matches!(self, KernelKind::Fold | KernelKind::SleepUs)
    }

    /// The shape rule, as the error message states it.
    pub fn shape_rule(self) -> &'static str {
        use KernelKind::*;
        match self {
            Gemm => {
                "a [m,k] ([k,m] with transpose_a = 1) x b [k,n] ([n,k] with transpose_b = 1) \
                 -> output [m,n]"
            }
            Conv2d => {
                "input [N,C,H,W] x weight [O,C,kh,kw] -> output \
                 [N,O,(H+2*pad-kh)/stride+1,(W+2*pad-kw)/stride+1]"
            }
            BatchNorm | BatchNormRelu => {
                "input [N,C,...] and scale_shift [2,C] -> output shaped like input"
            }
            BatchNormAddRelu => {
                "input [N,C,...], scale_shift [2,C] and residual shaped like input -> output \
                 shaped like input"
            }
            LayerNorm => "input [...,D] and scale_shift [2,D] -> output shaped like input",
            Relu | Softmax => "output shaped like input",
            Add => "a, b and output of one shape",
            MaxPool | AvgPool => {
                "input [N,C,H,W] -> output [N,C,(H+2*pad-size)/stride+1,(W+2*pad-size)/stride+1]"
            }
            Sgd => "grad shaped like the weight it updates",
            Conv2dGradInput => {
                "grad_output [N,O,Ho,Wo] x weight [O,C,kh,kw] -> grad_input [N,C,H,W], where \
                 conv2d of grad_input by weight (same stride and pad) is [N,O,Ho,Wo]"
            }
            Conv2dGradWeight => {
                "input [N,C,H,W] and grad_output [N,O,Ho,Wo] -> grad_weight [O,C,kh,kw], where \
                 conv2d of input by grad_weight (same stride and pad) is [N,O,Ho,Wo]"
            }
            BatchNormGrad => {
                "grad_output, forward input and grad_input of one shape [N,C,...]; \
                 scale_shift and grad_scale_shift [2,C]"
            }
            BatchNormReluGrad => {
                "grad_output, forward input, forward output and grad_input of one shape \
                 [N,C,...]; scale_shift and grad_scale_shift [2,C]"
            }
            ReluGrad => "grad_output, forward input or output, and grad_input of one shape",
            ReluGradAdd => "grad_output, forward input or output, addend and output of one shape",
            MaxPoolGrad => {
                "forward input [N,C,H,W] and grad_input of its shape; grad_output shaped like \
                 the pool's output"
            }
            AvgPoolGrad => "grad_input [N,C,H,W]; grad_output shaped like the pool's output",
            SoftmaxXentGrad => {
                "logits, labels and grad_logits of one shape [N,...], rank 2 or more"
            }
            CopyH2d | CopyD2h => "source and destination of one shape",
            SumExpr => "every term shaped like the output",
            Fold | SleepUs => "any shapes",
        }
    }

    /// Checks the shapes of an op's operands (arity already checked); the error says which
    /// tensors disagree and how.
    pub fn check_shapes(
        self,
        reads: &[Operand],
        writes: &[Operand],
        params: &KernelParams,
    ) -> Result<(), String> {
        use KernelKind::*;
        match self {
            Gemm => check_gemm(reads[0], reads[1], writes[0], params),
            Conv2d => check_conv(reads[0], reads[1], writes[0], params),
            BatchNorm | BatchNormRelu => check_norm(reads[0], reads[1], writes[0], 1),
            BatchNormAddRelu => check_norm(reads[0], reads[1], writes[0], 1)
                .and_then(|()| same_shape(reads[0], reads[2])),
            LayerNorm => check_norm(reads[0], reads[1], writes[0], usize::MAX),
            Relu | Softmax | Sgd | CopyH2d | CopyD2h => same_shape(reads[0], writes[0]),
            Add => same_shape(reads[0], reads[1]).and_then(|()| same_shape(reads[0], writes[0])),
            MaxPool | AvgPool => check_pool(reads[0], writes[0], params),
            Conv2dGradInput => check_conv(writes[0], reads[1], reads[0], params).map_err(|err| {
                format!("{err} (grad_input is the forward input, grad_output the forward output)")
            }),
            Conv2dGradWeight => check_conv(reads[0], writes[0], reads[1], params).map_err(|err| {
                format!("{err} (the weight is grad_weight, the output grad_output)")
            }),
            BatchNormGrad => check_norm_grad(reads, writes),
            BatchNormReluGrad => {
                check_norm_grad(reads, writes).and_then(|()| same_shape(reads[1], reads[3]))
            }
            ReluGrad => {
                same_shape(reads[0], reads[1]).and_then(|()| same_shape(reads[0], writes[0]))
            }
            ReluGradAdd => same_shape(reads[0], reads[1])
                .and_then(|()| same_shape(reads[0], reads[2]))
                .and_then(|()| same_shape(reads[0], writes[0])),
            MaxPoolGrad => check_pool(reads[1], reads[0], params)
                .and_then(|()| same_shape(reads[1], writes[0])),
            AvgPoolGrad => check_pool(writes[0], reads[0], params),
            SoftmaxXentGrad => check_rows(reads[0])
                .and_then(|()| same_shape(reads[0], reads[1]))
                .and_then(|()| same_shape(reads[0], writes[0])),
            SumExpr => reads
                .iter()
                .try_for_each(|term| same_shape(*term, writes[0])),
            Fold | SleepUs => Ok(()),
        }
    }

    /// Floating-point operations of one run, from the shapes (saturating): what the kernels
    /// count when they run (`tests/workload_run.rs` checks every shipped workload), so
    /// `enginetop workloads` and a run's GFLOP per iteration agree. The one place the
    /// count lives before a run.
    pub fn flops(self, reads: &[&[usize]], writes: &[&[usize]], params: &KernelParams) -> u64 {
        use KernelKind::*;
        let elements = |shape: &[usize]| numel(shape).unwrap_or(u64::MAX);
        let output = writes.first().map_or(0, |shape| elements(shape));
        let input = reads.first().map_or(0, |shape| elements(shape));
        let product = |factors: &[u64]| factors.iter().fold(1u64, |acc, f| acc.saturating_mul(*f));
        match self {
            Gemm => {
                let k_dim = if params.int("transpose_a", 0) == 1 {
                    0
                } else {
                    1
                };
                product(&[2, output, dim(reads[0], k_dim)])
            }
            Conv2d => product(&[
                2,
                output,
                dim(reads[1], 1),
                dim(reads[1], 2),
                dim(reads[1], 3),
            ]),
            BatchNorm => product(&[5, input]),
            // batch_norm's and relu's.
            BatchNormRelu => product(&[6, input]),
            // batch_norm's, add's and relu's.
            BatchNormAddRelu => product(&[7, input]),
            // Mean, variance, normalize, scale and shift: the kernel counts 7 a value.
            LayerNorm => product(&[7, input]),
            Relu | Add | ReluGrad => output,
            // relu_grad's and add's.
            ReluGradAdd => product(&[2, output]),
            // Max, exp, sum and divide: the kernel counts 4 a value.
            Softmax => product(&[4, input]),
            MaxPool | AvgPool => {
                let size = params.int("size", 1).max(0) as u64;
                product(&[output, size, size])
            }
            // The forward convolution's GEMM (grad_output has the forward output's shape),
            // then col2im's adds: one per column value, none for a pointwise convolution.
            Conv2dGradInput => {
                let patch = product(&[dim(reads[1], 1), dim(reads[1], 2), dim(reads[1], 3)]);
                let pointwise = dim(reads[1], 2) * dim(reads[1], 3) == 1
                    && params.int("stride", 1) == 1
                    && params.int("pad", 0) == 0;
                let out_channels = dim(reads[1], 0).max(1);
                let col2im_adds = if pointwise {
                    0
                } else {
                    product(&[input / out_channels, patch])
                };
                product(&[2, input, patch]).saturating_add(col2im_adds)
            }
            Conv2dGradWeight => product(&[
                2,
                elements(reads[1]),
                dim(writes[0], 1),
                dim(writes[0], 2),
                dim(writes[0], 3),
            ]),
            // Batch statistics again (3 a value), then the two sums and the input gradient (8).
            BatchNormGrad => product(&[11, input]),
            // relu_grad's and batch_norm_grad's.
            BatchNormReluGrad => product(&[12, input]),
            MaxPoolGrad | AvgPoolGrad => {
                let size = params.int("size", 1).max(0) as u64;
                product(&[input, size, size])
            }
            // Softmax (4 a value) and the gradient (2).
            SoftmaxXentGrad => product(&[6, input]),
            // w -= lr (g + weight_decay w): the kernel counts 4 a value, decay or not.
            Sgd => product(&[4, output]),
            SumExpr => product(&[output, reads.len() as u64]),
            Fold => reads
                .iter()
                .fold(0u64, |acc, shape| acc.saturating_add(elements(shape))),
            CopyH2d | CopyD2h | SleepUs => 0,
        }
    }
}

/// Elements in a tensor of `shape`, `None` on overflow.
pub fn numel(shape: &[usize]) -> Option<u64> {
    shape
        .iter()
        .try_fold(1u64, |acc, dim| acc.checked_mul(*dim as u64))
}

fn dim(shape: &[usize], index: usize) -> u64 {
    shape.get(index).map_or(0, |dim| *dim as u64)
}

fn rank(operand: Operand, expected: usize, role: &str) -> Result<(), String> {
    if operand.shape.len() == expected {
        return Ok(());
    }
    Err(format!(
        "{role} {operand} has rank {}, not {expected}",
        operand.shape.len()
    ))
}

fn same_shape(a: Operand, b: Operand) -> Result<(), String> {
    if a.shape == b.shape {
        return Ok(());
    }
    Err(format!("{a} and {b} differ"))
}

fn expect_output(output: Operand, expected: &[usize], because: &str) -> Result<(), String> {
    if output.shape == expected {
        return Ok(());
    }
    Err(format!(
        "output {output} should be {} ({because})",
        shape_text(expected)
    ))
}

fn check_gemm(a: Operand, b: Operand, c: Operand, params: &KernelParams) -> Result<(), String> {
    rank(a, 2, "a")?;
    rank(b, 2, "b")?;
    let transpose_a = params.int("transpose_a", 0) == 1;
    let transpose_b = params.int("transpose_b", 0) == 1;
    let [m, k_a] = if transpose_a {
        [a.shape[1], a.shape[0]]
    } else {
        [a.shape[0], a.shape[1]]
    };
    let [k_b, n] = if transpose_b {
        [b.shape[1], b.shape[0]]
    } else {
        [b.shape[0], b.shape[1]]
    };
    let flags = format!(
        "transpose_a = {}, transpose_b = {}",
        u8::from(transpose_a),
        u8::from(transpose_b)
    );
    if k_a != k_b {
        return Err(format!(
            "a {a} has k = {k_a} but b {b} has k = {k_b} ({flags})"
        ));
    }
    expect_output(c, &[m, n], &format!("from a {a} and b {b}, {flags}"))
}

/// One spatial output size, `None` when the window does not fit.
fn window_out(input: usize, pad: usize, window: usize, stride: usize) -> Option<usize> {
    let padded = input.checked_add(pad.checked_mul(2)?)?;
    Some(padded.checked_sub(window)? / stride.max(1) + 1)
}

fn spatial_out(
    input: Operand,
    window: [usize; 2],
    params: &KernelParams,
    window_name: &str,
) -> Result<[usize; 2], String> {
    let pad = usize::try_from(params.int("pad", 0)).unwrap_or(usize::MAX);
    let stride = usize::try_from(params.int("stride", 1)).unwrap_or(usize::MAX);
    let [h, w] = [input.shape[2], input.shape[3]];
    match (
        window_out(h, pad, window[0], stride),
        window_out(w, pad, window[1], stride),
    ) {
        (Some(ho), Some(wo)) => Ok([ho, wo]),
        _ => Err(format!(
            "the {window_name} {}x{} does not fit input {input} with pad {pad}",
            window[0], window[1]
        )),
    }
}

fn check_conv(x: Operand, w: Operand, y: Operand, params: &KernelParams) -> Result<(), String> {
    rank(x, 4, "input")?;
    rank(w, 4, "weight")?;
    if w.shape[1] != x.shape[1] {
        return Err(format!(
            "weight {w} takes {} input channels but input {x} has {}",
            w.shape[1], x.shape[1]
        ));
    }
    let [ho, wo] = spatial_out(x, [w.shape[2], w.shape[3]], params, "kernel")?;
    let because = format!(
        "from input {x}, weight {w}, stride {}, pad {}",
        params.int("stride", 1),
        params.int("pad", 0)
    );
    expect_output(y, &[x.shape[0], w.shape[0], ho, wo], &because)
}

fn check_pool(x: Operand, y: Operand, params: &KernelParams) -> Result<(), String> {
    rank(x, 4, "input")?;
    let size = usize::try_from(params.int("size", 1)).unwrap_or(usize::MAX);
    let [ho, wo] = spatial_out(x, [size, size], params, "window")?;
    let because = format!(
        "from input {x}, size {size}, stride {}, pad {}",
        params.int("stride", 1),
        params.int("pad", 0)
    );
    expect_output(y, &[x.shape[0], x.shape[1], ho, wo], &because)
}

/// A tensor read as rows: its first dimension, everything else one row.
fn check_rows(x: Operand) -> Result<(), String> {
    if x.shape.len() >= 2 {
        return Ok(());
    }
    Err(format!(
        "logits {x} has rank {}, not at least 2 ([N, classes, ...], one row per example)",
        x.shape.len()
    ))
}

/// A batch-norm gradient's first three reads `[grad_output, input, scale_shift]` and its
/// writes `[grad_input, grad_scale_shift]`.
fn check_norm_grad(reads: &[Operand], writes: &[Operand]) -> Result<(), String> {
    check_norm(reads[1], reads[2], writes[0], 1)
        .and_then(|()| same_shape(reads[0], reads[1]))
        .and_then(|()| same_shape(reads[2], writes[1]))
}

/// `channel_dim` 1 for batch norm, `usize::MAX` for the last dim (layer norm).
fn check_norm(
    x: Operand,
    scale_shift: Operand,
    y: Operand,
    channel_dim: usize,
) -> Result<(), String> {
    let min_rank = if channel_dim == 1 { 2 } else { 1 };
    if x.shape.len() < min_rank {
        return Err(format!(
            "input {x} has rank {}, not at least {min_rank}",
            x.shape.len()
        ));
    }
    let channels = x.shape[channel_dim.min(x.shape.len() - 1)];
    if scale_shift.shape != [2, channels] {
        return Err(format!(
            "scale_shift {scale_shift} should be [2,{channels}] for input {x}"
        ));
    }
    same_shape(x, y)
}

#[cfg(test)]
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
