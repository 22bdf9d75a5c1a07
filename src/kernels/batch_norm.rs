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
//! # Fused ReLU
//! [`batch_norm_train_activated`] with [`Activation::Relu`] writes `relu(bn(x))` in the
//! normalization pass, and
//! [`batch_norm_relu_backward_recomputed`] takes that output as one more read and applies the
//! ReLU's gradient to `dy` as it reads it (`dy` where the output is positive, else 0), as
//! oneDNN's `fuse_norm_relu` and MXNet's fused BatchNorm activation do. The separate `relu`
//! and `relu_backward` each read and write a whole activation; fused, the forward writes one
//! tensor instead of two and the backward writes the masked gradient into the channel's
//! `dx` planes (in cache) instead of into a tensor of its own. Results are bitwise those of
//! the separate kernels: the same per-value arithmetic, the same summation order. The fused
//! passes cost an extra read and select, far less than the separate passes they replace
//! (the measurements behind this file's choices: `bench/KERNELS.md`).
//!
//! # Fused residual add and ReLU
//! [`batch_norm_add_relu_train`] is a bottleneck's tail, `out = relu(bn(y) + shortcut)`:
//! the normalization pass reads the shortcut's plane beside the channel's (in cache) input
//! plane and writes `out` only, where batch_norm, add and relu write three whole tensors and
//! read four. The sum is never stored, and its backward needs none: the sum's gradient is
//! `dy` masked by `out > 0`, so the batch norm's gradient is
//! [`batch_norm_relu_backward_recomputed`] with `out` as the mask, and the shortcut's is the
//! same masked `dy` (a projection's batch norm masks it the same way; an identity shortcut's
//! is masked as [`relu_backward_add`](super::relu_backward_add) sums it into the main path's
//! gradient). Bitwise the separate kernels' results: `(x scale + shift) + r` rounds each
//! step as they do. The fused forward reads the shortcut and the fused backward the mask,
//! both in cache beside the channel's planes, in place of whole add, relu and relu_grad
//! passes over memory.
//!
//! # Parallelism and determinism
//! The training forwards ([`batch_norm_train`], [`batch_norm_train_activated`],
//! [`batch_norm_add_relu_train`]) and the backwards with recomputed statistics
//! ([`batch_norm_backward_recomputed`], [`batch_norm_relu_backward_recomputed`]) make each
//! channel whole in one `parallel_for` item: its statistics, sums and output planes (small
//! channels several to an item, phase by phase, below). A channel's planes (`N H
//! W` values, 16 KiB at batch 4 and 32x32) stay in the core's cache between the passes, so
//! the input is read from memory once instead of once per pass (the forward made two passes
//! over memory, the statistics then the normalization; the backward with recomputed
//! statistics four over `x` and two over `dy`; with the fused ReLU the masked `dy` is written
//! into the channel's `dx` planes and stays there for the sums and the gradient). The
//! separate kernels are one item per channel for the sums ([`batch_norm_stats`],
//! [`batch_norm_backward`]'s `dgamma` and `dbeta`) and one item per (image, channel) plane for
//! the element-wise passes ([`batch_norm_inference`], [`batch_norm_backward`]'s input
//! gradient), contiguous inner loops.
//!
//! A channel's sums are made by the one thread that has its item, in a fixed order: the
//! channel's planes (images) are taken in groups of `max(1, 1024 / (H W))` consecutive
//! images, each group is summed in [`LANES`] `f32` lanes (value `i` of each of its planes
//! into lane `i % LANES`, a loop the compiler vectorizes), the lanes are added in order in
//! `f64`, and the groups' sums are added in image order in `f64`. Planes of 1024 pixels or
//! more are groups of one (each plane its own lanes). Smaller planes share their lanes so
//! that reducing 16 lanes into `f64` (a chain of 16 dependent adds) is paid once per ~1024
//! values instead of once per plane: at 8x8 pixels that reduction costs more than the sums
//! (the order depends on the shape alone). Every value is computed by the
//! same per-plane code in the same order whichever path makes it, so the per-channel paths
//! give bitwise what the separate passes ([`batch_norm_stats`], then
//! [`batch_norm_backward`]) give, and nothing depends on the thread count.
//!
//! Small channels are made several to an item: consecutive channels, as many as fit in about
//! 4096 values (a divisor of the channel count, leaving at least 16 items), each made by the
//! same code as a channel alone, so the bits do not change. One item per channel costs far
//! more than the channel's own work at stages 3 and 4 (2048 channels of 4 x 16 values: the
//! item's lock, its share of `parallel_for`'s ranges and `for_each_strided_group`'s
//! per-piece tables).
//!
//! Within an item the channels go phase by phase (`item_statistics`, then the sums, then
//! the outputs): every channel's mean, every channel's `inv_std`, (backward) every channel's
//! `dgamma` and `dbeta`, then every channel's output planes. A small channel's sums are short
//! chains of dependent adds (a 16-lane reduction into `f64`, a division, a square root) that
//! the next pass over the same channel waits on; channel after channel the core would sit on those
//! latencies; phase by phase the channels' chains are independent and overlap. Each channel's
//! values are made by the same code in the same order, so the bits do not change (the
//! workload's checksum neither); the item's data (about 4096 values a tensor,
//! 16 KiB, or one larger channel alone) stays in L1/L2 between the phases. An item holds at most `MAX_ITEM_CHANNELS`
//! channels (the backward keeps their statistics in stack arrays). Two things that do not
//! pay: one pass making both backward sums (`sum dy` and `sum dy (x - mean)` in two sets of
//! lanes) vectorizes badly, and a pairwise reduction of the lanes (it would change the bits)
//! runs slower through codegen effects.
#![forbid(unsafe_code)]

use super::elementwise::relu_gradient;
use super::error::{expect_rank, expect_shape, KernelError};
use super::norm::{NormGrads, NormParams};
use super::par::{
    for_each_chunk, for_each_chunk_pair, for_each_strided_group, item_cost, units_per_item,
    VECTOR_FLOPS_PER_CYCLE,
};
use super::tensor::Tensor;
use super::work::Work;
use crate::pool::parallel_for::Cost;
use crate::pool::ThreadPool;
use std::ops::Range;

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
    pub(crate) fn inference_work(&self) -> Work {
        Work::new(2.0 * self.values(), 2.0 * self.values())
    }

    /// Batch statistics alone: the mean and variance passes (3 flops a value, one read).
    pub(crate) fn stats_work(&self) -> Work {
        Work::new(3.0 * self.values(), self.values())
    }

    /// Training forward: mean and variance passes (3 flops a value) and the normalization.
    pub(crate) fn train_work(&self) -> Work {
        Work::new(5.0 * self.values(), 4.0 * self.values())
    }

    /// Backward: two sums (3 flops a value) and the input gradient (5 flops a value).
    pub(crate) fn backward_work(&self) -> Work {
        Work::new(8.0 * self.values(), 6.0 * self.values())
    }

    /// What a fused ReLU adds to the forward: one max per value.
    pub(crate) fn relu_forward_work(&self) -> Work {
        Work::new(self.values(), 0.0)
    }

    /// What a fused residual add and ReLU add to the forward: an add and a max per value, and
    /// the residual's read.
    pub(crate) fn add_relu_forward_work(&self) -> Work {
        Work::new(2.0 * self.values(), self.values())
    }

    /// What a fused ReLU adds to the backward: one select per value, which reads the forward
    /// output.
    pub(crate) fn relu_backward_work(&self) -> Work {
        Work::new(self.values(), self.values())
    }
}

/// The activation a batch norm applies to its output in its normalization pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// None: `y = bn(x)`.
    Identity,
    /// `y = max(bn(x), 0)`.
    Relu,
}

impl Activation {
    /// The training forward's name with this activation (errors name it).
    fn train_kernel(self) -> &'static str {
        match self {
            Activation::Identity => "batch_norm_train",
            Activation::Relu => "batch_norm_relu_train",
        }
    }

    /// The per-plane normalization that applies this activation.
    fn plane_pass(self) -> fn(&[f32], (f32, f32), &mut [f32]) {
        match self {
            Activation::Identity => plane_scale_shift,
            Activation::Relu => plane_scale_shift_relu,
        }
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
    batch_norm_train_activated(pool, input, params, Activation::Identity, output, stats)
}

/// [`batch_norm_train`] with `activation` applied in the normalization pass: with
/// [`Activation::Relu`], `output = max(bn(input), 0)`, bitwise what [`batch_norm_train`] then
/// [`relu`](super::relu) give. Each channel is made whole in one item (see the module docs).
pub fn batch_norm_train_activated(
    pool: &dyn ThreadPool,
    input: &Tensor,
    params: &NormParams<'_>,
    activation: Activation,
    output: &mut Tensor,
    stats: &mut BatchStats,
) -> Result<Work, KernelError> {
    let kernel = activation.train_kernel();
    let geometry = train_geometry(kernel, input, params, output, stats)?;
    let (operands, epilogue) = (
        (&input.data[..], params),
        Epilogue::Activated(activation.plane_pass()),
    );
    train_channels(pool, &geometry, operands, epilogue, output, stats);
    Ok(match activation {
        Activation::Identity => geometry.train_work(),
        Activation::Relu => geometry.train_work() + geometry.relu_forward_work(),
    })
}

/// A bottleneck's last batch norm, residual add and ReLU in one kernel:
/// `output = max(bn(input) + residual, 0)`, bitwise what [`batch_norm_train`], then
/// [`add`](super::add) of `residual`, then [`relu`](super::relu) give. The residual is read
/// in the normalization pass (see the module docs). Its gradient with respect to `input` is
/// [`batch_norm_relu_backward_recomputed`] with this `output` as the mask; with respect to
/// `residual` it is the masked output gradient ([`relu_backward_add`](super::relu_backward_add)
/// sums it into the gradient of the block's input).
///
/// ```
/// use enginetop::kernels::{batch_norm_add_relu_train, BatchStats, NormParams, Tensor};
/// use enginetop::pool::{Pool, PoolKind, PoolOptions};
/// let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "doc")).unwrap();
/// let (gamma, beta) = (Tensor::filled(&[1], 1.0), Tensor::zeros(&[1]));
/// let params = NormParams { gamma: &gamma, beta: &beta, epsilon: 0.0 };
/// let x = Tensor::from_vec(&[1, 1, 1, 2], vec![1.0, 3.0]).unwrap();
/// let residual = Tensor::from_vec(&[1, 1, 1, 2], vec![0.5, -2.0]).unwrap();
/// let mut out = Tensor::zeros(&[1, 1, 1, 2]);
/// let mut stats = BatchStats::zeros(1);
/// batch_norm_add_relu_train(pool.as_dyn(), &x, &residual, &params, &mut out, &mut stats)
///     .unwrap();
/// // bn(x) = [-1, 1]: -1 + 0.5 is cut to 0, 1 - 2 too.
/// assert_eq!(out.data, [0.0, 0.0]);
/// assert_eq!(stats.mean.data, [2.0]);
/// ```
pub fn batch_norm_add_relu_train(
    pool: &dyn ThreadPool,
    input: &Tensor,
    residual: &Tensor,
    params: &NormParams<'_>,
    output: &mut Tensor,
    stats: &mut BatchStats,
) -> Result<Work, KernelError> {
    const KERNEL: &str = "batch_norm_add_relu_train";
    let geometry = train_geometry(KERNEL, input, params, output, stats)?;
    expect_shape(KERNEL, "the residual", &residual.shape, &input.shape)?;
    let (operands, epilogue) = ((&input.data[..], params), Epilogue::AddRelu(&residual.data));
    train_channels(pool, &geometry, operands, epilogue, output, stats);
    Ok(geometry.train_work() + geometry.add_relu_forward_work())
}

/// The geometry of a training forward call of `kernel`, with `output` and `stats` checked
/// against it (errors name `kernel`).
fn train_geometry(
    kernel: &'static str,
    input: &Tensor,
    params: &NormParams<'_>,
    output: &Tensor,
    stats: &BatchStats,
) -> Result<BatchNormGeometry, KernelError> {
    let geometry = BatchNormGeometry::new(kernel, &input.shape, params)?;
    let channels = [geometry.channels];
    expect_shape(kernel, "stats.mean", &stats.mean.shape, &channels)?;
    expect_shape(kernel, "stats.inv_std", &stats.inv_std.shape, &channels)?;
    expect_shape(kernel, "the output", &output.shape, &input.shape)?;
    Ok(geometry)
}

/// What the normalization pass does after `x scale + shift`.
#[derive(Clone, Copy)]
enum Epilogue<'a> {
    /// Applies an activation ([`Activation::plane_pass`]).
    Activated(fn(&[f32], (f32, f32), &mut [f32])),
    /// Adds this residual (the input's shape), then applies a ReLU.
    AddRelu(&'a [f32]),
}

/// The training forward, one item per [`ChannelGroup`]: its channels' statistics (saved in
/// `stats`, [`item_statistics`]), then each channel's normalized planes with `epilogue`
/// applied.
fn train_channels(
    pool: &dyn ThreadPool,
    geometry: &BatchNormGeometry,
    (x, params): (&[f32], &NormParams<'_>),
    epilogue: Epilogue<'_>,
    output: &mut Tensor,
    stats: &mut BatchStats,
) {
    let group = ChannelGroup::new(geometry);
    let mut slots = group.slots(&mut stats.mean.data, &mut stats.inv_std.data);
    let loads = match epilogue {
        Epilogue::Activated(_) => 3.0,
        Epilogue::AddRelu(_) => 4.0,
    };
    let cost = channel_cost(geometry, group.channels, loads, 5.0);
    for_each_strided_group(
        pool,
        &mut output.data,
        group.piece_len(geometry),
        &mut slots,
        cost,
        |item, (means, inv_stds), y_pieces| {
            let first = item * group.channels;
            item_statistics(geometry, x, first, params.epsilon, (means, inv_stds));
            for (offset, (&mean, &inv_std)) in means.iter().zip(inv_stds.iter()).enumerate() {
                let channel = first + offset;
                let scale = params.gamma.data[channel] * inv_std;
                let shift = params.beta.data[channel] - mean * scale;
                let span = group.span(geometry, offset);
                for (y, plane) in y_pieces.iter_mut().zip(channel_planes(geometry, channel)) {
                    let y = &mut y[span.clone()];
                    match epilogue {
                        Epilogue::Activated(pass) => pass(&x[plane], (scale, shift), y),
                        Epilogue::AddRelu(residual) => {
                            let planes = (&x[plane.clone()], &residual[plane]);
                            plane_scale_shift_add_relu(planes, (scale, shift), y);
                        }
                    }
                }
            }
        },
    );
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
    Ok(geometry.stats_work())
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
    let geometry = backward_geometry(KERNEL, input, grad_output, params, grads)?;
    let channels = [geometry.channels];
    expect_shape(KERNEL, "stats.mean", &stats.mean.shape, &channels)?;
    expect_shape(KERNEL, "stats.inv_std", &stats.inv_std.shape, &channels)?;
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

/// Gradients of [`batch_norm_train`] from its `input` and `grad_output` alone: the batch
/// statistics are recomputed from `input`, and each channel (statistics, `dgamma`, `dbeta`,
/// then its input-gradient planes) is one item (see the module docs). Bitwise what
/// [`batch_norm_stats`] then [`batch_norm_backward`] give, and the same [`Work`] as the two.
///
/// ```
/// use enginetop::kernels::{batch_norm_backward_recomputed, NormGrads, NormParams, Tensor};
/// use enginetop::pool::{Pool, PoolKind, PoolOptions};
/// let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "doc")).unwrap();
/// let (gamma, beta) = (Tensor::filled(&[2], 1.0), Tensor::zeros(&[2]));
/// let params = NormParams { gamma: &gamma, beta: &beta, epsilon: 1e-5 };
/// let x = Tensor::random(&[2, 2, 3, 3], 1);
/// let dy = Tensor::filled(&[2, 2, 3, 3], 1.0);
/// let mut grads = NormGrads::zeros(&x.shape, 2);
/// batch_norm_backward_recomputed(pool.as_dyn(), &x, &dy, &params, &mut grads).unwrap();
/// // A constant output gradient moves nothing through the normalization.
/// assert!(grads.grad_input.data.iter().all(|v| v.abs() < 1e-3));
/// assert_eq!(grads.grad_beta.data, [18.0, 18.0]);
/// ```
pub fn batch_norm_backward_recomputed(
    pool: &dyn ThreadPool,
    input: &Tensor,
    grad_output: &Tensor,
    params: &NormParams<'_>,
    grads: &mut NormGrads,
) -> Result<Work, KernelError> {
    let kernel = "batch_norm_backward_recomputed";
    backward_recomputed(pool, kernel, (input, None, grad_output), params, grads)
}

/// Gradients of [`batch_norm_train_activated`] with [`Activation::Relu`] from its `input`,
/// its `output` (`relu(bn(input))`) and `grad_output` (the gradient of that output): the
/// ReLU's gradient is applied to
/// `grad_output` as it is read, and the rest is [`batch_norm_backward_recomputed`]. Bitwise
/// what [`relu_backward`](super::relu_backward) then [`batch_norm_backward_recomputed`] give.
pub fn batch_norm_relu_backward_recomputed(
    pool: &dyn ThreadPool,
    input: &Tensor,
    output: &Tensor,
    grad_output: &Tensor,
    params: &NormParams<'_>,
    grads: &mut NormGrads,
) -> Result<Work, KernelError> {
    let kernel = "batch_norm_relu_backward_recomputed";
    backward_recomputed(
        pool,
        kernel,
        (input, Some(output), grad_output),
        params,
        grads,
    )
}

/// The two recomputed backward passes after their checks: `kernel` names the caller in
/// errors, and a `relu_output` (the fused ReLU's output, the input's shape) masks `dy`.
fn backward_recomputed(
    pool: &dyn ThreadPool,
    kernel: &'static str,
    (input, relu_output, grad_output): (&Tensor, Option<&Tensor>, &Tensor),
    params: &NormParams<'_>,
    grads: &mut NormGrads,
) -> Result<Work, KernelError> {
    let geometry = backward_geometry(kernel, input, grad_output, params, grads)?;
    if let Some(output) = relu_output {
        expect_shape(kernel, "the output", &output.shape, &input.shape)?;
    }
    let operands = BackwardOperands {
        x: &input.data,
        dy: &grad_output.data,
        relu_output: relu_output.map(|output| &output.data[..]),
    };
    recomputed_channels(pool, &geometry, operands, params, grads);
    let relu_work = match relu_output {
        Some(_) => geometry.relu_backward_work(),
        None => Work::default(),
    };
    Ok(geometry.stats_work() + geometry.backward_work() + relu_work)
}

/// What a backward pass reads: the forward input, the output gradient, and with a fused ReLU
/// the forward's output (its mask).
#[derive(Clone, Copy)]
struct BackwardOperands<'a> {
    x: &'a [f32],
    dy: &'a [f32],
    relu_output: Option<&'a [f32]>,
}

/// The backward pass with recomputed statistics, one item per [`ChannelGroup`], phase by
/// phase: the channels' statistics, their `dgamma` and `dbeta`, then their input-gradient
/// planes ([`item_backward`]). With a fused ReLU the masked `dy` is first written into the
/// `dx` planes, and the sums and the gradient read it from there.
fn recomputed_channels(
    pool: &dyn ThreadPool,
    geometry: &BatchNormGeometry,
    operands: BackwardOperands<'_>,
    params: &NormParams<'_>,
    grads: &mut NormGrads,
) {
    let group = ChannelGroup::new(geometry);
    let (dgammas, dbetas) = (&mut grads.grad_gamma.data, &mut grads.grad_beta.data);
    let mut slots = group.slots(dgammas, dbetas);
    let cost = channel_cost(geometry, group.channels, 4.0, 11.0);
    for_each_strided_group(
        pool,
        &mut grads.grad_input.data,
        group.piece_len(geometry),
        &mut slots,
        cost,
        |item, (dgammas, dbetas), dx_pieces| {
            let first = item * group.channels;
            let mut moments = ([0.0f32; MAX_ITEM_CHANNELS], [0.0f32; MAX_ITEM_CHANNELS]);
            let count = dgammas.len();
            let (means, inv_stds) = (&mut moments.0[..count], &mut moments.1[..count]);
            item_statistics(
                geometry,
                operands.x,
                first,
                params.epsilon,
                (means, inv_stds),
            );
            let channels = ItemChannels {
                first,
                group,
                means,
                inv_stds,
            };
            item_backward(
                geometry,
                operands,
                params,
                &channels,
                (dgammas, dbetas),
                dx_pieces,
            );
        },
    );
}

/// The channels of one item and their statistics.
struct ItemChannels<'a> {
    /// The item's first channel.
    first: usize,
    group: ChannelGroup,
    means: &'a [f32],
    inv_stds: &'a [f32],
}

/// One item of [`recomputed_channels`] after its statistics: every channel's `(dgamma,
/// dbeta)` (into the slots), then every channel's input-gradient planes, values
/// `group.span(offset)` of each of `dx_pieces` (one piece per image). With a fused ReLU each
/// channel's masked `dy` is first written into its `dx` planes. Phase by phase, so that the
/// channels' reductions overlap (see the module docs); each channel's values are made as one
/// channel at a time would make them.
fn item_backward(
    geometry: &BatchNormGeometry,
    operands: BackwardOperands<'_>,
    params: &NormParams<'_>,
    channels: &ItemChannels<'_>,
    (dgammas, dbetas): (&mut [f32], &mut [f32]),
    dx_pieces: &mut [&mut [f32]],
) {
    let (x, dy) = (operands.x, operands.dy);
    let moments = |offset: usize| (channels.means[offset], channels.inv_stds[offset]);
    for (offset, slot) in dgammas.iter_mut().zip(dbetas.iter_mut()).enumerate() {
        let channel = channels.first + offset;
        let span = channels.group.span(geometry, offset);
        (*slot.0, *slot.1) = match operands.relu_output {
            None => {
                let plane = |image| plane_pair(geometry, (x, dy), channel, image);
                channel_grad_sums(geometry, plane, moments(offset))
            }
            Some(output) => {
                let planes = channel_planes(geometry, channel);
                for (dx, plane) in dx_pieces.iter_mut().zip(planes) {
                    plane_relu_grad(&output[plane.clone()], &dy[plane], &mut dx[span.clone()]);
                }
                let masked: &[&mut [f32]] = dx_pieces;
                let (start, end) = (span.start, span.end);
                let plane = |image| {
                    let (x, _) = plane_pair(geometry, (x, x), channel, image);
                    (x, &masked[image][start..end])
                };
                channel_grad_sums(geometry, plane, moments(offset))
            }
        };
    }
    for (offset, (&dgamma, &dbeta)) in dgammas.iter().zip(dbetas.iter()).enumerate() {
        let channel = channels.first + offset;
        let span = channels.group.span(geometry, offset);
        let gamma = params.gamma.data[channel];
        let slope = PlaneSlope::new(geometry, gamma, moments(offset), (dgamma, dbeta));
        let planes = channel_planes(geometry, channel);
        for (dx, plane) in dx_pieces.iter_mut().zip(planes) {
            let dx = &mut dx[span.clone()];
            match operands.relu_output {
                None => plane_input_grad(&x[plane.clone()], &dy[plane], &slope, dx),
                Some(_) => plane_input_grad_in_place(&x[plane], &slope, dx),
            }
        }
    }
}

/// Consecutive channels made in one parallel item (see the module docs): as many as
/// [`units_per_item`] allows (about 4096 values, at least 16 items) and at most
/// [`MAX_ITEM_CHANNELS`], a divisor of the channel count.
#[derive(Clone, Copy)]
struct ChannelGroup {
    channels: usize,
}

/// The most channels one item holds (the backward keeps their statistics in stack arrays).
const MAX_ITEM_CHANNELS: usize = 64;

impl ChannelGroup {
    fn new(geometry: &BatchNormGeometry) -> Self {
        let per_channel = (geometry.batch * geometry.pixels).max(1);
        let most = units_per_item(per_channel, geometry.channels).min(MAX_ITEM_CHANNELS);
        let channels = (1..=most.max(1))
            .rev()
            .find(|&count| geometry.channels % count == 0)
            .unwrap_or(1);
        ChannelGroup { channels }
    }

    /// The values of one image's planes of one item: the length of one piece of the output.
    fn piece_len(&self, geometry: &BatchNormGeometry) -> usize {
        self.channels * geometry.pixels
    }

    /// Where the plane of the item's channel `offset` lies in each piece.
    fn span(&self, geometry: &BatchNormGeometry, offset: usize) -> Range<usize> {
        offset * geometry.pixels..(offset + 1) * geometry.pixels
    }

    /// Two per-channel outputs cut into one pair of slices per item.
    fn slots<'a>(&self, a: &'a mut [f32], b: &'a mut [f32]) -> Vec<(&'a mut [f32], &'a mut [f32])> {
        let per_item = self.channels;
        a.chunks_mut(per_item).zip(b.chunks_mut(per_item)).collect()
    }
}

/// The geometry of a backward call of `kernel`, with `grad_output` and `grads` checked
/// against it (errors name `kernel`).
fn backward_geometry(
    kernel: &'static str,
    input: &Tensor,
    grad_output: &Tensor,
    params: &NormParams<'_>,
    grads: &NormGrads,
) -> Result<BatchNormGeometry, KernelError> {
    let geometry = BatchNormGeometry::new(kernel, &input.shape, params)?;
    let channels = [geometry.channels];
    expect_shape(kernel, "grad_output", &grad_output.shape, &input.shape)?;
    expect_shape(kernel, "grad_input", &grads.grad_input.shape, &input.shape)?;
    expect_shape(kernel, "grad_gamma", &grads.grad_gamma.shape, &channels)?;
    expect_shape(kernel, "grad_beta", &grads.grad_beta.shape, &channels)?;
    Ok(geometry)
}

/// `dgamma_c = sum dy xhat` and `dbeta_c = sum dy`: one item per channel, in `f64`.
fn gamma_beta_grads(
    pool: &dyn ThreadPool,
    geometry: &BatchNormGeometry,
    (x, dy): (&[f32], &[f32]),
    stats: &BatchStats,
    (grad_gamma, grad_beta): (&mut [f32], &mut [f32]),
) {
    let cost = channel_cost(geometry, 1, 2.0, 4.0);
    for_each_chunk_pair(
        pool,
        grad_gamma,
        1,
        grad_beta,
        1,
        cost,
        |channel, dgamma, dbeta| {
            let moments = (stats.mean.data[channel], stats.inv_std.data[channel]);
            let plane = |image| plane_pair(geometry, (x, dy), channel, image);
            (dgamma[0], dbeta[0]) = channel_grad_sums(geometry, plane, moments);
        },
    );
}

/// A channel's `(dgamma, dbeta) = (sum dy xhat, sum dy)` over its planes in image order;
/// `plane(image)` is that image's `(x, dy)` plane pair.
fn channel_grad_sums<'a>(
    geometry: &'a BatchNormGeometry,
    plane: impl Fn(usize) -> (&'a [f32], &'a [f32]) + Copy + 'a,
    (mean, inv_std): (f32, f32),
) -> (f32, f32) {
    let (mut sum_dy, mut sum_dy_centred) = (0.0f64, 0.0f64);
    let dy_twice = move |image| {
        let (_, dy) = plane(image);
        (dy, dy)
    };
    for group in group_sums(geometry, dy_twice, |dy, _| dy) {
        sum_dy += group;
    }
    for group in group_sums(geometry, plane, move |x, dy| dy * (x - mean)) {
        sum_dy_centred += group;
    }
    // sum dy xhat = inv_std sum dy (x - mean): inv_std is the same for every term.
    let sum_dy_xhat = sum_dy_centred * f64::from(inv_std);
    (sum_dy_xhat as f32, sum_dy as f32)
}

/// Image `image`'s plane of channel `channel` in `a` and in `b`.
fn plane_pair<'a>(
    geometry: &BatchNormGeometry,
    (a, b): (&'a [f32], &'a [f32]),
    channel: usize,
    image: usize,
) -> (&'a [f32], &'a [f32]) {
    let start = (image * geometry.channels + channel) * geometry.pixels;
    let plane = start..start + geometry.pixels;
    (&a[plane.clone()], &b[plane])
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
    let values = pixels as f64;
    let cost = item_cost(3.0 * values, values, 5.0 * values, VECTOR_FLOPS_PER_CYCLE);
    for_each_chunk(pool, grad_input, pixels, cost, |plane_index, dx| {
        let channel = plane_index % geometry.channels;
        let stats = slopes.stats;
        let moments = (stats.mean.data[channel], stats.inv_std.data[channel]);
        let sums = (slopes.sums.0[channel], slopes.sums.1[channel]);
        let slope = PlaneSlope::new(geometry, slopes.gamma[channel], moments, sums);
        let plane = plane_index * pixels..(plane_index + 1) * pixels;
        plane_input_grad(&x[plane.clone()], &dy[plane], &slope, dx);
    });
}

/// A channel's constants in `dx = factor (count dy - dbeta - xhat dgamma)`.
struct PlaneSlope {
    mean: f32,
    inv_std: f32,
    dgamma: f32,
    dbeta: f32,
    factor: f32,
    count: f32,
}

impl PlaneSlope {
    /// The constants of a channel with scale `gamma`, statistics `(mean, inv_std)` and sums
    /// `(dgamma, dbeta)`.
    fn new(
        geometry: &BatchNormGeometry,
        gamma: f32,
        (mean, inv_std): (f32, f32),
        (dgamma, dbeta): (f32, f32),
    ) -> Self {
        let count = (geometry.batch * geometry.pixels) as f32;
        PlaneSlope {
            mean,
            inv_std,
            dgamma,
            dbeta,
            factor: gamma * inv_std / count,
            count,
        }
    }

    /// `dx` for one value `x` with output gradient `dy`.
    #[inline(always)]
    fn input_grad(&self, x: f32, dy: f32) -> f32 {
        let xhat = (x - self.mean) * self.inv_std;
        self.factor * (self.count * dy - self.dbeta - xhat * self.dgamma)
    }
}

/// One plane of the input gradient.
fn plane_input_grad(x: &[f32], dy: &[f32], slope: &PlaneSlope, dx: &mut [f32]) {
    for ((dx, &x), &dy) in dx.iter_mut().zip(x).zip(dy) {
        *dx = slope.input_grad(x, dy);
    }
}

/// [`plane_input_grad`] with `dy` already in `dx` (the masked gradient of a fused ReLU).
fn plane_input_grad_in_place(x: &[f32], slope: &PlaneSlope, dx: &mut [f32]) {
    for (dx, &x) in dx.iter_mut().zip(x) {
        *dx = slope.input_grad(x, *dx);
    }
}

/// One plane of the ReLU's gradient ([`relu_gradient`], what
/// [`relu_backward`](super::relu_backward) computes) taken from the ReLU's `output`.
fn plane_relu_grad(output: &[f32], dy: &[f32], masked: &mut [f32]) {
    for ((masked, &output), &dy) in masked.iter_mut().zip(output).zip(dy) {
        *masked = relu_gradient(output, dy);
    }
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

/// The cost of one item of `channels` channels: `loads` values read and `flops` per value.
fn channel_cost(geometry: &BatchNormGeometry, channels: usize, loads: f64, flops: f64) -> Cost {
    let values = (channels * geometry.batch * geometry.pixels) as f64;
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
    let cost = channel_cost(geometry, 1, 2.0, 3.0);
    let (mean, inv_std) = (&mut stats.mean.data, &mut stats.inv_std.data);
    for_each_chunk_pair(pool, mean, 1, inv_std, 1, cost, |channel, mean, inv_std| {
        (mean[0], inv_std[0]) = channel_statistics(geometry, x, channel, epsilon);
    });
}

/// Channel `channel`'s `(mean, 1 / sqrt(var + eps))`: the mean, then the squared deviations
/// from it, each a lane sum per plane, planes in image order.
fn channel_statistics(
    geometry: &BatchNormGeometry,
    x: &[f32],
    channel: usize,
    epsilon: f32,
) -> (f32, f32) {
    let mean = channel_mean(geometry, x, channel);
    (mean, channel_inv_std(geometry, x, channel, mean, epsilon))
}

/// The statistics of an item's channels `first..first + means.len()` into `means` and
/// `inv_stds`, phase by phase: every channel's mean, then every channel's `inv_std`, each as
/// [`channel_statistics`] makes it (the same bits). A channel's mean and its variance are one
/// chain of dependent reductions; phase by phase the channels' chains are independent work
/// the core overlaps (see the module docs).
fn item_statistics(
    geometry: &BatchNormGeometry,
    x: &[f32],
    first: usize,
    epsilon: f32,
    (means, inv_stds): (&mut [f32], &mut [f32]),
) {
    for (offset, mean) in means.iter_mut().enumerate() {
        *mean = channel_mean(geometry, x, first + offset);
    }
    for (offset, (inv_std, &mean)) in inv_stds.iter_mut().zip(means.iter()).enumerate() {
        *inv_std = channel_inv_std(geometry, x, first + offset, mean, epsilon);
    }
}

/// The values of one channel, as the `f64` count the statistics divide by.
fn channel_count(geometry: &BatchNormGeometry) -> f64 {
    (geometry.batch * geometry.pixels).max(1) as f64
}

/// Channel `channel`'s mean: a lane sum per group of planes, the groups in image order.
fn channel_mean(geometry: &BatchNormGeometry, x: &[f32], channel: usize) -> f32 {
    let sum: f64 = channel_group_sums(geometry, (x, x), channel, |value, _| value).sum();
    (sum / channel_count(geometry)) as f32
}

/// Channel `channel`'s `1 / sqrt(var + eps)` from its `mean`: the squared deviations summed
/// as [`channel_mean`] sums the values.
fn channel_inv_std(
    geometry: &BatchNormGeometry,
    x: &[f32],
    channel: usize,
    mean: f32,
    epsilon: f32,
) -> f32 {
    let squares: f64 =
        channel_group_sums(geometry, (x, x), channel, |value, _| (value - mean).powi(2)).sum();
    (1.0 / (squares / channel_count(geometry) + f64::from(epsilon)).sqrt()) as f32
}

/// Lanes of a vectorizable sum: 16 `f32` (one AVX-512 register, two AVX ones).
pub(super) const LANES: usize = 16;

/// About how many values one set of lanes sums before it is reduced into `f64`: a channel's
/// planes are summed in groups of `max(1, GROUP_VALUES / (H W))` planes (see the module docs).
const GROUP_VALUES: usize = 1024;

/// Planes of one channel summed into one set of lanes.
fn planes_per_group(geometry: &BatchNormGeometry) -> usize {
    (GROUP_VALUES / geometry.pixels.max(1)).max(1)
}

/// The sums of `term(a[i], b[i])` over channel `channel`'s planes of `a` and `b`, one per
/// group of [`planes_per_group`] planes in image order (see [`group_sums`]).
fn channel_group_sums<'a>(
    geometry: &'a BatchNormGeometry,
    (a, b): (&'a [f32], &'a [f32]),
    channel: usize,
    term: impl Fn(f32, f32) -> f32 + Copy + 'a,
) -> impl Iterator<Item = f64> + 'a {
    let plane = move |image| plane_pair(geometry, (a, b), channel, image);
    group_sums(geometry, plane, term)
}

/// The sums of `term(a[i], b[i])` over a channel's plane pairs (`plane(image)` gives image
/// `image`'s), one per group of [`planes_per_group`] planes in image order, each by
/// [`lane_sum`].
fn group_sums<'a>(
    geometry: &'a BatchNormGeometry,
    plane: impl Fn(usize) -> (&'a [f32], &'a [f32]) + Copy + 'a,
    term: impl Fn(f32, f32) -> f32 + Copy + 'a,
) -> impl Iterator<Item = f64> + 'a {
    let per_group = planes_per_group(geometry);
    (0..geometry.batch).step_by(per_group).map(move |first| {
        let images = first..(first + per_group).min(geometry.batch);
        lane_sum(images.map(plane), term)
    })
}

/// `sum term(a[i], b[i])` over pairs of slices of one length (`planes`): value `i` of every
/// pair added into lane `i % LANES` in `f32`, then the lanes in order in `f64`, then each
/// pair's tail (its last `len % LANES` values) in order in `f64`. Same values, same bits, on
/// every thread.
fn lane_sum<'a>(
    planes: impl Iterator<Item = (&'a [f32], &'a [f32])> + Clone,
    term: impl Fn(f32, f32) -> f32,
) -> f64 {
    let mut lanes = [0.0f32; LANES];
    for (a, b) in planes.clone() {
        for (chunk_a, chunk_b) in a.chunks_exact(LANES).zip(b.chunks_exact(LANES)) {
            for ((lane, &a), &b) in lanes.iter_mut().zip(chunk_a).zip(chunk_b) {
                *lane += term(a, b);
            }
        }
    }
    let lanes: f64 = lanes.iter().map(|&lane| f64::from(lane)).sum();
    planes.fold(lanes, |total, (a, b)| {
        let (tail_a, tail_b) = (
            a.chunks_exact(LANES).remainder(),
            b.chunks_exact(LANES).remainder(),
        );
        tail_a
            .iter()
            .zip(tail_b)
            .fold(total, |total, (&a, &b)| total + f64::from(term(a, b)))
    })
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
        let scale_shift = scale_shift(plane_index % geometry.channels);
        let plane = &x[plane_index * pixels..(plane_index + 1) * pixels];
        plane_scale_shift(plane, scale_shift, y);
    });
}

/// `y = x scale + shift` over one plane.
fn plane_scale_shift(x: &[f32], (scale, shift): (f32, f32), y: &mut [f32]) {
    for (y, &x) in y.iter_mut().zip(x) {
        *y = x * scale + shift;
    }
}

/// `y = max(x scale + shift, 0)` over one plane (a fused ReLU).
fn plane_scale_shift_relu(x: &[f32], (scale, shift): (f32, f32), y: &mut [f32]) {
    for (y, &x) in y.iter_mut().zip(x) {
        *y = (x * scale + shift).max(0.0);
    }
}

/// `y = max((x scale + shift) + r, 0)` over one plane and its residual `r` (a fused add and
/// ReLU; each operation rounds as the separate kernels' do).
fn plane_scale_shift_add_relu((x, r): (&[f32], &[f32]), (scale, shift): (f32, f32), y: &mut [f32]) {
    for ((y, &x), &r) in y.iter_mut().zip(x).zip(r) {
        *y = ((x * scale + shift) + r).max(0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::{Pool, PoolKind, PoolOptions};

    /// Planes of 1024 pixels or more keep their own lanes; smaller ones share them in groups
    /// of about 1024 values, in image order, and the grouped sum is still the sum.
    #[test]
    fn small_planes_share_lanes_and_still_sum_right() {
        let geometry = |batch, pixels| BatchNormGeometry {
            batch,
            channels: 3,
            pixels,
        };
        assert_eq!(planes_per_group(&geometry(4, 32 * 32)), 1);
        assert_eq!(planes_per_group(&geometry(4, 50 * 50)), 1);
        assert_eq!(planes_per_group(&geometry(4, 8 * 8)), 16);
        assert_eq!(planes_per_group(&geometry(4, 7 * 7)), 20);
        // 7x7 planes: 20 images to a group, so 45 images make groups of 20, 20 and 5, and
        // every plane has a tail of 1 value past its 3 full chunks of lanes.
        let g = geometry(45, 7 * 7);
        let x = Tensor::random(&[45, 3, 7, 7], 21);
        for channel in 0..3 {
            let groups: Vec<f64> =
                channel_group_sums(&g, (&x.data, &x.data), channel, |v, _| v).collect();
            assert_eq!(groups.len(), 3);
            let want: f64 = channel_planes(&g, channel)
                .flat_map(|plane| x.data[plane].iter().map(|&v| f64::from(v)))
                .sum();
            let got: f64 = groups.iter().sum();
            assert!(
                (got - want).abs() < 1e-4,
                "channel {channel}: {got} vs {want}"
            );
        }
        // Groups of one plane: the sum is that plane's own lane sum.
        let g = geometry(2, 32 * 32);
        let x = Tensor::random(&[2, 3, 32, 32], 22);
        let plane = channel_planes(&g, 1).nth(1).unwrap();
        let own = lane_sum(
            std::iter::once((&x.data[plane.clone()], &x.data[plane])),
            |v, _| v,
        );
        let second = channel_group_sums(&g, (&x.data, &x.data), 1, |v, _| v).nth(1);
        assert_eq!(second, Some(own));
    }

    /// Items take as many consecutive channels as fit in about 4096 values (at most 64), a
    /// divisor of the channel count, and leave at least 16 items.
    #[test]
    fn items_group_small_channels() {
        let group = |batch, channels, pixels| {
            let geometry = BatchNormGeometry {
                batch,
                channels,
                pixels,
            };
            ChannelGroup::new(&geometry).channels
        };
        assert_eq!(group(4, 256, 32 * 32), 1);
        assert_eq!(group(4, 512, 16 * 16), 4);
        assert_eq!(group(4, 1024, 8 * 8), 16);
        assert_eq!(group(4, 2048, 4 * 4), 64);
        assert_eq!(group(4, 512, 4 * 4), 32);
        assert_eq!(group(4, 48, 4 * 4), 3);
        assert_eq!(group(4, 5, 7 * 9), 1);
        assert_eq!(group(2, 60, 2 * 3), 3);
        assert_eq!(group(0, 0, 0), 1);
        // One value a channel: 4096 would fit, MAX_ITEM_CHANNELS caps it.
        assert_eq!(group(1, 4096, 1), MAX_ITEM_CHANNELS);
    }

    /// The fused per-channel paths give bitwise what the separate passes give, with one
    /// channel to an item and with several (64 channels of 4x4 pixels: 4 to an item).
    #[test]
    fn fused_channels_match_the_separate_passes_bitwise() {
        for shape in [[3, 5, 7, 9], [2, 64, 4, 4], [3, 48, 2, 3]] {
            fused_channels_match_the_separate_passes(shape);
        }
    }

    fn fused_channels_match_the_separate_passes(shape: [usize; 4]) {
        let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "bn")).unwrap();
        let channels = shape[1];
        let case = FusedCase::new(&shape, 11);
        let (x, dy, gamma, beta) = (&case.x, &case.dy, &case.gamma, &case.beta);
        let params = case.params();
        let geometry = BatchNormGeometry::new("test", &shape, &params).unwrap();

        let mut stats = BatchStats::zeros(channels);
        let mut y = Tensor::zeros(&shape);
        batch_norm_train(pool.as_dyn(), x, &params, &mut y, &mut stats).unwrap();
        let mut separate_stats = BatchStats::zeros(channels);
        batch_statistics(pool.as_dyn(), &geometry, &x.data, 1e-5, &mut separate_stats);
        assert_eq!(stats, separate_stats);
        let mut separate_y = Tensor::zeros(&shape);
        let scale_shift = |c: usize| {
            let scale = gamma.data[c] * stats.inv_std.data[c];
            (scale, beta.data[c] - stats.mean.data[c] * scale)
        };
        scale_and_shift(
            pool.as_dyn(),
            &geometry,
            &x.data,
            scale_shift,
            &mut separate_y.data,
        );
        assert_eq!(y, separate_y);

        let mut fused = NormGrads::zeros(&shape, channels);
        let work =
            batch_norm_backward_recomputed(pool.as_dyn(), x, dy, &params, &mut fused).unwrap();
        let mut separate = NormGrads::zeros(&shape, channels);
        let stats_work = batch_norm_stats(pool.as_dyn(), x, 1e-5, &mut separate_stats).unwrap();
        let backward_work = batch_norm_backward(
            pool.as_dyn(),
            x,
            dy,
            &params,
            &separate_stats,
            &mut separate,
        )
        .unwrap();
        assert_eq!(fused.grad_input, separate.grad_input);
        assert_eq!(fused.grad_gamma, separate.grad_gamma);
        assert_eq!(fused.grad_beta, separate.grad_beta);
        assert_eq!(work, stats_work + backward_work);
    }

    /// Shapes the fused kernels are checked on: tails (7x9 planes), shared lanes (4x4 planes,
    /// groups of 64 images over 70), one large channel to an item (32x32) and several small
    /// ones (64 channels of 4x4).
    const FUSED_SHAPES: [[usize; 4]; 4] =
        [[3, 5, 7, 9], [70, 3, 4, 4], [2, 4, 32, 32], [2, 64, 4, 4]];

    /// A random input, output gradient, second operand (a residual), gamma and beta.
    struct FusedCase {
        x: Tensor,
        dy: Tensor,
        other: Tensor,
        gamma: Tensor,
        beta: Tensor,
    }

    impl FusedCase {
        fn new(shape: &[usize], seed: u64) -> Self {
            FusedCase {
                x: Tensor::random(shape, seed),
                dy: Tensor::random(shape, seed + 1),
                other: Tensor::random(shape, seed + 2),
                gamma: Tensor::random(&shape[1..2], seed + 3),
                beta: Tensor::random(&shape[1..2], seed + 4),
            }
        }

        fn params(&self) -> NormParams<'_> {
            NormParams {
                gamma: &self.gamma,
                beta: &self.beta,
                epsilon: 1e-5,
            }
        }

        /// batch_norm_train's output and statistics.
        fn normalized(&self, pool: &Pool) -> (Tensor, BatchStats) {
            let mut stats = BatchStats::zeros(self.gamma.len());
            let mut normed = Tensor::zeros(&self.x.shape);
            batch_norm_train(
                pool.as_dyn(),
                &self.x,
                &self.params(),
                &mut normed,
                &mut stats,
            )
            .unwrap();
            (normed, stats)
        }

        /// relu_backward (masked by `forward`) then batch_norm_backward_recomputed, and
        /// batch_norm_relu_backward_recomputed reading `fused_output` as its mask.
        fn backwards(
            &self,
            pool: &Pool,
            forward: &Tensor,
            fused_output: &Tensor,
        ) -> [NormGrads; 2] {
            let (shape, channels) = (&self.x.shape, self.gamma.len());
            let mut masked = Tensor::zeros(shape);
            crate::kernels::relu_backward(pool.as_dyn(), forward, &self.dy, &mut masked).unwrap();
            let mut separate = NormGrads::zeros(shape, channels);
            batch_norm_backward_recomputed(
                pool.as_dyn(),
                &self.x,
                &masked,
                &self.params(),
                &mut separate,
            )
            .unwrap();
            let mut fused = NormGrads::zeros(shape, channels);
            let work = batch_norm_relu_backward_recomputed(
                pool.as_dyn(),
                &self.x,
                fused_output,
                &self.dy,
                &self.params(),
                &mut fused,
            )
            .unwrap();
            assert_eq!(work.flops, 12.0 * self.x.len() as f64);
            [separate, fused]
        }
    }

    /// Some but not all of `output`'s values are ReLU zeros (the mask has both signs).
    fn assert_mask_has_both_signs(output: &Tensor) {
        let zeros = output.data.iter().filter(|&&v| v == 0.0).count();
        assert!(
            zeros > 0 && zeros < output.len(),
            "{:?}: {zeros} zeros",
            output.shape
        );
    }

    /// The fused ReLU kernels give bitwise what the separate kernels give (same per-value
    /// arithmetic, same summation order), on [`FUSED_SHAPES`], with both signs in the mask.
    #[test]
    fn fused_relu_matches_the_separate_kernels_bitwise() {
        let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "bn-relu")).unwrap();
        for (shape, seed) in FUSED_SHAPES.iter().zip([31, 41, 51, 61]) {
            let case = FusedCase::new(shape, seed);
            let (normed, stats) = case.normalized(&pool);
            let mut separate = Tensor::zeros(shape);
            crate::kernels::relu(pool.as_dyn(), &normed, &mut separate).unwrap();
            let mut fused_stats = BatchStats::zeros(shape[1]);
            let mut fused = Tensor::zeros(shape);
            let work = batch_norm_train_activated(
                pool.as_dyn(),
                &case.x,
                &case.params(),
                Activation::Relu,
                &mut fused,
                &mut fused_stats,
            )
            .unwrap();
            assert_eq!(fused, separate, "{shape:?}");
            assert_eq!(fused_stats, stats);
            assert_mask_has_both_signs(&fused);
            assert_eq!(work.flops, 6.0 * fused.len() as f64);

            let [want, got] = case.backwards(&pool, &normed, &fused);
            assert_eq!(got, want, "{shape:?}");
        }
    }

    /// The fused batch norm, residual add and ReLU gives bitwise what batch_norm_train, add
    /// and relu give, and its input gradient (batch_norm_relu_backward_recomputed with its
    /// output as the mask) bitwise what relu_backward (masked by the sum) then
    /// batch_norm_backward_recomputed give, on [`FUSED_SHAPES`].
    #[test]
    fn fused_add_relu_matches_the_separate_kernels_bitwise() {
        let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "bn-add-relu")).unwrap();
        for (shape, seed) in FUSED_SHAPES.iter().zip([81, 91, 101, 111]) {
            let case = FusedCase::new(shape, seed);
            let (normed, stats) = case.normalized(&pool);
            let mut sum = Tensor::zeros(shape);
            crate::kernels::add(pool.as_dyn(), &normed, &case.other, &mut sum).unwrap();
            let mut separate = Tensor::zeros(shape);
            crate::kernels::relu(pool.as_dyn(), &sum, &mut separate).unwrap();
            let mut fused_stats = BatchStats::zeros(shape[1]);
            let mut fused = Tensor::zeros(shape);
            let work = batch_norm_add_relu_train(
                pool.as_dyn(),
                &case.x,
                &case.other,
                &case.params(),
                &mut fused,
                &mut fused_stats,
            )
            .unwrap();
            assert_eq!(fused, separate, "{shape:?}");
            assert_eq!(fused_stats, stats);
            assert_mask_has_both_signs(&fused);
            let values = fused.len() as f64;
            assert_eq!(work, Work::new(7.0 * values, 5.0 * values));

            let [want, got] = case.backwards(&pool, &sum, &fused);
            assert_eq!(got, want, "{shape:?}");
        }
    }

    /// The fused add checks the residual's shape and names itself.
    #[test]
    fn fused_add_relu_rejects_a_mismatched_residual() {
        let pool = Pool::new(PoolOptions::new(PoolKind::Simple, 1, "bn-add-relu")).unwrap();
        let case = FusedCase::new(&[2, 2, 3, 3], 1);
        let residual = Tensor::zeros(&[2, 2, 3, 4]);
        let mut output = Tensor::zeros(&case.x.shape);
        let mut stats = BatchStats::zeros(2);
        let error = batch_norm_add_relu_train(
            pool.as_dyn(),
            &case.x,
            &residual,
            &case.params(),
            &mut output,
            &mut stats,
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.starts_with("batch_norm_add_relu_train: the residual"),
            "{error}"
        );
    }

    /// The fused backward checks the forward output's shape and names itself.
    #[test]
    fn fused_relu_backward_rejects_a_mismatched_output() {
        let pool = Pool::new(PoolOptions::new(PoolKind::Simple, 1, "bn-relu")).unwrap();
        let (gamma, beta) = (Tensor::filled(&[2], 1.0), Tensor::zeros(&[2]));
        let params = NormParams {
            gamma: &gamma,
            beta: &beta,
            epsilon: 1e-5,
        };
        let x = Tensor::random(&[2, 2, 3, 3], 1);
        let output = Tensor::zeros(&[2, 2, 3, 4]);
        let mut grads = NormGrads::zeros(&x.shape, 2);
        let error = batch_norm_relu_backward_recomputed(
            pool.as_dyn(),
            &x,
            &output,
            &x,
            &params,
            &mut grads,
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.starts_with("batch_norm_relu_backward_recomputed: the output"),
            "{error}"
        );
    }
}
