//! Engine benchmarks: independent, chain, random_dag, wavefront and binary_tree on each
//! engine kind, every result checked against a sequential run.
//!
//! The definitions are the project's benchmark reference: CPU context, `threads` workers, ops
//! that do no work beyond folding their inputs into their output var's value (a
//! non-commutative mix, so a wrong order changes the result). Time runs from the first push
//! to the end of `wait_for_all`; the metric is ns per op. Vars are created before the clock
//! starts. Each engine is started once per benchmark and reps are interleaved across engines
//! (A B C A B C ...); figures are medians over reps. A run whose final digest differs from
//! the sequential evaluation's is reported with `"correct": false`.
//!
//! With [`EngineBenchConfig::floors`], each rep also runs the shape's ops through the floors
//! (`floor.rs`): the cheapest handoff of the same ops from the pushing thread to a worker on
//! this machine, interleaved with the engines, so a table shows how far each engine is from
//! what the machine allows.
//!
//! Op bodies reach the values through a `&'static` slice leaked once per benchmark (8 bytes
//! per var), and each op's read and write slices are built before the clock starts, so a push
//! clones no reference count (as MXNet's harness, which passes raw var pointers).
#![forbid(unsafe_code)]

mod floor;
mod shapes;

use std::fmt::{self, Write as _};
use std::str::FromStr;
use std::time::{Duration, Instant};

use crate::bench::stats::median;
use crate::engine::{Engine, EngineError, EngineKind, EngineOptions, OpName, OpSpec, Var};
use crate::pool::PoolKind;
use crate::sync::AtomicU64;
pub(crate) use floor::Floor;
pub(crate) use shapes::Workload;

/// One of the engine benchmarks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Shape {
    /// 100,000 ops over 1024 vars, no reads.
    Independent,
    /// 100,000 ops all writing one var.
    Chain,
    /// 100,000 ops over 1000 vars, 0 to 3 reads each.
    RandomDag,
    /// A 317 x 317 grid, each cell reading its upper and left neighbours.
    Wavefront,
    /// 131,071 ops, each reading its parent's var.
    BinaryTree,
}

impl Shape {
    /// Every shape, in the order they run.
    pub(crate) const ALL: [Shape; 5] = [
        Shape::Independent,
        Shape::Chain,
        Shape::RandomDag,
        Shape::Wavefront,
        Shape::BinaryTree,
    ];

    /// The name users type (`--bench chain,wavefront`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Shape::Independent => "independent",
            Shape::Chain => "chain",
            Shape::RandomDag => "random_dag",
            Shape::Wavefront => "wavefront",
            Shape::BinaryTree => "binary_tree",
        }
    }

    /// MXNet 1.9.1's figures from the reference (us per op, low and high), where it has one.
    pub(crate) fn mxnet_us_per_op(self) -> Option<(f64, f64)> {
        match self {
            Shape::Independent => Some((0.9, 3.2)),
            Shape::Chain => Some((0.7, 1.3)),
            Shape::RandomDag => Some((1.2, 7.0)),
            Shape::Wavefront => Some((1.2, 3.6)),
            Shape::BinaryTree => None,
        }
    }

    /// The workload at `scale` (1.0 = the reference sizes).
    pub(crate) fn workload(self, scale: f64) -> Workload {
        let ops = |full: usize| ((full as f64 * scale) as usize).max(1);
        match self {
            Shape::Independent => Workload::independent(ops(100_000)),
            Shape::Chain => Workload::chain(ops(100_000)),
            Shape::RandomDag => Workload::random_dag(ops(100_000)),
            Shape::Wavefront => Workload::wavefront(((317.0 * scale.sqrt()) as usize).max(1)),
            Shape::BinaryTree => Workload::binary_tree(ops(131_071)),
        }
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Shape {
    type Err = EngineBenchError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Shape::ALL
            .into_iter()
            .find(|shape| shape.as_str() == name.trim())
            .ok_or_else(|| EngineBenchError::UnknownBench(name.to_string()))
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub(crate) struct EngineBenchConfig {
    /// The engines measured, in the order each rep visits them.
    pub(crate) engines: Vec<EngineKind>,
    /// The pool kind of the threaded engines' CPU workers.
    pub(crate) pool_kind: PoolKind,
    /// CPU workers.
    pub(crate) threads: usize,
    /// Reps per benchmark.
    pub(crate) reps: usize,
    /// Workload size (1.0 = the reference; `--quick` uses 0.1).
    pub(crate) scale: f64,
    /// Floors timed beside the engines (`floor.rs`), in the same interleaved reps.
    pub(crate) floors: Vec<Floor>,
}

#[cfg(test)]
impl EngineBenchConfig {
    /// Every engine, `threads` workers, the `eigen` pool, 5 reps, full size.
    pub(crate) fn new(threads: usize) -> Self {
        EngineBenchConfig {
            engines: EngineKind::ALL.to_vec(),
            pool_kind: PoolKind::Eigen,
            threads,
            reps: 5,
            scale: 1.0,
            floors: Vec::new(),
        }
    }
}

/// What a row measures: an engine, or a floor of the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Runner {
    /// An engine kind.
    Engine(EngineKind),
    /// A floor (`floor.rs`).
    Floor(Floor),
}

impl Runner {
    /// The name in tables and JSON lines (`per-device`, `floor-spsc`, ...).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Runner::Engine(kind) => kind.as_str(),
            Runner::Floor(floor) => floor.as_str(),
        }
    }
}

impl fmt::Display for Runner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for Runner {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// One benchmark's figure for one engine or floor: one JSON line, one table row.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub(crate) struct EngineBenchResult {
    /// Which benchmark.
    pub(crate) bench: Shape,
    /// The engine (`naive`, `pooled`, `per-device`) or floor (`floor-spsc`, `floor-pingpong`).
    pub(crate) engine: Runner,
    /// The CPU worker pools' kind (`null` for a floor).
    pub(crate) pool: Option<PoolKind>,
    /// CPU workers (a floor's: 1).
    pub(crate) threads: usize,
    /// Median ns per op over reps.
    pub(crate) ns_per_op: f64,
    /// Every rep's digest matched the sequential run's.
    pub(crate) correct: bool,
    /// Reps the median is taken over.
    pub(crate) reps: usize,
}

/// Why an engine benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EngineBenchError {
    /// A benchmark name that is not one of ours.
    #[error(
        "unknown engine benchmark `{0}`: use one of independent, chain, random_dag, wavefront, \
         binary_tree"
    )]
    UnknownBench(String),
    /// The engine refused to start or to run a push.
    #[error("the {engine} engine failed during the benchmark")]
    Engine {
        /// Which engine.
        engine: EngineKind,
        /// Why.
        #[source]
        source: EngineError,
    },
}

/// Runs `shape` on every engine of `config`, interleaving reps; one result per engine.
pub(crate) fn run_shape(
    shape: Shape,
    config: &EngineBenchConfig,
) -> Result<Vec<EngineBenchResult>, EngineBenchError> {
    let workload = shape.workload(config.scale);
    let expected = workload.sequential_digest();
    let values: &'static [AtomicU64] =
        Box::leak((0..workload.vars).map(|_| AtomicU64::new(0)).collect());
    let engines = config
        .engines
        .iter()
        .map(|&kind| {
            let options = EngineOptions::new(kind, config.threads).pool_kind(config.pool_kind);
            Engine::new(options).map_err(|source| EngineBenchError::Engine {
                engine: kind,
                source,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let reps = config.reps.max(1);
    let runners = engines.len() + config.floors.len();
    let mut samples = vec![(Vec::with_capacity(reps), true); runners];
    let per_op = |elapsed: Duration| elapsed.as_nanos() as f64 / workload.ops.len() as f64;
    for _ in 0..reps {
        let (engine_samples, floor_samples) = samples.split_at_mut(engines.len());
        for (engine, (times, correct)) in engines.iter().zip(engine_samples) {
            let (elapsed, digest) = run_once(engine, &workload, values)?;
            times.push(per_op(elapsed));
            *correct &= digest == expected;
        }
        for (floor, (times, correct)) in config.floors.iter().zip(floor_samples) {
            let (elapsed, digest) = floor.run(&workload, values);
            times.push(per_op(elapsed));
            *correct &= digest == expected;
        }
    }
    let engine_rows = engines.iter().map(|engine| {
        (
            Runner::Engine(engine.kind()),
            Some(config.pool_kind),
            config.threads,
        )
    });
    let floor_rows = config
        .floors
        .iter()
        .map(|&floor| (Runner::Floor(floor), None, 1));
    Ok(engine_rows
        .chain(floor_rows)
        .zip(samples)
        .map(
            |((engine, pool, threads), (times, correct))| EngineBenchResult {
                bench: shape,
                engine,
                pool,
                threads,
                ns_per_op: median(&times).unwrap_or(f64::NAN),
                correct,
                reps,
            },
        )
        .collect())
}

/// One rep: pushes every op of `workload`, waits for all; returns the time and the digest
/// (`values`: one per var of the workload; `enginetop bench profiler` times random_dag with
/// this on engines carrying the profiler's probes).
pub(crate) fn run_once(
    engine: &Engine,
    workload: &Workload,
    values: &'static [AtomicU64],
) -> Result<(Duration, u64), EngineBenchError> {
    let fail = |source| EngineBenchError::Engine {
        engine: engine.kind(),
        source,
    };
    workload.reset(values);
    let vars: Vec<Var> = (0..workload.vars).map(|_| engine.new_variable()).collect();
    // Every op's reads laid out back to back before the clock starts, so a push borrows its
    // slices and clones no var handle (a handle is a reference count; MXNet's harness passes
    // raw pointers).
    let reads: Vec<Var> = workload
        .ops
        .iter()
        .flat_map(|op| op.reads())
        .map(|&read| vars[read as usize].clone())
        .collect();
    let name = OpName::new("bench-op");
    let start = Instant::now();
    let mut next_read = 0;
    for (index, &op) in workload.ops.iter().enumerate() {
        let read_count = op.reads().len();
        let spec = OpSpec::new(name)
            .reads(&reads[next_read..next_read + read_count])
            .writes(std::slice::from_ref(&vars[op.write as usize]));
        next_read += read_count;
        let index = index as u32;
        engine
            .push_sync(spec, move |_| {
                op.apply(index, values);
                Ok(())
            })
            .map_err(fail)?;
    }
    engine.wait_for_all().map_err(fail)?;
    let elapsed = start.elapsed();
    Ok((elapsed, workload.digest(values)))
}

/// `result` as one JSON object on one line.
pub(crate) fn json_line(result: &EngineBenchResult) -> String {
    serde_json::to_string(result).expect("an EngineBenchResult always serializes")
}

/// A table of `results` with MXNet 1.9.1's figures and our speed-up over its best one.
pub(crate) fn table(results: &[EngineBenchResult]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<12} {:<10} {:<9} {:>7} {:>10} {:>7}  {:>14} {:>12}",
        "bench", "engine", "pool", "threads", "ns/op", "correct", "MXNet us/op", "vs MXNet best"
    );
    for result in results {
        let mxnet = result.bench.mxnet_us_per_op();
        let _ = writeln!(
            out,
            "{:<12} {:<10} {:<9} {:>7} {:>10.1} {:>7}  {:>14} {:>12}",
            result.bench.as_str(),
            result.engine.as_str(),
            result.pool.map_or("-", PoolKind::as_str),
            result.threads,
            result.ns_per_op,
            result.correct,
            mxnet.map_or_else(|| "-".to_string(), |(low, high)| format!("{low}-{high}")),
            mxnet.map_or_else(
                || "-".to_string(),
                |(low, _)| format!("{:.1}x", low * 1000.0 / result.ns_per_op)
            ),
        );
    }
    out.push_str(
        "vs MXNet best: MXNet 1.9.1's fastest figure (2 CPU workers) / ours, above 10x meets \
         the target; floor-*: the cheapest handoff of the same ops to one worker on this \
         machine (no engine can beat floor-spsc); figures are medians over reps\n",
    );
    out
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn every_shape_is_correct_on_every_engine() {
        let config = EngineBenchConfig {
            reps: 1,
            scale: 0.02,
            floors: Floor::ALL.to_vec(),
            ..EngineBenchConfig::new(2)
        };
        for shape in Shape::ALL {
            let results = run_shape(shape, &config).unwrap();
            assert_eq!(results.len(), 5, "{shape}");
            assert_eq!(results[3].engine, Runner::Floor(Floor::Spsc));
            assert_eq!(results[4].engine, Runner::Floor(Floor::PingPong));
            for result in &results {
                assert!(result.correct, "{result:?}");
                assert!(result.ns_per_op > 0.0, "{result:?}");
            }
        }
    }

    #[test]
    fn json_line_has_the_reference_keys() {
        let result = EngineBenchResult {
            bench: Shape::RandomDag,
            engine: Runner::Engine(EngineKind::PerDevice),
            pool: Some(PoolKind::Eigen),
            threads: 2,
            ns_per_op: 150.5,
            correct: true,
            reps: 5,
        };
        assert_eq!(
            json_line(&result),
            r#"{"bench":"random_dag","engine":"per-device","pool":"eigen","threads":2,"ns_per_op":150.5,"correct":true,"reps":5}"#
        );
        assert!(table(&[result]).contains("1.2-7"));
    }

    #[test]
    fn shape_names_round_trip() {
        for shape in Shape::ALL {
            assert_eq!(shape.as_str().parse::<Shape>().unwrap(), shape);
        }
        assert!("nosuch".parse::<Shape>().is_err());
    }
}
