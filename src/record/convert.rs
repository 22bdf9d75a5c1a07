//! The one place the profiler's [`Event`] and the recording's [`RecordedEvent`] meet: the
//! recording keeps its own types, so that a change to how events carry their identities
//! changes these two functions and the format version, nothing else.
#![forbid(unsafe_code)]

use crate::profiler::{DeviceId, Event, EventKind, OpName, ThreadId};

use super::format::{RecordKind, RecordedEvent};

// The two lie alike (module `format`), so `recorded` is a copy.
const _: () = assert!(std::mem::size_of::<RecordedEvent>() == std::mem::size_of::<Event>());

/// `event` as the recording stores it (its ids as numbers of this process's registries).
pub(crate) fn recorded(event: &Event) -> RecordedEvent {
    RecordedEvent {
        ts_ns: event.ts_ns,
        kind: record_kind(event.kind),
        thread: event.thread.id(),
        device: event.device.id(),
        name: event.name.id(),
        aux: event.aux,
        arg: event.arg,
        flags: event.flags,
    }
}

/// `recorded` as a profiler event whose ids are `ids` (this process's registries' ids for
/// the recording's names, device and thread).
pub(crate) fn to_event(recorded: &RecordedEvent, ids: (OpName, DeviceId, ThreadId)) -> Event {
    let (name, device, thread) = ids;
    let mut event = Event::new(
        event_kind(recorded.kind),
        device,
        name,
        recorded.aux,
        recorded.arg,
    )
    .at(recorded.ts_ns);
    event.thread = thread;
    event.flags = recorded.flags;
    event
}

fn record_kind(kind: EventKind) -> RecordKind {
    match kind {
        EventKind::OpQueued => RecordKind::OpQueued,
        EventKind::OpStart => RecordKind::OpStart,
        EventKind::OpEnd => RecordKind::OpEnd,
        EventKind::TaskStart => RecordKind::TaskStart,
        EventKind::TaskEnd => RecordKind::TaskEnd,
        EventKind::Steal => RecordKind::Steal,
        EventKind::SpinStart => RecordKind::SpinStart,
        EventKind::SpinEnd => RecordKind::SpinEnd,
        EventKind::Park => RecordKind::Park,
        EventKind::Unpark => RecordKind::Unpark,
        EventKind::PoolResized => RecordKind::PoolResized,
        EventKind::QueueDepth => RecordKind::QueueDepth,
        EventKind::StreamSubmit => RecordKind::StreamSubmit,
        EventKind::StreamStart => RecordKind::StreamStart,
        EventKind::StreamEnd => RecordKind::StreamEnd,
        EventKind::SpanEnter => RecordKind::SpanEnter,
        EventKind::SpanExit => RecordKind::SpanExit,
    }
}

pub(super) fn event_kind(kind: RecordKind) -> EventKind {
    match kind {
        RecordKind::OpQueued => EventKind::OpQueued,
        RecordKind::OpStart => EventKind::OpStart,
        RecordKind::OpEnd => EventKind::OpEnd,
        RecordKind::TaskStart => EventKind::TaskStart,
        RecordKind::TaskEnd => EventKind::TaskEnd,
        RecordKind::Steal => EventKind::Steal,
        RecordKind::SpinStart => EventKind::SpinStart,
        RecordKind::SpinEnd => EventKind::SpinEnd,
        RecordKind::Park => EventKind::Park,
        RecordKind::Unpark => EventKind::Unpark,
        RecordKind::PoolResized => EventKind::PoolResized,
        RecordKind::QueueDepth => EventKind::QueueDepth,
        RecordKind::StreamSubmit => EventKind::StreamSubmit,
        RecordKind::StreamStart => EventKind::StreamStart,
        RecordKind::StreamEnd => EventKind::StreamEnd,
        RecordKind::SpanEnter => EventKind::SpanEnter,
        RecordKind::SpanExit => EventKind::SpanExit,
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn every_kind_and_field_survives_the_round_trip() {
        for (index, kind) in EventKind::ALL.into_iter().enumerate() {
            let mut event = Event::new(
                kind,
                DeviceId::from_raw(3),
                OpName::from_raw(7),
                index as u32,
                u64::MAX - index as u64,
            )
            .at(1_000 + index as u64);
            event.thread = ThreadId::from_raw(9);
            event.flags = 0x85;
            let stored = recorded(&event);
            let ids = (event.name, event.device, event.thread);
            assert_eq!(to_event(&stored, ids), event, "{kind:?}");
        }
    }
}
