//! The event: a 32-byte `Copy` record, the contract between the runtime and everything that
//! looks at it.
//!
//! An [`Event`] is what one recording site writes into its thread's ring: a timestamp (ns
//! since the process epoch, see [`clock`](super::clock)), an [`EventKind`], the recording
//! thread ([`ThreadId`], stamped by the collector from the ring it came from), a
//! [`DeviceId`], a [`OpName`] (an interned name, never a `String`), one `u64` argument and
//! two small ones. What the arguments mean depends on the kind; the table on [`EventKind`]
//! says it, and the accessors ([`Event::op_id`], [`Event::worker`], ...) read them back.
#![forbid(unsafe_code)]

use super::names::{DeviceId, ThreadId};
use crate::device::identity::PoolRole;
use crate::engine::OpName;

/// What happened. The table gives the meaning of `name`, `aux` and `arg` for each kind
/// (`worker`: the pool worker index, `NO_WORKER` outside a pool).
///
/// | kind | name | aux | arg |
/// |---|---|---|---|
/// | `OpQueued` / `OpStart` / `OpEnd` | op name | priority (`i32` bits) | op id |
/// | `TaskStart` / `TaskEnd` | - | worker | - |
/// | `Steal` | - | thief worker | victim worker, `FROM_INJECTOR` |
/// | `SpinStart` / `SpinEnd` / `Park` / `Unpark` | - | worker | - |
/// | `PoolResized` | pool name | workers before | workers after |
/// | `QueueDepth` | queue label | - | depth |
/// | `StreamSubmit` / `StreamStart` / `StreamEnd` | op name | stream | op id |
/// | `SpanEnter` / `SpanExit` | span name | - | span id |
///
/// `flags` holds the error bit (`ERROR_FLAG`) on `OpEnd` / `TaskEnd`, and in its low 7 bits
/// the op's property on op events and the pool's [`PoolRole`] code on pool events (0: a pool
/// of no known role).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum EventKind {
    /// An op became ready and was put on a device queue.
    #[default]
    OpQueued,
    /// An op started running.
    OpStart,
    /// An op finished (the error bit says whether it failed).
    OpEnd,
    /// A pool worker started a task.
    TaskStart,
    /// A pool worker finished a task (the error bit: it panicked).
    TaskEnd,
    /// A worker took a task from another worker's queue.
    Steal,
    /// A worker became its pool's spinning thread.
    SpinStart,
    /// It stopped spinning.
    SpinEnd,
    /// A worker went to sleep.
    Park,
    /// A worker woke up.
    Unpark,
    /// A pool changed its worker count.
    PoolResized,
    /// A queue-depth counter sample.
    QueueDepth,
    /// A GPU op was submitted to a stream (the host side of a launch).
    StreamSubmit,
    /// A GPU op started on its stream.
    StreamStart,
    /// A GPU op finished on its stream.
    StreamEnd,
    /// A `tracing` span was entered.
    SpanEnter,
    /// A `tracing` span was exited.
    SpanExit,
}

impl EventKind {
    /// Every kind, in declaration order.
    pub const ALL: [EventKind; 17] = [
        EventKind::OpQueued,
        EventKind::OpStart,
        EventKind::OpEnd,
        EventKind::TaskStart,
        EventKind::TaskEnd,
        EventKind::Steal,
        EventKind::SpinStart,
        EventKind::SpinEnd,
        EventKind::Park,
        EventKind::Unpark,
        EventKind::PoolResized,
        EventKind::QueueDepth,
        EventKind::StreamSubmit,
        EventKind::StreamStart,
        EventKind::StreamEnd,
        EventKind::SpanEnter,
        EventKind::SpanExit,
    ];
}

/// `aux` of a pool event recorded on a thread outside the pool.
pub(crate) const NO_WORKER: u32 = u32::MAX;
/// `arg` of a `Steal` from the pool's shared injector rather than a worker's queue.
pub(crate) const FROM_INJECTOR: u64 = u64::MAX;
/// The bit of `flags` set on a failed `OpEnd` or a panicked `TaskEnd`.
pub(crate) const ERROR_FLAG: u8 = 0x80;
/// The bits of `flags` holding an op's property.
pub(crate) const PROPERTY_MASK: u8 = 0x7f;

/// Op properties by code, in the order of MXNet's `FnProperty` (and the engine's): an op
/// event's property code indexes this table.
pub(crate) const PROPERTY_NAMES: [&str; 8] = [
    "normal",
    "copy_from_gpu",
    "copy_to_gpu",
    "cpu_prioritized",
    "gpu_prioritized",
    "async",
    "delete_var",
    "no_skip",
];

/// The name of property `code` (`"unknown"` past the table).
pub(crate) fn property_name(code: u8) -> &'static str {
    PROPERTY_NAMES
        .get(usize::from(code))
        .copied()
        .unwrap_or("unknown")
}

/// One recorded event (32 bytes, `Copy`). See [`EventKind`] for what the fields mean.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct Event {
    /// Nanoseconds since the process epoch.
    pub ts_ns: u64,
    /// The main argument: op id, victim, depth, span id, workers after a resize.
    pub arg: u64,
    /// The interned name: op, span, queue or pool name.
    pub name: OpName,
    /// The recording thread (stamped by the collector).
    pub thread: ThreadId,
    /// The small argument: worker index, stream, priority, workers before a resize.
    pub aux: u32,
    /// The device (pool) the event belongs to.
    pub device: DeviceId,
    /// What happened.
    pub kind: EventKind,
    /// Error bit and op property.
    pub flags: u8,
}

const _: () = assert!(
    std::mem::size_of::<Event>() <= 32,
    "an Event must fit 32 bytes"
);

/// What op events carry about their op: its id, priority and property.
///
/// ```
/// use enginetop::profiler::OpInfo;
/// let op = OpInfo::new(42).priority(-1).property(3);
/// assert_eq!((op.id, op.priority, op.property), (42, -1, 3));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct OpInfo {
    /// A process-unique op id (a sequence number is best: addresses get reused).
    pub id: u64,
    /// The push's priority.
    pub priority: i32,
    /// The op's property code (an index into `PROPERTY_NAMES`).
    pub property: u8,
}

impl OpInfo {
    /// Op `id`, priority 0, property `normal`.
    pub const fn new(id: u64) -> Self {
        OpInfo {
            id,
            priority: 0,
            property: 0,
        }
    }

    /// Sets the priority.
    pub const fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }

    /// Sets the property code (the engine passes `FnProperty as u8`).
    pub const fn property(mut self, property: u8) -> Self {
        self.property = property;
        self
    }
}

impl Event {
    /// An event of `kind` on `device` with its arguments; the timestamp is set when it is
    /// recorded.
    pub const fn new(kind: EventKind, device: DeviceId, name: OpName, aux: u32, arg: u64) -> Self {
        Event {
            ts_ns: 0,
            arg,
            name,
            thread: ThreadId::UNKNOWN,
            aux,
            device,
            kind,
            flags: 0,
        }
    }

    /// An op event (`OpQueued`, `OpStart`, `OpEnd`) for op `op` named `name`.
    pub const fn op(kind: EventKind, device: DeviceId, name: OpName, op: OpInfo) -> Self {
        let mut event = Event::new(kind, device, name, op.priority as u32, op.id);
        event.flags = op.property & PROPERTY_MASK;
        event
    }

    /// A pool worker event (`TaskStart`, `TaskEnd`, spins, parks) of worker `worker`.
    pub const fn worker_event(kind: EventKind, device: DeviceId, worker: u32) -> Self {
        Event::new(kind, device, OpName::UNNAMED, worker, 0)
    }

    /// This pool event with its pool's role set to `role` (the error bit is kept).
    pub const fn with_pool_role(mut self, role: PoolRole) -> Self {
        self.flags = (self.flags & ERROR_FLAG) | (role.code() & PROPERTY_MASK);
        self
    }

    /// The role of the pool a pool event came from, if its probe knew it.
    pub(crate) fn pool_role(&self) -> Option<PoolRole> {
        PoolRole::from_code(self.flags & PROPERTY_MASK)
    }

    /// This event with its timestamp set to `ts_ns`.
    pub const fn at(mut self, ts_ns: u64) -> Self {
        self.ts_ns = ts_ns;
        self
    }

    /// This event with the error bit set to `error`.
    pub const fn with_error(mut self, error: bool) -> Self {
        if error {
            self.flags |= ERROR_FLAG;
        } else {
            self.flags &= !ERROR_FLAG;
        }
        self
    }

    /// Whether the error bit is set (a failed op, a panicked task).
    pub const fn is_error(&self) -> bool {
        self.flags & ERROR_FLAG != 0
    }

    /// The op id of an op or stream event.
    pub const fn op_id(&self) -> u64 {
        self.arg
    }

    /// The priority of an op event.
    pub const fn priority(&self) -> i32 {
        self.aux as i32
    }

    /// The property code of an op event.
    pub const fn property(&self) -> u8 {
        self.flags & PROPERTY_MASK
    }

    /// The pool worker index of a pool event, `None` outside a pool.
    pub const fn worker(&self) -> Option<u32> {
        if self.aux == NO_WORKER {
            None
        } else {
            Some(self.aux)
        }
    }

    /// The victim's worker index of a `Steal`, `None` for the shared injector.
    pub const fn victim(&self) -> Option<u32> {
        if self.arg == FROM_INJECTOR {
            None
        } else {
            Some(self.arg as u32)
        }
    }

    /// The stream of a stream event.
    pub const fn stream(&self) -> u32 {
        self.aux
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_32_bytes_and_copy() {
        assert_eq!(std::mem::size_of::<Event>(), 32);
        let event = Event::default();
        let copy = event;
        assert_eq!(event, copy);
    }

    #[test]
    fn op_events_carry_id_priority_property_and_error() {
        let op = OpInfo::new(7).priority(-3).property(3);
        let event =
            Event::op(EventKind::OpEnd, DeviceId::HOST, OpName::UNNAMED, op).with_error(true);
        assert_eq!(event.op_id(), 7);
        assert_eq!(event.priority(), -3);
        assert_eq!(event.property(), 3);
        assert_eq!(property_name(event.property()), "cpu_prioritized");
        assert!(event.is_error());
        assert!(!event.with_error(false).is_error());
        assert_eq!(event.with_error(false).property(), 3);
    }

    #[test]
    fn pool_events_carry_their_role_beside_the_error_bit() {
        let end = Event::worker_event(EventKind::TaskEnd, DeviceId::HOST, 0);
        assert_eq!(end.pool_role(), None);
        let end = end.with_error(true).with_pool_role(PoolRole::GpuCopy);
        assert_eq!(end.pool_role(), Some(PoolRole::GpuCopy));
        assert!(end.is_error());
        let end = end.with_error(false);
        assert_eq!(end.pool_role(), Some(PoolRole::GpuCopy));
    }

    #[test]
    fn steal_arguments_read_back() {
        let steal = Event::new(EventKind::Steal, DeviceId::HOST, OpName::UNNAMED, 1, 0);
        assert_eq!((steal.worker(), steal.victim()), (Some(1), Some(0)));
        let from_injector = Event::new(
            EventKind::Steal,
            DeviceId::HOST,
            OpName::UNNAMED,
            NO_WORKER,
            FROM_INJECTOR,
        );
        assert_eq!(
            (from_injector.worker(), from_injector.victim()),
            (None, None)
        );
        assert_eq!(property_name(200), "unknown");
    }
}
