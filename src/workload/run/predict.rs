//! The run's predicted scaling curve: the graph that ran, with each op's measured body split
//! ([`super::intra_split`]) and the engine's pools as this run configured them, simulated at
//! other thread counts by [`crate::analysis::EngineModel`].
#![forbid(unsafe_code)]

use std::fmt;
use std::time::Duration;

use crate::analysis::{
    DispatchByWorkers, DispatchCost, EngineModel, OpSplit, PredictedStep, QueueOrder, SimDevice,
    Workers, ASSUMPTIONS, GRID,
};

use super::counters::Lane;
use super::driver::RunReport;
use super::intra_split::WaitStats;
use super::live::DriverHandle;
use super::scaling::RanShape;
use super::summary::RunSettings;

/// The predicted step over the grid of inter-op x intra-op counts, today's counts among
/// them. `--summary json` prints it as the list of its points (`predicted`).
#[derive(Clone, Debug, PartialEq)]
pub struct PredictedCurve {
    /// Every pair of [`GRID`], inter-major.
    pub points: Vec<PredictedStep>,
    /// The run's own counts, predicted.
    pub today: PredictedStep,
    /// The run's measured step, in milliseconds.
    pub measured_step_ms: f64,
    /// Whether any op ran a parallel loop (without, every body is serial and the intra-op
    /// count changes nothing).
    pub intra_measured: bool,
    /// Per worker pool with ops, the engine's measured cost before an op.
    pub dispatch: Vec<PoolDispatch>,
    /// What a loop split over several threads waits for a woken intra-op thread.
    pub loop_wake: Duration,
    /// Where `loop_wake` comes from.
    pub loop_wake_source: LoopWakeSource,
    /// The waits `loop_wake` is the mean of (`None` for the engine's waking cost).
    pub loop_wake_stats: Option<WaitStats>,
    /// How much slower a split loop's blocks run than alone, as the probe measured it (1
    /// where it measured nothing).
    pub corun: f64,
}

/// What a run measured of the engine and of its intra-op pool, for the simulation.
#[derive(Clone, Copy, Debug)]
pub(super) struct RunCosts<'a> {
    /// Per device of the graph, the engine's cost before an op.
    pub(super) dispatch: &'a [DispatchCost],
    /// The inter-op count the iterations `dispatch` was measured over ran at.
    pub(super) dispatch_inter: usize,
    /// The hand-off probe's costs with one worker and with several (`None`: not probed).
    pub(super) handoff: Option<DispatchByWorkers>,
    /// A split loop's wait for a woken intra-op thread, measured or calibrated (`None`:
    /// neither gave a figure).
    pub(super) loop_wake: Option<LoopWake>,
    /// How much slower a split loop's blocks run than alone.
    pub(super) corun: f64,
}

/// Where the figure for a split loop's wait for a woken intra-op thread comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LoopWakeSource {
    /// The mean, over the run's latest split loops, of a loop's wall time beyond its
    /// busiest thread's blocks.
    Measured,
    /// No loop split (every loop inline at intra 1): the same mean over a probe's GEMM loops
    /// split over two threads of a pool of the run's intra-op kind, its workers parked
    /// before each loop.
    Calibrated,
    /// Neither: the engine's measured cost of waking a CPU worker.
    EngineWaking,
}

impl LoopWakeSource {
    /// Its one-word name, as `bench scaling` prints it.
    pub fn label(self) -> &'static str {
        match self {
            LoopWakeSource::Measured => "measured",
            LoopWakeSource::Calibrated => "calibrated",
            LoopWakeSource::EngineWaking => "engine",
        }
    }

    /// How the `why` section names it.
    fn describe(self) -> &'static str {
        match self {
            LoopWakeSource::Measured => "measured on the run's split loops",
            LoopWakeSource::Calibrated => {
                "no loop split: measured on a probe GEMM split over two parked intra-op threads"
            }
            LoopWakeSource::EngineWaking => "no loop split: the engine's cost of waking a worker",
        }
    }
}

/// A split loop's wait for a woken intra-op thread, and where the figure comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct LoopWake {
    /// The wait.
    pub(super) wait: Duration,
    /// The waits it is the mean of (`None`: not a measured mean).
    pub(super) stats: Option<WaitStats>,
    /// Its source.
    pub(super) source: LoopWakeSource,
}

/// One worker pool's measured engine cost before an op, as the `why` section shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolDispatch {
    /// The pool.
    pub device: Lane,
    /// Its cost, as the run measured it.
    pub cost: DispatchCost,
    /// Its cost with one worker and with several, as the simulation takes it: the measured
    /// one carried to the other count by the hand-off probe (`None`: the measured one at
    /// any count, for a pool of fixed workers or without a probe).
    pub carried: Option<DispatchByWorkers>,
}

impl PredictedCurve {
    /// The fastest point (ties: fewer threads).
    pub fn best(&self) -> Option<&PredictedStep> {
        self.points.iter().min_by(|a, b| {
            let threads = |p: &PredictedStep| p.inter * p.intra;
            a.step_ms
                .total_cmp(&b.step_ms)
                .then(threads(a).cmp(&threads(b)))
        })
    }
}

impl serde::Serialize for PredictedCurve {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.points.serialize(serializer)
    }
}

impl fmt::Display for PredictedCurve {
    /// The `why` section's what-if block: the grid, today's point marked `*`, the best.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "  what if (predicted step in ms; {ASSUMPTIONS}):")?;
        write!(f, "    inter\\intra")?;
        for intra in GRID {
            write!(f, " {intra:>8}")?;
        }
        writeln!(f)?;
        for row in self.points.chunks(GRID.len()) {
            write!(f, "    {:>11}", row[0].inter)?;
            for point in row {
                let mark = if (point.inter, point.intra) == (self.today.inter, self.today.intra) {
                    "*"
                } else {
                    " "
                };
                write!(f, " {:>7.2}{mark}", point.step_ms)?;
            }
            writeln!(f)?;
        }
        write!(
            f,
            "    * today {}x{}: predicted {:.2} ms, measured {:.2} ms",
            self.today.inter, self.today.intra, self.today.step_ms, self.measured_step_ms
        )?;
        if let Some(best) = self.best() {
            write!(
                f,
                "; best predicted {}x{}: {:.2} ms",
                best.inter, best.intra, best.step_ms
            )?;
        }
        writeln!(f)?;
        let costs: Vec<String> = self
            .dispatch
            .iter()
            .map(|pool| {
                let us = |time: Duration| time.as_secs_f64() * 1e6;
                let figures = |cost: DispatchCost| {
                    format!(
                        "{:.1} us continuing, {:.1} us woken",
                        us(cost.continuing),
                        us(cost.waking)
                    )
                };
                let mut line = format!("{} {}", pool.device, figures(pool.cost));
                if let Some(carried) = pool.carried {
                    let (other, cost) = match self.today.inter {
                        1 => ("several workers", carried.several),
                        _ => ("one worker", carried.one),
                    };
                    line.push_str(&format!(
                        " (with {other}, by the hand-off probe's ratio: {})",
                        figures(cost)
                    ));
                }
                line
            })
            .collect();
        if !costs.is_empty() {
            writeln!(
                f,
                "    engine cost before an op (measured): {}",
                costs.join("; ")
            )?;
        }
        let us = |time: Duration| time.as_secs_f64() * 1e6;
        write!(
            f,
            "    intra-op wake-up per split loop: {:.1} us ({}",
            us(self.loop_wake),
            self.loop_wake_source.describe()
        )?;
        if let Some(stats) = self.loop_wake_stats {
            write!(
                f,
                "; the mean of {} loops, median {:.1} us, 90th percentile {:.1} us",
                stats.samples,
                us(stats.median),
                us(stats.p90)
            )?;
        }
        writeln!(f, ")")?;
        writeln!(
            f,
            "    split loops' blocks co-running: x{:.3} their time alone (probe GEMM on this \
             machine, inline and split over two intra-op threads)",
            self.corun
        )?;
        if !self.intra_measured {
            writeln!(
                f,
                "    no op ran a parallel loop, so every body counts as serial and the intra-op \
                 count changes nothing"
            )?;
        }
        Ok(())
    }
}

/// Whether `lane` is one of the engine's CPU worker pools, whose workers are the inter-op
/// count.
fn inter_workers(lane: Lane) -> bool {
    matches!(lane, Lane::SharedWorkers | Lane::CpuWorkers(_))
}

/// The engine's pool behind `lane` under `settings`.
fn sim_device(lane: Lane, settings: &RunSettings) -> SimDevice {
    let fixed = |workers: usize, order| SimDevice {
        workers: Workers::Fixed(workers),
        order,
    };
    match lane {
        Lane::SharedWorkers | Lane::CpuWorkers(_) => SimDevice {
            workers: Workers::Inter,
            order: QueueOrder::Fifo,
        },
        Lane::Driver | Lane::Io => fixed(1, QueueOrder::Fifo),
        Lane::Priority | Lane::Gpu(_) => fixed(settings.workers(lane), QueueOrder::Priority),
    }
}

impl RanShape {
    /// The simulation of this shape with `splits` (one per iteration op) and the engine's
    /// `dispatch` costs (one per device) under `settings`.
    fn engine_model(
        &self,
        splits: &[OpSplit],
        dispatch: &[DispatchByWorkers],
        (loop_wake, corun): (Duration, f64),
        settings: &RunSettings,
    ) -> EngineModel {
        let devices: Vec<SimDevice> = self
            .lanes
            .iter()
            .map(|lane| sim_device(*lane, settings))
            .collect();
        let (graph, waits) = (&self.template, self.waits.clone());
        EngineModel::with_waits(graph, waits, &self.priorities, splits, &devices)
            .with_dispatch_by_workers(dispatch)
            .with_loop_wake(loop_wake)
            .with_corun(corun)
    }

    /// Per device, its measured dispatch cost with one worker and with several: for the
    /// engine's CPU worker pools, carried by the hand-off probe's ratio from the inter-op
    /// count it was measured at; the same at any count for the others (their workers are
    /// fixed) and without a probe.
    fn carried(&self, costs: &RunCosts<'_>) -> Vec<DispatchByWorkers> {
        let lanes = self.lanes.iter();
        let measured = lanes.enumerate().map(|(device, lane)| {
            let cost = costs.dispatch.get(device).copied().unwrap_or_default();
            match costs.handoff.filter(|_| inter_workers(*lane)) {
                Some(probe) => DispatchByWorkers::carried(cost, costs.dispatch_inter, &probe),
                None => DispatchByWorkers::flat(cost),
            }
        });
        measured.collect()
    }

    /// The mean one-thread time of the ops on the engine's CPU worker pools in `splits`
    /// (zero without any): the body the hand-off probe gives its ops.
    pub(super) fn mean_body(&self, splits: &[OpSplit]) -> Duration {
        let on_workers = self.template.ops.iter().zip(splits);
        let times: Vec<Duration> = on_workers
            .filter(|(op, _)| inter_workers(self.lanes[op.device]))
            .map(|(_, split)| split.time(1))
            .collect();
        let count = u32::try_from(times.len()).unwrap_or(u32::MAX).max(1);
        times.iter().sum::<Duration>() / count
    }

    /// A split loop's wake-up: `timed` (measured or calibrated), else the waking cost of the
    /// engine's first CPU worker pool in `dispatch` (zero without one).
    fn loop_wake(&self, timed: Option<LoopWake>, dispatch: &[DispatchCost]) -> LoopWake {
        let engine = self.lanes.iter().position(|lane| inter_workers(*lane));
        let engine = engine.and_then(|device| dispatch.get(device));
        timed.unwrap_or_else(|| LoopWake {
            wait: engine.map_or(Duration::ZERO, |cost| cost.waking),
            stats: None,
            source: LoopWakeSource::EngineWaking,
        })
    }

    /// The curve of this shape with `splits`, `dispatch`, a split loop's wake-up and co-run
    /// factor under `settings`, whose run measured a step of `measured_step`.
    pub(super) fn predicted_curve(
        &self,
        splits: &[OpSplit],
        costs: RunCosts<'_>,
        settings: &RunSettings,
        measured_step: Duration,
    ) -> PredictedCurve {
        let (dispatch, handoff, corun) = (costs.dispatch, costs.handoff, costs.corun);
        let loop_wake = self.loop_wake(costs.loop_wake, dispatch);
        let carried = self.carried(&costs);
        let model = self.engine_model(splits, &carried, (loop_wake.wait, corun), settings);
        let with_ops = |device: &usize| self.template.ops.iter().any(|op| op.device == *device);
        let pools = (0..self.lanes.len())
            .filter(with_ops)
            .map(|device| PoolDispatch {
                device: self.template.devices[device],
                cost: dispatch.get(device).copied().unwrap_or_default(),
                carried: (handoff.is_some() && inter_workers(self.lanes[device]))
                    .then(|| carried[device]),
            });
        let points = model.curve(&GRID);
        let today = points
            .iter()
            .find(|point| (point.inter, point.intra) == (settings.inter, settings.intra))
            .copied()
            .unwrap_or_else(|| model.point(settings.inter, settings.intra));
        PredictedCurve {
            points,
            today,
            measured_step_ms: measured_step.as_secs_f64() * 1e3,
            intra_measured: splits.iter().any(|split| !split.loops.is_empty()),
            dispatch: pools.collect(),
            loop_wake: loop_wake.wait,
            loop_wake_source: loop_wake.source,
            loop_wake_stats: loop_wake.stats,
            corun,
        }
    }
}

impl RunReport {
    /// What the run measured of the engine and its intra-op pool, with the hand-off probe's
    /// `handoff` figures.
    pub(super) fn costs(&self, handoff: Option<DispatchByWorkers>) -> RunCosts<'_> {
        RunCosts {
            dispatch: &self.dispatch,
            dispatch_inter: self.dispatch_inter,
            handoff,
            loop_wake: self.loop_wake,
            corun: self.corun,
        }
    }
}

impl DriverHandle {
    /// The simulation's fastest inter-op x intra-op counts for a machine of `cores` cores
    /// (`inter x intra <= cores`), from the op times and body splits `report`'s run
    /// measured: a prediction, under [`ASSUMPTIONS`]; `None` for no cores.
    pub fn predicted_for_cores(&self, report: &RunReport, cores: usize) -> Option<PredictedStep> {
        let shared = &self.shared;
        let shape = &shared.shape;
        let wake = shape.loop_wake(report.loop_wake, &report.dispatch).wait;
        let handoff = shared.handoff.figures(shape.mean_body(&report.op_splits));
        let dispatch = shape.carried(&report.costs(handoff));
        let costs = (wake, report.corun);
        let model = shape.engine_model(&report.op_splits, &dispatch, costs, &shared.settings);
        model.best_for_cores(cores)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::analysis::{ParallelLoop, RanGraph, RanOp};
    use crate::kernels::par::item_cost;

    fn point(inter: usize, intra: usize, step_ms: f64) -> PredictedStep {
        PredictedStep {
            inter,
            intra,
            step_ms,
        }
    }

    #[test]
    fn the_block_marks_today_and_names_the_best_and_the_assumptions() {
        let points: Vec<PredictedStep> = GRID
            .iter()
            .flat_map(|&inter| GRID.iter().map(move |&intra| (inter, intra)))
            .map(|(inter, intra)| point(inter, intra, 64.0 / (inter.min(4) * intra) as f64))
            .collect();
        let curve = PredictedCurve {
            today: point(1, 2, 32.0),
            points,
            measured_step_ms: 35.0,
            intra_measured: true,
            dispatch: vec![PoolDispatch {
                device: Lane::CpuWorkers(0),
                cost: DispatchCost {
                    continuing: Duration::from_micros(2),
                    waking: Duration::from_micros(15),
                },
                carried: None,
            }],
            loop_wake: Duration::from_micros(30),
            loop_wake_source: LoopWakeSource::Measured,
            loop_wake_stats: None,
            corun: 1.02,
        };
        let text = curve.to_string();
        assert!(text.contains(ASSUMPTIONS), "{text}");
        assert!(text.contains("32.00*"), "{text}");
        assert_eq!(
            text.matches('*').count(),
            2,
            "one mark and its legend: {text}"
        );
        assert!(text.contains("today 1x2: predicted 32.00 ms, measured 35.00 ms"));
        assert!(text.contains("best predicted 4x64: 0.25 ms"), "{text}");
        assert!(
            text.contains("engine cost before an op (measured): cpu0 workers 2.0 us continuing, 15.0 us woken"),
            "{text}"
        );
        assert!(
            text.contains(
                "intra-op wake-up per split loop: 30.0 us (measured on the run's split loops)"
            ),
            "{text}"
        );
        assert!(!text.contains("no op ran a parallel loop"));
        let json = serde_json::to_value(&curve).unwrap();
        assert_eq!(json.as_array().unwrap().len(), 49);
        assert_eq!(json[1]["intra"], 2);
        assert_eq!(json[1]["step_ms"], 32.0);
    }

    /// One op on the engine's shared workers: 1 ms serial and a loop of 64 heavy items
    /// taking 8 ms on one thread (cut in halves for two threads), run at 1x1.
    fn one_split_op() -> (RanShape, Vec<OpSplit>, RunSettings) {
        let template = RanGraph {
            ops: vec![RanOp {
                name: "mm".to_string(),
                device: 0,
                reads: Vec::new(),
                writes: vec![0],
                time: Duration::from_millis(9),
            }],
            vars: vec!["c".to_string()],
            devices: vec![Lane::CpuWorkers(0)],
            wall: Duration::ZERO,
        };
        let preds = crate::analysis::predecessors(&template);
        let shape = RanShape {
            waits: crate::analysis::Waits::new(&preds),
            preds,
            template,
            lanes: vec![Lane::SharedWorkers],
            priorities: vec![0],
        };
        let gemm = ParallelLoop {
            items: 64,
            cost: item_cost(0.0, 0.0, 1e6, 1.0),
            time: Duration::from_millis(8),
        };
        let split = OpSplit {
            serial: Duration::from_millis(1),
            loops: vec![gemm],
        };
        let config = crate::config::RuntimeConfig {
            inter_op_threads: 1,
            intra_op_threads: 1,
            ..Default::default()
        };
        (shape, vec![split], RunSettings::from_config(&config))
    }

    #[test]
    fn a_run_without_split_loops_predicts_them_with_its_timed_wake_up() {
        let (shape, splits, settings) = one_split_op();
        let us = Duration::from_micros;
        let dispatch = [DispatchCost {
            continuing: us(1),
            waking: us(2),
        }];
        let at = |curve: &PredictedCurve, intra: usize| {
            let point = curve
                .points
                .iter()
                .find(|p| (p.inter, p.intra) == (1, intra));
            point.unwrap().step_ms
        };
        let stats = WaitStats {
            mean: us(300),
            median: us(100),
            p90: us(900),
            samples: 24,
        };
        let timed = LoopWake {
            wait: us(300),
            stats: Some(stats),
            source: LoopWakeSource::Calibrated,
        };
        let step = Duration::from_millis(9);
        let costs = |loop_wake, corun| RunCosts {
            dispatch: &dispatch,
            dispatch_inter: 1,
            handoff: None,
            loop_wake,
            corun,
        };
        let costs_of = costs;
        let costs = costs_of(Some(timed), 1.0);
        let curve = shape.predicted_curve(&splits, costs, &settings, step);
        assert_eq!(curve.loop_wake_source, LoopWakeSource::Calibrated);
        assert_eq!(
            (curve.loop_wake, curve.loop_wake_stats),
            (us(300), Some(stats))
        );
        // Woken once (2 us), 1 ms serial; at intra 1 the loop runs inline (8 ms), at intra 2
        // its busiest thread's half (4 ms) after one timed wake-up of an intra-op thread.
        assert!((at(&curve, 1) - 9.002).abs() < 1e-9, "{}", at(&curve, 1));
        assert!((at(&curve, 2) - 5.302).abs() < 1e-9, "{}", at(&curve, 2));
        let text = curve.to_string();
        assert!(
            text.contains(
                "intra-op wake-up per split loop: 300.0 us (no loop split: measured on a probe \
                 GEMM split over two parked intra-op threads; the mean of 24 loops, median \
                 100.0 us, 90th percentile 900.0 us)"
            ),
            "{text}"
        );
        // Co-running blocks 1.5 times slower: the split half takes 6 ms, the inline loop 8.
        let costs = costs_of(Some(timed), 1.5);
        let curve = shape.predicted_curve(&splits, costs, &settings, step);
        assert!((at(&curve, 1) - 9.002).abs() < 1e-9, "{}", at(&curve, 1));
        assert!((at(&curve, 2) - 7.302).abs() < 1e-9, "{}", at(&curve, 2));
        assert!(curve
            .to_string()
            .contains("co-running: x1.500 their time alone"));
        // Without a timed figure, the engine's cost of waking its worker stands in.
        let costs = costs_of(None, 1.0);
        let curve = shape.predicted_curve(&splits, costs, &settings, step);
        assert_eq!(
            (curve.loop_wake, curve.loop_wake_source),
            (us(2), LoopWakeSource::EngineWaking)
        );
        assert!((at(&curve, 2) - 5.004).abs() < 1e-9, "{}", at(&curve, 2));
    }

    /// A one-worker run's engine costs are carried to several workers by the hand-off
    /// probe's ratio, shown beside the measured ones, and the curve takes them at two.
    #[test]
    fn the_hand_off_probe_carries_the_costs_to_the_other_count() {
        let (shape, splits, settings) = one_split_op();
        let us = |continuing, waking| DispatchCost {
            continuing: Duration::from_micros(continuing),
            waking: Duration::from_micros(waking),
        };
        let probe = DispatchByWorkers {
            one: us(1, 1),
            several: us(3, 10),
        };
        let step = Duration::from_millis(9);
        fn costs(
            dispatch: &[DispatchCost],
            dispatch_inter: usize,
            handoff: Option<DispatchByWorkers>,
        ) -> RunCosts<'_> {
            RunCosts {
                dispatch,
                dispatch_inter,
                handoff,
                loop_wake: None,
                corun: 1.0,
            }
        }
        let measured = [us(2, 2)];
        let curve =
            shape.predicted_curve(&splits, costs(&measured, 1, Some(probe)), &settings, step);
        let carried = DispatchByWorkers {
            one: us(2, 2),
            several: us(6, 20),
        };
        assert_eq!(curve.dispatch[0].carried, Some(carried));
        let at = |inter: usize| {
            let point = curve
                .points
                .iter()
                .find(|p| (p.inter, p.intra) == (inter, 1));
            point.unwrap().step_ms
        };
        // One op, woken once: 2 us at one worker, 20 us at two or more.
        assert!((at(1) - 9.002).abs() < 1e-9, "{}", at(1));
        assert!((at(2) - 9.020).abs() < 1e-9, "{}", at(2));
        assert!((at(64) - 9.020).abs() < 1e-9, "{}", at(64));
        let text = curve.to_string();
        assert!(
            text.contains(
                "cpu0 workers 2.0 us continuing, 2.0 us woken (with several workers, by the \
                 hand-off probe's ratio: 6.0 us continuing, 20.0 us woken)"
            ),
            "{text}"
        );
        let flat = shape.predicted_curve(&splits, costs(&measured, 1, None), &settings, step);
        assert_eq!(flat.dispatch[0].carried, None);
        // Measured at two workers (a run resized before its last iterations), the same
        // costs are the several-worker ones, whatever counts the run held longest.
        let at_two = [us(6, 20)];
        let resized =
            shape.predicted_curve(&splits, costs(&at_two, 2, Some(probe)), &settings, step);
        assert_eq!(resized.dispatch[0].carried, Some(carried));
    }

    #[test]
    fn a_curve_without_intra_tasks_says_so() {
        let curve = PredictedCurve {
            points: vec![point(1, 1, 5.0)],
            today: point(1, 1, 5.0),
            measured_step_ms: 6.0,
            intra_measured: false,
            dispatch: Vec::new(),
            loop_wake: Duration::ZERO,
            loop_wake_source: LoopWakeSource::EngineWaking,
            loop_wake_stats: None,
            corun: 1.0,
        };
        assert!(curve.to_string().contains("no op ran a parallel loop"));
    }
}
