//! Convolutions on big planes, one block of output pixels at a time: im2col of just the
//! block's columns into a per-thread buffer, then its GEMM, so the whole `cols` buffer (9.4 MB
//! for resnet-like's first two stages, 9.6 MB for its 7x7 stride-2 stem, far beyond L2) never
//! exists.
//!
//! # Algorithm
//! Every output plane is cut into `B` equal runs of pixels ([`forward_block_pixels`]). The
//! forward is one `parallel_for` item per (image, block of output channels): one block per
//! image for a batch of [`FORWARD_ITEMS`] or more, else the fewest equal blocks of at least
//! [`MIN_BLOCK_CHANNELS`] channels that make that many items ([`channel_blocks`]), each
//! redoing its image's im2col. An item owns its channels' planes of its image, one contiguous
//! piece of the output, and for each run `b` in order does im2col of run `b` (`C_in kh kw`
//! rows of `run` pixels, about [`BLOCK_VALUES`] values) into its thread's scratch buffer,
//! then `Y_b = W cols_b` straight into run `b` of its planes: the GEMM's destination rows
//! lie a plane apart (`gemm_single_threaded_strided`), so no result is copied. The GEMM goes
//! in calls of at most [`UNPACKED_MAX_ROWS`] (48) output channels ([`multiply_in_place`]), for
//! which the `gemm` crate reads `cols_b` in place instead of first copying it into packed
//! panels (a copy the size of the columns, per call). Any stride
//! takes this path (the stem's 7x7 stride 2 included: its item first splits the image into
//! phase planes, `im2col.rs`' [`ImageSource`], so each run's im2col is shifted copies); the input gradient and the
//! channel-grouped weight gradient below only stride 1 ([`block_pixels`]).
//!
//! The input gradient of a stride-1 convolution is itself such a convolution: of `dY` with the
//! weight flipped in both kernel axes and its channel axes swapped (`W'[ci, co, ky, kx] =
//! W[co, ci, kh-1-ky, kw-1-kx]`), padded by `kh - 1 - p`. The call builds `W'` once, over the pool
//! ([`flip_in_parallel`]: [`FLIP_ROWS`] rows of `W'` per item, filled one input channel of the
//! original at a time across them, so every read is a contiguous run of the weight), into the
//! calling thread's shared-operand buffer (`shared.rs`); then the forward blocks run on `dY`
//! with it. No `dcols` and no col2im.
//!
//! The weight gradient `dW^T = sum_n cols_n dY_n^T` is cut by input channels instead: one
//! item per group of `C_in / G` channels ([`WEIGHT_GROUPS`] or the next divisor of `C_in`),
//! which owns those channels' columns of `dW`. It runs over the images and runs of pixels
//! (about [`BLOCK_VALUES`] values of its own channels' columns each) in order, one GEMM
//! `cols_run dY_run^T` each accumulated into a `(C_in / G) kh kw x C_out` sum in its scratch,
//! then writes the sum transposed into its columns of `dW`. `dY^T` is read in place as a
//! column-major view, except on planes of a multiple of [`ALIASING_PIXELS`] (1024) pixels: there
//! `dY`'s rows lie a multiple of 4 KiB apart, and the `gemm` crate, packing the view, reads 64
//! of them at once, one value each, all in one set of the L1 cache, where they evict each
//! other; so the call first transposes every image's `dY` once
//! (`transpose_images`, into the shared-operand buffer) and the GEMMs read it row-major. No partial sums to add, no im2col done twice.
//! With fewer input channels than [`WEIGHT_GROUPS`] (the stem's 3: groups of 49 rows, 3 items
//! for 2 threads) it is cut by pixels instead, any stride
//! ([`weight_gradient_by_pixel_parts`]): one item per part of [`WEIGHT_PARTS`] of every
//! image's output pixels, each summing all of `dW^T` over its pixels of every image (images,
//! then runs, in order; the stem's images split into phase planes as the forward's) into its
//! own slot of the caller's scratch; the slots are then added
//! in part order and transposed into `dW`.
//!
//! # Choices
//! The measurements behind these: `bench/KERNELS.md`.
//! - [`BLOCK_VALUES`] (2^18 values, 1 MiB of columns): much smaller blocks make thinner
//!   GEMMs, larger ones leave L2; half of it runs about as fast.
//! - `W'` is built once per call over the pool rather than once per item: each build reads
//!   the weight 9 values at a time a row of `W` apart, once per item otherwise.
//! - `dY` is transposed only where its rows alias ([`ALIASING_PIXELS`]); on other planes the
//!   transpose costs what the packing loses, and a transpose of each run inside its item
//!   does no better than one per call.
//! - The columns' rows stay `run` apart: padding them to an odd number of cache lines made
//!   no difference here.
//! - `W'` and the items' columns are not held in one buffer of the caller's: a slot per item
//!   is cold in L2 when its item starts.
//!
//! # Determinism
//! The runs, channel blocks, groups and parts depend on the shapes alone, every output value
//! is one thread's GEMM (or GEMMs accumulated in a fixed order), and the parts' slots are
//! added in part order, so results are the same on every pool and thread count.
#![forbid(unsafe_code)]

use super::batched::{dense, transpose_images};
use super::im2col::{phases_len, ImageSource};
use super::shared::with_shared_operand;
use super::{Conv2dGeometry, Conv2dParams};
use crate::kernels::gemm::{gemm_single_threaded, gemm_single_threaded_strided, MatView};
use crate::kernels::par::{
    for_each_chunk, for_each_nested_chunk, for_each_strided_group, item_cost, GEMM_FLOPS_PER_CYCLE,
    VECTOR_FLOPS_PER_CYCLE,
};
use crate::kernels::scratch::with_scratch;
use crate::pool::ThreadPool;

/// Values of one block's column matrix, about.
pub(super) const BLOCK_VALUES: usize = 1 << 18;

/// Fewest pixels in a block: below, a GEMM's `n` is too small to run near peak.
const MIN_BLOCK_PIXELS: usize = 64;

/// Pixels per block when `g` takes the blocked path in every direction: stride 1 and
/// [`forward_block_pixels`].
pub(super) fn block_pixels(g: &Conv2dGeometry) -> Option<usize> {
    forward_block_pixels(g).filter(|_| g.params.stride == 1)
}

/// Whether the weight gradient of `g` takes the blocked path by parts of the pixels
/// ([`backward_weights_by_pixel_parts`]): fewer input channels than [`WEIGHT_GROUPS`], any
/// stride (the stem), an output plane that [`forward_block_pixels`] cuts.
pub(super) fn weight_gradient_by_pixel_parts(g: &Conv2dGeometry) -> bool {
    g.in_channels < WEIGHT_GROUPS && forward_block_pixels(g).is_some()
}

/// Pixels per block when `g`'s forward takes the blocked path: any stride, not pointwise,
/// and an output plane that splits into equal runs of at least [`MIN_BLOCK_PIXELS`] pixels,
/// at least two and enough for a block to hold at most about [`BLOCK_VALUES`] values.
pub(super) fn forward_block_pixels(g: &Conv2dGeometry) -> Option<usize> {
    if g.is_pointwise() {
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

/// `output = conv2d(input, weight)` in blocks of `run` output pixels ([`forward_block_pixels`]).
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

/// `output = conv2d(input, weight)` of `g`, one item per (image, block of output channels)
/// (see the module docs).
fn convolve_in_blocks(
    pool: &dyn ThreadPool,
    g: &Conv2dGeometry,
    run: usize,
    input: &[f32],
    weight: Weight<'_>,
    output: &mut [f32],
) {
    let (patch, channels, pixels) = (g.patch_len(), g.out_channels, g.out_pixels());
    if output.is_empty() || patch == 0 {
        output.fill(0.0);
        return;
    }
    let block = channels / channel_blocks(g);
    let cost = item_cost(
        (patch * pixels + block * patch) as f64,
        (block * pixels) as f64,
        2.0 * (block * patch * pixels) as f64,
        GEMM_FLOPS_PER_CYCLE,
    );
    let image_len = g.in_channels * g.in_pixels();
    let phases = phases_len(g, g.in_channels);
    let convolve = |weight: &[f32], output: &mut [f32]| {
        for_each_nested_chunk(
            pool,
            output,
            channels * pixels,
            block * pixels,
            cost,
            |n, index, out| {
                with_scratch(patch * run + phases, |buffer| {
                    let (cols, phases) = buffer.split_at_mut(patch * run);
                    let rows = &weight[index * block * patch..(index + 1) * block * patch];
                    let image = &input[n * image_len..(n + 1) * image_len];
                    let source = ImageSource::new(g, image, phases);
                    for first in (0..pixels).step_by(run) {
                        source.im2col(g, first..first + run, cols);
                        let shape = (block, run, patch);
                        multiply_in_place(shape, rows, cols, &mut out[first..], pixels);
                    }
                });
            },
        );
    };
    match weight {
        Weight::AsIs(weight) => convolve(weight, output),
        Weight::Flipped(original) => with_shared_operand(original.len(), |flipped| {
            flip_in_parallel(pool, g, original, flipped);
            convolve(flipped, output);
        }),
    }
}

/// Most rows per GEMM call of the blocked convolutions: the `gemm` crate (0.19, AVX-512)
/// packs its right factor (here the columns, whose rows are contiguous) into panels first
/// when the product has more than 48 rows (8 of its 6-column microkernel tiles), and reads it
/// in place otherwise.
const UNPACKED_MAX_ROWS: usize = 48;

/// `out = weight_rows cols` (`m x n`, inner `k`; `out`'s rows `out_stride` apart), in calls of
/// at most [`UNPACKED_MAX_ROWS`] rows, each reading `cols` in place.
fn multiply_in_place(
    (m, n, k): (usize, usize, usize),
    weight_rows: &[f32],
    cols: &[f32],
    out: &mut [f32],
    out_stride: usize,
) {
    for first in (0..m).step_by(UNPACKED_MAX_ROWS) {
        let rows = UNPACKED_MAX_ROWS.min(m - first);
        let w = dense(&weight_rows[first * k..], k);
        let dst = (&mut out[first * out_stride..], out_stride);
        gemm_single_threaded_strided((rows, n, k), w, dense(cols, n), dst, 1.0, 0.0);
    }
}

/// Items of the blocked forward, at least: a batch of fewer images cuts each image's output
/// channels into blocks (each redoing the image's im2col).
const FORWARD_ITEMS: usize = 4;

/// Fewest output channels in a block of the blocked forward: fewer, and the GEMM's rows
/// are too few to run near peak.
const MIN_BLOCK_CHANNELS: usize = 16;

/// Blocks each image's output channels are cut into: the fewest equal blocks of at least
/// [`MIN_BLOCK_CHANNELS`] that make [`FORWARD_ITEMS`] items over the batch (one for a batch
/// of 4 or more), or 1.
fn channel_blocks(g: &Conv2dGeometry) -> usize {
    let wanted = FORWARD_ITEMS.div_ceil(g.batch.max(1));
    let blocks = divisor_at_least(g.out_channels, wanted).unwrap_or(1);
    if g.out_channels / blocks >= MIN_BLOCK_CHANNELS {
        blocks
    } else {
        1
    }
}

/// Output channels of `W'` per item of [`flip_in_parallel`].
const FLIP_ROWS: usize = 16;

/// [`flip_into`] over the pool, [`FLIP_ROWS`] rows of `W'` per item.
fn flip_in_parallel(
    pool: &dyn ThreadPool,
    g: &Conv2dGeometry,
    original: &[f32],
    flipped: &mut [f32],
) {
    let row_len = g.in_channels * g.kernel_area();
    let len = (FLIP_ROWS * row_len) as f64;
    let cost = item_cost(len, len, 0.0, VECTOR_FLOPS_PER_CYCLE);
    for_each_chunk(pool, flipped, FLIP_ROWS * row_len, cost, |index, rows| {
        flip_into(g, original, index * FLIP_ROWS, rows);
    });
}

/// `flipped[o, i, ky, kx] = original[i, o, kh-1-ky, kw-1-kx]` for the output channels `o` of
/// `g` from `first` on that `flipped` holds (`g`'s input channels are `i`): one input
/// channel at a time across all of them, so each read is a contiguous run of `original`.
fn flip_into(g: &Conv2dGeometry, original: &[f32], first: usize, flipped: &mut [f32]) {
    let area = g.kernel_area();
    let (outs, ins) = (g.out_channels, g.in_channels);
    let row_len = ins * area;
    let rows = flipped.len() / row_len.max(1);
    for i in 0..ins {
        let sources = &original[(i * outs + first) * area..][..rows * area];
        for (o, source) in sources.chunks_exact(area).enumerate() {
            let taps = &mut flipped[o * row_len + i * area..][..area];
            taps.iter_mut()
                .zip(source.iter().rev())
                .for_each(|(tap, &value)| *tap = value);
        }
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
    if g.in_channels < WEIGHT_GROUPS {
        return backward_weights_by_pixel_parts(pool, g, input, grad_output, grad_weight);
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
    let dy_t_len = if transposes_grad_output(g) {
        batch * pixels * channels
    } else {
        0
    };
    with_shared_operand(dy_t_len, |dy_t| {
        let dy = if dy_t.is_empty() {
            GradOutput::InPlace(grad_output)
        } else {
            transpose_images(pool, (channels, pixels), grad_output, dy_t);
            GradOutput::Transposed(dy_t)
        };
        let mut slots = vec![(); groups];
        for_each_strided_group(
            pool,
            grad_weight,
            rows,
            &mut slots,
            cost,
            |group, _, pieces| {
                let phases = phases_len(g, rows / g.kernel_area());
                with_scratch(rows * run + rows * channels + phases, |buffer| {
                    let (cols, rest) = buffer.split_at_mut(rows * run);
                    let (sum, phases) = rest.split_at_mut(rows * channels);
                    let group_rows = GroupRows {
                        group,
                        rows,
                        run,
                        pixels: (0, pixels),
                    };
                    let scratch = (cols, phases);
                    sum_group_products(g, group_rows, input, dy, scratch, sum);
                    for (o, piece) in pieces.iter_mut().enumerate() {
                        let column = sum[o..].iter().step_by(channels);
                        piece.iter_mut().zip(column).for_each(|(w, &s)| *w = s);
                    }
                });
            },
        );
    });
}

/// Output planes whose pixel count is a multiple of this have `dY`'s rows a multiple of 4 KiB
/// apart: the `gemm` crate's packing of the column-major `dY^T` view reads 64 of its rows at
/// once, all in the same set of the L1 cache (see [`transposes_grad_output`]).
const ALIASING_PIXELS: usize = 1024;

/// Whether the weight gradient by channel groups transposes `dY` once before its GEMMs
/// rather than reading it in place: when its rows alias in the L1 cache ([`ALIASING_PIXELS`]).
fn transposes_grad_output(g: &Conv2dGeometry) -> bool {
    g.out_pixels() % ALIASING_PIXELS == 0
}

/// Every image's `dY` as the weight gradient's GEMMs read it: in place (`C_out x P` per image,
/// read as a column-major `dY^T`), or transposed once (`N P x C_out`, row-major `dY^T`).
#[derive(Clone, Copy)]
enum GradOutput<'a> {
    InPlace(&'a [f32]),
    Transposed(&'a [f32]),
}

impl<'a> GradOutput<'a> {
    /// `dY^T` of image `image`'s pixels from `first` on (`P - first` rows of `C_out`).
    fn transposed_from(self, g: &Conv2dGeometry, image: usize, first: usize) -> MatView<'a> {
        let (pixels, channels) = (g.out_pixels(), g.out_channels);
        let image_start = image * pixels * channels;
        match self {
            GradOutput::InPlace(dy) => MatView {
                data: &dy[image_start + first..],
                row_stride: 1,
                col_stride: pixels,
            },
            GradOutput::Transposed(dy_t) => {
                dense(&dy_t[image_start + first * channels..], channels)
            }
        }
    }
}

/// Parts of each image's output pixels the blocked weight gradient of fewer input channels
/// than [`WEIGHT_GROUPS`] (the stem's 3) is cut into, one item each.
const WEIGHT_PARTS: usize = 4;

/// `grad_weight` of `g` when it has too few input channels to group: one item per part of
/// the output pixels (the same part of every image), each summing its pixels' products over
/// all of `dW^T` into its own slot of the caller's scratch, next to its columns; then the
/// slots are added in part order and transposed into `dW`.
fn backward_weights_by_pixel_parts(
    pool: &dyn ThreadPool,
    g: &Conv2dGeometry,
    input: &[f32],
    grad_output: &[f32],
    grad_weight: &mut [f32],
) {
    let (patch, channels, pixels, batch) = (g.patch_len(), g.out_channels, g.out_pixels(), g.batch);
    let part_len = pixels.div_ceil(WEIGHT_PARTS);
    let parts = pixels.div_ceil(part_len);
    let run = (BLOCK_VALUES / patch).clamp(1, part_len);
    let phases = phases_len(g, g.in_channels);
    let (sum_len, slot_len) = (patch * channels, patch * channels + patch * run + phases);
    let cost = item_cost(
        (batch * part_len * (patch + channels)) as f64,
        sum_len as f64,
        2.0 * (batch * part_len * patch * channels) as f64,
        GEMM_FLOPS_PER_CYCLE,
    );
    with_scratch(parts * slot_len, |slots| {
        let dy = GradOutput::InPlace(grad_output);
        for_each_chunk(pool, slots, slot_len, cost, |part, slot| {
            let (sum, rest) = slot.split_at_mut(sum_len);
            let scratch = rest.split_at_mut(patch * run);
            let first = part * part_len;
            let part_rows = GroupRows {
                group: 0,
                rows: patch,
                run,
                pixels: (first, (first + part_len).min(pixels)),
            };
            sum_group_products(g, part_rows, input, dy, scratch, sum);
        });
        let sums = slots.chunks_exact(slot_len).map(|slot| &slot[..sum_len]);
        add_transposed_in_order(sums, channels, grad_weight);
    });
}

/// `dW[o, r] = sum_p sums_p[r, o]` (each sum `rows x C_out`, `dW` `C_out x rows`), the sums
/// added in the order given.
fn add_transposed_in_order<'a>(
    sums: impl Iterator<Item = &'a [f32]> + Clone,
    channels: usize,
    grad_weight: &mut [f32],
) {
    let rows = grad_weight.len() / channels.max(1);
    for (o, dw_row) in grad_weight.chunks_exact_mut(rows.max(1)).enumerate() {
        for (r, w) in dw_row.iter_mut().enumerate() {
            let mut values = sums.clone().map(|sum| sum[r * channels + o]);
            let first = values.next().unwrap_or(0.0);
            *w = values.fold(first, |total, value| total + value);
        }
    }
}

/// One item of the blocked weight gradient: input-channel group `group`, whose `rows` rows of
/// `dW^T` it computes from the output pixels `pixels` (`first..end`) of every image, `run`
/// pixels at a time.
#[derive(Clone, Copy)]
struct GroupRows {
    group: usize,
    rows: usize,
    run: usize,
    pixels: (usize, usize),
}

/// `sum = sum_n sum_runs cols_run dY_run^T` over the group's rows of every image's columns
/// of its pixels (`rows x C_out`), in image then run order; `cols` is scratch for one run's
/// columns, `phases` for the group's phase planes of one image ([`ImageSource`]).
fn sum_group_products(
    g: &Conv2dGeometry,
    GroupRows {
        group,
        rows,
        run,
        pixels: (from, to),
    }: GroupRows,
    input: &[f32],
    dy: GradOutput<'_>,
    (cols, phases): (&mut [f32], &mut [f32]),
    sum: &mut [f32],
) {
    let channels = g.out_channels;
    let image_len = g.in_channels * g.in_pixels();
    let group_len = rows / g.kernel_area() * g.in_pixels();
    let mut beta = 0.0;
    for image in 0..g.batch {
        let planes = &input[image * image_len + group * group_len..][..group_len];
        let source = ImageSource::new(g, planes, &mut *phases);
        for first in (from..to).step_by(run) {
            let len = run.min(to - first);
            let cols = &mut cols[..rows * len];
            source.im2col(g, first..first + len, cols);
            gemm_single_threaded(
                (rows, channels, len),
                dense(cols, len),
                dy.transposed_from(g, image, first),
                sum,
                1.0,
                beta,
            );
            beta = 1.0;
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::pool::{Pool, PoolKind, PoolOptions};

    /// Small integers (every sum of products exact, so any summation order agrees bitwise).
    pub(in crate::kernels::conv) fn small_integers(len: usize, seed: usize) -> Vec<f32> {
        (0..len)
            .map(|i| ((i * 5 + seed) % 7) as f32 - 3.0)
            .collect()
    }

    /// Calls `tap(n, o, i, ky, kx, oy, ox, input value)` for every product of the convolution
    /// `g` that reads the input plane (not the padding), from the definition.
    fn for_each_product(g: &Conv2dGeometry, x: &[f32], mut tap: impl FnMut([usize; 7], f32)) {
        let (s, p) = (g.params.stride, g.params.padding);
        for n in 0..g.batch {
            for o in 0..g.out_channels {
                for i in 0..g.in_channels {
                    for (ky, kx) in
                        (0..g.kernel_h).flat_map(|ky| (0..g.kernel_w).map(move |kx| (ky, kx)))
                    {
                        for oy in 0..g.out_height {
                            for ox in 0..g.out_width {
                                let (y, x_) =
                                    ((oy * s + ky).wrapping_sub(p), (ox * s + kx).wrapping_sub(p));
                                if y < g.height && x_ < g.width {
                                    let value =
                                        x[((n * g.in_channels + i) * g.height + y) * g.width + x_];
                                    tap([n, o, i, ky, kx, oy, ox], value);
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    fn naive_forward(g: &Conv2dGeometry, x: &[f32], w: &[f32]) -> Vec<f32> {
        let mut y = vec![0.0; g.output_shape().iter().product()];
        for_each_product(g, x, |[n, o, i, ky, kx, oy, ox], value| {
            let weight = w[((o * g.in_channels + i) * g.kernel_h + ky) * g.kernel_w + kx];
            y[((n * g.out_channels + o) * g.out_height + oy) * g.out_width + ox] += weight * value;
        });
        y
    }

    fn naive_weight_gradient(g: &Conv2dGeometry, x: &[f32], dy: &[f32]) -> Vec<f32> {
        let mut dw = vec![0.0; g.weight_shape().iter().product()];
        for_each_product(g, x, |[n, o, i, ky, kx, oy, ox], value| {
            let d = dy[((n * g.out_channels + o) * g.out_height + oy) * g.out_width + ox];
            dw[((o * g.in_channels + i) * g.kernel_h + ky) * g.kernel_w + kx] += d * value;
        });
        dw
    }

    /// `dX` of `g` from the definition: every product that read the input plane, added onto the
    /// input pixel it read.
    pub(in crate::kernels::conv) fn naive_input_gradient(
        g: &Conv2dGeometry,
        w: &[f32],
        dy: &[f32],
    ) -> Vec<f32> {
        let mut dx = vec![0.0; g.input_shape().iter().product()];
        let x_index: Vec<f32> = (0..dx.len()).map(|i| i as f32).collect();
        for_each_product(g, &x_index, |[n, o, i, ky, kx, oy, ox], index| {
            let weight = w[((o * g.in_channels + i) * g.kernel_h + ky) * g.kernel_w + kx];
            let d = dy[((n * g.out_channels + o) * g.out_height + oy) * g.out_width + ox];
            dx[index as usize] += weight * d;
        });
        dx
    }

    fn geometry(
        input: [usize; 4],
        weight: [usize; 4],
        stride: usize,
        padding: usize,
    ) -> Conv2dGeometry {
        Conv2dGeometry::new(&input, &weight, Conv2dParams { stride, padding }).unwrap()
    }

    #[test]
    fn blocked_forward_matches_the_definition_on_every_pool() {
        // (input, weight, stride, padding, run, channel blocks): a stem-like 7x7/2 on one
        // image (its 64 channels in 4 blocks); the same on 3 images (no blocks); a 3x3 whose
        // runs of 65 pixels start mid-row of 15; a 5x5/2 with an odd width.
        let cases = [
            ([1, 3, 32, 32], [64, 3, 7, 7], 2, 3, 128, 4),
            ([3, 3, 32, 32], [20, 3, 7, 7], 2, 3, 128, 1),
            ([2, 5, 13, 15], [17, 5, 3, 3], 1, 1, 65, 1),
            ([2, 4, 33, 29], [32, 4, 5, 5], 2, 2, 85, 2),
        ];
        for threads in [1, 2, 3] {
            let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, threads, "blk")).unwrap();
            for (input, weight, stride, padding, run, blocks) in cases {
                let g = geometry(input, weight, stride, padding);
                assert_eq!(forward_block_pixels(&g), Some(run), "{input:?} {weight:?}");
                assert_eq!(channel_blocks(&g), blocks, "{input:?} {weight:?}");
                let x = small_integers(input.iter().product(), 1);
                let w = small_integers(weight.iter().product(), 2);
                let mut y = vec![f32::NAN; g.output_shape().iter().product()];
                blocked_forward(pool.as_dyn(), &g, run, &x, &w, &mut y);
                assert_eq!(
                    y,
                    naive_forward(&g, &x, &w),
                    "{input:?} {weight:?} {threads}"
                );
            }
        }
    }

    #[test]
    fn blocked_input_gradients_match_the_definition_on_every_pool() {
        // (input, weight, padding): 37 input channels, so W' has 37 rows, flipped in items of
        // 16, 16 and 5; a 5x5 pad 2 on 2 images; a 3x3 pad 0 (W' padded by 2) on 3.
        let cases = [
            ([1, 37, 16, 16], [5, 37, 3, 3], 1),
            ([2, 6, 17, 15], [20, 6, 5, 5], 2),
            ([3, 32, 18, 18], [9, 32, 3, 3], 0),
        ];
        for threads in [1, 2, 3] {
            let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, threads, "blk")).unwrap();
            for (input, weight, padding) in cases {
                let g = geometry(input, weight, 1, padding);
                let flipped = flipped_geometry(&g).unwrap();
                let run = block_pixels(&flipped).unwrap();
                let w = small_integers(weight.iter().product(), 5);
                let dy = small_integers(g.output_shape().iter().product(), 6);
                let mut dx = vec![f32::NAN; input.iter().product()];
                blocked_backward_data(pool.as_dyn(), &flipped, run, &dy, &w, &mut dx);
                assert_eq!(
                    dx,
                    naive_input_gradient(&g, &w, &dy),
                    "{input:?} {weight:?} {threads}"
                );
            }
        }
    }

    #[test]
    fn weight_gradients_by_channel_groups_match_the_definition_with_dy_in_place_or_transposed() {
        // 32x32 planes (dY transposed first) on 5 and 8 input channels, a 5x5 on 33x31 and a
        // 3x3 on 16x16 (dY read in place).
        let cases = [
            ([2, 5, 32, 32], [7, 5, 3, 3], 1, true),
            ([1, 8, 32, 32], [24, 8, 3, 3], 1, true),
            ([2, 4, 33, 31], [3, 4, 5, 5], 2, false),
            ([3, 12, 16, 16], [10, 12, 3, 3], 1, false),
        ];
        for threads in [1, 2] {
            let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, threads, "blk")).unwrap();
            for (input, weight, padding, transposed) in cases {
                let g = geometry(input, weight, 1, padding);
                assert!(block_pixels(&g).is_some() && !weight_gradient_by_pixel_parts(&g));
                assert_eq!(transposes_grad_output(&g), transposed, "{input:?}");
                assert_blocked_weight_gradient_is_the_definition(&pool, &g, (7, 8));
            }
        }
    }

    #[test]
    fn weight_gradients_by_pixel_parts_match_the_definition() {
        // (input, weight, stride, padding): the stem at a quarter of its size (parts of 64
        // pixels in one run each); a 3x3 on 2 channels with parts of 225 pixels; a stem whose
        // parts of 2304 pixels take two runs (1783 and 521).
        let cases = [
            ([2, 3, 64, 64], [16, 3, 7, 7], 2, 3),
            ([1, 2, 30, 30], [5, 2, 3, 3], 1, 1),
            ([1, 3, 192, 192], [8, 3, 7, 7], 2, 3),
        ];
        for threads in [1, 2] {
            let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, threads, "blk")).unwrap();
            for (input, weight, stride, padding) in cases {
                let g = geometry(input, weight, stride, padding);
                assert!(weight_gradient_by_pixel_parts(&g), "{input:?}");
                assert_blocked_weight_gradient_is_the_definition(&pool, &g, (3, 4));
            }
        }
    }

    /// `blocked_backward_weights` on `pool` gives the naive sum bit for bit, on small integers
    /// seeded by `seeds` (input, output gradient).
    fn assert_blocked_weight_gradient_is_the_definition(
        pool: &Pool,
        g: &Conv2dGeometry,
        (x_seed, dy_seed): (usize, usize),
    ) {
        let x = small_integers(g.input_shape().iter().product(), x_seed);
        let dy = small_integers(g.output_shape().iter().product(), dy_seed);
        let mut dw = vec![f32::NAN; g.weight_shape().iter().product()];
        blocked_backward_weights(pool.as_dyn(), g, &x, &dy, &mut dw);
        let threads = pool.as_dyn().num_threads();
        assert_eq!(dw, naive_weight_gradient(g, &x, &dy), "{g:?} {threads}");
    }

    #[test]
    fn the_stem_takes_blocks_forward_and_pixel_parts_for_its_weight_gradient() {
        let stem = geometry([4, 3, 128, 128], [64, 3, 7, 7], 2, 3);
        assert_eq!(forward_block_pixels(&stem), Some(1024));
        assert_eq!(block_pixels(&stem), None);
        assert!(weight_gradient_by_pixel_parts(&stem));
        assert_eq!(channel_blocks(&stem), 1);
        let s1 = geometry([4, 64, 32, 32], [64, 64, 3, 3], 1, 1);
        assert!(!weight_gradient_by_pixel_parts(&s1));
    }

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
        flip_into(&flipped, &original, 0, &mut flipped_weight);
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
