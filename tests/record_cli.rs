//! `--record FILE`, `enginetop export` and `enginetop compare`, end to end through the binary:
//! a recording's Chrome export equals the same run's `--trace` (ids aside), is far smaller,
//! and survives being cut off; a corrupt one is refused clearly.
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

mod common;
use common::cli::{self, command, text};

fn scratch(name: &str) -> PathBuf {
    cli::scratch("record-cli", name)
}

fn enginetop(args: &[&str], dir: &Path) -> Output {
    cli::run_in(args, dir)
}

fn succeeded(output: &Output) -> String {
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    stderr
}

/// A small resnet-like run of `length` (`--iterations N` or `--duration S`) with both
/// `--trace t.json` and `--record r.etrec` in `dir`.
fn record_run(dir: &Path, length: [&str; 2]) {
    let run = [
        "--workload",
        "resnet-like",
        "--set",
        "image=32",
        "--set",
        "width=4",
        "--set",
        "classes=10",
        "--set",
        "blocks1=2",
        "--set",
        "blocks2=1",
        "--set",
        "blocks3=1",
        "--set",
        "blocks4=1",
        length[0],
        length[1],
        "--headless",
        "--gemm-peak",
        "100",
        "--trace",
        "t.json",
        "--record",
        "r.etrec",
    ];
    let stderr = succeeded(&enginetop(&run, dir));
    assert!(stderr.contains("recording: r.etrec ("), "{stderr}");
}

/// A trace's events with ids aside: each pid and tid replaced by its process's and thread's
/// name, flow and async ids and sort indexes dropped; sorted, as text.
fn normalized(trace: &Value) -> Vec<String> {
    let events = trace["traceEvents"].as_array().unwrap();
    let mut processes = HashMap::new();
    let mut threads = HashMap::new();
    for event in events.iter().filter(|event| event["ph"] == "M") {
        let key = (
            event["pid"].as_u64().unwrap(),
            event["tid"].as_u64().unwrap(),
        );
        match event["name"].as_str().unwrap() {
            "process_name" => processes.insert(key.0, event["args"]["name"].clone()),
            "thread_name" => threads.insert(key, event["args"]["name"].clone()),
            _ => None,
        };
    }
    let mut out: Vec<String> = events
        .iter()
        .map(|event| {
            let mut event = event.clone();
            let key = (
                event["pid"].as_u64().unwrap(),
                event["tid"].as_u64().unwrap(),
            );
            event["pid"] = processes[&key.0].clone();
            event["tid"] = threads.get(&key).cloned().unwrap_or(Value::Null);
            let object = event.as_object_mut().unwrap();
            object.remove("id");
            if object["name"].as_str().unwrap().ends_with("sort_index") {
                object.remove("args");
            }
            event.to_string()
        })
        .collect();
    out.sort();
    out
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn a_recordings_chrome_export_is_the_runs_trace_and_far_smaller() {
    let dir = scratch("export");
    record_run(&dir, ["--iterations", "3"]);
    let stderr = succeeded(&enginetop(
        &["export", "r.etrec", "--to", "chrome", "--out", "e.json"],
        &dir,
    ));
    assert!(stderr.contains("trace: e.json ("), "{stderr}");
    let (live, exported) = (
        read_json(&dir.join("t.json")),
        read_json(&dir.join("e.json")),
    );
    let (live_events, exported_events) = (normalized(&live), normalized(&exported));
    assert!(live_events.len() > 1000, "{}", live_events.len());
    assert_eq!(live_events.len(), exported_events.len());
    for (live, exported) in live_events.iter().zip(&exported_events) {
        assert_eq!(live, exported);
    }
    for key in [
        "dropped_events",
        "evicted_events",
        "device_labels",
        "producer",
    ] {
        assert_eq!(live["otherData"][key], exported["otherData"][key], "{key}");
    }
    let size = |name: &str| std::fs::metadata(dir.join(name)).unwrap().len();
    let (json, recording) = (size("t.json"), size("r.etrec"));
    assert!(
        json >= 5 * recording,
        "trace {json} bytes, recording {recording}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_run_compared_with_itself_shows_no_change_in_a_table_or_json() {
    let dir = scratch("compare");
    record_run(&dir, ["--iterations", "3"]);
    let output = enginetop(
        &["compare", "r.etrec", "r.etrec", "--summary", "json"],
        &dir,
    );
    succeeded(&output);
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["step_time_s"]["delta"], 0.0);
    let ops = json["ops"].as_array().unwrap();
    assert!(ops.len() > 10, "{json}");
    for row in ops.iter().chain(json["workers"].as_array().unwrap()) {
        for figure in ["count", "total_ms", "mean_us", "busy_s"] {
            if !row[figure].is_null() {
                assert_eq!(row[figure]["delta"], 0.0, "{row}");
            }
        }
    }
    assert!(json["config"]
        .as_array()
        .unwrap()
        .iter()
        .all(|row| row["changed"] == false));
    // The recording against the same run's Chrome trace: the same ops, the same times.
    let output = enginetop(&["compare", "r.etrec", "t.json"], &dir);
    let table = text(&output.stdout);
    succeeded(&output);
    assert!(
        table.contains("ops (largest change in total time first):"),
        "{table}"
    );
    let json = enginetop(&["compare", "r.etrec", "t.json", "--summary", "json"], &dir);
    let json: Value = serde_json::from_slice(&json.stdout).unwrap();
    for row in json["ops"].as_array().unwrap() {
        assert_eq!(row["count"]["delta"], 0.0, "{row}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_cut_off_recording_exports_its_prefix_and_a_corrupt_one_is_refused() {
    let dir = scratch("damaged");
    // A second's run: chunks are written every 200 ms, so the cut leaves whole ones.
    record_run(&dir, ["--duration", "1.2"]);
    let bytes = std::fs::read(dir.join("r.etrec")).unwrap();
    std::fs::write(dir.join("cut.etrec"), &bytes[..bytes.len() * 2 / 3]).unwrap();
    let stderr = succeeded(&enginetop(&["export", "cut.etrec", "--to", "chrome"], &dir));
    assert!(
        stderr.contains("warning: cut.etrec is cut off") && stderr.contains("were left out"),
        "{stderr}"
    );
    let exported = read_json(&dir.join("cut.trace.json"));
    assert!(exported["traceEvents"].as_array().unwrap().len() > 100);
    let compared = enginetop(&["compare", "r.etrec", "cut.etrec"], &dir);
    succeeded(&compared);
    let table = text(&compared.stdout);
    assert!(
        table.contains("B: cut.etrec (recording)\n   cut off ("),
        "{table}"
    );

    let mut corrupt = bytes.clone();
    let middle = corrupt.len() / 2;
    corrupt[middle] ^= 0xff;
    std::fs::write(dir.join("bad.etrec"), &corrupt).unwrap();
    for args in [
        &["export", "bad.etrec", "--to", "chrome"][..],
        &["compare", "bad.etrec", "r.etrec"],
    ] {
        let output = enginetop(args, &dir);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.starts_with("error: `bad.etrec` is corrupt: frame "),
            "{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let output = enginetop(&["export", "t.json", "--to", "chrome"], &dir);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("`t.json` is not an enginetop recording"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_run_killed_while_recording_leaves_a_readable_prefix() {
    let dir = scratch("killed");
    let mut child = command()
        .args([
            "--workload",
            "chain",
            "--set",
            "length=200",
            "--duration",
            "60",
            "--headless",
        ])
        .args(["--gemm-peak", "100", "--record", "k.etrec"])
        .current_dir(&dir)
        .env("XDG_CACHE_HOME", &dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the enginetop binary starts");
    // Killed once a few chunks are on disk (each chunk is at least hundreds of bytes).
    let deadline = std::time::Instant::now() + common::DEADLINE;
    let path = dir.join("k.etrec");
    while std::fs::metadata(&path).map_or(0, |meta| meta.len()) < 20_000 {
        assert!(
            std::time::Instant::now() < deadline,
            "the recording never grew"
        );
        assert!(child.try_wait().unwrap().is_none(), "the run ended early");
        std::thread::sleep(std::time::Duration::from_millis(5)); // polling a file: no event to wait on
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let stderr = succeeded(&enginetop(
        &["export", "k.etrec", "--to", "chrome", "--out", "k.json"],
        &dir,
    ));
    assert!(stderr.contains("warning: k.etrec is cut off"), "{stderr}");
    let exported = read_json(&dir.join("k.json"));
    assert!(exported["traceEvents"].as_array().unwrap().len() > 100);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A workload parameter set on the command line is part of the recorded configuration, so
/// comparing two runs that differ in it names it as the change.
#[test]
fn a_changed_workload_parameter_is_named_in_the_comparison() {
    let dir = scratch("params");
    for (file, slots) in [("a.etrec", "slots=2"), ("b.etrec", "slots=4")] {
        let run = [
            "--workload",
            "pipeline",
            "--set",
            slots,
            "--set",
            "batches=4",
            "--iterations",
            "1",
            "--headless",
            "--gemm-peak",
            "100",
            "--record",
            file,
        ];
        succeeded(&enginetop(&run, &dir));
    }
    let output = enginetop(
        &["compare", "a.etrec", "b.etrec", "--summary", "json"],
        &dir,
    );
    succeeded(&output);
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    let changed: Vec<&Value> = json["config"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row["changed"] == true)
        .collect();
    assert_eq!(changed.len(), 1, "{json}");
    assert_eq!(changed[0]["key"], "param slots");
    assert_eq!(
        (&changed[0]["a"], &changed[0]["b"]),
        (&"2".into(), &"4".into())
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
