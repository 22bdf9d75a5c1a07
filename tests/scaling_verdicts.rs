//! The scaling analysis on real runs whose answer is known: a chain is its own critical
//! path, a tree's path is its depth, independent ops are not bound by the graph, a
//! double-buffered pipeline is starved by write-after-read on its buffer slots, and the JSON
//! summary carries it all. Verdicts and named items are asserted, never times.
use enginetop::analysis::Bound;
use enginetop::config::RuntimeConfig;
use enginetop::workload::run::{
    run_workload, Driver, RunHooks, RunLength, RunOptions, ScalingSummary,
};
use enginetop::workload::{load_spec, load_str, Graph, Overrides};

mod common;

fn run(graph: Graph, inter: usize, iterations: u64) -> ScalingSummary {
    let config = RuntimeConfig {
        inter_op_threads: inter,
        intra_op_threads: 1,
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

#[test]
fn a_chain_is_bound_by_its_critical_path_which_is_every_op() {
    let scaling = run(shipped("chain", &["length=300"]), 2, 3);
    assert_eq!(scaling.mean.critical_path_ops, 300);
    assert_eq!(scaling.mean.span_ms, scaling.mean.work_ms, "span = work");
    assert!(
        scaling.mean.false_edges.is_empty(),
        "read-modify-write is a true edge"
    );
    let last = scaling
        .last_iteration
        .as_ref()
        .expect("three iterations ran");
    assert_eq!(last.critical_path_ops, 300);
    let [verdict] = scaling.verdicts.as_slice() else {
        panic!("one device: {:?}", scaling.verdicts)
    };
    assert_eq!(verdict.graph_bound, Bound::CriticalPath, "{verdict}");
    assert!(verdict.named.iter().all(|op| op.starts_with("step")));
    assert!(verdict.to_string().starts_with("cpu0: "), "{verdict}");
}

#[test]
fn a_tree_has_a_critical_path_of_its_depth() {
    // 255 nodes: 8 levels, each node reading its parent's output.
    let scaling = run(shipped("tree", &["nodes=255"]), 2, 2);
    assert_eq!(scaling.mean.critical_path_ops, 8);
    assert_eq!(scaling.mean.ops, 255);
    assert!(scaling
        .mean
        .critical_path
        .iter()
        .all(|op| op.name.starts_with("node")));
}

/// `ops` independent ops, each sleeping `us` (long beside any scheduling noise).
fn independent_sleeps(ops: usize, us: u64) -> Graph {
    let text = format!(
        "description = \"independent sleeps\"\n\
         [[block]]\nrepeat = {ops}\n\
         tensor = [{{ name = \"v${{i}}\", shape = [1] }}]\n\
         op = [{{ name = \"nap${{i}}\", kernel = \"sleep_us\", writes = [\"v${{i}}\"], \
         params = {{ us = {us} }} }}]\n"
    );
    load_str(&text, "independent.toml", &Overrides::default()).unwrap()
}

#[test]
fn independent_ops_are_not_bound_by_the_graph() {
    let scaling = run(independent_sleeps(12, 3000), 2, 2);
    assert_eq!(scaling.mean.critical_path_ops, 1);
    assert!(scaling.mean.false_edges.is_empty());
    let verdict = &scaling.verdicts[0];
    assert!(
        matches!(verdict.graph_bound, Bound::Busy | Bound::Overhead),
        "{verdict}"
    );
    // The shipped one too: its longest chain is its ops per tensor, whatever the times.
    let shipped = run(shipped("embarrassing", &["ops=512", "width=64"]), 2, 2);
    assert!(shipped.mean.critical_path_ops <= 8, "{:?}", shipped.mean);
}

#[test]
fn a_double_buffered_pipeline_is_starved_by_its_buffer_slots() {
    let graph = shipped(
        "pipeline",
        &[
            "batches=8",
            "rows=16",
            "features=32",
            "hidden=32",
            "read_us=3000",
        ],
    );
    let slots: Vec<String> = ["host", "feat", "mid", "out"]
        .iter()
        .flat_map(|buffer| [format!("{buffer}0"), format!("{buffer}1")])
        .collect();
    let scaling = run(graph, 2, 2);
    let verdict = &scaling.verdicts[0];
    assert_eq!(verdict.graph_bound, Bound::Starved, "{verdict}");
    assert!(!verdict.named.is_empty(), "{verdict}");
    assert!(
        verdict.named.iter().all(|var| slots.contains(var)),
        "only buffer slots are reused: {verdict}"
    );
    assert!(verdict.text.contains("write-after-read on "), "{verdict}");
}

#[test]
fn the_json_summary_holds_the_scaling_object() {
    let output = common::cli::run(&[
        "--workload",
        "chain",
        "--set",
        "length=100",
        "--iterations",
        "2",
        "--inter",
        "2",
        "--intra",
        "1",
        "--gemm-peak",
        "1",
        "--no-profile",
        "--summary",
        "json",
    ]);
    assert!(
        output.status.success(),
        "{}",
        common::cli::text(&output.stderr)
    );
    let json: serde_json::Value =
        serde_json::from_str(common::cli::text(&output.stdout).trim()).unwrap();
    let scaling = &json["scaling"];
    for field in ["work_ms", "span_ms", "parallelism", "achieved_parallelism"] {
        assert!(scaling[field].is_number(), "{field}: {scaling}");
    }
    assert_eq!(scaling["critical_path_ops"], 100);
    assert!(scaling["critical_path"][0]["name"].is_string(), "{scaling}");
    assert!(
        scaling["critical_path"][0]["share"].is_number(),
        "{scaling}"
    );
    assert!(
        scaling["last_iteration"]["span_ms"].is_number(),
        "{scaling}"
    );
    let verdict = &scaling["verdicts"][0];
    assert_eq!(verdict["device"], "cpu0");
    assert_eq!(verdict["graph_bound"], "critical_path");
    assert!(verdict["text"]
        .as_str()
        .unwrap()
        .contains("critical path: span"));
}

#[test]
fn the_dashboard_gets_one_verdict_line_per_device_from_the_handle() {
    let config = RuntimeConfig {
        inter_op_threads: 2,
        intra_op_threads: 1,
        ..RuntimeConfig::default()
    };
    let graph = shipped("chain", &["length=200"]);
    let mut driver = Driver::new(graph, &config, &RunHooks::default()).unwrap();
    let handle = driver.handle();
    assert!(handle.verdicts().is_empty(), "no iteration has finished");
    driver.run(RunLength::Iterations(3), &mut |_| {}).unwrap();
    let lines = handle.verdicts();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].starts_with("cpu0: "), "{lines:?}");
    assert!(lines[0].contains("critical path: span"), "{lines:?}");
    assert_eq!(handle.verdicts(), lines, "kept within a second");
}

#[test]
fn an_oversubscribed_resnet_like_measures_its_threads_descheduled() {
    let cores = std::thread::available_parallelism().map_or(1, |cores| cores.get());
    let graph = shipped(
        "resnet-like",
        &[
            "image=32",
            "width=8",
            "classes=10",
            "blocks1=1",
            "blocks2=1",
            "blocks3=1",
            "blocks4=1",
        ],
    );
    // More busy threads than cores: some wait for one. Runs repeat (bounded) until a wait
    // is seen, since a lucky run may get its cores just in time.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let scaling = run(graph.clone(), cores + 1, 3);
        let Some(descheduled) = scaling.descheduled else {
            eprintln!("skipped: /proc/self/task/TID/schedstat is absent on this kernel");
            return;
        };
        if descheduled.share > 0.0 {
            assert!(descheduled.threads > cores, "{descheduled:?}");
            let worst = &descheduled.per_thread[0];
            assert!(
                worst.run_delay_ms > 0.0 && !worst.thread.is_empty(),
                "{worst:?}"
            );
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no thread waited for a core: {descheduled:?}"
        );
    }
}
