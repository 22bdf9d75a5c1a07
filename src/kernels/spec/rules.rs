//! Every kernel's [`KernelSpec`]: its operands, parameters, shape rule, shape check and FLOP
//! count, one constant per kernel. A new kernel adds its constant here and names it in its
//! [`KernelKind`](crate::kernels::KernelKind) registration.
#![forbid(unsafe_code)]

use super::{numel, shape_text, KernelParams, KernelSpec, Operand, Operands, ParamKind};
use super::{ParamSpec, ParamValue};

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
const MAX_SLEEP_US: i64 = 60_000_000;
const SUM_EXPR_PARAMS: &[ParamSpec] = &[int_up_to("us", 0, MAX_SLEEP_US, Some(0))];
const SLEEP_PARAMS: &[ParamSpec] = &[int_up_to("us", 0, MAX_SLEEP_US, None)];

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

const OUTPUT: Operands = Operands::Exactly(&["output"]);
const ANY: Operands = Operands::AtLeast(0, "any tensors");
const NORM_GRAD_WRITES: Operands = Operands::Exactly(&["grad_input", "grad_scale_shift [2,C]"]);

fn elements(shape: &[usize]) -> u64 {
    numel(shape).unwrap_or(u64::MAX)
}

/// Elements of the first shape in `shapes` (0 when there is none).
fn first(shapes: &[&[usize]]) -> u64 {
    shapes.first().map_or(0, |shape| elements(shape))
}

fn product(factors: &[u64]) -> u64 {
    factors.iter().fold(1u64, |acc, f| acc.saturating_mul(*f))
}

/// `count` operations per element of the first read.
fn per_input(count: u64, reads: &[&[usize]]) -> u64 {
    product(&[count, first(reads)])
}

/// `count` operations per element of the first write.
fn per_output(count: u64, writes: &[&[usize]]) -> u64 {
    product(&[count, first(writes)])
}

fn no_flops(_: &[&[usize]], _: &[&[usize]], _: &KernelParams) -> u64 {
    0
}

fn any_shapes(_: &[Operand], _: &[Operand], _: &KernelParams) -> Result<(), String> {
    Ok(())
}

/// A pooling window's size squared, per element of `elements`.
fn pool_flops(elements: u64, params: &KernelParams) -> u64 {
    let size = params.int("size", 1).max(0) as u64;
    product(&[elements, size, size])
}

pub(crate) const GEMM: KernelSpec = KernelSpec {
    reads: Operands::Exactly(&["a [m,k]", "b [k,n]"]),
    writes: OUTPUT,
    params: GEMM_PARAMS,
    shape_rule: "a [m,k] ([k,m] with transpose_a = 1) x b [k,n] ([n,k] with transpose_b = 1) \
                 -> output [m,n]",
    check: |reads, writes, params| check_gemm(reads[0], reads[1], writes[0], params),
    flops: |reads, writes, params| {
        let k_dim = if params.int("transpose_a", 0) == 1 {
            0
        } else {
            1
        };
        product(&[2, first(writes), dim(reads[0], k_dim)])
    },
};

pub(crate) const CONV2D: KernelSpec = KernelSpec {
    reads: Operands::Exactly(&["input [N,C,H,W]", "weight [O,C,kh,kw]"]),
    writes: OUTPUT,
    params: CONV_PARAMS,
    shape_rule: "input [N,C,H,W] x weight [O,C,kh,kw] -> output \
                 [N,O,(H+2*pad-kh)/stride+1,(W+2*pad-kw)/stride+1]",
    check: |reads, writes, params| check_conv(reads[0], reads[1], writes[0], params),
    flops: |reads, writes, _| {
        product(&[
            2,
            first(writes),
            dim(reads[1], 1),
            dim(reads[1], 2),
            dim(reads[1], 3),
        ])
    },
};

const NORM_READS: Operands = Operands::Exactly(&["input [N,C,...]", "scale_shift [2,C]"]);
const NORM_RULE: &str = "input [N,C,...] and scale_shift [2,C] -> output shaped like input";

pub(crate) const BATCH_NORM: KernelSpec = KernelSpec {
    reads: NORM_READS,
    writes: OUTPUT,
    params: &[],
    shape_rule: NORM_RULE,
    check: |reads, writes, _| check_norm(reads[0], reads[1], writes[0], 1),
    flops: |reads, _, _| per_input(5, reads),
};

/// batch_norm's FLOPs and relu's.
pub(crate) const BATCH_NORM_RELU: KernelSpec = KernelSpec {
    flops: |reads, _, _| per_input(6, reads),
    ..BATCH_NORM
};

/// batch_norm's FLOPs, add's and relu's.
pub(crate) const BATCH_NORM_ADD_RELU: KernelSpec = KernelSpec {
    reads: Operands::Exactly(&["input [N,C,...]", "scale_shift [2,C]", "residual [N,C,...]"]),
    writes: OUTPUT,
    params: &[],
    shape_rule: "input [N,C,...], scale_shift [2,C] and residual shaped like input -> output \
                 shaped like input",
    check: |reads, writes, _| {
        check_norm(reads[0], reads[1], writes[0], 1).and_then(|()| same_shape(reads[0], reads[2]))
    },
    flops: |reads, _, _| per_input(7, reads),
};

/// Mean, variance, normalize, scale and shift: the kernel counts 7 a value.
pub(crate) const LAYER_NORM: KernelSpec = KernelSpec {
    reads: Operands::Exactly(&["input [...,D]", "scale_shift [2,D]"]),
    writes: OUTPUT,
    params: &[],
    shape_rule: "input [...,D] and scale_shift [2,D] -> output shaped like input",
    check: |reads, writes, _| check_norm(reads[0], reads[1], writes[0], usize::MAX),
    flops: |reads, _, _| per_input(7, reads),
};

pub(crate) const RELU: KernelSpec = KernelSpec {
    reads: Operands::Exactly(&["input"]),
    writes: OUTPUT,
    params: &[],
    shape_rule: "output shaped like input",
    check: |reads, writes, _| same_shape(reads[0], writes[0]),
    flops: |_, writes, _| first(writes),
};

/// Max, exp, sum and divide: the kernel counts 4 a value.
pub(crate) const SOFTMAX: KernelSpec = KernelSpec {
    flops: |reads, _, _| per_input(4, reads),
    ..RELU
};

pub(crate) const ADD: KernelSpec = KernelSpec {
    reads: Operands::Exactly(&["a", "b"]),
    writes: OUTPUT,
    params: &[],
    shape_rule: "a, b and output of one shape",
    check: |reads, writes, _| {
        same_shape(reads[0], reads[1]).and_then(|()| same_shape(reads[0], writes[0]))
    },
    flops: |_, writes, _| first(writes),
};

pub(crate) const MAX_POOL: KernelSpec = KernelSpec {
    reads: Operands::Exactly(&["input"]),
    writes: OUTPUT,
    params: POOL_PARAMS,
    shape_rule: "input [N,C,H,W] -> output [N,C,(H+2*pad-size)/stride+1,(W+2*pad-size)/stride+1]",
    check: |reads, writes, params| check_pool(reads[0], writes[0], params),
    flops: |_, writes, params| pool_flops(first(writes), params),
};

pub(crate) const AVG_POOL: KernelSpec = MAX_POOL;

/// w -= lr (g + weight_decay w): the kernel counts 4 a value, decay or not.
pub(crate) const SGD: KernelSpec = KernelSpec {
    reads: Operands::Exactly(&["grad"]),
    writes: Operands::Exactly(&["weight, updated in place"]),
    params: SGD_PARAMS,
    shape_rule: "grad shaped like the weight it updates",
    check: |reads, writes, _| same_shape(reads[0], writes[0]),
    flops: |_, writes, _| per_output(4, writes),
};

/// The forward convolution's GEMM (grad_output has the forward output's shape), then
/// col2im's adds: one per column value, none for a pointwise convolution.
pub(crate) const CONV2D_GRAD_INPUT: KernelSpec = KernelSpec {
    reads: Operands::Exactly(&["grad_output [N,O,Ho,Wo]", "weight [O,C,kh,kw]"]),
    writes: OUTPUT,
    params: CONV_PARAMS,
    shape_rule: "grad_output [N,O,Ho,Wo] x weight [O,C,kh,kw] -> grad_input [N,C,H,W], where \
                 conv2d of grad_input by weight (same stride and pad) is [N,O,Ho,Wo]",
    check: |reads, writes, params| {
        check_conv(writes[0], reads[1], reads[0], params).map_err(|err| {
            format!("{err} (grad_input is the forward input, grad_output the forward output)")
        })
    },
    flops: |reads, _, params| {
        let input = first(reads);
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
    },
};

pub(crate) const CONV2D_GRAD_WEIGHT: KernelSpec = KernelSpec {
    reads: Operands::Exactly(&["input [N,C,H,W]", "grad_output [N,O,Ho,Wo]"]),
    writes: OUTPUT,
    params: CONV_PARAMS,
    shape_rule: "input [N,C,H,W] and grad_output [N,O,Ho,Wo] -> grad_weight [O,C,kh,kw], where \
                 conv2d of input by grad_weight (same stride and pad) is [N,O,Ho,Wo]",
    check: |reads, writes, params| {
        check_conv(reads[0], writes[0], reads[1], params)
            .map_err(|err| format!("{err} (the weight is grad_weight, the output grad_output)"))
    },
    flops: |reads, writes, _| {
        product(&[
            2,
            elements(reads[1]),
            dim(writes[0], 1),
            dim(writes[0], 2),
            dim(writes[0], 3),
        ])
    },
};

/// Batch statistics again (3 a value), then the two sums and the input gradient (8).
pub(crate) const BATCH_NORM_GRAD: KernelSpec = KernelSpec {
    reads: Operands::Exactly(&[
        "grad_output [N,C,...]",
        "forward input [N,C,...]",
        "scale_shift [2,C]",
    ]),
    writes: NORM_GRAD_WRITES,
    params: &[],
    shape_rule: "grad_output, forward input and grad_input of one shape [N,C,...]; \
                 scale_shift and grad_scale_shift [2,C]",
    check: |reads, writes, _| check_norm_grad(reads, writes),
    flops: |reads, _, _| per_input(11, reads),
};

/// relu_grad's FLOPs and batch_norm_grad's.
pub(crate) const BATCH_NORM_RELU_GRAD: KernelSpec = KernelSpec {
    reads: Operands::Exactly(&[
        "grad_output [N,C,...]",
        "forward input [N,C,...]",
        "scale_shift [2,C]",
        "forward output [N,C,...]",
    ]),
    writes: NORM_GRAD_WRITES,
    params: &[],
    shape_rule: "grad_output, forward input, forward output and grad_input of one shape \
                 [N,C,...]; scale_shift and grad_scale_shift [2,C]",
    check: |reads, writes, _| {
        check_norm_grad(reads, writes).and_then(|()| same_shape(reads[1], reads[3]))
    },
    flops: |reads, _, _| per_input(12, reads),
};

pub(crate) const RELU_GRAD: KernelSpec = KernelSpec {
    reads: Operands::Exactly(&["grad_output", "forward input or output"]),
    writes: OUTPUT,
    params: &[],
    shape_rule: "grad_output, forward input or output, and grad_input of one shape",
    check: |reads, writes, _| {
        same_shape(reads[0], reads[1]).and_then(|()| same_shape(reads[0], writes[0]))
    },
    flops: |_, writes, _| first(writes),
};

/// relu_grad's FLOPs and add's.
pub(crate) const RELU_GRAD_ADD: KernelSpec = KernelSpec {
    reads: Operands::Exactly(&["grad_output", "forward input or output", "addend"]),
    writes: OUTPUT,
    params: &[],
    shape_rule: "grad_output, forward input or output, addend and output of one shape",
    check: |reads, writes, _| {
        same_shape(reads[0], reads[1])
            .and_then(|()| same_shape(reads[0], reads[2]))
            .and_then(|()| same_shape(reads[0], writes[0]))
    },
    flops: |_, writes, _| per_output(2, writes),
};

pub(crate) const MAX_POOL_GRAD: KernelSpec = KernelSpec {
    reads: Operands::Exactly(&["grad_output", "forward input [N,C,H,W]"]),
    writes: OUTPUT,
    params: POOL_PARAMS,
    shape_rule: "forward input [N,C,H,W] and grad_input of its shape; grad_output shaped like \
                 the pool's output",
    check: |reads, writes, params| {
        check_pool(reads[1], reads[0], params).and_then(|()| same_shape(reads[1], writes[0]))
    },
    flops: |reads, _, params| pool_flops(first(reads), params),
};

pub(crate) const AVG_POOL_GRAD: KernelSpec = KernelSpec {
    reads: Operands::Exactly(&["grad_output"]),
    writes: OUTPUT,
    params: POOL_PARAMS,
    shape_rule: "grad_input [N,C,H,W]; grad_output shaped like the pool's output",
    check: |reads, writes, params| check_pool(writes[0], reads[0], params),
    flops: |reads, _, params| pool_flops(first(reads), params),
};

/// Softmax (4 a value) and the gradient (2).
pub(crate) const SOFTMAX_XENT_GRAD: KernelSpec = KernelSpec {
    reads: Operands::Exactly(&[
        "logits [N,...]",
        "labels [N,...] (each row's class is its largest value)",
    ]),
    writes: OUTPUT,
    params: &[],
    shape_rule: "logits, labels and grad_logits of one shape [N,...], rank 2 or more",
    check: |reads, writes, _| {
        check_rows(reads[0])
            .and_then(|()| same_shape(reads[0], reads[1]))
            .and_then(|()| same_shape(reads[0], writes[0]))
    },
    flops: |reads, _, _| per_input(6, reads),
};

pub(crate) const COPY_H2D: KernelSpec = KernelSpec {
    reads: Operands::Exactly(&["host source"]),
    writes: Operands::Exactly(&["device destination"]),
    params: &[],
    shape_rule: "source and destination of one shape",
    check: |reads, writes, _| same_shape(reads[0], writes[0]),
    flops: no_flops,
};

pub(crate) const COPY_D2H: KernelSpec = KernelSpec {
    reads: Operands::Exactly(&["device source"]),
    writes: Operands::Exactly(&["host destination"]),
    ..COPY_H2D
};

pub(crate) const SUM_EXPR: KernelSpec = KernelSpec {
    reads: Operands::AtLeast(1, "terms, repeats and the result itself allowed"),
    writes: OUTPUT,
    params: SUM_EXPR_PARAMS,
    shape_rule: "every term shaped like the output",
    check: |reads, writes, _| {
        reads
            .iter()
            .try_for_each(|term| same_shape(*term, writes[0]))
    },
    flops: |reads, writes, _| product(&[first(writes), reads.len() as u64]),
};

pub(crate) const FOLD: KernelSpec = KernelSpec {
    reads: ANY,
    writes: OUTPUT,
    params: &[],
    shape_rule: "any shapes",
    check: any_shapes,
    flops: |reads, _, _| {
        reads
            .iter()
            .fold(0u64, |acc, shape| acc.saturating_add(elements(shape)))
    },
};

pub(crate) const SLEEP_US: KernelSpec = KernelSpec {
    reads: ANY,
    writes: ANY,
    params: SLEEP_PARAMS,
    shape_rule: "any shapes",
    check: any_shapes,
    flops: no_flops,
};
