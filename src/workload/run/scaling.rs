//! The run's scaling analysis: the graph that ran (ops in push order, their vars and worker
//! pools) joined with the op times the run measured, judged by [`crate::analysis`].
#![forbid(unsafe_code)]

use std::fmt;
use std::time::{Duration, Instant};

use crate::analysis::{
    self, Attribution, Descheduled, DeviceFacts, LiveScaling, Pred, RanGraph, RanOp, Scaling,
    SchedSample, Verdict, Waits,
};
use crate::record::graph::{GraphDevice, GraphOp, GraphShape};
use crate::sync::Mutex;
use crate::workload::{Graph, TensorId};

use super::counters::Lane;
use super::handoff_probe::Handoff;
use super::intra_split::IntraSplit;
use super::op_times::OpTimes;
use super::plan::PreparedOp;
use super::predict::{PredictedCurve, RunCosts};
use super::summary::RunSettings;
use crate::pool::ThreadPool;

/// One iteration's graph without times, and the worker pool of each of its devices.
#[derive(Clone, Debug)]
pub(super) struct RanShape {
    pub(super) template: RanGraph,
    /// Per device of `template`, its lane.
    pub(super) lanes: Vec<Lane>,
    /// Per op of `template`, its priority.
    pub(super) priorities: Vec<i32>,
    /// Per op of `template`, its predecessors: the same every iteration, computed once.
    pub(super) preds: Vec<Vec<Pred>>,
    /// Which ops wait for which, as the what-if simulation walks them (from `preds`).
    pub(super) waits: Waits,
}

impl RanShape {
    /// The iteration ops of `graph` (`ops` prepared from it), with the lanes they run on
    /// (`lanes[op.lane_slot]`).
    pub(super) fn new(graph: &Graph, ops: &[PreparedOp], all_lanes: &[Lane]) -> Self {
        let mut lanes: Vec<Lane> = Vec::new();
        let indices = |ids: Vec<TensorId>| ids.into_iter().map(TensorId::index).collect();
        let ran_ops = graph.iteration.clone().map(|index| {
            let (decl, prepared) = (&graph.ops[index], &ops[index]);
            let lane = all_lanes[prepared.lane_slot];
            let device = lanes
                .iter()
                .position(|seen| *seen == lane)
                .unwrap_or_else(|| {
                    lanes.push(lane);
                    lanes.len() - 1
                });
            let mut reads: Vec<TensorId> =
                decl.reads.iter().chain(&decl.also_reads).copied().collect();
            reads.sort_unstable();
            reads.dedup();
            RanOp {
                name: decl.name.clone(),
                device,
                reads: indices(reads),
                writes: indices(decl.mutable_vars()),
                time: Duration::ZERO,
            }
        });
        let ran_ops: Vec<RanOp> = ran_ops.collect();
        let priorities = graph.iteration.clone().map(|index| ops[index].priority);
        let template = RanGraph {
            ops: ran_ops,
            vars: graph
                .tensors
                .iter()
                .map(|tensor| tensor.name.clone())
                .collect(),
            devices: lanes.clone(),
            wall: Duration::ZERO,
        };
        let preds = analysis::predecessors(&template);
        RanShape {
            priorities: priorities.collect(),
            waits: Waits::new(&preds),
            preds,
            template,
            lanes,
        }
    }

    /// What the verdicts need of each device under `settings`.
    fn facts(&self, settings: &RunSettings) -> Vec<DeviceFacts> {
        self.lanes
            .iter()
            .map(|&lane| DeviceFacts {
                lane,
                workers: settings.workers(lane),
            })
            .collect()
    }

    /// The shape a recording keeps (`record::graph`): the same ops, vars and pools, with
    /// the pools' workers and the thread counts under `settings`.
    pub(super) fn graph_shape(&self, settings: &RunSettings) -> GraphShape {
        let index = |vars: &[usize]| vars.iter().map(|&var| var as u32).collect();
        let facts = self.facts(settings);
        GraphShape {
            vars: self.template.vars.clone(),
            devices: facts
                .into_iter()
                .map(|facts| GraphDevice {
                    lane: facts.lane,
                    workers: u32::try_from(facts.workers).unwrap_or(u32::MAX),
                })
                .collect(),
            ops: self
                .template
                .ops
                .iter()
                .map(|op| GraphOp {
                    name: op.name.clone(),
                    device: op.device as u32,
                    reads: index(&op.reads),
                    writes: index(&op.writes),
                })
                .collect(),
            threads: threads_label(settings),
        }
    }

    /// The analysis of one iteration with `times` over a step of `wall`.
    pub(super) fn analyze(&self, times: &[Duration], wall: Duration) -> Scaling {
        analysis::analyze_times(&self.template, &self.preds, times, wall)
    }

    /// The verdicts on `scaling` (one of this shape's iterations) under `settings`.
    pub(super) fn verdicts(
        &self,
        scaling: &Scaling,
        settings: &RunSettings,
        descheduled: Option<&Descheduled>,
    ) -> Vec<Verdict> {
        let threads = threads_label(settings);
        analysis::verdicts(scaling, &self.facts(settings), descheduled, &threads)
    }
}

/// The thread counts as verdicts name them.
fn threads_label(settings: &RunSettings) -> String {
    format!("{} inter x {} intra", settings.inter, settings.intra)
}

/// Why the run scales as it does: work, span and critical path, the threads' descheduled
/// time, and a verdict per device. `--summary json` prints it as `scaling`.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ScalingSummary {
    /// The mean iteration: each op's time averaged over the run's iterations, over a step
    /// of the run's time per iteration.
    #[serde(flatten)]
    pub mean: Scaling,
    /// The run's last iteration, over the time between its end and the one before's (when
    /// the run had two).
    pub last_iteration: Option<Scaling>,
    /// The threads' descheduled time over the run (`None` without schedstat).
    pub descheduled: Option<Descheduled>,
    /// One per device, from the mean iteration.
    pub verdicts: Vec<Verdict>,
    /// Where every worker's time went over the run (`None` without a profiler).
    pub attribution: Option<Attribution>,
    /// The step predicted at other thread counts, from the mean iteration (`None` where
    /// the ops' intra-op splits were not measured: `enginetop analyze` of a file).
    pub predicted: Option<PredictedCurve>,
}

impl fmt::Display for ScalingSummary {
    /// The summary's `why` section.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mean = &self.mean;
        writeln!(f, "why (the mean iteration; work and span per iteration):")?;
        writeln!(
            f,
            "  work {:.2} ms, span {:.2} ms: parallelism {:.1}, achieved {:.1} over a {:.2} ms step",
            mean.work_ms, mean.span_ms, mean.parallelism, mean.achieved_parallelism, mean.wall_ms
        )?;
        let path: Vec<String> = mean
            .critical_path
            .iter()
            .take(5)
            .map(|op| format!("{} {:.0}%", op.name, op.share * 100.0))
            .collect();
        writeln!(
            f,
            "  critical path: {} ops, longest {}",
            mean.critical_path_ops,
            path.join(", ")
        )?;
        if let Some(last) = &self.last_iteration {
            writeln!(
                f,
                "  last iteration: work {:.2} ms, span {:.2} ms, parallelism {:.1}, achieved {:.1}",
                last.work_ms, last.span_ms, last.parallelism, last.achieved_parallelism
            )?;
        }
        match &self.descheduled {
            Some(d) => writeln!(
                f,
                "  descheduled: {:.1}% of the time of {} threads that ran ({} cores)",
                d.share * 100.0,
                d.threads,
                d.cores
            )?,
            None => writeln!(
                f,
                "  descheduled: not measured (a file holds no schedstat; live, none was readable)"
            )?,
        }
        for verdict in &self.verdicts {
            writeln!(f, "  {verdict}")?;
        }
        if let Some(attribution) = &self.attribution {
            write!(f, "{attribution}")?;
        }
        match &self.predicted {
            Some(curve) => write!(f, "{curve}"),
            None => writeln!(
                f,
                "  what if: not predicted (the ops' intra-op splits are measured only live)"
            ),
        }
    }
}

/// How often the dashboard's verdicts are recomputed, at most.
const LIVE_PERIOD: Duration = Duration::from_secs(1);

/// How often the dashboard's what-if grid is recomputed, at most: its simulations cost
/// most of a recomputation, and its inputs (the ops' mean splits over the run, the engine's
/// median costs) move slowly, so it follows the verdicts at a slower pace.
const CURVE_PERIOD: Duration = Duration::from_secs(5);

/// Whether a curve computed at `computed` (when, for which counts) is due again at `now`
/// for `counts`: none yet, [`CURVE_PERIOD`] old, or made for other counts (the curve marks
/// today's point).
fn curve_due(
    computed: Option<(Instant, (usize, usize))>,
    counts: (usize, usize),
    now: Instant,
) -> bool {
    computed.is_none_or(|(at, then)| {
        then != counts || now.saturating_duration_since(at) >= CURVE_PERIOD
    })
}

/// What the live prediction takes its measured costs from: the run's intra-op splits, its
/// intra-op pool (a probe of its kind times a split loop's wake-up where none split) and the
/// engine's hand-off probe.
#[derive(Clone, Copy)]
pub(super) struct Probes<'a> {
    pub(super) split: &'a IntraSplit,
    pub(super) intra: &'a dyn ThreadPool,
    pub(super) handoff: &'a Handoff,
}

/// The dashboard's verdict lines, kept between frames.
#[derive(Debug, Default)]
pub(super) struct LiveVerdicts {
    state: Mutex<LiveState>,
}

#[derive(Debug, Default)]
struct LiveState {
    lines: Vec<String>,
    computed: Option<Instant>,
    /// The schedstat sample the next window starts from.
    sample: Option<SchedSample>,
    /// What the lines were computed from.
    live: Option<LiveScaling>,
    /// The step predicted at other counts from the run's op times and body splits so far.
    predicted: Option<PredictedCurve>,
    /// When `predicted` was computed, and for which inter-op and intra-op counts.
    predicted_at: Option<(Instant, (usize, usize))>,
}

impl LiveVerdicts {
    /// The lines for the last of `done` finished iterations (the cached ones within
    /// [`LIVE_PERIOD`] of the last computation, or while fewer than two have finished), and
    /// the predicted curve with them when it is [`CURVE_PERIOD`] old, missing or made for
    /// other thread counts than `settings`', its costs from `probes`.
    pub(super) fn lines(
        &self,
        done: u64,
        times: &OpTimes,
        probes: Probes<'_>,
        shape: &RanShape,
        settings: &RunSettings,
    ) -> Vec<String> {
        let Probes {
            split,
            intra,
            handoff,
        } = probes;
        let mut state = self.state.lock();
        let fresh = state.computed.is_some_and(|at| at.elapsed() < LIVE_PERIOD);
        let last = done.checked_sub(1);
        let step = last.and_then(|last| times.step(last));
        let (Some(last), Some(step), false) = (last, step, fresh) else {
            return state.lines.clone();
        };
        let now = SchedSample::now();
        let descheduled = state
            .sample
            .as_ref()
            .zip(now.as_ref())
            .map(|(a, b)| a.until(b));
        let scaling = shape.analyze(&times.iteration(last), step);
        state.lines = shape
            .verdicts(&scaling, settings, descheduled.as_ref())
            .iter()
            .map(ToString::to_string)
            .collect();
        state.computed = Some(Instant::now());
        state.sample = now;
        state.live = Some(LiveScaling {
            scaling,
            descheduled,
        });
        let counts = (settings.inter, settings.intra);
        if curve_due(state.predicted_at, counts, Instant::now()) {
            let corun = split.corun(intra);
            let splits = split.splits(&times.totals(), done, corun);
            let iteration = [times.iteration_times(last)];
            let dispatch = analysis::dispatch_costs(&shape.template, &shape.preds, &iteration);
            let handoff = handoff.figures_if_done(shape.mean_body(&splits));
            let costs = RunCosts {
                dispatch: &dispatch,
                dispatch_inter: settings.inter,
                handoff,
                loop_wake: split.wake(intra),
                corun,
            };
            state.predicted = Some(shape.predicted_curve(&splits, costs, settings, step));
            state.predicted_at = Some((Instant::now(), counts));
        }
        state.lines.clone()
    }

    /// What the latest lines were computed from (`None` before the first).
    pub(super) fn scaling(&self) -> Option<LiveScaling> {
        self.state.lock().live.clone()
    }

    /// The predicted curve as of the latest lines that recomputed it (`None` before the
    /// first).
    pub(super) fn predicted(&self) -> Option<PredictedCurve> {
        self.state.lock().predicted.clone()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// The live grid is recomputed when there is none, when it is [`CURVE_PERIOD`] old and
    /// when the thread counts changed, and kept otherwise.
    #[test]
    fn the_live_curve_is_due_when_missing_old_or_for_other_counts() {
        let at = Instant::now();
        let computed = Some((at, (2, 1)));
        assert!(curve_due(None, (2, 1), at));
        assert!(!curve_due(computed, (2, 1), at + CURVE_PERIOD / 2));
        assert!(curve_due(computed, (2, 1), at + CURVE_PERIOD));
        assert!(curve_due(computed, (3, 1), at));
        assert!(curve_due(computed, (2, 2), at + LIVE_PERIOD));
    }
}
