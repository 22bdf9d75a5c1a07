//! `enginetop export FILE --to perfetto` end to end through the binary: the Perfetto trace of a
//! recording, decoded with the messages it was written with, holds on every track the slices
//! (names, begin and end, nesting) that the same recording's Chrome export holds as a viewer
//! reads the JSON (doubles of microseconds), and the same instants and counter values; a
//! cut-off recording exports its prefix with a warning, a corrupt one its frames before the
//! damage with an error naming the frame.
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::Output;

use prost::Message;
use serde_json::Value;

mod common;
use common::cli::{self, text};

/// The messages the exporter writes (the build script's output for this package).
#[allow(dead_code, clippy::all)]
mod proto {
    include!(concat!(env!("OUT_DIR"), "/perfetto.protos.rs"));
}
use proto::{track_event, Trace};

/// The exporter's trace read back, its interning checked (shared with the unit tests).
#[path = "../src/record/perfetto/decode.rs"]
mod decode;

/// A slice as a viewer shows it: name, begin and end (µs from the trace's start), depth.
#[derive(Clone, Debug, PartialEq)]
struct Slice {
    name: String,
    begin: f64,
    end: f64,
    depth: usize,
}

/// What the comparison reads from a trace: slices per track, instants and counter values by
/// name.
#[derive(Debug, Default)]
struct Tracks {
    slices: BTreeMap<String, Vec<Slice>>,
    instants: BTreeMap<String, usize>,
    counters: BTreeMap<String, usize>,
    flows: usize,
    /// `queued` instants by their `op` annotation.
    queued_ops: BTreeMap<String, usize>,
}

fn enginetop(args: &[&str], dir: &Path) -> Output {
    cli::run_in(args, dir)
}

fn succeeded(output: &Output) -> String {
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    stderr
}

/// Records `workload` with `settings` for two iterations in `dir` as `r.etrec`.
fn record(dir: &Path, workload: &str, settings: &[&str]) {
    let mut args = vec!["--workload", workload];
    args.extend_from_slice(settings);
    args.extend(["--iterations", "2", "--headless", "--gemm-peak", "100"]);
    args.extend(["--record", "r.etrec"]);
    succeeded(&enginetop(&args, dir));
}

/// Nesting depths as a viewer computes them: slices sorted by begin, longer first, each
/// inside the last one still open at its begin.
fn with_depths(mut slices: Vec<(String, f64, f64)>) -> Vec<Slice> {
    slices.sort_by(|a, b| a.1.total_cmp(&b.1).then(b.2.total_cmp(&a.2)));
    let mut open: Vec<f64> = Vec::new();
    let mut out = Vec::new();
    for (name, begin, end) in slices {
        while open.last().is_some_and(|&open_end| open_end <= begin) {
            open.pop();
        }
        out.push(Slice {
            name,
            begin,
            end,
            depth: open.len(),
        });
        open.push(end);
    }
    out
}

/// The Chrome export as a viewer reads it. Thread tracks are keyed by thread name, stream
/// tracks by process and stream name, async ops by process.
fn chrome_tracks(path: &Path) -> Tracks {
    let trace: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let mut processes = HashMap::new();
    let mut threads = HashMap::new();
    for event in events.iter().filter(|event| event["ph"] == "M") {
        let (pid, tid) = (
            event["pid"].as_u64().unwrap(),
            event["tid"].as_u64().unwrap(),
        );
        let name = event["args"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        match event["name"].as_str().unwrap() {
            "process_name" => processes.insert(pid, name),
            "thread_name" => threads.insert((pid, tid), name),
            _ => None,
        };
    }
    let mut tracks = Tracks::default();
    let mut raw: BTreeMap<String, Vec<(String, f64, f64)>> = BTreeMap::new();
    let mut begun: HashMap<u64, (String, String, f64)> = HashMap::new();
    for event in events {
        let (pid, tid) = (
            event["pid"].as_u64().unwrap(),
            event["tid"].as_u64().unwrap(),
        );
        let name = event["name"].as_str().unwrap_or_default().to_string();
        let ts = event["ts"].as_f64().unwrap();
        let thread = threads.get(&(pid, tid)).cloned().unwrap_or_default();
        let key = match tid >= 1_000_000 {
            true => format!("{}/{thread}", processes[&pid]),
            false => thread,
        };
        match event["ph"].as_str().unwrap() {
            "X" => {
                let end = ts + event["dur"].as_f64().unwrap();
                raw.entry(key).or_default().push((name, ts, end));
            }
            "b" => {
                let lane = format!("{}/async ops", processes[&pid]);
                begun.insert(event["id"].as_u64().unwrap(), (lane, name, ts));
            }
            "e" => {
                let (lane, name, begin) = begun.remove(&event["id"].as_u64().unwrap()).unwrap();
                raw.entry(lane).or_default().push((name, begin, ts));
            }
            "i" => {
                if name == "queued" {
                    let op = event["args"]["op"].as_str().unwrap().to_string();
                    *tracks.queued_ops.entry(op).or_default() += 1;
                }
                *tracks.instants.entry(name).or_default() += 1;
            }
            "C" => *tracks.counters.entry(name).or_default() += 1,
            "s" => tracks.flows += 1,
            _ => {}
        }
    }
    tracks.slices = raw
        .into_iter()
        .map(|(key, slices)| (key, with_depths(slices)))
        .collect();
    tracks
}

/// The Perfetto export decoded (its interning checked: see `decode.rs`), its events put in
/// time order (stably, as trace_processor sorts them) and its slices rebuilt from each
/// track's begins and ends; times in µs from `base_ns`.
fn perfetto_tracks(path: &Path, base_ns: u64) -> Tracks {
    let bytes = std::fs::read(path).unwrap();
    let mut events = decode::decode(&bytes).unwrap_or_else(|why| panic!("{why}"));
    events.sort_by_key(|event| event.ts_ns);
    let mut tracks = Tracks::default();
    let mut open: HashMap<String, Vec<(String, f64)>> = HashMap::new();
    for event in events {
        let ts = (event.ts_ns - base_ns) as f64 / 1000.0;
        tracks.flows += event.flows;
        match event.kind {
            track_event::Type::SliceBegin => {
                open.entry(event.track).or_default().push((event.name, ts));
            }
            track_event::Type::SliceEnd => {
                let stack = open.get_mut(&event.track).unwrap();
                let (name, begin) = stack.pop().expect("an end with its begin");
                let depth = stack.len();
                let slice = Slice {
                    name,
                    begin,
                    end: ts,
                    depth,
                };
                tracks.slices.entry(event.track).or_default().push(slice);
            }
            track_event::Type::Instant => {
                if event.name == "queued" {
                    let Some(decode::Value::Str(op)) = event.arg("op") else {
                        panic!("a queued instant without its op: {event:?}");
                    };
                    *tracks.queued_ops.entry(op.clone()).or_default() += 1;
                }
                *tracks.instants.entry(event.name).or_default() += 1;
            }
            track_event::Type::Counter => *tracks.counters.entry(event.track).or_default() += 1,
            track_event::Type::Unspecified => panic!("an event without a type"),
        }
    }
    for slices in tracks.slices.values_mut() {
        slices.sort_by(|a, b| a.begin.total_cmp(&b.begin).then(b.end.total_cmp(&a.end)));
    }
    tracks
}

/// Checks that both exports hold the same slices per track (times within a picosecond:
/// the JSON's doubles of µs against exact nanoseconds), instants and counter values.
fn assert_same(chrome: &Tracks, perfetto: &Tracks) {
    let keys = |tracks: &Tracks| tracks.slices.keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(chrome), keys(perfetto));
    for (track, expected) in &chrome.slices {
        let got = &perfetto.slices[track];
        assert_eq!(expected.len(), got.len(), "slices on {track}");
        let lanes = track.ends_with("/async ops");
        for (expected, got) in expected.iter().zip(got) {
            let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
            assert!(
                expected.name == got.name
                    && close(expected.begin, got.begin)
                    && close(expected.end, got.end)
                    && (lanes || expected.depth == got.depth),
                "on {track}: chrome {expected:?}, perfetto {got:?}"
            );
        }
    }
    assert_eq!(chrome.instants, perfetto.instants);
    assert_eq!(chrome.queued_ops, perfetto.queued_ops);
    let mut counters: BTreeMap<String, usize> = BTreeMap::new();
    for (track, count) in &perfetto.counters {
        *counters
            .entry(track.rsplit('/').next().unwrap().to_string())
            .or_default() += count;
    }
    assert_eq!(chrome.counters, counters);
    assert!(
        perfetto.flows >= chrome.flows,
        "{} < {}",
        perfetto.flows,
        chrome.flows
    );
}

/// The first event's time: where the Chrome export's times start.
fn first_ns(recording: &Path) -> u64 {
    let recording = enginetop::record::read_recording(recording).unwrap();
    recording
        .events
        .iter()
        .map(|event| event.ts_ns)
        .min()
        .unwrap()
}

fn export_both(dir: &Path, recording: &str) -> (Tracks, Tracks) {
    for to in ["chrome", "perfetto"] {
        succeeded(&enginetop(&["export", recording, "--to", to], dir));
    }
    let stem = recording.trim_end_matches(".etrec");
    let chrome = chrome_tracks(&dir.join(format!("{stem}.trace.json")));
    let base = first_ns(&dir.join(recording));
    let perfetto = perfetto_tracks(&dir.join(format!("{stem}.pftrace")), base);
    (chrome, perfetto)
}

#[test]
fn a_cpu_runs_perfetto_export_holds_the_chrome_exports_slices_on_every_track() {
    let dir = cli::scratch("export-perfetto", "cpu");
    let settings = [
        "--set",
        "image=32",
        "--set",
        "width=4",
        "--set",
        "blocks1=2",
    ];
    record(&dir, "resnet-like", &settings);
    let (chrome, perfetto) = export_both(&dir, "r.etrec");
    assert_same(&chrome, &perfetto);
    let ops: usize = perfetto
        .slices
        .values()
        .flatten()
        .filter(|s| s.name.contains("conv"))
        .count();
    assert!(ops > 10, "{ops} conv slices");
    assert!(perfetto.instants["queued"] > 10, "{:?}", perfetto.instants);
    assert!(perfetto.flows > 10);
    let (json, binary) = (
        std::fs::metadata(dir.join("r.trace.json")).unwrap().len(),
        std::fs::metadata(dir.join("r.pftrace")).unwrap().len(),
    );
    assert!(
        binary * 3 < json,
        "{binary} bytes against the JSON's {json}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_gpu_runs_kernels_and_launches_export_like_the_chrome_export() {
    let dir = cli::scratch("export-perfetto", "gpu");
    let settings = [
        "--gpus",
        "sim:1",
        "--set",
        "device=gpu:0",
        "--set",
        "batches=4",
    ];
    record(&dir, "pipeline", &settings);
    let (chrome, perfetto) = export_both(&dir, "r.etrec");
    assert_same(&chrome, &perfetto);
    assert!(perfetto
        .slices
        .keys()
        .any(|track| track.ends_with("/stream compute0")));
    assert!(perfetto.instants["launch"] > 0, "{:?}", perfetto.instants);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_cut_off_recording_exports_its_prefix_and_a_corrupt_one_its_frames_before_the_damage() {
    let dir = cli::scratch("export-perfetto", "damaged");
    let settings = ["--set", "image=32", "--set", "width=4", "--duration", "1.2"];
    let mut args = vec![
        "--workload",
        "resnet-like",
        "--headless",
        "--gemm-peak",
        "100",
    ];
    args.extend(settings);
    args.extend(["--record", "r.etrec"]);
    succeeded(&enginetop(&args, &dir));
    let bytes = std::fs::read(dir.join("r.etrec")).unwrap();
    std::fs::write(dir.join("cut.etrec"), &bytes[..bytes.len() * 2 / 3]).unwrap();
    let stderr = succeeded(&enginetop(
        &["export", "cut.etrec", "--to", "perfetto"],
        &dir,
    ));
    assert!(
        stderr.contains("warning: cut.etrec is cut off") && stderr.contains("were left out"),
        "{stderr}"
    );
    let (chrome, perfetto) = export_both(&dir, "cut.etrec");
    assert_same(&chrome, &perfetto);
    assert!(perfetto.slices.values().map(Vec::len).sum::<usize>() > 50);

    let mut corrupt = bytes.clone();
    let middle = corrupt.len() / 2;
    corrupt[middle] ^= 0xff;
    std::fs::write(dir.join("bad.etrec"), &corrupt).unwrap();
    let output = enginetop(&["export", "bad.etrec", "--to", "perfetto"], &dir);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("error: `bad.etrec` is corrupt: frame "),
        "{stderr}"
    );
    assert!(stderr.contains("`bad.pftrace` holds the "), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let prefix = Trace::decode(&*std::fs::read(dir.join("bad.pftrace")).unwrap()).unwrap();
    assert!(prefix.packet.len() > 100, "{} packets", prefix.packet.len());

    let output = enginetop(&["export", "missing.etrec", "--to", "perfetto"], &dir);
    assert_eq!(output.status.code(), Some(1));
    std::fs::write(dir.join("t.json"), b"{\"traceEvents\":[]}").unwrap();
    let output = enginetop(&["export", "t.json", "--to", "perfetto"], &dir);
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("`t.json` is not an enginetop recording"),
        "{stderr}"
    );
    assert!(
        !dir.join("t.pftrace").exists(),
        "an empty trace was left behind"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
