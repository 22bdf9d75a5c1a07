//! Perfetto's trace packets written one by one: a `Trace` message is its `packet` field
//! repeated, so each packet goes out as that field (tag, length, bytes) and the file is a
//! valid `Trace` after any whole packet.
//!
//! # Interning
//! Every packet is on one sequence, and every text a track event carries is interned on it:
//! event names, categories, debug annotation names and debug annotations' string values
//! (op and device names, properties). Each kind has its own table, whose ids count from 1
//! in order of first use; a text's first use carries its `InternedData` entry in the same
//! packet, so each text is written once and is defined before any packet refers to it. The
//! first packet says it clears the sequence's incremental state
//! (`SEQ_INCREMENTAL_STATE_CLEARED`); every track event after says it needs that state
//! (`SEQ_NEEDS_INCREMENTAL_STATE`), so a reader that lost part of the sequence drops the
//! events it cannot name rather than misnaming them. Descriptors name their tracks inline
//! and need no state.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::io::{self, Write};

use super::proto::{
    debug_annotation, trace_packet, track_event, DebugAnnotation, DebugAnnotationName,
    EventCategory, EventName, InternedData, InternedString, TracePacket, TrackDescriptor,
    TrackEvent,
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
    pub(super) args: Vec<(&'static str, Arg<'a>)>,
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
pub(super) enum Arg<'a> {
    Int(i64),
    Uint(u64),
    Bool(bool),
    Str(&'a str),
}

/// One interning table: each text's id, counted from 1 in order of first use.
#[derive(Debug, Default)]
struct Interner {
    iids: HashMap<String, u64>,
}

impl Interner {
    /// `text`'s id; on its first use, `define` gets the id and the text, for the entry that
    /// goes out with this packet.
    fn iid(&mut self, text: &str, define: impl FnOnce(Option<u64>, String)) -> u64 {
        if let Some(&iid) = self.iids.get(text) {
            return iid;
        }
        let iid = self.iids.len() as u64 + 1;
        self.iids.insert(text.to_string(), iid);
        define(Some(iid), text.to_string());
        iid
    }
}

/// The sequence's interning tables (see the module docs).
#[derive(Debug, Default)]
struct Tables {
    names: Interner,
    categories: Interner,
    annotation_names: Interner,
    strings: Interner,
}

impl Tables {
    fn name(&mut self, name: &str, interned: &mut InternedData) -> u64 {
        let entries = &mut interned.event_names;
        self.names.iid(name, |iid, name| {
            entries.push(EventName {
                iid,
                name: Some(name),
            });
        })
    }

    fn category(&mut self, category: &str, interned: &mut InternedData) -> u64 {
        let entries = &mut interned.event_categories;
        self.categories.iid(category, |iid, name| {
            entries.push(EventCategory {
                iid,
                name: Some(name),
            });
        })
    }

    fn annotation(
        &mut self,
        (name, value): (&str, Arg<'_>),
        interned: &mut InternedData,
    ) -> DebugAnnotation {
        let entries = &mut interned.debug_annotation_names;
        let name_iid = self.annotation_names.iid(name, |iid, name| {
            entries.push(DebugAnnotationName {
                iid,
                name: Some(name),
            });
        });
        let value = match value {
            Arg::Int(value) => debug_annotation::Value::IntValue(value),
            Arg::Uint(value) => debug_annotation::Value::UintValue(value),
            Arg::Bool(value) => debug_annotation::Value::BoolValue(value),
            Arg::Str(text) => {
                let entries = &mut interned.debug_annotation_string_values;
                let iid = self.strings.iid(text, |iid, text| {
                    entries.push(InternedString {
                        iid,
                        str: Some(text.into_bytes()),
                    });
                });
                debug_annotation::Value::StringValueIid(iid)
            }
        };
        DebugAnnotation {
            name_field: Some(debug_annotation::NameField::NameIid(name_iid)),
            value: Some(value),
        }
    }
}

/// Writes packets to `out`.
pub(super) struct PacketWriter<W: Write> {
    out: W,
    tables: Tables,
    packets: u64,
    buffer: Vec<u8>,
}

impl<W: Write> PacketWriter<W> {
    pub(super) fn new(out: W) -> Self {
        PacketWriter {
            out,
            tables: Tables::default(),
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
        self.write(packet, false)
    }

    /// Writes a track event, interning its texts.
    pub(super) fn event(&mut self, event: Event<'_>) -> io::Result<()> {
        let mut interned = InternedData::default();
        let mut track_event = TrackEvent {
            r#type: Some(track_event_type(event.phase) as i32),
            track_uuid: Some(event.track),
            flow_ids: event.flow.into_iter().collect(),
            terminating_flow_ids: event.terminating_flow.into_iter().collect(),
            ..TrackEvent::default()
        };
        for arg in event.args {
            let annotation = self.tables.annotation(arg, &mut interned);
            track_event.debug_annotations.push(annotation);
        }
        if let Phase::Counter(value) = event.phase {
            track_event.counter_value_field =
                Some(track_event::CounterValueField::CounterValue(value));
        }
        if let Some(name) = event.name {
            let iid = self.tables.name(name, &mut interned);
            track_event.name_field = Some(track_event::NameField::NameIid(iid));
        }
        if let Some(category) = event.category {
            track_event.category_iids = vec![self.tables.category(category, &mut interned)];
        }
        let has_interned = interned != InternedData::default();
        let packet = TracePacket {
            timestamp: Some(event.ts_ns),
            data: Some(trace_packet::Data::TrackEvent(track_event)),
            interned_data: has_interned.then_some(interned),
            ..TracePacket::default()
        };
        self.write(packet, true)
    }

    /// Flushes and returns the output.
    pub(super) fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }

    /// Writes `packet` on the sequence; `interned`: it refers to the sequence's tables.
    fn write(&mut self, mut packet: TracePacket, interned: bool) -> io::Result<()> {
        packet.optional_trusted_packet_sequence_id = Some(
            trace_packet::OptionalTrustedPacketSequenceId::TrustedPacketSequenceId(SEQUENCE_ID),
        );
        packet.sequence_flags = match (self.packets, interned) {
            (0, _) => Some(INCREMENTAL_STATE_CLEARED),
            (_, true) => Some(NEEDS_INCREMENTAL_STATE),
            (_, false) => None,
        };
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
