//! Hand-made recordings through the Perfetto export: a slice that outlasts the one it
//! started in is clamped to it as the Chrome export clamps it, an op that ends on another
//! thread goes on an `async ops` lane, every text is interned once and defined before its
//! use, and the file decodes as Perfetto's `Trace`.
use std::collections::HashMap;
use std::path::Path;

use prost::Message;

use crate::profiler::{DeviceId, Event, EventKind, OpInfo, OpName, Profiler, ProfilerOptions};
use crate::record::format::FRAME_HEADER_LEN;
use crate::record::tests::scratch;
use crate::record::{Recorder, RecordingInfo};

use super::decode::{decode, Value};
use super::proto::{track_event, Trace};
use super::{export_perfetto, PerfettoReport};

/// Records `threads` (a name and its events each, the events' times set) from threads of
/// those names, one after another.
fn record(path: &Path, threads: Vec<(&'static str, Vec<Event>)>) {
    let options = ProfilerOptions {
        ring_capacity: 1 << 18,
        ..ProfilerOptions::default()
    };
    let profiler = Profiler::new(options).unwrap();
    let recorder = Recorder::start(path, &profiler, RecordingInfo::default()).unwrap();
    for (name, events) in threads {
        let recording = profiler.clone();
        crate::sync::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                events
                    .into_iter()
                    .for_each(|event| recording.record_at(event))
            })
            .unwrap()
            .join()
            .unwrap();
    }
    recorder.finish(&profiler, None).unwrap();
}

/// Each track's slices (name, begin, end) by track name, from the decoded trace.
fn slices(bytes: &[u8]) -> HashMap<String, Vec<(String, u64, u64)>> {
    let mut open: HashMap<u64, Vec<(String, u64)>> = HashMap::new();
    let mut out: HashMap<String, Vec<(String, u64, u64)>> = HashMap::new();
    for event in decode(bytes).unwrap_or_else(|why| panic!("{why}")) {
        let stack = open.entry(event.track_uuid).or_default();
        match event.kind {
            track_event::Type::SliceBegin => stack.push((event.name, event.ts_ns)),
            track_event::Type::SliceEnd => {
                let (name, begin) = stack.pop().unwrap();
                let slice = (name, begin, event.ts_ns);
                out.entry(event.track).or_default().push(slice);
            }
            _ => {}
        }
    }
    out
}

fn export(path: &Path) -> (Vec<u8>, PerfettoReport) {
    let mut bytes = Vec::new();
    let export = export_perfetto(path, &mut bytes).unwrap();
    assert!(export.ending.is_complete() && export.corrupt.is_none());
    (bytes, export.report)
}

fn on(kind: EventKind, ts_ns: u64, name: OpName, op_id: u64) -> Event {
    let device = DeviceId::register("pf-test-cpu");
    Event::op(kind, device, name, OpInfo::new(op_id)).at(ts_ns)
}

#[test]
fn a_slice_that_outlasts_its_parent_ends_with_it_as_in_the_chrome_export() {
    let path = scratch("perfetto-clamp");
    let (outer, inner) = (OpName::new("pf-outer"), OpName::new("pf-inner"));
    let mut task = on(EventKind::TaskStart, 2_000, inner, 0);
    task.aux = 0;
    let mut task_end = task.at(4_000);
    task_end.kind = EventKind::TaskEnd;
    let worker = vec![
        on(EventKind::OpStart, 1_000, outer, 7),
        task,
        on(EventKind::OpEnd, 3_000, outer, 7),
        task_end,
    ];
    record(&path, vec![("pf-clamp-w0", worker)]);
    let (bytes, report) = export(&path);
    std::fs::remove_file(&path).unwrap();
    assert_eq!((report.clamped, report.slices, report.unmatched), (1, 2, 0));
    let slices = &slices(&bytes)["pf-clamp-w0"];
    let expected = [
        ("task".to_string(), 2_000, 3_000),
        ("pf-outer".to_string(), 1_000, 3_000),
    ];
    assert_eq!(slices[..], expected[..]);
}

#[test]
fn an_op_that_ends_on_another_thread_goes_on_an_async_lane_with_its_flow() {
    let path = scratch("perfetto-async");
    let (gpu_op, cpu_op) = (OpName::new("pf-async-op"), OpName::new("pf-sync-op"));
    let worker = vec![
        on(EventKind::OpStart, 1_000, gpu_op, 1),
        on(EventKind::OpStart, 1_500, cpu_op, 2),
        on(EventKind::OpEnd, 2_000, cpu_op, 2),
        on(EventKind::OpStart, 2_500, gpu_op, 3),
    ];
    let completer = vec![
        on(EventKind::OpEnd, 3_000, gpu_op, 1),
        on(EventKind::OpEnd, 3_500, gpu_op, 3),
    ];
    let driver = vec![on(EventKind::OpQueued, 500, gpu_op, 1)];
    record(
        &path,
        vec![
            ("pf-driver", driver),
            ("pf-async-w0", worker),
            ("pf-completer", completer),
        ],
    );
    let (bytes, report) = export(&path);
    std::fs::remove_file(&path).unwrap();
    assert_eq!((report.ops, report.clamped, report.flows), (3, 0, 1));
    let slices = slices(&bytes);
    let mut async_ops = slices["pf-test-cpu/async ops"].clone();
    async_ops.sort();
    let expected = [
        ("pf-async-op".to_string(), 1_000, 3_000),
        ("pf-async-op".to_string(), 2_500, 3_500),
    ];
    assert_eq!(async_ops[..], expected[..]);
    assert_eq!(
        slices["pf-async-w0"],
        [("pf-sync-op".to_string(), 1_500, 2_000)]
    );
}

#[test]
fn a_corrupt_frame_ends_the_export_there_and_is_named() {
    let path = scratch("perfetto-corrupt");
    let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
    let recorder = Recorder::start(&path, &profiler, RecordingInfo::default()).unwrap();
    let name = OpName::new("pf-corrupt-op");
    for id in 0..40_000u64 {
        let start = 1_000 + id * 1_000;
        profiler.record_at(on(EventKind::OpStart, start, name, id));
        profiler.record_at(on(EventKind::OpEnd, start + 500, name, id));
        if id % 1_000 == 999 {
            profiler.flush();
        }
    }
    recorder.finish(&profiler, None).unwrap();
    let frames = crate::record::index::RecordingIndex::open(&path)
        .unwrap()
        .frames()
        .to_vec();
    let damaged = frames[frames.len() / 2];
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[damaged.offset as usize + FRAME_HEADER_LEN + 5] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let mut trace = Vec::new();
    let export = export_perfetto(&path, &mut trace).unwrap();
    std::fs::remove_file(&path).unwrap();
    let why = export.corrupt.expect("the damage is reported").to_string();
    let named = format!(
        "is corrupt: frame {} (at byte {})",
        frames.len() / 2,
        damaged.offset
    );
    assert!(why.contains(&named), "{why}");
    assert!(export.report.ops > 1_000, "{:?}", export.report);
    assert!(export.report.ops < 40_000, "{:?}", export.report);
    assert_eq!(
        Trace::decode(&*trace).unwrap().packet.len() as u64,
        export.report.packets
    );
}

/// How many times `text` stands in `bytes`.
fn occurrences(bytes: &[u8], text: &str) -> usize {
    bytes
        .windows(text.len())
        .filter(|window| *window == text.as_bytes())
        .count()
}

#[test]
fn every_text_is_interned_once_and_resolves_to_its_name() {
    let path = scratch("perfetto-interning");
    let names = [OpName::new("pf-intern-a"), OpName::new("pf-intern-b")];
    let mut events = Vec::new();
    for id in 0..200u64 {
        let (name, start) = (names[id as usize % 2], 1_000 + id * 1_000);
        events.push(on(EventKind::OpQueued, start, name, id));
        events.push(on(EventKind::OpStart, start + 100, name, id));
        events.push(on(EventKind::OpEnd, start + 600, name, id));
    }
    record(&path, vec![("pf-intern-w0", events)]);
    let (bytes, report) = export(&path);
    std::fs::remove_file(&path).unwrap();
    assert_eq!((report.ops, report.instants), (200, 200));
    let events = decode(&bytes).unwrap_or_else(|why| panic!("{why}"));
    let queued: Vec<_> = events.iter().filter(|e| e.name == "queued").collect();
    assert_eq!(queued.len(), 200);
    for (id, event) in queued.iter().enumerate() {
        assert_eq!(event.categories, ["queue"]);
        assert_eq!(event.arg("op_id"), Some(&Value::Uint(id as u64)));
        let op = names[id % 2].as_str().to_string();
        assert_eq!(event.arg("op"), Some(&Value::Str(op)));
        assert_eq!(
            event.arg("device"),
            Some(&Value::Str("pf-test-cpu".to_string()))
        );
    }
    let begins = events
        .iter()
        .filter(|e| e.kind == track_event::Type::SliceBegin);
    for (id, event) in begins.enumerate() {
        assert_eq!(event.name, names[id % 2].as_str());
        assert_eq!(event.categories, ["op"]);
        assert!(matches!(event.arg("property"), Some(Value::Str(_))));
    }
    // Each text once in the file: an op name as an event name and as an `op` value (two
    // tables), an annotation name and a category once each.
    for (text, times) in [
        ("pf-intern-a", 2),
        ("pf-intern-b", 2),
        ("priority", 1),
        ("op_id", 1),
        ("queued", 1),
        ("pf-test-cpu", 2),
    ] {
        assert_eq!(occurrences(&bytes, text), times, "{text}");
    }
}

#[test]
fn the_first_packet_clears_the_state_and_every_event_after_needs_it() {
    let path = scratch("perfetto-flags");
    let name = OpName::new("pf-flags-op");
    let events = vec![
        on(EventKind::OpStart, 1_000, name, 1),
        on(EventKind::OpEnd, 2_000, name, 1),
    ];
    record(&path, vec![("pf-flags-w0", events)]);
    let (bytes, _) = export(&path);
    std::fs::remove_file(&path).unwrap();
    let packets = Trace::decode(&*bytes).unwrap().packet;
    let flags: Vec<(bool, Option<u32>)> = packets
        .iter()
        .map(|packet| (packet.interned_data.is_some(), packet.sequence_flags))
        .collect();
    // The process's and the thread's descriptors, the op's begin (its texts' first use)
    // and its end (its annotation name's first use).
    let expected = [
        (false, Some(1)),
        (false, None),
        (true, Some(2)),
        (true, Some(2)),
    ];
    assert_eq!(flags, expected);
    assert_eq!(
        packets[2].interned_data.as_ref().unwrap().event_names.len(),
        1
    );
}
