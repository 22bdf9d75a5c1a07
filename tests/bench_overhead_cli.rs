//! End-to-end checks of `enginetop bench overhead`: the shape of its report (every ratio and
//! figure present and finite), never its timings.
mod common;

use common::cli::{command, scratch, text};
use serde_json::Value;

/// Runs the binary with `args`, its temporary files (the recording) in `dir`.
fn run_with_tmp(args: &[&str], dir: &std::path::Path) -> std::process::Output {
    command()
        .args(args)
        .env("TMPDIR", dir)
        .env("XDG_CACHE_HOME", dir)
        .output()
        .expect("the enginetop binary starts")
}

fn finite(value: &Value, key: &str) -> f64 {
    let figure = value[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing or not a number in {value}"));
    assert!(
        figure.is_finite() && figure > 0.0,
        "{key} = {figure} in {value}"
    );
    figure
}

#[test]
fn a_quick_json_run_reports_every_ratio_and_the_frame_cost() {
    let dir = scratch("bench-overhead", "json");
    let args = [
        "bench",
        "overhead",
        "--quick",
        "--rounds",
        "2",
        "--iterations",
        "1",
        "--seconds",
        "1",
        "--json",
    ];
    let output = run_with_tmp(&args, &dir);
    assert!(output.status.success(), "stderr: {}", text(&output.stderr));
    let lines: Vec<Value> = text(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}")))
        .collect();
    let benches: Vec<&str> = lines.iter().map(|l| l["bench"].as_str().unwrap()).collect();
    assert_eq!(benches, ["overhead", "overhead", "overhead_frame"]);
    let targets = [
        ("resnet-like", [Some(1.02), Some(1.03), None, None]),
        ("random-dag", [Some(1.05), None, None, Some(1.0)]),
    ];
    for (line, (workload, targets)) in lines.iter().zip(targets) {
        assert_eq!(line["workload"], workload);
        assert_eq!(
            (line["rounds"].as_u64(), line["iterations"].as_u64()),
            (Some(2), Some(1))
        );
        let steps = line["steps"].as_array().unwrap();
        let variants: Vec<&str> = steps
            .iter()
            .map(|s| s["variant"].as_str().unwrap())
            .collect();
        assert_eq!(variants, ["profiled", "analysis", "record", "chrome"]);
        for step in steps {
            finite(step, "step_ms");
            assert!(step["dropped"].is_u64(), "{step}");
        }
        let ratios = line["ratios"].as_array().unwrap();
        let names: Vec<&str> = ratios.iter().map(|r| r["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["b/a", "c/a", "d/a", "c/d"]);
        for (ratio, target) in ratios.iter().zip(targets) {
            let (median, lo, hi) = (
                finite(ratio, "median"),
                finite(ratio, "lo"),
                finite(ratio, "hi"),
            );
            assert!(lo <= hi, "{ratio}");
            assert!(median > 0.0, "{ratio}");
            assert_eq!(ratio["rounds"], 2, "{ratio}");
            assert_eq!(ratio["target"].as_f64(), target, "{workload}: {ratio}");
            assert_eq!(ratio["pass"].is_boolean(), target.is_some(), "{ratio}");
        }
        assert!(line["record_lost"].is_u64(), "{line}");
    }
    let frame = &lines[2];
    assert_eq!(frame["workload"], "resnet-like");
    assert!(frame["frames"].as_u64().unwrap() >= 1, "{frame}");
    assert_eq!(frame["target_pct"], 5.0);
    if cfg!(target_os = "linux") {
        let pct = frame["core_pct"].as_f64().expect("a figure on Linux");
        assert!(pct.is_finite() && pct >= 0.0, "{frame}");
        finite(frame, "cpu_ms_per_frame");
        assert!(frame["pass"].is_boolean(), "{frame}");
    }
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.file_name().to_string_lossy().ends_with(".etrec"))
        .collect();
    assert!(left.is_empty(), "recordings left behind: {left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_table_names_each_ratio_with_its_result() {
    let dir = scratch("bench-overhead", "table");
    let args = [
        "bench",
        "overhead",
        "--quick",
        "--rounds",
        "1",
        "--iterations",
        "1",
        "--seconds",
        "0",
    ];
    let output = run_with_tmp(&args, &dir);
    assert!(output.status.success(), "stderr: {}", text(&output.stderr));
    let stdout = text(&output.stdout);
    for row in [
        "analysis/profiled",
        "record/profiled",
        "chrome/profiled",
        "record/chrome",
    ] {
        assert_eq!(
            stdout.matches(row).count(),
            2,
            "{row} once per workload: {stdout}"
        );
    }
    assert_eq!(stdout.matches("(#23)").count(), 2, "{stdout}");
    assert_eq!(stdout.matches("(#25)").count(), 2, "{stdout}");
    assert!(
        !stdout.contains("dashboard frames"),
        "--seconds 0 skips them: {stdout}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn zero_rounds_are_refused_naming_the_range() {
    let output = command()
        .args(["bench", "overhead", "--rounds", "0"])
        .output()
        .expect("the enginetop binary starts");
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("'--rounds <ROUNDS>': expected a whole number from 1 to 1000"),
        "{stderr}"
    );
}
