//! The trace's tracks, laid out as the Chrome export lays them out and named from the
//! recording's typed identities the same way: a process per device (`pid = device id + 1`,
//! named after the device, with its description as a process label), a thread track per
//! recording thread under its home device's process (`tid` = the recorded thread id, named
//! with the thread's name), a track per GPU stream under its device's process (`stream
//! compute0`), a counter track per queue (`queue <label>`), and lanes for ops that end on
//! another thread than they started on (`async ops`, one lane per op running at once).
//!
//! Each descriptor is written just before the first event on its track (a process's before
//! its first track's), so the trace holds only tracks with events, as the Chrome export does.
#![forbid(unsafe_code)]

use std::collections::HashSet;
use std::io::{self, Write};

use crate::device::stream::StreamId;

use super::catalog::Catalog;
use super::packets::PacketWriter;
use super::proto::{
    counter_descriptor, track_descriptor, CounterDescriptor, ProcessDescriptor, ThreadDescriptor,
    TrackDescriptor,
};

/// A track of the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Track {
    /// A device's process track (process-scoped instants: resizes).
    Process { device: u16 },
    /// A recording thread's track, under its home device.
    Thread { device: u16, thread: u32 },
    /// A GPU stream of a device (its code: role and index).
    Stream { device: u16, stream: u32 },
    /// A queue's depth on a device (the queue's name id).
    Counter { device: u16, name: u32 },
    /// Lane `lane` of a device's async ops.
    AsyncLane { device: u16, lane: u32 },
}

impl Track {
    /// The track's uuid: its kind in the top byte, its ids below.
    pub(super) fn uuid(self) -> u64 {
        let (kind, high, low) = match self {
            Track::Process { device } => (1u64, device, 0u32),
            Track::Thread { device, thread } => (2, device, thread),
            Track::Stream { device, stream } => (3, device, stream),
            Track::Counter { device, name } => (4, device, name),
            Track::AsyncLane { device, lane } => (5, device, lane),
        };
        kind << 56 | u64::from(high) << 32 | u64::from(low)
    }

    fn device(self) -> u16 {
        match self {
            Track::Process { device }
            | Track::Thread { device, .. }
            | Track::Stream { device, .. }
            | Track::Counter { device, .. }
            | Track::AsyncLane { device, .. } => device,
        }
    }
}

/// The trace process id of `device`, as the Chrome export numbers it.
pub(super) fn pid_of(device: u16) -> i32 {
    i32::from(device) + 1
}

/// Which tracks' descriptors were written.
#[derive(Debug, Default)]
pub(super) struct Tracks {
    written: HashSet<Track>,
}

impl Tracks {
    /// Writes `track`'s descriptor (and its process's) unless written; returns its uuid.
    pub(super) fn ensure<W: Write>(
        &mut self,
        track: Track,
        catalog: &Catalog,
        out: &mut PacketWriter<W>,
    ) -> io::Result<u64> {
        if self.written.contains(&track) {
            return Ok(track.uuid());
        }
        let process = Track::Process {
            device: track.device(),
        };
        if self.written.insert(process) {
            out.descriptor(process_descriptor(process, catalog))?;
        }
        if track != process {
            self.written.insert(track);
            out.descriptor(descriptor(track, catalog))?;
        }
        Ok(track.uuid())
    }
}

fn process_descriptor(process: Track, catalog: &Catalog) -> TrackDescriptor {
    let device = process.device();
    TrackDescriptor {
        uuid: Some(process.uuid()),
        process: Some(ProcessDescriptor {
            pid: Some(pid_of(device)),
            process_name: Some(catalog.device_name(device).to_string()),
            process_labels: catalog.labels.get(&device).cloned().into_iter().collect(),
        }),
        ..TrackDescriptor::default()
    }
}

fn descriptor(track: Track, catalog: &Catalog) -> TrackDescriptor {
    let parent = Track::Process {
        device: track.device(),
    };
    let mut descriptor = TrackDescriptor {
        uuid: Some(track.uuid()),
        ..TrackDescriptor::default()
    };
    let name = match track {
        Track::Process { .. } => return process_descriptor(track, catalog),
        Track::Thread { device, thread } => {
            descriptor.thread = Some(ThreadDescriptor {
                pid: Some(pid_of(device)),
                tid: Some(thread as i32),
                thread_name: Some(catalog.thread_name(thread)),
            });
            return descriptor;
        }
        Track::Stream { stream, .. } => StreamId::from_code(0, stream).label(),
        Track::Counter { name, .. } => {
            descriptor.counter = Some(CounterDescriptor {
                unit: Some(counter_descriptor::Unit::Count as i32),
            });
            format!("queue {}", catalog.name(name))
        }
        Track::AsyncLane { .. } => "async ops".to_string(),
    };
    descriptor.parent_uuid = Some(parent.uuid());
    descriptor.static_or_dynamic_name = Some(track_descriptor::StaticOrDynamicName::Name(name));
    descriptor
}
