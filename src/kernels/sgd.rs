//! [`sgd_update`]: `w -= lr * g`, optionally with momentum (`v = mu v + g; w -= lr v`) and
//! weight decay (`g + wd w` in place of `g`), as PyTorch's `SGD` does it.
//!
//! # Parallelism and determinism
//! Chunks of [`ELEMENTWISE_CHUNK`] weights (and their velocities), one `parallel_for` item
//! each; every weight depends only on its own gradient, so any partition gives the same bits.
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
    let decayed = |w: f32, g: f32| g + params.weight_decay * w;
    if params.momentum == 0.0 {
        let cost = item_cost(2.0 * chunk, chunk, 4.0 * chunk, VECTOR_FLOPS_PER_CYCLE);
        for_each_chunk(
            pool,
            &mut weight.data,
            ELEMENTWISE_CHUNK,
            cost,
            |index, w| {
                let g = &grad.data[index * ELEMENTWISE_CHUNK..];
                for (w, &g) in w.iter_mut().zip(g) {
                    *w -= params.learning_rate * decayed(*w, g);
                }
            },
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
        |index, w, v| {
            let g = &grad.data[index * ELEMENTWISE_CHUNK..];
            for ((w, v), &g) in w.iter_mut().zip(v.iter_mut()).zip(g) {
                *v = params.momentum * *v + decayed(*w, g);
                *w -= params.learning_rate * *v;
            }
        },
    );
    Ok(Work::new(6.0 * len, 5.0 * len))
}
