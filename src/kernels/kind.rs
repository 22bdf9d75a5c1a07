//! [`KernelKind`]: every kernel, by the name a workload file gives it, and the registration
//! table that ties each name to its [`KernelSpec`] (operands, parameters, shape rule, FLOPs;
//! see [`rules`]). Adding a kernel: its body in its own file, its spec in `rules`, one line
//! here (its name is the variant's, in snake case), and its call in the workload driver's
//! `KernelCall`.
#![forbid(unsafe_code)]

use strum::{Display, EnumString, IntoStaticStr, VariantArray};

use super::spec::{rules, KernelSpec};

/// Generates [`KernelKind`] from the registration table (variant => spec): the enum, whose
/// names strum derives (the variant's name in snake case), `ALL` and `spec()`.
macro_rules! kernel_kinds {
    ($($(#[$vmeta:meta])* $variant:ident => $spec:path,)+) => {
        /// Every kernel, by the name a workload file gives it (`kernel = "conv2d"`).
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash, Display, EnumString, IntoStaticStr, VariantArray,
        )]
        #[strum(serialize_all = "snake_case")]
        pub enum KernelKind {
            $($(#[$vmeta])* $variant,)+
        }

        impl KernelKind {
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
    Gemm => rules::GEMM,
    /// 2-D convolution, NCHW.
    Conv2d => rules::CONV2D,
    /// Batch normalisation over N and the spatial dims, per channel.
    BatchNorm => rules::BATCH_NORM,
    /// `relu(batch_norm(x))` in one pass (batch norm with a fused activation).
    BatchNormRelu => rules::BATCH_NORM_RELU,
    /// `relu(batch_norm(x) + residual)` in one pass: a residual block's last batch norm,
    /// its residual add and its relu.
    BatchNormAddRelu => rules::BATCH_NORM_ADD_RELU,
    /// `max(x, 0)`.
    Relu => rules::RELU,
    /// Elementwise sum of two tensors.
    Add => rules::ADD,
    /// Max pooling, NCHW.
    MaxPool => rules::MAX_POOL,
    /// Average pooling, NCHW.
    AvgPool => rules::AVG_POOL,
    /// Softmax over the last dimension.
    Softmax => rules::SOFTMAX,
    /// Layer normalisation over the last dimension.
    LayerNorm => rules::LAYER_NORM,
    /// `weight -= lr * grad`, in place.
    Sgd => rules::SGD,
    /// Gradient of conv2d with respect to its input.
    Conv2dGradInput => rules::CONV2D_GRAD_INPUT,
    /// Gradient of conv2d with respect to its weight.
    Conv2dGradWeight => rules::CONV2D_GRAD_WEIGHT,
    /// Gradient of training batch norm: input gradient and scale/shift gradients.
    BatchNormGrad => rules::BATCH_NORM_GRAD,
    /// Gradient of `batch_norm_relu` (and of `batch_norm_add_relu` with respect to its
    /// input): the relu's gradient applied to the incoming one as it is read (the forward
    /// output is the mask), then batch_norm_grad's.
    BatchNormReluGrad => rules::BATCH_NORM_RELU_GRAD,
    /// Gradient of relu.
    ReluGrad => rules::RELU_GRAD,
    /// `addend + relu_grad(grad_output, forward)` in one pass: where a residual block's
    /// shortcut gradient (the masked one) meets its main path's.
    ReluGradAdd => rules::RELU_GRAD_ADD,
    /// Gradient of max pooling.
    MaxPoolGrad => rules::MAX_POOL_GRAD,
    /// Gradient of average pooling.
    AvgPoolGrad => rules::AVG_POOL_GRAD,
    /// Gradient of softmax cross-entropy with respect to the logits.
    SoftmaxXentGrad => rules::SOFTMAX_XENT_GRAD,
    /// Host-to-device copy (runs on the GPU's copy queue).
    CopyH2d => rules::COPY_H2D,
    /// Device-to-host copy (runs on the GPU's copy queue).
    CopyD2h => rules::COPY_D2H,
    /// MXNet's RandSumExpr step: `out = sum(terms) / (terms + 1)`, then sleep `us`.
    SumExpr => rules::SUM_EXPR,
    /// A cheap hash fold of the inputs into the output (engine-overhead workloads).
    Fold => rules::FOLD,
    /// Sleeps `us` microseconds (IO-like stages).
    SleepUs => rules::SLEEP_US,
}

impl KernelKind {
    /// Every kernel, in registration order.
    pub const ALL: &'static [KernelKind] = KernelKind::VARIANTS;

    /// The name a workload file uses.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Every name, comma-separated, for messages.
    pub(crate) fn names() -> String {
        KernelKind::ALL
            .iter()
            .map(|kind| kind.name())
            .collect::<Vec<_>>()
            .join(", ")
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
        assert_eq!(
            KernelKind::names(),
            "gemm, conv2d, batch_norm, batch_norm_relu, batch_norm_add_relu, relu, add, max_pool, avg_pool, softmax, layer_norm, sgd, conv2d_grad_input, conv2d_grad_weight, batch_norm_grad, batch_norm_relu_grad, relu_grad, relu_grad_add, max_pool_grad, avg_pool_grad, softmax_xent_grad, copy_h2d, copy_d2h, sum_expr, fold, sleep_us"
        );
    }
}
