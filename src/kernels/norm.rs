//! What batch-norm and layer-norm share: the learned scale and shift, and the gradients.
#![forbid(unsafe_code)]

use super::tensor::Tensor;

/// The learned scale (`gamma`) and shift (`beta`), one per normalized feature (a channel for
/// batch-norm, a column for layer-norm), and the epsilon added to the variance.
#[derive(Clone, Copy, Debug)]
pub struct NormParams<'a> {
    /// Scale, one per feature.
    pub gamma: &'a Tensor,
    /// Shift, one per feature.
    pub beta: &'a Tensor,
    /// Added to the variance before the square root (e.g. `1e-5`).
    pub epsilon: f32,
}

/// The gradients a normalization's backward pass writes.
#[derive(Clone, Debug, PartialEq)]
pub struct NormGrads {
    /// `d loss / d x`, the input's shape.
    pub grad_input: Tensor,
    /// `d loss / d gamma`, one per feature.
    pub grad_gamma: Tensor,
    /// `d loss / d beta`, one per feature.
    pub grad_beta: Tensor,
}

impl NormGrads {
    /// Zeroed gradients for an input of `input_shape` with `features` features.
    pub fn zeros(input_shape: &[usize], features: usize) -> Self {
        NormGrads {
            grad_input: Tensor::zeros(input_shape),
            grad_gamma: Tensor::zeros(&[features]),
            grad_beta: Tensor::zeros(&[features]),
        }
    }
}
