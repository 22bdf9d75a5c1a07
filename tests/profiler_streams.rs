//! GPU stream work reaches the profiler: the engine's GPU ops, run on a simulated GPU with a
//! `StreamProbe`, show up as stream occupancy in the live snapshot and as per-stream tracks in
//! an exported trace that validates.

use std::sync::Arc;

use enginetop::device::sim::{SimBackend, SimModel};
use enginetop::device::work::{CopyDir, GpuWork};
use enginetop::engine::{Context, Engine, EngineKind, EngineOptions, FnProperty, OpSpec};
use enginetop::profiler::{validate_file, Profiler, ProfilerOptions, StreamProbe};

#[test]
fn gpu_ops_appear_as_stream_tracks_and_the_trace_validates() {
    let profiler = Profiler::new(ProfilerOptions::default()).expect("profiler starts");
    let options = EngineOptions::new(EngineKind::PerDevice, 2)
        .gpu_backend(Arc::new(SimBackend::new(1, SimModel::instant())))
        .stream_observer(Arc::new(StreamProbe::new(&profiler)));
    let engine = Engine::new(options).expect("engine starts");
    let (weights, activations) = (engine.new_variable(), engine.new_variable());
    for step in 0..8 {
        let copy = OpSpec::new("copy_in")
            .ctx(Context::gpu(0))
            .prop(FnProperty::CopyToGpu)
            .writes(std::slice::from_ref(&activations));
        engine
            .push_sync(copy, |run| {
                let stream = run.stream().expect("a GPU op has a stream");
                stream.launch(GpuWork::copy(CopyDir::HostToDevice, 1 << 16))?;
                Ok(())
            })
            .unwrap();
        let gemm = OpSpec::new("gemm")
            .ctx(Context::gpu(0))
            .reads(std::slice::from_ref(&activations))
            .writes(std::slice::from_ref(&weights));
        engine
            .push_sync(gemm, move |run| {
                let stream = run.stream().expect("a GPU op has a stream");
                stream.launch(GpuWork::gemm(64, 64, 64 + step))?;
                Ok(())
            })
            .unwrap();
    }
    engine.wait_for_all().unwrap();
    profiler.flush();
    let snapshot = profiler.snapshot();
    assert!(
        !snapshot.streams.is_empty(),
        "the snapshot shows the GPU's streams"
    );
    let path = std::env::temp_dir().join(format!("enginetop-streams-{}.json", std::process::id()));
    let export = profiler.export_chrome_file(&path).unwrap();
    assert!(export.trace_events > 0);
    let summary = validate_file(&path).expect("the trace validates");
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    assert!(
        summary.slices >= 16,
        "8 copies and 8 GEMMs as slices, got {}",
        summary.slices
    );
    assert!(
        text.contains("gpu0-compute") || text.contains("stream"),
        "stream tracks are named"
    );
}
