//! The gradients of [`conv2d`](super::conv2d): with respect to its input (GEMM + col2im)
//! and to its weight (im2col + GEMM summed over images). A pointwise convolution skips
//! col2im and im2col: its column matrices are the input (gradient) itself. Stride-1
//! convolutions on big planes take the blocked path instead (`blocked.rs`).
#![forbid(unsafe_code)]

use super::batched::{
    dense, gemm_by_column_blocks, gemm_by_rows, is_batched, per_image_items, scatter,
    transpose_images, transposed, untranspose_blocks, with_batched_scratch, TRANSPOSED_MAX_COLUMNS,
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
    for_each_chunk, for_each_chunk_pair, for_each_nested_chunk, item_cost, VECTOR_FLOPS_PER_CYCLE,
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

/// The input gradient as one GEMM over the batch (see `batched.rs`).
fn batched_backward_data(
    pool: &dyn ThreadPool,
    g: &Conv2dGeometry,
    weight: &[f32],
    grad_output: &[f32],
    grad_input: &mut [f32],
) {
    if per_image_items(g) {
        return per_image_backward_data(pool, g, weight, grad_output, grad_input);
    }
    with_batched_scratch(pool, g, grad_output, |unrolled, dcols, dy| {
        let per_image_dcols = if g.is_pointwise() {
            &mut *grad_input
        } else {
            &mut *unrolled
        };
        batched_dcols(pool, g, weight, dy, dcols, per_image_dcols);
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

/// One image's `dcols` (`C_in kh kw x P`) added back onto its planes (`C_in x H x W`).
fn col2im_image(g: &Conv2dGeometry, dcols: &[f32], planes: &mut [f32]) {
    let plane_cols = (g.kernel_area() * g.out_pixels()).max(1);
    let planes = planes.chunks_exact_mut(g.in_pixels().max(1));
    for (plane, cols) in planes.zip(dcols.chunks_exact(plane_cols)) {
        col2im_plane(g, cols, plane);
    }
}

/// Every image's `dcols_n = W^T dY_n` (`N x patch x P`, into `per_image_dcols`) from the
/// gathered `dy` (`C_out x N P`), through the scratch `dcols` (`patch x N P` values): as
/// `dcols_b^T = dY_b^T W` in column blocks when the product is at most
/// [`TRANSPOSED_MAX_COLUMNS`] wide, else as `W^T dY_b` in row blocks.
fn batched_dcols(
    pool: &dyn ThreadPool,
    g: &Conv2dGeometry,
    weight: &[f32],
    dy: &[f32],
    dcols: &mut [f32],
    per_image_dcols: &mut [f32],
) {
    let (n, pixels, patch, channels) = (g.batch, g.out_pixels(), g.patch_len(), g.out_channels);
    let wide = n * pixels;
    if wide <= TRANSPOSED_MAX_COLUMNS {
        let block = rows_per_block(GemmShape {
            m: patch,
            n: wide,
            k: channels,
        });
        let shape = (wide, patch, channels);
        let (dy_t, w) = (transposed(dy, wide), dense(weight, patch));
        gemm_by_column_blocks(pool, shape, dy_t, w, block, dcols);
        untranspose_blocks(pool, (n, patch, pixels), block, dcols, per_image_dcols);
    } else {
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
