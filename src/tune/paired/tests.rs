//! The paired decision on synthetic pairs: a known true ratio, a known spread.
use super::*;

const DEFAULT: Point = Point { inter: 2, intra: 2 };
const FEWER: Point = Point { inter: 1, intra: 2 };
const MORE: Point = Point { inter: 4, intra: 2 };

/// The point [`decide`] keeps.
fn picked(default: Point, challengers: &[PairedResult]) -> Point {
    decide(default, challengers).map_or(default, |i| challengers[i].point)
}

/// `n` ratios around `center`, spread evenly over `center ± width` (a deterministic sample
/// of a noise `width` wide).
fn ratios(center: f64, width: f64, n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| center + width * (2.0 * i as f64 / (n - 1) as f64 - 1.0))
        .collect()
}

#[test]
fn a_pick_slower_by_four_percent_with_half_a_percent_of_spread_keeps_the_default() {
    for n in [3, 5, 8, 12] {
        let slower = PairedResult::new(FEWER, ratios(0.96, 0.005, n));
        assert_eq!(slower.verdict, Verdict::Slower, "{n} pairs: {slower:?}");
        assert!(slower.ratio + slower.spread < 1.0, "{slower:?}");
        assert_eq!(picked(DEFAULT, &[slower]), DEFAULT, "{n} pairs");
    }
    // The resnet-like case: 4.5% slower, windows agreeing to 0.4%.
    let resnet = PairedResult::new(FEWER, ratios(0.955, 0.004, 12));
    assert_eq!(picked(DEFAULT, &[resnet]), DEFAULT);
}

#[test]
fn a_tie_goes_to_fewer_threads_and_only_to_fewer() {
    // 0.5% slower in the median, but the pairs disagree by 3%: a tie.
    let tie = PairedResult::new(FEWER, ratios(0.995, 0.03, 12));
    assert_eq!(tie.verdict, Verdict::Tie, "{tie:?}");
    assert_eq!(picked(DEFAULT, std::slice::from_ref(&tie)), FEWER);
    // A tie with more threads than the default keeps the default.
    let more = PairedResult::new(MORE, ratios(1.005, 0.03, 12));
    assert_eq!(more.verdict, Verdict::Tie, "{more:?}");
    assert_eq!(picked(DEFAULT, std::slice::from_ref(&more)), DEFAULT);
    // Of two ties, the fewer threads.
    let fewest = PairedResult::new(Point { inter: 1, intra: 1 }, ratios(0.99, 0.03, 12));
    assert_eq!(
        picked(DEFAULT, &[more, tie, fewest]),
        Point { inter: 1, intra: 1 }
    );
}

#[test]
fn a_faster_pick_is_kept_whatever_its_threads() {
    let faster = PairedResult::new(MORE, ratios(1.2, 0.02, 8));
    assert_eq!(faster.verdict, Verdict::Faster);
    assert_eq!(picked(DEFAULT, std::slice::from_ref(&faster)), MORE);
    // A win beats a tie with fewer threads.
    let tie = PairedResult::new(FEWER, ratios(1.0, 0.03, 8));
    assert_eq!(picked(DEFAULT, &[tie, faster]), MORE);
    // Latency: step times, shorter is faster.
    let windows = [0.05, 0.051, 0.049, 0.05];
    let default = [0.08, 0.081, 0.079, 0.08];
    let latency = PairedResult::measured(Objective::Latency, FEWER, &windows, &default);
    assert_eq!(latency.verdict, Verdict::Faster, "{latency:?}");
    assert!((latency.ratio - 1.6).abs() < 0.05, "{latency:?}");
}

#[test]
fn too_few_pairs_confirm_nothing() {
    let two = PairedResult::new(MORE, vec![1.5, 1.6]);
    assert_eq!(two.verdict, Verdict::Unconfirmed);
    assert_eq!(picked(DEFAULT, &[two]), DEFAULT);
    // Pairs are windows of the same round: an unpaired window counts for nothing.
    let one = PairedResult::measured(Objective::Throughput, MORE, &[2.0, 2.0, 2.0], &[1.0]);
    assert_eq!(one.ratios, vec![2.0]);
    assert_eq!(picked(DEFAULT, &[]), DEFAULT);
}

#[test]
fn one_disturbed_pair_does_not_turn_a_loss_into_a_tie() {
    let mut disturbed = ratios(0.955, 0.004, 12);
    disturbed[3] = 1.4; // the default's window of that pair ran while something else did
    let result = PairedResult::new(FEWER, disturbed);
    assert_eq!(result.verdict, Verdict::Slower, "{result:?}");
}

#[test]
fn the_band_leaves_out_more_extremes_as_pairs_grow() {
    // The sign test at 5% a side: 1 in 32 for 5 pairs (the extremes bound the median),
    // 9 in 256 for 8 (the second), 79 in 4096 for 12 (the third).
    assert_eq!(band_rank(2), 1);
    assert_eq!(band_rank(5), 1);
    assert_eq!(band_rank(8), 2);
    assert_eq!(band_rank(12), 3);
    assert_eq!(paired_spread(&[1.0]), 0.0);
    // Five pairs: the band is the whole range; the spread its larger half.
    assert!((paired_spread(&[0.9, 1.0, 1.0, 1.02, 1.05]) - 0.1).abs() < 1e-12);
}
