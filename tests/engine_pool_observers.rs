//! The engine installs the observers a `pool_observers` factory makes on every worker pool it
//! starts, so the profiler (and the dashboard) see the engine's workers.

use std::sync::{Arc, Mutex};

use enginetop::device::discover::GpuSelection;
use enginetop::device::identity::{Device, PoolId, PoolRole};
use enginetop::engine::{Context, Engine, EngineKind, EngineOptions, FnProperty, OpSpec};
use enginetop::pool::{PoolEvent, PoolObserver};

/// One observed event: its pool, worker and what happened.
type Observed = (PoolId, Option<usize>, PoolEvent);

/// Records every event of every pool it observes, and the name of each thread a task
/// started on.
#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<Observed>>,
    task_threads: Mutex<Vec<(PoolId, usize, String)>>,
}

struct Named {
    pool: PoolId,
    recorder: Arc<Recorder>,
}

impl PoolObserver for Named {
    fn on_event(&self, worker: Option<usize>, event: PoolEvent) {
        if let (Some(worker), PoolEvent::TaskStart) = (worker, event) {
            let thread = std::thread::current().name().unwrap_or("").to_string();
            let mut threads = self.recorder.task_threads.lock().unwrap();
            threads.push((self.pool, worker, thread));
        }
        let mut events = self.recorder.events.lock().unwrap();
        events.push((self.pool, worker, event));
    }
}

fn engine_with_recorder(kind: EngineKind) -> (Engine, Arc<Recorder>, Arc<Mutex<Vec<PoolId>>>) {
    with_recorder(EngineOptions::new(kind, 2))
}

fn with_recorder(options: EngineOptions) -> (Engine, Arc<Recorder>, Arc<Mutex<Vec<PoolId>>>) {
    let recorder = Arc::new(Recorder::default());
    let asked = Arc::new(Mutex::new(Vec::new()));
    let (for_factory, asked_log) = (recorder.clone(), asked.clone());
    let options = options.pool_observers(Arc::new(move |pool: PoolId| {
        asked_log.lock().unwrap().push(pool);
        Some(Arc::new(Named {
            pool,
            recorder: for_factory.clone(),
        }) as Arc<dyn PoolObserver>)
    }));
    (Engine::new(options).unwrap(), recorder, asked)
}

fn count(recorder: &Recorder, pool: PoolId, wanted: fn(&PoolEvent) -> bool) -> usize {
    let events = recorder.events.lock().unwrap();
    events
        .iter()
        .filter(|(id, worker, event)| *id == pool && worker.is_some() && wanted(event))
        .count()
}

fn task_starts(recorder: &Recorder, pool: PoolId) -> usize {
    count(recorder, pool, |event| *event == PoolEvent::TaskStart)
}

/// Task starts on `pool`'s workers, checking each start has its end. A CPU worker pool runs
/// the engine's drainer tasks (`ready.rs`), each of which may run several ops, so it sees
/// between one task and one per op.
fn drainer_tasks(recorder: &Recorder, pool: PoolId, ops: usize) -> usize {
    let starts = task_starts(recorder, pool);
    let ends = count(recorder, pool, |event| {
        matches!(event, PoolEvent::TaskEnd { panicked: false })
    });
    assert_eq!(starts, ends, "{pool}: every task that started ended");
    assert!(
        (1..=ops).contains(&starts),
        "{pool}: {starts} tasks for {ops} ops"
    );
    starts
}

/// Every task of `pool` started on a thread named as [`PoolId::thread_name`] names its
/// worker: the names the dashboard and the fake make from the pool are the engine's.
fn threads_named_by_their_pool(recorder: &Recorder, pool: PoolId) {
    let threads = recorder.task_threads.lock().unwrap();
    let ran: Vec<&(PoolId, usize, String)> = threads.iter().filter(|t| t.0 == pool).collect();
    assert!(!ran.is_empty(), "{pool}: no task started");
    for (_, worker, thread) in ran {
        assert_eq!(*thread, pool.thread_name(*worker as u32), "{pool}");
    }
}

#[test]
fn per_device_pools_and_the_priority_pool_report_to_their_observers() {
    let (engine, recorder, asked) = engine_with_recorder(EngineKind::PerDevice);
    let vars = [engine.new_variable()];
    for i in 0..20 {
        let prop = if i % 2 == 0 {
            FnProperty::Normal
        } else {
            FnProperty::CpuPrioritized
        };
        engine
            .push_sync(
                OpSpec::new("observed")
                    .writes(&vars)
                    .ctx(Context::cpu(0))
                    .prop(prop),
                |_| Ok(()),
            )
            .unwrap();
    }
    engine.wait_for_all().unwrap();
    drop(engine); // joins the workers, so every event is in
    let asked = asked.lock().unwrap().clone();
    let cpu0 = PoolId::new(Device::Cpu(0), PoolRole::CpuWorker);
    assert!(asked.contains(&cpu0), "asked for {asked:?}");
    assert!(asked.contains(&PoolId::CPU_PRIORITY), "asked for {asked:?}");
    drainer_tasks(&recorder, cpu0, 10);
    threads_named_by_their_pool(&recorder, cpu0);
    threads_named_by_their_pool(&recorder, PoolId::CPU_PRIORITY);
    // One task per prioritized op, all on the priority pool.
    assert_eq!(task_starts(&recorder, PoolId::CPU_PRIORITY), 10);
}

#[test]
fn pooled_engine_pools_report_to_their_observers() {
    let (engine, recorder, asked) = engine_with_recorder(EngineKind::Pooled);
    let vars = [engine.new_variable()];
    for _ in 0..8 {
        engine
            .push_sync(OpSpec::new("observed").writes(&vars), |_| Ok(()))
            .unwrap();
    }
    engine.wait_for_all().unwrap();
    drop(engine);
    let (shared, io) = (PoolId::SHARED_WORKERS, PoolId::IO);
    assert_eq!(shared.role, PoolRole::SharedWorker);
    assert_eq!(*asked.lock().unwrap(), vec![shared, io]);
    drainer_tasks(&recorder, shared, 8);
    threads_named_by_their_pool(&recorder, shared);
}

#[test]
fn gpu_worker_pools_report_to_their_observers() {
    let options = EngineOptions::new(EngineKind::PerDevice, 2).gpus(GpuSelection::Sim(1));
    let (engine, recorder, asked) = with_recorder(options);
    let vars = [engine.new_variable()];
    for _ in 0..6 {
        let spec = OpSpec::new("observed").writes(&vars).ctx(Context::gpu(0));
        engine.push_sync(spec, |_| Ok(())).unwrap();
    }
    engine.wait_for_all().unwrap();
    drop(engine);
    let asked = asked.lock().unwrap().clone();
    let gpu = |role| PoolId::new(Device::Gpu(0), role);
    let roles = [
        PoolRole::GpuCompute,
        PoolRole::GpuCopy,
        PoolRole::GpuPriority,
    ];
    let gpu_pools: Vec<PoolId> = asked
        .iter()
        .copied()
        .filter(|p| p.device != Device::Cpu(0))
        .collect();
    assert_eq!(gpu_pools, roles.map(gpu), "asked for {asked:?}");
    let compute = gpu(PoolRole::GpuCompute);
    assert_eq!(task_starts(&recorder, compute), 6); // one task per GPU op, on its compute pool
    assert_eq!(task_starts(&recorder, gpu(PoolRole::GpuCopy)), 0);
    threads_named_by_their_pool(&recorder, compute);
    let parks = count(&recorder, compute, |event| *event == PoolEvent::Park);
    let unparks = count(&recorder, compute, |event| *event == PoolEvent::Unpark);
    assert!(parks >= 1, "an idle GPU worker parks");
    assert!(unparks <= parks, "{unparks} unparks for {parks} parks");
}
