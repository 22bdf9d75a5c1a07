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
//!   says full or at a check point of the fill (below), so a push normally touches no cache
//!   line the consumer writes. Still full: the
//!   event is *dropped* and `dropped` goes up by one. Otherwise it writes slot `head` and then
//!   publishes it by storing `head + 1` with `Release`.
//! - **backed up** (the owning thread, after a push): whether the ring is half full or more,
//!   so the recording side can hand the collector a core before the ring fills (the
//!   collector's [back-pressure](super::collector)). It re-reads `tail` only at check points:
//!   when `head` reaches half a ring past the `tail` last read, every 1/64th of a ring while
//!   the fill stays at half or more, and after a drop; otherwise it is one comparison.
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
//! A push is a few loads, one 32-byte copy (four 8-byte stores) and one store: no lock, no CAS
//! loop, no waiting for the consumer. A full ring is the consumer's problem, not the producer's: the event is
//! dropped and counted. `dropped` has a single writer (the producer), so it is bumped with a
//! relaxed load and store; the collector sums every ring's count into the "dropped events"
//! figure that users see, so a loss is never silent.
//!
//! # Memory: a ring's stores should not miss
//! A default ring is 2 MiB, larger than a core's L2, so the producer's stores walk cache lines
//! the core does not hold: each first store into a line is a read-for-ownership miss, the
//! stores behind it wait in the store buffer, and the next `lock`ed instruction of the code
//! being recorded (the engine completes an op with several) waits until they have all
//! drained. Two things keep that off the recording thread:
//! - Each push issues `prefetchw` for the line [`CLAIM_AHEAD`] slots ahead, so the line is
//!   owned by the time the stores reach it (a hint: no fault, no observable access).
//! - A fresh ring's pages are first touched by its first pass of pushes (a page fault per
//!   4 KiB, hundreds of them per ring, on a thread that is recording).
//!   So when both halves of a ring are gone its slot array is kept (8 MiB of arrays at most, the oldest
//!   dropped first) and a new
//!   ring of the same capacity takes it: a thread that comes and goes (a resized pool, an
//!   engine per benchmark rep) gets memory that is already mapped. A reused array still holds
//!   old events, but only slots in `[tail, head)` are ever read, and a new ring starts empty.
//!
//! `enginetop bench profiler` measures the effect (the figures: `bench/README.md`).
//!
//! # End of life
//! When the owning thread exits, its [`Producer`] is dropped and marks the ring `closed`
//! (`Release`, after its last `head` store). The collector checks `closed` (`Acquire`) *before*
//! its final drain, so that drain sees every event, and then lets the ring go; the last of the
//! two halves to go hands the slot array to the spares.
//!
//! `unsafe` in this module: the slot accesses (justified by the protocol above), the
//! `prefetchw` hint, and the `Sync` impl that lets the two halves share the slots.
#![allow(unsafe_code)] // the one module of the profiler that needs it; see above

use crossbeam_utils::CachePadded;

use super::event::Event;
use crate::sync::{Arc, AtomicBool, AtomicU64, AtomicUsize, Ordering, UnsafeCell};

/// A ring's slot array.
type Slots = Box<[UnsafeCell<Event>]>;

/// What the two halves share.
struct Shared {
    slots: Slots,
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
    /// The `head` at which [`Producer::is_backed_up`] next reads the ring's fill.
    check_at: usize,
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
    ring_on(spare::take(capacity).unwrap_or_else(|| fresh_slots(capacity)))
}

/// An empty ring on `slots` (a power-of-two count, fresh or a gone ring's: whatever they
/// hold is never read, as no slot outside `[tail, head)` is).
fn ring_on(slots: Slots) -> (Producer, Consumer) {
    debug_assert!(slots.len().is_power_of_two());
    let capacity = slots.len();
    let mask = capacity - 1;
    let shared = Arc::new(Shared {
        slots,
        mask,
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
        check_at: capacity / 2,
    };
    (producer, Consumer { shared, tail: 0 })
}

/// `capacity` new slots (each page is touched for the first time here or at its first push).
fn fresh_slots(capacity: usize) -> Slots {
    (0..capacity)
        .map(|_| UnsafeCell::new(Event::default()))
        .collect()
}

impl Drop for Shared {
    /// Both halves are gone: the slot array goes to the spares for the next ring.
    fn drop(&mut self) {
        spare::keep(std::mem::take(&mut self.slots));
    }
}

/// Slot arrays of rings that are gone, for the next rings of the same capacity (see the module
/// docs). Not under loom: a loom cell lives only as long as the model that made it.
#[cfg(not(loom))]
mod spare {
    use super::Slots;
    use crate::sync::SpinMutex;

    /// Bytes of spare arrays kept at most: four default rings (2 MiB each).
    const KEPT_BYTES: usize = 8 << 20;

    static SPARES: SpinMutex<SparePool> = SpinMutex::new(SparePool::new(KEPT_BYTES));

    /// A spare array of exactly `capacity` slots, if one is kept.
    pub(super) fn take(capacity: usize) -> Option<Slots> {
        SPARES.lock().take(capacity)
    }

    /// Keeps `slots` for a later ring (see [`SparePool::keep`]).
    pub(super) fn keep(slots: Slots) {
        SPARES.lock().keep(slots);
    }

    /// Arrays kept, oldest first, within a byte budget.
    pub(super) struct SparePool {
        arrays: Vec<Slots>,
        budget_bytes: usize,
    }

    impl SparePool {
        pub(super) const fn new(budget_bytes: usize) -> Self {
            SparePool {
                arrays: Vec::new(),
                budget_bytes,
            }
        }

        /// Removes and returns a kept array of exactly `capacity` slots.
        pub(super) fn take(&mut self, capacity: usize) -> Option<Slots> {
            let found = self
                .arrays
                .iter()
                .position(|slots| slots.len() == capacity)?;
            Some(self.arrays.remove(found))
        }

        /// Keeps `slots`, dropping the oldest arrays to stay within the budget; an array larger
        /// than the whole budget (an unusually big ring) is not kept.
        pub(super) fn keep(&mut self, slots: Slots) {
            let bytes = std::mem::size_of_val(&*slots);
            if slots.is_empty() || bytes > self.budget_bytes {
                return;
            }
            while self.kept_bytes() + bytes > self.budget_bytes {
                self.arrays.remove(0);
            }
            self.arrays.push(slots);
        }

        fn kept_bytes(&self) -> usize {
            self.arrays
                .iter()
                .map(|slots| std::mem::size_of_val(&**slots))
                .sum()
        }

        #[cfg(test)]
        pub(super) fn capacities(&self) -> Vec<usize> {
            self.arrays.iter().map(|slots| slots.len()).collect()
        }
    }
}

#[cfg(loom)]
mod spare {
    use super::Slots;

    pub(super) fn take(_capacity: usize) -> Option<Slots> {
        None
    }

    pub(super) fn keep(_slots: Slots) {}
}

/// Slots ahead of the write position whose cache line a push claims for writing: 8 lines of
/// two events, a few hundred nanoseconds of recording ahead, enough for a miss to memory.
#[cfg(all(target_arch = "x86_64", not(loom)))]
const CLAIM_AHEAD: usize = 16;

/// A backed-up ring's fill is read again every `capacity / BACKED_UP_CHECK_EVERY` pushes.
const BACKED_UP_CHECK_EVERY: usize = 64;

impl Producer {
    /// Appends `event`; returns `false` (and counts a drop) if the ring is full. Never blocks.
    #[inline]
    pub(crate) fn push(&mut self, event: Event) -> bool {
        let capacity = self.shared.mask + 1;
        if self.head.wrapping_sub(self.cached_tail) >= capacity {
            self.cached_tail = self.shared.tail.load(Ordering::Acquire);
            if self.head.wrapping_sub(self.cached_tail) >= capacity {
                self.count_drop();
                self.check_at = self.head; // backed up: say so at the next check
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
        self.claim_line_ahead();
        true
    }

    /// Whether the ring is half full or more, read at check points only: when the producer's
    /// `head` reaches the fill of half the ring since the `tail` it last read, then every
    /// [`BACKED_UP_CHECK_EVERY`]th of the ring while it stays at half or more, and after
    /// every drop. Between check points it costs one comparison.
    #[inline(always)]
    pub(crate) fn is_backed_up(&mut self) -> bool {
        self.head == self.check_at && self.read_fill()
    }

    /// Reads `tail` and sets the next check point (see [`Producer::is_backed_up`]).
    #[cold]
    #[inline(never)]
    fn read_fill(&mut self) -> bool {
        self.cached_tail = self.shared.tail.load(Ordering::Acquire);
        let capacity = self.shared.mask + 1;
        let half = capacity / 2;
        if self.head.wrapping_sub(self.cached_tail) >= half {
            let every = (capacity / BACKED_UP_CHECK_EVERY).max(1);
            self.check_at = self.head.wrapping_add(every);
            true
        } else {
            self.check_at = self.cached_tail.wrapping_add(half);
            false
        }
    }

    /// Asks the CPU to own, for writing, the cache line `CLAIM_AHEAD` slots ahead
    /// (`prefetchw`), so that the store into it finds the line already exclusive instead of
    /// missing (a read-for-ownership) and holding up the stores behind it. A hint only: no
    /// architectural read or write, a no-op off x86-64 and under loom.
    #[inline(always)]
    fn claim_line_ahead(&self) {
        #[cfg(all(target_arch = "x86_64", not(loom)))]
        {
            let ahead = self.head.wrapping_add(CLAIM_AHEAD) & self.shared.mask;
            let line = self.shared.slots.as_ptr().wrapping_add(ahead);
            // SAFETY: `prefetchw` is a hint: it never faults, reads or writes no data the
            // program can observe, and touches no register but its address operand (a NOP on
            // x86-64 CPUs without it). `line` is in the slot array anyway (index masked). A
            // slot still being read by the consumer only loses its line for a moment: the
            // consumer's read misses, it never sees other data. (`readonly`, not `nomem`: the
            // instruction names memory, even though it changes none.)
            unsafe {
                std::arch::asm!(
                    "prefetchw [{line}]",
                    line = in(reg) line,
                    options(nostack, preserves_flags, readonly),
                );
            }
        }
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

/// Writes `event` into `slot` as four 8-byte stores.
///
/// A recording site assembles its event in registers or on the stack with narrow stores (a
/// `u16` here, a `u8` there). Copying it whole would load 16 bytes at a time from those
/// narrow stores, which the CPU cannot forward from its store buffer (each such load stalls
/// until the stores retire). Field by field, it is eight
/// stores into the ring. Packed here into the event's four 8-byte words, it is four: every
/// store sits in the store buffer until its line is written, and a `lock`ed instruction of the
/// engine after a recording waits for all of them, so fewer is cheaper.
///
/// # Safety
/// `slot` must be valid for writes and accessed by no other thread until the write is
/// published.
#[inline(always)]
unsafe fn write_fields(slot: *mut Event, event: &Event) {
    let words = slot.cast::<u64>();
    // SAFETY: the caller guarantees `slot` is valid and exclusively ours. `Event` is
    // `repr(C)`, 32 bytes, 8-aligned, without padding, its words laid out as `event_words`
    // packs them (checked below), so four `u64` writes fill it with `event`'s fields, each a
    // valid value of its type (`kind` is copied from a valid `EventKind`).
    unsafe {
        for (index, word) in event_words(event).into_iter().enumerate() {
            words.add(index).write(word);
        }
    }
}

/// `event`'s four 8-byte words, as `repr(C)` lays them out in memory (little-endian: the
/// field at the lower address in the low bits).
#[inline(always)]
fn event_words(event: &Event) -> [u64; 4] {
    let names = u64::from(event.name.id()) | u64::from(event.thread.id()) << 32;
    let small = u64::from(event.aux)
        | u64::from(event.device.id()) << 32
        | u64::from(event.kind as u8) << 48
        | u64::from(event.flags) << 56;
    [event.ts_ns, event.arg, names, small]
}

#[cfg(not(target_endian = "little"))]
compile_error!("the ring packs events as little-endian words (write_fields)");

// The layout `event_words` packs for: any change to `Event` must update it.
const _: () = {
    assert!(std::mem::size_of::<Event>() == 32 && std::mem::align_of::<Event>() == 8);
    assert!(std::mem::offset_of!(Event, ts_ns) == 0 && std::mem::offset_of!(Event, arg) == 8);
    assert!(std::mem::offset_of!(Event, name) == 16);
    assert!(std::mem::offset_of!(Event, thread) == 20);
    assert!(std::mem::offset_of!(Event, aux) == 24);
    assert!(std::mem::offset_of!(Event, device) == 28);
    assert!(std::mem::offset_of!(Event, kind) == 30);
    assert!(std::mem::offset_of!(Event, flags) == 31);
};

impl Drop for Producer {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
    }
}

impl Consumer {
    /// Appends every published event to `out`, oldest first; returns how many.
    ///
    /// In bulk: `out` grows once, and the published slots are read as (at most) two
    /// contiguous runs, before and after the wrap-around, with no per-event index masking or
    /// capacity check.
    pub(crate) fn drain_into(&mut self, out: &mut Vec<Event>) -> usize {
        let head = self.shared.head.load(Ordering::Acquire);
        let available = head.wrapping_sub(self.tail);
        let start = self.tail & self.shared.mask;
        let before_wrap = available.min(self.shared.slots.len() - start);
        let runs = [
            &self.shared.slots[start..start + before_wrap],
            &self.shared.slots[..available - before_wrap],
        ];
        out.reserve(available);
        for run in runs {
            // SAFETY: every slot of both runs is in `[tail, head)`: the producer wrote it
            // before its `Release` store of `head`, which our `Acquire` load saw, and it will
            // not write it again until our `Release` store of a `tail` past it. Reading is
            // race-free.
            out.extend(run.iter().map(|slot| slot.with(|cell| unsafe { *cell })));
        }
        self.tail = head;
        self.shared.tail.store(self.tail, Ordering::Release);
        available
    }

    /// Hands every published event to `sink`, oldest first; returns how many.
    #[cfg(test)]
    pub(crate) fn drain(&mut self, mut sink: impl FnMut(Event)) -> usize {
        let mut events = Vec::new();
        let drained = self.drain_into(&mut events);
        events.into_iter().for_each(&mut sink);
        drained
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
    use crate::profiler::ThreadId;

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
    fn a_ring_is_backed_up_from_half_full_until_drained_below_half() {
        let (mut producer, mut consumer) = ring(256);
        let backed_up: Vec<bool> = (0..256)
            .map(|n| {
                producer.push(numbered(n));
                producer.is_backed_up()
            })
            .collect();
        // Half full at the 128th push, then every 4th push (256 / 64) while it stays so.
        let said: Vec<usize> = (0..256).filter(|&n| backed_up[n]).collect();
        let expected: Vec<usize> = (127..256).step_by(4).collect();
        assert_eq!(said, expected);
        // Full: every drop says so.
        assert!(!producer.push(numbered(256)));
        assert!(producer.is_backed_up());
        assert!(!producer.push(numbered(257)));
        assert!(producer.is_backed_up());
        assert_eq!(drain_args(&mut consumer).len(), 256);
        // Drained: the next check reads the fill and finds it low; none till half again.
        let after: Vec<bool> = (0..127)
            .map(|n| {
                producer.push(numbered(n));
                producer.is_backed_up()
            })
            .collect();
        assert!(after.iter().all(|&backed| !backed), "{after:?}");
        producer.push(numbered(127));
        assert!(producer.is_backed_up());
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
    fn every_field_survives_the_packed_write() {
        let (mut producer, mut consumer) = ring(4);
        let event = Event {
            ts_ns: 0x0102_0304_0506_0708,
            arg: 0x1112_1314_1516_1718,
            name: crate::engine::OpName::from_raw(0x2122_2324),
            thread: ThreadId::from_raw(0x4142_4344),
            aux: 0x3132_3334,
            device: crate::profiler::DeviceId::from_raw(0x5152),
            kind: EventKind::StreamEnd,
            flags: 0xa5,
        };
        producer.push(event);
        let mut out = Vec::new();
        consumer.drain(|event| out.push(event));
        assert_eq!(out, [event]);
    }

    #[test]
    fn a_ring_on_a_used_array_starts_empty() {
        let used: Slots = (0..8).map(|n| UnsafeCell::new(numbered(100 + n))).collect();
        let (mut producer, mut consumer) = ring_on(used);
        assert!(
            drain_args(&mut consumer).is_empty(),
            "old events never come back"
        );
        producer.push(numbered(7));
        assert_eq!(drain_args(&mut consumer), [7]);
    }

    #[test]
    fn the_spare_pool_hands_back_exact_capacities_within_its_byte_budget() {
        use super::spare::SparePool;
        let event_bytes = std::mem::size_of::<Event>();
        let array = |len: usize| -> Slots { fresh_slots(len) };
        let mut pool = SparePool::new(12 * event_bytes);
        pool.keep(array(4));
        pool.keep(array(8));
        assert_eq!(pool.capacities(), [4, 8], "12 slots fit the budget");
        assert!(pool.take(2).is_none(), "no array of 2 slots is kept");
        pool.keep(array(2));
        assert_eq!(pool.capacities(), [8, 2], "the oldest (4) made room");
        pool.keep(array(16));
        assert_eq!(
            pool.capacities(),
            [8, 2],
            "larger than the whole budget: not kept"
        );
        assert_eq!(pool.take(8).map(|slots| slots.len()), Some(8));
        assert_eq!(pool.capacities(), [2]);
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
