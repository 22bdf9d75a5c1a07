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
//!   to per-image columns (col2im when not pointwise);
//! - weight gradient: `dW = dY_b cols_b^T`, one GEMM whose inner dimension runs over all the
//!   images' pixels; `cols_b^T` is built directly (each image's columns transposed), since
//!   the `gemm` crate runs `A B^T` with both inner dimensions contiguous markedly slower.
//!
//! The copies move `O(N C P)` values; the GEMMs do `O(N C_out C_in kh kw P)` work, so the copies
//! are cheap where this path is taken.
//!
//! # Parallelism and determinism
//! GEMMs are cut by rows of their output, copies by rows of their destination, in blocks that
//! depend on the shapes alone; each item is one thread's sequential code. Whether a call takes
//! this path depends on the shapes alone too, so results are the same on every pool and thread
//! count (they differ in the last bits from the per-image path, which adds the weight
//! gradient's images in a different order).
#![forbid(unsafe_code)]

use super::Conv2dGeometry;
use crate::kernels::gemm::{gemm_single_threaded, rows_per_block, GemmShape, MatView};
use crate::kernels::par::{
    for_each_chunk, for_each_nested_chunk, item_cost, GEMM_FLOPS_PER_CYCLE, VECTOR_FLOPS_PER_CYCLE,
};
use crate::pool::ThreadPool;

/// Pixel rows per item of [`transpose_images`].
const TRANSPOSE_PIXELS: usize = 64;

/// Output planes of at most this many pixels take the batched path.
pub const BATCHED_MAX_PIXELS: usize = 128;

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
            for channel in 0..c {
                let from = &plane[channel * p + first..channel * p + first + len];
                for (row, value) in from.iter().enumerate() {
                    out[row * c + channel] = *value;
                }
            }
        },
    );
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
    let (rows_f, n_f, k_f) = (rows as f64, n as f64, k as f64);
    let cost = item_cost(
        rows_f * k_f + k_f * n_f,
        rows_f * n_f,
        2.0 * rows_f * n_f * k_f,
        GEMM_FLOPS_PER_CYCLE,
    );
    for_each_chunk(pool, c, rows * n, cost, |block, out| {
        let first = block * rows;
        let a_rows = MatView {
            data: &a.data[first * a.row_stride..],
            ..a
        };
        gemm_single_threaded((out.len() / n, n, k), a_rows, b, out, 1.0, 0.0);
    });
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
        let (n, c, p) = (2, 3, 70);
        let src: Vec<f32> = (0..n * c * p).map(|i| i as f32).collect();
        let mut dst = vec![0.0; n * c * p];
        transpose_images(pool.as_dyn(), (c, p), &src, &mut dst);
        for (image, channel, pixel) in [(0, 0, 0), (1, 2, 69), (1, 1, 64), (0, 2, 3)] {
            let expected = src[(image * c + channel) * p + pixel];
            assert_eq!(dst[(image * p + pixel) * c + channel], expected);
        }
    }
}
