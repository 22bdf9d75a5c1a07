//! 2-D convolution as im2col + GEMM, forward and both gradients.
//!
//! # Layout
//! Input and output are NCHW; the weight is `(out channels, in channels, kernel h, kernel w)`,
//! which read row-major is the `C_out x (C_in kh kw)` matrix a GEMM wants. No bias (a
//! convolution followed by batch-norm needs none). Stride and zero padding are the same in
//! both directions: `out = (in + 2 padding - kernel) / stride + 1`.
//!
//! # How each direction runs (all through the intra-op pool)
//! - [`conv2d`]: im2col unrolls every image into `cols` (`C_in kh kw` rows, one column per
//!   output pixel), one `parallel_for` item per (image, input channel). Then for each image
//!   `Y_n = W cols_n`, one item per (image, block of output channels), the whole image for a
//!   batch of 4 or more (`forward.rs`).
//! - [`conv2d_backward_data`]: `dcols_n = W^T dY_n`, one item per (image, block of `dcols`
//!   rows, the whole image at batch 4 or more); then col2im adds every column back onto the pixel it came from, one item per
//!   (image, input channel).
//! - [`conv2d_backward_weights`]: im2col as forward, then `dW = sum_n dY_n cols_n^T` with
//!   the factor of fewer channels transposed first so both GEMM operands are row-major
//!   (`weight_grad.rs`: `dW = dY_n (cols_n^T)` or `dW^T = cols_n (dY_n^T)`, one item per
//!   (part of the images, block of rows), each adding its images in order, the parts summed
//!   in a fixed order); the batched path computes a wide `dW` (at least twice as many columns,
//!   `C_in kh kw`, as rows, but for a pointwise gradient over 256 pixels or more) by blocks of
//!   its columns, else `dW` by blocks of its rows or columns, or `dW^T` by rows (see
//!   `weight_grad.rs`).
//!
//! Non-pointwise convolutions that are not batched take the blocked path instead
//! (`blocked.rs`) when their output plane splits into equal runs of at least 64 pixels: im2col
//! of one run of output pixels at a time into a per-thread buffer that stays in L2, then its
//! GEMM straight into the output planes. The forward takes it at any stride (the stem); the
//! weight gradient at stride 1 one item per group of input channels, or, with fewer than 4
//! input channels, at any stride, one item per part of the pixels. The input gradient takes
//! it as a forward convolution of `dY` with the flipped weight when the stride is 1, the
//! kernel square and the padding smaller than it, and the input plane splits the same way.
//! No `cols` buffer exists whole.
//!
//! Otherwise the `cols` buffer holds every image at once (`N C_in kh kw H_out W_out` floats),
//! so the GEMMs have enough items to keep the pool busy even for one image, at the price of
//! memory. It is the calling thread's scratch buffer (`kernels::scratch`), allocated once per thread
//! and reused by every later call, not a fresh allocation per call.
//!
//! Small output planes (at most [`BATCHED_MAX_PIXELS`] pixels, more than one image) take the
//! batched path instead (`batched.rs`). On planes of 64 pixels or more (8x8) the forward and
//! the input gradient run one GEMM per image, each one item writing its image's output in
//! place (the images' columns are then packed once, not once per block of output rows), but
//! where the channels split evenly: the input gradient (even `C_in`) runs one item per half
//! of the input channels over every image, each with its own half of `W^T`, and the
//! pointwise forward (even `C_out`) one item per half of the output channels;
//! smaller planes lay the images' column matrices side by side for one GEMM over the whole
//! batch (the input gradient's computed transposed over at most 128 pixels of the batch). The
//! weight gradient is always one GEMM over the batch's pixels.
//!
//! A pointwise convolution (1x1 kernel, stride 1, no padding: most of a bottleneck's) skips
//! im2col and col2im entirely: an image's column matrix is the image itself, so forward and
//! the weight gradient read the input directly and the input gradient is written directly.
//!
//! # Determinism
//! Every item is computed by one thread with the same code, its blocks chosen from the shapes
//! alone; col2im adds in a fixed order (kernel row, kernel column, output row, output column),
//! and the weight gradient sums images (or parts of images) in index order. No sum depends on the thread count.
//!
//! [`BATCHED_MAX_PIXELS`]: batched::BATCHED_MAX_PIXELS
#![forbid(unsafe_code)]

mod backward;
mod batched;
mod blocked;
mod forward;
mod im2col;
mod shared;
mod weight_grad;

pub use backward::{conv2d_backward_data, conv2d_backward_weights};
pub use forward::conv2d;

use super::error::{expect_rank, KernelError};
use super::gemm::GemmShape;
use super::work::Work;

/// Stride and zero padding of a convolution (the same in both directions).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Conv2dParams {
    /// Step between windows, at least 1.
    pub stride: usize,
    /// Zeros added on every side.
    pub padding: usize,
}

impl Default for Conv2dParams {
    fn default() -> Self {
        Conv2dParams {
            stride: 1,
            padding: 0,
        }
    }
}

/// Every size of one convolution, checked to fit together.
///
/// ```
/// use enginetop::kernels::{Conv2dGeometry, Conv2dParams};
/// let params = Conv2dParams { stride: 2, padding: 1 };
/// let geometry = Conv2dGeometry::new(&[8, 3, 32, 32], &[16, 3, 3, 3], params).unwrap();
/// assert_eq!(geometry.output_shape(), [8, 16, 16, 16]);
/// assert_eq!(geometry.forward_work().flops, 2.0 * 8.0 * 16.0 * 27.0 * 256.0);
/// let error = Conv2dGeometry::new(&[8, 3, 32, 32], &[16, 4, 3, 3], params).unwrap_err();
/// assert_eq!(error.to_string(), "conv2d: input has 3 channels but the weight expects 4");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dGeometry {
    /// Images (N).
    pub batch: usize,
    /// Input channels.
    pub(crate) in_channels: usize,
    /// Input height.
    pub height: usize,
    /// Input width.
    pub width: usize,
    /// Output channels.
    pub out_channels: usize,
    /// Kernel height.
    pub(crate) kernel_h: usize,
    /// Kernel width.
    pub(crate) kernel_w: usize,
    /// Stride and padding.
    pub params: Conv2dParams,
    /// Output height.
    pub out_height: usize,
    /// Output width.
    pub(crate) out_width: usize,
}

impl Conv2dGeometry {
    /// The geometry of convolving an NCHW `input_shape` with a weight of `weight_shape`.
    pub fn new(
        input_shape: &[usize],
        weight_shape: &[usize],
        params: Conv2dParams,
    ) -> Result<Self, KernelError> {
        let [batch, in_channels, height, width] =
            expect_rank("conv2d", "input", input_shape, "N, C, H, W")?;
        let [out_channels, weight_in, kernel_h, kernel_w] = expect_rank(
            "conv2d",
            "weight",
            weight_shape,
            "out channels, in channels, kernel h, kernel w",
        )?;
        if weight_in != in_channels {
            return Err(KernelError::shape(
                "conv2d",
                format!("input has {in_channels} channels but the weight expects {weight_in}"),
            ));
        }
        if params.stride == 0 {
            return Err(KernelError::shape("conv2d", "stride is 0; use at least 1"));
        }
        let out_height = out_size("height", height, kernel_h, params)?;
        let out_width = out_size("width", width, kernel_w, params)?;
        Ok(Conv2dGeometry {
            batch,
            in_channels,
            height,
            width,
            out_channels,
            kernel_h,
            kernel_w,
            params,
            out_height,
            out_width,
        })
    }

    /// The input's shape, NCHW.
    pub fn input_shape(&self) -> [usize; 4] {
        [self.batch, self.in_channels, self.height, self.width]
    }

    /// The weight's shape.
    pub fn weight_shape(&self) -> [usize; 4] {
        [
            self.out_channels,
            self.in_channels,
            self.kernel_h,
            self.kernel_w,
        ]
    }

    /// The output's shape, NCHW.
    pub fn output_shape(&self) -> [usize; 4] {
        [
            self.batch,
            self.out_channels,
            self.out_height,
            self.out_width,
        ]
    }

    /// Forward: `2 N C_out (C_in kh kw) (H_out W_out)` flops; moves the input, weight, output,
    /// and the im2col buffer once each way.
    pub fn forward_work(&self) -> Work {
        Work::new(
            self.gemm_flops(),
            self.tensor_values() + 2.0 * self.cols_values(),
        )
    }

    /// Gradient of the input: the same flops as forward (plus col2im's adds, when there is a
    /// col2im).
    pub(crate) fn backward_data_work(&self) -> Work {
        let col2im_adds = self.cols_values();
        Work::new(
            self.gemm_flops() + col2im_adds,
            self.tensor_values() + 2.0 * self.cols_values(),
        )
    }

    /// Gradient of the weight: the same flops as forward.
    pub(crate) fn backward_weights_work(&self) -> Work {
        self.forward_work()
    }

    /// Whether the convolution is a plain GEMM on the input: a 1x1 kernel, stride 1, no
    /// padding, so an image's column matrix is the image itself and im2col/col2im are skipped.
    pub(crate) fn is_pointwise(&self) -> bool {
        self.kernel_area() == 1 && self.params.stride == 1 && self.params.padding == 0
    }

    /// Values in one image's column matrix: `C_in kh kw` rows of `H_out W_out`.
    fn cols_per_image(&self) -> usize {
        self.patch_len() * self.out_pixels()
    }

    /// Rows of the column matrix: `C_in kh kw`.
    fn patch_len(&self) -> usize {
        self.in_channels * self.kernel_area()
    }

    fn kernel_area(&self) -> usize {
        self.kernel_h * self.kernel_w
    }

    fn out_pixels(&self) -> usize {
        self.out_height * self.out_width
    }

    fn in_pixels(&self) -> usize {
        self.height * self.width
    }

    /// The sizes the batched path works in: `(N, H_out W_out, C_in kh kw, C_out)`, the
    /// images, each one's output pixels, the column matrix's rows and the output channels.
    fn batched_sizes(&self) -> (usize, usize, usize, usize) {
        (
            self.batch,
            self.out_pixels(),
            self.patch_len(),
            self.out_channels,
        )
    }

    /// One image's forward GEMM: `C_out x (H_out W_out)`, inner `C_in kh kw`.
    fn per_image_gemm(&self) -> GemmShape {
        GemmShape {
            m: self.out_channels,
            n: self.out_pixels(),
            k: self.patch_len(),
        }
    }

    fn gemm_flops(&self) -> f64 {
        self.batch as f64 * self.per_image_gemm().work().flops
    }

    /// Values of the im2col buffer (every image's column matrix) a call writes and reads back:
    /// none for a pointwise one.
    fn unrolled_len(&self) -> usize {
        if self.is_pointwise() {
            0
        } else {
            self.batch * self.cols_per_image()
        }
    }

    fn cols_values(&self) -> f64 {
        self.unrolled_len() as f64
    }

    fn tensor_values(&self) -> f64 {
        let input = self.batch * self.in_channels * self.in_pixels();
        let weight = self.out_channels * self.patch_len();
        let output = self.batch * self.out_channels * self.out_pixels();
        (input + weight + output) as f64
    }
}

/// Output size along one axis, or an error if the kernel does not fit the padded input.
fn out_size(
    axis: &str,
    size: usize,
    kernel: usize,
    params: Conv2dParams,
) -> Result<usize, KernelError> {
    let padded = size + 2 * params.padding;
    if kernel == 0 || kernel > padded {
        return Err(KernelError::shape(
            "conv2d",
            format!(
                "a kernel {axis} of {kernel} does not fit an input {axis} of {size} padded by {}; \
                 use a kernel of 1 to {padded}, or pad more",
                params.padding
            ),
        ));
    }
    Ok((padded - kernel) / params.stride + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_sizes_follow_the_formula() {
        let same = Conv2dParams {
            stride: 1,
            padding: 1,
        };
        let geometry = Conv2dGeometry::new(&[2, 3, 7, 5], &[4, 3, 3, 3], same).unwrap();
        assert_eq!(geometry.output_shape(), [2, 4, 7, 5]);
        let strided = Conv2dParams {
            stride: 2,
            padding: 0,
        };
        let geometry = Conv2dGeometry::new(&[1, 1, 7, 6], &[1, 1, 3, 2], strided).unwrap();
        assert_eq!(geometry.output_shape(), [1, 1, 3, 3]);
    }

    #[test]
    fn bad_geometry_errors_name_the_fix() {
        let params = Conv2dParams::default();
        let too_big = Conv2dGeometry::new(&[1, 1, 2, 2], &[1, 1, 3, 3], params).unwrap_err();
        assert!(
            too_big.to_string().contains("kernel height of 3"),
            "{too_big}"
        );
        let zero_stride = Conv2dParams {
            stride: 0,
            padding: 0,
        };
        let error = Conv2dGeometry::new(&[1, 1, 4, 4], &[1, 1, 3, 3], zero_stride).unwrap_err();
        assert!(error.to_string().contains("stride is 0"), "{error}");
        let rank = Conv2dGeometry::new(&[1, 4, 4], &[1, 1, 3, 3], params).unwrap_err();
        assert!(
            rank.to_string().contains("4 dimensions (N, C, H, W)"),
            "{rank}"
        );
    }
}
