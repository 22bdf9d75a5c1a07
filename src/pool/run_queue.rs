//! Eigen's `RunQueue`: a bounded work deque with a lock-free owner end and a locked back end.
//!
//! # Who may call what
//! One thread, the queue's *owner* (the worker it belongs to), pushes and pops at the *front*
//! with [`RunQueue::push_front`] (or [`RunQueue::push_front_with`], which has the value written
//! straight into its claimed slot) and [`RunQueue::pop_front`]: no lock, two atomic stores and
//! one compare-and-swap each. Any thread pushes and pops at the *back* ([`RunQueue::push_back`],
//! [`RunQueue::pop_back`], [`RunQueue::pop_back_half`]) under the queue's mutex. Because back
//! operations are serialized, at most two threads ever touch a slot at once: the owner and one
//! back operator. [`RunQueue::size`] and [`RunQueue::is_empty`] may be called by anyone, any
//! time, and only read.
//!
//! # Slots
//! The queue is a ring of `capacity` slots. Each slot has a state byte and room for one value:
//! - `EMPTY`: no value; a pusher may claim it.
//! - `BUSY`: one thread has claimed it and is writing or moving out its value; nobody else
//!   touches the value.
//! - `READY`: holds a value; a popper may claim it.
//!
//! A pusher claims a slot with a compare-and-swap `EMPTY -> BUSY` (acquire), writes the value
//! and stores `READY` (release). A popper claims with `READY -> BUSY` (acquire), moves the value
//! out and stores `EMPTY` (release). The compare-and-swap makes the claim exclusive; the
//! release store publishes the value (or its removal) to the next claimer's acquire. The owner
//! and a back operator meet at one slot only when the queue is nearly empty or nearly full:
//! both may try to claim it, the compare-and-swap picks one winner, and the loser reports
//! "empty" (a pop) or "full" (a push).
//!
//! The occupied slots form one contiguous run (it may wrap around the ring): the owner grows
//! and shrinks it at the front, the back operators at the back. A failed claim means "empty"
//! for a pop and "full" for a push, so neither end reads the other end's index.
//!
//! # Index encoding
//! `front` is one past the newest front element, `back` is the oldest back element. In both,
//! the low `log2(capacity) + 1` bits hold the position modulo `2 * capacity`, so a full queue
//! (`front - back == capacity`) and an empty one (`front == back`) look different. The bits above
//! are a modification counter, bumped by the operations that move an index upward (push at the
//! front, pop at the back); the position moves down without a bump. An index value therefore
//! never recurs (the counter would have to wrap around a 64-bit word; on 32-bit targets, at
//! least 2^15 pushes would have to happen during one snapshot).
//!
//! # Why `size()` never reports a non-empty queue as empty
//! The thread pool's sleep protocol trusts `is_empty()`: a worker that sees every queue empty
//! goes to sleep, so a false "empty" strands a task. Three rules prevent it:
//! 1. *Count early, uncount late.* A push stores its new index *before* the slot turns `READY`;
//!    a pop stores its new index only *after* the slot is `EMPTY`. So `front - back` is never
//!    smaller than the number of `READY` slots. It can exceed it, even reach `capacity + 1`
//!    for a moment (the owner refills the slot a back popper just emptied before the popper
//!    stores `back`), which `size()` clamps to `capacity`.
//! 2. *A consistent snapshot.* Loading two atomics is not one atomic read, so `size()` loads
//!    `front`, then `back`, then `front` again, and retries until both `front` loads agree.
//!    Since index values never recur, equal loads mean `front` did not change while `back` was
//!    read: the pair held at one instant.
//! 3. *Release stores, acquire loads* (as in Eigen's 2026 fix: relaxed index stores let
//!    ARM64 reorder them). A thread that pushes at one end and then pops at the other (the
//!    owner in Eigen's empty test) makes its stores in that order; a reader that sees the pop's
//!    index also sees the earlier push's index, so it cannot pair the post-pop front with a
//!    pre-push back and compute zero. Conversely, a reader that sees a new `back` re-reads
//!    `front` after that acquire, sees every `front` store that preceded it, and retries.
//!
//! # Why nothing is lost or duplicated
//! A value is written only into a slot its pusher claimed from `EMPTY`, and moved out only by
//! the one popper whose claim from `READY` succeeded; it stays `READY` in between. A popper
//! that loses a race returns nothing and takes nothing; a pusher that finds its slot not
//! `EMPTY` hands the value back (`Err(value)`), so the caller decides (the pool runs it
//! inline). Dropping the queue drops every value still `READY`.
//!
//! # `pop_back` waits for the lock (as in Eigen's 2019 fix)
//! A `pop_back` that only tried the mutex and reported "nothing" when another thread held it
//! would let a worker woken for a task miss it and go back to sleep, having eaten the
//! wake-up: the pool would deadlock. So it waits for the mutex. It still returns at once,
//! without the lock, when the queue reads as empty: by the rule above that reading is never
//! false.
//!
//! `pop_back_half` takes, under one lock, up to half the queue (rounded up) from the back,
//! one claimed slot at a time, and stops early at the first slot it cannot claim (the owner
//! popping the same element). It appends them in queue order, the back-most last, as Eigen
//! does. (Eigen claims only the innermost slot and takes the ones behind it unclaimed; we
//! claim every slot, so each access is exclusive by the same rule as everywhere else.)

use std::fmt;
use std::mem::MaybeUninit;

use crossbeam_utils::CachePadded;

use super::task::write_checked;
use crate::sync::{AtomicU8, AtomicUsize, Mutex, MutexGuard, Ordering, UnsafeCell};

/// Slot state: no value, free to fill.
const EMPTY: u8 = 0;
/// Slot state: claimed by one thread that is writing or taking its value.
const BUSY: u8 = 1;
/// Slot state: holds a value, free to take.
const READY: u8 = 2;

/// The largest capacity: leaves at least half the index bits for the modification counter.
const MAX_CAPACITY: usize = 1 << (usize::BITS / 2);

/// One cell of the ring: a state byte guarding a possibly uninitialized value.
///
/// Aligned to a cache line: a task (40 bytes) and its state byte then always share one line
/// and no line holds parts of two slots. A task handed between threads (an outside push that
/// a worker takes, a steal) moves one line instead of sometimes two, and the owner working at
/// one slot never contends with a back operator at the neighbouring one.
#[repr(align(64))]
struct Slot<T> {
    state: AtomicU8,
    value: UnsafeCell<MaybeUninit<T>>,
}

impl<T> Slot<T> {
    fn new() -> Self {
        Self {
            state: AtomicU8::new(EMPTY),
            value: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// Moves the slot from `expected` (`EMPTY` or `READY`) to `BUSY`; true if this thread won
    /// it. The plain load first spares a claimer that would lose from taking the cache line
    /// for writing.
    fn try_claim(&self, expected: u8) -> bool {
        self.state.load(Ordering::Relaxed) == expected
            && self
                .state
                .compare_exchange(expected, BUSY, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }

    /// Writes `value` and publishes the slot as `READY`.
    ///
    /// # Safety
    /// The caller claimed this slot from `EMPTY` with [`Slot::try_claim`] and has not released
    /// it since.
    unsafe fn fill(&self, value: T) {
        // SAFETY: the caller's claim makes this thread the only one touching the value, and
        // the claim's acquire ordered the previous owner's accesses before this write.
        self.value.with_mut(|cell| unsafe { (*cell).write(value) });
        self.state.store(READY, Ordering::Release);
    }

    /// Lets `write` initialize the value in place and publishes the slot as `READY`.
    ///
    /// # Safety
    /// As for [`Slot::fill`].
    unsafe fn fill_with(&self, write: impl for<'s> FnOnce(&'s mut MaybeUninit<T>) -> &'s mut T) {
        // SAFETY: as in `fill`, the claim makes this thread the only one touching the value.
        // `write_checked` returns only once `write` initialized it (if it panics, the slot
        // stays BUSY, uninitialized, and is never read or dropped).
        self.value
            .with_mut(|cell| write_checked(unsafe { &mut *cell }, write));
        self.state.store(READY, Ordering::Release);
    }

    /// Moves the value out and publishes the slot as `EMPTY`.
    ///
    /// # Safety
    /// The caller claimed this slot from `READY` with [`Slot::try_claim`] and has not released
    /// it since.
    unsafe fn take(&self) -> T {
        // SAFETY: a slot claimed from READY holds a value written by `fill`, whose release
        // store the claim acquired; the claim makes this thread the only reader, and the
        // EMPTY store below ensures nobody reads this value again.
        let value = self
            .value
            .with_mut(|cell| unsafe { (*cell).assume_init_read() });
        self.state.store(EMPTY, Ordering::Release);
        value
    }
}

/// Eigen's work deque: the owner pushes and pops at the front without locks, any thread
/// pushes and steals at the back under a mutex. Bounded; a push to a full queue hands the
/// value back. See the module docs for the algorithm.
///
/// ```
/// use enginetop::pool::run_queue::RunQueue;
/// let queue = RunQueue::new(4);
/// // SAFETY: this thread is the queue's only owner.
/// unsafe { queue.push_front(1).unwrap() };
/// queue.push_back(2).unwrap();
/// assert_eq!(queue.size(), 2);
/// assert_eq!(queue.pop_back(), Some(2));
/// // SAFETY: as above.
/// assert_eq!(unsafe { queue.pop_front() }, Some(1));
/// assert!(queue.is_empty());
/// ```
pub struct RunQueue<T> {
    /// One past the newest front element; written only by the owner, on its own line.
    front: CachePadded<AtomicUsize>,
    /// The back operators' line: `back` and the lock that serializes its writers.
    back_end: CachePadded<BackEnd>,
    /// Never written after construction; the padding of the fields above keeps it off both
    /// written lines, so reading it never misses because of the other end's traffic.
    slots: Box<[Slot<T>]>,
}

/// What the back operators write, on one cache line: a push or steal at the back takes the
/// lock and moves `back`, so keeping both together makes it one line transfer instead of two
/// (Eigen's layout has the same property: its mutex and indices share a line).
struct BackEnd {
    /// The back element (first slot of the occupied run); written only under `back_ops`.
    back: AtomicUsize,
    /// Serializes the back operations.
    back_ops: Mutex<()>,
}

// SAFETY: values only move between threads (never shared by reference), and every access to
// a slot's value is made exclusive by the slot's state protocol (module docs), so sharing the
// queue is sound whenever `T` may be sent.
unsafe impl<T: Send> Sync for RunQueue<T> {}

impl<T> RunQueue<T> {
    /// An empty queue of `capacity` slots.
    ///
    /// # Panics
    /// If `capacity` is not a power of two of at least 2 (and at most `2^(usize::BITS / 2)`).
    pub fn new(capacity: usize) -> Self {
        assert!(
            capacity >= 2 && capacity.is_power_of_two() && capacity <= MAX_CAPACITY,
            "RunQueue capacity must be a power of two in 2..={MAX_CAPACITY}, got {capacity}"
        );
        Self {
            front: CachePadded::new(AtomicUsize::new(0)),
            back_end: CachePadded::new(BackEnd {
                back: AtomicUsize::new(0),
                back_ops: Mutex::new(()),
            }),
            slots: (0..capacity).map(|_| Slot::new()).collect(),
        }
    }

    /// Pushes `value` at the front; hands it back when the queue is full.
    ///
    /// # Safety
    /// Only one thread at a time may call `push_front`/`pop_front`: the queue's owner.
    /// Ownership may move to another thread only with a happens-before edge (e.g. a mutex or
    /// a thread join) between the old owner's last call and the new owner's first.
    pub unsafe fn push_front(&self, value: T) -> Result<(), T> {
        let mut value = Some(value);
        // SAFETY: the caller is the owner (this function's contract).
        let pushed =
            unsafe { self.push_front_with(|slot| slot.write(value.take().expect("written once"))) };
        match pushed {
            Ok(()) => Ok(()),
            Err(_unwritten) => Err(value.take().expect("a refused push wrote nothing")),
        }
    }

    /// Like [`push_front`](Self::push_front), but the value is written by `write` straight
    /// into its slot once the slot is claimed (no copy of it on the way). When the queue is
    /// full `write` is not called and comes back as `Err`.
    ///
    /// # Safety
    /// As for [`push_front`](Self::push_front): owner thread only.
    pub unsafe fn push_front_with<W>(&self, write: W) -> Result<(), W>
    where
        W: for<'s> FnOnce(&'s mut MaybeUninit<T>) -> &'s mut T,
    {
        let front = self.front.load(Ordering::Relaxed); // only the owner writes `front`
        let slot = self.slot_at(front);
        if !slot.try_claim(EMPTY) {
            return Err(write);
        }
        self.front
            .store(self.index_after_push_front(front), Ordering::Release);
        // SAFETY: `try_claim(EMPTY)` just succeeded on this slot.
        unsafe { slot.fill_with(write) };
        Ok(())
    }

    /// Pops the newest front element.
    ///
    /// # Safety
    /// As for [`push_front`](Self::push_front): owner thread only.
    pub unsafe fn pop_front(&self) -> Option<T> {
        let front = self.front.load(Ordering::Relaxed); // only the owner writes `front`
        let slot = self.slot_at(front.wrapping_sub(1));
        if !slot.try_claim(READY) {
            return None;
        }
        // SAFETY: `try_claim(READY)` just succeeded on this slot.
        let value = unsafe { slot.take() };
        self.front
            .store(self.index_after_pop_front(front), Ordering::Release);
        Some(value)
    }

    /// Pushes `value` at the back, from any thread; hands it back when the queue is full.
    pub fn push_back(&self, value: T) -> Result<(), T> {
        let _back_ops = self.back_end.back_ops.lock();
        let back = self.back_end.back.load(Ordering::Relaxed); // writers of `back` hold the lock
        let slot = self.slot_at(back.wrapping_sub(1));
        if !slot.try_claim(EMPTY) {
            return Err(value);
        }
        self.back_end
            .back
            .store(self.index_after_push_back(back), Ordering::Release);
        // SAFETY: `try_claim(EMPTY)` just succeeded on this slot.
        unsafe { slot.fill(value) };
        Ok(())
    }

    /// Pops the element at the back, from any thread. Waits for the lock (never `try_lock`:
    /// see the module docs); returns at once when the queue reads as empty.
    pub fn pop_back(&self) -> Option<T> {
        if self.is_empty() {
            return None;
        }
        let back_ops = self.back_end.back_ops.lock();
        self.pop_back_locked(&back_ops)
    }

    /// Pops up to half the elements (rounded up) from the back, from any thread; appends them
    /// to `out` in queue order (the back-most last) and returns how many.
    pub fn pop_back_half(&self, out: &mut Vec<T>) -> usize {
        if self.is_empty() {
            return 0;
        }
        let back_ops = self.back_end.back_ops.lock();
        let wanted = self.size().div_ceil(2);
        let first_new = out.len();
        out.reserve(wanted);
        while out.len() - first_new < wanted {
            match self.pop_back_locked(&back_ops) {
                Some(value) => out.push(value),
                None => break, // the owner took the rest
            }
        }
        out[first_new..].reverse();
        out.len() - first_new
    }

    /// How many elements the queue holds. Any thread; never 0 for a non-empty queue, and at
    /// most [`capacity`](Self::capacity). Under concurrent changes it may over-count by the
    /// operations in flight.
    pub fn size(&self) -> usize {
        let (front, back) = self.index_snapshot();
        let distance = front.wrapping_sub(back) & self.position_mask();
        distance.min(self.capacity())
    }

    /// Whether the queue holds nothing. Any thread; never true for a non-empty queue.
    pub fn is_empty(&self) -> bool {
        let (front, back) = self.index_snapshot();
        (front ^ back) & self.position_mask() == 0
    }

    /// The most elements the queue holds.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Pops the back element; `_back_ops` proves the caller holds the back lock.
    fn pop_back_locked(&self, _back_ops: &MutexGuard<'_, ()>) -> Option<T> {
        let back = self.back_end.back.load(Ordering::Relaxed); // writers of `back` hold the lock
        let slot = self.slot_at(back);
        if !slot.try_claim(READY) {
            return None;
        }
        // SAFETY: `try_claim(READY)` just succeeded on this slot.
        let value = unsafe { slot.take() };
        self.back_end
            .back
            .store(self.index_after_pop_back(back), Ordering::Release);
        Some(value)
    }

    /// `front` and `back` as they were at one instant (module docs, rule 2).
    fn index_snapshot(&self) -> (usize, usize) {
        let mut front = self.front.load(Ordering::Acquire);
        loop {
            let back = self.back_end.back.load(Ordering::Acquire);
            let front_again = self.front.load(Ordering::Acquire);
            if front_again == front {
                return (front, back);
            }
            front = front_again;
        }
    }

    fn slot_at(&self, index: usize) -> &Slot<T> {
        &self.slots[index & (self.capacity() - 1)]
    }

    /// The index bits that hold the position (modulo twice the capacity).
    fn position_mask(&self) -> usize {
        2 * self.capacity() - 1
    }

    /// One step of the modification counter above the position bits.
    fn counter_step(&self) -> usize {
        2 * self.capacity()
    }

    /// Position one down, counter unchanged.
    fn position_down(&self, index: usize) -> usize {
        let position_mask = self.position_mask();
        (index.wrapping_sub(1) & position_mask) | (index & !position_mask)
    }

    /// Position one up, counter bumped.
    fn position_up_and_count(&self, index: usize) -> usize {
        index.wrapping_add(1 + self.counter_step())
    }

    fn index_after_push_front(&self, front: usize) -> usize {
        self.position_up_and_count(front)
    }

    fn index_after_pop_front(&self, front: usize) -> usize {
        self.position_down(front)
    }

    fn index_after_push_back(&self, back: usize) -> usize {
        self.position_down(back)
    }

    fn index_after_pop_back(&self, back: usize) -> usize {
        self.position_up_and_count(back)
    }
}

impl<T> Drop for RunQueue<T> {
    fn drop(&mut self) {
        for slot in self.slots.iter() {
            if slot.try_claim(READY) {
                // SAFETY: `try_claim(READY)` just succeeded on this slot.
                drop(unsafe { slot.take() });
            }
        }
    }
}

impl<T> fmt::Debug for RunQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunQueue")
            .field("capacity", &self.capacity())
            .field("size", &self.size())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::collections::VecDeque;
    use std::rc::Rc;
    use std::time::{Duration, Instant};

    use super::RunQueue;
    use crate::sync::thread;

    /// Owner-side push; the tests call it from the thread that owns `queue` at the time.
    fn push_front<T>(queue: &RunQueue<T>, value: T) -> Result<(), T> {
        // SAFETY: each test calls the owner operations from one thread only.
        unsafe { queue.push_front(value) }
    }

    /// Owner-side pop, like [`push_front`].
    fn pop_front<T>(queue: &RunQueue<T>) -> Option<T> {
        // SAFETY: each test calls the owner operations from one thread only.
        unsafe { queue.pop_front() }
    }

    /// The in-place push writes only when it gets a slot, and what it writes comes out.
    #[test]
    fn push_front_with_writes_in_place_only_when_there_is_room() {
        let queue = RunQueue::new(2);
        let mut writes = 0;
        for value in [1, 2] {
            // SAFETY: this thread is the queue's only owner.
            let pushed = unsafe {
                queue.push_front_with(|slot| {
                    writes += 1;
                    slot.write(value)
                })
            };
            assert!(pushed.is_ok());
        }
        // SAFETY: as above.
        let refused = unsafe { queue.push_front_with(|slot| slot.write(3)) };
        assert!(refused.is_err(), "a full queue refuses without writing");
        assert_eq!(writes, 2);
        assert_eq!(pop_front(&queue), Some(2));
        assert_eq!(queue.pop_back(), Some(1));
        assert!(queue.is_empty());
    }

    /// Eigen's `test_basic_runqueue`.
    #[test]
    fn basic() {
        let queue = RunQueue::new(4);
        let mut stolen = Vec::new();
        assert!(queue.is_empty());
        assert_eq!(queue.size(), 0);
        assert_eq!(pop_front(&queue), None);
        assert_eq!(queue.pop_back(), None);
        assert_eq!(queue.pop_back_half(&mut stolen), 0);
        assert!(stolen.is_empty());

        // One in, one out at the front.
        assert_eq!(push_front(&queue, 1), Ok(()));
        assert_eq!(queue.size(), 1);
        assert_eq!(pop_front(&queue), Some(1));
        assert_eq!(queue.size(), 0);

        // Fill from the front until it refuses; LIFO at the front.
        for (value, size) in (2..=5).zip(1..) {
            assert_eq!(push_front(&queue, value), Ok(()));
            assert_eq!(queue.size(), size);
        }
        assert_eq!(push_front(&queue, 6), Err(6));
        assert_eq!(queue.size(), 4);
        for (value, size) in (2..=5).rev().zip((0..4).rev()) {
            assert_eq!(pop_front(&queue), Some(value));
            assert_eq!(queue.size(), size);
        }
        assert_eq!(pop_front(&queue), None);

        // One in at the back, stolen.
        assert_eq!(queue.push_back(7), Ok(()));
        assert_eq!(queue.size(), 1);
        assert_eq!(queue.pop_back_half(&mut stolen), 1);
        assert_eq!(stolen, [7]);
        assert_eq!(queue.size(), 0);
        stolen.clear();

        // Fill from the back until it refuses, then steal in halves.
        for (value, size) in (8..=11).zip(1..) {
            assert_eq!(queue.push_back(value), Ok(()));
            assert_eq!(queue.size(), size);
        }
        assert_eq!(queue.push_back(12), Err(12));
        assert_eq!(queue.size(), 4);
        for (expected, size_after) in [(&[10, 11][..], 2), (&[9][..], 1), (&[8][..], 0)] {
            assert_eq!(queue.pop_back_half(&mut stolen), expected.len());
            assert_eq!(stolen, expected);
            assert_eq!(queue.size(), size_after);
            stolen.clear();
        }
        assert_eq!(queue.pop_back_half(&mut stolen), 0);
        assert!(stolen.is_empty());
        assert!(queue.is_empty());

        // What the owner pushes first leaves the back first.
        for value in 1..=3 {
            assert_eq!(push_front(&queue, value), Ok(()));
        }
        for value in 1..=3 {
            assert_eq!(queue.pop_back(), Some(value));
        }
        assert!(queue.is_empty());
        assert_eq!(queue.size(), 0);
    }

    /// Eigen's `test_empty_runqueue`: while one thread churns a queue that always holds at
    /// least one element, another never sees it empty.
    #[test]
    fn never_reports_empty_while_holding_an_element() {
        const OPS: usize = 1 << 18;
        let queue = RunQueue::new(4);
        push_front(&queue, 1).unwrap();
        let observations = thread::scope(|scope| {
            // The thread join inside `scope` hands ownership back before the final pop.
            let mutator = scope.spawn(|| churn_keeping_one(&queue, OPS));
            let mut observations = 0u64;
            while !mutator.is_finished() {
                assert!(!queue.is_empty());
                let size = queue.size();
                assert!((1..=2).contains(&size), "size {size}");
                observations += 1;
            }
            observations
        });
        assert!(observations > 0);
        assert_eq!(pop_front(&queue), Some(1));
        assert!(queue.is_empty());
    }

    /// Pushes one element (front or back at random) and pops one (front or back), `ops` times.
    fn churn_keeping_one(queue: &RunQueue<i32>, ops: usize) {
        let mut rng = fastrand::Rng::with_seed(0x5eed_0001);
        let mut stolen = Vec::new();
        for _ in 0..ops {
            if rng.bool() {
                assert_eq!(push_front(queue, 1), Ok(()));
            } else {
                assert_eq!(queue.push_back(1), Ok(()));
            }
            if rng.bool() {
                assert_eq!(pop_front(queue), Some(1));
            } else {
                assert_eq!(queue.pop_back_half(&mut stolen), 1);
                assert_eq!(stolen, [1]);
                stolen.clear();
            }
        }
    }

    /// Eigen's `test_stress_runqueue`: an owner working the front, two back pushers, two
    /// half-stealers. The queue ends empty, the sum pushed minus the sum popped is 0, and
    /// (stronger than Eigen) every value pushed was popped exactly once.
    #[test]
    fn stress_owner_pushers_and_stealers() {
        const EVENTS: i64 = 1 << 18;
        let queue = RunQueue::new(8);
        let queue = &queue;
        let (pushed, popped) = thread::scope(|scope| {
            let owner = scope.spawn(|| owner_pushes_and_pops(queue, tagged(0, EVENTS)));
            let pushers: Vec<_> = (1..=2)
                .map(|tag| scope.spawn(move || push_back_all(queue, tagged(tag, EVENTS))))
                .collect();
            let stealers: Vec<_> = (0..2)
                .map(|_| scope.spawn(|| steal_halves(queue, EVENTS as usize - 1)))
                .collect();
            let (mut pushed, mut popped) = owner.join().unwrap();
            for pusher in pushers {
                pushed.extend(pusher.join().unwrap());
            }
            for stealer in stealers {
                popped.extend(stealer.join().unwrap());
            }
            (pushed, popped)
        });
        assert!(queue.is_empty());
        assert_eq!(queue.size(), 0);
        assert_eq!(pushed.iter().sum::<i64>() - popped.iter().sum::<i64>(), 0);
        assert_eq!(sorted(pushed), sorted(popped));
    }

    /// How long a stress thread may retry without finishing before the test calls it a hang
    /// (a lost element leaves a consumer waiting forever).
    const STALL_LIMIT: Duration = Duration::from_secs(120);

    fn assert_not_stalled(started: Instant) {
        assert!(
            started.elapsed() < STALL_LIMIT,
            "no progress: an element was lost?"
        );
    }

    /// The values `1..events`, made distinct per producer by `tag`.
    fn tagged(tag: i64, events: i64) -> std::ops::Range<i64> {
        tag * events + 1..(tag + 1) * events
    }

    fn sorted(mut values: Vec<i64>) -> Vec<i64> {
        values.sort_unstable();
        values
    }

    /// The owner pushes `values` at the front and pops as many elements as it pushes;
    /// returns (what it pushed, what it popped).
    fn owner_pushes_and_pops(
        queue: &RunQueue<i64>,
        values: std::ops::Range<i64>,
    ) -> (Vec<i64>, Vec<i64>) {
        let wanted = usize::try_from(values.end - values.start).unwrap();
        let mut values = values.peekable();
        let (mut pushed, mut popped) = (Vec::new(), Vec::new());
        let started = Instant::now();
        while values.peek().is_some() || popped.len() < wanted {
            assert_not_stalled(started);
            if let Some(&value) = values.peek() {
                if push_front(queue, value).is_ok() {
                    pushed.push(value);
                    values.next();
                }
            }
            if popped.len() < wanted {
                popped.extend(pop_front(queue));
            }
        }
        (pushed, popped)
    }

    /// Pushes every value at the back, retrying while the queue is full; returns them.
    fn push_back_all(queue: &RunQueue<i64>, values: impl IntoIterator<Item = i64>) -> Vec<i64> {
        let mut pushed = Vec::new();
        for value in values {
            push_back_retrying(queue, value);
            pushed.push(value);
        }
        pushed
    }

    fn push_back_retrying(queue: &RunQueue<i64>, mut value: i64) {
        let started = Instant::now();
        while let Err(refused) = queue.push_back(value) {
            assert_not_stalled(started);
            value = refused;
            thread::yield_now();
        }
    }

    /// Steals in halves until it has kept `wanted` values, pushes any surplus back, and
    /// returns the values it kept.
    fn steal_halves(queue: &RunQueue<i64>, wanted: usize) -> Vec<i64> {
        let mut kept = Vec::with_capacity(wanted);
        let mut stolen = Vec::new();
        let started = Instant::now();
        while kept.len() < wanted {
            assert_not_stalled(started);
            if queue.pop_back_half(&mut stolen) == 0 {
                thread::yield_now();
                continue;
            }
            while kept.len() < wanted {
                let Some(value) = stolen.pop() else { break };
                kept.push(value);
            }
        }
        for surplus in stolen {
            push_back_retrying(queue, surplus);
        }
        kept
    }

    #[test]
    fn full_queue_refuses_both_ends() {
        let queue = RunQueue::new(2);
        assert_eq!(push_front(&queue, 1), Ok(()));
        assert_eq!(queue.push_back(2), Ok(()));
        assert_eq!(queue.size(), 2);
        assert_eq!(push_front(&queue, 3), Err(3));
        assert_eq!(queue.push_back(4), Err(4));
        assert_eq!(queue.size(), 2);
        assert_eq!(queue.pop_back(), Some(2));
        assert_eq!(queue.push_back(5), Ok(()));
        assert_eq!(push_front(&queue, 6), Err(6));
        assert_eq!(pop_front(&queue), Some(1));
        assert_eq!(pop_front(&queue), Some(5));
        assert!(queue.is_empty());
    }

    #[test]
    fn drop_drops_queued_items_once() {
        let token = Rc::new(());
        let queue = RunQueue::new(4);
        // Move both ends three slots on, so the queued run wraps past the last slot.
        for _ in 0..3 {
            push_front(&queue, Rc::clone(&token)).unwrap();
            drop(queue.pop_back());
        }
        push_front(&queue, Rc::clone(&token)).unwrap();
        queue.push_back(Rc::clone(&token)).unwrap();
        push_front(&queue, Rc::clone(&token)).unwrap();
        let popped = pop_front(&queue).unwrap();
        assert_eq!(Rc::strong_count(&token), 4);
        drop(queue);
        assert_eq!(Rc::strong_count(&token), 2); // `token` and `popped`
        drop(popped);
    }

    /// Single-threaded, the queue behaves exactly like a bounded deque.
    #[test]
    fn matches_a_bounded_deque() {
        let mut rng = fastrand::Rng::with_seed(0x5eed_0002);
        for capacity in [2, 4, 8] {
            let queue = RunQueue::new(capacity);
            let mut model = VecDeque::new();
            let mut stolen = Vec::new();
            for value in 0..20_000u32 {
                match rng.u8(0..5) {
                    0 => {
                        let result = push_front(&queue, value);
                        check_push(result, value, capacity, &mut model, VecDeque::push_front);
                    }
                    1 => {
                        let result = queue.push_back(value);
                        check_push(result, value, capacity, &mut model, VecDeque::push_back);
                    }
                    2 => assert_eq!(pop_front(&queue), model.pop_front()),
                    3 => assert_eq!(queue.pop_back(), model.pop_back()),
                    _ => {
                        let half = model.len().div_ceil(2);
                        let expected: Vec<u32> = model.split_off(model.len() - half).into();
                        assert_eq!(queue.pop_back_half(&mut stolen), half);
                        assert_eq!(stolen, expected);
                        stolen.clear();
                    }
                }
                assert_eq!(queue.size(), model.len());
                assert_eq!(queue.is_empty(), model.is_empty());
            }
        }
    }

    /// Checks a queue push against the model: refused exactly when full, else mirrored.
    fn check_push(
        result: Result<(), u32>,
        value: u32,
        capacity: usize,
        model: &mut VecDeque<u32>,
        push: fn(&mut VecDeque<u32>, u32),
    ) {
        if model.len() == capacity {
            assert_eq!(result, Err(value));
        } else {
            assert_eq!(result, Ok(()));
            push(model, value);
        }
    }

    #[test]
    fn is_send_and_sync_for_sendable_tasks() {
        fn assert_send_sync<Q: Send + Sync>() {}
        assert_send_sync::<RunQueue<Box<dyn FnOnce() + Send>>>();
    }

    #[test]
    #[should_panic(expected = "power of two")]
    fn rejects_capacity_not_a_power_of_two() {
        let _ = RunQueue::<u8>::new(6);
    }

    #[test]
    #[should_panic(expected = "power of two")]
    fn rejects_capacity_one() {
        let _ = RunQueue::<u8>::new(1);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Loom explores the interleavings and the stale reads the memory model allows. Its
    //! partial-order reduction misses reorderings when a thread loads a location and then
    //! stores it after another thread's load (tokio-rs/loom#166, #392), and every queue
    //! operation loads before it stores. So in each model the main thread, which loom runs
    //! first, does the mutating owner work; threads that only read, or that race with the
    //! owner's stores, are spawned and run after it, and loom reorders from there.
    use super::RunQueue;
    use crate::sync::{thread, Arc};

    /// Asserts the queue reads as holding between `1` and `most` elements.
    fn assert_holds_some(queue: &RunQueue<u32>, most: usize) {
        assert!(!queue.is_empty());
        let size = queue.size();
        assert!((1..=most).contains(&size), "size {size}");
    }

    /// The owner pushes two and pops one at the front while one thread pops at the back and
    /// another pushes there: every value comes out (or is refused) exactly once.
    #[test]
    fn loom_run_queue_owner_stealer_pusher_each_value_once() {
        loom::model(|| {
            let queue = Arc::new(RunQueue::new(2));
            let stealer = {
                let queue = Arc::clone(&queue);
                thread::spawn(move || queue.pop_back())
            };
            let pusher = {
                let queue = Arc::clone(&queue);
                thread::spawn(move || queue.push_back(3).err())
            };
            let mut seen = Vec::new();
            for value in [1, 2] {
                // SAFETY: the model's main thread is the only owner.
                seen.extend(unsafe { queue.push_front(value) }.err());
            }
            // SAFETY: as above.
            seen.extend(unsafe { queue.pop_front() });
            seen.extend(stealer.join().unwrap());
            seen.extend(pusher.join().unwrap());
            // SAFETY: as above.
            while let Some(value) = unsafe { queue.pop_front() } {
                seen.push(value);
            }
            assert!(queue.is_empty());
            assert_eq!(queue.size(), 0);
            seen.sort_unstable();
            assert_eq!(seen, [1, 2, 3]);
        });
    }

    /// The owner pushes three and pops one while a thread steals half and another pushes at
    /// the back; what is left is dropped with the queue. Each value is taken or dropped
    /// exactly once.
    #[test]
    fn loom_run_queue_pop_back_half_and_drop() {
        loom::model(|| {
            let queue = Arc::new(RunQueue::new(4));
            let tokens: Vec<Arc<u32>> = (0..4).map(Arc::new).collect();
            let stealer = {
                let queue = Arc::clone(&queue);
                thread::spawn(move || {
                    let mut stolen = Vec::new();
                    let count = queue.pop_back_half(&mut stolen);
                    assert_eq!(count, stolen.len());
                    stolen
                })
            };
            let pusher = {
                let queue = Arc::clone(&queue);
                let token = Arc::clone(&tokens[3]);
                thread::spawn(move || queue.push_back(token).unwrap())
            };
            for token in &tokens[..3] {
                // SAFETY: the model's main thread is the only owner.
                unsafe { queue.push_front(Arc::clone(token)) }.unwrap();
            }
            // SAFETY: as above.
            let popped = unsafe { queue.pop_front() };
            pusher.join().unwrap();
            let stolen = stealer.join().unwrap();
            let mut taken: Vec<u32> = stolen.iter().chain(&popped).map(|t| **t).collect();
            taken.sort_unstable();
            taken.dedup();
            assert_eq!(taken.len(), stolen.len() + usize::from(popped.is_some()));
            drop(queue);
            drop((stolen, popped));
            for token in &tokens {
                assert_eq!(Arc::strong_count(token), 1);
            }
        });
    }

    /// The queue holds an element throughout while the owner pushes and pops at the front
    /// and another thread at the back: an observer never sees it empty.
    #[test]
    fn loom_run_queue_never_empty_while_owner_holds() {
        loom::model(|| {
            let queue = Arc::new(RunQueue::new(4));
            // SAFETY: the model's main thread is the only owner.
            unsafe { queue.push_front(0) }.unwrap();
            let back = {
                let queue = Arc::clone(&queue);
                thread::spawn(move || {
                    queue.push_back(2).unwrap();
                    assert_eq!(queue.pop_back(), Some(2));
                })
            };
            let observer = {
                let queue = Arc::clone(&queue);
                thread::spawn(move || assert_holds_some(&queue, 3))
            };
            // SAFETY: as above.
            unsafe { queue.push_front(1) }.unwrap();
            // SAFETY: as above.
            assert_eq!(unsafe { queue.pop_front() }, Some(1));
            back.join().unwrap();
            observer.join().unwrap();
            assert_eq!(queue.size(), 1);
        });
    }

    /// Eigen's empty test in miniature: the owner pushes at one end and pops at the other,
    /// both ways round, around a held element; an observer never sees the queue empty. This
    /// is the model that fails when index stores are relaxed (Eigen's 2026 fix).
    #[test]
    fn loom_run_queue_never_empty_across_ends() {
        loom::model(|| {
            let queue = Arc::new(RunQueue::new(2));
            // SAFETY: the model's main thread is the only owner.
            unsafe { queue.push_front(0) }.unwrap();
            let observer = {
                let queue = Arc::clone(&queue);
                thread::spawn(move || {
                    assert_holds_some(&queue, 2);
                    assert_holds_some(&queue, 2);
                })
            };
            queue.push_back(1).unwrap();
            // SAFETY: as above.
            assert_eq!(unsafe { queue.pop_front() }, Some(0));
            // SAFETY: as above.
            unsafe { queue.push_front(2) }.unwrap();
            assert_eq!(queue.pop_back(), Some(1));
            observer.join().unwrap();
            assert_eq!(queue.size(), 1);
        });
    }

    /// The owner's front index returns to an earlier position (push then pop at the front)
    /// while the back moves up: without the modification counter an observer could pair the
    /// old `front` with the new `back` and read the queue as empty (the model fails then).
    #[test]
    fn loom_run_queue_snapshot_survives_index_aba() {
        loom::model(|| {
            let queue = Arc::new(RunQueue::new(2));
            // SAFETY: the model's main thread is the only owner.
            unsafe { queue.push_front(0) }.unwrap();
            let observer = {
                let queue = Arc::clone(&queue);
                thread::spawn(move || assert_holds_some(&queue, 2))
            };
            // SAFETY: as above.
            unsafe { queue.push_front(1) }.unwrap();
            assert_eq!(queue.pop_back(), Some(0));
            queue.push_back(2).unwrap();
            // SAFETY: as above.
            assert_eq!(unsafe { queue.pop_front() }, Some(1));
            observer.join().unwrap();
            assert_eq!(queue.size(), 1);
        });
    }

    /// Two stealers, two elements: both get one. A `try_lock` in `pop_back` (what Eigen's
    /// 2019 fix removed) would make one come back empty-handed while the other holds the lock.
    #[test]
    fn loom_run_queue_pop_back_waits_for_the_lock() {
        loom::model(|| {
            let queue = Arc::new(RunQueue::new(2));
            for value in [1, 2] {
                queue.push_back(value).unwrap();
            }
            let stealers: Vec<_> = (0..2)
                .map(|_| {
                    let queue = Arc::clone(&queue);
                    thread::spawn(move || queue.pop_back())
                })
                .collect();
            let mut stolen: Vec<u32> = stealers
                .into_iter()
                .map(|stealer| stealer.join().unwrap().expect("a stealer found nothing"))
                .collect();
            stolen.sort_unstable();
            assert_eq!(stolen, [1, 2]);
            assert!(queue.is_empty());
        });
    }
}
