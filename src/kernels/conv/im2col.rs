//! im2col and col2im for one (image, channel) plane, and im2col of a whole batch.
//!
//! A plane's columns are `kh kw` rows (kernel row, kernel column) of `H_out W_out` values: row
//! `(ky, kx)`, column `(oy, ox)` holds input pixel `(oy s + ky - p, ox s + kx - p)`, or 0 in
//! the padding. Stacking the planes of an image channel by channel gives that image's
//! `(C_in kh kw) x (H_out W_out)` column matrix, whose row order matches the weight's.
#![forbid(unsafe_code)]

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
    let g = geometry;
    let (stride, padding) = (g.params.stride, g.params.padding);
    let mut rows = cols.chunks_exact_mut(g.out_pixels());
    for ky in 0..g.kernel_h {
        for kx in 0..g.kernel_w {
            let row = rows.next().expect("cols holds kh * kw rows");
            let (lo, hi) = valid_outputs(kx, stride, padding, g.width, g.out_width);
            for (oy, out_row) in row.chunks_exact_mut(g.out_width).enumerate() {
                let Some(iy) = source_index(oy, ky, stride, padding, g.height) else {
                    out_row.fill(0.0);
                    continue;
                };
                let in_row = &plane[iy * g.width..(iy + 1) * g.width];
                out_row[..lo].fill(0.0);
                out_row[hi..].fill(0.0);
                if lo < hi {
                    // ix = ox * stride + kx - padding, increasing by `stride` from lo's.
                    let first = lo * stride + kx - padding;
                    let inside = &mut out_row[lo..hi];
                    if stride == 1 {
                        inside.copy_from_slice(&in_row[first..first + inside.len()]);
                    } else {
                        let sources = in_row[first..].iter().step_by(stride);
                        inside
                            .iter_mut()
                            .zip(sources)
                            .for_each(|(out, &v)| *out = v);
                    }
                }
            }
        }
    }
}

/// Sets `plane` (`H x W`) to the sum of every column value of `cols` that came from each
/// pixel, adding in the fixed order (ky, kx, oy, ox).
pub(super) fn col2im_plane(geometry: &Conv2dGeometry, cols: &[f32], plane: &mut [f32]) {
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
