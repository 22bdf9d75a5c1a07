//! Each thread's rings: found through a thread-local on every record, created on the first.
//!
//! A thread keeps one [`Producer`] per profiler it has recorded into (almost always one), the
//! one used last held inline in the thread-local (one pointer fewer to follow), the others in
//! a list. Recording checks the front's profiler id and pushes: no lock, no allocation. The first record from a thread into a profiler takes
//! the slow path once: it allocates the ring and hands the consumer half to the profiler's
//! collector under a short lock. When the thread exits, the thread-local is destroyed, which
//! drops the producers and marks their rings closed for the collector's final drain.
//!
//! An event recorded while the thread-local is being torn down, or from inside a recording
//! (impossible today, guarded anyway), has nowhere to go: it is counted as lost by the
//! profiler, like a ring drop.
#![forbid(unsafe_code)]

use std::cell::RefCell;

use super::collector::Core;
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

thread_local! {
    #[allow(clippy::missing_const_for_thread_local)] // loom's thread_local! has no const form
    static RINGS: RefCell<LocalRings> = RefCell::new(LocalRings {
        front_profiler: 0,
        front: None,
        others: Vec::new(),
    });
}

/// Pushes `event` into the calling thread's ring of `core`'s profiler.
#[inline(always)]
pub(crate) fn push(core: &Core, event: Event) {
    let outcome = RINGS.try_with(|rings| {
        let Ok(mut rings) = rings.try_borrow_mut() else {
            return false;
        };
        let rings = &mut *rings;
        match &mut rings.front {
            Some(front) if rings.front_profiler == core.id() => {
                front.push(event);
                true
            }
            _ => push_slow(rings, core, event),
        }
    });
    if !matches!(outcome, Ok(true)) {
        core.count_lost();
    }
}

/// The profiler's ring is not at the front: find it, or register a new one, and make it the
/// front.
#[cold]
fn push_slow(rings: &mut LocalRings, core: &Core, event: Event) -> bool {
    rings
        .others
        .retain(|(_, producer)| !producer.is_abandoned());
    let found = rings.others.iter().position(|(id, _)| *id == core.id());
    let mut producer = match found {
        Some(index) => rings.others.swap_remove(index).1,
        None => core.register_ring(),
    };
    producer.push(event);
    if let Some(previous) = rings.front.replace(producer) {
        rings.others.push((rings.front_profiler, previous));
    }
    rings.front_profiler = core.id();
    true
}
