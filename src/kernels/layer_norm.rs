//! Row-wise layer normalization of a `rows x cols` matrix (a transformer's `[tokens, hidden]`)
//! and its backward.
//!
//! For each row: `xhat = (x - mean) / sqrt(var + eps)` (biased variance, two passes in `f64`),
//! `y = gamma xhat + beta` with one `gamma`, `beta` per column. Backward recomputes each row's
//! statistics from the input (no saved state), then, with `g = dy gamma`:
//! `dx = inv_std (g - mean(g) - xhat mean(g xhat))`, `dgamma = sum_rows dy xhat`,
//! `dbeta = sum_rows dy`.
//!
//! # Parallelism and determinism
//! Whole rows per `parallel_for` item for the row passes; the column sums of the backward are
//! one item per block of [`COLUMN_BLOCK`] columns, adding the rows in index order. Every sum is
//! made by one thread in a fixed order, so nothing depends on the thread count.
#![forbid(unsafe_code)]

use super::error::{expect_shape, KernelError};
use super::norm::{NormGrads, NormParams};
use super::par::{for_each_chunk_pair, item_cost, VECTOR_FLOPS_PER_CYCLE};
use super::rows::{for_each_row, matrix_dims, rows_per_item};
use super::tensor::Tensor;
use super::work::Work;
use crate::pool::ThreadPool;

/// Columns per item of the backward's column sums.
pub(super) const COLUMN_BLOCK: usize = 64;

/// `output = gamma (input - mean) / sqrt(var + eps) + beta`, statistics per row.
pub fn layer_norm(
    pool: &dyn ThreadPool,
    input: &Tensor,
    params: &NormParams<'_>,
    output: &mut Tensor,
) -> Result<Work, KernelError> {
    let (_, cols) = check("layer_norm", input, params)?;
    expect_shape("layer_norm", "the output", &output.shape, &input.shape)?;
    for_each_row(pool, &mut output.data, cols, (1.0, 7.0), |row, out| {
        let x = &input.data[row * cols..(row + 1) * cols];
        let (mean, inv_std) = row_stats(x, params.epsilon);
        for (j, (out, &x)) in out.iter_mut().zip(x).enumerate() {
            *out = (x - mean) * inv_std * params.gamma.data[j] + params.beta.data[j];
        }
    });
    let values = input.len() as f64;
    Ok(Work::new(7.0 * values, 2.0 * values))
}

/// Gradients of [`layer_norm`] from its `input` and `grad_output`.
pub fn layer_norm_backward(
    pool: &dyn ThreadPool,
    input: &Tensor,
    grad_output: &Tensor,
    params: &NormParams<'_>,
    grads: &mut NormGrads,
) -> Result<Work, KernelError> {
    const KERNEL: &str = "layer_norm_backward";
    let (rows, cols) = check(KERNEL, input, params)?;
    expect_shape(KERNEL, "grad_output", &grad_output.shape, &input.shape)?;
    expect_shape(KERNEL, "grad_input", &grads.grad_input.shape, &input.shape)?;
    expect_shape(KERNEL, "grad_gamma", &grads.grad_gamma.shape, &[cols])?;
    expect_shape(KERNEL, "grad_beta", &grads.grad_beta.shape, &[cols])?;
    let stats = all_row_stats(pool, &input.data, rows, cols, params.epsilon);
    let (x, dy) = (&input.data, &grad_output.data);
    let (dgamma, dbeta) = (&mut grads.grad_gamma.data, &mut grads.grad_beta.data);
    column_grads(pool, (x, dy), cols, &stats, (dgamma, dbeta));
    for_each_row(
        pool,
        &mut grads.grad_input.data,
        cols,
        (2.0, 8.0),
        |row, dx| {
            let range = row * cols..(row + 1) * cols;
            input_grad_row(&x[range.clone()], &dy[range], params.gamma, stats[row], dx);
        },
    );
    let values = input.len() as f64;
    Ok(Work::new(15.0 * values, 5.0 * values))
}

/// `dgamma_j = sum_rows dy xhat` and `dbeta_j = sum_rows dy`: one item per block of
/// [`COLUMN_BLOCK`] columns, adding the rows in index order in `f64`.
fn column_grads(
    pool: &dyn ThreadPool,
    (x, dy): (&[f32], &[f32]),
    cols: usize,
    stats: &[(f32, f32)],
    (grad_gamma, grad_beta): (&mut [f32], &mut [f32]),
) {
    let values = (stats.len() * COLUMN_BLOCK) as f64;
    let cost = item_cost(
        2.0 * values,
        2.0 * COLUMN_BLOCK as f64,
        4.0 * values,
        VECTOR_FLOPS_PER_CYCLE,
    );
    let block_len = COLUMN_BLOCK;
    for_each_chunk_pair(
        pool,
        grad_gamma,
        block_len,
        grad_beta,
        block_len,
        cost,
        |block, dgamma, dbeta| {
            let first = block * COLUMN_BLOCK;
            let mut sums = vec![(0.0f64, 0.0f64); dgamma.len()];
            for (row, &(mean, inv_std)) in stats.iter().enumerate() {
                let start = row * cols + first;
                for ((sum, &x), &dy) in sums.iter_mut().zip(&x[start..]).zip(&dy[start..]) {
                    sum.0 += f64::from(dy) * f64::from((x - mean) * inv_std);
                    sum.1 += f64::from(dy);
                }
            }
            for ((dgamma, dbeta), (sum_dy_xhat, sum_dy)) in dgamma.iter_mut().zip(dbeta).zip(sums) {
                (*dgamma, *dbeta) = (sum_dy_xhat as f32, sum_dy as f32);
            }
        },
    );
}

/// `(rows, cols)` of a layer-norm input, with `gamma` and `beta` checked to have `cols` values.
fn check(
    kernel: &'static str,
    input: &Tensor,
    params: &NormParams<'_>,
) -> Result<(usize, usize), KernelError> {
    let (rows, cols) = matrix_dims(kernel, "input", &input.shape)?;
    expect_shape(kernel, "gamma", &params.gamma.shape, &[cols])?;
    expect_shape(kernel, "beta", &params.beta.shape, &[cols])?;
    Ok((rows, cols))
}

/// A row's mean and `1 / sqrt(var + eps)`, two passes in `f64`.
fn row_stats(x: &[f32], epsilon: f32) -> (f32, f32) {
    let count = x.len().max(1) as f64;
    let mean = x.iter().map(|&v| f64::from(v)).sum::<f64>() / count;
    let var = x
        .iter()
        .map(|&v| (f64::from(v) - mean).powi(2))
        .sum::<f64>()
        / count;
    (
        mean as f32,
        (1.0 / (var + f64::from(epsilon)).sqrt()) as f32,
    )
}

/// Every row's statistics, whole rows per item.
fn all_row_stats(
    pool: &dyn ThreadPool,
    x: &[f32],
    rows: usize,
    cols: usize,
    epsilon: f32,
) -> Vec<(f32, f32)> {
    let mut stats = vec![(0.0, 0.0); rows];
    let per_item = rows_per_item(cols);
    let values = (per_item * cols) as f64;
    let cost = item_cost(
        2.0 * values,
        2.0 * per_item as f64,
        3.0 * values,
        VECTOR_FLOPS_PER_CYCLE,
    );
    super::par::for_each_chunk(pool, &mut stats, per_item, cost, |index, block| {
        for (offset, stat) in block.iter_mut().enumerate() {
            let row = index * per_item + offset;
            *stat = row_stats(&x[row * cols..(row + 1) * cols], epsilon);
        }
    });
    stats
}

/// One row of `dx = inv_std (g - mean(g) - xhat mean(g xhat))` with `g = dy gamma`.
fn input_grad_row(
    x: &[f32],
    dy: &[f32],
    gamma: &Tensor,
    (mean, inv_std): (f32, f32),
    dx: &mut [f32],
) {
    let count = x.len().max(1) as f64;
    let (mut sum_g, mut sum_g_xhat) = (0.0f64, 0.0f64);
    for ((&x, &dy), &gamma) in x.iter().zip(dy).zip(&gamma.data) {
        let g = f64::from(dy * gamma);
        sum_g += g;
        sum_g_xhat += g * f64::from((x - mean) * inv_std);
    }
    let (mean_g, mean_g_xhat) = ((sum_g / count) as f32, (sum_g_xhat / count) as f32);
    for (((dx, &x), &dy), &gamma) in dx.iter_mut().zip(x).zip(dy).zip(&gamma.data) {
        let xhat = (x - mean) * inv_std;
        *dx = inv_std * (dy * gamma - mean_g - xhat * mean_g_xhat);
    }
}
