//! Pool benchmarks: spawn, tree, parallel_for, wake_hot and wake_cold, on every pool kind and
//! on rayon as an in-process reference.
//!
//! The definitions are the project's benchmark reference, word for word:
//! - **spawn**: a thread outside the pool schedules `spawn_tasks` (1,000,000) no-op tasks, each
//!   notifying one shared barrier of that count, then waits on the barrier. Metric: ns per task.
//! - **tree**: one root task scheduled from outside; every task at depth `d > 0` schedules two
//!   children from inside the pool; depth 19 makes 1,048,575 tasks, all notifying one barrier.
//!   Metric: ns per task.
//! - **parallel_for**: the sum of `sqrt` over 2^24 `f32` (value `(i % 1000) * 0.5`) through the
//!   pool's cost-model `parallel_for` with cost {4 bytes loaded, 0 stored, 10 cycles}; rayon
//!   sums with `par_iter`. Every sum is checked against a sequential one. Metric: ms.
//! - **wake_hot / wake_cold**: schedule one task that records when it starts; latency = start -
//!   schedule. Hot: 2000 back to back; cold: 500, each after 1 ms idle. Metric: p50 and p99 us.
//!
//! # How a benchmark runs
//! Every contender's pool is started once per benchmark and dropped after it. Reps are
//! interleaved (A B C A B C ...) so that the machine's drift hits every contender alike, and
//! each figure is the median over reps (default 5, 9 for parallel_for: its "median of 9").
//!
//! Tasks reach the shared barrier through a `&'static` reference to a barrier leaked once per
//! run (a few dozen bytes): an `Arc` clone per task would add reference-count traffic on the
//! barrier's cache line that Eigen's tasks, capturing a raw pointer, do not pay.
#![forbid(unsafe_code)]

mod contender;
mod parallel_for;
mod spawn;
mod tree;
mod wake;

use std::time::Duration;

use crate::bench::stats::median;
use crate::pool::barrier::Barrier;
use crate::pool::{PoolError, PoolKind};
pub(crate) use contender::Contender;
use contender::Runner;

/// One of the pool benchmarks.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(
    serialize_all = "snake_case",
    parse_err_ty = BenchError,
    parse_err_fn = BenchError::unknown_bench
)]
pub(crate) enum Bench {
    /// 1,000,000 no-op tasks scheduled from outside.
    Spawn,
    /// A binary tree of tasks, each scheduling its children from inside the pool.
    Tree,
    /// A sum of square roots through the cost-model `parallel_for`.
    ParallelFor,
    /// Schedule-to-start latency, back to back.
    WakeHot,
    /// Schedule-to-start latency after 1 ms idle.
    WakeCold,
}

impl Bench {
    /// Every benchmark, in the order they run.
    pub(crate) const ALL: [Bench; 5] = [
        Bench::Spawn,
        Bench::Tree,
        Bench::ParallelFor,
        Bench::WakeHot,
        Bench::WakeCold,
    ];

    /// The name users type (`--bench spawn,tree`).
    pub(crate) fn as_str(self) -> &'static str {
        self.into()
    }

    /// Reps when the user names none: parallel_for is defined as a median of 9.
    pub(crate) fn default_reps(self) -> usize {
        match self {
            Bench::ParallelFor => 9,
            _ => 5,
        }
    }
}

/// How big each benchmark is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Sizes {
    /// Tasks scheduled by spawn.
    pub(crate) spawn_tasks: usize,
    /// Depth of the tree's root (tasks = 2^(depth+1) - 1).
    pub(crate) tree_depth: u32,
    /// Elements summed by parallel_for.
    pub(crate) parallel_for_len: usize,
    /// Latency samples per wake_hot rep.
    pub(crate) wake_hot_samples: usize,
    /// Latency samples per wake_cold rep.
    pub(crate) wake_cold_samples: usize,
    /// Idle time before each wake_cold sample.
    pub(crate) cold_idle: Duration,
}

impl Sizes {
    /// The sizes the benchmark reference defines.
    pub(crate) fn full() -> Self {
        Sizes {
            spawn_tasks: 1_000_000,
            tree_depth: 19,
            parallel_for_len: 1 << 24,
            wake_hot_samples: 2000,
            wake_cold_samples: 500,
            cold_idle: Duration::from_millis(1),
        }
    }

    /// About a tenth of the work, for smoke runs in CI (`--quick`).
    pub(crate) fn quick() -> Self {
        Sizes {
            spawn_tasks: 100_000,
            tree_depth: 16,
            parallel_for_len: 1 << 21,
            wake_hot_samples: 200,
            wake_cold_samples: 50,
            cold_idle: Duration::from_millis(1),
        }
    }
}

/// What to run: one benchmark's contenders, threads, reps and sizes.
#[derive(Clone, Debug)]
pub(crate) struct PoolBenchConfig {
    /// Worker threads of every pool.
    pub(crate) threads: usize,
    /// Reps of every benchmark; `None` takes each benchmark's [`Bench::default_reps`].
    pub(crate) reps: Option<usize>,
    /// How big each benchmark is.
    pub(crate) sizes: Sizes,
    /// The pools measured, in the order each rep visits them.
    pub(crate) contenders: Vec<Contender>,
}

impl PoolBenchConfig {
    /// Every contender, `threads` workers, full sizes, default reps.
    #[cfg(test)]
    pub(crate) fn new(threads: usize) -> Self {
        PoolBenchConfig {
            threads,
            reps: None,
            sizes: Sizes::full(),
            contenders: Contender::all(),
        }
    }

    /// Reps `bench` runs with this configuration (at least 1).
    pub(crate) fn reps_for(&self, bench: Bench) -> usize {
        self.reps.unwrap_or(bench.default_reps()).max(1)
    }
}

/// A benchmark's figure, named as it appears in the JSON line.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub(crate) enum Metric {
    /// spawn and tree: elapsed time per task.
    NsPerTask {
        /// Nanoseconds per task.
        ns_per_task: f64,
    },
    /// parallel_for: elapsed time of one call.
    Ms {
        /// Milliseconds.
        ms: f64,
    },
    /// wake_hot and wake_cold: schedule-to-start latency.
    Latency {
        /// Median latency in microseconds.
        us_p50: f64,
        /// 99th percentile latency in microseconds.
        us_p99: f64,
    },
}

impl Metric {
    /// The figure ratios compare (ns per task, ms, or p50 us); lower is better.
    pub(crate) fn headline(&self) -> f64 {
        match *self {
            Metric::NsPerTask { ns_per_task } => ns_per_task,
            Metric::Ms { ms } => ms,
            Metric::Latency { us_p50, .. } => us_p50,
        }
    }

    /// Each figure's median over `reps` (all of one kind, as one benchmark yields).
    fn median_over(reps: &[Metric]) -> Result<Metric, BenchError> {
        let median_of = |figure: fn(&Metric) -> f64| {
            let figures: Vec<f64> = reps.iter().map(figure).collect();
            median(&figures).ok_or(BenchError::NoSamples)
        };
        Ok(match reps.first().ok_or(BenchError::NoSamples)? {
            Metric::NsPerTask { .. } => Metric::NsPerTask {
                ns_per_task: median_of(Metric::headline)?,
            },
            Metric::Ms { .. } => Metric::Ms {
                ms: median_of(Metric::headline)?,
            },
            Metric::Latency { .. } => Metric::Latency {
                us_p50: median_of(Metric::headline)?,
                us_p99: median_of(|metric| match *metric {
                    Metric::Latency { us_p99, .. } => us_p99,
                    other => other.headline(),
                })?,
            },
        })
    }
}

/// One benchmark's figure for one contender: one JSON line, one table row.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub(crate) struct BenchResult {
    /// Which benchmark.
    pub(crate) bench: Bench,
    /// The contender's name (`simple`, `eigen`, `chase-lev`, `rayon`).
    pub(crate) pool: String,
    /// Worker threads.
    pub(crate) threads: usize,
    /// The median figure over reps.
    #[serde(flatten)]
    pub(crate) metric: Metric,
    /// Reps the median is taken over.
    pub(crate) reps: usize,
}

/// Why a benchmark could not run or produced a wrong answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BenchError {
    /// A benchmark name that is not one of ours.
    #[error("unknown benchmark `{0}`: use one of spawn, tree, parallel_for, wake_hot, wake_cold")]
    UnknownBench(String),
    /// A contender name that is neither a pool kind nor rayon.
    #[error("unknown pool `{0}`: use one of simple, eigen, chase-lev, rayon")]
    UnknownContender(String),
    /// One of our pools failed to start.
    #[error("could not start the `{kind}` pool for benchmarking")]
    Pool {
        /// The pool kind.
        kind: PoolKind,
        /// Why.
        #[source]
        source: PoolError,
    },
    /// rayon's pool failed to start.
    #[error("could not start a rayon pool of {threads} threads")]
    Rayon {
        /// Threads asked for.
        threads: usize,
        /// Why.
        #[source]
        source: rayon::ThreadPoolBuildError,
    },
    /// parallel_for returned a sum that differs from the sequential one.
    #[error(
        "parallel_for on `{pool}` summed {got}, but the sequential sum is {expected}: \
         a block was lost or run twice"
    )]
    WrongSum {
        /// The contender.
        pool: String,
        /// Its sum.
        got: f64,
        /// The sequential sum.
        expected: f64,
    },
    /// A benchmark produced no samples (zero reps or zero samples configured).
    #[error("the benchmark produced no samples: give it at least one rep and one sample")]
    NoSamples,
}

impl BenchError {
    /// The error for a benchmark name that is not one of ours.
    fn unknown_bench(name: &str) -> Self {
        BenchError::UnknownBench(name.to_string())
    }
}

/// Runs `bench` on every contender of `config`, interleaving reps; one result per contender.
pub(crate) fn run_bench(
    bench: Bench,
    config: &PoolBenchConfig,
) -> Result<Vec<BenchResult>, BenchError> {
    let sizes = &config.sizes;
    match bench {
        Bench::Spawn => run_reps(bench, config, |runner| {
            Ok(spawn::spawn_once(runner, sizes.spawn_tasks))
        }),
        Bench::Tree => run_reps(bench, config, |runner| {
            Ok(tree::tree_once(runner, sizes.tree_depth))
        }),
        Bench::ParallelFor => {
            let input = parallel_for::SumSqrtInput::new(sizes.parallel_for_len);
            run_reps(bench, config, |runner| {
                parallel_for::parallel_for_once(runner, &input)
            })
        }
        Bench::WakeHot => run_reps(bench, config, |runner| {
            wake::wake_once(runner, sizes.wake_hot_samples, None)
        }),
        Bench::WakeCold => run_reps(bench, config, |runner| {
            wake::wake_once(runner, sizes.wake_cold_samples, Some(sizes.cold_idle))
        }),
    }
}

/// Starts every contender, runs `measure_once` rep by rep on each in turn (A B C A B C ...),
/// drops the pools, and reduces each contender's reps to medians.
fn run_reps(
    bench: Bench,
    config: &PoolBenchConfig,
    mut measure_once: impl FnMut(&Runner) -> Result<Metric, BenchError>,
) -> Result<Vec<BenchResult>, BenchError> {
    let runners = config
        .contenders
        .iter()
        .map(|&contender| Runner::start(contender, config.threads))
        .collect::<Result<Vec<_>, _>>()?;
    let reps = config.reps_for(bench);
    let mut per_runner: Vec<Vec<Metric>> = vec![Vec::with_capacity(reps); runners.len()];
    for _ in 0..reps {
        for (runner, metrics) in runners.iter().zip(&mut per_runner) {
            metrics.push(measure_once(runner)?);
        }
    }
    drop(runners);
    config
        .contenders
        .iter()
        .zip(&per_runner)
        .map(|(contender, metrics)| {
            Ok(BenchResult {
                bench,
                pool: contender.name().to_string(),
                threads: config.threads,
                metric: Metric::median_over(metrics)?,
                reps,
            })
        })
        .collect()
}

/// A barrier of `count` that tasks can borrow as `&'static` (see the module docs for why).
fn leak_barrier(count: usize) -> &'static Barrier {
    Box::leak(Box::new(Barrier::new(count)))
}

/// Nanoseconds per task of a run that took `elapsed` for `tasks` tasks.
fn ns_per_task(elapsed: Duration, tasks: usize) -> Metric {
    Metric::NsPerTask {
        ns_per_task: elapsed.as_nanos() as f64 / tasks.max(1) as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny_sizes() -> Sizes {
        Sizes {
            spawn_tasks: 2_000,
            tree_depth: 8,
            parallel_for_len: 10_000,
            wake_hot_samples: 20,
            wake_cold_samples: 5,
            cold_idle: Duration::from_micros(100),
        }
    }

    fn tiny_config() -> PoolBenchConfig {
        PoolBenchConfig {
            threads: 2,
            reps: Some(2),
            sizes: tiny_sizes(),
            contenders: vec![Contender::Pool(PoolKind::Simple), Contender::Rayon],
        }
    }

    #[test]
    fn every_bench_yields_one_positive_result_per_contender() {
        let config = tiny_config();
        for bench in Bench::ALL {
            let results = run_bench(bench, &config).unwrap();
            let pools: Vec<&str> = results.iter().map(|r| r.pool.as_str()).collect();
            assert_eq!(pools, ["simple", "rayon"], "{bench}");
            for result in &results {
                assert_eq!((result.bench, result.threads, result.reps), (bench, 2, 2));
                assert!(result.metric.headline() > 0.0, "{result:?}");
            }
        }
    }

    #[test]
    fn bench_names_round_trip_and_unknown_names_list_the_valid_ones() {
        for bench in Bench::ALL {
            assert_eq!(bench.as_str().parse::<Bench>().unwrap(), bench);
        }
        let message = "sprawn".parse::<Bench>().unwrap_err().to_string();
        assert!(
            message.contains("sprawn") && message.contains("wake_cold"),
            "{message}"
        );
    }

    #[test]
    fn parallel_for_defaults_to_nine_reps_and_user_reps_win() {
        let mut config = PoolBenchConfig::new(2);
        assert_eq!(config.reps_for(Bench::ParallelFor), 9);
        assert_eq!(config.reps_for(Bench::Spawn), 5);
        config.reps = Some(3);
        assert_eq!(config.reps_for(Bench::ParallelFor), 3);
    }

    #[test]
    fn medians_are_taken_per_figure() {
        let reps = [
            Metric::Latency {
                us_p50: 1.0,
                us_p99: 30.0,
            },
            Metric::Latency {
                us_p50: 3.0,
                us_p99: 10.0,
            },
            Metric::Latency {
                us_p50: 2.0,
                us_p99: 20.0,
            },
        ];
        assert_eq!(
            Metric::median_over(&reps).unwrap(),
            Metric::Latency {
                us_p50: 2.0,
                us_p99: 20.0
            }
        );
        assert!(matches!(
            Metric::median_over(&[]),
            Err(BenchError::NoSamples)
        ));
    }
}
