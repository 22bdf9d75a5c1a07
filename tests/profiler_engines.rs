//! Chrome traces of real engine runs, one per engine kind, with the profiler attached the
//! way a profiled run attaches it (an `EngineProbe` for op events, `PoolProbe::engine_pools`
//! on the engine's worker pools): a CPU pool resize in the middle of the run, ops that fail
//! (a `push_async` completing with an error, a panicking `push_sync`), and a few hundred ops,
//! each with a name of its own. The trace must pass the validator, hold every op exactly once
//! as a slice with the right `error` argument, and show the resize as an instant.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use enginetop::engine::{Engine, EngineKind, EngineOptions, OpSpec, Var};
use enginetop::profiler::validate_json;
use enginetop::profiler::{EngineProbe, PoolProbe, Profiler, ProfilerOptions};

const OPS: usize = 300;
const VARS: usize = 8;
/// CPU workers at the start, and after the resize halfway through.
const WORKERS: (usize, usize) = (2, 3);

/// How op `index` behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Behaviour {
    /// `push_sync`, reading one shared var and writing the next.
    Sync,
    /// `push_async`, completed successfully inside its body.
    AsyncOk,
    /// `push_async`, completed with an error.
    AsyncError,
    /// `push_sync` whose body panics.
    SyncPanic,
}

impl Behaviour {
    fn of(index: usize) -> Self {
        match index % 10 {
            3 => Behaviour::AsyncError,
            5 => Behaviour::AsyncOk,
            7 => Behaviour::SyncPanic,
            _ => Behaviour::Sync,
        }
    }

    fn fails(self) -> bool {
        matches!(self, Behaviour::AsyncError | Behaviour::SyncPanic)
    }
}

fn op_name(kind: EngineKind, index: usize) -> String {
    format!("pe-{}-{index:04}", kind.as_str())
}

/// Pushes op `index`. Failing ops write a var of their own that nothing reads, so their
/// failure taints no other op and the expected error flags are exactly [`Behaviour::fails`].
fn push(engine: &Engine, vars: &[Var], kind: EngineKind, index: usize) {
    let name = op_name(kind, index);
    let shared = (
        std::slice::from_ref(&vars[index % VARS]),
        std::slice::from_ref(&vars[(index + 1) % VARS]),
    );
    let own = [engine.new_variable()];
    let pushed = match Behaviour::of(index) {
        Behaviour::Sync => engine.push_sync(
            OpSpec::new(name.as_str()).reads(shared.0).writes(shared.1),
            |_| Ok(()),
        ),
        Behaviour::AsyncOk => engine.push_async(
            OpSpec::new(name.as_str()).reads(shared.0).writes(shared.1),
            |_, done| done.done(),
        ),
        Behaviour::AsyncError => engine.push_async(OpSpec::new(name.as_str()).writes(&own), {
            |_, done| done.fail("injected failure")
        }),
        Behaviour::SyncPanic => engine.push_sync(OpSpec::new(name.as_str()).writes(&own), |_| {
            panic!("injected panic")
        }),
    };
    pushed.unwrap_or_else(|err| panic!("pushing {index}: {err}"));
}

/// Runs the ops on a profiled `kind` engine, resizing its CPU workers (if any) halfway; returns the
/// profiler, everything flushed.
fn profiled_run(kind: EngineKind) -> Profiler {
    let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
    let mut options =
        EngineOptions::new(kind, WORKERS.0).observer(Arc::new(EngineProbe::new(&profiler)));
    options.pool_observers = PoolProbe::engine_pools(&profiler);
    let engine = Engine::new(options).unwrap();
    let vars: Vec<Var> = (0..VARS).map(|_| engine.new_variable()).collect();
    for index in 0..OPS {
        if index == OPS / 2 && kind != EngineKind::Naive {
            engine.set_cpu_workers(WORKERS.1).unwrap(); // the naive engine has no workers
        }
        push(&engine, &vars, kind, index);
    }
    // The first failure is reported once; a second wait is clean.
    assert!(engine.wait_for_all().is_err(), "the injected failures");
    engine.wait_for_all().unwrap();
    drop(engine);
    profiler.flush();
    profiler
}

/// Exports, validates and parses `profiler`'s trace.
fn valid_trace(profiler: &Profiler) -> Value {
    let mut json = Vec::new();
    let report = profiler.export_chrome(&mut json).unwrap();
    validate_json(&json).unwrap_or_else(|problems| panic!("{problems}"));
    assert_eq!(
        report.unmatched, 0,
        "op starts or ends without a partner: {report:?}"
    );
    assert_eq!(report.clamped, 0, "slices had to be clamped: {report:?}");
    serde_json::from_slice(&json).unwrap()
}

/// The op slices (`X`, or the `b` of an op that ended on another thread) of this run, by
/// name: how many times each appears, and its `error` argument.
fn op_slices(trace: &Value, kind: EngineKind) -> HashMap<String, (usize, Value)> {
    let prefix = format!("pe-{}-", kind.as_str());
    let mut seen: HashMap<String, (usize, Value)> = HashMap::new();
    for event in trace["traceEvents"].as_array().unwrap() {
        let is_op = event["cat"] == "op" && (event["ph"] == "X" || event["ph"] == "b");
        let name = event["name"].as_str().unwrap_or_default();
        if is_op && name.starts_with(&prefix) {
            let entry = seen
                .entry(name.to_string())
                .or_insert((0, event["args"]["error"].clone()));
            entry.0 += 1;
        }
    }
    seen
}

/// Every op pushed appears exactly once, with its error flag; nothing else does.
fn assert_each_op_once(trace: &Value, kind: EngineKind) {
    let seen = op_slices(trace, kind);
    for index in 0..OPS {
        let name = op_name(kind, index);
        let Some((times, error)) = seen.get(&name) else {
            panic!("{name} is missing from the trace");
        };
        assert_eq!(*times, 1, "{name} appears {times} times");
        let expected = Behaviour::of(index).fails();
        assert_eq!(error, &Value::Bool(expected), "{name}'s error argument");
    }
    assert_eq!(seen.len(), OPS, "ops in the trace that were never pushed");
}

/// The resize instants (`from`, `to`) in the trace.
fn resizes(trace: &Value) -> Vec<(u64, u64)> {
    trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| {
            let name = event["name"].as_str().unwrap_or_default();
            event["ph"] == "i" && name.starts_with("resize ")
        })
        .map(|event| {
            let args = &event["args"];
            (args["from"].as_u64().unwrap(), args["to"].as_u64().unwrap())
        })
        .collect()
}

fn check_engine(kind: EngineKind) -> Value {
    let profiler = profiled_run(kind);
    let trace = valid_trace(&profiler);
    assert_each_op_once(&trace, kind);
    assert_eq!(profiler.snapshot().dropped_events, 0);
    trace
}

#[test]
fn naive_engine_trace_is_valid_with_every_op_once() {
    let trace = check_engine(EngineKind::Naive);
    // The naive engine runs ops on the pushing thread: it has no pool to resize.
    assert!(resizes(&trace).is_empty(), "{:?}", resizes(&trace));
}

#[test]
fn pooled_engine_trace_is_valid_with_every_op_once_and_the_resize() {
    let trace = check_engine(EngineKind::Pooled);
    let expected = (WORKERS.0 as u64, WORKERS.1 as u64);
    assert!(resizes(&trace).contains(&expected), "{:?}", resizes(&trace));
}

#[test]
fn per_device_engine_trace_is_valid_with_every_op_once_and_the_resize() {
    let trace = check_engine(EngineKind::PerDevice);
    let expected = (WORKERS.0 as u64, WORKERS.1 as u64);
    assert!(resizes(&trace).contains(&expected), "{:?}", resizes(&trace));
}
