//! The event-mode protocol seen from outside: streams overlap, a chain of GPU ops is launched
//! ahead in event mode and op by op in sync mode, host-side dependents and waits wait for the
//! device work, late device failures are reported, and nothing is lost at stop or drop.
//!
//! No test asserts a duration. Order is forced with host gates (a stream held until the test
//! opens it) and checked with the stream observer's events; every gate has a watchdog that
//! opens it after a long timeout and fails the test instead of hanging it.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Instant;

use common::streams::{is_end, is_start, is_submit, StreamLog, Watchdog};
use common::{within_deadline, DEADLINE};
use enginetop::device::sim::{SimBackend, SimModel};
use enginetop::device::stream::StreamKind;
use enginetop::device::work::{CopyDir, GpuWork, HostGate, OpTag};
use enginetop::engine::{
    Context, Engine, EngineEvent, EngineKind, EngineObserver, EngineOptions, FnProperty,
    GpuSyncMode, OpName, OpSpec, Var,
};

// ---------------------------------------------------------------------------------------------
// Harness

/// Ops that started, by name.
#[derive(Default)]
struct Started(Mutex<Vec<OpName>>);

impl EngineObserver for Started {
    fn on_event(&self, event: EngineEvent) {
        if let EngineEvent::Started { op, .. } = event {
            self.0.lock().unwrap().push(op);
        }
    }
}

impl Started {
    fn has(&self, name: &str) -> bool {
        self.0.lock().unwrap().iter().any(|op| op.as_str() == name)
    }
}

struct Rig {
    engine: Engine,
    streams: Arc<StreamLog>,
    started: Arc<Started>,
}

fn rig(mode: GpuSyncMode, model: SimModel) -> Rig {
    let streams = Arc::new(StreamLog::default());
    let started = Arc::new(Started::default());
    let options = EngineOptions::new(EngineKind::PerDevice, 2)
        .gpu_backend(Arc::new(SimBackend::new(1, model)))
        .gpu_sync(mode)
        .stream_observer(streams.clone())
        .observer(started.clone());
    Rig {
        engine: Engine::new(options).expect("engine starts"),
        streams,
        started,
    }
}

/// Waits (yielding) until `condition` holds; panics after [`DEADLINE`].
fn await_true(what: &str, condition: impl Fn() -> bool) {
    let start = Instant::now();
    while !condition() {
        assert!(start.elapsed() < DEADLINE, "{what}: never happened");
        thread::yield_now();
    }
}

fn gpu(prop: FnProperty) -> OpSpec<'static> {
    OpSpec::new("gpu-op").ctx(Context::gpu(0)).prop(prop)
}

/// Pushes a GPU op writing `var` that holds its stream at `gate`, then stores `value` into
/// `cell` in stream order; returns its op tag once it has run its body.
fn gated_write(engine: &Engine, var: &Var, gate: &HostGate, cell: &Arc<AtomicU64>, value: u64) {
    let (gate, cell) = (gate.clone(), Arc::clone(cell));
    let spec = OpSpec::new("gated-write")
        .ctx(Context::gpu(0))
        .writes(std::slice::from_ref(var));
    engine
        .push_sync(spec, move |run| {
            let stream = run.stream().expect("a GPU op has a stream");
            stream.launch(GpuWork::host_wait(&gate))?;
            stream.launch_host(move || cell.store(value, Ordering::SeqCst))?;
            Ok(())
        })
        .unwrap();
}

// ---------------------------------------------------------------------------------------------
// Overlap and the chain

#[test]
fn a_copy_stream_and_a_compute_stream_run_concurrently() {
    within_deadline("copy/compute overlap", || {
        let rig = rig(GpuSyncMode::Event, SimModel::default());
        let gate = HostGate::new();
        let watchdog = Watchdog::guard(&gate);
        let (copied, computed) = (rig.engine.new_variable(), rig.engine.new_variable());
        let (tags, tag) = mpsc::channel();
        let (held, tags_copy) = (gate.clone(), tags.clone());
        let copy = gpu(FnProperty::CopyToGpu).writes(std::slice::from_ref(&copied));
        rig.engine
            .push_sync(copy, move |run| {
                let stream = run.stream().unwrap();
                tags_copy.send((stream.op(), stream.id())).unwrap();
                stream.launch(GpuWork::copy(CopyDir::HostToDevice, 1 << 16))?;
                stream.launch(GpuWork::host_wait(&held))?;
                Ok(())
            })
            .unwrap();
        let (copy_op, copy_stream) = tag.recv().unwrap();
        assert!(
            gate.wait_reached(DEADLINE),
            "the copy stream reached the gate"
        );
        // The copy stream is busy (held) from here until the gate opens.
        let compute = gpu(FnProperty::Normal).writes(std::slice::from_ref(&computed));
        rig.engine
            .push_sync(compute, move |run| {
                let stream = run.stream().unwrap();
                tags.send((stream.op(), stream.id())).unwrap();
                stream.launch(GpuWork::gemm(256, 256, 256))?;
                Ok(())
            })
            .unwrap();
        let (compute_op, compute_stream) = tag.recv().unwrap();
        rig.engine.wait_for_var(&computed).unwrap(); // the GEMM ran while the copy stream is held
        assert!(!gate.is_open());
        gate.open();
        watchdog.disarm("overlap");
        rig.engine.wait_for_all().unwrap();

        assert_eq!(
            (copy_stream.kind, compute_stream.kind),
            (StreamKind::CopyH2D, StreamKind::Compute)
        );
        let copy_span = (
            rig.streams.first(copy_op, is_start),
            rig.streams.last(copy_op, is_end),
        );
        let compute_span = (
            rig.streams.first(compute_op, is_start),
            rig.streams.first(compute_op, is_end),
        );
        assert!(
            copy_span.0 < compute_span.0 && compute_span.1 < copy_span.1,
            "the GEMM ran inside the copy stream's busy span: copy {copy_span:?}, gemm \
             {compute_span:?}"
        );
    });
}

/// The ops of a chain as their bodies report them (chain index, op tag), and the log of the
/// chain's host updates.
type Chain = (mpsc::Receiver<(usize, OpTag)>, Arc<Mutex<Vec<usize>>>);

/// A chain of `ops` dependent GPU ops alternating compute and copy streams (each writes one
/// var); op 0 holds its stream at `gate`. Returns the op tags in chain order and the log of
/// the host updates.
fn push_chain(
    engine: &Engine,
    ops: usize,
    gate: Option<&HostGate>,
    work: fn(usize) -> GpuWork,
) -> Chain {
    let var = engine.new_variable();
    let log = Arc::new(Mutex::new(Vec::new()));
    let (tags, tag) = mpsc::channel();
    for i in 0..ops {
        let prop = if i % 2 == 0 {
            FnProperty::Normal
        } else {
            FnProperty::CopyToGpu
        };
        let (log, tags) = (Arc::clone(&log), tags.clone());
        let gate = gate.filter(|_| i == 0).cloned();
        let spec = gpu(prop).writes(std::slice::from_ref(&var));
        engine
            .push_sync(spec, move |run| {
                let stream = run.stream().unwrap();
                tags.send((i, stream.op())).unwrap();
                if let Some(gate) = &gate {
                    stream.launch(GpuWork::host_wait(gate))?;
                }
                stream.launch(work(i))?;
                stream.launch_host(move || log.lock().unwrap().push(i))?;
                Ok(())
            })
            .unwrap();
    }
    (tag, log)
}

fn chain_work(i: usize) -> GpuWork {
    if i % 2 == 0 {
        GpuWork::gemm(128, 128, 128)
    } else {
        GpuWork::copy(CopyDir::HostToDevice, 16 << 10)
    }
}

fn in_chain_order(tag: &mpsc::Receiver<(usize, OpTag)>, ops: usize) -> Vec<OpTag> {
    let mut tags: Vec<(usize, OpTag)> = tag.iter().take(ops).collect();
    tags.sort_by_key(|&(i, _)| i);
    tags.into_iter().map(|(_, tag)| tag).collect()
}

#[test]
fn event_mode_launches_a_whole_chain_while_its_first_op_is_held() {
    within_deadline("event-mode chain", || {
        let ops = 24;
        let rig = rig(GpuSyncMode::Event, SimModel::instant());
        let gate = HostGate::new();
        let watchdog = Watchdog::guard(&gate);
        let (tag, log) = push_chain(&rig.engine, ops, Some(&gate), chain_work);
        // Every op completes for the engine at launch, so the whole chain gets launched
        // behind events while op 0's stream is still held.
        await_true("every op of the chain submitted", || {
            rig.streams.submitted_ops() == ops
        });
        assert!(
            log.lock().unwrap().is_empty(),
            "no update ran before the gate"
        );
        gate.open();
        watchdog.disarm("event-mode chain");
        rig.engine.wait_for_all().unwrap();
        assert_eq!(*log.lock().unwrap(), (0..ops).collect::<Vec<_>>());
        let tags = in_chain_order(&tag, ops);
        for pair in tags.windows(2) {
            // Launched before its predecessor's work ended: the device never waits for the host.
            assert!(rig.streams.first(pair[1], is_submit) < rig.streams.last(pair[0], is_end));
        }
    });
}

#[test]
fn per_op_sync_mode_launches_each_op_after_the_previous_one_ended() {
    within_deadline("sync-mode chain", || {
        let ops = 24;
        let rig = rig(GpuSyncMode::PerOp, SimModel::instant());
        let (tag, log) = push_chain(&rig.engine, ops, None, chain_work);
        rig.engine.wait_for_all().unwrap();
        assert_eq!(*log.lock().unwrap(), (0..ops).collect::<Vec<_>>());
        let tags = in_chain_order(&tag, ops);
        for pair in tags.windows(2) {
            assert!(
                rig.streams.last(pair[0], is_end) <= rig.streams.first(pair[1], is_submit),
                "op launched before its predecessor's host sync"
            );
        }
    });
}

#[test]
fn the_long_chain_in_both_modes_for_the_record() {
    // Printed, not asserted (no timing assertions): `enginetop bench gpu` reports the same.
    within_deadline("chain timings", || {
        let ops = 100;
        let mut per_op = Vec::new();
        for mode in [GpuSyncMode::Event, GpuSyncMode::PerOp] {
            let rig = rig(mode, SimModel::default());
            let started = Instant::now();
            let (_tags, log) = push_chain(&rig.engine, ops, None, chain_work);
            rig.engine.wait_for_all().unwrap();
            let elapsed = started.elapsed();
            assert_eq!(log.lock().unwrap().len(), ops);
            per_op.push(elapsed.as_nanos() as f64 / ops as f64);
        }
        eprintln!(
            "chain of {ops} GPU ops on the default sim: event {:.0} ns/op, per-op sync {:.0} \
             ns/op ({:.1}x)",
            per_op[0],
            per_op[1],
            per_op[1] / per_op[0]
        );
    });
}

// ---------------------------------------------------------------------------------------------
// Host-side dependents

#[test]
fn a_cpu_op_after_a_gpu_write_waits_for_the_device_work() {
    within_deadline("host fence", || {
        let rig = rig(GpuSyncMode::Event, SimModel::instant());
        let (var, cell, seen) = (
            rig.engine.new_variable(),
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicU64::new(u64::MAX)),
        );
        let gate = HostGate::new();
        let watchdog = Watchdog::guard(&gate);
        gated_write(&rig.engine, &var, &gate, &cell, 1);
        let (reader_cell, reader_seen) = (Arc::clone(&cell), Arc::clone(&seen));
        rig.engine
            .push_sync(
                OpSpec::new("cpu-reader").reads(std::slice::from_ref(&var)),
                move |_| {
                    reader_seen.store(reader_cell.load(Ordering::SeqCst), Ordering::SeqCst);
                    Ok(())
                },
            )
            .unwrap();
        // The reader has been dispatched (the GPU write completed for the engine at launch)
        // and is waiting for the fence: its body must not have run.
        await_true("the reader started", || rig.started.has("cpu-reader"));
        assert!(gate.wait_reached(DEADLINE));
        assert_eq!(
            seen.load(Ordering::SeqCst),
            u64::MAX,
            "ran before the device work"
        );
        gate.open();
        watchdog.disarm("host fence");
        rig.engine.wait_for_all().unwrap();
        assert_eq!(seen.load(Ordering::SeqCst), 1);
    });
}

/// Calls `wait` on another thread while `var`'s GPU writer is held at a gate that already
/// completed for the engine; checks that `wait` returns only after the gate opened and the
/// update ran.
fn waits_for_device_work(wait: fn(&Engine, &Var)) {
    let rig = rig(GpuSyncMode::Event, SimModel::instant());
    let (var, cell) = (rig.engine.new_variable(), Arc::new(AtomicU64::new(0)));
    let gate = HostGate::new();
    let watchdog = Watchdog::guard(&gate);
    gated_write(&rig.engine, &var, &gate, &cell, 7);
    await_true("the write completed for the engine", || var.version() == 1);
    let opened = Arc::new(AtomicBool::new(false));
    let waiter = {
        let (engine, var, opened, cell) = (
            rig.engine.clone(),
            var.clone(),
            Arc::clone(&opened),
            Arc::clone(&cell),
        );
        thread::spawn(move || {
            wait(&engine, &var);
            assert!(
                opened.load(Ordering::SeqCst),
                "returned before the gate opened"
            );
            assert_eq!(cell.load(Ordering::SeqCst), 7, "returned before the update");
        })
    };
    assert!(gate.wait_reached(DEADLINE));
    opened.store(true, Ordering::SeqCst);
    gate.open();
    watchdog.disarm("wait");
    waiter.join().unwrap();
}

#[test]
fn wait_for_var_waits_for_the_device_work_even_when_the_var_is_ready() {
    within_deadline("wait_for_var fast path", || {
        waits_for_device_work(|engine, var| engine.wait_for_var(var).unwrap());
    });
}

#[test]
fn wait_for_all_waits_for_the_device_work() {
    within_deadline("wait_for_all", || {
        waits_for_device_work(|engine, _| engine.wait_for_all().unwrap());
    });
}

#[test]
fn deleting_a_var_on_a_gpu_waits_for_its_device_work() {
    within_deadline("delete_variable on a GPU", || {
        for mode in [GpuSyncMode::Event, GpuSyncMode::PerOp] {
            let rig = rig(mode, SimModel::instant());
            let (var, cell) = (rig.engine.new_variable(), Arc::new(AtomicU64::new(0)));
            let gate = HostGate::new();
            let watchdog = Watchdog::guard(&gate);
            gated_write(&rig.engine, &var, &gate, &cell, 3);
            let (freed_cell, freed) = (Arc::clone(&cell), Arc::new(AtomicU64::new(0)));
            let freed_seen = Arc::clone(&freed);
            rig.engine
                .delete_variable(&var, Context::gpu(0), move |_| {
                    freed_seen.store(freed_cell.load(Ordering::SeqCst), Ordering::SeqCst);
                })
                .unwrap();
            assert!(gate.wait_reached(DEADLINE));
            gate.open();
            watchdog.disarm("delete");
            rig.engine.wait_for_all().unwrap();
            assert_eq!(
                freed.load(Ordering::SeqCst),
                3,
                "{mode}: freed before the update"
            );
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Failures

/// A GPU op whose kernel faults (held at `gate` first, if given), a GPU op reading its
/// output, a CPU op reading that.
fn faulting_chain(engine: &Engine, gate: Option<&HostGate>) -> (Var, Var, Arc<AtomicUsize>) {
    let (x, y) = (engine.new_variable(), engine.new_variable());
    let cpu_ran = Arc::new(AtomicUsize::new(0));
    let spec = OpSpec::new("faulty-kernel")
        .ctx(Context::gpu(0))
        .writes(std::slice::from_ref(&x));
    let gate = gate.cloned();
    engine
        .push_sync(spec, move |run| {
            let stream = run.stream().unwrap();
            if let Some(gate) = &gate {
                stream.launch(GpuWork::host_wait(gate))?;
            }
            stream.launch(GpuWork::gemm(64, 64, 64).fail_with("illegal address"))?;
            Ok(())
        })
        .unwrap();
    let spec = OpSpec::new("gpu-reader")
        .ctx(Context::gpu(0))
        .reads(std::slice::from_ref(&x))
        .writes(std::slice::from_ref(&y));
    engine
        .push_sync(spec, |run| {
            run.stream().unwrap().launch(GpuWork::gemm(8, 8, 8))?;
            Ok(())
        })
        .unwrap();
    let counter = Arc::clone(&cpu_ran);
    engine
        .push_sync(
            OpSpec::new("cpu-reader").reads(std::slice::from_ref(&y)),
            move |_| {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok(())
            },
        )
        .unwrap();
    (x, y, cpu_ran)
}

#[test]
fn per_op_sync_mode_fails_the_faulting_op_and_skips_its_dependents() {
    within_deadline("fault, sync mode", || {
        let rig = rig(GpuSyncMode::PerOp, SimModel::instant());
        let (x, y, cpu_ran) = faulting_chain(&rig.engine, None);
        let err = rig.engine.wait_for_var(&y).unwrap_err().to_string();
        assert!(
            err.starts_with("op `faulty-kernel` failed: device fault: ")
                && err.contains("illegal address"),
            "{err}"
        );
        // Reported per var: `x`, which the fault reached too, reports it to its own waiter,
        // once.
        let err = rig.engine.wait_for_var(&x).unwrap_err().to_string();
        assert!(err.starts_with("op `faulty-kernel` failed"), "{err}");
        assert!(rig.engine.wait_for_var(&x).is_ok(), "reported once for x");
        // The CPU reader reads `y` as the wait above does, so it may be skipped after that
        // wait returned: look at it once every op has completed.
        rig.engine.wait_for_all().unwrap();
        assert_eq!(
            cpu_ran.load(Ordering::SeqCst),
            0,
            "the CPU reader was skipped"
        );
        assert!(rig.engine.stats().skipped_ops >= 2);
    });
}

#[test]
fn event_mode_reports_a_late_fault_at_the_wait_and_taints_the_output() {
    within_deadline("fault, event mode", || {
        let rig = rig(GpuSyncMode::Event, SimModel::instant());
        let gate = HostGate::new();
        let watchdog = Watchdog::guard(&gate);
        let (x, _y, cpu_ran) = faulting_chain(&rig.engine, Some(&gate));
        // The GPU reader is launched behind the faulty kernel (which completed for the engine
        // at launch) before the fault happens.
        let reader = OpName::new("gpu-reader").id();
        await_true("the GPU reader launched", || {
            let events = rig.streams.0.lock().unwrap();
            events
                .iter()
                .any(|e| e.op.name == reader && is_submit(&e.phase))
        });
        gate.open();
        watchdog.disarm("fault, event mode");
        let err = rig.engine.wait_for_var(&x).unwrap_err().to_string();
        assert!(
            err.starts_with("op `faulty-kernel` failed: device fault: ")
                && err.contains("illegal address"),
            "{err}"
        );
        // The GPU reader was launched behind the fault; the poisoned device skipped its work,
        // its fence reports that, so the CPU reader of its output is skipped.
        let err = rig.engine.wait_for_all().unwrap_err().to_string();
        assert!(
            err.starts_with("op `gpu-reader` failed: gpu0 is poisoned"),
            "{err}"
        );
        assert_eq!(cpu_ran.load(Ordering::SeqCst), 0);
        rig.engine.wait_for_all().unwrap();
    });
}

#[test]
fn a_panicking_host_body_fails_its_op_in_both_modes() {
    within_deadline("host body panic", || {
        for mode in [GpuSyncMode::Event, GpuSyncMode::PerOp] {
            let rig = rig(mode, SimModel::instant());
            let var = rig.engine.new_variable();
            let spec = OpSpec::new("bad-host-body")
                .ctx(Context::gpu(0))
                .writes(std::slice::from_ref(&var));
            rig.engine
                .push_sync(spec, |run| {
                    run.stream()
                        .unwrap()
                        .launch_host(|| panic!("host body broke"))?;
                    Ok(())
                })
                .unwrap();
            let err = rig.engine.wait_for_var(&var).unwrap_err().to_string();
            assert_eq!(
                err, "op `bad-host-body` failed: panicked: host body broke",
                "{mode}"
            );
            // The stream goes on.
            let after = gpu(FnProperty::Normal).writes(std::slice::from_ref(&var));
            rig.engine.push_sync(after, |_| Ok(())).unwrap();
            rig.engine.wait_for_all().unwrap();
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Lifecycle

#[test]
fn stop_start_and_drop_run_every_gpu_op() {
    within_deadline("GPU stop/start/drop", || {
        for mode in [GpuSyncMode::Event, GpuSyncMode::PerOp] {
            let rig = rig(mode, SimModel::h100_class(1.0));
            let count = Arc::new(AtomicUsize::new(0));
            let push_some = |engine: &Engine, var: &Var| {
                for i in 0..50 {
                    let count = Arc::clone(&count);
                    let prop = [FnProperty::Normal, FnProperty::CopyFromGpu][i % 2];
                    let spec = gpu(prop).writes(std::slice::from_ref(var));
                    engine
                        .push_sync(spec, move |run| {
                            let stream = run.stream().unwrap();
                            stream.launch(chain_work(i))?;
                            stream.launch_host(move || {
                                count.fetch_add(1, Ordering::SeqCst);
                            })?;
                            Ok(())
                        })
                        .unwrap();
                }
            };
            let var = rig.engine.new_variable();
            push_some(&rig.engine, &var);
            rig.engine.stop().unwrap();
            assert_eq!(
                count.load(Ordering::SeqCst),
                50,
                "{mode}: stop ran everything"
            );
            assert!(
                rig.engine.stats().workers.gpu.is_empty(),
                "{mode}: workers joined"
            );
            rig.engine.start().unwrap();
            assert_eq!(
                rig.engine.stats().workers.gpu.len(),
                3,
                "{mode}: gpu0 reopened"
            );
            push_some(&rig.engine, &var);
            let Rig { engine, .. } = rig;
            drop(engine); // the last handle: runs everything, device work included
            assert_eq!(
                count.load(Ordering::SeqCst),
                100,
                "{mode}: drop ran everything"
            );
        }
    });
}
