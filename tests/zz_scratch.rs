use enginetop::device::sim::{SimBackend, SimModel};
use enginetop::device::work::GpuWork;
use enginetop::engine::{Context, Engine, EngineKind, EngineOptions, OpSpec};
use enginetop::profiler::{Profiler, ProfilerOptions, StreamProbe};
use std::sync::Arc;

#[test]
fn scratch() {
    let profiler = Profiler::new(ProfilerOptions::default()).expect("profiler starts");
    let options = EngineOptions::new(EngineKind::PerDevice, 2)
        .gpu_backend(Arc::new(SimBackend::new(1, SimModel::default())))
        .stream_observer(Arc::new(StreamProbe::new(&profiler)));
    let engine = Engine::new(options).expect("engine starts");
    let w = engine.new_variable();
    for _ in 0..20 {
        let gemm = OpSpec::new("gemm")
            .ctx(Context::gpu(0))
            .writes(std::slice::from_ref(&w));
        engine
            .push_sync(gemm, move |run| {
                run.stream()
                    .unwrap()
                    .launch(GpuWork::gemm(1024, 1024, 1024))?;
                Ok(())
            })
            .unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(20));
    profiler.flush();
    let s = profiler.snapshot();
    println!("at {} {:#?}", s.at_ns, s.streams);
    let (ev, _) = (profiler.snapshot(), 0);
    let _ = ev;
    engine.wait_for_all().unwrap();
    profiler.flush();
    let s = profiler.snapshot();
    println!("at {} {:#?}", s.at_ns, s.streams);
}
