//! The predicted scaling curve on real runs, compared with the run's own recorded op times
//! (never with a measured step: the machine is shared): one worker with serial bodies
//! predicts exactly the sum of the op times; a chain predicts its work at any inter count;
//! an op split over the intra-op pool predicts a shorter step with more intra-op threads;
//! the JSON summary carries the curve; `tune --cores N` prints its predicted best.
use enginetop::analysis::GRID;
use enginetop::config::RuntimeConfig;
use enginetop::workload::run::{
    run_workload, PredictedCurve, RunHooks, RunLength, RunOptions, ScalingSummary,
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

#[test]
fn one_worker_predicts_the_sum_of_the_recorded_op_times_exactly() {
    let scaling = run(shipped("random-dag", &["ops=300"]), 1, 1, 3);
    let predicted = curve(&scaling);
    assert_eq!(predicted.points.len(), GRID.len() * GRID.len());
    assert_eq!(step_at(&scaling, 1, 1), scaling.mean.work_ms);
    assert_eq!(
        (predicted.today.inter, predicted.today.intra),
        (1, 1),
        "today's counts"
    );
    assert_eq!(predicted.today.step_ms, scaling.mean.work_ms);
    assert!(!predicted.intra_measured, "intra 1 splits nothing");
    // No body splits, so the intra-op count changes nothing; more workers never hurt here
    // and never beat the span.
    for inter in GRID {
        assert_eq!(step_at(&scaling, inter, 64), step_at(&scaling, inter, 1));
        assert!(step_at(&scaling, inter, 1) >= scaling.mean.span_ms - 1e-9);
    }
}

#[test]
fn a_chain_predicts_its_work_at_any_inter_count() {
    let scaling = run(shipped("chain", &["length=200"]), 2, 1, 2);
    for inter in GRID {
        let step = step_at(&scaling, inter, 1);
        assert!(
            (step - scaling.mean.work_ms).abs() < 1e-9,
            "inter {inter}: {step} vs work {}",
            scaling.mean.work_ms
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
    let scaling = run(graph, 1, 2, 3);
    assert!(curve(&scaling).intra_measured, "its blocks ran as tasks");
    let (one, two, many) = (
        step_at(&scaling, 1, 1),
        step_at(&scaling, 1, 2),
        step_at(&scaling, 1, 64),
    );
    assert!(one > two && two > many, "{one} > {two} > {many}");
    assert_eq!(step_at(&scaling, 64, 2), two, "one op: more workers idle");
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
