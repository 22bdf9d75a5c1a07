//! A recording as a Chrome trace: its events fed to the profiler's own exporter, so that the
//! export of a recording is the live run's export, ids aside.
//!
//! The exporter reads names through this process's registries, so each of the recording's
//! names is interned here, each of its devices registered with the name and typed identity
//! the recording gives it, and each of its threads gets a thread id here that
//! carries its recorded name (the registry gives ids to threads that exist, so a short-lived
//! thread is made for each and given that name). Events are then put in time order, stably, as the
//! live trace window does, so ties keep the order the collector drained them in.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::io::Write;

use crate::profiler::chrome::{write_trace_with_graph, ExportReport, TraceContext};
use crate::profiler::{name_current_thread, DeviceId, Event, OpName, ThreadId};
use crate::sync::thread;

use super::convert::to_event;
use super::{RecordError, Recording};

/// Writes `recording` as Chrome trace JSON to `out`, with its op graph and each op run's
/// times ([`GraphCalls`](super::GraphCalls)) as `otherData.graph` when it holds a graph.
pub fn export_chrome(recording: &Recording, out: impl Write) -> Result<ExportReport, RecordError> {
    let events = profiler_events(recording)?;
    let context = TraceContext {
        dropped_events: recording.dropped_events,
        evicted_events: 0,
        task_sampling: Default::default(),
        device_labels: recording
            .device_labels
            .iter()
            .map(|(&id, label)| (recording.device_id(id), label.clone()))
            .collect(),
        threads: Vec::new(),
    };
    let graph = recording
        .graph_calls()
        .map(|calls| serde_json::to_value(calls).map_err(std::io::Error::from))
        .transpose()
        .map_err(RecordError::Export)?;
    write_trace_with_graph(&events, &context, graph, out).map_err(RecordError::Export)
}

/// The recording's events with this process's ids, sorted by time (stably).
fn profiler_events(recording: &Recording) -> Result<Vec<Event>, RecordError> {
    let mut names: HashMap<u32, OpName> = HashMap::new();
    // Devices and threads get this process's ids in the recording's order of ids, so
    // their trace processes and tracks sort as the live trace's do.
    let mut devices: HashMap<u16, DeviceId> = HashMap::new();
    let mut device_ids: Vec<u16> = recording.device_ids().collect();
    device_ids.sort_unstable();
    for id in device_ids {
        devices.insert(id, recording.device_id(id));
    }
    let mut threads: HashMap<u32, ThreadId> = HashMap::new();
    let mut thread_ids: Vec<u32> = recording.thread_ids().collect();
    thread_ids.sort_unstable();
    for id in thread_ids {
        threads.insert(id, thread_named(&recording.thread_name(id))?);
    }
    let mut events = Vec::with_capacity(recording.events.len());
    for recorded in &recording.events {
        let name = *names
            .entry(recorded.name)
            .or_insert_with(|| OpName::new(recording.name(recorded.name)));
        let device = *devices
            .entry(recorded.device)
            .or_insert_with(|| recording.device_id(recorded.device));
        let thread = match threads.get(&recorded.thread) {
            Some(&thread) => thread,
            None => {
                let thread = thread_named(&recording.thread_name(recorded.thread))?;
                threads.insert(recorded.thread, thread);
                thread
            }
        };
        events.push(to_event(recorded, (name, device, thread)));
    }
    events.sort_by_key(|event| event.ts_ns);
    Ok(events)
}

/// A thread id of this process that carries `name` (from a thread made for it).
pub(super) fn thread_named(name: &str) -> Result<ThreadId, RecordError> {
    let name = name.to_string();
    thread::Builder::new()
        .spawn(move || {
            name_current_thread(&name);
            ThreadId::current()
        })
        .map_err(RecordError::Spawn)?
        .join()
        .map_err(|_| RecordError::Spawn(std::io::Error::other("a naming thread panicked")))
}
