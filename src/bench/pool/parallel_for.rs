//! parallel_for: the sum of `sqrt` over `f32` values `(i % 1000) * 0.5`, through our pools'
//! cost-model `parallel_for` (cost {4 bytes loaded, 0 stored, 10 cycles} per element) and
//! through rayon's `par_iter`. Each block sums into an `f64`; every run's sum is checked
//! against the sequential one, so a pool that loses or repeats a block fails the benchmark.
#![forbid(unsafe_code)]

use std::time::Instant;

use rayon::prelude::*;

use super::contender::{Backend, Runner};
use super::{BenchError, Metric};
use crate::pool::parallel_for::{parallel_for, Cost};
use crate::pool::ThreadPool;
use crate::sync::Mutex;

/// The reference cost of one element: one `f32` loaded, a square root and an add.
const SUM_SQRT_COST: Cost = Cost {
    bytes_loaded: 4.0,
    bytes_stored: 0.0,
    compute_cycles: 10.0,
};

/// Sums of different block orders may differ in the last bits of an `f64`, no more.
const SUM_TOLERANCE: f64 = 1e-9;

/// The values summed and their sequential sum, made once per benchmark.
pub(super) struct SumSqrtInput {
    values: Vec<f32>,
    expected: f64,
}

impl SumSqrtInput {
    /// `len` values `(i % 1000) * 0.5`.
    pub(super) fn new(len: usize) -> Self {
        let values: Vec<f32> = (0..len).map(|i| (i % 1000) as f32 * 0.5).collect();
        let expected = sum_sqrt(&values);
        SumSqrtInput { values, expected }
    }
}

/// One rep: one parallel sum, timed in ms, checked against the sequential sum.
pub(super) fn parallel_for_once(
    runner: &Runner,
    input: &SumSqrtInput,
) -> Result<Metric, BenchError> {
    let start = Instant::now();
    let sum = match &runner.backend {
        Backend::Ours(pool) => sum_sqrt_on_pool(pool.as_dyn(), &input.values),
        Backend::Rayon(pool) => sum_sqrt_on_rayon(pool, &input.values),
    };
    let ms = start.elapsed().as_secs_f64() * 1e3;
    if (sum - input.expected).abs() > SUM_TOLERANCE * input.expected.abs() {
        return Err(BenchError::WrongSum {
            pool: runner.contender.name().to_string(),
            got: sum,
            expected: input.expected,
        });
    }
    Ok(Metric::Ms { ms })
}

/// The sum through our cost-model `parallel_for`: each block adds its partial sum under a lock.
fn sum_sqrt_on_pool(pool: &dyn ThreadPool, values: &[f32]) -> f64 {
    let total = Mutex::new(0.0_f64);
    parallel_for(pool, values.len(), SUM_SQRT_COST, |first, last| {
        let block_sum = sum_sqrt(&values[first..last]);
        *total.lock() += block_sum;
    });
    let sum = *total.lock();
    sum
}

/// The sum through rayon's parallel iterator.
fn sum_sqrt_on_rayon(pool: &rayon::ThreadPool, values: &[f32]) -> f64 {
    pool.install(|| {
        values
            .par_iter()
            .map(|&value| f64::from(value.sqrt()))
            .sum()
    })
}

/// The sequential sum of one block.
fn sum_sqrt(values: &[f32]) -> f64 {
    values.iter().map(|&value| f64::from(value.sqrt())).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::{Pool, PoolKind, PoolOptions};

    #[test]
    fn values_follow_the_reference_pattern() {
        let input = SumSqrtInput::new(2001);
        assert_eq!(input.values[0], 0.0);
        assert_eq!(input.values[999], 499.5);
        assert_eq!(input.values[1000], 0.0);
        assert_eq!(input.values[2000], 0.0);
    }

    #[test]
    fn pool_sum_matches_the_sequential_sum() {
        let pool = Pool::new(PoolOptions::new(PoolKind::Simple, 2, "sum-test")).unwrap();
        let input = SumSqrtInput::new(12_345);
        let sum = sum_sqrt_on_pool(pool.as_dyn(), &input.values);
        assert!((sum - input.expected).abs() <= SUM_TOLERANCE * input.expected);
    }
}
