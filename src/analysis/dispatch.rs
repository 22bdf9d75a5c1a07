//! The engine's cost between ops, measured from a run: how long a ready op waits for a
//! worker that is free to take it, per device, for the what-if simulation
//! ([`super::EngineModel::with_dispatch`]).
//!
//! # The rule
//! Each op execution of a run's iterations brings when it was pushed, started and ended and
//! which worker thread ran it. It became ready at the latest of its push, its predecessors'
//! ends in its iteration (the span analysis's edges) and, for an op that writes, the end of
//! the iteration before (the driver's iteration marker reads every tensor, so a write waits
//! for it). The worker that ran it was free from the end of its previous op. So the op
//! waited for the engine from `max(ready, free)` to its start, and the sample is one of two
//! kinds:
//! - **continuing**: the worker was still busy when the op became ready (`free >= ready`):
//!   it finished its op, completed it in the engine and took the next (the per-op cost a
//!   lone worker pays between ops);
//! - **waking**: the worker was idle before the op was ready: the engine had to hand the op
//!   to a parked or spinning worker (the wake-up between two workers).
//!
//! A sample whose start precedes the estimate of its ready moment (an op that did not wait
//! for the iteration before after all) is dropped. Each device's figure per kind is the
//! mean of its samples, not their median: a step pays their sum, and the gaps of a worker
//! contending for the engine's locks or a core have a long tail. A device with fewer than
//! [`MIN_WAKING_SAMPLES`] waking samples takes its continuing figure for both: its workers
//! hardly ever idled while work was ready (a lone worker, or workers saturated by a
//! fine-grained graph), and the few waits it has are the iteration's edges (a worker
//! descheduled or waiting for the driver's next iteration), no measure of a hand-off the
//! simulation would charge on every wake.
//!
//! # One worker and several ([`DispatchByWorkers`])
//! The cost depends on the workers. A lone worker takes its next op from a queue nobody else
//! touches and never waits to be woken while work is ready; two workers contend for the
//! engine's locks, its queue and the cores, and hand ops to each other. A run shows the
//! cost at its own count only, so the simulation carries it to the other side by a ratio a
//! probe measured on this machine: the same engine at one worker and at two, running a
//! graph of spinning ops (`workload::run::handoff_probe`). A run's figure at one worker,
//! times the probe's figure at two over its figure at one, is its figure at two, figure by
//! figure; the other way round likewise. Two workers stand for any count above one: this
//! machine cannot show what more workers cost.
#![forbid(unsafe_code)]

use std::time::Duration;

use super::span::{Pred, RanGraph};

/// The waking samples a device needs for its own waking figure (the module docs).
pub(crate) const MIN_WAKING_SAMPLES: usize = 32;

/// One execution of an op (nanoseconds from any one epoch).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct OpRunTimes {
    /// When the driver pushed it.
    pub(crate) pushed: u64,
    /// When its body started.
    pub(crate) start: u64,
    /// When its body ended.
    pub(crate) end: u64,
    /// The worker thread that ran it (any per-thread number).
    pub(crate) worker: u32,
}

/// One iteration's executions, one per op of the graph, and when the one before ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct IterationTimes {
    /// Per op of the graph, in push order.
    pub(crate) ops: Vec<OpRunTimes>,
    /// When the iteration before ended (`None`: unknown).
    pub(crate) previous_end: Option<u64>,
}

/// What the engine adds before an op on one device, measured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DispatchCost {
    /// Before an op its worker takes on finishing its previous one.
    pub continuing: Duration,
    /// Before an op a worker takes after idling.
    pub waking: Duration,
}

impl DispatchCost {
    /// Each figure times `to / from` of the same figure of another cost (kept where the
    /// other's figure is zero).
    fn scaled(self, to: DispatchCost, from: DispatchCost) -> DispatchCost {
        let scale = |figure: Duration, to: Duration, from: Duration| match from.as_nanos() {
            0 => figure,
            from => {
                let nanos = figure.as_nanos() * to.as_nanos() / from;
                Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
            }
        };
        DispatchCost {
            continuing: scale(self.continuing, to.continuing, from.continuing),
            waking: scale(self.waking, to.waking, from.waking),
        }
    }
}

/// A device's engine cost before an op when it has one worker and when it has several (see
/// the module docs: a run measures the cost at its own count only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DispatchByWorkers {
    /// With one worker.
    pub one: DispatchCost,
    /// With two workers or more.
    pub several: DispatchCost,
}

impl DispatchByWorkers {
    /// `cost` whatever the workers.
    pub fn flat(cost: DispatchCost) -> Self {
        DispatchByWorkers {
            one: cost,
            several: cost,
        }
    }

    /// `measured` on a device of `workers` workers, carried to the other side by the ratio
    /// of `probe`'s figures: a one-worker run's several-worker cost is its own times
    /// `probe.several / probe.one`, figure by figure, and the other way round.
    ///
    /// ```
    /// use std::time::Duration;
    /// use enginetop::analysis::{DispatchByWorkers, DispatchCost};
    /// let us = |continuing, waking| DispatchCost {
    ///     continuing: Duration::from_micros(continuing),
    ///     waking: Duration::from_micros(waking),
    /// };
    /// let probe = DispatchByWorkers { one: us(1, 1), several: us(2, 8) };
    /// let carried = DispatchByWorkers::carried(us(3, 3), 1, &probe);
    /// assert_eq!(carried, DispatchByWorkers { one: us(3, 3), several: us(6, 24) });
    /// let back = DispatchByWorkers::carried(us(6, 24), 2, &probe);
    /// assert_eq!(back, carried);
    /// ```
    pub fn carried(measured: DispatchCost, workers: usize, probe: &DispatchByWorkers) -> Self {
        match workers {
            0 | 1 => DispatchByWorkers {
                one: measured,
                several: measured.scaled(probe.several, probe.one),
            },
            _ => DispatchByWorkers {
                one: measured.scaled(probe.one, probe.several),
                several: measured,
            },
        }
    }

    /// The cost on a device of `workers` workers.
    pub fn at(&self, workers: usize) -> DispatchCost {
        match workers {
            0 | 1 => self.one,
            _ => self.several,
        }
    }
}

/// Each device's [`DispatchCost`] over `iterations` of `graph` (see the module docs).
/// `preds` are `graph`'s ([`predecessors`](super::predecessors)), computed once for a graph
/// whose times change.
pub(crate) fn dispatch_costs(
    graph: &RanGraph,
    preds: &[Vec<Pred>],
    iterations: &[IterationTimes],
) -> Vec<DispatchCost> {
    let (mut continuing, mut waking) = samples(graph, preds, iterations);
    continuing
        .iter_mut()
        .zip(&mut waking)
        .map(|(continuing, waking)| {
            let continuing = mean(continuing).unwrap_or(0);
            let waking = match waking.len() >= MIN_WAKING_SAMPLES {
                true => mean(waking).unwrap_or(continuing),
                false => continuing,
            };
            DispatchCost {
                continuing: Duration::from_nanos(continuing),
                waking: Duration::from_nanos(waking),
            }
        })
        .collect()
}

/// Per device, the continuing and the waking gaps (ns).
type Samples = Vec<Vec<u64>>;

/// Every op execution's gap, by device and kind (see the module docs).
fn samples(
    graph: &RanGraph,
    preds: &[Vec<Pred>],
    iterations: &[IterationTimes],
) -> (Samples, Samples) {
    let devices = graph.devices.len().max(1 + max_device(graph));
    let mut continuing: Vec<Vec<u64>> = vec![Vec::new(); devices];
    let mut waking: Vec<Vec<u64>> = vec![Vec::new(); devices];
    let free = previous_ends(iterations);
    let whole = iterations.iter().enumerate();
    for (iteration, times) in whole.filter(|(_, times)| times.ops.len() == graph.ops.len()) {
        for (op, run) in times.ops.iter().enumerate() {
            let mut ready = run.pushed;
            for pred in &preds[op] {
                ready = ready.max(times.ops[pred.op].end);
            }
            if let (false, Some(end)) = (graph.ops[op].writes.is_empty(), times.previous_end) {
                ready = ready.max(end);
            }
            if run.start < ready {
                continue;
            }
            let device = graph.ops[op].device;
            match free[iteration][op] {
                Some(free) if free >= ready => {
                    continuing[device].push(run.start.saturating_sub(free));
                }
                _ => waking[device].push(run.start - ready),
            }
        }
    }
    (continuing, waking)
}

fn max_device(graph: &RanGraph) -> usize {
    graph.ops.iter().map(|op| op.device).max().unwrap_or(0)
}

/// Per iteration and op, when its worker's previous execution (in any iteration) ended.
fn previous_ends(iterations: &[IterationTimes]) -> Vec<Vec<Option<u64>>> {
    let mut runs: Vec<(u32, u64, u64, usize, usize)> = Vec::new();
    for (iteration, times) in iterations.iter().enumerate() {
        for (op, run) in times.ops.iter().enumerate() {
            runs.push((run.worker, run.start, run.end, iteration, op));
        }
    }
    runs.sort_unstable();
    let mut free: Vec<Vec<Option<u64>>> = iterations
        .iter()
        .map(|times| vec![None; times.ops.len()])
        .collect();
    for pair in runs.windows(2) {
        let (before, after) = (pair[0], pair[1]);
        if before.0 == after.0 {
            free[after.3][after.4] = Some(before.2);
        }
    }
    free
}

/// The mean (rounded down); `None` for none.
fn mean(values: &[u64]) -> Option<u64> {
    let sum: u128 = values.iter().map(|&v| u128::from(v)).sum();
    let count = u128::try_from(values.len()).ok().filter(|&n| n > 0)?;
    u64::try_from(sum / count).ok()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::analysis::predecessors;
    use crate::analysis::span::tests::op;

    fn graph(ops: Vec<crate::analysis::RanOp>, vars: usize) -> RanGraph {
        RanGraph {
            ops,
            vars: (0..vars).map(|var| format!("v{var}")).collect(),
            devices: vec![crate::device::identity::Lane::CpuWorkers(0)],
            wall: Duration::ZERO,
        }
    }

    fn run(start: u64, end: u64, worker: u32) -> OpRunTimes {
        OpRunTimes {
            pushed: 0,
            start,
            end,
            worker,
        }
    }

    #[test]
    fn a_lone_worker_takes_its_continuing_gap_for_both_kinds() {
        // A chain on one worker: each op starts 2 ns after the one before ends; the first
        // was pushed as it started.
        let ops = (0..5).map(|i| op(&format!("c{i}"), &[0], &[0], Duration::ZERO));
        let chain = graph(ops.collect(), 1);
        let mut times: Vec<OpRunTimes> = (0..5).map(|i| run(i * 12 + 2, i * 12 + 12, 7)).collect();
        times[0].pushed = 2;
        let iteration = IterationTimes {
            ops: times,
            previous_end: None,
        };
        let (continuing, waking) = samples(
            &chain,
            &predecessors(&chain),
            std::slice::from_ref(&iteration),
        );
        assert_eq!((continuing, waking), (vec![vec![2; 4]], vec![vec![0]]));
        let two = Duration::from_nanos(2);
        let costs = dispatch_costs(&chain, &predecessors(&chain), &[iteration]);
        assert_eq!(costs[0].continuing, two);
        let mut alone = graph(vec![op("x", &[], &[0], Duration::ZERO)], 1);
        alone.ops.push(op("y", &[0], &[0], Duration::ZERO));
        let continues = IterationTimes {
            ops: vec![run(0, 10, 1), run(13, 20, 1)],
            previous_end: None,
        };
        let (_, waking) = samples(
            &alone,
            &predecessors(&alone),
            std::slice::from_ref(&continues),
        );
        assert_eq!(waking, [vec![0]], "x: pushed at 0, started at 0");
        let costs = dispatch_costs(&alone, &predecessors(&alone), &[continues]);
        assert_eq!(costs[0].continuing, Duration::from_nanos(3));
    }

    #[test]
    fn an_idle_worker_taking_a_ready_op_is_a_wake_up() {
        // a (worker 1) ends at 100; b and c wait for it: b continues on worker 1 at 103, c
        // starts on worker 2 (idle since 50) at 130.
        let ops = vec![
            op("a", &[], &[0], Duration::ZERO),
            op("b", &[0], &[1], Duration::ZERO),
            op("c", &[0], &[2], Duration::ZERO),
            op("early", &[], &[3], Duration::ZERO),
        ];
        let times = vec![
            run(10, 100, 1),
            run(103, 200, 1),
            run(130, 180, 2),
            run(0, 50, 2),
        ];
        let iteration = IterationTimes {
            ops: times,
            previous_end: None,
        };
        let graph = graph(ops, 4);
        let (continuing, mut waking) = samples(&graph, &predecessors(&graph), &[iteration]);
        waking[0].sort_unstable();
        assert_eq!(continuing, [vec![3]]);
        assert_eq!(waking, [vec![0, 10, 30]], "early, a (pushed at 0) and c");
    }

    #[test]
    fn an_op_waits_for_its_push_and_for_the_iteration_before_when_it_writes() {
        let ops = vec![
            op("w", &[], &[0], Duration::ZERO),
            op("r", &[1], &[], Duration::ZERO),
            op("late", &[], &[2], Duration::ZERO),
        ];
        let mut times = vec![run(500, 600, 1), run(40, 60, 2), run(400, 450, 3)];
        times[1].pushed = 35;
        let iteration = IterationTimes {
            ops: times,
            previous_end: Some(480),
        };
        let graph = graph(ops, 3);
        let (_, waking) = samples(&graph, &predecessors(&graph), &[iteration]);
        // w: ready at 480 (the iteration before), so 20; r writes nothing: pushed at 35, 5;
        // late started before the iteration before ended: dropped.
        assert_eq!(waking, [vec![20, 5]]);
    }

    /// A few waits for a ready op are no measure of a hand-off: under
    /// [`MIN_WAKING_SAMPLES`] the waking figure is the continuing one; from there on, theirs.
    #[test]
    fn a_few_waking_samples_give_way_to_the_continuing_figure() {
        let costs_with = |woken: usize| {
            let mut ops = Vec::new();
            let mut times = Vec::new();
            for i in 0..40u64 {
                ops.push(op(&format!("c{i}"), &[0], &[0], Duration::ZERO));
                times.push(run(i * 12 + 2, i * 12 + 12, 1));
            }
            for i in 0..woken {
                let var = 1 + i;
                ops.push(op(&format!("x{i}"), &[], &[var], Duration::ZERO));
                let pushed = 1000 + 100 * i as u64;
                times.push(OpRunTimes {
                    pushed,
                    ..run(pushed + 50, pushed + 60, 2)
                });
            }
            let graph = graph(ops, 1 + woken);
            let iteration = IterationTimes {
                ops: times,
                previous_end: None,
            };
            dispatch_costs(&graph, &predecessors(&graph), &[iteration])[0]
        };
        let few = costs_with(MIN_WAKING_SAMPLES - 2);
        assert_eq!(few.waking, few.continuing);
        assert_eq!(few.continuing, Duration::from_nanos(2));
        // c0 (pushed at 0, started at 2 on a fresh worker) waits 2 ns, every x 50: the mean.
        let enough = costs_with(MIN_WAKING_SAMPLES);
        let waits = 2 + 50 * MIN_WAKING_SAMPLES as u64;
        let expected = waits / (MIN_WAKING_SAMPLES as u64 + 1);
        assert_eq!(enough.waking, Duration::from_nanos(expected));
    }

    #[test]
    fn no_samples_cost_nothing() {
        let empty = graph(Vec::new(), 0);
        let costs = dispatch_costs(&empty, &[], &[]);
        assert_eq!(costs, [DispatchCost::default()]);
    }
}
