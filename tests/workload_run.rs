//! The workload driver end to end: every shipped workload at a small size gives the naive
//! engine's checksum on every engine and pool kind; results match a sequential evaluation;
//! op failures, refused devices and unsupported dtypes are clear errors.
use enginetop::config::RuntimeConfig;
use enginetop::device::discover::GpuSelection;
use enginetop::engine::EngineKind;
use enginetop::pool::PoolKind;
use enginetop::workload::run::{run_workload, Driver, RunError, RunHooks, RunLength, RunOptions};
use enginetop::workload::{load_spec, load_str, Graph, KernelKind, Overrides, SHIPPED};

mod workload_run_support;
use workload_run_support::{small, small_overrides};

fn config(engine: EngineKind, pool: PoolKind, inter: usize, intra: usize) -> RuntimeConfig {
    RuntimeConfig {
        engine_kind: engine,
        pool_kind: pool,
        inter_op_threads: inter,
        intra_op_threads: intra,
        cpu_priority_workers: 2,
        ..RuntimeConfig::default()
    }
}

/// Runs `graph` for `iterations` and returns its checksum and ops run.
fn checksum(graph: &Graph, config: RuntimeConfig, iterations: u64) -> (String, u64) {
    let options = RunOptions::new(config, RunLength::Iterations(iterations));
    let summary = run_workload(graph.clone(), &options, RunHooks::default())
        .unwrap_or_else(|err| panic!("{}: {err}", graph.name));
    (summary.checksum, summary.ops)
}

#[test]
fn every_shipped_workload_matches_the_naive_engine_on_every_engine() {
    for shipped in SHIPPED {
        let graph = small(shipped.name);
        let naive = checksum(&graph, config(EngineKind::Naive, PoolKind::Eigen, 1, 1), 2);
        assert_eq!(naive.1, 2 * graph.iteration_ops().len() as u64);
        for engine in [EngineKind::Pooled, EngineKind::PerDevice] {
            let threaded = checksum(&graph, config(engine, PoolKind::Eigen, 2, 2), 2);
            assert_eq!(threaded, naive, "{} on {engine}", shipped.name);
        }
    }
}

#[test]
fn every_pool_kind_and_thread_count_gives_the_same_bits() {
    let graph = small("resnet-like");
    let naive = checksum(&graph, config(EngineKind::Naive, PoolKind::Simple, 1, 1), 2);
    for pool in PoolKind::ALL {
        for (inter, intra) in [(1, 2), (2, 1), (2, 3)] {
            let run = checksum(&graph, config(EngineKind::PerDevice, pool, inter, intra), 2);
            assert_eq!(run, naive, "{pool} pool, {inter} inter x {intra} intra");
        }
    }
}

#[test]
fn iterations_change_the_result_and_setup_runs_once() {
    let text = r#"
description = "a setup op, then an SGD step per iteration"
[[tensor]]
name = "w"
shape = [4]
init = "ones"
[[tensor]]
name = "g"
shape = [4]
[[block]]
phase = "setup"
op = [{ name = "init_grad", kernel = "fold", writes = ["g"] }]
[[block]]
op = [{ name = "step", kernel = "sgd", reads = ["g"], writes = ["w"], params = { lr = 0.5 } }]
"#;
    let graph = load_str(text, "sgd.toml", &Overrides::default()).unwrap();
    let config = config(EngineKind::PerDevice, PoolKind::Eigen, 2, 1);
    let mut driver = Driver::new(graph, &config, &RunHooks::default()).unwrap();
    let first = driver.run(RunLength::Iterations(1), &mut |_| {}).unwrap();
    let grad = driver.tensor("g").unwrap();
    let weight = driver.tensor("w").unwrap();
    assert_eq!((first.iterations, first.ops), (1, 1));
    assert!(grad.data.iter().all(|g| (0.0..1.0).contains(g)));
    assert_eq!(weight.data[0], 1.0 - 0.5 * grad.data[0]);
    let second = driver.run(RunLength::Iterations(2), &mut |_| {}).unwrap();
    assert_ne!(second.checksum, first.checksum);
    assert_eq!(driver.tensor("g").unwrap(), grad, "the setup op ran again");
    let mut want = 1.0f32;
    for _ in 0..3 {
        want -= 0.5 * grad.data[0];
    }
    assert_eq!(driver.tensor("w").unwrap().data[0], want);
}

/// The engine-overhead workloads fold tensors in place; their checksum must say how much ran
/// (a fold that cancelled its own input once gave `chain` one checksum for every length).
#[test]
fn the_engine_workloads_checksums_count_the_work_done() {
    let naive = || config(EngineKind::Naive, PoolKind::Eigen, 1, 1);
    for name in ["chain", "tree", "wavefront", "embarrassing", "random-dag"] {
        let graph = small(name);
        let once = checksum(&graph, naive(), 1).0;
        assert_ne!(
            once,
            checksum(&graph, naive(), 2).0,
            "{name}: 1 vs 2 iterations"
        );
    }
    let chain = |length: &str| {
        let overrides = Overrides::from_args([format!("length={length}")]).unwrap();
        checksum(&load_spec("chain", &overrides).unwrap(), naive(), 1).0
    };
    assert_ne!(chain("3"), chain("4"), "chain: 3 vs 4 steps");
}

/// What `enginetop workloads` prints per iteration is what a run counts: the loader's
/// estimate per kernel is the kernels' own count.
#[test]
fn the_flop_estimate_is_what_the_kernels_count() {
    for shipped in SHIPPED {
        let graph = small(shipped.name);
        let options = RunOptions::new(
            config(EngineKind::Naive, PoolKind::Eigen, 1, 1),
            RunLength::Iterations(1),
        );
        let summary = run_workload(graph.clone(), &options, RunHooks::default()).unwrap();
        let estimate = graph.iteration_flops() as f64 / 1e9;
        assert!(
            (summary.gflop_per_iteration - estimate).abs() <= 1e-9 * estimate.max(1.0),
            "{}: run {} GFLOP, estimate {estimate}",
            shipped.name,
            summary.gflop_per_iteration
        );
    }
}

/// Evaluates a `sum_expr` graph one op after another, as the kernel defines it.
fn sequential_sum_expr(graph: &Graph, iterations: usize) -> Vec<f32> {
    let mut values: Vec<f32> = vec![1.0; graph.tensors.len()];
    for _ in 0..iterations {
        for op in graph.iteration_ops() {
            assert_eq!(op.kernel, KernelKind::SumExpr);
            let sum: f64 = op
                .reads
                .iter()
                .map(|id| f64::from(values[id.index()]))
                .sum();
            values[op.writes[0].index()] = (sum / (op.reads.len() + 1) as f64) as f32;
        }
    }
    values
}

#[test]
fn random_dag_matches_a_sequential_evaluation_bit_for_bit() {
    let graph = small("random-dag");
    let want = sequential_sum_expr(&graph, 2);
    for engine in EngineKind::ALL {
        let config = config(engine, PoolKind::ChaseLev, 2, 1);
        let mut driver = Driver::new(graph.clone(), &config, &RunHooks::default()).unwrap();
        driver.run(RunLength::Iterations(2), &mut |_| {}).unwrap();
        for (tensor, want) in graph.tensors.iter().zip(&want) {
            let got = driver.tensor(&tensor.name).unwrap().data[0];
            assert_eq!(got.to_bits(), want.to_bits(), "{} on {engine}", tensor.name);
        }
    }
}

#[test]
fn a_failing_op_is_reported_by_name_and_the_run_stops() {
    let text = r#"
description = "a pool whose padding the kernel refuses"
[[tensor]]
name = "x"
shape = [1, 1, 4, 4]
init = "random"
[[tensor]]
name = "y"
shape = [1, 1, 4, 4]
[[tensor]]
name = "z"
shape = [1, 1, 4, 4]
[[op]]
name = "bad_pool"
kernel = "max_pool"
reads = ["x"]
writes = ["y"]
params = { size = 2, pad = 2 }
[[op]]
name = "after"
kernel = "relu"
reads = ["y"]
writes = ["z"]
"#;
    let graph = load_str(text, "bad.toml", &Overrides::default()).unwrap();
    for engine in EngineKind::ALL {
        let options = RunOptions::new(
            config(engine, PoolKind::Eigen, 2, 1),
            RunLength::Iterations(50),
        );
        let err = run_workload(graph.clone(), &options, RunHooks::default()).unwrap_err();
        assert_eq!(err.failed_op(), Some("bad_pool"), "{engine}: {err}");
        assert_eq!(
            err.to_string(),
            "op \"bad_pool\" failed: max_pool: padding 2 must be smaller than the window 2"
        );
    }
}

/// A GPU workload is refused with a clear error when no GPU is configured, and runs (with the
/// same checksum every time) on a simulated one.
#[test]
fn a_gpu_workload_is_refused_without_a_gpu_and_runs_on_a_simulated_one() {
    let mut overrides = small_overrides("transformer-like").to_vec();
    overrides.push("device=gpu:0");
    let graph = load_spec(
        "transformer-like",
        &Overrides::from_args(overrides).unwrap(),
    )
    .unwrap();
    let with_gpus = |gpus: GpuSelection| {
        let mut config = config(EngineKind::PerDevice, PoolKind::Eigen, 2, 1);
        config.gpus = gpus;
        RunOptions::new(config, RunLength::Iterations(1))
    };
    let err = run_workload(
        graph.clone(),
        &with_gpus(GpuSelection::None),
        RunHooks::default(),
    )
    .unwrap_err();
    assert!(matches!(err, RunError::DeviceRefused { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.starts_with(
            "op \"copy_in\" runs on gpu:0, which this run cannot use: no GPU is selected \
             (--gpus none; auto, cuda or sim:N select one); or run the workload on the CPU"
        ),
        "{message}"
    );
    let mut naive = with_gpus(GpuSelection::Sim(1));
    naive.config.engine_kind = EngineKind::Naive;
    let message = run_workload(graph.clone(), &naive, RunHooks::default())
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("the naive engine runs no GPU ops (--engine per-device does)"),
        "{message}"
    );
    let first = run_workload(
        graph.clone(),
        &with_gpus(GpuSelection::Sim(1)),
        RunHooks::default(),
    )
    .expect("runs on a simulated GPU");
    let second = run_workload(graph, &with_gpus(GpuSelection::Sim(1)), RunHooks::default())
        .expect("runs on a simulated GPU");
    assert_eq!(first.checksum, second.checksum);
    // The summary says which GPU stood in (a CPU-only run names none).
    let gpus = first.gpus.as_deref().unwrap_or_default();
    assert!(gpus.starts_with("sim x1"), "{gpus}");
    assert!(first.to_string().contains("GPUs          sim x1"));
    assert!(first.json().contains("\"gpus\":\"sim x1"));
}

#[test]
fn a_compute_kernel_on_a_tensor_that_is_not_f32_is_refused_before_running() {
    let text = r#"
description = "relu on halves"
[[tensor]]
name = "h"
shape = [4]
dtype = "f16"
[[tensor]]
name = "out"
shape = [4]
dtype = "f16"
[[op]]
name = "act"
kernel = "relu"
reads = ["h"]
writes = ["out"]
"#;
    let graph = load_str(text, "f16.toml", &Overrides::default()).unwrap();
    let err = Driver::new(graph, &RuntimeConfig::default(), &RunHooks::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "tensor \"h\" is f16, but op \"act\" (relu) computes in f32 only; declare it with \
         dtype = \"f32\""
    );
}

#[test]
fn a_run_of_nothing_is_refused() {
    let graph = small("chain");
    let mut driver = Driver::new(graph, &RuntimeConfig::default(), &RunHooks::default()).unwrap();
    let err = driver
        .run(RunLength::Iterations(0), &mut |_| {})
        .unwrap_err();
    assert!(matches!(err, RunError::NothingToRun), "{err}");
}

#[test]
fn progress_reaches_the_end_and_the_summary_adds_up() {
    let graph = small("transformer-like");
    let options = RunOptions {
        gemm_peak_gflops: Some(100.0),
        ..RunOptions::new(
            config(EngineKind::PerDevice, PoolKind::Eigen, 2, 2),
            RunLength::Iterations(5),
        )
    };
    let (sender, receiver) = std::sync::mpsc::channel();
    let hooks = RunHooks {
        progress: Some(Box::new(move |progress| sender.send(progress).unwrap())),
        ..RunHooks::default()
    };
    let summary = run_workload(graph.clone(), &options, hooks).unwrap();
    let seen: Vec<u64> = receiver.iter().map(|p| p.iterations_done).collect();
    assert_eq!(seen.last(), Some(&5));
    assert!(seen.windows(2).all(|pair| pair[0] <= pair[1]), "{seen:?}");
    assert_eq!(summary.ops, 5 * graph.iteration_ops().len() as u64);
    let lane_ops: u64 = summary.utilization.iter().map(|lane| lane.ops).sum();
    assert_eq!(lane_ops, summary.ops);
    assert!(summary.gflops > 0.0 && summary.gflop_per_iteration > 0.0);
    assert_eq!(summary.gpus, None, "no GPU op, no GPU line");
    assert_eq!(summary.peak_fraction, Some(summary.gflops / 100.0));
    let json: serde_json::Value = serde_json::from_str(&summary.json()).unwrap();
    for key in [
        "gflops",
        "gemm_peak_gflops",
        "iterations_per_s",
        "ops_per_s",
        "checksum",
    ] {
        assert!(!json[key].is_null(), "{key} missing from {json}");
    }
    assert_eq!(json["engine"], "per-device");
    assert_eq!(json["intra"], 2);
}

#[test]
fn a_duration_runs_at_least_one_iteration() {
    let graph = small("chain");
    let options = RunOptions::new(
        config(EngineKind::Pooled, PoolKind::Eigen, 1, 1),
        RunLength::Duration(std::time::Duration::from_millis(1)),
    );
    let summary = run_workload(graph, &options, RunHooks::default()).unwrap();
    assert!(summary.iterations >= 1);
    assert_eq!(summary.ops, summary.iterations * 200);
}
