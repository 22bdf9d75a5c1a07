//! [`KernelKind`]: the kernels by the names workload files use.
#![forbid(unsafe_code)]

use std::fmt;
use std::str::FromStr;

use super::error::KernelError;

/// Every kernel, by the name a workload file gives it (`kind = "conv2d"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelKind {
    /// Matrix multiply, `C = alpha op(A) op(B) + beta C`.
    Gemm,
    /// 2-D convolution (im2col + GEMM).
    Conv2d,
    /// Gradient of a convolution with respect to its input.
    Conv2dBackwardData,
    /// Gradient of a convolution with respect to its weight.
    Conv2dBackwardWeights,
    /// Batch-norm with running statistics (inference).
    BatchNorm,
    /// Batch-norm with batch statistics (training forward).
    BatchNormTrain,
    /// Gradient of training batch-norm.
    BatchNormBackward,
    /// Training batch-norm with a fused relu: `max(bn(x), 0)`.
    BatchNormReluTrain,
    /// Gradient of batch-norm with a fused relu (reads the forward output as the mask).
    BatchNormReluBackward,
    /// Training batch-norm with a fused residual add and relu: `max(bn(x) + r, 0)`.
    BatchNormAddReluTrain,
    /// `max(x, 0)`.
    Relu,
    /// Gradient of relu.
    ReluBackward,
    /// Gradient of relu summed into another gradient (where a residual's paths meet).
    ReluBackwardAdd,
    /// Element-wise sum (a residual connection).
    Add,
    /// Max pooling over windows.
    MaxPool,
    /// Gradient of max pooling.
    MaxPoolBackward,
    /// Global average pooling (NCHW to NC).
    AvgPool,
    /// Gradient of global average pooling.
    AvgPoolBackward,
    /// Row-wise softmax.
    Softmax,
    /// Gradient of softmax cross-entropy with respect to the logits.
    SoftmaxCrossEntropyBackward,
    /// Row-wise layer normalization.
    LayerNorm,
    /// Gradient of layer normalization.
    LayerNormBackward,
    /// Stochastic gradient descent update, optionally with momentum.
    Sgd,
}

impl KernelKind {
    /// Every kind, forward ops first.
    pub const ALL: [KernelKind; 23] = [
        KernelKind::Gemm,
        KernelKind::Conv2d,
        KernelKind::BatchNorm,
        KernelKind::BatchNormTrain,
        KernelKind::BatchNormReluTrain,
        KernelKind::BatchNormAddReluTrain,
        KernelKind::Relu,
        KernelKind::Add,
        KernelKind::MaxPool,
        KernelKind::AvgPool,
        KernelKind::Softmax,
        KernelKind::LayerNorm,
        KernelKind::Conv2dBackwardData,
        KernelKind::Conv2dBackwardWeights,
        KernelKind::BatchNormBackward,
        KernelKind::BatchNormReluBackward,
        KernelKind::ReluBackward,
        KernelKind::ReluBackwardAdd,
        KernelKind::MaxPoolBackward,
        KernelKind::AvgPoolBackward,
        KernelKind::SoftmaxCrossEntropyBackward,
        KernelKind::LayerNormBackward,
        KernelKind::Sgd,
    ];

    /// The name workload files use.
    pub fn as_str(self) -> &'static str {
        match self {
            KernelKind::Gemm => "gemm",
            KernelKind::Conv2d => "conv2d",
            KernelKind::Conv2dBackwardData => "conv2d_backward_data",
            KernelKind::Conv2dBackwardWeights => "conv2d_backward_weights",
            KernelKind::BatchNorm => "batch_norm",
            KernelKind::BatchNormTrain => "batch_norm_train",
            KernelKind::BatchNormBackward => "batch_norm_backward",
            KernelKind::BatchNormReluTrain => "batch_norm_relu_train",
            KernelKind::BatchNormReluBackward => "batch_norm_relu_backward",
            KernelKind::BatchNormAddReluTrain => "batch_norm_add_relu_train",
            KernelKind::Relu => "relu",
            KernelKind::ReluBackward => "relu_backward",
            KernelKind::ReluBackwardAdd => "relu_backward_add",
            KernelKind::Add => "add",
            KernelKind::MaxPool => "max_pool",
            KernelKind::MaxPoolBackward => "max_pool_backward",
            KernelKind::AvgPool => "avg_pool",
            KernelKind::AvgPoolBackward => "avg_pool_backward",
            KernelKind::Softmax => "softmax",
            KernelKind::SoftmaxCrossEntropyBackward => "softmax_cross_entropy_backward",
            KernelKind::LayerNorm => "layer_norm",
            KernelKind::LayerNormBackward => "layer_norm_backward",
            KernelKind::Sgd => "sgd",
        }
    }

    /// Whether this is the gradient of some forward kernel.
    pub fn is_backward(self) -> bool {
        self.as_str().ends_with("_backward")
            || matches!(
                self,
                KernelKind::Conv2dBackwardData
                    | KernelKind::Conv2dBackwardWeights
                    | KernelKind::ReluBackwardAdd
            )
    }

    /// Every name, comma-separated (for error messages and help text).
    pub fn names_joined() -> String {
        KernelKind::ALL.map(KernelKind::as_str).join(", ")
    }
}

impl fmt::Display for KernelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for KernelKind {
    type Err = KernelError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        let wanted = name.trim();
        KernelKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == wanted)
            .ok_or_else(|| KernelError::UnknownKind {
                name: name.to_string(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_from_str_and_serde() {
        for kind in KernelKind::ALL {
            assert_eq!(kind.as_str().parse::<KernelKind>().unwrap(), kind);
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{kind}\""));
            assert_eq!(serde_json::from_str::<KernelKind>(&json).unwrap(), kind);
        }
    }

    #[test]
    fn unknown_name_lists_every_valid_one() {
        let message = "conv3d".parse::<KernelKind>().unwrap_err().to_string();
        assert!(message.starts_with("unknown kernel `conv3d`"), "{message}");
        for kind in KernelKind::ALL {
            assert!(message.contains(kind.as_str()), "{message} lacks {kind}");
        }
    }

    #[test]
    fn backward_kinds_are_marked() {
        assert!(KernelKind::Conv2dBackwardWeights.is_backward());
        assert!(KernelKind::ReluBackward.is_backward());
        assert!(KernelKind::BatchNormReluBackward.is_backward());
        assert!(KernelKind::ReluBackwardAdd.is_backward());
        assert!(!KernelKind::BatchNormAddReluTrain.is_backward());
        assert!(!KernelKind::BatchNormReluTrain.is_backward());
        assert!(!KernelKind::Conv2d.is_backward());
        assert!(!KernelKind::Sgd.is_backward());
    }
}
