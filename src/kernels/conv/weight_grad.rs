//! The weight gradient `dW = sum_n dY_n cols_n^T`, computed transposed as
//! `dW^T = sum cols dY^T` so the GEMM reads both operands in the layout it runs fastest on,
//! and split along its inner dimension (the pixels) so every thread has work. Every weight
//! gradient takes this path but the batched path's with more output channels than pixels and
//! the blocked path's (`blocked.rs`: stride 1, big planes).
//!
//! # Algorithm
//! Both factors of `dY cols^T` have the pixels, the inner dimension, as their contiguous
//! axis; fed to the `gemm` crate that way (`A B^T`) the product ran at 60-70% of the speed of
//! `cols dY^T` with both operands row-major, and with `cols^T` built explicitly at 70-80%
//! (measured on one core for the 3x3 convolutions of resnet-like's four stages). So `dY` is
//! first transposed into `dY^T` (pixels x `C_out`, images one after another: row `n P + p`),
//! and the GEMMs compute `cols dY^T`: `(C_in kh kw) x C_out`, both operands row-major, cut
//! into blocks of `C_in kh kw` rows, which are plentiful even where `C_out` is small.
//!
//! The inner dimension is cut into parts: on the per-image path each image's pixels into runs
//! of about [`PART_PIXELS`]; on the batched path (`batched.rs`: small planes, `cols` holding
//! every image side by side) the batch's pixels likewise. Each part's product goes to its own
//! slot of a scratch buffer, one `parallel_for` item per (part, block of `dW^T` rows). A last
//! loop transposes and adds the parts into `dW` in part order, one item per 16 output
//! channels. Each item packs only its part of `cols` and of `dY^T`; the price is the parts'
//! copies of `dW`, written once and read once, small next to the GEMMs (a part of `run` pixels
//! does `2 run` flops per value of `dW`; `run` is 128 to 512 on the per-image path).
//!
//! # When not transposed
//! The transposed form's price is a transpose of `dW` (`patch x C_out` values per part); on
//! the batched path the direct form's is a transpose of `cols_b` (`patch x N P` values, into
//! `cols_b^T` so that its GEMM `dY_b cols_b^T` reads both operands row-major). So the batched
//! path computes `dW` directly when it has more output channels than pixels (`C_out > N P`):
//! on 4x4 planes of 512 channels (64 pixels) the transposed form took twice as long, its
//! GEMM having only 64 pixels to add per value of `dW` it writes.
//!
//! # Determinism
//! The parts and blocks depend on the shapes alone, each item is one single-threaded GEMM
//! call, and every element of `dW` adds its parts in index order, so `dW` is bitwise the same
//! on every pool and thread count.
#![forbid(unsafe_code)]

use super::batched::{
    dense, gather, gemm_by_rows, is_batched, transpose_images, with_batched_scratch,
};
use super::blocked::{block_pixels, blocked_backward_weights};
use super::im2col::columns;
use super::Conv2dGeometry;
use crate::kernels::gemm::{
    gemm_item_cost, gemm_single_threaded, rows_per_block, GemmShape, MatView,
};
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

/// `grad_weight = sum_n dY_n cols_n^T` of the convolution `g` (see the module docs).
pub(super) fn backward_weights(
    pool: &dyn ThreadPool,
    g: &Conv2dGeometry,
    input: &[f32],
    grad_output: &[f32],
    grad_weight: &mut [f32],
) {
    if is_batched(g) && g.out_channels > g.batch * g.out_pixels() {
        direct_batched_backward_weights(pool, g, input, grad_output, grad_weight);
    } else if !is_batched(g) && block_pixels(g).is_some() {
        blocked_backward_weights(pool, g, input, grad_output, grad_weight);
    } else {
        transposed_backward_weights(pool, g, input, grad_output, grad_weight);
    }
}

/// `dW = dY_b cols_b^T` on the batched path: one GEMM, its inner dimension every image's
/// pixels, cut by rows of `dW`.
fn direct_batched_backward_weights(
    pool: &dyn ThreadPool,
    g: &Conv2dGeometry,
    input: &[f32],
    grad_output: &[f32],
    grad_weight: &mut [f32],
) {
    let (pixels, patch) = (g.out_pixels(), g.patch_len());
    let wide = g.batch * pixels;
    with_batched_scratch(pool, g, grad_output, |unrolled, cols_t, dy| {
        let cols = columns(pool, g, input, unrolled);
        transpose_images(pool, (patch, pixels), cols, cols_t);
        let (dy, cols_t) = (dense(dy, wide), dense(cols_t, patch));
        gemm_by_rows(pool, (g.out_channels, patch, wide), dy, cols_t, grad_weight);
    });
}

/// `dW^T = sum cols dY^T` (see the module docs), on the batched path's side by side columns
/// when [`is_batched`], else on each image's own.
fn transposed_backward_weights(
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
    let batched = is_batched(g);
    let parts = if batched {
        Parts::new(1, n * pixels)
    } else {
        Parts::new(n, pixels)
    };
    let unrolled_len = g.unrolled_len();
    let side_by_side_len = if batched { patch * n * pixels } else { 0 };
    let dyt_len = n * pixels * channels;
    let partial_len = parts.count() * patch * channels;
    let scratch = unrolled_len + side_by_side_len + dyt_len + partial_len;
    with_scratch(scratch, |buffer| {
        let (unrolled, rest) = buffer.split_at_mut(unrolled_len);
        let (side_by_side, rest) = rest.split_at_mut(side_by_side_len);
        let (dyt, partials) = rest.split_at_mut(dyt_len);
        let per_image = columns(pool, g, input, unrolled);
        let cols = if batched {
            gather(pool, (n, patch, pixels), per_image, side_by_side);
            side_by_side
        } else {
            per_image
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

    #[test]
    fn direct_and_transposed_batched_gradients_agree() {
        use crate::kernels::Conv2dParams;
        let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "wg")).unwrap();
        let same = Conv2dParams {
            stride: 1,
            padding: 1,
        };
        // Small integers make every sum exact, so the two orders agree bitwise. More output
        // channels than pixels (the direct form's case), fewer, and 1-pixel planes.
        for (input, out_channels) in [([2, 3, 2, 2], 20), ([2, 5, 4, 4], 6), ([3, 4, 1, 1], 9)] {
            let weight = [out_channels, input[1], 3, 3];
            let g = Conv2dGeometry::new(&input, &weight, same).unwrap();
            assert!(is_batched(&g));
            let integers = |len: usize, seed: usize| -> Vec<f32> {
                (0..len)
                    .map(|i| ((i * 5 + seed) % 7) as f32 - 3.0)
                    .collect()
            };
            let x = integers(input.iter().product(), 1);
            let dy = integers(g.output_shape().iter().product(), 2);
            let len = weight.iter().product();
            let (mut direct, mut transposed) = (vec![f32::NAN; len], vec![f32::NAN; len]);
            direct_batched_backward_weights(pool.as_dyn(), &g, &x, &dy, &mut direct);
            transposed_backward_weights(pool.as_dyn(), &g, &x, &dy, &mut transposed);
            assert_eq!(direct, transposed, "{input:?} -> {out_channels}");
        }
    }
}
