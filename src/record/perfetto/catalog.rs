//! The export's first pass: what names the trace's tracks and events, read from every frame
//! without keeping any event. Its size follows the run's threads, devices and names, not its
//! length.
//!
//! Besides the recording's tables (with the thread names in their final form), it finds each
//! thread's home device (the device of its earliest worker event, as the Chrome export puts
//! a thread's track under that device's process), the first and last event times, and which
//! ops end on another thread than they started on: those are async (the Chrome export's
//! `b`/`e` pairs) and go on tracks of their own, decided per (thread, op name) when the op
//! starts, since an exporter writing as it reads cannot wait for each op's end.
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::profiler::is_worker_event;
use crate::record::format::{Frame, RecordKind, RecordedEvent, RecordingInfo, Tables};

use super::frames::{FrameStream, Stop};
use crate::record::convert::event_kind;

/// What the first pass found.
#[derive(Debug, Default)]
pub(super) struct Catalog {
    pub(super) info: RecordingInfo,
    names: HashMap<u32, String>,
    devices: HashMap<u16, String>,
    threads: HashMap<u32, String>,
    pub(super) labels: BTreeMap<u16, String>,
    /// Each thread's earliest worker event: (time, file position, device).
    homes: HashMap<u32, (u64, u64, u16)>,
    pub(super) first_ns: Option<u64>,
    pub(super) last_ns: Option<u64>,
    pub(super) events: u64,
    pub(super) dropped_events: u64,
    /// (thread, name) of ops that ended on another thread at least once.
    async_ops: HashSet<(u32, u32)>,
    /// Ops started and not yet ended: op id -> (thread, name).
    running: HashMap<u64, (u32, u32)>,
}

impl Catalog {
    /// Reads every frame of `frames`; returns what it found and why it stopped early.
    pub(super) fn read(frames: &mut FrameStream) -> (Catalog, Option<Stop>) {
        let mut catalog = Catalog::default();
        while let Some(frame) = frames.next_frame() {
            match frame {
                Frame::Header(info) => catalog.info = info,
                Frame::Chunk(chunk) => {
                    catalog.add_tables(chunk.tables);
                    catalog.dropped_events = catalog.dropped_events.max(chunk.dropped);
                    for event in &chunk.events {
                        catalog.add_event(event);
                    }
                }
                Frame::Tables(tables) => catalog.add_tables(tables),
                Frame::End(end) => {
                    catalog.dropped_events = catalog.dropped_events.max(end.dropped);
                }
                Frame::Summary(_) | Frame::Shape(_) | Frame::Runs(_) | Frame::Checkpoint(_) => {}
            }
        }
        catalog.running = HashMap::new();
        (catalog, frames.take_stop())
    }

    fn add_tables(&mut self, tables: Tables) {
        self.names.extend(tables.names);
        let devices = tables.devices.into_iter();
        self.devices
            .extend(devices.map(|(id, entry)| (id, entry.name)));
        self.threads.extend(tables.threads);
        self.labels.extend(tables.device_labels);
    }

    fn add_event(&mut self, event: &RecordedEvent) {
        let position = self.events;
        self.events += 1;
        self.first_ns = Some(
            self.first_ns
                .map_or(event.ts_ns, |first| first.min(event.ts_ns)),
        );
        self.last_ns = Some(
            self.last_ns
                .map_or(event.ts_ns, |last| last.max(event.ts_ns)),
        );
        if is_worker_event(event_kind(event.kind)) {
            let earliest = (event.ts_ns, position, event.device);
            let home = self.homes.entry(event.thread).or_insert(earliest);
            if (earliest.0, earliest.1) < (home.0, home.1) {
                *home = earliest;
            }
        }
        match event.kind {
            RecordKind::OpStart => {
                self.running.insert(event.arg, (event.thread, event.name));
            }
            RecordKind::OpEnd => {
                if let Some(started) = self.running.remove(&event.arg) {
                    if started.0 != event.thread {
                        self.async_ops.insert(started);
                    }
                }
            }
            _ => {}
        }
    }

    /// The text of name `id` (`"unknown"` if the recording has none).
    pub(super) fn name(&self, id: u32) -> &str {
        self.names.get(&id).map_or("unknown", String::as_str)
    }

    /// The name of device `id` (`"unknown"` if the recording has none).
    pub(super) fn device_name(&self, id: u16) -> &str {
        self.devices.get(&id).map_or("unknown", String::as_str)
    }

    /// The name of thread `id` in its final form (`thread-<id>` if the recording has none).
    pub(super) fn thread_name(&self, id: u32) -> String {
        self.threads
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("thread-{id}"))
    }

    /// The device whose process holds thread `id`'s track (device 0 for a thread with no
    /// worker event).
    pub(super) fn home(&self, thread: u32) -> u16 {
        self.homes.get(&thread).map_or(0, |home| home.2)
    }

    /// Whether op `name` started on `thread` ends elsewhere (at least once in the run).
    pub(super) fn is_async(&self, thread: u32, name: u32) -> bool {
        self.async_ops.contains(&(thread, name))
    }
}
