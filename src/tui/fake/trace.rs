//! The fake's trace export: half a second of synthetic events for every thread of the
//! model, written by the profiler's own Chrome exporter (so the file is what a real export
//! looks like and passes the same validator).
#![forbid(unsafe_code)]

use std::io::{BufWriter, Write};
use std::path::Path;

use super::model::{mix, streams_fed_by, FakeThread, Model, OPS};
use super::FakeOptions;
use crate::profiler::chrome::{write_trace, TraceContext};
use crate::profiler::{Event, EventKind, OpInfo, OpName, ThreadId};

/// Ops per thread in the exported window.
const OPS_PER_THREAD: u64 = 8;
/// Time between two ops' starts on one thread.
const OP_SPACING_NS: u64 = 60_000_000;

/// Writes the trace of `model` to `path`; returns the number of trace events written.
pub(super) fn write(model: &Model, options: &FakeOptions, path: &Path) -> std::io::Result<usize> {
    let mut events = Vec::new();
    let start = model.step * options.step.as_nanos() as u64;
    for thread in model.threads(options) {
        thread_events(&thread, start, &mut events);
    }
    events.sort_by_key(|event| event.ts_ns);
    let mut out = BufWriter::new(std::fs::File::create(path)?);
    let report = write_trace(&events, &TraceContext::default(), &mut out)?;
    out.flush()?;
    Ok(report.trace_events)
}

/// Ops run back to back with a park between each, as `thread` would record them.
fn thread_events(thread: &FakeThread, start: u64, events: &mut Vec<Event>) {
    let device = thread.role.device();
    let mut push = |event: Event, ts: u64| {
        let mut event = event.at(ts);
        event.thread = ThreadId::from_raw(thread.tid);
        events.push(event);
    };
    for k in 0..OPS_PER_THREAD {
        let id = u64::from(thread.tid) * 1_000 + k;
        let (name, _, mean) = OPS[(mix(id, 1, 2) % OPS.len() as u64) as usize];
        let name = OpName::new(name);
        let begin = start + k * OP_SPACING_NS;
        let end = begin + (mean.as_nanos() as u64).min(OP_SPACING_NS / 2);
        let op = OpInfo::new(id);
        push(Event::op(EventKind::OpStart, device, name, op), begin);
        push(Event::op(EventKind::OpEnd, device, name, op), end);
        if let Some(w) = thread.gpu_worker() {
            // A copy worker takes turns between its two streams.
            let streams = streams_fed_by(w);
            let stream = streams[k as usize % streams.len()].code();
            push(
                Event::new(EventKind::StreamSubmit, device, name, stream, id),
                begin,
            );
            push(
                Event::new(EventKind::StreamStart, device, name, stream, id),
                begin + 1_000,
            );
            push(
                Event::new(EventKind::StreamEnd, device, name, stream, id),
                end,
            );
        }
        push(
            Event::worker_event(EventKind::Park, device, thread.worker),
            end + 1_000,
        );
        push(
            Event::worker_event(EventKind::Unpark, device, thread.worker),
            begin + OP_SPACING_NS - 1_000,
        );
    }
}
