//! Recordings of synthetic runs for tests: hand-made op events on one named thread, written
//! by the real [`Recorder`], so every figure read back from them is known exactly. The unit
//! tests of `record` and the integration tests (`test-fakes` feature) share them.
#![forbid(unsafe_code)]

use std::path::Path;

use crate::profiler::{DeviceId, Event, EventKind, OpInfo, OpName, Profiler, ProfilerOptions};

use super::{RecordReport, Recorder, RecordingInfo, Setting};

/// Ops of a synthetic run: (name, duration in µs) per op, run back to back on one thread
/// named `worker`, `rounds` times.
#[derive(Clone, Copy, Debug)]
pub struct Synthetic<'a> {
    /// The thread's name.
    pub worker: &'a str,
    /// One iteration's ops in order: (name, µs).
    pub ops: &'a [(&'a str, u64)],
    /// Iterations.
    pub rounds: u64,
}

/// Records `run` to `path` on device `rec-cpu`, with settings `inter = 2` and
/// `worker = <its thread>`; see [`record_run`].
pub fn record_synthetic(path: &Path, run: &Synthetic<'_>) -> RecordReport {
    let settings = vec![Setting::new("inter", 2), Setting::new("worker", run.worker)];
    record_run(path, run, "rec-cpu", settings)
}

/// Records `run` to `path`: its ops' start and end events on profiler device `device`
/// (500 ns apart, from 1 ms on), `settings` as the run's configuration, and a summary of
/// `run.rounds` iterations over the run's length. Returns what the recorder reported.
///
/// # Panics
/// When the profiler, the recorder or the recording thread fails (test support only).
pub fn record_run(
    path: &Path,
    run: &Synthetic<'_>,
    device: &str,
    settings: Vec<Setting>,
) -> RecordReport {
    let profiler = Profiler::new(ProfilerOptions::default()).expect("a profiler");
    let info = RecordingInfo {
        enginetop: "test".into(),
        epoch_unix_ns: 1,
        workload: "synthetic".into(),
        stats: Default::default(),
        settings,
    };
    let recorder = Recorder::start(path, &profiler, info).expect("a recorder");
    let device = DeviceId::register(device);
    let ops: Vec<(String, u64)> = run
        .ops
        .iter()
        .map(|&(name, us)| (name.to_string(), us))
        .collect();
    let (worker, rounds) = (run.worker.to_string(), run.rounds);
    let recording = profiler.clone();
    let end_ns = crate::sync::thread::Builder::new()
        .name(worker)
        .spawn(move || {
            let (mut ts, mut id) = (1_000_000u64, 0u64);
            for _ in 0..rounds {
                for (name, us) in &ops {
                    id += 1;
                    let name = OpName::new(name);
                    let op = Event::op(EventKind::OpStart, device, name, OpInfo::new(id));
                    recording.record_at(op.at(ts));
                    ts += us * 1_000;
                    let mut end = op.at(ts);
                    end.kind = EventKind::OpEnd;
                    recording.record_at(end);
                    ts += 500;
                }
            }
            ts
        })
        .expect("a recording thread")
        .join()
        .expect("the recording thread ran");
    let summary = serde_json::json!({
        "iterations": rounds,
        "elapsed_s": (end_ns - 1_000_000) as f64 / 1e9,
    });
    recorder
        .finish(&profiler, Some(summary.to_string()))
        .expect("the recording finished")
}
