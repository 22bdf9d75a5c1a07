//! Stride-1 convolutions on big planes, one block of output pixels at a time: im2col of just
//! the block's columns into a per-thread buffer, then its GEMM, so the whole `cols` buffer
//! (9.4 MB for resnet-like's first two stages, far beyond L2) never exists.
//!
//! # Algorithm
//! Every output plane is cut into `B` equal runs of pixels ([`block_pixels`]); one
//! `parallel_for` item per run index `b`, over every image: im2col of run `b` of image `n`
//! (`C_in kh kw` rows of `run` pixels, about [`BLOCK_VALUES`] values) into the thread's
//! scratch buffer, `Y_b = W cols_b` (`C_out x run`) into the same buffer, and a copy of each of
//! its rows into run `b` of its output plane.
//!
//! The input gradient of a stride-1 convolution is itself such a convolution: of `dY` with the
//! weight flipped in both kernel axes and its channel axes swapped (`W'[ci, co, ky, kx] =
//! W[co, ci, kh-1-ky, kw-1-kx]`), padded by `kh - 1 - p`. Each item builds `W'` in its own
//! scratch (a copy the size of the weight) and runs the forward blocks on `dY`; no `dcols` and
//! no col2im.
//!
//! The weight gradient `dW^T = sum_n cols_n dY_n^T` is cut by input channels instead: one
//! item per group of `C_in / G` channels ([`WEIGHT_GROUPS`] or the next divisor of `C_in`),
//! which owns those channels' columns of `dW`. It runs over the images and runs of pixels
//! (about [`BLOCK_VALUES`] values of its own channels' columns each) in order, one GEMM
//! `cols_run dY_run^T` each accumulated into a `(C_in / G) kh kw x C_out` sum in its scratch
//! (`dY^T` read in place as a column-major view, no transposed copy), then writes the sum
//! transposed into its columns of `dW`. No partial sums to add, no im2col done twice.
//!
//! # Measurements
//! 2 shared cores, a workload of resnet-like's 3x3 convolutions at batch 4 run headless by
//! the old and new binaries (medians over 21 interleaved rounds of each op's P50), ms per
//! call before -> after, on a loaded
//! machine (absolute times drift with load by 30%; the ratios held over three such runs):
//! - s1 (32x32, 64 channels): forward 2.70 -> 2.28 (1.19x), input gradient 2.36 -> 2.28
//!   (1.04x), weight gradient 3.39 -> 2.62 (1.29x);
//! - s2 (16x16, 128 channels): forward 2.20 -> 1.84 (1.19x), input gradient 2.11 -> 2.07
//!   (1.02x), weight gradient 3.24 -> 2.07 (1.57x).
//!
//! In another run (other machine load), `BLOCK_VALUES` of 2^16 and 2^17 were slower than 2^18
//! (s1 forward 2.16 and 1.87 ms against 1.84), and 2^19 (two runs of 512 pixels for s1: one item per thread) too (2.02). The input
//! gradient gains nothing measurable (0.98x to 1.06x over five runs, within the noise): its
//! `dcols` GEMM (`576 x 1024`, inner 64) was already fast and col2im cheap; the flipped form
//! is kept because it is no slower and needs no `cols`-sized buffer.
//!
//! # Determinism
//! The runs and groups depend on the shapes alone and every output value is one thread's
//! GEMM (or GEMMs accumulated in a fixed order), so results are the same on every pool and
//! thread count.
#![forbid(unsafe_code)]

use super::batched::dense;
use super::im2col::im2col_pixels;
use super::{Conv2dGeometry, Conv2dParams};
use crate::kernels::gemm::{gemm_single_threaded, MatView};
use crate::kernels::par::{for_each_strided_group, item_cost, GEMM_FLOPS_PER_CYCLE};
use crate::kernels::scratch::with_scratch;
use crate::pool::ThreadPool;

/// Values of one block's column matrix, about.
pub const BLOCK_VALUES: usize = 1 << 18;

/// Fewest pixels in a block: below, a GEMM's `n` is too small to run near peak.
const MIN_BLOCK_PIXELS: usize = 64;

/// Pixels per block when `g` takes the blocked path: stride 1, not pointwise, and an output
/// plane that splits into equal runs of at least [`MIN_BLOCK_PIXELS`] pixels, at least two
/// and enough for a block to hold at most about [`BLOCK_VALUES`] values.
pub(super) fn block_pixels(g: &Conv2dGeometry) -> Option<usize> {
    if g.params.stride != 1 || g.is_pointwise() {
        return None;
    }
    let pixels = g.out_pixels();
    let wanted = (pixels * g.patch_len()).div_ceil(BLOCK_VALUES).max(2);
    let blocks = divisor_at_least(pixels, wanted)?;
    let run = pixels / blocks;
    (run >= MIN_BLOCK_PIXELS).then_some(run)
}

/// The smallest divisor of `n` that is at least `min`, if any.
fn divisor_at_least(n: usize, min: usize) -> Option<usize> {
    (min..=n).find(|d| n % d == 0)
}

/// `output = conv2d(input, weight)` in blocks of `run` output pixels ([`block_pixels`]).
pub(super) fn blocked_forward(
    pool: &dyn ThreadPool,
    g: &Conv2dGeometry,
    run: usize,
    input: &[f32],
    weight: &[f32],
    output: &mut [f32],
) {
    convolve_in_blocks(pool, g, run, input, Weight::AsIs(weight), output);
}

/// `grad_input` of the convolution whose input gradient is the forward convolution `flipped`
/// ([`flipped_geometry`]) of `grad_output` with `weight` flipped, in blocks of `run` pixels
/// ([`block_pixels`] of `flipped`).
pub(super) fn blocked_backward_data(
    pool: &dyn ThreadPool,
    flipped: &Conv2dGeometry,
    run: usize,
    grad_output: &[f32],
    weight: &[f32],
    grad_input: &mut [f32],
) {
    let weight = Weight::Flipped(weight);
    convolve_in_blocks(pool, flipped, run, grad_output, weight, grad_input);
}

/// The weight a blocked convolution multiplies by: as given (`C_out x C_in kh kw`), or the
/// weight of the convolution it is the input gradient of, to flip (see the module docs).
#[derive(Clone, Copy)]
enum Weight<'a> {
    AsIs(&'a [f32]),
    Flipped(&'a [f32]),
}

/// `output = conv2d(input, weight)` of `g`, one item per run index (see the module docs).
fn convolve_in_blocks(
    pool: &dyn ThreadPool,
    g: &Conv2dGeometry,
    run: usize,
    input: &[f32],
    weight: Weight<'_>,
    output: &mut [f32],
) {
    let (patch, channels, batch) = (g.patch_len(), g.out_channels, g.batch);
    if output.is_empty() || patch == 0 {
        output.fill(0.0);
        return;
    }
    let own_weight_len = match weight {
        Weight::AsIs(_) => 0,
        Weight::Flipped(_) => channels * patch,
    };
    let (cols_len, y_len) = (patch * run, channels * run);
    let per_image_loads = (patch * run + channels * patch) as f64;
    let cost = item_cost(
        batch as f64 * per_image_loads,
        (batch * y_len) as f64,
        2.0 * (batch * channels * patch * run) as f64,
        GEMM_FLOPS_PER_CYCLE,
    );
    let image_len = g.in_channels * g.in_pixels();
    let mut runs = vec![(); g.out_pixels() / run];
    for_each_strided_group(pool, output, run, &mut runs, cost, |block, _, pieces| {
        with_scratch(own_weight_len + cols_len + y_len, |buffer| {
            let (own_weight, rest) = buffer.split_at_mut(own_weight_len);
            let (cols, y) = rest.split_at_mut(cols_len);
            let weight = match weight {
                Weight::AsIs(weight) => weight,
                Weight::Flipped(original) => {
                    flip_into(g, original, own_weight);
                    own_weight
                }
            };
            let pixels = block * run..(block + 1) * run;
            let images = input.chunks_exact(image_len.max(1));
            for (image, planes) in images.zip(pieces.chunks_exact_mut(channels)) {
                im2col_pixels(g, image, pixels.clone(), cols);
                let shape = (channels, run, patch);
                gemm_single_threaded(shape, dense(weight, patch), dense(cols, run), y, 1.0, 0.0);
                for (plane, row) in planes.iter_mut().zip(y.chunks_exact(run)) {
                    plane.copy_from_slice(row);
                }
            }
        });
    });
}

/// `flipped[o, i, ky, kx] = original[i, o, kh-1-ky, kw-1-kx]`, where `g`'s output channels are
/// `o` and its input channels `i`.
fn flip_into(g: &Conv2dGeometry, original: &[f32], flipped: &mut [f32]) {
    let area = g.kernel_area();
    let (outs, ins) = (g.out_channels, g.in_channels);
    for (index, taps) in flipped.chunks_exact_mut(area).enumerate() {
        let (o, i) = (index / ins, index % ins);
        let source = &original[(i * outs + o) * area..(i * outs + o + 1) * area];
        taps.iter_mut()
            .zip(source.iter().rev())
            .for_each(|(tap, &value)| *tap = value);
    }
}

/// The geometry of the input gradient of `g` as a forward convolution of `dY` with `W'` (see
/// the module docs), when `g` has stride 1, a square kernel and less padding than its size.
pub(super) fn flipped_geometry(g: &Conv2dGeometry) -> Option<Conv2dGeometry> {
    let square = g.kernel_h == g.kernel_w && g.params.padding < g.kernel_h;
    if g.params.stride != 1 || !square {
        return None;
    }
    let params = Conv2dParams {
        stride: 1,
        padding: g.kernel_h - 1 - g.params.padding,
    };
    let weight = [g.in_channels, g.out_channels, g.kernel_h, g.kernel_w];
    Conv2dGeometry::new(&g.output_shape(), &weight, params).ok()
}

/// Items of the blocked weight gradient, at least: input-channel groups.
const WEIGHT_GROUPS: usize = 4;

/// `grad_weight = sum_n dY_n cols_n^T` of `g`, one item per group of input channels: each
/// computes its columns of `dW` (transposed, `dW^T` rows `(ci, ky, kx)`) from im2col of just
/// its channels, a run of pixels at a time, accumulating over images and runs in order.
pub(super) fn blocked_backward_weights(
    pool: &dyn ThreadPool,
    g: &Conv2dGeometry,
    input: &[f32],
    grad_output: &[f32],
    grad_weight: &mut [f32],
) {
    let (channels, pixels, batch) = (g.out_channels, g.out_pixels(), g.batch);
    if batch * pixels == 0 || g.in_channels == 0 {
        grad_weight.fill(0.0);
        return;
    }
    let wanted = WEIGHT_GROUPS.min(g.in_channels);
    let groups = divisor_at_least(g.in_channels, wanted).unwrap_or(g.in_channels);
    let rows = g.in_channels / groups * g.kernel_area();
    let run = (BLOCK_VALUES / rows).clamp(1, pixels);
    let cost = item_cost(
        (batch * pixels * (rows + channels)) as f64,
        (rows * channels) as f64,
        2.0 * (batch * pixels * rows * channels) as f64,
        GEMM_FLOPS_PER_CYCLE,
    );
    let mut slots = vec![(); groups];
    for_each_strided_group(
        pool,
        grad_weight,
        rows,
        &mut slots,
        cost,
        |group, _, pieces| {
            with_scratch(rows * run + rows * channels, |buffer| {
                let (cols, sum) = buffer.split_at_mut(rows * run);
                let group_rows = GroupRows { group, rows, run };
                sum_group_products(g, group_rows, input, grad_output, cols, sum);
                for (o, piece) in pieces.iter_mut().enumerate() {
                    let column = sum[o..].iter().step_by(channels);
                    piece.iter_mut().zip(column).for_each(|(w, &s)| *w = s);
                }
            });
        },
    );
}

/// One item of the blocked weight gradient: input-channel group `group`, whose `rows` rows of
/// `dW^T` it computes, `run` pixels at a time.
#[derive(Clone, Copy)]
struct GroupRows {
    group: usize,
    rows: usize,
    run: usize,
}

/// `sum = sum_n sum_runs cols_run dY_run^T` over the group's rows of every image's columns
/// (`rows x C_out`), in image then run order; `cols` is scratch for one run's columns.
fn sum_group_products(
    g: &Conv2dGeometry,
    GroupRows { group, rows, run }: GroupRows,
    input: &[f32],
    grad_output: &[f32],
    cols: &mut [f32],
    sum: &mut [f32],
) {
    let (channels, pixels) = (g.out_channels, g.out_pixels());
    let image_len = g.in_channels * g.in_pixels();
    let group_len = rows / g.kernel_area() * g.in_pixels();
    let mut beta = 0.0;
    for image in 0..g.batch {
        let planes = &input[image * image_len + group * group_len..][..group_len];
        let dy = &grad_output[image * channels * pixels..(image + 1) * channels * pixels];
        for first in (0..pixels).step_by(run) {
            let len = run.min(pixels - first);
            let cols = &mut cols[..rows * len];
            im2col_pixels(g, planes, first..first + len, cols);
            let dy_t = MatView {
                data: &dy[first..],
                row_stride: 1,
                col_stride: pixels,
            };
            gemm_single_threaded(
                (rows, channels, len),
                dense(cols, len),
                dy_t,
                sum,
                1.0,
                beta,
            );
            beta = 1.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same(input: [usize; 4], out_channels: usize) -> Conv2dGeometry {
        let params = Conv2dParams {
            stride: 1,
            padding: 1,
        };
        let weight = [out_channels, input[1], 3, 3];
        Conv2dGeometry::new(&input, &weight, params).unwrap()
    }

    #[test]
    fn resnet_like_early_stages_take_blocks_that_fit_l2() {
        // s1: 1024 pixels x 576 patch rows in 4 runs; s2: 256 x 1152 in 2.
        assert_eq!(block_pixels(&same([4, 64, 32, 32], 64)), Some(256));
        assert_eq!(block_pixels(&same([4, 128, 16, 16], 128)), Some(128));
        // Too few pixels for two runs of 64, or no equal runs that long.
        assert_eq!(block_pixels(&same([1, 256, 8, 8], 256)), None);
        assert_eq!(block_pixels(&same([1, 4, 13, 13], 4)), None);
    }

    #[test]
    fn the_input_gradient_is_a_same_size_convolution_with_the_flipped_weight() {
        let g = same([2, 3, 16, 16], 5);
        let flipped = flipped_geometry(&g).unwrap();
        assert_eq!(flipped.output_shape(), g.input_shape());
        assert_eq!(flipped.weight_shape(), [3, 5, 3, 3]);
        let original: Vec<f32> = (0..5 * 3 * 9).map(|v| v as f32).collect();
        let mut flipped_weight = vec![f32::NAN; original.len()];
        flip_into(&flipped, &original, &mut flipped_weight);
        // W'[ci=1, co=2, ky=0, kx=1] = W[co=2, ci=1, ky=2, kx=1].
        assert_eq!(
            flipped_weight[(5 + 2) * 9 + 1],
            original[(2 * 3 + 1) * 9 + 7]
        );
        let strided = Conv2dParams {
            stride: 2,
            padding: 1,
        };
        let g = Conv2dGeometry::new(&[1, 1, 8, 8], &[1, 1, 3, 3], strided).unwrap();
        assert_eq!(flipped_geometry(&g), None);
    }
}
