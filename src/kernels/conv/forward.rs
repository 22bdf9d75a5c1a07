//! [`conv2d`]: im2col (skipped when pointwise), then one GEMM per (image, block of output
//! channels); or the batched path, or the blocked path (`blocked.rs`).
#![forbid(unsafe_code)]

use super::batched::{self, is_batched};
use super::blocked::{blocked_forward, forward_block_pixels};
use super::im2col::im2col_batch_into;
use super::{Conv2dGeometry, Conv2dParams};
use crate::kernels::error::{expect_shape, KernelError};
use crate::kernels::gemm::{gemm_item_cost, gemm_single_threaded, MatView};
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
    let block = g.out_channel_block();
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
