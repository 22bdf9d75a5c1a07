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
//! One `parallel_for` item per (image, channel) plane of the output (forward) or of the input
//! gradient (backward), or per image for global average pooling. Each item adds in a fixed
//! order, so nothing depends on the thread count.
#![forbid(unsafe_code)]

use super::error::{expect_rank, expect_shape, KernelError};
use super::par::{for_each_chunk, item_cost, VECTOR_FLOPS_PER_CYCLE};
use super::tensor::Tensor;
use super::work::Work;
use crate::pool::parallel_for::Cost;
use crate::pool::ThreadPool;

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
/// use enginetop::kernels::pooling::{PoolGeometry, PoolParams};
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
    pub out_width: usize,
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

    /// The mean of output pixel `(oy, ox)`'s window of `plane`, over its in-bounds pixels,
    /// summed in `f64` in row-major window order.
    fn window_mean(&self, plane: &[f32], oy: usize, ox: usize) -> f32 {
        let width = self.input[3];
        let ((y0, y1), (x0, x1)) = (self.span(oy, 0), self.span(ox, 1));
        let mut sum = 0.0f64;
        for row in plane[y0 * width..y1 * width].chunks_exact(width) {
            sum += row[x0..x1].iter().map(|&v| f64::from(v)).sum::<f64>();
        }
        let count = (y1 - y0) * (x1 - x0);
        (sum / count.max(1) as f64) as f32
    }

    /// The input index of the (first) maximum in output pixel `(oy, ox)`'s window of `plane`,
    /// in row-major window order.
    fn argmax(&self, plane: &[f32], oy: usize, ox: usize) -> usize {
        let width = self.input[3];
        let ((y0, y1), (x0, x1)) = (self.span(oy, 0), self.span(ox, 1));
        let mut best = (y0 * width + x0, plane[y0 * width + x0]);
        for iy in y0..y1 {
            let row = &plane[iy * width..(iy + 1) * width];
            for (ix, &value) in row.iter().enumerate().take(x1).skip(x0) {
                if value > best.1 {
                    best = (iy * width + ix, value);
                }
            }
        }
        best.0
    }
}

/// `output` = the maximum of each window of `input`.
pub fn max_pool(
    pool: &dyn ThreadPool,
    input: &Tensor,
    params: PoolParams,
    output: &mut Tensor,
) -> Result<Work, KernelError> {
    let geometry = PoolGeometry::new("max_pool", &input.shape, params)?;
    expect_shape(
        "max_pool",
        "the output",
        &output.shape,
        &geometry.output_shape(),
    )?;
    let g = &geometry;
    let work = g.work();
    let cost = plane_cost(g, work);
    for_each_chunk(
        pool,
        &mut output.data,
        g.out_pixels(),
        cost,
        |plane_index, out| {
            let plane = &input.data[plane_index * g.in_pixels()..(plane_index + 1) * g.in_pixels()];
            for (pixel, out) in out.iter_mut().enumerate() {
                let (oy, ox) = (pixel / g.out_width, pixel % g.out_width);
                *out = plane[g.argmax(plane, oy, ox)];
            }
        },
    );
    Ok(work)
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
    let geometry = PoolGeometry::new(KERNEL, &input.shape, params)?;
    expect_shape(
        KERNEL,
        "grad_output",
        &grad_output.shape,
        &geometry.output_shape(),
    )?;
    expect_shape(KERNEL, "grad_input", &grad_input.shape, &input.shape)?;
    let g = &geometry;
    let work = g.work();
    let cost = plane_cost(g, work);
    for_each_chunk(
        pool,
        &mut grad_input.data,
        g.in_pixels(),
        cost,
        |plane_index, dx| {
            let plane = &input.data[plane_index * g.in_pixels()..(plane_index + 1) * g.in_pixels()];
            let dy =
                &grad_output.data[plane_index * g.out_pixels()..(plane_index + 1) * g.out_pixels()];
            dx.fill(0.0);
            for (pixel, &dy) in dy.iter().enumerate() {
                dx[g.argmax(plane, pixel / g.out_width, pixel % g.out_width)] += dy;
            }
        },
    );
    Ok(work)
}

/// `output` = the mean of each window of `input` over the window's pixels inside the input
/// (padding is not counted).
///
/// ```
/// use enginetop::kernels::pooling::{avg_pool, PoolParams};
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
    let geometry = PoolGeometry::new("avg_pool", &input.shape, params)?;
    expect_shape(
        "avg_pool",
        "the output",
        &output.shape,
        &geometry.output_shape(),
    )?;
    let g = &geometry;
    let work = g.work();
    let cost = plane_cost(g, work);
    for_each_chunk(
        pool,
        &mut output.data,
        g.out_pixels(),
        cost,
        |plane_index, out| {
            let plane = &input.data[plane_index * g.in_pixels()..(plane_index + 1) * g.in_pixels()];
            for (pixel, out) in out.iter_mut().enumerate() {
                *out = g.window_mean(plane, pixel / g.out_width, pixel % g.out_width);
            }
        },
    );
    Ok(work)
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
    let geometry = PoolGeometry::new(KERNEL, &grad_input.shape, params)?;
    expect_shape(
        KERNEL,
        "grad_output",
        &grad_output.shape,
        &geometry.output_shape(),
    )?;
    let g = &geometry;
    let work = g.work();
    let cost = plane_cost(g, work);
    let (width, out_pixels) = (g.input[3], g.out_pixels());
    for_each_chunk(
        pool,
        &mut grad_input.data,
        g.in_pixels(),
        cost,
        |plane_index, dx| {
            let dy = &grad_output.data[plane_index * out_pixels..(plane_index + 1) * out_pixels];
            dx.fill(0.0);
            for (pixel, &dy) in dy.iter().enumerate() {
                let (y0, y1) = g.span(pixel / g.out_width, 0);
                let (x0, x1) = g.span(pixel % g.out_width, 1);
                let share = dy / ((y1 - y0) * (x1 - x0)).max(1) as f32;
                for iy in y0..y1 {
                    dx[iy * width + x0..iy * width + x1]
                        .iter_mut()
                        .for_each(|value| *value += share);
                }
            }
        },
    );
    Ok(work)
}

/// One plane's share of `work`.
fn plane_cost(geometry: &PoolGeometry, work: Work) -> Cost {
    let planes = geometry.planes().max(1) as f64;
    let in_values = geometry.in_pixels() as f64;
    let out_values = geometry.out_pixels() as f64;
    item_cost(
        in_values,
        out_values,
        work.flops / planes,
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

    #[test]
    fn a_wrong_output_shape_is_an_error() {
        let pool = Pool::new(PoolOptions::new(PoolKind::Simple, 1, "avg-pool-test")).unwrap();
        let input = Tensor::zeros(&[1, 1, 4, 4]);
        let mut output = Tensor::zeros(&[1, 1, 3, 3]);
        let params = PoolParams {
            window: 2,
            stride: 2,
            padding: 0,
        };
        let message = avg_pool(pool.as_dyn(), &input, params, &mut output)
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with("avg_pool: the output has shape [1, 1, 3, 3]"),
            "{message}"
        );
    }
}
