//! The paired check: before a search reports a pick other than the default, each challenger
//! and the default are measured again in alternating windows, and the pick is decided from
//! the per-pair ratios alone ([`decide`]).
//!
//! # Why pairs
//! Two points' separate medians carry the machine's drift between their windows, and their
//! spreads measure each point's noise, not the noise of their ratio. A pair is two windows
//! back to back (challenger and default, the order alternating from round to round, so a
//! steady drift favours neither), and its ratio (the challenger's speed over the default's)
//! cancels whatever the machine did to both. The figure is the median of the ratios.
//!
//! # The paired spread
//! The spread of the median ratio is read off the ratios themselves, without assuming a
//! distribution: sorted, the `j`-th lowest and the `j`-th highest ratio bound the median at
//! the sign test's level ([`ONE_SIDED_ERROR`] each side: the true median is below the `j`-th
//! highest ratio unless at most `j - 1` of `n` fair coin flips came up heads). `j` is the
//! largest that keeps that chance under the level (at least 1), so with more pairs the most
//! extreme ratios are left out and one disturbed window does not widen the band. The spread
//! is the larger distance from the median to either bound: `ratio ± spread` covers both.
//!
//! # The verdict and the pick
//! With fewer than [`MIN_PAIRS`] pairs the challenger is [`Verdict::Unconfirmed`]. Else it
//! is [`Verdict::Slower`] when `ratio + spread < 1` (slower than the default beyond the
//! paired noise), [`Verdict::Faster`] when `ratio - spread > 1`, and a [`Verdict::Tie`]
//! otherwise. [`decide`] keeps the first challenger that is faster; else, among the ties,
//! the one with the fewest threads, if it has fewer than the default (fewer threads leave
//! cores to the rest of the machine for a speed the pairs cannot tell apart); else the
//! default. So a pick is never slower than the default beyond the paired spread, and the
//! preference for fewer threads applies only to a tie the pairs themselves show.
#![forbid(unsafe_code)]

use serde::Serialize;

use super::search::Gain;
use super::space::{Objective, Point};
use super::stats::median;

/// The windows the paired check gets (the default's included): with one challenger this
/// many / 2 pairs, with two this many / 3 rounds of three windows.
pub(crate) const PAIRED_WINDOWS: usize = 24;
/// The fewest pairs that decide: fewer leave the challenger unconfirmed (the default kept).
pub(crate) const MIN_PAIRS: usize = 3;
/// The sign test's chance, each side, that the median ratio lies beyond its band.
pub(crate) const ONE_SIDED_ERROR: f64 = 0.05;

/// What the pairs say of a challenger against the default.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Verdict {
    /// Faster than the default beyond the paired spread.
    Faster,
    /// Within the paired spread of the default.
    Tie,
    /// Slower than the default beyond the paired spread.
    Slower,
    /// Too few pairs to say.
    Unconfirmed,
}

impl Verdict {
    /// The word shown in reports.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Tie => "a tie",
            Verdict::Slower => "slower",
            Verdict::Unconfirmed => "unconfirmed",
        }
    }
}

/// A challenger's pairs against the default.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct PairedResult {
    /// The challenger.
    #[serde(flatten)]
    pub(crate) point: Point,
    /// The median of the pairs' ratios (the challenger's speed over the default's).
    pub(crate) ratio: f64,
    /// The median ratio's paired spread (see the module docs).
    pub(crate) spread: f64,
    /// Every pair's ratio, in the order measured.
    pub(crate) ratios: Vec<f64>,
    /// What the pairs say.
    pub(crate) verdict: Verdict,
}

impl PairedResult {
    /// `point`'s pairs, as `ratios` (the challenger's speed over the default's, per pair).
    pub(crate) fn new(point: Point, ratios: Vec<f64>) -> Self {
        let ratio = median(&ratios);
        let spread = paired_spread(&ratios);
        let verdict = match ratios.len() {
            n if n < MIN_PAIRS => Verdict::Unconfirmed,
            _ if ratio + spread < 1.0 => Verdict::Slower,
            _ if ratio - spread > 1.0 => Verdict::Faster,
            _ => Verdict::Tie,
        };
        PairedResult {
            point,
            ratio,
            spread,
            ratios,
            verdict,
        }
    }

    /// `point` against the default from their windows, paired in order (the `i`-th of each
    /// measured in the same round).
    pub(crate) fn measured(
        objective: Objective,
        point: Point,
        windows: &[f64],
        default: &[f64],
    ) -> Self {
        let ratios = windows
            .iter()
            .zip(default)
            .map(|(&challenger, &default)| objective.speedup(challenger, default))
            .filter(|ratio| ratio.is_finite())
            .collect();
        PairedResult::new(point, ratios)
    }

    /// The paired figure as a gain over the default.
    pub(crate) fn gain(&self) -> Gain {
        Gain {
            ratio: self.ratio,
            spread: self.spread,
            pairs: self.ratios.len(),
        }
    }
}

/// The pick among `challengers` (in order of preference) and `default`, as the index of the
/// challenger kept (`None`: the default): the first faster beyond the paired spread; else
/// the tie with the fewest threads, if fewer than the default's; else the default.
pub(crate) fn decide(default: Point, challengers: &[PairedResult]) -> Option<usize> {
    if let Some(faster) = challengers
        .iter()
        .position(|c| c.verdict == Verdict::Faster)
    {
        return Some(faster);
    }
    (0..challengers.len())
        .filter(|&i| {
            let c = &challengers[i];
            c.verdict == Verdict::Tie && c.point.threads() < default.threads()
        })
        .min_by(|&a, &b| {
            let (a, b) = (&challengers[a], &challengers[b]);
            a.point
                .threads()
                .cmp(&b.point.threads())
                .then(b.ratio.total_cmp(&a.ratio))
        })
}

/// The larger distance from the median of `ratios` to the bounds of its sign-test band (0
/// for fewer than two).
pub(crate) fn paired_spread(ratios: &[f64]) -> f64 {
    if ratios.len() < 2 {
        return 0.0;
    }
    let mut sorted = ratios.to_vec();
    sorted.sort_by(f64::total_cmp);
    let j = band_rank(sorted.len());
    let (low, high) = (sorted[j - 1], sorted[sorted.len() - j]);
    let center = median(&sorted);
    (center - low).max(high - center)
}

/// The rank `j` (from 1) of the band's bounds among `n` sorted ratios: the largest with
/// P(at most `j - 1` heads in `n` fair flips) at most [`ONE_SIDED_ERROR`], at least 1.
fn band_rank(n: usize) -> usize {
    let p = 0.5f64.powi(n as i32);
    // below: P(at most j - 1 heads); choose: C(n, j).
    let (mut j, mut below, mut choose) = (1, p, n as f64);
    while j < n.div_ceil(2) && below + choose * p <= ONE_SIDED_ERROR {
        below += choose * p;
        choose = choose * (n - j) as f64 / (j + 1) as f64;
        j += 1;
    }
    j
}

#[cfg(all(test, not(loom)))]
mod tests;
