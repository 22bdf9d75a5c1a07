//! Which start each end of a run's events closes: the pairing both trace exports use (the
//! Chrome JSON of [`super::chrome`] and the Perfetto protobuf of `record::perfetto`), so the
//! two traces of one run hold the same slices.
//!
//! - A task's end closes the innermost task open on its thread.
//! - A span's exit closes the innermost span of its id open on its thread.
//! - A spin's or park's end closes the one open on its thread; a second start before an end
//!   replaces the first (whose end was lost), and the caller decides where the first ends.
//! - An op's end closes the start of its op id; a second start of an id replaces the first.
//! - A GPU stream runs its work in launch order, so under one (device, stream, op) key the
//!   n-th kernel start belongs to the n-th launch and the n-th end to the n-th start (one op
//!   may launch several units on one stream).
//!
//! What is open is the caller's (`O`: a start to close; `L`: what a launch leaves for its
//! kernel), so each export keeps what it needs and the pairing stays one piece of code.
#![forbid(unsafe_code)]

use std::collections::{HashMap, VecDeque};

use super::event::Event;
use super::names::{DeviceId, ThreadId};

/// A GPU stream's work of one op: (device, stream code, op id).
pub(crate) type StreamKey = (DeviceId, u32, u64);

/// The key a stream event's work is queued under.
pub(crate) fn stream_key(event: &Event) -> StreamKey {
    (event.device, event.stream(), event.op_id())
}

/// Starts waiting for their ends (see the module docs).
#[derive(Debug)]
pub(crate) struct Pairs<O, L> {
    tasks: HashMap<ThreadId, Vec<O>>,
    /// Per thread: (span id, start), innermost last.
    spans: HashMap<ThreadId, Vec<(u64, O)>>,
    spins: HashMap<ThreadId, O>,
    parks: HashMap<ThreadId, O>,
    ops: HashMap<u64, O>,
    launches: HashMap<StreamKey, VecDeque<L>>,
    kernels: HashMap<StreamKey, VecDeque<O>>,
}

impl<O, L> Default for Pairs<O, L> {
    fn default() -> Self {
        Pairs {
            tasks: HashMap::new(),
            spans: HashMap::new(),
            spins: HashMap::new(),
            parks: HashMap::new(),
            ops: HashMap::new(),
            launches: HashMap::new(),
            kernels: HashMap::new(),
        }
    }
}

impl<O, L> Pairs<O, L> {
    pub(crate) fn task_started(&mut self, thread: ThreadId, open: O) {
        self.tasks.entry(thread).or_default().push(open);
    }

    /// The innermost task open on `thread`.
    pub(crate) fn task_ended(&mut self, thread: ThreadId) -> Option<O> {
        self.tasks.get_mut(&thread).and_then(Vec::pop)
    }

    pub(crate) fn span_entered(&mut self, thread: ThreadId, id: u64, open: O) {
        self.spans.entry(thread).or_default().push((id, open));
    }

    /// The innermost span `id` open on `thread`.
    pub(crate) fn span_exited(&mut self, thread: ThreadId, id: u64) -> Option<O> {
        let stack = self.spans.get_mut(&thread)?;
        let position = stack.iter().rposition(|(open_id, _)| *open_id == id)?;
        Some(stack.remove(position).1)
    }

    /// Opens a spin (`spinning`) or a park on `thread`; returns the one it replaces.
    pub(crate) fn state_began(&mut self, thread: ThreadId, spinning: bool, open: O) -> Option<O> {
        self.states(spinning).insert(thread, open)
    }

    /// The spin (`spinning`) or park open on `thread`.
    pub(crate) fn state_ended(&mut self, thread: ThreadId, spinning: bool) -> Option<O> {
        self.states(spinning).remove(&thread)
    }

    /// Every spin and park still open (`true` for a spin), spins first.
    pub(crate) fn drain_states(&mut self) -> Vec<(bool, O)> {
        let spins = self.spins.drain().map(|(_, open)| (true, open));
        let mut states: Vec<(bool, O)> = spins.collect();
        states.extend(self.parks.drain().map(|(_, open)| (false, open)));
        states
    }

    /// Opens op `op_id`; returns the start it replaces.
    pub(crate) fn op_started(&mut self, op_id: u64, open: O) -> Option<O> {
        self.ops.insert(op_id, open)
    }

    pub(crate) fn op_ended(&mut self, op_id: u64) -> Option<O> {
        self.ops.remove(&op_id)
    }

    pub(crate) fn launched(&mut self, key: StreamKey, launch: L) {
        self.launches.entry(key).or_default().push_back(launch);
    }

    /// The oldest launch under `key` not yet taken.
    pub(crate) fn take_launch(&mut self, key: StreamKey) -> Option<L> {
        pop_first(&mut self.launches, key)
    }

    pub(crate) fn kernel_started(&mut self, key: StreamKey, open: O) {
        self.kernels.entry(key).or_default().push_back(open);
    }

    /// The oldest kernel started under `key` and not yet ended.
    pub(crate) fn kernel_ended(&mut self, key: StreamKey) -> Option<O> {
        pop_first(&mut self.kernels, key)
    }

    /// Tasks, spans, ops and kernels started and never ended (spins and parks aside: they
    /// last to the run's end).
    pub(crate) fn unended(&self) -> usize {
        self.tasks.values().map(Vec::len).sum::<usize>()
            + self.spans.values().map(Vec::len).sum::<usize>()
            + self.ops.len()
            + self.kernels.values().map(VecDeque::len).sum::<usize>()
    }

    fn states(&mut self, spinning: bool) -> &mut HashMap<ThreadId, O> {
        match spinning {
            true => &mut self.spins,
            false => &mut self.parks,
        }
    }
}

/// The oldest entry queued under `key`, dropping the key when it empties.
fn pop_first<T>(queues: &mut HashMap<StreamKey, VecDeque<T>>, key: StreamKey) -> Option<T> {
    let queue = queues.get_mut(&key)?;
    let first = queue.pop_front();
    if queue.is_empty() {
        queues.remove(&key);
    }
    first
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn ends_close_the_innermost_start_of_their_kind_and_streams_keep_launch_order() {
        let (t, gpu) = (ThreadId::from_raw(7), DeviceId::from_raw(3));
        let mut pairs: Pairs<&str, u32> = Pairs::default();
        pairs.task_started(t, "outer task");
        pairs.task_started(t, "inner task");
        assert_eq!(pairs.task_ended(t), Some("inner task"));
        pairs.span_entered(t, 1, "span 1");
        pairs.span_entered(t, 2, "span 2");
        assert_eq!(pairs.span_exited(t, 1), Some("span 1"));
        assert_eq!(pairs.span_exited(t, 1), None);
        assert_eq!(pairs.state_began(t, true, "spin a"), None);
        assert_eq!(pairs.state_began(t, true, "spin b"), Some("spin a"));
        assert_eq!(pairs.state_began(t, false, "park"), None);
        assert_eq!(pairs.state_ended(t, false), Some("park"));
        assert_eq!(pairs.op_started(9, "op"), None);
        let key = (gpu, 0, 9);
        for (launch, kernel) in [(1, "kernel 1"), (2, "kernel 2")] {
            pairs.launched(key, launch);
            pairs.kernel_started(key, kernel);
        }
        assert_eq!(pairs.take_launch(key), Some(1));
        assert_eq!(pairs.kernel_ended(key), Some("kernel 1"));
        assert_eq!(pairs.unended(), 4, "outer task, span 2, op 9, kernel 2");
        assert_eq!(pairs.drain_states(), vec![(true, "spin b")]);
        assert_eq!(pairs.op_ended(9), Some("op"));
        assert_eq!(pairs.kernel_ended(key), Some("kernel 2"));
        assert_eq!(pairs.take_launch(key), Some(2));
        assert_eq!(pairs.take_launch(key), None);
        assert_eq!(pairs.unended(), 2);
    }
}
