//! The gradients of [`conv2d`](super::conv2d): with respect to its input (GEMM + col2im)
//! and to its weight (im2col + GEMM summed over images). A pointwise convolution skips
//! col2im and im2col: its column matrices are the input (gradient) itself.
#![forbid(unsafe_code)]

use super::batched::{
    dense, gather, gemm_by_rows, is_batched, scatter, transpose_images, transposed,
};
use super::im2col::{col2im_plane, im2col_batch_into};
use super::weight_grad::small_backward_weights;
use super::{Conv2dGeometry, Conv2dParams};
use crate::kernels::error::{expect_shape, KernelError};
use crate::kernels::gemm::{
    gemm_single_threaded, rows_per_block, GemmShape, MatView, GEMM_MIN_ROWS,
};
use crate::kernels::par::{
    for_each_chunk, for_each_nested_chunk, item_cost, GEMM_FLOPS_PER_CYCLE, VECTOR_FLOPS_PER_CYCLE,
};
use crate::kernels::scratch::with_scratch;
use crate::kernels::tensor::Tensor;
use crate::kernels::work::Work;
use crate::pool::parallel_for::Cost;
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
    } else {
        with_scratch(geometry.batch * geometry.cols_per_image(), |dcols| {
            weight_transpose_times(pool, &geometry, w, dy, dcols);
            col2im_batch(pool, &geometry, dcols, &mut grad_input.data);
        });
    }
    Ok(geometry.backward_data_work())
}

/// The input gradient as one GEMM over the batch (see `batched.rs`).
fn batched_backward_data(
    pool: &dyn ThreadPool,
    g: &Conv2dGeometry,
    weight: &[f32],
    grad_output: &[f32],
    grad_input: &mut [f32],
) {
    let (n, pixels, patch, channels) = (g.batch, g.out_pixels(), g.patch_len(), g.out_channels);
    let wide = n * pixels;
    let per_image = if g.is_pointwise() {
        0
    } else {
        n * g.cols_per_image()
    };
    with_scratch(per_image + (patch + channels) * wide, |buffer| {
        let (unrolled, rest) = buffer.split_at_mut(per_image);
        let (dcols, dy) = rest.split_at_mut(patch * wide);
        gather(pool, (n, channels, pixels), grad_output, dy);
        let shape = (patch, wide, channels);
        gemm_by_rows(
            pool,
            shape,
            transposed(weight, patch),
            dense(dy, wide),
            dcols,
        );
        if g.is_pointwise() {
            scatter(pool, (n, patch, pixels), dcols, grad_input);
        } else {
            scatter(pool, (n, patch, pixels), dcols, unrolled);
            col2im_batch(pool, g, unrolled, grad_input);
        }
    });
}

/// The weight gradient as one GEMM over the batch, its inner dimension every image's pixels
/// (see `batched.rs`).
fn batched_backward_weights(
    pool: &dyn ThreadPool,
    g: &Conv2dGeometry,
    input: &[f32],
    grad_output: &[f32],
    grad_weight: &mut [f32],
) {
    let (n, pixels, patch, channels) = (g.batch, g.out_pixels(), g.patch_len(), g.out_channels);
    let wide = n * pixels;
    let per_image = if g.is_pointwise() {
        0
    } else {
        n * g.cols_per_image()
    };
    with_scratch(per_image + (patch + channels) * wide, |buffer| {
        let (unrolled, rest) = buffer.split_at_mut(per_image);
        let (cols, dy) = rest.split_at_mut(patch * wide);
        // cols^T (N P x patch), so the GEMM reads both operands row-major: the `gemm` crate
        // runs `A B^T` with both inner dimensions contiguous markedly slower.
        if g.is_pointwise() {
            transpose_images(pool, (patch, pixels), input, cols);
        } else {
            im2col_batch_into(pool, g, input, unrolled);
            transpose_images(pool, (patch, pixels), unrolled, cols);
        }
        gather(pool, (n, channels, pixels), grad_output, dy);
        let shape = (channels, patch, wide);
        gemm_by_rows(
            pool,
            shape,
            dense(dy, wide),
            dense(cols, patch),
            grad_weight,
        );
    });
}

/// `dcols_n = W^T dY_n` for every image, into `dcols`: one item per (image, block of `dcols`
/// rows).
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
    let block = rows_per_block(shape);
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
    if is_batched(&geometry) {
        let (x, dy) = (&input.data, &grad_output.data);
        batched_backward_weights(pool, &geometry, x, dy, &mut grad_weight.data);
    } else if geometry.out_channels < 2 * GEMM_MIN_ROWS {
        let (x, dy) = (&input.data, &grad_output.data);
        small_backward_weights(pool, &geometry, x, dy, &mut grad_weight.data);
    } else if geometry.is_pointwise() {
        grad_times_cols_transposed(pool, &geometry, &input.data, &grad_output.data, grad_weight);
    } else {
        with_scratch(geometry.batch * geometry.cols_per_image(), |cols| {
            im2col_batch_into(pool, &geometry, &input.data, cols);
            grad_times_cols_transposed(pool, &geometry, cols, &grad_output.data, grad_weight);
        });
    }
    Ok(geometry.backward_weights_work())
}

/// `dW = sum_n dY_n cols_n^T` (`C_out x patch`), straight into `grad_weight`: one item per
/// block of output channels, each adding the images in order, so the sum does not depend on
/// threads.
fn grad_times_cols_transposed(
    pool: &dyn ThreadPool,
    geometry: &Conv2dGeometry,
    cols: &[f32],
    grad_output: &[f32],
    grad_weight: &mut Tensor,
) {
    let g = geometry;
    let (patch, pixels, channels) = (g.patch_len(), g.out_pixels(), g.out_channels);
    let shape = GemmShape {
        m: channels,
        n: patch,
        k: pixels,
    };
    if g.batch == 0 {
        grad_weight.data.fill(0.0); // no images, no gradient
        return;
    }
    let block = rows_per_block(shape);
    let images = g.batch as f64;
    let one_image = gemm_item_cost(block, patch, pixels);
    let cost = Cost {
        bytes_loaded: one_image.bytes_loaded * images,
        bytes_stored: one_image.bytes_stored * images,
        compute_cycles: one_image.compute_cycles * images,
    };
    let image_cols =
        |image: usize| &cols[image * g.cols_per_image()..(image + 1) * g.cols_per_image()];
    for_each_chunk(
        pool,
        &mut grad_weight.data,
        block * patch,
        cost,
        |index, out| {
            let first_channel = index * block;
            let rows = out.len() / patch.max(1);
            for image in 0..g.batch {
                let image_grad =
                    &grad_output[image * channels * pixels..(image + 1) * channels * pixels];
                let grad_rows = MatView {
                    data: &image_grad[first_channel * pixels..],
                    row_stride: pixels,
                    col_stride: 1,
                };
                // cols_n is patch x pixels; its transpose's (row p, column q) is cols_n[q * pixels + p].
                let cols_t = MatView {
                    data: image_cols(image),
                    row_stride: 1,
                    col_stride: pixels,
                };
                let beta = if image == 0 { 0.0 } else { 1.0 };
                gemm_single_threaded((rows, patch, pixels), grad_rows, cols_t, out, 1.0, beta);
            }
        },
    );
}

/// The cost of one GEMM item of `rows x n`, inner dimension `k`.
pub(super) fn gemm_item_cost(rows: usize, n: usize, k: usize) -> Cost {
    let (rows, n, k) = (rows as f64, n as f64, k as f64);
    item_cost(
        rows * k + k * n,
        rows * n,
        2.0 * rows * n * k,
        GEMM_FLOPS_PER_CYCLE,
    )
}

/// `error` as reported by `kernel` instead of by `conv2d`.
fn rename(error: KernelError, kernel: &'static str) -> KernelError {
    match error {
        KernelError::Shape { detail, .. } => KernelError::Shape { kernel, detail },
        other => other,
    }
}
