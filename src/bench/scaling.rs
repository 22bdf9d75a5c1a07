//! `enginetop bench scaling`: the predicted scaling curve checked against measured steps,
//! every count predicted from every count.
//!
//! For each workload, a driver per point of `points`, each first warmed up by one iteration;
//! then `rounds` rounds in which every point runs `iterations` iterations in turn
//! (interleaved, so a machine's drift falls on every point alike). A round's step is its run
//! time over its iterations. Each round's run is also a **recording**: its op times and body
//! splits predict the step at every point. So each pair (target, reference) of points gets,
//! per round, the error of the step the reference's run predicts for the target against the
//! target's measured step in the same round, `(predicted - measured) / measured`; the figure
//! is the median round's error, with the smallest and largest as its spread. A reference
//! equal to its target is the simulation's own error (what it leaves out: engine and wake-up
//! costs it does not model, a loaded machine); any other is a transfer, which adds how well
//! one count's op times and splits stand for another's.
//!
//! Only counts a machine runs without oversubscription mean anything here, and `inter x
//! intra` at most its cores is not enough: the pushing thread and the process's other
//! threads want cores too. Each target's runs measure the threads wanting a core on average
//! (schedstat, [`crate::analysis::Descheduled::demand`]); the table shows it beside the
//! cores, and the largest errors are given over all targets and over those whose demand
//! stayed within the cores. A shared machine's figures are noisy whatever the counts.
#![forbid(unsafe_code)]

use super::stats::median;
use crate::config::RuntimeConfig;
use crate::workload::run::{
    Driver, LoopWakeSource, PredictedCurve, RunError, RunHooks, RunLength, RunReport,
};
use crate::workload::{load_spec, Graph, Overrides};

/// One workload to check: a shipped name and its parameter overrides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ScalingWorkload {
    /// A shipped workload.
    pub(crate) name: String,
    /// `NAME=VALUE` overrides (sizes for a short run).
    pub(crate) set: Vec<String>,
}

/// What [`run`] measures.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ScalingBenchConfig {
    /// The workloads.
    pub(crate) workloads: Vec<ScalingWorkload>,
    /// The counts `(inter, intra)` measured, each also a reference for all of them.
    pub(crate) points: Vec<(usize, usize)>,
    /// Iterations per measured round.
    pub(crate) iterations: u64,
    /// Rounds per point (the median is reported).
    pub(crate) rounds: usize,
}

impl ScalingBenchConfig {
    /// The check on a 2-core machine: resnet-like, transformer-like, random-dag and
    /// wavefront, sized for seconds each, at 1x1, 1x2 and 2x1, each predicted from each.
    pub(crate) fn two_cores() -> Self {
        let workload = |name: &str, set: &[&str]| ScalingWorkload {
            name: name.to_string(),
            set: set.iter().map(ToString::to_string).collect(),
        };
        ScalingBenchConfig {
            workloads: vec![
                workload("resnet-like", &["batch=2", "image=64", "blocks3=2"]),
                workload("transformer-like", &["layers=2"]),
                workload("random-dag", &["ops=2000"]),
                workload("wavefront", &["n=40", "size=4096"]),
            ],
            points: vec![(1, 1), (1, 2), (2, 1)],
            iterations: 3,
            rounds: 5,
        }
    }

    /// This check with only the workloads named in `names` (all of them for none), in this
    /// check's order; a name it does not hold is an error naming the ones it does.
    pub(crate) fn only(mut self, names: &[String]) -> Result<Self, ScalingBenchError> {
        if names.is_empty() {
            return Ok(self);
        }
        if let Some(unknown) = names
            .iter()
            .find(|name| !self.workloads.iter().any(|w| &w.name == *name))
        {
            let known: Vec<&str> = self.workloads.iter().map(|w| w.name.as_str()).collect();
            return Err(ScalingBenchError::NotChecked {
                name: unknown.clone(),
                known: known.join(", "),
            });
        }
        self.workloads.retain(|w| names.contains(&w.name));
        Ok(self)
    }
}

/// One workload at one target point, predicted from one reference point.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub(crate) struct ScalingBenchResult {
    /// The workload.
    pub(crate) workload: String,
    /// Inter-op workers of the target.
    pub(crate) inter: usize,
    /// Intra-op threads of the target.
    pub(crate) intra: usize,
    /// Inter-op workers of the reference, whose runs predict the target.
    pub(crate) reference_inter: usize,
    /// Intra-op threads of the reference.
    pub(crate) reference_intra: usize,
    /// The median measured step of the target, in milliseconds.
    pub(crate) measured_ms: f64,
    /// The median step the reference's runs predict for the target, in milliseconds.
    pub(crate) predicted_ms: f64,
    /// The median round's `(predicted - measured) / measured`, in percent.
    pub(crate) error_pct: f64,
    /// The smallest round's error, in percent.
    pub(crate) error_min_pct: f64,
    /// The largest round's error, in percent.
    pub(crate) error_max_pct: f64,
    /// Rounds measured.
    pub(crate) rounds: usize,
    /// The reference's figure for a split loop's wait for a woken intra-op thread, median
    /// over its rounds, in microseconds.
    pub(crate) reference_wake_us: f64,
    /// Where the reference's figure comes from (its latest round's source).
    pub(crate) reference_wake_source: Option<LoopWakeSource>,
    /// The reference's co-run factor of a split loop's blocks, median over its rounds.
    pub(crate) reference_corun: f64,
    /// The target's threads wanting a core on average over its run (time on a core plus
    /// run delay, over the run), median over its rounds (NaN where no schedstat).
    pub(crate) demand: f64,
    /// The cores the process may use (0 where no schedstat).
    pub(crate) cores: usize,
}

impl ScalingBenchResult {
    /// Whether the reference is the target itself (the simulation's own error).
    pub(crate) fn own(&self) -> bool {
        (self.reference_inter, self.reference_intra) == (self.inter, self.intra)
    }

    /// Whether the target's runs wanted more cores than the machine has (its workers, its
    /// pushing thread and any other thread of the process, measured): a count this machine
    /// does not run without oversubscription, whatever `inter x intra` says.
    pub(crate) fn oversubscribed(&self) -> bool {
        self.cores > 0 && self.demand > self.cores as f64
    }
}

/// Why the benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ScalingBenchError {
    /// A workload filter named a workload the check does not run.
    #[error("the scaling check does not run workload `{name}`: pick one of {known}")]
    NotChecked {
        /// The name given.
        name: String,
        /// The check's workloads, comma-separated.
        known: String,
    },
    /// A workload did not load.
    #[error("workload `{name}`: {message}")]
    Workload {
        /// Its name.
        name: String,
        /// Why.
        message: String,
    },
    /// A run failed.
    #[error("workload `{name}` at {inter}x{intra}: {source}")]
    Run {
        /// Its name.
        name: String,
        /// Inter-op workers.
        inter: usize,
        /// Intra-op threads.
        intra: usize,
        /// Why.
        source: Box<RunError>,
    },
}

/// Measures every workload of `config` (see the module docs); `progress` hears each
/// workload's name as it starts.
pub(crate) fn run(
    config: &ScalingBenchConfig,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<ScalingBenchResult>, ScalingBenchError> {
    let mut results = Vec::new();
    for workload in &config.workloads {
        progress(&workload.name);
        results.extend(run_workload(config, workload)?);
    }
    Ok(results)
}

/// One point's rounds: the measured step and the curve each round's run predicts.
#[derive(Default)]
struct Rounds {
    steps: Vec<f64>,
    curves: Vec<Vec<((usize, usize), f64)>>,
    /// Each round's split-loop wake-up figure (us), and the latest one's source.
    wakes: Vec<f64>,
    wake_source: Option<LoopWakeSource>,
    /// Each round's co-run factor.
    coruns: Vec<f64>,
    /// Each round's threads wanting a core, and the cores (schedstat).
    demands: Vec<f64>,
    cores: usize,
}

fn run_workload(
    config: &ScalingBenchConfig,
    workload: &ScalingWorkload,
) -> Result<Vec<ScalingBenchResult>, ScalingBenchError> {
    let graph = load(workload)?;
    let mut points = config
        .points
        .iter()
        .map(|&(inter, intra)| Point::start(&graph, workload, inter, intra))
        .collect::<Result<Vec<Point>, _>>()?;
    let mut rounds: Vec<Rounds> = points.iter().map(|_| Rounds::default()).collect();
    for _ in 0..config.rounds.max(1) {
        for (point, rounds) in points.iter_mut().zip(&mut rounds) {
            let report = point.measure(config.iterations)?;
            let step = report.elapsed.as_secs_f64() * 1e3 / report.iterations.max(1) as f64;
            rounds.steps.push(step);
            if let Some(descheduled) = &report.descheduled {
                rounds.demands.push(descheduled.demand());
                rounds.cores = descheduled.cores;
            }
            if let Some(curve) = point.predicted(&report) {
                rounds.wakes.push(curve.loop_wake.as_secs_f64() * 1e6);
                rounds.wake_source = Some(curve.loop_wake_source);
                rounds.coruns.push(curve.corun);
                rounds.curves.push(curve_points(&curve));
            } else {
                rounds.curves.push(Vec::new());
            }
        }
    }
    let mut results = Vec::new();
    for (target, measured) in points.iter().zip(&rounds) {
        for (reference, recorded) in points.iter().zip(&rounds) {
            let (target, reference) = (
                (target.inter, target.intra),
                (reference.inter, reference.intra),
            );
            results.push(compare(workload, target, measured, reference, recorded));
        }
    }
    Ok(results)
}

/// The target's measured rounds against what the reference's rounds predict for it, round
/// by round.
fn compare(
    workload: &ScalingWorkload,
    target: (usize, usize),
    measured: &Rounds,
    reference: (usize, usize),
    recorded: &Rounds,
) -> ScalingBenchResult {
    let predicted: Vec<f64> = recorded
        .curves
        .iter()
        .map(|curve| {
            let at = curve.iter().find(|(at, _)| *at == target);
            at.map_or(f64::NAN, |(_, step)| *step)
        })
        .collect();
    let errors: Vec<f64> = predicted
        .iter()
        .zip(&measured.steps)
        .map(|(predicted, measured)| error_pct(*predicted, *measured))
        .collect();
    let extreme = |pick: fn(f64, f64) -> f64| errors.iter().copied().reduce(pick);
    ScalingBenchResult {
        workload: workload.name.clone(),
        inter: target.0,
        intra: target.1,
        reference_inter: reference.0,
        reference_intra: reference.1,
        measured_ms: median(&measured.steps).unwrap_or(f64::NAN),
        predicted_ms: median(&predicted).unwrap_or(f64::NAN),
        error_pct: median(&errors).unwrap_or(f64::NAN),
        error_min_pct: extreme(f64::min).unwrap_or(f64::NAN),
        error_max_pct: extreme(f64::max).unwrap_or(f64::NAN),
        rounds: errors.len(),
        reference_wake_us: median(&recorded.wakes).unwrap_or(f64::NAN),
        reference_wake_source: recorded.wake_source,
        reference_corun: median(&recorded.coruns).unwrap_or(f64::NAN),
        demand: median(&measured.demands).unwrap_or(f64::NAN),
        cores: measured.cores,
    }
}

/// `results` as a table: per target and reference, the steps and the error with its
/// spread; then the largest own and transfer errors, and what the figures mean.
pub(crate) fn table(results: &[ScalingBenchResult]) -> String {
    let mut out = format!(
        "{:<17} {:>6} {:>9} {:>12} {:>13} {:>8} {:>17} {:>20} {:>7} {:>8}\n",
        "workload",
        "target",
        "reference",
        "measured ms",
        "predicted ms",
        "error",
        "spread",
        "reference wake us",
        "co-run",
        "demand"
    );
    for r in results {
        let source = r.reference_wake_source.map_or("-", LoopWakeSource::label);
        let demand = match r.cores {
            0 => "-".to_string(),
            cores => format!("{:.1}/{cores}", r.demand),
        };
        out.push_str(&format!(
            "{:<17} {:>6} {:>9} {:>12.2} {:>13.2} {:>+7.1}% {:>+7.1}..{:>+6.1}% {:>7.1} {:<12} {:>7.3} {:>8}\n",
            r.workload,
            format!("{}x{}", r.inter, r.intra),
            format!("{}x{}", r.reference_inter, r.reference_intra),
            r.measured_ms,
            r.predicted_ms,
            r.error_pct,
            r.error_min_pct,
            r.error_max_pct,
            r.reference_wake_us,
            source,
            r.reference_corun,
            demand,
        ));
    }
    let worst = |own: bool, fits: bool| {
        let errors = results.iter().filter(|r| r.own() == own);
        let errors = errors.filter(|r| !fits || !r.oversubscribed());
        errors.map(|r| r.error_pct.abs()).fold(0.0, f64::max)
    };
    out.push_str(&format!(
        "largest median error: {:.1}% predicting a count from its own runs, {:.1}% from \
         another count's; for targets whose runs wanted at most the cores: {:.1}%, {:.1}%\n",
        worst(true, false),
        worst(false, false),
        worst(true, true),
        worst(false, true),
    ));
    out.push_str(
        "error: (predicted - measured) / measured in the same round, median over rounds; \
         spread: the smallest and largest round's; measured, predicted: the median rounds'; \
         reference wake: the reference run's figure for a split loop's wait for a woken \
         intra-op thread, a mean (measured on its split loops, calibrated on a probe GEMM \
         split over two parked intra-op threads where none split, else the engine's waking \
         cost); co-run: the reference's factor for a split loop's blocks against their time \
         alone (the probe GEMM inline and split over two intra-op threads); demand: the \
         target's threads wanting a core on average over its run (schedstat: time on a core \
         plus run delay, over the run; its workers, its pushing thread and the process's \
         others), median over its rounds, over the cores: above them, the target ran \
         oversubscribed on this machine, which the prediction's idealised machine is not\n",
    );
    out
}

/// `(predicted - measured) / measured` in percent.
fn error_pct(predicted: f64, measured: f64) -> f64 {
    (predicted - measured) / measured * 100.0
}

fn load(workload: &ScalingWorkload) -> Result<Graph, ScalingBenchError> {
    let error = |message: String| ScalingBenchError::Workload {
        name: workload.name.clone(),
        message,
    };
    let set = Overrides::from_args(&workload.set).map_err(|problem| error(problem.to_string()))?;
    load_spec(&workload.name, &set).map_err(|problem| error(problem.to_string()))
}

/// One point's driver, warmed up.
struct Point {
    name: String,
    inter: usize,
    intra: usize,
    driver: Driver,
}

impl Point {
    fn start(
        graph: &Graph,
        workload: &ScalingWorkload,
        inter: usize,
        intra: usize,
    ) -> Result<Point, ScalingBenchError> {
        let config = RuntimeConfig {
            inter_op_threads: inter,
            intra_op_threads: intra,
            ..RuntimeConfig::default()
        };
        let driver = Driver::new(graph.clone(), &config, &RunHooks::default());
        let mut point = Point {
            name: workload.name.clone(),
            inter,
            intra,
            driver: driver.map_err(|source| ScalingBenchError::Run {
                name: workload.name.clone(),
                inter,
                intra,
                source: Box::new(source),
            })?,
        };
        point.measure(1)?; // setup, caches and threads warm
        Ok(point)
    }

    fn measure(&mut self, iterations: u64) -> Result<RunReport, ScalingBenchError> {
        self.driver
            .run(RunLength::Iterations(iterations), &mut |_| {})
            .map_err(|source| ScalingBenchError::Run {
                name: self.name.clone(),
                inter: self.inter,
                intra: self.intra,
                source: Box::new(source),
            })
    }

    /// The curve `report`'s run predicts (`None`: the run predicted none).
    fn predicted(&self, report: &RunReport) -> Option<PredictedCurve> {
        let summary = self.driver.summary(report, None, None);
        summary.scaling.and_then(|scaling| scaling.predicted)
    }
}

/// `((inter, intra), step_ms)` per point of `curve`.
fn curve_points(curve: &PredictedCurve) -> Vec<((usize, usize), f64)> {
    let points = curve.points.iter();
    points
        .map(|point| ((point.inter, point.intra), point.step_ms))
        .collect()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_tiny_check_predicts_every_point_from_every_point() {
        let config = ScalingBenchConfig {
            workloads: vec![ScalingWorkload {
                name: "chain".to_string(),
                set: vec!["length=20".to_string()],
            }],
            points: vec![(1, 1), (2, 1)],
            iterations: 2,
            rounds: 3,
        };
        let mut seen = Vec::new();
        let results = run(&config, &mut |name| seen.push(name.to_string())).unwrap();
        assert_eq!(seen, ["chain"]);
        let pairs: Vec<((usize, usize), (usize, usize))> = results
            .iter()
            .map(|r| ((r.inter, r.intra), (r.reference_inter, r.reference_intra)))
            .collect();
        let (one, two) = ((1, 1), (2, 1));
        assert_eq!(pairs, [(one, one), (one, two), (two, one), (two, two)]);
        let own: Vec<bool> = results.iter().map(ScalingBenchResult::own).collect();
        assert_eq!(own, [true, false, false, true]);
        for result in &results {
            assert_eq!(result.rounds, 3);
            assert!(
                result.measured_ms > 0.0 && result.predicted_ms > 0.0,
                "{result:?}"
            );
            assert!(
                result.error_min_pct <= result.error_pct
                    && result.error_pct <= result.error_max_pct,
                "the median round lies within the spread: {result:?}"
            );
        }
        let text = table(&results);
        assert_eq!(text.lines().count(), 1 + results.len() + 2, "{text}");
        assert!(text.contains("largest median error: "), "{text}");
    }

    #[test]
    fn a_rounds_error_pairs_the_prediction_with_the_same_rounds_measurement() {
        let workload = ScalingWorkload {
            name: "w".to_string(),
            set: Vec::new(),
        };
        let measured = Rounds {
            steps: vec![10.0, 20.0, 40.0],
            ..Rounds::default()
        };
        let curve = |step: f64| vec![((1, 1), 100.0), ((2, 1), step)];
        let recorded = Rounds {
            curves: vec![curve(11.0), curve(18.0), curve(40.0)],
            wakes: vec![30.0, 10.0, 20.0],
            wake_source: Some(LoopWakeSource::Calibrated),
            coruns: vec![1.1, 1.0, 1.3],
            ..Rounds::default()
        };
        let measured = Rounds {
            demands: vec![2.5, 1.9, 2.2],
            cores: 2,
            ..measured
        };
        let result = compare(&workload, (2, 1), &measured, (1, 1), &recorded);
        assert_eq!(
            (result.demand, result.cores),
            (2.2, 2),
            "the target's median round"
        );
        assert!(result.oversubscribed(), "2.2 threads wanting 2 cores");
        assert_eq!((result.error_min_pct, result.error_max_pct), (-10.0, 10.0));
        assert_eq!(result.error_pct, 0.0);
        assert_eq!((result.measured_ms, result.predicted_ms), (20.0, 18.0));
        assert_eq!(
            result.reference_wake_us, 20.0,
            "the reference's median round"
        );
        assert_eq!(
            result.reference_wake_source,
            Some(LoopWakeSource::Calibrated)
        );
        assert_eq!(result.reference_corun, 1.1, "the reference's median round");
        assert!(!result.own());
    }

    #[test]
    fn a_workload_filter_keeps_the_named_workloads_and_names_an_unknown_one() {
        let names = |config: &ScalingBenchConfig| {
            let names = config.workloads.iter().map(|w| w.name.clone());
            names.collect::<Vec<String>>()
        };
        let all = ScalingBenchConfig::two_cores();
        assert_eq!(names(&all.clone().only(&[]).unwrap()), names(&all));
        let picked = ["wavefront".to_string(), "resnet-like".to_string()];
        let only = all.clone().only(&picked).unwrap();
        assert_eq!(names(&only), ["resnet-like", "wavefront"]);
        assert_eq!(only.workloads[0], all.workloads[0], "its sizes kept");
        let error = all.only(&["chain".to_string()]).unwrap_err().to_string();
        assert!(error.contains("`chain`"), "{error}");
        assert!(error.contains("resnet-like, transformer-like"), "{error}");
    }

    #[test]
    fn a_workload_that_does_not_load_is_named() {
        let config = ScalingBenchConfig {
            workloads: vec![ScalingWorkload {
                name: "no-such-workload".to_string(),
                set: Vec::new(),
            }],
            ..ScalingBenchConfig::two_cores()
        };
        let error = run(&config, &mut |_| {}).unwrap_err();
        assert!(error.to_string().contains("no-such-workload"), "{error}");
    }
}
