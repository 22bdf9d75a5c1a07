//! Pooling over NCHW: windowed [`max_pool`] and [`global_avg_pool`] (NCHW to `N x C`), with
//! their gradients.
//!
//! Max pooling uses square windows with a stride and padding (padding never wins the max:
//! it counts as minus infinity). Its backward recomputes each window's maximum from the
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

    /// The window offsets `(iy, ix)` in bounds for output pixel `(oy, ox)`, row-major.
    fn window(&self, oy: usize, ox: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        let PoolParams {
            window,
            stride,
            padding,
        } = self.params;
        let rows = (0..window).filter_map(move |ky| {
            (oy * stride + ky)
                .checked_sub(padding)
                .filter(|&iy| iy < self.input[2])
        });
        rows.flat_map(move |iy| {
            (0..window)
                .filter_map(move |kx| {
                    (ox * stride + kx)
                        .checked_sub(padding)
                        .filter(|&ix| ix < self.input[3])
                })
                .map(move |ix| (iy, ix))
        })
    }

    /// The input index of the (first) maximum in output pixel `(oy, ox)`'s window of `plane`.
    fn argmax(&self, plane: &[f32], oy: usize, ox: usize) -> usize {
        let width = self.input[3];
        let mut best = None::<(usize, f32)>;
        for (iy, ix) in self.window(oy, ox) {
            let value = plane[iy * width + ix];
            if best.is_none_or(|(_, max)| value > max) {
                best = Some((iy * width + ix, value));
            }
        }
        best.expect("padding < window leaves every window a pixel")
            .0
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
