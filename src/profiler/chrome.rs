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
//! - Ops: an `X` event per op (`cat: "op"`, args `priority`, `property`, `error`: the same
//!   for every call of an op name, so viewers that name a frame by `name` plus `args`, such
//!   as speedscope, group an op name's calls into one frame). Each `OpQueued` becomes a
//!   `queued` instant (`i`, thread scope, `cat: "queue"`) on the queuing thread carrying the
//!   per-call identity (`op_id`, `op`, `device`), and a flow (`s` -> `f`, `"bp": "e"`,
//!   integer ids) runs to the op's slice. An op that ended on another thread than it started
//!   on is an async `b`/`e` pair instead (its `b` carries `op_id`).
//! - Only work is a slice: queued moments and kernel launches are instants, never slices.
//!   A flow starts inside a slice of its thread (the one enclosing the moment, else the last
//!   one that ended before it, e.g. the op whose end made this one ready) and finishes inside
//!   its op's slice; a moment with no slice before it on its thread gets no flow (see
//!   `trace_time.rs`).
//! - Pools: `task`, `spinning` and `parked` slices, `steal` instants (thread scope), and an
//!   instant per pool resize (process scope) named `resize <device>: <from> -> <to>`; queue
//!   depths as `C` counters named `queue <label>`. A thread that was parked when the window
//!   began is parked from the window's start; one still parked or spinning at its end stays
//!   so to the window's last event. Every thread the window knows of gets its track, even
//!   one with no event in the window (`TraceContext::threads`).
//! - `tracing` spans: `X` slices (`cat: "span"`).
//! - The op graph, when the export has one (`write_trace_with_graph`, from a recording):
//!   `otherData.graph`, as the recording keeps it (the iteration's ops with their reads and
//!   writes, and each op run's op id, iteration, index, start and end in ns), for an
//!   analyzer (`enginetop analyze`). Not in the op slices' `args`: those stay the same for
//!   every call of an op name, so viewers that key a frame by name and args (speedscope)
//!   keep one frame per op name.
//!
//! Timestamps are microseconds (with nanosecond fractions) relative to the window's first
//! event; the wall-clock time of that event is `otherData.start_time` (RFC 3339), next to the
//! dropped and evicted event counts and, when a pool probe counted tasks,
//! `otherData.task_sampling` (tasks counted and recorded, the rate). Slices on one track always nest, also as viewers read
//! them (doubles, `ts + dur`: see `trace_time.rs`), and at equal `ts` the longer slice
//! comes first: a slice that would overlap its parent's end (an event lost, a span left open
//! across a task) is clamped to it and counted in [`ExportReport::clamped`]. Starts and ends
//! whose partner is outside the window are left out and counted in
//! [`ExportReport::unmatched`].
#![forbid(unsafe_code)]

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap};

use crate::device::stream::StreamId;
use std::io::{self, Write};

use super::clock::Epoch;
use super::event::{property_name, Event, EventKind, NO_WORKER};
use super::names::{DeviceId, ThreadId};
use super::pairs::{stream_key, Pairs};
use super::trace_time::{exact_duration, inside, micros, SliceIndex};
use super::window::is_worker_event;

/// Where GPU stream tracks start in a device's `tid` space.
pub(crate) const STREAM_TID_BASE: u32 = 1_000_000;

/// Figures carried into `otherData`, and what the trace says about its devices.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TraceContext {
    /// Events lost before the collector saw them.
    pub(crate) dropped_events: u64,
    /// Events the trace window let go.
    pub(crate) evicted_events: u64,
    /// Pool tasks counted and recorded: `otherData.task_sampling` when any was counted.
    pub(crate) task_sampling: super::TaskSampling,
    /// Device descriptions: written as `process_labels` of the device's process and into
    /// `otherData.device_labels`, for devices with events in the trace.
    pub(crate) device_labels: Vec<(DeviceId, String)>,
    /// Threads whose earlier events the window let go: each gets its track, and one that
    /// was parked then is parked from the window's start.
    pub(crate) threads: Vec<WindowThread>,
}

/// A thread as it was when the trace window began (after the events it let go).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WindowThread {
    /// The thread.
    pub(crate) thread: ThreadId,
    /// The device of its first worker event, if it had one.
    pub(crate) device: Option<DeviceId>,
    /// Parked at the window's start.
    pub(crate) parked: bool,
    /// It has exited: it gets a track only if it has events in the window.
    pub(crate) exited: bool,
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
pub(crate) fn write_trace(
    events: &[Event],
    context: &TraceContext,
    out: impl Write,
) -> io::Result<ExportReport> {
    write_trace_with_graph(events, context, None, out)
}

/// [`write_trace`], with `graph` (any JSON value: the op graph a recording holds) written as
/// `otherData.graph` when given.
pub(crate) fn write_trace_with_graph(
    events: &[Event],
    context: &TraceContext,
    graph: Option<serde_json::Value>,
    out: impl Write,
) -> io::Result<ExportReport> {
    let mut builder = Builder::new(events, &context.threads);
    for event in events {
        builder.add(event);
    }
    builder.finish(context, graph, out)
}

/// Arguments of a trace event (serialized as an object, or left out).
#[derive(Clone, Debug, serde::Serialize)]
#[serde(untagged)]
enum Args {
    None,
    Op {
        priority: i32,
        property: &'static str,
        error: bool,
    },
    AsyncOp {
        op_id: u64,
        priority: i32,
        property: &'static str,
        error: bool,
    },
    Queued {
        op_id: u64,
        op: &'static str,
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
        device: &'static str,
        from: u32,
        to: u64,
    },
    Depth {
        depth: u64,
    },
    Kernel {
        stream: u32,
    },
    Launch {
        stream: u32,
        op_id: u64,
        op: &'static str,
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

    /// A thread-scoped instant at `event`'s time on `track`: where something happened to an
    /// op (queued, launched), not work.
    fn moment(event: &Event, name: &'static str, cat: &'static str, track: Track) -> Self {
        let mut record = Record::new("i", name, track, event.ts_ns);
        record.cat = cat;
        record.scope = Some("t");
        record
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
    for event in events.iter().filter(|event| is_worker_event(event.kind)) {
        home.entry(event.thread)
            .or_insert_with(|| pid_of(event.device));
    }
    home
}

/// A start waiting for its end.
#[derive(Clone, Copy, Debug)]
struct Open {
    event: Event,
    track: Track,
}

/// A flow arrow waiting for the slices it binds to: from a moment on a thread's track to the
/// slice `to` (an index into the records).
#[derive(Clone, Copy, Debug)]
struct PendingFlow {
    name: &'static str,
    cat: &'static str,
    from: Track,
    from_ns: u64,
    to: usize,
}

/// Turns profiler events into trace records, pairing starts with ends.
struct Builder {
    records: Vec<Record>,
    home: HashMap<ThreadId, u32>,
    base_ns: u64,
    report: ExportReport,
    /// Starts waiting for their ends; a launch waits for its kernel's end.
    pairs: Pairs<Open, Open>,
    queued: HashMap<u64, Open>,
    /// Op starts paired with their queued marker, waiting for the op's end.
    queued_for_running: HashMap<u64, Open>,
    /// Flows to bind once every slice is known.
    flows: Vec<PendingFlow>,
    /// Tracks of threads with no record of their own (known to the window, quiet in it).
    quiet_tracks: BTreeSet<Track>,
    /// The window's last event (where states still open at the end stop).
    end_ns: u64,
    next_id: u64,
}

impl Builder {
    fn new(events: &[Event], threads: &[WindowThread]) -> Self {
        let mut builder = Builder {
            records: Vec::with_capacity(events.len()),
            home: home_devices(events),
            base_ns: events.first().map_or(0, |event| event.ts_ns),
            end_ns: events.last().map_or(0, |event| event.ts_ns),
            report: ExportReport {
                events_in: events.len(),
                ..ExportReport::default()
            },
            pairs: Pairs::default(),
            queued: HashMap::new(),
            queued_for_running: HashMap::new(),
            flows: Vec::new(),
            quiet_tracks: BTreeSet::new(),
            next_id: 1,
        };
        if !events.is_empty() {
            let in_window: BTreeSet<ThreadId> = events.iter().map(|event| event.thread).collect();
            for thread in threads {
                builder.carry_in(thread, in_window.contains(&thread.thread));
            }
        }
        builder
    }

    /// Gives a thread the window began with its track, and opens its park at the window's
    /// start if it was parked then.
    fn carry_in(&mut self, thread: &WindowThread, in_window: bool) {
        if thread.exited && !in_window {
            return;
        }
        if let Some(device) = thread.device {
            self.home.entry(thread.thread).or_insert(pid_of(device));
        }
        let mut start = Event::default().at(self.base_ns);
        start.thread = thread.thread;
        start.kind = EventKind::Park;
        start.aux = NO_WORKER;
        let open = self.open(&start);
        self.quiet_tracks.insert(open.track);
        if thread.parked {
            self.pairs.state_began(thread.thread, false, open);
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
            EventKind::TaskStart => self.pairs.task_started(event.thread, self.open(event)),
            EventKind::TaskEnd => self.task_ended(event),
            EventKind::SpanEnter => {
                let open = self.open(event);
                self.pairs.span_entered(event.thread, event.arg, open);
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
                let open = Open {
                    event: *event,
                    track: Self::stream_track(event),
                };
                self.pairs.kernel_started(stream_key(event), open);
            }
            EventKind::StreamEnd => self.stream_ended(event),
        }
    }

    fn op_queued(&mut self, event: &Event) {
        let open = self.open(event);
        let moment = Record::moment(event, "queued", "queue", open.track).args(Args::Queued {
            op_id: event.op_id(),
            op: event.name.as_str(),
            device: event.device.name(),
        });
        self.records.push(moment);
        self.queued.insert(event.op_id(), open);
    }

    fn op_started(&mut self, event: &Event) {
        if let Some(queued) = self.queued.remove(&event.op_id()) {
            self.queued_for_running.insert(event.op_id(), queued);
        }
        let open = self.open(event);
        if self.pairs.op_started(event.op_id(), open).is_some() {
            self.report.unmatched += 1; // started twice: the first end was lost
        }
    }

    fn op_ended(&mut self, event: &Event) {
        let queued = self.queued_for_running.remove(&event.op_id());
        let Some(start) = self.pairs.op_ended(event.op_id()) else {
            self.report.unmatched += 1;
            return;
        };
        let end_track = self.thread_track(event);
        let (priority, property) = (event.priority(), property_name(event.property()));
        let error = event.is_error();
        let name = event.name.as_str();
        self.report.ops += 1;
        if end_track != start.track {
            let id = self.fresh_id();
            let args = Args::AsyncOp {
                op_id: event.op_id(),
                priority,
                property,
                error,
            };
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
        let args = Args::Op {
            priority,
            property,
            error,
        };
        self.records.push(slice.args(args));
        if let Some(queued) = queued {
            self.flow("queued", "op_flow", queued);
        }
    }

    /// A flow arrow from the moment `from` on its thread to the slice just pushed.
    fn flow(&mut self, name: &'static str, cat: &'static str, from: Open) {
        self.flows.push(PendingFlow {
            name,
            cat,
            from: from.track,
            from_ns: from.event.ts_ns,
            to: self.records.len() - 1,
        });
    }

    /// Writes each pending flow whose ends can bind inside slices (see
    /// `trace_time.rs`): the `s` inside a slice of its thread, the `f` strictly inside
    /// its slice, never before the `s`.
    fn bind_flows(&mut self) {
        let mut by_track: HashMap<Track, Vec<(u64, u64)>> = HashMap::new();
        for record in self.records.iter().filter(|record| record.ph == "X") {
            let track = Track {
                pid: record.pid,
                tid: record.tid,
            };
            by_track
                .entry(track)
                .or_default()
                .push((record.ts_ns, record.end_ns()));
        }
        let index: HashMap<Track, SliceIndex> = by_track
            .into_iter()
            .map(|(track, slices)| (track, SliceIndex::new(slices)))
            .collect();
        for flow in std::mem::take(&mut self.flows) {
            let target = &self.records[flow.to];
            let (to_track, to_start, to_end) = (
                Track {
                    pid: target.pid,
                    tid: target.tid,
                },
                target.ts_ns,
                target.end_ns(),
            );
            let from_ns = index
                .get(&flow.from)
                .and_then(|slices| slices.bind(flow.from_ns));
            let Some(from_ns) = from_ns.filter(|_| to_end >= to_start + 2) else {
                continue;
            };
            let to_ns = inside(to_start, to_end, to_start);
            if from_ns > to_ns {
                continue;
            }
            let id = self.fresh_id();
            let mut start = Record::new("s", flow.name, flow.from, from_ns);
            start.cat = flow.cat;
            start.id = Some(id);
            let mut finish = Record::new("f", flow.name, to_track, to_ns);
            finish.cat = flow.cat;
            finish.id = Some(id);
            finish.bind_enclosing = true;
            self.records.extend([start, finish]);
            self.report.flows += 1;
        }
    }

    fn fresh_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id - 1
    }

    fn task_ended(&mut self, event: &Event) {
        let Some(start) = self.pairs.task_ended(event.thread) else {
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
        let Some(start) = self.pairs.span_exited(event.thread, event.arg) else {
            self.report.unmatched += 1;
            return;
        };
        let name = event.name.as_str();
        let slice = Record::slice(name, "span", start.track, start.event.ts_ns, event.ts_ns);
        self.records.push(slice);
    }

    fn begin_state(&mut self, event: &Event, spinning: bool) {
        let open = self.open(event);
        if self
            .pairs
            .state_began(event.thread, spinning, open)
            .is_some()
        {
            self.report.unmatched += 1;
        }
    }

    fn end_state(&mut self, event: &Event, spinning: bool) {
        let Some(start) = self.pairs.state_ended(event.thread, spinning) else {
            self.report.unmatched += 1;
            return;
        };
        self.state_slice(start, event.ts_ns, spinning, event.worker());
    }

    /// The `spinning` or `parked` slice from `start` to `end_ns`.
    fn state_slice(&mut self, start: Open, end_ns: u64, spinning: bool, worker: Option<u32>) {
        let name = if spinning { "spinning" } else { "parked" };
        let slice = Record::slice(name, "pool", start.track, start.event.ts_ns, end_ns);
        self.records.push(slice.args(Args::Task {
            worker,
            panicked: false,
        }));
    }

    /// Spins and parks still open at the window's end last to its last event.
    fn close_states(&mut self) {
        for (spinning, open) in self.pairs.drain_states() {
            let worker = open.event.worker();
            self.state_slice(open, self.end_ns, spinning, worker);
        }
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
        let device = event.device.name();
        let (from, to) = (event.aux, event.arg);
        let name = format!("resize {device}: {from} -> {to}");
        let mut instant = Record::new("i", name, Self::device_track(event), event.ts_ns);
        instant.cat = "pool";
        instant.scope = Some("p");
        self.records
            .push(instant.args(Args::Resize { device, from, to }));
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
        let moment = Record::moment(event, "launch", "launch", open.track).args(Args::Launch {
            stream: event.stream(),
            op_id: event.op_id(),
            op: event.name.as_str(),
        });
        self.records.push(moment);
        self.pairs.launched(stream_key(event), open);
    }

    fn stream_ended(&mut self, event: &Event) {
        let key = stream_key(event);
        let Some(start) = self.pairs.kernel_ended(key) else {
            self.report.unmatched += 1;
            return;
        };
        let name = event.name.as_str();
        let slice = Record::slice(name, "kernel", start.track, start.event.ts_ns, event.ts_ns);
        self.records.push(slice.args(Args::Kernel {
            stream: event.stream(),
        }));
        self.report.ops += 1;
        if let Some(submit) = self.pairs.take_launch(key) {
            self.flow("launch", "ac2g", submit);
        }
    }

    /// Counts what never ended, closes states, nests, binds flows, adds metadata, sorts and
    /// writes.
    fn finish(
        mut self,
        context: &TraceContext,
        graph: Option<serde_json::Value>,
        out: impl Write,
    ) -> io::Result<ExportReport> {
        self.report.unmatched += self.pairs.unended();
        self.close_states();
        self.report.clamped = nest_slices(&mut self.records);
        self.bind_flows();
        let labelled = self.add_metadata(&context.device_labels);
        self.records
            .sort_by_key(|record| (record.ts_ns, record.order(), Reverse(record.dur_ns)));
        self.report.trace_events = self.records.len();
        let mut other = other_data(self.base_ns, context, &labelled);
        if let Some(graph) = graph {
            other["graph"] = graph;
        }
        write_json(&self.records, self.base_ns, &other, out)?;
        Ok(self.report)
    }

    /// `process_name` (and `process_labels`, for a device in `labels`) for every pid and
    /// `thread_name` for every track used; returns the (device name, label) pairs written.
    fn add_metadata(&mut self, labels: &[(DeviceId, String)]) -> Vec<(String, String)> {
        let mut labelled = Vec::new();
        let mut tracks: BTreeSet<Track> = self
            .records
            .iter()
            .map(|record| Track {
                pid: record.pid,
                tid: record.tid,
            })
            .collect();
        tracks.extend(self.quiet_tracks.iter().copied());
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

fn write_json(
    records: &[Record],
    base_ns: u64,
    other: &serde_json::Value,
    mut out: impl Write,
) -> io::Result<()> {
    out.write_all(b"{\"traceEvents\":[\n")?;
    let mut ends = ViewerEnds::default();
    for (index, record) in records.iter().enumerate() {
        if index > 0 {
            out.write_all(b",\n")?;
        }
        let ts_ns = record.ts_ns.saturating_sub(base_ns);
        let ts = micros(ts_ns);
        let dur = record.dur_ns.map(|dur| ends.duration(record, ts_ns, dur));
        let wire = Wire {
            name: &record.name,
            cat: record.cat,
            ph: record.ph,
            ts,
            dur,
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
    serde_json::to_writer(&mut out, other)?;
    out.write_all(b"}\n")?;
    Ok(())
}

/// Per track, the open slices' ends in nanoseconds and as a viewer computes them: a slice's
/// written end is capped at its parent's (see `trace_time.rs`).
#[derive(Default)]
struct ViewerEnds {
    open: HashMap<Track, Vec<(u64, f64)>>,
}

impl ViewerEnds {
    /// The `dur` to write for `record` (an `X` at `ts_ns` from the trace's start, lasting
    /// `dur_ns`); records come sorted by start, longer first.
    fn duration(&mut self, record: &Record, ts_ns: u64, dur_ns: u64) -> f64 {
        let track = Track {
            pid: record.pid,
            tid: record.tid,
        };
        let stack = self.open.entry(track).or_default();
        while stack.last().is_some_and(|&(end_ns, _)| end_ns <= ts_ns) {
            stack.pop();
        }
        let (ts, end_ns) = (micros(ts_ns), ts_ns + dur_ns);
        let mut target = micros(end_ns);
        if let Some(&(_, parent_end)) = stack.last() {
            target = target.min(parent_end);
        }
        let dur = exact_duration(ts, target, micros(dur_ns));
        stack.push((end_ns, ts + dur));
        dur
    }
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
    let mut other = serde_json::json!({
        "device_labels": labels,
        "producer": "enginetop",
        "version": env!("CARGO_PKG_VERSION"),
        "start_time": start.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true),
        "start_time_unix_ns": start.timestamp_nanos_opt(),
        "clock": "tsc (quanta), ns since the process epoch",
        "dropped_events": context.dropped_events,
        "evicted_events": context.evicted_events,
    });
    let sampling = &context.task_sampling;
    if sampling.tasks > 0 {
        other["task_sampling"] = serde_json::json!({
            "tasks": sampling.tasks,
            "recorded": sampling.recorded,
            "rate": sampling.rate,
            "max_rate": sampling.max_rate,
            "run_by_callers": sampling.run_by_callers,
            "sampled": sampling.is_sampled(),
            "note": "pool task events: 1 in `rate` tasks recorded per worker (adaptive); \
                     task counts are exact",
        });
    }
    other
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::engine::OpName;
    use crate::profiler::event::OpInfo;
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
        let gpu = DeviceId::register("chrome-test-gpu0");
        let idle = DeviceId::register("chrome-test-gpu1");
        let name = OpName::new("chrome-test-kernel");
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
        assert_eq!(other, &serde_json::json!({ "chrome-test-gpu0": label }));
    }

    fn named<'a>(trace: &'a Value, name: &str) -> Vec<&'a Value> {
        trace_events(trace)
            .iter()
            .filter(|event| event["name"] == name)
            .collect()
    }

    /// `ts + dur` as a viewer computes it.
    fn viewer_end(slice: &Value) -> f64 {
        slice["ts"].as_f64().unwrap() + slice["dur"].as_f64().unwrap()
    }

    #[test]
    fn ops_become_slices_with_args_and_a_flow_from_their_queueing() {
        let cpu = DeviceId::register("chrome-test-cpu");
        let (name, producer) = (
            OpName::new("chrome-test-add"),
            OpName::new("chrome-test-producer"),
        );
        let op = OpInfo::new(11).priority(2).property(3);
        let (made, orphan) = (OpInfo::new(10), OpInfo::new(12).priority(2).property(3));
        let mut events = [
            on(1, 0, Event::op(EventKind::OpStart, cpu, producer, made)),
            on(1, 1_000, Event::op(EventKind::OpEnd, cpu, producer, made)),
            on(1, 1_000, Event::op(EventKind::OpQueued, cpu, name, op)),
            on(2, 3_000, Event::op(EventKind::OpStart, cpu, name, op)),
            on(
                2,
                7_500,
                Event::op(EventKind::OpEnd, cpu, name, op).with_error(true),
            ),
            on(3, 8_000, Event::op(EventKind::OpQueued, cpu, name, orphan)),
            on(2, 9_000, Event::op(EventKind::OpStart, cpu, name, orphan)),
            on(2, 9_500, Event::op(EventKind::OpEnd, cpu, name, orphan)),
        ];
        let (trace, report) = export(&mut events);
        assert_eq!((report.ops, report.flows, report.unmatched), (3, 1, 0));
        let slice = named(&trace, "chrome-test-add")[0];
        assert_eq!(slice["ph"], "X");
        assert_eq!(slice["ts"], 3.0);
        assert_eq!(slice["dur"], 4.5);
        assert_eq!(slice["pid"], u32::from(cpu.id()) + 1);
        let args = &slice["args"];
        assert_eq!(
            args,
            &serde_json::json!({"priority": 2, "property": "cpu_prioritized", "error": true}),
            "no per-call id on the slice"
        );
        let queued: Vec<&Value> = named(&trace, "queued")
            .into_iter()
            .filter(|event| event["ph"] == "i")
            .collect();
        assert_eq!(queued.len(), 2, "one instant per queued op, flow or not");
        assert_eq!(
            (queued[0]["ph"].as_str(), queued[0]["s"].as_str()),
            (Some("i"), Some("t"))
        );
        assert_eq!(queued[0]["ts"], 1.0);
        assert_eq!(queued[0]["args"]["op_id"], 11);
        assert_eq!(queued[0]["args"]["op"], "chrome-test-add");
        assert!(trace_events(&trace)
            .iter()
            .all(|event| event["ph"] != "X" || event["dur"].as_f64().unwrap() > 0.001));
        let flows: Vec<&Value> = trace_events(&trace)
            .iter()
            .filter(|event| event["ph"] == "s" || event["ph"] == "f")
            .collect();
        assert_eq!(
            flows.len(),
            2,
            "the orphan's queuing thread has no slice to start from"
        );
        assert_eq!(
            flows[0]["ts"], 0.999,
            "inside the op whose end made it ready"
        );
        assert_eq!(flows[0]["tid"], T + 1);
        assert_eq!(flows[1]["ts"], 3.001, "strictly inside the op's slice");
        assert_eq!(flows[1]["bp"], "e");
        assert_eq!(trace["displayTimeUnit"], "ns");
        assert!(trace["otherData"]["start_time"]
            .as_str()
            .unwrap()
            .contains('T'));
    }

    /// The numbers: `36431.557 + 6.982` is `36438.539000000004` in doubles, past the
    /// next op's start; and an end no sum from `5302.098` reaches (`22093.408`) shared by a
    /// parent and its child. Both nest as a viewer reads them, parent first at equal `ts`.
    #[test]
    fn slices_nest_after_a_viewers_double_arithmetic() {
        let pool = DeviceId::register("chrome-test-doubles");
        let (first, second) = (
            OpName::new("chrome-test-expr235"),
            OpName::new("chrome-test-expr241"),
        );
        let op = |kind, name, id, ts| on(9, ts, Event::op(kind, pool, name, OpInfo::new(id)));
        let mut events = [
            on(9, 0, Event::worker_event(EventKind::TaskStart, pool, 0)),
            op(EventKind::OpStart, second, 4, 0),
            op(EventKind::OpEnd, second, 4, 500),
            on(9, 1_000, Event::worker_event(EventKind::TaskEnd, pool, 0)),
            op(EventKind::OpStart, first, 1, 36_431_557),
            op(EventKind::OpEnd, first, 1, 36_438_539),
            op(EventKind::OpStart, second, 2, 36_438_539),
            op(EventKind::OpEnd, second, 2, 36_440_000),
            on(
                10,
                5_302_098,
                Event::worker_event(EventKind::TaskStart, pool, 1),
            ),
            op(EventKind::OpStart, first, 3, 10_000_000),
            on(
                10,
                22_093_408,
                Event::worker_event(EventKind::TaskEnd, pool, 1),
            ),
        ];
        events[9].thread = ThreadId::from_raw(T + 10);
        let mut end = op(EventKind::OpEnd, first, 3, 22_093_408);
        end.thread = ThreadId::from_raw(T + 10);
        let mut events = events.to_vec();
        events.push(end);
        let (trace, report) = export(&mut events);
        assert_eq!(report.clamped, 0);
        let ts = |event: &Value| event["ts"].as_f64().unwrap();
        let mut ops = named(&trace, "chrome-test-expr235");
        ops.sort_by(|a, b| ts(b).total_cmp(&ts(a)));
        let next = named(&trace, "chrome-test-expr241")[1];
        assert_eq!((ts(ops[0]), ts(next)), (36_431.557, 36_438.539));
        assert!(
            ts(ops[0]) + 6.982 > ts(next),
            "the rounding this guards against"
        );
        assert!(viewer_end(ops[0]) <= ts(next));
        let task = named(&trace, "task")
            .into_iter()
            .find(|task| task["tid"] == T + 10)
            .unwrap();
        assert!(
            ts(ops[1]) + 12_093.408 > viewer_end(task),
            "no sum reaches the task's end"
        );
        assert!(viewer_end(ops[1]) <= viewer_end(task));
        let at = |slice: &Value| trace_events(&trace).iter().position(|e| e == slice);
        let (first_task, first_op) = (
            named(&trace, "task")[0],
            named(&trace, "chrome-test-expr241")[0],
        );
        assert_eq!((ts(first_task), ts(first_op)), (0.0, 0.0));
        assert!(
            at(first_task) < at(first_op),
            "the parent first at equal ts"
        );
    }

    /// Threads the window began with: a parked one is parked from the window's start, a quiet
    /// one still gets its named track, an exited quiet one none; a park never ended lasts to
    /// the window's end.
    #[test]
    fn threads_quiet_in_the_window_keep_their_tracks_and_parks() {
        let pool = DeviceId::register("chrome-test-quiet");
        let mut events = [
            on(
                11,
                1_000,
                Event::worker_event(EventKind::TaskStart, pool, 0),
            ),
            on(11, 2_000, Event::worker_event(EventKind::TaskEnd, pool, 0)),
            on(11, 2_500, Event::worker_event(EventKind::Park, pool, 0)),
            on(14, 3_000, Event::worker_event(EventKind::Unpark, pool, 3)),
            on(
                11,
                5_000,
                Event::new(EventKind::QueueDepth, pool, OpName::UNNAMED, 0, 1),
            ),
        ];
        let thread = |id: u32, parked, exited| WindowThread {
            thread: ThreadId::from_raw(T + id),
            device: Some(pool),
            parked,
            exited,
        };
        let context = TraceContext {
            threads: vec![
                thread(12, true, false),
                thread(13, false, false),
                thread(14, true, false),
                thread(15, true, true),
            ],
            ..TraceContext::default()
        };
        events.sort_by_key(|event| event.ts_ns);
        let mut json = Vec::new();
        let report = write_trace(&events, &context, &mut json).unwrap();
        validate_json(&json).unwrap_or_else(|errors| panic!("{errors}"));
        assert_eq!(report.unmatched, 0);
        let trace: Value = serde_json::from_slice(&json).unwrap();
        let parked: Vec<(u64, f64, f64)> = named(&trace, "parked")
            .iter()
            .map(|e| {
                (
                    e["tid"].as_u64().unwrap(),
                    e["ts"].as_f64().unwrap(),
                    viewer_end(e),
                )
            })
            .collect();
        let t = |id: u32| u64::from(T + id);
        assert!(parked.contains(&(t(12), 0.0, 4.0)), "{parked:?}");
        assert!(parked.contains(&(t(14), 0.0, 2.0)), "{parked:?}");
        assert!(parked.contains(&(t(11), 1.5, 4.0)), "{parked:?}");
        assert_eq!(parked.len(), 3, "{parked:?}");
        let names: Vec<u64> = named(&trace, "thread_name")
            .iter()
            .map(|e| e["tid"].as_u64().unwrap())
            .collect();
        for id in [11, 12, 13, 14] {
            assert!(
                names.contains(&t(id)),
                "thread {id} has no track: {names:?}"
            );
        }
        assert!(
            !names.contains(&t(15)),
            "an exited quiet thread has no track"
        );
        let pid = u64::from(pool.id()) + 1;
        assert!(named(&trace, "thread_name").iter().all(|e| e["pid"] == pid));
    }

    #[test]
    fn an_op_ending_on_another_thread_is_an_async_pair() {
        let name = OpName::new("chrome-test-async");
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
                Event::new(EventKind::PoolResized, pool, OpName::UNNAMED, 0, 2),
            ),
            on(6, 10, worker(EventKind::TaskStart)),
            on(6, 20, worker(EventKind::TaskEnd).with_error(true)),
            on(6, 30, worker(EventKind::SpinStart)),
            on(
                6,
                35,
                Event::new(EventKind::Steal, pool, OpName::UNNAMED, 0, 1),
            ),
            on(6, 40, worker(EventKind::SpinEnd)),
            on(6, 50, worker(EventKind::Park)),
            on(6, 90, worker(EventKind::Unpark)),
            on(
                5,
                95,
                Event::new(EventKind::QueueDepth, pool, OpName::new("w0"), 0, 3),
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
            (
                named("steal"),
                named("resize chrome-test-pool: 0 -> 2"),
                named("queue w0")
            ),
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
        let name = OpName::new("chrome-test-kernel");
        let stream = |kind| Event::new(kind, gpu, name, 2, 77);
        let host = |kind| on(7, 0, Event::op(kind, gpu, name, OpInfo::new(77)));
        let mut events = [
            host(EventKind::OpStart).at(50),
            on(7, 100, stream(EventKind::StreamSubmit)),
            host(EventKind::OpEnd).at(200),
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
        assert_eq!(kernel["args"], serde_json::json!({"stream": 2}));
        let launch = named(&trace, "launch");
        let launch: Vec<&&Value> = launch.iter().filter(|e| e["ph"] == "i").collect();
        assert_eq!(launch[0]["args"]["op_id"], 77);
        let start = named(&trace, "launch")
            .into_iter()
            .find(|e| e["ph"] == "s")
            .unwrap();
        assert_eq!(start["ts"], 0.05, "inside the host op that launched it");
        assert!(trace_events(&trace)
            .iter()
            .any(|event| event["args"]["name"] == "stream compute2"));
    }

    #[test]
    fn overlapping_slices_are_clamped_and_orphans_counted() {
        let span = OpName::new("chrome-test-span");
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
