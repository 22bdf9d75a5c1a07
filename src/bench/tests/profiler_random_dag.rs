//! The engine benchmark's random_dag, profiled at the default settings the way a profiled
//! run is wired (an `EngineProbe` for op events, `PoolProbe::engine_pools` on the engine's
//! worker pools): every op's three events (queued, started, finished) reach the statistics
//! or are counted as dropped; none is lost silently or counted twice.
//!
//! The benchmark's size: 100,000 ops, whose starts and ends alone put at least 100,000 events
//! in one of the two workers' rings, more than a default ring holds (65,536), so the rings
//! wrap while the run goes on. Whether the collector keeps up depends on the machine's load,
//! so the test asserts the accounting, which holds either way, and exact counts when nothing
//! was dropped; the drop figure itself is reported by `enginetop bench profiler`.

use crate::sync::Arc;
use crate::sync::AtomicU64;

use crate::bench::engine::{run_once, Shape};
use crate::engine::{Engine, EngineKind, EngineOptions};
use crate::profiler::{EngineProbe, PoolProbe, Profiler, ProfilerOptions};

const SCALE: f64 = 1.0;

#[test]
fn random_dag_profiled_at_the_defaults_drops_nothing() {
    let workload = Shape::RandomDag.workload(SCALE);
    let ops = workload.ops.len() as u64;
    assert!(ops >= 100_000, "{ops} ops");
    let values: &'static [AtomicU64] =
        Box::leak((0..workload.vars).map(|_| AtomicU64::new(0)).collect());
    let profiler = Profiler::new(ProfilerOptions::default()).expect("a profiler");
    let mut options = EngineOptions::new(EngineKind::PerDevice, 2)
        .observer(Arc::new(EngineProbe::new(&profiler)));
    options.pool_observers = PoolProbe::engine_pools(&profiler);
    let engine = Engine::new(options).expect("an engine");
    let (_, digest) = run_once(&engine, &workload, values).expect("random_dag runs");
    assert_eq!(digest, workload.sequential_digest());
    drop(engine);
    profiler.flush();
    let snapshot = profiler.snapshot();
    let dropped = snapshot.dropped_events;
    let (queued, finished): (u64, u64) = snapshot
        .devices
        .iter()
        .fold((0, 0), |(queued, ops), device| {
            (queued + device.queued, ops + device.ops)
        });
    let timed = snapshot.op("bench-op").map_or(0, |op| op.count);
    assert!(
        queued <= ops && finished <= ops && timed <= ops,
        "no op counted twice: {queued} queued, {finished} finished, {timed} timed of {ops}"
    );
    // Each missing queued or finished count is one dropped event; a start left without its
    // end (or an end without its start) is at least one.
    assert!(
        (ops - queued) + (ops - finished) <= dropped,
        "{queued} queued and {finished} finished of {ops} ops, but only {dropped} dropped"
    );
    assert!(
        ops - timed <= dropped,
        "{timed} of {ops} ops timed, but only {dropped} dropped"
    );
}
