//! Convolutions over small images as one GEMM for the whole batch.
//!
//! # Algorithm
//! Per image, a convolution is `Y_n = W cols_n` with `H_out W_out` columns. On small output
//! planes (the last stages of a ResNet: 8x8, 4x4 pixels) such a GEMM is too thin to run well
//! (16 columns per image), so [`BATCHED_MAX_PIXELS`] and below, the images' matrices are laid
//! side by side instead: `cols_b` is `(C_in kh kw) x (N H_out W_out)`, column `n P + p` being
//! image `n`'s column `p`, and one GEMM `Y_b = W cols_b` makes every image's output at once,
//! which a copy then puts back in NCHW order. The three directions:
//! - forward: `cols_b` from the input (im2col, or the input itself when pointwise), one GEMM,
//!   scatter into the output;
//! - input gradient: `dY_b` gathered from `grad_output`, `dcols_b = W^T dY_b`, scattered back
//!   to per-image columns (col2im when not pointwise). Over at most
//!   [`TRANSPOSED_MAX_COLUMNS`] pixels it is computed transposed instead, `dcols_b^T = dY_b^T
//!   W` (few rows, many columns), one item per block of columns, each block its own row-major
//!   matrix, and a transpose puts every image's `dcols` back: on 4x4 planes of 512 channels
//!   (64 pixels) that ran 1.7x as fast, end to end; on 8x8 (256 pixels, where the crate packs
//!   `W^T`) 0.75x, the GEMM gaining nothing and the transpose costing more than the scatter;
//! - weight gradient: `dW = dY_b cols_b^T`, one GEMM whose inner dimension runs over all the
//!   images' pixels (see `weight_grad.rs` for when, and how, it is computed transposed).
//!
//! The copies move `O(N C P)` values; the GEMMs do `O(N C_out C_in kh kw P)` work, so the copies
//! are cheap where this path is taken.
//!
//! # Parallelism and determinism
//! GEMMs are cut by rows (or blocks of columns) of their output, copies by rows of their
//! destination, in blocks that depend on the shapes alone; each item is one thread's sequential
//! code. Whether a call takes this path depends on the shapes alone too, so results are the
//! same on every pool and thread count (they differ in the last bits from the per-image path,
//! which adds the weight gradient's images in a different order).
#![forbid(unsafe_code)]

use super::Conv2dGeometry;
use crate::kernels::gemm::{
    gemm_item_cost, gemm_single_threaded, rows_per_block, GemmShape, MatView,
};
use crate::kernels::par::{
    for_each_chunk, for_each_nested_chunk, item_cost, VECTOR_FLOPS_PER_CYCLE,
};
use crate::kernels::scratch::with_scratch;
use crate::pool::ThreadPool;

/// Pixel rows per item of [`transpose_images`].
const TRANSPOSE_PIXELS: usize = 64;

/// Side of the square tiles [`transpose_images`] copies one at a time: 16 rows of the
/// destination, 16 cache lines. Copying a whole item channel by channel instead wrote
/// `TRANSPOSE_PIXELS` lines a power-of-two stride apart, which share 4 sets of the L1
/// cache and evicted each other (half of a 1x1 weight gradient's time on 32x32 planes).
const TRANSPOSE_TILE: usize = 16;

/// Output planes of at most this many pixels take the batched path.
pub const BATCHED_MAX_PIXELS: usize = 128;

/// Input gradients over at most this many pixels (`N H_out W_out`) are computed transposed:
/// the `gemm` crate (0.19, AVX-512) packs a column-major left operand such as the `W^T` view
/// only for products more than 128 columns wide (twice its microkernel's 64 rows); narrower,
/// it reads `W^T` in place, striding over a whole row of `W` per value.
pub(super) const TRANSPOSED_MAX_COLUMNS: usize = 128;

/// Whether `geometry` takes the batched path: small output planes and more than one image.
pub(super) fn is_batched(geometry: &Conv2dGeometry) -> bool {
    geometry.batch > 1 && geometry.out_pixels() <= BATCHED_MAX_PIXELS
}

/// `dst (C x N P) = src (N x C x P)` regrouped: row `c` holds every image's plane `c`.
pub(super) fn gather(
    pool: &dyn ThreadPool,
    (n, c, p): (usize, usize, usize),
    src: &[f32],
    dst: &mut [f32],
) {
    let cost = item_cost((n * p) as f64, (n * p) as f64, 0.0, VECTOR_FLOPS_PER_CYCLE);
    for_each_chunk(pool, dst, (n * p).max(1), cost, |channel, row| {
        for (image, part) in row.chunks_exact_mut(p.max(1)).enumerate() {
            let start = (image * c + channel) * p;
            part.copy_from_slice(&src[start..start + p]);
        }
    });
}

/// The inverse of [`gather`]: `dst (N x C x P)` from `src (C x N P)`.
pub(super) fn scatter(
    pool: &dyn ThreadPool,
    (n, c, p): (usize, usize, usize),
    src: &[f32],
    dst: &mut [f32],
) {
    let cost = item_cost((c * p) as f64, (c * p) as f64, 0.0, VECTOR_FLOPS_PER_CYCLE);
    for_each_chunk(pool, dst, (c * p).max(1), cost, |image, out| {
        for (channel, part) in out.chunks_exact_mut(p.max(1)).enumerate() {
            let start = (channel * n + image) * p;
            part.copy_from_slice(&src[start..start + p]);
        }
    });
}

/// `dst (N P x C) = src (N x C x P)`, each image's `C x P` matrix transposed: row `n P + p` holds pixel `p`
/// of image `n` in every channel.
pub(super) fn transpose_images(
    pool: &dyn ThreadPool,
    (c, p): (usize, usize),
    src: &[f32],
    dst: &mut [f32],
) {
    let rows = TRANSPOSE_PIXELS as f64 * c as f64;
    let cost = item_cost(rows, rows, 0.0, VECTOR_FLOPS_PER_CYCLE);
    let image_len = (c * p).max(1);
    for_each_nested_chunk(
        pool,
        dst,
        image_len,
        TRANSPOSE_PIXELS * c,
        cost,
        |image, block, out| {
            let first = block * TRANSPOSE_PIXELS;
            let len = out.len() / c.max(1);
            let plane = &src[image * c * p..(image + 1) * c * p];
            for first_channel in (0..c).step_by(TRANSPOSE_TILE) {
                let channels = first_channel..c.min(first_channel + TRANSPOSE_TILE);
                for first_row in (0..len).step_by(TRANSPOSE_TILE) {
                    let rows = first_row..len.min(first_row + TRANSPOSE_TILE);
                    for channel in channels.clone() {
                        let from = &plane[channel * p + first..][rows.clone()];
                        for (row, value) in rows.clone().zip(from) {
                            out[row * c + channel] = *value;
                        }
                    }
                }
            }
        },
    );
}

/// Runs `f(unrolled, side_by_side, dy)` on this thread's scratch: `unrolled` holds
/// [`Conv2dGeometry::unrolled_len`] values (every image's column matrix), `side_by_side`
/// `patch x N P` (a `cols_b` or `dcols_b`, or its transpose), and `dy` is `grad_output`
/// gathered into `dY_b` (`C_out x N P`).
pub(super) fn with_batched_scratch<R>(
    pool: &dyn ThreadPool,
    g: &Conv2dGeometry,
    grad_output: &[f32],
    f: impl FnOnce(&mut [f32], &mut [f32], &[f32]) -> R,
) -> R {
    let (n, pixels, channels) = (g.batch, g.out_pixels(), g.out_channels);
    let (unrolled_len, wide) = (g.unrolled_len(), n * pixels);
    with_scratch(unrolled_len + (g.patch_len() + channels) * wide, |buffer| {
        let (unrolled, rest) = buffer.split_at_mut(unrolled_len);
        let (side_by_side, dy) = rest.split_at_mut(g.patch_len() * wide);
        gather(pool, (n, channels, pixels), grad_output, dy);
        f(unrolled, side_by_side, dy)
    })
}

/// `c (m x n) = a b` for strided views, one item per block of `c`'s rows.
pub(super) fn gemm_by_rows(
    pool: &dyn ThreadPool,
    (m, n, k): (usize, usize, usize),
    a: MatView<'_>,
    b: MatView<'_>,
    c: &mut [f32],
) {
    if n == 0 {
        return;
    }
    let rows = rows_per_block(GemmShape { m, n, k });
    let cost = gemm_item_cost(rows, n, k);
    for_each_chunk(pool, c, rows * n, cost, |block, out| {
        let first = block * rows;
        let a_rows = MatView {
            data: &a.data[first * a.row_stride..],
            ..a
        };
        gemm_single_threaded((out.len() / n, n, k), a_rows, b, out, 1.0, 0.0);
    });
}

/// `c (m x n) = a b` for strided views, one item per block of `block` columns of `c`: `c` is
/// stored block-major, each block a row-major `m x width` matrix (`width = block`, less for the
/// last), one after another. For a product with few rows (the batch's pixels) and a wide `b`.
pub(super) fn gemm_by_column_blocks(
    pool: &dyn ThreadPool,
    (m, n, k): (usize, usize, usize),
    a: MatView<'_>,
    b: MatView<'_>,
    block: usize,
    c: &mut [f32],
) {
    debug_assert_eq!(
        c.len(),
        m * n,
        "gemm_by_column_blocks: c holds m x n values"
    );
    if m == 0 {
        return;
    }
    let cost = gemm_item_cost(block, m, k);
    for_each_chunk(pool, c, m * block, cost, |index, out| {
        let first = index * block;
        let b_columns = MatView {
            data: &b.data[first * b.col_stride..],
            ..b
        };
        gemm_single_threaded((m, out.len() / m, k), a, b_columns, out, 1.0, 0.0);
    });
}

/// `dst (N x Q x P)`, each image's `Q x P` matrix, from the `(N P) x Q` matrix `blocked` whose
/// row `n P + p` is image `n`'s pixel `p`, stored in column blocks of `block` columns as
/// [`gemm_by_column_blocks`] writes it: one item per (image, block).
pub(super) fn untranspose_blocks(
    pool: &dyn ThreadPool,
    (n, q, p): (usize, usize, usize),
    block: usize,
    blocked: &[f32],
    dst: &mut [f32],
) {
    let values = (block * p) as f64;
    let cost = item_cost(values, values, 0.0, VECTOR_FLOPS_PER_CYCLE);
    let wide = n * p;
    let image_len = (q * p).max(1);
    let block_len = (block * p).max(1);
    for_each_nested_chunk(
        pool,
        dst,
        image_len,
        block_len,
        cost,
        |image, index, out| {
            let width = (out.len() / p.max(1)).max(1);
            let start = index * block * wide + image * p * width;
            let pixels = blocked[start..start + out.len()].chunks_exact(width);
            for (pixel, row) in pixels.enumerate() {
                for (column, &value) in row.iter().enumerate() {
                    out[column * p + pixel] = value;
                }
            }
        },
    );
}

/// A row-major `rows x cols` matrix.
pub(super) fn dense(data: &[f32], cols: usize) -> MatView<'_> {
    MatView {
        data,
        row_stride: cols,
        col_stride: 1,
    }
}

/// The transpose of a row-major matrix with `cols` columns.
pub(super) fn transposed(data: &[f32], cols: usize) -> MatView<'_> {
    MatView {
        data,
        row_stride: 1,
        col_stride: cols,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::{Pool, PoolKind, PoolOptions};

    #[test]
    fn planes_transpose_image_by_image() {
        let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "batched")).unwrap();
        // Channels and pixels that fill whole tiles and leave partial ones.
        for (n, c, p) in [(2, 3, 70), (2, 37, 70), (1, 32, 64)] {
            let src: Vec<f32> = (0..n * c * p).map(|i| i as f32).collect();
            let mut dst = vec![f32::NAN; n * c * p];
            transpose_images(pool.as_dyn(), (c, p), &src, &mut dst);
            for (image, channel, pixel) in every_index(n, c, p) {
                let expected = src[(image * c + channel) * p + pixel];
                assert_eq!(dst[(image * p + pixel) * c + channel], expected);
            }
        }
    }

    /// Every (image, channel, pixel) index.
    fn every_index(n: usize, c: usize, p: usize) -> Vec<(usize, usize, usize)> {
        let planes = (0..n).flat_map(|image| (0..c).map(move |channel| (image, channel)));
        planes
            .flat_map(|(image, channel)| (0..p).map(move |pixel| (image, channel, pixel)))
            .collect()
    }

    /// Small integers, so every product below is exact and both orientations agree bitwise.
    fn integers(len: usize, seed: usize) -> Vec<f32> {
        (0..len)
            .map(|i| ((i * 7 + seed) % 7) as f32 - 3.0)
            .collect()
    }

    #[test]
    fn column_blocks_untransposed_equal_row_blocks_scattered() {
        let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "batched")).unwrap();
        // (images, pixels, rows q, inner k): blocks of 40 rows and a last of 24 (q = 144),
        // one block (q = 5), 1-pixel planes, one image.
        for (n, p, q, k) in [
            (2, 16, 144, 16),
            (3, 4, 5, 7),
            (3, 1, 45, 9),
            (1, 9, 130, 3),
        ] {
            let (w, dy) = (integers(k * q, 1), integers(k * n * p, 2));
            let block = rows_per_block(GemmShape { m: q, n: n * p, k });
            let mut blocked = vec![f32::NAN; q * n * p];
            let (dy_t, w_rows) = (transposed(&dy, n * p), dense(&w, q));
            gemm_by_column_blocks(
                pool.as_dyn(),
                (n * p, q, k),
                dy_t,
                w_rows,
                block,
                &mut blocked,
            );
            let mut got = vec![f32::NAN; n * q * p];
            untranspose_blocks(pool.as_dyn(), (n, q, p), block, &blocked, &mut got);

            let mut by_rows = vec![f32::NAN; q * n * p];
            let (w_t, dy_rows) = (transposed(&w, q), dense(&dy, n * p));
            gemm_by_rows(pool.as_dyn(), (q, n * p, k), w_t, dy_rows, &mut by_rows);
            let mut want = vec![f32::NAN; n * q * p];
            scatter(pool.as_dyn(), (n, q, p), &by_rows, &mut want);
            assert_eq!(got, want, "n={n} p={p} q={q} k={k}");
        }
    }
}
