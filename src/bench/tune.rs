//! `enginetop bench tune`: is the tuner's pick worth taking? For each workload it runs the
//! tuner, then measures its pick and the default side by side: fresh runs, interleaved
//! round by round, and reports the gain with its spread and the number of rounds.
//!
//! # Measuring
//! 1. **Tune**: `enginetop tune` over the space and budget given (its own paired figure for
//!    the pick against the default is kept beside, as the tuner's estimate).
//! 2. **Size a run**: every measured run does the same iterations, enough for about one
//!    `--window` at the default's tuned speed (at least [`MIN_ITERATIONS`]), after a warm-up
//!    of [`WARM_UP_ITERATIONS`] on the same run (pools started, caches filled, setup ops done).
//! 3. **Rounds**: each round builds a fresh run of the pick and one of the default, in
//!    alternating order (pick first in odd rounds, default first in even ones), so a drift of
//!    the machine within a round favours neither; a run's figure is iterations per second
//!    over its measured iterations.
//! 4. **Figures**: each side's median and spread (median absolute deviation, as the tuner's),
//!    and the gain: the median of the rounds' pick-over-default ratios, with their median
//!    absolute deviation as its spread (pairing each round's two runs cancels the drift
//!    between rounds).
//!
//! Every run's checksum is compared: the pick and the default do the same iterations, so a
//! run that computed anything else fails the bench (bit-exact whatever the setting).
#![forbid(unsafe_code)]

use std::time::Duration;

use serde::Serialize;

use crate::config::RuntimeConfig;
use crate::tune::{self, Objective, Point, Setting, Space, TuneOptions, TuneStop};
use crate::workload::run::{Driver, RunHooks, RunLength, RunReport};
use crate::workload::{self, Graph, Overrides};

/// Iterations each measured run does first, not counted.
pub(crate) const WARM_UP_ITERATIONS: u64 = 2;
/// The fewest iterations a measured run counts.
pub(crate) const MIN_ITERATIONS: u64 = 3;

/// What to run.
#[derive(Clone, Debug)]
pub(crate) struct TuneBenchConfig {
    /// The runtime's settings (the default's; the pick changes the searched dimensions).
    pub(crate) runtime: RuntimeConfig,
    /// The tuner's budget per workload.
    pub(crate) budget: Duration,
    /// What the tuner searches.
    pub(crate) space: Space,
    /// Rounds of the side-by-side measurement.
    pub(crate) rounds: usize,
    /// About how long one measured run takes.
    pub(crate) window: Duration,
}

/// Why the bench could not measure.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TuneBenchError {
    /// The workload did not load.
    #[error("loading workload `{0}`")]
    Workload(String, #[source] workload::WorkloadError),
    /// The tuner refused the search.
    #[error("tuning `{0}`")]
    Tune(String, #[source] tune::TuneError),
    /// The tuner measured nothing (its outcome says why).
    #[error("tuning `{0}` picked nothing: {1}")]
    NoPick(String, String),
    /// A run failed.
    #[error("running `{0}` with {1}")]
    Run(
        String,
        String,
        #[source] Box<crate::workload::run::RunError>,
    ),
    /// Two runs of the same iterations computed different results.
    #[error(
        "`{0}`: the pick's checksum {1:016x} differs from the default's {2:016x} over the same \
         iterations: a setting changed the results"
    )]
    Checksum(String, u64, u64),
}

/// One side of the comparison: a configuration and its rounds' figures.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Side {
    /// The pool kind.
    pub(crate) pool: String,
    /// Whether idle workers spin: `on` or `off`.
    pub(crate) spin: &'static str,
    /// Inter-op threads.
    pub(crate) inter: usize,
    /// Intra-op threads.
    pub(crate) intra: usize,
    /// Iterations per second, one per round.
    pub(crate) samples: Vec<f64>,
    /// Their median.
    pub(crate) median: f64,
    /// Their median absolute deviation.
    pub(crate) spread: f64,
}

/// One workload's result.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct TuneBenchResult {
    /// The workload's name.
    pub(crate) workload: String,
    /// The tuner's pick, measured side by side.
    pub(crate) pick: Side,
    /// The default, measured side by side.
    pub(crate) default: Side,
    /// The median of the rounds' pick-over-default ratios (1.0: as fast).
    pub(crate) gain: f64,
    /// The ratios' median absolute deviation.
    pub(crate) gain_spread: f64,
    /// Rounds measured.
    pub(crate) rounds: usize,
    /// Iterations each measured run counted.
    pub(crate) iterations: u64,
    /// The tuner's own estimate of the gain, when it measured both: its paired median ratio
    /// (1.0 when its pick is the default).
    pub(crate) tuner_gain: Option<f64>,
    /// The tuner's paired spread of that ratio.
    pub(crate) tuner_gain_spread: Option<f64>,
    /// The pairs behind the tuner's estimate (0: its pick is the default).
    pub(crate) tuner_pairs: usize,
    /// Seconds the tuner took.
    pub(crate) tune_s: f64,
}

/// Tunes `name` and measures the pick against the default (see the module docs).
pub(crate) fn run_tune_bench(
    name: &str,
    config: &TuneBenchConfig,
) -> Result<TuneBenchResult, TuneBenchError> {
    let graph = workload::load_spec(name, &Overrides::default())
        .map_err(|error| TuneBenchError::Workload(name.to_string(), error))?;
    let found = tune_once(name, &graph, config)?;
    let iterations =
        ((found.default_rate * config.window.as_secs_f64()).round() as u64).max(MIN_ITERATIONS);
    let own = Setting::of(&config.runtime);
    let configs = [found.pick, (own, found.default)];
    let mut samples = [Vec::new(), Vec::new()];
    let mut checksums = [None, None];
    for round in 0..config.rounds {
        let order = match round % 2 {
            0 => [0, 1],
            _ => [1, 0],
        };
        for side in order {
            let (setting, point) = configs[side];
            let report = measured_run(name, &graph, config, (setting, point), iterations)?;
            samples[side].push(report.iterations as f64 / report.elapsed.as_secs_f64());
            checksums[side] = Some(report.checksum);
        }
    }
    if let [Some(pick), Some(default)] = checksums {
        if pick != default {
            return Err(TuneBenchError::Checksum(name.to_string(), pick, default));
        }
    }
    let ratios: Vec<f64> = samples[0]
        .iter()
        .zip(&samples[1])
        .map(|(pick, default)| pick / default)
        .collect();
    let [pick_samples, default_samples] = samples;
    Ok(TuneBenchResult {
        workload: graph.name.clone(),
        pick: side(configs[0], pick_samples),
        default: side(configs[1], default_samples),
        gain: median(&ratios),
        gain_spread: spread(&ratios),
        rounds: ratios.len(),
        iterations,
        tuner_gain: found.tuner_gain.map(|gain| gain.ratio),
        tuner_gain_spread: found.tuner_gain.map(|gain| gain.spread),
        tuner_pairs: found.tuner_gain.map_or(0, |gain| gain.pairs),
        tune_s: found.elapsed.as_secs_f64(),
    })
}

/// What the tuner found.
struct Found {
    pick: (Setting, Point),
    default: Point,
    /// The default's tuned iterations per second.
    default_rate: f64,
    tuner_gain: Option<tune::Gain>,
    elapsed: Duration,
}

fn tune_once(name: &str, graph: &Graph, config: &TuneBenchConfig) -> Result<Found, TuneBenchError> {
    let refused = |error| TuneBenchError::Tune(name.to_string(), error);
    let options = TuneOptions::for_config(
        &config.runtime,
        config.budget,
        Objective::Throughput,
        config.space,
    )
    .map_err(refused)?;
    let stop = TuneStop::new();
    let tuned = tune::tune_settings(graph, &config.runtime, &options, &stop, &mut |_, _| {})
        .map_err(refused)?;
    if let Some(failed) = tuned.runs.into_iter().find(|run| run.run.is_err()) {
        let error = failed.run.expect_err("found as failed");
        return Err(TuneBenchError::Run(
            name.to_string(),
            failed.setting.to_string(),
            Box::new(error),
        ));
    }
    let report = tuned.report;
    let no_pick = || TuneBenchError::NoPick(name.to_string(), format!("{:?}", report.outcome));
    let pick = report.best.ok_or_else(no_pick)?;
    let (own, default) = report.default;
    let default_rate = report.result(own, default).map_or(0.0, |r| r.median);
    Ok(Found {
        pick,
        default,
        default_rate,
        tuner_gain: report.gain,
        elapsed: report.elapsed,
    })
}

/// A fresh run of `name` with `setting` at `point`: the warm-up, then `iterations` counted.
fn measured_run(
    name: &str,
    graph: &Graph,
    config: &TuneBenchConfig,
    (setting, point): (Setting, Point),
    iterations: u64,
) -> Result<RunReport, TuneBenchError> {
    let failed = |error| {
        TuneBenchError::Run(
            name.to_string(),
            format!("{setting}, {point}"),
            Box::new(error),
        )
    };
    let runtime = RuntimeConfig {
        inter_op_threads: point.inter,
        intra_op_threads: point.intra,
        ..setting.apply(&config.runtime)
    };
    let mut driver = Driver::new(graph.clone(), &runtime, &RunHooks::default()).map_err(failed)?;
    driver
        .run(RunLength::Iterations(WARM_UP_ITERATIONS), &mut |_| {})
        .map_err(failed)?;
    driver
        .run(RunLength::Iterations(iterations), &mut |_| {})
        .map_err(failed)
}

fn side((setting, point): (Setting, Point), samples: Vec<f64>) -> Side {
    Side {
        pool: setting.pool.as_str().to_string(),
        spin: setting.spin_flag(),
        inter: point.inter,
        intra: point.intra,
        median: median(&samples),
        spread: spread(&samples),
        samples,
    }
}

fn median(samples: &[f64]) -> f64 {
    super::stats::median(samples).unwrap_or(0.0)
}

/// The median absolute deviation from the median (0 for fewer than two).
fn spread(samples: &[f64]) -> f64 {
    if samples.len() < 2 {
        return 0.0;
    }
    let center = median(samples);
    let deviations: Vec<f64> = samples.iter().map(|x| (x - center).abs()).collect();
    median(&deviations)
}

/// The results as a table: the pick and the default side by side, and the gain.
pub(crate) fn table(results: &[TuneBenchResult]) -> String {
    use std::fmt::Write as _;
    let mut out = format!(
        "{:<17} {:<30} {:>14}  {:<30} {:>14}  {:>15}  {:>6}  {:>23}\n",
        "workload", "pick", "iterations/s", "default", "iterations/s", "gain", "rounds", "tuner"
    );
    let describe = |s: &Side| {
        format!(
            "{} spin {} inter {} intra {}",
            s.pool, s.spin, s.inter, s.intra
        )
    };
    let figure = |s: &Side| format!("{:.2} ± {:.2}", s.median, s.spread);
    for r in results {
        let tuner = match (r.tuner_gain, r.tuner_gain_spread) {
            (Some(g), Some(s)) if r.tuner_pairs > 0 => format!(
                "{:+.1}% ± {:.1}% ({} pairs)",
                (g - 1.0) * 100.0,
                s * 100.0,
                r.tuner_pairs
            ),
            (Some(_), _) => "default kept".to_string(),
            _ => "-".to_string(),
        };
        let _ = writeln!(
            out,
            "{:<17} {:<30} {:>14}  {:<30} {:>14}  {:>15}  {:>6}  {:>23}",
            r.workload,
            describe(&r.pick),
            figure(&r.pick),
            describe(&r.default),
            figure(&r.default),
            format!(
                "{:+.1}% ± {:.1}%",
                (r.gain - 1.0) * 100.0,
                r.gain_spread * 100.0
            ),
            r.rounds,
            tuner,
        );
    }
    out.push_str(
        "gain: median of the rounds' pick/default ratios ± their median absolute deviation; \
         each round runs both, fresh, in alternating order; tuner: the tuner's own paired \
         estimate (median ratio ± paired spread)\n",
    );
    out
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_spread_is_the_median_absolute_deviation() {
        assert_eq!(spread(&[1.0, 5.0, 2.0]), 1.0);
        assert_eq!(spread(&[4.0]), 0.0);
        assert_eq!(median(&[]), 0.0);
    }

    /// A small workload end to end: the structure of the result, whatever the timings.
    #[test]
    fn a_short_bench_measures_both_sides_every_round() {
        let config = TuneBenchConfig {
            runtime: RuntimeConfig {
                schedulable_cpus: 2,
                max_threads: 2,
                ..RuntimeConfig::default()
            },
            budget: Duration::from_secs(4),
            space: "inter".parse().unwrap(),
            rounds: 3,
            window: Duration::from_millis(50),
        };
        let result = run_tune_bench("chain", &config).unwrap();
        assert_eq!(result.rounds, 3);
        for side in [&result.pick, &result.default] {
            assert_eq!(side.samples.len(), 3);
            assert!(side.median > 0.0);
            assert!(side.inter <= 2 && side.intra <= 2);
        }
        assert!(result.gain > 0.0 && result.iterations >= MIN_ITERATIONS);
        let table = table(&[result]);
        assert!(table.contains("chain") && table.contains("gain"), "{table}");
    }
}
