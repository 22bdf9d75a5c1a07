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
//! A track's uuid is its number in that order (from 1): every track event names its track,
//! and a small uuid is a one-byte varint.
#![forbid(unsafe_code)]

use std::collections::HashMap;
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

/// The tracks whose descriptors were written, with their uuids.
#[derive(Debug, Default)]
pub(super) struct Tracks {
    uuids: HashMap<Track, u64>,
}

impl Tracks {
    /// Writes `track`'s descriptor (and its process's) unless written; returns its uuid.
    pub(super) fn ensure<W: Write>(
        &mut self,
        track: Track,
        catalog: &Catalog,
        out: &mut PacketWriter<W>,
    ) -> io::Result<u64> {
        if let Some(&uuid) = self.uuids.get(&track) {
            return Ok(uuid);
        }
        let process = Track::Process {
            device: track.device(),
        };
        let parent = match self.uuids.get(&process) {
            Some(&uuid) => uuid,
            None => {
                let uuid = self.add(process);
                out.descriptor(process_descriptor(process, uuid, catalog))?;
                uuid
            }
        };
        if track == process {
            return Ok(parent);
        }
        let uuid = self.add(track);
        out.descriptor(descriptor(track, uuid, parent, catalog))?;
        Ok(uuid)
    }

    fn add(&mut self, track: Track) -> u64 {
        let uuid = self.uuids.len() as u64 + 1;
        self.uuids.insert(track, uuid);
        uuid
    }
}

fn process_descriptor(process: Track, uuid: u64, catalog: &Catalog) -> TrackDescriptor {
    let device = process.device();
    TrackDescriptor {
        uuid: Some(uuid),
        process: Some(ProcessDescriptor {
            pid: Some(pid_of(device)),
            process_name: Some(catalog.device_name(device).to_string()),
            process_labels: catalog.labels.get(&device).cloned().into_iter().collect(),
        }),
        ..TrackDescriptor::default()
    }
}

/// The descriptor of a track under a process (`parent`: the process's uuid).
fn descriptor(track: Track, uuid: u64, parent: u64, catalog: &Catalog) -> TrackDescriptor {
    let mut descriptor = TrackDescriptor {
        uuid: Some(uuid),
        ..TrackDescriptor::default()
    };
    let name = match track {
        Track::Process { .. } => return process_descriptor(track, uuid, catalog),
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
    descriptor.parent_uuid = Some(parent);
    descriptor.static_or_dynamic_name = Some(track_descriptor::StaticOrDynamicName::Name(name));
    descriptor
}
