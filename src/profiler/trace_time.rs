//! Trace times as viewers read them: serialized microseconds that nest exactly after a
//! viewer's double arithmetic, and the points where a flow arrow can bind to a slice.
//!
//! # Why the serialized `dur` is chosen, not converted
//! Every JSON viewer parses `ts` and `dur` (microseconds) as doubles and computes a slice's
//! end as `ts + dur`. Converting nanoseconds one by one (`ts_ns / 1000`, `dur_ns / 1000`)
//! gives doubles whose sum is off by an ulp either way: `36431.557 + 6.982` is
//! `36438.539000000004`, past a next slice starting at `36438.539`, and the viewer sees a
//! partial overlap. So each slice's `ts` and end are converted on their own, and `dur` is the
//! double for which `ts + dur` is exactly that end ([`exact_duration`]). When no double
//! does (`ts` and the end in different binades, the sums tie and round to even), `dur` is
//! the largest whose sum falls short of the end, and the exporter caps each slice's end at
//! its parent's end as the viewer computes it. Conversion is monotone, so with ends never
//! past their nanosecond and never past their parent's, slices that nest in nanoseconds nest
//! in the parsed doubles: a slice starting at a nanosecond at or after another's end has a
//! `ts` at or after every end a viewer computes for it.
//!
//! # Where a flow binds
//! A JSON flow binds to the slice enclosing its `s` or `f` on its track; one outside any
//! slice is an import error in Perfetto, and one at a slice's exact start can bind to the
//! slice before it. [`SliceIndex::bind`] finds a point strictly inside a slice: the one
//! enclosing the moment, else the last one that ended before it (the work the thread did
//! just before, e.g. the op whose end made the queued op ready).
#![forbid(unsafe_code)]

/// `ns` in microseconds, as written to a trace.
pub(crate) fn micros(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// The duration to write for a slice from `ts` to `end` (both in microseconds, `end >= ts`):
/// `plain` when `ts + plain == end` in double arithmetic, else a double `dur` for which it
/// is, else the largest `dur` with `ts + dur < end`; never one with `ts + dur > end`.
/// (`36431.557 + 6.982` overshoots `36438.539`; the duration written instead is
/// `6.981999999996333`.)
pub(crate) fn exact_duration(ts: f64, end: f64, plain: f64) -> f64 {
    if ts + plain == end {
        return plain;
    }
    let mut dur = (end - ts).max(0.0);
    for _ in 0..8 {
        let sum = ts + dur;
        if sum == end {
            return dur;
        }
        dur = if sum < end {
            next_up(dur)
        } else {
            next_down(dur)
        };
    }
    while dur > 0.0 && ts + dur > end {
        dur = next_down(dur);
    }
    dur.max(0.0)
}

/// The next double above `x` (finite, `>= 0`).
fn next_up(x: f64) -> f64 {
    f64::from_bits(x.to_bits() + 1)
}

/// The next double below `x` (finite, `>= 0`; 0 stays 0).
fn next_down(x: f64) -> f64 {
    if x > 0.0 {
        f64::from_bits(x.to_bits() - 1)
    } else {
        0.0
    }
}

/// The slices of one track, in nanoseconds, for binding flows.
#[derive(Debug, Default)]
pub(crate) struct SliceIndex {
    /// (start, end), sorted by start, longer first at equal starts.
    slices: Vec<(u64, u64)>,
}

/// How far back [`SliceIndex::bind`] looks for a slice enclosing a moment before it takes
/// the last slice that ended.
const ENCLOSING_LOOKBACK: usize = 64;

impl SliceIndex {
    /// An index of `slices` ((start, end) in nanoseconds, in any order).
    pub(crate) fn new(mut slices: Vec<(u64, u64)>) -> Self {
        slices.sort_by_key(|&(start, end)| (start, std::cmp::Reverse(end)));
        SliceIndex { slices }
    }

    /// A moment strictly inside a slice for a flow event at `ts`: `ts` itself when a slice
    /// encloses it (moved one nanosecond in from the slice's edges), else one nanosecond
    /// before the end of the last slice that ended by `ts`. `None` when no slice of at least
    /// 2 ns starts by `ts`.
    pub(crate) fn bind(&self, ts: u64) -> Option<u64> {
        let started = &self.slices[..self.slices.partition_point(|&(start, _)| start <= ts)];
        let long_enough = |&&(start, end): &&(u64, u64)| end - start >= 2;
        let mut last_ended: Option<(u64, u64)> = None;
        for &(start, end) in started.iter().rev().take(ENCLOSING_LOOKBACK) {
            if end - start < 2 {
                continue;
            }
            if ts < end {
                return Some(inside(start, end, ts));
            }
            if last_ended.is_none_or(|(_, best)| end > best) {
                last_ended = Some((start, end));
            }
        }
        let (start, end) =
            last_ended.or_else(|| started.iter().rev().find(long_enough).copied())?;
        Some(inside(start, end, ts.min(end)))
    }
}

/// `ts` moved strictly inside `[start, end]` (which spans at least 2 ns).
pub(crate) fn inside(start: u64, end: u64, ts: u64) -> u64 {
    ts.clamp(start + 1, end - 1)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn durations_end_exactly_where_the_next_slice_starts() {
        let (ts, end) = (micros(36_431_557), micros(36_438_539));
        let plain = micros(6_982);
        assert!(ts + plain > end, "the rounding this guards against");
        let dur = exact_duration(ts, end, plain);
        assert_eq!(ts + dur, end);
        let text = serde_json::to_string(&dur).unwrap();
        let parsed: f64 = serde_json::from_str(&text).unwrap();
        assert_eq!(ts + parsed, end, "survives the JSON round trip: {text}");
    }

    #[test]
    fn plain_durations_are_kept_when_they_add_up() {
        assert_eq!(exact_duration(2.0, 6.5, 4.5), 4.5);
        assert_eq!(exact_duration(1.0, 1.0, 0.0), 0.0);
    }

    #[test]
    fn no_nanosecond_pair_ends_past_its_end_in_doubles() {
        let (mut state, mut exact_ends) = (0x2545_f491_4f6c_dd1d_u64, 0);
        for _ in 0..100_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let start = state % 50_000_000_000;
            let dur = (state >> 20) % 20_000_000;
            let (ts, end) = (micros(start), micros(start + dur));
            let written = exact_duration(ts, end, micros(dur));
            assert!(ts + written <= end && written >= 0.0, "{start} + {dur}");
            exact_ends += usize::from(ts + written == end);
        }
        assert!(
            exact_ends > 99_000,
            "only {exact_ends} of 100000 end exactly"
        );
    }

    #[test]
    fn an_end_no_sum_reaches_falls_short_by_the_least() {
        let (ts, end) = (micros(5_302_098), micros(22_093_408));
        let written = exact_duration(ts, end, micros(16_791_310));
        assert!(ts + written < end);
        assert!(ts + next_up(written) > end, "the largest that falls short");
    }

    #[test]
    fn flows_bind_inside_the_enclosing_or_the_last_ended_slice() {
        let index = SliceIndex::new(vec![(100, 200), (10, 50), (120, 150), (300, 301)]);
        assert_eq!(index.bind(130), Some(130), "inside the child");
        assert_eq!(index.bind(160), Some(160), "inside the parent");
        assert_eq!(index.bind(100), Some(101), "not at a slice's exact start");
        assert_eq!(
            index.bind(60),
            Some(49),
            "just before the end of the last ended"
        );
        assert_eq!(index.bind(400), Some(199), "1 ns slices are skipped");
        assert_eq!(index.bind(5), None, "nothing started yet");
    }
}
