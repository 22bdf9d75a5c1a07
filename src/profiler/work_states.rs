//! What each worker did against the work that was ready: the facts the scaling analysis
//! attributes a worker's time from (`crate::analysis`'s attribution holds the rules).
//!
//! # Cells
//! Per recording thread, time is summed in cells: the thread's [`WorkState`] crossed with the
//! [`Readiness`] of work at that moment, over the sliding window and since the start (a
//! `StateTimeline` of `6 x 4` states, so both add up to the thread's observed time exactly,
//! as its activity shares do).
//!
//! - **State**: the thread's activity (see [`Stats`](super::stats::Stats)), with running
//!   split in two: [`WorkState::Op`] while an op it started has not ended (a task around or
//!   inside it included), [`WorkState::Task`] while it runs a pool task outside any op.
//! - **Ready work of a device**: on a device that ops are queued on, an op queued and not
//!   started yet (`OpQueued` minus `OpStart` on that device: exact); on a device without
//!   ops (the intra-op pool), a task in one of its queues at the latest `QueueDepth` sample
//!   (its queues are sampled, not counted: this fact changes at the samples, and an engine
//!   device's sampled queues would only say later and coarser what its op counts say).
//!   The op count is signed: the collector drains one thread at a time, so an op's start
//!   may be counted before its queueing on another thread; the count is right again once
//!   both are in.
//! - **Readiness of a thread**: `own` when the device it works for has ready work,
//!   `elsewhere` when another device has.
//!
//! A thread's cell changes when its state changes or when any device's readiness flips
//! (between none and some ready work); a flip recomputes every thread's cell, so the cost is
//! per flip and per thread, never per event and per thread.
//!
//! # Order of facts
//! The collector drains one thread's ring at a time, so facts from different threads arrive
//! a little out of order. A fact older than the start of a thread's current cell counts from
//! that start: cells never go back in time, and their sum stays the thread's lifetime.
#![forbid(unsafe_code)]

use super::names::DeviceId;
use super::timeline::{Buckets, StateTimeline};

/// What a thread is doing, finer than its activity: an op or a task outside any op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkState {
    /// Running an op (tasks it runs inside the op included).
    Op,
    /// Running a pool task outside any op (an intra-op task, a pool's own task).
    Task,
    /// A pool worker looking for work between tasks.
    Stealing,
    /// Its pool's spinning thread.
    Spinning,
    /// Asleep.
    Parked,
    /// A thread outside pools between ops (it waits without saying so), or exited.
    Idle,
}

impl WorkState {
    /// Every state, in cell order.
    pub const ALL: [WorkState; 6] = [
        WorkState::Op,
        WorkState::Task,
        WorkState::Stealing,
        WorkState::Spinning,
        WorkState::Parked,
        WorkState::Idle,
    ];
}

/// Whether work was ready for a thread (on its device) and elsewhere (on another).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Readiness {
    /// The device it works for had ready work.
    pub own: bool,
    /// Another device had ready work.
    pub elsewhere: bool,
}

/// Cells per thread: every state with every readiness.
pub(crate) const CELLS: usize = 24;

/// `state`'s index in [`WorkState::ALL`] (its declaration order, checked below).
const fn state_index(state: WorkState) -> usize {
    state as usize
}

const _: () = {
    let mut index = 0;
    while index < WorkState::ALL.len() {
        assert!(
            state_index(WorkState::ALL[index]) == index,
            "WorkState::ALL is in declaration order"
        );
        index += 1;
    }
};

#[inline]
fn cell_index(state: WorkState, ready: Readiness) -> usize {
    state_index(state) * 4 + usize::from(ready.own) * 2 + usize::from(ready.elsewhere)
}

fn cell_of(index: usize) -> (WorkState, Readiness) {
    let ready = Readiness {
        own: index & 2 != 0,
        elsewhere: index & 1 != 0,
    };
    (WorkState::ALL[(index / 4).min(5)], ready)
}

/// Time in one cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct StateTime {
    /// What the thread did.
    pub state: WorkState,
    /// What work was ready meanwhile.
    pub ready: Readiness,
    /// For how long, in nanoseconds.
    pub ns: u64,
}

/// One thread's cells, over the window and since the start (the cells it spent time in).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct WorkerStates {
    /// Its thread id (as in [`WorkerSnapshot::thread`](super::stats::WorkerSnapshot)).
    pub thread: u32,
    /// Over the sliding window.
    pub window: Vec<StateTime>,
    /// Since the start (or the last reset), up to its exit: its lifetime.
    pub since_start: Vec<StateTime>,
}

fn state_times(totals: [u64; CELLS]) -> Vec<StateTime> {
    totals
        .iter()
        .enumerate()
        .filter(|&(_, &ns)| ns > 0)
        .map(|(index, &ns)| {
            let (state, ready) = cell_of(index);
            StateTime { state, ready, ns }
        })
        .collect()
}

/// One thread's cell timeline.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Cells {
    pub(crate) timeline: StateTimeline<CELLS>,
    /// The latest time a cell was entered (older facts count from it).
    last: u64,
}

impl Cells {
    pub(crate) fn new(geometry: Buckets) -> Self {
        Cells {
            timeline: StateTimeline::new(geometry),
            last: 0,
        }
    }

    /// A fresh timeline in this one's cell since `now` (a reset).
    pub(crate) fn restarted(timeline: StateTimeline<CELLS>, now: u64) -> Self {
        Cells {
            timeline,
            last: now,
        }
    }

    /// The thread is in `state` with `ready` as of `ts` (or its latest cell's start).
    #[inline(always)]
    pub(crate) fn set(&mut self, state: WorkState, ready: Readiness, ts: u64) {
        let index = cell_index(state, ready);
        if self.timeline.state() == Some(index) {
            return;
        }
        self.last = self.last.max(ts);
        self.timeline.enter(index, self.last);
    }

    /// The thread exited at `ts`.
    pub(crate) fn end(&mut self, ts: u64) {
        let index = self
            .timeline
            .state()
            .unwrap_or(cell_index(WorkState::Idle, Readiness::default()));
        self.last = self.last.max(ts);
        self.timeline.end(index, self.last);
    }

    /// The cells over the window at `now` and since the start.
    pub(crate) fn snapshot(&self, thread: u32, now: u64) -> WorkerStates {
        WorkerStates {
            thread,
            window: state_times(self.timeline.totals(now)),
            since_start: state_times(self.timeline.totals_since_start(now)),
        }
    }
}

/// One device's ready work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct DeviceWork {
    /// Ops queued minus ops started.
    ops: i64,
    /// Whether any op was queued on it: then its ops say whether work is ready.
    has_ops: bool,
    /// Tasks in its queues at the latest samples.
    tasks: u64,
}

impl DeviceWork {
    fn ready(self) -> bool {
        match self.has_ops {
            true => self.ops > 0,
            false => self.tasks > 0,
        }
    }
}

/// Ready work per device: ops queued and not started, tasks at the latest queue sample.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct ReadyWork {
    /// Indexed by device id.
    devices: Vec<DeviceWork>,
    /// Devices with ready work.
    busy: usize,
}

impl ReadyWork {
    /// Applies `change` to `device`'s counts; whether its readiness flipped.
    #[inline]
    fn update(&mut self, device: DeviceId, change: impl FnOnce(&mut DeviceWork)) -> bool {
        let index = usize::from(device.id());
        if self.devices.len() <= index {
            self.devices.resize(index + 1, DeviceWork::default());
        }
        let counts = &mut self.devices[index];
        let before = counts.ready();
        change(counts);
        let after = counts.ready();
        match (before, after) {
            (false, true) => self.busy += 1,
            (true, false) => self.busy -= 1,
            _ => return false,
        }
        true
    }

    /// An op was queued on `device`; whether its readiness flipped.
    /// The same counts under the ids `map` gives the devices (a checkpoint's, restored).
    pub(crate) fn remap(&mut self, mut map: impl FnMut(DeviceId) -> DeviceId) {
        let old = std::mem::take(&mut self.devices);
        for (index, counts) in old.into_iter().enumerate() {
            if counts == DeviceWork::default() {
                continue;
            }
            let index = usize::from(map(DeviceId::from_raw(index as u16)).id());
            if self.devices.len() <= index {
                self.devices.resize(index + 1, DeviceWork::default());
            }
            self.devices[index] = counts;
        }
    }

    #[inline]
    pub(crate) fn op_queued(&mut self, device: DeviceId) -> bool {
        self.update(device, |counts| {
            counts.ops += 1;
            counts.has_ops = true;
        })
    }

    /// An op started on `device`.
    #[inline]
    pub(crate) fn op_started(&mut self, device: DeviceId) -> bool {
        self.update(device, |counts| counts.ops -= 1)
    }

    /// `device`'s queues held `tasks` at their latest samples.
    pub(crate) fn tasks_sampled(&mut self, device: DeviceId, tasks: u64) -> bool {
        self.update(device, |counts| counts.tasks = tasks)
    }

    /// What is ready for a thread working for `device` (`None`: no device).
    #[inline]
    pub(crate) fn readiness(&self, device: Option<DeviceId>) -> Readiness {
        let own = device
            .and_then(|device| self.devices.get(usize::from(device.id())))
            .is_some_and(|counts| counts.ready());
        Readiness {
            own,
            elsewhere: self.busy > usize::from(own),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn cells_round_trip() {
        for state in WorkState::ALL {
            for (own, elsewhere) in [(false, false), (false, true), (true, false), (true, true)] {
                let ready = Readiness { own, elsewhere };
                assert_eq!(cell_of(cell_index(state, ready)), (state, ready));
            }
        }
    }

    #[test]
    fn readiness_counts_ops_and_sampled_tasks_per_device() {
        let (a, b) = (DeviceId::from_raw(1), DeviceId::from_raw(2));
        let mut ready = ReadyWork::default();
        assert_eq!(ready.readiness(Some(a)), Readiness::default());
        assert!(ready.op_queued(a));
        assert!(!ready.op_queued(a));
        let both = |own, elsewhere| Readiness { own, elsewhere };
        assert_eq!(ready.readiness(Some(a)), both(true, false));
        assert_eq!(ready.readiness(Some(b)), both(false, true));
        assert_eq!(ready.readiness(None), both(false, true));
        assert!(!ready.op_started(a));
        assert!(ready.op_started(a));
        // A start counted before its queueing (another thread's batch came first).
        assert!(!ready.op_started(a));
        assert!(
            !ready.op_queued(a),
            "the count is even again, nothing ready"
        );
        assert!(ready.tasks_sampled(b, 3));
        assert_eq!(ready.readiness(Some(a)), both(false, true));
        assert!(ready.tasks_sampled(b, 0));
        assert_eq!(ready.readiness(Some(b)), Readiness::default());
        // An op device's sampled tasks say nothing its op count does not.
        assert!(!ready.tasks_sampled(a, 5));
        assert_eq!(ready.readiness(Some(a)), Readiness::default());
    }

    #[test]
    fn an_older_fact_counts_from_the_current_cells_start() {
        let geometry = Buckets {
            bucket_ns: 1_000,
            count: 10,
        };
        let mut cells = Cells::new(geometry);
        let idle = Readiness::default();
        cells.set(WorkState::Parked, idle, 100);
        cells.set(WorkState::Op, idle, 500);
        cells.set(WorkState::Stealing, idle, 300); // late: counts from 500
        let states = cells.snapshot(1, 900);
        let ns = |state| {
            states
                .since_start
                .iter()
                .find(|time| time.state == state)
                .map_or(0, |time| time.ns)
        };
        assert_eq!(ns(WorkState::Parked), 400);
        assert_eq!(ns(WorkState::Op), 0);
        assert_eq!(ns(WorkState::Stealing), 400);
        let total: u64 = states.since_start.iter().map(|time| time.ns).sum();
        assert_eq!(total, 800);
    }
}
