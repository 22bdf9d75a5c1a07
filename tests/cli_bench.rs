//! End-to-end checks of `enginetop bench pool` and the top-level flags, through the binary.
mod common;

use common::cli::{run as enginetop, text};
use serde_json::Value;

#[test]
fn quick_json_run_prints_one_valid_line_per_bench() {
    let output = enginetop(&[
        "bench",
        "pool",
        "--quick",
        "--json",
        "--reps",
        "1",
        "--pool",
        "simple",
        "--bench",
        "spawn,wake_hot",
    ]);
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "stderr: {}", text(&output.stderr));
    let lines: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}")))
        .collect();
    let benches: Vec<&str> = lines.iter().map(|l| l["bench"].as_str().unwrap()).collect();
    assert_eq!(benches, ["spawn", "wake_hot"]);
    for line in &lines {
        assert_eq!(line["pool"], "simple");
        assert_eq!(line["threads"], 2);
        assert_eq!(line["reps"], 1);
    }
    assert!(
        lines[0]["ns_per_task"].as_f64().unwrap() > 0.0,
        "{}",
        lines[0]
    );
    for key in ["us_p50", "us_p99"] {
        assert!(lines[1][key].as_f64().unwrap() > 0.0, "{}", lines[1]);
    }
}

#[test]
fn help_and_version_exit_zero() {
    let help = enginetop(&["--help"]);
    assert!(help.status.success());
    assert!(text(&help.stdout).contains("bench"));
    let bench_help = enginetop(&["bench", "pool", "--help"]);
    assert!(bench_help.status.success());
    assert!(text(&bench_help.stdout).contains("--quick"));
    let version = enginetop(&["--version"]);
    assert!(version.status.success());
    assert!(text(&version.stdout).contains(env!("CARGO_PKG_VERSION")));
}

#[test]
fn unknown_pool_is_refused_naming_the_valid_ones() {
    let output = enginetop(&["bench", "pool", "--pool", "nosuch"]);
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    for name in ["nosuch", "simple", "eigen", "chase-lev", "rayon", "all"] {
        assert!(stderr.contains(name), "{name} missing from: {stderr}");
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn negative_numbers_are_refused_naming_the_flag_and_its_range() {
    for (args, message) in [
        (
            &["bench", "pool", "--threads", "-1"][..],
            "'--threads <THREADS>': expected a whole number from 1 to 1024",
        ),
        (
            &["bench", "gemm", "--size", "-64"][..],
            "'--size <SIZE>': expected a whole number from 1 to 16384",
        ),
        (
            &["bench", "engine", "--reps", "-3"][..],
            "'--reps <REPS>': expected a whole number from 1 to 10000",
        ),
        (
            &["bench", "gpu", "--ops", "-5"][..],
            "'--ops <OPS>': expected a whole number from 1 to 1000000",
        ),
    ] {
        let output = enginetop(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = text(&output.stderr);
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
}

#[test]
fn unknown_bench_and_zero_threads_are_refused() {
    for args in [
        &["bench", "pool", "--bench", "spawn,nosuch"][..],
        &["bench", "pool", "--threads", "0"][..],
        &["bench", "pool", "--reps", "0"][..],
    ] {
        let output = enginetop(args);
        assert!(!output.status.success(), "{args:?}");
        assert!(!text(&output.stderr).contains("panicked"), "{args:?}");
    }
}

/// The JSON lines of a successful run.
fn json_lines(args: &[&str]) -> Vec<Value> {
    let output = enginetop(args);
    assert!(output.status.success(), "stderr: {}", text(&output.stderr));
    text(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}")))
        .collect()
}

#[test]
fn profiler_rows_set_each_figure_beside_its_clock_reads() {
    let rows = json_lines(&[
        "bench",
        "profiler",
        "--quick",
        "--json",
        "--reps",
        "1",
        "--threads",
        "1",
        "--bench",
        "record_event,span_pair",
    ]);
    let names: Vec<(&str, Option<&str>)> = rows
        .iter()
        .map(|r| (r["bench"].as_str().unwrap(), r["variant"].as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("record_event", None),
            ("record_event", None),
            ("record_event", Some("no_clock")),
            ("record_event", Some("engine_mix")),
            ("span_pair", Some("ours")),
            ("span_pair", Some("fastrace")),
            ("clock_read", Some("std_instant")),
            ("clock_read", Some("tsc")),
        ],
        "the clock comes along with the rows that contain it"
    );
    for row in &rows {
        for key in ["clock_reads", "beyond_clock_ns", "ns_per_pair", "ns_per_op"] {
            assert!(row.get(key).is_some(), "{key} missing from {row}");
        }
    }
    let tsc = rows[7]["ns_per_event"].as_f64().unwrap();
    let reads: Vec<f64> = rows[..6]
        .iter()
        .map(|r| r["clock_reads"].as_f64().unwrap())
        .collect();
    assert_eq!(reads, [1.0, 1.0, 0.0, 2.0 / 3.0, 1.0, 1.0]);
    for (row, reads) in rows.iter().zip(reads) {
        let ns = row["ns_per_event"].as_f64().unwrap();
        let beyond = row["beyond_clock_ns"].as_f64().unwrap();
        assert!((beyond - (ns - reads * tsc)).abs() < 1e-9, "{row}");
    }
    assert!(rows[6..].iter().all(|r| r["beyond_clock_ns"].is_null()));
    let (ours, fastrace) = (&rows[4], &rows[5]);
    let pair = |row: &Value| row["ns_per_pair"].as_f64().unwrap();
    assert!(
        pair(fastrace) > 0.0 && fastrace["note"].is_null(),
        "{fastrace}"
    );
    let ratio = ours["ratio"].as_f64().unwrap();
    assert!(
        (ratio - pair(ours) / pair(fastrace)).abs() < 1e-12,
        "{ours}"
    );
    assert_eq!(ours["ns_per_event"].as_f64().unwrap(), pair(ours) / 2.0);
}
