//! Batch normalization over NCHW: inference (running statistics), training forward (batch
//! statistics) and its backward.
//!
//! For channel `c` over all `M = N H W` values:
//! `y = gamma_c (x - mean_c) / sqrt(var_c + eps) + beta_c`. Training uses the batch's mean and biased variance and saves them in
//! [`BatchStats`] (as `mean` and `inv_std = 1 / sqrt(var + eps)`) for the backward pass, which
//! computes, with `xhat = (x - mean) inv_std`:
//! `dbeta = sum dy`, `dgamma = sum dy xhat`, `dx = gamma inv_std / M (M dy - dbeta - xhat dgamma)`.
//! Updating running statistics is left to the caller (it is a handful of scalar ops).
//!
//! # Parallelism and determinism
//! Per-channel sums are one `parallel_for` item per channel, summed by one thread in a fixed
//! order: each plane (image) in turn is summed in [`LANES`] `f32` lanes (value `i` into lane
//! `i % LANES`, a loop the compiler vectorizes), the lanes are added in order in `f64`, and
//! the planes' sums are added in image order in `f64`. The element-wise passes are one item
//! per (image, channel) plane, contiguous inner loops. Nothing depends on the thread count.
#![forbid(unsafe_code)]

use super::error::{expect_rank, expect_shape, KernelError};
use super::norm::{NormGrads, NormParams};
use super::par::{for_each_chunk, for_each_chunk_pair, item_cost, VECTOR_FLOPS_PER_CYCLE};
use super::tensor::Tensor;
use super::work::Work;
use crate::pool::parallel_for::Cost;
use crate::pool::ThreadPool;

/// The batch statistics a training forward pass saves for its backward pass.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchStats {
    /// Mean per channel.
    pub mean: Tensor,
    /// `1 / sqrt(var + eps)` per channel (biased variance).
    pub inv_std: Tensor,
}

impl BatchStats {
    /// Zeroed statistics for `channels` channels, ready to be filled by [`batch_norm_train`].
    pub fn zeros(channels: usize) -> Self {
        BatchStats {
            mean: Tensor::zeros(&[channels]),
            inv_std: Tensor::zeros(&[channels]),
        }
    }
}

/// The sizes of one batch-norm call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchNormGeometry {
    /// Images (N).
    pub batch: usize,
    /// Channels (C).
    pub channels: usize,
    /// Pixels per plane (H W).
    pub pixels: usize,
}

impl BatchNormGeometry {
    /// The geometry of an NCHW input, checked against per-channel `params`.
    pub fn new(
        kernel: &'static str,
        input: &[usize],
        params: &NormParams<'_>,
    ) -> Result<Self, KernelError> {
        let [batch, channels, height, width] = expect_rank(kernel, "input", input, "N, C, H, W")?;
        expect_shape(kernel, "gamma", &params.gamma.shape, &[channels])?;
        expect_shape(kernel, "beta", &params.beta.shape, &[channels])?;
        Ok(BatchNormGeometry {
            batch,
            channels,
            pixels: height * width,
        })
    }

    fn values(&self) -> f64 {
        (self.batch * self.channels * self.pixels) as f64
    }

    /// Inference: a multiply-add per value; reads and writes every value once.
    pub fn inference_work(&self) -> Work {
        Work::new(2.0 * self.values(), 2.0 * self.values())
    }

    /// Training forward: mean and variance passes (3 flops a value) and the normalization.
    pub fn train_work(&self) -> Work {
        Work::new(5.0 * self.values(), 4.0 * self.values())
    }

    /// Backward: two sums (3 flops a value) and the input gradient (5 flops a value).
    pub fn backward_work(&self) -> Work {
        Work::new(8.0 * self.values(), 6.0 * self.values())
    }
}

/// `output = gamma (input - running_mean) / sqrt(running_var + eps) + beta`, per channel.
pub fn batch_norm_inference(
    pool: &dyn ThreadPool,
    input: &Tensor,
    params: &NormParams<'_>,
    running_mean: &Tensor,
    running_var: &Tensor,
    output: &mut Tensor,
) -> Result<Work, KernelError> {
    const KERNEL: &str = "batch_norm";
    let geometry = BatchNormGeometry::new(KERNEL, &input.shape, params)?;
    let channels = [geometry.channels];
    expect_shape(KERNEL, "running_mean", &running_mean.shape, &channels)?;
    expect_shape(KERNEL, "running_var", &running_var.shape, &channels)?;
    expect_shape(KERNEL, "the output", &output.shape, &input.shape)?;
    let scale_shift = |channel: usize| {
        let scale =
            params.gamma.data[channel] / (running_var.data[channel] + params.epsilon).sqrt();
        (
            scale,
            params.beta.data[channel] - running_mean.data[channel] * scale,
        )
    };
    scale_and_shift(pool, &geometry, &input.data, scale_shift, &mut output.data);
    Ok(geometry.inference_work())
}

/// Training forward: normalizes with the batch's own statistics, which it saves in `stats`.
pub fn batch_norm_train(
    pool: &dyn ThreadPool,
    input: &Tensor,
    params: &NormParams<'_>,
    output: &mut Tensor,
    stats: &mut BatchStats,
) -> Result<Work, KernelError> {
    const KERNEL: &str = "batch_norm_train";
    let geometry = BatchNormGeometry::new(KERNEL, &input.shape, params)?;
    let channels = [geometry.channels];
    expect_shape(KERNEL, "stats.mean", &stats.mean.shape, &channels)?;
    expect_shape(KERNEL, "stats.inv_std", &stats.inv_std.shape, &channels)?;
    expect_shape(KERNEL, "the output", &output.shape, &input.shape)?;
    batch_statistics(pool, &geometry, &input.data, params.epsilon, stats);
    let scale_shift = |channel: usize| {
        let scale = params.gamma.data[channel] * stats.inv_std.data[channel];
        (
            scale,
            params.beta.data[channel] - stats.mean.data[channel] * scale,
        )
    };
    scale_and_shift(pool, &geometry, &input.data, scale_shift, &mut output.data);
    Ok(geometry.train_work())
}

/// The batch statistics [`batch_norm_train`] saves, computed from `input` alone (bitwise the
/// same values): for a backward pass that recomputes them instead of keeping them.
pub fn batch_norm_stats(
    pool: &dyn ThreadPool,
    input: &Tensor,
    epsilon: f32,
    stats: &mut BatchStats,
) -> Result<Work, KernelError> {
    const KERNEL: &str = "batch_norm_stats";
    let [batch, channels, height, width] =
        expect_rank(KERNEL, "input", &input.shape, "N, C, H, W")?;
    expect_shape(KERNEL, "stats.mean", &stats.mean.shape, &[channels])?;
    expect_shape(KERNEL, "stats.inv_std", &stats.inv_std.shape, &[channels])?;
    let geometry = BatchNormGeometry {
        batch,
        channels,
        pixels: height * width,
    };
    batch_statistics(pool, &geometry, &input.data, epsilon, stats);
    Ok(Work::new(3.0 * geometry.values(), geometry.values()))
}

/// Gradients of [`batch_norm_train`] from its `input`, the `stats` it saved and `grad_output`.
pub fn batch_norm_backward(
    pool: &dyn ThreadPool,
    input: &Tensor,
    grad_output: &Tensor,
    params: &NormParams<'_>,
    stats: &BatchStats,
    grads: &mut NormGrads,
) -> Result<Work, KernelError> {
    const KERNEL: &str = "batch_norm_backward";
    let geometry = BatchNormGeometry::new(KERNEL, &input.shape, params)?;
    let channels = [geometry.channels];
    expect_shape(KERNEL, "grad_output", &grad_output.shape, &input.shape)?;
    expect_shape(KERNEL, "stats.mean", &stats.mean.shape, &channels)?;
    expect_shape(KERNEL, "stats.inv_std", &stats.inv_std.shape, &channels)?;
    expect_shape(KERNEL, "grad_input", &grads.grad_input.shape, &input.shape)?;
    expect_shape(KERNEL, "grad_gamma", &grads.grad_gamma.shape, &channels)?;
    expect_shape(KERNEL, "grad_beta", &grads.grad_beta.shape, &channels)?;
    let (x, dy) = (&input.data, &grad_output.data);
    let (grad_gamma, grad_beta) = (&mut grads.grad_gamma.data, &mut grads.grad_beta.data);
    gamma_beta_grads(pool, &geometry, (x, dy), stats, (grad_gamma, grad_beta));
    let sums = (&grads.grad_gamma.data[..], &grads.grad_beta.data[..]);
    let slopes = ChannelSlopes {
        gamma: &params.gamma.data,
        stats,
        sums,
    };
    input_grads(
        pool,
        &geometry,
        (x, dy),
        &slopes,
        &mut grads.grad_input.data,
    );
    Ok(geometry.backward_work())
}

/// `dgamma_c = sum dy xhat` and `dbeta_c = sum dy`: one item per channel, in `f64`.
fn gamma_beta_grads(
    pool: &dyn ThreadPool,
    geometry: &BatchNormGeometry,
    (x, dy): (&[f32], &[f32]),
    stats: &BatchStats,
    (grad_gamma, grad_beta): (&mut [f32], &mut [f32]),
) {
    let cost = channel_cost(geometry, 2.0, 4.0);
    for_each_chunk_pair(
        pool,
        grad_gamma,
        1,
        grad_beta,
        1,
        cost,
        |channel, dgamma, dbeta| {
            let (mean, inv_std) = (stats.mean.data[channel], stats.inv_std.data[channel]);
            let (mut sum_dy, mut sum_dy_centred) = (0.0f64, 0.0f64);
            for plane in channel_planes(geometry, channel) {
                let (x, dy) = (&x[plane.clone()], &dy[plane]);
                sum_dy += lane_sum(dy, |dy| dy);
                sum_dy_centred += lane_sum2(x, dy, |x, dy| dy * (x - mean));
            }
            // sum dy xhat = inv_std sum dy (x - mean): inv_std is the same for every term.
            let sum_dy_xhat = sum_dy_centred * f64::from(inv_std);
            (dgamma[0], dbeta[0]) = (sum_dy_xhat as f32, sum_dy as f32);
        },
    );
}

/// What the input gradient of a channel needs: `gamma`, the saved statistics, and the sums
/// `(dgamma, dbeta)` the first backward pass made.
struct ChannelSlopes<'a> {
    gamma: &'a [f32],
    stats: &'a BatchStats,
    sums: (&'a [f32], &'a [f32]),
}

/// `dx = gamma inv_std / M (M dy - dbeta - xhat dgamma)`: one item per (image, channel) plane.
fn input_grads(
    pool: &dyn ThreadPool,
    geometry: &BatchNormGeometry,
    (x, dy): (&[f32], &[f32]),
    slopes: &ChannelSlopes<'_>,
    grad_input: &mut [f32],
) {
    let pixels = geometry.pixels;
    let count = (geometry.batch * pixels) as f32;
    let values = pixels as f64;
    let cost = item_cost(3.0 * values, values, 5.0 * values, VECTOR_FLOPS_PER_CYCLE);
    for_each_chunk(pool, grad_input, pixels, cost, |plane_index, dx| {
        let channel = plane_index % geometry.channels;
        let stats = slopes.stats;
        let (mean, inv_std) = (stats.mean.data[channel], stats.inv_std.data[channel]);
        let (dgamma, dbeta) = (slopes.sums.0[channel], slopes.sums.1[channel]);
        let factor = slopes.gamma[channel] * inv_std / count;
        let plane = plane_index * pixels..(plane_index + 1) * pixels;
        for ((dx, &x), &dy) in dx.iter_mut().zip(&x[plane.clone()]).zip(&dy[plane]) {
            let xhat = (x - mean) * inv_std;
            *dx = factor * (count * dy - dbeta - xhat * dgamma);
        }
    });
}

/// The index ranges of channel `channel`'s planes, image by image.
fn channel_planes(
    geometry: &BatchNormGeometry,
    channel: usize,
) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
    (0..geometry.batch).map(move |image| {
        let start = (image * geometry.channels + channel) * geometry.pixels;
        start..start + geometry.pixels
    })
}

/// The cost of one per-channel item: `loads` values read and `flops` per value of the channel.
fn channel_cost(geometry: &BatchNormGeometry, loads: f64, flops: f64) -> Cost {
    let values = (geometry.batch * geometry.pixels) as f64;
    item_cost(loads * values, 1.0, flops * values, VECTOR_FLOPS_PER_CYCLE)
}

/// Fills `stats` with each channel's mean and `1 / sqrt(var + eps)`: two passes (the mean,
/// then the squared deviations from it), each a lane sum per plane.
fn batch_statistics(
    pool: &dyn ThreadPool,
    geometry: &BatchNormGeometry,
    x: &[f32],
    epsilon: f32,
    stats: &mut BatchStats,
) {
    let count = (geometry.batch * geometry.pixels).max(1) as f64;
    let cost = channel_cost(geometry, 2.0, 3.0);
    let (mean, inv_std) = (&mut stats.mean.data, &mut stats.inv_std.data);
    for_each_chunk_pair(pool, mean, 1, inv_std, 1, cost, |channel, mean, inv_std| {
        let sum: f64 = channel_planes(geometry, channel)
            .map(|plane| lane_sum(&x[plane], |value| value))
            .sum();
        let channel_mean = (sum / count) as f32;
        let squares: f64 = channel_planes(geometry, channel)
            .map(|plane| lane_sum(&x[plane], |value| (value - channel_mean).powi(2)))
            .sum();
        mean[0] = channel_mean;
        inv_std[0] = (1.0 / (squares / count + f64::from(epsilon)).sqrt()) as f32;
    });
}

/// Lanes of a vectorizable sum: 16 `f32` (one AVX-512 register, two AVX ones).
pub const LANES: usize = 16;

/// `sum term(v)` over `values`: value `i` added into lane `i % LANES` in `f32`, then the lanes
/// and the tail in order in `f64`. Same values, same bits, on every thread.
fn lane_sum(values: &[f32], term: impl Fn(f32) -> f32) -> f64 {
    let mut lanes = [0.0f32; LANES];
    let chunks = values.chunks_exact(LANES);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (lane, &value) in lanes.iter_mut().zip(chunk) {
            *lane += term(value);
        }
    }
    let lanes: f64 = lanes.iter().map(|&lane| f64::from(lane)).sum();
    tail.iter()
        .fold(lanes, |total, &value| total + f64::from(term(value)))
}

/// [`lane_sum`] of `term(a[i], b[i])` over two slices of one length.
fn lane_sum2(a: &[f32], b: &[f32], term: impl Fn(f32, f32) -> f32) -> f64 {
    let mut lanes = [0.0f32; LANES];
    let (chunks_a, chunks_b) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (tail_a, tail_b) = (chunks_a.remainder(), chunks_b.remainder());
    for (chunk_a, chunk_b) in chunks_a.zip(chunks_b) {
        for ((lane, &a), &b) in lanes.iter_mut().zip(chunk_a).zip(chunk_b) {
            *lane += term(a, b);
        }
    }
    let lanes: f64 = lanes.iter().map(|&lane| f64::from(lane)).sum();
    tail_a
        .iter()
        .zip(tail_b)
        .fold(lanes, |total, (&a, &b)| total + f64::from(term(a, b)))
}

/// `y = x scale_c + shift_c` with `(scale_c, shift_c) = scale_shift(c)`, one item per plane.
fn scale_and_shift(
    pool: &dyn ThreadPool,
    geometry: &BatchNormGeometry,
    x: &[f32],
    scale_shift: impl Fn(usize) -> (f32, f32) + Sync,
    y: &mut [f32],
) {
    let pixels = geometry.pixels;
    let cost = item_cost(
        pixels as f64,
        pixels as f64,
        2.0 * pixels as f64,
        VECTOR_FLOPS_PER_CYCLE,
    );
    for_each_chunk(pool, y, pixels, cost, |plane_index, y| {
        let (scale, shift) = scale_shift(plane_index % geometry.channels);
        let plane = &x[plane_index * pixels..(plane_index + 1) * pixels];
        for (y, &x) in y.iter_mut().zip(plane) {
            *y = x * scale + shift;
        }
    });
}
