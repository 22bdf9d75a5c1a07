//! Per-worker counters, read at any time without stopping the pool.
//!
//! Each worker owns one cache-padded `WorkerCounters` and is the only thread that bumps it
//! (a relaxed load and store, no read-modify-write on the hot path). Readers take relaxed
//! snapshots: each figure is exact for its own counter, figures of different counters may be a
//! few events apart, which is what a live dashboard needs.
#![forbid(unsafe_code)]

use crate::sync::{AtomicU64, AtomicU8, Ordering};

/// What a worker is doing right now (for the dashboard's state glyphs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerState {
    /// Not started yet, or retired by a resize.
    Idle,
    /// Running a task.
    Running,
    /// Looking for work in other workers' queues.
    Stealing,
    /// The pool's one spinning thread, polling queues before it parks.
    Spinning,
    /// Asleep until notified.
    Parked,
}

impl WorkerState {
    fn from_u8(raw: u8) -> Self {
        match raw {
            1 => Self::Running,
            2 => Self::Stealing,
            3 => Self::Spinning,
            4 => Self::Parked,
            _ => Self::Idle,
        }
    }
}

/// One worker's live counters; written only by that worker.
#[derive(Debug, Default)]
pub(crate) struct WorkerCounters {
    tasks_run: AtomicU64,
    steals: AtomicU64,
    steal_attempts: AtomicU64,
    spins: AtomicU64,
    parks: AtomicU64,
    wakeups: AtomicU64,
    panics: AtomicU64,
    state: AtomicU8,
}

/// Owner-only increment: a relaxed load and store, cheaper than `fetch_add`.
#[inline(always)]
fn bump(counter: &AtomicU64, by: u64) {
    counter.store(counter.load(Ordering::Relaxed) + by, Ordering::Relaxed);
}

impl WorkerCounters {
    #[inline(always)]
    pub(crate) fn task_ran(&self) {
        bump(&self.tasks_run, 1);
    }
    #[inline(always)]
    pub(crate) fn steal_attempted(&self, succeeded: bool) {
        bump(&self.steal_attempts, 1);
        if succeeded {
            bump(&self.steals, 1);
        }
    }
    #[inline(always)]
    pub(crate) fn spun(&self) {
        bump(&self.spins, 1);
    }
    #[inline(always)]
    pub(crate) fn parked(&self) {
        bump(&self.parks, 1);
    }
    #[inline(always)]
    pub(crate) fn woke(&self) {
        bump(&self.wakeups, 1);
    }
    #[inline(always)]
    pub(crate) fn panicked(&self) {
        bump(&self.panics, 1);
    }
    #[inline(always)]
    pub(crate) fn set_state(&self, state: WorkerState) {
        self.state.store(state as u8, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self, index: usize, queue_depth: usize) -> WorkerStats {
        WorkerStats {
            index,
            state: WorkerState::from_u8(self.state.load(Ordering::Relaxed)),
            tasks_run: self.tasks_run.load(Ordering::Relaxed),
            steals: self.steals.load(Ordering::Relaxed),
            steal_attempts: self.steal_attempts.load(Ordering::Relaxed),
            spins: self.spins.load(Ordering::Relaxed),
            parks: self.parks.load(Ordering::Relaxed),
            wakeups: self.wakeups.load(Ordering::Relaxed),
            panics: self.panics.load(Ordering::Relaxed),
            queue_depth,
        }
    }
}

/// A snapshot of one worker's counters.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct WorkerStats {
    /// The worker's index (`current_thread_id()` inside it).
    pub index: usize,
    /// What it was doing when the snapshot was taken.
    pub state: WorkerState,
    /// Tasks it ran to completion (including panicked ones).
    pub tasks_run: u64,
    /// Tasks it took from another worker's queue (or the shared injector).
    pub steals: u64,
    /// Steal attempts, successful or not.
    pub steal_attempts: u64,
    /// Times it became the pool's spinning thread.
    pub spins: u64,
    /// Times it went to sleep.
    pub parks: u64,
    /// Times it was woken from sleep.
    pub wakeups: u64,
    /// Tasks that panicked on it.
    pub panics: u64,
    /// Tasks waiting in its own queue.
    pub queue_depth: usize,
}

/// A snapshot of a whole pool.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PoolStats {
    /// The pool's name (thread names are `<name>-w<i>`).
    pub name: String,
    /// Which implementation runs it.
    pub kind: super::PoolKind,
    /// Active workers now.
    pub num_threads: usize,
    /// One entry per worker slot ever started (retired ones are `Idle`); the first
    /// `num_threads` are the active workers.
    pub workers: Vec<WorkerStats>,
    /// Tasks waiting in queues no worker owns (the shared injector, retired workers' queues).
    pub unowned_queue_depth: usize,
    /// Tasks run on a thread outside the pool (full queue, or a helping waiter).
    pub inline_runs: u64,
    /// Panicked tasks, all workers and helpers together.
    pub panics: u64,
    /// Tasks dropped by `cancel` (queued at the cancel, or scheduled after it).
    pub dropped: u64,
    /// The message of the most recent panic, if any.
    pub last_panic: Option<String>,
}

impl PoolStats {
    /// Tasks waiting anywhere in the pool.
    pub fn queue_depth(&self) -> usize {
        self.unowned_queue_depth + self.workers.iter().map(|w| w.queue_depth).sum::<usize>()
    }

    /// Tasks run by all workers.
    pub fn tasks_run(&self) -> u64 {
        self.workers.iter().map(|w| w.tasks_run).sum()
    }
}
