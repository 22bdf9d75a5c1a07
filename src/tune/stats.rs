//! A point's figure from its windows: the median and the spread (the median absolute
//! deviation), both robust to a disturbed window, and when two points are too close to tell
//! apart.
#![forbid(unsafe_code)]

use super::search::{PointResult, MIN_NOISE};

/// The median of `samples` (the mean of the middle two for an even count; 0 when empty).
pub(crate) fn median(samples: &[f64]) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    match sorted.len() % 2 {
        1 => sorted[mid],
        _ => (sorted[mid - 1] + sorted[mid]) / 2.0,
    }
}

/// The median absolute deviation of `samples` from their median (0 for fewer than two):
/// one disturbed window of five moves it little, where it would double the range.
pub(crate) fn spread(samples: &[f64]) -> f64 {
    if samples.len() < 2 {
        return 0.0;
    }
    let center = median(samples);
    let deviations: Vec<f64> = samples.iter().map(|x| (x - center).abs()).collect();
    median(&deviations)
}

/// Whether `a` and `b` are within noise of each other: their medians differ by no more than
/// the two spreads together, or `MIN_NOISE` of the larger median (a point measured once
/// has no spread of its own, and two windows rarely agree closer than that).
pub(super) fn within_noise(a: &PointResult, b: &PointResult) -> bool {
    let floor = MIN_NOISE * a.median.abs().max(b.median.abs());
    let noise = (a.spread + b.spread).max(floor);
    (a.median - b.median).abs() <= noise
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A small use of `within_noise`.
    #[test]
    fn within_noise_example() {
        use crate::tune::stats::within_noise;
        use crate::tune::{Point, PointResult};
        let point = Point { inter: 1, intra: 1 };
        let a = PointResult::new(point, vec![100.0, 104.0, 96.0]); // spread 4
        let b = PointResult::new(point, vec![103.0, 103.5, 102.5]); // spread 0.5
        assert!(within_noise(&a, &b)); // 3 apart, spreads 4 and 0.5
        let c = PointResult::new(point, vec![150.0, 151.0, 149.0]);
        assert!(!within_noise(&a, &c));
    }

    #[test]
    fn median_and_spread() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
        assert_eq!(spread(&[5.0]), 0.0);
        assert_eq!(spread(&[1.0, 5.0, 2.0]), 1.0); // deviations 1, 3, 0
        assert_eq!(spread(&[10.0, 11.0, 9.0, 10.0, 50.0]), 1.0);
    }
}
