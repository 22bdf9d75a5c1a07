//! `enginetop trace demo`, `enginetop trace validate` and `enginetop bench profiler`, through
//! the binary.
mod common;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::cli::text;
use serde_json::Value;

/// Generous bound for one run of the binary: a hang fails the test instead of blocking CI.
const DEADLINE: Duration = Duration::from_secs(120);

/// Runs the binary; kills it and fails if it has not finished within [`DEADLINE`]. A helper
/// thread collects its output, so this waits on that thread's answer, not by polling.
fn enginetop(args: &[&str]) -> Output {
    let child = common::cli::command()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the enginetop binary starts");
    let pid = child.id();
    let (done, output) = mpsc::channel();
    std::thread::spawn(move || done.send(child.wait_with_output()));
    match output.recv_timeout(DEADLINE) {
        Ok(output) => output.expect("collecting enginetop's output"),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("enginetop {args:?} did not finish within {DEADLINE:?}");
        }
    }
}

fn temp_file(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("enginetop-{}-{name}", std::process::id()))
}

#[test]
fn demo_writes_a_trace_that_validates() {
    let out = temp_file("demo.trace.json");
    let out_arg = out.to_str().unwrap();
    let demo = enginetop(&["trace", "demo", "--out", out_arg, "--pool", "chase-lev"]);
    assert!(demo.status.success(), "stderr: {}", text(&demo.stderr));
    assert!(
        text(&demo.stdout).contains("valid Chrome trace"),
        "{}",
        text(&demo.stdout)
    );
    assert!(
        text(&demo.stderr).contains("Profile Statistics"),
        "{}",
        text(&demo.stderr)
    );
    let check = enginetop(&["trace", "validate", out_arg]);
    assert!(check.status.success(), "stderr: {}", text(&check.stderr));
    let _ = std::fs::remove_file(out);
}

#[test]
fn validate_rejects_a_broken_trace_with_its_problems() {
    let broken = temp_file("broken.trace.json");
    std::fs::write(
        &broken,
        r#"{"traceEvents":[{"name":"x","ph":"X","ts":0,"pid":1,"tid":1}]}"#,
    )
    .unwrap();
    let check = enginetop(&["trace", "validate", broken.to_str().unwrap()]);
    assert!(!check.status.success());
    let stderr = text(&check.stderr);
    assert!(stderr.contains("needs a finite `dur`"), "{stderr}");
    assert!(stderr.contains("no `thread_name`"), "{stderr}");
    let _ = std::fs::remove_file(broken);
    let missing = enginetop(&["trace", "validate", "/nonexistent/x.json"]);
    assert!(!missing.status.success());
    assert!(text(&missing.stderr).contains("could not read"));
}

/// A trace whose `otherData` says events were dropped or evicted validates with a warning
/// naming the counts; `--strict` makes it an error.
#[test]
fn validate_warns_about_lost_events_and_strict_fails_on_them() {
    let lossy = temp_file("lossy.trace.json");
    std::fs::write(
        &lossy,
        r#"{"traceEvents":[{"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"w"}},
            {"name":"op","ph":"X","ts":0,"dur":5,"pid":1,"tid":1}],
            "otherData":{"dropped_events":3335,"evicted_events":12}}"#,
    )
    .unwrap();
    let path = lossy.to_str().unwrap();
    let check = enginetop(&["trace", "validate", path]);
    assert!(check.status.success(), "stderr: {}", text(&check.stderr));
    let stderr = text(&check.stderr);
    assert!(stderr.contains("warning:"), "{stderr}");
    assert!(
        stderr.contains("3335 dropped") && stderr.contains("12 evicted"),
        "{stderr}"
    );
    let strict = enginetop(&["trace", "validate", "--strict", path]);
    assert!(!strict.status.success());
    assert!(
        text(&strict.stderr).contains("3335 dropped"),
        "{}",
        text(&strict.stderr)
    );
    let _ = std::fs::remove_file(lossy);
}

/// `--gpus` changes nothing a trace command does: it is refused, not silently ignored.
#[test]
fn trace_commands_refuse_gpus() {
    let validate = enginetop(&["trace", "validate", "--gpus", "none", "x.json"]);
    assert_eq!(
        validate.status.code(),
        Some(2),
        "{}",
        text(&validate.stderr)
    );
    assert!(
        text(&validate.stderr).starts_with("error: unexpected argument '--gpus' found"),
        "{}",
        text(&validate.stderr)
    );
}

#[test]
fn bench_profiler_json_lines_carry_the_reference_keys() {
    let output = enginetop(&[
        "bench",
        "profiler",
        "--quick",
        "--json",
        "--reps",
        "1",
        "--bench",
        "record_event,random_dag",
    ]);
    assert!(output.status.success(), "stderr: {}", text(&output.stderr));
    let lines: Vec<Value> = text(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}")))
        .collect();
    assert_eq!(
        lines.len(),
        7,
        "4 record_event rows, the 2 clock_read rows they bring, random_dag"
    );
    for line in &lines {
        for key in ["bench", "ns_per_event", "ratio"] {
            assert!(line.get(key).is_some(), "{key} missing: {line}");
        }
    }
    assert!(lines[0]["ns_per_event"].as_f64().unwrap() > 0.0);
    assert_eq!(lines[3]["variant"], "engine_mix");
    assert_eq!(lines[6]["bench"], "random_dag");
    assert!(lines[6]["dropped"].as_u64().is_some(), "{}", lines[6]);
}
