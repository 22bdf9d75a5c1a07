//! Recordings written from a live profiler with hand-made events, read back whole, cut off
//! at every byte, corrupted, and mutated at random.
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::device::identity::{Device, PoolId, PoolRole};
use crate::profiler::{DeviceId, OpInfo, OpName, Profiler, ProfilerOptions};

use super::format::{FILE_HEADER_LEN, FRAME_HEADER_LEN};
use super::*;

/// A fresh path in the temporary directory.
pub(crate) fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "enginetop-record-{name}-{}.etrec",
        std::process::id()
    ))
}

pub(crate) use super::synthetic::{record_synthetic, Synthetic};

const OPS: &[(&str, u64)] = &[("rec-gemm", 300), ("rec-relu", 40), ("rec-sgd", 120)];

fn small_recording(name: &str) -> (PathBuf, Vec<u8>) {
    let path = scratch(name);
    let run = Synthetic {
        worker: "rec-w0",
        ops: OPS,
        rounds: 40,
    };
    record_synthetic(&path, &run);
    let bytes = std::fs::read(&path).unwrap();
    (path, bytes)
}

#[test]
fn a_recording_reads_back_every_event_its_names_and_its_summary() {
    let (path, _) = small_recording("round-trip");
    let recording = read_recording(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(recording.ending.is_complete(), "{}", recording.ending);
    assert_eq!(recording.info.workload, "synthetic");
    assert_eq!(recording.info.settings[0], Setting::new("inter", 2));
    assert_eq!(recording.events.len(), 40 * 3 * 2);
    let (mut ts, mut id) = (1_000_000u64, 0u64);
    let mut events = recording.events.iter();
    for _ in 0..40 {
        for &(name, us) in OPS {
            id += 1;
            for (kind, at) in [
                (RecordKind::OpStart, ts),
                (RecordKind::OpEnd, ts + us * 1_000),
            ] {
                let event = events.next().unwrap();
                assert_eq!((event.kind, event.ts_ns, event.arg), (kind, at, id));
                assert_eq!(recording.name(event.name), name);
                assert_eq!(recording.device_name(event.device), "rec-cpu");
                assert_eq!(recording.thread_name(event.thread), "rec-w0");
            }
            ts += us * 1_000 + 500;
        }
    }
    let summary: serde_json::Value =
        serde_json::from_str(recording.summary.as_deref().unwrap()).unwrap();
    assert_eq!(summary["iterations"], 40);
    assert_eq!((recording.dropped_events, recording.lost_events), (0, 0));
}

#[test]
fn a_recording_is_written_while_the_run_goes() {
    let path = scratch("streamed");
    let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
    let recorder = Recorder::start(&path, &profiler, RecordingInfo::default()).unwrap();
    let header_bytes = std::fs::metadata(&path).unwrap().len();
    let (device, name) = (
        DeviceId::register("rec-stream"),
        OpName::new("rec-stream-op"),
    );
    for id in 0..(writer::CHUNK_EVENTS as u64 + 10) {
        profiler.op_queued(device, name, OpInfo::new(id));
        if id % 1024 == 0 {
            profiler.flush(); // keeps the ring from filling
        }
    }
    profiler.flush();
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::metadata(&path).unwrap().len() == header_bytes {
        assert!(
            Instant::now() < deadline,
            "no chunk was written before the run ended"
        );
        std::thread::sleep(std::time::Duration::from_millis(5)); // polling a file: no event to wait on
    }
    let before_finish = read_recording(&path).unwrap();
    assert!(!before_finish.ending.is_complete());
    assert!(!before_finish.events.is_empty());
    let report = recorder.finish(&profiler, None).unwrap();
    assert_eq!(report.events, writer::CHUNK_EVENTS as u64 + 10);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn every_cut_of_a_recording_reads_its_prefix_and_says_what_was_lost() {
    let (path, bytes) = small_recording("cuts");
    std::fs::remove_file(&path).unwrap();
    let whole = parse_recording(&bytes, "whole").unwrap();
    for cut in 0..bytes.len() {
        let read = parse_recording(&bytes[..cut], "cut");
        if cut < FILE_HEADER_LEN {
            let message = read.unwrap_err().to_string();
            assert!(message.contains("`cut`"), "{cut}: {message}");
            continue;
        }
        let prefix = read.unwrap_or_else(|err| panic!("cut at {cut}: {err}"));
        assert!(!prefix.ending.is_complete(), "cut at {cut}");
        assert_eq!(
            prefix.events[..],
            whole.events[..prefix.events.len()],
            "cut at {cut}"
        );
        let said = prefix.ending.to_string();
        assert!(said.starts_with("cut off"), "{said}");
        if let Ending::CutOff {
            read_bytes,
            partial_bytes,
            ..
        } = prefix.ending
        {
            assert_eq!(read_bytes + partial_bytes, cut as u64);
        }
    }
}

/// The offsets of `bytes`' frames (each frame's header).
fn frames(bytes: &[u8]) -> Vec<usize> {
    let mut offsets = Vec::new();
    let mut offset = FILE_HEADER_LEN;
    while offset + FRAME_HEADER_LEN <= bytes.len() {
        offsets.push(offset);
        let word = u32::from_le_bytes(bytes[offset..offset + 4].try_into().unwrap());
        offset += FRAME_HEADER_LEN + (word & !format::CHECKPOINT_BIT) as usize;
    }
    offsets
}

#[test]
fn a_corrupt_frame_is_an_error_naming_it() {
    let (path, mut bytes) = small_recording("corrupt");
    std::fs::remove_file(&path).unwrap();
    let second = frames(&bytes)[1];
    bytes[second + FRAME_HEADER_LEN + 3] ^= 0x40;
    let message = parse_recording(&bytes, "bad.etrec")
        .unwrap_err()
        .to_string();
    assert!(
        message.starts_with("`bad.etrec` is corrupt: frame 1 (at byte ")
            && message.contains("checksum")
            && message.contains("record the run again"),
        "{message}"
    );
}

#[test]
fn another_version_or_another_kind_of_file_is_refused_naming_the_fix() {
    let (path, mut bytes) = small_recording("version");
    std::fs::remove_file(&path).unwrap();
    bytes[8] = 99;
    let message = parse_recording(&bytes, "old.etrec")
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("format version 99")
            && message.contains(&format!("reads version {FORMAT_VERSION}"))
            && message.contains("record the run again"),
        "{message}"
    );
    let message = parse_recording(b"{\"traceEvents\":[]}", "t.json")
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("not an enginetop recording") && message.contains("--record"),
        "{message}"
    );
}

/// Recomputes the checksum of the frame at `offset` (so a mutation reaches the decoders).
fn fix_checksum(bytes: &mut [u8], offset: usize) {
    let word = u32::from_le_bytes(bytes[offset..offset + 4].try_into().unwrap());
    let length = (word & !format::CHECKPOINT_BIT) as usize;
    let payload = offset + FRAME_HEADER_LEN;
    let end = (payload + length).min(bytes.len());
    let crc = crc32fast::hash(&bytes[payload..end]);
    bytes[offset + 4..offset + 8].copy_from_slice(&crc.to_le_bytes());
}

#[test]
fn random_mutations_of_a_recording_never_panic() {
    let (path, original) = small_recording("fuzz");
    std::fs::remove_file(&path).unwrap();
    let offsets = frames(&original);
    let mut rng = fastrand::Rng::with_seed(25);
    let (mut read, mut refused) = (0, 0);
    for round in 0..3_000 {
        let mut bytes = original.clone();
        for _ in 0..rng.usize(1..=8) {
            match rng.u8(0..4) {
                0 => {
                    let at = rng.usize(..bytes.len());
                    bytes[at] ^= 1 << rng.u8(0..8);
                }
                1 => {
                    let at = rng.usize(..bytes.len());
                    bytes[at] = rng.u8(..);
                }
                2 => bytes.truncate(rng.usize(..bytes.len())),
                _ => {
                    let at = rng.usize(..=bytes.len());
                    bytes.insert(at, rng.u8(..));
                }
            }
            if bytes.is_empty() {
                break;
            }
        }
        // Every other round, the frames' checksums are made to match, so the mutation
        // reaches the decompressor and the decoder.
        if round % 2 == 0 {
            let whole = bytes.len();
            for &offset in offsets.iter().filter(|&&o| o + FRAME_HEADER_LEN <= whole) {
                fix_checksum(&mut bytes, offset);
            }
        }
        match parse_recording(&bytes, "fuzzed") {
            Ok(recording) => {
                read += 1;
                let _ = compare::RunProfile::from_recording(&recording, "fuzzed");
                let _ = recording.ending.to_string();
                if round % 100 == 0 {
                    export_chrome(&recording, std::io::sink()).unwrap();
                }
            }
            Err(err) => {
                refused += 1;
                assert!(!err.to_string().is_empty());
            }
        }
    }
    assert!(
        read > 100 && refused > 100,
        "read {read}, refused {refused}"
    );
}

#[test]
fn a_recording_exports_the_chrome_trace_of_its_events() {
    let (path, _) = small_recording("export");
    let recording = read_recording(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let mut json = Vec::new();
    let report = export_chrome(&recording, &mut json).unwrap();
    assert_eq!(report.ops, 120);
    crate::profiler::validate::validate_json(&json).unwrap();
    let trace: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let threads: Vec<&str> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["name"] == "thread_name")
        .map(|event| event["args"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(threads, ["rec-w0"]);
}

/// The comparison of synthetic runs of `a` and `b` (op durations) on one worker.
fn compare_runs(name: &str, a: &[(&str, u64)], b: &[(&str, u64)]) -> compare::Comparison {
    let (path_a, path_b) = (scratch(&format!("{name}-a")), scratch(&format!("{name}-b")));
    let rounds = 20;
    record_synthetic(
        &path_a,
        &Synthetic {
            worker: "cmp-w0",
            ops: a,
            rounds,
        },
    );
    record_synthetic(
        &path_b,
        &Synthetic {
            worker: "cmp-w0",
            ops: b,
            rounds,
        },
    );
    let profiles = (
        compare::load_profile(&path_a),
        compare::load_profile(&path_b),
    );
    std::fs::remove_file(&path_a).unwrap();
    std::fs::remove_file(&path_b).unwrap();
    compare::compare(&profiles.0.unwrap(), &profiles.1.unwrap())
}

#[test]
fn a_run_compared_with_itself_shows_no_change() {
    let comparison = compare_runs("self", OPS, OPS);
    let step = comparison.step_time_s.unwrap();
    assert_eq!((step.delta, step.ratio), (0.0, Some(1.0)));
    assert!(comparison.config.iter().all(|row| !row.changed));
    assert_eq!(comparison.ops.len(), 3);
    for row in &comparison.ops {
        for delta in [row.count, row.total_ms, row.mean_us] {
            assert_eq!((delta.delta, delta.ratio), (0.0, Some(1.0)), "{}", row.name);
        }
    }
    let worker = &comparison.workers[0];
    assert_eq!(
        (worker.worker.as_str(), worker.busy_s.delta),
        ("cmp-w0", 0.0)
    );
    assert!(worker.busy_s.a > 0.0);
    let json = comparison.json();
    assert_eq!(json["ops"][0]["total_ms"]["delta"], 0.0);
}

#[test]
fn the_op_made_twice_as_slow_is_named_first() {
    let slower = [("rec-gemm", 303), ("rec-relu", 80), ("rec-sgd", 119)];
    let comparison = compare_runs("slower", OPS, &slower);
    let first = &comparison.ops[0];
    assert_eq!(first.name, "rec-relu", "{comparison}");
    assert_eq!(first.mean_us.ratio, Some(2.0));
    assert_eq!(first.count.delta, 0.0);
    let per_step = comparison.per_step_ms(first).unwrap();
    assert!((per_step.a - 0.040).abs() < 1e-9 && (per_step.b - 0.080).abs() < 1e-9);
    let step = comparison.step_time_s.unwrap();
    assert!(step.delta > 0.0, "{step:?}");
    let table = comparison.to_string();
    let first_row = table.lines().find(|line| line.contains("rec-")).unwrap();
    assert!(first_row.trim_start().starts_with("rec-relu"), "{table}");
}

#[test]
fn a_chrome_export_compares_like_its_recording() {
    let (path, _) = small_recording("chrome-compare");
    let recording = read_recording(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let mut json = Vec::new();
    export_chrome(&recording, &mut json).unwrap();
    let from_chrome = compare::RunProfile::from_chrome_json(&json, "t.json").unwrap();
    let from_recording = compare::RunProfile::from_recording(&recording, "r.etrec");
    assert_eq!(from_chrome.ops, from_recording.ops);
    assert_eq!(from_chrome.workers, from_recording.workers);
    let message = compare::RunProfile::from_chrome_json(b"{\"x\":1}", "odd.json")
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("`odd.json` is neither") && message.contains("traceEvents"),
        "{message}"
    );
}

/// A run whose pool task events were sampled: the recording ends with the workers' exact
/// task counts, and the replay's final figures are the live run's.
#[test]
fn a_replay_of_a_sampled_run_ends_with_the_live_task_counts() {
    use crate::pool::{Pool, PoolKind, PoolOptions};
    use crate::profiler::PoolProbe;
    let path = scratch("sampled");
    let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
    let recorder = Recorder::start(&path, &profiler, RecordingInfo::default()).unwrap();
    let device = DeviceId::register("rec-sampled");
    let probe = PoolProbe::new(&profiler, device);
    let options =
        PoolOptions::new(PoolKind::Eigen, 2, "rec-sampled").observer(probe.into_observer());
    let pool = Pool::new(options).unwrap();
    let tasks = 200_000u64;
    for _ in 0..tasks {
        pool.spawn(|| ());
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while pool.stats().tasks_run() + pool.stats().inline_runs < tasks {
        assert!(Instant::now() < deadline, "tasks never ran");
        std::thread::yield_now();
    }
    drop(pool);
    profiler.flush();
    let live = profiler.snapshot();
    assert!(live.task_sampling.is_sampled(), "{:?}", live.task_sampling);
    recorder.finish(&profiler, None).unwrap();
    let mut replay = Replay::open(&path).unwrap();
    replay.seek_to_end().unwrap();
    let replayed = replay.snapshot();
    assert_eq!(replayed.task_sampling, live.task_sampling);
    let per_worker = |snapshot: &crate::profiler::Snapshot| {
        let mut workers: Vec<(String, u64)> = snapshot
            .workers
            .iter()
            .filter(|worker| worker.device.map(|d| d.name()) == Some("rec-sampled"))
            .map(|worker| (worker.name.clone(), worker.tasks))
            .collect();
        workers.sort();
        workers
    };
    // The two workers, and this thread when a full queue made it run tasks itself.
    assert!((2..=3).contains(&per_worker(&replayed).len()));
    assert_eq!(per_worker(&replayed), per_worker(&live));
    let on_device = |snapshot: &crate::profiler::Snapshot| {
        snapshot.device("rec-sampled").map(|device| device.tasks)
    };
    assert_eq!(on_device(&replayed), Some(live.task_sampling.tasks));
    assert_eq!(on_device(&replayed), on_device(&live));
    assert_eq!(replay.summary().task_sampling, Some(live.task_sampling));
    let profile = compare::load_profile(&path).unwrap();
    let busy: f64 = per_worker(&live)
        .iter()
        .map(|(name, _)| profile.workers.get(name).copied().unwrap_or(0.0))
        .sum();
    let counted: u64 = read_recording(&path)
        .unwrap()
        .tasks
        .iter()
        .map(|r| r.busy_ns)
        .sum();
    assert!(
        busy * 1e9 >= counted as f64 * 0.999,
        "{busy} s busy, {counted} ns counted"
    );
    std::fs::remove_file(&path).unwrap();
}

/// A sampled run's replay shows the exact task counts at a moment between two batches of
/// tasks, not only at the end: each chunk carries the counters as they were after it.
#[test]
fn a_replay_between_two_batches_of_sampled_tasks_shows_their_exact_counts() {
    use crate::pool::{Pool, PoolKind, PoolOptions};
    use crate::profiler::clock::Epoch;
    use crate::profiler::PoolProbe;
    use crate::record::writer::Limits;
    let path = scratch("sampled-mid");
    let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
    let limits = Limits {
        chunk_events: 1,
        ..Limits::default()
    };
    let info = RecordingInfo::default();
    let recorder = Recorder::start_with(&path, &profiler, info, limits).unwrap();
    let device = DeviceId::register("rec-sampled-mid");
    let probe = PoolProbe::new(&profiler, device);
    let options =
        PoolOptions::new(PoolKind::Eigen, 2, "rec-sampled-mid").observer(probe.into_observer());
    let pool = Pool::new(options).unwrap();
    let batch = 100_000u64;
    let run_batch = |total: u64| {
        for _ in 0..batch {
            pool.spawn(|| ());
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while profiler.snapshot().task_sampling.tasks < total {
            assert!(Instant::now() < deadline, "tasks never counted");
            std::thread::yield_now();
        }
        // An event after the counts are whole: a round, so a chunk, with these counts.
        let (mark, info) = (OpName::new("rec-sampled-mid-mark"), OpInfo::new(total));
        profiler.op_start(device, mark, info);
        profiler.op_end(device, mark, info, false);
        profiler.flush();
        recorder.settle();
    };
    run_batch(batch);
    let live = profiler.snapshot();
    let between = Epoch::get().now_ns();
    assert!(live.task_sampling.is_sampled(), "{:?}", live.task_sampling);
    assert_eq!(live.task_sampling.tasks, batch);
    run_batch(2 * batch);
    drop(pool);
    recorder.finish(&profiler, None).unwrap();
    let mut replay = Replay::open(&path).unwrap();
    replay.seek(between).unwrap();
    let replayed = replay.snapshot();
    assert_eq!(replayed.task_sampling.tasks, batch);
    let on_device = |snapshot: &crate::profiler::Snapshot| {
        snapshot
            .device("rec-sampled-mid")
            .map(|device| device.tasks)
    };
    assert_eq!(on_device(&replayed), Some(batch));
    assert_eq!(on_device(&replayed), on_device(&live));
    replay.seek_to_end().unwrap();
    assert_eq!(replay.snapshot().task_sampling.tasks, 2 * batch);
    std::fs::remove_file(&path).unwrap();
}

/// The bytes of a whole recording whose one chunk describes `devices` and holds an op's
/// start and end on each (written frame by frame, so its devices need never have been
/// registered in this process).
fn recording_of_devices(devices: &[(u16, format::DeviceEntry)]) -> Vec<u8> {
    use format::{encode_frame, file_header, Chunk, End, Frame, Tables};
    let mut events = Vec::new();
    for (op, &(device, _)) in devices.iter().enumerate() {
        for (kind, ts_ns) in [(RecordKind::OpStart, 1_000), (RecordKind::OpEnd, 2_000)] {
            events.push(RecordedEvent {
                ts_ns: ts_ns + op as u64 * 10_000,
                kind,
                thread: 1,
                device,
                name: 1,
                aux: 0,
                arg: op as u64 + 1,
                flags: 0,
            });
        }
    }
    let chunk = Chunk {
        tables: Tables {
            names: vec![(1, "rec-typed-op".into())],
            devices: devices.to_vec(),
            threads: vec![(1, "rec-typed-w0".into())],
            device_labels: Vec::new(),
        },
        events,
        ..Chunk::default()
    };
    let end = End {
        events: 2 * devices.len() as u64,
        ..End::default()
    };
    let mut bytes = file_header().to_vec();
    for frame in [
        Frame::Header(RecordingInfo::default()),
        Frame::Chunk(chunk),
        Frame::End(end),
    ] {
        bytes.extend(encode_frame(&frame).unwrap());
    }
    bytes
}

/// A typed device entry, as a recording describes GPU `n`.
fn gpu_entry(n: u32) -> format::DeviceEntry {
    format::DeviceEntry {
        name: Device::Gpu(n).to_string(),
        device: Some(Device::Gpu(n)),
    }
}

#[test]
fn a_recording_describes_each_device_by_its_typed_identity() {
    let path = scratch("typed-devices");
    let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
    let recorder = Recorder::start(&path, &profiler, RecordingInfo::default()).unwrap();
    let live = [
        DeviceId::of(Device::Cpu(0)),
        DeviceId::of(Device::Gpu(1)),
        DeviceId::of_pool(PoolId::new(Device::Cpu(0), PoolRole::CpuPriority)),
        DeviceId::of_pool(PoolId::INTRA_OP),
        DeviceId::register("rec-typed-named"),
    ];
    let op = OpName::new("rec-typed-op");
    for (id, &device) in (1..).zip(&live) {
        profiler.op_start(device, op, OpInfo::new(id));
        profiler.op_end(device, op, OpInfo::new(id), false);
    }
    recorder.finish(&profiler, None).unwrap();
    let recording = read_recording(&path).unwrap();
    let mut recorded: Vec<u16> = recording.events.iter().map(|e| e.device).collect();
    recorded.dedup();
    assert_eq!(recorded.len(), live.len());
    for (&id, &device) in recorded.iter().zip(&live) {
        assert_eq!(recording.device_name(id), device.name());
        assert_eq!(recording.device(id), device.device(), "{}", device.name());
        assert_eq!(recording.device_id(id), device);
    }
    assert_eq!(recording.device(recorded[2]), Some(Device::Cpu(0)));
    let mut replay = Replay::open(&path).unwrap();
    replay.seek_to_end().unwrap();
    let snapshot = replay.snapshot();
    std::fs::remove_file(&path).unwrap();
    for device in live {
        let replayed = snapshot.device(device.name()).unwrap();
        let replayed = DeviceId::from_raw(replayed.id);
        assert_eq!(replayed.device(), device.device(), "{}", device.name());
    }
}

#[test]
fn replay_registers_a_device_the_process_never_saw_with_its_recorded_identity() {
    // GPUs no other test registers: their typed identity can come from the file alone.
    let bytes = recording_of_devices(&[(4, gpu_entry(4093))]);
    let path = scratch("typed-replay");
    std::fs::write(&path, &bytes).unwrap();
    let mut replay = Replay::open(&path).unwrap();
    replay.seek_to_end().unwrap();
    let snapshot = replay.snapshot();
    std::fs::remove_file(&path).unwrap();
    let replayed = DeviceId::from_raw(snapshot.device("gpu4093").unwrap().id);
    assert_eq!(replayed.device(), Some(Device::Gpu(4093)));
}

#[test]
fn export_registers_a_device_the_process_never_saw_with_its_recorded_identity() {
    let bytes = recording_of_devices(&[(4, gpu_entry(4094))]);
    let recording = parse_recording(&bytes, "typed-export.etrec").unwrap();
    export_chrome(&recording, &mut Vec::new()).unwrap();
    // Registering the name again adds no identity: it finds what the export registered.
    let exported = DeviceId::register("gpu4094");
    assert_eq!(exported.device(), Some(Device::Gpu(4094)));
}
