//! The weight gradient `dW = sum_n dY_n cols_n^T`, computed transposed as
//! `dW^T = sum cols dY^T` so the GEMM reads both operands in the layout it runs fastest on,
//! and split along its inner dimension (the pixels) so every thread has work.
//!
//! # Algorithm
//! Both factors of `dY cols^T` have the pixels, the inner dimension, as their contiguous
//! axis; fed to the `gemm` crate that way (`A B^T`) a 48-row `dW` ran at 40-50% of the speed
//! of the same product with `B` stored `k x n`. So `dY` is first transposed into `dY^T`
//! (pixels x `C_out`, images one after another: row `n P + p`), and the GEMMs compute
//! `cols dY^T`: `(C_in kh kw) x C_out`, both operands row-major.
//!
//! The inner dimension is cut into parts: on the per-image path each image's pixels into runs
//! of about [`PART_PIXELS`]; on the batched path (`batched.rs`: small planes, `cols` holding
//! every image side by side) the batch's pixels likewise. Each part's product goes to its own
//! slot of a scratch buffer, one `parallel_for` item per (part, block of `dW^T` rows). A last
//! loop transposes and adds the parts into `dW` in part order, one item per 16 output
//! channels. Each item packs only its part of `cols` and of `dY^T`; the price is the parts'
//! copies of `dW`, written once and read once, small next to the GEMMs (a part of `run` pixels
//! does `2 run` flops per value of `dW`, `run` being 128 to 512).
//!
//! # Determinism
//! The parts and blocks depend on the shapes alone, each item is one single-threaded GEMM
//! call, and every element of `dW` adds its parts in index order, so `dW` is bitwise the same
//! on every pool and thread count.
#![forbid(unsafe_code)]

use super::backward::gemm_item_cost;
use super::batched::transpose_images;
use super::im2col::im2col_batch_into;
use super::Conv2dGeometry;
use crate::kernels::gemm::{gemm_single_threaded, rows_per_block, GemmShape, MatView};
use crate::kernels::par::{
    for_each_chunk, for_each_nested_chunk, item_cost, VECTOR_FLOPS_PER_CYCLE,
};
use crate::kernels::scratch::with_scratch;
use crate::pool::ThreadPool;

/// Pixels per part, about: long enough for an efficient GEMM, short enough that a 32x32 plane
/// makes two parts per image.
pub const PART_PIXELS: usize = 512;

/// Output channels per item of the final transpose-and-sum loop: a cache line of `f32`.
const SUM_CHANNELS: usize = 16;

/// How the inner dimension is cut: `groups` matrices of `group_pixels` columns in `cols`
/// (the images, or one for the batched path), each cut into `runs` runs of `run` pixels (the
/// last may be shorter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Parts {
    groups: usize,
    group_pixels: usize,
    runs: usize,
    run: usize,
}

impl Parts {
    fn new(groups: usize, group_pixels: usize) -> Self {
        let runs = group_pixels.div_ceil(PART_PIXELS).max(1);
        Parts {
            groups,
            group_pixels,
            runs,
            run: group_pixels.div_ceil(runs).max(1),
        }
    }

    fn count(&self) -> usize {
        self.groups * self.runs
    }
}

/// `grad_weight = sum_n dY_n cols_n^T` on the per-image path (see the module docs), for
/// convolutions with few output channels.
pub(super) fn small_backward_weights(
    pool: &dyn ThreadPool,
    g: &Conv2dGeometry,
    input: &[f32],
    grad_output: &[f32],
    grad_weight: &mut [f32],
) {
    let (n, pixels, patch, channels) = (g.batch, g.out_pixels(), g.patch_len(), g.out_channels);
    if n * pixels == 0 {
        grad_weight.fill(0.0); // no pixels, no gradient
        return;
    }
    let parts = Parts::new(n, pixels);
    let unrolled_len = if g.is_pointwise() {
        0
    } else {
        n * g.cols_per_image()
    };
    let dyt_len = n * pixels * channels;
    let partial_len = parts.count() * patch * channels;
    with_scratch(unrolled_len + dyt_len + partial_len, |buffer| {
        let (unrolled, rest) = buffer.split_at_mut(unrolled_len);
        let (dyt, partials) = rest.split_at_mut(dyt_len);
        let cols: &[f32] = if g.is_pointwise() {
            input
        } else {
            im2col_batch_into(pool, g, input, unrolled);
            unrolled
        };
        transpose_images(pool, (channels, pixels), grad_output, dyt);
        partial_products(pool, (patch, channels), parts, cols, dyt, partials);
        sum_transposed(pool, (patch, channels), partials, grad_weight);
    });
}

/// Every part's `cols[:, run] dY^T[run, :]` (`patch x C`) into its slot of `partials`, one
/// item per (part, block of rows).
fn partial_products(
    pool: &dyn ThreadPool,
    (patch, channels): (usize, usize),
    parts: Parts,
    cols: &[f32],
    dyt: &[f32],
    partials: &mut [f32],
) {
    let shape = GemmShape {
        m: patch,
        n: channels,
        k: parts.run,
    };
    let block = rows_per_block(shape);
    let cost = gemm_item_cost(block, channels, parts.run);
    let slot = patch * channels;
    for_each_nested_chunk(
        pool,
        partials,
        slot,
        block * channels,
        cost,
        |part, index, out| {
            let (group, run) = (part / parts.runs, part % parts.runs);
            let first_pixel = run * parts.run;
            let len = parts.run.min(parts.group_pixels - first_pixel);
            let first_row = index * block;
            let rows = out.len() / channels;
            let group_start = group * patch * parts.group_pixels;
            let cols_rows = MatView {
                data: &cols[group_start + first_row * parts.group_pixels + first_pixel..],
                row_stride: parts.group_pixels,
                col_stride: 1,
            };
            let dyt_rows = MatView {
                data: &dyt[(group * parts.group_pixels + first_pixel) * channels..],
                row_stride: channels,
                col_stride: 1,
            };
            gemm_single_threaded((rows, channels, len), cols_rows, dyt_rows, out, 1.0, 0.0);
        },
    );
}

/// `dW (C x patch) = sum_i partials[i]^T`, each slot `patch x C`, added in slot order.
fn sum_transposed(
    pool: &dyn ThreadPool,
    (patch, channels): (usize, usize),
    partials: &[f32],
    grad_weight: &mut [f32],
) {
    let slot = (patch * channels).max(1);
    let count = partials.len() / slot;
    let values = (SUM_CHANNELS * patch * count) as f64;
    let cost = item_cost(
        values,
        (SUM_CHANNELS * patch) as f64,
        values,
        VECTOR_FLOPS_PER_CYCLE,
    );
    for_each_chunk(
        pool,
        grad_weight,
        SUM_CHANNELS * patch.max(1),
        cost,
        |index, out| {
            let first = index * SUM_CHANNELS;
            let rows = out.len() / patch.max(1);
            for part in 0..count {
                let partial = &partials[part * slot..(part + 1) * slot];
                for q in 0..patch {
                    let from = &partial[q * channels + first..q * channels + first + rows];
                    for (row, value) in from.iter().enumerate() {
                        let sum = &mut out[row * patch + q];
                        *sum = if part == 0 { *value } else { *sum + value };
                    }
                }
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::{Pool, PoolKind, PoolOptions};

    #[test]
    fn parts_cover_every_pixel_in_runs_of_at_most_part_pixels() {
        for pixels in [1, 16, 511, 512, 513, 1024, 4096, 4097] {
            let parts = Parts::new(2, pixels);
            assert!(parts.run <= PART_PIXELS, "{pixels}: {parts:?}");
            assert!(parts.runs * parts.run >= pixels, "{pixels}: {parts:?}");
            assert!((parts.runs - 1) * parts.run < pixels, "{pixels}: {parts:?}");
        }
        assert_eq!(Parts::new(2, 1024).count(), 4);
    }

    #[test]
    fn sums_add_transposed_slots() {
        let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "wg")).unwrap();
        let (patch, channels) = (3, 20);
        let partials: Vec<f32> = (0..2 * patch * channels).map(|i| i as f32).collect();
        let mut dw = vec![f32::NAN; patch * channels];
        sum_transposed(pool.as_dyn(), (patch, channels), &partials, &mut dw);
        for (c, q) in [(0, 0), (19, 2), (17, 1)] {
            let slot = patch * channels;
            let expected = partials[q * channels + c] + partials[slot + q * channels + c];
            assert_eq!(dw[c * patch + q], expected);
        }
    }
}
