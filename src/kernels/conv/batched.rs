//! Convolutions over small images: one GEMM per image, or one for the whole batch.
//!
//! # Algorithm
//! Per image, a convolution is `Y_n = W cols_n` with `H_out W_out` columns. On small output
//! planes (the last stages of a ResNet: 8x8, 4x4 pixels) the per-image path's items (one per
//! image and block of output channels, each re-reading its block of `W`) are too thin to run
//! well, so [`BATCHED_MAX_PIXELS`] and below a call takes this path, in one of two forms.
//! The measurements behind the forms and thresholds: `bench/KERNELS.md`.
//!
//! **One item per image, or per half of the channels**, on planes of at least
//! [`PER_IMAGE_MIN_PIXELS`] pixels (8x8): each image's whole GEMM is one `parallel_for` item
//! writing its own contiguous output (or each half's GEMMs, one per image, its half of every
//! image's channels), so nothing is gathered or scattered:
//! - forward: `Y_n = W cols_n` straight into the image's NCHW output (`cols_n` is that image's
//!   im2col); pointwise, with an even number of output channels, one item per half of the
//!   output channels instead, over every image ([`gemm_by_row_groups`]; `cols_n` is the input
//!   itself, so the [`CHANNEL_GROUPS`] items each packing it costs little);
//! - input gradient, pointwise: `dX_n = W^T dY_n` reading `W^T` and `dY_n` in place, with an
//!   even number of input channels one item per half of them over every image (likewise);
//! - input gradient otherwise (3x3), with an even number of input channels: one item per
//!   half of the input channels instead, over every image (`channel_group_backward_data` in
//!   `backward.rs`), which takes its half in equal chunks of at most 2^18 values of `W^T`
//!   (64 of its 128 channels at 256 channels): for each chunk it makes those rows of `W^T`
//!   row-major in its own scratch ([`transpose_block`]), then for each image computes them of
//!   `dcols_n = W^T dY_n`, reading `dY_n` in place, and col2im's them onto the chunk's planes
//!   of the image.
//!   With an odd number, one item per image as the pointwise, `W^T` made row-major once per
//!   call by [`transpose_images`] first, col2im of the image within its item.
//!
//! Why it wins: for a row-major `C`, the `gemm` crate (0.19, AVX-512, microkernel 64 x 6)
//! computes `C^T = B^T A^T`; it never packs a row-major `A` (the weight: it broadcasts from it
//! in place) and packs `B` (the columns) in every call whose `C` has more than 48 rows. Cut by
//! rows of `Y_b`, every item would pack the whole side-by-side `cols_b` again (4 items: 4
//! copies of 2.4 MB on 3x3, 256 channels); cut by images, each column is packed once, and the
//! gather, the scatter and the `cols_b` buffer go away. On 4x4 planes (16 columns per image,
//! a quarter of the microkernel's 64) the per-image GEMMs are too narrow, hence the threshold.
//!
//! Why the 3x3 input gradient goes by channel halves: per image, all of `W` would be
//! transposed first in a pass of its own that both threads finish before any GEMM, and every
//! image's GEMM would then read all of `W^T` (2.4 MB at 256 channels), half of it written by
//! the other core. By halves, each item's `W^T` (1.2 MB) stays in its core's L2 for all four
//! images and nothing waits between the transpose and the GEMMs; by chunks of 64 channels
//! (590 KB of `W^T`, each used for the four images while it is in L2) it leaves half of L2
//! to the columns and gradients beside it.
//! The 3x3 forward stays per image: by halves, each item would pack every image's im2col'd
//! columns (590 KB an image at 256 channels) once more.
//!
//! **One GEMM over the batch** on smaller planes: the images' matrices side by side, `cols_b`
//! `(C_in kh kw) x (N H_out W_out)`, column `n P + p` being image `n`'s column `p`, and one
//! GEMM `Y_b = W cols_b` makes every image's output at once, which a copy then puts back in
//! NCHW order:
//! - forward: `cols_b` by im2col straight into the side-by-side layout (or gathered from the
//!   input when pointwise), one GEMM cut into [`forward_rows`] blocks (two of 256 rows on 512
//!   output channels: each item packs all of `cols_b`, so few items pack least), scatter
//!   into the output;
//! - input gradient: `dY_b` gathered from `grad_output`, `dcols_b = W^T dY_b`, scattered back
//!   to per-image columns (col2im when not pointwise). Over at most
//!   [`TRANSPOSED_MAX_COLUMNS`] pixels it is computed transposed instead, `dcols_b^T = dY_b^T
//!   W` (few rows, many columns), one item per block of at most [`TRANSPOSED_BLOCK_COLUMNS`]
//!   (128) columns ([`transposed_block`]), each block its own row-major matrix. Each item's
//!   GEMM packs its block of `W` and reads `dY_b` in place (the crate packs its right
//!   operand, `dY_b`, only in products of more than 128 rows, so wider blocks would pack all
//!   of `dY_b` again in every item). Then, pointwise, each image's planes go back in 16x16
//!   tiles: within the GEMM's own item, right after it, while the block is still in its
//!   core's cache, when the blocks are all of one width (`untransposed_in_items` in
//!   `backward.rs`: each item untransposes its block into every image's planes of its
//!   channels), else in a pass of its own ([`untranspose_blocks`]). Otherwise (not
//!   pointwise) col2im reads the blocks directly, one item per (image, input channel) plane
//!   gathering its `kh kw x P` columns into its slot of the per-image columns and adding them
//!   onto the plane while they are in L1 (`col2im_from_blocks` in `backward.rs`; the same
//!   values in the same order as untransposing every image first, then col2im).
//!
//!   Tried on the 3x3 `512 -> 512` and slower, so not to be tried again: items of whole
//!   input channels col2im'ing their own block after its GEMMs (the crate's 16-column
//!   remainder kernel, then more packing); GEMM calls of at most 48 pixels so the crate reads
//!   `W` in place; the forward form `dX_b = W' cols_b` with the flipped `W'` made just before
//!   each GEMM (making `W'` costs more than the crate's packing of `W`, which reads the same
//!   bytes). Calls of at most 48 rows reading the 64-wide columns in place also lose to the
//!   crate's packing on the 8x8 and 4x4 forwards and input gradients.
//!
//! The weight gradient `dW = dY_b cols_b^T` always takes the batched form, its inner dimension
//! running over all the images' pixels (see `weight_grad.rs`). Its transposed form im2cols
//! `cols_b` straight into the side-by-side layout too; each item of its column-blocked form
//! im2cols (or, pointwise, copies) only its own input channels' rows of `cols_b` into its
//! thread's scratch, rows padded apart; its direct form makes each image's columns, then
//! transposes them into `cols_b^T`, and by blocks of rows each item gathers its own rows of
//! `dY_b` (by blocks of columns, `dY_b` is gathered whole first).
//!
//! [`transpose_images`] (and [`transpose_block`], [`untranspose_blocks`]) copy 16x16 tiles,
//! each loaded whole (16 row loads) and stored as 16 whole rows, rather than element by
//! element with strided stores. Where the CPU has x86-64-v3 (AVX2 and FMA among others;
//! detected at run time, once per [`transpose_block`] call) a tile goes as four 8x8 blocks,
//! each transposed in registers (8 row loads, 24 shuffles, 8 row stores, through `pulp`'s
//! safe wrappers of the intrinsics); the tile's array of rows, read back value by value,
//! compiles to 256 scalar loads and 256 scalar stores a tile (the build targets plain
//! x86-64). It is a copy, so no value changes. The tiles go by bands of columns of the
//! source, each band of 16 destination rows written whole, contiguously, rather than by
//! bands of its rows (every destination row a line at a time). What is left is mostly
//! waiting for the source rows (the weight's lie a whole row of `W` apart, 9 KB); software
//! prefetches of the next band, or of the next chunk of `W` during the current one's GEMMs,
//! do not shorten it.
//!
//! # Parallelism and determinism
//! GEMMs are cut by images, halves of the input channels, rows (or blocks of columns) of their
//! output, copies by rows of their destination, in blocks that depend on the shapes alone; each item is one thread's
//! sequential code. Which form a call takes depends on the shapes alone too, so results are
//! the same on every pool and thread count (they differ in the last bits from the per-image
//! path's, whose GEMMs have other shapes and blocks, and which adds the weight gradient's
//! images in a different order).
#![forbid(unsafe_code)]

use super::im2col::{columns, im2col_side_by_side};
use super::Conv2dGeometry;
use crate::kernels::gemm::{gemm_item_cost, gemm_single_threaded, MatView, GEMM_MAX_ROWS};
use crate::kernels::par::{
    for_each_chunk, for_each_nested_chunk, for_each_strided_group, item_cost,
    VECTOR_FLOPS_PER_CYCLE,
};
use crate::kernels::scratch::with_scratch;
use crate::pool::ThreadPool;

/// Pixel rows per item of [`transpose_images`].
const TRANSPOSE_PIXELS: usize = 64;

/// Side of the square tiles [`transpose_images`] copies one at a time: 16 rows of the
/// destination, 16 cache lines. Copying a whole item channel by channel instead writes
/// `TRANSPOSE_PIXELS` lines a power-of-two stride apart, which share 4 sets of the L1
/// cache and evict each other.
const TRANSPOSE_TILE: usize = 16;

/// Output planes of at least this many pixels (8x8) run the batched path's GEMMs one image
/// per item, each image's output written in place (see the module docs).
pub(super) const PER_IMAGE_MIN_PIXELS: usize = 64;

/// Groups of channels the GEMMs on such planes are cut into instead, when the channels
/// divide evenly (see the module docs): each group one item over every image, so its part of
/// the weight stays in one core's L2 for all of them. One per thread of this machine's 2.
pub(super) const CHANNEL_GROUPS: usize = 2;

/// Output planes of at most this many pixels take the batched path.
pub(super) const BATCHED_MAX_PIXELS: usize = 128;

/// Input gradients over at most this many pixels (`N H_out W_out`) are computed transposed:
/// the `gemm` crate (0.19, AVX-512) packs a column-major left operand such as the `W^T` view
/// only for products more than 128 columns wide (twice its microkernel's 64 rows); narrower,
/// it reads `W^T` in place, striding over a whole row of `W` per value.
pub(super) const TRANSPOSED_MAX_COLUMNS: usize = 128;

/// Most columns of `dcols_b^T` per item of the transposed input gradient: for a product of
/// more rows than twice its microkernel's 64, the `gemm` crate (0.19, AVX-512) packs its
/// right operand, here all of `dY_b`, again in every item; at 128 it reads `dY_b` in place.
const TRANSPOSED_BLOCK_COLUMNS: usize = 128;

/// Columns per block of the transposed input gradient's `dcols_b^T` (`patch` columns): all of
/// them up to [`TRANSPOSED_BLOCK_COLUMNS`], else equal blocks of at most that many, rounded
/// up to a multiple of [`TRANSPOSE_TILE`] (so [`untranspose_blocks`] copies whole tiles).
pub(super) fn transposed_block(patch: usize) -> usize {
    let blocks = patch.div_ceil(TRANSPOSED_BLOCK_COLUMNS);
    if blocks <= 1 {
        return patch.max(1);
    }
    patch.div_ceil(blocks).next_multiple_of(TRANSPOSE_TILE)
}

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
        gather_row(src, (c, p), channel, row);
    });
}

/// Row `channel` of [`gather`]'s `dst`: `row` (`N P` values) from `src` (`N x C x P`), every
/// image's plane `channel` side by side.
pub(super) fn gather_row(src: &[f32], (c, p): (usize, usize), channel: usize, row: &mut [f32]) {
    for (image, part) in row.chunks_exact_mut(p.max(1)).enumerate() {
        let start = (image * c + channel) * p;
        part.copy_from_slice(&src[start..start + p]);
    }
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
            transpose_block(&plane[first..], p, (c, len), out, c);
        },
    );
}

/// `to[j * to_stride + i] = from[i * from_stride + j]` for every `i < rows`, `j < cols`: the
/// transpose of a `rows x cols` block of a row-major matrix into another, in whole
/// [`TRANSPOSE_TILE`] squares where they fit, element by element at the edges. The tiles go
/// band by band of [`TRANSPOSE_TILE`] columns of `from`, down its rows, so each band of as many
/// rows of `to` is written whole, contiguously, before the next. Whole tiles go as four 8x8
/// blocks in AVX registers where the CPU has x86-64-v3 (detected once per call), else by rows
/// ([`TileByRows`]).
pub(super) fn transpose_block(
    from: &[f32],
    from_stride: usize,
    sizes: (usize, usize),
    to: &mut [f32],
    to_stride: usize,
) {
    #[cfg(target_arch = "x86_64")]
    if let Some(simd) = pulp::x86::V3::try_new() {
        let tiles = TileInAvxBlocks(simd);
        return simd.vectorize(|| walk_tiles(tiles, from, from_stride, sizes, to, to_stride));
    }
    walk_tiles(TileByRows, from, from_stride, sizes, to, to_stride);
}

/// [`transpose_block`]'s walk, with `tiles` transposing the whole tiles; inlined, so inside
/// `vectorize` it compiles with the features the AVX tiles need.
#[inline(always)]
fn walk_tiles(
    tiles: impl FullTile,
    from: &[f32],
    from_stride: usize,
    (rows, cols): (usize, usize),
    to: &mut [f32],
    to_stride: usize,
) {
    for first_j in (0..cols).step_by(TRANSPOSE_TILE) {
        let js = first_j..cols.min(first_j + TRANSPOSE_TILE);
        for first_i in (0..rows).step_by(TRANSPOSE_TILE) {
            let is = first_i..rows.min(first_i + TRANSPOSE_TILE);
            if is.len() == TRANSPOSE_TILE && js.len() == TRANSPOSE_TILE {
                let tile_from = &from[first_i * from_stride + first_j..];
                let tile_to = &mut to[first_j * to_stride + first_i..];
                tiles.transpose(tile_from, from_stride, tile_to, to_stride);
                continue;
            }
            for i in is.clone() {
                let row = &from[i * from_stride..][js.clone()];
                for (j, value) in js.clone().zip(row) {
                    to[j * to_stride + i] = *value;
                }
            }
        }
    }
}

/// How a whole `TRANSPOSE_TILE` square is transposed:
/// `to[j * to_stride + i] = from[i * from_stride + j]`, every store a whole row.
trait FullTile: Copy {
    fn transpose(self, from: &[f32], from_stride: usize, to: &mut [f32], to_stride: usize);
}

/// The tile loaded row by row into an array, then stored column by column as whole rows.
#[derive(Clone, Copy)]
struct TileByRows;

impl FullTile for TileByRows {
    #[inline(always)]
    fn transpose(self, from: &[f32], from_stride: usize, to: &mut [f32], to_stride: usize) {
        transpose_tile_by_rows(from, from_stride, to, to_stride);
    }
}

/// The tile as four 8x8 blocks in AVX registers ([`transpose_8x8_avx`]), for a CPU that
/// `V3` proves has x86-64-v3.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct TileInAvxBlocks(pulp::x86::V3);

#[cfg(target_arch = "x86_64")]
impl FullTile for TileInAvxBlocks {
    #[inline(always)]
    fn transpose(self, from: &[f32], from_stride: usize, to: &mut [f32], to_stride: usize) {
        const H: usize = TRANSPOSE_TILE / 8;
        for (bi, bj) in (0..H).flat_map(|bi| (0..H).map(move |bj| (bi, bj))) {
            let block_from = &from[bi * 8 * from_stride + bj * 8..];
            let block_to = &mut to[bj * 8 * to_stride + bi * 8..];
            transpose_8x8_avx(self.0, block_from, from_stride, block_to, to_stride);
        }
    }
}

/// A whole tile without SIMD: loaded row by row into an array, then stored column by
/// column as whole rows of `to`.
fn transpose_tile_by_rows(from: &[f32], from_stride: usize, to: &mut [f32], to_stride: usize) {
    const T: usize = TRANSPOSE_TILE;
    let mut tile = [[0.0f32; T]; T];
    for (i, row) in tile.iter_mut().enumerate() {
        row.copy_from_slice(&from[i * from_stride..][..T]);
    }
    for j in 0..T {
        let column: [f32; T] = std::array::from_fn(|i| tile[i][j]);
        to[j * to_stride..][..T].copy_from_slice(&column);
    }
}

/// `to[j * to_stride + i] = from[i * from_stride + j]` for an 8x8 block, in AVX registers:
/// eight row loads, the usual 24 shuffles (pairs of rows interleaved, then pairs of pairs,
/// then 128-bit halves exchanged) and eight row stores, against 64 scalar loads and stores.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn transpose_8x8_avx(
    simd: pulp::x86::V3,
    from: &[f32],
    from_stride: usize,
    to: &mut [f32],
    to_stride: usize,
) {
    use std::arch::x86_64::__m256;
    let avx = simd.avx;
    let row = |i: usize| -> __m256 {
        let values: [f32; 8] = from[i * from_stride..][..8].try_into().unwrap();
        pulp::cast(values)
    };
    let r: [__m256; 8] = std::array::from_fn(row);
    // Rows 2k and 2k+1 interleaved: lanes (2k,0) (2k+1,0) (2k,1) (2k+1,1) per 128-bit half.
    let low = |a: usize| avx._mm256_unpacklo_ps(r[a], r[a + 1]);
    let high = |a: usize| avx._mm256_unpackhi_ps(r[a], r[a + 1]);
    let (t0, t1, t2, t3) = (low(0), high(0), low(2), high(2));
    let (t4, t5, t6, t7) = (low(4), high(4), low(6), high(6));
    // Four rows' worth of one column per 128-bit half.
    let u0 = avx._mm256_shuffle_ps::<0x44>(t0, t2);
    let u1 = avx._mm256_shuffle_ps::<0xEE>(t0, t2);
    let u2 = avx._mm256_shuffle_ps::<0x44>(t1, t3);
    let u3 = avx._mm256_shuffle_ps::<0xEE>(t1, t3);
    let u4 = avx._mm256_shuffle_ps::<0x44>(t4, t6);
    let u5 = avx._mm256_shuffle_ps::<0xEE>(t4, t6);
    let u6 = avx._mm256_shuffle_ps::<0x44>(t5, t7);
    let u7 = avx._mm256_shuffle_ps::<0xEE>(t5, t7);
    let columns = [
        avx._mm256_permute2f128_ps::<0x20>(u0, u4),
        avx._mm256_permute2f128_ps::<0x20>(u1, u5),
        avx._mm256_permute2f128_ps::<0x20>(u2, u6),
        avx._mm256_permute2f128_ps::<0x20>(u3, u7),
        avx._mm256_permute2f128_ps::<0x31>(u0, u4),
        avx._mm256_permute2f128_ps::<0x31>(u1, u5),
        avx._mm256_permute2f128_ps::<0x31>(u2, u6),
        avx._mm256_permute2f128_ps::<0x31>(u3, u7),
    ];
    for (j, column) in columns.into_iter().enumerate() {
        let values: [f32; 8] = pulp::cast(column);
        to[j * to_stride..][..8].copy_from_slice(&values);
    }
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

/// The forward pass: one GEMM per image when its plane is wide enough ([`per_image_items`]),
/// writing the image's output in place; else one GEMM over the batch's side-by-side columns,
/// cut into [`forward_rows`] blocks, then scattered (see the module docs).
pub(super) fn forward(
    pool: &dyn ThreadPool,
    g: &Conv2dGeometry,
    input: &[f32],
    weight: &[f32],
    output: &mut [f32],
) {
    let (n, pixels, patch, channels) = g.batched_sizes();
    let w = dense(weight, patch);
    if per_image_items(g) && g.is_pointwise() && channels % CHANNEL_GROUPS == 0 {
        let cols_n = |image: usize| dense(&input[image * patch * pixels..], pixels);
        return gemm_by_row_groups(pool, (n, channels, pixels, patch), w, cols_n, output);
    }
    if per_image_items(g) {
        with_scratch(g.unrolled_len(), |unrolled| {
            let cols = columns(pool, g, input, unrolled);
            let cost = gemm_item_cost(channels, pixels, patch);
            for_each_chunk(pool, output, channels * pixels, cost, |image, out| {
                let cols_n = dense(&cols[image * patch * pixels..], pixels);
                gemm_single_threaded((channels, pixels, patch), w, cols_n, out, 1.0, 0.0);
            });
        });
        return;
    }
    let wide = n * pixels;
    with_scratch((patch + channels) * wide, |buffer| {
        let (cols, y) = buffer.split_at_mut(patch * wide);
        side_by_side_columns(pool, g, input, cols);
        let rows = forward_rows(channels);
        gemm_by_rows(pool, (channels, wide, patch), rows, w, dense(cols, wide), y);
        scatter(pool, (n, channels, pixels), y, output);
    });
}

/// Fills `cols_b` (`C_in kh kw x N P`) with every image's columns side by side: gathered from
/// the input when pointwise, else im2col'd straight into place.
pub(super) fn side_by_side_columns(
    pool: &dyn ThreadPool,
    g: &Conv2dGeometry,
    input: &[f32],
    cols_b: &mut [f32],
) {
    if g.is_pointwise() {
        gather(
            pool,
            (g.batch, g.patch_len(), g.out_pixels()),
            input,
            cols_b,
        );
    } else {
        im2col_side_by_side(pool, g, input, cols_b);
    }
}

/// Whether the batched GEMMs go one item per image: planes of at least
/// [`PER_IMAGE_MIN_PIXELS`] pixels.
pub(super) fn per_image_items(g: &Conv2dGeometry) -> bool {
    g.out_pixels() >= PER_IMAGE_MIN_PIXELS
}

/// Rows of `Y_b` per item of the batched forward GEMM over side-by-side columns: blocks of
/// [`GEMM_MAX_ROWS`] at most, in an even number (at least two).
fn forward_rows(rows: usize) -> usize {
    let blocks = rows.div_ceil(GEMM_MAX_ROWS).max(2).next_multiple_of(2);
    rows.div_ceil(blocks).next_multiple_of(8).max(1)
}

/// `out_n (m x p) = a b_n` for every image `n` of `out` (`N x m x p`), one item per group of
/// `m / CHANNEL_GROUPS` rows of `a` over every image, which writes those rows of each `out_n`
/// (`m` a multiple of [`CHANNEL_GROUPS`]).
pub(super) fn gemm_by_row_groups<'a>(
    pool: &dyn ThreadPool,
    (n, m, p, k): (usize, usize, usize, usize),
    a: MatView<'_>,
    b_n: impl Fn(usize) -> MatView<'a> + Sync,
    out: &mut [f32],
) {
    let rows = m / CHANNEL_GROUPS;
    let cost = gemm_item_cost(rows, n * p, k);
    let mut groups = [(); CHANNEL_GROUPS];
    for_each_strided_group(pool, out, rows * p, &mut groups, cost, |group, _, outs| {
        let a_rows = MatView {
            data: &a.data[group * rows * a.row_stride..],
            ..a
        };
        for (image, out_n) in outs.iter_mut().enumerate() {
            gemm_single_threaded((rows, p, k), a_rows, b_n(image), out_n, 1.0, 0.0);
        }
    });
}

/// `c (m x n) = a b` for strided views, one item per block of `rows` rows of `c`.
pub(super) fn gemm_by_rows(
    pool: &dyn ThreadPool,
    (m, n, k): (usize, usize, usize),
    rows: usize,
    a: MatView<'_>,
    b: MatView<'_>,
    c: &mut [f32],
) {
    debug_assert_eq!(c.len(), m * n, "gemm_by_rows: c holds m x n values");
    if n == 0 {
        return;
    }
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
            transpose_block(
                &blocked[start..start + out.len()],
                width,
                (p, width),
                out,
                p,
            );
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
    use crate::kernels::gemm::{rows_per_block, GemmShape};
    use crate::kernels::Conv2dParams;
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
            .map(|i| ((i * 5 + seed) % 7) as f32 - 3.0)
            .collect()
    }

    /// A geometry of `input` convolved into `out_channels` with a square `kernel`.
    fn geometry(
        input: [usize; 4],
        out_channels: usize,
        kernel: usize,
        stride: usize,
        padding: usize,
    ) -> Conv2dGeometry {
        let params = Conv2dParams { stride, padding };
        let weight = [out_channels, input[1], kernel, kernel];
        Conv2dGeometry::new(&input, &weight, params).unwrap()
    }

    /// Batched geometries on both sides of [`PER_IMAGE_MIN_PIXELS`]: 8x8 and 9x9 planes (one
    /// item per image; 3x3 same-width, 3x3 unpadded, pointwise, strided; with an even number
    /// of channels, by 2 channel groups: the 3x3 input gradient, also strided, the pointwise
    /// forward and input gradient, the strided 1x1's input gradient), 4x4 and 6x6
    /// ones (one GEMM over the batch: 140 output channels make two row blocks of 72 and 68;
    /// 17 input channels, two blocks of 80 `dcols_b^T` columns, channel 8's straddling them;
    /// 32 pointwise channels untransposed in whole tiles within the GEMM's items, 144 in blocks
    /// of 80 and 64 by a pass of their own).
    fn batched_geometries() -> Vec<Conv2dGeometry> {
        vec![
            geometry([2, 3, 8, 8], 5, 3, 1, 1),
            geometry([2, 4, 8, 8], 6, 3, 1, 1),
            geometry([3, 6, 16, 16], 5, 3, 2, 1),
            geometry([2, 6, 8, 8], 4, 1, 1, 0),
            geometry([2, 4, 16, 16], 6, 1, 2, 0),
            geometry([2, 17, 4, 4], 6, 3, 1, 1),
            geometry([2, 32, 4, 4], 8, 1, 1, 0),
            geometry([2, 144, 4, 4], 8, 1, 1, 0),
            geometry([3, 4, 11, 11], 6, 3, 1, 0),
            geometry([3, 5, 9, 9], 7, 1, 1, 0),
            geometry([2, 3, 17, 17], 4, 3, 2, 1),
            geometry([3, 4, 4, 4], 140, 3, 1, 1),
            geometry([2, 6, 6, 6], 3, 1, 1, 0),
            geometry([2, 3, 12, 12], 5, 3, 2, 1),
        ]
    }

    /// The input pixel `(y, x)` output pixel `(oy, ox)` reads at tap `(ky, kx)`, if any.
    fn tap_source(
        g: &Conv2dGeometry,
        (oy, ox): (usize, usize),
        (ky, kx): (usize, usize),
    ) -> Option<usize> {
        let (s, p) = (g.params.stride, g.params.padding);
        let (y, x) = ((oy * s + ky).checked_sub(p)?, (ox * s + kx).checked_sub(p)?);
        (y < g.height && x < g.width).then_some(y * g.width + x)
    }

    /// Every (image, output channel, input channel, output pixel, tap, input pixel) term of the
    /// convolution, in a fixed order.
    fn for_each_term(g: &Conv2dGeometry, mut f: impl FnMut([usize; 5], usize)) {
        for n in 0..g.batch {
            for o in 0..g.out_channels {
                for i in 0..g.in_channels {
                    for (oy, ox) in
                        (0..g.out_height).flat_map(|y| (0..g.out_width).map(move |x| (y, x)))
                    {
                        for (ky, kx) in
                            (0..g.kernel_h).flat_map(|y| (0..g.kernel_w).map(move |x| (y, x)))
                        {
                            if let Some(pixel) = tap_source(g, (oy, ox), (ky, kx)) {
                                let tap = ky * g.kernel_w + kx;
                                f([n, o, i, oy * g.out_width + ox, tap], pixel);
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn both_forms_match_the_direct_convolution_in_each_direction() {
        use crate::kernels::{conv2d, conv2d_backward_data, conv2d_backward_weights, Tensor};
        let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "batched")).unwrap();
        for g in batched_geometries() {
            assert!(is_batched(&g), "{g:?}");
            let tensor = |shape: [usize; 4], seed| Tensor {
                data: integers(shape.iter().product(), seed),
                shape: shape.to_vec(),
            };
            let (x, w, dy) = (
                tensor(g.input_shape(), 1),
                tensor(g.weight_shape(), 2),
                tensor(g.output_shape(), 3),
            );
            let (mut y, mut dx, mut dw) = (
                Tensor::zeros(&g.output_shape()),
                Tensor::zeros(&g.input_shape()),
                Tensor::zeros(&g.weight_shape()),
            );
            conv2d(pool.as_dyn(), &x, &w, g.params, &mut y).unwrap();
            conv2d_backward_data(pool.as_dyn(), &dy, &w, g.params, &mut dx).unwrap();
            conv2d_backward_weights(pool.as_dyn(), &x, &dy, g.params, &mut dw).unwrap();
            let (mut want_y, mut want_dx, mut want_dw) = (
                vec![0.0; y.data.len()],
                vec![0.0; dx.data.len()],
                vec![0.0; dw.data.len()],
            );
            let (plane_in, plane_out, area) = (g.in_pixels(), g.out_pixels(), g.kernel_area());
            for_each_term(&g, |[n, o, i, q, tap], pixel| {
                let x_at = (n * g.in_channels + i) * plane_in + pixel;
                let y_at = (n * g.out_channels + o) * plane_out + q;
                let w_at = (o * g.in_channels + i) * area + tap;
                want_y[y_at] += w.data[w_at] * x.data[x_at];
                want_dx[x_at] += w.data[w_at] * dy.data[y_at];
                want_dw[w_at] += dy.data[y_at] * x.data[x_at];
            });
            assert_eq!(y.data, want_y, "forward {g:?}");
            assert_eq!(dx.data, want_dx, "input gradient {g:?}");
            assert_eq!(dw.data, want_dw, "weight gradient {g:?}");
        }
    }

    #[test]
    fn side_by_side_im2col_equals_gathered_per_image_columns() {
        let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "batched")).unwrap();
        for g in batched_geometries() {
            let (n, patch, pixels) = (g.batch, g.patch_len(), g.out_pixels());
            let input = integers(g.input_shape().iter().product(), 4);
            let mut got = vec![f32::NAN; patch * n * pixels];
            side_by_side_columns(pool.as_dyn(), &g, &input, &mut got);
            let mut unrolled = vec![f32::NAN; g.unrolled_len()];
            let per_image = columns(pool.as_dyn(), &g, &input, &mut unrolled);
            let mut want = vec![f32::NAN; patch * n * pixels];
            gather(pool.as_dyn(), (n, patch, pixels), per_image, &mut want);
            assert_eq!(got, want, "{g:?}");
        }
    }

    #[test]
    fn blocks_transpose_at_any_size_and_stride() {
        // Whole tiles only, partial ones on either side, and both.
        for (rows, cols, from_stride, to_stride) in
            [(32, 16, 40, 33), (5, 19, 19, 7), (37, 21, 23, 40)]
        {
            let from = integers((rows - 1) * from_stride + cols, 1);
            let mut to = vec![f32::NAN; (cols - 1) * to_stride + rows];
            transpose_block(&from, from_stride, (rows, cols), &mut to, to_stride);
            for (i, j) in (0..rows).flat_map(|i| (0..cols).map(move |j| (i, j))) {
                assert_eq!(to[j * to_stride + i], from[i * from_stride + j], "{i} {j}");
            }
        }
    }

    #[test]
    fn whole_tiles_transpose_the_same_with_and_without_simd() {
        // Strides that are not multiples of 8 (rows start off any alignment) and a
        // multiple of 1024 (the 32x32 planes' rows).
        for (from_stride, to_stride) in [(19, 23), (16, 16), (1024, 37)] {
            let from = integers(15 * from_stride + TRANSPOSE_TILE, 5);
            let to_len = 15 * to_stride + TRANSPOSE_TILE;
            let mut by_rows = vec![f32::NAN; to_len];
            TileByRows.transpose(&from, from_stride, &mut by_rows, to_stride);
            for (i, j) in (0..TRANSPOSE_TILE).flat_map(|i| (0..TRANSPOSE_TILE).map(move |j| (i, j)))
            {
                let want = from[i * from_stride + j];
                assert_eq!(by_rows[j * to_stride + i], want, "by rows {i} {j}");
            }
            // Nothing between the destination's rows is written.
            let gaps = to_len - TRANSPOSE_TILE * TRANSPOSE_TILE;
            assert_eq!(by_rows.iter().filter(|v| v.is_nan()).count(), gaps);
            // The AVX blocks, where this CPU has them: the same bits, gaps included.
            #[cfg(target_arch = "x86_64")]
            if let Some(simd) = pulp::x86::V3::try_new() {
                let mut avx = vec![f32::NAN; to_len];
                let tiles = TileInAvxBlocks(simd);
                simd.vectorize(|| tiles.transpose(&from, from_stride, &mut avx, to_stride));
                let bits = |to: &[f32]| to.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&avx), bits(&by_rows), "avx blocks");
            }
        }
    }

    #[test]
    fn transposed_blocks_are_at_most_128_columns_in_whole_tiles() {
        assert_eq!(transposed_block(4608), 128);
        assert_eq!(transposed_block(2048), 128);
        assert_eq!(transposed_block(153), 80);
        assert_eq!(transposed_block(128), 128);
        assert_eq!(transposed_block(36), 36);
    }

    #[test]
    fn forward_row_blocks_are_even_and_at_most_the_gemm_maximum() {
        assert_eq!(forward_rows(512), 256);
        assert_eq!(forward_rows(140), 72);
        assert_eq!(forward_rows(2048), 256);
        assert_eq!(forward_rows(1), 8);
    }

    #[test]
    fn column_blocks_untransposed_equal_row_blocks_scattered() {
        let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "batched")).unwrap();
        // (images, pixels, rows q, inner k): blocks of 40 rows and a last of 24 (q = 144),
        // one block (q = 5), 1-pixel planes, one image; each also in `transposed_block`s (two
        // of 80 on q = 160, 16 pixels: whole tiles).
        for (n, p, q, k) in [
            (2, 16, 160, 8),
            (2, 16, 144, 16),
            (3, 4, 5, 7),
            (3, 1, 45, 9),
            (1, 9, 130, 3),
        ] {
            let (w, dy) = (integers(k * q, 1), integers(k * n * p, 2));
            for block in [
                rows_per_block(GemmShape { m: q, n: n * p, k }),
                transposed_block(q),
            ] {
                untransposed_blocks_equal_scattered_rows(&pool, (n, p, q, k), block, (&w, &dy));
            }
        }
    }

    /// [`column_blocks_untransposed_equal_row_blocks_scattered`] for one shape and `block`.
    fn untransposed_blocks_equal_scattered_rows(
        pool: &Pool,
        (n, p, q, k): (usize, usize, usize, usize),
        block: usize,
        (w, dy): (&[f32], &[f32]),
    ) {
        let mut blocked = vec![f32::NAN; q * n * p];
        let (dy_t, w_rows) = (transposed(dy, n * p), dense(w, q));
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
        let (w_t, dy_rows) = (transposed(w, q), dense(dy, n * p));
        let rows = rows_per_block(GemmShape { m: q, n: n * p, k });
        gemm_by_rows(
            pool.as_dyn(),
            (q, n * p, k),
            rows,
            w_t,
            dy_rows,
            &mut by_rows,
        );
        let mut want = vec![f32::NAN; n * q * p];
        scatter(pool.as_dyn(), (n, q, p), &by_rows, &mut want);
        assert_eq!(got, want, "n={n} p={p} q={q} k={k} block={block}");
    }
}
