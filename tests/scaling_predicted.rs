//! The predicted scaling curve on real runs, compared with the run's own recorded op times
//! (never with a measured step: the machine is shared): one worker with serial bodies
//! predicts exactly the sum of the op times and the engine's measured cost before each op;
//! a chain predicts its work at any inter count; an op whose loops the intra-op pool splits
//! predicts a shorter step with more intra-op threads, measured at intra 1 as well as at
//! intra 2; the JSON summary carries the curve; `tune --cores N` prints its predicted best.
//! And on the simulated machine alone: a body with a known parallel fraction, loops the
//! cost model cuts unevenly, and the engine's cost between ops give known steps.
use std::time::Duration;

use enginetop::analysis::{
    DispatchCost, EngineModel, OpSplit, ParallelLoop, RanGraph, RanOp, GRID,
};
use enginetop::config::RuntimeConfig;
use enginetop::device::identity::Lane;
use enginetop::kernels::item_cost;
use enginetop::workload::run::{
    run_workload, LoopWakeSource, PredictedCurve, RunHooks, RunLength, RunOptions, ScalingSummary,
};
use enginetop::workload::{load_spec, load_str, Graph, Overrides};

mod common;

fn run(graph: Graph, inter: usize, intra: usize, iterations: u64) -> ScalingSummary {
    let config = RuntimeConfig {
        inter_op_threads: inter,
        intra_op_threads: intra,
        ..RuntimeConfig::default()
    };
    let options = RunOptions::new(config, RunLength::Iterations(iterations));
    let summary = run_workload(graph, &options, RunHooks::default()).unwrap();
    summary
        .scaling
        .expect("the driver adds the scaling analysis")
}

fn shipped(name: &str, overrides: &[&str]) -> Graph {
    load_spec(name, &Overrides::from_args(overrides).unwrap()).unwrap()
}

fn curve(scaling: &ScalingSummary) -> &PredictedCurve {
    scaling
        .predicted
        .as_ref()
        .expect("a live run predicts its curve")
}

fn step_at(scaling: &ScalingSummary, inter: usize, intra: usize) -> f64 {
    let points = &curve(scaling).points;
    let point = points
        .iter()
        .find(|point| (point.inter, point.intra) == (inter, intra))
        .unwrap_or_else(|| panic!("{inter}x{intra} is on the grid"));
    point.step_ms
}

fn ms(time: Duration) -> f64 {
    time.as_secs_f64() * 1e3
}

#[test]
fn one_worker_predicts_the_sum_of_the_recorded_op_times_and_engine_costs_exactly() {
    let scaling = run(shipped("random-dag", &["ops=300"]), 1, 1, 3);
    let predicted = curve(&scaling);
    assert_eq!(predicted.points.len(), GRID.len() * GRID.len());
    assert_eq!(predicted.dispatch.len(), 1, "one worker pool ran ops");
    let cost = predicted.dispatch[0].cost;
    assert!(
        cost.continuing > Duration::ZERO,
        "the engine's work between two ops on one worker was measured: {cost:?}"
    );
    // One worker: woken for the first op, then continuing from op to op.
    let ops = scaling.mean.ops as f64;
    let expected = scaling.mean.work_ms + ms(cost.waking) + (ops - 1.0) * ms(cost.continuing);
    assert!((step_at(&scaling, 1, 1) - expected).abs() < 1e-5);
    assert_eq!(
        (predicted.today.inter, predicted.today.intra),
        (1, 1),
        "today's counts"
    );
    assert!((predicted.today.step_ms - expected).abs() < 1e-5);
    assert!(
        !predicted.intra_measured,
        "random-dag's ops run no parallel loop"
    );
    // No body splits, so the intra-op count changes nothing; more workers never hurt here
    // and never beat the span.
    for inter in GRID {
        assert_eq!(step_at(&scaling, inter, 64), step_at(&scaling, inter, 1));
        assert!(step_at(&scaling, inter, 1) >= scaling.mean.span_ms - 1e-9);
    }
}

#[test]
fn a_chain_predicts_its_work_and_engine_costs_at_any_inter_count() {
    let scaling = run(shipped("chain", &["length=200"]), 2, 1, 2);
    let pool = curve(&scaling).dispatch[0].clone();
    // Measured at two workers, the cost stands for two and more; one worker takes it as
    // the hand-off probe carries it.
    let carried = pool.carried.expect("the per-device engine is probed");
    assert_eq!(carried.several, pool.cost, "two workers ran");
    // One ready op at a time: the first finds every worker idle, each next one is taken by
    // the worker that finished its predecessor.
    let ops = scaling.mean.ops as f64;
    for inter in GRID {
        let cost = carried.at(inter);
        let expected = scaling.mean.work_ms + ms(cost.waking) + (ops - 1.0) * ms(cost.continuing);
        let step = step_at(&scaling, inter, 1);
        assert!(
            (step - expected).abs() < 1e-5,
            "inter {inter}: {step} vs work and engine costs {expected}"
        );
    }
}

#[test]
fn an_op_split_over_the_intra_op_pool_predicts_a_shorter_step_with_more_threads() {
    // One large GEMM: Eigen's cost model splits it over both intra-op threads.
    let text = "description = \"one gemm\"\n\
        [[block]]\n\
        tensor = [\n\
          { name = \"a\", shape = [384, 384], init = \"random\" },\n\
          { name = \"b\", shape = [384, 384], init = \"random\" },\n\
          { name = \"c\", shape = [384, 384] },\n\
        ]\n\
        op = [{ name = \"mm\", kernel = \"gemm\", reads = [\"a\", \"b\"], writes = [\"c\"] }]\n";
    let graph = load_str(text, "gemm.toml", &Overrides::default()).unwrap();
    // At intra 1 the loop runs inline on the op's thread, and still reports itself.
    for intra in [1, 2] {
        let scaling = run(graph.clone(), 1, intra, 3);
        assert!(
            curve(&scaling).intra_measured,
            "intra {intra}: its loop was measured"
        );
        let (one, two, many) = (
            step_at(&scaling, 1, 1),
            step_at(&scaling, 1, 2),
            step_at(&scaling, 1, 64),
        );
        // Each split loop waits the same measured (or probed) time at any count, and on a
        // loaded machine that wait can outweigh one more thread: so the widest split beats
        // two threads whatever the wait, and two threads beat one but for that wait.
        let wake = ms(curve(&scaling).loop_wake);
        assert!(two > many, "intra {intra}: {two} > {many}");
        assert!(one > two - wake, "intra {intra}: {one} > {two} - {wake}");
        // Where the loop split, its wait is measured; at intra 1, where it never split, a
        // parked intra-op thread is woken and timed instead of taking the engine's figure.
        let source = match intra {
            1 => LoopWakeSource::Calibrated,
            _ => LoopWakeSource::Measured,
        };
        let predicted = curve(&scaling);
        assert_eq!(predicted.loop_wake_source, source, "intra {intra}");
        assert!(predicted.loop_wake > Duration::ZERO, "intra {intra}");
        // The figure is the mean of the waits it reports, measured or probed.
        let stats = predicted.loop_wake_stats.expect("a measured mean");
        assert_eq!(stats.mean, predicted.loop_wake, "intra {intra}");
        assert!(stats.samples > 0 && stats.median <= stats.p90, "{stats:?}");
        // Whatever the count, the probe timed the co-run factor of a split loop's blocks: a
        // median of pairs, never below 1 (co-running cannot speed the same blocks up).
        assert!(
            predicted.corun.is_finite() && predicted.corun >= 1.0,
            "intra {intra}: {}",
            predicted.corun
        );
        assert_eq!(step_at(&scaling, 64, 2), two, "one op: more workers idle");
    }
}

/// A graph of `ops` on one device, over `vars` vars.
fn graph(ops: Vec<RanOp>, vars: usize) -> RanGraph {
    RanGraph {
        ops,
        vars: (0..vars).map(|var| format!("v{var}")).collect(),
        devices: vec![Lane::CpuWorkers(0)],
        wall: Duration::ZERO,
    }
}

fn op(name: &str, reads: &[usize], writes: &[usize], time: Duration) -> RanOp {
    RanOp {
        name: name.to_string(),
        device: 0,
        reads: reads.to_vec(),
        writes: writes.to_vec(),
        time,
    }
}

#[test]
fn a_known_parallel_fraction_predicts_each_intra_count_on_the_simulated_machine() {
    let ms = Duration::from_millis;
    // Four independent ops, each 2 ms on its thread and a loop of 64 heavy items taking
    // 8 ms on one: the cost model cuts it evenly for 1, 2, 4 and 8 threads.
    let gemm = ParallelLoop {
        items: 64,
        cost: item_cost(0.0, 0.0, 1e6, 1.0),
        time: ms(8),
    };
    let body = OpSplit {
        serial: ms(2),
        loops: vec![gemm],
    };
    let ops = (0..4)
        .map(|i| op(&format!("g{i}"), &[], &[i], ms(10)))
        .collect();
    let model = EngineModel::new(&graph(ops, 4), &[], &vec![body; 4], &[]);
    for (inter, intra, step) in [(1, 1, 40), (1, 2, 24), (1, 4, 16), (2, 2, 12), (4, 8, 3)] {
        let predicted = model.step(inter, intra);
        let error = (ms(step).as_secs_f64() - predicted.as_secs_f64()).abs();
        assert!(
            error < 1e-6 * step as f64,
            "{inter}x{intra}: {predicted:?}, not {step} ms"
        );
    }
    // A loop of 3 heavy items: 2 blocks on 2 threads (2 items and 1), so the busiest takes
    // two thirds; a loop too small for a task stays whole on any count.
    let uneven = ParallelLoop {
        items: 3,
        time: ms(9),
        ..gemm
    };
    let small = ParallelLoop {
        items: 3,
        cost: item_cost(0.0, 0.0, 1.0, 1.0),
        time: ms(9),
    };
    let body = OpSplit {
        serial: Duration::ZERO,
        loops: vec![uneven, small],
    };
    let one = graph(vec![op("two-loops", &[], &[0], ms(18))], 1);
    let model = EngineModel::new(&one, &[], &[body], &[]);
    assert_eq!(model.step(1, 2), ms(6) + ms(9));
    assert_eq!(model.step(1, 3), ms(3) + ms(9));
}

#[test]
fn the_engines_cost_between_ops_lengthens_the_predicted_step() {
    let ms = Duration::from_millis;
    let us = Duration::from_micros;
    let costs = [DispatchCost {
        continuing: us(1),
        waking: us(20),
    }];
    // Eight independent 1 ms ops on two workers: each worker is woken once and continues
    // three times.
    let ops = (0..8)
        .map(|i| op(&format!("t{i}"), &[], &[i], ms(1)))
        .collect();
    let g = graph(ops, 8);
    let model = EngineModel::new(&g, &[], &[], &[]);
    assert_eq!(model.step(2, 1), ms(4));
    let costly = model.clone().with_dispatch(&costs);
    assert_eq!(costly.step(2, 1), ms(4) + us(20) + us(3));
    assert_eq!(costly.step(1, 1), ms(8) + us(20) + us(7));
    assert_eq!(costly.step(8, 1), ms(1) + us(20));
}

#[test]
fn the_json_summary_and_the_why_section_hold_the_curve() {
    let args = [
        "--workload",
        "chain",
        "--set",
        "length=50",
        "--iterations",
        "2",
        "--inter",
        "2",
        "--intra",
        "1",
        "--gemm-peak",
        "1",
        "--no-profile",
    ];
    let json_args: Vec<&str> = args.iter().copied().chain(["--summary", "json"]).collect();
    let output = common::cli::run(&json_args);
    assert!(output.status.success(), "{output:?}");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let predicted = json["scaling"]["predicted"].as_array().unwrap();
    assert_eq!(predicted.len(), GRID.len() * GRID.len());
    for point in predicted {
        assert!(point["inter"].as_u64().unwrap() >= 1);
        assert!(point["intra"].as_u64().unwrap() >= 1);
        assert!(point["step_ms"].as_f64().unwrap() > 0.0, "{point}");
    }
    let output = common::cli::run(&args);
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("what if (predicted step in ms;"), "{text}");
    assert!(text.contains("* today 2x1: predicted"), "{text}");
}

#[test]
fn tune_with_cores_prints_the_predicted_best_as_a_prediction() {
    let args = [
        "tune",
        "--workload",
        "tests/data/tune/independent_ops.toml",
        "--set",
        "ops=8",
        "--set",
        "us=500",
        "--budget",
        "7",
        "--max-threads",
        "2",
        "--cores",
        "16",
    ];
    let json_args: Vec<&str> = args.iter().copied().chain(["--summary", "json"]).collect();
    let output = common::cli::run(&json_args);
    assert!(output.status.success(), "{output:?}");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let predicted = &json["predicted_for_cores"];
    assert_eq!(predicted["cores"], 16, "{json:#}");
    let inter = predicted["inter"].as_u64().unwrap();
    let intra = predicted["intra"].as_u64().unwrap();
    assert!(
        inter >= 1 && intra >= 1 && inter * intra <= 16,
        "{predicted}"
    );
    assert!(predicted["step_ms"].as_f64().unwrap() > 0.0);
    let output = common::cli::run(&args);
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("predicted (simulated, not measured) for a machine of 16 cores: --inter "),
        "{text}"
    );
}
