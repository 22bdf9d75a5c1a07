//! [`KernelCall`]: a workload op's kernel, decoded once from its [`OpDecl`], and how it runs on
//! the tensors the driver locked for it.
//!
//! Operand conventions are the workload format's ([`KernelKind`]): `gemm` reads `[a, b]`
//! (params `transpose_a`, `transpose_b`); `conv2d` reads `[input, weight]` (params `stride`,
//! `pad`); `batch_norm` and `layer_norm` read `[input, scale_shift]`, row 0 the scale and row
//! 1 the shift; pooling takes `size`, `stride`, `pad`; `sgd` reads `[grad]` and updates its
//! one write in place with `lr`. The gradients: `conv2d_grad_input` reads `[grad_output,
//! weight]`, `conv2d_grad_weight` `[input, grad_output]` (both with the forward's `stride` and
//! `pad`); `batch_norm_grad` reads `[grad_output, input, scale_shift]` and writes
//! `[grad_input, grad_scale_shift]` (it recomputes the batch statistics from the input rather
//! than keeping them); `batch_norm_relu` is `batch_norm` with `relu` fused into its
//! normalization pass, and `batch_norm_relu_grad` reads batch_norm_grad's operands then the
//! forward output `[grad_output, input, scale_shift, output]`, masking `grad_output` where the
//! output is not positive as it reads it; `batch_norm_add_relu` reads `[input, scale_shift,
//! residual]` and writes `relu(batch_norm(input) + residual)` (its input's gradient is
//! `batch_norm_relu_grad` with its output as the mask); `relu_grad` reads `[grad_output,
//! forward input or output]`, `relu_grad_add` the same then `addend`, writing `addend +
//! relu_grad(...)`; `max_pool_grad` `[grad_output, forward input]`; `avg_pool_grad` `[grad_output]`;
//! `softmax_xent_grad` reads `[logits, labels]`, each `[N, ...]` read as N rows, a row's class
//! being the position of its label row's largest value. Every kernel but the batch-norm
//! gradients writes its first write.
#![forbid(unsafe_code)]

use std::borrow::Cow;
use std::time::{Duration, Instant};

use crate::kernels::pooling::PoolParams;
use crate::kernels::{
    add, avg_pool, avg_pool_backward, batch_norm_add_relu_train, batch_norm_backward_recomputed,
    batch_norm_relu_backward_recomputed, batch_norm_train_activated, conv2d, conv2d_backward_data,
    conv2d_backward_weights, gemm, layer_norm, max_pool, max_pool_backward, relu, relu_backward,
    relu_backward_add, sgd_update, softmax, softmax_cross_entropy_backward, Activation, BatchStats,
    Conv2dParams, GemmSpec, KernelError, NormGrads, NormParams, SgdParams, Tensor, Work,
};
use crate::pool::ThreadPool;
use crate::workload::{Graph, KernelKind, OpDecl};

/// Added to the variance by the normalisation kernels.
pub(super) const NORM_EPSILON: f32 = 1e-5;

/// One op's kernel with its parameters decoded.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum KernelCall {
    /// `c = op(a) op(b)`.
    Gemm(GemmSpec),
    /// NCHW convolution.
    Conv2d(Conv2dParams),
    /// Training batch norm (batch statistics) over `[N, C, ...]`.
    BatchNorm,
    /// Training batch norm with a fused relu.
    BatchNormRelu,
    /// Training batch norm with a fused residual add and relu.
    BatchNormAddRelu,
    /// Layer norm over the last dimension.
    LayerNorm,
    /// `max(x, 0)`.
    Relu,
    /// `a + b`.
    Add,
    /// Softmax over the last dimension.
    Softmax,
    /// Windowed max pooling.
    MaxPool(PoolParams),
    /// Windowed average pooling.
    AvgPool(PoolParams),
    /// `weight -= lr grad`, in place.
    Sgd(SgdParams),
    /// Gradient of a convolution with respect to its input.
    Conv2dGradInput(Conv2dParams),
    /// Gradient of a convolution with respect to its weight.
    Conv2dGradWeight(Conv2dParams),
    /// Gradient of training batch norm (input and scale/shift).
    BatchNormGrad,
    /// Gradient of training batch norm with a fused relu (input and scale/shift).
    BatchNormReluGrad,
    /// Gradient of relu.
    ReluGrad,
    /// Gradient of relu added to another gradient.
    ReluGradAdd,
    /// Gradient of windowed max pooling.
    MaxPoolGrad(PoolParams),
    /// Gradient of windowed average pooling.
    AvgPoolGrad(PoolParams),
    /// Gradient of softmax cross-entropy with respect to the logits.
    SoftmaxXentGrad,
    /// A host/device copy: the destination gets the source's values.
    Copy,
    /// `out = sum(terms) / (terms + 1)`, then busy-waits.
    SumExpr(Duration),
    /// An order-dependent hash of the inputs folded into the output.
    Fold,
    /// Sleeps.
    Sleep(Duration),
}

impl KernelCall {
    /// The call `op` of `graph` makes (the loader has checked its shapes and parameters).
    pub(super) fn decode(graph: &Graph, op: &OpDecl) -> Self {
        let params = &op.params;
        let count =
            |name: &str, fallback: i64| usize::try_from(params.int(name, fallback)).unwrap_or(0);
        let micros =
            |name: &str| Duration::from_micros(u64::try_from(params.int(name, 0)).unwrap_or(0));
        let conv = Conv2dParams {
            stride: count("stride", 1),
            padding: count("pad", 0),
        };
        let size = count("size", 2);
        let pool = PoolParams {
            window: size,
            stride: count("stride", size as i64),
            padding: count("pad", 0),
        };
        match op.kernel {
            KernelKind::Gemm => KernelCall::Gemm(gemm_spec(graph, op)),
            KernelKind::Conv2d => KernelCall::Conv2d(conv),
            KernelKind::Conv2dGradInput => KernelCall::Conv2dGradInput(conv),
            KernelKind::Conv2dGradWeight => KernelCall::Conv2dGradWeight(conv),
            KernelKind::BatchNormGrad => KernelCall::BatchNormGrad,
            KernelKind::BatchNormReluGrad => KernelCall::BatchNormReluGrad,
            KernelKind::ReluGrad => KernelCall::ReluGrad,
            KernelKind::ReluGradAdd => KernelCall::ReluGradAdd,
            KernelKind::MaxPoolGrad => KernelCall::MaxPoolGrad(pool),
            KernelKind::AvgPoolGrad => KernelCall::AvgPoolGrad(pool),
            KernelKind::SoftmaxXentGrad => KernelCall::SoftmaxXentGrad,
            KernelKind::BatchNorm => KernelCall::BatchNorm,
            KernelKind::BatchNormRelu => KernelCall::BatchNormRelu,
            KernelKind::BatchNormAddRelu => KernelCall::BatchNormAddRelu,
            KernelKind::LayerNorm => KernelCall::LayerNorm,
            KernelKind::Relu => KernelCall::Relu,
            KernelKind::Add => KernelCall::Add,
            KernelKind::Softmax => KernelCall::Softmax,
            KernelKind::MaxPool => KernelCall::MaxPool(pool),
            KernelKind::AvgPool => KernelCall::AvgPool(pool),
            KernelKind::Sgd => KernelCall::Sgd(SgdParams::plain(params.float("lr", 0.01) as f32)),
            KernelKind::CopyH2d | KernelKind::CopyD2h => KernelCall::Copy,
            KernelKind::SumExpr => KernelCall::SumExpr(micros("us")),
            KernelKind::Fold => KernelCall::Fold,
            KernelKind::SleepUs => KernelCall::Sleep(micros("us")),
        }
    }

    /// Runs the call on `pool` with the operands in the workload's order. Returns the
    /// [`Work`] a compute kernel reports, `None` for the engine-test kernels.
    pub(super) fn execute(
        &self,
        pool: &dyn ThreadPool,
        reads: &[&Tensor],
        writes: &mut [&mut Tensor],
    ) -> Result<Option<Work>, KernelError> {
        if let KernelCall::Sleep(duration) = self {
            std::thread::sleep(*duration); // the one kernel that may write nothing
            return Ok(None);
        }
        if let KernelCall::BatchNormGrad | KernelCall::BatchNormReluGrad = self {
            let [grad_input, grad_scale_shift] = writes else {
                unreachable!("the loader checked a batch-norm gradient's two writes")
            };
            let (dy, x, scale_shift) = (reads[0], reads[1], reads[2]);
            let relu_output = reads.get(3).copied();
            let grads = BatchNormGradOut {
                grad_input,
                grad_scale_shift,
            };
            return batch_norm_grad(pool, [dy, x, scale_shift], relu_output, grads).map(Some);
        }
        let out = &mut *writes[0];
        let work = match self {
            KernelCall::Gemm(spec) => {
                gemm(pool, spec, &reads[0].data, &reads[1].data, &mut out.data)?
            }
            KernelCall::Conv2d(params) => conv2d(pool, reads[0], reads[1], *params, out)?,
            KernelCall::BatchNorm => {
                let after = AfterNorm::Activated(Activation::Identity);
                batch_norm(pool, [reads[0], reads[1]], after, out)?
            }
            KernelCall::BatchNormRelu => {
                let after = AfterNorm::Activated(Activation::Relu);
                batch_norm(pool, [reads[0], reads[1]], after, out)?
            }
            KernelCall::BatchNormAddRelu => {
                let after = AfterNorm::AddRelu(reads[2]);
                batch_norm(pool, [reads[0], reads[1]], after, out)?
            }
            KernelCall::LayerNorm => last_dim_norm(pool, reads[0], reads[1], out)?,
            KernelCall::Relu => relu(pool, reads[0], out)?,
            KernelCall::Add => add(pool, reads[0], reads[1], out)?,
            KernelCall::Softmax => as_rows(reads[0], out, |input, out| softmax(pool, input, out))?,
            KernelCall::MaxPool(params) => max_pool(pool, reads[0], *params, out)?,
            KernelCall::AvgPool(params) => avg_pool(pool, reads[0], *params, out)?,
            KernelCall::Sgd(params) => sgd_update(pool, out, reads[0], *params, None)?,
            KernelCall::Conv2dGradInput(params) => {
                conv2d_backward_data(pool, reads[0], reads[1], *params, out)?
            }
            KernelCall::Conv2dGradWeight(params) => {
                conv2d_backward_weights(pool, reads[0], reads[1], *params, out)?
            }
            KernelCall::ReluGrad => relu_backward(pool, reads[1], reads[0], out)?,
            KernelCall::ReluGradAdd => relu_backward_add(pool, reads[1], reads[0], reads[2], out)?,
            KernelCall::MaxPoolGrad(params) => {
                max_pool_backward(pool, reads[1], reads[0], *params, out)?
            }
            KernelCall::AvgPoolGrad(params) => avg_pool_backward(pool, reads[0], *params, out)?,
            KernelCall::SoftmaxXentGrad => softmax_xent_grad(pool, reads[0], reads[1], out)?,
            KernelCall::BatchNormGrad | KernelCall::BatchNormReluGrad => {
                unreachable!("handled above")
            }
            KernelCall::Copy => {
                copy(reads[0], out)?;
                return Ok(None);
            }
            KernelCall::SumExpr(busy) => {
                sum_expr(reads, out);
                busy_wait(*busy);
                return Ok(None);
            }
            KernelCall::Fold => {
                fold(reads, out);
                return Ok(None);
            }
            KernelCall::Sleep(_) => return Ok(None),
        };
        Ok(Some(work))
    }
}

/// The GEMM `op` makes: `m`, `n`, `k` from its operands' shapes and transposes.
fn gemm_spec(graph: &Graph, op: &OpDecl) -> GemmSpec {
    let shape = |index: usize| graph.tensor(op.reads[index]).shape.as_slice();
    let (transpose_a, transpose_b) = (
        op.params.int("transpose_a", 0) == 1,
        op.params.int("transpose_b", 0) == 1,
    );
    let (a, b) = (shape(0), shape(1));
    let (m, k) = if transpose_a {
        (a[1], a[0])
    } else {
        (a[0], a[1])
    };
    let n = if transpose_b { b[0] } else { b[1] };
    let mut spec = GemmSpec::new(m, n, k);
    if transpose_a {
        spec = spec.transpose_a();
    }
    if transpose_b {
        spec = spec.transpose_b();
    }
    spec
}

/// `tensor` viewed with `shape` (borrowed when it already has it, else copied).
fn reshaped<'a>(tensor: &'a Tensor, shape: &[usize]) -> Cow<'a, Tensor> {
    if tensor.shape == shape {
        Cow::Borrowed(tensor)
    } else {
        Cow::Owned(Tensor {
            shape: shape.to_vec(),
            data: tensor.data.clone(),
        })
    }
}

/// Runs `kernel(input, out)` with both viewed as `shape`, then gives `out` its shape back.
fn with_shape<R>(
    shape: &[usize],
    input: &Tensor,
    out: &mut Tensor,
    kernel: impl FnOnce(&Tensor, &mut Tensor) -> R,
) -> R {
    let input = reshaped(input, shape);
    let own_shape = std::mem::replace(&mut out.shape, shape.to_vec());
    let result = kernel(&input, out);
    out.shape = own_shape;
    result
}

/// Runs a row-wise kernel on `[rows, last dim]` views of `input` and `out`.
fn as_rows<R>(
    input: &Tensor,
    out: &mut Tensor,
    kernel: impl FnOnce(&Tensor, &mut Tensor) -> R,
) -> R {
    let cols = input.shape.last().copied().unwrap_or(1);
    let rows = input.len() / cols.max(1);
    with_shape(&[rows, cols], input, out, kernel)
}

/// Scale (row 0) and shift (row 1) of a `[2, C]` tensor.
fn scale_and_shift(scale_shift: &Tensor) -> (Tensor, Tensor) {
    let features = scale_shift.len() / 2;
    let row = |index: usize| Tensor {
        shape: vec![features],
        data: scale_shift.data[index * features..(index + 1) * features].to_vec(),
    };
    (row(0), row(1))
}

/// `[N, C, rest, 1]` for an `[N, C, ...]` tensor that is not already NCHW (NCHW unchanged).
fn nchw_shape(tensor: &Tensor) -> Vec<usize> {
    if tensor.shape.len() == 4 {
        return tensor.shape.clone();
    }
    let batch = tensor.shape.first().copied().unwrap_or(1);
    let channels = tensor.shape.get(1).copied().unwrap_or(1);
    let rest = tensor.len() / (batch * channels).max(1);
    vec![batch, channels, rest, 1]
}

/// What a training batch norm applies after normalizing.
#[derive(Clone, Copy)]
enum AfterNorm<'a> {
    /// An activation.
    Activated(Activation),
    /// A residual (shaped like the input) added, then a relu.
    AddRelu(&'a Tensor),
}

/// Training batch norm of `[N, C, ...]` (viewed as `[N, C, rest, 1]` when not NCHW, and the
/// residual with it), with `after` fused into its normalization pass.
fn batch_norm(
    pool: &dyn ThreadPool,
    [input, scale_shift]: [&Tensor; 2],
    after: AfterNorm<'_>,
    out: &mut Tensor,
) -> Result<Work, KernelError> {
    let (gamma, beta) = scale_and_shift(scale_shift);
    let params = NormParams {
        gamma: &gamma,
        beta: &beta,
        epsilon: NORM_EPSILON,
    };
    let mut stats = BatchStats::zeros(gamma.len());
    let shape = nchw_shape(input);
    with_shape(&shape, input, out, |input, out| match after {
        AfterNorm::Activated(activation) => {
            batch_norm_train_activated(pool, input, &params, activation, out, &mut stats)
        }
        AfterNorm::AddRelu(residual) => {
            // A residual of another length keeps its shape, and the kernel names it.
            let residual = if residual.len() == input.len() {
                reshaped(residual, &shape)
            } else {
                Cow::Borrowed(residual)
            };
            batch_norm_add_relu_train(pool, input, &residual, &params, out, &mut stats)
        }
    })
}

/// What a batch-norm gradient writes: the input gradient and `[dgamma; dbeta]`.
struct BatchNormGradOut<'a> {
    grad_input: &'a mut Tensor,
    grad_scale_shift: &'a mut Tensor,
}

/// The gradients of [`batch_norm`] by [`batch_norm_backward_recomputed`] (or, given the
/// fused relu's `relu_output`, [`batch_norm_relu_backward_recomputed`]): the batch
/// statistics recomputed from the forward input (bitwise what the forward used), each channel
/// in one pass over memory; `grad_scale_shift` gets
/// `dgamma` in row 0 and `dbeta` in row 1.
fn batch_norm_grad(
    pool: &dyn ThreadPool,
    [grad_output, input, scale_shift]: [&Tensor; 3],
    relu_output: Option<&Tensor>,
    out: BatchNormGradOut<'_>,
) -> Result<Work, KernelError> {
    let BatchNormGradOut {
        grad_input,
        grad_scale_shift,
    } = out;
    let (gamma, beta) = scale_and_shift(scale_shift);
    let params = NormParams {
        gamma: &gamma,
        beta: &beta,
        epsilon: NORM_EPSILON,
    };
    let channels = gamma.len();
    if grad_scale_shift.len() != 2 * channels {
        return Err(KernelError::Shape {
            kernel: match relu_output {
                None => "batch_norm_grad",
                Some(_) => "batch_norm_relu_grad",
            },
            detail: format!(
                "grad_scale_shift holds {} values; give it the shape [2, {channels}]",
                grad_scale_shift.len()
            ),
        });
    }
    let shape = nchw_shape(input);
    let (x, dy) = (reshaped(input, &shape), reshaped(grad_output, &shape));
    let own_shape = std::mem::replace(&mut grad_input.shape, shape);
    let mut grads = NormGrads {
        grad_input: std::mem::replace(grad_input, Tensor::zeros(&[0])),
        grad_gamma: Tensor::zeros(&[channels]),
        grad_beta: Tensor::zeros(&[channels]),
    };
    let result = match relu_output {
        None => batch_norm_backward_recomputed(pool, &x, &dy, &params, &mut grads),
        Some(output) => {
            let output = reshaped(output, &grads.grad_input.shape);
            batch_norm_relu_backward_recomputed(pool, &x, &output, &dy, &params, &mut grads)
        }
    };
    *grad_input = grads.grad_input;
    grad_input.shape = own_shape;
    let work = result?;
    let (dgamma, dbeta) = grad_scale_shift.data.split_at_mut(channels);
    dgamma.copy_from_slice(&grads.grad_gamma.data);
    dbeta.copy_from_slice(&grads.grad_beta.data);
    Ok(work)
}

/// The gradient of the mean softmax cross-entropy of `[N, ...]` logits (N rows) with respect
/// to them; row `n`'s class is the position of the largest value (the first, on ties) of
/// row `n` of `labels`, so a one-hot or a score tensor both serve.
fn softmax_xent_grad(
    pool: &dyn ThreadPool,
    logits: &Tensor,
    labels: &Tensor,
    grad: &mut Tensor,
) -> Result<Work, KernelError> {
    let rows = logits.shape.first().copied().unwrap_or(1);
    let cols = logits.len() / rows.max(1);
    let classes: Vec<usize> = labels.data.chunks(cols.max(1)).map(first_argmax).collect();
    let shape = [rows, cols];
    let logits = reshaped(logits, &shape);
    let mut probabilities = Tensor::zeros(&shape);
    let softmax_work = softmax(pool, &logits, &mut probabilities)?;
    let own_shape = std::mem::replace(&mut grad.shape, shape.to_vec());
    let backward = softmax_cross_entropy_backward(pool, &probabilities, &classes, grad);
    grad.shape = own_shape;
    Ok(softmax_work + backward?)
}

/// The position of the first largest value of `row` (0 for an empty or all-NaN row).
fn first_argmax(row: &[f32]) -> usize {
    let mut best = (0, f32::NEG_INFINITY);
    for (index, &value) in row.iter().enumerate() {
        if value > best.1 {
            best = (index, value);
        }
    }
    best.0
}

/// Layer norm over the last dimension of `[..., D]`.
fn last_dim_norm(
    pool: &dyn ThreadPool,
    input: &Tensor,
    scale_shift: &Tensor,
    out: &mut Tensor,
) -> Result<Work, KernelError> {
    let (gamma, beta) = scale_and_shift(scale_shift);
    let params = NormParams {
        gamma: &gamma,
        beta: &beta,
        epsilon: NORM_EPSILON,
    };
    as_rows(input, out, |input, out| {
        layer_norm(pool, input, &params, out)
    })
}

fn copy(source: &Tensor, destination: &mut Tensor) -> Result<(), KernelError> {
    if source.len() != destination.len() {
        return Err(KernelError::Shape {
            kernel: "copy",
            detail: format!(
                "the source holds {} values but the destination {}; give them one shape",
                source.len(),
                destination.len()
            ),
        });
    }
    destination.data.copy_from_slice(&source.data);
    Ok(())
}

/// MXNet's RandSumExpr step: `out = sum(terms) / (terms + 1)`, element by element, summed in
/// `f64` in term order.
fn sum_expr(terms: &[&Tensor], out: &mut Tensor) {
    let divisor = (terms.len() + 1) as f64;
    for (index, value) in out.data.iter_mut().enumerate() {
        let sum: f64 = terms
            .iter()
            .map(|term| f64::from(term.data.get(index).copied().unwrap_or(0.0)))
            .sum();
        *value = (sum / divisor) as f32;
    }
}

/// Spins (without sleeping) for `duration`, like a short kernel would.
pub(super) fn busy_wait(duration: Duration) {
    if duration.is_zero() {
        return;
    }
    let start = Instant::now();
    while start.elapsed() < duration {
        std::hint::spin_loop();
    }
}

const FOLD_PRIME: u32 = 0x0100_0193;
/// Mixed in last, so an op with no inputs still changes its output.
const FOLD_STEP: u32 = 0x9e37_79b9;

/// `out[i] = hash(out[i], input_1[i], input_2[i], ...)` (inputs indexed cyclically), mapped
/// into `[0, 1)`: cheap, deterministic, and different for every order of the same ops. The
/// hash rotates before it mixes a value in: with a bare xor, an op folding its own output
/// (`chain`: `reads = ["x"], writes = ["x"]`) cancelled it (`x ^ x = 0`), so every step wrote
/// one constant and the checksum said nothing about the run.
fn fold(inputs: &[&Tensor], out: &mut Tensor) {
    let mix = |hash: u32, value: u32| (hash.rotate_left(5) ^ value).wrapping_mul(FOLD_PRIME);
    for (index, value) in out.data.iter_mut().enumerate() {
        let mut hash = value.to_bits();
        for input in inputs.iter().filter(|input| !input.is_empty()) {
            hash = mix(hash, input.data[index % input.len()].to_bits());
        }
        hash = mix(hash, FOLD_STEP);
        *value = (hash >> 8) as f32 / (1u32 << 24) as f32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::{Pool, PoolKind, PoolOptions};

    fn tensor(values: &[f32]) -> Tensor {
        Tensor::from_vec(&[values.len()], values.to_vec()).unwrap()
    }

    #[test]
    fn sum_expr_divides_by_one_more_than_the_terms() {
        let (a, b) = (tensor(&[1.0, 2.0]), tensor(&[3.0, 4.0]));
        let mut out = tensor(&[9.0, 9.0]);
        sum_expr(&[&a, &b, &a], &mut out);
        assert_eq!(out.data, [5.0 / 4.0, 8.0 / 4.0]);
    }

    #[test]
    fn fold_depends_on_order_and_advances_without_inputs() {
        let (a, b) = (tensor(&[0.25]), tensor(&[0.5]));
        let (mut ab, mut ba) = (tensor(&[0.0]), tensor(&[0.0]));
        fold(&[&a, &b], &mut ab);
        fold(&[&b, &a], &mut ba);
        assert_ne!(ab.data, ba.data);
        let mut alone = tensor(&[0.0]);
        fold(&[], &mut alone);
        let first = alone.data[0];
        fold(&[], &mut alone);
        assert!(first != alone.data[0] && (0.0..1.0).contains(&alone.data[0]));
    }

    /// What `chain` does: each op folds the tensor's value from before it into itself.
    fn folded_in_place(start: f32, steps: usize) -> f32 {
        let mut x = tensor(&[start]);
        for _ in 0..steps {
            let before = x.clone();
            fold(&[&before], &mut x);
        }
        x.data[0]
    }

    #[test]
    fn folding_a_tensor_into_itself_depends_on_its_value_and_the_steps() {
        assert_ne!(folded_in_place(1.0, 1), folded_in_place(0.5, 1));
        assert_ne!(folded_in_place(0.0, 1), folded_in_place(1.0, 1));
        let steps: Vec<f32> = (1..=4).map(|steps| folded_in_place(1.0, steps)).collect();
        for (index, value) in steps.iter().enumerate() {
            assert!(!steps[..index].contains(value), "{steps:?}");
        }
    }

    #[test]
    fn norms_and_softmax_work_on_any_rank() {
        let pool = Pool::new(PoolOptions::new(PoolKind::Simple, 1, "call-test")).unwrap();
        let logits = Tensor::random(&[2, 3, 1, 4], 1);
        let mut probs = Tensor::zeros(&[2, 3, 1, 4]);
        KernelCall::Softmax
            .execute(pool.as_dyn(), &[&logits], &mut [&mut probs])
            .unwrap();
        assert_eq!(probs.shape, [2, 3, 1, 4]);
        let row_sum: f32 = probs.data[..4].iter().sum();
        assert!((row_sum - 1.0).abs() < 1e-6);
        let scale_shift = Tensor::from_vec(&[2, 3], vec![1.0, 1.0, 1.0, 0.0, 0.0, 0.0]).unwrap();
        let mut normed = Tensor::zeros(&[2, 3, 1, 4]);
        let work = KernelCall::BatchNorm
            .execute(pool.as_dyn(), &[&logits, &scale_shift], &mut [&mut normed])
            .unwrap();
        assert!(work.unwrap().flops > 0.0);
        assert_eq!(normed.shape, [2, 3, 1, 4]);
        let flat = Tensor::random(&[4, 3], 2);
        let mut out = Tensor::zeros(&[4, 3]);
        KernelCall::BatchNorm
            .execute(pool.as_dyn(), &[&flat, &scale_shift], &mut [&mut out])
            .unwrap();
        assert_eq!(out.shape, [4, 3]);
    }

    /// Runs `call` on `reads` into its first `outputs` of a tensor of `shape` and a `[2, 3]`
    /// scale/shift gradient, and returns them.
    fn run_call(
        pool: &Pool,
        shape: &[usize],
        call: KernelCall,
        reads: &[&Tensor],
        outputs: usize,
    ) -> Vec<Tensor> {
        let mut out = vec![Tensor::zeros(shape), Tensor::zeros(&[2, 3])];
        out.truncate(outputs);
        let mut writes: Vec<&mut Tensor> = out.iter_mut().collect();
        call.execute(pool.as_dyn(), reads, &mut writes).unwrap();
        out
    }

    /// The fused calls take their operands in the workload's order and give what the
    /// separate calls give: `batch_norm_relu` = `batch_norm` then `relu`, and
    /// `batch_norm_relu_grad [g_a, y, bn, a]` = `relu_grad [g_a, a]` then `batch_norm_grad`.
    #[test]
    fn fused_batch_norm_relu_calls_match_the_separate_calls() {
        let pool = Pool::new(PoolOptions::new(PoolKind::Simple, 1, "call-test")).unwrap();
        let shape = [2, 3, 4, 5];
        let (y, g_a) = (Tensor::random(&shape, 3), Tensor::random(&shape, 4));
        let scale_shift = Tensor::random(&[2, 3], 5);
        let run = |call, reads: &[&Tensor], outputs| run_call(&pool, &shape, call, reads, outputs);
        let z = run(KernelCall::BatchNorm, &[&y, &scale_shift], 1).remove(0);
        let a = run(KernelCall::Relu, &[&z], 1).remove(0);
        let fused_a = run(KernelCall::BatchNormRelu, &[&y, &scale_shift], 1).remove(0);
        assert_eq!(fused_a, a);
        let g_z = run(KernelCall::ReluGrad, &[&g_a, &a], 1).remove(0);
        let separate = run(KernelCall::BatchNormGrad, &[&g_z, &y, &scale_shift], 2);
        let fused_reads = [&g_a, &y, &scale_shift, &a];
        let fused = run(KernelCall::BatchNormReluGrad, &fused_reads, 2);
        assert_eq!(fused, separate);
        assert!(g_z.data.contains(&0.0) && separate[0].data.iter().any(|&v| v != 0.0));
    }

    /// A bottleneck's tail fused gives what the separate calls give, on a flat `[N, C]`
    /// input too: `batch_norm_add_relu [y, bn, short]` = `batch_norm`, `add`, `relu`;
    /// `batch_norm_relu_grad [g_out, y, bn, out]` = `relu_grad [g_out, out]` then
    /// `batch_norm_grad`; `relu_grad_add [g_out, out, g_main]` = `add [g_main, g_sum]`.
    #[test]
    fn fused_residual_calls_match_the_separate_calls() {
        let pool = Pool::new(PoolOptions::new(PoolKind::Simple, 1, "call-test")).unwrap();
        for shape in [vec![2, 3, 4, 5], vec![6, 3]] {
            let (y, short) = (Tensor::random(&shape, 6), Tensor::random(&shape, 7));
            let (g_out, g_main) = (Tensor::random(&shape, 8), Tensor::random(&shape, 9));
            let scale_shift = Tensor::random(&[2, 3], 10);
            let run =
                |call, reads: &[&Tensor], outputs| run_call(&pool, &shape, call, reads, outputs);
            let z = run(KernelCall::BatchNorm, &[&y, &scale_shift], 1).remove(0);
            let sum = run(KernelCall::Add, &[&z, &short], 1).remove(0);
            let out = run(KernelCall::Relu, &[&sum], 1).remove(0);
            let fused_reads = [&y, &scale_shift, &short];
            let fused_out = run(KernelCall::BatchNormAddRelu, &fused_reads, 1).remove(0);
            assert_eq!(fused_out, out);
            assert_eq!(fused_out.shape, shape);
            let g_sum = run(KernelCall::ReluGrad, &[&g_out, &out], 1).remove(0);
            let separate = run(KernelCall::BatchNormGrad, &[&g_sum, &y, &scale_shift], 2);
            let grad_reads = [&g_out, &y, &scale_shift, &out];
            let fused = run(KernelCall::BatchNormReluGrad, &grad_reads, 2);
            assert_eq!(fused, separate);
            let g_x = run(KernelCall::Add, &[&g_main, &g_sum], 1).remove(0);
            let fused_g_x = run(KernelCall::ReluGradAdd, &[&g_out, &out, &g_main], 1).remove(0);
            assert_eq!(fused_g_x, g_x);
            assert!(g_sum.data.contains(&0.0) && g_sum.data.iter().any(|&v| v != 0.0));
        }
    }

    #[test]
    fn a_kernel_error_names_the_kernel() {
        let pool = Pool::new(PoolOptions::new(PoolKind::Simple, 1, "call-test")).unwrap();
        let (a, b) = (tensor(&[1.0, 2.0]), tensor(&[1.0]));
        let mut out = tensor(&[0.0, 0.0]);
        let error = KernelCall::Add
            .execute(pool.as_dyn(), &[&a, &b], &mut [&mut out])
            .unwrap_err();
        assert!(
            error.to_string().starts_with("add: b has shape [1]"),
            "{error}"
        );
    }
}
