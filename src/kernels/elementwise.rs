//! Element-wise kernels: [`relu`], its gradient [`relu_backward`], and [`add`] (a residual
//! connection; its gradient passes through to both inputs unchanged, so it needs no kernel),
//! and [`relu_backward_add`], the ReLU's gradient summed into another gradient in the same
//! pass (where a residual block's shortcut gradient meets its main path's: the masked
//! gradient is never written as a tensor of its own).
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
pub(super) const ELEMENTWISE_CHUNK: usize = 16 * 1024;

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
            *dx = relu_gradient(x, dy);
        }
    });
    Ok(Work::new(input.len() as f64, 3.0 * input.len() as f64))
}

/// The ReLU's gradient at one value: `dy` where `x` is positive, else 0. `x` is the ReLU's
/// input or its output (`max(v, 0)` is positive exactly when `v` is). The one definition the
/// element-wise and the fused batch-norm kernels share, so their masks are the same bits.
pub(super) fn relu_gradient(x: f32, dy: f32) -> f32 {
    if x > 0.0 {
        dy
    } else {
        0.0
    }
}

/// `grad_input = addend + relu_backward(input, grad_output)`: the ReLU's gradient added to
/// `addend` as it is made, bitwise what [`relu_backward`] then [`add`] give (the masked value
/// is the same, and `a + b` rounds as `b + a`). `input` is the forward input or output (the
/// mask is the same). Reads three tensors and writes one, where the two kernels read four
/// and write two.
///
/// ```
/// use enginetop::kernels::{relu_backward_add, Tensor};
/// use enginetop::pool::{Pool, PoolKind, PoolOptions};
/// let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "doc")).unwrap();
/// let output = Tensor::from_vec(&[3], vec![0.0, 2.0, 1.0]).unwrap();
/// let grad = Tensor::from_vec(&[3], vec![5.0, 6.0, 7.0]).unwrap();
/// let addend = Tensor::from_vec(&[3], vec![1.0, 1.0, 1.0]).unwrap();
/// let mut sum = Tensor::zeros(&[3]);
/// relu_backward_add(pool.as_dyn(), &output, &grad, &addend, &mut sum).unwrap();
/// assert_eq!(sum.data, [1.0, 7.0, 8.0]);
/// ```
pub fn relu_backward_add(
    pool: &dyn ThreadPool,
    input: &Tensor,
    grad_output: &Tensor,
    addend: &Tensor,
    grad_input: &mut Tensor,
) -> Result<Work, KernelError> {
    const KERNEL: &str = "relu_backward_add";
    expect_shape(KERNEL, "grad_output", &grad_output.shape, &input.shape)?;
    expect_shape(KERNEL, "the addend", &addend.shape, &input.shape)?;
    expect_shape(KERNEL, "grad_input", &grad_input.shape, &input.shape)?;
    map_chunks(pool, 3, &mut grad_input.data, |offset, dx| {
        let range = offset..offset + dx.len();
        let operands = input.data[range.clone()]
            .iter()
            .zip(&grad_output.data[range.clone()])
            .zip(&addend.data[range]);
        for (dx, ((&x, &dy), &addend)) in dx.iter_mut().zip(operands) {
            *dx = addend + relu_gradient(x, dy);
        }
    });
    Ok(Work::new(
        2.0 * input.len() as f64,
        4.0 * input.len() as f64,
    ))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::{Pool, PoolKind, PoolOptions};

    /// The fused ReLU gradient and add give bitwise what relu_backward then add give, with
    /// both signs in the mask, zeros (a zero forward value masks), signed zeros in the addend
    /// (`-0 + 0` is `+0` either way), and a length that is not a multiple of the chunk.
    #[test]
    fn relu_backward_add_matches_relu_backward_then_add_bitwise() {
        let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "relu-add")).unwrap();
        let shape = [3, 5, 37, 41];
        let mut input = Tensor::random(&shape, 71);
        input.data[..64].fill(0.0);
        let grad_output = Tensor::random(&shape, 72);
        let mut addend = Tensor::random(&shape, 73);
        addend.data[..32].fill(-0.0);
        let mut masked = Tensor::zeros(&shape);
        relu_backward(pool.as_dyn(), &input, &grad_output, &mut masked).unwrap();
        let mut want = Tensor::zeros(&shape);
        add(pool.as_dyn(), &addend, &masked, &mut want).unwrap();
        let mut got = Tensor::filled(&shape, 9.0);
        let work =
            relu_backward_add(pool.as_dyn(), &input, &grad_output, &addend, &mut got).unwrap();
        let bits = |t: &Tensor| t.data.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want));
        assert!(got.data[..32].iter().all(|v| v.to_bits() == 0));
        assert!(masked.data.iter().filter(|&&v| v == 0.0).count() > 64);
        assert_eq!(work.flops, 2.0 * input.len() as f64);
    }

    /// A mismatched operand is an error naming the kernel and the operand.
    #[test]
    fn relu_backward_add_rejects_a_mismatched_addend() {
        let pool = Pool::new(PoolOptions::new(PoolKind::Simple, 1, "relu-add")).unwrap();
        let x = Tensor::zeros(&[2, 3]);
        let addend = Tensor::zeros(&[3, 2]);
        let mut out = Tensor::zeros(&[2, 3]);
        let error = relu_backward_add(pool.as_dyn(), &x, &x, &addend, &mut out)
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("relu_backward_add: the addend"),
            "{error}"
        );
    }
}
