//! Pooling over NCHW: windowed [`max_pool`] and [`avg_pool`], and [`global_avg_pool`] (NCHW to
//! `N x C`), with the gradients of max and global average pooling.
//!
//! Max pooling uses square windows with a stride and padding (padding never wins the max:
//! it counts as minus infinity). Windowed average pooling averages the pixels of each window
//! that lie inside the input (padding is not counted: cuDNN's
//! `CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING`); a window as large as the input is a global
//! average. Its backward recomputes each window's maximum from the
//! forward input (the first maximum in row-major window order, as cuDNN does) and routes the
//! gradient there, so no index tensor has to be kept between the passes.
//!
//! # Parallelism and determinism
//! Each (image, channel) plane of the output (forward) or of the input gradient (backward) is
//! made whole by one `parallel_for` item, or each image for [`global_avg_pool`]. Small planes
//! are made several to an item: consecutive planes, as many as fit in about 4096 input values,
//! leaving at least 16 items (`planes_per_item`); one item per 16-pixel plane costs more in
//! `parallel_for`'s ranges than the plane's work. Each plane adds in a fixed order whatever
//! item it is in, so nothing depends on the thread count or the grouping.
//!
//! A window as large as the input (resnet-like's global average pool, `avg_pool` of 4x4
//! planes) makes one mean per plane, summed as `Window::mean` sums (the same bits) but
//! eight planes side by side (`means_of_planes`), since one plane's sum is a chain of
//! dependent adds the core would wait on window after window; its gradient fills each plane with
//! the general path's `0 + dy / count`. The measurements behind this file's special cases:
//! `bench/KERNELS.md`.
//!
//! # Inside a plane
//! 2x2 windows at stride 2 without padding over an even-sized plane (ResNet-D's downsampling)
//! tile it, every window whole, so they get loops of their own (`mean_of_pairs`,
//! `share_over_pairs`): one flat loop per output row that vectorizes, and a backward pass that
//! writes each input pixel once instead of zero-filling the plane and adding onto it. They
//! compute the general path's expressions in its order, so the bits are the same.
//!
//! 3x3 windows at stride 2 with padding 1 (the ResNet stem) reduce each input row's column
//! triples and then the rows with an associative step (`keep_greater`), in flat loops with
//! no bounds checks, and restore the scan's one non-associative case (a NaN first tap) at the
//! end; the backward takes each interior window's argmax as its first tap equal to that
//! maximum, found with selects, and adds in the general path's order. Same bits (tested on
//! data with ties, -0 and NaN). A plane with no NaN in it (one vectorized pass says so) takes the
//! plain step `value > best ? value : best` instead (a `maxps`, where `keep_greater`'s NaN
//! test costs an unordered compare and a blend in SSE2) and has no NaN first tap to restore;
//! a plane with one keeps the steps above, so the bits are the same either way. The argmax
//! taps are `u32` plane indices (four to a vector instead of two).
//!
//! Other windows are walked output row by output row; a window's in-bounds rows and columns come
//! from its row and column index with a multiply and a clamp (no division per pixel). A
//! window's maximum is a scan that takes a value only when it is greater than the best so far,
//! written as a select the compiler turns into `maxss` (no branch on the data). One window's
//! scan is one dependency chain of `window^2` `maxss`, so the forward pass goes tap by tap
//! across a row of outputs instead (`PoolGeometry::max_row`): every output still sees its
//! taps in row-major window order (the same bits), but neighbouring outputs' comparisons are
//! independent and overlap. The backward pass scans each window for its argmax one at a time
//! with a branch on the comparison: a tap-by-tap version needs the winning index picked by a
//! select, and LLVM turns that select back into a branch, which runs slower than this.
#![forbid(unsafe_code)]

use super::error::{expect_rank, expect_shape, KernelError};
use super::par::{for_each_chunk, item_cost, units_per_item, VECTOR_FLOPS_PER_CYCLE};
use super::tensor::Tensor;
use super::work::Work;
use crate::pool::parallel_for::Cost;
use crate::pool::ThreadPool;
use std::ops::Range;

/// Window size, stride and padding of a max pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PoolParams {
    /// Square window side.
    pub window: usize,
    /// Step between windows, at least 1.
    pub stride: usize,
    /// Padding on every side (never selected).
    pub padding: usize,
}

/// The sizes of one max-pool call.
///
/// ```
/// use enginetop::kernels::{PoolGeometry, PoolParams};
/// let params = PoolParams { window: 3, stride: 2, padding: 1 };
/// let geometry = PoolGeometry::new("max_pool", &[8, 64, 32, 32], params).unwrap();
/// assert_eq!(geometry.output_shape(), [8, 64, 16, 16]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolGeometry {
    /// Images, channels, height and width of the input.
    pub input: [usize; 4],
    /// Window, stride, padding.
    pub params: PoolParams,
    /// Output height.
    pub out_height: usize,
    /// Output width.
    pub(crate) out_width: usize,
}

impl PoolGeometry {
    /// The geometry of pooling an NCHW `input` with `params`.
    pub fn new(
        kernel: &'static str,
        input: &[usize],
        params: PoolParams,
    ) -> Result<Self, KernelError> {
        let dims: [usize; 4] = expect_rank(kernel, "input", input, "N, C, H, W")?;
        if params.stride == 0 || params.window == 0 {
            return Err(KernelError::shape(
                kernel,
                "window and stride must be at least 1",
            ));
        }
        if dims[2] == 0 || dims[3] == 0 {
            return Err(KernelError::shape(
                kernel,
                format!(
                    "the input is {}x{} pixels; give it at least one row and column",
                    dims[2], dims[3]
                ),
            ));
        }
        if params.padding >= params.window {
            return Err(KernelError::shape(
                kernel,
                format!(
                    "padding {} must be smaller than the window {}",
                    params.padding, params.window
                ),
            ));
        }
        let out = |size: usize| {
            let padded = size + 2 * params.padding;
            (padded >= params.window).then(|| (padded - params.window) / params.stride + 1)
        };
        let (Some(out_height), Some(out_width)) = (out(dims[2]), out(dims[3])) else {
            return Err(KernelError::shape(
                kernel,
                format!(
                    "a {0}x{0} window does not fit a {1}x{2} input; use a smaller window",
                    params.window, dims[2], dims[3]
                ),
            ));
        };
        Ok(PoolGeometry {
            input: dims,
            params,
            out_height,
            out_width,
        })
    }

    /// [`Self::new`] for a kernel's input shape, then a check that its pooled-side tensor
    /// (`(name, shape)`: the output, or `grad_output`) has [`Self::output_shape`].
    fn with_pooled_shape(
        kernel: &'static str,
        input: &[usize],
        params: PoolParams,
        (name, pooled): (&str, &[usize]),
    ) -> Result<Self, KernelError> {
        let geometry = Self::new(kernel, input, params)?;
        expect_shape(kernel, name, pooled, &geometry.output_shape())?;
        Ok(geometry)
    }

    /// The output's shape, NCHW.
    pub fn output_shape(&self) -> [usize; 4] {
        [
            self.input[0],
            self.input[1],
            self.out_height,
            self.out_width,
        ]
    }

    fn planes(&self) -> usize {
        self.input[0] * self.input[1]
    }

    fn in_pixels(&self) -> usize {
        self.input[2] * self.input[3]
    }

    fn out_pixels(&self) -> usize {
        self.out_height * self.out_width
    }

    /// One comparison per window tap; reads the input, writes the output.
    pub fn work(&self) -> Work {
        let window = (self.params.window * self.params.window) as f64;
        let outputs = (self.planes() * self.out_pixels()) as f64;
        let inputs = (self.planes() * self.in_pixels()) as f64;
        Work::new(outputs * window, inputs + outputs)
    }

    /// The in-bounds input rows (`axis` 0) or columns (`axis` 1) of output row or column `o`'s
    /// window, as a range `lo..hi` (never empty: padding is smaller than the window).
    fn span(&self, o: usize, axis: usize) -> (usize, usize) {
        let PoolParams {
            window,
            stride,
            padding,
        } = self.params;
        let size = self.input[2 + axis];
        let start = o * stride; // in padded coordinates
        let lo = start.saturating_sub(padding).min(size);
        let hi = (start + window).saturating_sub(padding).min(size);
        (lo, hi.max(lo))
    }

    /// The output columns whose windows lie wholly inside the input, as `lo..hi`.
    fn interior_columns(&self) -> (usize, usize) {
        let PoolParams {
            window,
            stride,
            padding,
        } = self.params;
        let width = self.input[3];
        let lo = padding.div_ceil(stride).min(self.out_width);
        let hi = (width + padding)
            .checked_sub(window)
            .map_or(0, |last_start| {
                (last_start / stride + 1).min(self.out_width)
            });
        (lo, hi.max(lo))
    }

    /// Output row `oy` of the window maxima of `plane` into `out_row`: each output's taps
    /// compared in row-major window order, as [`Window::max`] does (so the bits are the
    /// same), the interior columns tap by tap across the row (see [`Self::interior_taps`]).
    fn max_row(&self, scanned: ScannedPlane, oy: usize, out_row: &mut [f32]) {
        let (plane, width) = (scanned.values, self.input[3]);
        let (y0, y1) = self.span(oy, 0);
        let (lo, hi) = self.interior_columns();
        for ox in (0..lo).chain(hi..self.out_width) {
            let (x0, x1) = self.span(ox, 1);
            out_row[ox] = Window { y0, y1, x0, x1 }.max(plane, width);
        }
        let interior = &mut out_row[lo..hi];
        if self.is_three_by_two() {
            let first_column = self.span(lo, 1).0;
            let rows = y0..y1;
            return maxima_of_triples(scanned, width, rows, first_column, interior);
        }
        self.interior_taps(plane, oy, lo..hi, |slot, value, first| {
            interior[slot] = if first || value > interior[slot] {
                value
            } else {
                interior[slot]
            };
        });
    }

    /// Walks the taps of output row `oy`'s windows over the interior columns `columns` tap
    /// by tap: for each tap in row-major window order, `visit(slot, value, first)` for
    /// every column (`slot` counts from `columns.start`; `first` says it is the window's
    /// first tap). Each column sees its taps in the order a window-at-a-time scan does, but
    /// neighbouring columns' work is independent, so it overlaps instead of waiting on one
    /// dependency chain per window.
    fn interior_taps(
        &self,
        plane: &[f32],
        oy: usize,
        columns: Range<usize>,
        mut visit: impl FnMut(usize, f32, bool),
    ) {
        if columns.is_empty() {
            return;
        }
        let PoolParams { window, stride, .. } = self.params;
        let width = self.input[3];
        let (y0, y1) = self.span(oy, 0);
        let first_column = self.span(columns.start, 1).0;
        let taps = (y0..y1).flat_map(|iy| (0..window).map(move |kx| (iy, kx)));
        for (tap, (iy, kx)) in taps.enumerate() {
            let first = tap == 0;
            let start = iy * width + first_column + kx;
            let taps = plane[start..].iter().step_by(stride).take(columns.len());
            for (slot, &value) in taps.enumerate() {
                visit(slot, value, first);
            }
        }
    }

    /// Whether the windows are 3x3, stride 2, padding 1 (the ResNet stem's pool): their
    /// interior rows go through [`maxima_of_triples`].
    fn is_three_by_two(&self) -> bool {
        let three = PoolParams {
            window: 3,
            stride: 2,
            padding: 1,
        };
        self.params == three
    }

    /// [`max_pool_backward`] of one plane for 3x3 windows at stride 2 (`dx` zeroed): window
    /// by window in row-major order, as the general path, each output row's interior windows
    /// [`ARGMAX_BLOCK`] at a time, their maxima from [`maxima_of_triples`] and their argmax
    /// from [`first_equal_taps`] (branch-free), the edge windows through [`Window::argmax`].
    fn route_by_rows(&self, scanned: ScannedPlane, dy: &[f32], dx: &mut [f32]) {
        let (plane, width) = (scanned.values, self.input[3]);
        let (lo, hi) = self.interior_columns();
        for (oy, dy_row) in dy.chunks_exact(self.out_width).enumerate() {
            let (y0, y1) = self.span(oy, 0);
            let edge = |ox: usize, dx: &mut [f32]| {
                let (x0, x1) = self.span(ox, 1);
                dx[Window { y0, y1, x0, x1 }.argmax(plane, width)] += dy_row[ox];
            };
            (0..lo).for_each(|ox| edge(ox, dx));
            for start in (lo..hi).step_by(ARGMAX_BLOCK) {
                let end = (start + ARGMAX_BLOCK).min(hi);
                let first_column = self.span(start, 1).0;
                let mut maxima = [0.0f32; ARGMAX_BLOCK];
                let mut taps = [0u32; ARGMAX_BLOCK];
                let (maxima, taps) = (&mut maxima[..end - start], &mut taps[..end - start]);
                let rows = y0..y1;
                maxima_of_triples(scanned, width, rows, first_column, maxima);
                first_equal_taps(plane, width, y0..y1, first_column, maxima, taps);
                for (&tap, &dy) in taps.iter().zip(&dy_row[start..end]) {
                    dx[tap as usize] += dy;
                }
            }
            (hi..self.out_width).for_each(|ox| edge(ox, dx));
        }
    }

    /// Plane `index` (image and channel) of the NCHW `input`.
    fn plane<'a>(&self, input: &'a [f32], index: usize) -> &'a [f32] {
        &input[index * self.in_pixels()..(index + 1) * self.in_pixels()]
    }

    /// Plane `index` of a pooled-side tensor (`grad_output`).
    fn out_plane<'a>(&self, pooled: &'a [f32], index: usize) -> &'a [f32] {
        &pooled[index * self.out_pixels()..(index + 1) * self.out_pixels()]
    }

    /// Plane `index` of `input`, scanned for NaN where the windows take the row path that
    /// uses it (3x3 at stride 2).
    fn scanned_plane<'a>(&self, input: &'a [f32], index: usize) -> ScannedPlane<'a> {
        let values = self.plane(input, index);
        let nan_free = self.is_three_by_two() && is_nan_free(values);
        ScannedPlane { values, nan_free }
    }

    /// Whether the windows are 2x2, stride 2, no padding, over an even-sized input: they tile
    /// the plane, every window whole (4 pixels), so [`mean_of_pairs`] and [`share_over_pairs`]
    /// apply (ResNet-D's downsampling shortcut).
    fn tiles_by_two(&self) -> bool {
        let two = PoolParams {
            window: 2,
            stride: 2,
            padding: 0,
        };
        self.params == two && self.input[2] % 2 == 0 && self.input[3] % 2 == 0
    }

    /// Whether the one output pixel's window is the whole plane (a global average: `avg_pool`
    /// with a window as large as the input), so [`means_of_planes`] applies.
    fn is_global(&self) -> bool {
        let (height, width) = (self.input[2], self.input[3]);
        self.out_pixels() == 1 && self.span(0, 0) == (0, height) && self.span(0, 1) == (0, width)
    }

    /// Calls `f(pixel, window)` for every output pixel of a plane in row-major order, with
    /// its window's in-bounds rows and columns (no division per pixel).
    fn for_each_window(&self, mut f: impl FnMut(usize, Window)) {
        let mut pixel = 0;
        for oy in 0..self.out_height {
            let (y0, y1) = self.span(oy, 0);
            for ox in 0..self.out_width {
                let (x0, x1) = self.span(ox, 1);
                f(pixel, Window { y0, y1, x0, x1 });
                pixel += 1;
            }
        }
    }
}

/// The in-bounds input rows `y0..y1` and columns `x0..x1` of one output pixel's window.
#[derive(Clone, Copy, Debug)]
struct Window {
    y0: usize,
    y1: usize,
    x0: usize,
    x1: usize,
}

impl Window {
    /// In-bounds pixels of the window.
    fn count(&self) -> usize {
        (self.y1 - self.y0) * (self.x1 - self.x0)
    }

    /// The window's rows of `plane` (`width` wide), each cut to the window's columns.
    fn rows<'a>(
        &self,
        plane: &'a [f32],
        width: usize,
    ) -> impl DoubleEndedIterator<Item = &'a [f32]> + ExactSizeIterator {
        let (x0, x1) = (self.x0, self.x1);
        (self.y0..self.y1).map(move |iy| &plane[iy * width + x0..iy * width + x1])
    }

    /// The window's maximum in `plane`: a row-major scan that takes a value only when it is
    /// greater than the best so far (so the first maximum wins, and a NaN never replaces a
    /// number). The comparison is a select the compiler makes branch-free (`maxss`).
    fn max(&self, plane: &[f32], width: usize) -> f32 {
        let mut best = plane[self.y0 * width + self.x0];
        for row in self.rows(plane, width) {
            for &value in row {
                best = if value > best { value } else { best };
            }
        }
        best
    }

    /// The plane index of the window's (first) maximum: [`Window::max`]'s scan, keeping the
    /// index of the value it keeps.
    fn argmax(&self, plane: &[f32], width: usize) -> usize {
        let mut best = (self.y0 * width + self.x0, plane[self.y0 * width + self.x0]);
        for (iy, row) in (self.y0..self.y1).zip(self.rows(plane, width)) {
            for (ix, &value) in (self.x0..self.x1).zip(row) {
                if value > best.1 {
                    best = (iy * width + ix, value);
                }
            }
        }
        best.0
    }

    /// The window's mean over its in-bounds pixels, summed in `f64` row by row.
    fn mean(&self, plane: &[f32], width: usize) -> f32 {
        let mut sum = 0.0f64;
        for row in self.rows(plane, width) {
            sum += row.iter().map(|&v| f64::from(v)).sum::<f64>();
        }
        (sum / self.count().max(1) as f64) as f32
    }
}

/// `output` = the maximum of each window of `input`.
pub fn max_pool(
    pool: &dyn ThreadPool,
    input: &Tensor,
    params: PoolParams,
    output: &mut Tensor,
) -> Result<Work, KernelError> {
    let pooled = ("the output", &output.shape[..]);
    let geometry = PoolGeometry::with_pooled_shape("max_pool", &input.shape, params, pooled)?;
    let g = &geometry;
    for_each_plane(
        pool,
        g,
        &mut output.data,
        g.out_pixels(),
        |plane_index, out| {
            let plane = g.scanned_plane(&input.data, plane_index);
            for (oy, out_row) in out.chunks_exact_mut(g.out_width).enumerate() {
                g.max_row(plane, oy, out_row);
            }
        },
    );
    Ok(g.work())
}

/// `grad_input`: each window's `grad_output` added onto the position of its maximum in the
/// forward `input` (zero elsewhere).
pub fn max_pool_backward(
    pool: &dyn ThreadPool,
    input: &Tensor,
    grad_output: &Tensor,
    params: PoolParams,
    grad_input: &mut Tensor,
) -> Result<Work, KernelError> {
    const KERNEL: &str = "max_pool_backward";
    let pooled = ("grad_output", &grad_output.shape[..]);
    let geometry = PoolGeometry::with_pooled_shape(KERNEL, &input.shape, params, pooled)?;
    expect_shape(KERNEL, "grad_input", &grad_input.shape, &input.shape)?;
    let g = &geometry;
    // Routing by rows keeps its argmax taps as `u32` plane indices.
    let by_rows = g.is_three_by_two() && u32::try_from(g.in_pixels()).is_ok();
    for_each_plane(
        pool,
        g,
        &mut grad_input.data,
        g.in_pixels(),
        |plane_index, dx| {
            let plane = g.scanned_plane(&input.data, plane_index);
            let dy = g.out_plane(&grad_output.data, plane_index);
            dx.fill(0.0);
            if by_rows {
                return g.route_by_rows(plane, dy, dx);
            }
            let (plane, width) = (plane.values, g.input[3]);
            g.for_each_window(|pixel, window| dx[window.argmax(plane, width)] += dy[pixel]);
        },
    );
    Ok(g.work())
}

/// `output` = the mean of each window of `input` over the window's pixels inside the input
/// (padding is not counted).
///
/// ```
/// use enginetop::kernels::{avg_pool, PoolParams};
/// use enginetop::kernels::Tensor;
/// use enginetop::pool::{Pool, PoolKind, PoolOptions};
/// let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "doc")).unwrap();
/// let input = Tensor::from_vec(&[1, 1, 2, 4], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]).unwrap();
/// let mut output = Tensor::zeros(&[1, 1, 1, 2]);
/// let params = PoolParams { window: 2, stride: 2, padding: 0 };
/// avg_pool(pool.as_dyn(), &input, params, &mut output).unwrap();
/// assert_eq!(output.data, [3.5, 5.5]);
/// ```
pub fn avg_pool(
    pool: &dyn ThreadPool,
    input: &Tensor,
    params: PoolParams,
    output: &mut Tensor,
) -> Result<Work, KernelError> {
    let pooled = ("the output", &output.shape[..]);
    let geometry = PoolGeometry::with_pooled_shape("avg_pool", &input.shape, params, pooled)?;
    let g = &geometry;
    if g.is_global() {
        let pixels = g.in_pixels();
        for_each_plane_group(pool, g, &mut output.data, 1, |first, means| {
            let planes = &input.data[first * pixels..(first + means.len()) * pixels];
            means_of_planes(planes, g.input[3], means);
        });
        return Ok(g.work());
    }
    for_each_plane(
        pool,
        g,
        &mut output.data,
        g.out_pixels(),
        |plane_index, out| {
            let plane = g.plane(&input.data, plane_index);
            if g.tiles_by_two() {
                mean_of_pairs(plane, g.input[3], out);
            } else {
                g.for_each_window(|pixel, window| out[pixel] = window.mean(plane, g.input[3]));
            }
        },
    );
    Ok(g.work())
}

/// `grad_input`: each output pixel's gradient shared equally among the in-bounds input
/// pixels of its window (the gradient of [`avg_pool`]); `grad_input` (NCHW) gives the shape.
pub fn avg_pool_backward(
    pool: &dyn ThreadPool,
    grad_output: &Tensor,
    params: PoolParams,
    grad_input: &mut Tensor,
) -> Result<Work, KernelError> {
    const KERNEL: &str = "avg_pool_backward";
    let pooled = ("grad_output", &grad_output.shape[..]);
    let geometry = PoolGeometry::with_pooled_shape(KERNEL, &grad_input.shape, params, pooled)?;
    let g = &geometry;
    let width = g.input[3];
    for_each_plane(
        pool,
        g,
        &mut grad_input.data,
        g.in_pixels(),
        |plane_index, dx| {
            let dy = g.out_plane(&grad_output.data, plane_index);
            if g.tiles_by_two() {
                return share_over_pairs(dy, width, dx);
            }
            if g.is_global() {
                // Every pixel is in the one window: the general path's `0 + share`.
                return dx.fill(0.0 + dy[0] / g.in_pixels() as f32);
            }
            dx.fill(0.0);
            g.for_each_window(|pixel, window| {
                let share = dy[pixel] / window.count().max(1) as f32;
                for iy in window.y0..window.y1 {
                    dx[iy * width + window.x0..iy * width + window.x1]
                        .iter_mut()
                        .for_each(|value| *value += share);
                }
            });
        },
    );
    Ok(g.work())
}

/// The greater of `best` and `value`, keeping `best` on a tie (`-0` vs `0` too) and taking
/// `value` over a NaN `best`. Unlike [`Window::max`]'s step this is associative (the first
/// greatest number of a sequence, however grouped), so windows can be reduced row by row.
fn keep_greater(best: f32, value: f32) -> f32 {
    if value > best || best.is_nan() {
        value
    } else {
        best
    }
}

/// Output row maxima of 3x3 windows at stride 2 over input rows `rows` of `plane` (`width`
/// wide), window `k` covering columns `first_column + 2k ..= first_column + 2k + 2`, into
/// `out`. Each input row's column triples are reduced with [`keep_greater`] in one flat loop
/// that needs no bounds checks, then the rows are combined the same way. [`Window::max`]'s
/// scan gives the first greatest number unless its first tap is NaN, which it keeps; the last
/// pass restores that case, so the bits are the scan's.
///
/// A plane known to hold no NaN ([`ScannedPlane::nan_free`]) needs no [`keep_greater`]: it
/// is [`greater`] there (its NaN test is never true) and there is no NaN first tap to
/// restore, so the steps are one `maxps` each instead of a compare, an unordered compare and
/// a blend.
fn maxima_of_triples(
    ScannedPlane {
        values: plane,
        nan_free,
    }: ScannedPlane,
    width: usize,
    rows: Range<usize>,
    first_column: usize,
    out: &mut [f32],
) {
    let span = 2 * out.len() + 1;
    let row_at = |iy: usize| &plane[iy * width + first_column..][..span];
    if nan_free {
        return reduce_triples(rows.map(row_at), greater, out);
    }
    reduce_triples(rows.clone().map(row_at), keep_greater, out);
    let top = row_at(rows.start);
    for (out, pair) in out.iter_mut().zip(top.chunks_exact(2)) {
        *out = if pair[0].is_nan() { pair[0] } else { *out };
    }
}

/// [`maxima_of_triples`]'s reduction: each row's column triples (columns `2k ..= 2k + 2` of
/// the row slices, `2 out.len() + 1` long) reduced with `step`, then the rows, into `out`.
fn reduce_triples<'a>(
    rows: impl Iterator<Item = &'a [f32]>,
    step: impl Fn(f32, f32) -> f32 + Copy,
    out: &mut [f32],
) {
    let span = 2 * out.len() + 1;
    for (index, row) in rows.enumerate() {
        let triples = row[..span - 1]
            .chunks_exact(2)
            .zip(row[1..].chunks_exact(2));
        for (out, (left, right)) in out.iter_mut().zip(triples) {
            let triple = step(step(left[0], right[0]), right[1]);
            *out = if index == 0 {
                triple
            } else {
                step(*out, triple)
            };
        }
    }
}

/// The greater of `best` and `value`, keeping `best` on a tie: [`keep_greater`] where neither
/// is NaN (one `maxps`).
fn greater(best: f32, value: f32) -> f32 {
    if value > best {
        value
    } else {
        best
    }
}

/// A plane of a max pool's input and whether it is known to hold no NaN.
#[derive(Clone, Copy)]
struct ScannedPlane<'a> {
    values: &'a [f32],
    /// No value is NaN ([`is_nan_free`]); scanned only for the 3x3 windows at stride 2,
    /// whose row path ([`maxima_of_triples`]) is the one that uses it, else `false`.
    nan_free: bool,
}

/// Whether `plane` holds no NaN: one pass that vectorizes (no early exit).
fn is_nan_free(plane: &[f32]) -> bool {
    !plane.iter().fold(false, |any, value| any | value.is_nan())
}

/// Interior windows of [`PoolGeometry::route_by_rows`] handled together (stack arrays).
const ARGMAX_BLOCK: usize = 64;

/// The plane index of each window's argmax, for the windows of [`maxima_of_triples`] with
/// their `maxima`: the first tap in row-major order equal to the maximum, which is the tap
/// [`Window::argmax`]'s scan keeps (the maximum is the first greatest number, and `-0 == 0`
/// holds for the tie it kept), or the first tap when the maximum is NaN (the scan keeps a NaN
/// first tap). Taps are visited last to first with selects, so the loop has no branch.
fn first_equal_taps(
    plane: &[f32],
    width: usize,
    rows: Range<usize>,
    first_column: usize,
    maxima: &[f32],
    taps: &mut [u32],
) {
    let span = 2 * maxima.len() + 1;
    let index = |at: usize| u32::try_from(at).expect("a plane of at most u32::MAX pixels");
    let first = index(rows.start * width + first_column);
    for (k, tap) in (0u32..).zip(taps.iter_mut()) {
        *tap = first + 2 * k;
    }
    for iy in rows.rev() {
        let start = iy * width + first_column;
        let row = &plane[start..][..span];
        let triples = row[..span - 1]
            .chunks_exact(2)
            .zip(row[1..].chunks_exact(2));
        let start = index(start);
        for (k, ((tap, &max), (left, right))) in
            (0u32..).zip(taps.iter_mut().zip(maxima).zip(triples))
        {
            let at = start + 2 * k;
            *tap = if right[1] == max { at + 2 } else { *tap };
            *tap = if right[0] == max { at + 1 } else { *tap };
            *tap = if left[0] == max { at } else { *tap };
        }
    }
}

/// The sum of no values as `Window::mean`'s row sums start it (`Iterator::sum` of `f64`), so
/// the 2x2 paths add in the same order from the same start and give the same bits.
fn empty_row_sum() -> f64 {
    std::iter::empty::<f64>().sum()
}

/// Planes whose means [`means_of_planes`] sums side by side.
const PLANES_AT_ONCE: usize = 8;

/// The mean of each whole plane of `planes` (`width` wide, `means.len()` planes) into `means`:
/// `Window::mean`'s sum (each row from [`empty_row_sum`] in `f64`, the rows from 0 in
/// order), so the same bits, but [`PLANES_AT_ONCE`] planes side by side: one plane's sum is a
/// chain of dependent adds, and a window at a time the core waits on it.
fn means_of_planes(planes: &[f32], width: usize, means: &mut [f32]) {
    let pixels = planes.len() / means.len().max(1);
    let height = pixels / width.max(1);
    for (means, planes) in means
        .chunks_mut(PLANES_AT_ONCE)
        .zip(planes.chunks(PLANES_AT_ONCE * pixels))
    {
        let mut sums = [0.0f64; PLANES_AT_ONCE];
        for row in 0..height {
            let mut row_sums = [empty_row_sum(); PLANES_AT_ONCE];
            for column in row * width..(row + 1) * width {
                for (plane, row_sum) in row_sums.iter_mut().enumerate().take(means.len()) {
                    *row_sum += f64::from(planes[plane * pixels + column]);
                }
            }
            for (sum, row_sum) in sums.iter_mut().zip(row_sums) {
                *sum += row_sum;
            }
        }
        for (mean, sum) in means.iter_mut().zip(sums) {
            *mean = (sum / pixels.max(1) as f64) as f32;
        }
    }
}

/// [`avg_pool`] of one plane (`width` wide, even sides) by 2x2 tiles into `out`, output row by
/// output row: each mean is `Window::mean`'s `((0 + (a + b)) + (c + d)) / 4` in `f64` with
/// the same row-sum start, written as one flat loop over the outputs of a row so that it
/// vectorizes (the window-at-a-time walk does not).
fn mean_of_pairs(plane: &[f32], width: usize, out: &mut [f32]) {
    let start = empty_row_sum();
    let pair_sum = |pair: &[f32]| (start + f64::from(pair[0])) + f64::from(pair[1]);
    for (rows, out_row) in plane
        .chunks_exact(2 * width)
        .zip(out.chunks_exact_mut(width / 2))
    {
        let (top, bottom) = rows.split_at(width);
        for ((out, top), bottom) in out_row
            .iter_mut()
            .zip(top.chunks_exact(2))
            .zip(bottom.chunks_exact(2))
        {
            let sum = (0.0 + pair_sum(top)) + pair_sum(bottom);
            *out = (sum / 4.0) as f32;
        }
    }
}

/// [`avg_pool_backward`] of one plane by 2x2 tiles: every input pixel lies in exactly one
/// window, so it is written once with what the general path's zero fill and one addition
/// leave there, `0 + dy / 4` (the `0 +` turns a `-0` share into `+0`, as that addition does).
/// Each even row is computed and the odd row below copies it.
fn share_over_pairs(dy: &[f32], width: usize, dx: &mut [f32]) {
    for (dy_row, rows) in dy
        .chunks_exact(width / 2)
        .zip(dx.chunks_exact_mut(2 * width))
    {
        let (top, bottom) = rows.split_at_mut(width);
        for (pair, &dy) in top.chunks_exact_mut(2).zip(dy_row) {
            let share = 0.0 + dy / 4.0;
            pair[0] = share;
            pair[1] = share;
        }
        bottom.copy_from_slice(top);
    }
}

/// Consecutive planes made in one parallel item ([`units_per_item`] of the input planes).
fn planes_per_item(geometry: &PoolGeometry) -> usize {
    units_per_item(geometry.in_pixels(), geometry.planes())
}

/// Runs `f(plane_index, plane)` for every `plane_len`-long plane of `out` (the output or the
/// input gradient), [`planes_per_item`] consecutive planes to a parallel item.
fn for_each_plane(
    pool: &dyn ThreadPool,
    geometry: &PoolGeometry,
    out: &mut [f32],
    plane_len: usize,
    f: impl Fn(usize, &mut [f32]) + Sync,
) {
    let plane_len = plane_len.max(1);
    for_each_plane_group(pool, geometry, out, plane_len, |first, planes| {
        for (offset, plane) in planes.chunks_mut(plane_len).enumerate() {
            f(first + offset, plane);
        }
    });
}

/// Runs `f(first_plane_index, planes)` for each parallel item's [`planes_per_item`]
/// consecutive `plane_len`-long planes of `out`, together (a global average makes an item's
/// means in one pass, [`means_of_planes`]). `plane_len` is at least 1.
fn for_each_plane_group(
    pool: &dyn ThreadPool,
    geometry: &PoolGeometry,
    out: &mut [f32],
    plane_len: usize,
    f: impl Fn(usize, &mut [f32]) + Sync,
) {
    let per_item = planes_per_item(geometry);
    let cost = item_cost_of_planes(geometry, per_item);
    for_each_chunk(pool, out, per_item * plane_len, cost, |item, planes| {
        f(item * per_item, planes);
    });
}

/// An item of `planes` planes' share of the call's work.
fn item_cost_of_planes(geometry: &PoolGeometry, planes: usize) -> Cost {
    let work = geometry.work();
    let share = planes as f64 / geometry.planes().max(1) as f64;
    let in_values = (planes * geometry.in_pixels()) as f64;
    let out_values = (planes * geometry.out_pixels()) as f64;
    item_cost(
        in_values,
        out_values,
        work.flops * share,
        VECTOR_FLOPS_PER_CYCLE,
    )
}

/// `output[n, c]` = the mean of plane `(n, c)` of the NCHW `input`; `output` is `[N, C]`.
pub fn global_avg_pool(
    pool: &dyn ThreadPool,
    input: &Tensor,
    output: &mut Tensor,
) -> Result<Work, KernelError> {
    let [batch, channels, height, width] =
        expect_rank("avg_pool", "input", &input.shape, "N, C, H, W")?;
    expect_shape("avg_pool", "the output", &output.shape, &[batch, channels])?;
    let pixels = height * width;
    let image = (channels * pixels) as f64;
    let cost = item_cost(image, channels as f64, image, VECTOR_FLOPS_PER_CYCLE);
    for_each_chunk(pool, &mut output.data, channels, cost, |n, means| {
        for (channel, mean) in means.iter_mut().enumerate() {
            let start = (n * channels + channel) * pixels;
            let sum: f64 = input.data[start..start + pixels]
                .iter()
                .map(|&v| f64::from(v))
                .sum();
            *mean = (sum / pixels.max(1) as f64) as f32;
        }
    });
    Ok(Work::new(
        image * batch as f64,
        image * batch as f64 + (batch * channels) as f64,
    ))
}

/// `grad_input[n, c, y, x] = grad_output[n, c] / (H W)`; `grad_input` (NCHW) gives the shape.
pub fn global_avg_pool_backward(
    pool: &dyn ThreadPool,
    grad_output: &Tensor,
    grad_input: &mut Tensor,
) -> Result<Work, KernelError> {
    const KERNEL: &str = "avg_pool_backward";
    let [batch, channels, height, width] =
        expect_rank(KERNEL, "grad_input", &grad_input.shape, "N, C, H, W")?;
    expect_shape(
        KERNEL,
        "grad_output",
        &grad_output.shape,
        &[batch, channels],
    )?;
    let pixels = height * width;
    let cost = item_cost(1.0, pixels as f64, pixels as f64, VECTOR_FLOPS_PER_CYCLE);
    let scale = 1.0 / pixels.max(1) as f32;
    for_each_chunk(
        pool,
        &mut grad_input.data,
        pixels,
        cost,
        |plane_index, dx| {
            dx.fill(grad_output.data[plane_index] * scale);
        },
    );
    let values = grad_input.len() as f64;
    Ok(Work::new(values, values + (batch * channels) as f64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::{Pool, PoolKind, PoolOptions};

    /// Average pooling straight from the definition, one pixel at a time.
    fn naive_avg_pool(input: &Tensor, params: PoolParams) -> Tensor {
        let g = PoolGeometry::new("avg_pool", &input.shape, params).unwrap();
        let [batch, channels, height, width] = g.input;
        let mut output = Tensor::zeros(&g.output_shape());
        let mut out = output.data.iter_mut();
        for plane in 0..batch * channels {
            for oy in 0..g.out_height {
                for ox in 0..g.out_width {
                    let (mut sum, mut count) = (0.0f64, 0);
                    for ky in 0..params.window {
                        for kx in 0..params.window {
                            let iy = (oy * params.stride + ky) as isize - params.padding as isize;
                            let ix = (ox * params.stride + kx) as isize - params.padding as isize;
                            if (0..height as isize).contains(&iy)
                                && (0..width as isize).contains(&ix)
                            {
                                let index =
                                    plane * height * width + iy as usize * width + ix as usize;
                                sum += f64::from(input.data[index]);
                                count += 1;
                            }
                        }
                    }
                    *out.next().unwrap() = (sum / f64::from(count)) as f32;
                }
            }
        }
        output
    }

    /// Max pooling and its gradient by the definition the kernels keep bit for bit: each
    /// window scanned in row-major order from its first in-bounds tap, a value taken only when
    /// greater than the best so far; the gradient added onto that tap in output order.
    fn scanned_max_pool(input: &Tensor, dy: &Tensor, params: PoolParams) -> (Tensor, Tensor) {
        let g = PoolGeometry::new("max_pool", &input.shape, params).unwrap();
        let [batch, channels, height, width] = g.input;
        let mut output = Tensor::zeros(&g.output_shape());
        let mut dx = Tensor::zeros(&input.shape);
        let mut pixel = 0;
        for plane in 0..batch * channels {
            let base = plane * height * width;
            for oy in 0..g.out_height {
                for ox in 0..g.out_width {
                    let mut best: Option<(usize, f32)> = None;
                    for ky in 0..params.window {
                        for kx in 0..params.window {
                            let iy = (oy * params.stride + ky).checked_sub(params.padding);
                            let ix = (ox * params.stride + kx).checked_sub(params.padding);
                            let (Some(iy), Some(ix)) = (iy, ix) else {
                                continue;
                            };
                            if iy >= height || ix >= width {
                                continue;
                            }
                            let value = input.data[base + iy * width + ix];
                            if best.is_none_or(|(_, b)| value > b) {
                                best = Some((base + iy * width + ix, value));
                            }
                        }
                    }
                    let (index, value) = best.unwrap();
                    output.data[pixel] = value;
                    dx.data[index] += dy.data[pixel];
                    pixel += 1;
                }
            }
        }
        (output, dx)
    }

    /// Values with many ties, signed zeros and a few NaNs, so the order of the scan shows.
    fn tie_heavy(shape: &[usize], seed: u64) -> Tensor {
        let mut values = Tensor::random(shape, seed);
        for (i, value) in values.data.iter_mut().enumerate() {
            *value = match i % 37 {
                0 => f32::NAN,
                1 | 5 | 9 => -0.0,
                2 | 6 => 0.0,
                _ => (*value * 4.0).round(),
            };
        }
        values
    }

    #[test]
    fn max_pool_and_its_gradient_keep_the_scan_order_bit_for_bit() {
        let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "max-pool-test")).unwrap();
        // Wide rows (70 -> 35 and 69 output columns): many interior columns besides the edges.
        for (shape, window, stride, padding) in [
            ([2, 3, 9, 70], 3, 2, 1),
            ([1, 2, 11, 71], 3, 2, 1),
            ([3, 1, 2, 3], 3, 2, 1),
            ([1, 2, 7, 70], 2, 1, 0),
            ([2, 2, 8, 8], 3, 3, 2),
            ([1, 3, 5, 6], 5, 1, 4),
            ([1, 1, 4, 4], 1, 1, 0),
        ] {
            let params = PoolParams {
                window,
                stride,
                padding,
            };
            let with_nans = tie_heavy(&shape, 3);
            // The same ties without NaN: the 3x3 stride-2 paths' NaN-free steps.
            let mut without_nans = with_nans.clone();
            for value in without_nans.data.iter_mut().filter(|v| v.is_nan()) {
                *value = 3.0;
            }
            for x in [with_nans, without_nans] {
                let g = PoolGeometry::new("max_pool", &shape, params).unwrap();
                let dy = tie_heavy(&g.output_shape(), 4);
                let (want_y, want_dx) = scanned_max_pool(&x, &dy, params);
                let mut y = Tensor::filled(&g.output_shape(), 7.0);
                max_pool(pool.as_dyn(), &x, params, &mut y).unwrap();
                let mut dx = Tensor::filled(&shape, 7.0);
                max_pool_backward(pool.as_dyn(), &x, &dy, params, &mut dx).unwrap();
                let bits = |t: &Tensor| t.data.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&y), bits(&want_y), "max_pool {shape:?} {params:?}");
                assert_eq!(
                    bits(&dx),
                    bits(&want_dx),
                    "max_pool_backward {shape:?} {params:?}"
                );
            }
        }
    }

    #[test]
    fn avg_pool_matches_the_definition_with_stride_and_padding() {
        let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "avg-pool-test")).unwrap();
        let input = Tensor::random(&[2, 3, 7, 6], 11);
        for (window, stride, padding) in [(2, 2, 0), (3, 2, 1), (3, 1, 1), (6, 1, 0), (1, 1, 0)] {
            let params = PoolParams {
                window,
                stride,
                padding,
            };
            let want = naive_avg_pool(&input, params);
            let mut output = Tensor::zeros(&want.shape);
            let work = avg_pool(pool.as_dyn(), &input, params, &mut output).unwrap();
            assert_eq!(output, want, "{params:?}");
            assert!(work.flops > 0.0);
        }
    }

    #[test]
    fn two_by_two_tiles_give_the_window_walks_bits() {
        let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "avg-pool-test")).unwrap();
        let params = PoolParams {
            window: 2,
            stride: 2,
            padding: 0,
        };
        let shape = [2, 3, 8, 6];
        let g = PoolGeometry::new("avg_pool", &shape, params).unwrap();
        assert!(g.tiles_by_two());
        let x = tie_heavy(&shape, 21);
        let dy = tie_heavy(&g.output_shape(), 22);
        let (mut want_y, mut want_dx) = (Vec::new(), vec![0.0f32; x.len()]);
        let (width, in_pixels, out_pixels) = (shape[3], g.in_pixels(), g.out_pixels());
        for plane in 0..g.planes() {
            let input = &x.data[plane * in_pixels..(plane + 1) * in_pixels];
            let dx = &mut want_dx[plane * in_pixels..(plane + 1) * in_pixels];
            g.for_each_window(|pixel, window| {
                want_y.push(window.mean(input, width));
                let share = dy.data[plane * out_pixels + pixel] / window.count() as f32;
                for iy in window.y0..window.y1 {
                    dx[iy * width + window.x0..iy * width + window.x1]
                        .iter_mut()
                        .for_each(|value| *value += share);
                }
            });
        }
        let mut y = Tensor::filled(&g.output_shape(), 7.0);
        avg_pool(pool.as_dyn(), &x, params, &mut y).unwrap();
        let mut dx = Tensor::filled(&shape, 7.0);
        avg_pool_backward(pool.as_dyn(), &dy, params, &mut dx).unwrap();
        let bits = |values: &[f32]| values.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&y.data), bits(&want_y), "avg_pool");
        assert_eq!(bits(&dx.data), bits(&want_dx), "avg_pool_backward");
        assert!(
            dy.data.contains(&-0.0) && !dx.data.iter().any(|v| v.to_bits() == (-0.0f32).to_bits())
        );
    }

    #[test]
    fn avg_pool_backward_is_the_adjoint_of_avg_pool() {
        // <avg_pool(x), dy> == <x, avg_pool_backward(dy)> for any x and dy.
        let pool = Pool::new(PoolOptions::new(PoolKind::Simple, 2, "pool-test")).unwrap();
        let params = PoolParams {
            window: 3,
            stride: 2,
            padding: 1,
        };
        let x = Tensor::random(&[2, 3, 7, 6], 1);
        let g = PoolGeometry::new("avg_pool", &x.shape, params).unwrap();
        let dy = Tensor::random(&g.output_shape(), 2);
        let mut y = Tensor::zeros(&g.output_shape());
        avg_pool(pool.as_dyn(), &x, params, &mut y).unwrap();
        let mut dx = Tensor::filled(&x.shape, f32::NAN);
        avg_pool_backward(pool.as_dyn(), &dy, params, &mut dx).unwrap();
        let dot = |a: &Tensor, b: &Tensor| -> f64 {
            a.data
                .iter()
                .zip(&b.data)
                .map(|(&a, &b)| f64::from(a) * f64::from(b))
                .sum()
        };
        assert!(
            (dot(&y, &dy) - dot(&x, &dx)).abs() < 1e-4,
            "{} vs {}",
            dot(&y, &dy),
            dot(&x, &dx)
        );
    }

    #[test]
    fn a_window_the_size_of_the_input_is_the_global_average() {
        let pool = Pool::new(PoolOptions::new(PoolKind::Simple, 1, "avg-pool-test")).unwrap();
        let input = Tensor::random(&[2, 4, 4, 4], 5);
        let mut windowed = Tensor::zeros(&[2, 4, 1, 1]);
        let params = PoolParams {
            window: 4,
            stride: 4,
            padding: 0,
        };
        avg_pool(pool.as_dyn(), &input, params, &mut windowed).unwrap();
        let mut global = Tensor::zeros(&[2, 4]);
        global_avg_pool(pool.as_dyn(), &input, &mut global).unwrap();
        assert_eq!(windowed.data, global.data);
    }

    /// Windows that cover the whole plane (with and without padding; plane counts that are
    /// and are not multiples of the planes summed side by side, one and several planes to an
    /// item) give bitwise `Window::mean`'s means, and the gradient the general path's
    /// `0 + dy / count` in every pixel.
    #[test]
    fn global_windows_give_the_window_walks_bits() {
        let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "global-pool")).unwrap();
        let cases = [
            ([3, 5, 7, 7], 7, 0),
            ([4, 40, 4, 4], 4, 0),
            ([2, 3, 7, 7], 9, 1),
        ];
        for (seed, (shape, window, padding)) in (31..).zip(cases) {
            let params = PoolParams {
                window,
                stride: 1,
                padding,
            };
            let g = PoolGeometry::new("avg_pool", &shape, params).unwrap();
            assert!(g.is_global(), "{shape:?}");
            let mut input = Tensor::random(&shape, seed);
            input.data[..shape[3]].fill(-0.0);
            let pixels = shape[2] * shape[3];
            let whole = Window {
                y0: 0,
                y1: shape[2],
                x0: 0,
                x1: shape[3],
            };
            let want: Vec<u32> = input
                .data
                .chunks(pixels)
                .map(|plane| whole.mean(plane, shape[3]).to_bits())
                .collect();
            let mut output = Tensor::zeros(&g.output_shape());
            avg_pool(pool.as_dyn(), &input, params, &mut output).unwrap();
            let got: Vec<u32> = output.data.iter().map(|v| v.to_bits()).collect();
            assert_eq!(got, want, "{shape:?}");
            assert_eq!(output, naive_avg_pool(&input, params));

            let mut dy = Tensor::random(&g.output_shape(), seed + 100);
            dy.data[0] = -0.0;
            let mut dx = Tensor::filled(&shape, 9.0);
            avg_pool_backward(pool.as_dyn(), &dy, params, &mut dx).unwrap();
            for (plane, &dy) in dx.data.chunks(pixels).zip(&dy.data) {
                let share = 0.0 + dy / pixels as f32;
                assert!(plane.iter().all(|v| v.to_bits() == share.to_bits()));
            }
        }
    }

    #[test]
    fn a_wrong_pooled_side_shape_is_an_error_naming_the_tensor() {
        let pool = Pool::new(PoolOptions::new(PoolKind::Simple, 1, "avg-pool-test")).unwrap();
        let input = Tensor::zeros(&[1, 1, 4, 4]);
        let mut output = Tensor::zeros(&[1, 1, 3, 3]);
        let params = PoolParams {
            window: 2,
            stride: 2,
            padding: 0,
        };
        let fails_with = |result: Result<Work, KernelError>, start: &str| {
            let message = result.unwrap_err().to_string();
            assert!(message.starts_with(start), "{message}");
        };
        fails_with(
            avg_pool(pool.as_dyn(), &input, params, &mut output),
            "avg_pool: the output has shape [1, 1, 3, 3]",
        );
        // The gradients name the pooled-side tensor they read.
        let mut grad_input = Tensor::zeros(&[1, 1, 4, 4]);
        fails_with(
            max_pool_backward(pool.as_dyn(), &input, &output, params, &mut grad_input),
            "max_pool_backward: grad_output has shape [1, 1, 3, 3]",
        );
        fails_with(
            avg_pool_backward(pool.as_dyn(), &output, params, &mut grad_input),
            "avg_pool_backward: grad_output has shape [1, 1, 3, 3]",
        );
    }
}
