//! A headless run on a simulated GPU exports a trace whose GPU process says what it is: a
//! simulated GPU, with its model's numbers (`process_labels` and `otherData.device_labels`).

mod common;

use common::cli::{command, text};
use serde_json::Value;

use enginetop::device::sim::SimModel;

mod workload_run_support;
use workload_run_support::small_overrides;

#[test]
fn a_simulated_gpus_model_is_in_the_trace() {
    let path =
        std::env::temp_dir().join(format!("enginetop-gpu-labels-{}.json", std::process::id()));
    let cache = std::env::temp_dir().join(format!("enginetop-gpu-labels-{}", std::process::id()));
    let mut args = vec!["--workload", "transformer-like"];
    for set in small_overrides("transformer-like")
        .iter()
        .chain(&["device=gpu:0"])
    {
        args.extend(["--set", set]);
    }
    let path_text = path.display().to_string();
    args.extend(["--gpus", "sim:1", "--iterations", "1", "--gemm-peak", "50"]);
    args.extend(["--trace", &path_text]);
    let output = command()
        .args(&args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("XDG_CACHE_HOME", &cache)
        .output()
        .expect("the enginetop binary starts");
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let json = std::fs::read(&path).expect("the trace was written");
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir_all(&cache);
    enginetop::profiler::validate_json(&json).unwrap_or_else(|p| panic!("{p}"));
    let trace: Value = serde_json::from_slice(&json).unwrap();

    let expected = format!("simulated GPU, model: {}, 80 GB", SimModel::default());
    assert_eq!(
        trace["otherData"]["device_labels"]["gpu0"],
        expected.as_str()
    );
    let events = trace["traceEvents"].as_array().unwrap();
    let gpu_pid = events
        .iter()
        .find(|event| event["name"] == "process_name" && event["args"]["name"] == "gpu0")
        .map(|event| event["pid"].clone())
        .expect("a gpu0 process");
    let labels: Vec<&Value> = events
        .iter()
        .filter(|event| event["name"] == "process_labels")
        .collect();
    assert_eq!(labels.len(), 1, "{labels:?}");
    assert_eq!(labels[0]["pid"], gpu_pid);
    let label = labels[0]["args"]["labels"].as_str().unwrap();
    assert!(
        label.starts_with("simulated GPU, model: 670 GFLOP/s, 33.5 GB/s memory"),
        "{label}"
    );
}
