//! The weight gradient `dW = sum_n dY_n cols_n^T`, as GEMMs whose operands are both
//! row-major. Three forms, by path: per image (planes over [`super::batched::BATCHED_MAX_PIXELS`] pixels that
//! the blocked path, `blocked.rs`, does not take: every pointwise convolution there, and
//! strided ones with 4 or more input channels; the stem, with 3, is the blocked path's by
//! parts of its pixels), and on the batched path (`batched.rs`) direct, column-blocked or
//! transposed. The measurements behind the forms and thresholds: `bench/KERNELS.md`.
//!
//! # Why a transpose
//! Both factors of `dY cols^T` have the pixels, the inner dimension, as their contiguous
//! axis. Fed to the `gemm` crate that way (`A B^T`, `B^T` a column-major view), the crate
//! packs one operand transposed, reading 64 rows at once a plane apart: on 32x32 planes those
//! rows lie 4 KiB apart, all in the same L1 sets, and the packing outweighs the microkernel.
//! So one factor is transposed first, by [`transpose_images`] in 16x16 tiles, into
//! `pixels x channels` (images one after another: row `n P + p`), and the GEMM reads both
//! row-major.
//!
//! # Per image
//! The factor with fewer channels is the one transposed (the columns when `C_out >= C_in kh
//! kw`, else `dY`), so the copy is the smaller: `dW = dY_n (cols_n^T)` or `dW^T = cols_n
//! (dY_n^T)`. One `parallel_for` item per (part of the images, block of the GEMM's rows)
//! accumulates its images in order (`beta = 1` after the first). Every item packs the
//! transposed factor of each of its images (the crate packs the right factor of any call
//! writing more than 48 rows), so each block of rows re-packs it, while each part of the
//! images adds a slot of partial sums. [`PerImageSplit`] weighs the two: when the batch's
//! pixels are at least [`IMAGE_SPLIT_DEPTH_PER_ROW`] (8) times the GEMM's rows (stage 1's
//! 32x32 planes), the images go into the fewest equal parts that make
//! [`PER_IMAGE_MIN_ITEMS`] (4) items, each part as few blocks of rows as make up the rest
//! (one at batch 4), so each image is packed once; otherwise the rows go into
//! [`rows_per_block`] blocks and the images into the fewest parts that make 4 items (one
//! part at batch 4). With one part and `dW`, the items write `dW` in place; else each part
//! sums into its own slot of scratch, and a last loop adds the slots in part order into
//! `dW`, or, for `dW^T`, into the first slot, which is then transposed in whole 16x16 tiles
//! (adding first and transposing once reads each slot contiguously; transposing each slot
//! onto `dW` value by value does not).
//!
//! # Batched
//! With small planes `cols_b` holds every image side by side, `patch x N P`, and the batch's
//! pixels are the GEMM's whole inner dimension (`K = N P`: 256 on 8x8 planes at batch 4, 64
//! on 4x4). [`batched_form`] picks one of three forms by shape:
//!
//! - **Column-blocked**, when `dW` has at least twice as many columns (`C_in kh kw`) as rows
//!   (`C_out`). `dY_b` is gathered once (`C_out x N P`, small) into the caller's
//!   shared-operand buffer and read as a row-major left factor, which the crate reads in
//!   place (transposed, as a column-major left factor, the crate would pack it again in
//!   every item). Then one item per block of [`column_item_channels`] input channels: enough
//!   to fill whole panels of the crate's 64-row microkernel, about 512 columns (64 channels
//!   on 3x3, 576 columns; 512 pointwise), and at most half the channels rounded up to 16 (so
//!   a 3x3 on 5 channels is one item). Each item:
//!   1. makes its channels' rows of `cols_b` in its thread's scratch ([`side_by_side_rows`]:
//!      im2col, or a copy when pointwise), rows [`padded_stride`] apart, an odd number of
//!      cache lines: the crate's packing reads 64 rows at once, one value from each, and rows
//!      1 KiB apart (8x8 planes at batch 4) all fall in 4 of the L1 cache's 64 sets. Small
//!      stride-1 planes go through a zero-bordered copy ([`PaddedPlane`]), so each output row
//!      of a tap row is one fixed-size copy, with no clipping;
//!   2. runs one whole-`K` GEMM reading those rows as a column-major right factor (the crate
//!      packs them in narrow panels, each read along the pixels), written straight into its
//!      columns of `dW` (a [`ColumnBlock`] of the strided destination; the blocks are
//!      disjoint).
//!
//!   Each item making its own rows keeps them in its core's cache for its GEMM, where a
//!   shared `cols_b` made in a pass of its own over the pool would be read back from memory.
//! - **Direct**, otherwise when there are more output channels than pixels (`C_out > N P`), or the
//!   kernel is pointwise: `dW = dY_b cols_b^T`, `cols_b` transposed first (for a pointwise kernel
//!   that transpose is the only copy of the input). When `dW` has more rows than columns the GEMM
//!   is cut into [`BATCHED_ITEMS`] (2) blocks of its rows, each packing the whole (small) right
//!   factor once, so few blocks pack least; each item gathers its own rows of `dY_b` into its
//!   thread's scratch right before its GEMM ([`direct_by_rows`]), in cache when the GEMM reads
//!   them; otherwise into [`BATCHED_ITEMS`] (2) blocks of its columns written in place, each
//!   packing only its part of `cols_b^T` (the crate reads the row-major `dY_b` in place).
//! - **Transposed**, otherwise (a 3x3 kernel on few input channels): `dY` is transposed and
//!   `dW^T = cols_b dY_b^T` computed in runs of about [`PART_PIXELS`] of the batch's pixels,
//!   each into its own slot, one item per (run, block of `dW^T` rows), the later runs then
//!   added onto the first in run order and the sum transposed into `dW` in 16x16 tiles
//!   ([`transpose_images`]), as the per-image form does with its parts. It is the form of
//!   last resort: with few pixels its GEMM has little to add per value of `dW^T` it writes,
//!   and the transpose after it re-reads all of `dW`.
//!
//! The column-blocked and direct forms write each value of `dW` once, with the whole `K`
//! summed in one GEMM call; the transposed form writes `dW^T` slots (one per run of pixels
//! above [`PART_PIXELS`]) and transposes them into `dW`.
//! With `K` this short, `dW` (up to 512 x 4608 floats) is most of the memory a call touches,
//! and in a training step it is cold (last touched by the previous step's update), so a
//! second pass over it costs about as much as the GEMM's own stores: hence the GEMMs write
//! `dW` in place wherever the shape allows.
//!
//! `cols_b` is written by im2col (or a copy, pointwise) straight into the side-by-side layout
//! in the transposed form, and per item, into the item's rows, in the column-blocked form;
//! the direct form makes each image's columns, then transposes them ([`transpose_images`],
//! whole 16x16 tiles).
//!
//! # Tried and rejected
//! The crate's microkernel holds most of the batched forms' time; their packing and our
//! copies a few percent each. What measured slower or no faster, so need not be tried again:
//! - moving the write of a cold `dW` out of the GEMM (a tile in scratch copied into `dW` with
//!   non-temporal stores, or touching `dW`'s lines before the im2col): the GEMM's stores
//!   overlap their misses with its arithmetic, where a pass of its own does not;
//! - transposing an item's rows of `cols_b` to pixel-major so the crate's packing is a
//!   contiguous copy: the transpose costs more than the gather it saves;
//! - the inner dimension in two GEMM calls, so a packed 64-row panel fits in L1;
//! - other [`COLUMN_ITEM_COLUMNS`] (256, 1024): within the noise;
//! - the column-blocked form for every pointwise kernel (it loses where `dW` has more rows
//!   than columns), and the batched forms for pointwise kernels on 16x16 planes;
//! - each direct-by-rows item making all of `cols_b^T` itself: faster alone, slower in a
//!   training step, where both items' copies compete with the ops beside them.
//!
//! # Determinism
//! The parts, runs, blocks and items depend on the shapes alone, each item is one thread's GEMM calls
//! in a fixed order, and every element of `dW` adds its parts in index order, so `dW` is
//! bitwise the same on every pool and thread count.
#![forbid(unsafe_code)]

use super::batched::{
    dense, gather, gather_row, is_batched, side_by_side_columns, transpose_images,
    with_batched_scratch,
};
use super::blocked::{block_pixels, blocked_backward_weights, weight_gradient_by_pixel_parts};
use super::im2col::{columns, im2col_plane_strided, PaddedPlane, PADDED_PLANE_MAX};
use super::shared::with_shared_operand;
use super::Conv2dGeometry;
use crate::kernels::gemm::{
    column_blocks as gemm_column_blocks, gemm_item_cost, gemm_single_threaded,
    gemm_single_threaded_into_block, rows_per_block, ColumnBlock, GemmShape, MatView,
};
use crate::kernels::par::{
    for_each_chunk, for_each_nested_chunk, item_cost, VECTOR_FLOPS_PER_CYCLE,
};
use crate::kernels::scratch::with_scratch;
use crate::pool::ThreadPool;

/// Pixels per run of the batched transposed form, about: long enough for an efficient GEMM
/// (a batch of 4 small planes has at most 512 pixels: one run).
pub(super) const PART_PIXELS: usize = 512;

/// How the batched transposed form cuts its inner dimension: the batch's `pixels` columns of
/// `cols_b` in `runs` runs of `run` pixels (the last may be shorter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Parts {
    pixels: usize,
    runs: usize,
    run: usize,
}

impl Parts {
    fn new(pixels: usize) -> Self {
        let runs = pixels.div_ceil(PART_PIXELS).max(1);
        Parts {
            pixels,
            runs,
            run: pixels.div_ceil(runs).max(1),
        }
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
    if g.batch * g.out_pixels() == 0 {
        grad_weight.fill(0.0); // no pixels, no gradient
    } else if !is_batched(g) && (block_pixels(g).is_some() || weight_gradient_by_pixel_parts(g)) {
        blocked_backward_weights(pool, g, input, grad_output, grad_weight);
    } else if !is_batched(g) {
        per_image_backward_weights(pool, g, input, grad_output, grad_weight);
    } else {
        match batched_form(g) {
            BatchedForm::ColumnBlocked => {
                column_blocked_backward_weights(pool, g, input, grad_output, grad_weight)
            }
            BatchedForm::Direct => {
                direct_batched_backward_weights(pool, g, input, grad_output, grad_weight)
            }
            BatchedForm::Transposed => {
                transposed_backward_weights(pool, g, input, grad_output, grad_weight)
            }
        }
    }
}

/// The three ways the batched path computes the weight gradient (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BatchedForm {
    /// `dW = dY_b cols_b^T`, one item per block of `dW`'s columns.
    ColumnBlocked,
    /// `dW = dY_b cols_b^T` with `cols_b` transposed first, one item per block of `dW`'s rows,
    /// or of its columns when it has at least as many columns as rows.
    Direct,
    /// `dW^T = cols_b dY_b^T` in runs of pixels, then transposed.
    Transposed,
}

/// Which form the batched path takes for `g`: column-blocked when `dW` has at least twice as
/// many columns as rows (each item then reads the gathered `dY_b` in place and packs its own
/// part of `cols_b`); otherwise direct when there are more output channels than pixels or the
/// kernel is pointwise (its transpose of `cols_b` is the only copy of the input), else
/// transposed.
fn batched_form(g: &Conv2dGeometry) -> BatchedForm {
    let (wide, patch, channels) = (g.batch * g.out_pixels(), g.patch_len(), g.out_channels);
    if patch >= 2 * channels {
        BatchedForm::ColumnBlocked
    } else if channels > wide || g.is_pointwise() {
        BatchedForm::Direct
    } else {
        BatchedForm::Transposed
    }
}

/// `dW = dY_b cols_b^T` on the batched path, one item per block of [`column_item_channels`]
/// input channels (`dW`'s columns of their patch entries): `dY_b` is gathered once (small,
/// read in place by every item), then each item im2cols its channels' rows of `cols_b` into
/// its thread's scratch ([`side_by_side_rows`], rows [`padded_stride`] apart) and runs its
/// whole-`K` GEMM straight into its columns of `dW`, reading those rows as a column-major
/// right factor (the crate packs them in narrow panels, each read along the pixels).
fn column_blocked_backward_weights(
    pool: &dyn ThreadPool,
    g: &Conv2dGeometry,
    input: &[f32],
    grad_output: &[f32],
    grad_weight: &mut [f32],
) {
    let (n, pixels, patch, channels) = g.batched_sizes();
    let (wide, area) = (n * pixels, g.kernel_area());
    let item_channels = column_item_channels(g);
    let (block, stride) = (item_channels * area, padded_stride(wide));
    with_shared_operand(channels * wide, |dy_b| {
        gather(pool, (n, channels, pixels), grad_output, dy_b);
        let dy = dense(dy_b, wide);
        let mut blocks: Vec<ColumnBlock<'_>> =
            gemm_column_blocks(grad_weight, (channels, patch), block).collect();
        let cost = gemm_item_cost(block, channels, wide);
        for_each_chunk(pool, &mut blocks, 1, cost, |index, out| {
            let first = index * item_channels;
            let these = first..(first + item_channels).min(g.in_channels);
            let rows = these.len() * area;
            with_scratch(rows * stride, |cols| {
                side_by_side_rows(g, input, these, (cols, stride));
                let cols_t = MatView {
                    data: cols,
                    row_stride: 1,
                    col_stride: stride,
                };
                gemm_single_threaded_into_block(wide, dy, cols_t, &mut out[0], 1.0, 0.0);
            });
        });
    });
}

/// Rows of the `gemm` crate's microkernel tile (0.19, AVX-512 `f32`: 4 vectors of 16): the
/// crate packs `dW`'s columns (the rows of `cols_b`) in panels of this many.
const MICROKERNEL_ROWS: usize = 64;

/// Columns of `dW` per item of the column-blocked form, about.
const COLUMN_ITEM_COLUMNS: usize = 512;

/// Input channels per item of the column-blocked form: a multiple of the fewest whose
/// columns fill whole [`MICROKERNEL_ROWS`] panels (64 on any kernel of odd area), about
/// [`COLUMN_ITEM_COLUMNS`] columns' worth (576 on 3x3, 512 pointwise), capped at
/// [`batched_item_share`] of the input channels (half of them rounded up to a multiple of
/// 16): where the cap applies that makes at most [`BATCHED_ITEMS`] items, and an item of 16
/// channels, so one item, when a 1x1 or 3x3 has 16 input channels or fewer.
fn column_item_channels(g: &Conv2dGeometry) -> usize {
    let area = g.kernel_area().max(1);
    // The fewest channels whose `unit * area` columns are a multiple of the panel: the panel
    // is a power of two, so its common factor with `area` is `area`'s power-of-two part.
    let unit = MICROKERNEL_ROWS >> area.trailing_zeros().min(MICROKERNEL_ROWS.trailing_zeros());
    let units = (COLUMN_ITEM_COLUMNS / (unit * area)).max(1);
    (unit * units).min(batched_item_share(g.in_channels))
}

/// Row stride of an item's rows of `cols_b` for `wide` pixels: an odd number of 64-byte
/// lines, so the crate's packing, which reads 64 rows at once one value each, finds them
/// spread over the L1 cache's sets (rows 1 KiB apart, 8x8 planes at batch 4, fall in 4 of
/// its 64 sets).
fn padded_stride(wide: usize) -> usize {
    const LINE: usize = 16;
    (wide.div_ceil(LINE) | 1) * LINE
}

/// `cols`' rows (`stride` apart): the rows of `cols_b` (every image's columns side by side)
/// of the input channels `channels`, each image's plane im2col'd into its part of them
/// ([`PaddedPlane`] on small stride-1 planes, else [`im2col_plane_strided`]), or copied when
/// pointwise. The values past `N P` in each row are left as they are (never read).
fn side_by_side_rows(
    g: &Conv2dGeometry,
    input: &[f32],
    channels: std::ops::Range<usize>,
    (cols, stride): (&mut [f32], usize),
) {
    let (pixels, in_plane) = (g.out_pixels(), g.in_pixels());
    let rows = g.kernel_area() * stride;
    let mut border = [0.0; PADDED_PLANE_MAX];
    let mut padded = PaddedPlane::new(g, &mut border);
    for (channel, rows) in channels.zip(cols.chunks_mut(rows.max(1))) {
        if g.is_pointwise() {
            let row = &mut rows[..g.batch * pixels];
            gather_row(input, (g.in_channels, pixels), channel, row);
            continue;
        }
        for image in 0..g.batch {
            let plane = &input[(image * g.in_channels + channel) * in_plane..][..in_plane];
            let at = &mut rows[image * pixels..];
            if let Some(padded) = padded.as_mut() {
                padded.im2col(g, plane, (at, stride));
            } else {
                im2col_plane_strided(g, plane, at, stride);
            }
        }
    }
}

/// `c (m x n, row-major) = a b` for strided views, one item per block of `block` columns of
/// `c`, each written in place (the values of the other blocks untouched).
fn gemm_into_column_blocks(
    pool: &dyn ThreadPool,
    (m, n, k): (usize, usize, usize),
    a: MatView<'_>,
    b: MatView<'_>,
    block: usize,
    c: &mut [f32],
) {
    let mut blocks: Vec<ColumnBlock<'_>> = gemm_column_blocks(c, (m, n), block).collect();
    let cost = gemm_item_cost(block, m, k);
    for_each_chunk(pool, &mut blocks, 1, cost, |index, out| {
        let b_columns = MatView {
            data: &b.data[index * block * b.col_stride..],
            ..b
        };
        gemm_single_threaded_into_block(k, a, b_columns, &mut out[0], 1.0, 0.0);
    });
}

/// Items of the direct form: one per core of the 2-core target. Each item packs its own
/// factors, so fewer items pack less (blocks of 64 rows, as [`rows_per_block`] cuts them,
/// lose). The column-blocked form sizes its items by [`column_item_channels`]; this count
/// only caps them.
const BATCHED_ITEMS: usize = 2;

/// Rows or columns of `dW` per item of the direct form: `len` in [`BATCHED_ITEMS`] blocks, a
/// multiple of 16 each (the last may be smaller). For the column-blocked form, applied to the
/// input channels, only a cap on an item's channels ([`column_item_channels`]).
fn batched_item_share(len: usize) -> usize {
    len.div_ceil(BATCHED_ITEMS).next_multiple_of(16).max(1)
}

/// `dW = dY_b cols_b^T` on the batched path: one GEMM, its inner dimension every image's
/// pixels, `cols_b` transposed first; cut into [`BATCHED_ITEMS`] blocks of `dW`'s columns
/// written in place when `dW` has at least as many columns as rows (each item packs only its
/// part of `cols_b^T`; the crate reads `dY_b` in place), else into blocks of its rows
/// ([`direct_by_rows`]).
fn direct_batched_backward_weights(
    pool: &dyn ThreadPool,
    g: &Conv2dGeometry,
    input: &[f32],
    grad_output: &[f32],
    grad_weight: &mut [f32],
) {
    let (pixels, patch, channels) = (g.out_pixels(), g.patch_len(), g.out_channels);
    if patch < channels {
        return direct_by_rows(pool, g, input, grad_output, grad_weight);
    }
    let wide = g.batch * pixels;
    with_batched_scratch(pool, g, grad_output, |unrolled, cols_t, dy| {
        let cols = columns(pool, g, input, unrolled);
        transpose_images(pool, (patch, pixels), cols, cols_t);
        let (dy, cols_t) = (dense(dy, wide), dense(cols_t, patch));
        let (shape, width) = ((channels, patch, wide), batched_item_share(patch));
        gemm_into_column_blocks(pool, shape, dy, cols_t, width, grad_weight);
    });
}

/// The direct form's `dW = dY_b cols_b^T` by [`BATCHED_ITEMS`] blocks of `dW`'s rows:
/// `cols_b^T` made once over the pool (into the shared-operand buffer), then each item
/// gathers its own output channels' rows of `dY_b` into its thread's scratch
/// ([`gather_rows`]) and multiplies them by all of `cols_b^T` (which the crate packs in
/// each item).
fn direct_by_rows(
    pool: &dyn ThreadPool,
    g: &Conv2dGeometry,
    input: &[f32],
    grad_output: &[f32],
    grad_weight: &mut [f32],
) {
    let (n, pixels, patch, channels) = g.batched_sizes();
    let (wide, unrolled_len) = (n * pixels, g.unrolled_len());
    with_shared_operand(unrolled_len + patch * wide, |buffer| {
        let (unrolled, cols_t) = buffer.split_at_mut(unrolled_len);
        let cols = columns(pool, g, input, unrolled);
        transpose_images(pool, (patch, pixels), cols, cols_t);
        let cols_t = dense(cols_t, patch);
        let rows = batched_item_share(channels);
        let cost = gemm_item_cost(rows, patch, wide);
        for_each_chunk(pool, grad_weight, rows * patch, cost, |block, out| {
            let these = block * rows..block * rows + out.len() / patch;
            with_scratch(these.len() * wide, |dy_rows| {
                gather_rows(g, grad_output, these.clone(), dy_rows);
                let shape = (these.len(), patch, wide);
                gemm_single_threaded(shape, dense(dy_rows, wide), cols_t, out, 1.0, 0.0);
            });
        });
    });
}

/// `dy_rows` (`channels.len() x N P`): the rows `channels` of `dY_b`, every image's plane of
/// each output channel side by side ([`gather`]'s layout).
fn gather_rows(
    g: &Conv2dGeometry,
    grad_output: &[f32],
    channels: std::ops::Range<usize>,
    dy_rows: &mut [f32],
) {
    let pixels = g.out_pixels().max(1);
    let wide = g.batch * pixels;
    for (channel, row) in channels.zip(dy_rows.chunks_exact_mut(wide)) {
        gather_row(grad_output, (g.out_channels, pixels), channel, row);
    }
}

/// Items [`per_image_backward_weights`] is cut into, at least, when its images allow (more
/// items add packing and slots without filling 2 cores any better).
const PER_IMAGE_MIN_ITEMS: usize = 4;

/// Batch pixels per row of the per-image GEMM from which [`PerImageSplit`] splits the images
/// rather than the rows: a block of rows re-packs the batch's pixels (times the other
/// factor's rows), a part of the images adds a slot of partial sums (see the module docs).
const IMAGE_SPLIT_DEPTH_PER_ROW: usize = 8;

/// One image-major factor of the weight gradient (`N x rows x P`: `dY` or the columns) and the
/// other transposed (`N P x cols`), whose per-image products `rows x cols` add up to `dW` or `dW^T`.
#[derive(Clone, Copy)]
struct Factors<'a> {
    rows_major: &'a [f32],
    transposed: &'a [f32],
    rows: usize,
    cols: usize,
    pixels: usize,
}

/// `dW = sum_n dY_n cols_n^T` with the factor of fewer rows (channels) transposed into scratch,
/// so both GEMM operands are row-major (see the module docs). Expects pixels.
fn per_image_backward_weights(
    pool: &dyn ThreadPool,
    g: &Conv2dGeometry,
    input: &[f32],
    grad_output: &[f32],
    grad_weight: &mut [f32],
) {
    let (patch, channels, pixels) = (g.patch_len(), g.out_channels, g.out_pixels());
    let dw_rows = channels >= patch;
    let (rows, cols) = if dw_rows {
        (channels, patch)
    } else {
        (patch, channels)
    };
    let split = PerImageSplit::new(rows, cols, g.batch, pixels);
    let unrolled_len = g.unrolled_len();
    let transposed_len = g.batch * pixels * cols;
    let direct = dw_rows && split.parts == 1;
    let partials_len = if direct { 0 } else { split.parts * rows * cols };
    with_scratch(unrolled_len + transposed_len + partials_len, |buffer| {
        let (unrolled, rest) = buffer.split_at_mut(unrolled_len);
        let (transposed, partials) = rest.split_at_mut(transposed_len);
        let cols_n = columns(pool, g, input, unrolled);
        let (rows_major, other) = if dw_rows {
            (grad_output, cols_n)
        } else {
            (cols_n, grad_output)
        };
        transpose_images(pool, (cols, pixels), other, transposed);
        let factors = Factors {
            rows_major,
            transposed,
            rows,
            cols,
            pixels,
        };
        if direct {
            factor_products(pool, split, factors, grad_weight);
        } else {
            factor_products(pool, split, factors, partials);
            if dw_rows {
                add_slots(pool, partials, grad_weight, false);
            } else {
                sum_transposed(pool, (patch, channels), partials, grad_weight);
            }
        }
    });
}

/// How [`per_image_backward_weights`] cuts its work: blocks of `block` rows, the images into `parts`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PerImageSplit {
    block: usize,
    parts: usize,
    images: usize,
}

impl PerImageSplit {
    fn new(rows: usize, cols: usize, batch: usize, pixels: usize) -> Self {
        let batch = batch.max(1);
        let fewest_parts = |blocks: usize| {
            (1..=batch)
                .find(|parts| batch % parts == 0 && blocks * parts >= PER_IMAGE_MIN_ITEMS)
                .unwrap_or(batch)
        };
        let block = if batch * pixels >= IMAGE_SPLIT_DEPTH_PER_ROW * rows {
            let blocks = PER_IMAGE_MIN_ITEMS.div_ceil(fewest_parts(1));
            rows.div_ceil(blocks).next_multiple_of(16).min(rows).max(1)
        } else {
            rows_per_block(GemmShape {
                m: rows,
                n: cols,
                k: batch * pixels,
            })
        };
        let parts = fewest_parts(rows.div_ceil(block).max(1));
        PerImageSplit {
            block,
            parts,
            images: batch / parts,
        }
    }
}

/// Every part's `sum_n rows_major_n transposed_n` over its images into its `rows x cols` slot
/// of `out`, one item per (part, block of rows).
fn factor_products(pool: &dyn ThreadPool, split: PerImageSplit, f: Factors<'_>, out: &mut [f32]) {
    let cost = gemm_item_cost(split.block, f.cols, split.images * f.pixels);
    let slot = f.rows * f.cols;
    for_each_nested_chunk(
        pool,
        out,
        slot,
        split.block * f.cols,
        cost,
        |part, index, out| {
            let first_row = index * split.block;
            let rows = out.len() / f.cols;
            for image in part * split.images..(part + 1) * split.images {
                let lhs = dense(
                    &f.rows_major[(image * f.rows + first_row) * f.pixels..],
                    f.pixels,
                );
                let rhs = dense(&f.transposed[image * f.pixels * f.cols..], f.cols);
                let beta = if image == part * split.images {
                    0.0
                } else {
                    1.0
                };
                gemm_single_threaded((rows, f.cols, f.pixels), lhs, rhs, out, 1.0, beta);
            }
        },
    );
}

/// Values per item of [`add_slots`].
const SUM_VALUES: usize = 4096;

/// `out[i] = sum_p slots[p][i]`, or with `onto` `out[i] + sum_p slots[p][i]`, the slots (each
/// `out.len()` long) added in order.
fn add_slots(pool: &dyn ThreadPool, slots: &[f32], out: &mut [f32], onto: bool) {
    let slot = out.len().max(1);
    let count = slots.len() / slot;
    let values = (SUM_VALUES * count) as f64;
    let cost = item_cost(values, SUM_VALUES as f64, values, VECTOR_FLOPS_PER_CYCLE);
    for_each_chunk(pool, out, SUM_VALUES, cost, |index, out| {
        let first = index * SUM_VALUES;
        for part in 0..count {
            let from = &slots[part * slot + first..][..out.len()];
            if part == 0 && !onto {
                out.copy_from_slice(from);
                continue;
            }
            out.iter_mut()
                .zip(from)
                .for_each(|(sum, value)| *sum += value);
        }
    });
}

/// `dW^T = sum cols_b dY_b^T` (see the module docs) on the batched path's side by side
/// columns, in runs of the batch's pixels. Expects pixels.
fn transposed_backward_weights(
    pool: &dyn ThreadPool,
    g: &Conv2dGeometry,
    input: &[f32],
    grad_output: &[f32],
    grad_weight: &mut [f32],
) {
    let (patch, channels) = (g.patch_len(), g.out_channels);
    let parts = Parts::new(g.batch * g.out_pixels());
    let partial_len = parts.runs * patch * channels;
    let factors = (input, grad_output);
    with_batched_factors(pool, g, factors, partial_len, |cols, dyt, partials| {
        partial_products(pool, (patch, channels), parts, cols, dyt, partials);
        sum_transposed(pool, (patch, channels), partials, grad_weight);
    });
}

/// The transposed form's two factors of the weight gradient, in scratch: `cols_b` (every
/// image's columns side by side, `patch x N P`, im2col'd straight into place) and `dY_b^T`
/// (`N P x C_out`, by [`transpose_images`]), handed to `body` with `extra_len` more values of
/// scratch.
fn with_batched_factors(
    pool: &dyn ThreadPool,
    g: &Conv2dGeometry,
    (input, grad_output): (&[f32], &[f32]),
    extra_len: usize,
    body: impl FnOnce(&[f32], &[f32], &mut [f32]),
) {
    let (n, pixels, patch, channels) = g.batched_sizes();
    let side_by_side_len = patch * n * pixels;
    let dy_len = n * pixels * channels;
    let scratch = side_by_side_len + dy_len + extra_len;
    with_scratch(scratch, |buffer| {
        let (cols, rest) = buffer.split_at_mut(side_by_side_len);
        let (dy_b, extra) = rest.split_at_mut(dy_len);
        side_by_side_columns(pool, g, input, cols);
        transpose_images(pool, (channels, pixels), grad_output, dy_b);
        body(cols, dy_b, extra);
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
        |run, index, out| {
            let first_pixel = run * parts.run;
            let len = parts.run.min(parts.pixels - first_pixel);
            let first_row = index * block;
            let rows = out.len() / channels;
            let cols_rows = MatView {
                data: &cols[first_row * parts.pixels + first_pixel..],
                row_stride: parts.pixels,
                col_stride: 1,
            };
            let dyt_rows = MatView {
                data: &dyt[first_pixel * channels..],
                row_stride: channels,
                col_stride: 1,
            };
            gemm_single_threaded((rows, channels, len), cols_rows, dyt_rows, out, 1.0, 0.0);
        },
    );
}

/// `dW (C x patch) = sum_i partials[i]^T`, each slot `patch x C`: the later slots added onto
/// the first in slot order ([`add_slots`]), which is then transposed in whole tiles
/// ([`transpose_images`]); `partials`' first slot is overwritten. Adding first reads every
/// slot contiguously; transposing each slot onto `dW` value by value reads it a row apart.
fn sum_transposed(
    pool: &dyn ThreadPool,
    (patch, channels): (usize, usize),
    partials: &mut [f32],
    grad_weight: &mut [f32],
) {
    let (first, later) = partials.split_at_mut((patch * channels).min(partials.len()));
    if !later.is_empty() {
        add_slots(pool, later, first, true);
    }
    transpose_images(pool, (patch, channels), first, grad_weight);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::{Pool, PoolKind, PoolOptions};

    #[test]
    fn parts_cover_every_pixel_in_runs_of_at_most_part_pixels() {
        for pixels in [1, 16, 511, 512, 513, 1024, 4096, 4097] {
            let parts = Parts::new(pixels);
            assert!(parts.run <= PART_PIXELS, "{pixels}: {parts:?}");
            assert!(parts.runs * parts.run >= pixels, "{pixels}: {parts:?}");
            assert!((parts.runs - 1) * parts.run < pixels, "{pixels}: {parts:?}");
        }
        assert_eq!(Parts::new(1024).runs, 2);
    }

    #[test]
    fn sums_add_transposed_slots() {
        let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "wg")).unwrap();
        let (patch, channels) = (3, 20);
        let original: Vec<f32> = (0..2 * patch * channels).map(|i| i as f32).collect();
        let (mut partials, mut dw) = (original.clone(), vec![f32::NAN; patch * channels]);
        sum_transposed(pool.as_dyn(), (patch, channels), &mut partials, &mut dw);
        let partials = original;
        for (c, q) in [(0, 0), (19, 2), (17, 1)] {
            let slot = patch * channels;
            let expected = partials[q * channels + c] + partials[slot + q * channels + c];
            assert_eq!(dw[c * patch + q], expected);
        }
    }

    /// Small integers, so every sum is exact and any order agrees bitwise with the naive one.
    fn integers(len: usize, seed: usize) -> Vec<f32> {
        (0..len)
            .map(|i| ((i * 5 + seed) % 7) as f32 - 3.0)
            .collect()
    }

    /// `dW[o, i, ky, kx] = sum_n sum_(oy, ox) dY[n, o, oy, ox] X[n, i, oy s + ky - p, ox s + kx - p]`.
    fn naive_weight_gradient(g: &Conv2dGeometry, x: &[f32], dy: &[f32]) -> Vec<f32> {
        let (s, p) = (g.params.stride, g.params.padding);
        let mut dw = vec![0.0; g.weight_shape().iter().product()];
        for (index, value) in dw.iter_mut().enumerate() {
            let (kx, ky) = (index % g.kernel_w, index / g.kernel_w % g.kernel_h);
            let i = index / g.kernel_area() % g.in_channels;
            let o = index / g.patch_len();
            for n in 0..g.batch {
                for oy in 0..g.out_height {
                    for ox in 0..g.out_width {
                        let (y, x_) =
                            ((oy * s + ky).wrapping_sub(p), (ox * s + kx).wrapping_sub(p));
                        if y >= g.height || x_ >= g.width {
                            continue;
                        }
                        let d =
                            dy[((n * g.out_channels + o) * g.out_height + oy) * g.out_width + ox];
                        *value += d * x[((n * g.in_channels + i) * g.height + y) * g.width + x_];
                    }
                }
            }
        }
        dw
    }

    #[test]
    fn per_image_gradients_match_the_naive_sum_in_every_split() {
        use crate::kernels::Conv2dParams;
        let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "wg")).unwrap();
        let (pointwise, strided) = (
            Conv2dParams::default(),
            Conv2dParams {
                stride: 2,
                padding: 1,
            },
        );
        // (input, weight, params, block of rows, parts): dW's rows in 4 blocks written in
        // place (fewer than 8 batch pixels per row); the rest split by images: dW^T's in one
        // block over 4 parts; a strided 3x3's dW^T in blocks of 16 and 11 rows over 2 parts;
        // its dW over 4 parts; a pointwise dW in blocks of 32 and 8 rows over 2 parts.
        let cases = [
            ([2, 3, 12, 12], [256, 3, 1, 1], pointwise, 64, 1),
            ([4, 20, 12, 12], [5, 20, 1, 1], pointwise, 20, 4),
            ([2, 3, 25, 25], [6, 3, 3, 3], strided, 16, 2),
            ([4, 2, 24, 24], [40, 2, 3, 3], strided, 40, 4),
            ([2, 4, 16, 16], [40, 4, 1, 1], pointwise, 32, 2),
        ];
        for (input, weight, params, block, parts) in cases {
            let g = Conv2dGeometry::new(&input, &weight, params).unwrap();
            assert!(!is_batched(&g) && block_pixels(&g).is_none(), "{input:?}");
            let (channels, patch) = (g.out_channels, g.patch_len());
            let rows = channels.max(patch);
            let split = PerImageSplit::new(rows, channels.min(patch), g.batch, g.out_pixels());
            assert_eq!((split.block, split.parts), (block, parts), "{input:?}");
            let x = integers(input.iter().product(), 1);
            let dy = integers(g.output_shape().iter().product(), 2);
            let mut dw = vec![f32::NAN; weight.iter().product()];
            per_image_backward_weights(pool.as_dyn(), &g, &x, &dy, &mut dw);
            assert_eq!(
                dw,
                naive_weight_gradient(&g, &x, &dy),
                "{input:?} {weight:?}"
            );
        }
    }

    #[test]
    fn each_batched_form_matches_the_naive_sum() {
        use crate::kernels::Conv2dParams;
        use BatchedForm::{ColumnBlocked, Direct, Transposed};
        let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "wg")).unwrap();
        let (same, pointwise) = (
            Conv2dParams {
                stride: 1,
                padding: 1,
            },
            Conv2dParams::default(),
        );
        assert_eq!(
            (
                batched_item_share(2160),
                batched_item_share(100),
                batched_item_share(45)
            ),
            (1088, 64, 32)
        );
        // (input, output channels, params, form): column blocks of 64, 64, 64 and 48 input
        // channels (576 columns each but the last) with fewer output channels than pixels; of
        // 64 + 36 channels, pointwise, with more (stage 4's `2048 -> 512`); one block of 5
        // channels; pointwise over 256 pixels in 2 blocks of 32 channels, rows 272 apart
        // (stage 3's `1024 -> 256`); stride 2 (rows 48 apart for 32 pixels); 64, 64 and 2
        // channels over 27 pixels; a 5x3 kernel padded by 2 (outputs 6 wide: PaddedPlane's
        // general row copies) in blocks of 32 + 8 channels; a 1x1 padded by 1 (not pointwise:
        // im2col'd through PaddedPlane) in blocks of 48 + 22; direct with more channels than
        // pixels, in column blocks of 16 + 11 (`dW` 20 x 27); transposed.
        let strided = Conv2dParams {
            stride: 2,
            padding: 1,
        };
        let (padded_by_2, padded_1x1) = (
            Conv2dParams {
                stride: 1,
                padding: 2,
            },
            same,
        );
        let cases = [
            ([2, 240, 4, 4], 20, (3, 3), same, ColumnBlocked),
            ([2, 100, 2, 2], 40, (1, 1), pointwise, ColumnBlocked),
            ([2, 5, 4, 4], 6, (3, 3), same, ColumnBlocked),
            ([4, 64, 8, 8], 16, (1, 1), pointwise, ColumnBlocked),
            ([2, 7, 7, 7], 6, (3, 3), strided, ColumnBlocked),
            ([3, 130, 3, 3], 10, (3, 3), same, ColumnBlocked),
            ([2, 40, 4, 4], 20, (5, 3), padded_by_2, ColumnBlocked),
            ([2, 70, 4, 4], 10, (1, 1), padded_1x1, ColumnBlocked),
            ([2, 3, 2, 2], 20, (3, 3), same, Direct),
            ([2, 2, 4, 4], 20, (3, 3), same, Transposed),
        ];
        for (input, out_channels, (kh, kw), params, form) in cases {
            let weight = [out_channels, input[1], kh, kw];
            let g = Conv2dGeometry::new(&input, &weight, params).unwrap();
            assert!(is_batched(&g), "{input:?}");
            assert_eq!(batched_form(&g), form, "{input:?}");
            if (kh, kw) == (5, 3) || (params == padded_1x1 && kh == 1) {
                let mut border = [0.0; PADDED_PLANE_MAX];
                assert!(PaddedPlane::new(&g, &mut border).is_some(), "{input:?}");
                assert!(!g.is_pointwise() && g.out_width == 6, "{input:?}");
            }
            let x = integers(input.iter().product(), 1);
            let dy = integers(g.output_shape().iter().product(), 2);
            let mut dw = vec![f32::NAN; weight.iter().product()];
            backward_weights(pool.as_dyn(), &g, &x, &dy, &mut dw);
            assert_eq!(dw, naive_weight_gradient(&g, &x, &dy), "{input:?}");
        }
    }

    #[test]
    fn batched_gradients_are_bitwise_the_same_on_1_2_and_3_threads() {
        use crate::kernels::tensor::Tensor;
        use crate::kernels::Conv2dParams;
        use BatchedForm::{ColumnBlocked, Direct};
        let pools: Vec<Pool> = [1, 2, 3]
            .map(|threads| Pool::new(PoolOptions::new(PoolKind::Eigen, threads, "wg")).unwrap())
            .into();
        let (same, strided, pointwise) = (
            Conv2dParams {
                stride: 1,
                padding: 1,
            },
            Conv2dParams {
                stride: 2,
                padding: 1,
            },
            Conv2dParams::default(),
        );
        // (input, weight, params, form): column-blocked 3x3 through PaddedPlane in items of
        // 64, 64 and 2 channels; stride 2 (the general im2col) in 32 + 6; pointwise in 112 + 88;
        // direct by rows, pointwise and 3x3, in row blocks of 64 + 36 and 48 + 32.
        let cases = [
            ([4, 130, 4, 4], [16, 130, 3, 3], same, ColumnBlocked),
            ([2, 38, 7, 7], [8, 38, 3, 3], strided, ColumnBlocked),
            ([4, 200, 4, 4], [32, 200, 1, 1], pointwise, ColumnBlocked),
            ([2, 16, 2, 2], [100, 16, 1, 1], pointwise, Direct),
            ([2, 6, 3, 3], [80, 6, 3, 3], same, Direct),
        ];
        for (seed, (input, weight, params, form)) in (0..).step_by(2).zip(cases) {
            let g = Conv2dGeometry::new(&input, &weight, params).unwrap();
            assert!(is_batched(&g), "{input:?}");
            assert_eq!(batched_form(&g), form, "{input:?} {weight:?}");
            if form == ColumnBlocked {
                let mut border = [0.0; PADDED_PLANE_MAX];
                let padded = PaddedPlane::new(&g, &mut border).is_some() && !g.is_pointwise();
                assert_eq!(padded, params == same, "{input:?}: through PaddedPlane");
                assert!(
                    column_item_channels(&g) < g.in_channels,
                    "{input:?}: several items"
                );
            } else {
                assert!(g.patch_len() < g.out_channels, "{weight:?}: direct by rows");
                assert!(
                    batched_item_share(g.out_channels) < g.out_channels,
                    "{weight:?}"
                );
            }
            let x = Tensor::random(&input, 100 + seed).data;
            let dy = Tensor::random(&g.output_shape(), 101 + seed).data;
            let results: Vec<Vec<f32>> = pools
                .iter()
                .map(|pool| {
                    let mut dw = vec![f32::NAN; weight.iter().product()];
                    backward_weights(pool.as_dyn(), &g, &x, &dy, &mut dw);
                    dw
                })
                .collect();
            let bits = |dw: &[f32]| dw.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&results[0]), bits(&results[1]), "{weight:?}: 1 vs 2");
            assert_eq!(bits(&results[0]), bits(&results[2]), "{weight:?}: 1 vs 3");
            // Against the definition, within the rounding of `K` f32 additions on both sides
            // (`K` = the batch's pixels), relative to the sum of the terms' magnitudes.
            let expected = naive_weight_gradient(&g, &x, &dy);
            let abs = |v: &[f32]| v.iter().map(|v| v.abs()).collect::<Vec<_>>();
            let magnitudes = naive_weight_gradient(&g, &abs(&x), &abs(&dy));
            let k = (g.batch * g.out_pixels()) as f32;
            for (i, ((got, want), size)) in results[0]
                .iter()
                .zip(&expected)
                .zip(&magnitudes)
                .enumerate()
            {
                let bound = 2.0 * k * f32::EPSILON * size;
                assert!(
                    (got - want).abs() <= bound,
                    "{weight:?} [{i}]: {got} vs {want}"
                );
            }
        }
    }

    #[test]
    fn column_items_fill_whole_panels_and_padded_rows_take_odd_lines() {
        use crate::kernels::Conv2dParams;
        let channels_per_item = |c_in: usize, kernel: usize| {
            let padding = kernel / 2;
            let params = Conv2dParams { stride: 1, padding };
            let g = Conv2dGeometry::new(&[4, c_in, 4, 4], &[64, c_in, kernel, kernel], params);
            column_item_channels(&g.unwrap())
        };
        // 3x3: 64 channels (576 columns, 9 panels of 64); pointwise: 512 channels, at most
        // half of them; few channels: half of them, rounded up to 16; even kernel areas need
        // fewer channels a panel: 2x2, 16 (8 panels in 128), 4x4, 4 (8 panels in 32).
        assert_eq!(
            [
                (512, 3),
                (256, 3),
                (2048, 1),
                (512, 1),
                (1024, 1),
                (5, 3),
                (40, 5),
                (512, 2),
                (512, 4)
            ]
            .map(|(c, k)| channels_per_item(c, k)),
            [64, 64, 512, 256, 512, 16, 32, 128, 32]
        );
        assert_eq!(
            [16, 27, 32, 48, 64, 256, 512].map(padded_stride),
            [16, 48, 48, 48, 80, 272, 528]
        );
    }

    #[test]
    fn padded_planes_make_the_same_tap_rows_as_im2col() {
        use crate::kernels::Conv2dParams;
        // (plane height, width, kernel height, width, padding): 4x4 and 8x8 planes (fixed-size
        // row copies), a rectangular plane and kernel, no padding, a 5x5 kernel.
        let cases = [
            (4, 4, 3, 3, 1),
            (8, 8, 3, 3, 1),
            (3, 5, 3, 1, 1),
            (6, 7, 2, 3, 0),
            (4, 4, 5, 5, 2),
        ];
        for (height, width, kh, kw, padding) in cases {
            let params = Conv2dParams { stride: 1, padding };
            let g = Conv2dGeometry::new(&[1, 1, height, width], &[1, 1, kh, kw], params);
            let g = g.unwrap();
            let (taps, stride) = (kh * kw, g.out_pixels() + 3);
            let mut border = [f32::NAN; PADDED_PLANE_MAX];
            let mut padded = PaddedPlane::new(&g, &mut border).expect("stride 1, small");
            let mut cols = vec![-1.0; taps * stride];
            // Two different planes through the same copy: the border stays zero after the
            // first, and every interior value of the second replaces the first's.
            for offset in [1.0, 100.0] {
                let plane: Vec<f32> = (0..height * width).map(|v| v as f32 + offset).collect();
                let mut expected = vec![-1.0; taps * stride];
                im2col_plane_strided(&g, &plane, &mut expected, stride);
                padded.im2col(&g, &plane, (&mut cols, stride));
                assert_eq!(cols, expected, "{height}x{width}, {kh}x{kw} pad {padding}");
            }
        }
        let strided = Conv2dParams {
            stride: 2,
            padding: 1,
        };
        let g = Conv2dGeometry::new(&[1, 1, 8, 8], &[1, 1, 3, 3], strided).unwrap();
        assert!(PaddedPlane::new(&g, &mut [0.0; PADDED_PLANE_MAX]).is_none());
    }

    #[test]
    fn direct_gradients_in_two_row_blocks_match_the_naive_sum() {
        use crate::kernels::Conv2dParams;
        let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "wg")).unwrap();
        assert_eq!(
            (
                batched_item_share(512),
                batched_item_share(1024),
                batched_item_share(40)
            ),
            (256, 512, 32)
        );
        // 40 output channels in blocks of 32 and 8, more than the 2 x 2 x 2 pixels, pointwise
        // and 3x3 (18 columns, im2col'd); 37 channels over 3 images of 1 pixel, 5x3 unpadded.
        let same = Conv2dParams {
            stride: 1,
            padding: 1,
        };
        let cases = [
            ([2, 6, 2, 2], [40, 6, 1, 1], Conv2dParams::default()),
            ([2, 2, 2, 2], [40, 2, 3, 3], same),
            ([3, 1, 5, 3], [37, 1, 5, 3], Conv2dParams::default()),
        ];
        for (input, weight, params) in cases {
            let g = Conv2dGeometry::new(&input, &weight, params).unwrap();
            assert!(is_batched(&g) && g.out_channels > g.batch * g.out_pixels());
            assert!(g.patch_len() < g.out_channels, "{weight:?}: by rows");
            let x = integers(input.iter().product(), 1);
            let dy = integers(g.output_shape().iter().product(), 2);
            let mut dw = vec![f32::NAN; weight.iter().product()];
            direct_batched_backward_weights(pool.as_dyn(), &g, &x, &dy, &mut dw);
            assert_eq!(dw, naive_weight_gradient(&g, &x, &dy), "{weight:?}");
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
