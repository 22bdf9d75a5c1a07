//! Test support: a Perfetto trace of this export read back as a trace processor reads it,
//! resolving each interned id on its sequence, and checking on the way the rules the writer
//! keeps (see `packets.rs`): one sequence; its first packet clears the incremental state and
//! no later one does; every track event says it needs that state; every text a track event
//! carries is interned (no inline names or string values); each id is defined once, before
//! or in the packet that first uses it; each track is described before its events.
//!
//! The library's unit tests and `tests/export_perfetto.rs` (which includes this file) share
//! it; `super::proto` is the generated messages in both.
#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;

use super::proto::{debug_annotation, trace_packet, track_descriptor, track_event, Trace};

const INCREMENTAL_STATE_CLEARED: u32 = 1;
const NEEDS_INCREMENTAL_STATE: u32 = 2;

/// A debug annotation's value, its string resolved.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Int(i64),
    Uint(u64),
    Bool(bool),
    Str(String),
}

/// A track event with its texts resolved.
#[derive(Clone, Debug)]
pub struct Event {
    pub ts_ns: u64,
    /// Its track's uuid.
    pub track_uuid: u64,
    /// Its track's name: a thread's name, a process's name, or `process/track`.
    pub track: String,
    pub kind: track_event::Type,
    /// Its name (empty for a slice's end).
    pub name: String,
    pub categories: Vec<String>,
    pub args: Vec<(String, Value)>,
    pub flows: usize,
    pub terminating_flows: usize,
    pub counter: Option<i64>,
}

impl Event {
    /// The value of annotation `name`, if the event has it.
    pub fn arg(&self, name: &str) -> Option<&Value> {
        self.args
            .iter()
            .find(|(arg, _)| arg == name)
            .map(|(_, value)| value)
    }
}

/// One interning table of the sequence.
#[derive(Debug, Default)]
struct Table {
    what: &'static str,
    texts: HashMap<u64, String>,
}

impl Table {
    fn new(what: &'static str) -> Self {
        Table {
            what,
            texts: HashMap::new(),
        }
    }

    fn define(&mut self, iid: Option<u64>, text: Option<String>) -> Result<(), String> {
        let (Some(iid @ 1..), Some(text)) = (iid, text) else {
            return Err(format!("a {} entry without an iid or a text", self.what));
        };
        match self.texts.insert(iid, text) {
            Some(old) => Err(format!(
                "{} iid {iid} defined twice (first {old:?})",
                self.what
            )),
            None => Ok(()),
        }
    }

    fn resolve(&self, iid: u64, packet: usize) -> Result<String, String> {
        self.texts.get(&iid).cloned().ok_or_else(|| {
            format!(
                "packet {packet}: {} iid {iid} used before its definition",
                self.what
            )
        })
    }
}

/// The sequence's tables.
struct Tables {
    names: Table,
    categories: Table,
    annotation_names: Table,
    strings: Table,
}

/// Decodes `bytes` (see the module docs); an error names the first rule broken.
pub fn decode(bytes: &[u8]) -> Result<Vec<Event>, String> {
    use prost::Message;
    let trace = Trace::decode(bytes).map_err(|error| error.to_string())?;
    let mut tables = Tables {
        names: Table::new("event name"),
        categories: Table::new("category"),
        annotation_names: Table::new("annotation name"),
        strings: Table::new("string value"),
    };
    let mut tracks: HashMap<u64, String> = HashMap::new();
    let mut events = Vec::new();
    for (index, packet) in trace.packet.into_iter().enumerate() {
        let sequence = trace_packet::OptionalTrustedPacketSequenceId::TrustedPacketSequenceId(1);
        if packet.optional_trusted_packet_sequence_id != Some(sequence) {
            return Err(format!("packet {index} is not on sequence 1"));
        }
        let flags = packet.sequence_flags.unwrap_or(0);
        if (index == 0) != (flags & INCREMENTAL_STATE_CLEARED != 0) {
            return Err(format!("packet {index} has sequence flags {flags}"));
        }
        if let Some(interned) = packet.interned_data {
            for entry in interned.event_names {
                tables.names.define(entry.iid, entry.name)?;
            }
            for entry in interned.event_categories {
                tables.categories.define(entry.iid, entry.name)?;
            }
            for entry in interned.debug_annotation_names {
                tables.annotation_names.define(entry.iid, entry.name)?;
            }
            for entry in interned.debug_annotation_string_values {
                let text = entry
                    .str
                    .map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
                tables.strings.define(entry.iid, text)?;
            }
        }
        match packet.data {
            Some(trace_packet::Data::TrackDescriptor(descriptor)) => {
                let name = track_name(&descriptor, &tracks)?;
                if tracks.insert(descriptor.uuid(), name).is_some() {
                    return Err(format!("track {} described twice", descriptor.uuid()));
                }
            }
            Some(trace_packet::Data::TrackEvent(event)) => {
                if index > 0 && flags & NEEDS_INCREMENTAL_STATE == 0 {
                    return Err(format!(
                        "track event {index} does not say it needs the state"
                    ));
                }
                let Some(track) = tracks.get(&event.track_uuid()).cloned() else {
                    return Err(format!("packet {index}: an event on an undescribed track"));
                };
                let ts_ns = packet
                    .timestamp
                    .ok_or_else(|| format!("event {index} has no time"))?;
                events.push(resolve(event, ts_ns, track, &tables, index)?);
            }
            None => return Err(format!("packet {index} holds nothing")),
        }
    }
    Ok(events)
}

fn track_name(
    descriptor: &super::proto::TrackDescriptor,
    tracks: &HashMap<u64, String>,
) -> Result<String, String> {
    if let Some(thread) = &descriptor.thread {
        return Ok(thread.thread_name().to_string());
    }
    if let Some(process) = &descriptor.process {
        return Ok(process.process_name().to_string());
    }
    let parent = tracks
        .get(&descriptor.parent_uuid())
        .ok_or_else(|| format!("track {} before its parent", descriptor.uuid()))?;
    match &descriptor.static_or_dynamic_name {
        Some(track_descriptor::StaticOrDynamicName::Name(name)) => Ok(format!("{parent}/{name}")),
        None => Err(format!("track {} has no name", descriptor.uuid())),
    }
}

fn resolve(
    event: super::proto::TrackEvent,
    ts_ns: u64,
    track: String,
    tables: &Tables,
    index: usize,
) -> Result<Event, String> {
    let name = match &event.name_field {
        Some(track_event::NameField::NameIid(iid)) => tables.names.resolve(*iid, index)?,
        Some(track_event::NameField::Name(name)) => {
            return Err(format!("packet {index}: the name {name:?} is not interned"))
        }
        None => String::new(),
    };
    let categories = event
        .category_iids
        .iter()
        .map(|&iid| tables.categories.resolve(iid, index))
        .collect::<Result<_, _>>()?;
    let mut args = Vec::new();
    for annotation in &event.debug_annotations {
        let arg = match &annotation.name_field {
            Some(debug_annotation::NameField::NameIid(iid)) => {
                tables.annotation_names.resolve(*iid, index)?
            }
            other => return Err(format!("packet {index}: annotation name {other:?} inline")),
        };
        let value = match &annotation.value {
            Some(debug_annotation::Value::IntValue(value)) => Value::Int(*value),
            Some(debug_annotation::Value::UintValue(value)) => Value::Uint(*value),
            Some(debug_annotation::Value::BoolValue(value)) => Value::Bool(*value),
            Some(debug_annotation::Value::StringValueIid(iid)) => {
                Value::Str(tables.strings.resolve(*iid, index)?)
            }
            other => return Err(format!("packet {index}: {arg} = {other:?} is not interned")),
        };
        args.push((arg, value));
    }
    let counter = event
        .counter_value_field
        .map(|track_event::CounterValueField::CounterValue(value)| value);
    Ok(Event {
        ts_ns,
        track_uuid: event.track_uuid(),
        track,
        kind: event.r#type(),
        name,
        categories,
        args,
        flows: event.flow_ids.len(),
        terminating_flows: event.terminating_flow_ids.len(),
        counter,
    })
}
