//! A synthetic op stream recorded from several threads (errors, priorities, properties, ops
//! that end on another thread than they started on) comes out in the Chrome export and the
//! summary with every op exactly once, and the live statistics match the known answers.
//! Ops pushed to real engines through the engine probe appear exactly once too, each with one
//! queued -> start flow.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use enginetop::engine::{Engine, EngineKind, EngineObserver, EngineOptions, FnProperty, OpSpec};
use enginetop::profiler::validate_json;
use enginetop::profiler::{
    DeviceId, EngineProbe, OpInfo, OpName, Profiler, ProfilerOptions, SortKey, Summary,
};

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
                    let (info, name) = (op(thread, k), OpName::new(name_of(k)));
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
                    profiler.op_end(device, OpName::new(name_of(k)), info, failed(k));
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
    // Per name, phase, error flag and priority: how many op slices the trace has, against
    // what was recorded (slices carry no per-call id; `queued` instants do).
    type Key = (String, String, bool, i64);
    let mut seen: HashMap<Key, u64> = HashMap::new();
    let mut queued: HashMap<u64, usize> = HashMap::new();
    for event in trace["traceEvents"].as_array().unwrap() {
        if event["cat"] == "op" && (event["ph"] == "X" || event["ph"] == "b") {
            let key = (
                event["name"].as_str().unwrap().to_string(),
                event["ph"].as_str().unwrap().to_string(),
                event["args"]["error"].as_bool().unwrap(),
                event["args"]["priority"].as_i64().unwrap(),
            );
            *seen.entry(key).or_default() += 1;
        }
        if event["ph"] == "i" && event["name"] == "queued" {
            *queued
                .entry(event["args"]["op_id"].as_u64().unwrap())
                .or_default() += 1;
        }
    }
    let mut expected: HashMap<Key, u64> = HashMap::new();
    for thread in 0..THREADS {
        for k in 0..OPS_PER_THREAD {
            let info = op(thread, k);
            let phase = if k % 10 == 9 { "b" } else { "X" };
            let key = (
                name_of(k).to_string(),
                phase.to_string(),
                failed(k),
                i64::from(info.priority),
            );
            *expected.entry(key).or_default() += 1;
            assert_eq!(queued.get(&info.id), Some(&1), "op {} queued", info.id);
        }
    }
    assert_eq!(seen, expected);
    assert_eq!(queued.len() as u64, total);

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

const ENGINE_OPS: usize = 600;

/// Pushes `ENGINE_OPS` synchronous ops on a small random-ish DAG (two names, priorities and
/// properties varying, every 50th op failing) to an engine of `kind` observed by `probe`.
fn push_engine_ops(kind: EngineKind, probe: Arc<dyn EngineObserver>) {
    let engine = Engine::new(EngineOptions::new(kind, 2).observer(probe)).unwrap();
    let vars: Vec<_> = (0..16).map(|_| engine.new_variable()).collect();
    for k in 0..ENGINE_OPS {
        let name = if k % 2 == 0 {
            "probe-even"
        } else {
            "probe-odd"
        };
        let prop = match k % 5 {
            0 => FnProperty::CpuPrioritized,
            1 => FnProperty::NoSkip,
            _ => FnProperty::Normal,
        };
        let spec = OpSpec::new(name)
            .reads(std::slice::from_ref(&vars[(k * 7 + 3) % 16]))
            .writes(std::slice::from_ref(&vars[k % 16]))
            .prop(prop)
            .priority((k % 3) as i32);
        engine
            .push_sync(spec, move |_| match k % 50 {
                49 => Err("planned failure".into()),
                _ => Ok(()),
            })
            .unwrap();
    }
    let _ = engine.wait_for_all(); // reports the planned failures
}

/// Every op pushed to a profiled engine, on every engine kind, comes out of the export
/// exactly once, with its `queued` instant, and at most one queued -> start flow (all ops
/// here start and end on one thread): an op queued by this test's thread, which has no
/// slice for a flow to start from, gets none.
#[test]
fn every_engine_op_appears_once_with_one_queued_to_start_flow() {
    for kind in EngineKind::ALL {
        let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
        push_engine_ops(kind, Arc::new(EngineProbe::new(&profiler)));
        let mut json = Vec::new();
        let report = profiler.export_chrome(&mut json).unwrap();
        validate_json(&json).unwrap_or_else(|problems| panic!("{kind}: {problems}"));
        assert_eq!((report.ops, report.unmatched), (ENGINE_OPS, 0), "{kind}");
        assert!(report.flows <= ENGINE_OPS, "{kind}: {} flows", report.flows);
        let trace: Value = serde_json::from_slice(&json).unwrap();
        let mut slices = 0;
        let mut markers: HashMap<u64, usize> = HashMap::new();
        let mut failed = 0;
        for event in trace["traceEvents"].as_array().unwrap() {
            let id = event["args"]["op_id"].as_u64();
            match (event["cat"].as_str(), event["ph"].as_str(), id) {
                (Some("op"), Some("X"), None) => {
                    slices += 1;
                    failed += usize::from(event["args"]["error"] == true);
                    let priority = event["args"]["priority"].as_i64().unwrap();
                    assert!((0..3).contains(&priority), "{kind}: {event}");
                }
                (Some("queue"), Some("i"), Some(id)) => *markers.entry(id).or_default() += 1,
                _ => {}
            }
        }
        assert_eq!(slices, ENGINE_OPS, "{kind}: op slices");
        assert_eq!(markers.len(), ENGINE_OPS, "{kind}: queued instants");
        assert!(
            markers.values().all(|&n| n == 1),
            "{kind}: an op queued twice"
        );
        assert!(failed >= ENGINE_OPS / 50, "{kind}: {failed} failed ops");
        let summary = profiler.summary();
        let count = |name: &str| {
            let row = summary.operators.iter().find(|row| row.name == name);
            row.map_or(0, |row| row.count)
        };
        let half = (ENGINE_OPS / 2) as u64;
        assert_eq!(
            (count("probe-even"), count("probe-odd")),
            (half, half),
            "{kind}"
        );
    }
}
