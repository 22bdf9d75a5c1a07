//! TODO(lead): switch to pool::parallel_for::parallel_for when merged, and delete this file.
//!
//! A stand-in with the exact signature of the cost-model `parallel_for` another engineer is
//! writing in `crate::pool::parallel_for`, so the benchmark compiles against that API today.
//! It does NOT use the pool: it cuts `n` into `4 * threads` blocks, as the real one's first
//! guess does, and runs them one after another on the caller. Its timings measure a
//! sequential sum, not a pool.
#![forbid(unsafe_code)]

use crate::pool::ThreadPool;

/// The cost of one element, as the real `parallel_for` takes it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Cost {
    /// Bytes each element loads.
    pub bytes_loaded: f64,
    /// Bytes each element stores.
    pub bytes_stored: f64,
    /// Cycles each element computes.
    pub compute_cycles: f64,
}

/// Calls `f(first, last)` on blocks covering `[0, n)`, sequentially on the caller.
pub(crate) fn parallel_for(
    pool: &dyn ThreadPool,
    n: usize,
    cost: Cost,
    f: impl Fn(usize, usize) + Sync,
) {
    let _unused_by_the_stand_in = cost;
    let block = n.div_ceil(4 * pool.num_threads().max(1)).max(1);
    for first in (0..n).step_by(block) {
        f(first, (first + block).min(n));
    }
}
