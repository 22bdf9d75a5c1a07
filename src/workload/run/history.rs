//! [`ConfigHistory`]: the inter- and intra-op thread counts a run had, over its wall-clock
//! time, so that every per-worker figure divides by the workers that existed when the work
//! ran, not by the count at the end.
//!
//! A segment starts at a resize and lasts until the next one (the last until the run's end).
//! The driver's handle records a resize so that the segments cover every thread's whole
//! life: a growing resize is recorded before the new threads start, a shrinking one after
//! the pool accepted it (an op a retiring thread had begun still ends after that; see
//! [`utilization`]).
#![forbid(unsafe_code)]

use std::time::Duration;

/// From `start` (wall time since the run's timed part began) until the next segment's start,
/// the run had `inter` inter-op and `intra` intra-op threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub(crate) struct ConfigSegment {
    /// When it began, since the run's start.
    #[serde(serialize_with = "seconds")]
    pub(crate) start: Duration,
    /// Inter-op threads (the engine's CPU workers per device).
    pub(crate) inter: usize,
    /// Intra-op threads.
    pub(crate) intra: usize,
}

fn seconds<S: serde::Serializer>(at: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_f64(at.as_secs_f64())
}

/// The thread counts of one run over time, in order, never empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ConfigHistory {
    segments: Vec<ConfigSegment>,
}

impl ConfigHistory {
    /// A run that starts with `inter` x `intra` threads.
    pub(crate) fn new(inter: usize, intra: usize) -> Self {
        ConfigHistory {
            segments: vec![ConfigSegment {
                start: Duration::ZERO,
                inter,
                intra,
            }],
        }
    }

    /// The counts become `inter` x `intra` at `at` (a time before the last segment's start
    /// reads as that start: the segments stay in order).
    pub(crate) fn record(&mut self, at: Duration, inter: usize, intra: usize) {
        let last = *self.last();
        if (last.inter, last.intra) == (inter, intra) {
            return;
        }
        let start = at.max(last.start);
        if start == last.start {
            self.segments.pop();
        }
        self.segments.push(ConfigSegment {
            start,
            inter,
            intra,
        });
    }

    /// The segments, oldest first.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn segments(&self) -> &[ConfigSegment] {
        &self.segments
    }

    /// The counts in force now.
    pub(crate) fn last(&self) -> &ConfigSegment {
        self.segments.last().expect("a history is never empty")
    }

    /// Each segment with its length, for a run that ended at `end` (segments that began
    /// after `end` last zero).
    pub(crate) fn spans(
        &self,
        end: Duration,
    ) -> impl Iterator<Item = (ConfigSegment, Duration)> + '_ {
        self.segments.iter().enumerate().map(move |(i, segment)| {
            let until = self
                .segments
                .get(i + 1)
                .map_or(end, |next| next.start.min(end));
            (*segment, until.saturating_sub(segment.start))
        })
    }

    /// Thread-seconds of `count`'s threads up to `end`: the integral of the count over time.
    pub(crate) fn thread_seconds(
        &self,
        end: Duration,
        count: impl Fn(&ConfigSegment) -> usize,
    ) -> f64 {
        self.spans(end)
            .map(|(segment, span)| count(&segment) as f64 * span.as_secs_f64())
            .sum()
    }

    /// The counts the run had for the longest time up to `end` (the earliest on a tie).
    pub(crate) fn longest(&self, end: Duration) -> ConfigSegment {
        let mut totals: Vec<((usize, usize), Duration)> = Vec::new();
        for (segment, span) in self.spans(end) {
            let key = (segment.inter, segment.intra);
            match totals.iter_mut().find(|(known, _)| *known == key) {
                Some((_, total)) => *total += span,
                None => totals.push((key, span)),
            }
        }
        let mut best = totals[0];
        for &candidate in &totals[1..] {
            if candidate.1 > best.1 {
                best = candidate;
            }
        }
        let ((inter, intra), _) = best;
        ConfigSegment {
            start: Duration::ZERO,
            inter,
            intra,
        }
    }

    /// The most intra-op threads the run had at once.
    pub(crate) fn max_intra(&self) -> usize {
        self.segments.iter().map(|s| s.intra).max().unwrap_or(0)
    }
}

/// `busy_s` over `thread_s`, within [0, 1] (0 when no thread time passed). An op a
/// shrinking resize's retiring thread had begun ends after the resize, outside the
/// thread-seconds the history counts for it; the share is capped so that such a tail cannot
/// read as more than every thread busy.
pub(crate) fn utilization(busy_s: f64, thread_s: f64) -> f64 {
    if thread_s > 0.0 {
        (busy_s / thread_s).clamp(0.0, 1.0)
    } else {
        0.0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    /// 4 inter for 4 s, 3 for 2 s, 1 for 1 s: 23 thread-seconds, mostly 4.
    #[test]
    fn thread_seconds_integrate_the_counts_the_run_had() {
        let mut history = ConfigHistory::new(4, 1);
        history.record(4 * S, 3, 1);
        history.record(6 * S, 1, 1);
        assert_eq!(history.thread_seconds(7 * S, |s| s.inter), 23.0);
        assert_eq!(history.thread_seconds(7 * S, |s| s.intra), 7.0);
        assert_eq!(
            (history.longest(7 * S).inter, history.longest(7 * S).intra),
            (4, 1)
        );
        // A run that ended before the last resize took effect.
        assert_eq!(history.thread_seconds(5 * S, |s| s.inter), 19.0);
    }

    /// The longest share sums every span of one configuration, wherever they lie.
    #[test]
    fn the_longest_configuration_adds_up_its_spans() {
        let mut history = ConfigHistory::new(2, 1);
        history.record(2 * S, 4, 1); // 4 x 1 for 2 s
        history.record(4 * S, 2, 1); // 2 x 1 again, 2 + 3 s in all
        history.record(7 * S, 4, 1);
        let longest = history.longest(8 * S);
        assert_eq!((longest.inter, longest.intra), (2, 1));
    }

    /// Resizes at one instant keep the last; a resize to the counts in force adds nothing.
    #[test]
    fn resizes_at_one_instant_and_no_op_resizes_add_no_segment() {
        let mut history = ConfigHistory::new(1, 1);
        history.record(S, 1, 1);
        history.record(S, 2, 1);
        history.record(S, 3, 1);
        history.record(Duration::ZERO, 3, 2); // out of order: at the last segment's start
        let counts: Vec<(usize, usize)> = history
            .segments()
            .iter()
            .map(|s| (s.inter, s.intra))
            .collect();
        assert_eq!(counts, [(1, 1), (3, 2)]);
        assert_eq!(history.max_intra(), 2);
    }

    #[test]
    fn utilization_stays_within_zero_and_one() {
        assert_eq!(utilization(1.0, 4.0), 0.25);
        assert_eq!(utilization(5.0, 4.0), 1.0);
        assert_eq!(utilization(1.0, 0.0), 0.0);
    }
}
