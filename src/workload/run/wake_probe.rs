//! Calibrating a split loop's costs on the machine, for the what-if simulation
//! ([`crate::analysis::EngineModel::with_corun`], [`crate::analysis::EngineModel::with_loop_wake`]):
//! how much slower a loop's blocks run when two intra-op threads compute at once than on one
//! thread alone (the co-run factor), and what a split loop waits beyond its busiest thread's
//! blocks, for a run where no loop split (intra 1).
//!
//! # The probe
//! One GEMM of [`PROBE_SHAPE`], run [`PROBE_LOOPS`] times on each of two pools of the run's
//! intra-op pool kind, alternately: one of one thread, where the kernel runs the loop inline
//! (its blocks one after another on the caller, alone), and one of two threads, where the
//! kernel's cost model splits it and the caller, its share done, waits for the last block,
//! as an op's thread does. Before each split loop the probe waits until the two-thread pool's
//! workers are parked (their state in the pool's counters, polled with a yield between reads,
//! at most [`PATIENCE`]), as a run's intra-op workers are between an op's loops. Each loop is
//! measured by the same rule as a run's loops (`super::intra_split`). The co-run factor is
//! the median, over the loop pairs, of a split loop's summed block time over the inline loop's
//! just before it, and at least 1: the two loops compute the same blocks, which co-running can
//! only slow (shared caches, memory bandwidth), and the median drops a pair the OS descheduled
//! on a loaded machine. The wait is each split loop's wall time beyond its busiest thread's
//! share of the blocks, reported as its mean with its median and 90th percentile (a step pays
//! the sum of the waits, so the mean is the figure; the spread shows how skewed they are).
//!
//! # Cost and races
//! About [`PROBE_LOOPS`] times the GEMM's one-thread time and a half, plus the parks: tens of
//! milliseconds, once per run driver. The probe's pools are its own: a run's pool is neither
//! resized nor fed foreign tasks. A pool that does not start, or a kernel that never splits
//! the probe's GEMM, gives no calibration.
#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use crate::kernels::gemm::{gemm, GemmSpec};
use crate::pool::{Pool, PoolOptions, ThreadPool, WorkerState};
use crate::sync::thread;

use super::intra_split::{IntraSplit, MeasuredPool, WaitStats};

/// The probe GEMM's `(m, n, k)`: a loop the cost model splits over two threads, its blocks
/// sharing one `k x n` operand as a layer's blocks share its weights.
pub(super) const PROBE_SHAPE: (usize, usize, usize) = (128, 512, 512);

/// How many loops the probe runs on each pool.
pub(super) const PROBE_LOOPS: usize = 24;

/// The longest the probe waits for the split pool's workers to park before a loop.
const PATIENCE: Duration = Duration::from_millis(50);

/// What the probe measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Calibration {
    /// Split blocks' time over inline blocks' time for the same loop, the median over the
    /// probe's loop pairs, at least 1.
    pub(super) corun: f64,
    /// The split loops' waits beyond their busiest thread's blocks.
    pub(super) wake: WaitStats,
}

/// The probe (see the module docs) on pools of `pool`'s kind; `None` when a pool did not
/// start or no loop split.
pub(super) fn calibrate(pool: &dyn ThreadPool) -> Option<Calibration> {
    let start = |threads| Pool::new(PoolOptions::new(pool.kind(), threads, "intra-probe")).ok();
    let (inline_pool, split_pool) = (start(1)?, start(2)?);
    let (inline, split) = (IntraSplit::new(1), IntraSplit::new(1));
    let (m, n, k) = PROBE_SHAPE;
    let spec = GemmSpec::new(m, n, k);
    let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 * 0.25).collect();
    let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.5).collect();
    let mut c = vec![0.0f32; m * n];
    let mut ratios = Vec::with_capacity(PROBE_LOOPS);
    for _ in 0..PROBE_LOOPS {
        let before = (inline.busy(), split.busy());
        let measured = MeasuredPool::new(inline_pool.as_dyn(), &inline, 0);
        gemm(&measured, &spec, &a, &b, &mut c).ok()?;
        wait_until_parked(split_pool.as_dyn());
        let measured = MeasuredPool::new(split_pool.as_dyn(), &split, 0);
        gemm(&measured, &spec, &a, &b, &mut c).ok()?;
        let alone = inline.busy().saturating_sub(before.0).as_secs_f64();
        let together = split.busy().saturating_sub(before.1).as_secs_f64();
        ratios.extend(Some(together / alone).filter(|ratio| ratio.is_finite()));
    }
    std::hint::black_box(&c);
    let wake = split.wait_stats()?;
    let corun = median(&mut ratios)?.max(1.0);
    Some(Calibration { corun, wake })
}

/// The middle of `ratios` (the upper one of an even count); `None` when there are none.
fn median(ratios: &mut [f64]) -> Option<f64> {
    ratios.sort_unstable_by(f64::total_cmp);
    ratios.get(ratios.len() / 2).copied()
}

/// Waits until every active worker of `pool` is parked, at most [`PATIENCE`] (a pool whose
/// workers do not park runs its loop as they are).
fn wait_until_parked(pool: &dyn ThreadPool) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let stats = pool.stats();
        let mut active = stats.workers.iter().take(stats.num_threads);
        if active.all(|w| w.state == WorkerState::Parked) || Instant::now() >= deadline {
            return;
        }
        thread::yield_now();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::pool::PoolKind;

    fn wakeups(pool: &Pool) -> u64 {
        pool.stats().workers.iter().map(|w| w.wakeups).sum()
    }

    #[test]
    fn the_median_takes_the_middle_ratio_whatever_the_outliers() {
        assert_eq!(median(&mut [1.1, 9.0, 1.05, 0.2, 1.2]), Some(1.1));
        assert_eq!(median(&mut [1.3, 1.1]), Some(1.3));
        assert_eq!(median(&mut []), None);
    }

    #[test]
    fn the_probe_splits_every_loop_and_times_each_wait() {
        let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 1, "probe-test")).unwrap();
        let before = wakeups(&pool);
        let calibration = calibrate(pool.as_dyn()).expect("the probe's GEMM splits on two");
        assert_eq!(
            calibration.wake.samples, PROBE_LOOPS,
            "one wait per split loop, none from the inline ones"
        );
        let wake = calibration.wake;
        assert!(wake.median <= wake.p90, "{wake:?}");
        assert!(wake.mean > Duration::ZERO, "{wake:?}");
        assert!(calibration.corun.is_finite() && calibration.corun >= 1.0);
        assert_eq!(wakeups(&pool), before, "the run's own pool is left alone");
    }
}
