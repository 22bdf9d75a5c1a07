//! The main command, `enginetop --workload ...`, headless: the summary (table and JSON), flag
//! validation, op errors, and the cached GEMM peak.
use std::path::PathBuf;
use std::process::Output;

use enginetop::workload::run::memory_available;
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
        "invalid value '0' for '--iterations <N>': expected a whole number of iterations from \
         1 to 18446744073709551615",
    );
    fails_with(
        &[SMALL_CHAIN, &["--iterations", "99999999999999999999"]].concat(),
        2,
        "expected a whole number of iterations from 1 to 18446744073709551615",
    );
    fails_with(
        &[SMALL_CHAIN, &["--iterations", "2", "--duration", "1"]].concat(),
        2,
        "the argument '--iterations <N>' cannot be used with '--duration <S>'",
    );
    for duration in ["0", "1e-12", "1e10"] {
        fails_with(
            &[SMALL_CHAIN, &["--duration", duration]].concat(),
            2,
            "expected a number of seconds from 0.001 to 1e9 (1 ms to about 31 years)",
        );
    }
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
        "error: resnet: no workload named \"resnet\" (did you mean resnet-like?): expected one \
         of the shipped workloads (resnet-like, transformer-like",
    );
    fails_with(
        &[SMALL_CHAIN, &["--trace", "run.json", "--no-profile"]].concat(),
        2,
        "the argument '--trace <FILE>' cannot be used with '--no-profile'",
    );
    fails_with(
        &[SMALL_CHAIN, &["--profile-rows", "3", "--no-profile"]].concat(),
        2,
        "the argument '--profile-rows <N>' cannot be used with '--no-profile'",
    );
}

#[test]
fn negative_numbers_are_refused_naming_the_flag_and_its_range() {
    let refused = [
        (
            "--intra",
            "-1",
            "<M>': expected a whole number from 0 to 4096",
        ),
        (
            "--inter",
            "-1",
            "<N>': expected a whole number from 0 to 4096",
        ),
        (
            "--max-threads",
            "-1",
            "<N>': expected a whole number from 1 to 4096",
        ),
        (
            "--gpu-workers",
            "-2",
            "<N>': expected a whole number from 0 to 4096",
        ),
        (
            "--profile-rows",
            "-1",
            "<N>': expected a whole number from 0 up",
        ),
        (
            "--iterations",
            "-3",
            "<N>': expected a whole number of iterations from 1",
        ),
        (
            "--duration",
            "-1",
            "<S>': expected a number of seconds from 0.001 to 1e9",
        ),
        ("--gemm-peak", "-150", "<GFLOPS>': expected GFLOP/s above 0"),
    ];
    for (flag, value, message) in refused {
        let message = format!("error: invalid value '{value}' for '{flag} {message}");
        fails_with(&[SMALL_CHAIN, &[flag, value]].concat(), 2, &message);
    }
}

#[test]
fn gpus_asked_for_by_a_cpu_only_workload_are_a_warning_saying_how_to_place_ops() {
    let output = enginetop(&[SMALL_CHAIN, &["--iterations", "1", "--gpus", "sim:1"]].concat());
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(
            "warning: --gpus sim:1 asked for GPUs that will sit idle: chain places no op on a \
             GPU: its ops take their device from the file"
        ),
        "{stderr}"
    );
    let pipeline = [
        "--workload",
        "pipeline",
        "--set",
        "batches=2",
        "--iterations",
        "1",
    ];
    let output = enginetop(&[&pipeline[..], &["--gpus", "sim:1"]].concat());
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("pipeline places no op on a GPU: pass --set device=gpu:0 to place them"),
        "{stderr}"
    );
    let on_gpu = [&pipeline[..], &["--gpus", "sim:1", "--set", "device=gpu:0"]].concat();
    let output = enginetop(&on_gpu);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        !text(&output.stderr).contains("warning"),
        "{}",
        text(&output.stderr)
    );
}

#[test]
fn gpus_cuda_without_cuda_is_refused_with_the_reason_and_the_fix() {
    if enginetop::device::cuda::probe().usable() {
        return; // this machine has CUDA: nothing to refuse
    }
    for workload in [&["--workload", "pipeline"][..], SMALL_CHAIN] {
        let output = enginetop(&[workload, &["--iterations", "1", "--gpus", "cuda"]].concat());
        assert_eq!(output.status.code(), Some(1));
        let stderr = text(&output.stderr);
        assert!(
            stderr.starts_with("error: --gpus cuda: CUDA is not available: "),
            "{stderr}"
        );
        assert!(
            stderr.contains("use --gpus sim:1 for a simulated GPU"),
            "{stderr}"
        );
        assert!(output.stdout.is_empty(), "nothing ran");
    }
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

/// A workload file in a scratch directory: `ops` sleeping ops of `us` microseconds each,
/// one after the other (each writes the same tensor).
fn sleeping_workload(name: &str, ops: usize, us: u64) -> PathBuf {
    let dir = scratch(name);
    std::fs::create_dir_all(&dir).unwrap();
    let mut text = format!(
        "description = \"{ops} sleeps of {us} us\"\n[[tensor]]\nname = \"t\"\nshape = [1]\n"
    );
    for i in 0..ops {
        text += &format!(
            "[[op]]\nname = \"nap{i}\"\nkernel = \"sleep_us\"\nwrites = [\"t\"]\n\
             params = {{ us = {us} }}\n"
        );
    }
    let path = dir.join("sleep.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `--duration` stops queuing iterations once the time is up: an iteration that takes 400 ms
/// under a 50 ms duration runs once (it used to run three times: two queued ahead, and one
/// more queued after waiting for the first).
#[test]
fn a_duration_ends_within_about_one_iteration_of_its_deadline() {
    let path = sleeping_workload("duration", 1, 400_000);
    let path_text = path.to_str().unwrap();
    let args = ["--workload", path_text, "--no-profile", "--summary", "json"];
    let json = json_summary(&[&args[..], &["--gemm-peak", "1", "--duration", "0.05"]].concat());
    assert_eq!(json["iterations"], 1, "{json}");
    assert!(json["elapsed_s"].as_f64().unwrap() < 0.8, "{json}");
    // With time for several, it still runs several and stops near the deadline.
    let path = sleeping_workload("duration-short", 2, 10_000);
    let path_text = path.to_str().unwrap();
    let args = ["--workload", path_text, "--no-profile", "--summary", "json"];
    let json = json_summary(&[&args[..], &["--gemm-peak", "1", "--duration", "0.3"]].concat());
    let iterations = json["iterations"].as_u64().unwrap();
    assert!((2..=15).contains(&iterations), "{json}");
    assert!(json["elapsed_s"].as_f64().unwrap() < 0.3 + 0.2, "{json}");
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

/// A `--trace` path that cannot be written is refused before the run, with one message.
#[test]
fn a_bad_trace_path_is_refused_before_the_run() {
    let dir = scratch("trace-path");
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("nope").join("x.json");
    let started = std::time::Instant::now();
    let args = [SMALL_CHAIN, &["--duration", "30", "--gemm-peak", "1"]].concat();
    let output = enginetop(&[&args[..], &["--trace", missing.to_str().unwrap()]].concat());
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    assert!(started.elapsed().as_secs() < 20, "the run went ahead");
    assert_eq!(text(&output.stdout), "");
    let stderr = text(&output.stderr);
    assert_eq!(
        stderr,
        format!(
            "error: --trace {}: {} does not exist; create it, or name a file in an existing \
             directory\n",
            missing.display(),
            dir.join("nope").display()
        )
    );
    let output = enginetop(&[&args[..], &["--trace", dir.to_str().unwrap()]].concat());
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains(&format!(
            "--trace {} is a directory: name a file, e.g. {}",
            dir.display(),
            dir.join("trace.json").display()
        )),
        "{}",
        text(&output.stderr)
    );
    assert!(
        std::fs::read_dir(&dir).unwrap().next().is_none(),
        "left a file behind"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// The limit that errors recommend raising is a flag of the run command.
#[test]
fn max_threads_is_a_flag_and_the_limit_errors_name_it() {
    let help = enginetop(&["--help"]);
    assert!(
        text(&help.stdout).contains("--max-threads <N>"),
        "{}",
        text(&help.stdout)
    );
    let args = [SMALL_CHAIN, &["--iterations", "1", "--gemm-peak", "1"]].concat();
    fails_with(
        &[&args[..], &["--inter", "100000"]].concat(),
        1,
        "or raise the limit with ENGINETOP_MAX_THREADS or --max-threads (up to 4096)",
    );
    fails_with(
        &[&args[..], &["--max-threads", "2", "--inter", "3"]].concat(),
        1,
        "--inter-op-threads 3 is too many threads: expected at most max_threads = 2",
    );
    fails_with(
        &[&args[..], &["--max-threads", "0"]].concat(),
        1,
        "--max-threads 0 is not a usable thread limit: expected a whole number from 1 to 4096",
    );
    let json = json_summary(
        &[
            &args[..],
            &[
                "--max-threads",
                "3",
                "--inter",
                "3",
                "--intra",
                "1",
                "--summary",
                "json",
            ],
        ]
        .concat(),
    );
    assert_eq!(json["inter"], 3, "{json}");
}

/// A sleep longer than a minute is refused when the file loads, pointing at the value.
#[test]
fn a_sleep_over_a_minute_is_refused_at_load() {
    let path = sleeping_workload("long-sleep", 1, 100_000_000_000);
    let path_text = path.to_str().unwrap();
    fails_with(
        &["--workload", path_text, "--iterations", "1"],
        1,
        ":9:17: op \"nap0\" (sleep_us): parameter us = 100000000000: expected an integer from \
         0 to 60000000",
    );
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

/// Tensors that fit the fixed cap but not this machine's memory are refused before anything
/// is allocated, with the sizes and the fix (instead of the OOM killer's silent exit 137).
#[test]
fn tensors_bigger_than_the_memory_available_are_refused_up_front() {
    let Some(available) = memory_available() else {
        return; // no /proc/meminfo: only the fixed cap applies
    };
    // One tensor per GiB above what is available, under the 64 GiB cap (and 4 Gi elements).
    let gib = available.div_ceil(1 << 30) + 1;
    if gib > 60 {
        return; // this machine has more memory than the cap: the loader refuses first
    }
    let dir = scratch("memory");
    std::fs::create_dir_all(&dir).unwrap();
    let mut text = "description = \"more than the memory\"\n".to_string();
    for i in 0..gib {
        text += &format!("[[tensor]]\nname = \"t{i}\"\nshape = [268435456]\n");
    }
    text += "[[op]]\nname = \"touch\"\nkernel = \"fold\"\nwrites = [\"t0\"]\n";
    let path = dir.join("big.toml");
    std::fs::write(&path, text).unwrap();
    let started = std::time::Instant::now();
    let args = [
        "--workload",
        path.to_str().unwrap(),
        "--iterations",
        "1",
        "--gemm-peak",
        "1",
    ];
    for expected in [
        format!("error: the workload's tensors need {gib}.0 GiB, but only "),
        "of memory is available (MemAvailable in /proc/meminfo); make the workload smaller with \
         --set (e.g. a smaller size or batch)"
            .to_string(),
    ] {
        fails_with(&args, 1, &expected);
    }
    assert!(started.elapsed().as_secs() < 20, "it allocated first");
    let _ = std::fs::remove_dir_all(dir);
}

/// A trace that fails to write after the run (here a full device) does not lose the run: the
/// summary is printed, then the error, once (the OS error used to appear twice), exit 1.
#[test]
fn a_trace_that_fails_after_the_run_still_prints_the_summary() {
    if !std::path::Path::new("/dev/full").exists() {
        return;
    }
    let args = [SMALL_CHAIN, &["--iterations", "2", "--gemm-peak", "1"]].concat();
    let output = enginetop(&[&args[..], &["--trace", "/dev/full"]].concat());
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).starts_with("chain: 2 iterations in "),
        "{}",
        text(&output.stdout)
    );
    let stderr = text(&output.stderr);
    assert!(
        stderr.ends_with(
            "error: could not write the trace to `/dev/full` (check that its directory exists \
             and is writable, and that the disk has room): No space left on device (os error 28)\n"
        ),
        "{stderr}"
    );
    assert_eq!(stderr.matches("(os error 28)").count(), 1, "{stderr}");
}

/// The engine's worker counts, GPU sync mode and spinning have flags as well as variables;
/// bad values name the flag and the spellings.
#[test]
fn engine_settings_are_flags_too() {
    let run = |extra: &[&str]| {
        let output = enginetop(
            &[
                SMALL_CHAIN,
                &["--iterations", "1", "--gemm-peak", "1"],
                extra,
            ]
            .concat(),
        );
        assert!(output.status.success(), "{}", text(&output.stderr));
        text(&output.stdout)
    };
    assert!(run(&["--cpu-workers", "1"]).contains("1 inter x"));
    let gpu = [
        "--workload",
        "pipeline",
        "--set",
        "device=gpu:0",
        "--gpus",
        "sim:1",
        "--iterations",
        "1",
        "--gemm-peak",
        "1",
        "--gpu-workers",
        "3",
        "--gpu-copy-workers",
        "2",
        "--gpu-sync",
        "sync",
        "--spin",
        "off",
    ];
    let output = enginetop(&gpu);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).contains("gpu0 workers       6 workers"), // 3 compute, 2 copy, 1 prio
        "{}",
        text(&output.stdout)
    );
    fails_with(
        &[SMALL_CHAIN, &["--spin", "maybe"]].concat(),
        2,
        "--spin maybe is not a switch: expected true/false, 1/0, on/off or yes/no",
    );
    fails_with(
        &[SMALL_CHAIN, &["--gpu-sync", "never"]].concat(),
        2,
        "--gpu-sync never is not a GPU sync mode: expected event",
    );
}

/// `--trace-dir` is the dashboard's; a headless run says it writes nothing there.
#[test]
fn a_headless_run_says_trace_dir_is_the_dashboards() {
    let dir = std::env::temp_dir().to_string_lossy().into_owned();
    let output = enginetop(
        &[
            SMALL_CHAIN,
            &["--iterations", "1", "--gemm-peak", "1", "--trace-dir", &dir],
        ]
        .concat(),
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains("a headless run writes none there (use --trace FILE)"),
        "{}",
        text(&output.stderr)
    );
}
