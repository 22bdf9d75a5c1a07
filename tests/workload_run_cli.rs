//! The main command, `enginetop --workload ...`, headless: the summary (table and JSON), flag
//! validation, op errors, and the cached GEMM peak.
use std::path::PathBuf;
use std::process::Output;

use enginetop::workload::SHIPPED;

mod common;
mod workload_run_support;
use common::cli::{command, text};
use workload_run_support::small_overrides;

/// Runs the binary in the repository root with the GEMM peak cache in `cache` (so a test
/// never reads or writes the user's).
fn enginetop_with_cache(args: &[&str], cache: &std::path::Path) -> Output {
    command()
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("XDG_CACHE_HOME", cache)
        .env_remove("ENGINETOP_ENGINE")
        .env_remove("MXNET_ENGINE_TYPE")
        .output()
        .expect("the enginetop binary starts")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("enginetop-run-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn enginetop(args: &[&str]) -> Output {
    enginetop_with_cache(args, &scratch("unused"))
}

const SMALL_CHAIN: &[&str] = &["--workload", "chain", "--set", "length=100"];

#[test]
fn json_summary_holds_the_figures() {
    let args = [
        SMALL_CHAIN,
        &[
            "--iterations",
            "3",
            "--summary",
            "json",
            "--gemm-peak",
            "100",
        ],
        &[
            "--engine",
            "pooled",
            "--pool",
            "chase-lev",
            "--inter",
            "2",
            "--intra",
            "1",
        ],
    ]
    .concat();
    let output = enginetop(&args);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    for key in ["gflops", "iterations_per_s", "ops_per_s", "elapsed_s"] {
        assert!(json[key].as_f64().is_some(), "{key} in {json}");
    }
    assert_eq!(json["gemm_peak_gflops"], 100.0);
    assert_eq!(
        (json["iterations"].as_u64(), json["ops"].as_u64()),
        (Some(3), Some(300))
    );
    assert_eq!(
        (&json["engine"], &json["pool"]),
        (&"pooled".into(), &"chase-lev".into())
    );
    assert_eq!(
        (json["inter"].as_u64(), json["intra"].as_u64()),
        (Some(2), Some(1))
    );
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(
        json["gemm_peak_threads"].as_u64(),
        Some(2.min(cpus) as u64),
        "two ops on one intra-op thread each keep two CPUs busy: the peak is theirs"
    );
    assert_eq!(json["checksum"].as_str().map(str::len), Some(16));
}

/// The JSON summary of a headless run of `args`.
fn json_summary(args: &[&str]) -> serde_json::Value {
    let output = enginetop(args);
    assert!(
        output.status.success(),
        "{args:?}: {}",
        text(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn every_shipped_workload_runs_headless_with_the_naive_checksum_on_every_engine() {
    for shipped in SHIPPED {
        let mut args = vec!["--workload", shipped.name, "--iterations", "2"];
        args.extend(["--summary", "json", "--gemm-peak", "1", "--inter", "2"]);
        args.extend(["--intra", "2"]);
        for set in small_overrides(shipped.name) {
            args.extend(["--set", set]);
        }
        let checksum = |engine: &str| {
            let summary = json_summary(&[&args[..], &["--engine", engine]].concat());
            assert_eq!(summary["engine"], engine, "{}", shipped.name);
            summary["checksum"].as_str().unwrap().to_string()
        };
        let naive = checksum("naive");
        for engine in ["pooled", "per-device"] {
            assert_eq!(checksum(engine), naive, "{} on {engine}", shipped.name);
        }
    }
}

#[test]
fn table_summary_is_headless_when_stdout_is_not_a_terminal() {
    let args = [SMALL_CHAIN, &["--iterations", "2", "--gemm-peak", "50"]].concat();
    let output = enginetop(&args);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(stdout.starts_with("chain: 2 iterations in "), "{stdout}");
    for line in [
        "iterations/s",
        "ops/s",
        "GFLOP/s",
        "GEMM peak",
        "checksum",
        "worker pools",
    ] {
        assert!(stdout.contains(line), "{line} missing from\n{stdout}");
    }
    let stderr = text(&output.stderr);
    assert!(!stderr.contains("dashboard"), "{stderr}");
    assert!(
        !stderr.contains('\r'),
        "a progress bar on a non-terminal stderr: {stderr:?}"
    );
}

/// Runs `args`, expecting exit code `code` (clap's usage errors exit with 2, the others 1)
/// and `message` on stderr.
fn fails_with(args: &[&str], code: i32, message: &str) {
    let output = enginetop(args);
    assert_eq!(output.status.code(), Some(code), "{}", text(&output.stderr));
    let stderr = text(&output.stderr);
    assert!(stderr.contains(message), "{message:?} not in {stderr:?}");
}

#[test]
fn bad_flags_are_clear_errors() {
    fails_with(
        &[SMALL_CHAIN, &["--iterations", "0"]].concat(),
        2,
        "invalid value '0' for '--iterations <N>': expected a whole number of iterations, at \
         least 1",
    );
    fails_with(
        &[SMALL_CHAIN, &["--iterations", "2", "--duration", "1"]].concat(),
        2,
        "the argument '--iterations <N>' cannot be used with '--duration <S>'",
    );
    fails_with(
        &[SMALL_CHAIN, &["--duration", "0"]].concat(),
        2,
        "expected a number of seconds above 0",
    );
    fails_with(
        &[SMALL_CHAIN, &["--engine", "fast"]].concat(),
        2,
        "unknown engine `fast`",
    );
    fails_with(
        &["--headless"],
        1,
        "--workload is required: name a shipped workload (resnet-like",
    );
    fails_with(
        &["--workload", "resnet"],
        1,
        "error: resnet: no workload named \"resnet\": expected one of the shipped workloads \
         (resnet-like, transformer-like",
    );
    fails_with(
        &[SMALL_CHAIN, &["--trace", "run.json", "--no-profile"]].concat(),
        2,
        "the argument '--trace <FILE>' cannot be used with '--no-profile'",
    );
}

#[test]
fn trace_writes_a_chrome_trace_that_validates() {
    let path = std::env::temp_dir().join(format!("enginetop-run-{}.json", std::process::id()));
    let path_text = path.display().to_string();
    let args = [
        SMALL_CHAIN,
        &[
            "--iterations",
            "2",
            "--gemm-peak",
            "50",
            "--trace",
            &path_text,
        ],
    ]
    .concat();
    let output = enginetop(&args);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let validated = enginetop(&["trace", "validate", &path_text]);
    let _ = std::fs::remove_file(&path);
    assert!(validated.status.success(), "{}", text(&validated.stderr));
    assert!(text(&validated.stdout).contains("valid Chrome trace"));
}

#[test]
fn a_failing_op_exits_non_zero_naming_the_op() {
    let path = scratch("bad-workload").with_extension("toml");
    std::fs::write(
        &path,
        r#"
description = "a pool whose padding the kernel refuses"
[[tensor]]
name = "x"
shape = [1, 1, 4, 4]
[[tensor]]
name = "y"
shape = [1, 1, 4, 4]
[[op]]
name = "bad_pool"
kernel = "max_pool"
reads = ["x"]
writes = ["y"]
params = { size = 2, pad = 2 }
"#,
    )
    .unwrap();
    let path_text = path.to_str().unwrap();
    fails_with(
        &[
            "--workload",
            path_text,
            "--iterations",
            "3",
            "--gemm-peak",
            "1",
        ],
        1,
        "error: op \"bad_pool\" failed: max_pool: padding 2 must be smaller than the window 2\n",
    );
    let _ = std::fs::remove_file(path);
}

#[test]
fn the_gemm_peak_is_measured_once_then_read_from_the_cache() {
    let cache = scratch("peak-cache");
    let args = [
        SMALL_CHAIN,
        &["--iterations", "1", "--intra", "1", "--summary", "json"],
    ]
    .concat();
    let first = enginetop_with_cache(&args, &cache);
    assert!(first.status.success(), "{}", text(&first.stderr));
    let note = "measuring this machine's GEMM peak once (cached)...";
    assert!(
        text(&first.stderr).contains(note),
        "{}",
        text(&first.stderr)
    );
    let second = enginetop_with_cache(&args, &cache);
    assert!(
        !text(&second.stderr).contains(note),
        "{}",
        text(&second.stderr)
    );
    let peak = |output: &Output| {
        let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        json["gemm_peak_gflops"].as_f64().unwrap()
    };
    assert!(peak(&first) > 0.0);
    assert_eq!(peak(&first), peak(&second));
    let _ = std::fs::remove_dir_all(cache);
}

/// `--measure-peak` measures the peak around the run, without the cache, and says so; it
/// cannot be combined with a given peak.
#[test]
fn the_gemm_peak_can_be_measured_around_the_run() {
    let cache = scratch("peak-now");
    let args = [
        SMALL_CHAIN,
        &["--iterations", "1", "--intra", "1", "--measure-peak"],
    ]
    .concat();
    let json_args = [&args[..], &["--summary", "json"]].concat();
    let output = enginetop_with_cache(&json_args, &cache);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["gemm_peak_source"], "now");
    let peak = json["gemm_peak_gflops"].as_f64().unwrap();
    assert!(peak > 0.0, "{json}");
    let fraction = json["peak_fraction"].as_f64().unwrap();
    let cpu = json["cpu_gflops"].as_f64().unwrap();
    assert!(
        (fraction - cpu / peak).abs() <= 1e-9 * fraction.max(1.0),
        "{json}"
    );
    assert!(
        !text(&output.stderr).contains("measuring this machine's GEMM peak once"),
        "{}",
        text(&output.stderr)
    );
    assert!(!cache.join("enginetop").exists(), "the cache was written");

    let table = enginetop_with_cache(&args, &cache);
    assert!(table.status.success(), "{}", text(&table.stderr));
    assert!(
        text(&table.stdout).contains(", measured around this run: CPU ops at"),
        "{}",
        text(&table.stdout)
    );

    let both = enginetop(&[&args[..], &["--gemm-peak", "50"]].concat());
    assert_eq!(both.status.code(), Some(2));
    assert!(
        text(&both.stderr).contains("--measure-peak"),
        "{}",
        text(&both.stderr)
    );
    let _ = std::fs::remove_dir_all(cache);
}
