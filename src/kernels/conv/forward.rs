//! [`conv2d`]: im2col (skipped when pointwise), then one GEMM per (image, block of output
//! channels); or the batched path, or the blocked path (`blocked.rs`).
//!
//! # Blocks
//! A batch of at least [`WHOLE_IMAGE_MIN_BATCH`] images takes one item per image, all its
//! output channels in one GEMM ([`image_row_block`]); smaller batches cut the channels into
//! [`rows_per_block`] blocks so the pool has items. The `gemm` crate packs an item's right
//! factor (the image, for a pointwise convolution) once per call, so blocks of 64 channels
//! would pack a 16x16 image of 128 channels 8 times for `128 -> 512`; the input gradient
//! (`backward.rs`' `weight_transpose_times`) is cut the same way. Whole images pack each once
//! (the measurements: `bench/KERNELS.md`). Bits are the same either way: each output value
//! is one microkernel's sum over the whole `k`.
#![forbid(unsafe_code)]

use super::batched::{self, is_batched};
use super::blocked::{blocked_forward, forward_block_pixels};
use super::im2col::im2col_batch_into;
use super::{Conv2dGeometry, Conv2dParams};
use crate::kernels::error::{expect_shape, KernelError};
use crate::kernels::gemm::{
    gemm_item_cost, gemm_single_threaded, rows_per_block, GemmShape, MatView,
};
use crate::kernels::par::for_each_nested_chunk;
use crate::kernels::scratch::with_scratch;
use crate::kernels::tensor::Tensor;
use crate::kernels::work::Work;
use crate::pool::ThreadPool;

/// `output = conv2d(input, weight)` with `params`' stride and padding; `output` must have
/// [`Conv2dGeometry::output_shape`].
///
/// ```
/// use enginetop::kernels::{conv2d, Conv2dParams, Tensor};
/// use enginetop::pool::{Pool, PoolKind, PoolOptions};
/// let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "doc")).unwrap();
/// let input = Tensor::filled(&[1, 2, 4, 4], 1.0);
/// let weight = Tensor::filled(&[3, 2, 3, 3], 0.5);
/// let mut output = Tensor::zeros(&[1, 3, 2, 2]);
/// conv2d(pool.as_dyn(), &input, &weight, Conv2dParams::default(), &mut output).unwrap();
/// assert!(output.data.iter().all(|&v| v == 9.0)); // 2 channels x 9 taps x 0.5
/// ```
pub fn conv2d(
    pool: &dyn ThreadPool,
    input: &Tensor,
    weight: &Tensor,
    params: Conv2dParams,
    output: &mut Tensor,
) -> Result<Work, KernelError> {
    let geometry = Conv2dGeometry::new(&input.shape, &weight.shape, params)?;
    expect_shape(
        "conv2d",
        "the output",
        &output.shape,
        &geometry.output_shape(),
    )?;
    if is_batched(&geometry) {
        batched::forward(pool, &geometry, &input.data, &weight.data, &mut output.data);
    } else if geometry.is_pointwise() {
        multiply_by_weight(pool, &geometry, &weight.data, &input.data, &mut output.data);
    } else if let Some(run) = forward_block_pixels(&geometry) {
        let (x, w) = (&input.data, &weight.data);
        blocked_forward(pool, &geometry, run, x, w, &mut output.data);
    } else {
        with_scratch(geometry.batch * geometry.cols_per_image(), |cols| {
            im2col_batch_into(pool, &geometry, &input.data, cols);
            multiply_by_weight(pool, &geometry, &weight.data, cols, &mut output.data);
        });
    }
    Ok(geometry.forward_work())
}

/// Batches of at least this many images run the per-image GEMMs whole, one item per image.
pub(super) const WHOLE_IMAGE_MIN_BATCH: usize = 4;

/// Rows of each item's GEMM of an image's product `shape` (whose rows are output channels,
/// or input channels for the input gradient): all of them for a batch of at least
/// [`WHOLE_IMAGE_MIN_BATCH`], else [`rows_per_block`] (see the module docs).
pub(super) fn image_row_block(g: &Conv2dGeometry, shape: GemmShape) -> usize {
    if g.batch >= WHOLE_IMAGE_MIN_BATCH {
        shape.m.max(1)
    } else {
        rows_per_block(shape)
    }
}

/// `Y_n = W cols_n` for every image `n`, one item per (image, block of output channels).
fn multiply_by_weight(
    pool: &dyn ThreadPool,
    geometry: &Conv2dGeometry,
    weight: &[f32],
    cols: &[f32],
    output: &mut [f32],
) {
    let g = geometry;
    let (patch, pixels) = (g.patch_len(), g.out_pixels());
    let block = image_row_block(g, g.per_image_gemm());
    let cost = gemm_item_cost(block, pixels, patch);
    let image_len = g.out_channels * pixels;
    for_each_nested_chunk(
        pool,
        output,
        image_len,
        block * pixels,
        cost,
        |image, index, out| {
            let first_channel = index * block;
            let channels = out.len() / pixels;
            let weight_rows = MatView {
                data: &weight[first_channel * patch..],
                row_stride: patch,
                col_stride: 1,
            };
            let image_cols = MatView {
                data: &cols[image * g.cols_per_image()..(image + 1) * g.cols_per_image()],
                row_stride: pixels,
                col_stride: 1,
            };
            gemm_single_threaded(
                (channels, pixels, patch),
                weight_rows,
                image_cols,
                out,
                1.0,
                0.0,
            );
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::conv2d_backward_data;
    use crate::pool::{Pool, PoolKind, PoolOptions};

    /// Small integers (every sum of products exact, so any summation order agrees bitwise).
    fn small_integers(shape: &[usize], seed: usize) -> Tensor {
        let len = shape.iter().product();
        let data = (0..len)
            .map(|i| ((i * 5 + seed) % 7) as f32 - 3.0)
            .collect();
        Tensor::from_vec(shape, data).unwrap()
    }

    #[test]
    fn pointwise_products_match_the_definition_whole_images_or_blocks() {
        // Planes of 12x13 (past the batched path); 4 and 5 images take whole images, 2 blocks
        // of the 136 output (or input) channels.
        for (batch, ins, outs) in [(4, 136, 9), (5, 9, 136), (2, 136, 136)] {
            let (pixels, params) = (12 * 13, Conv2dParams::default());
            let g = Conv2dGeometry::new(&[batch, ins, 12, 13], &[outs, ins, 1, 1], params).unwrap();
            let whole = batch >= WHOLE_IMAGE_MIN_BATCH;
            assert_eq!(
                image_row_block(&g, g.per_image_gemm()) == outs,
                whole || outs < 128
            );
            let x = small_integers(&[batch, ins, 12, 13], 1);
            let w = small_integers(&[outs, ins, 1, 1], 2);
            let dy = small_integers(&[batch, outs, 12, 13], 3);
            let (mut want_y, mut want_dx) =
                (vec![0.0; batch * outs * pixels], vec![0.0; x.data.len()]);
            for (n, o, i, p) in (0..batch).flat_map(|n| {
                (0..outs).flat_map(move |o| {
                    (0..ins).flat_map(move |i| (0..pixels).map(move |p| (n, o, i, p)))
                })
            }) {
                let weight = w.data[o * ins + i];
                want_y[(n * outs + o) * pixels + p] += weight * x.data[(n * ins + i) * pixels + p];
                want_dx[(n * ins + i) * pixels + p] +=
                    weight * dy.data[(n * outs + o) * pixels + p];
            }
            for threads in [1, 3] {
                let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, threads, "fwd")).unwrap();
                let mut y = Tensor::filled(&[batch, outs, 12, 13], f32::NAN);
                conv2d(pool.as_dyn(), &x, &w, params, &mut y).unwrap();
                assert_eq!(y.data, want_y, "{batch} {ins} {outs} {threads}");
                let mut dx = Tensor::filled(&[batch, ins, 12, 13], f32::NAN);
                conv2d_backward_data(pool.as_dyn(), &dy, &w, params, &mut dx).unwrap();
                assert_eq!(dx.data, want_dx, "{batch} {ins} {outs} {threads}");
            }
        }
    }
}
