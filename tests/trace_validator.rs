//! Chrome traces of real pool runs (every pool kind, with steals, spins, parks, resizes, op
//! errors and panicking tasks in them) pass every check of the validator, and every op run
//! appears in the trace and the summary exactly once.
//!
//! When the engine lands, its runs go through the same `assert_valid_trace` and
//! `assert_each_op_once` helpers (one more `#[test]` per engine kind).

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::Value;

use common::{await_at_least, within_deadline};
use enginetop::pool::{Pool, PoolKind, PoolOptions};
use enginetop::profiler::{run_pool_demo, DemoOptions, DemoReport};
use enginetop::profiler::{validate_json, TraceSummary};
use enginetop::profiler::{DeviceId, Profiler, ProfilerOptions};

/// Exports `profiler`'s window, validates it, and returns the parsed trace.
fn assert_valid_trace(profiler: &Profiler) -> (Value, TraceSummary) {
    let mut json = Vec::new();
    let report = profiler.export_chrome(&mut json).expect("export");
    assert_eq!(report.clamped, 0, "slices had to be clamped: {report:?}");
    let summary = validate_json(&json).unwrap_or_else(|problems| panic!("{problems}"));
    (serde_json::from_slice(&json).expect("valid JSON"), summary)
}

fn events(trace: &Value) -> &Vec<Value> {
    trace["traceEvents"].as_array().expect("traceEvents")
}

fn count(trace: &Value, predicate: impl Fn(&Value) -> bool) -> usize {
    events(trace)
        .iter()
        .filter(|event| predicate(event))
        .count()
}

/// Every op id from 1 to `ops` is queued in the trace exactly once (its `queued` instant),
/// `ops` op slices (X or b) are there, and the summary counts `ops` ops with `failed` errors.
fn assert_each_op_once(profiler: &Profiler, trace: &Value, ops: u64, failed: u64) {
    let mut seen: HashMap<u64, usize> = HashMap::new();
    for event in events(trace) {
        if event["ph"] == "i" && event["name"] == "queued" {
            *seen
                .entry(event["args"]["op_id"].as_u64().unwrap())
                .or_default() += 1;
        }
    }
    let slices = count(trace, |e| {
        e["cat"] == "op" && (e["ph"] == "X" || e["ph"] == "b") && e["name"] == "demo_op"
    });
    assert_eq!(slices as u64, ops, "op slices");
    let wrong: Vec<u64> = (1..=ops)
        .filter(|id| seen.get(id) != Some(&1))
        .take(5)
        .collect();
    assert!(
        wrong.is_empty(),
        "ops not exactly once in the trace, e.g. {wrong:?}"
    );
    assert_eq!(seen.len() as u64, ops, "unexpected op ids in the trace");
    let summary = profiler.summary();
    let row = summary
        .operators
        .iter()
        .find(|row| row.name == "demo_op")
        .unwrap();
    assert_eq!((row.count, row.errors), (ops, failed));
}

fn demo(kind: PoolKind) -> (Profiler, DemoReport) {
    let profiler = Profiler::new(ProfilerOptions::default()).expect("profiler starts");
    let options = DemoOptions {
        kind,
        ..DemoOptions::default()
    };
    let report = run_pool_demo(&profiler, &options).expect("demo runs");
    (profiler, report)
}

fn check_demo_trace(kind: PoolKind) {
    let (profiler, report) = demo(kind);
    assert_eq!(profiler.snapshot().dropped_events, 0);
    let (trace, summary) = assert_valid_trace(&profiler);
    assert_each_op_once(&profiler, &trace, report.ops, report.failed_ops);
    assert!(report.failed_ops > 0);
    let failed_in_trace = count(&trace, |e| e["cat"] == "op" && e["args"]["error"] == true);
    assert_eq!(failed_in_trace as u64, report.failed_ops);
    // The pool's start and the demo's resizes (up, down, up).
    assert_eq!(report.resizes, 3);
    assert_eq!(
        count(&trace, |e| e["name"]
            .as_str()
            .unwrap_or("")
            .starts_with("resize ")
            && e["s"] == "p"),
        4
    );
    assert!(count(&trace, |e| e["name"] == "parked") > 0, "no parks");
    // Every op ran in a task; the tasks are counted, and the trace holds the recorded ones.
    let sampling = profiler.snapshot().task_sampling;
    assert!(sampling.tasks >= report.ops, "{sampling:?}");
    assert_eq!(
        count(&trace, |e| e["name"] == "task") as u64,
        sampling.recorded
    );
    assert!(count(&trace, |e| e["ph"] == "C" && e["args"]["depth"].is_number()) > 0);
    assert!(summary.flows > 0, "no queued -> start flows");
    let device = format!("{kind}-demo");
    let worker_names = count(&trace, |e| {
        e["name"] == "thread_name" && e["args"]["name"].as_str().unwrap().starts_with(&device)
    });
    assert!(worker_names >= 2, "workers are named after the pool");
    assert_eq!(
        count(&trace, |e| e["name"] == "process_name"
            && e["args"]["name"] == device.as_str()),
        1
    );
    assert!(trace["otherData"]["start_time"].is_string());
    if kind != PoolKind::Simple {
        assert!(
            count(&trace, |e| e["name"] == "steal" && e["s"] == "t") > 0,
            "no steals"
        );
    }
}

#[test]
fn eigen_pool_trace_is_valid() {
    within_deadline("eigen trace", || check_demo_trace(PoolKind::Eigen));
}

#[test]
fn chase_lev_pool_trace_is_valid() {
    within_deadline("chase-lev trace", || check_demo_trace(PoolKind::ChaseLev));
}

#[test]
fn simple_pool_trace_is_valid() {
    within_deadline("simple trace", || check_demo_trace(PoolKind::Simple));
}

/// Panicking tasks show as failed task slices and in the device's panic count.
#[test]
fn panicking_tasks_are_marked_in_the_trace() {
    within_deadline("panics", || {
        let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
        let device = DeviceId::register("trace-panics");
        let options = PoolOptions::new(PoolKind::Eigen, 2, "trace-panics");
        let pool = Pool::new(profiler.instrument_pool(options, device)).unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        for k in 0..20 {
            let ran = ran.clone();
            pool.spawn(move || {
                ran.fetch_add(1, Ordering::SeqCst);
                assert!(k % 5 != 0, "trace test: planned panic {k}");
            });
        }
        await_at_least(&ran, 20, "tasks");
        drop(pool);
        let (trace, _) = assert_valid_trace(&profiler);
        let panicked = count(&trace, |e| {
            e["name"] == "task" && e["args"]["panicked"] == true
        });
        assert_eq!(panicked, 4);
        assert_eq!(
            profiler
                .snapshot()
                .device("trace-panics")
                .unwrap()
                .task_panics,
            4
        );
    });
}

/// A window too small for the whole run still exports a valid trace, with no op twice.
#[test]
fn a_cut_window_is_still_valid() {
    within_deadline("cut window", || {
        let mut options = ProfilerOptions::default();
        options.window.max_bytes = 2_000 * 32;
        let profiler = Profiler::new(options).unwrap();
        let report = run_pool_demo(&profiler, &DemoOptions::default()).unwrap();
        let (trace, _) = assert_valid_trace(&profiler);
        let mut seen: HashMap<u64, usize> = HashMap::new();
        for event in events(&trace) {
            if event["ph"] == "i" && event["name"] == "queued" {
                *seen
                    .entry(event["args"]["op_id"].as_u64().unwrap())
                    .or_default() += 1;
            }
        }
        assert!(seen.values().all(|&n| n == 1));
        let slices = count(&trace, |e| e["cat"] == "op" && e["ph"] == "X");
        assert!(
            (slices as u64) < report.ops,
            "the window should have cut some ops"
        );
        // The summary still counts every op: it comes from the live statistics.
        assert_eq!(profiler.summary().operators[0].count, report.ops);
    });
}
