//! [`Work`]: what one kernel call costs, in floating-point operations and bytes.
#![forbid(unsafe_code)]

use std::ops::Add;
use std::time::Duration;

/// The work of one kernel call: floating-point operations (a multiply-add counts 2) and the
/// bytes its inputs and outputs occupy (each read or written once; caches make real traffic
/// lower for GEMM and higher for strided access).
///
/// ```
/// use enginetop::kernels::{GemmShape, Work};
/// use std::time::Duration;
/// let work = GemmShape { m: 1000, n: 1000, k: 1000 }.work();
/// assert_eq!(work.flops, 2e9);
/// assert_eq!(work.gflops_per_s(Duration::from_millis(100)), 20.0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Work {
    /// Floating-point operations.
    pub flops: f64,
    /// Bytes read plus bytes written.
    pub bytes: f64,
}

impl Work {
    /// `flops` operations over `values_moved` `f32` values read or written.
    pub fn new(flops: f64, values_moved: f64) -> Self {
        Work {
            flops,
            bytes: values_moved * F32_BYTES,
        }
    }

    /// Achieved GFLOP/s if the call took `elapsed` (0 for a zero duration).
    pub fn gflops_per_s(&self, elapsed: Duration) -> f64 {
        let seconds = elapsed.as_secs_f64();
        if seconds > 0.0 {
            self.flops / seconds / 1e9
        } else {
            0.0
        }
    }
}

impl Add for Work {
    type Output = Work;

    fn add(self, other: Work) -> Work {
        Work {
            flops: self.flops + other.flops,
            bytes: self.bytes + other.bytes,
        }
    }
}

/// Bytes per `f32`.
pub(crate) const F32_BYTES: f64 = 4.0;
