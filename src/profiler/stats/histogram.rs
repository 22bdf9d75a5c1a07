//! A duration histogram that costs what its samples need: the buckets of an
//! [`hdrhistogram::Histogram`] of 2 significant digits, held as a sorted list of the buckets
//! recorded while they are few, and as the dense histogram once they are many.
//!
//! A dense histogram's counts array covers every bucket from 1 ns up to the largest value
//! recorded: 2-20 KiB whatever the number of samples. A run whose every op has its own name
//! (random-dag: 10,000 names, a few samples each in a handful of buckets) would hold that
//! per name, and copy, serialize and restore it at every recording checkpoint. The sparse
//! form holds only the buckets recorded (16 bytes each); past [`SPARSE_MAX`] of them it
//! becomes the dense histogram, whose recording is an index, not a search.
//!
//! **Invariant: both forms hold the same bucket counts for the same samples, and read the
//! same percentiles.** A bucket is keyed by its lowest value, computed as hdrhistogram
//! computes it for 2 significant digits ([`lowest_equivalent`]; a test checks it against
//! the crate), and a percentile is read as [`Histogram::value_at_quantile`] reads it: the
//! highest value of the first bucket whose running count reaches `ceil(q * total)`.
#![forbid(unsafe_code)]

use hdrhistogram::Histogram;
use serde::Serializer;

/// Buckets held sparse at most; one more and the histogram becomes dense.
pub(super) const SPARSE_MAX: usize = 64;

/// Significant digits of every duration histogram.
const SIGNIFICANT_DIGITS: u8 = 2;

/// log2 of half the sub-buckets per bucket: 2 digits need 200 sub-buckets, 256 in powers of 2.
const HALF_MAGNITUDE: u32 = 7;

/// The bucket of `value`: how many times it is halved to fit the first bucket (as
/// hdrhistogram's `bucket_for` with a lowest discernible value of 1).
#[inline]
fn bucket_of(value: u64) -> u32 {
    let sub_bucket_mask = (1u64 << (HALF_MAGNITUDE + 1)) - 1;
    (64 - HALF_MAGNITUDE - 1) - (value | sub_bucket_mask).leading_zeros()
}

/// The lowest value counted with `value`.
#[inline]
pub(super) fn lowest_equivalent(value: u64) -> u64 {
    let bucket = bucket_of(value);
    (value >> bucket) << bucket
}

/// The highest value counted with `value`.
#[inline]
pub(super) fn highest_equivalent(value: u64) -> u64 {
    let range = 1u64 << bucket_of(value);
    lowest_equivalent(value)
        .saturating_add(range)
        .saturating_sub(1)
        .max(value)
}

#[derive(Clone, Debug)]
enum Form {
    /// (lowest value of the bucket, count), by value, counts above zero.
    Sparse(Vec<(u64, u64)>),
    Dense(Box<Histogram<u64>>),
}

/// Durations' bucket counts, sparse while few (see the module docs).
#[derive(Clone, Debug)]
pub(super) struct DurationHistogram {
    form: Form,
    total: u64,
}

impl DurationHistogram {
    /// An empty histogram (no allocation).
    pub(super) fn new() -> Self {
        DurationHistogram {
            form: Form::Sparse(Vec::new()),
            total: 0,
        }
    }

    /// Counts `value` `count` times.
    pub(super) fn record_n(&mut self, value: u64, count: u64) {
        if count == 0 {
            return;
        }
        self.total = self.total.saturating_add(count);
        match &mut self.form {
            Form::Dense(histogram) => {
                // Auto-resizing histogram: recording cannot fail for any u64.
                let _ = histogram.record_n(value, count);
            }
            Form::Sparse(buckets) => {
                let key = lowest_equivalent(value);
                match buckets.binary_search_by_key(&key, |&(low, _)| low) {
                    Ok(at) => buckets[at].1 = buckets[at].1.saturating_add(count),
                    Err(at) => buckets.insert(at, (key, count)),
                }
                if buckets.len() > SPARSE_MAX {
                    self.densify();
                }
            }
        }
    }

    /// Counts each of `values` once: as [`record_n`](Self::record_n) of each with a count
    /// of 1, the form matched once while it is dense.
    pub(super) fn record_each(&mut self, values: &[u64]) {
        let Form::Dense(histogram) = &mut self.form else {
            values.iter().for_each(|&value| self.record_n(value, 1));
            return;
        };
        self.total = self.total.saturating_add(values.len() as u64);
        for &value in values {
            // Auto-resizing histogram: recording cannot fail for any u64.
            let _ = histogram.record(value);
        }
    }

    fn densify(&mut self) {
        let Form::Sparse(buckets) = &self.form else {
            return;
        };
        let mut dense =
            Histogram::new(SIGNIFICANT_DIGITS).expect("2 significant digits is a valid precision");
        for &(low, count) in buckets {
            // Auto-resizing histogram: recording cannot fail for any u64.
            let _ = dense.record_n(low, count);
        }
        self.form = Form::Dense(Box::new(dense));
    }

    /// The value at quantile `q` (in `(0, 1]`), as [`Histogram::value_at_quantile`] reads
    /// it; 0 when empty.
    pub(super) fn value_at_quantile(&self, q: f64) -> u64 {
        match &self.form {
            Form::Dense(histogram) => histogram.value_at_quantile(q),
            Form::Sparse(buckets) => {
                let target = ((q.min(1.0) * self.total as f64).ceil() as u64).max(1);
                let mut running = 0u64;
                for &(low, count) in buckets {
                    running += count;
                    if running >= target {
                        return highest_equivalent(low);
                    }
                }
                0
            }
        }
    }

    /// Serializes each recorded bucket, by value: its highest value as a delta from the
    /// previous one's, and its count (a sparse histogram without a copy).
    pub(super) fn serialize_deltas<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut previous = 0;
        let mut delta = |(value, count): (u64, u64)| {
            let delta = value.saturating_sub(previous);
            previous = value;
            (delta, count)
        };
        match &self.form {
            Form::Sparse(buckets) => serializer.collect_seq(
                buckets
                    .iter()
                    .map(|&(low, count)| delta((highest_equivalent(low), count))),
            ),
            Form::Dense(_) => {
                let buckets: Vec<(u64, u64)> = self.buckets().into_iter().map(delta).collect();
                serializer.collect_seq(buckets)
            }
        }
    }

    /// Each recorded bucket, by value: its highest value and its count.
    pub(super) fn buckets(&self) -> Vec<(u64, u64)> {
        match &self.form {
            Form::Dense(histogram) => histogram
                .iter_recorded()
                .map(|bucket| (bucket.value_iterated_to(), bucket.count_at_value()))
                .collect(),
            Form::Sparse(buckets) => buckets
                .iter()
                .map(|&(low, count)| (highest_equivalent(low), count))
                .collect(),
        }
    }

    /// Whether it is held sparse.
    #[cfg(all(test, not(loom)))]
    pub(super) fn is_sparse(&self) -> bool {
        matches!(self.form, Form::Sparse(_))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn dense() -> Histogram<u64> {
        Histogram::new(SIGNIFICANT_DIGITS).unwrap()
    }

    /// Values across every bucket, at and around its edges, and the extremes.
    fn values() -> Vec<u64> {
        let mut values: Vec<u64> = (0..2048).collect();
        for shift in 8..64 {
            let edge = 1u64 << shift;
            for delta in [0, 1, 2, 3, 127, 255] {
                values.push(edge.saturating_add(delta));
                values.push(edge.saturating_sub(delta));
            }
        }
        values.extend([
            u64::MAX,
            u64::MAX - 1,
            u64::MAX / 3,
            123_456_789,
            987_654_321_012,
        ]);
        values
    }

    #[test]
    fn buckets_are_hdrhistograms_buckets() {
        let histogram = dense();
        for value in values() {
            assert_eq!(
                lowest_equivalent(value),
                histogram.lowest_equivalent(value),
                "{value}"
            );
            assert_eq!(
                highest_equivalent(value),
                histogram.highest_equivalent(value),
                "{value}"
            );
        }
    }

    /// A generator of durations: a few clusters, and a wide spread.
    fn samples(seed: u64, count: usize, spread: u64) -> Vec<u64> {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..count)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                1_000 + state % spread
            })
            .collect()
    }

    #[test]
    fn percentiles_and_buckets_are_the_dense_histograms_in_both_forms() {
        for (count, spread) in [
            (1, 10),
            (3, 50),
            (40, 400),
            (200, 5_000),
            (5_000, 10_000_000),
        ] {
            let mut ours = DurationHistogram::new();
            let mut theirs = dense();
            for value in samples(count as u64, count, spread) {
                ours.record_n(value, 1);
                theirs.record(value).unwrap();
            }
            for q in [0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0] {
                let expected = theirs.value_at_quantile(q);
                assert_eq!(ours.value_at_quantile(q), expected, "{count} {spread} {q}");
            }
            let expected: Vec<(u64, u64)> = theirs
                .iter_recorded()
                .map(|bucket| (bucket.value_iterated_to(), bucket.count_at_value()))
                .collect();
            assert_eq!(ours.buckets(), expected, "{count} {spread}");
        }
    }

    #[test]
    fn recording_a_batch_is_recording_each_of_its_values() {
        // Batches wholly sparse, one that turns dense half-way, wholly dense ones.
        for (count, spread) in [(20, 50), (200, 5_000), (5_000, 10_000_000)] {
            let values = samples(count as u64 + 7, count, spread);
            let mut each = DurationHistogram::new();
            values.iter().for_each(|&value| each.record_n(value, 1));
            let mut batched = DurationHistogram::new();
            values
                .chunks(32)
                .for_each(|batch| batched.record_each(batch));
            assert_eq!(batched.is_sparse(), each.is_sparse(), "{count} {spread}");
            assert_eq!(batched.total, each.total, "{count} {spread}");
            assert_eq!(batched.buckets(), each.buckets(), "{count} {spread}");
            for q in [0.01, 0.5, 0.99, 1.0] {
                let expected = each.value_at_quantile(q);
                assert_eq!(
                    batched.value_at_quantile(q),
                    expected,
                    "{count} {spread} {q}"
                );
            }
        }
    }

    #[test]
    fn few_buckets_stay_sparse_and_many_become_dense() {
        let mut histogram = DurationHistogram::new();
        for value in 0..SPARSE_MAX as u64 {
            histogram.record_n(value, 2);
        }
        assert!(histogram.is_sparse());
        assert_eq!(histogram.value_at_quantile(1.0), SPARSE_MAX as u64 - 1);
        histogram.record_n(SPARSE_MAX as u64, 1);
        assert!(!histogram.is_sparse());
        assert_eq!(histogram.value_at_quantile(1.0), SPARSE_MAX as u64);
        assert_eq!(histogram.buckets().len(), SPARSE_MAX + 1);
    }

    #[test]
    fn an_empty_histogram_reads_zero() {
        assert_eq!(DurationHistogram::new().value_at_quantile(0.5), 0);
        assert!(DurationHistogram::new().buckets().is_empty());
    }
}
