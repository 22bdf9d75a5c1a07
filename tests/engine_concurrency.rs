//! Concurrency facts of the engine: many client threads pushing at once (MXNet's engine can
//! deadlock there), random DAGs on random worker counts with live resizes (checked against a
//! sequential run), completions from other threads, the priority pool's order, the observer.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use common::within_deadline;
use enginetop::device::identity::{Device, PoolId, PoolRole};
use enginetop::engine::{
    Context, Engine, EngineError, EngineEvent, EngineKind, EngineObserver, EngineOptions,
    FnProperty, OpSpec, Var,
};
use enginetop::pool::{PoolEvent, PoolKind, PoolObserver};

fn engine(kind: EngineKind, pool: PoolKind, workers: usize) -> Engine {
    Engine::new(
        EngineOptions::new(kind, workers)
            .pool_kind(pool)
            .cpu_priority_workers(1),
    )
    .expect("engine starts")
}

/// Per-var bookkeeping checked inside every op: who is reading or writing right now, and the
/// last write sequence number each client got through.
struct VarCheck {
    readers: AtomicUsize,
    writers: AtomicUsize,
    last_write_by_client: Vec<AtomicU64>,
    writes: AtomicU64,
}

impl VarCheck {
    fn new(clients: usize) -> Self {
        VarCheck {
            readers: AtomicUsize::new(0),
            writers: AtomicUsize::new(0),
            last_write_by_client: (0..clients).map(|_| AtomicU64::new(0)).collect(),
            writes: AtomicU64::new(0),
        }
    }
}

/// Enters every var of an op, checking the read/write rules; returns a violation if any.
fn enter(
    checks: &[VarCheck],
    reads: &[usize],
    writes: &[usize],
    client: usize,
    seq: u64,
) -> Option<String> {
    for &w in writes {
        let check = &checks[w];
        if check.writers.fetch_add(1, Ordering::SeqCst) != 0
            || check.readers.load(Ordering::SeqCst) != 0
        {
            return Some(format!("var {w}: a write overlapped another op"));
        }
        let previous = check.last_write_by_client[client].swap(seq, Ordering::SeqCst);
        if previous >= seq {
            return Some(format!(
                "var {w}: client {client} write {seq} ran after {previous}"
            ));
        }
        check.writes.fetch_add(1, Ordering::SeqCst);
    }
    for &r in reads {
        checks[r].readers.fetch_add(1, Ordering::SeqCst);
        if checks[r].writers.load(Ordering::SeqCst) != 0 {
            return Some(format!("var {r}: a read overlapped a write"));
        }
    }
    None
}

fn leave(checks: &[VarCheck], reads: &[usize], writes: &[usize]) {
    writes.iter().for_each(|&w| {
        checks[w].writers.fetch_sub(1, Ordering::SeqCst);
    });
    reads.iter().for_each(|&r| {
        checks[r].readers.fetch_sub(1, Ordering::SeqCst);
    });
}

/// Picks 1-3 distinct vars, each read or written.
fn pick_vars(rng: &mut fastrand::Rng, vars: usize) -> (Vec<usize>, Vec<usize>) {
    let (mut reads, mut writes) = (Vec::new(), Vec::new());
    for _ in 0..rng.usize(1..=3) {
        let var = rng.usize(..vars);
        if reads.contains(&var) || writes.contains(&var) {
            continue;
        }
        if rng.bool() {
            writes.push(var);
        } else {
            reads.push(var);
        }
    }
    (reads, writes)
}

fn many_clients(kind: EngineKind, pool: PoolKind) {
    const CLIENTS: usize = 4;
    const OPS: u64 = 2_000;
    const VARS: usize = 12;
    let engine = engine(kind, pool, 2);
    let vars: Arc<Vec<Var>> = Arc::new((0..VARS).map(|_| engine.new_variable()).collect());
    let checks: Arc<Vec<VarCheck>> = Arc::new((0..VARS).map(|_| VarCheck::new(CLIENTS)).collect());
    let violations = Arc::new(Mutex::new(Vec::<String>::new()));
    let pushed_writes = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let (engine, vars, checks) = (engine.clone(), vars.clone(), checks.clone());
            let (violations, pushed_writes) = (violations.clone(), pushed_writes.clone());
            std::thread::spawn(move || {
                let mut rng = fastrand::Rng::with_seed(client as u64 * 7919);
                for seq in 1..=OPS {
                    let (reads, writes) = pick_vars(&mut rng, VARS);
                    pushed_writes.fetch_add(writes.len() as u64, Ordering::SeqCst);
                    let read_vars: Vec<Var> = reads.iter().map(|&r| vars[r].clone()).collect();
                    let write_vars: Vec<Var> = writes.iter().map(|&w| vars[w].clone()).collect();
                    let (checks, violations) = (checks.clone(), violations.clone());
                    let spec = OpSpec::new("client-op")
                        .reads(&read_vars)
                        .writes(&write_vars);
                    engine
                        .push_sync(spec, move |_| {
                            if let Some(violation) = enter(&checks, &reads, &writes, client, seq) {
                                violations.lock().unwrap().push(violation);
                            }
                            std::hint::spin_loop();
                            leave(&checks, &reads, &writes);
                            Ok(())
                        })
                        .unwrap();
                }
            })
        })
        .collect();
    clients.into_iter().for_each(|c| c.join().unwrap());
    engine.wait_for_all().unwrap();
    let violations = violations.lock().unwrap();
    assert!(
        violations.is_empty(),
        "{kind}/{pool}: {:?}",
        &violations[..violations.len().min(5)]
    );
    let versions: u64 = vars.iter().map(Var::version).sum();
    assert_eq!(
        versions,
        pushed_writes.load(Ordering::SeqCst),
        "{kind}/{pool}"
    );
}

#[test]
fn many_client_threads_push_at_once_without_deadlock_or_reordering() {
    within_deadline("many clients", || {
        many_clients(EngineKind::Naive, PoolKind::Eigen);
        for pool in PoolKind::ALL {
            many_clients(EngineKind::Pooled, pool);
            many_clients(EngineKind::PerDevice, pool);
        }
    });
}

fn mix(acc: u64, input: u64) -> u64 {
    (acc.rotate_left(23) ^ input)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(1)
}

struct RandomOp {
    write: usize,
    reads: Vec<usize>,
}

fn apply(index: usize, op: &RandomOp, values: &[AtomicU64]) {
    let mut value = values[op.write].load(Ordering::Relaxed);
    for &r in &op.reads {
        value = mix(value, values[r].load(Ordering::Relaxed));
    }
    values[op.write].store(mix(value, index as u64), Ordering::Relaxed);
}

/// Random DAGs on random engines, pool kinds and worker counts, resized while they run; every
/// final state must equal the sequential one.
#[test]
fn random_dags_with_random_workers_and_live_resizes_match_a_sequential_run() {
    within_deadline("random DAG property", || {
        for seed in 0..16u64 {
            let mut rng = fastrand::Rng::with_seed(seed);
            let kind = EngineKind::ALL[rng.usize(..3)];
            let pool = PoolKind::ALL[rng.usize(..3)];
            let vars = rng.usize(2..40);
            let ops: Arc<Vec<RandomOp>> = Arc::new(
                (0..rng.usize(500..3000))
                    .map(|_| {
                        let write = rng.usize(..vars);
                        let mut reads = Vec::new();
                        for _ in 0..rng.usize(0..=3) {
                            let read = rng.usize(..vars);
                            if read != write && !reads.contains(&read) {
                                reads.push(read);
                            }
                        }
                        RandomOp { write, reads }
                    })
                    .collect(),
            );
            let expected: Vec<AtomicU64> = (0..vars as u64).map(AtomicU64::new).collect();
            ops.iter()
                .enumerate()
                .for_each(|(i, op)| apply(i, op, &expected));

            let engine = engine(kind, pool, rng.usize(1..=4));
            let values: Arc<Vec<AtomicU64>> =
                Arc::new((0..vars as u64).map(AtomicU64::new).collect());
            let handles: Vec<Var> = (0..vars).map(|_| engine.new_variable()).collect();
            let done = Arc::new(AtomicBool::new(false));
            let resizes = Arc::new(AtomicUsize::new(0));
            let resizer = {
                let (engine, done, resizes) = (engine.clone(), done.clone(), resizes.clone());
                let mut rng = fastrand::Rng::with_seed(seed ^ 0xabc);
                std::thread::spawn(move || {
                    while !done.load(Ordering::SeqCst) {
                        let resized = engine.set_cpu_workers(rng.usize(1..=4));
                        if kind == EngineKind::Naive {
                            // No workers to size: refused, the same way every time.
                            let refused = matches!(resized, Err(EngineError::NoSuchSetting { .. }));
                            assert!(refused, "{resized:?}");
                        } else {
                            resized.unwrap();
                        }
                        resizes.fetch_add(1, Ordering::SeqCst);
                        std::thread::yield_now();
                    }
                })
            };
            for index in 0..ops.len() {
                if index == ops.len() / 2 {
                    // Mid-run: let the resizer change the worker count at least twice.
                    let before = resizes.load(Ordering::SeqCst);
                    common::await_at_least(&resizes, before + 2, "resizes mid-run");
                }
                let op = &ops[index];
                let reads: Vec<Var> = op.reads.iter().map(|&r| handles[r].clone()).collect();
                let (ops, values) = (ops.clone(), values.clone());
                let spec = OpSpec::new("random")
                    .reads(&reads)
                    .writes(std::slice::from_ref(&handles[op.write]));
                engine
                    .push_sync(spec, move |_| {
                        apply(index, &ops[index], &values);
                        Ok(())
                    })
                    .unwrap();
            }
            engine.wait_for_all().unwrap();
            done.store(true, Ordering::SeqCst);
            resizer.join().unwrap();
            let got: Vec<u64> = values.iter().map(|v| v.load(Ordering::Relaxed)).collect();
            let want: Vec<u64> = expected.iter().map(|v| v.load(Ordering::Relaxed)).collect();
            assert_eq!(got, want, "seed {seed}: {kind}/{pool}");
        }
    });
}

/// Two ready ops pushed back to back while a worker is already at work (or spinning on the
/// engine's empty ready queue), the first waiting until the second ran: with two workers the
/// second gets its own worker instead of queueing behind the first (which would hang).
#[test]
fn two_ready_ops_run_side_by_side_on_two_workers() {
    within_deadline("two ready ops side by side", || {
        for kind in [EngineKind::Pooled, EngineKind::PerDevice] {
            for pool in PoolKind::ALL {
                let engine = engine(kind, pool, 2);
                let [warm, first, second] = [(); 3].map(|()| engine.new_variable());
                for _ in 0..200 {
                    let ran = Arc::new(AtomicUsize::new(0));
                    let writes =
                        |var| OpSpec::new("side-by-side").writes(std::slice::from_ref(var));
                    engine.push_sync(writes(&warm), |_| Ok(())).unwrap();
                    let waited = ran.clone();
                    engine
                        .push_sync(writes(&first), move |_| {
                            common::await_count(&waited, 1, "the second op");
                            Ok(())
                        })
                        .unwrap();
                    let counted = ran.clone();
                    engine
                        .push_sync(writes(&second), move |_| {
                            counted.fetch_add(1, Ordering::SeqCst);
                            Ok(())
                        })
                        .unwrap();
                    engine.wait_for_all().unwrap();
                }
                assert_eq!(first.version(), 200, "{kind} {pool}");
            }
        }
    });
}

/// Async ops completed by other threads, in any order: the chain order still holds.
#[test]
fn completions_from_other_threads_keep_the_order() {
    within_deadline("async completions", || {
        for kind in EngineKind::ALL {
            let engine = engine(kind, PoolKind::ChaseLev, 2);
            let var = engine.new_variable();
            let log = Arc::new(Mutex::new(Vec::new()));
            let (tx, rx) = mpsc::channel::<(usize, enginetop::engine::Completion)>();
            let completer = std::thread::spawn(move || {
                let log = log;
                for (index, completion) in rx {
                    log.lock().unwrap().push(index);
                    completion.done();
                }
                log
            });
            for index in 0..200 {
                let tx = tx.clone();
                let spec = OpSpec::new("async-write")
                    .writes(std::slice::from_ref(&var))
                    .prop(FnProperty::Async);
                engine
                    .push_async(spec, move |_, completion| {
                        tx.send((index, completion)).unwrap()
                    })
                    .unwrap();
            }
            engine.wait_for_var(&var).unwrap();
            drop(tx);
            let log = completer.join().unwrap();
            assert_eq!(*log.lock().unwrap(), (0..200).collect::<Vec<_>>(), "{kind}");
            assert_eq!(var.version(), 200);
        }
    });
}

#[test]
fn the_priority_pool_runs_the_highest_priority_first() {
    within_deadline("priority", || {
        let engine = engine(EngineKind::PerDevice, PoolKind::Eigen, 2);
        let (release, wait) = mpsc::channel::<()>();
        let (started, is_started) = mpsc::channel();
        let blocker = OpSpec::new("blocker")
            .prop(FnProperty::CpuPrioritized)
            .priority(100);
        engine
            .push_sync(blocker, move |_| {
                started.send(()).unwrap();
                wait.recv().unwrap();
                Ok(())
            })
            .unwrap();
        is_started.recv().unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        for (label, priority) in [("low", 1), ("high-a", 9), ("mid", 5), ("high-b", 9)] {
            let order = order.clone();
            let spec = OpSpec::new(label)
                .prop(FnProperty::CpuPrioritized)
                .priority(priority);
            engine
                .push_sync(spec, move |run| {
                    order.lock().unwrap().push(run.name.as_str());
                    Ok(())
                })
                .unwrap();
        }
        release.send(()).unwrap();
        engine.wait_for_all().unwrap();
        assert_eq!(*order.lock().unwrap(), ["high-a", "high-b", "mid", "low"]);
        assert_eq!(engine.stats().workers.priority.unwrap().num_threads, 1);
    });
}

#[derive(Default)]
struct CountingObserver {
    queued: AtomicUsize,
    started: AtomicUsize,
    finished: AtomicUsize,
    failed: AtomicUsize,
}

impl EngineObserver for CountingObserver {
    fn on_event(&self, event: EngineEvent) {
        let counter = match event {
            EngineEvent::Queued { .. } => &self.queued,
            EngineEvent::Started { .. } => &self.started,
            EngineEvent::Finished { failed: true, .. } => &self.failed,
            EngineEvent::Finished { .. } => &self.finished,
        };
        counter.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn the_observer_sees_every_op_queued_started_and_finished() {
    within_deadline("observer", || {
        for kind in EngineKind::ALL {
            let observer = Arc::new(CountingObserver::default());
            let engine =
                Engine::new(EngineOptions::new(kind, 2).observer(observer.clone())).unwrap();
            let var = engine.new_variable();
            for index in 0..100 {
                let spec = OpSpec::new("observed").writes(std::slice::from_ref(&var));
                engine
                    .push_sync(spec, move |_| {
                        if index == 99 {
                            Err("last".into())
                        } else {
                            Ok(())
                        }
                    })
                    .unwrap();
            }
            engine.wait_for_all().unwrap_err();
            assert_eq!(observer.queued.load(Ordering::SeqCst), 100, "{kind}");
            assert_eq!(observer.started.load(Ordering::SeqCst), 100, "{kind}");
            assert_eq!(observer.finished.load(Ordering::SeqCst), 99, "{kind}");
            assert_eq!(observer.failed.load(Ordering::SeqCst), 1, "{kind}");
        }
    });
}

/// Records each batch the engine reports at once, as (kind, op id) pairs (0 queued, 2
/// finished), and counts the events it reports one by one.
#[derive(Default)]
struct BatchObserver {
    batches: Mutex<Vec<Vec<(u8, u64)>>>,
    single_queued: AtomicUsize,
}

impl EngineObserver for BatchObserver {
    fn on_event(&self, event: EngineEvent) {
        if let EngineEvent::Queued { .. } = event {
            self.single_queued.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn on_events_at_once(&self, events: &[EngineEvent]) {
        let batch = events
            .iter()
            .map(|event| match *event {
                EngineEvent::Queued { id, .. } => (0, id),
                EngineEvent::Started { id, .. } => (1, id),
                EngineEvent::Finished { id, .. } => (2, id),
            })
            .collect();
        self.batches.lock().unwrap().push(batch);
    }
}

#[test]
fn a_completion_reports_its_end_with_the_queueing_of_the_ops_it_made_ready() {
    within_deadline("events at once", || {
        // The naive engine runs an op at its push: the first op could not wait there.
        for kind in [EngineKind::Pooled, EngineKind::PerDevice] {
            let observer = Arc::new(BatchObserver::default());
            let engine =
                Engine::new(EngineOptions::new(kind, 2).observer(observer.clone())).unwrap();
            let var = engine.new_variable();
            let chain = 20;
            // The first write waits until every other write is queued behind it, so each
            // completion grants exactly the next write of the chain.
            let (release, held) = mpsc::channel::<()>();
            let spec = || OpSpec::new("chained").writes(std::slice::from_ref(&var));
            engine
                .push_sync(spec(), move |_| {
                    held.recv().unwrap();
                    Ok(())
                })
                .unwrap();
            for _ in 1..chain {
                engine.push_sync(spec(), |_| Ok(())).unwrap();
            }
            release.send(()).unwrap();
            engine.wait_for_all().unwrap();
            assert_eq!(observer.single_queued.load(Ordering::SeqCst), 1, "{kind}");
            let batches = observer.batches.lock().unwrap();
            assert_eq!(batches.len(), chain, "{kind}: one batch per completion");
            for pair in batches.windows(2) {
                let (finished, next) = (pair[0][0].1, pair[1][0].1);
                assert_eq!(pair[0], [(2, finished), (0, next)], "{kind}");
            }
            assert_eq!(
                batches[chain - 1].len(),
                1,
                "{kind}: the last grants nothing"
            );
        }
    });
}

#[test]
fn a_wide_fan_out_is_reported_in_batches_of_five_starting_with_the_end() {
    within_deadline("wide fan-out", || {
        for kind in [EngineKind::Pooled, EngineKind::PerDevice] {
            let observer = Arc::new(BatchObserver::default());
            let engine =
                Engine::new(EngineOptions::new(kind, 2).observer(observer.clone())).unwrap();
            let var = engine.new_variable();
            // One write held until seven reads queued behind it: its completion grants all.
            let (release, held) = mpsc::channel::<()>();
            let vars = std::slice::from_ref(&var);
            engine
                .push_sync(OpSpec::new("writer").writes(vars), move |_| {
                    held.recv().unwrap();
                    Ok(())
                })
                .unwrap();
            for _ in 0..7 {
                engine
                    .push_sync(OpSpec::new("reader").reads(vars), |_| Ok(()))
                    .unwrap();
            }
            release.send(()).unwrap();
            engine.wait_for_all().unwrap();
            let batches = observer.batches.lock().unwrap();
            let fan_out: Vec<&Vec<(u8, u64)>> = batches
                .iter()
                .filter(|batch| batch.iter().any(|&(what, _)| what == 0))
                .collect();
            let sizes: Vec<usize> = fan_out.iter().map(|batch| batch.len()).collect();
            assert_eq!(sizes, [5, 3], "{kind}: Finished + 4 Queued, then 3 Queued");
            assert_eq!(
                fan_out[0][0].0, 2,
                "{kind}: the first batch starts with the end"
            );
            assert!(fan_out[1].iter().all(|&(what, _)| what == 0), "{kind}");
        }
    });
}

/// Records every event's op id, kind (0 queued, 1 started, 2 finished) and priority.
#[derive(Default)]
struct IdObserver {
    events: Mutex<Vec<(u64, u8, i32)>>,
}

impl EngineObserver for IdObserver {
    fn on_event(&self, event: EngineEvent) {
        let entry = match event {
            EngineEvent::Queued { id, priority, .. } => (id, 0, priority),
            EngineEvent::Started { id, priority, .. } => (id, 1, priority),
            EngineEvent::Finished { id, priority, .. } => (id, 2, priority),
        };
        self.events.lock().unwrap().push(entry);
    }
}

#[test]
fn op_ids_are_unique_across_engines_and_shared_by_an_ops_three_events() {
    within_deadline("op ids", || {
        let observer = Arc::new(IdObserver::default());
        let pushes_per_engine = 200;
        for kind in EngineKind::ALL {
            let engine =
                Engine::new(EngineOptions::new(kind, 2).observer(observer.clone())).unwrap();
            let vars: Vec<Var> = (0..4).map(|_| engine.new_variable()).collect();
            for k in 0..pushes_per_engine {
                let spec = OpSpec::new("identified")
                    .reads(std::slice::from_ref(&vars[(k + 1) % 4]))
                    .writes(std::slice::from_ref(&vars[k % 4]))
                    .priority(k as i32 % 7);
                engine.push_sync(spec, |_| Ok(())).unwrap();
            }
            engine.wait_for_all().unwrap();
        }
        let events = observer.events.lock().unwrap();
        let mut by_id: std::collections::HashMap<u64, Vec<(u8, i32)>> = Default::default();
        for &(id, kind, priority) in events.iter() {
            by_id.entry(id).or_default().push((kind, priority));
        }
        assert_eq!(by_id.len(), 3 * pushes_per_engine, "one id per op pushed");
        for (id, mut seen) in by_id {
            seen.sort_unstable();
            let priority = seen[0].1;
            assert_eq!(
                seen,
                [(0, priority), (1, priority), (2, priority)],
                "op {id}: queued, started and finished once each"
            );
        }
    });
}

/// Counts the tasks the `cpu0` pool's workers start.
struct TaskCounter(Arc<AtomicUsize>);

impl PoolObserver for TaskCounter {
    fn on_event(&self, worker: Option<usize>, event: PoolEvent) {
        if worker.is_some() && event == PoolEvent::TaskStart {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

const LINKS: usize = 64 * 200;

/// A chain made ready on a worker runs there as continuations, one after another on one
/// stack frame, and once the worker has run its budget of continuations it takes the chain
/// back from its own queue instead of scheduling a drainer task (and waking the other worker)
/// for it: a long chain is one pool task, on one thread, at one stack depth.
#[test]
fn a_chain_made_ready_on_a_worker_stays_on_that_worker() {
    within_deadline("chain stays", || {
        let tasks = Arc::new(AtomicUsize::new(0));
        let counted = tasks.clone();
        let options = EngineOptions::new(EngineKind::PerDevice, 2).pool_observers(Arc::new(
            move |pool: PoolId| {
                (pool == PoolId::new(Device::Cpu(0), PoolRole::CpuWorker))
                    .then(|| Arc::new(TaskCounter(counted.clone())) as Arc<dyn PoolObserver>)
            },
        ));
        let engine = Engine::new(options).unwrap();
        let var = engine.new_variable();
        let writes = std::slice::from_ref(&var);
        let (release, released) = mpsc::channel::<()>();
        engine
            .push_sync(OpSpec::new("hold").writes(writes), move |_| {
                released.recv().unwrap();
                Ok(())
            })
            .unwrap();
        let threads = Arc::new(Mutex::new(Vec::new()));
        let stack = Arc::new(Mutex::new((usize::MAX, 0usize)));
        for _ in 0..LINKS {
            let (threads, stack) = (threads.clone(), stack.clone());
            engine
                .push_sync(OpSpec::new("link").writes(writes), move |_| {
                    let name = std::thread::current().name().map(str::to_string);
                    threads.lock().unwrap().push(name);
                    let here = 0u8;
                    let address = std::ptr::addr_of!(here) as usize;
                    let mut stack = stack.lock().unwrap();
                    *stack = (stack.0.min(address), stack.1.max(address));
                    Ok(())
                })
                .unwrap();
        }
        release.send(()).unwrap();
        engine.wait_for_all().unwrap();
        let threads = threads.lock().unwrap();
        assert_eq!(threads.len(), LINKS);
        let (lowest, highest) = *stack.lock().unwrap();
        // Continuations run one after another at one depth; nesting one level per budget (the
        // old behaviour) went 200 levels deep here and overflowed a worker's stack on chains
        // of about a million ops.
        assert!(
            highest - lowest < 4096,
            "the chain nested {} bytes deep",
            highest - lowest
        );
        assert!(threads[0]
            .as_deref()
            .is_some_and(|name| name.starts_with("cpu0-w")));
        assert!(
            threads.iter().all(|name| *name == threads[0]),
            "the chain moved between workers"
        );
        drop(engine); // joins the workers: every task start is counted
        assert_eq!(tasks.load(Ordering::SeqCst), 1, "pool tasks for the chain");
    });
}

#[test]
fn resizing_the_cpu_workers_under_load_loses_nothing() {
    within_deadline("resize under load", || {
        for pool in PoolKind::ALL {
            let engine = engine(EngineKind::PerDevice, pool, 1);
            let vars: Vec<Var> = (0..64).map(|_| engine.new_variable()).collect();
            let ran = Arc::new(AtomicUsize::new(0));
            let total = 40_000;
            for k in 0..total {
                if k % 10_000 == 5_000 {
                    engine.set_cpu_workers([4, 2, 3, 1][k / 10_000]).unwrap();
                }
                let ran = ran.clone();
                let writes = std::slice::from_ref(&vars[if k % 2 == 0 { 0 } else { k % 64 }]);
                engine
                    .push_sync(
                        OpSpec::new("resize-load")
                            .writes(writes)
                            .ctx(Context::cpu((k % 2) as u32)),
                        move |_| {
                            ran.fetch_add(1, Ordering::Relaxed);
                            Ok(())
                        },
                    )
                    .unwrap();
            }
            engine.wait_for_all().unwrap();
            assert_eq!(ran.load(Ordering::Relaxed), total, "{pool}");
            let stats = engine.stats();
            assert_eq!(stats.workers.pools.len(), 2, "cpu0 and cpu1");
            assert!(
                stats.workers.pools.iter().all(|p| p.num_threads == 1),
                "{pool}"
            );
            let total_run: u64 = stats
                .workers
                .pools
                .iter()
                .map(|p| p.tasks_run() + p.inline_runs)
                .sum();
            assert!(
                total_run <= total as u64,
                "continuations run inside other tasks"
            );
        }
    });
}

/// Which thread an op ran on, by name.
fn thread_of(engine: &Engine, spec: OpSpec<'_>) -> String {
    let (tx, rx) = mpsc::channel();
    engine
        .push_sync(spec, move |_| {
            let name = std::thread::current().name().unwrap_or("").to_string();
            tx.send(name).unwrap();
            Ok(())
        })
        .unwrap();
    rx.recv().unwrap()
}

#[test]
fn ops_run_on_their_device_threads_and_restart_keeps_the_devices() {
    within_deadline("device threads", || {
        let engine = engine(EngineKind::PerDevice, PoolKind::Eigen, 2);
        for round in 0..2 {
            let cpu1 = thread_of(&engine, OpSpec::new("on-cpu1").ctx(Context::cpu(1)));
            assert!(cpu1.starts_with("cpu1-w"), "round {round}: {cpu1}");
            let prio = thread_of(
                &engine,
                OpSpec::new("prio").prop(FnProperty::CpuPrioritized),
            );
            assert!(prio.starts_with("cpu-prio-"), "round {round}: {prio}");
            let cpu0 = thread_of(&engine, OpSpec::new("on-cpu0"));
            assert!(cpu0.starts_with("cpu0-w"), "round {round}: {cpu0}");
            engine.stop().unwrap();
            engine.start().unwrap();
        }
        let pooled = engine_with(EngineKind::Pooled);
        assert!(thread_of(&pooled, OpSpec::new("shared")).starts_with("engine-w"));
        let copy = OpSpec::new("copy").prop(FnProperty::CopyToGpu);
        assert!(thread_of(&pooled, copy).starts_with("io-w"));
    });
}

fn engine_with(kind: EngineKind) -> Engine {
    engine(kind, PoolKind::Eigen, 2)
}
