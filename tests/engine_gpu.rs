//! MXNet's engine suite with ops spread over CPU and simulated GPU contexts (RandSumExpr,
//! VarVersion), in both GPU sync modes; where GPU ops run (threads, streams, queues); and how
//! GPU pushes are refused without GPUs.
//!
//! "Data on the GPU" is simulated by running a GPU op's update in its stream's order
//! (`OpStream::launch_host`), so results must be bit-exact against sequential evaluation.

mod common;

use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Mutex};

use common::rand_sum::{evaluate, fresh_data, RandSum};
use common::within_deadline;
use enginetop::device::cuda;
use enginetop::device::discover::GpuSelection;
use enginetop::device::sim::{SimBackend, SimModel};
use enginetop::device::work::{CopyDir, ElementwiseOp, GpuWork};
use enginetop::engine::{
    Context, Engine, EngineError, EngineKind, EngineOptions, FnProperty, GpuSyncMode, OpSpec,
    RunContext, Var,
};

const MODES: [GpuSyncMode; 2] = [GpuSyncMode::Event, GpuSyncMode::PerOp];

/// A per-device engine with `gpus` simulated GPUs timed by `model`.
fn gpu_engine(mode: GpuSyncMode, gpus: u32, model: SimModel) -> Engine {
    let options = EngineOptions::new(EngineKind::PerDevice, 2)
        .gpu_backend(Arc::new(SimBackend::new(gpus, model)))
        .gpu_sync(mode);
    Engine::new(options).expect("engine starts")
}

/// One RandSumExpr op and where it runs.
struct Workload {
    sum: RandSum,
    ctx: Context,
    prop: FnProperty,
    priority: i32,
}

const GPU_PROPS: [FnProperty; 4] = [
    FnProperty::Normal,
    FnProperty::CopyToGpu,
    FnProperty::CopyFromGpu,
    FnProperty::GpuPrioritized,
];

/// MXNet's GenerateWorkload (write ~ U[0, vars), 2..19 reads, time ~ U[1, 9] us), each op
/// placed on cpu0, gpu0 or gpu1, GPU ops with a random property and priority.
fn generate(count: usize, vars: usize, seed: u64) -> Vec<Workload> {
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..count)
        .map(|_| {
            let ctx = match rng.u32(0..3) {
                0 => Context::cpu(0),
                gpu => Context::gpu(gpu - 1),
            };
            Workload {
                sum: RandSum::draw(&mut rng, vars),
                ctx,
                prop: if ctx.is_cpu() {
                    FnProperty::Normal
                } else {
                    GPU_PROPS[rng.usize(..GPU_PROPS.len())]
                },
                priority: rng.i32(-3..4),
            }
        })
        .collect()
}

/// The device work a GPU op of `prop` launches before its update.
fn device_work(prop: FnProperty) -> GpuWork {
    match prop {
        FnProperty::CopyToGpu => GpuWork::copy(CopyDir::HostToDevice, 4096),
        FnProperty::CopyFromGpu => GpuWork::copy(CopyDir::DeviceToHost, 4096),
        _ => GpuWork::elementwise(ElementwiseOp::Add, 1024),
    }
}

fn run_on_engine(engine: &Engine, workloads: &Arc<Vec<Workload>>, vars: usize) -> Vec<u64> {
    let data = fresh_data(vars);
    let handles: Vec<Var> = (0..vars).map(|_| engine.new_variable()).collect();
    for index in 0..workloads.len() {
        let wl = &workloads[index];
        let reads: Vec<Var> = wl
            .sum
            .reads
            .iter()
            .filter(|&&r| r != wl.sum.write)
            .map(|&r| handles[r].clone())
            .collect();
        let (workloads, data) = (Arc::clone(workloads), Arc::clone(&data));
        let spec = OpSpec::new("rand-sum")
            .ctx(wl.ctx)
            .prop(wl.prop)
            .priority(wl.priority)
            .reads(&reads)
            .writes(std::slice::from_ref(&handles[wl.sum.write]));
        engine
            .push_async(spec, move |run, completion| {
                let Some(stream) = run.stream() else {
                    evaluate(&workloads[index].sum, &data);
                    return completion.done();
                };
                let prop = workloads[index].prop;
                stream.launch(device_work(prop)).expect("launch");
                stream
                    .launch_host(move || evaluate(&workloads[index].sum, &data))
                    .expect("launch_host");
                completion.done();
            })
            .unwrap();
    }
    engine.wait_for_all().unwrap();
    data.iter().map(|v| v.load(Ordering::Relaxed)).collect()
}

#[test]
fn rand_sum_expr_over_cpu_and_gpus_is_bit_exact_in_both_modes() {
    within_deadline("RandSumExpr over CPU and GPUs", || {
        let vars = 100;
        // Real H100 speed: 5 us launch latency, kernels and copies of a few microseconds.
        let engines: Vec<_> = MODES
            .map(|mode| (mode, gpu_engine(mode, 2, SimModel::h100_class(1.0))))
            .into();
        for repeat in 0..2u64 {
            let workloads = Arc::new(generate(10_000, vars, 0x6e_0000 + repeat));
            let expected = fresh_data(vars);
            workloads.iter().for_each(|wl| evaluate(&wl.sum, &expected));
            let expected: Vec<u64> = expected.iter().map(|v| v.load(Ordering::Relaxed)).collect();
            for (mode, engine) in &engines {
                let got = run_on_engine(engine, &workloads, vars);
                assert_eq!(got, expected, "{mode} mode, repeat {repeat}");
            }
        }
        for (mode, engine) in &engines {
            let stats = engine.stats();
            assert_eq!((stats.pending, stats.failed_ops), (0, 0), "{mode}");
            let gpu_pools: Vec<_> = stats.workers.gpu.iter().map(|p| p.name.as_str()).collect();
            assert_eq!(
                gpu_pools,
                [
                    "gpu0-compute",
                    "gpu0-copy",
                    "gpu0-prio",
                    "gpu1-compute",
                    "gpu1-copy",
                    "gpu1-prio"
                ],
                "{mode}"
            );
            assert!(stats.workers.gpu.iter().all(|pool| pool.tasks_run > 0));
        }
    });
}

#[test]
fn rand_sum_expr_with_completions_called_from_the_stream() {
    within_deadline("RandSumExpr, async completions", || {
        let vars = 40;
        let workloads = Arc::new(generate(2_000, vars, 0xa5));
        let expected = fresh_data(vars);
        workloads.iter().for_each(|wl| evaluate(&wl.sum, &expected));
        let expected: Vec<u64> = expected.iter().map(|v| v.load(Ordering::Relaxed)).collect();
        for mode in MODES {
            let engine = gpu_engine(mode, 2, SimModel::instant());
            let data = fresh_data(vars);
            let handles: Vec<Var> = (0..vars).map(|_| engine.new_variable()).collect();
            for index in 0..workloads.len() {
                let wl = &workloads[index];
                let reads: Vec<Var> = wl.sum.reads.iter().map(|&r| handles[r].clone()).collect();
                let (workloads, data) = (Arc::clone(&workloads), Arc::clone(&data));
                let spec = OpSpec::new("async-sum")
                    .ctx(wl.ctx)
                    .prop(wl.prop)
                    .reads(&reads)
                    .writes(std::slice::from_ref(&handles[wl.sum.write]));
                engine
                    .push_async(spec, move |run, completion| {
                        let Some(stream) = run.stream() else {
                            evaluate(&workloads[index].sum, &data);
                            return completion.done();
                        };
                        // The completion is called by the stream, after the update ran.
                        let prop = workloads[index].prop;
                        stream
                            .launch_host(move || evaluate(&workloads[index].sum, &data))
                            .unwrap();
                        let last = device_work(prop).on_complete(move |_| completion.done());
                        stream.launch(last).unwrap();
                    })
                    .unwrap();
            }
            engine.wait_for_all().unwrap();
            let got: Vec<u64> = data.iter().map(|v| v.load(Ordering::Relaxed)).collect();
            assert_eq!(got, expected, "{mode} mode");
        }
    });
}

#[test]
fn var_version_counts_gpu_writes_only() {
    within_deadline("VarVersion on a GPU", || {
        for mode in MODES {
            let engine = gpu_engine(mode, 1, SimModel::instant());
            let var = engine.new_variable();
            let vars = std::slice::from_ref(&var);
            let read = engine
                .new_operator(OpSpec::new("read").reads(vars), |_, c| c.done())
                .unwrap();
            let write = engine
                .new_operator(OpSpec::new("write").writes(vars), |run, c| {
                    let stream = run.stream().expect("a GPU op has a stream");
                    stream.launch(GpuWork::gemm(8, 8, 8)).unwrap();
                    c.done();
                })
                .unwrap();
            for _ in 0..10 {
                engine.push(&read, Context::gpu(0), 0).unwrap();
            }
            engine.wait_for_all().unwrap();
            assert_eq!(var.version(), 0, "{mode}: reads leave the version");
            for _ in 0..10 {
                engine.push(&write, Context::gpu(0), 0).unwrap();
            }
            engine.wait_for_all().unwrap();
            assert_eq!(var.version(), 10, "{mode}: ten writes");
        }
    });
}

/// What an op's body saw: its thread and its stream.
fn where_it_ran(run: &RunContext) -> (String, Option<String>) {
    let thread = std::thread::current().name().unwrap_or("?").to_string();
    (thread, run.stream().map(|stream| stream.id().to_string()))
}

#[test]
fn ops_run_on_the_workers_and_streams_their_property_names() {
    within_deadline("GPU workers and streams", || {
        let engine = gpu_engine(GpuSyncMode::Event, 1, SimModel::instant());
        let cases = [
            (
                Context::gpu(0),
                FnProperty::Normal,
                "gpu0-compute-",
                "gpu0-compute-",
            ),
            (
                Context::gpu(0),
                FnProperty::CopyToGpu,
                "gpu0-copy-",
                "gpu0-h2d-",
            ),
            (
                Context::gpu(0),
                FnProperty::CopyFromGpu,
                "gpu0-copy-",
                "gpu0-d2h-",
            ),
            (
                Context::gpu(0),
                FnProperty::GpuPrioritized,
                "gpu0-prio-0",
                "gpu0-compute-2",
            ),
            (
                Context::gpu(0),
                FnProperty::Async,
                "gpu0-compute-",
                "gpu0-compute-",
            ),
        ];
        for (ctx, prop, thread_prefix, stream_prefix) in cases {
            for _ in 0..8 {
                let (tx, rx) = mpsc::channel();
                let spec = OpSpec::new("where").ctx(ctx).prop(prop);
                engine
                    .push_sync(spec, move |run| {
                        tx.send(where_it_ran(&run)).unwrap();
                        Ok(())
                    })
                    .unwrap();
                let (thread, stream) = rx.recv().unwrap();
                let stream = stream.expect("a GPU op has a stream");
                assert!(thread.starts_with(thread_prefix), "{prop:?}: {thread}");
                assert!(stream.starts_with(stream_prefix), "{prop:?}: {stream}");
                if prop == FnProperty::Normal {
                    // Compute worker k owns compute stream k.
                    assert_eq!(thread.rsplit('-').next(), stream.rsplit('-').next());
                }
            }
        }
        let (tx, rx) = mpsc::channel();
        engine
            .push_sync(OpSpec::new("on-cpu"), move |run| {
                tx.send(where_it_ran(&run)).unwrap();
                Ok(())
            })
            .unwrap();
        let (thread, stream) = rx.recv().unwrap();
        assert!(thread.starts_with("cpu0-w"), "{thread}");
        assert_eq!(stream, None, "a CPU op has no stream");
        engine.wait_for_all().unwrap();
    });
}

#[test]
fn gpu_prioritized_ops_run_highest_priority_first() {
    within_deadline("GPU priority queue", || {
        let engine = gpu_engine(GpuSyncMode::Event, 1, SimModel::instant());
        let order = Arc::new(Mutex::new(Vec::new()));
        // Hold the one prioritized worker so the others queue behind it.
        let (release, hold) = mpsc::channel::<()>();
        let (started, is_started) = mpsc::channel();
        let spec = OpSpec::new("hold")
            .ctx(Context::gpu(0))
            .prop(FnProperty::GpuPrioritized);
        engine
            .push_sync(spec, move |_| {
                started.send(()).unwrap();
                hold.recv().unwrap();
                Ok(())
            })
            .unwrap();
        is_started.recv().unwrap();
        for (label, priority) in [("low", 0), ("high-1", 9), ("mid", 5), ("high-2", 9)] {
            let order = Arc::clone(&order);
            let spec = OpSpec::new(label)
                .ctx(Context::gpu(0))
                .prop(FnProperty::GpuPrioritized)
                .priority(priority);
            engine
                .push_sync(spec, move |_| {
                    order.lock().unwrap().push(label);
                    Ok(())
                })
                .unwrap();
        }
        release.send(()).unwrap();
        engine.wait_for_all().unwrap();
        assert_eq!(*order.lock().unwrap(), ["high-1", "high-2", "mid", "low"]);
    });
}

#[test]
fn without_gpus_a_gpu_push_is_refused_naming_the_fix() {
    let no_gpus = Engine::new(EngineOptions::new(EngineKind::PerDevice, 1)).unwrap();
    let err = no_gpus
        .push_sync(OpSpec::new("conv").ctx(Context::gpu(0)), |_| Ok(()))
        .unwrap_err();
    assert!(matches!(err, EngineError::NoGpuBackend { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "cannot run op `conv` on gpu0: this engine has no GPU backend; GPU ops run on the \
         per-device engine with --gpus auto, cuda or sim:N (ENGINETOP_GPUS, \
         EngineOptions::gpus), or run the op on cpu(i)"
    );
    assert!(no_gpus.gpus().unwrap().is_none());
    for kind in [EngineKind::Naive, EngineKind::Pooled] {
        let options = EngineOptions::new(kind, 1)
            .gpu_backend(Arc::new(SimBackend::new(1, SimModel::instant())));
        let engine = Engine::new(options).unwrap();
        let err = engine
            .push_sync(OpSpec::new("conv").ctx(Context::gpu(0)), |_| Ok(()))
            .unwrap_err();
        assert!(
            matches!(err, EngineError::NoGpuBackend { .. }),
            "{kind}: {err:?}"
        );
    }
}

#[test]
fn a_gpu_the_backend_lacks_is_refused_with_the_range() {
    let engine = gpu_engine(GpuSyncMode::Event, 2, SimModel::instant());
    let err = engine
        .push_sync(OpSpec::new("far").ctx(Context::gpu(2)), |_| Ok(()))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot run op `far` on gpu2: the sim backend has 2 GPU(s), gpu0 to gpu1; use one \
         of those (--gpus sim:N simulates N)"
    );
    engine.wait_for_all().unwrap();
}

#[test]
fn the_selection_is_resolved_like_the_gpus_flag() {
    let usable = cuda::probe().usable();
    let auto =
        Engine::new(EngineOptions::new(EngineKind::PerDevice, 1).gpus(GpuSelection::Auto)).unwrap();
    let choice = auto.gpus().unwrap().expect("auto gives GPUs");
    if usable {
        eprintln!("a CUDA GPU is present: the fallback checks are skipped");
        return;
    }
    let notice = choice.notice.expect("auto without CUDA says it simulates");
    assert!(notice.ends_with("; using a simulated GPU"), "{notice}");
    auto.push_sync(OpSpec::new("on-sim").ctx(Context::gpu(0)), |run| {
        assert!(run.stream().unwrap().device().info().simulated);
        Ok(())
    })
    .unwrap();
    auto.wait_for_all().unwrap();

    let cuda =
        Engine::new(EngineOptions::new(EngineKind::PerDevice, 1).gpus(GpuSelection::Cuda)).unwrap();
    let err = cuda
        .push_sync(OpSpec::new("on-cuda").ctx(Context::gpu(0)), |_| Ok(()))
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.starts_with("cannot run op `on-cuda` on gpu0: CUDA is not available: ")
            && message.ends_with("; use --gpus sim:1 for a simulated GPU"),
        "{message}"
    );
    assert!(matches!(cuda.gpus(), Err(EngineError::GpuSetup(_))));
}

#[test]
fn from_config_takes_the_gpus_and_the_sync_mode() {
    let config = enginetop::config::RuntimeConfig {
        gpus: GpuSelection::Sim(2),
        gpu_sync: GpuSyncMode::PerOp,
        gpu_workers: 3,
        ..Default::default()
    };
    let options = EngineOptions::from_config(&config);
    assert_eq!(
        (options.gpus, options.gpu_sync, options.gpu_workers.compute),
        (GpuSelection::Sim(2), GpuSyncMode::PerOp, 3)
    );
    let engine = Engine::new(options.sim_model_for_tests()).unwrap();
    engine
        .push_sync(OpSpec::new("on-gpu1").ctx(Context::gpu(1)), |_| Ok(()))
        .unwrap();
    engine.wait_for_all().unwrap();
    let compute = &engine.stats().workers.gpu[0];
    assert_eq!(
        (compute.name.as_str(), compute.num_threads),
        ("gpu1-compute", 3)
    );
}

/// `from_config` keeps the default (slowed-down) model; these tests want instant GPUs.
trait InstantSim {
    fn sim_model_for_tests(self) -> Self;
}

impl InstantSim for EngineOptions {
    fn sim_model_for_tests(mut self) -> Self {
        self.sim_model = SimModel::instant();
        self
    }
}

#[test]
fn bench_gpu_prints_both_modes_and_the_ratio() {
    use common::cli::{run, text};
    let args = [
        "bench", "gpu", "--gpus", "sim:1", "--ops", "8", "--reps", "1",
    ];
    let output = run(&[&args[..], &["--json"]].concat());
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "stderr: {stderr}");
    let lines: Vec<serde_json::Value> = text(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let modes: Vec<&str> = lines.iter().map(|l| l["mode"].as_str().unwrap()).collect();
    assert_eq!(modes, ["event", "sync"]);
    for line in &lines {
        assert_eq!(
            (line["bench"].as_str(), line["ops"].as_u64()),
            (Some("gpu_chain"), Some(8))
        );
        assert!(line["ns_per_op"].as_f64().unwrap() > 0.0, "{line}");
        assert!(line["sync_over_event"].as_f64().unwrap() > 0.0, "{line}");
        assert!(
            line["device"].as_str().unwrap().starts_with("simulated"),
            "{line}"
        );
    }
    let table = run(&[&args[..], &["--mode", "event"]].concat());
    let stdout = text(&table.stdout);
    assert!(
        stdout.contains("\nevent ") && !stdout.contains("sync / event"),
        "{stdout}"
    );

    let refused = run(&["bench", "gpu", "--gpus", "none"]);
    assert!(!refused.status.success());
    assert_eq!(
        text(&refused.stderr).trim(),
        "error: bench gpu needs a GPU and --gpus is none: pass --gpus auto, cuda or sim:1"
    );
}
