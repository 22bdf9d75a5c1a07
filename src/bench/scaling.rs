//! `enginetop bench scaling`: the predicted scaling curve checked against measured steps.
//!
//! For each workload, a **reference run** at `reference` counts runs `rounds` rounds of
//! `iterations` iterations; each round's op times and body splits predict the step at every
//! point of `points`, and a point's prediction is the median round's. Then every point is
//! **measured**: a driver per point, each first warmed up by one iteration, then `rounds`
//! rounds in which every point runs `iterations` iterations in turn (interleaved, so a
//! machine's drift falls on every point alike). A round's step is its run time over its
//! iterations; the figure is the median round. Each point also predicts its own step from its
//! own runs (`own_ms`): the gap between that and the measured step is what the simulation
//! leaves out (engine and wake-up costs between ops, a loaded machine), the gap between
//! `predicted_ms` and `own_ms` is the transfer from the reference counts to these.
//!
//! Only counts a machine runs without oversubscription mean anything here (`inter x intra`
//! at most its cores); a shared machine's figures are noisy whatever the counts.
#![forbid(unsafe_code)]

use super::stats::median;
use crate::config::RuntimeConfig;
use crate::workload::run::{Driver, RunError, RunHooks, RunLength, RunReport};
use crate::workload::{load_spec, Graph, Overrides};

/// One workload to check: a shipped name and its parameter overrides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScalingWorkload {
    /// A shipped workload.
    pub name: String,
    /// `NAME=VALUE` overrides (sizes for a short run).
    pub set: Vec<String>,
}

/// What [`run`] measures.
#[derive(Clone, Debug, PartialEq)]
pub struct ScalingBenchConfig {
    /// The workloads.
    pub workloads: Vec<ScalingWorkload>,
    /// The counts `(inter, intra)` of the run whose recording predicts the others.
    pub reference: (usize, usize),
    /// The counts compared.
    pub points: Vec<(usize, usize)>,
    /// Iterations per measured round.
    pub iterations: u64,
    /// Rounds per point (the median is reported).
    pub rounds: usize,
}

impl ScalingBenchConfig {
    /// The check on a 2-core machine: resnet-like, transformer-like, random-dag and
    /// wavefront, sized for seconds each, predicted from a 1x2 run at 1x1, 1x2 and 2x1.
    pub fn two_cores() -> Self {
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
            reference: (1, 2),
            points: vec![(1, 1), (1, 2), (2, 1)],
            iterations: 3,
            rounds: 5,
        }
    }
}

/// One workload at one point.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ScalingBenchResult {
    /// The workload.
    pub workload: String,
    /// Inter-op workers.
    pub inter: usize,
    /// Intra-op threads.
    pub intra: usize,
    /// The median measured step, in milliseconds.
    pub measured_ms: f64,
    /// The step predicted from the reference run, in milliseconds.
    pub predicted_ms: f64,
    /// `(predicted - measured) / measured`, in percent.
    pub error_pct: f64,
    /// The step predicted from this point's own runs, in milliseconds.
    pub own_ms: f64,
    /// `(own - measured) / measured`, in percent.
    pub own_error_pct: f64,
    /// The reference run's counts, `1x2`.
    pub reference: String,
    /// Rounds measured.
    pub rounds: usize,
}

/// Why the benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum ScalingBenchError {
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
pub fn run(
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

fn run_workload(
    config: &ScalingBenchConfig,
    workload: &ScalingWorkload,
) -> Result<Vec<ScalingBenchResult>, ScalingBenchError> {
    let graph = load(workload)?;
    let (inter, intra) = config.reference;
    let mut reference = Point::start(&graph, workload, inter, intra)?;
    let mut curves = Vec::new();
    for _ in 0..config.rounds.max(1) {
        let report = reference.measure(config.iterations)?;
        curves.push(reference.predicted(&report));
    }
    drop(reference);
    let mut points = config
        .points
        .iter()
        .map(|&(inter, intra)| Point::start(&graph, workload, inter, intra))
        .collect::<Result<Vec<Point>, _>>()?;
    let mut steps: Vec<Vec<f64>> = vec![Vec::new(); points.len()];
    let mut own: Vec<Vec<f64>> = vec![Vec::new(); points.len()];
    for _ in 0..config.rounds.max(1) {
        for (index, point) in points.iter_mut().enumerate() {
            let report = point.measure(config.iterations)?;
            let step = report.elapsed.as_secs_f64() * 1e3 / report.iterations.max(1) as f64;
            steps[index].push(step);
            own[index].push(point.own_prediction(&report));
        }
    }
    let results = points.iter().enumerate().map(|(index, point)| {
        let measured_ms = median(&steps[index]).unwrap_or(f64::NAN);
        let predicted: Vec<f64> = curves
            .iter()
            .filter_map(|curve| {
                let counts = (point.inter, point.intra);
                curve
                    .iter()
                    .find(|(at, _)| *at == counts)
                    .map(|(_, step)| *step)
            })
            .collect();
        let predicted_ms = median(&predicted).unwrap_or(f64::NAN);
        let own_ms = median(&own[index]).unwrap_or(f64::NAN);
        ScalingBenchResult {
            workload: workload.name.clone(),
            inter: point.inter,
            intra: point.intra,
            measured_ms,
            predicted_ms,
            error_pct: error_pct(predicted_ms, measured_ms),
            own_ms,
            own_error_pct: error_pct(own_ms, measured_ms),
            reference: format!("{inter}x{intra}"),
            rounds: steps[index].len(),
        }
    });
    Ok(results.collect())
}

/// `results` as a table: measured and predicted steps and the errors, and what they mean.
pub fn table(results: &[ScalingBenchResult]) -> String {
    let mut out = format!(
        "{:<17} {:>6} {:>12} {:>13} {:>8} {:>9} {:>8}\n",
        "workload", "counts", "measured ms", "predicted ms", "error", "own ms", "error"
    );
    for r in results {
        out.push_str(&format!(
            "{:<17} {:>6} {:>12.2} {:>13.2} {:>+7.1}% {:>9.2} {:>+7.1}%\n",
            r.workload,
            format!("{}x{}", r.inter, r.intra),
            r.measured_ms,
            r.predicted_ms,
            r.error_pct,
            r.own_ms,
            r.own_error_pct
        ));
    }
    let reference = results.first().map_or("", |r| r.reference.as_str());
    out.push_str(&format!(
        "measured: the median round's step; predicted: the median of the steps simulated from \
         each {reference} reference round; own: simulated from the point's own runs; error: (predicted - measured) / \
         measured\n"
    ));
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

    /// The curve `report`'s run predicts: `((inter, intra), step_ms)` per point.
    fn predicted(&self, report: &RunReport) -> Vec<((usize, usize), f64)> {
        let summary = self.driver.summary(report, None, None);
        let points = summary
            .scaling
            .and_then(|scaling| scaling.predicted)
            .map(|curve| curve.points);
        let points = points.unwrap_or_default().into_iter();
        points
            .map(|point| ((point.inter, point.intra), point.step_ms))
            .collect()
    }

    /// The step `report`'s run predicts at its own counts.
    fn own_prediction(&self, report: &RunReport) -> f64 {
        let summary = self.driver.summary(report, None, None);
        summary
            .scaling
            .and_then(|scaling| scaling.predicted)
            .map_or(f64::NAN, |curve| curve.today.step_ms)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_tiny_check_reports_every_point_with_its_error() {
        let config = ScalingBenchConfig {
            workloads: vec![ScalingWorkload {
                name: "chain".to_string(),
                set: vec!["length=20".to_string()],
            }],
            reference: (1, 2),
            points: vec![(1, 1), (2, 1)],
            iterations: 2,
            rounds: 2,
        };
        let mut seen = Vec::new();
        let results = run(&config, &mut |name| seen.push(name.to_string())).unwrap();
        assert_eq!(seen, ["chain"]);
        let counts: Vec<(usize, usize)> = results.iter().map(|r| (r.inter, r.intra)).collect();
        assert_eq!(counts, [(1, 1), (2, 1)]);
        for result in &results {
            assert_eq!((result.reference.as_str(), result.rounds), ("1x2", 2));
            assert!(
                result.measured_ms > 0.0 && result.predicted_ms > 0.0,
                "{result:?}"
            );
            let error = (result.predicted_ms - result.measured_ms) / result.measured_ms * 100.0;
            assert_eq!(result.error_pct, error);
        }
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
