//! The gradients of [`conv2d`](super::conv2d): with respect to its input (GEMM + col2im)
//! and to its weight (im2col + GEMM summed over images). A pointwise convolution skips
//! col2im and im2col: its column matrices are the input (gradient) itself. Stride-1
//! convolutions on big planes take the blocked path instead (`blocked.rs`).
#![forbid(unsafe_code)]

use super::batched::{
    dense, gemm_by_column_blocks, gemm_by_row_groups, gemm_by_rows, is_batched, per_image_items,
    scatter, transpose_block, transpose_images, transposed, transposed_block, untranspose_blocks,
    with_batched_scratch, CHANNEL_GROUPS, TRANSPOSED_MAX_COLUMNS,
};
use super::blocked::{block_pixels, blocked_backward_data, flipped_geometry};
use super::forward::image_row_block;
use super::im2col::col2im_plane;
use super::weight_grad::backward_weights;
use super::{Conv2dGeometry, Conv2dParams};
use crate::kernels::error::{expect_shape, KernelError};
use crate::kernels::gemm::{
    gemm_item_cost, gemm_single_threaded, rows_per_block, GemmShape, MatView,
};
use crate::kernels::par::{
    for_each_chunk, for_each_chunk_pair, for_each_nested_chunk, for_each_strided_group, item_cost,
    VECTOR_FLOPS_PER_CYCLE,
};
use crate::kernels::scratch::with_scratch;
use crate::kernels::tensor::Tensor;
use crate::kernels::work::Work;
use crate::pool::ThreadPool;

/// `grad_input = d loss / d input` of a convolution, from `grad_output` (the output's shape)
/// and `weight`; `grad_input` must have the input's shape, which it also defines.
pub fn conv2d_backward_data(
    pool: &dyn ThreadPool,
    grad_output: &Tensor,
    weight: &Tensor,
    params: Conv2dParams,
    grad_input: &mut Tensor,
) -> Result<Work, KernelError> {
    let geometry = Conv2dGeometry::new(&grad_input.shape, &weight.shape, params)
        .map_err(|error| rename(error, "conv2d_backward_data"))?;
    let expected = geometry.output_shape();
    expect_shape(
        "conv2d_backward_data",
        "grad_output",
        &grad_output.shape,
        &expected,
    )?;
    let (w, dy) = (&weight.data, &grad_output.data);
    if is_batched(&geometry) {
        batched_backward_data(pool, &geometry, w, dy, &mut grad_input.data);
    } else if geometry.is_pointwise() {
        weight_transpose_times(pool, &geometry, w, dy, &mut grad_input.data);
    } else if let Some((flipped, run)) = blocked_input_gradient(&geometry) {
        blocked_backward_data(pool, &flipped, run, dy, w, &mut grad_input.data);
    } else {
        with_scratch(geometry.batch * geometry.cols_per_image(), |dcols| {
            weight_transpose_times(pool, &geometry, w, dy, dcols);
            col2im_batch(pool, &geometry, dcols, &mut grad_input.data);
        });
    }
    Ok(geometry.backward_data_work())
}

/// The forward convolution the input gradient of `g` is computed as, and its run of pixels,
/// when it takes the blocked path (`blocked.rs`).
fn blocked_input_gradient(g: &Conv2dGeometry) -> Option<(Conv2dGeometry, usize)> {
    let flipped = flipped_geometry(g)?;
    Some((flipped, block_pixels(&flipped)?))
}

/// The input gradient on small planes (see `batched.rs`): with an even number of input
/// channels on planes of at least [`super::batched::PER_IMAGE_MIN_PIXELS`] pixels, by halves
/// of them over every image ([`gemm_by_row_groups`] when pointwise, else
/// [`channel_group_backward_data`]); one item per image on such planes otherwise, at least
/// [`super::batched::PER_IMAGE_MIN_PIXELS`] pixels; else one GEMM over the batch, transposed
/// in column blocks over at most [`TRANSPOSED_MAX_COLUMNS`] pixels (each block untransposed
/// within its item when pointwise and the blocks are all one width,
/// [`untransposed_in_items`]), in row blocks beyond.
fn batched_backward_data(
    pool: &dyn ThreadPool,
    g: &Conv2dGeometry,
    weight: &[f32],
    grad_output: &[f32],
    grad_input: &mut [f32],
) {
    if per_image_items(g) && g.in_channels % CHANNEL_GROUPS == 0 {
        if g.is_pointwise() {
            let (n, pixels, channels) = (g.batch, g.out_pixels(), g.out_channels);
            let shape = (n, g.in_channels, pixels, channels);
            let dy_n = |image: usize| dense(&grad_output[image * channels * pixels..], pixels);
            let w_t = transposed(weight, g.in_channels);
            return gemm_by_row_groups(pool, shape, w_t, dy_n, grad_input);
        }
        let operands = (weight, grad_output);
        return channel_group_backward_data(pool, g, operands, W_T_CHUNK_MAX_VALUES, grad_input);
    }
    if per_image_items(g) {
        return per_image_backward_data(pool, g, weight, grad_output, grad_input);
    }
    let (n, pixels, patch) = (g.batch, g.out_pixels(), g.patch_len());
    with_batched_scratch(pool, g, grad_output, |unrolled, dcols, dy| {
        if n * pixels <= TRANSPOSED_MAX_COLUMNS {
            if g.is_pointwise() && patch % transposed_block(patch) == 0 {
                return untransposed_in_items(pool, g, weight, dy, dcols, grad_input);
            }
            let block = transposed_dcols(pool, g, weight, dy, dcols);
            if g.is_pointwise() {
                untranspose_blocks(pool, (n, patch, pixels), block, dcols, grad_input);
            } else {
                col2im_from_blocks(pool, g, block, dcols, unrolled, grad_input);
            }
            return;
        }
        let per_image_dcols = if g.is_pointwise() {
            &mut *grad_input
        } else {
            &mut *unrolled
        };
        dcols_by_rows(pool, g, weight, dy, dcols, per_image_dcols);
        if !g.is_pointwise() {
            col2im_batch(pool, g, unrolled, grad_input);
        }
    });
}

/// `dX_n = col2im(W^T dY_n)`, one item per image (planes of at least
/// [`super::batched::PER_IMAGE_MIN_PIXELS`] pixels): its GEMM reads `dY_n` in place and writes
/// the image's input gradient (pointwise) or its columns, which col2im then adds onto the
/// image's planes while they are still in cache. `W^T` is read in place when pointwise, else
/// transposed once into scratch first (row-major: the `gemm` crate does not pack a
/// column-major left operand for products this narrow, and reading it in place ran slower).
fn per_image_backward_data(
    pool: &dyn ThreadPool,
    g: &Conv2dGeometry,
    weight: &[f32],
    grad_output: &[f32],
    grad_input: &mut [f32],
) {
    let (pixels, patch, channels) = (g.out_pixels(), g.patch_len(), g.out_channels);
    let shape = (patch, pixels, channels);
    let dy_n = |image: usize| dense(&grad_output[image * channels * pixels..], pixels);
    let cost = gemm_item_cost(patch, pixels, channels);
    let image_len = g.in_channels * g.in_pixels();
    if g.is_pointwise() {
        let w_t = transposed(weight, patch);
        for_each_chunk(pool, grad_input, image_len, cost, |image, out| {
            gemm_single_threaded(shape, w_t, dy_n(image), out, 1.0, 0.0);
        });
        return;
    }
    let cols_len = g.cols_per_image();
    with_scratch(g.unrolled_len() + weight.len(), |buffer| {
        let (dcols, w_rows) = buffer.split_at_mut(g.unrolled_len());
        transpose_images(pool, (channels, patch), weight, w_rows);
        let w_t = dense(w_rows, channels);
        let (dx, unrolled) = ((grad_input, image_len), (dcols, cols_len));
        for_each_chunk_pair(
            pool,
            dx.0,
            dx.1,
            unrolled.0,
            unrolled.1,
            cost,
            |image, out, cols| {
                gemm_single_threaded(shape, w_t, dy_n(image), cols, 1.0, 0.0);
                col2im_image(g, cols, out);
            },
        );
    });
}

/// Most values of `W^T` that an item of [`channel_group_backward_data`] transposes and then
/// multiplies at a time (1 MiB): on resnet-like's 3x3 `256 -> 256` at 8x8, 64 of its group's
/// 128 input channels (590 KB), half its L2 footprint.
const W_T_CHUNK_MAX_VALUES: usize = 1 << 18;

/// `dX = col2im(W^T dY)` on planes of at least [`super::batched::PER_IMAGE_MIN_PIXELS`]
/// pixels (not pointwise), one item per group of `C_in / CHANNEL_GROUPS` input channels,
/// which it takes in equal chunks of at most `chunk_values` values of `W^T`
/// ([`chunk_channels`]). For each chunk the item transposes its rows of `W^T` (`chunk kh kw x
/// C_out`, row-major: the `gemm` crate reads a row-major left operand in place) into its own
/// scratch, then for every image computes those rows of `dcols_n = W^T dY_n` (reading `dY_n`
/// in place) and adds them back onto the chunk's planes of the image (col2im). The chunk of
/// `W^T` stays in its core's L2 for every image, and no item waits for the others'
/// transposes; a chunk of half a group leaves half of L2 to the rest of the item's data
/// (see `batched.rs`).
fn channel_group_backward_data(
    pool: &dyn ThreadPool,
    g: &Conv2dGeometry,
    (weight, grad_output): (&[f32], &[f32]),
    chunk_values: usize,
    grad_input: &mut [f32],
) {
    let (pixels, patch, channels) = (g.out_pixels(), g.patch_len(), g.out_channels);
    let (area, in_pixels) = (g.kernel_area(), g.in_pixels());
    let group_channels = g.in_channels / CHANNEL_GROUPS;
    let chunk = chunk_channels(group_channels, area * channels, chunk_values);
    let chunk_rows = chunk * area;
    let (w_len, cols_len) = (chunk_rows * channels, chunk_rows * pixels);
    let cost = gemm_item_cost(group_channels * area, g.batch * pixels, channels);
    with_scratch(CHANNEL_GROUPS * (w_len + cols_len), |buffer| {
        let (w_rows, dcols) = buffer.split_at_mut(CHANNEL_GROUPS * w_len);
        let mut slots: Vec<_> = w_rows
            .chunks_mut(w_len)
            .zip(dcols.chunks_mut(cols_len))
            .collect();
        for_each_strided_group(
            pool,
            grad_input,
            group_channels * in_pixels,
            &mut slots,
            cost,
            |group, (w_t, cols), planes| {
                for index in 0..group_channels / chunk.max(1) {
                    let first = (group * group_channels + index * chunk) * area;
                    transpose_block(
                        &weight[first..],
                        patch,
                        (channels, chunk_rows),
                        w_t,
                        channels,
                    );
                    for (image, planes) in planes.iter_mut().enumerate() {
                        let dy_n = dense(&grad_output[image * channels * pixels..], pixels);
                        let shape = (chunk_rows, pixels, channels);
                        gemm_single_threaded(shape, dense(w_t, channels), dy_n, cols, 1.0, 0.0);
                        let chunk_planes = &mut planes[index * chunk * in_pixels..];
                        col2im_image(g, cols, &mut chunk_planes[..chunk * in_pixels]);
                    }
                }
            },
        );
    });
}

/// Input channels per chunk of a group of `channels` in [`channel_group_backward_data`]: the
/// most that divide the group evenly and hold at most `max_values` values of `W^T`
/// (`channel_values` each), at least one.
fn chunk_channels(channels: usize, channel_values: usize, max_values: usize) -> usize {
    (1..=channels)
        .rev()
        .find(|&d| channels % d == 0 && d * channel_values <= max_values)
        .unwrap_or(1)
}

/// One image's `dcols` (`C_in kh kw x P`) added back onto its planes (`C_in x H x W`).
fn col2im_image(g: &Conv2dGeometry, dcols: &[f32], planes: &mut [f32]) {
    let plane_cols = (g.kernel_area() * g.out_pixels()).max(1);
    let planes = planes.chunks_exact_mut(g.in_pixels().max(1));
    for (plane, cols) in planes.zip(dcols.chunks_exact(plane_cols)) {
        col2im_plane(g, cols, plane);
    }
}

/// `dcols_b^T = dY_b^T W` (`N P x patch`) from the gathered `dy` (`C_out x N P`), into
/// `blocked` in column blocks of the returned width ([`transposed_block`]), each block a
/// row-major matrix, one item per block.
fn transposed_dcols(
    pool: &dyn ThreadPool,
    g: &Conv2dGeometry,
    weight: &[f32],
    dy: &[f32],
    blocked: &mut [f32],
) -> usize {
    let (wide, patch, channels) = (g.batch * g.out_pixels(), g.patch_len(), g.out_channels);
    let block = transposed_block(patch);
    let (dy_t, w) = (transposed(dy, wide), dense(weight, patch));
    gemm_by_column_blocks(pool, (wide, patch, channels), dy_t, w, block, blocked);
    block
}

/// The pointwise input gradient as [`transposed_dcols`] and then [`untranspose_blocks`]
/// compute it, when the blocks are all [`transposed_block`] wide, in one pass: one item per
/// block of `dcols_b^T = dY_b^T W`, which computes its block into its slot of `blocks` (`N P x
/// block`, the same GEMM as [`transposed_dcols`]'s item) and at once copies each image's rows
/// of it, transposed, into that image's planes of the block's input channels, while they are
/// in its core's cache. The same values as the two passes, with one fork and join fewer. An
/// item's cost is its GEMM's (the copy is `1 / (2 C_out)` of its flops).
fn untransposed_in_items(
    pool: &dyn ThreadPool,
    g: &Conv2dGeometry,
    weight: &[f32],
    dy: &[f32],
    blocks: &mut [f32],
    grad_input: &mut [f32],
) {
    let (n, pixels, patch, channels) = g.batched_sizes();
    let (wide, block) = (n * pixels, transposed_block(patch));
    debug_assert_eq!(
        patch % block,
        0,
        "untransposed_in_items: blocks of one width"
    );
    let dy_t = transposed(dy, wide);
    let cost = gemm_item_cost(block, wide, channels);
    let mut slots: Vec<&mut [f32]> = blocks.chunks_mut(wide * block).collect();
    for_each_strided_group(
        pool,
        grad_input,
        block * pixels,
        &mut slots,
        cost,
        |index, slot, planes| {
            let w_columns = dense(&weight[index * block..], patch);
            gemm_single_threaded((wide, block, channels), dy_t, w_columns, slot, 1.0, 0.0);
            for (image, planes) in planes.iter_mut().enumerate() {
                let rows = &slot[image * pixels * block..];
                transpose_block(rows, block, (pixels, block), planes, pixels);
            }
        },
    );
}

/// Every image's input gradient from `dcols_b^T` in column blocks of `block` (as
/// [`transposed_dcols`] writes it): one item per (image, input channel) plane, which gathers
/// the plane's `kh kw x P` columns into its slot of `unrolled` and adds them back onto the
/// plane (col2im) while they are in L1. The same values in the same order as untransposing
/// every image's columns first, then col2im.
fn col2im_from_blocks(
    pool: &dyn ThreadPool,
    g: &Conv2dGeometry,
    block: usize,
    blocked: &[f32],
    unrolled: &mut [f32],
    grad_input: &mut [f32],
) {
    let plane_cols = g.kernel_area() * g.out_pixels();
    let values = plane_cols as f64;
    let stored = values + g.in_pixels() as f64;
    let cost = item_cost(values, stored, values, VECTOR_FLOPS_PER_CYCLE);
    let (dx, cols) = ((grad_input, g.in_pixels()), (unrolled, plane_cols));
    for_each_chunk_pair(
        pool,
        dx.0,
        dx.1,
        cols.0,
        cols.1,
        cost,
        |index, plane, cols| {
            let image_channel = (index / g.in_channels, index % g.in_channels);
            gather_plane_columns(g, (block, blocked), image_channel, cols);
            col2im_plane(g, cols, plane);
        },
    );
}

/// Copies the `kh kw x P` columns of `image`'s plane `channel` out of `dcols_b^T` stored in
/// column blocks of `block` into `cols` (row `tap`, column `pixel`).
fn gather_plane_columns(
    g: &Conv2dGeometry,
    (block, blocked): (usize, &[f32]),
    (image, channel): (usize, usize),
    cols: &mut [f32],
) {
    let (pixels, area, patch) = (g.out_pixels(), g.kernel_area(), g.patch_len());
    let wide = g.batch * pixels;
    // Where column `column` of the image's first pixel lies, and the row stride there.
    let source = |column: usize| {
        let (index, offset) = (column / block, column % block);
        let width = block.min(patch - index * block);
        (
            index * block * wide + image * pixels * width + offset,
            width,
        )
    };
    let first = channel * area;
    let (start, width) = source(first);
    if first % block + area <= width {
        // All in one block: each pixel's columns are one run of `area` values.
        let runs = blocked[start..].chunks(width).take(pixels);
        for (pixel, run) in runs.enumerate() {
            for (tap, &value) in run[..area].iter().enumerate() {
                cols[tap * pixels + pixel] = value;
            }
        }
        return;
    }
    for (tap, row) in cols.chunks_exact_mut(pixels.max(1)).enumerate() {
        let (start, width) = source(first + tap);
        let values = blocked[start..].iter().step_by(width);
        row.iter_mut()
            .zip(values)
            .for_each(|(value, &d)| *value = d);
    }
}

/// Every image's `dcols_n = W^T dY_n` (`N x patch x P`, into `per_image_dcols`) from the
/// gathered `dy` (`C_out x N P`), as `W^T dY_b` in row blocks through the scratch `dcols`
/// (`patch x N P` values), then scattered.
fn dcols_by_rows(
    pool: &dyn ThreadPool,
    g: &Conv2dGeometry,
    weight: &[f32],
    dy: &[f32],
    dcols: &mut [f32],
    per_image_dcols: &mut [f32],
) {
    let (n, pixels, patch, channels) = g.batched_sizes();
    let wide = n * pixels;
    let shape = GemmShape {
        m: patch,
        n: wide,
        k: channels,
    };
    let (w_t, dy) = (transposed(weight, patch), dense(dy, wide));
    let rows = rows_per_block(shape);
    gemm_by_rows(pool, (patch, wide, channels), rows, w_t, dy, dcols);
    scatter(pool, (n, patch, pixels), dcols, per_image_dcols);
}

/// `dcols_n = W^T dY_n` for every image, into `dcols`: one item per (image, block of `dcols`
/// rows), the whole image at batch 4 or more (`forward.rs`' [`image_row_block`]).
fn weight_transpose_times(
    pool: &dyn ThreadPool,
    geometry: &Conv2dGeometry,
    weight: &[f32],
    grad_output: &[f32],
    dcols: &mut [f32],
) {
    let g = geometry;
    let (patch, pixels, channels) = (g.patch_len(), g.out_pixels(), g.out_channels);
    let shape = GemmShape {
        m: patch,
        n: pixels,
        k: channels,
    };
    let block = image_row_block(g, shape);
    let cost = gemm_item_cost(block, pixels, channels);
    let image_len = g.cols_per_image();
    for_each_nested_chunk(
        pool,
        dcols,
        image_len,
        block * pixels,
        cost,
        |image, index, out| {
            let first_row = index * block;
            let rows = out.len() / pixels;
            // W is C_out x patch; W^T's (row r, column c) is W[c * patch + r].
            let weight_t_rows = MatView {
                data: &weight[first_row..],
                row_stride: 1,
                col_stride: patch,
            };
            let image_grad = MatView {
                data: &grad_output[image * channels * pixels..(image + 1) * channels * pixels],
                row_stride: pixels,
                col_stride: 1,
            };
            gemm_single_threaded(
                (rows, pixels, channels),
                weight_t_rows,
                image_grad,
                out,
                1.0,
                0.0,
            );
        },
    );
}

/// Adds every image's `dcols` back onto its pixels: one item per (image, channel) plane.
fn col2im_batch(
    pool: &dyn ThreadPool,
    geometry: &Conv2dGeometry,
    dcols: &[f32],
    grad_input: &mut [f32],
) {
    let g = geometry;
    let plane_cols = g.kernel_area() * g.out_pixels();
    let cost = item_cost(
        plane_cols as f64,
        g.in_pixels() as f64,
        plane_cols as f64,
        VECTOR_FLOPS_PER_CYCLE,
    );
    for_each_chunk(
        pool,
        grad_input,
        g.in_pixels(),
        cost,
        |plane_index, plane| {
            let cols = &dcols[plane_index * plane_cols..(plane_index + 1) * plane_cols];
            col2im_plane(g, cols, plane);
        },
    );
}

/// `grad_weight = d loss / d weight` of a convolution, from its `input` and `grad_output`;
/// `grad_weight` must have the weight's shape, which it also defines.
pub fn conv2d_backward_weights(
    pool: &dyn ThreadPool,
    input: &Tensor,
    grad_output: &Tensor,
    params: Conv2dParams,
    grad_weight: &mut Tensor,
) -> Result<Work, KernelError> {
    let geometry = Conv2dGeometry::new(&input.shape, &grad_weight.shape, params)
        .map_err(|error| rename(error, "conv2d_backward_weights"))?;
    let expected = geometry.output_shape();
    expect_shape(
        "conv2d_backward_weights",
        "grad_output",
        &grad_output.shape,
        &expected,
    )?;
    let (x, dy) = (&input.data, &grad_output.data);
    backward_weights(pool, &geometry, x, dy, &mut grad_weight.data);
    Ok(geometry.backward_weights_work())
}

/// `error` as reported by `kernel` instead of by `conv2d`.
fn rename(error: KernelError, kernel: &'static str) -> KernelError {
    match error {
        KernelError::Shape { detail, .. } => KernelError::Shape { kernel, detail },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::super::blocked::tests::{naive_input_gradient, small_integers};
    use super::*;
    use crate::pool::{Pool, PoolKind, PoolOptions};

    #[test]
    fn channel_groups_in_chunks_match_the_definition_on_every_pool() {
        // Groups of 6 input channels (7 output channels, 3x3: 63 values of W^T each) in chunks
        // of 6, 3, 2 and 1 channels, on 8x8 planes and on a strided 3x3 from 17x17 to 9x9.
        let same = Conv2dParams {
            stride: 1,
            padding: 1,
        };
        let strided = Conv2dParams {
            stride: 2,
            padding: 1,
        };
        let cases = [([2, 12, 8, 8], same), ([3, 12, 17, 17], strided)];
        for threads in [1, 2, 3] {
            let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, threads, "cg")).unwrap();
            for (input, params) in cases {
                let g = Conv2dGeometry::new(&input, &[7, 12, 3, 3], params).unwrap();
                let w = small_integers(g.weight_shape().iter().product(), 1);
                let dy = small_integers(g.output_shape().iter().product(), 2);
                let want = naive_input_gradient(&g, &w, &dy);
                for (max_values, chunk) in [(63 * 6, 6), (63 * 5, 3), (63 * 2, 2), (70, 1)] {
                    assert_eq!(chunk_channels(6, 63, max_values), chunk);
                    let mut dx = vec![f32::NAN; want.len()];
                    let operands = (&w[..], &dy[..]);
                    channel_group_backward_data(pool.as_dyn(), &g, operands, max_values, &mut dx);
                    assert_eq!(dx, want, "{input:?} chunks of {chunk}, {threads} threads");
                }
            }
        }
    }

    #[test]
    fn pointwise_blocks_untransposed_in_their_items_equal_the_separate_pass() {
        // 256 input channels: two blocks of 128; 48: one block. Values that are not small
        // integers, so the sums round, and the two forms must still agree bit for bit.
        let fractions = |len: usize, seed: usize| -> Vec<f32> {
            (0..len)
                .map(|i| ((i * 7919 + seed * 104_729) % 1000) as f32 / 997.0 - 0.5)
                .collect()
        };
        for threads in [1, 2, 3] {
            let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, threads, "pw")).unwrap();
            for (input, outs) in [([3, 256, 4, 4], 40), ([2, 48, 5, 5], 9)] {
                let g = Conv2dGeometry::new(&input, &[outs, input[1], 1, 1], Default::default())
                    .unwrap();
                let (n, pixels, patch, channels) = g.batched_sizes();
                assert_eq!(patch % transposed_block(patch), 0, "{input:?}");
                let w = fractions(channels * patch, 1);
                let dy_b = fractions(channels * n * pixels, 2);
                let mut blocks = vec![f32::NAN; patch * n * pixels];
                let mut got = vec![f32::NAN; n * patch * pixels];
                untransposed_in_items(pool.as_dyn(), &g, &w, &dy_b, &mut blocks, &mut got);
                let mut want = vec![f32::NAN; n * patch * pixels];
                let block = transposed_dcols(pool.as_dyn(), &g, &w, &dy_b, &mut blocks);
                let shape = (n, patch, pixels);
                untranspose_blocks(pool.as_dyn(), shape, block, &blocks, &mut want);
                assert_eq!(got, want, "{input:?}, {threads} threads");
            }
        }
    }

    #[test]
    fn resnet_like_stage_3_takes_chunks_of_64_channels() {
        let group_channels = 256 / CHANNEL_GROUPS;
        assert_eq!(
            chunk_channels(group_channels, 9 * 256, W_T_CHUNK_MAX_VALUES),
            64
        );
        // Fewer values per channel: the whole group at once.
        assert_eq!(chunk_channels(64, 9 * 128, W_T_CHUNK_MAX_VALUES), 64);
    }
}
