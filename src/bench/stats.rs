//! Summary statistics for benchmark samples: median and nearest-rank percentiles.
//!
//! The C++ peers use the same definitions, so their figures compare with ours:
//! - median: the middle sample, or the mean of the two middle ones for an even count;
//! - percentile `p`: the sample of rank `ceil(p / 100 * n)` (1-based) in sorted order.
#![forbid(unsafe_code)]

/// The median of `samples`, or `None` when there are none.
pub(crate) fn median(samples: &[f64]) -> Option<f64> {
    let sorted = sorted(samples);
    let middle = sorted.len() / 2;
    match sorted.len() {
        0 => None,
        len if len % 2 == 1 => Some(sorted[middle]),
        _ => Some((sorted[middle - 1] + sorted[middle]) / 2.0),
    }
}

/// The nearest-rank `percentile` (0 to 100) of `samples`, or `None` when there are none.
pub(crate) fn percentile(samples: &[f64], percentile: f64) -> Option<f64> {
    let sorted = sorted(samples);
    if sorted.is_empty() {
        return None;
    }
    let fraction = percentile.clamp(0.0, 100.0) / 100.0;
    let rank = (fraction * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

fn sorted(samples: &[f64]) -> Vec<f64> {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small use of `median`.
    #[test]
    fn median_example() {
        use crate::bench::stats::median;
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }

    /// A small use of `percentile`.
    #[test]
    fn percentile_example() {
        use crate::bench::stats::percentile;
        let samples: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&samples, 99.0), Some(99.0));
        assert_eq!(percentile(&samples, 50.0), Some(50.0));
    }

    #[test]
    fn median_of_nothing_is_none() {
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn median_of_one_is_that_one() {
        assert_eq!(median(&[7.5]), Some(7.5));
    }

    #[test]
    fn median_ignores_input_order() {
        assert_eq!(median(&[9.0, 1.0, 5.0, 3.0, 7.0]), Some(5.0));
    }

    #[test]
    fn median_of_even_count_averages_the_middle_pair() {
        assert_eq!(median(&[10.0, 1.0, 3.0, 2.0]), Some(2.5));
    }

    #[test]
    fn median_is_robust_to_one_outlier() {
        assert_eq!(median(&[1.0, 1.1, 1000.0]), Some(1.1));
    }

    #[test]
    fn percentile_of_nothing_is_none() {
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn percentiles_use_nearest_rank() {
        let samples: Vec<f64> = (1..=2000).rev().map(f64::from).collect();
        assert_eq!(percentile(&samples, 50.0), Some(1000.0));
        assert_eq!(percentile(&samples, 99.0), Some(1980.0));
        assert_eq!(percentile(&samples, 100.0), Some(2000.0));
    }

    #[test]
    fn percentile_zero_is_the_minimum_and_out_of_range_clamps() {
        let samples = [5.0, 3.0, 4.0];
        assert_eq!(percentile(&samples, 0.0), Some(3.0));
        assert_eq!(percentile(&samples, -5.0), Some(3.0));
        assert_eq!(percentile(&samples, 250.0), Some(5.0));
    }

    #[test]
    fn p99_of_few_samples_is_the_maximum() {
        assert_eq!(percentile(&[2.0, 1.0, 3.0], 99.0), Some(3.0));
    }
}
