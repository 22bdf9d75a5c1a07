//! Chrome trace export: the trace window as JSON that chrome://tracing and ui.perfetto.dev
//! load.
//!
//! # Layout
//! - One process (`pid`) per device: `pid = device id + 1`, named after the device (`host` is
//!   pid 1). One thread track (`tid`) per recording thread (`tid` = its [`ThreadId`]), named
//!   with `thread_name` metadata (`cpu0-w3`). A thread's events go to its *home* device: the
//!   device of its first worker event (task, op start, spin, park, steal), else the host.
//! - GPU streams, Kineto style: under the GPU's pid, one track per stream
//!   (`tid = 1_000_000 + stream`, named `stream compute0`, `stream h2d1`), kernels as `X` events with
//!   `args.stream`, and a flow arrow from the host-side submit to the kernel.
//! - Ops: an `X` event per op (`cat: "op"`, args `op_id`, `priority`, `property`, `error`).
//!   Each `OpQueued` becomes a 1 ns `X` marker (`cat: "queue"`) on the queuing thread, and a
//!   flow (`s` -> `f`, `"bp": "e"`, integer ids) runs from it to the op's slice. An op that
//!   ended on another thread than it started on is an async `b`/`e` pair instead.
//! - Pools: `task`, `spinning` and `parked` slices, `steal` instants (thread scope) and
//!   `resize` instants (process scope), queue depths as `C` counters named `queue <label>`.
//! - `tracing` spans: `X` slices (`cat: "span"`).
//!
//! Timestamps are microseconds (with nanosecond fractions) relative to the window's first
//! event; the wall-clock time of that event is `otherData.start_time` (RFC 3339), next to the
//! dropped and evicted event counts. Slices on one track always nest: a slice that would
//! overlap its parent's end (an event lost, a span left open across a task) is clamped to it
//! and counted in [`ExportReport::clamped`]. Starts and ends whose partner is outside the
//! window are left out and counted in [`ExportReport::unmatched`].
#![forbid(unsafe_code)]

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap, VecDeque};

use crate::device::stream::StreamId;
use std::io::{self, Write};

use super::clock::Epoch;
use super::event::{property_name, Event, EventKind};
use super::names::{DeviceId, ThreadId};

/// Where GPU stream tracks start in a device's `tid` space.
pub const STREAM_TID_BASE: u32 = 1_000_000;

/// Figures carried into `otherData`, and what the trace says about its devices.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceContext {
    /// Events lost before the collector saw them.
    pub dropped_events: u64,
    /// Events the trace window let go.
    pub evicted_events: u64,
    /// Device descriptions: written as `process_labels` of the device's process and into
    /// `otherData.device_labels`, for devices with events in the trace.
    pub device_labels: Vec<(DeviceId, String)>,
}

/// What an export wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ExportReport {
    /// Profiler events read.
    pub events_in: usize,
    /// Trace events written (metadata included).
    pub trace_events: usize,
    /// Ops written (`X` or `b`/`e`).
    pub ops: usize,
    /// Flow arrows written.
    pub flows: usize,
    /// Slices clamped to nest inside their parent.
    pub clamped: usize,
    /// Starts or ends left out because their partner is not in the window.
    pub unmatched: usize,
}

/// Writes `events` (sorted by timestamp) as a Chrome trace to `out`.
pub fn write_trace(
    events: &[Event],
    context: &TraceContext,
    out: impl Write,
) -> io::Result<ExportReport> {
    let mut builder = Builder::new(events);
    for event in events {
        builder.add(event);
    }
    builder.finish(context, out)
}

/// Arguments of a trace event (serialized as an object, or left out).
#[derive(Clone, Debug, serde::Serialize)]
#[serde(untagged)]
enum Args {
    None,
    Op {
        op_id: u64,
        priority: i32,
        property: &'static str,
        error: bool,
    },
    Queued {
        op_id: u64,
        device: &'static str,
    },
    Task {
        worker: Option<u32>,
        panicked: bool,
    },
    Steal {
        thief: Option<u32>,
        victim: Option<u32>,
        from_injector: bool,
    },
    Resize {
        from: u32,
        to: u64,
    },
    Depth {
        depth: u64,
    },
    Kernel {
        stream: u32,
        op_id: u64,
    },
    Span {
        span_id: u64,
    },
    Name {
        name: String,
    },
    Labels {
        labels: String,
    },
    SortIndex {
        sort_index: u32,
    },
}

impl Args {
    fn is_none(&self) -> bool {
        matches!(self, Args::None)
    }
}

/// One trace event before it is written.
#[derive(Clone, Debug)]
struct Record {
    ts_ns: u64,
    dur_ns: Option<u64>,
    ph: &'static str,
    name: Cow<'static, str>,
    cat: &'static str,
    pid: u32,
    tid: u32,
    id: Option<u64>,
    scope: Option<&'static str>,
    bind_enclosing: bool,
    args: Args,
}

impl Record {
    fn new(ph: &'static str, name: impl Into<Cow<'static, str>>, track: Track, ts_ns: u64) -> Self {
        Record {
            ts_ns,
            dur_ns: None,
            ph,
            name: name.into(),
            cat: "",
            pid: track.pid,
            tid: track.tid,
            id: None,
            scope: None,
            bind_enclosing: false,
            args: Args::None,
        }
    }

    fn slice(name: &'static str, cat: &'static str, track: Track, from: u64, to: u64) -> Self {
        let mut record = Record::new("X", name, track, from);
        record.cat = cat;
        record.dur_ns = Some(to.saturating_sub(from));
        record
    }

    /// A 1 ns slice at `event`'s time on `track`, named after the event: where something
    /// happened to an op (queued, launched), the start of its flow arrow.
    fn marker(event: &Event, cat: &'static str, track: Track) -> Self {
        Record::slice(
            event.name.as_str(),
            cat,
            track,
            event.ts_ns,
            event.ts_ns + 1,
        )
    }

    fn args(mut self, args: Args) -> Self {
        self.args = args;
        self
    }

    /// Sort rank among events at the same timestamp: metadata, slices (longest first), async
    /// begins, flows, instants and counters, async ends.
    fn order(&self) -> u8 {
        match self.ph {
            "M" => 0,
            "X" => 1,
            "b" => 2,
            "s" | "t" | "f" => 3,
            "e" => 5,
            _ => 4,
        }
    }

    fn end_ns(&self) -> u64 {
        self.ts_ns + self.dur_ns.unwrap_or(0)
    }
}

/// The wire form of a [`Record`].
#[derive(serde::Serialize)]
struct Wire<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    cat: &'a str,
    ph: &'a str,
    ts: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    pid: u32,
    tid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    s: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bp: Option<&'a str>,
    #[serde(skip_serializing_if = "Args::is_none")]
    args: &'a Args,
}

/// A (pid, tid) pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Track {
    pid: u32,
    tid: u32,
}

fn pid_of(device: DeviceId) -> u32 {
    u32::from(device.id()) + 1
}

/// Where a thread's events go: its first worker event's device, else the host.
fn home_devices(events: &[Event]) -> HashMap<ThreadId, u32> {
    let mut home = HashMap::new();
    for event in events {
        let is_worker_event = matches!(
            event.kind,
            EventKind::TaskStart
                | EventKind::TaskEnd
                | EventKind::OpStart
                | EventKind::OpEnd
                | EventKind::SpinStart
                | EventKind::SpinEnd
                | EventKind::Park
                | EventKind::Unpark
                | EventKind::Steal
        );
        if is_worker_event {
            home.entry(event.thread)
                .or_insert_with(|| pid_of(event.device));
        }
    }
    home
}

/// A start waiting for its end.
#[derive(Clone, Copy, Debug)]
struct Open {
    event: Event,
    track: Track,
}

/// Turns profiler events into trace records, pairing starts with ends.
struct Builder {
    records: Vec<Record>,
    home: HashMap<ThreadId, u32>,
    base_ns: u64,
    report: ExportReport,
    tasks: HashMap<ThreadId, Vec<Open>>,
    spans: HashMap<ThreadId, Vec<Open>>,
    spins: HashMap<ThreadId, Open>,
    parks: HashMap<ThreadId, Open>,
    ops: HashMap<u64, Open>,
    queued: HashMap<u64, Open>,
    /// Op starts paired with their queued marker, waiting for the op's end.
    queued_for_running: HashMap<u64, Open>,
    /// Launches not yet started, per (device, stream, op): a stream runs its work in launch
    /// order, so the n-th start of a key belongs to its n-th submit (one op may launch
    /// several units on one stream).
    submits: HashMap<(DeviceId, u32, u64), VecDeque<Open>>,
    /// Kernels started and not yet ended, in the same per-key order.
    kernels: HashMap<(DeviceId, u32, u64), VecDeque<Open>>,
    next_id: u64,
}

impl Builder {
    fn new(events: &[Event]) -> Self {
        Builder {
            records: Vec::with_capacity(events.len()),
            home: home_devices(events),
            base_ns: events.first().map_or(0, |event| event.ts_ns),
            report: ExportReport {
                events_in: events.len(),
                ..ExportReport::default()
            },
            tasks: HashMap::new(),
            spans: HashMap::new(),
            spins: HashMap::new(),
            parks: HashMap::new(),
            ops: HashMap::new(),
            queued: HashMap::new(),
            queued_for_running: HashMap::new(),
            submits: HashMap::new(),
            kernels: HashMap::new(),
            next_id: 1,
        }
    }

    fn thread_track(&self, event: &Event) -> Track {
        let pid = self.home.get(&event.thread).copied().unwrap_or(1);
        Track {
            pid,
            tid: event.thread.id(),
        }
    }

    fn device_track(event: &Event) -> Track {
        Track {
            pid: pid_of(event.device),
            tid: event.thread.id(),
        }
    }

    fn stream_track(event: &Event) -> Track {
        Track {
            pid: pid_of(event.device),
            tid: STREAM_TID_BASE + event.stream(),
        }
    }

    fn open(&self, event: &Event) -> Open {
        Open {
            event: *event,
            track: self.thread_track(event),
        }
    }

    fn add(&mut self, event: &Event) {
        match event.kind {
            EventKind::OpQueued => self.op_queued(event),
            EventKind::OpStart => self.op_started(event),
            EventKind::OpEnd => self.op_ended(event),
            EventKind::TaskStart => {
                let open = self.open(event);
                push_open(&mut self.tasks, open);
            }
            EventKind::TaskEnd => self.task_ended(event),
            EventKind::SpanEnter => {
                let open = self.open(event);
                push_open(&mut self.spans, open);
            }
            EventKind::SpanExit => self.span_exited(event),
            EventKind::SpinStart => self.begin_state(event, true),
            EventKind::Park => self.begin_state(event, false),
            EventKind::SpinEnd => self.end_state(event, true),
            EventKind::Unpark => self.end_state(event, false),
            EventKind::Steal => self.steal(event),
            EventKind::PoolResized => self.resize(event),
            EventKind::QueueDepth => self.queue_depth(event),
            EventKind::StreamSubmit => self.stream_submitted(event),
            EventKind::StreamStart => {
                let key = (event.device, event.stream(), event.op_id());
                let open = Open {
                    event: *event,
                    track: Self::stream_track(event),
                };
                self.kernels.entry(key).or_default().push_back(open);
            }
            EventKind::StreamEnd => self.stream_ended(event),
        }
    }

    fn op_queued(&mut self, event: &Event) {
        let open = self.open(event);
        let marker = Record::marker(event, "queue", open.track).args(Args::Queued {
            op_id: event.op_id(),
            device: event.device.name(),
        });
        self.records.push(marker);
        self.queued.insert(event.op_id(), open);
    }

    fn op_started(&mut self, event: &Event) {
        if let Some(queued) = self.queued.remove(&event.op_id()) {
            self.queued_for_running.insert(event.op_id(), queued);
        }
        if self.ops.insert(event.op_id(), self.open(event)).is_some() {
            self.report.unmatched += 1; // started twice: the first end was lost
        }
    }

    fn op_ended(&mut self, event: &Event) {
        let queued = self.queued_for_running.remove(&event.op_id());
        let Some(start) = self.ops.remove(&event.op_id()) else {
            self.report.unmatched += 1;
            return;
        };
        let end_track = self.thread_track(event);
        let args = Args::Op {
            op_id: event.op_id(),
            priority: event.priority(),
            property: property_name(event.property()),
            error: event.is_error(),
        };
        let name = event.name.as_str();
        self.report.ops += 1;
        if end_track != start.track {
            let id = self.fresh_id();
            let mut begin = Record::new("b", name, start.track, start.event.ts_ns).args(args);
            begin.cat = "op";
            begin.id = Some(id);
            let mut end = Record::new("e", name, start.track, event.ts_ns);
            end.cat = "op";
            end.id = Some(id);
            self.records.extend([begin, end]);
            return;
        }
        let slice = Record::slice(name, "op", start.track, start.event.ts_ns, event.ts_ns);
        self.records.push(slice.args(args));
        if let Some(queued) = queued {
            self.flow("queued", "op_flow", queued, start);
        }
    }

    /// A flow arrow from `from`'s slice to the slice starting at `to`.
    fn flow(&mut self, name: &'static str, cat: &'static str, from: Open, to: Open) {
        let id = self.fresh_id();
        let mut start = Record::new("s", name, from.track, from.event.ts_ns);
        start.cat = cat;
        start.id = Some(id);
        let mut finish = Record::new("f", name, to.track, to.event.ts_ns);
        finish.cat = cat;
        finish.id = Some(id);
        finish.bind_enclosing = true;
        self.records.extend([start, finish]);
        self.report.flows += 1;
    }

    fn fresh_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id - 1
    }

    fn task_ended(&mut self, event: &Event) {
        let Some(start) = self.tasks.get_mut(&event.thread).and_then(Vec::pop) else {
            self.report.unmatched += 1;
            return;
        };
        let slice = Record::slice("task", "pool", start.track, start.event.ts_ns, event.ts_ns);
        self.records.push(slice.args(Args::Task {
            worker: event.worker(),
            panicked: event.is_error(),
        }));
    }

    fn span_exited(&mut self, event: &Event) {
        let stack = self.spans.entry(event.thread).or_default();
        let Some(position) = stack.iter().rposition(|open| open.event.arg == event.arg) else {
            self.report.unmatched += 1;
            return;
        };
        let start = stack.remove(position);
        let name = event.name.as_str();
        let slice = Record::slice(name, "span", start.track, start.event.ts_ns, event.ts_ns);
        self.records
            .push(slice.args(Args::Span { span_id: event.arg }));
    }

    fn begin_state(&mut self, event: &Event, spinning: bool) {
        let open = self.open(event);
        let table = if spinning {
            &mut self.spins
        } else {
            &mut self.parks
        };
        if table.insert(event.thread, open).is_some() {
            self.report.unmatched += 1;
        }
    }

    fn end_state(&mut self, event: &Event, spinning: bool) {
        let table = if spinning {
            &mut self.spins
        } else {
            &mut self.parks
        };
        let Some(start) = table.remove(&event.thread) else {
            self.report.unmatched += 1;
            return;
        };
        let name = if spinning { "spinning" } else { "parked" };
        let slice = Record::slice(name, "pool", start.track, start.event.ts_ns, event.ts_ns);
        self.records.push(slice.args(Args::Task {
            worker: event.worker(),
            panicked: false,
        }));
    }

    fn steal(&mut self, event: &Event) {
        let mut instant = Record::new("i", "steal", self.thread_track(event), event.ts_ns);
        instant.cat = "pool";
        instant.scope = Some("t");
        self.records.push(instant.args(Args::Steal {
            thief: event.worker(),
            victim: event.victim(),
            from_injector: event.victim().is_none(),
        }));
    }

    fn resize(&mut self, event: &Event) {
        let mut instant = Record::new("i", "resize", Self::device_track(event), event.ts_ns);
        instant.cat = "pool";
        instant.scope = Some("p");
        self.records.push(instant.args(Args::Resize {
            from: event.aux,
            to: event.arg,
        }));
    }

    fn queue_depth(&mut self, event: &Event) {
        let name = format!("queue {}", event.name.as_str());
        let mut counter = Record::new("C", name, Self::device_track(event), event.ts_ns);
        counter.cat = "queue";
        self.records
            .push(counter.args(Args::Depth { depth: event.arg }));
    }

    fn stream_submitted(&mut self, event: &Event) {
        let open = self.open(event);
        let marker = Record::marker(event, "launch", open.track).args(Args::Kernel {
            stream: event.stream(),
            op_id: event.op_id(),
        });
        self.records.push(marker);
        self.submits
            .entry((event.device, event.stream(), event.op_id()))
            .or_default()
            .push_back(open);
    }

    fn stream_ended(&mut self, event: &Event) {
        let key = (event.device, event.stream(), event.op_id());
        let Some(start) = pop_first(&mut self.kernels, &key) else {
            self.report.unmatched += 1;
            return;
        };
        let name = event.name.as_str();
        let slice = Record::slice(name, "kernel", start.track, start.event.ts_ns, event.ts_ns);
        self.records.push(slice.args(Args::Kernel {
            stream: event.stream(),
            op_id: event.op_id(),
        }));
        self.report.ops += 1;
        if let Some(submit) = pop_first(&mut self.submits, &key) {
            self.flow("launch", "ac2g", submit, start);
        }
    }

    /// Counts what never ended, adds metadata, nests, sorts and writes.
    fn finish(mut self, context: &TraceContext, out: impl Write) -> io::Result<ExportReport> {
        self.report.unmatched += self.tasks.values().map(Vec::len).sum::<usize>()
            + self.spans.values().map(Vec::len).sum::<usize>()
            + self.spins.len()
            + self.parks.len()
            + self.ops.len()
            + self.kernels.values().map(VecDeque::len).sum::<usize>();
        self.report.clamped = nest_slices(&mut self.records);
        let labelled = self.add_metadata(&context.device_labels);
        self.records
            .sort_by_key(|record| (record.ts_ns, record.order(), Reverse(record.dur_ns)));
        self.report.trace_events = self.records.len();
        write_json(&self.records, self.base_ns, context, &labelled, out)?;
        Ok(self.report)
    }

    /// `process_name` (and `process_labels`, for a device in `labels`) for every pid and
    /// `thread_name` for every track used; returns the (device name, label) pairs written.
    fn add_metadata(&mut self, labels: &[(DeviceId, String)]) -> Vec<(String, String)> {
        let mut labelled = Vec::new();
        let tracks: BTreeSet<Track> = self
            .records
            .iter()
            .map(|record| Track {
                pid: record.pid,
                tid: record.tid,
            })
            .collect();
        let pids: BTreeSet<u32> = tracks.iter().map(|track| track.pid).collect();
        let base = self.base_ns;
        for pid in pids {
            let track = Track { pid, tid: 0 };
            let device = DeviceId::from_pid(pid);
            let name = Args::Name {
                name: device.name().to_string(),
            };
            self.records
                .push(Record::new("M", "process_name", track, base).args(name));
            if let Some((_, label)) = labels.iter().find(|(known, _)| *known == device) {
                let args = Args::Labels {
                    labels: label.clone(),
                };
                self.records
                    .push(Record::new("M", "process_labels", track, base).args(args));
                labelled.push((device.name().to_string(), label.clone()));
            }
            let index = Args::SortIndex { sort_index: pid };
            self.records
                .push(Record::new("M", "process_sort_index", track, base).args(index));
        }
        for track in tracks {
            let name = if track.tid >= STREAM_TID_BASE {
                StreamId::from_code(0, track.tid - STREAM_TID_BASE).label()
            } else {
                ThreadId::from_raw(track.tid).name()
            };
            let name = Args::Name { name };
            self.records
                .push(Record::new("M", "thread_name", track, base).args(name));
            let index = Args::SortIndex {
                sort_index: track.tid,
            };
            self.records
                .push(Record::new("M", "thread_sort_index", track, base).args(index));
        }
        labelled
    }
}

impl DeviceId {
    /// The device whose trace process is `pid`.
    fn from_pid(pid: u32) -> DeviceId {
        DeviceId::from_raw(u16::try_from(pid.saturating_sub(1)).unwrap_or(0))
    }
}

fn push_open(table: &mut HashMap<ThreadId, Vec<Open>>, open: Open) {
    table.entry(open.event.thread).or_default().push(open);
}

/// Clamps `X` slices so that on every track each one nests inside the one around it; returns
/// how many it clamped.
fn nest_slices(records: &mut [Record]) -> usize {
    let mut by_track: HashMap<(u32, u32), Vec<usize>> = HashMap::new();
    for (index, record) in records.iter().enumerate() {
        if record.ph == "X" {
            by_track
                .entry((record.pid, record.tid))
                .or_default()
                .push(index);
        }
    }
    let mut clamped = 0;
    for mut indexes in by_track.into_values() {
        indexes.sort_by_key(|&i| (records[i].ts_ns, Reverse(records[i].dur_ns)));
        let mut open_ends: Vec<u64> = Vec::new();
        for index in indexes {
            let record = &mut records[index];
            while open_ends.last().is_some_and(|&end| end <= record.ts_ns) {
                open_ends.pop();
            }
            if let Some(&parent_end) = open_ends.last() {
                if record.end_ns() > parent_end {
                    record.dur_ns = Some(parent_end - record.ts_ns);
                    clamped += 1;
                }
            }
            open_ends.push(record.end_ns());
        }
    }
    clamped
}

fn micros(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

fn write_json(
    records: &[Record],
    base_ns: u64,
    context: &TraceContext,
    labelled: &[(String, String)],
    mut out: impl Write,
) -> io::Result<()> {
    out.write_all(b"{\"traceEvents\":[\n")?;
    for (index, record) in records.iter().enumerate() {
        if index > 0 {
            out.write_all(b",\n")?;
        }
        let wire = Wire {
            name: &record.name,
            cat: record.cat,
            ph: record.ph,
            ts: micros(record.ts_ns.saturating_sub(base_ns)),
            dur: record.dur_ns.map(micros),
            pid: record.pid,
            tid: record.tid,
            id: record.id,
            s: record.scope,
            bp: record.bind_enclosing.then_some("e"),
            args: &record.args,
        };
        serde_json::to_writer(&mut out, &wire)?;
    }
    out.write_all(b"\n],\"displayTimeUnit\":\"ns\",\"otherData\":")?;
    serde_json::to_writer(&mut out, &other_data(base_ns, context, labelled))?;
    out.write_all(b"}\n")?;
    Ok(())
}

fn other_data(
    base_ns: u64,
    context: &TraceContext,
    labelled: &[(String, String)],
) -> serde_json::Value {
    let start = Epoch::get().wall_at(base_ns);
    let labels: serde_json::Map<String, serde_json::Value> = labelled
        .iter()
        .map(|(device, label)| (device.clone(), label.clone().into()))
        .collect();
    serde_json::json!({
        "device_labels": labels,
        "producer": "enginetop",
        "version": env!("CARGO_PKG_VERSION"),
        "start_time": start.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true),
        "start_time_unix_ns": start.timestamp_nanos_opt(),
        "clock": "tsc (quanta), ns since the process epoch",
        "dropped_events": context.dropped_events,
        "evicted_events": context.evicted_events,
    })
}

/// The oldest entry queued under `key`, dropping the key when it empties.
fn pop_first(
    queues: &mut HashMap<(DeviceId, u32, u64), VecDeque<Open>>,
    key: &(DeviceId, u32, u64),
) -> Option<Open> {
    let queue = queues.get_mut(key)?;
    let first = queue.pop_front();
    if queue.is_empty() {
        queues.remove(key);
    }
    first
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::profiler::event::OpInfo;
    use crate::profiler::names::NameId;
    use crate::profiler::validate::validate_json;
    use serde_json::Value;

    /// Thread ids far above any real thread's in the test process.
    const T: u32 = 900_000;

    fn on(thread: u32, ts_ns: u64, event: Event) -> Event {
        let mut event = event.at(ts_ns);
        event.thread = ThreadId::from_raw(T + thread);
        event
    }

    fn export(events: &mut [Event]) -> (Value, ExportReport) {
        events.sort_by_key(|event| event.ts_ns);
        let mut json = Vec::new();
        let report = write_trace(events, &TraceContext::default(), &mut json).unwrap();
        validate_json(&json).unwrap_or_else(|errors| panic!("{errors}"));
        (serde_json::from_slice(&json).unwrap(), report)
    }

    fn trace_events(trace: &Value) -> &Vec<Value> {
        trace["traceEvents"].as_array().unwrap()
    }

    #[test]
    fn described_devices_in_the_trace_get_process_labels_and_other_data() {
        let gpu = DeviceId::register("chrome-test-gpu(0)");
        let idle = DeviceId::register("chrome-test-gpu(1)");
        let name = NameId::intern("chrome-test-kernel");
        let mut events = [
            on(
                1,
                1_000,
                Event::op(EventKind::OpStart, gpu, name, OpInfo::new(1)),
            ),
            on(
                1,
                2_000,
                Event::op(EventKind::OpEnd, gpu, name, OpInfo::new(1)),
            ),
        ];
        events.sort_by_key(|event| event.ts_ns);
        let label = "simulated GPU, model: 670 GFLOP/s, 33.5 GB/s memory";
        let context = TraceContext {
            device_labels: vec![(gpu, label.to_string()), (idle, "unused".to_string())],
            ..TraceContext::default()
        };
        let mut json = Vec::new();
        write_trace(&events, &context, &mut json).unwrap();
        validate_json(&json).unwrap_or_else(|errors| panic!("{errors}"));
        let trace: Value = serde_json::from_slice(&json).unwrap();
        let labels: Vec<&Value> = trace_events(&trace)
            .iter()
            .filter(|event| event["name"] == "process_labels")
            .collect();
        assert_eq!(labels.len(), 1, "only the device in the trace: {labels:?}");
        assert_eq!(labels[0]["pid"], u32::from(gpu.id()) + 1);
        assert_eq!(labels[0]["args"]["labels"], label);
        let other = &trace["otherData"]["device_labels"];
        assert_eq!(other, &serde_json::json!({ "chrome-test-gpu(0)": label }));
    }

    #[test]
    fn ops_become_slices_with_args_and_a_flow_from_their_queueing() {
        let cpu = DeviceId::register("chrome-test-cpu");
        let name = NameId::intern("chrome-test-add");
        let op = OpInfo::new(11).priority(2).property(3);
        let mut events = [
            on(1, 1_000, Event::op(EventKind::OpQueued, cpu, name, op)),
            on(2, 3_000, Event::op(EventKind::OpStart, cpu, name, op)),
            on(
                2,
                7_500,
                Event::op(EventKind::OpEnd, cpu, name, op).with_error(true),
            ),
        ];
        let (trace, report) = export(&mut events);
        assert_eq!((report.ops, report.flows, report.unmatched), (1, 1, 0));
        let slice = trace_events(&trace)
            .iter()
            .find(|event| event["cat"] == "op")
            .unwrap();
        assert_eq!(slice["ph"], "X");
        assert_eq!(slice["name"], "chrome-test-add");
        assert_eq!(slice["ts"], 2.0);
        assert_eq!(slice["dur"], 4.5);
        assert_eq!(slice["pid"], u32::from(cpu.id()) + 1);
        let args = &slice["args"];
        assert_eq!(
            (args["op_id"].as_u64(), args["priority"].as_i64()),
            (Some(11), Some(2))
        );
        assert_eq!(
            (args["property"].as_str(), args["error"].as_bool()),
            (Some("cpu_prioritized"), Some(true))
        );
        let flows: Vec<&Value> = trace_events(&trace)
            .iter()
            .filter(|event| event["ph"] == "s" || event["ph"] == "f")
            .collect();
        assert_eq!(flows.len(), 2);
        assert_eq!(flows[0]["ts"], 0.0);
        assert_eq!(flows[1]["bp"], "e");
        assert_eq!(trace["displayTimeUnit"], "ns");
        assert!(trace["otherData"]["start_time"]
            .as_str()
            .unwrap()
            .contains('T'));
    }

    #[test]
    fn an_op_ending_on_another_thread_is_an_async_pair() {
        let name = NameId::intern("chrome-test-async");
        let op = OpInfo::new(12);
        let mut events = [
            on(
                3,
                10,
                Event::op(EventKind::OpStart, DeviceId::HOST, name, op),
            ),
            on(4, 20, Event::op(EventKind::OpEnd, DeviceId::HOST, name, op)),
        ];
        let (trace, report) = export(&mut events);
        assert_eq!(report.ops, 1);
        let phases: Vec<&str> = trace_events(&trace)
            .iter()
            .filter(|event| event["cat"] == "op")
            .map(|event| event["ph"].as_str().unwrap())
            .collect();
        assert_eq!(phases, ["b", "e"]);
    }

    #[test]
    fn pool_events_become_slices_instants_and_counters() {
        let pool = DeviceId::register("chrome-test-pool");
        let worker = |kind| Event::worker_event(kind, pool, 0);
        let mut events = [
            on(
                5,
                0,
                Event::new(EventKind::PoolResized, pool, NameId::UNNAMED, 0, 2),
            ),
            on(6, 10, worker(EventKind::TaskStart)),
            on(6, 20, worker(EventKind::TaskEnd).with_error(true)),
            on(6, 30, worker(EventKind::SpinStart)),
            on(
                6,
                35,
                Event::new(EventKind::Steal, pool, NameId::UNNAMED, 0, 1),
            ),
            on(6, 40, worker(EventKind::SpinEnd)),
            on(6, 50, worker(EventKind::Park)),
            on(6, 90, worker(EventKind::Unpark)),
            on(
                5,
                95,
                Event::new(EventKind::QueueDepth, pool, NameId::intern("w0"), 0, 3),
            ),
        ];
        let (trace, _) = export(&mut events);
        let named = |name: &str| {
            trace_events(&trace)
                .iter()
                .filter(|event| event["name"] == name)
                .count()
        };
        assert_eq!(
            (named("task"), named("spinning"), named("parked")),
            (1, 1, 1)
        );
        assert_eq!(
            (named("steal"), named("resize"), named("queue w0")),
            (1, 1, 1)
        );
        let thread_names: Vec<&str> = trace_events(&trace)
            .iter()
            .filter(|event| event["name"] == "thread_name")
            .map(|event| event["args"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            thread_names,
            [format!("thread-{}", T + 5), format!("thread-{}", T + 6)]
        );
    }

    #[test]
    fn gpu_streams_get_kineto_tracks_and_launch_flows() {
        let gpu = DeviceId::register("chrome-test-gpu");
        let name = NameId::intern("chrome-test-kernel");
        let stream = |kind| Event::new(kind, gpu, name, 2, 77);
        let mut events = [
            on(7, 100, stream(EventKind::StreamSubmit)),
            on(7, 300, stream(EventKind::StreamStart)),
            on(7, 900, stream(EventKind::StreamEnd)),
        ];
        let (trace, report) = export(&mut events);
        assert_eq!(report.flows, 1);
        let kernel = trace_events(&trace)
            .iter()
            .find(|event| event["cat"] == "kernel")
            .unwrap();
        assert_eq!(kernel["tid"], STREAM_TID_BASE + 2);
        assert_eq!(kernel["args"]["stream"], 2);
        assert!(trace_events(&trace)
            .iter()
            .any(|event| event["args"]["name"] == "stream compute2"));
    }

    #[test]
    fn overlapping_slices_are_clamped_and_orphans_counted() {
        let span = NameId::intern("chrome-test-span");
        let pool = DeviceId::register("chrome-test-clamp");
        let mut events = [
            on(8, 10, Event::worker_event(EventKind::TaskStart, pool, 0)),
            on(
                8,
                15,
                Event::new(EventKind::SpanEnter, DeviceId::HOST, span, 0, 1),
            ),
            on(8, 20, Event::worker_event(EventKind::TaskEnd, pool, 0)),
            on(
                8,
                25,
                Event::new(EventKind::SpanExit, DeviceId::HOST, span, 0, 1),
            ),
            on(8, 30, Event::worker_event(EventKind::TaskEnd, pool, 0)),
        ];
        let (_, report) = export(&mut events);
        assert_eq!((report.clamped, report.unmatched), (1, 1));
    }

    #[test]
    fn an_empty_window_is_a_valid_trace() {
        let (trace, report) = export(&mut []);
        assert_eq!(report.trace_events, 0);
        assert!(trace_events(&trace).is_empty());
    }
}
