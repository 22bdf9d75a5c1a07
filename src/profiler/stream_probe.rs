//! The GPU streams' side of the profiler: a [`StreamObserver`] that records stream submit,
//! start and end events (Kineto style: one track per stream of a device in the trace, and the
//! live stream occupancy of the snapshot).
//!
//! Streams report device time as `Instant`s; the probe maps them onto the profiler's epoch
//! clock through one pairing of the two clocks taken when the probe is made.
//!
//! [`describe_gpus`] labels the GPU devices in the trace with what they are: a simulated GPU
//! with its model's numbers (so nobody mistakes modelled times for a real device's), a CUDA
//! device with its name.
#![forbid(unsafe_code)]

use std::time::Instant;

use super::{now_ns, DeviceId, Profiler};
use crate::device::cuda;
use crate::device::discover::{backend_for, choose, GpuSelection};
use crate::device::identity::Device;
use crate::device::stream::{GpuInfo, StreamEvent, StreamObserver, StreamPhase};
use crate::engine::{EngineOptions, OpName};
use crate::sync::Mutex;

/// The profiler device of GPU `ordinal`, where [`StreamProbe`] records it.
pub(crate) fn gpu_device(ordinal: u32) -> DeviceId {
    DeviceId::of(Device::Gpu(ordinal))
}

/// What a GPU is, in a trace: `simulated GPU, model: <its numbers>, <memory>` or the CUDA
/// device's name and memory.
pub(crate) fn gpu_label(info: &GpuInfo) -> String {
    let memory_gb = info.memory_bytes as f64 / 1e9;
    match info.model.filter(|_| info.simulated) {
        Some(model) => format!("simulated GPU, model: {model}, {memory_gb} GB"),
        None => format!("{}, {memory_gb:.1} GB", info.name),
    }
}

/// Labels, in `profiler`'s traces, the GPUs an engine built from `options` has (see
/// [`Profiler::describe_device`]); returns how many.
///
/// The GPUs are resolved the way the engine resolves them: the backend given
/// (`options.gpu_backend`), else `options.gpus` through CUDA detection, simulated GPUs taking
/// `options.sim_model`. A selection of none, or one that does not resolve (the run then had no
/// GPU either), labels nothing; so does a disabled profiler.
pub(crate) fn describe_gpus(profiler: &Profiler, options: &EngineOptions) -> usize {
    if !profiler.is_enabled() {
        return 0;
    }
    let backend = match &options.gpu_backend {
        // std's Arc: the backend is a `dyn` trait object, which loom's `Arc` cannot hold.
        Some(backend) => Some(std::sync::Arc::clone(backend)),
        None if matches!(options.gpus, GpuSelection::None) => None,
        None => {
            let probe = cuda::probe();
            choose(options.gpus, &probe)
                .ok()
                .and_then(|choice| backend_for(&choice, probe, options.sim_model))
        }
    };
    let Some(backend) = backend else {
        return 0;
    };
    let gpus = backend.devices();
    for info in &gpus {
        profiler.describe_device(gpu_device(info.ordinal), gpu_label(info));
    }
    gpus.len()
}

/// Records GPU stream events into a [`Profiler`]; GPU `d` becomes profiler device `gpu(d)`.
pub struct StreamProbe {
    profiler: Profiler,
    /// `Instant` and profiler-epoch ns read together once.
    clock_pair: (Instant, u64),
    devices: Mutex<Vec<(u32, DeviceId)>>,
}

impl StreamProbe {
    /// A probe recording into `profiler`.
    pub fn new(profiler: &Profiler) -> Self {
        let _ = now_ns(); // the first read calibrates the clock: keep that out of the pair
        StreamProbe {
            profiler: profiler.clone(),
            clock_pair: (Instant::now(), now_ns()),
            devices: Mutex::new(Vec::new()),
        }
    }

    fn device(&self, ordinal: u32) -> DeviceId {
        let mut devices = self.devices.lock();
        if let Some((_, id)) = devices.iter().find(|(known, _)| *known == ordinal) {
            return *id;
        }
        let id = gpu_device(ordinal);
        devices.push((ordinal, id));
        id
    }

    /// `at` in ns since the profiler's epoch.
    fn epoch_ns(&self, at: Instant) -> u64 {
        let (base_instant, base_ns) = self.clock_pair;
        match at.checked_duration_since(base_instant) {
            Some(after) => base_ns.saturating_add(after.as_nanos() as u64),
            None => base_ns.saturating_sub(base_instant.duration_since(at).as_nanos() as u64),
        }
    }
}

/// The op name of an engine op name id (one never interned: `gpu-work`).
fn op_name(engine_name: u32) -> OpName {
    OpName::from_id(engine_name).unwrap_or_else(|| OpName::new("gpu-work"))
}

impl StreamObserver for StreamProbe {
    fn on_stream_event(&self, event: StreamEvent) {
        let device = self.device(event.stream.device);
        let stream = event.stream.code();
        let name = op_name(event.op.name);
        let op_id = event.op.id;
        // All three phases go through one mapping of `Instant` to the profiler's clock: a
        // submit stamped by the profiler's own clock could land after a start mapped from
        // `Instant` (the two clocks are read at slightly different moments), and the trace
        // would show a kernel starting before its launch.
        let ts = self.epoch_ns(event.at);
        match event.phase {
            StreamPhase::Submit => self.profiler.stream_submit(device, stream, name, op_id, ts),
            StreamPhase::Start => self.profiler.stream_start(device, stream, name, op_id, ts),
            StreamPhase::End { .. } => self.profiler.stream_end(device, stream, name, op_id, ts),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::device::sim::{SimBackend, SimModel};
    use crate::engine::EngineKind;
    use crate::profiler::ProfilerOptions;

    fn labels(profiler: &Profiler) -> Vec<(String, String)> {
        let mut labels: Vec<(String, String)> = profiler
            .device_labels()
            .into_iter()
            .map(|(device, label)| (device.name().to_string(), label))
            .collect();
        labels.sort();
        labels
    }

    #[test]
    fn simulated_gpus_are_labelled_with_their_model() {
        let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
        let model = SimModel::h100_class(10.0);
        let options = EngineOptions::new(EngineKind::PerDevice, 1)
            .gpu_backend(std::sync::Arc::new(SimBackend::new(2, model)));
        assert_eq!(describe_gpus(&profiler, &options), 2);
        let labels = labels(&profiler);
        assert_eq!(labels.len(), 2);
        assert_eq!(
            (labels[0].0.as_str(), labels[1].0.as_str()),
            ("gpu0", "gpu1")
        );
        let expected = format!("simulated GPU, model: {model}, 80 GB");
        assert!(
            labels.iter().all(|(_, label)| *label == expected),
            "{labels:?}"
        );
        assert!(expected.contains("6700 GFLOP/s") && expected.contains("335 GB/s memory"));
    }

    #[test]
    fn a_sim_selection_resolves_like_the_engine_and_none_labels_nothing() {
        let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
        let mut options = EngineOptions::new(EngineKind::PerDevice, 1);
        assert_eq!(describe_gpus(&profiler, &options), 0, "--gpus none");
        options.gpus = GpuSelection::Sim(1);
        assert_eq!(describe_gpus(&profiler, &options), 1);
        let label = &labels(&profiler)[0];
        assert_eq!(label.0, "gpu0");
        assert!(
            label.1.starts_with("simulated GPU, model: 670 GFLOP/s"),
            "{label:?}"
        );
        assert_eq!(describe_gpus(&Profiler::disabled(), &options), 0);
    }
}

/// The examples of the crate-private items above (doctests reach only the public API).
#[cfg(all(test, not(loom)))]
mod examples {
    #[test]
    fn a_simulated_gpus_label_gives_its_model_and_memory() {
        use crate::device::sim::{SimBackend, SimModel};
        use crate::device::stream::GpuBackend;
        use crate::profiler::stream_probe::gpu_label;
        let info = &SimBackend::new(1, SimModel::default()).devices()[0];
        assert_eq!(
            gpu_label(info),
            "simulated GPU, model: 670 GFLOP/s, 33.5 GB/s memory, 0.55 GB/s copies, \
             500 us launch latency (H100 / 100), 80 GB"
        );
    }
}
