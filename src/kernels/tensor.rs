//! [`Tensor`]: a dense row-major `f32` array with its shape.
//!
//! Images are NCHW, matrices (rows, columns); the last dimension is contiguous.
#![forbid(unsafe_code)]

use super::error::KernelError;

/// A dense row-major `f32` tensor.
///
/// ```
/// use enginetop::kernels::Tensor;
/// let image = Tensor::zeros(&[2, 3, 4, 4]); // N=2 images, C=3 channels, 4x4 pixels
/// assert_eq!(image.len(), 96);
/// let weights = Tensor::random(&[8, 3, 3, 3], 42);
/// assert!(weights.data.iter().all(|w| (-1.0..1.0).contains(w)));
/// assert!(Tensor::from_vec(&[2, 2], vec![1.0; 3]).is_err());
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    /// Dimensions, outermost first.
    pub shape: Vec<usize>,
    /// `shape.iter().product()` values, row-major.
    pub data: Vec<f32>,
}

impl Tensor {
    /// A tensor of zeros.
    pub fn zeros(shape: &[usize]) -> Self {
        Self::filled(shape, 0.0)
    }

    /// A tensor with every value `value`.
    pub fn filled(shape: &[usize], value: f32) -> Self {
        Tensor {
            shape: shape.to_vec(),
            data: vec![value; shape.iter().product()],
        }
    }

    /// Values uniform in `[-1, 1)` from a generator seeded with `seed` (same seed, same tensor).
    pub fn random(shape: &[usize], seed: u64) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed);
        let len = shape.iter().product();
        Tensor {
            shape: shape.to_vec(),
            data: (0..len).map(|_| rng.f32() * 2.0 - 1.0).collect(),
        }
    }

    /// `data` with shape `shape`, if it holds exactly that many values.
    pub fn from_vec(shape: &[usize], data: Vec<f32>) -> Result<Self, KernelError> {
        let expected: usize = shape.iter().product();
        if data.len() != expected {
            return Err(KernelError::DataLength {
                shape: shape.to_vec(),
                expected,
                got: data.len(),
            });
        }
        Ok(Tensor {
            shape: shape.to_vec(),
            data,
        })
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether it holds no values.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// An order-sensitive checksum of the values (their bit patterns), for checking that two
    /// runs produced bitwise the same tensor.
    pub fn checksum(&self) -> u64 {
        // FNV-1a over the f32 bit patterns.
        self.data.iter().fold(0xcbf2_9ce4_8422_2325, |hash, value| {
            (hash ^ u64::from(value.to_bits())).wrapping_mul(0x0100_0000_01b3)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_is_reproducible_per_seed() {
        let a = Tensor::random(&[3, 5], 7);
        assert_eq!(a, Tensor::random(&[3, 5], 7));
        assert_ne!(a, Tensor::random(&[3, 5], 8));
    }

    #[test]
    fn from_vec_names_the_shape_and_lengths() {
        let message = Tensor::from_vec(&[2, 3], vec![0.0; 5])
            .unwrap_err()
            .to_string();
        assert!(message.contains("[2, 3]") && message.contains("6") && message.contains("5"));
    }

    #[test]
    fn checksum_sees_order_and_sign() {
        let a = Tensor::from_vec(&[2], vec![1.0, 2.0]).unwrap();
        let b = Tensor::from_vec(&[2], vec![2.0, 1.0]).unwrap();
        let c = Tensor::from_vec(&[2], vec![1.0, -2.0]).unwrap();
        assert_ne!(a.checksum(), b.checksum());
        assert_ne!(a.checksum(), c.checksum());
    }
}
