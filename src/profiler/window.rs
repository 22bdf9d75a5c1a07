//! The bounded trace window: the most recent events, kept for Chrome trace export.
//!
//! Bounded two ways, whichever bites first: a number of events (from a byte budget, 32 bytes
//! an event) and an age (events older than the newest by more than `max_age` go). Both keep
//! an exported trace small enough for a browser (Perfetto struggles near 1 GB of JSON).
//!
//! The window remembers, per thread, what the events it let go leave behind: the device of
//! the thread's first worker event, whether it was parked after them, and whether it has
//! exited. A thread's events arrive in order and the window lets go of its oldest first, so
//! what it let go of a thread is a prefix of that thread's events, and the state after it is
//! the thread's state when the window's events begin. The export uses it to give every
//! thread its track and to show one parked through the whole window as parked
//! ([`WindowThread`]).
//!
//! The window reserves its room when it is made (up to `MAX_RESERVED` events; address space,
//! not memory, until events land there): grown by doubling instead, it copied itself and
//! faulted in twice its pages on the collector's time, which measured as most of the
//! collector's kernel time in a profiled random_dag.
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use super::chrome::WindowThread;
use super::event::{Event, EventKind};
use super::names::ThreadId;

/// How much history the trace window keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowOptions {
    /// Memory the window may use for events (32 bytes each).
    pub max_bytes: usize,
    /// Events older than the newest by more than this are let go.
    pub max_age: Duration,
}

impl Default for WindowOptions {
    /// 16 MiB (524,288 events, roughly 80 MB of JSON) or 10 seconds.
    fn default() -> Self {
        WindowOptions {
            max_bytes: 16 << 20,
            max_age: Duration::from_secs(10),
        }
    }
}

impl WindowOptions {
    /// The most events the window holds (0: no window, nothing to export, and the collector
    /// saves the copy).
    pub(crate) fn max_events(&self) -> usize {
        self.max_bytes / std::mem::size_of::<Event>()
    }

    /// No trace window at all (live statistics only).
    pub fn none() -> Self {
        WindowOptions {
            max_bytes: 0,
            ..WindowOptions::default()
        }
    }
}

/// The most events a window reserves room for when it is made (32 MiB; the default window
/// is half that). A bigger window grows as it fills.
const MAX_RESERVED: usize = 1 << 20;

/// The most recent events, in the order the collector received them.
#[derive(Debug)]
pub(crate) struct TraceWindow {
    events: VecDeque<Event>,
    max_events: usize,
    max_age_ns: u64,
    newest_ns: u64,
    /// Events let go because the window was full or they were too old.
    evicted: u64,
    /// What the events let go leave behind, per thread.
    before: BTreeMap<ThreadId, WindowThread>,
}

impl TraceWindow {
    pub(crate) fn new(options: WindowOptions) -> Self {
        TraceWindow {
            // Reserved up front (address space only: pages are touched as the window fills),
            // so filling a window of up to `MAX_RESERVED` events never copies it to a bigger
            // buffer on the collector's time.
            events: VecDeque::with_capacity(options.max_events().min(MAX_RESERVED)),
            max_events: options.max_events(),
            max_age_ns: u64::try_from(options.max_age.as_nanos()).unwrap_or(u64::MAX),
            newest_ns: 0,
            evicted: 0,
            before: BTreeMap::new(),
        }
    }

    /// Adds `events`, letting the oldest go as the bounds require.
    pub(crate) fn extend(&mut self, events: &[Event]) {
        if self.max_events == 0 {
            return;
        }
        for event in events {
            self.newest_ns = self.newest_ns.max(event.ts_ns);
        }
        let keep = events.len().min(self.max_events);
        let overflow = (self.events.len() + keep).saturating_sub(self.max_events);
        self.evict_front(overflow);
        let (never_kept, kept) = events.split_at(events.len() - keep);
        self.evicted += never_kept.len() as u64;
        self.let_go(never_kept.iter());
        self.events.extend(kept);
        let oldest_allowed = self.newest_ns.saturating_sub(self.max_age_ns);
        let too_old = self
            .events
            .iter()
            .take_while(|event| event.ts_ns < oldest_allowed)
            .count();
        self.evict_front(too_old);
    }

    fn evict_front(&mut self, count: usize) {
        let count = count.min(self.events.len());
        let mut events = std::mem::take(&mut self.events);
        self.let_go(events.range(..count));
        events.drain(..count);
        self.events = events;
        self.evicted += count as u64;
    }

    /// Folds events let go into their threads' states at the window's start. Events come in
    /// runs of one thread (the collector drains a ring at a time): one map look-up a run.
    fn let_go<'a>(&mut self, events: impl Iterator<Item = &'a Event>) {
        let mut current: Option<&mut WindowThread> = None;
        for event in events {
            let thread = match current.take() {
                Some(known) if known.thread == event.thread => known,
                _ => self.before.entry(event.thread).or_insert(WindowThread {
                    thread: event.thread,
                    device: None,
                    parked: false,
                    exited: false,
                }),
            };
            if thread.device.is_none() && is_worker_event(event.kind) {
                thread.device = Some(event.device);
            }
            match event.kind {
                EventKind::Park => thread.parked = true,
                EventKind::Unpark => thread.parked = false,
                _ => {}
            }
            current = Some(thread);
        }
    }

    /// Marks `threads` as exited: a thread with no events left in the window is not shown.
    pub(crate) fn threads_exited(&mut self, threads: &[ThreadId]) {
        for &thread in threads {
            if let Some(known) = self.before.get_mut(&thread) {
                known.exited = true;
            }
        }
    }

    /// The threads whose earlier events the window let go, as they were at its start.
    pub(crate) fn threads_before(&self) -> Vec<WindowThread> {
        self.before.values().copied().collect()
    }

    /// A copy of the window, sorted by timestamp.
    pub(crate) fn sorted(&self) -> Vec<Event> {
        let mut events: Vec<Event> = self.events.iter().copied().collect();
        events.sort_by_key(|event| event.ts_ns);
        events
    }

    /// Events let go so far.
    pub(crate) fn evicted(&self) -> u64 {
        self.evicted
    }
}

/// Events only a pool or engine worker records (the device they name is the thread's home).
pub(crate) fn is_worker_event(kind: EventKind) -> bool {
    matches!(
        kind,
        EventKind::TaskStart
            | EventKind::TaskEnd
            | EventKind::OpStart
            | EventKind::OpEnd
            | EventKind::SpinStart
            | EventKind::SpinEnd
            | EventKind::Park
            | EventKind::Unpark
            | EventKind::Steal
    )
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn at(ts_ns: u64) -> Event {
        Event::default().at(ts_ns)
    }

    fn window(max_events: usize, max_age: Duration) -> TraceWindow {
        TraceWindow::new(WindowOptions {
            max_bytes: max_events * std::mem::size_of::<Event>(),
            max_age,
        })
    }

    fn timestamps(window: &TraceWindow) -> Vec<u64> {
        window.sorted().iter().map(|event| event.ts_ns).collect()
    }

    #[test]
    fn keeps_the_newest_events_within_the_count() {
        let mut window = window(3, Duration::from_secs(100));
        window.extend(&[at(1), at(2)]);
        window.extend(&[at(4), at(3)]);
        assert_eq!(timestamps(&window), [2, 3, 4]);
        window.extend(&[at(5), at(6), at(7), at(8)]);
        assert_eq!(timestamps(&window), [6, 7, 8]);
        assert_eq!(window.evicted(), 5);
    }

    #[test]
    fn lets_old_events_go() {
        let mut window = window(100, Duration::from_nanos(10));
        window.extend(&[at(1), at(5), at(12)]);
        assert_eq!(timestamps(&window), [5, 12]);
        window.extend(&[at(30)]);
        assert_eq!(timestamps(&window), [30]);
        assert_eq!(window.evicted(), 3);
    }

    #[test]
    fn threads_let_go_are_remembered_with_their_state() {
        use crate::profiler::names::DeviceId;
        let device = DeviceId::register("window-test-pool");
        let on = |thread: u32, kind, ts: u64| {
            let mut event = Event::worker_event(kind, device, 0).at(ts);
            event.thread = ThreadId::from_raw(thread);
            event
        };
        let mut window = window(1, Duration::from_secs(100));
        window.extend(&[
            on(1, EventKind::Park, 1),
            on(2, EventKind::Park, 2),
            on(2, EventKind::Unpark, 3),
            on(3, EventKind::TaskStart, 4),
            on(3, EventKind::TaskEnd, 5),
        ]);
        window.threads_exited(&[ThreadId::from_raw(3)]);
        let before = window.threads_before();
        let state: Vec<(u32, bool, bool)> = before
            .iter()
            .map(|known| (known.thread.id(), known.parked, known.exited))
            .collect();
        assert_eq!(
            state,
            [(1, true, false), (2, false, false), (3, false, true)]
        );
        assert!(before.iter().all(|known| known.device == Some(device)));
    }

    #[test]
    fn a_zero_budget_keeps_nothing() {
        let mut window = TraceWindow::new(WindowOptions::none());
        window.extend(&[at(1), at(2)]);
        assert!(window.sorted().is_empty());
    }

    #[test]
    fn the_byte_budget_sets_the_count() {
        let options = WindowOptions {
            max_bytes: 1 << 20,
            max_age: Duration::from_secs(1),
        };
        assert_eq!(options.max_events(), 32_768);
    }
}
