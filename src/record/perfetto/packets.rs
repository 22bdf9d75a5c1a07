//! Perfetto's trace packets written one by one: a `Trace` message is its `packet` field
//! repeated, so each packet goes out as that field (tag, length, bytes) and the file is a
//! valid `Trace` after any whole packet.
//!
//! Every packet is on one sequence. Event names and categories are interned: the first
//! packet clears the sequence's incremental state, and a name's first use carries its
//! `InternedData` entry, so each name's text is written once.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::io::{self, Write};

use super::proto::{
    debug_annotation, trace_packet, track_event, DebugAnnotation, EventCategory, EventName,
    InternedData, TracePacket, TrackDescriptor, TrackEvent,
};

/// The one sequence every packet is on.
const SEQUENCE_ID: u32 = 1;
/// `TracePacket.SequenceFlags`.
const INCREMENTAL_STATE_CLEARED: u32 = 1;
const NEEDS_INCREMENTAL_STATE: u32 = 2;

/// What an event is on its track.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    Begin,
    End,
    Instant,
    Counter(i64),
}

/// One track event before it is written.
#[derive(Clone, Debug)]
pub(super) struct Event<'a> {
    pub(super) ts_ns: u64,
    pub(super) track: u64,
    pub(super) phase: Phase,
    /// Its name (`None` for a slice's end).
    pub(super) name: Option<&'a str>,
    pub(super) category: Option<&'static str>,
    pub(super) flow: Option<u64>,
    pub(super) terminating_flow: Option<u64>,
    pub(super) args: Vec<(&'static str, Arg)>,
}

impl<'a> Event<'a> {
    pub(super) fn new(ts_ns: u64, track: u64, phase: Phase) -> Self {
        Event {
            ts_ns,
            track,
            phase,
            name: None,
            category: None,
            flow: None,
            terminating_flow: None,
            args: Vec::new(),
        }
    }

    pub(super) fn named(mut self, name: &'a str, category: &'static str) -> Self {
        self.name = Some(name);
        self.category = Some(category);
        self
    }
}

/// A debug annotation's value.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Arg {
    Int(i64),
    Uint(u64),
    Bool(bool),
    Str(&'static str),
}

/// Writes packets to `out`.
pub(super) struct PacketWriter<W: Write> {
    out: W,
    names: HashMap<String, u64>,
    categories: HashMap<&'static str, u64>,
    packets: u64,
    buffer: Vec<u8>,
}

impl<W: Write> PacketWriter<W> {
    pub(super) fn new(out: W) -> Self {
        PacketWriter {
            out,
            names: HashMap::new(),
            categories: HashMap::new(),
            packets: 0,
            buffer: Vec::new(),
        }
    }

    /// Packets written.
    pub(super) fn packets(&self) -> u64 {
        self.packets
    }

    /// Writes a track's descriptor.
    pub(super) fn descriptor(&mut self, descriptor: TrackDescriptor) -> io::Result<()> {
        let packet = TracePacket {
            data: Some(trace_packet::Data::TrackDescriptor(descriptor)),
            ..TracePacket::default()
        };
        self.write(packet)
    }

    /// Writes a track event, interning its name and category.
    pub(super) fn event(&mut self, event: Event<'_>) -> io::Result<()> {
        let mut interned = InternedData::default();
        let mut track_event = TrackEvent {
            r#type: Some(track_event_type(event.phase) as i32),
            track_uuid: Some(event.track),
            flow_ids: event.flow.into_iter().collect(),
            terminating_flow_ids: event.terminating_flow.into_iter().collect(),
            debug_annotations: event.args.into_iter().map(annotation).collect(),
            ..TrackEvent::default()
        };
        if let Phase::Counter(value) = event.phase {
            track_event.counter_value_field =
                Some(track_event::CounterValueField::CounterValue(value));
        }
        if let Some(name) = event.name {
            let iid = self.name_iid(name, &mut interned);
            track_event.name_field = Some(track_event::NameField::NameIid(iid));
        }
        if let Some(category) = event.category {
            track_event.category_iids = vec![self.category_iid(category, &mut interned)];
        }
        let has_interned =
            !interned.event_names.is_empty() || !interned.event_categories.is_empty();
        let packet = TracePacket {
            timestamp: Some(event.ts_ns),
            data: Some(trace_packet::Data::TrackEvent(track_event)),
            interned_data: has_interned.then_some(interned),
            ..TracePacket::default()
        };
        self.write(packet)
    }

    /// Flushes and returns the output.
    pub(super) fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }

    fn name_iid(&mut self, name: &str, interned: &mut InternedData) -> u64 {
        if let Some(&iid) = self.names.get(name) {
            return iid;
        }
        let iid = self.names.len() as u64 + 1;
        self.names.insert(name.to_string(), iid);
        interned.event_names.push(EventName {
            iid: Some(iid),
            name: Some(name.to_string()),
        });
        iid
    }

    fn category_iid(&mut self, category: &'static str, interned: &mut InternedData) -> u64 {
        if let Some(&iid) = self.categories.get(category) {
            return iid;
        }
        let iid = self.categories.len() as u64 + 1;
        self.categories.insert(category, iid);
        interned.event_categories.push(EventCategory {
            iid: Some(iid),
            name: Some(category.to_string()),
        });
        iid
    }

    fn write(&mut self, mut packet: TracePacket) -> io::Result<()> {
        packet.optional_trusted_packet_sequence_id = Some(
            trace_packet::OptionalTrustedPacketSequenceId::TrustedPacketSequenceId(SEQUENCE_ID),
        );
        packet.sequence_flags = Some(match self.packets {
            0 => INCREMENTAL_STATE_CLEARED,
            _ => NEEDS_INCREMENTAL_STATE,
        });
        self.buffer.clear();
        prost::encoding::message::encode(1, &packet, &mut self.buffer);
        self.out.write_all(&self.buffer)?;
        self.packets += 1;
        Ok(())
    }
}

fn track_event_type(phase: Phase) -> track_event::Type {
    match phase {
        Phase::Begin => track_event::Type::SliceBegin,
        Phase::End => track_event::Type::SliceEnd,
        Phase::Instant => track_event::Type::Instant,
        Phase::Counter(_) => track_event::Type::Counter,
    }
}

fn annotation((name, value): (&'static str, Arg)) -> DebugAnnotation {
    let value = match value {
        Arg::Int(value) => debug_annotation::Value::IntValue(value),
        Arg::Uint(value) => debug_annotation::Value::UintValue(value),
        Arg::Bool(value) => debug_annotation::Value::BoolValue(value),
        Arg::Str(value) => debug_annotation::Value::StringValue(value.to_string()),
    };
    DebugAnnotation {
        name_field: Some(debug_annotation::NameField::Name(name.to_string())),
        value: Some(value),
    }
}
