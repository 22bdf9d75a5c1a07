//! Sliding windows in fixed-width time buckets: time spent per state ([`StateTimeline`]) and
//! events per second ([`RateCounter`]). A state timeline also sums its closed spans since it
//! was made (a finished run's shares), a handful of additions per state change.
//!
//! Time is cut into buckets of `bucket_ns`; bucket `k` covers `[k * bucket_ns, (k + 1) *
//! bucket_ns)`. The window at time `now` is the bucket holding `now` and the `buckets - 1`
//! before it, so it spans `(buckets - 1) * bucket_ns` plus however far `now` is into its bucket.
//! Adding a span or a count is O(buckets it touches); only the buckets a window can still
//! reach are kept. Events may arrive a little out of order (the collector drains one thread at
//! a time): a late event lands in its own, older bucket.
#![forbid(unsafe_code)]

/// Bucket geometry shared by every timeline of one [`Stats`](super::stats::Stats).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Buckets {
    /// Width of one bucket.
    pub(crate) bucket_ns: u64,
    /// Buckets in a window (the current one included).
    pub(crate) count: u64,
}

impl Buckets {
    /// Index of the bucket holding `ts`.
    fn index(self, ts: u64) -> u64 {
        ts / self.bucket_ns
    }

    /// The first bucket of the window at `now`.
    fn first_in_window(self, now: u64) -> u64 {
        self.index(now).saturating_sub(self.count - 1)
    }

    /// Where the window at `now` starts.
    pub(crate) fn window_start(self, now: u64) -> u64 {
        self.first_in_window(now) * self.bucket_ns
    }
}

/// Buckets of `T`, oldest first, indexed by bucket number (gaps allowed).
///
/// A `Vec`, not a ring buffer: the newest bucket, which nearly every addition touches, is
/// its last element, found without a wrap-around. Buckets expire a bucket's width apart,
/// each expiry moving the window's few buckets down once.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct BucketRing<T> {
    geometry: Buckets,
    buckets: Vec<(u64, T)>,
    /// What a new bucket holds.
    empty: T,
    /// `[start, end)` of the newest bucket in ns (empty until there is one): checked on
    /// every event without touching the buckets.
    newest_span: (u64, u64),
}

impl<T: Copy> BucketRing<T> {
    fn new(geometry: Buckets, empty: T) -> Self {
        BucketRing {
            geometry,
            buckets: Vec::new(),
            empty,
            newest_span: (0, 0),
        }
    }

    /// The bucket with index `index`, created if needed; `None` if it is older than anything
    /// a window can still reach.
    fn at(&mut self, index: u64) -> Option<&mut T> {
        if self.buckets.last().map(|&(k, _)| k) == Some(index) {
            return self.buckets.last_mut().map(|(_, value)| value); // the common case
        }
        let newest = self.buckets.last().map_or(index, |&(k, _)| k.max(index));
        if index + self.geometry.count <= newest {
            return None;
        }
        let position = self.buckets.partition_point(|&(k, _)| k < index);
        if self.buckets.get(position).map(|&(k, _)| k) != Some(index) {
            self.buckets.insert(position, (index, self.empty));
        }
        let count = self.geometry.count;
        let expired = self.buckets.partition_point(|&(k, _)| k + count <= newest);
        self.buckets.drain(..expired);
        if let Some(&(newest, _)) = self.buckets.last() {
            let start = newest * self.geometry.bucket_ns;
            self.newest_span = (start, start + self.geometry.bucket_ns);
        }
        let position = self.buckets.partition_point(|&(k, _)| k < index);
        self.buckets.get_mut(position).map(|(_, value)| value)
    }

    /// The newest bucket, if `from..to` lies inside it (no division on the common path).
    #[inline]
    fn newest_holding(&mut self, from: u64, to: u64) -> Option<&mut T> {
        let (start, end) = self.newest_span;
        if from >= start && to < end {
            self.buckets.last_mut().map(|(_, value)| value)
        } else {
            None
        }
    }

    /// Buckets inside the window at `now`.
    fn in_window(&self, now: u64) -> impl Iterator<Item = &T> {
        let first = self.geometry.first_in_window(now);
        let last = self.geometry.index(now);
        self.buckets
            .iter()
            .filter(move |&&(k, _)| k >= first && k <= last)
            .map(|(_, value)| value)
    }
}

/// Time spent in each of `K` states over a sliding window, and since it was made.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(bound(
    serialize = "[u64; K]: serde::Serialize",
    deserialize = "[u64; K]: serde::Deserialize<'de>"
))]
pub(crate) struct StateTimeline<const K: usize> {
    ring: BucketRing<[u64; K]>,
    /// The state since `since`, if any state was ever entered.
    current: Option<(usize, u64)>,
    /// Every closed span's time per state since the timeline was made.
    closed: [u64; K],
    /// When what it follows ended (a thread's exit): time since then counts in no state
    /// since the start, so the shares since the start are of its lifetime.
    ended: Option<u64>,
}

impl<const K: usize> StateTimeline<K> {
    pub(crate) fn new(geometry: Buckets) -> Self {
        StateTimeline {
            ring: BucketRing::new(geometry, [0; K]),
            current: None,
            closed: [0; K],
            ended: None,
        }
    }

    /// Whether it is cut by `geometry` and in one of its `K` states, if any (a timeline
    /// read from a file is checked before use).
    pub(crate) fn is_well_formed(&self, geometry: Buckets) -> bool {
        self.ring.geometry == geometry && self.current.is_none_or(|(state, _)| state < K)
    }

    /// The state entered last, if any.
    #[inline]
    pub(crate) fn state(&self) -> Option<usize> {
        self.current.map(|(state, _)| state)
    }

    /// Enters `state` at `ts`, closing the span of the previous state.
    #[inline]
    pub(crate) fn enter(&mut self, state: usize, ts: u64) {
        if self.ended.is_some() {
            return; // nothing happens after the end
        }
        if let Some((previous, since)) = self.current {
            if ts < since {
                return; // older than what we know: keep the newer state
            }
            self.add_span(previous, since, ts);
            self.closed[previous] += ts - since;
        }
        self.current = Some((state, ts));
    }

    /// Adds `from..to` to `state`: in the newest bucket when it holds the span (nearly every
    /// state change), else across the buckets it covers.
    #[inline]
    fn add_span(&mut self, state: usize, from: u64, to: u64) {
        if let Some(bucket) = self.ring.newest_holding(from, to) {
            bucket[state] += to - from;
            return;
        }
        self.add_span_across(state, from, to);
    }

    #[cold]
    #[inline(never)]
    fn add_span_across(&mut self, state: usize, from: u64, to: u64) {
        let geometry = self.ring.geometry;
        // Nothing before the oldest bucket a window at `to` can reach is kept.
        let mut from = from.max(geometry.window_start(to));
        while from < to {
            let index = geometry.index(from);
            let end = to.min((index + 1) * geometry.bucket_ns);
            if let Some(bucket) = self.ring.at(index) {
                bucket[state] += end - from;
            }
            from = end;
        }
    }

    /// Nanoseconds per state in the window at `now`, the open span of the current state
    /// included.
    pub(crate) fn totals(&self, now: u64) -> [u64; K] {
        let mut totals = [0; K];
        for bucket in self.ring.in_window(now) {
            for (total, ns) in totals.iter_mut().zip(bucket) {
                *total += ns;
            }
        }
        if let Some((state, since)) = self.current {
            let from = since.max(self.ring.geometry.window_start(now));
            totals[state] += now.saturating_sub(from);
        }
        totals
    }

    /// The share of observed time per state in the window at `now` (all zero if none).
    pub(crate) fn shares(&self, now: u64) -> [f64; K] {
        shares_of(self.totals(now))
    }

    /// Ends it at `ts` in `state` (a thread's exit): the window still sees `state` from
    /// then on, the totals since the start stop there.
    pub(crate) fn end(&mut self, state: usize, ts: u64) {
        if self.current.is_some() {
            self.enter(state, ts);
            self.ended = Some(ts.max(self.current.map_or(ts, |(_, since)| since)));
        }
    }

    /// Whether it was ended.
    pub(crate) fn has_ended(&self) -> bool {
        self.ended.is_some()
    }

    /// Nanoseconds per state since the timeline was made, up to `now` or its end.
    pub(crate) fn totals_since_start(&self, now: u64) -> [u64; K] {
        let mut totals = self.closed;
        if let Some((state, since)) = self.current {
            let until = self.ended.map_or(now, |ended| ended.min(now));
            totals[state] += until.saturating_sub(since);
        }
        totals
    }

    /// The share of observed time per state since the timeline was made, up to `now` or its
    /// end: they add up to 1 over its lifetime.
    pub(crate) fn shares_since_start(&self, now: u64) -> [f64; K] {
        shares_of(self.totals_since_start(now))
    }

    /// Nanoseconds observed since the timeline was made, up to `now` or its end: the
    /// lifetime the shares since the start are of.
    pub(crate) fn observed_since_start(&self, now: u64) -> u64 {
        self.totals_since_start(now).iter().sum()
    }
}

/// Each of `totals` as a share of their sum (all zero if it is zero).
fn shares_of<const K: usize>(totals: [u64; K]) -> [f64; K] {
    let observed: u64 = totals.iter().sum();
    let mut shares = [0.0; K];
    if observed > 0 {
        for (share, ns) in shares.iter_mut().zip(totals) {
            *share = ns as f64 / observed as f64;
        }
    }
    shares
}

/// Events per second over a sliding window.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct RateCounter {
    ring: BucketRing<u64>,
    first_seen: Option<u64>,
}

impl RateCounter {
    pub(crate) fn new(geometry: Buckets) -> Self {
        RateCounter {
            ring: BucketRing::new(geometry, 0),
            first_seen: None,
        }
    }

    /// Whether it is cut by `geometry` (a counter read from a file is checked before use).
    pub(crate) fn is_well_formed(&self, geometry: Buckets) -> bool {
        self.ring.geometry == geometry
    }

    /// Counts one event at `ts`.
    #[inline]
    pub(crate) fn add(&mut self, ts: u64) {
        if self.first_seen.is_none_or(|first| ts < first) {
            self.first_seen = Some(ts);
        }
        if let Some(count) = self.ring.newest_holding(ts, ts) {
            *count += 1;
            return;
        }
        self.add_past_newest(ts);
    }

    #[cold]
    #[inline(never)]
    fn add_past_newest(&mut self, ts: u64) {
        let index = self.ring.geometry.index(ts);
        if let Some(count) = self.ring.at(index) {
            *count += 1;
        }
    }

    /// Events in the window at `now`.
    pub(crate) fn count(&self, now: u64) -> u64 {
        self.ring.in_window(now).sum()
    }

    /// Events per second in the window at `now`, over the part of the window since the first
    /// event (a young counter is not diluted by time before it existed).
    pub(crate) fn per_second(&self, now: u64) -> f64 {
        let Some(first) = self.first_seen else {
            return 0.0;
        };
        let from = first.max(self.ring.geometry.window_start(now));
        let span = now.saturating_sub(from);
        if span == 0 {
            return 0.0;
        }
        self.count(now) as f64 * 1e9 / span as f64
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    /// 10 buckets of 100 ms: a window of 0.9 s to 1 s.
    const GEOMETRY: Buckets = Buckets {
        bucket_ns: 100 * MS,
        count: 10,
    };

    #[test]
    fn shares_add_up_over_the_window() {
        let mut timeline = StateTimeline::<3>::new(GEOMETRY);
        timeline.enter(0, 0);
        timeline.enter(1, 250 * MS);
        timeline.enter(2, 500 * MS);
        timeline.enter(0, 900 * MS);
        // At 1000 ms the window is buckets 1..=10, i.e. [100 ms, 1000 ms].
        let totals = timeline.totals(1000 * MS);
        assert_eq!(totals, [150 * MS + 100 * MS, 250 * MS, 400 * MS]);
        let shares = timeline.shares(1000 * MS);
        assert!((shares.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!((shares[2] - 400.0 / 900.0).abs() < 1e-12);
    }

    #[test]
    fn shares_since_start_keep_what_slid_out_of_the_window() {
        let mut timeline = StateTimeline::<2>::new(GEOMETRY);
        timeline.enter(1, 0);
        timeline.enter(0, 5_000 * MS);
        // The window at 5.5 s holds 0.4 s of state 1; the whole run 5 s of it.
        let since_start = timeline.shares_since_start(5_500 * MS);
        assert!((since_start[1] - 5_000.0 / 5_500.0).abs() < 1e-12);
        assert!((since_start[0] - 500.0 / 5_500.0).abs() < 1e-12);
    }

    #[test]
    fn old_time_slides_out_of_the_window() {
        let mut timeline = StateTimeline::<2>::new(GEOMETRY);
        timeline.enter(1, 0);
        timeline.enter(0, 5_000 * MS);
        // Five seconds of state 1 long ago, then half a second of state 0.
        assert_eq!(timeline.totals(5_500 * MS), [500 * MS, 400 * MS]);
        assert_eq!(timeline.totals(20_000 * MS), [900 * MS, 0]);
        assert_eq!(timeline.state(), Some(0));
    }

    #[test]
    fn a_stale_transition_is_ignored() {
        let mut timeline = StateTimeline::<2>::new(GEOMETRY);
        timeline.enter(0, 100 * MS);
        timeline.enter(1, 50 * MS);
        assert_eq!(timeline.state(), Some(0));
    }

    #[test]
    fn rates_count_events_per_second_since_the_first() {
        let mut rate = RateCounter::new(GEOMETRY);
        assert_eq!(rate.per_second(MS), 0.0);
        for k in 0..100 {
            rate.add(500 * MS + k * MS); // 100 events between 500 and 600 ms
        }
        rate.add(520 * MS); // a late one, out of order
        assert_eq!(rate.count(1000 * MS), 101);
        assert!((rate.per_second(1000 * MS) - 202.0).abs() < 1e-9);
        // Ten seconds later they have all slid out.
        assert_eq!(rate.count(11_000 * MS), 0);
    }

    #[test]
    fn buckets_too_old_for_any_window_are_not_kept() {
        let mut rate = RateCounter::new(GEOMETRY);
        rate.add(10_000 * MS);
        rate.add(MS); // far older than the newest window reaches
        assert_eq!(rate.ring.buckets.len(), 1);
    }
}
