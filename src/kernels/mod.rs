//! Real op bodies on the CPU: GEMM, convolution, normalization, pooling, element-wise ops and
//! the SGD update, each parallelized through the intra-op pool's [`parallel_for`].
//!
//! # What is here
//! | kernel | forward | backward |
//! | --- | --- | --- |
//! | GEMM | [`gemm`] (`C = alpha op(A) op(B) + beta C`), [`matmul`] | the same call with transposes |
//! | convolution | [`conv2d`] (im2col + GEMM) | [`conv2d_backward_data`], [`conv2d_backward_weights`] |
//! | batch norm | [`batch_norm_inference`], [`batch_norm_train`], [`batch_norm_train_activated`] (fused relu), [`batch_norm_add_relu_train`] (fused residual add and relu) | [`batch_norm_backward`], [`batch_norm_backward_recomputed`], [`batch_norm_relu_backward_recomputed`] |
//! | element-wise | [`relu`], [`add`] | [`relu_backward`], [`relu_backward_add`] (add's gradient is its input) |
//! | pooling | [`max_pool`], [`global_avg_pool`] | [`max_pool_backward`], [`global_avg_pool_backward`] |
//! | softmax | [`softmax`] (row-wise) | [`softmax_cross_entropy_backward`] |
//! | layer norm | [`layer_norm`] | [`layer_norm_backward`] |
//! | SGD | [`sgd_update`] (plain or with momentum) | - |
//!
//! [`KernelKind`] names every kernel the way workload files do (`conv2d_grad_input`), with the
//! workload-only ones (copies, `sum_expr`, `fold`, `sleep_us`), and registers each with its
//! facts: operands, parameters, shape rule and FLOP count, which the workload loader checks.
//!
//! That is enough for a ResNet-like training step (conv, batch-norm, relu, residual add, pooling,
//! a fully connected GEMM, softmax cross-entropy, then all their gradients and an SGD update)
//! and a transformer-like one (GEMMs, softmax, layer-norm, add). Not here: the backward of
//! `add` (the gradient passes through unchanged to both inputs, no kernel needed), attention's
//! masked softmax, dropout, and any data type but `f32`.
//!
//! # Layout
//! Every tensor is a dense row-major [`Tensor`] of `f32`. Images are NCHW (batch, channels,
//! height, width); matrices are (rows, columns); a convolution weight is (out channels, in
//! channels, kernel height, kernel width). A kernel writes into an output tensor the caller
//! allocated with the right shape (each kernel's geometry type says which), so an engine can
//! keep its buffers; a wrong shape is a [`KernelError`] naming the tensor and the fix.
//!
//! # Parallelism
//! Each kernel cuts its output into *items* of a fixed size that depends only on the problem's
//! shape (a block of GEMM rows, one image plane, one channel, a chunk of elements), and hands
//! the items to [`parallel_for`] with an honest [`Cost`](crate::pool::parallel_for::Cost) per
//! item, so Eigen's cost model decides how many threads and how big a block (see [`item_cost`]).
//! The GEMM crate runs single-threaded inside an item: all intra-op threading is ours and shows
//! up in the pool's counters.
//!
//! # Determinism
//! Every result is bitwise identical on every pool kind and thread count (on one machine: the
//! `gemm` crate picks its SIMD kernels at run time, so an AVX2 machine and an AVX-512 one may
//! differ in the last bits). An item is computed by one thread, start to finish, by the same
//! sequential code whatever thread runs it, and the item partition never depends on the
//! thread count. Reductions follow from that: a sum lies either inside one item (a softmax
//! row, a channel's batch statistics, one block of GEMM rows with its whole `k` loop) or is
//! accumulated item by item in a fixed order (the weight gradient of a convolution sums the
//! images in order inside each block of weight rows). No kernel combines partial sums in the
//! order threads happen to finish.
//!
//! # Cost of a call
//! Every kernel returns the [`Work`] it did (floating-point operations and bytes moved), and
//! each geometry type computes the same figure from shapes alone, so a driver can report
//! GFLOP/s and a simulated device can price an op without running it.
//!
//! # Safety
//! Every file here is `#![forbid(unsafe_code)]` but one: `gemm/call.rs` holds the single
//! `unsafe` call into the `gemm` crate, behind checks of every stride and length.
//!
//! [`parallel_for`]: crate::pool::parallel_for::parallel_for
#![deny(unsafe_code)]

mod batch_norm;
mod conv;
mod elementwise;
mod error;
pub(crate) mod gemm;
mod kind;
mod layer_norm;
mod norm;
pub(crate) mod par;
pub(crate) mod pooling;
mod rows;
mod scratch;
mod sgd;
mod softmax;
mod spec;
mod tensor;
mod work;

pub use batch_norm::{
    batch_norm_add_relu_train, batch_norm_backward, batch_norm_backward_recomputed,
    batch_norm_inference, batch_norm_relu_backward_recomputed, batch_norm_stats, batch_norm_train,
    batch_norm_train_activated, Activation, BatchNormGeometry, BatchStats,
};
pub use conv::{
    conv2d, conv2d_backward_data, conv2d_backward_weights, Conv2dGeometry, Conv2dParams,
};
pub use elementwise::{add, relu, relu_backward, relu_backward_add};
pub use error::KernelError;
pub use gemm::{gemm, matmul, GemmShape, GemmSpec, Transpose};
pub use kind::KernelKind;
pub use layer_norm::{layer_norm, layer_norm_backward};
pub use norm::{NormGrads, NormParams};
pub use par::item_cost;
pub use pooling::{
    avg_pool, avg_pool_backward, global_avg_pool, global_avg_pool_backward, max_pool,
    max_pool_backward, PoolGeometry, PoolParams,
};
pub use sgd::{sgd_update, SgdParams};
pub use softmax::{softmax, softmax_cross_entropy_backward};
pub(crate) use spec::{numel, shape_text, Operand, Operands, ParamKind};
pub use spec::{KernelParams, ParamValue};
pub use tensor::Tensor;
pub use work::Work;
