//! MXNet's exception tests (tests/python/unittest/test_exc_handling.py), ported, plus what we
//! do better: panics and dropped completions are failures that name the op, waits from inside
//! an op are refused, the engine keeps working after errors, GPU pushes are refused clearly.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use common::within_deadline;
use enginetop::engine::{
    Context, Engine, EngineError, EngineKind, EngineOptions, FailureCause, FnProperty, OpSpec, Var,
};
use enginetop::pool::PoolKind;

fn engines() -> Vec<Engine> {
    EngineKind::ALL
        .into_iter()
        .map(|kind| Engine::new(EngineOptions::new(kind, 2).pool_kind(PoolKind::Eigen)).unwrap())
        .collect()
}

/// Pushes an op named `name` that writes `writes` and fails.
fn push_failing(engine: &Engine, name: &str, writes: &[Var]) {
    engine
        .push_sync(OpSpec::new(name).writes(writes), |_| {
            Err("invalid normal scale -1".into())
        })
        .unwrap();
}

/// Pushes an op reading `reads`, writing `writes`; returns a flag set if its body ran.
fn push_ok(engine: &Engine, name: &str, reads: &[Var], writes: &[Var]) -> Arc<AtomicBool> {
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    engine
        .push_sync(OpSpec::new(name).reads(reads).writes(writes), move |_| {
            flag.store(true, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
    ran
}

fn failed_op(err: &EngineError) -> String {
    err.failure().expect("an op failure").op.to_string()
}

/// test_exc_imperative: a failing op; the op depending on it is skipped; waiting on its output
/// reports the failure, naming the op that failed.
#[test]
fn dependent_op_is_skipped_and_its_wait_reports_the_original_failure() {
    within_deadline("exc_imperative", || {
        for engine in engines() {
            let (a, c) = (engine.new_variable(), engine.new_variable());
            push_failing(&engine, "random_normal", std::slice::from_ref(&a));
            let dot_ran = push_ok(
                &engine,
                "dot",
                std::slice::from_ref(&a),
                std::slice::from_ref(&c),
            );
            let err = engine.wait_for_var(&c).unwrap_err();
            assert_eq!(failed_op(&err), "random_normal", "{engine:?}");
            assert_eq!(
                err.to_string(),
                "op `random_normal` failed: invalid normal scale -1"
            );
            assert!(
                !dot_ran.load(Ordering::SeqCst),
                "{engine:?}: the dependent op was skipped"
            );
            assert_eq!(engine.stats().skipped_ops, 1);
            engine.wait_for_all().unwrap(); // reported once already
        }
    });
}

/// test_exc_multiple_waits: a second, independent failure is reported too (by wait_for_var and
/// by wait_for_all).
#[test]
fn a_second_independent_failure_also_errors() {
    within_deadline("exc_multiple_waits", || {
        for engine in engines() {
            for use_wait_all in [false, true] {
                for name in ["first", "second"] {
                    let a = engine.new_variable();
                    push_failing(&engine, name, std::slice::from_ref(&a));
                    let err = if use_wait_all {
                        engine.wait_for_all().unwrap_err()
                    } else {
                        engine.wait_for_var(&a).unwrap_err()
                    };
                    assert_eq!(failed_op(&err), name, "{engine:?}");
                }
            }
        }
    });
}

/// test_exc_post_fail, per var: an op with two outputs fails; each output's wait reports the
/// failure once (waiting on one does not clear the other), and `wait_for_all` has nothing
/// left to report.
#[test]
fn a_two_output_failure_is_reported_once_per_var() {
    within_deadline("exc_post_fail", || {
        for engine in engines() {
            let (a, b) = (engine.new_variable(), engine.new_variable());
            push_failing(&engine, "copyto", &[a.clone(), b.clone()]);
            assert_eq!(failed_op(&engine.wait_for_var(&a).unwrap_err()), "copyto");
            engine.wait_for_var(&a).unwrap();
            assert_eq!(failed_op(&engine.wait_for_var(&b).unwrap_err()), "copyto");
            engine.wait_for_var(&b).unwrap();
            engine.wait_for_all().unwrap();
        }
    });
}

/// `wait_for_all` reports a failure no var's wait has reported, and clears every var it
/// reached.
#[test]
fn wait_for_all_clears_every_var_a_failure_reached() {
    within_deadline("wait_for_all clears", || {
        for engine in engines() {
            let (a, b) = (engine.new_variable(), engine.new_variable());
            push_failing(&engine, "copyto", &[a.clone(), b.clone()]);
            assert_eq!(failed_op(&engine.wait_for_all().unwrap_err()), "copyto");
            engine.wait_for_var(&a).unwrap();
            engine.wait_for_var(&b).unwrap();
        }
    });
}

/// test_exc_mutable_var_fail: a = dot(a, a) with a tainted still reports the failure; the taint
/// spreads through reads to what the skipped op writes.
#[test]
fn taint_propagates_through_reads_and_writes() {
    within_deadline("exc_mutable_var_fail", || {
        for engine in engines() {
            let (a, b, c) = (
                engine.new_variable(),
                engine.new_variable(),
                engine.new_variable(),
            );
            push_failing(&engine, "random_normal", std::slice::from_ref(&a));
            push_ok(
                &engine,
                "dot",
                std::slice::from_ref(&a),
                std::slice::from_ref(&a),
            );
            push_ok(
                &engine,
                "relu",
                std::slice::from_ref(&a),
                std::slice::from_ref(&b),
            );
            push_ok(
                &engine,
                "sum",
                std::slice::from_ref(&b),
                std::slice::from_ref(&c),
            );
            let err = engine.wait_for_var(&c).unwrap_err();
            assert_eq!(failed_op(&err), "random_normal", "{engine:?}");
            // Reported per var: a and b, which the failure reached too, report it to their own
            // waiters, once each.
            for var in [&a, &b] {
                let err = engine.wait_for_var(var).unwrap_err();
                assert_eq!(failed_op(&err), "random_normal", "{engine:?}");
                engine.wait_for_var(var).unwrap();
            }
            assert_eq!(c.version(), 1, "a skipped op still completes its writes");
        }
    });
}

/// test_multiple_waitalls: wait_for_all errors once, then is clean.
#[test]
fn wait_for_all_reports_the_first_failure_once() {
    within_deadline("multiple_waitalls", || {
        for engine in engines() {
            let (a, b) = (engine.new_variable(), engine.new_variable());
            push_failing(&engine, "first-failure", std::slice::from_ref(&a));
            engine.wait_for_all().unwrap_err();
            push_failing(&engine, "second-failure", std::slice::from_ref(&b));
            let err = engine.wait_for_all().unwrap_err();
            assert_eq!(failed_op(&err), "second-failure");
            engine.wait_for_all().unwrap();
            engine.wait_for_var(&b).unwrap(); // cleared by wait_for_all
        }
    });
}

/// test_exc_symbolic: a failure in the middle of a graph; everything downstream is skipped,
/// independent branches run, NoSkip ops run but carry the failure on.
#[test]
fn a_failure_mid_graph_skips_downstream_only() {
    within_deadline("exc_symbolic", || {
        for engine in engines() {
            let vars: Vec<Var> = (0..6).map(|_| engine.new_variable()).collect();
            let [x, y, z, out, side, logged] = &vars[..] else {
                unreachable!()
            };
            push_ok(&engine, "init", &[], &[x.clone(), y.clone(), z.clone()]);
            push_ok(
                &engine,
                "esum",
                &[x.clone(), y.clone()],
                std::slice::from_ref(out),
            );
            push_failing(&engine, "random_normal", std::slice::from_ref(z));
            let downstream = push_ok(
                &engine,
                "dot",
                &[out.clone(), z.clone()],
                std::slice::from_ref(out),
            );
            let branch = push_ok(
                &engine,
                "branch",
                std::slice::from_ref(x),
                std::slice::from_ref(side),
            );
            let logger_ran = Arc::new(AtomicBool::new(false));
            let flag = logger_ran.clone();
            let spec = OpSpec::new("logger")
                .reads(std::slice::from_ref(out))
                .writes(std::slice::from_ref(logged))
                .prop(FnProperty::NoSkip);
            engine
                .push_sync(spec, move |_| {
                    flag.store(true, Ordering::SeqCst);
                    Ok(())
                })
                .unwrap();
            let err = engine.wait_for_all().unwrap_err();
            assert_eq!(failed_op(&err), "random_normal");
            assert!(!downstream.load(Ordering::SeqCst));
            assert!(branch.load(Ordering::SeqCst), "an independent branch runs");
            assert!(logger_ran.load(Ordering::SeqCst), "NoSkip ops run anyway");
        }
    });
}

#[test]
fn panics_and_dropped_completions_are_failures_naming_the_op() {
    within_deadline("panics", || {
        for engine in engines() {
            let (a, b, c) = (
                engine.new_variable(),
                engine.new_variable(),
                engine.new_variable(),
            );
            engine
                .push_sync(
                    OpSpec::new("panicky").writes(std::slice::from_ref(&a)),
                    |_| panic!("boom"),
                )
                .unwrap();
            let err = engine.wait_for_var(&a).unwrap_err();
            assert_eq!(err.to_string(), "op `panicky` failed: panicked: boom");
            assert!(matches!(
                err.failure().unwrap().cause,
                FailureCause::Panic(_)
            ));

            engine
                .push_async(
                    OpSpec::new("forgetful").writes(std::slice::from_ref(&b)),
                    |_, completion| {
                        drop(completion);
                    },
                )
                .unwrap();
            let err = engine.wait_for_var(&b).unwrap_err();
            assert_eq!(
                err.to_string(),
                "op `forgetful` dropped its completion without calling it"
            );

            // An async op that panics after handing its completion to another thread: the
            // completion still decides; the panic is contained.
            let (tx, rx) = std::sync::mpsc::channel();
            engine
                .push_async(
                    OpSpec::new("hand-off").writes(std::slice::from_ref(&c)),
                    move |_, completion| {
                        tx.send(completion).unwrap();
                        panic!("after hand-off");
                    },
                )
                .unwrap();
            let completer = std::thread::spawn(move || rx.recv().unwrap().fail("late failure"));
            let err = engine.wait_for_var(&c).unwrap_err();
            assert_eq!(err.to_string(), "op `hand-off` failed: late failure");
            completer.join().unwrap();

            // The engine keeps working.
            let d = engine.new_variable();
            push_ok(&engine, "after-errors", &[], std::slice::from_ref(&d));
            engine.wait_for_var(&d).unwrap();
            engine.wait_for_all().unwrap();
        }
    });
}

#[test]
fn waits_inside_an_op_are_refused_instead_of_deadlocking() {
    within_deadline("wait inside worker", || {
        for engine in engines() {
            let var = engine.new_variable();
            let refusals = Arc::new(AtomicUsize::new(0));
            let (inner, count, seen) = (engine.clone(), refusals.clone(), var.clone());
            let spec = OpSpec::new("impatient").writes(std::slice::from_ref(&var));
            engine
                .push_sync(spec, move |_| {
                    for result in [
                        inner.wait_for_all(),
                        inner.wait_for_var(&seen),
                        inner.stop(),
                    ] {
                        match result {
                            Err(EngineError::WaitInsideWorker { op })
                                if op.as_str() == "impatient" =>
                            {
                                count.fetch_add(1, Ordering::SeqCst);
                            }
                            other => panic!("expected a refusal, got {other:?}"),
                        }
                    }
                    Ok(())
                })
                .unwrap();
            engine.wait_for_all().unwrap();
            assert_eq!(refusals.load(Ordering::SeqCst), 3, "{engine:?}");
            let message = EngineError::WaitInsideWorker {
                op: "impatient".into(),
            }
            .to_string();
            assert!(message.contains("push a dependent op instead"), "{message}");
        }
    });
}

#[test]
fn gpu_pushes_are_refused_with_the_fix() {
    for engine in engines() {
        let var = engine.new_variable();
        let err = engine
            .push_sync(
                OpSpec::new("conv")
                    .ctx(Context::gpu(0))
                    .writes(std::slice::from_ref(&var)),
                |_| Ok(()),
            )
            .unwrap_err();
        assert!(matches!(err, EngineError::NoGpuBackend { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            "cannot run op `conv` on gpu0: this engine has no GPU backend; GPU ops run on the \
             per-device engine with --gpus auto, cuda or sim:N (ENGINETOP_GPUS, \
             EngineOptions::gpus), or run the op on cpu(i)"
        );
        assert_eq!(var.version(), 0);
        engine.wait_for_all().unwrap();
    }
    let bulking = Engine::new(EngineOptions::new(EngineKind::Pooled, 1)).unwrap();
    bulking.set_bulk_size(8).unwrap();
    let err = bulking
        .push_sync(OpSpec::new("bulked-gpu").ctx(Context::gpu(1)), |_| Ok(()))
        .unwrap_err();
    assert!(
        matches!(err, EngineError::NoGpuBackend { .. }),
        "refused at push, not at flush"
    );
    bulking.wait_for_all().unwrap();
    let per_device = Engine::new(EngineOptions::new(EngineKind::PerDevice, 1)).unwrap();
    let err = per_device
        .push_sync(OpSpec::new("far").ctx(Context::cpu(99)), |_| Ok(()))
        .unwrap_err();
    assert!(
        err.to_string().contains("only cpu0 to cpu15 exist"),
        "{err}"
    );
}

/// An op's error with a cause of its own, as a kernel reading a file might return.
#[derive(Debug, thiserror::Error)]
#[error("reading the weights")]
struct ReadWeights(#[source] std::io::Error);

/// A failure's message quotes the op's error; printed as a chain (`{:#}`, the binary's
/// `error:` line) every cause appears once: the op's error is not repeated as a source.
#[test]
fn a_failure_printed_as_a_chain_names_each_cause_once() {
    within_deadline("failure chain", || {
        for engine in engines() {
            let var = engine.new_variable();
            engine
                .push_sync(
                    OpSpec::new("load").writes(std::slice::from_ref(&var)),
                    |_| {
                        let missing =
                            std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
                        Err(ReadWeights(missing).into())
                    },
                )
                .unwrap();
            let err = engine.wait_for_var(&var).unwrap_err();
            assert_eq!(err.to_string(), "op `load` failed: reading the weights");
            assert_eq!(
                format!("{:#}", anyhow::Error::new(err)),
                "op `load` failed: reading the weights: no such file",
                "{engine:?}"
            );
        }
    });
}
