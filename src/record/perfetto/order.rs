//! Events back in time order from a recording read frame by frame, in bounded memory.
//!
//! # Algorithm
//! The collector drains every thread's ring in turn, so a chunk holds its batches' events
//! by thread, then by time, and a chunk's events can be older than the previous chunk's
//! latest. An event drained later than another was recorded before that drain; so once
//! chunk `k` is read, no later chunk is expected to hold an event older than chunk `k - 1`'s
//! earliest. [`Reorder`] keeps events in a min-heap on (time, file position) and, after
//! each chunk, lets go of those older than that bound. The order it gives is the one a
//! stable sort of the whole file by time gives (the Chrome export's), holding about two
//! chunks of events. An event older than what was already let go (its thread was stopped
//! between taking its time and recording it for longer than a chunk's span) is let go at
//! once and counted ([`Reorder::late`]); past [`MAX_HELD`] events the oldest go whatever
//! the bound, so memory stays bounded on any file.
#![forbid(unsafe_code)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::record::format::RecordedEvent;

/// Events held at most (32 bytes each on the heap, about 40 MiB).
pub(super) const MAX_HELD: usize = 1 << 20;

/// An event and its position in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Held {
    position: u64,
    event: RecordedEvent,
}

impl Ord for Held {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.event.ts_ns, self.position).cmp(&(other.event.ts_ns, other.position))
    }
}

impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// The reorder buffer (see the module docs).
#[derive(Debug, Default)]
pub(super) struct Reorder {
    heap: BinaryHeap<Reverse<Held>>,
    next_position: u64,
    /// The previous chunk's earliest event time.
    previous_first: Option<u64>,
    /// Events older than this were let go.
    released_to: u64,
    /// Events that came after a later one was let go.
    pub(super) late: u64,
}

impl Reorder {
    /// Takes one chunk's events and hands `sink` every event now known to be in order.
    pub(super) fn push_chunk(
        &mut self,
        events: impl Iterator<Item = RecordedEvent>,
        mut sink: impl FnMut(RecordedEvent),
    ) {
        let mut first: Option<u64> = None;
        for event in events {
            first = Some(first.map_or(event.ts_ns, |known| known.min(event.ts_ns)));
            if event.ts_ns < self.released_to {
                self.late += 1;
            }
            let position = self.next_position;
            self.next_position += 1;
            self.heap.push(Reverse(Held { position, event }));
        }
        let Some(first) = first else {
            return;
        };
        if let Some(bound) = self.previous_first.replace(first) {
            self.release(|held| held.event.ts_ns < bound, &mut sink);
        }
        while self.heap.len() > MAX_HELD {
            let Reverse(held) = self.heap.pop().expect("the heap holds events");
            self.released_to = self.released_to.max(held.event.ts_ns);
            sink(held.event);
        }
    }

    /// Hands `sink` every event still held, in order.
    pub(super) fn finish(&mut self, mut sink: impl FnMut(RecordedEvent)) {
        self.release(|_| true, &mut sink);
    }

    fn release(
        &mut self,
        mut take: impl FnMut(&Held) -> bool,
        sink: &mut impl FnMut(RecordedEvent),
    ) {
        while let Some(Reverse(held)) = self.heap.peek() {
            if !take(held) {
                break;
            }
            let Reverse(held) = self.heap.pop().expect("peeked");
            self.released_to = self.released_to.max(held.event.ts_ns);
            sink(held.event);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::record::format::RecordKind;

    fn event(ts_ns: u64, thread: u32) -> RecordedEvent {
        RecordedEvent {
            ts_ns,
            kind: RecordKind::Steal,
            thread,
            device: 0,
            name: 0,
            aux: 0,
            arg: 0,
            flags: 0,
        }
    }

    /// Chunks as the collector writes them: each thread's events in time order, threads
    /// one after another, a chunk reaching back before the previous chunk's latest event.
    fn chunks() -> Vec<Vec<RecordedEvent>> {
        vec![
            vec![event(10, 1), event(30, 1), event(20, 2), event(40, 2)],
            vec![event(35, 1), event(60, 1), event(45, 2), event(50, 2)],
            vec![event(55, 2), event(70, 2), event(65, 1), event(66, 1)],
        ]
    }

    #[test]
    fn chunks_that_reach_back_come_out_in_time_order_like_a_stable_sort() {
        let mut reorder = Reorder::default();
        let mut out = Vec::new();
        for chunk in chunks() {
            reorder.push_chunk(chunk.into_iter(), |event| out.push(event));
        }
        reorder.finish(|event| out.push(event));
        let mut sorted: Vec<RecordedEvent> = chunks().concat();
        sorted.sort_by_key(|event| event.ts_ns);
        assert_eq!(out, sorted);
        assert_eq!(reorder.late, 0);
    }

    #[test]
    fn what_is_held_stays_near_two_chunks_and_a_late_event_is_counted() {
        let mut reorder = Reorder::default();
        let mut out = 0;
        for round in 0..100u64 {
            let chunk = (0..50).map(|i| event(round * 1_000 + i * 10, 1));
            reorder.push_chunk(chunk, |_| out += 1);
            assert!(reorder.heap.len() <= 100, "{}", reorder.heap.len());
        }
        reorder.push_chunk([event(5, 3)].into_iter(), |_| out += 1);
        reorder.finish(|_| out += 1);
        assert_eq!(out, 100 * 50 + 1);
        assert_eq!(reorder.late, 1);
    }
}
