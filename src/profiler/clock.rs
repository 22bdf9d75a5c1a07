//! The profiler's clock: nanoseconds since one process epoch, read from the CPU's
//! time-stamp counter.
//!
//! # Why the TSC and not `std::time::Instant`
//! `Instant::now()` is a vDSO `clock_gettime` call plus the `Instant` arithmetic around it,
//! several times the cost of a raw `rdtsc` (through `quanta::Clock::raw`); `quanta`'s scaled
//! `Clock::now` costs about the same as the raw read. Only the counter leaves room for the
//! rest of a recording inside the 10 ns target on a quiet machine, so events are stamped with
//! `quanta::Clock::raw()`, scaled to nanoseconds by one multiply and shift (when drained; see
//! below). `quanta` calibrates the counter
//! against the OS clock once (a few ms, at the first use of the epoch) and falls back to the
//! OS monotonic clock on CPUs without an invariant TSC, so timestamps stay correct anywhere;
//! only their cost changes.
//!
//! # Raw stamps on the recording path, nanoseconds in the collector
//! Scaling a counter reading to nanoseconds is a subtraction, a 64x64-bit multiply and a
//! shift; cheap, but on the recording path it sits between the counter read and the store of
//! the event, where it adds a fifth or so to the counter read, itself the floor of any
//! per-event timestamp. So events recorded "now" carry the
//! *raw* reading, tagged with `RAW_STAMP` (the top bit, which no nanosecond count since the
//! epoch reaches in 292 years), and the collector turns it into nanoseconds (`Epoch::resolve`) when it drains the
//! ring. Events recorded with a time of their own ([`record_at`](super::Profiler::record_at))
//! carry nanoseconds, untagged, and pass through unchanged. Both go through the same
//! conversion (`Epoch::ticks_to_ns`), so every timestamp, from every thread, is on one
//! clock: monotonic per thread (the counter is; the conversion is non-decreasing) and
//! comparable across threads (one epoch, an invariant TSC that the kernel also uses as its
//! clocksource, or quanta's OS-clock fallback).
//!
//! The conversion factor is quanta's own calibration, read back once as "nanoseconds per
//! 2^40 ticks" (so the shift is a constant and the multiply a single `mul`).
//!
//! The epoch also records the wall-clock time (`chrono`) at which it was taken, which Chrome
//! traces carry in `otherData` while their `ts` stay relative.
//!
//! `enginetop bench profiler` measures both clocks (`clock_read`); the figures behind these
//! choices: `bench/README.md`.
#![forbid(unsafe_code)]

use std::sync::LazyLock;

use chrono::{DateTime, Utc};

/// The tag of a raw counter reading in [`Event::ts_ns`](super::Event::ts_ns): set by
/// [`Epoch::raw_stamp`], removed by `Epoch::resolve`.
pub(crate) const RAW_STAMP: u64 = 1 << 63;

/// Fixed-point bits of [`Epoch`]'s ticks-to-nanoseconds factor.
const SCALE_BITS: u32 = 40;

/// The process epoch: when it was taken, on the counter and on the wall clock.
pub(crate) struct Epoch {
    clock: quanta::Clock,
    start_raw: u64,
    /// Nanoseconds per 2^`SCALE_BITS` ticks (2^`SCALE_BITS` when quanta reads the OS clock,
    /// whose raw readings already are nanoseconds).
    ns_per_2_40_ticks: u64,
    wall_start: DateTime<Utc>,
}

static EPOCH: LazyLock<Epoch> = LazyLock::new(|| {
    let clock = quanta::Clock::new();
    let ns_per_2_40_ticks = clock.delta_as_nanos(0, 1 << SCALE_BITS);
    let start_raw = clock.raw();
    Epoch {
        clock,
        start_raw,
        ns_per_2_40_ticks,
        wall_start: Utc::now(),
    }
});

impl Epoch {
    /// The process epoch (calibrated and taken at the first call).
    #[inline(always)]
    pub(crate) fn get() -> &'static Epoch {
        &EPOCH
    }

    /// Nanoseconds since the epoch, now.
    #[inline(always)]
    pub(crate) fn now_ns(&self) -> u64 {
        self.ticks_to_ns(self.clock.raw())
    }

    /// The counter now, tagged with `RAW_STAMP`: what the recording path stores, for the
    /// collector to [`resolve`](Self::resolve).
    #[inline(always)]
    pub(crate) fn raw_stamp(&self) -> u64 {
        self.clock.raw() | RAW_STAMP
    }

    /// Nanoseconds since the epoch of raw counter reading `raw` (0 for a reading before it).
    #[inline]
    pub(crate) fn ticks_to_ns(&self, raw: u64) -> u64 {
        let ticks = u128::from(raw.saturating_sub(self.start_raw));
        ((ticks * u128::from(self.ns_per_2_40_ticks)) >> SCALE_BITS) as u64
    }

    /// Nanoseconds in a span of `ticks` counter ticks (a duration, not a reading).
    #[inline]
    pub(crate) fn ticks_as_ns(&self, ticks: u64) -> u64 {
        ((u128::from(ticks) * u128::from(self.ns_per_2_40_ticks)) >> SCALE_BITS) as u64
    }

    /// Counter ticks in a span of `ns` nanoseconds (at least one).
    pub(crate) fn ns_as_ticks(&self, ns: u64) -> u64 {
        let ticks = (u128::from(ns) << SCALE_BITS) / u128::from(self.ns_per_2_40_ticks.max(1));
        u64::try_from(ticks).unwrap_or(u64::MAX).max(1)
    }

    /// A stored timestamp in nanoseconds since the epoch: a [`raw_stamp`](Self::raw_stamp)
    /// converted, anything else (nanoseconds already) as it is.
    #[inline]
    pub(crate) fn resolve(&self, stamp: u64) -> u64 {
        if stamp & RAW_STAMP != 0 {
            self.ticks_to_ns(stamp & !RAW_STAMP)
        } else {
            stamp
        }
    }

    /// The wall-clock time `ns` nanoseconds after the epoch.
    pub(crate) fn wall_at(&self, ns: u64) -> DateTime<Utc> {
        self.wall_start + chrono::Duration::nanoseconds(i64::try_from(ns).unwrap_or(i64::MAX))
    }
}

/// Nanoseconds since the process epoch, now.
///
/// ```
/// let before = enginetop::profiler::now_ns();
/// let after = enginetop::profiler::now_ns();
/// assert!(after >= before);
/// ```
#[inline]
pub fn now_ns() -> u64 {
    Epoch::get().now_ns()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_clock_is_monotonic_and_tracks_real_time() {
        let epoch = Epoch::get();
        let mut last = epoch.now_ns();
        for _ in 0..10_000 {
            let next = epoch.now_ns();
            assert!(next >= last, "{next} < {last}");
            last = next;
        }
        // Bracket each counter reading between two std readings, so that a preemption
        // anywhere widens the bounds instead of failing the test.
        let (std_before, tsc_start, std_after) = bracketed(epoch);
        std::thread::sleep(std::time::Duration::from_millis(50));
        let (std_before_end, tsc_end, std_after_end) = bracketed(epoch);
        let tsc = (tsc_end - tsc_start) as f64;
        let shortest = std_before_end.duration_since(std_after).as_nanos() as f64;
        let longest = std_after_end.duration_since(std_before).as_nanos() as f64;
        assert!(
            tsc >= shortest * 0.95 && tsc <= longest * 1.05,
            "counter {tsc} ns outside std's [{shortest}, {longest}]"
        );
    }

    fn bracketed(epoch: &Epoch) -> (std::time::Instant, u64, std::time::Instant) {
        let before = std::time::Instant::now();
        let tsc = epoch.now_ns();
        (before, tsc, std::time::Instant::now())
    }

    #[test]
    fn raw_stamps_resolve_onto_the_same_clock_as_now_ns() {
        let epoch = Epoch::get();
        let before = epoch.now_ns();
        let stamp = epoch.raw_stamp();
        let after = epoch.now_ns();
        assert_ne!(stamp & RAW_STAMP, 0, "a raw stamp is tagged");
        let resolved = epoch.resolve(stamp);
        assert!(
            before <= resolved && resolved <= after,
            "{before} {resolved} {after}"
        );
        assert_eq!(epoch.resolve(12_345), 12_345, "nanoseconds pass through");
        assert_eq!(
            epoch.ticks_to_ns(0),
            0,
            "a reading before the epoch is its start"
        );
        let mut last = 0;
        for _ in 0..10_000 {
            let next = epoch.resolve(epoch.raw_stamp());
            assert!(next >= last, "{next} < {last}");
            last = next;
        }
    }

    #[test]
    fn wall_clock_start_is_recent() {
        let epoch = Epoch::get();
        let age = Utc::now() - epoch.wall_at(epoch.now_ns());
        assert!(age.num_seconds().abs() < 5, "{age}");
    }
}
