//! `enginetop analyze FILE`, end to end through the binary: a recorded run analyzed from its
//! recording and from its Chrome export gives one answer, the live run's within the gap
//! between the events' op times and the driver's own; a file without the graph names the fix.
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

mod common;
use common::cli::{self, text};

fn scratch(name: &str) -> PathBuf {
    cli::scratch("analyze-cli", name)
}

fn enginetop(args: &[&str], dir: &Path) -> Output {
    cli::run_in(args, dir)
}

fn stdout_of(output: &Output) -> String {
    assert!(output.status.success(), "{}", text(&output.stderr));
    text(&output.stdout)
}

fn json_of(output: &Output) -> Value {
    serde_json::from_str(&stdout_of(output)).expect("one JSON object")
}

/// Runs `workload` with `sets` for `iterations`, recorded to `r.etrec` and traced to
/// `t.json` in `dir`, exports the recording to `e.json`; returns the live summary's
/// `scaling`.
fn recorded_run(dir: &Path, workload: &str, sets: &[&str], iterations: &str) -> Value {
    let mut run = vec!["--workload", workload];
    for set in sets {
        run.extend(["--set", set]);
    }
    run.extend([
        "--iterations",
        iterations,
        "--headless",
        "--gemm-peak",
        "100",
        "--summary",
        "json",
        "--record",
        "r.etrec",
        "--trace",
        "t.json",
    ]);
    let live = json_of(&enginetop(&run, dir));
    let export = ["export", "r.etrec", "--to", "chrome", "--out", "e.json"];
    stdout_of(&enginetop(&export, dir));
    live["scaling"].clone()
}

fn analyzed(dir: &Path, file: &str) -> Value {
    let analysis = json_of(&enginetop(&["analyze", file, "--summary", "json"], dir));
    analysis["scaling"].clone()
}

fn number(value: &Value, key: &str) -> f64 {
    value[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} in {value}"))
}

/// `a` within 15% (and half a millisecond) of `b`: the events time an op from its start
/// event to its end event, the driver from inside its body.
fn close(a: f64, b: f64, what: &str) {
    assert!(
        (a - b).abs() <= 0.15 * b.abs() + 0.5,
        "{what}: analyze {a}, live {b}"
    );
}

#[test]
fn a_recording_and_its_chrome_export_analyze_alike_and_like_the_live_run() {
    let dir = scratch("pipeline");
    let live = recorded_run(&dir, "pipeline", &["batches=8", "read_us=1000"], "6");
    let (recorded, exported) = (analyzed(&dir, "r.etrec"), analyzed(&dir, "e.json"));
    assert_eq!(recorded, exported, "the recording and its Chrome export");
    for key in ["ops", "false_edges"] {
        assert_eq!(recorded[key], live[key], "{key}");
    }
    assert!(
        live["false_edges"]
            .as_array()
            .is_some_and(|edges| !edges.is_empty()),
        "pipeline's buffers are reused on its critical path: {live}"
    );
    for key in ["work_ms", "span_ms", "wall_ms"] {
        close(number(&recorded, key), number(&live, key), key);
    }
    let (devices, live_devices) = (
        recorded["devices"].as_array().unwrap(),
        live["devices"].as_array().unwrap(),
    );
    assert_eq!(devices.len(), live_devices.len());
    for (device, live_device) in devices.iter().zip(live_devices) {
        assert_eq!(
            (&device["device"], &device["ops"]),
            (&live_device["device"], &live_device["ops"])
        );
    }
    // No schedstat in a recording: its verdict is the live one's bound once threads have
    // their cores.
    let verdict = &recorded["verdicts"][0];
    let live_verdict = &live["verdicts"][0];
    let live_bound = match &live_verdict["graph_bound"] {
        Value::Null => &live_verdict["bound"],
        bound => bound,
    };
    assert_eq!(&verdict["bound"], live_bound, "{verdict} vs {live_verdict}");
    assert_eq!(verdict["device"], live_verdict["device"]);
    assert_eq!(verdict["named"], live_verdict["named"]);
    let validated = enginetop(&["trace", "validate", "e.json"], &dir);
    assert!(validated.status.success(), "{}", text(&validated.stderr));
    let table = stdout_of(&enginetop(&["analyze", "r.etrec"], &dir));
    assert!(table.contains("6 iterations of 32 ops"), "{table}");
    assert!(table.contains("why (the mean iteration"), "{table}");
    let buffer = live_verdict["named"][0].as_str().unwrap();
    assert!(table.contains(&format!("on {buffer}")), "{table}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_chain_is_all_critical_path_in_the_analysis_as_live() {
    let dir = scratch("chain");
    let live = recorded_run(&dir, "chain", &["length=60"], "3");
    let recorded = analyzed(&dir, "r.etrec");
    assert_eq!(recorded, analyzed(&dir, "e.json"));
    assert_eq!(recorded["critical_path_ops"], 60);
    assert_eq!(live["critical_path_ops"], 60);
    assert_eq!(recorded["work_ms"], recorded["span_ms"], "{recorded}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_file_without_the_graph_gets_an_error_naming_the_fix() {
    let dir = scratch("bad");
    std::fs::write(dir.join("notes.txt"), "not a trace").unwrap();
    let trace = r#"{"traceEvents":[],"displayTimeUnit":"ns","otherData":{"producer":"enginetop"}}"#;
    std::fs::write(dir.join("live.json"), trace).unwrap();
    for (file, why) in [
        ("notes.txt", "neither a recording nor JSON"),
        ("live.json", "without `otherData.graph`"),
    ] {
        let output = enginetop(&["analyze", file], &dir);
        assert!(!output.status.success());
        let stderr = text(&output.stderr);
        assert!(
            stderr.contains(why) && stderr.contains("--record FILE") && !stderr.contains("panick"),
            "{stderr}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
