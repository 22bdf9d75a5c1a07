//! The profiler's clock: nanoseconds since one process epoch, read from the CPU's
//! time-stamp counter.
//!
//! # Why the TSC and not `std::time::Instant`
//! Measured on the project's machines (2-core x86-64 VMs, clocksource `tsc`, back-to-back
//! reads in a loop, `enginetop bench profiler` prints the same figures):
//! `Instant::now()` costs 55-70 ns (a vDSO `clock_gettime` call plus the `Instant` arithmetic
//! around it), a raw `rdtsc` (through `quanta::Clock::raw`) 20-25 ns, and `quanta`'s scaled
//! `Clock::now` about the same as the raw read. Only the counter leaves room for the rest of a
//! recording inside the 10 ns target on a quiet machine, so events are stamped with
//! `quanta::Clock::raw()` scaled to nanoseconds by one multiply and shift
//! (`Clock::delta_as_nanos` against the epoch's raw reading). `quanta` calibrates the counter
//! against the OS clock once (a few ms, at the first use of the epoch) and falls back to the
//! OS monotonic clock on CPUs without an invariant TSC, so timestamps stay correct anywhere;
//! only their cost changes.
//!
//! The epoch also records the wall-clock time (`chrono`) at which it was taken, which Chrome
//! traces carry in `otherData` while their `ts` stay relative.
#![forbid(unsafe_code)]

use std::sync::LazyLock;

use chrono::{DateTime, Utc};

/// The process epoch: when it was taken, on the counter and on the wall clock.
pub struct Epoch {
    clock: quanta::Clock,
    start_raw: u64,
    wall_start: DateTime<Utc>,
}

static EPOCH: LazyLock<Epoch> = LazyLock::new(|| {
    let clock = quanta::Clock::new();
    let start_raw = clock.raw();
    Epoch {
        clock,
        start_raw,
        wall_start: Utc::now(),
    }
});

impl Epoch {
    /// The process epoch (calibrated and taken at the first call).
    #[inline(always)]
    pub fn get() -> &'static Epoch {
        &EPOCH
    }

    /// Nanoseconds since the epoch, now.
    #[inline(always)]
    pub fn now_ns(&self) -> u64 {
        self.clock.delta_as_nanos(self.start_raw, self.clock.raw())
    }

    /// The wall-clock time of the epoch.
    pub fn wall_start(&self) -> DateTime<Utc> {
        self.wall_start
    }

    /// The wall-clock time `ns` nanoseconds after the epoch.
    pub fn wall_at(&self, ns: u64) -> DateTime<Utc> {
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
    fn wall_clock_start_is_recent() {
        let epoch = Epoch::get();
        let age = Utc::now() - epoch.wall_at(epoch.now_ns());
        assert!(age.num_seconds().abs() < 5, "{age}");
    }
}
