//! End-to-end checks of `enginetop bench engine`, through the binary.
mod common;

use common::cli::{run as enginetop, text};
use serde_json::Value;

#[test]
fn quick_json_run_prints_correct_lines_with_the_reference_keys() {
    let output = enginetop(&[
        "bench",
        "engine",
        "--quick",
        "--json",
        "--reps",
        "1",
        "--engine",
        "naive,per-device",
        "--pool",
        "chase-lev",
        "--bench",
        "chain,wavefront",
    ]);
    assert!(output.status.success(), "stderr: {}", text(&output.stderr));
    let lines: Vec<Value> = text(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}")))
        .collect();
    let seen: Vec<(String, String)> = lines
        .iter()
        .map(|l| {
            (
                l["bench"].as_str().unwrap().into(),
                l["engine"].as_str().unwrap().into(),
            )
        })
        .collect();
    let expected = [
        ("chain", "naive"),
        ("chain", "per-device"),
        ("wavefront", "naive"),
        ("wavefront", "per-device"),
    ];
    assert_eq!(seen, expected.map(|(b, e)| (b.to_string(), e.to_string())));
    for line in &lines {
        assert_eq!(line["threads"], 2);
        assert_eq!(line["correct"], true, "{line}");
        assert_eq!(line["pool"], "chase-lev");
        assert!(line["ns_per_op"].as_f64().unwrap() > 0.0, "{line}");
    }
}

#[test]
fn the_table_compares_with_mxnet() {
    let output = enginetop(&[
        "bench",
        "engine",
        "--quick",
        "--reps",
        "1",
        "--engine",
        "pooled",
        "--bench",
        "independent",
    ]);
    assert!(output.status.success(), "stderr: {}", text(&output.stderr));
    let table = text(&output.stdout);
    assert!(
        table.contains("independent") && table.contains("0.9-3.2"),
        "{table}"
    );
}

#[test]
fn unknown_engines_and_benches_are_refused_naming_the_valid_ones() {
    let output = enginetop(&["bench", "engine", "--engine", "turbo"]);
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    for name in ["turbo", "naive", "pooled", "per-device", "all"] {
        assert!(stderr.contains(name), "{name} missing from: {stderr}");
    }
    let output = enginetop(&["bench", "engine", "--bench", "ladder"]);
    assert!(!output.status.success());
    assert!(text(&output.stderr).contains("binary_tree"));
    assert!(!text(&output.stderr).contains("panicked"));
}
