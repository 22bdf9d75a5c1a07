//! Op spans retained: the recent ops as whole spans (queued, start, end, worker, stream), for
//! a timeline that is read op by op.
//!
//! # Protocol
//! A [`SpanStore`] is an [`EventSink`]: the collector thread hands it every drained batch
//! ([`EventSink::drained`]). It takes its one lock once per batch, not per event, and pairs op
//! events by op id in a map of open ops: `OpQueued` notes the queueing, `OpStart` the start,
//! its thread and device, `OpEnd` completes the span and appends it. Stream events
//! (`StreamSubmit` / `StreamStart` / `StreamEnd`) name the stream of a GPU op: noted on its
//! open entry, or, when the stream event is drained after the op's end, set on the span if it
//! is among the last `LATE_STREAM_REACH` appended.
//!
//! A batch is in ring order, one ring after another, so an op's queueing (recorded by the
//! thread that made it ready) can come after its start (recorded by the worker) in one
//! batch: the queueings of a batch are taken first, then the rest, so such an op keeps its
//! queue wait. A queueing drained a round after the op's end (the pushing thread's ring
//! drained late on a loaded machine) still finds its span while the span is in the open
//! chunk: a span that ended unqueued is noted by op id with its place in that chunk until
//! its queueing comes or the chunk is sealed. Only a queueing later than that is lost (the
//! span says its queueing was not seen).
//!
//! # Bounds
//! Completed spans go into chunks of `CHUNK` spans; a full chunk is sealed (made an
//! immutable shared slice) and a new one started. Past the store's capacity the oldest sealed
//! chunk goes, and its spans count as [`dropped`](SpanSnapshot::dropped). Open ops are bounded
//! too: past `MAX_OPEN` (ops whose end was lost in a full ring, or never came) the older
//! half of them is given up, counted in [`SpanSnapshot::abandoned`].
//!
//! # Readers
//! [`SpanStore::snapshot`] takes the lock for as long as it takes to clone the sealed chunks'
//! handles (one reference count each) and copy the open chunk (at most `CHUNK` spans), so
//! the collector waits at most that long for it. A snapshot is immutable: a dashboard frozen
//! on one keeps its picture while the store moves on.
#![forbid(unsafe_code)]

use std::collections::{HashMap, VecDeque};

use super::core::EventSink;
use super::event::{Event, EventKind};
use super::names::{DeviceId, ThreadId};
use crate::engine::OpName;
use crate::sync::Mutex;

// An immutable shared slice of spans: no protocol for loom to model, so `std`'s `Arc`.
type Chunk = std::sync::Arc<[OpSpan]>;

/// Spans a chunk holds: the unit that is sealed, shared with readers and dropped.
pub(crate) const CHUNK: usize = 1024;

/// The spans a store keeps by default: 131,072 (about 7 MiB).
pub(crate) const DEFAULT_CAPACITY: usize = 128 * CHUNK;

/// The most ops a store tracks between their queueing or start and their end.
pub(crate) const MAX_OPEN: usize = 65_536;

/// How far back among the spans appended a stream event drained after its op's end looks.
pub(crate) const LATE_STREAM_REACH: usize = 256;

/// One op, start to end, as it ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpSpan {
    /// The op's id (the engine's sequence number).
    pub op: u64,
    /// Its name.
    pub name: OpName,
    /// The device it ran on (its events' device).
    pub device: DeviceId,
    /// The thread that ran it.
    pub thread: ThreadId,
    /// When it was put on its device's queue (ns, the profiler's clock), if that was seen.
    pub queued_ns: Option<u64>,
    /// When it started (ns).
    pub start_ns: u64,
    /// When it ended (ns).
    pub end_ns: u64,
    /// Its push's priority.
    pub priority: i32,
    /// Whether it failed.
    pub error: bool,
    /// The GPU stream it ran on (a [`StreamId::code`](crate::device::stream::StreamId::code)),
    /// for a GPU op whose stream events were seen.
    pub stream: Option<u32>,
}

impl OpSpan {
    /// How long it ran (ns).
    pub(crate) fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }

    /// How long it waited on its queue (ns), if its queueing was seen.
    pub fn queue_wait_ns(&self) -> Option<u64> {
        self.queued_ns
            .map(|queued| self.start_ns.saturating_sub(queued))
    }
}

/// An immutable picture of a store's spans, oldest chunk first; within a chunk spans are in
/// the order they completed as drained (not sorted by start across threads).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SpanSnapshot {
    chunks: Vec<Chunk>,
    dropped: u64,
    abandoned: u64,
}

impl SpanSnapshot {
    /// A snapshot holding `spans` (a replay's, a test's), none dropped.
    ///
    /// ```
    /// use enginetop::profiler::{OpSpan, SpanSnapshot};
    /// use enginetop::profiler::{DeviceId, OpName, ThreadId};
    /// let span = OpSpan {
    ///     op: 7, name: OpName::new("doc-span"), device: DeviceId::HOST,
    ///     thread: ThreadId::from_raw(1), queued_ns: Some(5), start_ns: 10, end_ns: 30,
    ///     priority: 0, error: false, stream: None,
    /// };
    /// let snapshot = SpanSnapshot::from_spans(vec![span]);
    /// assert_eq!(snapshot.len(), 1);
    /// assert_eq!(snapshot.iter().next().unwrap().queue_wait_ns(), Some(5));
    /// ```
    pub fn from_spans(spans: Vec<OpSpan>) -> SpanSnapshot {
        let chunks = if spans.is_empty() {
            Vec::new()
        } else {
            vec![spans.into()]
        };
        SpanSnapshot {
            chunks,
            dropped: 0,
            abandoned: 0,
        }
    }

    /// Every span held, oldest chunk first.
    pub fn iter(&self) -> impl Iterator<Item = &OpSpan> {
        self.chunks.iter().flat_map(|chunk| chunk.iter())
    }

    /// Spans held.
    pub fn len(&self) -> usize {
        self.chunks.iter().map(|chunk| chunk.len()).sum()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Spans let go to keep the store within its capacity (the oldest first).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Ops given up before their end came (their end was lost, or never came).
    pub fn abandoned(&self) -> u64 {
        self.abandoned
    }
}

/// An op between its first event and its end.
#[derive(Clone, Copy, Debug, Default)]
struct Open {
    queued_ns: Option<u64>,
    /// Its start time, thread and device, once started.
    started: Option<(u64, ThreadId, DeviceId)>,
    stream: Option<u32>,
    /// When it was first seen, for giving up the oldest.
    seen_ns: u64,
}

#[derive(Debug, Default)]
struct Inner {
    open: HashMap<u64, Open>,
    /// Spans in `tail` that ended before their queueing was seen: op id -> index in `tail`.
    unqueued: HashMap<u64, usize>,
    sealed: VecDeque<Chunk>,
    tail: Vec<OpSpan>,
    dropped: u64,
    abandoned: u64,
}

/// The bounded store of recent op spans, fed by the collector (see the module docs).
#[derive(Debug)]
pub(crate) struct SpanStore {
    capacity: usize,
    inner: Mutex<Inner>,
}

impl SpanStore {
    /// A store that keeps at least `capacity` spans (rounded up to whole chunks, at least
    /// two).
    pub(crate) fn new(capacity: usize) -> SpanStore {
        SpanStore {
            capacity: capacity.div_ceil(CHUNK).max(2) * CHUNK,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The spans held now.
    pub(crate) fn snapshot(&self) -> SpanSnapshot {
        let inner = self.inner.lock();
        let mut chunks: Vec<Chunk> = inner.sealed.iter().cloned().collect();
        if !inner.tail.is_empty() {
            chunks.push(inner.tail.as_slice().into());
        }
        SpanSnapshot {
            chunks,
            dropped: inner.dropped,
            abandoned: inner.abandoned,
        }
    }

    /// Takes one drained batch (what the collector's [`EventSink::drained`] does).
    fn ingest(&self, events: &[Event]) {
        let mut inner = self.inner.lock();
        for event in events.iter().filter(|e| e.kind == EventKind::OpQueued) {
            inner.queued(event);
        }
        for event in events {
            match event.kind {
                EventKind::OpStart => inner.started(event),
                EventKind::OpEnd => {
                    if let Some(span) = inner.ended(event) {
                        inner.append(span, self.capacity);
                    }
                }
                EventKind::StreamSubmit | EventKind::StreamStart | EventKind::StreamEnd => {
                    inner.streamed(event)
                }
                _ => {}
            }
        }
        if inner.open.len() > MAX_OPEN {
            inner.give_up_oldest_half();
        }
    }
}

impl EventSink for SpanStore {
    fn drained(&self, events: &[Event], _dropped: u64) {
        self.ingest(events);
    }
}

impl Inner {
    fn entry(&mut self, event: &Event) -> &mut Open {
        self.open.entry(event.op_id()).or_insert_with(|| Open {
            seen_ns: event.ts_ns,
            ..Open::default()
        })
    }

    fn queued(&mut self, event: &Event) {
        if !self.unqueued.is_empty() {
            if let Some(index) = self.unqueued.remove(&event.op_id()) {
                let span = &mut self.tail[index];
                span.queued_ns = Some(event.ts_ns.min(span.start_ns));
                return;
            }
        }
        self.entry(event).queued_ns = Some(event.ts_ns);
    }

    fn started(&mut self, event: &Event) {
        self.entry(event).started = Some((event.ts_ns, event.thread, event.device));
    }

    fn streamed(&mut self, event: &Event) {
        let (op, stream) = (event.op_id(), event.stream());
        if let Some(open) = self.open.get_mut(&op) {
            open.stream = Some(stream);
            return;
        }
        let reach = self.tail.len().saturating_sub(LATE_STREAM_REACH);
        if let Some(span) = self.tail[reach..].iter_mut().rev().find(|s| s.op == op) {
            span.stream = Some(stream);
        }
    }

    /// The span `event` (an `OpEnd`) completes; `None` when its start was not seen.
    fn ended(&mut self, event: &Event) -> Option<OpSpan> {
        let open = self.open.remove(&event.op_id())?;
        let (start_ns, thread, device) = open.started?;
        Some(OpSpan {
            op: event.op_id(),
            name: event.name,
            device,
            thread,
            queued_ns: open.queued_ns,
            start_ns,
            end_ns: event.ts_ns.max(start_ns),
            priority: event.priority(),
            error: event.is_error(),
            stream: open.stream,
        })
    }

    fn append(&mut self, span: OpSpan, capacity: usize) {
        if span.queued_ns.is_none() {
            self.unqueued.insert(span.op, self.tail.len());
        }
        self.tail.push(span);
        if self.tail.len() < CHUNK {
            return;
        }
        self.unqueued.clear();
        let full = std::mem::replace(&mut self.tail, Vec::with_capacity(CHUNK));
        self.sealed.push_back(full.into());
        while (self.sealed.len() + 1) * CHUNK > capacity {
            let Some(oldest) = self.sealed.pop_front() else {
                break;
            };
            self.dropped += oldest.len() as u64;
        }
    }

    /// Gives up the older half of the open ops (by when each was first seen).
    fn give_up_oldest_half(&mut self) {
        let mut seen: Vec<u64> = self.open.values().map(|open| open.seen_ns).collect();
        let middle = seen.len() / 2;
        let (_, &mut cut, _) = seen.select_nth_unstable(middle);
        let before = self.open.len();
        self.open.retain(|_, open| open.seen_ns > cut);
        self.abandoned += (before - self.open.len()) as u64;
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::profiler::OpInfo;

    const CPU: DeviceId = DeviceId::HOST;

    fn op_event(kind: EventKind, op: u64, ts_ns: u64, thread: u32) -> Event {
        let mut event = Event::op(kind, CPU, OpName::new("spans-test"), OpInfo::new(op)).at(ts_ns);
        event.thread = ThreadId::from_raw(thread);
        event
    }

    fn stream_event(kind: EventKind, op: u64, stream: u32, ts_ns: u64) -> Event {
        Event::new(kind, CPU, OpName::new("spans-test"), stream, op).at(ts_ns)
    }

    /// A whole op: queued at `t`, started at `t + 10`, ended at `t + 30`, on thread 2.
    fn whole_op(op: u64, t: u64) -> [Event; 3] {
        [
            op_event(EventKind::OpQueued, op, t, 1),
            op_event(EventKind::OpStart, op, t + 10, 2),
            op_event(EventKind::OpEnd, op, t + 30, 2),
        ]
    }

    #[test]
    fn an_op_becomes_one_span_with_its_queue_wait_thread_and_error() {
        let store = SpanStore::new(CHUNK);
        let mut batch = whole_op(1, 100).to_vec();
        batch[2] = batch[2].with_error(true);
        store.drained(&batch, 0);
        let spans: Vec<OpSpan> = store.snapshot().iter().copied().collect();
        assert_eq!(spans.len(), 1);
        let span = spans[0];
        assert_eq!((span.op, span.thread.id()), (1, 2));
        assert_eq!((span.start_ns, span.end_ns), (110, 130));
        assert_eq!((span.queue_wait_ns(), span.duration_ns()), (Some(10), 20));
        assert!(span.error);
    }

    /// The queueing drained after the start (another thread's ring) still pairs.
    #[test]
    fn a_queueing_later_in_the_batch_still_gives_the_queue_wait() {
        let store = SpanStore::new(CHUNK);
        let [queued, start, end] = whole_op(5, 1_000);
        store.drained(&[start, end, queued], 0);
        let span = *store.snapshot().iter().next().unwrap();
        assert_eq!(span.queue_wait_ns(), Some(10));
        assert!(store.inner.lock().open.is_empty(), "nothing left open");
    }

    /// The queueing drained a round after the op's end (the pushing thread's ring drained
    /// late) still finds its span, and leaves nothing open; one drained after the span's
    /// chunk was sealed is lost, not kept open.
    #[test]
    fn a_queueing_drained_after_the_end_still_gives_the_queue_wait() {
        let store = SpanStore::new(4 * CHUNK);
        let [queued, start, end] = whole_op(7, 1_000);
        store.drained(&[start, end], 0);
        store.drained(&[queued], 0);
        let span = *store.snapshot().iter().next().unwrap();
        assert_eq!(span.queue_wait_ns(), Some(10));
        assert!(store.inner.lock().open.is_empty(), "nothing left open");
        let [late, start, end] = whole_op(8, 2_000);
        store.drained(&[start, end], 0);
        for op in 9..9 + CHUNK as u64 {
            store.drained(&whole_op(op, 3_000 + op), 0);
        }
        store.drained(&[late], 0);
        let eight = store
            .snapshot()
            .iter()
            .find(|s| s.op == 8)
            .copied()
            .unwrap();
        assert_eq!(eight.queue_wait_ns(), None, "its chunk was sealed first");
        let inner = store.inner.lock();
        assert!(inner.unqueued.is_empty(), "{:?}", inner.unqueued);
        assert_eq!(inner.open.len(), 1, "the lost queueing waits as an open op");
    }

    #[test]
    fn a_gpu_op_carries_its_stream_whether_it_comes_before_or_after_the_end() {
        let store = SpanStore::new(CHUNK);
        let [queued, start, end] = whole_op(1, 0);
        store.drained(&[queued, start], 0);
        store.drained(&[stream_event(EventKind::StreamSubmit, 1, 0x1_0000, 12)], 0);
        store.drained(&[end], 0);
        let [queued, start, end] = whole_op(2, 100);
        store.drained(&[queued, start, end], 0);
        store.drained(&[stream_event(EventKind::StreamEnd, 2, 3, 140)], 0);
        let streams: Vec<(u64, Option<u32>)> =
            store.snapshot().iter().map(|s| (s.op, s.stream)).collect();
        assert_eq!(streams, [(1, Some(0x1_0000)), (2, Some(3))]);
    }

    /// Past the capacity the oldest chunk goes, counted; a snapshot taken before keeps its
    /// spans.
    #[test]
    fn the_oldest_spans_go_first_and_are_counted() {
        let store = SpanStore::new(2 * CHUNK);
        let ops = 3 * CHUNK as u64 + 10;
        let mut before = None;
        for op in 0..ops {
            store.drained(&whole_op(op, op * 100), 0);
            if op == CHUNK as u64 {
                before = Some(store.snapshot());
            }
        }
        let spans = store.snapshot();
        assert_eq!(spans.len() as u64 + spans.dropped(), ops);
        assert!(spans.len() <= 2 * CHUNK, "{}", spans.len());
        assert_eq!(spans.dropped(), 2 * CHUNK as u64);
        let oldest = spans.iter().next().unwrap().op;
        assert_eq!(oldest, 2 * CHUNK as u64, "the oldest went first");
        let before = before.unwrap();
        assert_eq!(before.len(), CHUNK + 1);
        assert_eq!(
            before.iter().next().unwrap().op,
            0,
            "a snapshot stays as it was"
        );
    }

    /// Ops whose end never comes are given up, the oldest half at a time, and counted.
    #[test]
    fn open_ops_are_bounded() {
        let store = SpanStore::new(CHUNK);
        let starts: Vec<Event> = (0..MAX_OPEN as u64 + 1)
            .map(|op| op_event(EventKind::OpStart, op, op, 2))
            .collect();
        store.drained(&starts, 0);
        let open = store.inner.lock().open.len();
        assert!(open <= MAX_OPEN / 2 + 1, "{open}");
        let spans = store.snapshot();
        assert_eq!(spans.abandoned() + open as u64, MAX_OPEN as u64 + 1);
        // The newest survive: the last started op still completes.
        let last = MAX_OPEN as u64;
        store.drained(&[op_event(EventKind::OpEnd, last, last + 5, 2)], 0);
        assert_eq!(store.snapshot().iter().next().unwrap().op, last);
    }

    /// The collector feeds a store it was given as a sink.
    #[test]
    fn a_profiler_feeds_its_store() {
        let profiler = crate::profiler::Profiler::new(Default::default()).unwrap();
        let store = std::sync::Arc::new(SpanStore::new(CHUNK));
        let sink: std::sync::Arc<dyn EventSink> = store.clone();
        profiler.add_sink(std::sync::Arc::downgrade(&sink));
        let (cpu, name) = (DeviceId::register("spans-cpu"), OpName::new("spans-op"));
        for op in 0..10 {
            profiler.op_queued(cpu, name, OpInfo::new(op));
            profiler.op_start(cpu, name, OpInfo::new(op));
            profiler.op_end(cpu, name, OpInfo::new(op), false);
        }
        profiler.flush();
        let spans = store.snapshot();
        let ops: Vec<u64> = spans.iter().map(|s| s.op).collect();
        assert_eq!(ops, (0..10).collect::<Vec<u64>>());
        assert!(spans.iter().all(|s| s.thread == ThreadId::current()));
    }
}

/// The examples of the crate-private items above (doctests reach only the public API).
#[cfg(all(test, not(loom)))]
mod examples {
    #[test]
    fn a_span_store_fed_by_a_profiler_holds_its_ops() {
        use crate::profiler::spans::SpanStore;
        use crate::profiler::{DeviceId, EventSink, OpInfo, OpName, Profiler};
        let profiler = Profiler::new(Default::default()).unwrap();
        let store = std::sync::Arc::new(SpanStore::new(4096));
        let sink: std::sync::Arc<dyn EventSink> = store.clone();
        profiler.add_sink(std::sync::Arc::downgrade(&sink));
        let (cpu, op) = (DeviceId::register("doc-spans"), OpName::new("doc-spans-op"));
        profiler.op_queued(cpu, op, OpInfo::new(9));
        profiler.op_start(cpu, op, OpInfo::new(9));
        profiler.op_end(cpu, op, OpInfo::new(9), false);
        profiler.flush();
        let spans = store.snapshot();
        let span = spans.iter().find(|s| s.op == 9).unwrap();
        assert_eq!((span.name, span.device), (op, cpu));
        assert!(span.queued_ns.is_some() && span.end_ns >= span.start_ns);
    }
}
