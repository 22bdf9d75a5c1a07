//! MXNet's engine suite (tests/cpp/engine/threaded_engine_test.cc, test_engine.py), ported:
//! RandSumExpr, VarVersion, the basics, bulk, start/stop. Every engine, every pool kind.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use common::rand_sum::{evaluate, fresh_data, RandSum as Workload};
use common::within_deadline;
use enginetop::engine::{
    Context, Engine, EngineKind, EngineOptions, FnProperty, OpName, OpSpec, Var,
};
use enginetop::pool::PoolKind;

/// Every engine: naive once, the threaded ones on every pool kind.
fn all_engines(workers: usize) -> Vec<(String, Engine)> {
    let mut engines = vec![(
        "naive".to_string(),
        engine(EngineKind::Naive, PoolKind::Eigen, workers),
    )];
    for kind in [EngineKind::Pooled, EngineKind::PerDevice] {
        for pool in PoolKind::ALL {
            engines.push((format!("{kind}/{pool}"), engine(kind, pool, workers)));
        }
    }
    engines
}

fn engine(kind: EngineKind, pool: PoolKind, workers: usize) -> Engine {
    Engine::new(EngineOptions::new(kind, workers).pool_kind(pool)).expect("engine starts")
}

/// MXNet's GenerateWorkload (see [`Workload::draw`]).
fn generate(count: usize, vars: usize, seed: u64) -> Vec<Workload> {
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..count).map(|_| Workload::draw(&mut rng, vars)).collect()
}

fn run_on_engine(engine: &Engine, workloads: Arc<Vec<Workload>>, vars: usize) -> Vec<u64> {
    let data = fresh_data(vars);
    let handles: Vec<Var> = (0..vars).map(|_| engine.new_variable()).collect();
    for index in 0..workloads.len() {
        let wl = &workloads[index];
        let reads: Vec<Var> = wl
            .reads
            .iter()
            .filter(|&&r| r != wl.write)
            .map(|&r| handles[r].clone())
            .collect();
        let (workloads, data) = (workloads.clone(), data.clone());
        let spec = OpSpec::new("rand-sum")
            .reads(&reads)
            .writes(std::slice::from_ref(&handles[wl.write]));
        engine
            .push_async(spec, move |_, completion| {
                evaluate(&workloads[index], &data);
                completion.done();
            })
            .unwrap();
    }
    engine.wait_for_all().unwrap();
    data.iter().map(|v| v.load(Ordering::Relaxed)).collect()
}

#[test]
fn rand_sum_expr_is_bit_exact_on_every_engine_and_pool() {
    within_deadline("RandSumExpr", || {
        let vars = 100;
        let engines = all_engines(2);
        for repeat in 0..5u64 {
            let workloads = Arc::new(generate(10_000, vars, 0xdead_beef + repeat));
            let expected = fresh_data(vars);
            workloads.iter().for_each(|wl| evaluate(wl, &expected));
            let expected: Vec<u64> = expected.iter().map(|v| v.load(Ordering::Relaxed)).collect();
            for (name, engine) in &engines {
                let got = run_on_engine(engine, workloads.clone(), vars);
                assert_eq!(got, expected, "{name}, repeat {repeat}");
            }
        }
    });
}

/// Pushes a reusable op 10 times, reading or writing `var`, and waits for all.
fn push_ten(engine: &Engine, var: &Var, write: bool) -> enginetop::engine::Operator {
    let vars = std::slice::from_ref(var);
    let spec = if write {
        OpSpec::new("version-write").writes(vars)
    } else {
        OpSpec::new("version-read").reads(vars)
    };
    let op = engine
        .new_operator(spec, |_, completion| completion.done())
        .unwrap();
    for _ in 0..10 {
        engine.push(&op, Context::cpu(0), 0).unwrap();
    }
    engine.wait_for_all().unwrap();
    op
}

#[test]
fn var_version_counts_writes_only() {
    within_deadline("VarVersion", || {
        for (name, engine) in all_engines(2) {
            let var = engine.new_variable();
            assert_eq!(var.version(), 0);
            let op = push_ten(&engine, &var, false);
            assert_eq!(var.version(), 0, "{name}: reads leave the version");
            engine.delete_operator(op).unwrap();
            engine
                .delete_variable(&var, Context::cpu(0), |_| ())
                .unwrap();
            engine.wait_for_all().unwrap();

            let var = engine.new_variable();
            let op = push_ten(&engine, &var, true);
            assert_eq!(var.version(), 10, "{name}: ten writes");
            engine.delete_operator(op).unwrap();
            engine
                .delete_variable(&var, Context::cpu(0), |_| ())
                .unwrap();
            engine.wait_for_all().unwrap();
            assert_eq!(
                var.version(),
                12,
                "{name}: both deletes write the var, as in MXNet"
            );
        }
    });
}

/// Counts ops in flight and the most seen at once; each op waits (bounded) for company, so
/// overlap shows whenever the engine allows it, without timing assertions.
#[derive(Default)]
struct Overlap {
    in_flight: AtomicUsize,
    most: AtomicUsize,
    order: Mutex<Vec<usize>>,
}

impl Overlap {
    fn run(&self, index: usize, wait_for_company: bool) {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        self.order.lock().unwrap().push(index);
        if wait_for_company {
            let start = Instant::now();
            while self.in_flight.load(Ordering::SeqCst) < 2
                && start.elapsed() < Duration::from_millis(200)
            {
                std::thread::yield_now();
            }
            self.most
                .fetch_max(self.in_flight.load(Ordering::SeqCst), Ordering::SeqCst);
        } else {
            // Not a wait: the write's body lasts a while, so that a second op let in beside
            // it (a broken exclusivity) would be seen in flight at the same time.
            std::thread::sleep(Duration::from_millis(2));
        }
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

fn push_overlap_ops(engine: &Engine, var: &Var, write: bool) -> Arc<Overlap> {
    let overlap = Arc::new(Overlap::default());
    let vars = std::slice::from_ref(var);
    for index in 0..10 {
        let overlap = overlap.clone();
        let spec = if write {
            OpSpec::new("basics-write").writes(vars)
        } else {
            OpSpec::new("basics-read").reads(vars)
        };
        let op = engine
            .new_operator(spec, move |_, completion| {
                overlap.run(index, !write);
                completion.done();
            })
            .unwrap();
        engine.push(&op, Context::cpu(0), 0).unwrap();
    }
    overlap
}

#[test]
fn basics_reads_overlap_writes_serialize_in_push_order() {
    within_deadline("basics #1 #2", || {
        for kind in [EngineKind::Pooled, EngineKind::PerDevice] {
            let engine = engine(kind, PoolKind::Eigen, 4);
            let var = engine.new_variable();
            let reads = push_overlap_ops(&engine, &var, false);
            engine.wait_for_all().unwrap();
            assert!(
                reads.most.load(Ordering::SeqCst) >= 2,
                "{kind}: reads never overlapped"
            );

            let writes = push_overlap_ops(&engine, &var, true);
            engine.wait_for_all().unwrap();
            assert_eq!(
                writes.most.load(Ordering::SeqCst),
                1,
                "{kind}: writes overlapped"
            );
            assert_eq!(*writes.order.lock().unwrap(), (0..10).collect::<Vec<_>>());
        }
    });
}

#[test]
fn basics_waits() {
    within_deadline("basics #3 #4 #5", || {
        for (name, engine) in all_engines(2) {
            // #3: a fresh var is ready.
            let var = engine.new_variable();
            engine.wait_for_var(&var).unwrap();

            // #4: wait_for_var waits for an IO write.
            let written = Arc::new(AtomicBool::new(false));
            let flag = written.clone();
            let spec = OpSpec::new("io-write")
                .writes(std::slice::from_ref(&var))
                .prop(FnProperty::CopyFromGpu);
            engine
                .push_sync(spec, move |_| {
                    // The op's own duration (not a wait): wait_for_var must outlast it.
                    std::thread::sleep(Duration::from_millis(5));
                    flag.store(true, Ordering::SeqCst);
                    Ok(())
                })
                .unwrap();
            engine.wait_for_var(&var).unwrap();
            assert!(
                written.load(Ordering::SeqCst),
                "{name}: wait_for_var returned early"
            );

            if name == "naive" {
                continue; // the naive engine finishes every op inside its push
            }
            // #5: a running reader does not hold up wait_for_var; wait_for_all waits for it.
            let (release, released) = mpsc::channel::<()>();
            let reader_done = Arc::new(AtomicBool::new(false));
            let done = reader_done.clone();
            let spec = OpSpec::new("slow-reader").reads(std::slice::from_ref(&var));
            engine
                .push_sync(spec, move |_| {
                    released.recv().unwrap();
                    done.store(true, Ordering::SeqCst);
                    Ok(())
                })
                .unwrap();
            engine.wait_for_var(&var).unwrap();
            assert!(
                !reader_done.load(Ordering::SeqCst),
                "{name}: the reader cannot be done yet"
            );
            let releaser = std::thread::spawn(move || release.send(()).unwrap());
            engine.wait_for_all().unwrap();
            assert!(
                reader_done.load(Ordering::SeqCst),
                "{name}: wait_for_all returned early"
            );
            releaser.join().unwrap();
        }
    });
}

/// test_engine.py's test_bulk: inside bulk(10): x = 1; x *= 2; x += 1; wait -> 3; x += 1 -> 4;
/// 100 more += 1 -> 104 after the scope.
#[test]
fn bulk_gives_104() {
    within_deadline("bulk", || {
        for (name, engine) in all_engines(2) {
            let x = engine.new_variable();
            let value = Arc::new(AtomicU64::new(0));
            let update = |f: fn(u64) -> u64| {
                let value = value.clone();
                let spec = OpSpec::new("bulk-update").writes(std::slice::from_ref(&x));
                engine
                    .push_sync(spec, move |_| {
                        value.store(f(value.load(Ordering::Relaxed)), Ordering::Relaxed);
                        Ok(())
                    })
                    .unwrap();
            };
            assert_eq!(engine.set_bulk_size(10).unwrap(), 0);
            update(|_| 1);
            update(|v| v * 2);
            update(|v| v + 1);
            engine.wait_for_var(&x).unwrap();
            assert_eq!(value.load(Ordering::Relaxed), 3, "{name}");
            update(|v| v + 1);
            engine.wait_for_var(&x).unwrap();
            assert_eq!(value.load(Ordering::Relaxed), 4, "{name}");
            for _ in 0..100 {
                update(|v| v + 1);
            }
            assert_eq!(engine.set_bulk_size(0).unwrap(), 10);
            engine.wait_for_all().unwrap();
            assert_eq!(value.load(Ordering::Relaxed), 104, "{name}");
            assert!(
                x.version() < 104,
                "{name}: ops were bulked ({} writes)",
                x.version()
            );
        }
    });
}

#[test]
fn bulk_flushes_on_context_change_and_a_failing_op_names_itself() {
    within_deadline("bulk context", || {
        let engine = engine(EngineKind::PerDevice, PoolKind::Eigen, 2);
        let var = engine.new_variable();
        let seen = Arc::new(Mutex::new(Vec::new()));
        engine.set_bulk_size(100).unwrap();
        for (index, ctx) in [
            Context::cpu(0),
            Context::cpu(0),
            Context::cpu(1),
            Context::cpu(0),
        ]
        .into_iter()
        .enumerate()
        {
            let seen = seen.clone();
            let spec = OpSpec::new("ctx-op")
                .ctx(ctx)
                .writes(std::slice::from_ref(&var));
            engine
                .push_sync(spec, move |run| {
                    seen.lock().unwrap().push((index, run.ctx));
                    Ok(())
                })
                .unwrap();
        }
        let spec = OpSpec::new("bulked-failure").writes(std::slice::from_ref(&var));
        engine.push_sync(spec, |_| Err("no good".into())).unwrap();
        let err = engine.wait_for_var(&var).unwrap_err();
        assert_eq!(err.to_string(), "op `bulked-failure` failed: no good");
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
        assert_eq!(seen[2].1, Context::cpu(1));
        assert_eq!(var.version(), 3, "bulks: [0,1] [2] [3 + failure]");
    });
}

#[test]
fn start_stop_on_every_engine_then_drop() {
    within_deadline("start_stop", || {
        for (name, engine) in all_engines(2) {
            engine.stop().unwrap();
            assert!(engine.stats().stopped, "{name}");
            let var = engine.new_variable();
            let refused = engine.push_sync(
                OpSpec::new("while-stopped").writes(std::slice::from_ref(&var)),
                |_| Ok(()),
            );
            assert!(
                refused.unwrap_err().to_string().contains("call start()"),
                "{name}"
            );
            engine.start().unwrap();
            engine
                .push_sync(
                    OpSpec::new("after-start").writes(std::slice::from_ref(&var)),
                    |_| Ok(()),
                )
                .unwrap();
            engine.wait_for_all().unwrap();
            assert_eq!(var.version(), 1, "{name}");
            engine.stop().unwrap();
            drop(engine); // dropping a stopped engine is fine
        }
    });
}

#[test]
fn stop_start_under_load_runs_every_accepted_op_once() {
    within_deadline("stop/start under load", || {
        for kind in EngineKind::ALL {
            let engine = engine(kind, PoolKind::Eigen, 2);
            let vars: Arc<Vec<Var>> = Arc::new((0..8).map(|_| engine.new_variable()).collect());
            let ran = Arc::new(AtomicUsize::new(0));
            let accepted = Arc::new(AtomicUsize::new(0));
            let refused = Arc::new(AtomicUsize::new(0));
            let done = Arc::new(AtomicBool::new(false));
            let pushers: Vec<_> = (0..2)
                .map(|client| {
                    let (engine, vars, ran) = (engine.clone(), vars.clone(), ran.clone());
                    let (accepted, refused, done) =
                        (accepted.clone(), refused.clone(), done.clone());
                    std::thread::spawn(move || {
                        let mut k = client;
                        while !done.load(Ordering::SeqCst) {
                            k += 1;
                            let ran = ran.clone();
                            let var = &vars[k % vars.len()];
                            let spec = OpSpec::new("load").writes(std::slice::from_ref(var));
                            match engine.push_sync(spec, move |_| {
                                ran.fetch_add(1, Ordering::SeqCst);
                                Ok(())
                            }) {
                                Ok(()) => accepted.fetch_add(1, Ordering::SeqCst),
                                Err(err) => {
                                    assert!(err.to_string().contains("is stopped"), "{err}");
                                    refused.fetch_add(1, Ordering::SeqCst)
                                }
                            };
                        }
                    })
                })
                .collect();
            for _ in 0..10 {
                let before = accepted.load(Ordering::SeqCst);
                common::await_at_least(&accepted, before + 200, "pushes accepted while running");
                engine.stop().unwrap();
                // Every push accepted so far was admitted before the drain, so it has run.
                let accepted_now = accepted.load(Ordering::SeqCst);
                assert!(
                    ran.load(Ordering::SeqCst) >= accepted_now,
                    "{kind}: stop drains"
                );
                let refused_before = refused.load(Ordering::SeqCst);
                common::await_at_least(
                    &refused,
                    refused_before + 10,
                    "pushes refused while stopped",
                );
                engine.start().unwrap();
            }
            done.store(true, Ordering::SeqCst);
            pushers.into_iter().for_each(|p| p.join().unwrap());
            engine.wait_for_all().unwrap();
            assert_eq!(
                ran.load(Ordering::SeqCst),
                accepted.load(Ordering::SeqCst),
                "{kind}"
            );
            let writes: u64 = vars.iter().map(Var::version).sum();
            assert_eq!(writes as usize, accepted.load(Ordering::SeqCst), "{kind}");
        }
    });
}

#[test]
fn dropping_the_engine_runs_everything_pushed() {
    within_deadline("drop drains", || {
        for (name, engine) in all_engines(2) {
            let var = engine.new_variable();
            let ran = Arc::new(AtomicUsize::new(0));
            for _ in 0..500 {
                let ran = ran.clone();
                engine
                    .push_sync(
                        OpSpec::new("before-drop").writes(std::slice::from_ref(&var)),
                        move |_| {
                            ran.fetch_add(1, Ordering::SeqCst);
                            Ok(())
                        },
                    )
                    .unwrap();
            }
            drop(engine);
            assert_eq!(ran.load(Ordering::SeqCst), 500, "{name}");
            assert_eq!(var.version(), 500, "{name}");
        }
    });
}

#[test]
fn delete_variable_runs_after_every_op_on_the_var_and_refuses_later_pushes() {
    within_deadline("delete_variable", || {
        for (name, engine) in all_engines(2) {
            let var = engine.new_variable();
            let log = Arc::new(Mutex::new(Vec::new()));
            for index in 0..5 {
                let log = log.clone();
                engine
                    .push_sync(
                        OpSpec::new("before-delete").reads(std::slice::from_ref(&var)),
                        move |_| {
                            // The read's duration (not a wait): the delete must come after.
                            std::thread::sleep(Duration::from_millis(1));
                            log.lock().unwrap().push(index);
                            Ok(())
                        },
                    )
                    .unwrap();
            }
            let deleted_log = log.clone();
            engine
                .delete_variable(&var, Context::cpu(0), move |_| {
                    deleted_log.lock().unwrap().push(99)
                })
                .unwrap();
            let err = engine
                .push_sync(
                    OpSpec::new("after-delete").reads(std::slice::from_ref(&var)),
                    |_| Ok(()),
                )
                .unwrap_err();
            assert!(err.to_string().contains("was deleted"), "{name}: {err}");
            engine.wait_for_all().unwrap();
            let log = log.lock().unwrap().clone();
            assert_eq!(log.len(), 6, "{name}");
            assert_eq!(*log.last().unwrap(), 99, "{name}: delete ran last: {log:?}");
            assert_eq!(OpName::DELETE_VARIABLE.as_str(), "DeleteVariable");
        }
    });
}

#[test]
fn dropping_the_last_handle_inside_an_op_loses_nothing() {
    within_deadline("drop inside op", || {
        for (name, engine) in all_engines(2).into_iter().skip(1) {
            // (skips naive: it would run the blocking op inside the push)
            let (release, released) = mpsc::channel::<()>();
            let (ran, is_ran) = mpsc::channel::<&'static str>();
            let inner = engine.clone();
            let var = engine.new_variable();
            let spec = OpSpec::new("holds-the-last-handle").writes(std::slice::from_ref(&var));
            engine
                .push_sync(spec, move |_| {
                    released.recv().unwrap();
                    let later = inner.new_variable();
                    let spec = OpSpec::new("pushed-by-the-last-handle")
                        .writes(std::slice::from_ref(&later));
                    inner
                        .push_sync(spec, move |_| {
                            ran.send("later op ran").unwrap();
                            Ok(())
                        })
                        .unwrap();
                    drop(inner); // the engine shuts down inside this op
                    Ok(())
                })
                .unwrap();
            drop(engine);
            release.send(()).unwrap();
            let message = is_ran.recv_timeout(Duration::from_secs(30));
            assert_eq!(message, Ok("later op ran"), "{name}");
        }
    });
}

#[test]
fn cancel_skips_what_has_not_started_and_start_resumes() {
    within_deadline("cancel", || {
        for (name, engine) in all_engines(1).into_iter().skip(1) {
            let var = engine.new_variable();
            let (release, released) = mpsc::channel::<()>();
            let (started, is_started) = mpsc::channel();
            let spec = OpSpec::new("running-at-cancel").writes(std::slice::from_ref(&var));
            let finished = Arc::new(AtomicBool::new(false));
            let flag = finished.clone();
            engine
                .push_sync(spec, move |_| {
                    started.send(()).unwrap();
                    released.recv().unwrap();
                    flag.store(true, Ordering::SeqCst);
                    Ok(())
                })
                .unwrap();
            is_started.recv().unwrap();
            let ran = Arc::new(AtomicUsize::new(0));
            for _ in 0..100 {
                let ran = ran.clone();
                let spec = OpSpec::new("queued-at-cancel").writes(std::slice::from_ref(&var));
                engine
                    .push_sync(spec, move |_| {
                        ran.fetch_add(1, Ordering::SeqCst);
                        Ok(())
                    })
                    .unwrap();
            }
            let observer = engine.clone();
            let releaser = std::thread::spawn(move || {
                // Release the running op only once the cancel is under way.
                let start = Instant::now();
                while !observer.stats().stopped {
                    assert!(
                        start.elapsed() < Duration::from_secs(30),
                        "cancel never began"
                    );
                    std::thread::yield_now();
                }
                release.send(()).unwrap();
            });
            assert_eq!(engine.cancel().unwrap(), 100, "{name}");
            releaser.join().unwrap();
            assert!(
                finished.load(Ordering::SeqCst),
                "{name}: the running op finished"
            );
            assert_eq!(
                ran.load(Ordering::SeqCst),
                0,
                "{name}: queued bodies skipped"
            );
            assert_eq!(var.version(), 101, "{name}: skipped ops still completed");
            assert!(engine.stats().stopped, "{name}");
            engine.start().unwrap();
            let ran_after = ran.clone();
            engine
                .push_sync(
                    OpSpec::new("after-cancel").writes(std::slice::from_ref(&var)),
                    move |_| {
                        ran_after.fetch_add(1, Ordering::SeqCst);
                        Ok(())
                    },
                )
                .unwrap();
            engine.wait_for_all().unwrap();
            assert_eq!(
                ran.load(Ordering::SeqCst),
                1,
                "{name}: bodies run again after start"
            );
        }
    });
}
