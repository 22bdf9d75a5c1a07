//! Recorded events, in time order, as track events: the Chrome export's slices, instants,
//! counters and flows, written as each event is read.
//!
//! # What each event becomes (as in the Chrome export)
//! - An op: a slice on its thread's track from its start to its end (`cat` `op`), or, when
//!   ops of its name started on that thread end on another one, a slice on an `async ops`
//!   lane of the thread's process. Its `queued` instant (thread track, `cat` `queue`) starts
//!   a flow that its slice's begin terminates.
//! - Pool tasks (`task`), spins (`spinning`) and parks (`parked`): slices on the thread's
//!   track; a spin or park still open at the end lasts to the run's last event. Steals:
//!   instants. A resize: an instant on the device's process track. A queue depth: a counter.
//! - `tracing` spans: slices (`cat` `span`), each exit ending the innermost open span of
//!   its id, as the Chrome export pairs them.
//! - GPU streams: a slice per kernel on its stream's track (`cat` `kernel`), its launch an
//!   instant on the launching thread that starts a flow the kernel's begin terminates.
//!
//! Which end closes which start is the Chrome export's pairing ([`Pairs`]).
//!
//! # Nesting, written as it is read
//! Each track keeps the stack of its open slices. A slice begins when its start is read;
//! when its end is read, the slices opened above it on the track and still open end there
//! too (they are clamped to it, as the Chrome export clamps a slice that outlasts its
//! parent) and their own ends, read later, write nothing. So on every track the slices nest
//! and the writer never waits: memory follows what is open at once, not the run's length.
//! A start whose end never comes (the run was cut off) stays open: Perfetto shows it as a
//! slice that did not end.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::io::{self, Write};

use crate::engine::OpName;
use crate::profiler::event::property_name;
use crate::profiler::pairs::{stream_key, Pairs};
use crate::profiler::{DeviceId, Event, EventKind, ThreadId};
use crate::record::convert::to_event;
use crate::record::format::RecordedEvent;

use super::catalog::Catalog;
use super::packets::{Arg, Event as TrackEvent, PacketWriter, Phase};
use super::tracks::{Track, Tracks};
use super::PerfettoReport;

/// A slice begun and not yet ended.
#[derive(Clone, Copy, Debug)]
struct Open {
    slot: u64,
    track: Track,
    uuid: u64,
}

/// A debug annotation: its name and value.
type Annotation<'a> = (&'static str, Arg<'a>);

/// Turns events into packets (see the module docs).
pub(super) struct Builder<'c, W: Write> {
    catalog: &'c Catalog,
    out: PacketWriter<W>,
    tracks: Tracks,
    report: PerfettoReport,
    /// Each track's open slices, innermost last.
    stacks: HashMap<Track, Vec<u64>>,
    next_slot: u64,
    /// Slices begun and waiting for their ends; a launch's flow waits for its kernel.
    pairs: Pairs<Open, u64>,
    /// Flows started by `queued` instants, by op id.
    queued: HashMap<u64, u64>,
    /// Per device, each async lane's open op count (0: free).
    lanes: HashMap<u16, Vec<bool>>,
    next_flow: u64,
}

impl<'c, W: Write> Builder<'c, W> {
    pub(super) fn new(catalog: &'c Catalog, out: W) -> Self {
        Builder {
            catalog,
            out: PacketWriter::new(out),
            tracks: Tracks::default(),
            report: PerfettoReport::default(),
            stacks: HashMap::new(),
            next_slot: 0,
            pairs: Pairs::default(),
            queued: HashMap::new(),
            lanes: HashMap::new(),
            next_flow: 0,
        }
    }

    /// Writes what `recorded` becomes.
    pub(super) fn add(&mut self, recorded: &RecordedEvent) -> io::Result<()> {
        self.report.events_in += 1;
        let ids = (
            OpName::UNNAMED,
            DeviceId::from_raw(recorded.device),
            ThreadId::from_raw(recorded.thread),
        );
        let event = to_event(recorded, ids);
        let thread = recorded.thread;
        match event.kind {
            EventKind::OpQueued => self.op_queued(recorded, &event),
            EventKind::OpStart => self.op_started(recorded, &event),
            EventKind::OpEnd => self.op_ended(recorded, &event),
            EventKind::TaskStart => {
                let open = self.begin(self.thread_track(thread), "task", "pool", recorded, None)?;
                self.pairs.task_started(event.thread, open);
                Ok(())
            }
            EventKind::TaskEnd => self.task_ended(recorded, &event),
            EventKind::SpanEnter => {
                let name = self.catalog.name(recorded.name);
                let open = self.begin(self.thread_track(thread), name, "span", recorded, None)?;
                self.pairs.span_entered(event.thread, event.arg, open);
                Ok(())
            }
            EventKind::SpanExit => self.span_exited(recorded, &event),
            EventKind::SpinStart => self.begin_state(recorded, &event, true),
            EventKind::Park => self.begin_state(recorded, &event, false),
            EventKind::SpinEnd => self.end_state(recorded, &event, true),
            EventKind::Unpark => self.end_state(recorded, &event, false),
            EventKind::Steal => self.steal(recorded, &event),
            EventKind::PoolResized => self.resize(recorded, &event),
            EventKind::QueueDepth => self.queue_depth(recorded, &event),
            EventKind::StreamSubmit => self.stream_submitted(recorded, &event),
            EventKind::StreamStart => self.stream_started(recorded, &event),
            EventKind::StreamEnd => self.stream_ended(recorded, &event),
        }
    }

    /// Ends the spins and parks still open at `end_ns` (the run's last event), counts what
    /// never ended, and flushes.
    pub(super) fn finish(mut self, end_ns: u64) -> io::Result<(PerfettoReport, W)> {
        for (_, open) in self.pairs.drain_states() {
            self.end(open, end_ns, Vec::new())?;
        }
        self.report.unmatched += self.pairs.unended();
        self.report.packets = self.out.packets();
        let out = self.out.finish()?;
        Ok((self.report, out))
    }

    fn thread_track(&self, thread: u32) -> Track {
        Track::Thread {
            device: self.catalog.home(thread),
            thread,
        }
    }

    /// Begins a slice named `name` on `track` at `at`'s time.
    fn begin(
        &mut self,
        track: Track,
        name: &str,
        category: &'static str,
        at: &RecordedEvent,
        terminating_flow: Option<u64>,
    ) -> io::Result<Open> {
        self.begin_with(track, name, category, at, terminating_flow, Vec::new())
    }

    fn begin_with(
        &mut self,
        track: Track,
        name: &str,
        category: &'static str,
        at: &RecordedEvent,
        terminating_flow: Option<u64>,
        args: Vec<Annotation<'_>>,
    ) -> io::Result<Open> {
        let uuid = self.tracks.ensure(track, self.catalog, &mut self.out)?;
        let mut event = TrackEvent::new(at.ts_ns, uuid, Phase::Begin).named(name, category);
        event.terminating_flow = terminating_flow;
        event.args = args;
        self.report.flows += usize::from(terminating_flow.is_some());
        self.out.event(event)?;
        let slot = self.next_slot;
        self.next_slot += 1;
        self.stacks.entry(track).or_default().push(slot);
        Ok(Open { slot, track, uuid })
    }

    /// Ends `open` at `ts_ns`, and first the slices open above it on its track (clamped);
    /// nothing if a slice below it already ended it. Returns whether it ended it.
    fn end(&mut self, open: Open, ts_ns: u64, args: Vec<Annotation<'_>>) -> io::Result<bool> {
        let stack = self.stacks.entry(open.track).or_default();
        let Some(position) = stack.iter().rposition(|&slot| slot == open.slot) else {
            return Ok(false);
        };
        let above = stack.len() - position - 1;
        stack.truncate(position);
        let uuid = open.uuid;
        for _ in 0..above {
            self.out.event(TrackEvent::new(ts_ns, uuid, Phase::End))?;
        }
        self.report.clamped += above;
        let mut event = TrackEvent::new(ts_ns, uuid, Phase::End);
        event.args = args;
        self.out.event(event)?;
        self.report.slices += 1 + above;
        Ok(true)
    }

    fn instant(
        &mut self,
        track: Track,
        name: &str,
        category: &'static str,
        at: &RecordedEvent,
        flow: Option<u64>,
        args: Vec<Annotation<'_>>,
    ) -> io::Result<()> {
        let uuid = self.tracks.ensure(track, self.catalog, &mut self.out)?;
        let mut event = TrackEvent::new(at.ts_ns, uuid, Phase::Instant).named(name, category);
        event.flow = flow;
        event.args = args;
        self.report.instants += 1;
        self.out.event(event)
    }

    fn fresh_flow(&mut self) -> u64 {
        self.next_flow += 1;
        self.next_flow
    }

    fn op_queued(&mut self, recorded: &RecordedEvent, event: &Event) -> io::Result<()> {
        let flow = self.fresh_flow();
        let args = vec![
            ("op_id", Arg::Uint(event.op_id())),
            ("op", Arg::Str(self.catalog.name(recorded.name))),
            (
                "device",
                Arg::Str(self.catalog.device_name(recorded.device)),
            ),
        ];
        let track = self.thread_track(recorded.thread);
        self.instant(track, "queued", "queue", recorded, Some(flow), args)?;
        self.queued.insert(event.op_id(), flow);
        Ok(())
    }

    fn op_started(&mut self, recorded: &RecordedEvent, event: &Event) -> io::Result<()> {
        let flow = self.queued.remove(&event.op_id());
        let name = self.catalog.name(recorded.name);
        let mut args = vec![
            ("priority", Arg::Int(i64::from(event.priority()))),
            ("property", Arg::Str(property_name(event.property()))),
        ];
        let track = if self.catalog.is_async(recorded.thread, recorded.name) {
            args.push(("op_id", Arg::Uint(event.op_id())));
            self.free_lane(self.catalog.home(recorded.thread))
        } else {
            self.thread_track(recorded.thread)
        };
        let open = self.begin_with(track, name, "op", recorded, flow, args)?;
        if let Some(replaced) = self.pairs.op_started(event.op_id(), open) {
            self.report.unmatched += 1; // started twice: the first end was lost
            self.release_lane(replaced);
        }
        Ok(())
    }

    fn op_ended(&mut self, recorded: &RecordedEvent, event: &Event) -> io::Result<()> {
        let Some(open) = self.pairs.op_ended(event.op_id()) else {
            self.report.unmatched += 1;
            return Ok(());
        };
        self.report.ops += 1;
        self.end(
            open,
            recorded.ts_ns,
            vec![("error", Arg::Bool(event.is_error()))],
        )?;
        self.release_lane(open);
        Ok(())
    }

    /// The first async lane of `device` with no op open on it (taken).
    fn free_lane(&mut self, device: u16) -> Track {
        let lanes = self.lanes.entry(device).or_default();
        let lane = match lanes.iter().position(|busy| !busy) {
            Some(lane) => lane,
            None => {
                lanes.push(false);
                lanes.len() - 1
            }
        };
        lanes[lane] = true;
        Track::AsyncLane {
            device,
            lane: lane as u32,
        }
    }

    fn release_lane(&mut self, open: Open) {
        if let Track::AsyncLane { device, lane } = open.track {
            if let Some(busy) = self
                .lanes
                .get_mut(&device)
                .and_then(|l| l.get_mut(lane as usize))
            {
                *busy = false;
            }
        }
    }

    fn task_ended(&mut self, recorded: &RecordedEvent, event: &Event) -> io::Result<()> {
        let Some(open) = self.pairs.task_ended(event.thread) else {
            self.report.unmatched += 1;
            return Ok(());
        };
        let mut args = vec![("panicked", Arg::Bool(event.is_error()))];
        if let Some(worker) = event.worker() {
            args.push(("worker", Arg::Uint(u64::from(worker))));
        }
        self.end(open, recorded.ts_ns, args)?;
        Ok(())
    }

    fn span_exited(&mut self, recorded: &RecordedEvent, event: &Event) -> io::Result<()> {
        let Some(open) = self.pairs.span_exited(event.thread, event.arg) else {
            self.report.unmatched += 1;
            return Ok(());
        };
        self.end(open, recorded.ts_ns, Vec::new())?;
        Ok(())
    }

    fn begin_state(
        &mut self,
        recorded: &RecordedEvent,
        event: &Event,
        spinning: bool,
    ) -> io::Result<()> {
        let name = if spinning { "spinning" } else { "parked" };
        let open = self.begin(
            self.thread_track(recorded.thread),
            name,
            "pool",
            recorded,
            None,
        )?;
        if let Some(replaced) = self.pairs.state_began(event.thread, spinning, open) {
            self.report.unmatched += 1; // its end was lost: it ends where the next begins
            self.end(replaced, recorded.ts_ns, Vec::new())?;
        }
        Ok(())
    }

    fn end_state(
        &mut self,
        recorded: &RecordedEvent,
        event: &Event,
        spinning: bool,
    ) -> io::Result<()> {
        let Some(open) = self.pairs.state_ended(event.thread, spinning) else {
            self.report.unmatched += 1;
            return Ok(());
        };
        let args = match event.worker() {
            Some(worker) => vec![("worker", Arg::Uint(u64::from(worker)))],
            None => Vec::new(),
        };
        self.end(open, recorded.ts_ns, args)?;
        Ok(())
    }

    fn steal(&mut self, recorded: &RecordedEvent, event: &Event) -> io::Result<()> {
        let mut args = vec![("from_injector", Arg::Bool(event.victim().is_none()))];
        if let Some(thief) = event.worker() {
            args.push(("thief", Arg::Uint(u64::from(thief))));
        }
        if let Some(victim) = event.victim() {
            args.push(("victim", Arg::Uint(u64::from(victim))));
        }
        let track = self.thread_track(recorded.thread);
        self.instant(track, "steal", "pool", recorded, None, args)
    }

    fn resize(&mut self, recorded: &RecordedEvent, event: &Event) -> io::Result<()> {
        let device = self.catalog.device_name(recorded.device);
        let name = format!("resize {device}: {} -> {}", event.aux, event.arg);
        let args = vec![
            ("device", Arg::Str(device)),
            ("from", Arg::Uint(u64::from(event.aux))),
            ("to", Arg::Uint(event.arg)),
        ];
        let track = Track::Process {
            device: recorded.device,
        };
        self.instant(track, &name, "pool", recorded, None, args)
    }

    fn queue_depth(&mut self, recorded: &RecordedEvent, event: &Event) -> io::Result<()> {
        let track = Track::Counter {
            device: recorded.device,
            name: recorded.name,
        };
        let uuid = self.tracks.ensure(track, self.catalog, &mut self.out)?;
        let depth = i64::try_from(event.arg).unwrap_or(i64::MAX);
        self.report.counters += 1;
        self.out
            .event(TrackEvent::new(recorded.ts_ns, uuid, Phase::Counter(depth)))
    }

    fn stream_submitted(&mut self, recorded: &RecordedEvent, event: &Event) -> io::Result<()> {
        let flow = self.fresh_flow();
        let args = vec![
            ("stream", Arg::Uint(u64::from(event.stream()))),
            ("op_id", Arg::Uint(event.op_id())),
            ("op", Arg::Str(self.catalog.name(recorded.name))),
        ];
        let track = self.thread_track(recorded.thread);
        self.instant(track, "launch", "launch", recorded, Some(flow), args)?;
        self.pairs.launched(stream_key(event), flow);
        Ok(())
    }

    fn stream_started(&mut self, recorded: &RecordedEvent, event: &Event) -> io::Result<()> {
        let key = stream_key(event);
        let flow = self.pairs.take_launch(key);
        let track = Track::Stream {
            device: recorded.device,
            stream: event.stream(),
        };
        let name = self.catalog.name(recorded.name);
        let args = vec![("stream", Arg::Uint(u64::from(event.stream())))];
        let open = self.begin_with(track, name, "kernel", recorded, flow, args)?;
        self.pairs.kernel_started(key, open);
        Ok(())
    }

    fn stream_ended(&mut self, recorded: &RecordedEvent, event: &Event) -> io::Result<()> {
        let Some(open) = self.pairs.kernel_ended(stream_key(event)) else {
            self.report.unmatched += 1;
            return Ok(());
        };
        self.report.ops += 1;
        self.end(open, recorded.ts_ns, Vec::new())?;
        Ok(())
    }
}
