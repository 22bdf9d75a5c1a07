//! [`IntraSplit`]: how each iteration op's body divides over the intra-op pool, measured from
//! the parallel loops it runs, for the what-if simulation ([`crate::analysis::EngineModel`]).
//!
//! # What is measured
//! An iteration op's kernel gets a [`MeasuredPool`] instead of the intra-op pool itself: it
//! passes every call through, and hears every outermost parallel loop the kernel runs on it
//! ([`ThreadPool::loop_ran`], reported by `kernels::par` at any thread count, an inline loop
//! at intra 1 included): the loop's items and their cost, its blocks' summed time (`busy`,
//! whatever thread ran each block) and its wall time on the op's thread (`wall`, the op
//! thread's wait for other threads' blocks included). Per op, the loops are kept by shape
//! (items and cost): each shape's busy time summed over the run, and the loops' wall time
//! summed over the run.
//!
//! # A split loop's wake-up
//! A loop the pool's thread count splits (`busiest_items` below its items) waits beyond its
//! blocks: for a parked intra-op thread to wake and take a block, and for the last block.
//! Its wall time less its busiest thread's share of its busy time is that wait; the run
//! keeps its latest split loops' waits and gives their mean, with their median and 90th
//! percentile ([`IntraSplit::wait_stats`]): the simulation adds the mean to each loop it
//! splits, since a step pays the sum of its loops' waits. A run where no loop split (every
//! loop inline at intra 1) has no such wait to measure; a probe splits a GEMM over two
//! threads of a pool of its kind and measures the same wait by the same rule
//! ([`super::wake_probe`]), once per run driver ([`IntraSplit::wake`]).
//!
//! # The split
//! Over the run, per op: each loop shape's one-thread time is its busy time, where a loop
//! split over several threads counts its blocks' time divided by the co-run factor (its
//! blocks ran while other threads computed, slower than alone; the probe measures the
//! factor, [`IntraSplit::corun`]); the serial part is the op's time less its loops' wall
//! times (what its thread did outside the loops). So the op thread's wait inside a loop
//! counts as neither: a loop is its blocks' work, which the simulation divides again for
//! any intra-op count. An op that ran no loop is all serial. See [`IntraSplit::splits`].
//!
//! # Cost and races
//! Per loop: one uncontended lock of the op's cell and a short scan of its shapes (a kernel
//! runs a few loops); the first run of a shape allocates. Only the op's thread records (a
//! loop reported from another thread, a kernel's loop inside a block, is part of that block's
//! time), and the engine runs one execution of an op at a time.
#![forbid(unsafe_code)]

use std::time::Duration;

use crate::analysis::{OpSplit, ParallelLoop};
use crate::kernels::par::busiest_items;
use crate::pool::parallel_for::{Cost, LoopRun};
use crate::pool::{PoolError, PoolKind, PoolStats, Task, ThreadPool};
use crate::sync::Mutex;

use super::predict::{LoopWake, LoopWakeSource};
use super::wake_probe::{calibrate, Calibration};

/// One loop shape of an op, summed over the run.
#[derive(Clone, Copy, Debug, PartialEq)]
struct LoopTotal {
    items: usize,
    cost: Cost,
    /// Its blocks' time where it ran inline.
    busy: Duration,
    /// Its blocks' time where it ran split over several threads.
    split_busy: Duration,
}

/// One op's loops over the run.
#[derive(Debug, Default)]
struct OpLoops {
    shapes: Vec<LoopTotal>,
    /// The loops' wall times on the op's thread, summed.
    wall: Duration,
}

impl OpLoops {
    fn add(&mut self, run: &LoopRun, split: bool) {
        self.wall += run.wall;
        let same = |total: &&mut LoopTotal| total.items == run.items && total.cost == run.cost;
        let total = match self.shapes.iter_mut().find(same) {
            Some(total) => total,
            None => {
                self.shapes.push(LoopTotal {
                    items: run.items,
                    cost: run.cost,
                    busy: Duration::ZERO,
                    split_busy: Duration::ZERO,
                });
                self.shapes.last_mut().expect("just pushed")
            }
        };
        match split {
            true => total.split_busy += run.busy,
            false => total.busy += run.busy,
        }
    }
}

/// Per iteration op, its parallel loops over the run.
#[derive(Debug)]
pub(super) struct IntraSplit {
    ops: Vec<Mutex<OpLoops>>,
    /// The latest split loops' waits beyond their blocks (ns), at most [`WAKE_SAMPLES`].
    waits: Mutex<WaitSamples>,
    /// The probe's figures, once probed (a fact of the machine and the pool kind, so a new
    /// run keeps them; `Some(None)`: the probe gave none).
    calibration: Mutex<Option<Option<Calibration>>>,
}

/// How many split loops' waits the figures are taken over (the latest ones).
const WAKE_SAMPLES: usize = 1024;

/// Split loops' waits beyond their busiest thread's blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitStats {
    /// Their mean: the figure the simulation adds per split loop.
    pub mean: Duration,
    /// Their median.
    pub median: Duration,
    /// Their 90th percentile.
    pub p90: Duration,
    /// How many loops.
    pub samples: usize,
}

/// A ring of the latest waits.
#[derive(Debug, Default)]
struct WaitSamples {
    waits: Vec<u64>,
    next: usize,
}

impl WaitSamples {
    fn push(&mut self, wait: u64) {
        if self.waits.len() < WAKE_SAMPLES {
            self.waits.push(wait);
        } else {
            self.waits[self.next] = wait;
        }
        self.next = (self.next + 1) % WAKE_SAMPLES;
    }

    fn stats(&self) -> Option<WaitStats> {
        let mut sorted = self.waits.clone();
        sorted.sort_unstable();
        let samples = sorted.len();
        let at = |share: usize| Duration::from_nanos(sorted[(samples - 1) * share / 100]);
        let sum: u128 = sorted.iter().map(|&wait| u128::from(wait)).sum();
        let mean = u64::try_from(sum / samples.max(1) as u128).unwrap_or(u64::MAX);
        (samples > 0).then(|| WaitStats {
            mean: Duration::from_nanos(mean),
            median: at(50),
            p90: at(90),
            samples,
        })
    }
}

impl IntraSplit {
    /// Room for an iteration of `ops` ops.
    pub(super) fn new(ops: usize) -> Self {
        IntraSplit {
            ops: (0..ops).map(|_| Mutex::new(OpLoops::default())).collect(),
            waits: Mutex::new(WaitSamples::default()),
            calibration: Mutex::new(None),
        }
    }

    /// The run totals back to zero (a new run starts).
    pub(super) fn reset(&self) {
        for op in &self.ops {
            *op.lock() = OpLoops::default();
        }
        *self.waits.lock() = WaitSamples::default();
    }

    /// Op `op` ran the loop `run` on its thread, on a pool of `threads` threads.
    fn loop_ran(&self, op: usize, run: &LoopRun, threads: usize) {
        if run.items == 0 {
            return;
        }
        let busiest = busiest_items(threads, run.items, run.cost);
        self.ops[op].lock().add(run, busiest < run.items);
        if busiest < run.items {
            let blocks = run.busy.as_nanos() * busiest as u128 / run.items as u128;
            let wait = run.wall.as_nanos().saturating_sub(blocks);
            let wait = u64::try_from(wait).unwrap_or(u64::MAX);
            self.waits.lock().push(wait);
        }
    }

    /// The waits of the run's latest split loops beyond their busiest thread's blocks
    /// (`None`: no loop split).
    pub(super) fn wait_stats(&self) -> Option<WaitStats> {
        self.waits.lock().stats()
    }

    /// Every loop's blocks' time over the run, inline and split.
    pub(super) fn busy(&self) -> Duration {
        let op_busy = |op: &Mutex<OpLoops>| -> Duration {
            let loops = op.lock();
            loops.shapes.iter().map(|s| s.busy + s.split_busy).sum()
        };
        self.ops.iter().map(op_busy).sum()
    }

    /// The probe's figures on pools of `pool`'s kind, probed the first time only; `None`
    /// without probing while no op has run a loop (the figures would change nothing).
    fn calibration(&self, pool: &dyn ThreadPool) -> Option<Calibration> {
        let ran_loops = |op: &Mutex<OpLoops>| !op.lock().shapes.is_empty();
        if !self.ops.iter().any(ran_loops) {
            return None;
        }
        *self
            .calibration
            .lock()
            .get_or_insert_with(|| calibrate(pool))
    }

    /// How much slower a split loop's blocks run than alone: the probe's factor on pools
    /// of `pool`'s kind (1 where the probe gave none).
    pub(super) fn corun(&self, pool: &dyn ThreadPool) -> f64 {
        self.calibration(pool).map_or(1.0, |found| found.corun)
    }

    /// What a split loop waits beyond its blocks: [`Self::wait_stats`] where a loop split,
    /// else the probe's split loops' waits on pools of `pool`'s kind; `None` when neither
    /// gives a figure.
    pub(super) fn wake(&self, pool: &dyn ThreadPool) -> Option<LoopWake> {
        let (stats, source) = match self.wait_stats() {
            Some(stats) => (stats, LoopWakeSource::Measured),
            None => (self.calibration(pool)?.wake, LoopWakeSource::Calibrated),
        };
        Some(LoopWake {
            wait: stats.mean,
            stats: Some(stats),
            source,
        })
    }

    /// Each op's mean split over `iterations` iterations whose op times summed to `totals`,
    /// split loops' block time divided by `corun` (see the module docs).
    pub(super) fn splits(&self, totals: &[Duration], iterations: u64, corun: f64) -> Vec<OpSplit> {
        let runs = u32::try_from(iterations.max(1)).unwrap_or(u32::MAX);
        let corun = if corun.is_finite() && corun > 0.0 {
            corun
        } else {
            1.0
        };
        totals
            .iter()
            .zip(&self.ops)
            .map(|(total, loops)| {
                let loops = loops.lock();
                let shapes = loops.shapes.iter().map(|shape| ParallelLoop {
                    items: shape.items,
                    cost: shape.cost,
                    time: (shape.busy + shape.split_busy.div_f64(corun)) / runs,
                });
                OpSplit {
                    serial: total.saturating_sub(loops.wall) / runs,
                    loops: shapes.collect(),
                }
            })
            .collect()
    }
}

/// The intra-op pool as one execution of an iteration op sees it: every call passes
/// through; every loop reported on the op's thread is recorded for the op (see the module
/// docs).
pub(super) struct MeasuredPool<'a> {
    inner: &'a dyn ThreadPool,
    split: &'a IntraSplit,
    op: usize,
    /// The op's thread.
    owner: std::thread::ThreadId,
}

impl<'a> MeasuredPool<'a> {
    /// `inner` measured for op `op`, on the op's own thread.
    pub(super) fn new(inner: &'a dyn ThreadPool, split: &'a IntraSplit, op: usize) -> Self {
        MeasuredPool {
            inner,
            split,
            op,
            owner: std::thread::current().id(),
        }
    }
}

impl ThreadPool for MeasuredPool<'_> {
    fn schedule(&self, task: Task) {
        self.inner.schedule(task);
    }

    fn schedule_with_hint(&self, task: Task, start: usize, limit: usize) {
        self.inner.schedule_with_hint(task, start, limit);
    }

    fn num_threads(&self) -> usize {
        self.inner.num_threads()
    }

    fn current_thread_id(&self) -> Option<usize> {
        self.inner.current_thread_id()
    }

    fn cancel(&self) -> usize {
        self.inner.cancel()
    }

    fn set_num_threads(&self, threads: usize) -> Result<(), PoolError> {
        self.inner.set_num_threads(threads)
    }

    fn try_run_one(&self) -> bool {
        self.inner.try_run_one()
    }

    fn stats(&self) -> PoolStats {
        self.inner.stats()
    }

    fn name(&self) -> &str {
        self.inner.name()
    }

    fn kind(&self) -> PoolKind {
        self.inner.kind()
    }

    fn loop_ran(&self, run: &LoopRun) {
        if std::thread::current().id() == self.owner {
            self.split.loop_ran(self.op, run, self.inner.num_threads());
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::kernels::par::{for_each_chunk, item_cost};
    use crate::pool::{Pool, PoolOptions};

    const US: Duration = Duration::from_micros(1);

    fn run(items: usize, busy: Duration, wall: Duration) -> LoopRun {
        LoopRun {
            items,
            cost: Cost::compute(1e9),
            busy,
            wall,
        }
    }

    #[test]
    fn an_op_without_loops_is_all_serial() {
        let split = IntraSplit::new(2);
        let totals = [30 * US, 8 * US];
        let splits = split.splits(&totals, 2, 1.0);
        assert_eq!(splits[0], OpSplit::serial(15 * US));
        assert_eq!(splits[1], OpSplit::serial(4 * US));
    }

    #[test]
    fn the_wait_inside_a_loop_is_neither_serial_nor_loop_work() {
        let split = IntraSplit::new(1);
        // The op took 11 us: 1 us outside its loop, 10 us in it, of which its thread waited
        // for the last blocks; the blocks ran 12 us in all.
        split.loop_ran(0, &run(64, 12 * US, 10 * US), 1);
        let body = split.splits(&[11 * US], 1, 1.0).remove(0);
        assert_eq!(body.serial, US);
        assert_eq!(body.loops.len(), 1);
        assert_eq!(body.loops[0].time, 12 * US);
        assert_eq!(
            body.time(1),
            13 * US,
            "one thread runs every block, and waits for none"
        );
        assert_eq!(body.time(2), 7 * US);
        split.reset();
        assert_eq!(
            split.splits(&[10 * US], 1, 1.0)[0],
            OpSplit::serial(10 * US)
        );
    }

    #[test]
    fn loops_of_one_shape_add_up_and_other_shapes_stay_apart() {
        let split = IntraSplit::new(1);
        for _ in 0..2 {
            split.loop_ran(0, &run(64, 4 * US, 4 * US), 1);
            split.loop_ran(0, &run(8, 2 * US, 2 * US), 1);
        }
        split.loop_ran(0, &run(0, US, US), 1); // an empty loop: nothing to split
        let body = split.splits(&[14 * US], 2, 1.0).remove(0);
        let shapes: Vec<(usize, Duration)> =
            body.loops.iter().map(|run| (run.items, run.time)).collect();
        assert_eq!(shapes, [(64, 4 * US), (8, 2 * US)]);
        assert_eq!(body.serial, US, "14 us less 12 us of loops, halved");
    }

    #[test]
    fn a_split_loops_wait_beyond_its_busiest_threads_blocks_is_its_wake_up() {
        let split = IntraSplit::new(1);
        // Inline on one thread: no wake-up to measure.
        split.loop_ran(0, &run(64, 12 * US, 12 * US), 1);
        assert_eq!(split.wait_stats(), None);
        // Split on two: 64 heavy items, 32 each, so 6 us of blocks on the busiest thread
        // of 12; the loop took 10, 8 and (its thread descheduled) 200 us on the op's thread:
        // waits of 4, 2 and 194 us. A step pays all three: their mean is the figure.
        split.loop_ran(0, &run(64, 12 * US, 10 * US), 2);
        split.loop_ran(0, &run(64, 12 * US, 8 * US), 2);
        split.loop_ran(0, &run(64, 12 * US, 200 * US), 2);
        let stats = split.wait_stats().unwrap();
        assert_eq!(stats.mean, 200 * US / 3);
        assert_eq!(
            (stats.median, stats.p90, stats.samples),
            (4 * US, 4 * US, 3)
        );
        split.reset();
        assert_eq!(split.wait_stats(), None);
    }

    #[test]
    fn split_loops_blocks_count_their_time_alone_inline_ones_as_they_ran() {
        let split = IntraSplit::new(1);
        // One shape, run inline once (8 us of blocks) and split once (10 us of blocks,
        // slowed by a co-run factor of 1.25: 8 us alone); the loops' walls were 8 and 6 us.
        split.loop_ran(0, &run(64, 8 * US, 8 * US), 1);
        split.loop_ran(0, &run(64, 10 * US, 6 * US), 2);
        assert_eq!(split.busy(), 18 * US);
        let body = split.splits(&[16 * US], 2, 1.25).remove(0);
        assert_eq!(body.loops.len(), 1, "one shape, however it ran");
        assert_eq!(body.loops[0].time, 8 * US, "(8 + 10 / 1.25) / 2");
        assert_eq!(body.serial, US, "(16 - 14) / 2");
        let plain = split.splits(&[16 * US], 2, 1.0).remove(0);
        assert_eq!(plain.loops[0].time, 9 * US);
        let nonsense = split.splits(&[16 * US], 2, f64::NAN).remove(0);
        assert_eq!(
            nonsense, plain,
            "a factor that is not a positive number counts as 1"
        );
    }

    #[test]
    fn a_kernel_loop_reports_itself_even_inline_on_one_thread() {
        for threads in [1, 2] {
            let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, threads, "split-test"));
            let pool = pool.unwrap();
            let split = IntraSplit::new(1);
            let measured = MeasuredPool::new(pool.as_dyn(), &split, 0);
            let mut out = vec![0u64; 64];
            // Enough work per chunk that the cost model splits it over two threads.
            let cost = item_cost(0.0, 1.0, 1e6, 1.0);
            for_each_chunk(&measured, &mut out, 1, cost, |index, chunk| {
                let mut x = index as u64;
                for i in 0..20_000u64 {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
                }
                chunk[0] = x | 1;
            });
            assert!(out.iter().all(|&value| value != 0));
            let body = split.splits(&[Duration::from_secs(1)], 1, 1.0).remove(0);
            assert_eq!(body.loops.len(), 1, "{threads} threads: {body:?}");
            assert_eq!(body.loops[0].items, 64);
            assert!(body.loops[0].time > Duration::ZERO, "its blocks were timed");
            assert!(
                body.serial < Duration::from_secs(1),
                "its wall left the serial part"
            );
        }
    }
}
