//! A bounded single-producer single-consumer ring of [`Event`]s: one per recording thread,
//! written by that thread, drained by the collector.
//!
//! # Protocol
//! The ring is an array of `capacity` slots (a power of two) and two counters that only grow:
//! `head`, the events published, stored only by the producer, and `tail`, the events consumed,
//! stored only by the consumer. Slot `i % capacity` holds event `i`. Events `[tail, head)` are
//! full and belong to the consumer; every other slot belongs to the producer.
//!
//! - **push** (the owning thread): if `head - tail == capacity` the ring is full. The producer
//!   keeps a cached copy of `tail` and re-reads the shared one (`Acquire`) only when the cache
//!   says full, so a push normally touches no cache line the consumer writes. Still full: the
//!   event is *dropped* and `dropped` goes up by one. Otherwise it writes slot `head` and then
//!   publishes it by storing `head + 1` with `Release`.
//! - **drain** (the collector): it loads `head` (`Acquire`), copies out every event in
//!   `[tail, head)` and then stores the new `tail` (`Release`), handing the slots back.
//!
//! The `Release` store of `head` after writing a slot, paired with the consumer's `Acquire`
//! load, means the consumer only reads slots whose writes it sees complete. The `Release` store
//! of `tail` after reading, paired with the producer's `Acquire` load, means the producer only
//! overwrites slots the consumer has finished reading. No slot is ever accessed by both sides
//! at once, which is what the loom models below check, wrap-around and drops included.
//!
//! # Why recording never blocks and never allocates
//! A push is a few loads, one 32-byte copy and one store: no lock, no CAS loop, no waiting for
//! the consumer. A full ring is the consumer's problem, not the producer's: the event is
//! dropped and counted. `dropped` has a single writer (the producer), so it is bumped with a
//! relaxed load and store; the collector sums every ring's count into the "dropped events"
//! figure that users see, so a loss is never silent.
//!
//! # End of life
//! When the owning thread exits, its [`Producer`] is dropped and marks the ring `closed`
//! (`Release`, after its last `head` store). The collector checks `closed` (`Acquire`) *before*
//! its final drain, so that drain sees every event, and then lets the ring go.
//!
//! `unsafe` in this module: the slot accesses (justified by the protocol above) and the
//! `Sync` impl that lets the two halves share the slots.
#![allow(unsafe_code)] // the one module of the profiler that needs it; see above

use crossbeam_utils::CachePadded;

use super::event::Event;
use crate::sync::{Arc, AtomicBool, AtomicU64, AtomicUsize, Ordering, UnsafeCell};

/// What the two halves share.
struct Shared {
    slots: Box<[UnsafeCell<Event>]>,
    /// `capacity - 1`; the capacity is a power of two.
    mask: usize,
    /// Events published (producer stores, consumer loads).
    head: CachePadded<AtomicUsize>,
    /// Events consumed (consumer stores, producer loads when it thinks the ring is full).
    tail: CachePadded<AtomicUsize>,
    /// Events the producer found no room for (producer stores, anyone loads).
    dropped: AtomicU64,
    /// The producer is gone: after one more drain the ring is empty for good.
    closed: AtomicBool,
    /// The consumer is gone: nothing will ever drain this ring again.
    abandoned: AtomicBool,
}

// SAFETY: the slots are the only non-`Sync` part. They are shared by exactly one `Producer`
// and one `Consumer` (neither is `Clone`), and the head/tail protocol in the module docs gives
// each slot to one side at a time, with a release/acquire pair on every hand-over, so no slot
// is read and written concurrently. Everything else in `Shared` is atomic.
unsafe impl Sync for Shared {}

/// The writing half: owned by the recording thread.
pub(crate) struct Producer {
    shared: Arc<Shared>,
    /// Our own copy of `head` (we are its only writer).
    head: usize,
    /// The last `tail` we read; the real one is at least this.
    cached_tail: usize,
}

/// The reading half: owned by the collector.
pub(crate) struct Consumer {
    shared: Arc<Shared>,
    /// Our own copy of `tail` (we are its only writer).
    tail: usize,
}

/// A ring of at least `capacity` slots (rounded up to a power of two, at least 2).
pub(crate) fn ring(capacity: usize) -> (Producer, Consumer) {
    let capacity = capacity.max(2).next_power_of_two();
    let shared = Arc::new(Shared {
        slots: (0..capacity)
            .map(|_| UnsafeCell::new(Event::default()))
            .collect(),
        mask: capacity - 1,
        head: CachePadded::new(AtomicUsize::new(0)),
        tail: CachePadded::new(AtomicUsize::new(0)),
        dropped: AtomicU64::new(0),
        closed: AtomicBool::new(false),
        abandoned: AtomicBool::new(false),
    });
    let producer = Producer {
        shared: shared.clone(),
        head: 0,
        cached_tail: 0,
    };
    (producer, Consumer { shared, tail: 0 })
}

impl Producer {
    /// Appends `event`; returns `false` (and counts a drop) if the ring is full. Never blocks.
    #[inline]
    pub(crate) fn push(&mut self, event: Event) -> bool {
        let capacity = self.shared.mask + 1;
        if self.head.wrapping_sub(self.cached_tail) >= capacity {
            self.cached_tail = self.shared.tail.load(Ordering::Acquire);
            if self.head.wrapping_sub(self.cached_tail) >= capacity {
                self.count_drop();
                return false;
            }
        }
        let slot = &self.shared.slots[self.head & self.shared.mask];
        // SAFETY: slot `head` is not in `[tail, head)`: `head - tail < capacity` by the check
        // above, and the `Acquire` load of `tail` (now or when `cached_tail` was read) saw the
        // consumer's release of this slot. The consumer never reads it before our `Release`
        // store of `head + 1` below, so we have exclusive access while we write.
        slot.with_mut(|cell| unsafe { write_fields(cell, &event) });
        self.head = self.head.wrapping_add(1);
        self.shared.head.store(self.head, Ordering::Release);
        true
    }

    #[cold]
    fn count_drop(&self) {
        let dropped = &self.shared.dropped;
        dropped.store(dropped.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// Whether the consumer is gone (the profiler shut down): pushes can only drop now.
    pub(crate) fn is_abandoned(&self) -> bool {
        self.shared.abandoned.load(Ordering::Relaxed)
    }
}

/// Writes `event` into `slot` one field at a time.
///
/// A recording site assembles its event on the stack with narrow stores (a `u16` here, a
/// `u8` there); copying it whole then loads 16 bytes at a time from those narrow stores,
/// which the CPU cannot forward from its store buffer, and each such load stalls until the
/// stores retire (measured: about 5 ns per event). Field-sized copies forward.
///
/// # Safety
/// `slot` must be valid for writes and accessed by no other thread until the write is
/// published.
#[inline(always)]
unsafe fn write_fields(slot: *mut Event, event: &Event) {
    // SAFETY: the caller guarantees `slot` is valid and exclusively ours; `addr_of_mut!`
    // makes field pointers without creating references to the (possibly racing) whole.
    unsafe {
        std::ptr::addr_of_mut!((*slot).ts_ns).write(event.ts_ns);
        std::ptr::addr_of_mut!((*slot).arg).write(event.arg);
        std::ptr::addr_of_mut!((*slot).name).write(event.name);
        std::ptr::addr_of_mut!((*slot).thread).write(event.thread);
        std::ptr::addr_of_mut!((*slot).aux).write(event.aux);
        std::ptr::addr_of_mut!((*slot).device).write(event.device);
        std::ptr::addr_of_mut!((*slot).kind).write(event.kind);
        std::ptr::addr_of_mut!((*slot).flags).write(event.flags);
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
    }
}

impl Consumer {
    /// Hands every published event to `sink`, oldest first; returns how many.
    pub(crate) fn drain(&mut self, mut sink: impl FnMut(Event)) -> usize {
        let head = self.shared.head.load(Ordering::Acquire);
        let available = head.wrapping_sub(self.tail);
        for _ in 0..available {
            let slot = &self.shared.slots[self.tail & self.shared.mask];
            // SAFETY: slot `tail` is in `[tail, head)`: the producer wrote it before its
            // `Release` store of `head`, which our `Acquire` load saw, and it will not write it
            // again until our `Release` store of a `tail` past it. Reading is race-free.
            let event = slot.with(|cell| unsafe { *cell });
            sink(event);
            self.tail = self.tail.wrapping_add(1);
        }
        self.shared.tail.store(self.tail, Ordering::Release);
        available
    }

    /// Events the producer dropped because the ring was full, so far.
    pub(crate) fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Whether the producer is gone. Check this *before* the final drain: a `true` here
    /// guarantees that the next drain sees every event the producer ever published.
    pub(crate) fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }

    /// The ring's capacity in events.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn capacity(&self) -> usize {
        self.shared.mask + 1
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        self.shared.abandoned.store(true, Ordering::Relaxed);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::profiler::event::EventKind;

    fn numbered(n: u64) -> Event {
        Event {
            arg: n,
            kind: EventKind::OpStart,
            ..Event::default()
        }
    }

    fn drain_args(consumer: &mut Consumer) -> Vec<u64> {
        let mut out = Vec::new();
        consumer.drain(|event| out.push(event.arg));
        out
    }

    #[test]
    fn capacity_rounds_up_to_a_power_of_two() {
        assert_eq!(ring(0).1.capacity(), 2);
        assert_eq!(ring(5).1.capacity(), 8);
        assert_eq!(ring(1024).1.capacity(), 1024);
    }

    #[test]
    fn events_come_out_in_order_across_wrap_around() {
        let (mut producer, mut consumer) = ring(4);
        let mut expected = Vec::new();
        for round in 0..10u64 {
            for k in 0..3 {
                assert!(producer.push(numbered(round * 3 + k)));
                expected.push(round * 3 + k);
            }
            assert_eq!(drain_args(&mut consumer), expected);
            expected.clear();
        }
        assert_eq!(consumer.dropped(), 0);
    }

    #[test]
    fn a_full_ring_drops_and_counts_then_recovers() {
        let (mut producer, mut consumer) = ring(4);
        let pushed: Vec<bool> = (0..7).map(|n| producer.push(numbered(n))).collect();
        assert_eq!(pushed, [true, true, true, true, false, false, false]);
        assert_eq!(consumer.dropped(), 3);
        assert_eq!(drain_args(&mut consumer), [0, 1, 2, 3]);
        assert!(producer.push(numbered(9)));
        assert_eq!(drain_args(&mut consumer), [9]);
    }

    #[test]
    fn closing_and_abandoning_are_seen_by_the_other_half() {
        let (mut producer, mut consumer) = ring(4);
        producer.push(numbered(1));
        assert!(!consumer.is_closed());
        drop(producer);
        assert!(consumer.is_closed());
        assert_eq!(drain_args(&mut consumer), [1]);

        let (producer, consumer) = ring(4);
        assert!(!producer.is_abandoned());
        drop(consumer);
        assert!(producer.is_abandoned());
    }

    #[test]
    fn a_concurrent_writer_and_reader_lose_nothing_unless_counted() {
        let (mut producer, mut consumer) = ring(64);
        const EVENTS: u64 = 200_000;
        let writer = std::thread::spawn(move || {
            for n in 0..EVENTS {
                producer.push(numbered(n));
            }
        });
        let mut seen = Vec::new();
        loop {
            let closed = consumer.is_closed();
            consumer.drain(|event| seen.push(event.arg));
            if closed {
                break;
            }
            std::thread::yield_now();
        }
        writer.join().unwrap();
        assert!(
            seen.windows(2).all(|pair| pair[0] < pair[1]),
            "out of order"
        );
        assert_eq!(seen.len() as u64 + consumer.dropped(), EVENTS);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Loom models of the ring: a writer thread against the collector, with capacities small
    //! enough that every interleaving of wrap-around and drops is explored.
    use super::*;
    use crate::profiler::event::EventKind;
    use crate::sync::thread;

    fn numbered(n: u64) -> Event {
        Event {
            arg: n,
            kind: EventKind::OpStart,
            ..Event::default()
        }
    }

    /// Drains until the producer is closed and a drain after that saw it closed.
    fn drain_to_the_end(consumer: &mut Consumer, seen: &mut Vec<u64>) {
        loop {
            let closed = consumer.is_closed();
            consumer.drain(|event| seen.push(event.arg));
            if closed {
                return;
            }
            thread::yield_now();
        }
    }

    fn assert_in_order_and_accounted(seen: &[u64], dropped: u64, pushed: u64) {
        assert!(seen.windows(2).all(|pair| pair[0] < pair[1]), "{seen:?}");
        assert!(seen.iter().all(|&n| n < pushed), "{seen:?}");
        assert_eq!(
            seen.len() as u64 + dropped,
            pushed,
            "seen {seen:?}, dropped {dropped}"
        );
    }

    /// One writer, one concurrent drain, then the final drain: every event is seen exactly
    /// once, in order, and the slot accesses never race (loom's cell tracking).
    #[test]
    fn loom_ring_writer_vs_collector() {
        loom::model(|| {
            let (mut producer, mut consumer) = ring(4);
            let writer = thread::spawn(move || {
                for n in 0..3 {
                    assert!(producer.push(numbered(n)), "4 slots hold 3 events");
                }
            });
            let mut seen = Vec::new();
            consumer.drain(|event| seen.push(event.arg));
            writer.join().unwrap();
            drain_to_the_end(&mut consumer, &mut seen);
            assert_eq!(seen, [0, 1, 2]);
            assert_eq!(consumer.dropped(), 0);
        });
    }

    /// Capacity 2, four events: the writer wraps around while the collector drains. Whatever
    /// the interleaving, events come out in order, and seen + dropped = pushed.
    #[test]
    fn loom_ring_wrap_around_with_concurrent_drains() {
        loom::model(|| {
            let (mut producer, mut consumer) = ring(2);
            let writer = thread::spawn(move || {
                for n in 0..4 {
                    producer.push(numbered(n));
                }
            });
            let mut seen = Vec::new();
            consumer.drain(|event| seen.push(event.arg));
            consumer.drain(|event| seen.push(event.arg));
            drain_to_the_end(&mut consumer, &mut seen);
            writer.join().unwrap();
            assert_in_order_and_accounted(&seen, consumer.dropped(), 4);
        });
    }

    /// A writer that overruns a ring nobody drains yet: the first `capacity` events stay, the
    /// rest are dropped and counted, and a drain racing with the last pushes loses nothing it
    /// does not count.
    #[test]
    fn loom_ring_drops_counted() {
        loom::model(|| {
            let (mut producer, mut consumer) = ring(2);
            let writer = thread::spawn(move || {
                let accepted: u64 = (0..3).map(|n| u64::from(producer.push(numbered(n)))).sum();
                accepted
            });
            let mut seen = Vec::new();
            consumer.drain(|event| seen.push(event.arg));
            let accepted = writer.join().unwrap();
            drain_to_the_end(&mut consumer, &mut seen);
            assert_in_order_and_accounted(&seen, consumer.dropped(), 3);
            assert_eq!(seen.len() as u64, accepted);
            assert!(accepted >= 2, "the first two always fit");
        });
    }
}
