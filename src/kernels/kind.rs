//! [`KernelKind`]: every kernel, by the name a workload file gives it, and the registration
//! table that ties each name to its [`KernelSpec`] (operands, parameters, shape rule, FLOPs;
//! see [`rules`]). Adding a kernel: its body in its own file, its spec in `rules`, one line
//! here, and its call in the workload driver's `KernelCall`.
#![forbid(unsafe_code)]

use std::fmt;
use std::str::FromStr;

use super::spec::{rules, KernelSpec};

/// Generates [`KernelKind`] from the registration table: the enum, `ALL`, `name()` and
/// `spec()`.
macro_rules! kernel_kinds {
    ($($(#[$vmeta:meta])* $variant:ident = $text:literal => $spec:path,)+) => {
        /// Every kernel, by the name a workload file gives it (`kernel = "conv2d"`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum KernelKind {
            $($(#[$vmeta])* $variant,)+
        }

        impl KernelKind {
            /// Every kernel, in registration order.
            pub const ALL: &'static [KernelKind] = &[$(KernelKind::$variant,)+];

            /// The name a workload file uses.
            pub fn name(self) -> &'static str {
                match self {
                    $(KernelKind::$variant => $text,)+
                }
            }

            /// Its operands, parameters, shape rule and FLOP count.
            pub(crate) fn spec(self) -> &'static KernelSpec {
                match self {
                    $(KernelKind::$variant => &$spec,)+
                }
            }
        }
    };
}

kernel_kinds! {
    /// Matrix product: `a [m,k] x b [k,n] -> c [m,n]`.
    Gemm = "gemm" => rules::GEMM,
    /// 2-D convolution, NCHW.
    Conv2d = "conv2d" => rules::CONV2D,
    /// Batch normalisation over N and the spatial dims, per channel.
    BatchNorm = "batch_norm" => rules::BATCH_NORM,
    /// `relu(batch_norm(x))` in one pass (batch norm with a fused activation).
    BatchNormRelu = "batch_norm_relu" => rules::BATCH_NORM_RELU,
    /// `relu(batch_norm(x) + residual)` in one pass: a residual block's last batch norm,
    /// its residual add and its relu.
    BatchNormAddRelu = "batch_norm_add_relu" => rules::BATCH_NORM_ADD_RELU,
    /// `max(x, 0)`.
    Relu = "relu" => rules::RELU,
    /// Elementwise sum of two tensors.
    Add = "add" => rules::ADD,
    /// Max pooling, NCHW.
    MaxPool = "max_pool" => rules::MAX_POOL,
    /// Average pooling, NCHW.
    AvgPool = "avg_pool" => rules::AVG_POOL,
    /// Softmax over the last dimension.
    Softmax = "softmax" => rules::SOFTMAX,
    /// Layer normalisation over the last dimension.
    LayerNorm = "layer_norm" => rules::LAYER_NORM,
    /// `weight -= lr * grad`, in place.
    Sgd = "sgd" => rules::SGD,
    /// Gradient of conv2d with respect to its input.
    Conv2dGradInput = "conv2d_grad_input" => rules::CONV2D_GRAD_INPUT,
    /// Gradient of conv2d with respect to its weight.
    Conv2dGradWeight = "conv2d_grad_weight" => rules::CONV2D_GRAD_WEIGHT,
    /// Gradient of training batch norm: input gradient and scale/shift gradients.
    BatchNormGrad = "batch_norm_grad" => rules::BATCH_NORM_GRAD,
    /// Gradient of `batch_norm_relu` (and of `batch_norm_add_relu` with respect to its
    /// input): the relu's gradient applied to the incoming one as it is read (the forward
    /// output is the mask), then batch_norm_grad's.
    BatchNormReluGrad = "batch_norm_relu_grad" => rules::BATCH_NORM_RELU_GRAD,
    /// Gradient of relu.
    ReluGrad = "relu_grad" => rules::RELU_GRAD,
    /// `addend + relu_grad(grad_output, forward)` in one pass: where a residual block's
    /// shortcut gradient (the masked one) meets its main path's.
    ReluGradAdd = "relu_grad_add" => rules::RELU_GRAD_ADD,
    /// Gradient of max pooling.
    MaxPoolGrad = "max_pool_grad" => rules::MAX_POOL_GRAD,
    /// Gradient of average pooling.
    AvgPoolGrad = "avg_pool_grad" => rules::AVG_POOL_GRAD,
    /// Gradient of softmax cross-entropy with respect to the logits.
    SoftmaxXentGrad = "softmax_xent_grad" => rules::SOFTMAX_XENT_GRAD,
    /// Host-to-device copy (runs on the GPU's copy queue).
    CopyH2d = "copy_h2d" => rules::COPY_H2D,
    /// Device-to-host copy (runs on the GPU's copy queue).
    CopyD2h = "copy_d2h" => rules::COPY_D2H,
    /// MXNet's RandSumExpr step: `out = sum(terms) / (terms + 1)`, then sleep `us`.
    SumExpr = "sum_expr" => rules::SUM_EXPR,
    /// A cheap hash fold of the inputs into the output (engine-overhead workloads).
    Fold = "fold" => rules::FOLD,
    /// Sleeps `us` microseconds (IO-like stages).
    SleepUs = "sleep_us" => rules::SLEEP_US,
}

impl KernelKind {
    /// Every name, comma-separated, for messages.
    pub(crate) fn names() -> String {
        KernelKind::ALL
            .iter()
            .map(|kind| kind.name())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl FromStr for KernelKind {
    type Err = ();

    /// The kernel of exactly this name; the caller words the error (it knows where the
    /// name came from).
    fn from_str(text: &str) -> Result<Self, ()> {
        KernelKind::ALL
            .iter()
            .copied()
            .find(|kind| kind.name() == text)
            .ok_or(())
    }
}

impl fmt::Display for KernelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        for kind in KernelKind::ALL {
            assert_eq!(kind.name().parse::<KernelKind>(), Ok(*kind));
            assert_eq!(kind.to_string(), kind.name());
        }
        let mut names: Vec<&str> = KernelKind::ALL.iter().map(|kind| kind.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), KernelKind::ALL.len());
        assert!("conv2d_backward_data".parse::<KernelKind>().is_err());
        assert!(KernelKind::names().starts_with("gemm, conv2d, batch_norm, "));
    }
}
