//! [`KernelError`]: what a kernel says when its inputs do not fit together.
//!
//! Every message names the kernel, the tensor and the fix, e.g.
//! `conv2d: input has 3 channels but the weight expects 4`.
#![forbid(unsafe_code)]

/// Why a kernel refused to run, or a tensor could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// A tensor's data does not fill its shape.
    #[error(
        "a tensor of shape {shape:?} holds {expected} values but {got} were given; \
         give data whose length is the product of the shape"
    )]
    DataLength {
        /// The shape asked for.
        shape: Vec<usize>,
        /// The product of the shape.
        expected: usize,
        /// The data length given.
        got: usize,
    },
    /// Inputs, outputs or parameters of a kernel call that do not fit together.
    #[error("{kernel}: {detail}")]
    Shape {
        /// The kernel (`conv2d`, `batch_norm_backward`, ...).
        kernel: &'static str,
        /// What does not fit, and how to make it fit.
        detail: String,
    },
}

impl KernelError {
    /// A [`KernelError::Shape`] for `kernel`.
    pub(crate) fn shape(kernel: &'static str, detail: impl Into<String>) -> Self {
        KernelError::Shape {
            kernel,
            detail: detail.into(),
        }
    }
}

/// Checks that tensor `name` of `kernel` has exactly `expected` as its shape.
pub(crate) fn expect_shape(
    kernel: &'static str,
    name: &str,
    shape: &[usize],
    expected: &[usize],
) -> Result<(), KernelError> {
    if shape == expected {
        return Ok(());
    }
    Err(KernelError::shape(
        kernel,
        format!("{name} has shape {shape:?} but must be {expected:?}; allocate it with that shape"),
    ))
}

/// Checks that tensor `name` of `kernel` has `rank` dimensions and returns them.
pub(crate) fn expect_rank<const RANK: usize>(
    kernel: &'static str,
    name: &str,
    shape: &[usize],
    layout: &str,
) -> Result<[usize; RANK], KernelError> {
    shape.try_into().map_err(|_| {
        KernelError::shape(
            kernel,
            format!(
                "{name} has shape {shape:?} but must have {RANK} dimensions ({layout}); reshape it"
            ),
        )
    })
}
