//! Eigen's `EventCount`: a condition variable for lock-free predicates.
//!
//! A thread that wants to sleep until "some queue is non-empty" cannot hold a lock over that
//! predicate: the queues are lock-free. `EventCount` lets it sleep anyway, without losing a
//! wake-up, and costs a producer one fence and one load while nobody sleeps.
//!
//! # Usage
//! ```text
//! waiter (worker `i`)                       notifier (producer)
//!   if predicate() { return act() }          publish(work)         // make predicate true
//!   ec.prewait()                             ec.notify(false)      // or notify(true): wake all
//!   if predicate() { ec.cancel_wait(); return act() }
//!   ec.commit_wait(i)                        // sleeps until notified, then loop again
//! ```
//!
//! # State
//! One `AtomicU64` holds everything the protocol decides on, so every decision is one CAS:
//! ```text
//!  63            42 41          28 27          14 13           0
//! +----------------+--------------+--------------+--------------+
//! |     epoch      |   signals    |  prewaiting  |  stack top   |
//! +----------------+--------------+--------------+--------------+
//! ```
//! - *stack top* (14 bits): index of the most recently committed waiter, `0x3fff` when no
//!   thread sleeps. Committed waiters form a Treiber stack: each waiter slot's `next` holds the
//!   stack-and-epoch bits that were in the state when it pushed itself.
//! - *prewaiting* (14 bits): threads between `prewait` and `commit_wait`/`cancel_wait`.
//! - *signals* (14 bits): wake-ups handed to prewaiting threads, never more than *prewaiting*.
//! - *epoch* (22 bits): ABA guard for the stack. Each slot counts its own pushes; a push puts
//!   the slot's count here, a pop restores the count saved in `next`. A notifier that read
//!   top = `w` and `w.next` can therefore only pop if `w` was not popped and pushed again in
//!   between (it would carry a new epoch and the CAS fails).
//!
//! # Waiting
//! - `prewait` adds one to *prewaiting* and issues a `SeqCst` fence. From here on a notifier
//!   cannot miss this thread. The caller then re-checks its predicate.
//! - `cancel_wait` (the predicate became true) removes the thread from *prewaiting*; see the
//!   second 2019 fix below for when it also takes a signal.
//! - `commit_wait(i)`: if a signal is pending, consume it together with the prewait and return
//!   at once (a notifier ran after our prewait, so the predicate may be true again). Otherwise
//!   move from *prewaiting* onto the stack as slot `i` and park on the slot's own mutex and
//!   condition variable until a notifier marks the slot signalled.
//!
//! # Notifying
//! `notify` is called *after* the predicate was made true. It issues a `SeqCst` fence and loads
//! the state. Nobody prewaiting-without-a-signal and an empty stack: return (the cheap path).
//! Otherwise, in one CAS:
//! - `notify(false)` adds one signal if some prewaiting thread has none (it has not slept yet,
//!   the signal makes its `commit_wait` return at once), else pops the top sleeper and unparks
//!   it;
//! - `notify(true)` signals every prewaiting thread and takes the whole stack, then unparks
//!   every sleeper on it.
//!
//! Unparking locks the slot's mutex, marks it signalled, and notifies its condition variable
//! only if the sleeper got as far as waiting on it. A slot is unparked once per push, so the
//! sleeper resets its slot to "not signalled" as it leaves the park.
//!
//! # Why no wake-up is lost (the Dekker argument)
//! The waiter writes the state (`prewait`), fences, then reads the predicate. The notifier
//! writes the predicate, fences, then reads the state. The two `SeqCst` fences are totally
//! ordered. If the waiter's fence comes first, the notifier's state load sees the prewait (or a
//! later state) and will signal or unpark somebody; if the notifier's fence comes first, the
//! waiter's re-check sees the predicate and it cancels. Both may happen (a harmless spurious
//! wake-up); that neither sees the other cannot. After `prewait` the thread is always accounted
//! for: as a prewaiter (which a notify signals) or, moved atomically by one CAS, as a stack
//! entry (which a notify pops). A notify that finds every prewaiter already signalled and no
//! sleeper does nothing, and loses nothing: each signalled thread re-checks the predicate after
//! that notify's publish. A signal taken by `commit_wait`, and an unpark, synchronize with the
//! notifier, so a woken thread sees the published work.
//!
//! Eigen puts no fence in `prewait`; it relies on its `SeqCst` CAS. But the C++ and Rust
//! memory models order a store before a later load of *another* location only through `SeqCst`
//! accesses on both sides or through fences, and the caller's re-check is usually a relaxed or
//! acquire load (on AArch64 a `SeqCst` RMW followed by such a load is not a full barrier). So
//! this port adds the fence; `prewait` is the slow path, just before sleeping. Loom, which
//! treats a `SeqCst` RMW as acquire-release, finds the lost wake-up without it.
//!
//! # The 2019 fixes, and the forwarding cancel
//! A signal is owed to the threads that were prewaiting when it was issued: one of them may
//! have re-checked too early to see the new work and be about to sleep. The signal must leave
//! the state only through one of those threads, or a wake-up is silently dropped: a worker
//! sleeps while work sits queued, and if the running tasks wait for that work (a barrier,
//! Eigen's "16 blocking tasks all running at once" test) the pool deadlocks.
//! - `prewait` must not consume signals. A newcomer that took a pending signal would steal the
//!   wake-up of the thread it was issued for, which then commits and sleeps.
//! - `cancel_wait` takes a signal only when *prewaiting* == *signals*. While some prewaiter has
//!   no signal, the canceller cannot know the signal was its own, so it leaves it to the others
//!   (one of them will return from `commit_wait` at once). When the counts are equal every
//!   prewaiter holds one, the canceller included, so it takes one to keep
//!   *signals* <= *prewaiting*.
//!
//! Eigen's current master adds a third rule (older copies lack it), kept here: a canceller that
//! took a signal passes it on with `notify(false)`. It may be backing out without doing the work
//! the notify was for (say, a worker retiring on resize or shutdown), and the sleeper that the
//! notify would otherwise have popped must not stay asleep
//! (`loom_event_count_cancel_passes_on_a_signal` deadlocks without it).
#![forbid(unsafe_code)]

use std::fmt;

use crossbeam_utils::CachePadded;

use crate::sync::{fence, AtomicU64, Condvar, Mutex, Ordering};

/// The most waiter slots an [`EventCount`] can have (the stack field is 14 bits and its
/// all-ones value means "empty").
pub const MAX_WAITERS: usize = (1 << FIELD_BITS) - 1;

const FIELD_BITS: u32 = 14;
const FIELD_MASK: u64 = (1 << FIELD_BITS) - 1;

const STACK_MASK: u64 = FIELD_MASK;
/// The stack field of a state with no committed waiter.
const STACK_EMPTY: u64 = STACK_MASK;

const PREWAIT_SHIFT: u32 = FIELD_BITS;
const PREWAIT_MASK: u64 = FIELD_MASK << PREWAIT_SHIFT;
const PREWAIT_ONE: u64 = 1 << PREWAIT_SHIFT;

const SIGNAL_SHIFT: u32 = 2 * FIELD_BITS;
const SIGNAL_MASK: u64 = FIELD_MASK << SIGNAL_SHIFT;
const SIGNAL_ONE: u64 = 1 << SIGNAL_SHIFT;

const EPOCH_SHIFT: u32 = 3 * FIELD_BITS;
const EPOCH_MASK: u64 = !0 << EPOCH_SHIFT;
const EPOCH_ONE: u64 = 1 << EPOCH_SHIFT;

/// The bits a stack link saves and restores: the top index and its push epoch.
const LINK_MASK: u64 = STACK_MASK | EPOCH_MASK;
/// The two counters.
const COUNTS_MASK: u64 = PREWAIT_MASK | SIGNAL_MASK;

const _: () = assert!(64 - EPOCH_SHIFT >= 20, "too few epoch bits to prevent ABA");

fn prewaiting(state: u64) -> u64 {
    (state & PREWAIT_MASK) >> PREWAIT_SHIFT
}

fn signals(state: u64) -> u64 {
    (state & SIGNAL_MASK) >> SIGNAL_SHIFT
}

/// Index of the top committed waiter, if any.
fn stack_top(state: u64) -> Option<usize> {
    match state & STACK_MASK {
        STACK_EMPTY => None,
        top => Some(top as usize),
    }
}

/// Debug check of the state invariants; `by_prewaiter` when the caller itself prewaits.
fn check_state(state: u64, by_prewaiter: bool) {
    debug_assert!(
        signals(state) <= prewaiting(state),
        "EventCount: more signals than prewaiting threads"
    );
    debug_assert!(
        !by_prewaiter || prewaiting(state) > 0,
        "EventCount: commit_wait/cancel_wait without prewait"
    );
}

/// Where a committed waiter is in its park.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ParkState {
    /// Pushed (or idle), not yet unparked.
    NotSignaled,
    /// Sleeping on the condition variable.
    Waiting,
    /// Unparked by a notifier; the sleeper may leave.
    Signaled,
}

/// One waiter slot, used by one thread at a time.
struct Waiter {
    /// While on the stack: the stack-and-epoch bits of the waiter below it.
    next: AtomicU64,
    /// This slot's push count, already shifted into the epoch bits. Only the owner touches it.
    epoch: AtomicU64,
    park: Mutex<ParkState>,
    unparked: Condvar,
}

impl Waiter {
    fn new() -> Self {
        Self {
            next: AtomicU64::new(STACK_EMPTY),
            epoch: AtomicU64::new(0),
            park: Mutex::new(ParkState::NotSignaled),
            unparked: Condvar::new(),
        }
    }
}

/// Sleep until notified, for threads waiting on a lock-free predicate (Eigen's `EventCount`).
///
/// ```
/// use enginetop::pool::event_count::EventCount;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
///
/// let ec = Arc::new(EventCount::new(1));
/// let ready = Arc::new(AtomicBool::new(false));
/// let worker = {
///     let (ec, ready) = (ec.clone(), ready.clone());
///     std::thread::spawn(move || {
///         while !ready.load(Ordering::Acquire) {
///             ec.prewait();
///             if ready.load(Ordering::Acquire) {
///                 ec.cancel_wait();
///             } else {
///                 ec.commit_wait(0); // worker 0's slot
///             }
///         }
///     })
/// };
/// ready.store(true, Ordering::Release);
/// ec.notify(false);
/// worker.join().unwrap();
/// ```
pub struct EventCount {
    state: AtomicU64,
    waiters: Box<[CachePadded<Waiter>]>,
}

impl EventCount {
    /// An event count with waiter slots `0..max_waiters`, one per worker.
    ///
    /// # Panics
    /// If `max_waiters` exceeds [`MAX_WAITERS`].
    pub fn new(max_waiters: usize) -> Self {
        assert!(
            max_waiters <= MAX_WAITERS,
            "EventCount supports at most {MAX_WAITERS} waiters, asked for {max_waiters}"
        );
        Self {
            state: AtomicU64::new(STACK_EMPTY),
            waiters: (0..max_waiters)
                .map(|_| CachePadded::new(Waiter::new()))
                .collect(),
        }
    }

    /// Announces the intent to wait. The caller must then re-check its predicate and call
    /// either [`cancel_wait`](Self::cancel_wait) or [`commit_wait`](Self::commit_wait).
    pub fn prewait(&self) {
        let before = self.state.fetch_add(PREWAIT_ONE, Ordering::SeqCst);
        debug_assert!(
            prewaiting(before) < FIELD_MASK,
            "EventCount: prewaiting count overflows"
        );
        check_state(before, false);
        // Orders the prewait before the caller's re-check (the waiter's half of the Dekker
        // pair; see the module docs).
        fence(Ordering::SeqCst);
    }

    /// Sleeps in slot `waiter` until notified; returns at once if a signal is pending.
    /// Call after [`prewait`](Self::prewait) when the predicate is still false.
    ///
    /// # Panics
    /// If `waiter` is not below `max_waiters`.
    pub fn commit_wait(&self, waiter: usize) {
        assert!(
            waiter < self.waiters.len(),
            "EventCount: waiter slot {waiter} out of range 0..{}",
            self.waiters.len()
        );
        let slot = &self.waiters[waiter];
        let epoch = slot.epoch.load(Ordering::Relaxed);
        let me = waiter as u64 | epoch;
        let mut state = self.state.load(Ordering::SeqCst);
        loop {
            check_state(state, true);
            let takes_signal = signals(state) > 0;
            let new = if takes_signal {
                state - PREWAIT_ONE - SIGNAL_ONE
            } else {
                slot.next.store(state & LINK_MASK, Ordering::Relaxed);
                ((state & COUNTS_MASK) - PREWAIT_ONE) | me
            };
            match self
                .state
                .compare_exchange_weak(state, new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) if takes_signal => return,
                Ok(_) => {
                    slot.epoch
                        .store(epoch.wrapping_add(EPOCH_ONE), Ordering::Relaxed);
                    park(slot);
                    return;
                }
                Err(actual) => state = actual,
            }
        }
    }

    /// Undoes [`prewait`](Self::prewait): the predicate became true.
    pub fn cancel_wait(&self) {
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            check_state(state, true);
            // Only when every prewaiter holds a signal is one of them surely ours.
            let takes_signal = prewaiting(state) == signals(state);
            let new = if takes_signal {
                state - PREWAIT_ONE - SIGNAL_ONE
            } else {
                state - PREWAIT_ONE
            };
            match self
                .state
                .compare_exchange_weak(state, new, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => {
                    if takes_signal {
                        self.notify(false); // pass the wake-up on
                    }
                    return;
                }
                Err(actual) => state = actual,
            }
        }
    }

    /// Wakes one waiter (or, with `all`, every waiter). Call after making the predicate true.
    /// Costs a fence and a load when nobody waits.
    pub fn notify(&self, all: bool) {
        // The notifier's half of the Dekker pair (see the module docs).
        fence(Ordering::SeqCst);
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            check_state(state, false);
            let unsignaled = prewaiting(state) > signals(state);
            let top = stack_top(state);
            if top.is_none() && !unsignaled {
                return; // nobody to wake
            }
            let new = if all {
                (state & PREWAIT_MASK) | (prewaiting(state) << SIGNAL_SHIFT) | STACK_EMPTY
            } else if unsignaled {
                state + SIGNAL_ONE
            } else {
                let top = top.expect("checked above: the stack is not empty");
                let below = self.waiters[top].next.load(Ordering::Relaxed);
                (state & COUNTS_MASK) | below
            };
            match self
                .state
                .compare_exchange_weak(state, new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    match top {
                        Some(top) if all => self.unpark_stack(top),
                        Some(top) if !unsignaled => unpark(&self.waiters[top]),
                        _ => {} // only signals were added
                    }
                    return;
                }
                Err(actual) => state = actual,
            }
        }
    }

    /// Unparks every waiter of a stack taken off the state, from `top` down.
    fn unpark_stack(&self, top: usize) {
        let mut next = Some(top);
        while let Some(index) = next {
            let waiter = &self.waiters[index];
            // Read the link before unparking: once woken, the waiter may push itself again.
            next = stack_top(waiter.next.load(Ordering::Relaxed));
            unpark(waiter);
        }
    }

    fn load_state(&self) -> u64 {
        self.state.load(Ordering::SeqCst)
    }

    /// Committed waiters on the stack (walks the links: meaningful only while quiescent).
    #[cfg(all(test, not(loom)))]
    fn committed_waiters(&self) -> usize {
        let mut count = 0;
        let mut next = stack_top(self.load_state());
        while let Some(index) = next {
            count += 1;
            next = stack_top(self.waiters[index].next.load(Ordering::Relaxed));
        }
        count
    }
}

/// Sleeps until a notifier has unparked this slot, then makes the slot ready for its next push.
fn park(waiter: &Waiter) {
    let mut park = waiter.park.lock();
    while *park != ParkState::Signaled {
        *park = ParkState::Waiting;
        park = waiter.unparked.wait(park);
    }
    *park = ParkState::NotSignaled;
}

/// Marks a popped waiter signalled and wakes it if it already sleeps.
fn unpark(waiter: &Waiter) {
    let was = std::mem::replace(&mut *waiter.park.lock(), ParkState::Signaled);
    if was == ParkState::Waiting {
        waiter.unparked.notify_one();
    }
}

impl fmt::Debug for EventCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.load_state();
        f.debug_struct("EventCount")
            .field("prewaiting", &prewaiting(state))
            .field("signals", &signals(state))
            .field("stack_top", &stack_top(state))
            .field("max_waiters", &self.waiters.len())
            .finish()
    }
}

impl Drop for EventCount {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let state = self.load_state();
            debug_assert!(
                state == STACK_EMPTY,
                "EventCount dropped with threads waiting: {self:?}"
            );
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::{thread, Arc, AtomicUsize};
    use std::time::{Duration, Instant};

    /// How long a test waits for threads that should wake before calling it a lost wake-up.
    const WATCHDOG: Duration = Duration::from_secs(60);

    /// (prewaiting, signals)
    fn counts(ec: &EventCount) -> (u64, u64) {
        let state = ec.load_state();
        (prewaiting(state), signals(state))
    }

    fn assert_idle(ec: &EventCount) {
        assert_eq!(ec.load_state(), STACK_EMPTY, "not idle: {ec:?}");
    }

    /// Counts threads that have finished (or panicked), so a test can wait for them with a
    /// deadline instead of joining forever.
    #[derive(Default)]
    struct Finished {
        count: Mutex<usize>,
        changed: Condvar,
    }

    impl Finished {
        fn arrive(&self) {
            *self.count.lock() += 1;
            self.changed.notify_all();
        }

        /// Waits until `n` threads have finished; false if `limit` passes first.
        fn wait_for(&self, n: usize, limit: Duration) -> bool {
            let deadline = Instant::now() + limit;
            let mut count = self.count.lock();
            while *count < n {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return false;
                }
                count = self.changed.wait_timeout(count, left);
            }
            true
        }

        fn count(&self) -> usize {
            *self.count.lock()
        }
    }

    /// Reports a thread's end to `Finished` even when the thread panics.
    struct ArriveOnDrop(Arc<Finished>);

    impl Drop for ArriveOnDrop {
        fn drop(&mut self) {
            self.0.arrive();
        }
    }

    /// Threads whose end the test awaits under the watchdog.
    struct Crew {
        finished: Arc<Finished>,
        handles: Vec<thread::JoinHandle<()>>,
    }

    impl Crew {
        fn new() -> Self {
            Self {
                finished: Arc::new(Finished::default()),
                handles: Vec::new(),
            }
        }

        fn spawn(&mut self, body: impl FnOnce() + Send + 'static) {
            let arrival = ArriveOnDrop(self.finished.clone());
            self.handles.push(thread::spawn(move || {
                let _arrival = arrival;
                body();
            }));
        }

        /// Waits until `n` of the crew have finished, failing the test after the watchdog.
        fn await_finished(&self, n: usize, what: &str) {
            assert!(
                self.finished.wait_for(n, WATCHDOG),
                "{what}: only {} of {n} threads finished within {WATCHDOG:?} (lost wake-up?)",
                self.finished.count()
            );
        }

        /// Waits for all of the crew under the watchdog, then joins them (re-raising a panic).
        fn join_all(self, what: &str) {
            self.await_finished(self.handles.len(), what);
            for handle in self.handles {
                if let Err(panic) = handle.join() {
                    std::panic::resume_unwind(panic);
                }
            }
        }
    }

    /// Polls `condition` (yielding in between) until it holds, failing after the watchdog.
    fn await_condition(what: &str, condition: impl Fn() -> bool) {
        let deadline = Instant::now() + WATCHDOG;
        while !condition() {
            assert!(Instant::now() < deadline, "timed out waiting until {what}");
            thread::yield_now();
        }
    }

    /// `n` threads each prewait and commit in their own slot; returns once all are on the stack.
    fn commit_sleepers(ec: &Arc<EventCount>, n: usize) -> Crew {
        let mut crew = Crew::new();
        for slot in 0..n {
            let ec = ec.clone();
            crew.spawn(move || {
                ec.prewait();
                ec.commit_wait(slot);
            });
        }
        await_condition("every sleeper committed", || ec.committed_waiters() == n);
        crew
    }

    #[test]
    fn is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<EventCount>();
    }

    /// Eigen's `test_basic_eventcount`, with the state checked after each step.
    #[test]
    fn basic_sequence() {
        let ec = EventCount::new(1);
        ec.notify(false);
        assert_idle(&ec);
        ec.prewait();
        assert_eq!(counts(&ec), (1, 0));
        ec.notify(true);
        assert_eq!(counts(&ec), (1, 1));
        ec.commit_wait(0); // consumes the pending signal: returns at once
        assert_idle(&ec);
        ec.prewait();
        ec.cancel_wait();
        assert_idle(&ec);
    }

    #[test]
    fn notify_with_nobody_waiting_is_a_no_op() {
        let ec = EventCount::new(2);
        ec.notify(false);
        ec.notify(true);
        assert_idle(&ec);
        // No signal was banked for a later waiter.
        ec.prewait();
        assert_eq!(signals(ec.load_state()), 0);
        ec.cancel_wait();
        assert_idle(&ec);
    }

    #[test]
    fn notify_one_wakes_exactly_one_then_notify_all_wakes_the_rest() {
        let ec = Arc::new(EventCount::new(3));
        let sleepers = commit_sleepers(&ec, 3);
        ec.notify(false);
        sleepers.await_finished(1, "notify(false)");
        assert_eq!(ec.committed_waiters(), 2);
        ec.notify(true);
        sleepers.join_all("notify(true)");
        assert_idle(&ec);
    }

    #[test]
    fn notify_all_wakes_every_committed_waiter() {
        let ec = Arc::new(EventCount::new(4));
        let sleepers = commit_sleepers(&ec, 4);
        ec.notify(true);
        sleepers.join_all("notify(true)");
        assert_idle(&ec);
    }

    #[test]
    fn notify_one_prefers_a_prewaiting_thread_over_a_sleeper() {
        let ec = Arc::new(EventCount::new(2));
        let sleepers = commit_sleepers(&ec, 1);
        ec.prewait();
        ec.notify(false);
        assert_eq!(signals(ec.load_state()), 1);
        assert_eq!(ec.committed_waiters(), 1);
        ec.commit_wait(1); // takes the signal: returns at once
        assert_eq!(ec.committed_waiters(), 1);
        ec.notify(false);
        sleepers.join_all("sleeper");
        assert_idle(&ec);
    }

    /// First 2019 fix: a prewait leaves a pending signal to the thread it was issued for.
    #[test]
    fn prewait_does_not_consume_a_pending_signal() {
        let ec = EventCount::new(1);
        ec.prewait(); // thread A
        ec.notify(false); // signal owed to A
        ec.prewait(); // newcomer B
        assert_eq!(counts(&ec), (2, 1));
        ec.cancel_wait(); // B: not every prewaiter has a signal, so it leaves it
        assert_eq!(counts(&ec), (1, 1));
        ec.commit_wait(0); // A: still finds its signal and returns at once
        assert_idle(&ec);
    }

    /// Second 2019 fix: a canceller holding the only signal passes it to a sleeper.
    #[test]
    fn cancel_wait_forwards_a_signal_it_takes() {
        let ec = Arc::new(EventCount::new(1));
        let sleepers = commit_sleepers(&ec, 1);
        ec.prewait();
        ec.notify(false); // goes to this prewaiting thread, not to the sleeper
        assert_eq!(ec.committed_waiters(), 1);
        ec.cancel_wait(); // prewaiting == signals: takes the signal and forwards it
        sleepers.join_all("sleeper woken by the forwarded signal");
        assert_idle(&ec);
    }

    /// The highest slot index must not be mistaken for the empty stack marker.
    #[test]
    fn highest_slot_can_sleep_and_wake() {
        let ec = Arc::new(EventCount::new(MAX_WAITERS));
        let mut crew = Crew::new();
        let sleeper = ec.clone();
        crew.spawn(move || {
            sleeper.prewait();
            sleeper.commit_wait(MAX_WAITERS - 1);
        });
        await_condition("the sleeper committed", || ec.committed_waiters() == 1);
        ec.notify(false);
        crew.join_all("sleeper in the highest slot");
        assert_idle(&ec);
    }

    #[test]
    #[should_panic(expected = "at most")]
    fn too_many_waiters_is_refused() {
        EventCount::new(MAX_WAITERS + 1);
    }

    /// A fake bounded queue: a counter between 0 and `CAPACITY` (Eigen's `TestQueue`).
    #[derive(Default)]
    struct BoundedCounter(AtomicUsize);

    impl BoundedCounter {
        const CAPACITY: usize = 10;

        fn push(&self) -> bool {
            self.0
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                    assert!(n <= Self::CAPACITY);
                    (n < Self::CAPACITY).then_some(n + 1)
                })
                .is_ok()
        }

        fn pop(&self) -> bool {
            self.0
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                    assert!(n <= Self::CAPACITY);
                    n.checked_sub(1)
                })
                .is_ok()
        }

        fn is_empty(&self) -> bool {
            self.0.load(Ordering::Relaxed) == 0
        }
    }

    /// Eigen's `test_stress_eventcount`: producers push to random bounded counters and notify
    /// one waiter; consumers pop, and when a pop fails they prewait, re-check every counter,
    /// and cancel or commit. Passes if every thread finishes and the counters end at zero.
    fn stress(threads: usize, events: usize) {
        const COUNTERS: usize = 10;
        let ec = Arc::new(EventCount::new(threads));
        let counters: Arc<Vec<BoundedCounter>> =
            Arc::new((0..COUNTERS).map(|_| BoundedCounter::default()).collect());
        let mut crew = Crew::new();
        for producer in 0..threads {
            let (ec, counters) = (ec.clone(), counters.clone());
            crew.spawn(move || {
                let mut rng = fastrand::Rng::with_seed(producer as u64);
                let mut pushed = 0;
                while pushed < events {
                    if counters[rng.usize(..COUNTERS)].push() {
                        pushed += 1;
                        ec.notify(false);
                    } else {
                        thread::yield_now();
                    }
                }
            });
        }
        for consumer in 0..threads {
            let (ec, counters) = (ec.clone(), counters.clone());
            crew.spawn(move || {
                let mut rng = fastrand::Rng::with_seed(1000 + consumer as u64);
                let mut popped = 0;
                while popped < events {
                    if counters[rng.usize(..COUNTERS)].pop() {
                        popped += 1;
                        continue;
                    }
                    ec.prewait();
                    if counters.iter().all(BoundedCounter::is_empty) {
                        ec.commit_wait(consumer);
                    } else {
                        ec.cancel_wait();
                    }
                }
            });
        }
        crew.join_all("stress");
        assert!(counters.iter().all(BoundedCounter::is_empty));
        assert_idle(&ec);
    }

    #[test]
    fn stress_producers_and_consumers() {
        stress(4, 1 << 16);
    }

    /// Eigen's full size: 16 producers, 16 consumers, 2^16 events each (about 2 s).
    #[test]
    fn stress_eigen_size() {
        stress(16, 1 << 16);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync::{thread, Arc, AtomicBool, AtomicUsize};

    /// One waiter checks a flag between prewait and commit; the notifier sets the flag and
    /// notifies once. Loom reports a deadlock if the waiter can sleep through the notify.
    #[test]
    fn loom_event_count_no_lost_wakeup() {
        loom::model(|| {
            let ec = Arc::new(EventCount::new(1));
            let flag = Arc::new(AtomicBool::new(false));
            let waiter = {
                let (ec, flag) = (ec.clone(), flag.clone());
                thread::spawn(move || {
                    ec.prewait();
                    if flag.load(Ordering::Relaxed) {
                        ec.cancel_wait();
                    } else {
                        ec.commit_wait(0);
                        // A wake-up carries the notifier's view with it.
                        assert!(
                            flag.load(Ordering::Relaxed),
                            "woken before the flag was set"
                        );
                    }
                })
            };
            flag.store(true, Ordering::Relaxed);
            ec.notify(false);
            waiter.join().unwrap();
            assert_eq!(ec.load_state(), STACK_EMPTY);
        });
    }

    /// Two waiters, two tokens published one at a time with `notify(false)` each: both waiters
    /// must get a token. Exercises the signal-vs-pop choice and cancel's forwarding.
    #[test]
    fn loom_event_count_two_waiters_two_notifications() {
        loom::model(|| {
            let ec = Arc::new(EventCount::new(2));
            let tokens = Arc::new(AtomicUsize::new(0));
            let waiters: Vec<_> = (0..2)
                .map(|slot| {
                    let (ec, tokens) = (ec.clone(), tokens.clone());
                    thread::spawn(move || loop {
                        let took = tokens
                            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                                n.checked_sub(1)
                            })
                            .is_ok();
                        if took {
                            return;
                        }
                        ec.prewait();
                        if tokens.load(Ordering::Relaxed) > 0 {
                            ec.cancel_wait();
                        } else {
                            ec.commit_wait(slot);
                        }
                    })
                })
                .collect();
            for _ in 0..2 {
                tokens.fetch_add(1, Ordering::Relaxed);
                ec.notify(false);
            }
            waiters.into_iter().for_each(|w| w.join().unwrap());
            assert_eq!(tokens.load(Ordering::Relaxed), 0);
            assert_eq!(ec.load_state(), STACK_EMPTY);
        });
    }

    /// A waiter for a token, and a bystander that prewaits and backs out without looking
    /// (a worker retiring or shutting down). When the notify's signal goes to the bystander,
    /// its `cancel_wait` must pass it on, or the waiter sleeps with the token published.
    #[test]
    fn loom_event_count_cancel_passes_on_a_signal() {
        loom::model(|| {
            let ec = Arc::new(EventCount::new(1));
            let flag = Arc::new(AtomicBool::new(false));
            let waiter = {
                let (ec, flag) = (ec.clone(), flag.clone());
                thread::spawn(move || {
                    ec.prewait();
                    if flag.load(Ordering::Relaxed) {
                        ec.cancel_wait();
                    } else {
                        ec.commit_wait(0);
                    }
                })
            };
            let bystander = {
                let ec = ec.clone();
                thread::spawn(move || {
                    ec.prewait();
                    ec.cancel_wait();
                })
            };
            flag.store(true, Ordering::Relaxed);
            ec.notify(false);
            waiter.join().unwrap();
            bystander.join().unwrap();
            assert_eq!(ec.load_state(), STACK_EMPTY);
        });
    }

    /// Two waiters on one flag, one `notify(true)`: both must wake.
    #[test]
    fn loom_event_count_notify_all_wakes_both() {
        loom::model(|| {
            let ec = Arc::new(EventCount::new(2));
            let flag = Arc::new(AtomicBool::new(false));
            let waiters: Vec<_> = (0..2)
                .map(|slot| {
                    let (ec, flag) = (ec.clone(), flag.clone());
                    thread::spawn(move || {
                        ec.prewait();
                        if flag.load(Ordering::Relaxed) {
                            ec.cancel_wait();
                        } else {
                            ec.commit_wait(slot);
                        }
                    })
                })
                .collect();
            flag.store(true, Ordering::Relaxed);
            ec.notify(true);
            waiters.into_iter().for_each(|w| w.join().unwrap());
            assert_eq!(ec.load_state(), STACK_EMPTY);
        });
    }
}
