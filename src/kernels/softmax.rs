//! Row-wise [`softmax`] of a `rows x cols` matrix, and the gradient of softmax cross-entropy
//! with respect to the logits ([`softmax_cross_entropy_backward`]).
//!
//! Softmax subtracts the row's maximum before exponentiating (no overflow) and sums the row
//! in `f64`. The cross-entropy gradient of a batch of `rows` examples with integer labels is
//! `(softmax(logits) - onehot(label)) / rows`, the mean over the batch.
//!
//! # Parallelism and determinism
//! Whole rows per `parallel_for` item (about 16 Ki values each); a row's sums are made by one
//! thread in index order, so nothing depends on the thread count.
#![forbid(unsafe_code)]

use super::error::{expect_shape, KernelError};
use super::rows::{for_each_row, matrix_dims};
use super::tensor::Tensor;
use super::work::Work;
use crate::pool::ThreadPool;

/// `output[r] = exp(input[r] - max) / sum(exp(input[r] - max))` for every row `r`.
///
/// ```
/// use enginetop::kernels::{softmax, Tensor};
/// use enginetop::pool::{Pool, PoolKind, PoolOptions};
/// let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "doc")).unwrap();
/// let logits = Tensor::from_vec(&[1, 2], vec![0.0, 0.0]).unwrap();
/// let mut probabilities = Tensor::zeros(&[1, 2]);
/// softmax(pool.as_dyn(), &logits, &mut probabilities).unwrap();
/// assert_eq!(probabilities.data, [0.5, 0.5]);
/// ```
pub fn softmax(
    pool: &dyn ThreadPool,
    input: &Tensor,
    output: &mut Tensor,
) -> Result<Work, KernelError> {
    let (_, cols) = matrix_dims("softmax", "input", &input.shape)?;
    expect_shape("softmax", "the output", &output.shape, &input.shape)?;
    for_each_row(pool, &mut output.data, cols, (1.0, 4.0), |row, out| {
        softmax_row(&input.data[row * cols..(row + 1) * cols], out);
    });
    let values = input.len() as f64;
    Ok(Work::new(4.0 * values, 2.0 * values))
}

/// Softmax of one row into `out`.
fn softmax_row(logits: &[f32], out: &mut [f32]) {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f64;
    for (out, &logit) in out.iter_mut().zip(logits) {
        *out = (logit - max).exp();
        sum += f64::from(*out);
    }
    let inverse = (1.0 / sum) as f32;
    out.iter_mut().for_each(|value| *value *= inverse);
}

/// `grad_logits = (probabilities - onehot(labels)) / rows`: the gradient of the mean
/// cross-entropy of a batch, from the softmax output and one class label per row.
pub fn softmax_cross_entropy_backward(
    pool: &dyn ThreadPool,
    probabilities: &Tensor,
    labels: &[usize],
    grad_logits: &mut Tensor,
) -> Result<Work, KernelError> {
    const KERNEL: &str = "softmax_cross_entropy_backward";
    let (rows, cols) = matrix_dims(KERNEL, "probabilities", &probabilities.shape)?;
    expect_shape(
        KERNEL,
        "grad_logits",
        &grad_logits.shape,
        &probabilities.shape,
    )?;
    if labels.len() != rows {
        return Err(KernelError::shape(
            KERNEL,
            format!(
                "{} labels for {rows} rows; give one label per row",
                labels.len()
            ),
        ));
    }
    if let Some((row, &label)) = labels.iter().enumerate().find(|(_, &label)| label >= cols) {
        return Err(KernelError::shape(
            KERNEL,
            format!(
                "label {label} of row {row} is not a class: there are {cols} (0 to {})",
                cols.saturating_sub(1)
            ),
        ));
    }
    let scale = 1.0 / rows.max(1) as f32;
    for_each_row(
        pool,
        &mut grad_logits.data,
        cols,
        (1.0, 2.0),
        |row, grad| {
            let probabilities = &probabilities.data[row * cols..(row + 1) * cols];
            for (class, (grad, &p)) in grad.iter_mut().zip(probabilities).enumerate() {
                let target = if class == labels[row] { 1.0 } else { 0.0 };
                *grad = (p - target) * scale;
            }
        },
    );
    let values = probabilities.len() as f64;
    Ok(Work::new(2.0 * values, 2.0 * values))
}
