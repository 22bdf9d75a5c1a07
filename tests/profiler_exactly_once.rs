//! A synthetic op stream recorded from several threads (errors, priorities, properties, ops
//! that end on another thread than they started on) comes out in the Chrome export and the
//! summary with every op exactly once, and the live statistics match the known answers.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use enginetop::profiler::validate::validate_json;
use enginetop::profiler::{DeviceId, NameId, OpInfo, Profiler, ProfilerOptions, SortKey, Summary};

const THREADS: u64 = 4;
const OPS_PER_THREAD: u64 = 2_500;
const NAMES: [&str; 3] = ["once-gemm", "once-conv", "once-copy"];

fn op(thread: u64, k: u64) -> OpInfo {
    let id = thread * OPS_PER_THREAD + k + 1;
    OpInfo::new(id)
        .priority((k % 3) as i32 - 1)
        .property((k % 8) as u8)
}

fn name_of(k: u64) -> &'static str {
    NAMES[(k % 3) as usize]
}

fn failed(k: u64) -> bool {
    k % 17 == 0
}

/// Ops (with their index) started on one thread, for another to end.
type Handoff = std::sync::Mutex<Vec<(u64, OpInfo)>>;

/// Each thread queues, starts and ends its ops; every 10th op is ended by the next thread
/// instead (completed asynchronously).
fn record(profiler: &Profiler) {
    let device = DeviceId::register("once-cpu");
    let handoff: Arc<Vec<Handoff>> = Arc::new((0..THREADS).map(|_| Handoff::default()).collect());
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let (profiler, handoff) = (profiler.clone(), handoff.clone());
            scope.spawn(move || {
                for k in 0..OPS_PER_THREAD {
                    let (info, name) = (op(thread, k), NameId::intern(name_of(k)));
                    profiler.op_queued(device, name, info);
                    profiler.op_start(device, name, info);
                    if k % 10 == 9 {
                        handoff[((thread + 1) % THREADS) as usize]
                            .lock()
                            .unwrap()
                            .push((k, info));
                    } else {
                        profiler.op_end(device, name, info, failed(k));
                    }
                }
            });
        }
    });
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let (profiler, handoff) = (profiler.clone(), handoff.clone());
            scope.spawn(move || {
                for (k, info) in handoff[thread as usize].lock().unwrap().drain(..) {
                    profiler.op_end(device, NameId::intern(name_of(k)), info, failed(k));
                }
            });
        }
    });
}

fn expected_counts() -> HashMap<&'static str, (u64, u64)> {
    let mut counts = HashMap::new();
    for _thread in 0..THREADS {
        for k in 0..OPS_PER_THREAD {
            let entry = counts.entry(name_of(k)).or_insert((0, 0));
            entry.0 += 1;
            entry.1 += u64::from(failed(k));
        }
    }
    counts
}

#[test]
fn every_op_appears_exactly_once_in_export_and_summary() {
    let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
    record(&profiler);
    let mut json = Vec::new();
    let report = profiler.export_chrome(&mut json).unwrap();
    validate_json(&json).unwrap_or_else(|problems| panic!("{problems}"));
    let total = THREADS * OPS_PER_THREAD;
    assert_eq!(report.ops as u64, total);
    assert_eq!(report.unmatched, 0);

    let trace: Value = serde_json::from_slice(&json).unwrap();
    let mut seen: HashMap<u64, (usize, &Value)> = HashMap::new();
    for event in trace["traceEvents"].as_array().unwrap() {
        if event["cat"] == "op" && (event["ph"] == "X" || event["ph"] == "b") {
            let id = event["args"]["op_id"].as_u64().unwrap();
            let entry = seen.entry(id).or_insert((0, event));
            entry.0 += 1;
        }
    }
    assert_eq!(seen.len() as u64, total);
    for thread in 0..THREADS {
        for k in 0..OPS_PER_THREAD {
            let info = op(thread, k);
            let (times, event) = seen[&info.id];
            assert_eq!(times, 1, "op {} appears {times} times", info.id);
            assert_eq!(event["name"], name_of(k));
            assert_eq!(event["args"]["error"], failed(k));
            assert_eq!(event["args"]["priority"], info.priority);
            let expected_phase = if k % 10 == 9 { "b" } else { "X" };
            assert_eq!(event["ph"], expected_phase, "op {}", info.id);
        }
    }

    let summary = profiler.summary();
    for (name, (count, errors)) in expected_counts() {
        let row = summary
            .operators
            .iter()
            .find(|row| row.name == name)
            .unwrap();
        assert_eq!((row.count, row.errors), (count, errors), "{name}");
    }
    let by_count = Summary::from_snapshot(&profiler.snapshot()).sorted_by(SortKey::Count);
    assert_eq!(
        by_count.to_json()["operators"].as_array().unwrap().len(),
        NAMES.len()
    );
    let device = profiler.snapshot();
    let device = device.device("once-cpu").unwrap();
    assert_eq!((device.ops, device.queued), (total, total));
}
