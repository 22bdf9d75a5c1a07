//! [`sgd_update`]: `w -= lr * g`, optionally with momentum (`v = mu v + g; w -= lr v`) and
//! weight decay (`g + wd w` in place of `g`), as PyTorch's `SGD` does it.
//!
//! # Parallelism and determinism
//! Chunks of [`ELEMENTWISE_CHUNK`] weights (and their velocities), one `parallel_for` item
//! each; every weight depends only on its own gradient, so any partition gives the same bits.
//!
//! # Speed
//! Plain SGD reads the gradient and the weight and writes the weight: 12 bytes a value, a
//! streaming loop. Each chunk runs in a function of its own that holds the hyper-parameters
//! in locals: read through the closure's captured `params`, LLVM reloads them on every
//! element and leaves the loop scalar; as locals the loop is packed SSE, and the results are
//! the same bits (no reduction, the same expression per value).
//!
//! # In the training step
//! An update runs beside the convolutions of the next layers on the priority pool and shares
//! the cores with them, so its own span stretches while the cores stay busy: its cost to the
//! step is its bytes. Moving the updates off the priority pool, or onto the priority worker
//! alone (no `parallel_for`), is no faster (the measurements: `bench/KERNELS.md`).
#![forbid(unsafe_code)]

use super::elementwise::ELEMENTWISE_CHUNK;
use super::error::{expect_shape, KernelError};
use super::par::{for_each_chunk, for_each_chunk_pair, item_cost, VECTOR_FLOPS_PER_CYCLE};
use super::tensor::Tensor;
use super::work::Work;
use crate::pool::ThreadPool;

/// Hyper-parameters of one SGD step.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SgdParams {
    /// Learning rate.
    pub learning_rate: f32,
    /// Momentum `mu`; 0 for plain SGD (then no velocity is needed).
    pub momentum: f32,
    /// L2 weight decay added to the gradient.
    pub weight_decay: f32,
}

impl SgdParams {
    /// Plain SGD at `learning_rate`.
    pub fn plain(learning_rate: f32) -> Self {
        SgdParams {
            learning_rate,
            momentum: 0.0,
            weight_decay: 0.0,
        }
    }
}

/// One SGD step on `weight` from `grad`. With momentum, `velocity` (the weight's shape, zeros
/// at the first step) is required and updated; without, it is ignored.
///
/// ```
/// use enginetop::kernels::{sgd_update, SgdParams, Tensor};
/// use enginetop::pool::{Pool, PoolKind, PoolOptions};
/// let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "doc")).unwrap();
/// let mut weight = Tensor::filled(&[3], 1.0);
/// let grad = Tensor::filled(&[3], 2.0);
/// let params = SgdParams { learning_rate: 0.1, momentum: 0.9, weight_decay: 0.0 };
/// let mut velocity = Tensor::zeros(&[3]);
/// sgd_update(pool.as_dyn(), &mut weight, &grad, params, Some(&mut velocity)).unwrap();
/// sgd_update(pool.as_dyn(), &mut weight, &grad, params, Some(&mut velocity)).unwrap();
/// assert!((weight.data[0] - (1.0 - 0.2 - 0.38)).abs() < 1e-6); // v: 2, then 3.8
/// ```
pub fn sgd_update(
    pool: &dyn ThreadPool,
    weight: &mut Tensor,
    grad: &Tensor,
    params: SgdParams,
    velocity: Option<&mut Tensor>,
) -> Result<Work, KernelError> {
    expect_shape("sgd", "grad", &grad.shape, &weight.shape)?;
    let len = weight.len() as f64;
    let chunk = ELEMENTWISE_CHUNK as f64;
    if params.momentum == 0.0 {
        let cost = item_cost(2.0 * chunk, chunk, 4.0 * chunk, VECTOR_FLOPS_PER_CYCLE);
        for_each_chunk(
            pool,
            &mut weight.data,
            ELEMENTWISE_CHUNK,
            cost,
            |index, w| step_plain(w, &grad.data[index * ELEMENTWISE_CHUNK..], params),
        );
        return Ok(Work::new(4.0 * len, 3.0 * len));
    }
    let velocity = velocity.ok_or_else(|| {
        KernelError::shape(
            "sgd",
            "momentum is set but no velocity was given; pass a zeroed tensor of the weight's shape",
        )
    })?;
    expect_shape("sgd", "velocity", &velocity.shape, &weight.shape)?;
    let cost = item_cost(
        3.0 * chunk,
        2.0 * chunk,
        6.0 * chunk,
        VECTOR_FLOPS_PER_CYCLE,
    );
    let (w, v) = (&mut weight.data, &mut velocity.data);
    for_each_chunk_pair(
        pool,
        w,
        ELEMENTWISE_CHUNK,
        v,
        ELEMENTWISE_CHUNK,
        cost,
        |index, w, v| step_momentum(w, v, &grad.data[index * ELEMENTWISE_CHUNK..], params),
    );
    Ok(Work::new(6.0 * len, 5.0 * len))
}

/// Plain SGD on one chunk: `w -= lr * (g + wd w)` for each weight of `w` and its gradient in
/// `g` (at least as long). The hyper-parameters are copied into locals first: read through
/// the captured `params`, LLVM reloads them on every element and keeps the loop scalar
/// (`movss`/`mulss`); as locals the loop is packed SSE (`mulps`).
fn step_plain(w: &mut [f32], g: &[f32], params: SgdParams) {
    let (lr, wd) = (params.learning_rate, params.weight_decay);
    for (w, &g) in w.iter_mut().zip(g) {
        *w -= lr * (g + wd * *w);
    }
}

/// SGD with momentum on one chunk: `v = mu v + (g + wd w); w -= lr v`, element by element
/// (hyper-parameters in locals, as in [`step_plain`]).
fn step_momentum(w: &mut [f32], v: &mut [f32], g: &[f32], params: SgdParams) {
    let (lr, mu, wd) = (params.learning_rate, params.momentum, params.weight_decay);
    for ((w, v), &g) in w.iter_mut().zip(v.iter_mut()).zip(g) {
        *v = mu * *v + (g + wd * *w);
        *w -= lr * *v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::{Pool, PoolKind, PoolOptions};

    #[test]
    fn plain_sgd_with_weight_decay_is_the_rule_bit_for_bit_across_chunks_and_tails() {
        let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "sgd-test")).unwrap();
        let len = 2 * ELEMENTWISE_CHUNK + 7; // two whole chunks and a tail shorter than a vector
        let weight = Tensor::random(&[len], 61);
        let grad = Tensor::random(&[len], 62);
        let params = SgdParams {
            learning_rate: 0.3,
            momentum: 0.0,
            weight_decay: 0.05,
        };
        let mut updated = weight.clone();
        sgd_update(pool.as_dyn(), &mut updated, &grad, params, None).unwrap();
        for (i, ((&got, &w), &g)) in updated
            .data
            .iter()
            .zip(&weight.data)
            .zip(&grad.data)
            .enumerate()
        {
            let want = w - 0.3 * (g + 0.05 * w);
            assert_eq!(got.to_bits(), want.to_bits(), "weight {i}");
        }
    }
}
