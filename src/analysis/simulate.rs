//! What if: the step time the engine would take with other thread counts, predicted by a
//! discrete-event simulation of the engine over the graph that ran.
//!
//! # Input ([`EngineModel`])
//! One iteration's ops in push order with the vars they read and write and the device
//! (worker pool) each runs on ([`RanGraph`]), each op's priority, each device's workers and
//! queue order ([`SimDevice`]), and per op its body split ([`OpSplit`]): a serial part and
//! its parallel loops ([`ParallelLoop`]), each with its items, their cost and its time on
//! one thread. With `intra` intra-op threads a loop takes its one-thread time times the
//! share of its items the busiest thread runs when the kernels cut it for `intra` threads
//! ([`busiest_items`]: Eigen's cost model picks the blocks, or runs a small loop inline;
//! the blocks go a block at a time to the threads), so an op takes
//! `serial + sum over its loops of time * busiest_items(intra) / items`. The split comes
//! from measurement, at any intra-op count, intra 1 included: every loop reports its
//! blocks' summed time and its wall time on the op's thread, and the serial part is the
//! op's time less its loops' wall times, so the op thread's wait for other threads' blocks
//! counts as neither serial nor loop work (`workload::run::intra_split`). An op that ran no
//! loop is all serial. A loop that runs split over several threads costs two things beyond
//! its busiest thread's share: its blocks run slower, since the threads compute at once and
//! share the caches, the memory bus and the clock budget of the chip (their one-thread time
//! times the co-run factor, [`EngineModel::with_corun`]), and it waits once for a woken
//! intra-op thread and for its last block ([`EngineModel::with_loop_wake`]). Both figures are
//! measured: the wait as the run's mean, over its split loops, of a loop's wall time beyond
//! its busiest thread's blocks (a mean, because a step pays the sum of the waits), and both
//! by a probe on the machine that runs one GEMM inline and split over two intra-op threads
//! of a pool of the run's kind, the pool's workers parked before each split
//! (`workload::run::wake_probe`); the probe's wait stands in where no loop of the run split
//! (intra 1). A run that split loops measured its blocks co-running, so their recorded time
//! is divided by the same factor to give the one-thread time.
//!
//! # The simulation ([`EngineModel::step`])
//! The engine orders every var's accesses in push order, so an op waits for exactly the
//! edges of the span analysis (read-after-write, write-after-read, write-after-write; the
//! same `predecessors` pass). Every op is pushed at time 0; an op with nothing to wait for
//! is ready at once, any other when its last predecessor ends. A ready op joins its device's
//! queue: first in, first out on a plain worker pool ([`QueueOrder::Fifo`]: the engine's CPU
//! workers), highest priority first and first in, first out among equals on a priority pool
//! ([`QueueOrder::Priority`]: the CPU priority pool, the GPU workers). Ops that become ready
//! at the same moment join in push order. Whenever a device has an idle worker and a queued
//! op, the worker takes the head of the queue and is busy for the engine's cost before the
//! op, then the op's time. That cost is the device's measured [`DispatchCost`] for its
//! count of workers, one or several ([`EngineModel::with_dispatch_by_workers`];
//! `analysis::dispatch` has the rule and how a run's figure is carried to the other count):
//! its continuing figure for a worker that finished an op at that same moment, its waking
//! figure for a worker that was idle (workers that just finished take the queue's head
//! first). Events are the op ends, taken in time order from a heap (all ends of one moment
//! before the queues are served again), so one simulation costs `O(ops log ops + edges)` and
//! is deterministic.
//! The predicted step is the moment the last op ends.
//!
//! A device's workers are the inter-op count for the engine's CPU worker pools
//! ([`Workers::Inter`]) and its fixed count for the others (the priority pool, GPU workers,
//! the IO worker, the naive engine's one pushing thread).
//!
//! # The curve ([`EngineModel::curve`])
//! A grid of counts needs fewer simulations than points, with the same results, by two
//! rules. The intra-op count enters only through the op times, so counts giving every op
//! the same time (a graph without parallel loops: all of them) share one column of
//! simulations. And a simulation in which no ready op of an inter-op device ever waited
//! while all its workers were busy (every queue drained whenever it was served) runs the
//! same timeline with more workers: each serving moment pops the same ops in the same
//! order with the same engine gaps (a gap depends on the workers that just finished, not
//! on the idle ones), by induction over the events; so every larger inter-op count with the
//! same engine costs (one worker and several differ: [`DispatchByWorkers`]) takes the same
//! step without a simulation of its own.
//!
//! # Known answers (the tests)
//! A chain takes its work at any inter count; `n` equal independent ops take
//! `ceil(n / inter) * t`; a perfectly parallel loop takes `time / intra`, and a loop the
//! cost model cuts into uneven blocks its busiest thread's share; a priority pool runs a
//! ready high-priority op before an earlier low-priority one; one worker with serial bodies
//! takes the sum of the op times, exactly (integer nanoseconds throughout), and with engine
//! costs one waking gap plus a continuing gap per further op; and without engine costs every
//! prediction lies between Brent's bounds, `max(work / inter, span)` and `work / inter +
//! span`.
//!
//! # Assumptions ([`ASSUMPTIONS`], printed where the curve is shown)
//! An idealised machine: `inter x intra` cores for each CPU device's workers (no
//! oversubscription, no other process), the engine's cost before an op as the run measured
//! it on its device, carried between one worker and several by the hand-off probe's ratio
//! (two workers standing for any count above one), every op pushed at once, one iteration at a time
//! (the driver's iteration marker reads every tensor, so an iteration's writes wait for the
//! one before), a parallel loop's blocks of equal items take equal time, a split loop's
//! blocks slowed by the co-run factor measured for two threads at any intra-op count above
//! one, its only other cost one wait of the measured mean, and ops on separate inter-op
//! workers running at their recorded speed (no co-run slowdown between ops).
#![forbid(unsafe_code)]

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use super::dispatch::{DispatchByWorkers, DispatchCost};
use super::span::{predecessors, Pred, RanGraph};
use crate::kernels::par::busiest_items;
use crate::pool::parallel_for::Cost;

/// The inter-op and intra-op counts of the predicted curve.
pub const GRID: [usize; 7] = [1, 2, 4, 8, 16, 32, 64];

/// What the prediction assumes, in one line.
pub const ASSUMPTIONS: &str = "an idealised machine with inter x intra cores per CPU device: \
    no oversubscription, the engine's cost before each op as this run measured it per device \
    (a worker continuing, a worker woken), carried between one worker and several by the \
    ratio a probe measured on this machine (the engine at one worker and at two running \
    spinning ops of the run's mean time, for ops of at most 50 us; two stand for any count \
    above one), an op's parallel loops cut \
    into blocks by the cost model for that many intra-op threads, blocks of equal items \
    taking equal time, a split loop's blocks slower by the co-run factor (one GEMM timed on \
    this machine inline and split over two intra-op threads, used for any count above one) \
    plus one mean wait for a woken intra-op thread (measured on the run's split loops, or, \
    where none split, on that GEMM's), ops on separate inter-op workers not slowing each other";

/// One parallel loop of an op's body: what the kernels' cost model cuts, and its time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ParallelLoop {
    /// Its items.
    pub items: usize,
    /// The cost of one item.
    pub cost: Cost,
    /// Its blocks' time on one thread.
    pub time: Duration,
}

impl ParallelLoop {
    /// Its time with `intra` intra-op threads (at least one): the busiest thread's items'
    /// share of its one-thread time (integer nanoseconds, so one thread takes `time`
    /// exactly).
    ///
    /// ```
    /// use std::time::Duration;
    /// use enginetop::analysis::ParallelLoop;
    /// use enginetop::kernels::item_cost;
    /// let ms = Duration::from_millis;
    /// let heavy = ParallelLoop { items: 64, cost: item_cost(0.0, 0.0, 1e6, 1.0), time: ms(8) };
    /// assert_eq!((heavy.time(1), heavy.time(2), heavy.time(4)), (ms(8), ms(4), ms(2)));
    /// ```
    pub fn time(&self, intra: usize) -> Duration {
        if self.items == 0 {
            return self.time;
        }
        let busiest = busiest_items(intra.max(1), self.items, self.cost);
        let nanos = self.time.as_nanos() * busiest as u128 / self.items as u128;
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// Whether it runs split over several threads with `intra` intra-op threads (else inline
    /// on the op's thread).
    pub fn splits(&self, intra: usize) -> bool {
        self.items > 0 && busiest_items(intra.max(1), self.items, self.cost) < self.items
    }
}

/// How an op's body divides over intra-op threads.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpSplit {
    /// The part only the op's thread runs.
    pub serial: Duration,
    /// Its parallel loops.
    pub loops: Vec<ParallelLoop>,
}

impl OpSplit {
    /// A body that does not divide: `time` on any count.
    pub fn serial(time: Duration) -> Self {
        OpSplit {
            serial: time,
            loops: Vec::new(),
        }
    }

    /// How many of its loops run split over several threads with `intra` intra-op threads
    /// (the others run inline on the op's thread).
    pub fn split_loops(&self, intra: usize) -> usize {
        self.loops.iter().filter(|run| run.splits(intra)).count()
    }

    /// Its time with `intra` intra-op threads (at least one).
    ///
    /// ```
    /// use std::time::Duration;
    /// use enginetop::analysis::{OpSplit, ParallelLoop};
    /// use enginetop::kernels::item_cost;
    /// let ms = Duration::from_millis;
    /// let gemm = ParallelLoop { items: 64, cost: item_cost(0.0, 0.0, 1e6, 1.0), time: ms(8) };
    /// let split = OpSplit { serial: ms(2), loops: vec![gemm] };
    /// assert_eq!((split.time(1), split.time(4)), (ms(10), ms(4)));
    /// ```
    pub fn time(&self, intra: usize) -> Duration {
        let loops = self.loops.iter().map(|run| run.time(intra));
        self.serial + loops.sum::<Duration>()
    }
}

/// How many workers a device has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workers {
    /// The inter-op count (the engine's CPU workers).
    Inter,
    /// This many, whatever the counts.
    Fixed(usize),
}

/// Which ready op a device's idle worker takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueOrder {
    /// The one that became ready first.
    Fifo,
    /// The highest priority, the one ready first among equals.
    Priority,
}

/// One device (worker pool) of the simulated engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimDevice {
    /// Its workers.
    pub workers: Workers,
    /// Its queue.
    pub order: QueueOrder,
}

/// One point of the predicted curve.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct PredictedStep {
    /// Inter-op workers.
    pub inter: usize,
    /// Intra-op threads.
    pub intra: usize,
    /// The predicted step, in milliseconds.
    pub step_ms: f64,
}

/// The engine, the graph and the op bodies to simulate (see the `analysis::simulate` module docs).
#[derive(Clone, Debug)]
pub struct EngineModel {
    /// Per op, its device, priority and body split.
    ops: Vec<ModelOp>,
    devices: Vec<SimDevice>,
    /// Which ops wait for which.
    waits: Waits,
    /// Per device, the engine's cost before each op, with one worker and with several.
    dispatch: Vec<DispatchByWorkers>,
    /// What a loop split over several threads waits for a woken intra-op thread.
    loop_wake: Duration,
    /// How much slower a split loop's blocks run than on one thread alone.
    corun: f64,
}

/// Which ops wait for which in one graph (from its [`predecessors`]): what the simulation
/// walks, the same whatever the op times, so a live run builds it once and copies it (three
/// flat vectors) into each model.
#[derive(Clone, Debug, Default)]
pub(crate) struct Waits {
    /// Per op, how many distinct ops it waits for.
    waits_for: Vec<usize>,
    /// Per op, where its waiting ops start in `unblocks` (one more entry: the end).
    unblocks_at: Vec<usize>,
    /// The ops waiting for each op, op by op, each op's in push order.
    unblocks: Vec<usize>,
}

impl Waits {
    /// The waits of a graph whose ops have `preds`.
    pub(crate) fn new(preds: &[Vec<Pred>]) -> Self {
        let mut waits_for = vec![0; preds.len()];
        let mut before_of: Vec<Vec<usize>> = Vec::with_capacity(preds.len());
        let mut unblocked = vec![0usize; preds.len()];
        for (op, preds) in preds.iter().enumerate() {
            let mut before: Vec<usize> = preds.iter().map(|pred| pred.op).collect();
            before.sort_unstable();
            before.dedup();
            waits_for[op] = before.len();
            before.iter().for_each(|&pred| unblocked[pred] += 1);
            before_of.push(before);
        }
        let mut unblocks_at = Vec::with_capacity(preds.len() + 1);
        let mut at = 0;
        for count in &unblocked {
            unblocks_at.push(at);
            at += count;
        }
        unblocks_at.push(at);
        let mut next = unblocks_at.clone();
        let mut unblocks = vec![0; at];
        for (op, before) in before_of.iter().enumerate() {
            for &pred in before {
                unblocks[next[pred]] = op;
                next[pred] += 1;
            }
        }
        Waits {
            waits_for,
            unblocks_at,
            unblocks,
        }
    }

    /// The ops waiting for `op`, in push order.
    fn unblocks(&self, op: usize) -> &[usize] {
        &self.unblocks[self.unblocks_at[op]..self.unblocks_at[op + 1]]
    }
}

#[derive(Clone, Debug)]
struct ModelOp {
    device: usize,
    priority: i32,
    split: OpSplit,
}

impl EngineModel {
    /// The model of `graph` (its op times are not used: `splits` give the bodies) with
    /// `priorities` and `splits` per op (a missing one: priority 0, the op's time serial) and
    /// `devices` per device of the graph (a missing one: inter-op workers, first in first
    /// out).
    pub fn new(
        graph: &RanGraph,
        priorities: &[i32],
        splits: &[OpSplit],
        devices: &[SimDevice],
    ) -> Self {
        let waits = Waits::new(&predecessors(graph));
        Self::with_waits(graph, waits, priorities, splits, devices)
    }

    /// [`new`](Self::new) with `graph`'s `waits`, built once for a graph whose times change.
    pub(crate) fn with_waits(
        graph: &RanGraph,
        waits: Waits,
        priorities: &[i32],
        splits: &[OpSplit],
        devices: &[SimDevice],
    ) -> Self {
        let ops = graph.ops.iter().enumerate().map(|(index, op)| ModelOp {
            device: op.device,
            priority: priorities.get(index).copied().unwrap_or(0),
            split: splits
                .get(index)
                .cloned()
                .unwrap_or_else(|| OpSplit::serial(op.time)),
        });
        let ops: Vec<ModelOp> = ops.collect();
        Self::from_ops(ops, waits, devices)
    }

    /// The model of `ops` with their `waits` on `devices` (see [`new`](Self::new)).
    fn from_ops(ops: Vec<ModelOp>, waits: Waits, devices: &[SimDevice]) -> Self {
        let plain = SimDevice {
            workers: Workers::Inter,
            order: QueueOrder::Fifo,
        };
        let device_count = ops.iter().map(|op| op.device + 1).max().unwrap_or(0);
        let devices: Vec<SimDevice> = (0..device_count.max(devices.len()))
            .map(|device| devices.get(device).copied().unwrap_or(plain))
            .collect();
        let dispatch = vec![DispatchByWorkers::default(); devices.len()];
        EngineModel {
            ops,
            devices,
            waits,
            dispatch,
            loop_wake: Duration::ZERO,
            corun: 1.0,
        }
    }

    /// The model with `wake` added to every loop that runs split over several threads: the
    /// wait for a woken intra-op thread.
    pub fn with_loop_wake(mut self, wake: Duration) -> Self {
        self.loop_wake = wake;
        self
    }

    /// The model with every loop that runs split over several threads taking `factor`
    /// times its busiest thread's one-thread time (its threads compute at once); a factor
    /// that is not a positive number counts as 1.
    pub fn with_corun(mut self, factor: f64) -> Self {
        self.corun = if factor.is_finite() && factor > 0.0 {
            factor
        } else {
            1.0
        };
        self
    }

    /// Every op's time with `intra` intra-op threads, in push order (nanoseconds).
    fn op_times(&self, intra: usize) -> Vec<u64> {
        (0..self.ops.len())
            .map(|op| nanos(self.op_time(op, intra)))
            .collect()
    }

    /// Op `op`'s time with `intra` intra-op threads: its serial part, its inline loops, and
    /// its split loops slowed by the co-run factor, each with its wake-up.
    fn op_time(&self, op: usize, intra: usize) -> Duration {
        let split = &self.ops[op].split;
        let loops = split.loops.iter().map(|run| {
            let time = run.time(intra);
            if run.splits(intra) {
                time.mul_f64(self.corun) + self.loop_wake
            } else {
                time
            }
        });
        split.serial + loops.sum::<Duration>()
    }

    /// The model with the engine's measured cost before each op, per device of the graph
    /// (a missing one: none), the same whatever the workers.
    pub fn with_dispatch(self, costs: &[DispatchCost]) -> Self {
        let flat: Vec<DispatchByWorkers> =
            costs.iter().copied().map(DispatchByWorkers::flat).collect();
        self.with_dispatch_by_workers(&flat)
    }

    /// The model with the engine's cost before each op per device of the graph with one
    /// worker and with several (a missing one: none).
    pub fn with_dispatch_by_workers(mut self, costs: &[DispatchByWorkers]) -> Self {
        for (device, cost) in self.dispatch.iter_mut().enumerate() {
            *cost = costs.get(device).copied().unwrap_or_default();
        }
        self
    }

    /// The predicted step with `inter` inter-op workers and `intra` intra-op threads (each at
    /// least one).
    pub fn step(&self, inter: usize, intra: usize) -> Duration {
        self.run(inter.max(1), intra.max(1)).end
    }

    /// The predicted step for every pair of `counts` (inter-major): each point what
    /// [`point`](Self::point) gives, from fewer simulations (the module docs' curve).
    pub fn curve(&self, counts: &[usize]) -> Vec<PredictedStep> {
        // Per distinct op times seen, the step at each inter-op count.
        let mut columns: Vec<(Vec<u64>, Vec<Duration>)> = Vec::new();
        let mut by_intra = Vec::with_capacity(counts.len());
        for &intra in counts {
            let times = self.op_times(intra.max(1));
            let column = match columns.iter().position(|(seen, _)| *seen == times) {
                Some(column) => column,
                None => {
                    let steps = self.steps_over_inter(&times, counts);
                    columns.push((times, steps));
                    columns.len() - 1
                }
            };
            by_intra.push(column);
        }
        let mut points = Vec::with_capacity(counts.len() * counts.len());
        for (row, &inter) in counts.iter().enumerate() {
            for (&intra, &column) in counts.iter().zip(&by_intra) {
                let step = columns[column].1[row];
                points.push(PredictedStep {
                    inter,
                    intra,
                    step_ms: step.as_secs_f64() * 1e3,
                });
            }
        }
        points
    }

    /// The step with op `times` at each of `counts` inter-op workers, a count at or above
    /// one whose simulation left no ready op waiting for a busy worker taking its step.
    fn steps_over_inter(&self, times: &[u64], counts: &[usize]) -> Vec<Duration> {
        let mut enough: Option<(usize, Duration)> = None;
        let mut steps = Vec::with_capacity(counts.len());
        for &inter in counts {
            let inter = inter.max(1);
            let same = |at: &usize| inter >= *at && self.same_dispatch(*at, inter);
            if let Some((_, step)) = enough.filter(|(at, _)| same(at)) {
                steps.push(step);
                continue;
            }
            let timeline = self.simulate(times, inter);
            if !timeline.queued_behind_busy {
                enough = Some((inter, timeline.end));
            }
            steps.push(timeline.end);
        }
        steps
    }

    /// Whether every device's engine costs are the same at `a` and at `b` inter-op workers.
    fn same_dispatch(&self, a: usize, b: usize) -> bool {
        let at = |device: usize, inter| self.dispatch[device].at(self.workers(device, inter));
        (0..self.devices.len()).all(|device| at(device, a) == at(device, b))
    }

    /// The point `(inter, intra)` of the curve.
    pub fn point(&self, inter: usize, intra: usize) -> PredictedStep {
        PredictedStep {
            inter,
            intra,
            step_ms: self.step(inter, intra).as_secs_f64() * 1e3,
        }
    }

    /// The fastest predicted counts with `inter x intra <= cores` (ties: fewer threads, then
    /// fewer intra-op threads); `None` for no cores.
    pub fn best_for_cores(&self, cores: usize) -> Option<PredictedStep> {
        let pairs =
            (1..=cores).flat_map(|inter| (1..=cores / inter).map(move |intra| (inter, intra)));
        let timed =
            pairs.map(|(inter, intra)| (self.step(inter, intra), inter * intra, intra, inter));
        let (_, _, intra, inter) = timed.min()?;
        Some(self.point(inter, intra))
    }

    fn workers(&self, device: usize, inter: usize) -> usize {
        match self.devices[device].workers {
            Workers::Inter => inter,
            Workers::Fixed(count) => count.max(1),
        }
    }

    /// The simulation with `intra` intra-op threads.
    fn run(&self, inter: usize, intra: usize) -> Timeline {
        self.simulate(&self.op_times(intra), inter)
    }

    /// The simulation itself with op `times` in nanoseconds (see the module docs).
    fn simulate(&self, times: &[u64], inter: usize) -> Timeline {
        let mut waiting = self.waits.waits_for.clone();
        let mut idle: Vec<usize> = (0..self.devices.len())
            .map(|device| self.workers(device, inter))
            .collect();
        let gaps: Vec<(u64, u64)> = (self.dispatch.iter().enumerate())
            .map(|(device, cost)| cost.at(self.workers(device, inter)))
            .map(|cost| (nanos(cost.continuing), nanos(cost.waking)))
            .collect();
        // Per device, its workers that finished an op at `now` (they take the next op as a
        // continuation; the others are woken).
        let mut fresh = vec![0usize; self.devices.len()];
        let mut queues = ReadyQueues::new(&self.devices);
        let mut ends: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
        let mut starts = vec![0u64; self.ops.len()];
        let mut queued_behind_busy = false;
        let (mut finished, mut ready) = (Vec::new(), Vec::new());
        let mut now = 0u64;
        for op in (0..self.ops.len()).filter(|&op| waiting[op] == 0) {
            queues.push(&self.ops[op], op);
        }
        loop {
            for (device, idle) in idle.iter_mut().enumerate() {
                while *idle > 0 {
                    let Some(op) = queues.pop(device) else { break };
                    *idle -= 1;
                    let (continuing, waking) = gaps[device];
                    let gap = if fresh[device] > 0 {
                        fresh[device] -= 1;
                        continuing
                    } else {
                        waking
                    };
                    starts[op] = now.saturating_add(gap);
                    ends.push(Reverse((starts[op].saturating_add(times[op]), op)));
                }
                let inter_workers = self.devices[device].workers == Workers::Inter;
                queued_behind_busy |= inter_workers && !queues.is_empty(device);
            }
            fresh.fill(0);
            let Some(Reverse((end, first))) = ends.pop() else {
                break;
            };
            now = end;
            finished.clear();
            finished.push(first);
            while let Some(&Reverse((end, op))) = ends.peek() {
                if end != now {
                    break;
                }
                ends.pop();
                finished.push(op);
            }
            ready.clear();
            for &op in &finished {
                idle[self.ops[op].device] += 1;
                fresh[self.ops[op].device] += 1;
                for &next in self.waits.unblocks(op) {
                    waiting[next] -= 1;
                    if waiting[next] == 0 {
                        ready.push(next);
                    }
                }
            }
            ready.sort_unstable();
            for &op in &ready {
                queues.push(&self.ops[op], op);
            }
        }
        Timeline {
            starts: starts.into_iter().map(Duration::from_nanos).collect(),
            end: Duration::from_nanos(now),
            queued_behind_busy,
        }
    }
}

/// When each op started, when the last one ended, and whether a ready op of an inter-op
/// device ever waited while all its workers were busy.
struct Timeline {
    #[cfg_attr(any(not(test), loom), allow(dead_code))]
    starts: Vec<Duration>,
    end: Duration,
    queued_behind_busy: bool,
}

/// `time` in whole nanoseconds (saturating: no simulated time comes near).
fn nanos(time: Duration) -> u64 {
    u64::try_from(time.as_nanos()).unwrap_or(u64::MAX)
}

/// Per device, its ready ops in the order its workers take them.
struct ReadyQueues {
    queues: Vec<ReadyQueue>,
}

/// One device's ready ops.
enum ReadyQueue {
    /// First ready, first taken.
    Fifo(VecDeque<usize>),
    /// Highest priority first, then first ready (a sequence number per push).
    Priority(BinaryHeap<(i32, Reverse<u64>, usize)>, u64),
}

impl ReadyQueues {
    fn new(devices: &[SimDevice]) -> Self {
        let queue = |device: &SimDevice| match device.order {
            QueueOrder::Fifo => ReadyQueue::Fifo(VecDeque::new()),
            QueueOrder::Priority => ReadyQueue::Priority(BinaryHeap::new(), 0),
        };
        ReadyQueues {
            queues: devices.iter().map(queue).collect(),
        }
    }

    fn push(&mut self, model: &ModelOp, op: usize) {
        match &mut self.queues[model.device] {
            ReadyQueue::Fifo(queue) => queue.push_back(op),
            ReadyQueue::Priority(heap, sequence) => {
                heap.push((model.priority, Reverse(*sequence), op));
                *sequence += 1;
            }
        }
    }

    fn pop(&mut self, device: usize) -> Option<usize> {
        match &mut self.queues[device] {
            ReadyQueue::Fifo(queue) => queue.pop_front(),
            ReadyQueue::Priority(heap, _) => heap.pop().map(|(_, _, op)| op),
        }
    }

    fn is_empty(&self, device: usize) -> bool {
        match &self.queues[device] {
            ReadyQueue::Fifo(queue) => queue.is_empty(),
            ReadyQueue::Priority(heap, _) => heap.is_empty(),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::analysis::span::tests::op;
    use crate::analysis::{analyze, RanOp};
    use crate::device::identity::Lane;

    const MS: Duration = Duration::from_millis(1);

    fn graph(ops: Vec<RanOp>, vars: usize) -> RanGraph {
        let devices = ops.iter().map(|op| op.device + 1).max().unwrap_or(1);
        RanGraph {
            ops,
            vars: (0..vars).map(|var| format!("v{var}")).collect(),
            devices: (0..devices as u32).map(Lane::CpuWorkers).collect(),
            wall: Duration::ZERO,
        }
    }

    fn serial_model(graph: &RanGraph) -> EngineModel {
        EngineModel::new(graph, &[], &[], &[])
    }

    /// A loop of 256 heavy items taking `time` on one thread: the cost model cuts it into
    /// blocks that divide evenly over any power-of-two thread count up to 64.
    fn even_loop(time: Duration) -> ParallelLoop {
        ParallelLoop {
            items: 256,
            cost: Cost::compute(1e9),
            time,
        }
    }

    /// An op of `serial` on its thread and one [`even_loop`] of `parallel`.
    fn split(serial: Duration, parallel: Duration) -> OpSplit {
        OpSplit {
            serial,
            loops: vec![even_loop(parallel)],
        }
    }

    /// A deterministic random graph: `n` ops over `vars` vars, each reading up to three and
    /// writing one, 1 to 9 ms each.
    fn random_graph(n: usize, vars: usize, seed: u64) -> RanGraph {
        let mut state = seed;
        let mut next = move |bound: u64| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) % bound
        };
        let ops = (0..n)
            .map(|i| {
                let reads: Vec<usize> = (0..next(4)).map(|_| next(vars as u64) as usize).collect();
                let write = next(vars as u64) as usize;
                op(
                    &format!("r{i}"),
                    &reads,
                    &[write],
                    (1 + next(9) as u32) * MS,
                )
            })
            .collect();
        graph(ops, vars)
    }

    #[test]
    fn a_chain_takes_its_work_at_any_inter_count() {
        let ops = (0..12)
            .map(|i| op(&format!("c{i}"), &[0], &[0], MS * (i + 1)))
            .collect();
        let chain = graph(ops, 1);
        let model = serial_model(&chain);
        for inter in [1, 2, 3, 8, 64] {
            assert_eq!(model.step(inter, 1), 78 * MS, "inter {inter}");
        }
    }

    #[test]
    fn independent_equal_ops_take_ceil_n_over_inter_rounds() {
        let n = 10;
        let ops = (0..n)
            .map(|i| op(&format!("t{i}"), &[], &[i], 3 * MS))
            .collect();
        let model = serial_model(&graph(ops, n));
        for inter in 1..=12usize {
            let rounds = n.div_ceil(inter) as u32;
            assert_eq!(model.step(inter, 1), rounds * 3 * MS, "inter {inter}");
        }
    }

    #[test]
    fn a_perfectly_parallel_body_scales_with_intra() {
        let one = graph(vec![op("gemm", &[], &[0], 64 * MS)], 1);
        let model = EngineModel::new(&one, &[], &[split(Duration::ZERO, 64 * MS)], &[]);
        for intra in GRID {
            assert_eq!(model.step(1, intra), 64 * MS / intra as u32);
        }
        let serial = serial_model(&one);
        assert_eq!(serial.step(1, 64), 64 * MS, "a serial body does not scale");
    }

    #[test]
    fn independent_split_ops_take_ceil_n_over_inter_rounds_of_their_intra_time() {
        let n = 7;
        let body = split(MS, 12 * MS);
        let ops = (0..n)
            .map(|i| op(&format!("s{i}"), &[], &[i], 13 * MS))
            .collect();
        let model = EngineModel::new(&graph(ops, n), &[], &vec![body; n], &[]);
        for (inter, intra) in [(1, 1), (2, 1), (3, 2), (4, 4), (7, 4), (8, 16)] {
            let rounds = n.div_ceil(inter) as u32;
            let body = MS + 12 * MS / intra as u32;
            assert_eq!(model.step(inter, intra), rounds * body, "{inter}x{intra}");
        }
    }

    #[test]
    fn a_loop_takes_its_busiest_threads_share_as_the_cost_model_cuts_it() {
        // 3 heavy items on 2 threads: blocks of 2 and 1 items, the busiest thread runs 2 of
        // the 3 items' time.
        let heavy = ParallelLoop {
            items: 3,
            cost: Cost::compute(1e9),
            time: 9 * MS,
        };
        assert_eq!(
            (heavy.time(1), heavy.time(2), heavy.time(3)),
            (9 * MS, 6 * MS, 3 * MS)
        );
        // Too little work for a second thread: the loop runs inline at any count.
        let small = ParallelLoop {
            cost: Cost::compute(1.0),
            ..heavy
        };
        assert_eq!(small.time(64), 9 * MS);
        let body = OpSplit {
            serial: 2 * MS,
            loops: vec![heavy, small],
        };
        let one = graph(vec![op("two-loops", &[], &[0], 20 * MS)], 1);
        let model = EngineModel::new(&one, &[], &[body], &[]);
        assert_eq!(model.step(1, 1), 20 * MS);
        assert_eq!(model.step(1, 2), 17 * MS, "2 serial + 6 + 9");
    }

    #[test]
    fn engine_costs_delay_each_op_by_its_workers_kind_of_gap() {
        let us = Duration::from_micros(1);
        let costs = [DispatchCost {
            continuing: us,
            waking: 10 * us,
        }];
        // A chain on one worker: woken once, then continuing.
        let ops = (0..5)
            .map(|i| op(&format!("c{i}"), &[0], &[0], MS))
            .collect();
        let chain = serial_model(&graph(ops, 1)).with_dispatch(&costs);
        assert_eq!(chain.step(1, 1), 5 * MS + 10 * us + 4 * us);
        assert_eq!(
            chain.step(4, 1),
            5 * MS + 10 * us + 4 * us,
            "one ready op at a time"
        );
        // A fork: `a`, then `b` and `c` at once on two workers: one continues after `a`,
        // the other (idle since the start) is woken.
        let fork = vec![
            op("a", &[], &[0], MS),
            op("b", &[0], &[1], 2 * MS),
            op("c", &[0], &[2], 3 * MS),
        ];
        let model = serial_model(&graph(fork, 3)).with_dispatch(&costs);
        let timeline = model.run(2, 1);
        assert_eq!(timeline.starts, [10 * us, MS + 11 * us, MS + 20 * us]);
        assert_eq!(model.step(2, 1), 4 * MS + 20 * us);
        assert_eq!(
            serial_model(&graph(vec![op("a", &[], &[0], MS)], 1)).step(1, 1),
            MS,
            "no measured cost, none added"
        );
    }

    #[test]
    fn a_split_loop_waits_once_for_a_woken_thread_and_an_inline_one_never() {
        let us = Duration::from_micros(1);
        let small = ParallelLoop {
            items: 3,
            cost: Cost::compute(1.0),
            time: MS,
        };
        let body = OpSplit {
            serial: MS,
            loops: vec![even_loop(8 * MS), even_loop(8 * MS), small],
        };
        assert_eq!((body.split_loops(1), body.split_loops(2)), (0, 2));
        let one = graph(vec![op("op", &[], &[0], 18 * MS)], 1);
        let model = EngineModel::new(&one, &[], &[body], &[]).with_loop_wake(50 * us);
        assert_eq!(model.step(1, 1), 18 * MS, "intra 1: every loop inline");
        assert_eq!(model.step(1, 2), 10 * MS + 100 * us);
    }

    #[test]
    fn the_corun_factor_slows_only_the_split_loops() {
        let us = Duration::from_micros(1);
        let small = ParallelLoop {
            items: 3,
            cost: Cost::compute(1.0),
            time: MS,
        };
        let body = OpSplit {
            serial: MS,
            loops: vec![even_loop(8 * MS), small],
        };
        let one = graph(vec![op("op", &[], &[0], 10 * MS)], 1);
        let plain = EngineModel::new(&one, &[], &[body], &[]).with_loop_wake(50 * us);
        let model = plain.clone().with_corun(1.25);
        assert_eq!(model.step(1, 1), 10 * MS, "intra 1: nothing co-runs");
        // 1 ms serial, the small loop inline (1 ms), the split loop's 4 ms share slowed to 5.
        assert_eq!(model.step(1, 2), 7 * MS + 50 * us);
        assert_eq!(model.step(1, 4), MS + MS + 2500 * us + 50 * us);
        assert_eq!(
            plain.step(1, 2),
            6 * MS + 50 * us,
            "no factor: the one-thread time"
        );
        for nonsense in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(
                plain.clone().with_corun(nonsense).step(1, 2),
                plain.step(1, 2)
            );
        }
    }

    #[test]
    fn a_priority_pool_runs_the_higher_priority_op_first() {
        // `low` (priority 0) was pushed before `high` (priority 5); `after` on a FIFO device
        // waits for `high`.
        let mut ops = vec![
            op("low", &[], &[0], 10 * MS),
            op("high", &[], &[1], MS),
            op("after", &[1], &[2], 10 * MS),
        ];
        ops[2].device = 1;
        let g = graph(ops, 3);
        let fixed = |order| SimDevice {
            workers: Workers::Fixed(1),
            order,
        };
        let priority = [fixed(QueueOrder::Priority), fixed(QueueOrder::Fifo)];
        let model = EngineModel::new(&g, &[0, 5, 0], &[], &priority);
        let timeline = model.run(1, 1);
        assert_eq!(timeline.starts, [MS, Duration::ZERO, MS]);
        assert_eq!(model.step(1, 1), 11 * MS);
        let fifo = [fixed(QueueOrder::Fifo), fixed(QueueOrder::Fifo)];
        let model = EngineModel::new(&g, &[0, 5, 0], &[], &fifo);
        assert_eq!(
            model.step(1, 1),
            21 * MS,
            "first in, first out ignores priority"
        );
    }

    #[test]
    fn fixed_workers_ignore_the_inter_count() {
        let ops = (0..4)
            .map(|i| op(&format!("g{i}"), &[], &[i], 2 * MS))
            .collect();
        let devices = [SimDevice {
            workers: Workers::Fixed(2),
            order: QueueOrder::Priority,
        }];
        let model = EngineModel::new(&graph(ops, 4), &[], &[], &devices);
        assert_eq!(model.step(1, 1), 4 * MS);
        assert_eq!(model.step(64, 1), 4 * MS);
    }

    #[test]
    fn one_worker_takes_the_sum_of_the_op_times_exactly() {
        let g = random_graph(300, 20, 7);
        let work: Duration = g.ops.iter().map(|op| op.time).sum();
        assert_eq!(serial_model(&g).step(1, 1), work);
    }

    #[test]
    fn predictions_lie_between_brents_bounds() {
        for seed in 1..6 {
            let g = random_graph(200, 30, seed);
            let scaling = analyze(&g);
            let model = serial_model(&g);
            for inter in [1, 2, 3, 4, 8, 64] {
                let step = model.step(inter, 1).as_secs_f64() * 1e3;
                let lower = (scaling.work_ms / inter as f64).max(scaling.span_ms);
                let upper = scaling.work_ms / inter as f64 + scaling.span_ms;
                assert!(
                    step >= lower - 1e-9 && step <= upper + 1e-9,
                    "seed {seed} inter {inter}: {step} not in [{lower}, {upper}]"
                );
            }
            assert!(
                (model.step(64, 1).as_secs_f64() * 1e3 - scaling.span_ms).abs() < 1e-9,
                "with a worker per ready op the step is the span"
            );
        }
    }

    /// A device takes its one-worker costs with one worker and its several-worker costs
    /// with more; a chain, which never leaves an op waiting at one worker, still takes the
    /// several-worker costs at two, and the curve agrees.
    #[test]
    fn one_worker_and_several_take_their_own_costs() {
        let us = Duration::from_micros(1);
        let cost = |continuing, waking| DispatchCost {
            continuing: continuing * us,
            waking: waking * us,
        };
        let costs = [DispatchByWorkers {
            one: cost(1, 1),
            several: cost(3, 10),
        }];
        let ops = (0..5)
            .map(|i| op(&format!("c{i}"), &[0], &[0], MS))
            .collect();
        let chain = serial_model(&graph(ops, 1)).with_dispatch_by_workers(&costs);
        assert_eq!(
            chain.step(1, 1),
            5 * MS + 5 * us,
            "woken once at 1 us, then 4 x 1 us"
        );
        let several = 5 * MS + 10 * us + 4 * 3 * us;
        assert_eq!((chain.step(2, 1), chain.step(64, 1)), (several, several));
        let curve = chain.curve(&[1, 2, 4]);
        let steps: Vec<f64> = curve.iter().step_by(3).map(|p| p.step_ms).collect();
        let ms = |step: Duration| step.as_secs_f64() * 1e3;
        assert_eq!(steps, [ms(5 * MS + 5 * us), ms(several), ms(several)]);
    }

    /// The curve's shortcuts (shared columns for equal op times, larger inter-op counts
    /// taking the step of one that left no op waiting) give every point's own simulation:
    /// on random graphs over an inter-op device and a two-worker priority pool, with engine
    /// costs (alike or not for one worker and several), some ops with split loops and some
    /// serial, and counts in any order.
    #[test]
    fn the_curve_equals_each_points_own_simulation() {
        let us = Duration::from_micros(1);
        let devices = [
            SimDevice {
                workers: Workers::Inter,
                order: QueueOrder::Fifo,
            },
            SimDevice {
                workers: Workers::Fixed(2),
                order: QueueOrder::Priority,
            },
        ];
        let costs = [
            DispatchCost {
                continuing: 3 * us,
                waking: 20 * us,
            },
            DispatchCost {
                continuing: us,
                waking: 7 * us,
            },
        ];
        for (seed, with_loops) in [(1, false), (2, true), (3, true), (4, false)] {
            let mut g = random_graph(240, 12 + 10 * seed as usize, seed);
            for (index, op) in g.ops.iter_mut().enumerate() {
                op.device = usize::from(index % 5 == 0);
            }
            g.devices.push(Lane::CpuWorkers(1));
            let splits: Vec<OpSplit> = g
                .ops
                .iter()
                .enumerate()
                .map(|(index, op)| match (with_loops, index % 3) {
                    (true, 0) => split(op.time / 4, op.time),
                    _ => OpSplit::serial(op.time),
                })
                .collect();
            let priorities: Vec<i32> = (0..g.ops.len()).map(|i| (i % 4) as i32).collect();
            let several = DispatchCost {
                continuing: 5 * us,
                waking: 30 * us,
            };
            let by_workers = [
                match seed % 2 {
                    0 => DispatchByWorkers::flat(costs[0]),
                    _ => DispatchByWorkers {
                        one: costs[0],
                        several,
                    },
                },
                DispatchByWorkers::flat(costs[1]),
            ];
            let model = EngineModel::new(&g, &priorities, &splits, &devices)
                .with_dispatch_by_workers(&by_workers)
                .with_loop_wake(40 * us)
                .with_corun(1.1);
            for counts in [&GRID[..], &[3, 1, 64, 2, 5][..]] {
                let expected: Vec<PredictedStep> = counts
                    .iter()
                    .flat_map(|&inter| counts.iter().map(move |&intra| (inter, intra)))
                    .map(|(inter, intra)| model.point(inter, intra))
                    .collect();
                assert_eq!(model.curve(counts), expected, "seed {seed} {counts:?}");
            }
        }
    }

    /// A simulation says whether an op waited for a busy inter-op worker: two independent
    /// ops on one worker do, on two they do not; a fixed pool's queue does not count.
    #[test]
    fn a_simulation_notes_an_op_queued_behind_busy_workers() {
        let ops = (0..2)
            .map(|i| op(&format!("t{i}"), &[], &[i], MS))
            .collect();
        let g = graph(ops, 2);
        let model = serial_model(&g);
        assert!(model.run(1, 1).queued_behind_busy);
        assert!(!model.run(2, 1).queued_behind_busy);
        let fixed = [SimDevice {
            workers: Workers::Fixed(1),
            order: QueueOrder::Fifo,
        }];
        let model = EngineModel::new(&g, &[], &[], &fixed);
        assert!(!model.run(1, 1).queued_behind_busy);
    }

    #[test]
    fn the_best_for_some_cores_stays_within_them_and_prefers_fewer_threads() {
        let body = split(Duration::ZERO, 8 * MS);
        // Two independent perfectly parallel ops of 8 ms: on 4 cores 2x2 and 1x4 take 4 ms,
        // 4x1 takes 8 ms (two ops for four workers); the tie goes to fewer intra-op threads.
        let ops = (0..2)
            .map(|i| op(&format!("p{i}"), &[], &[i], 8 * MS))
            .collect();
        let model = EngineModel::new(&graph(ops, 2), &[], &[body.clone(), body], &[]);
        let best = model.best_for_cores(4).unwrap();
        assert_eq!((best.inter, best.intra, best.step_ms), (2, 2, 4.0));
        let best = model.best_for_cores(3).unwrap();
        assert!(best.inter * best.intra <= 3);
        assert!(model.best_for_cores(0).is_none());
        let curve = model.curve(&GRID);
        assert_eq!(curve.len(), 49);
        assert_eq!(curve[0], model.point(1, 1));
    }
}
