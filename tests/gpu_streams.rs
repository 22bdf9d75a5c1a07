//! The stream semantics suite: written once against `&dyn GpuDevice`, run against the
//! simulated GPU always and against CUDA when a usable GPU is present. Without one, every
//! CUDA test prints `skipped: <reason>` straight to the terminal (past the test harness's
//! output capture) and returns.
//!
//! Nothing here asserts a duration. Order is established with host gates (a stream held at a
//! gate until the test opens it) and checked with callbacks and the observer's timestamps.
//! Waits that could hang if the semantics were wrong have watchdogs that open the gate after
//! a long timeout and make the test fail instead.
mod common;

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::Duration;

use common::streams::{StreamLog, Watchdog};
use common::DEADLINE;
use enginetop::device::cuda::{probe as probe_cuda, CudaBackend};
use enginetop::device::sim::{SimBackend, SimModel};
use enginetop::device::stream::{GpuBackend, GpuDevice, StreamError, StreamKind, StreamObserver};
use enginetop::device::work::{CopyDir, ElementwiseOp, GpuWork, HostGate, OpTag};

// ---------------------------------------------------------------------------------------------
// Harness

/// A device under test, with its observer.
struct Subject {
    device: Arc<dyn GpuDevice>,
    recorder: Arc<StreamLog>,
}

fn open(backend: &dyn GpuBackend, ordinal: u32) -> Subject {
    let recorder = Arc::new(StreamLog::default());
    let observer: Arc<dyn StreamObserver> = recorder.clone();
    let device = backend
        .open(ordinal, Some(observer))
        .unwrap_or_else(|err| panic!("opening {:?} GPU {ordinal}: {err}", backend.kind()));
    Subject { device, recorder }
}

/// Two simulated GPUs with the default model (an H100 slowed 100x: the small kernels used
/// here take microseconds, the launch latency 0.5 ms).
fn sim_backend() -> SimBackend {
    SimBackend::new(2, SimModel::default())
}

/// The CUDA backend, or why there is none.
fn cuda_backend() -> &'static Result<CudaBackend, String> {
    static CUDA: OnceLock<Result<CudaBackend, String>> = OnceLock::new();
    CUDA.get_or_init(|| {
        let probe = probe_cuda();
        match (&probe.problem, probe.usable()) {
            (_, true) => Ok(CudaBackend::from_probe(probe)),
            (Some(problem), false) => Err(problem.to_string()),
            (None, false) => Err("the CUDA driver found no GPU".to_string()),
        }
    })
}

/// Prints where the harness does not capture it, so a skip is always seen.
fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Generates, for each check, `sim::<check>` (always runs) and `cuda::<check>` (runs on a
/// usable GPU, prints why it was skipped otherwise).
macro_rules! semantics_suite {
    ($($check:ident),* $(,)?) => {
        mod sim {
            $(
                #[test]
                fn $check() {
                    super::$check(&super::sim_backend());
                }
            )*
        }
        mod cuda {
            $(
                #[test]
                fn $check() {
                    match super::cuda_backend() {
                        Ok(backend) => super::$check(backend),
                        Err(reason) => super::say(&format!(
                            "cuda::{}: skipped: {reason}",
                            stringify!($check)
                        )),
                    }
                }
            )*
        }
    };
}

semantics_suite!(
    fifo_within_a_stream,
    launch_returns_before_the_work_runs,
    events_record_query_and_synchronize,
    a_never_recorded_event_is_complete,
    cross_stream_wait_orders_work_without_a_host_sync,
    a_later_record_does_not_move_an_earlier_barrier,
    a_fault_is_reported_at_the_next_sync_exactly_once,
    invalid_work_is_refused_at_launch_without_poisoning,
    copy_and_compute_streams_overlap,
    elapsed_time_is_nonnegative_and_additive,
    events_of_another_device,
    a_panicking_callback_does_not_stop_the_stream,
    event_mode_chain_launches_everything_without_blocking,
);

/// A callback that appends `label` to `log`.
fn log_to(log: &Arc<Mutex<Vec<u64>>>, label: u64) -> impl FnOnce(Result<(), StreamError>) {
    let log = Arc::clone(log);
    move |result| {
        result.unwrap_or_else(|err| panic!("op {label} failed: {err}"));
        log.lock().unwrap().push(label);
    }
}

fn small_op(i: u64) -> GpuWork {
    let work = match i % 3 {
        0 => GpuWork::gemm(64, 64, 64),
        1 => GpuWork::elementwise(ElementwiseOp::Add, 4096),
        _ => GpuWork::elementwise(ElementwiseOp::Relu, 1024),
    };
    work.op(OpTag::new(i))
}

// ---------------------------------------------------------------------------------------------
// The semantics

fn fifo_within_a_stream(backend: &dyn GpuBackend) {
    let subject = open(backend, 0);
    let stream = subject.device.new_stream(StreamKind::Compute).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    // A big GEMM first, then small work of every kind: a stream that let short work pass
    // long work would reorder them.
    stream
        .launch(
            GpuWork::gemm(512, 512, 512)
                .op(OpTag::new(0))
                .on_complete(log_to(&log, 0)),
        )
        .unwrap();
    for i in 1..24 {
        stream
            .launch(small_op(i).on_complete(log_to(&log, i)))
            .unwrap();
    }
    stream.synchronize().unwrap();
    assert_eq!(*log.lock().unwrap(), (0..24).collect::<Vec<_>>());
    for i in 1..24 {
        assert!(
            subject.recorder.start(i) >= subject.recorder.end(i - 1),
            "op {i} started before op {} ended",
            i - 1
        );
    }
}

fn launch_returns_before_the_work_runs(backend: &dyn GpuBackend) {
    let subject = open(backend, 0);
    let stream = subject.device.new_stream(StreamKind::Compute).unwrap();
    let gate = HostGate::new();
    let watchdog = Watchdog::guard(&gate);
    let ran = Arc::new(AtomicBool::new(false));
    stream.launch(GpuWork::host_wait(&gate)).unwrap();
    let flag = Arc::clone(&ran);
    stream
        .launch(GpuWork::gemm(64, 64, 64).on_complete(move |result| {
            result.unwrap();
            flag.store(true, Ordering::SeqCst);
        }))
        .unwrap();
    assert!(!ran.load(Ordering::SeqCst), "launch waited for the work");
    assert!(!stream.query(), "work is pending behind the gate");
    gate.open();
    stream.synchronize().unwrap();
    assert!(
        ran.load(Ordering::SeqCst),
        "synchronize returned before the callback ran"
    );
    assert!(stream.query());
    watchdog.disarm("the gate");
}

fn events_record_query_and_synchronize(backend: &dyn GpuBackend) {
    let subject = open(backend, 0);
    let stream = subject.device.new_stream(StreamKind::Compute).unwrap();
    let event = subject.device.new_event().unwrap();
    assert_eq!(event.generation(), 0);
    for generation in 1..=2 {
        let gate = HostGate::new();
        let watchdog = Watchdog::guard(&gate);
        stream.launch(GpuWork::host_wait(&gate)).unwrap();
        stream.record(&event).unwrap();
        assert_eq!(event.generation(), generation);
        assert!(
            !event.query(),
            "recorded behind a closed gate, yet complete"
        );
        gate.open();
        event.synchronize().unwrap();
        assert!(event.query());
        watchdog.disarm("the gate");
    }
    stream.synchronize().unwrap();
}

fn a_never_recorded_event_is_complete(backend: &dyn GpuBackend) {
    let subject = open(backend, 0);
    let stream = subject.device.new_stream(StreamKind::Compute).unwrap();
    let event = subject.device.new_event().unwrap();
    assert!(event.query());
    event.synchronize().unwrap();
    stream.wait_event(&event).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    stream
        .launch(small_op(1).on_complete(log_to(&log, 1)))
        .unwrap();
    stream.synchronize().unwrap();
    assert_eq!(*log.lock().unwrap(), [1]);
    assert_eq!(event.elapsed_ms(&event), Err(StreamError::EventNotRecorded));
}

fn cross_stream_wait_orders_work_without_a_host_sync(backend: &dyn GpuBackend) {
    let subject = open(backend, 0);
    let a = subject.device.new_stream(StreamKind::Compute).unwrap();
    let b = subject.device.new_stream(StreamKind::Compute).unwrap();
    let event = subject.device.new_event().unwrap();
    let gate = HostGate::new();
    let watchdog = Watchdog::guard(&gate);
    let log = Arc::new(Mutex::new(Vec::new()));

    a.launch(GpuWork::host_wait(&gate)).unwrap();
    a.launch(small_op(1).on_complete(log_to(&log, 1))).unwrap();
    a.record(&event).unwrap();
    b.wait_event(&event).unwrap(); // returns at once: the gate is still closed
    b.launch(small_op(2).on_complete(log_to(&log, 2))).unwrap();

    assert!(
        log.lock().unwrap().is_empty(),
        "work ran past a closed gate"
    );
    assert!(!b.query(), "b's work must wait for a's event");
    gate.open();
    b.synchronize().unwrap();
    assert_eq!(*log.lock().unwrap(), [1, 2], "b's op completed before a's");
    assert!(subject.recorder.start(2) >= subject.recorder.end(1));
    a.synchronize().unwrap();
    watchdog.disarm("the gate");
}

fn a_later_record_does_not_move_an_earlier_barrier(backend: &dyn GpuBackend) {
    let subject = open(backend, 0);
    let a = subject.device.new_stream(StreamKind::Compute).unwrap();
    let b = subject.device.new_stream(StreamKind::Compute).unwrap();
    let event = subject.device.new_event().unwrap();
    let (first, second) = (HostGate::new(), HostGate::new());
    let watchdogs = [Watchdog::guard(&first), Watchdog::guard(&second)];

    a.launch(GpuWork::host_wait(&first)).unwrap();
    a.record(&event).unwrap(); // generation 1
    b.wait_event(&event).unwrap(); // waits on generation 1
    b.launch(small_op(1)).unwrap();
    a.launch(GpuWork::host_wait(&second)).unwrap();
    a.record(&event).unwrap(); // generation 2, held by the second gate

    first.open();
    // b needs generation 1 only; if the barrier had moved to generation 2 this would hang
    // until the watchdog opened the second gate.
    b.synchronize().unwrap();
    assert!(!second.is_open(), "b waited for the later generation");
    assert!(!event.query(), "generation 2 is still held");
    second.open();
    a.synchronize().unwrap();
    assert!(event.query());
    for watchdog in watchdogs {
        watchdog.disarm("a gate");
    }
}

fn a_fault_is_reported_at_the_next_sync_exactly_once(backend: &dyn GpuBackend) {
    let subject = open(backend, 0);
    let faulty = subject.device.new_stream(StreamKind::Compute).unwrap();
    let other = subject.device.new_stream(StreamKind::CopyH2D).unwrap();
    let results = Arc::new(Mutex::new(Vec::new()));
    let keep = |i: u64| {
        let results = Arc::clone(&results);
        move |result: Result<(), StreamError>| results.lock().unwrap().push((i, result))
    };

    faulty.launch(small_op(1).on_complete(keep(1))).unwrap();
    faulty
        .launch(
            GpuWork::gemm(64, 64, 64)
                .op(OpTag::new(2))
                .fail_with("injected fault")
                .on_complete(keep(2)),
        )
        .unwrap();
    // The host does not know yet, so this launch may be accepted; it must not run.
    let behind = faulty.launch(small_op(3).on_complete(keep(3)));

    let first = faulty.synchronize();
    let Err(StreamError::Fault(fault)) = &first else {
        panic!("the first sync after a fault must report it, got {first:?}");
    };
    assert_eq!(fault.op, Some(OpTag::new(2)));
    assert!(matches!(faulty.synchronize(), Err(StreamError::Poisoned(f)) if f == *fault));
    assert!(matches!(other.synchronize(), Err(StreamError::Poisoned(_))));
    assert!(matches!(
        subject.device.synchronize(),
        Err(StreamError::Poisoned(_))
    ));
    assert!(matches!(
        other.launch(small_op(4)),
        Err(StreamError::Poisoned(_))
    ));

    let results = results.lock().unwrap();
    assert!(matches!(results[0], (1, Ok(()))), "{results:?}");
    assert!(
        matches!(&results[1], (2, Err(StreamError::Fault(f))) if f == fault),
        "{results:?}"
    );
    if behind.is_ok() {
        assert!(
            matches!(results[2], (3, Err(StreamError::Poisoned(_)))),
            "{results:?}"
        );
    }
    let poisoned = StreamError::Poisoned(fault.clone()).to_string();
    assert!(poisoned.contains("open the device again"), "{poisoned}");
}

fn invalid_work_is_refused_at_launch_without_poisoning(backend: &dyn GpuBackend) {
    let subject = open(backend, 0);
    let stream = subject.device.new_stream(StreamKind::Compute).unwrap();
    let refused = stream.launch(GpuWork::gemm(u32::MAX, 2, 2)).unwrap_err();
    assert!(
        matches!(refused, StreamError::InvalidWork { .. }),
        "{refused}"
    );
    assert!(
        refused.to_string().contains("gemm 4294967295x2x2"),
        "{refused}"
    );
    let too_big = GpuWork::copy(CopyDir::HostToDevice, u64::MAX);
    assert!(matches!(
        stream.launch(too_big),
        Err(StreamError::InvalidWork { .. })
    ));
    stream.launch(small_op(1)).unwrap();
    stream.synchronize().unwrap();
}

fn copy_and_compute_streams_overlap(backend: &dyn GpuBackend) {
    let subject = open(backend, 0);
    let copy = subject.device.new_stream(StreamKind::CopyH2D).unwrap();
    let compute = subject.device.new_stream(StreamKind::Compute).unwrap();
    let gate = HostGate::new();
    let watchdog = Watchdog::guard(&gate);

    copy.launch(GpuWork::copy(CopyDir::HostToDevice, 1 << 20).op(OpTag::new(1)))
        .unwrap();
    copy.launch(GpuWork::host_wait(&gate).op(OpTag::new(2)))
        .unwrap();
    assert!(
        gate.wait_reached(DEADLINE),
        "the copy stream never reached its gate"
    );
    // The copy stream is now busy (held at the gate). The compute stream must run anyway.
    let (done, finished) = mpsc::channel();
    compute
        .launch(
            GpuWork::gemm(256, 256, 256)
                .op(OpTag::new(3))
                .on_complete(move |result| {
                    let _ = done.send(result);
                }),
        )
        .unwrap();
    let result = finished.recv_timeout(DEADLINE);
    assert!(
        matches!(result, Ok(Ok(()))),
        "the compute stream did not run while the copy stream was busy: {result:?}"
    );
    gate.open();
    copy.synchronize().unwrap();
    compute.synchronize().unwrap();
    watchdog.disarm("the gate");

    // The stream events show it: the GEMM ran inside the copy stream's busy interval.
    let recorder = &subject.recorder;
    assert!(recorder.start(2) <= recorder.start(3));
    assert!(recorder.end(3) <= recorder.end(2));
}

fn elapsed_time_is_nonnegative_and_additive(backend: &dyn GpuBackend) {
    let subject = open(backend, 0);
    let stream = subject.device.new_stream(StreamKind::Compute).unwrap();
    let events: Vec<_> = (0..3)
        .map(|_| subject.device.new_event().unwrap())
        .collect();
    stream.record(&events[0]).unwrap();
    stream.launch(GpuWork::gemm(256, 256, 256)).unwrap();
    stream.record(&events[1]).unwrap();
    stream
        .launch(GpuWork::elementwise(ElementwiseOp::Axpy, 1 << 16))
        .unwrap();
    stream.record(&events[2]).unwrap();
    let first = events[0].elapsed_ms(&events[1]).unwrap();
    let second = events[1].elapsed_ms(&events[2]).unwrap();
    let whole = events[0].elapsed_ms(&events[2]).unwrap();
    assert!(first >= 0.0 && second >= 0.0, "{first} {second}");
    assert!(
        (first + second - whole).abs() <= 0.01 + whole * 1e-4,
        "{first} + {second} != {whole}"
    );
    assert!(events[0].elapsed_ms(&events[0]).unwrap().abs() < 1e-6);
    stream.synchronize().unwrap();
}

fn events_of_another_device(backend: &dyn GpuBackend) {
    if backend.devices().len() < 2 {
        say("events_of_another_device: skipped: needs two GPUs");
        return;
    }
    let (zero, one) = (open(backend, 0), open(backend, 1));
    let stream = zero.device.new_stream(StreamKind::Compute).unwrap();
    let theirs = one.device.new_event().unwrap();
    let refused = stream.record(&theirs).unwrap_err();
    assert!(
        matches!(refused, StreamError::ForeignEvent { what: "device", .. }),
        "{refused}"
    );
    // Waiting on another device's event is allowed, as in CUDA.
    let their_stream = one.device.new_stream(StreamKind::Compute).unwrap();
    their_stream.launch(small_op(1)).unwrap();
    their_stream.record(&theirs).unwrap();
    stream.wait_event(&theirs).unwrap();
    stream.launch(small_op(2)).unwrap();
    stream.synchronize().unwrap();
    assert!(theirs.query());
}

fn a_panicking_callback_does_not_stop_the_stream(backend: &dyn GpuBackend) {
    let subject = open(backend, 0);
    let stream = subject.device.new_stream(StreamKind::Compute).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    stream
        .launch(small_op(1).on_complete(|_| panic!("a callback panicked (on purpose)")))
        .unwrap();
    stream
        .launch(small_op(2).on_complete(log_to(&log, 2)))
        .unwrap();
    stream.synchronize().unwrap();
    assert_eq!(*log.lock().unwrap(), [2]);
}

fn event_mode_chain_launches_everything_without_blocking(backend: &dyn GpuBackend) {
    const OPS: u64 = 16;
    let subject = open(backend, 0);
    let streams = [
        subject.device.new_stream(StreamKind::Compute).unwrap(),
        subject.device.new_stream(StreamKind::Compute).unwrap(),
    ];
    let events = [
        subject.device.new_event().unwrap(),
        subject.device.new_event().unwrap(),
    ];
    let gate = HostGate::new();
    let watchdog = Watchdog::guard(&gate);
    let log = Arc::new(Mutex::new(Vec::new()));
    streams[0].launch(GpuWork::host_wait(&gate)).unwrap();
    for i in 0..OPS {
        let stream = &streams[i as usize % 2];
        if i > 0 {
            stream.wait_event(&events[(i as usize - 1) % 2]).unwrap();
        }
        stream
            .launch(small_op(i).on_complete(log_to(&log, i)))
            .unwrap();
        stream.record(&events[i as usize % 2]).unwrap();
    }
    // The whole chain was launched while its first op was held: no launch, wait or record
    // blocked the host.
    assert!(log.lock().unwrap().is_empty());
    gate.open();
    for stream in &streams {
        stream.synchronize().unwrap();
    }
    assert_eq!(*log.lock().unwrap(), (0..OPS).collect::<Vec<_>>());
    for i in 1..OPS {
        assert!(subject.recorder.start(i) >= subject.recorder.end(i - 1));
    }
    watchdog.disarm("the gate");
}

// ---------------------------------------------------------------------------------------------
// Simulator-only facts

#[test]
fn sim_a_fault_skips_queued_work_on_every_stream_of_the_device() {
    let subject = open(&sim_backend(), 0);
    let held = subject.device.new_stream(StreamKind::CopyD2H).unwrap();
    let faulty = subject.device.new_stream(StreamKind::Compute).unwrap();
    let gate = HostGate::new();
    let watchdog = Watchdog::guard(&gate);
    let skipped = Arc::new(Mutex::new(None));
    held.launch(GpuWork::host_wait(&gate)).unwrap();
    let slot = Arc::clone(&skipped);
    held.launch(small_op(1).on_complete(move |result| *slot.lock().unwrap() = Some(result)))
        .unwrap();
    faulty.launch(small_op(2).fail_with("boom")).unwrap();
    assert!(matches!(faulty.synchronize(), Err(StreamError::Fault(_))));
    gate.open();
    assert!(matches!(held.synchronize(), Err(StreamError::Poisoned(_))));
    assert!(matches!(
        *skipped.lock().unwrap(),
        Some(Err(StreamError::Poisoned(_)))
    ));
    watchdog.disarm("the gate");
    // A device opened again is clean.
    let fresh = open(&sim_backend(), 0);
    let stream = fresh.device.new_stream(StreamKind::Compute).unwrap();
    stream.launch(small_op(3)).unwrap();
    stream.synchronize().unwrap();
}

#[test]
fn sim_items_take_at_least_their_modelled_time() {
    // 2 * 100^3 FLOPs at 0.4 GFLOP/s = 5 ms of modelled device time. Sleeping never returns
    // early, so this lower bound holds however loaded the machine is.
    let model = SimModel {
        compute_gflops: 0.4,
        ..SimModel::instant()
    };
    let gemm = GpuWork::gemm(100, 100, 100);
    assert_eq!(model.duration(&gemm.kernel), Duration::from_millis(5));
    let subject = open(&SimBackend::new(1, model), 0);
    let stream = subject.device.new_stream(StreamKind::Compute).unwrap();
    let (before, after) = (
        subject.device.new_event().unwrap(),
        subject.device.new_event().unwrap(),
    );
    stream.record(&before).unwrap();
    stream.launch(gemm).unwrap();
    stream.record(&after).unwrap();
    assert!(before.elapsed_ms(&after).unwrap() >= 5.0);
}

#[test]
fn sim_executor_threads_are_named_after_their_streams() {
    let subject = open(&sim_backend(), 1);
    let stream = subject.device.new_stream(StreamKind::CopyH2D).unwrap();
    assert_eq!(stream.id().to_string(), "gpu1-h2d-0");
    let name = Arc::new(Mutex::new(String::new()));
    let slot = Arc::clone(&name);
    stream
        .launch(small_op(1).on_complete(move |_| {
            *slot.lock().unwrap() = thread::current().name().unwrap_or("").to_string();
        }))
        .unwrap();
    stream.synchronize().unwrap();
    assert_eq!(*name.lock().unwrap(), "gpu1-h2d-0-exec");
    let second = subject.device.new_stream(StreamKind::CopyH2D).unwrap();
    assert_eq!(second.id().to_string(), "gpu1-h2d-1");
}

#[test]
fn sim_dropping_a_stream_finishes_its_queued_work() {
    let subject = open(&sim_backend(), 0);
    let stream = subject.device.new_stream(StreamKind::Compute).unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    for i in 0..8 {
        let done = Arc::clone(&done);
        stream
            .launch(small_op(i).on_complete(move |_| {
                done.fetch_add(1, Ordering::SeqCst);
            }))
            .unwrap();
    }
    drop(stream);
    assert_eq!(done.load(Ordering::SeqCst), 8);
}

#[test]
fn sim_another_opening_is_another_device() {
    let sim = open(&sim_backend(), 0);
    let other = open(&sim_backend(), 0);
    // Another *opening* of the same ordinal is another device (another context, in CUDA).
    let stream = sim.device.new_stream(StreamKind::Compute).unwrap();
    let theirs = other.device.new_event().unwrap();
    assert!(matches!(
        stream.record(&theirs),
        Err(StreamError::ForeignEvent { what: "device", .. })
    ));
}
