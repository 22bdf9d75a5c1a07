//! `enginetop bench gemm` through the binary: the JSON line and the flag checks.
mod common;

use std::process::Output;

use common::cli::{command, text};
use serde_json::Value;

fn enginetop(args: &[&str]) -> Output {
    // A private cache dir: nothing here may touch the user's cache.
    let cache = std::env::temp_dir().join(format!("enginetop-cli-gemm-{}", std::process::id()));
    command()
        .args(args)
        .env("XDG_CACHE_HOME", &cache)
        .output()
        .expect("the enginetop binary starts")
}

#[test]
fn json_run_prints_one_line_with_the_peak() {
    let output = enginetop(&[
        "bench",
        "gemm",
        "--threads",
        "2",
        "--size",
        "96",
        "--reps",
        "2",
        "--json",
    ]);
    assert!(output.status.success(), "stderr: {}", text(&output.stderr));
    let stdout = text(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    let line: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(line["bench"], "gemm");
    assert_eq!(line["threads"], 2);
    assert_eq!(line["size"], 96);
    assert_eq!(line["reps"], 2);
    assert!(line["gemm_peak_gflops"].as_f64().unwrap() > 0.0, "{line}");
}

#[test]
fn text_run_names_the_figure() {
    let output = enginetop(&[
        "bench",
        "gemm",
        "--threads",
        "1",
        "--size",
        "64",
        "--reps",
        "1",
    ]);
    assert!(output.status.success(), "stderr: {}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(
        stdout.starts_with("gemm 64x64x64 f32 on 1 eigen thread(s): "),
        "{stdout}"
    );
    assert!(stdout.contains("GFLOP/s"), "{stdout}");
}

#[test]
fn zero_size_and_zero_threads_are_refused_with_a_message() {
    for flags in [["--size", "0"], ["--threads", "0"]] {
        let output = enginetop(&["bench", "gemm", flags[0], flags[1]]);
        assert!(!output.status.success(), "{flags:?} was accepted");
        assert!(
            text(&output.stderr).contains(flags[0]),
            "{}",
            text(&output.stderr)
        );
    }
}
