//! im2col and col2im for one (image, channel) plane, and im2col of a whole batch.
//!
//! A plane's columns are `kh kw` rows (kernel row, kernel column) of `H_out W_out` values: row
//! `(ky, kx)`, column `(oy, ox)` holds input pixel `(oy s + ky - p, ox s + kx - p)`, or 0 in
//! the padding. Stacking the planes of an image channel by channel gives that image's
//! `(C_in kh kw) x (H_out W_out)` column matrix, whose row order matches the weight's.
//! [`im2col_pixels`] fills any range of an image's columns (the blocked path's runs).
//!
//! A stride-1 convolution whose output is as wide as its input (`2 p = kw - 1`: every 3x3
//! pad-1 one) fills a row of its columns as one copy of the plane shifted by the tap's offset,
//! then zeros the few columns that read the padding; others go output row by output row, one
//! copy of up to `W_out` values each (30 to 32 for a 32-wide plane), or for stride 2 a gather
//! whose stride is a compile-time constant so it vectorizes.
//!
//! Both forms then zero the columns that read the left and right padding one column at a time
//! down the output rows ([`zero_padding_columns`]): one or two values per row and edge, where
//! a `fill` each would be a `memset` call each. The row-by-row form walks output rows by
//! index rather than dividing each pixel by the width.
//!
//! A stride-2 convolution whose output is half as wide as its even input (the stem's 7x7 pad
//! 3 on 128x128, any 3x3 pad 1) can instead take its columns from the input's phase planes
//! ([`ImageSource`]): each input plane is split once per image into four `ceil(H / 2) x W / 2`
//! planes of the pixels `(2 i + by, 2 j + bx)`, and tap `(ky, kx)`, which reads input
//! `(2 oy + ky - p, 2 ox + kx - p)`, reads phase `((ky - p) mod 2, (kx - p) mod 2)` at
//! `(oy + floor((ky - p) / 2), ox + floor((kx - p) / 2))`: as wide as the output, so the tap
//! row is that plane shifted, one copy per run as at stride 1 ([`shifted_copy`]), and the
//! stride-2 gather is done once per input value instead of once per tap (49 times for the
//! stem).
//!
//! col2im at stride 1 accumulates into a zeroed `(H + 2 p) x (W + 2 p)` plane on the stack
//! (up to [`PADDED_PLANE_MAX`] values), in which every tap's output rows lie whole: no row
//! is clipped to the plane or skipped, and for output rows of 4, 8 or 16 values the width is
//! a compile-time constant, so a row is one or two vector adds rather than a loop that an
//! 8-value row would run through its scalar remainder (as the clipped 7-value rows of the
//! edge taps always would). The interior is then copied out. Each pixel still receives one value per
//! tap in (ky, kx) order, so the sums are bit for bit those of the row-by-row form, which
//! stride 2 and bigger planes keep. The measurements behind these forms: `bench/KERNELS.md`.
//!
//! [`PaddedPlane`] is the same idea the other way, for im2col at stride 1 on planes of up to
//! [`PADDED_PLANE_MAX`] padded values: the plane copied inside a zero border, each output row
//! of a tap row is one whole copy out of it (the batched weight gradient's column-blocked
//! items use it, `weight_grad.rs`).
#![forbid(unsafe_code)]

use std::ops::Range;

use super::Conv2dGeometry;
use crate::kernels::par::{for_each_chunk, item_cost, VECTOR_FLOPS_PER_CYCLE};
use crate::pool::ThreadPool;

/// The input coordinate that output coordinate `out` reads at kernel offset `offset`, or
/// `None` in the padding.
fn source_index(
    out: usize,
    offset: usize,
    stride: usize,
    padding: usize,
    size: usize,
) -> Option<usize> {
    (out * stride + offset)
        .checked_sub(padding)
        .filter(|&index| index < size)
}

/// The output positions `lo..hi` along one axis whose input coordinate at kernel offset
/// `offset` lies inside `0..size` (all others read the padding).
fn valid_outputs(
    offset: usize,
    stride: usize,
    padding: usize,
    size: usize,
    outs: usize,
) -> (usize, usize) {
    // in = out * stride + offset - padding must lie in 0..size.
    let lo = padding.saturating_sub(offset).div_ceil(stride).min(outs);
    let hi = if size + padding > offset {
        ((size + padding - offset - 1) / stride + 1).min(outs)
    } else {
        0
    };
    (lo, hi.max(lo))
}

/// Fills `cols` (`kh kw` rows of `H_out W_out`) from one input `plane` (`H x W`).
pub(super) fn im2col_plane(geometry: &Conv2dGeometry, plane: &[f32], cols: &mut [f32]) {
    let pixels = geometry.out_pixels();
    im2col_plane_pixels(geometry, plane, 0..pixels, (cols, pixels));
}

/// Fills `cols` (`C_in kh kw` rows of `pixels.len()`) with the columns `pixels` (output
/// pixels in row-major order, any range) of one image's column matrix, from the `image`
/// (`C_in x H x W`).
pub(super) fn im2col_pixels(
    geometry: &Conv2dGeometry,
    image: &[f32],
    pixels: Range<usize>,
    cols: &mut [f32],
) {
    let g = geometry;
    debug_assert!(
        pixels.end <= g.out_pixels(),
        "{pixels:?} past the output plane"
    );
    let plane_cols = g.kernel_area() * pixels.len();
    let planes = image.chunks_exact(g.in_pixels().max(1));
    for (plane, plane_cols) in planes.zip(cols.chunks_exact_mut(plane_cols.max(1))) {
        im2col_plane_pixels(g, plane, pixels.clone(), (plane_cols, pixels.len()));
    }
}

/// [`im2col_plane`] into rows `row_stride` apart (at least `H_out W_out`): tap row `t` of
/// the plane's columns is `cols[t * row_stride..][..H_out W_out]`, the values between rows
/// left as they are (a plane's rows of a wider matrix, such as every image's columns side by
/// side).
pub(super) fn im2col_plane_strided(
    geometry: &Conv2dGeometry,
    plane: &[f32],
    cols: &mut [f32],
    row_stride: usize,
) {
    let pixels = geometry.out_pixels();
    im2col_plane_pixels(geometry, plane, 0..pixels, (cols, row_stride));
}

/// Fills `cols`' `kh kw` rows, `row_stride` apart (at least `pixels.len()`), with the
/// columns `pixels` of one input `plane`'s column matrix: tap row `t` is
/// `cols[t * row_stride..][..pixels.len()]`, the values between rows left as they are.
fn im2col_plane_pixels(
    geometry: &Conv2dGeometry,
    plane: &[f32],
    pixels: Range<usize>,
    (cols, row_stride): (&mut [f32], usize),
) {
    let g = geometry;
    let same_width = g.params.stride == 1 && g.out_width == g.width;
    let mut rows = cols.chunks_mut(row_stride.max(1));
    for tap in (0..g.kernel_h).flat_map(|ky| (0..g.kernel_w).map(move |kx| (ky, kx))) {
        let row = &mut rows.next().expect("cols holds kh * kw rows")[..pixels.len()];
        if same_width {
            shifted_tap_row(g, plane, tap, pixels.clone(), row);
        } else {
            tap_row_by_output_rows(g, plane, tap, pixels.clone(), row);
        }
    }
}

/// Row `(ky, kx)` of the columns `pixels`, one output row at a time: the part of each row
/// that reads the plane is copied (gathered, with a stride), rows that read only the padding
/// are zeroed whole, then the padding columns of all rows at once ([`zero_padding_columns`]).
fn tap_row_by_output_rows(
    g: &Conv2dGeometry,
    plane: &[f32],
    (ky, kx): (usize, usize),
    pixels: Range<usize>,
    row: &mut [f32],
) {
    let (stride, padding) = (g.params.stride, g.params.padding);
    let out_width = g.out_width.max(1);
    let (lo, hi) = valid_outputs(kx, stride, padding, g.width, g.out_width);
    if pixels.is_empty() {
        return;
    }
    for oy in pixels.start / out_width..=(pixels.end - 1) / out_width {
        // The part of output row `oy` inside `pixels`: columns `from..to`.
        let row_start = oy * out_width;
        let from = pixels.start.max(row_start) - row_start;
        let to = pixels.end.min(row_start + out_width) - row_start;
        let out = &mut row[row_start + from - pixels.start..row_start + to - pixels.start];
        let Some(iy) = source_index(oy, ky, stride, padding, g.height) else {
            out.fill(0.0);
            continue;
        };
        let in_row = &plane[iy * g.width..(iy + 1) * g.width];
        let (inside_lo, inside_hi) = (lo.clamp(from, to), hi.clamp(from, to));
        if inside_lo < inside_hi {
            // ix = ox * stride + kx - padding, increasing by `stride` from inside_lo's.
            let first = inside_lo * stride + kx - padding;
            let inside = &mut out[inside_lo - from..inside_hi - from];
            let sources = &in_row[first..];
            match stride {
                1 => inside.copy_from_slice(&sources[..inside.len()]),
                2 => gather_every::<2>(sources, inside),
                _ => gather_every_nth(sources, stride, inside),
            }
        }
    }
    zero_padding_columns(row, pixels, out_width, (lo, hi));
}

/// `out[i] = sources[i * STRIDE]`, the stride known at compile time so the loop vectorizes
/// (a `step_by` gather does not).
fn gather_every<const STRIDE: usize>(sources: &[f32], out: &mut [f32]) {
    let Some((last, body)) = out.split_last_mut() else {
        return;
    };
    let groups = sources.chunks_exact(STRIDE);
    body.iter_mut()
        .zip(groups)
        .for_each(|(out, group)| *out = group[0]);
    *last = sources[body.len() * STRIDE];
}

/// `out[i] = sources[i * stride]` for any stride.
fn gather_every_nth(sources: &[f32], stride: usize, out: &mut [f32]) {
    let picked = sources.iter().step_by(stride);
    out.iter_mut().zip(picked).for_each(|(out, &v)| *out = v);
}

/// Zeros, in `row` (the columns `pixels` of one tap row), every pixel whose output column
/// lies outside `lo..hi` (`width` columns per output row), one column at a time down the
/// rows: a padding column is one to three values wide, and a `fill` per output row and edge
/// would be a `memset` call each.
fn zero_padding_columns(
    row: &mut [f32],
    pixels: Range<usize>,
    width: usize,
    (lo, hi): (usize, usize),
) {
    if pixels.is_empty() || (lo == 0 && hi >= width) {
        return;
    }
    let first_row_start = pixels.start / width * width;
    for column in (0..lo.min(width)).chain(hi.max(lo)..width) {
        // The column's first pixel in `pixels`, then one a row further down each step.
        let mut pixel = first_row_start + column;
        if pixel < pixels.start {
            pixel += width;
        }
        while pixel < pixels.end {
            row[pixel - pixels.start] = 0.0;
            pixel += width;
        }
    }
}

/// Row `(ky, kx)` of the columns `pixels` of a stride-1 convolution whose output is as wide
/// as its input: output pixel `(oy, ox)` reads input pixel `(oy + ky - p, ox + kx - p)`
/// ([`shifted_copy`]).
fn shifted_tap_row(
    g: &Conv2dGeometry,
    plane: &[f32],
    (ky, kx): (usize, usize),
    pixels: Range<usize>,
    row: &mut [f32],
) {
    let padding = g.params.padding as isize;
    let source = ShiftedPlane {
        plane,
        rows: g.height,
        width: g.width,
        shift: (ky as isize - padding, kx as isize - padding),
    };
    shifted_copy(source, g.out_height, pixels, row);
}

/// A plane as wide as the output that a tap row reads shifted: output pixel `(oy, ox)` reads
/// its value `(oy + dy, ox + dx)`, or 0 outside its `rows x width`.
#[derive(Clone, Copy)]
struct ShiftedPlane<'a> {
    plane: &'a [f32],
    rows: usize,
    width: usize,
    shift: (isize, isize),
}

/// The output positions `0..outs` along one axis whose source `out + shift` lies in `0..size`.
fn shifted_inside(shift: isize, size: usize, outs: usize) -> (usize, usize) {
    let lo = (-shift).clamp(0, outs as isize) as usize;
    let hi = (size as isize - shift).clamp(lo as isize, outs as isize) as usize;
    (lo, hi)
}

/// Fills `row` (the columns `pixels` of one tap row, `out_height` output rows of the source's
/// width) from `source`: output pixel `q` reads source value `q + dy W + dx`, so the row is
/// the plane shifted, copied in one piece; then zeros where the tap reads outside the plane
/// (the copy put a neighbouring row's edge value there, or nothing).
fn shifted_copy(
    source: ShiftedPlane<'_>,
    out_height: usize,
    pixels: Range<usize>,
    row: &mut [f32],
) {
    let ShiftedPlane {
        plane,
        rows,
        width,
        shift: (dy, dx),
    } = source;
    let (start, width) = (pixels.start, width.max(1));
    // Pixels `inside` read a row of the plane; the others only the padding.
    let (top, bottom) = shifted_inside(dy, rows, out_height);
    let inside = (top * width).clamp(start, pixels.end)..(bottom * width).clamp(start, pixels.end);
    row[..inside.start - start].fill(0.0);
    row[inside.end - start..].fill(0.0);
    // Source `pixel + delta`, clipped to the plane's `rows * width` values.
    let delta = dy * width as isize + dx;
    let plane_end = (rows * width).min(plane.len()) as isize;
    let first = (inside.start as isize).max(-delta);
    let last = (inside.end as isize).min(plane_end - delta);
    if first < last {
        let (first, last) = (first as usize, last as usize);
        let from = (first as isize + delta) as usize;
        row[first - start..last - start].copy_from_slice(&plane[from..from + (last - first)]);
    }
    let (lo, hi) = shifted_inside(dx, width, width);
    let inside_row = &mut row[inside.start - start..inside.end - start];
    zero_padding_columns(inside_row, inside, width, (lo, hi));
}

/// Whether `g`'s columns can be copied from its input's phase planes ([`split_phases`]):
/// stride 2 and an even input width with an output half as wide, so that every phase plane
/// is as wide as the output and each tap row is one of them shifted.
pub(super) fn takes_phases(g: &Conv2dGeometry) -> bool {
    g.params.stride == 2 && g.width % 2 == 0 && g.out_width * 2 == g.width
}

/// Values of the phase planes of `channels` input planes of `g` ([`split_phases`]), or 0
/// when `g` does not take them.
pub(super) fn phases_len(g: &Conv2dGeometry, channels: usize) -> usize {
    if takes_phases(g) {
        channels * 4 * phase_plane_len(g)
    } else {
        0
    }
}

/// Values of one phase plane: `ceil(H / 2)` rows of `W / 2`.
fn phase_plane_len(g: &Conv2dGeometry) -> usize {
    g.height.div_ceil(2) * (g.width / 2)
}

/// Splits every input plane of `planes` (`C x H x W`) into its four phase planes
/// (`(by, bx)` in row-major order, each `ceil(H / 2) x W / 2`, into `phases`, 4 per channel):
/// phase `(by, bx)` holds the pixels `(2 i + by, 2 j + bx)`. The odd rows' phases of an odd
/// height keep a last row of zeros that no tap reads.
fn split_phases(g: &Conv2dGeometry, planes: &[f32], phases: &mut [f32]) {
    let (width, half_width) = (g.width, g.width / 2);
    let phase_len = phase_plane_len(g);
    let channels = planes.chunks_exact(g.in_pixels().max(1));
    for (plane, four) in channels.zip(phases.chunks_exact_mut((4 * phase_len).max(1))) {
        for (phase, out) in four.chunks_exact_mut(phase_len.max(1)).enumerate() {
            let (by, bx) = (phase / 2, phase % 2);
            for (i, out_row) in out.chunks_exact_mut(half_width.max(1)).enumerate() {
                let y = 2 * i + by;
                if y < g.height {
                    gather_every::<2>(&plane[y * width + bx..(y + 1) * width], out_row);
                } else {
                    out_row.fill(0.0);
                }
            }
        }
    }
}

/// [`im2col_pixels`] from an image's phase planes ([`split_phases`], `g` [`takes_phases`]):
/// tap `(ky, kx)` reads input `(2 oy + ty, 2 ox + tx)` (`t = k - p`), which is phase
/// `(ty mod 2, tx mod 2)` at `(oy + floor(ty / 2), ox + floor(tx / 2))`, one shifted copy.
fn im2col_pixels_from_phases(
    g: &Conv2dGeometry,
    phases: &[f32],
    pixels: Range<usize>,
    cols: &mut [f32],
) {
    let phase_len = phase_plane_len(g);
    let padding = g.params.padding as isize;
    let plane_cols = (g.kernel_area() * pixels.len()).max(1);
    let channels = phases.chunks_exact((4 * phase_len).max(1));
    for (four, plane_cols) in channels.zip(cols.chunks_exact_mut(plane_cols)) {
        let mut rows = plane_cols.chunks_exact_mut(pixels.len().max(1));
        for ky in 0..g.kernel_h {
            let ty = ky as isize - padding;
            let by = ty.rem_euclid(2) as usize;
            for kx in 0..g.kernel_w {
                let tx = kx as isize - padding;
                let bx = tx.rem_euclid(2) as usize;
                let source = ShiftedPlane {
                    plane: &four[(2 * by + bx) * phase_len..][..phase_len],
                    rows: (g.height - by).div_ceil(2),
                    width: g.out_width,
                    shift: (ty.div_euclid(2), tx.div_euclid(2)),
                };
                let row = rows.next().expect("cols holds kh * kw rows");
                shifted_copy(source, g.out_height, pixels.clone(), row);
            }
        }
    }
}

/// Where the blocked path's im2col of one image's planes reads from: the planes themselves,
/// or, when `g` [`takes_phases`], their phase planes, split once per image so that every run
/// of columns after that is shifted copies.
#[derive(Clone, Copy)]
pub(super) enum ImageSource<'a> {
    Planes(&'a [f32]),
    Phases(&'a [f32]),
}

impl<'a> ImageSource<'a> {
    /// The source of `planes` (`C x H x W`), splitting them into `phases` (which holds
    /// [`phases_len`] values for `C` channels) when `g` takes phases.
    pub(super) fn new(g: &Conv2dGeometry, planes: &'a [f32], phases: &'a mut [f32]) -> Self {
        if takes_phases(g) {
            split_phases(g, planes, phases);
            ImageSource::Phases(phases)
        } else {
            ImageSource::Planes(planes)
        }
    }

    /// Fills `cols` with the columns `pixels` of the planes' column matrix ([`im2col_pixels`]).
    pub(super) fn im2col(self, g: &Conv2dGeometry, pixels: Range<usize>, cols: &mut [f32]) {
        match self {
            ImageSource::Planes(planes) => im2col_pixels(g, planes, pixels, cols),
            ImageSource::Phases(phases) => im2col_pixels_from_phases(g, phases, pixels, cols),
        }
    }
}

/// The most values (`(H + 2 p) x (W + 2 p)`: 32 x 32, a 30x30 plane padded by 1) of a padded
/// plane: the one [`col2im_plane`] accumulates on the stack (bigger stride-1 planes go row by
/// row), and a [`PaddedPlane`]'s buffer. Planes of at most [`SMALL_PADDED_PLANE`] values get
/// a col2im stack array of that size, so zeroing it stays cheap.
pub(super) const PADDED_PLANE_MAX: usize = 32 * 32;
const SMALL_PADDED_PLANE: usize = 144;

/// Sets `plane` (`H x W`) to the sum of every column value of `cols` that came from each
/// pixel, adding in the fixed order (ky, kx, oy, ox).
pub(super) fn col2im_plane(geometry: &Conv2dGeometry, cols: &[f32], plane: &mut [f32]) {
    let g = geometry;
    let padded_len = (g.height + 2 * g.params.padding) * (g.width + 2 * g.params.padding);
    if g.params.stride == 1 && padded_len <= SMALL_PADDED_PLANE {
        let mut padded = [0.0f32; SMALL_PADDED_PLANE];
        return col2im_padded(g, cols, &mut padded[..padded_len], plane);
    }
    if g.params.stride == 1 && padded_len <= PADDED_PLANE_MAX {
        let mut padded = [0.0f32; PADDED_PLANE_MAX];
        return col2im_padded(g, cols, &mut padded[..padded_len], plane);
    }
    col2im_plane_by_rows(g, cols, plane);
}

/// Stride-1 col2im through `padded`, a zeroed `(H + 2 p) x (W + 2 p)` plane in which every
/// tap's rows lie whole: tap `(ky, kx)` adds its output row `oy` at padded row `oy + ky`,
/// column `kx`, with no clipping; then the interior is copied out. Each pixel still receives
/// its values in (ky, kx) order (one per tap at stride 1), so the sums are those of
/// [`col2im_plane_by_rows`] bit for bit.
fn col2im_padded(g: &Conv2dGeometry, cols: &[f32], padded: &mut [f32], plane: &mut [f32]) {
    let (padding, out_width) = (g.params.padding, g.out_width.max(1));
    let padded_width = g.width + 2 * padding;
    let rows = cols.chunks_exact(g.out_pixels().max(1));
    for ((ky, kx), tap) in (0..g.kernel_h)
        .flat_map(|ky| (0..g.kernel_w).map(move |kx| (ky, kx)))
        .zip(rows)
    {
        let targets = &mut padded[ky * padded_width + kx..];
        match out_width {
            4 => add_tap_rows::<4>(tap, targets, padded_width),
            8 => add_tap_rows::<8>(tap, targets, padded_width),
            16 => add_tap_rows::<16>(tap, targets, padded_width),
            _ => add_tap_rows_of_width(tap, targets, padded_width, out_width),
        }
    }
    let interior = padded[padding * padded_width..].chunks(padded_width);
    for (in_row, padded_row) in plane.chunks_exact_mut(g.width.max(1)).zip(interior) {
        in_row.copy_from_slice(&padded_row[padding..padding + g.width]);
    }
}

/// Adds the rows of `W` values of `tap` onto `targets`, one row every `padded_width` values;
/// `W` known at compile time, so a row is a few vector adds with no loop.
fn add_tap_rows<const W: usize>(tap: &[f32], targets: &mut [f32], padded_width: usize) {
    for (out_row, target) in tap.chunks_exact(W).zip(targets.chunks_mut(padded_width)) {
        let target: &mut [f32; W] = (&mut target[..W]).try_into().expect("a whole row");
        let out_row: &[f32; W] = out_row.try_into().expect("a whole row");
        for (v, &d) in target.iter_mut().zip(out_row) {
            *v += d;
        }
    }
}

/// [`add_tap_rows`] for a width known only at run time.
fn add_tap_rows_of_width(tap: &[f32], targets: &mut [f32], padded_width: usize, width: usize) {
    for (out_row, target) in tap
        .chunks_exact(width)
        .zip(targets.chunks_mut(padded_width))
    {
        let target = &mut target[..width];
        target.iter_mut().zip(out_row).for_each(|(v, &d)| *v += d);
    }
}

/// A stride-1 convolution's input plane copied inside a border of `padding` zeros: tap
/// `(ky, kx)` of output pixel `(oy, ox)` is then its value `(oy + ky, ox + kx)`, so each output
/// row of a tap row is one contiguous copy, with no clipping. Used on every stride-1 plane
/// whose padded size is at most [`PADDED_PLANE_MAX`] values, in the place of
/// [`im2col_plane_strided`]'s per-row clipping and zeroing, which costs more than the copy on
/// rows this short; outputs 4 or 8 wide get fixed-size row copies, other widths one slice
/// copy a row.
pub(super) struct PaddedPlane<'a> {
    values: &'a mut [f32],
    width: usize,
}

impl<'a> PaddedPlane<'a> {
    /// The zeroed plane for `g`, when it has stride 1 and fits in `buffer`.
    pub(super) fn new(g: &Conv2dGeometry, buffer: &'a mut [f32]) -> Option<Self> {
        let pad = g.params.padding;
        let (width, height) = (g.width + 2 * pad, g.height + 2 * pad);
        if g.params.stride != 1 || width * height > buffer.len() {
            return None;
        }
        let values = &mut buffer[..width * height];
        values.fill(0.0);
        Some(PaddedPlane { values, width })
    }

    /// The tap rows of `plane`'s column matrix into `cols`' rows, `stride` apart (see
    /// [`im2col_plane_strided`]): the plane copied inside the border (which stays zero), then
    /// each tap row's output rows copied out of it.
    pub(super) fn im2col(
        &mut self,
        g: &Conv2dGeometry,
        plane: &[f32],
        (cols, stride): (&mut [f32], usize),
    ) {
        let (pad, width, pixels) = (g.params.padding, self.width, g.out_pixels());
        let in_rows = plane.chunks_exact(g.width.max(1));
        for (y, row) in in_rows.enumerate() {
            self.values[(y + pad) * width + pad..][..row.len()].copy_from_slice(row);
        }
        let taps = (0..g.kernel_h).flat_map(|ky| (0..g.kernel_w).map(move |kx| (ky, kx)));
        for ((ky, kx), row) in taps.zip(cols.chunks_mut(stride.max(1))) {
            let source = &self.values[ky * width + kx..];
            match g.out_width {
                4 => copy_shifted_rows::<4>(source, width, &mut row[..pixels]),
                8 => copy_shifted_rows::<8>(source, width, &mut row[..pixels]),
                _ => copy_shifted_rows_of(g.out_width, source, width, &mut row[..pixels]),
            }
        }
    }
}

/// `out`'s rows of `N` values, row `r` from `source[r * width..]`: fixed-size copies, no
/// call per row.
fn copy_shifted_rows<const N: usize>(source: &[f32], width: usize, out: &mut [f32]) {
    for (r, out_row) in out.chunks_exact_mut(N).enumerate() {
        let from: &[f32; N] = source[r * width..][..N].try_into().expect("N values");
        let to: &mut [f32; N] = out_row.try_into().expect("N values");
        *to = *from;
    }
}

/// [`copy_shifted_rows`] for rows of any length `n`.
fn copy_shifted_rows_of(n: usize, source: &[f32], width: usize, out: &mut [f32]) {
    for (r, out_row) in out.chunks_exact_mut(n.max(1)).enumerate() {
        out_row.copy_from_slice(&source[r * width..][..out_row.len()]);
    }
}

/// [`col2im_plane`] output row by output row, clipping each row to the plane.
fn col2im_plane_by_rows(geometry: &Conv2dGeometry, cols: &[f32], plane: &mut [f32]) {
    let g = geometry;
    let (stride, padding) = (g.params.stride, g.params.padding);
    plane.fill(0.0);
    let mut rows = cols.chunks_exact(g.out_pixels());
    for ky in 0..g.kernel_h {
        for kx in 0..g.kernel_w {
            let row = rows.next().expect("cols holds kh * kw rows");
            let (lo, hi) = valid_outputs(kx, stride, padding, g.width, g.out_width);
            if lo >= hi {
                continue;
            }
            let first = lo * stride + kx - padding;
            for (oy, out_row) in row.chunks_exact(g.out_width).enumerate() {
                let Some(iy) = source_index(oy, ky, stride, padding, g.height) else {
                    continue;
                };
                let in_row = &mut plane[iy * g.width..(iy + 1) * g.width];
                let inside = &out_row[lo..hi];
                if stride == 1 {
                    let targets = &mut in_row[first..first + inside.len()];
                    targets.iter_mut().zip(inside).for_each(|(v, &d)| *v += d);
                } else {
                    let targets = in_row[first..].iter_mut().step_by(stride);
                    targets.zip(inside).for_each(|(v, &d)| *v += d);
                }
            }
        }
    }
}

/// Fills `cols` with the column matrices of every image of `input`, image after image: one
/// `parallel_for` item per (image, channel) plane. Every value of `cols` is written.
pub(super) fn im2col_batch_into(
    pool: &dyn ThreadPool,
    geometry: &Conv2dGeometry,
    input: &[f32],
    cols: &mut [f32],
) {
    let g = geometry;
    let plane_cols = g.kernel_area() * g.out_pixels();
    debug_assert_eq!(cols.len(), g.batch * g.cols_per_image());
    let cost = item_cost(
        plane_cols as f64,
        plane_cols as f64,
        0.0,
        VECTOR_FLOPS_PER_CYCLE,
    );
    let in_plane = g.in_pixels();
    for_each_chunk(pool, cols, plane_cols, cost, |plane_index, plane_cols| {
        let plane = &input[plane_index * in_plane..(plane_index + 1) * in_plane];
        im2col_plane(g, plane, plane_cols);
    });
}

/// Fills `cols_b` (`C_in kh kw` rows of `N H_out W_out`) with every image's column matrix side
/// by side: row `r` holds each image `n`'s row `r` at offset `n H_out W_out`. One `parallel_for`
/// item per input channel (its `kh kw` rows), writing every image's taps straight into place.
pub(super) fn im2col_side_by_side(
    pool: &dyn ThreadPool,
    geometry: &Conv2dGeometry,
    input: &[f32],
    cols_b: &mut [f32],
) {
    let g = geometry;
    let (pixels, in_plane) = (g.out_pixels(), g.in_pixels());
    let wide = g.batch * pixels;
    let rows_len = g.kernel_area() * wide;
    debug_assert_eq!(cols_b.len(), g.in_channels * rows_len);
    let cost = item_cost(
        rows_len as f64,
        rows_len as f64,
        0.0,
        VECTOR_FLOPS_PER_CYCLE,
    );
    for_each_chunk(pool, cols_b, rows_len.max(1), cost, |channel, rows| {
        for image in 0..g.batch {
            let plane = &input[(image * g.in_channels + channel) * in_plane..][..in_plane];
            im2col_plane_pixels(g, plane, 0..pixels, (&mut rows[image * pixels..], wide));
        }
    });
}

/// Every image's column matrix, image after image: `input` itself for a pointwise
/// convolution, else im2col of it written into `unrolled` ([`Conv2dGeometry::unrolled_len`]
/// values).
pub(super) fn columns<'a>(
    pool: &dyn ThreadPool,
    geometry: &Conv2dGeometry,
    input: &'a [f32],
    unrolled: &'a mut [f32],
) -> &'a [f32] {
    if geometry.is_pointwise() {
        input
    } else {
        im2col_batch_into(pool, geometry, input, unrolled);
        unrolled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::Conv2dParams;

    fn geometry(size: usize, kernel: usize, stride: usize, padding: usize) -> Conv2dGeometry {
        let params = Conv2dParams { stride, padding };
        Conv2dGeometry::new(&[1, 1, size, size], &[1, 1, kernel, kernel], params).unwrap()
    }

    #[test]
    fn im2col_of_a_padded_3x3_reads_zeros_at_the_border() {
        let g = geometry(3, 3, 1, 1);
        let plane: Vec<f32> = (1..=9).map(|v| v as f32).collect();
        let mut cols = vec![f32::NAN; 9 * 9];
        im2col_plane(&g, &plane, &mut cols);
        // Row (ky=1, kx=1) is the centre tap: the image itself.
        assert_eq!(&cols[4 * 9..5 * 9], plane.as_slice());
        // Row (0, 0) shifts down-right: output (0, 0) reads the padding, (1, 1) reads pixel 1.
        assert_eq!(cols[0], 0.0);
        assert_eq!(cols[4], 1.0);
    }

    #[test]
    fn strided_im2col_writes_the_same_rows_and_nothing_between() {
        // Same width (shifted rows), strided, pointwise, and stride 1 into a narrower output
        // (6 wide -> 4: row by row).
        let cases = [(4, 3, 1, 1), (7, 3, 2, 1), (5, 1, 1, 0), (6, 3, 1, 0)];
        for (size, kernel, stride, padding) in cases {
            let g = geometry(size, kernel, stride, padding);
            let narrower = stride == 1 && g.out_width < size;
            assert_eq!(narrower, (size, padding) == (6, 0), "{size} {kernel}");
            let (pixels, taps) = (g.out_pixels(), kernel * kernel);
            let plane: Vec<f32> = (0..size * size).map(|v| v as f32 + 1.0).collect();
            let mut dense = vec![f32::NAN; taps * pixels];
            im2col_plane(&g, &plane, &mut dense);
            let row_stride = pixels + 5;
            let mut strided = vec![-7.0; (taps - 1) * row_stride + pixels];
            im2col_plane_strided(&g, &plane, &mut strided, row_stride);
            for tap in 0..taps {
                let row = &strided[tap * row_stride..];
                assert_eq!(
                    row[..pixels],
                    dense[tap * pixels..][..pixels],
                    "{size} {kernel} stride {stride} pad {padding}"
                );
                if tap + 1 < taps {
                    assert!(row[pixels..row_stride].iter().all(|&v| v == -7.0));
                }
            }
        }
    }

    #[test]
    fn im2col_matches_the_definition_for_strides_and_paddings() {
        for (size, kernel, stride, padding) in
            [(7, 3, 2, 1), (6, 7, 2, 3), (5, 1, 1, 0), (9, 2, 3, 1)]
        {
            let g = geometry(size, kernel, stride, padding);
            let plane: Vec<f32> = (0..size * size).map(|v| v as f32 + 1.0).collect();
            let mut cols = vec![f32::NAN; kernel * kernel * g.out_pixels()];
            im2col_plane(&g, &plane, &mut cols);
            let mut expected = cols.iter();
            for ky in 0..kernel {
                for kx in 0..kernel {
                    for oy in 0..g.out_height {
                        for ox in 0..g.out_width {
                            let iy = source_index(oy, ky, stride, padding, size);
                            let ix = source_index(ox, kx, stride, padding, size);
                            let want = iy.zip(ix).map_or(0.0, |(iy, ix)| plane[iy * size + ix]);
                            assert_eq!(*expected.next().unwrap(), want, "{ky} {kx} {oy} {ox}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn im2col_of_any_pixel_range_is_that_range_of_the_columns() {
        // Same-width stride-1 geometries take the shifted copy, the others go row by row;
        // both must give the full matrix's columns for runs that start and end mid-row.
        for (size, kernel, stride, padding) in
            [(7, 3, 1, 1), (6, 5, 1, 2), (5, 3, 1, 0), (7, 3, 2, 1)]
        {
            let params = Conv2dParams { stride, padding };
            let g =
                Conv2dGeometry::new(&[1, 2, size, size], &[1, 2, kernel, kernel], params).unwrap();
            let image: Vec<f32> = (0..2 * size * size).map(|v| v as f32 + 1.0).collect();
            let (pixels, patch) = (g.out_pixels(), g.patch_len());
            let mut whole = vec![f32::NAN; patch * pixels];
            im2col_pixels(&g, &image, 0..pixels, &mut whole);
            for range in [
                0..pixels,
                3..pixels - 2,
                1..2,
                g.out_width..(2 * g.out_width + 1).min(pixels),
            ] {
                let mut part = vec![f32::NAN; patch * range.len()];
                im2col_pixels(&g, &image, range.clone(), &mut part);
                for (row, values) in part.chunks_exact(range.len()).enumerate() {
                    let want = &whole[row * pixels + range.start..row * pixels + range.end];
                    assert_eq!(values, want, "{size} {kernel} {stride} {padding} {range:?}");
                }
            }
            let mut by_planes = vec![f32::NAN; patch * pixels];
            for (plane, cols) in image
                .chunks_exact(size * size)
                .zip(by_planes.chunks_exact_mut(patch / 2 * pixels))
            {
                im2col_plane(&g, plane, cols);
            }
            assert_eq!(by_planes, whole);
        }
    }

    #[test]
    fn shifted_and_row_by_row_tap_rows_agree() {
        for (height, width, kernel, padding) in [
            (5, 4, (3, 3), 1),
            (3, 6, (1, 3), 1),
            (4, 4, (5, 5), 2),
            (2, 3, (3, 3), 1),
        ] {
            let params = Conv2dParams { stride: 1, padding };
            let weight = [1, 1, kernel.0, kernel.1];
            let g = Conv2dGeometry::new(&[1, 1, height, width], &weight, params).unwrap();
            assert_eq!(g.out_width, width);
            let plane: Vec<f32> = (0..height * width).map(|v| v as f32 + 1.0).collect();
            let pixels = g.out_pixels();
            for range in [0..pixels, 1..pixels - 1, width - 1..width + 2] {
                for tap in [(0, 0), (kernel.0 - 1, kernel.1 - 1), (kernel.0 / 2, 0)] {
                    let mut shifted = vec![f32::NAN; range.len()];
                    let mut by_rows = vec![f32::NAN; range.len()];
                    shifted_tap_row(&g, &plane, tap, range.clone(), &mut shifted);
                    tap_row_by_output_rows(&g, &plane, tap, range.clone(), &mut by_rows);
                    assert_eq!(
                        shifted, by_rows,
                        "{height}x{width} {kernel:?} {range:?} {tap:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn columns_from_phase_planes_match_the_gather() {
        // Stride 2, even widths with outputs half as wide: the stem's 7x7 pad 3, a 3x3 pad 1
        // on an odd height, a 1x1 pad 0, a 5x5 pad 2 on 2 channels; whole planes and runs
        // that start and end mid-row.
        for (channels, height, width, kernel, padding) in [
            (1, 16, 16, 7, 3),
            (1, 7, 10, 3, 1),
            (1, 9, 8, 1, 0),
            (2, 11, 12, 5, 2),
        ] {
            let params = Conv2dParams { stride: 2, padding };
            let weight = [1, channels, kernel, kernel];
            let g = Conv2dGeometry::new(&[1, channels, height, width], &weight, params).unwrap();
            assert!(takes_phases(&g), "{height}x{width} {kernel}");
            let planes: Vec<f32> = (0..channels * height * width)
                .map(|v| v as f32 + 1.0)
                .collect();
            let mut phases = vec![f32::NAN; phases_len(&g, channels)];
            let source = ImageSource::new(&g, &planes, &mut phases);
            let pixels = g.out_pixels();
            for range in [
                0..pixels,
                1..pixels - 1,
                g.out_width - 1..2 * g.out_width + 1,
            ] {
                let len = channels * kernel * kernel * range.len();
                let (mut shifted, mut gathered) = (vec![f32::NAN; len], vec![f32::NAN; len]);
                source.im2col(&g, range.clone(), &mut shifted);
                im2col_pixels(&g, &planes, range.clone(), &mut gathered);
                assert_eq!(shifted, gathered, "{height}x{width} {kernel} {range:?}");
            }
        }
        let odd = Conv2dGeometry::new(
            &[1, 1, 8, 9],
            &[1, 1, 3, 3],
            Conv2dParams {
                stride: 2,
                padding: 1,
            },
        );
        assert!(!takes_phases(&odd.unwrap()));
    }

    #[test]
    fn col2im_is_the_adjoint_of_im2col() {
        // <im2col(x), c> == <x, col2im(c)> for any x and c.
        for (size, kernel, stride, padding) in
            [(7, 3, 2, 1), (6, 7, 2, 3), (8, 3, 1, 1), (9, 2, 3, 1)]
        {
            let g = geometry(size, kernel, stride, padding);
            let len = kernel * kernel * g.out_pixels();
            let x: Vec<f32> = (0..size * size).map(|v| (v % 7) as f32 - 3.0).collect();
            let c: Vec<f32> = (0..len).map(|v| (v % 5) as f32 - 2.0).collect();
            let mut cols = vec![0.0; len];
            im2col_plane(&g, &x, &mut cols);
            let mut plane = vec![f32::NAN; size * size];
            col2im_plane(&g, &c, &mut plane);
            let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(a, b)| a * b).sum::<f32>();
            assert_eq!(
                dot(&cols, &c),
                dot(&x, &plane),
                "{size} {kernel} {stride} {padding}"
            );
        }
    }

    #[test]
    fn col2im_through_a_padded_plane_matches_the_row_by_row_sums_bitwise() {
        // Stride-1 geometries take the padded plane; its sums must be the clipped rows' bits.
        for (height, width, kernel, padding) in [
            (8, 8, (3, 3), 1),
            (4, 4, (3, 3), 1),
            (5, 7, (3, 3), 0),
            (6, 5, (5, 5), 2),
            (7, 9, (3, 3), 2),
            (9, 6, (5, 3), 1),
            (4, 16, (3, 3), 1),
        ] {
            let params = Conv2dParams { stride: 1, padding };
            let weight = [1, 1, kernel.0, kernel.1];
            let g = Conv2dGeometry::new(&[1, 1, height, width], &weight, params).unwrap();
            let len = g.kernel_area() * g.out_pixels();
            let cols: Vec<f32> = (0..len).map(|v| ((v * 37 % 101) as f32).sin()).collect();
            let mut padded_sums = vec![f32::NAN; height * width];
            let mut row_sums = vec![f32::NAN; height * width];
            col2im_plane(&g, &cols, &mut padded_sums);
            col2im_plane_by_rows(&g, &cols, &mut row_sums);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&padded_sums),
                bits(&row_sums),
                "{height}x{width} {kernel:?} {padding}"
            );
        }
    }

    #[test]
    fn col2im_counts_how_often_each_pixel_is_read() {
        let g = geometry(4, 3, 1, 0);
        let cols = vec![1.0; 9 * 4];
        let mut plane = vec![f32::NAN; 16];
        col2im_plane(&g, &cols, &mut plane);
        // A 3x3 kernel over a 4x4 image: corners are read once, the centre four times four.
        assert_eq!(plane[0], 1.0);
        assert_eq!(plane[5], 4.0);
        assert_eq!(plane[1], 2.0);
    }
}
