//! Element-wise kernels: [`relu`], its gradient [`relu_backward`], and [`add`] (a residual
//! connection; its gradient passes through to both inputs unchanged, so it needs no kernel).
//!
//! # Parallelism and determinism
//! The output is cut into chunks of [`ELEMENTWISE_CHUNK`] values, one `parallel_for` item
//! each. Every value depends on its own inputs only, so any partition gives the same bits.
#![forbid(unsafe_code)]

use super::error::{expect_shape, KernelError};
use super::par::{for_each_chunk, item_cost, VECTOR_FLOPS_PER_CYCLE};
use super::tensor::Tensor;
use super::work::Work;
use crate::pool::ThreadPool;

/// Values per `parallel_for` item of an element-wise kernel (64 KiB of `f32`).
pub const ELEMENTWISE_CHUNK: usize = 16 * 1024;

/// `output = max(input, 0)`.
///
/// ```
/// use enginetop::kernels::{relu, Tensor};
/// use enginetop::pool::{Pool, PoolKind, PoolOptions};
/// let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "doc")).unwrap();
/// let input = Tensor::from_vec(&[4], vec![-1.0, 0.0, 2.0, -3.5]).unwrap();
/// let mut output = Tensor::zeros(&[4]);
/// relu(pool.as_dyn(), &input, &mut output).unwrap();
/// assert_eq!(output.data, [0.0, 0.0, 2.0, 0.0]);
/// ```
pub fn relu(
    pool: &dyn ThreadPool,
    input: &Tensor,
    output: &mut Tensor,
) -> Result<Work, KernelError> {
    expect_shape("relu", "the output", &output.shape, &input.shape)?;
    map_chunks(pool, 1, &mut output.data, |offset, out| {
        let x = &input.data[offset..offset + out.len()];
        for (out, &x) in out.iter_mut().zip(x) {
            *out = x.max(0.0);
        }
    });
    Ok(Work::new(input.len() as f64, 2.0 * input.len() as f64))
}

/// `grad_input = grad_output` where the forward `input` was positive, else 0.
pub fn relu_backward(
    pool: &dyn ThreadPool,
    input: &Tensor,
    grad_output: &Tensor,
    grad_input: &mut Tensor,
) -> Result<Work, KernelError> {
    expect_shape(
        "relu_backward",
        "grad_output",
        &grad_output.shape,
        &input.shape,
    )?;
    expect_shape(
        "relu_backward",
        "grad_input",
        &grad_input.shape,
        &input.shape,
    )?;
    map_chunks(pool, 2, &mut grad_input.data, |offset, dx| {
        let range = offset..offset + dx.len();
        for ((dx, &x), &dy) in dx
            .iter_mut()
            .zip(&input.data[range.clone()])
            .zip(&grad_output.data[range])
        {
            *dx = if x > 0.0 { dy } else { 0.0 };
        }
    });
    Ok(Work::new(input.len() as f64, 3.0 * input.len() as f64))
}

/// `output = a + b` (same shapes).
pub fn add(
    pool: &dyn ThreadPool,
    a: &Tensor,
    b: &Tensor,
    output: &mut Tensor,
) -> Result<Work, KernelError> {
    expect_shape("add", "b", &b.shape, &a.shape)?;
    expect_shape("add", "the output", &output.shape, &a.shape)?;
    map_chunks(pool, 2, &mut output.data, |offset, out| {
        let range = offset..offset + out.len();
        for ((out, &a), &b) in out
            .iter_mut()
            .zip(&a.data[range.clone()])
            .zip(&b.data[range])
        {
            *out = a + b;
        }
    });
    Ok(Work::new(a.len() as f64, 3.0 * a.len() as f64))
}

/// Runs `f(offset, chunk)` over [`ELEMENTWISE_CHUNK`]-long chunks of `out`, each reading
/// `inputs` values and doing one operation per value written.
fn map_chunks(
    pool: &dyn ThreadPool,
    inputs: usize,
    out: &mut [f32],
    f: impl Fn(usize, &mut [f32]) + Sync,
) {
    let chunk = ELEMENTWISE_CHUNK as f64;
    let cost = item_cost(inputs as f64 * chunk, chunk, chunk, VECTOR_FLOPS_PER_CYCLE);
    for_each_chunk(pool, out, ELEMENTWISE_CHUNK, cost, |index, out| {
        f(index * ELEMENTWISE_CHUNK, out)
    });
}
