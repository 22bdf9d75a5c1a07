//! Each thread's rings: found through a thread-local on every record, created on the first.
//!
//! A thread keeps one [`Producer`] per profiler it has recorded into (almost always one), the
//! one used last held inline in the thread-local (one pointer fewer to follow), the others in
//! a list. The thread-local is `const`-initialised outside loom, so finding it costs no
//! "built yet?" check. Recording checks the front's profiler id and pushes: no lock, no
//! allocation; events recorded together ([`push_all_at`]) share one lookup. The first record
//! from a thread into a profiler takes the slow path once: it allocates the ring and hands
//! the consumer half to the profiler's collector under a short lock. When the thread exits,
//! the thread-local is destroyed, which drops the producers and marks their rings closed for
//! the collector's final drain.
//!
//! A push that leaves the ring backed up (half full or more, see the ring's check points)
//! tells the profiler, which hands the collector a core ([`Core::backed_up`]).
//!
//! An event recorded while the thread-local is being torn down, or from inside a recording
//! (impossible today, guarded anyway), has nowhere to go: it is counted as lost by the
//! profiler, like a ring drop.
#![forbid(unsafe_code)]

use std::cell::RefCell;

use super::core::Core;
use super::event::Event;
use super::ring::Producer;
use crate::sync::thread_local;

/// This thread's rings: the one used last inline (one fewer pointer to follow on every
/// record), the others in a list.
struct LocalRings {
    front_profiler: u64,
    front: Option<Producer>,
    others: Vec<(u64, Producer)>,
}

/// No rings yet: what every thread starts with.
const NO_RINGS: LocalRings = LocalRings {
    front_profiler: 0,
    front: None,
    others: Vec::new(),
};

// Outside loom the thread-local is `const`-initialised: an access checks only that its
// destructor is registered, not whether the value has been built yet. Loom's
// `thread_local!` has no `const` form.
#[cfg(not(loom))]
thread_local! {
    static RINGS: RefCell<LocalRings> = const { RefCell::new(NO_RINGS) };
}

#[cfg(loom)]
thread_local! {
    #[allow(clippy::missing_const_for_thread_local)] // loom's thread_local! has no const form
    static RINGS: RefCell<LocalRings> = RefCell::new(NO_RINGS);
}

/// Pushes `event` into the calling thread's ring of `core`'s profiler.
#[inline(always)]
pub(crate) fn push(core: &Core, event: Event) {
    match with_producer(core, |producer| {
        producer.push(event);
        producer.is_backed_up()
    }) {
        Some(false) => {}
        Some(true) => core.backed_up(),
        None => core.count_lost(1),
    }
}

/// Pushes every event of `events`, in order, each stamped `ts`, into the calling thread's
/// ring of `core`'s profiler: one thread-local lookup for them all.
#[inline]
pub(crate) fn push_all_at(core: &Core, events: impl IntoIterator<Item = Event>, ts: u64) {
    let mut events = events.into_iter();
    match with_producer(core, |producer| {
        let mut backed_up = false;
        for event in events.by_ref() {
            producer.push(event.at(ts));
            backed_up |= producer.is_backed_up();
        }
        backed_up
    }) {
        Some(false) => {}
        Some(true) => core.backed_up(),
        None => core.count_lost(events.count() as u64),
    }
}

/// Runs `write` on the calling thread's producer for `core`'s profiler (after the
/// thread-local is let go, so `write`'s answer can be acted on outside it); `None` if the
/// thread has none to give (its thread-local is being torn down, or it is recording from
/// inside a recording).
#[inline(always)]
fn with_producer<R>(core: &Core, write: impl FnOnce(&mut Producer) -> R) -> Option<R> {
    let outcome = RINGS.try_with(|rings| {
        let Ok(mut rings) = rings.try_borrow_mut() else {
            return None;
        };
        let rings = &mut *rings;
        Some(match &mut rings.front {
            Some(front) if rings.front_profiler == core.id() => write(front),
            _ => write(bring_to_front(rings, core)),
        })
    });
    outcome.ok().flatten()
}

/// The profiler's ring is not at the front: find it, or register a new one, and make it the
/// front.
#[cold]
fn bring_to_front<'a>(rings: &'a mut LocalRings, core: &Core) -> &'a mut Producer {
    rings
        .others
        .retain(|(_, producer)| !producer.is_abandoned());
    let found = rings.others.iter().position(|(id, _)| *id == core.id());
    let producer = match found {
        Some(index) => rings.others.swap_remove(index).1,
        None => core.register_ring(),
    };
    if let Some(previous) = rings.front.take() {
        rings.others.push((rings.front_profiler, previous));
    }
    rings.front_profiler = core.id();
    rings.front.insert(producer)
}
