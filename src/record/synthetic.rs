//! Recordings of synthetic runs for tests: hand-made op events on one named thread, written
//! by the real [`Recorder`], so every figure read back from them is known exactly. The unit
//! tests of `record` and the integration tests (`test-fakes` feature) share them, and the
//! compare view's tests share one pair of runs ([`record_compare_pair`]).
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

use crate::profiler::{DeviceId, Event, EventKind, OpInfo, OpName, Profiler, ProfilerOptions};

use super::{RecordReport, Recorder, RecordingInfo, Setting};

/// Ops of a synthetic run: (name, duration in µs) per op, run back to back on one thread
/// named `worker`, `rounds` times.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Synthetic<'a> {
    /// The thread's name.
    pub(crate) worker: &'a str,
    /// One iteration's ops in order: (name, µs).
    pub(crate) ops: &'a [(&'a str, u64)],
    /// Iterations.
    pub(crate) rounds: u64,
}

/// Records `run` to `path` on device `rec-cpu`, with settings `inter = 2` and
/// `worker = <its thread>`; see [`record_run`].
#[cfg(test)]
pub(crate) fn record_synthetic(path: &Path, run: &Synthetic<'_>) -> RecordReport {
    let settings = vec![Setting::new("inter", 2), Setting::new("worker", run.worker)];
    record_run(path, run, "rec-cpu", settings)
}

/// Records `run` to `path`: its ops' start and end events on profiler device `device`
/// (500 ns apart, from 1 ms on), `settings` as the run's configuration, and a summary of
/// `run.rounds` iterations over the run's length. Returns what the recorder reported.
///
/// # Panics
/// When the profiler, the recorder or the recording thread fails (test support only).
pub(crate) fn record_run(
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

/// Iterations of each run of the compare pair.
const COMPARE_ROUNDS: u64 = 20;
/// Run A of the compare pair: (op name, µs) in the order one iteration runs them.
const COMPARE_A: &[(&str, u64)] = &[
    ("cv-gemm", 300),
    ("cv-relu", 40),
    ("cv-sgd", 120),
    ("cv-copy", 10),
];
/// Run B of the compare pair: relu 2x slower, gemm +10%, sgd faster, three copies an
/// iteration.
const COMPARE_B: &[(&str, u64)] = &[
    ("cv-gemm", 330),
    ("cv-relu", 80),
    ("cv-sgd", 100),
    ("cv-copy", 10),
    ("cv-copy", 10),
    ("cv-copy", 10),
];

/// Records the compare view's pair of runs into `dir` as `a.etrec` and `b.etrec` and returns
/// their paths: each `COMPARE_ROUNDS` iterations back to back on one thread `cmp-w0`; run B
/// has `cv-relu` twice as slow, `cv-gemm` a little slower, `cv-sgd` faster, three `cv-copy`s
/// an iteration for A's one, and 4 inter-op threads (setting `inter`) for A's 2.
///
/// # Panics
/// When the profiler, the recorder or the recording thread fails (test support only).
pub fn record_compare_pair(dir: &Path) -> (PathBuf, PathBuf) {
    let (a, b) = (dir.join("a.etrec"), dir.join("b.etrec"));
    for (path, ops, inter) in [(&a, COMPARE_A, 2), (&b, COMPARE_B, 4)] {
        let run = Synthetic {
            worker: "cmp-w0",
            ops,
            rounds: COMPARE_ROUNDS,
        };
        let settings = vec![Setting::new("inter", inter), Setting::new("pool", "eigen")];
        record_run(path, &run, "cv-cpu", settings);
    }
    (a, b)
}

/// The op names of the compare view's table rows in `screen`, top to bottom: the rows whose
/// first word is an op name of the compare pair (`cv-`) or a made-up one (`op-`).
pub fn compare_table_names(screen: &str) -> Vec<String> {
    screen
        .lines()
        .filter_map(|line| line.trim_start_matches(['│', ' ']).split(' ').next())
        .filter(|word| word.starts_with("cv-") || word.starts_with("op-"))
        .map(str::to_string)
        .collect()
}
