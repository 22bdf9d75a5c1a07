//! Where every worker's time went: each thread's observed lifetime (or its part of the
//! sliding window) cut into [`Bucket`]s that add up to all of it, per worker and per pool.
//!
//! # Facts
//! The profiler sums each thread's time in cells ([`StateTime`]): what the thread did
//! ([`WorkState`]: an op, a task outside ops, looking for work, spinning, parked, idle)
//! crossed with what work was ready ([`Readiness`]: on the device it works for, on another).
//! `state_times` (test support) builds the same cells from an explicit timeline (worker state segments and
//! spans of ready work per device), the reference the profiler's running sums follow.
//! Besides the cells, each thread's run delay (schedstat: runnable, waiting for a core) over
//! the same time, matched to the worker by thread name.
//!
//! # Rules
//! A cell goes to one bucket, by its state first:
//! - **op**: running an op ([`WorkState::Op`]), whatever is ready.
//! - **intra-op**: running a pool task outside any op ([`WorkState::Task`]): on the intra-op
//!   pool these are the ops' intra-op tasks; on an engine pool, its own tasks between ops.
//! - **stealing**: a pool worker looking for work between tasks.
//! - **spinning**: its pool's spinning thread.
//! - A parked thread, or one outside pools waiting between ops, by the ready work:
//!   - **wake-up**: work was ready on its own device: it slept while work was queued for
//!     it (wake-up latency);
//!   - **ready elsewhere**: none on its device but some on another device or pool: routing
//!     or imbalance keeps it idle;
//!   - **no ready op**: nothing ready anywhere: the graph has no more parallelism now.
//!
//!   The intra-op pool runs only intra-op tasks: ops ready on a device are no work it could
//!   take, so for its threads work elsewhere does not count (their waits are wake-up or no
//!   ready op).
//! - **descheduled**: the thread's run delay. Schedstat says how long, not when, so it is
//!   taken out of the other buckets, split by a second counter, the thread's time on a core.
//!   While recorded awake (op, intra-op, stealing, spinning) a thread is on a core or
//!   waiting for one, so its delay while awake is its awake time less its time on a core;
//!   that much comes out of the awake buckets in proportion to each. The rest of the delay
//!   fell while it was recorded as waiting (a woken thread waits for a core before it
//!   records its wake-up) and comes out of the waiting buckets in proportion. A part the
//!   waiting buckets cannot hold comes out of the awake ones; the whole is capped at the
//!   observed time.
//!
//! The buckets of a thread add up to its observed time; its shares to 1. A pool's shares are
//! its workers' bucket times summed over their summed observed times.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::fmt;

use serde::{Serialize, Serializer};

use crate::device::identity::{PoolId, PoolRole};
use crate::profiler::stats::WorkerSnapshot;
use crate::profiler::{DeviceId, Readiness, Snapshot, StateTime, WorkState, WorkerStates};

use super::schedstat::Descheduled;
use super::span::Scaling;

/// What the dashboard's scaling view shows beside the verdict lines: the last finished
/// iteration's work, span and critical path, and the threads' descheduled time since the
/// previous computation (their run delays, for the attribution).
#[derive(Clone, Debug, PartialEq)]
pub struct LiveScaling {
    /// The last finished iteration.
    pub scaling: Scaling,
    /// The threads' descheduled time, when measured.
    pub descheduled: Option<Descheduled>,
}

/// Where a slice of a worker's time went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Bucket {
    /// Running an op.
    Op,
    /// Running a task outside any op (intra-op tasks).
    IntraOp,
    /// Waiting, with no ready work anywhere.
    NoReadyOp,
    /// Waiting while work was ready on another device or pool.
    ReadyElsewhere,
    /// Looking for work between tasks.
    Stealing,
    /// Spinning.
    Spinning,
    /// Parked while work was ready for it.
    WakeUp,
    /// Runnable, waiting for a core.
    Descheduled,
}

impl Bucket {
    /// Every bucket, in the order bars stack them.
    pub const ALL: [Bucket; 8] = [
        Bucket::Op,
        Bucket::IntraOp,
        Bucket::Stealing,
        Bucket::Spinning,
        Bucket::WakeUp,
        Bucket::ReadyElsewhere,
        Bucket::NoReadyOp,
        Bucket::Descheduled,
    ];

    /// Its name for display (`no ready op`).
    pub fn label(self) -> &'static str {
        match self {
            Bucket::Op => "op",
            Bucket::IntraOp => "intra-op",
            Bucket::NoReadyOp => "no ready op",
            Bucket::ReadyElsewhere => "ready elsewhere",
            Bucket::Stealing => "stealing",
            Bucket::Spinning => "spinning",
            Bucket::WakeUp => "wake-up",
            Bucket::Descheduled => "descheduled",
        }
    }

    fn awake(self) -> bool {
        matches!(
            self,
            Bucket::Op | Bucket::IntraOp | Bucket::Stealing | Bucket::Spinning
        )
    }

    fn index(self) -> usize {
        Bucket::ALL.iter().position(|b| *b == self).unwrap_or(0)
    }
}

/// The bucket of time spent in `state` while `ready` held (the rules in the module docs).
///
/// ```
/// use enginetop::analysis::{bucket, Bucket};
/// use enginetop::profiler::{Readiness, WorkState};
/// let queued_for_it = Readiness { own: true, elsewhere: false };
/// assert_eq!(bucket(WorkState::Parked, queued_for_it), Bucket::WakeUp);
/// assert_eq!(bucket(WorkState::Op, queued_for_it), Bucket::Op);
/// ```
pub fn bucket(state: WorkState, ready: Readiness) -> Bucket {
    match state {
        WorkState::Op => Bucket::Op,
        WorkState::Task => Bucket::IntraOp,
        WorkState::Stealing => Bucket::Stealing,
        WorkState::Spinning => Bucket::Spinning,
        WorkState::Parked | WorkState::Idle if ready.own => Bucket::WakeUp,
        WorkState::Parked | WorkState::Idle if ready.elsewhere => Bucket::ReadyElsewhere,
        WorkState::Parked | WorkState::Idle => Bucket::NoReadyOp,
    }
}

/// A thread's scheduler counters over the attributed time (its schedstat), in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SchedTimes {
    /// Runnable, waiting for a core.
    pub(crate) run_delay_ns: u64,
    /// Running on a core.
    pub(crate) on_cpu_ns: u64,
}

/// Nanoseconds per bucket (in [`Bucket::ALL`] order).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct BucketTimes([f64; 8]);

impl BucketTimes {
    /// `cells` by bucket, with the run delay of `sched` taken out as the module docs say.
    pub(crate) fn of(cells: &[StateTime], sched: SchedTimes) -> Self {
        let mut times = BucketTimes::default();
        for cell in cells {
            times.0[bucket(cell.state, cell.ready).index()] += cell.ns as f64;
        }
        times.take_descheduled(sched);
        times
    }

    fn take_descheduled(&mut self, sched: SchedTimes) {
        let delay = (sched.run_delay_ns as f64).min(self.total());
        let awake = self.sum(Bucket::awake);
        let waiting_bucket = |b: Bucket| !b.awake() && b != Bucket::Descheduled;
        let waiting = self.sum(waiting_bucket);
        let while_awake = (awake - sched.on_cpu_ns as f64).clamp(0.0, delay.min(awake));
        let while_waiting = (delay - while_awake).min(waiting);
        let from_awake = delay - while_waiting;
        self.scale(Bucket::awake, awake, from_awake);
        self.scale(waiting_bucket, waiting, while_waiting);
        self.0[Bucket::Descheduled.index()] += delay;
    }

    fn sum(&self, which: impl Fn(Bucket) -> bool) -> f64 {
        Bucket::ALL
            .iter()
            .filter(|b| which(**b))
            .map(|b| self.0[b.index()])
            .sum()
    }

    /// Takes `taken` out of the buckets `which` selects (summing to `sum`) in proportion.
    fn scale(&mut self, which: impl Fn(Bucket) -> bool, sum: f64, taken: f64) {
        if sum <= 0.0 || taken <= 0.0 {
            return;
        }
        let keep = (sum - taken) / sum;
        for b in Bucket::ALL.into_iter().filter(|b| which(*b)) {
            self.0[b.index()] *= keep;
        }
    }

    /// Nanoseconds in `bucket`.
    pub(crate) fn get(&self, bucket: Bucket) -> f64 {
        self.0[bucket.index()]
    }

    /// All of them: the observed time.
    pub(crate) fn total(&self) -> f64 {
        self.0.iter().sum()
    }

    fn add(&mut self, other: &BucketTimes) {
        for (sum, ns) in self.0.iter_mut().zip(other.0) {
            *sum += ns;
        }
    }

    /// Each bucket's share of the total, the empty ones left out.
    pub(crate) fn shares(&self) -> BTreeMap<Bucket, f64> {
        let total = self.total();
        Bucket::ALL
            .iter()
            .filter(|b| total > 0.0 && self.get(**b) > 0.0)
            .map(|b| (*b, self.get(*b) / total))
            .collect()
    }
}

#[cfg(all(test, not(loom)))]
/// A worker's state from `from` to `to` (ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Segment {
    /// Its start.
    pub(crate) from: u64,
    /// Its end.
    pub(crate) to: u64,
    /// What the worker did.
    pub(crate) state: WorkState,
}

#[cfg(all(test, not(loom)))]
/// Work ready on device `device` from `from` to `to` (ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReadySpan {
    /// Its start.
    pub(crate) from: u64,
    /// Its end.
    pub(crate) to: u64,
    /// The device (any index the caller chooses).
    pub(crate) device: usize,
}

#[cfg(all(test, not(loom)))]
/// The cells of a worker of device `device` living through `segments`, with work ready as
/// `ready` says: each segment cut where readiness changes.
pub(crate) fn state_times(
    device: usize,
    segments: &[Segment],
    ready: &[ReadySpan],
) -> Vec<StateTime> {
    let mut cells: Vec<StateTime> = Vec::new();
    for segment in segments {
        let mut cuts: Vec<u64> = ready
            .iter()
            .flat_map(|span| [span.from, span.to])
            .filter(|&t| t > segment.from && t < segment.to)
            .chain([segment.from, segment.to])
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        for piece in cuts.windows(2) {
            let at = piece[0];
            let covers = |span: &&ReadySpan| span.from <= at && at < span.to;
            let readiness = Readiness {
                own: ready
                    .iter()
                    .filter(covers)
                    .any(|span| span.device == device),
                elsewhere: ready
                    .iter()
                    .filter(covers)
                    .any(|span| span.device != device),
            };
            add_cell(&mut cells, segment.state, readiness, piece[1] - at);
        }
    }
    cells
}

#[cfg(all(test, not(loom)))]
fn add_cell(cells: &mut Vec<StateTime>, state: WorkState, ready: Readiness, ns: u64) {
    match cells
        .iter_mut()
        .find(|c| c.state == state && c.ready == ready)
    {
        Some(cell) => cell.ns += ns,
        None => cells.push(StateTime { state, ready, ns }),
    }
}

/// The pool a worker's time is attributed to: its typed pool when the profiler knows the
/// worker's device and role, else the profiler device it records on (a demo's named device).
/// Workers are listed in this order: typed pools by device and role (the dashboard's row
/// order), then named devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WorkerPool {
    /// A pool of a typed device (`cpu0 workers`).
    Pool(PoolId),
    /// A profiler device with no typed identity, shown by its name.
    Device(DeviceId),
}

impl WorkerPool {
    /// The pool of `worker`, a thread with a device.
    fn of(worker: &WorkerSnapshot, device: DeviceId) -> WorkerPool {
        match (device.device(), worker.role) {
            (Some(typed), Some(role)) => WorkerPool::Pool(PoolId::new(typed, role)),
            _ => WorkerPool::Device(device),
        }
    }
}

impl fmt::Display for WorkerPool {
    /// `cpu0 workers`, or a named device's name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkerPool::Pool(pool) => pool.fmt(f),
            WorkerPool::Device(device) => f.write_str(device.name()),
        }
    }
}

impl Serialize for WorkerPool {
    /// As it displays: JSON readers get the same name as the summary's lines.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// One worker's attribution.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerAttribution {
    /// Its pool.
    pub pool: WorkerPool,
    /// Its index in the pool, if it is a pool worker.
    pub index: Option<u32>,
    /// Its thread's name.
    pub thread: String,
    /// The time attributed, in milliseconds.
    pub observed_ms: f64,
    /// Bucket -> share of that time (empty buckets left out).
    pub shares: BTreeMap<Bucket, f64>,
    times: BucketTimes,
}

impl WorkerAttribution {
    /// The worker for display: its thread's name (`cpu0-w1`), as the timeline's rows and
    /// the verdicts name it.
    pub fn label(&self) -> String {
        self.thread.clone()
    }
}

impl Serialize for WorkerAttribution {
    /// `worker` (its [`label`](WorkerAttribution::label)), `pool`, `index`, `thread`,
    /// `observed_ms`, `shares`.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Shown<'a> {
            worker: String,
            pool: WorkerPool,
            index: Option<u32>,
            thread: &'a str,
            observed_ms: f64,
            shares: &'a BTreeMap<Bucket, f64>,
        }
        Shown {
            worker: self.label(),
            pool: self.pool,
            index: self.index,
            thread: &self.thread,
            observed_ms: self.observed_ms,
            shares: &self.shares,
        }
        .serialize(serializer)
    }
}

/// One pool's attribution: its workers' together.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PoolAttribution {
    /// The pool.
    pub pool: WorkerPool,
    /// Workers seen.
    pub workers: usize,
    /// Bucket -> share of their summed time.
    pub shares: BTreeMap<Bucket, f64>,
}

/// Where every worker's time went, per worker and per pool.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Attribution {
    /// Per worker, by pool and index.
    pub workers: Vec<WorkerAttribution>,
    /// Per pool, in the workers' order.
    pub pools: Vec<PoolAttribution>,
}

/// Over what time a snapshot's cells are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Period<'a> {
    /// The sliding window.
    Window,
    /// Each thread's lifetime since the start.
    Run,
    /// Each thread's time since the cells `before` were read: its cells since the start
    /// less those (a run's time, when `before` is read at its start). A thread whose cells
    /// shrank since was reset with the statistics: its cells count from the reset.
    Since(&'a [WorkerStates]),
}

/// `now`'s cells less `before`'s, cell by cell; `now` itself when `before` holds more time
/// than `now` (the statistics were reset in between).
fn cells_since(now: &[StateTime], before: Option<&WorkerStates>) -> Vec<StateTime> {
    let Some(before) = before else {
        return now.to_vec();
    };
    let total = |cells: &[StateTime]| cells.iter().map(|c| c.ns).sum::<u64>();
    if total(&before.since_start) > total(now) {
        return now.to_vec();
    }
    now.iter()
        .map(|cell| {
            let earlier = before
                .since_start
                .iter()
                .find(|b| b.state == cell.state && b.ready == cell.ready)
                .map_or(0, |b| b.ns);
            StateTime {
                ns: cell.ns.saturating_sub(earlier),
                ..*cell
            }
        })
        .filter(|cell| cell.ns > 0)
        .collect()
}

/// `name`'s scheduler counters in `delays` (threads are matched by name, the kernel's kept
/// to 15 bytes), times `scale`; zero when not measured.
fn sched_times(name: &str, delays: Option<&Descheduled>, scale: f64) -> SchedTimes {
    let kernel_name = name.get(..15).unwrap_or(name);
    delays
        .and_then(|d| d.per_thread.iter().find(|t| t.thread == kernel_name))
        .map_or(SchedTimes::default(), |t| SchedTimes {
            run_delay_ns: (t.run_delay_ms * 1e6 * scale) as u64,
            on_cpu_ns: (t.on_cpu_ms * 1e6 * scale) as u64,
        })
}

/// What the counters of `delays` are multiplied by to cover `observed_ns` of a thread's
/// time in `period`: that time over theirs for the sliding window (the dashboard measures
/// them over the time since its previous computation, not over the window: their rates
/// carry over), 1 otherwise (the caller measured them over the same time as the cells).
fn sched_scale(period: Period<'_>, delays: Option<&Descheduled>, observed_ns: f64) -> f64 {
    match (period, delays) {
        (Period::Window, Some(d)) if d.window_ms > 0.0 => observed_ns / (d.window_ms * 1e6),
        _ => 1.0,
    }
}

/// The attribution of `snapshot`'s workers (the threads with a device) over `period`, with
/// the threads' run delays over the same time from `delays` when measured.
pub(crate) fn attribute(
    snapshot: &Snapshot,
    period: Period<'_>,
    delays: Option<&Descheduled>,
) -> Attribution {
    let states: BTreeMap<u32, &WorkerStates> =
        snapshot.work_states.iter().map(|s| (s.thread, s)).collect();
    let mut workers: Vec<WorkerAttribution> = snapshot
        .workers
        .iter()
        .filter_map(|worker| {
            let device = worker.device?;
            let cells = states.get(&worker.thread)?;
            let cells = match period {
                Period::Window => cells.window.clone(),
                Period::Run => cells.since_start.clone(),
                Period::Since(before) => cells_since(
                    &cells.since_start,
                    before.iter().find(|b| b.thread == worker.thread),
                ),
            };
            let intra_op = worker.role == Some(PoolRole::IntraOp);
            let cells: Vec<StateTime> = cells
                .into_iter()
                .map(|cell| StateTime {
                    ready: Readiness {
                        elsewhere: cell.ready.elsewhere && !intra_op,
                        ..cell.ready
                    },
                    ..cell
                })
                .collect();
            let times = {
                let observed = cells.iter().map(|cell| cell.ns as f64).sum();
                let scale = sched_scale(period, delays, observed);
                BucketTimes::of(&cells, sched_times(&worker.name, delays, scale))
            };
            (times.total() > 0.0).then(|| WorkerAttribution {
                pool: WorkerPool::of(worker, device),
                index: worker.worker,
                thread: worker.name.clone(),
                observed_ms: times.total() / 1e6,
                shares: times.shares(),
                times,
            })
        })
        .collect();
    workers.sort_by(|a, b| (a.pool, a.index, &a.thread).cmp(&(b.pool, b.index, &b.thread)));
    let pools = pools(&workers);
    Attribution { workers, pools }
}

fn pools(workers: &[WorkerAttribution]) -> Vec<PoolAttribution> {
    let mut pools: Vec<(WorkerPool, usize, BucketTimes)> = Vec::new();
    for worker in workers {
        match pools.iter_mut().find(|(pool, ..)| *pool == worker.pool) {
            Some((_, count, times)) => {
                *count += 1;
                times.add(&worker.times);
            }
            None => pools.push((worker.pool, 1, worker.times)),
        }
    }
    pools
        .into_iter()
        .map(|(pool, workers, times)| PoolAttribution {
            pool,
            workers,
            shares: times.shares(),
        })
        .collect()
}

impl std::fmt::Display for Attribution {
    /// The summary's per-pool lines: each pool's buckets, the largest first.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.pools.is_empty() {
            return Ok(());
        }
        writeln!(
            f,
            "  where the workers' time went (per pool, over the run; descheduled is taken out of \
             the others, ops' included):"
        )?;
        for pool in &self.pools {
            let mut shares: Vec<(&Bucket, &f64)> = pool.shares.iter().collect();
            shares.sort_by(|a, b| b.1.total_cmp(a.1));
            let shares: Vec<String> = shares
                .iter()
                .filter(|(_, share)| **share >= 0.005)
                .map(|(bucket, share)| format!("{} {:.0}%", bucket.label(), *share * 100.0))
                .collect();
            let workers = match pool.workers {
                1 => "1 thread".to_string(),
                n => format!("{n} threads"),
            };
            writeln!(f, "    {} ({workers}): {}", pool.pool, shares.join(", "))?;
        }
        Ok(())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::analysis::ThreadDelay;
    use crate::device::identity::{Device, PoolRole};
    use crate::profiler::stats::{Activity, Shares};
    use crate::profiler::DeviceId;

    const MS: u64 = 1_000_000;

    fn segment(from: u64, to: u64, state: WorkState) -> Segment {
        Segment {
            from: from * MS,
            to: to * MS,
            state,
        }
    }

    fn ready(from: u64, to: u64, device: usize) -> ReadySpan {
        ReadySpan {
            from: from * MS,
            to: to * MS,
            device,
        }
    }

    fn share(times: &BucketTimes, bucket: Bucket) -> f64 {
        times.shares().get(&bucket).copied().unwrap_or(0.0)
    }

    fn close(actual: f64, expected: f64) {
        assert!((actual - expected).abs() < 1e-9, "{actual} != {expected}");
    }

    /// A worker of device 0 runs 0-200 ms, steals 200-250, parks 250-1000; work is ready on
    /// device 0 from 400 to 500 ms and on device 1 from 700 to 1000 ms.
    fn known_timeline() -> Vec<StateTime> {
        let segments = [
            segment(0, 200, WorkState::Op),
            segment(200, 250, WorkState::Stealing),
            segment(250, 1000, WorkState::Parked),
        ];
        state_times(0, &segments, &[ready(400, 500, 0), ready(700, 1000, 1)])
    }

    #[test]
    fn parked_while_its_queue_held_work_is_wake_up_latency() {
        let times = BucketTimes::of(&known_timeline(), SchedTimes::default());
        close(share(&times, Bucket::WakeUp), 0.1);
        close(share(&times, Bucket::Op), 0.2);
        close(share(&times, Bucket::Stealing), 0.05);
    }

    #[test]
    fn idle_while_another_pools_queue_held_work_is_ready_elsewhere() {
        let times = BucketTimes::of(&known_timeline(), SchedTimes::default());
        close(share(&times, Bucket::ReadyElsewhere), 0.3);
        close(share(&times, Bucket::NoReadyOp), 0.35);
        close(times.shares().values().sum(), 1.0);
        close(times.total(), 1000.0 * MS as f64);
    }

    fn sched(run_delay_ms: u64, on_cpu_ms: u64) -> SchedTimes {
        SchedTimes {
            run_delay_ns: run_delay_ms * MS,
            on_cpu_ns: on_cpu_ms * MS,
        }
    }

    #[test]
    fn descheduled_time_while_awake_is_awake_time_not_on_a_core() {
        // 250 ms awake (op 200, stealing 50), 170 of them on a core: 80 ms of the 100 ms
        // run delay fell while awake (64 from op, 16 from stealing), 20 while waiting.
        let times = BucketTimes::of(&known_timeline(), sched(100, 170));
        close(share(&times, Bucket::Descheduled), 0.1);
        close(share(&times, Bucket::Op), 0.2 - 0.064);
        close(share(&times, Bucket::Stealing), 0.05 - 0.016);
        close(share(&times, Bucket::WakeUp), 0.1 - 0.02 * 0.1 / 0.75);
        close(times.shares().values().sum(), 1.0);
        // On a core all its awake time: the whole delay fell while it waited (woken, not
        // yet running), and its awake buckets keep their time.
        let times = BucketTimes::of(&known_timeline(), sched(100, 250));
        close(share(&times, Bucket::Op), 0.2);
        close(share(&times, Bucket::Stealing), 0.05);
        close(share(&times, Bucket::WakeUp), 0.1 - 0.1 * 0.1 / 0.75);
        close(times.shares().values().sum(), 1.0);
        // Never more than the observed time.
        let times = BucketTimes::of(&known_timeline(), sched(5_000, 0));
        close(share(&times, Bucket::Descheduled), 1.0);
    }

    #[test]
    fn a_mostly_parked_thread_keeps_its_task_time_when_woken_late() {
        // An intra-op worker: tasks 100 ms, parked 900 ms, on a core 100 ms, 80 ms run
        // delay, all of it waiting to run after a wake-up.
        let segments = [
            segment(0, 100, WorkState::Task),
            segment(100, 1000, WorkState::Parked),
        ];
        let times = BucketTimes::of(&state_times(0, &segments, &[]), sched(80, 100));
        close(share(&times, Bucket::IntraOp), 0.1);
        close(share(&times, Bucket::Descheduled), 0.08);
        close(share(&times, Bucket::NoReadyOp), 0.82);
        // More delay than the waiting time holds: the rest comes out of the awake time.
        let times = BucketTimes::of(&state_times(0, &segments, &[]), sched(950, 100));
        close(share(&times, Bucket::NoReadyOp), 0.0);
        close(share(&times, Bucket::IntraOp), 0.05);
        close(times.shares().values().sum(), 1.0);
    }

    #[test]
    fn every_cell_has_one_bucket_by_the_rules() {
        let ready = |own, elsewhere| Readiness { own, elsewhere };
        for (own, elsewhere) in [(false, false), (true, false), (false, true), (true, true)] {
            let r = ready(own, elsewhere);
            assert_eq!(bucket(WorkState::Op, r), Bucket::Op);
            assert_eq!(bucket(WorkState::Task, r), Bucket::IntraOp);
            assert_eq!(bucket(WorkState::Stealing, r), Bucket::Stealing);
            assert_eq!(bucket(WorkState::Spinning, r), Bucket::Spinning);
        }
        for waiting in [WorkState::Parked, WorkState::Idle] {
            assert_eq!(bucket(waiting, ready(true, true)), Bucket::WakeUp);
            assert_eq!(bucket(waiting, ready(false, true)), Bucket::ReadyElsewhere);
            assert_eq!(bucket(waiting, ready(false, false)), Bucket::NoReadyOp);
        }
    }

    /// `thread`'s run delay and time on a core over a window of `window_ms`: the only
    /// thread measured, on one core.
    fn one_thread_delay(
        thread: &str,
        window_ms: f64,
        on_cpu_ms: f64,
        delay_ms: f64,
    ) -> Descheduled {
        let share = delay_ms / window_ms;
        Descheduled {
            window_ms,
            threads: 1,
            cores: 1,
            share,
            per_thread: vec![ThreadDelay {
                thread: thread.into(),
                on_cpu_ms,
                run_delay_ms: delay_ms,
                share,
            }],
        }
    }

    fn worker(thread: u32, index: u32, device: DeviceId) -> WorkerSnapshot {
        WorkerSnapshot {
            thread,
            name: format!("attr-w{index}"),
            device: Some(device),
            role: Some(PoolRole::CpuWorker),
            worker: Some(index),
            activity: Activity::Parked,
            shares: Shares::default(),
            shares_since_start: Shares::default(),
            lifetime_ns: 0,
            exited: false,
            tasks: 0,
            ops: 0,
            steals: 0,
            current_op: None,
        }
    }

    #[test]
    fn a_snapshot_attributes_per_worker_and_per_pool() {
        let cpu = DeviceId::of(Device::Cpu(7));
        let cells = |thread, since_start| WorkerStates {
            thread,
            window: Vec::new(),
            since_start,
        };
        let busy = state_times(0, &[segment(0, 1000, WorkState::Op)], &[]);
        let snapshot = Snapshot {
            workers: vec![worker(31, 1, cpu), worker(30, 0, cpu)],
            work_states: vec![cells(30, known_timeline()), cells(31, busy)],
            ..Snapshot::default()
        };
        let delays = one_thread_delay("attr-w1", 1000.0, 900.0, 100.0);
        let attribution = attribute(&snapshot, Period::Run, Some(&delays));
        let names: Vec<String> = attribution
            .workers
            .iter()
            .map(WorkerAttribution::label)
            .collect();
        assert_eq!(names, ["attr-w0", "attr-w1"]);
        let one = &attribution.workers[1].shares;
        close(one[&Bucket::Op], 0.9);
        close(one[&Bucket::Descheduled], 0.1);
        assert!(attribute(&snapshot, Period::Window, None)
            .workers
            .is_empty());
        let pool = &attribution.pools[0];
        let cpu7 = PoolId::new(Device::Cpu(7), PoolRole::CpuWorker);
        assert_eq!((pool.pool, pool.workers), (WorkerPool::Pool(cpu7), 2));
        assert_eq!(pool.pool.to_string(), "cpu7 workers");
        close(pool.shares[&Bucket::Op], (200.0 + 900.0) / 2000.0);
        close(pool.shares[&Bucket::WakeUp], 100.0 / 2000.0);
        close(pool.shares.values().sum(), 1.0);
        let json = serde_json::to_value(&attribution).unwrap();
        assert_eq!(json["workers"][1]["worker"], "attr-w1");
        assert_eq!(json["workers"][1]["pool"], "cpu7 workers");
        assert_eq!(json["workers"][1]["thread"], "attr-w1");
        assert_eq!(json["pools"][0]["pool"], "cpu7 workers");
    }

    /// A run's attribution counts from the cells read at its start: time before it is not
    /// the run's, and its run delays (measured over the run) fall on the run's time alone.
    #[test]
    fn since_the_run_start_attributes_the_run_alone() {
        let cpu = DeviceId::of(Device::Cpu(7));
        let before = WorkerStates {
            thread: 30,
            window: Vec::new(),
            since_start: state_times(0, &[segment(0, 1000, WorkState::Parked)], &[]),
        };
        let now = WorkerStates {
            thread: 30,
            window: Vec::new(),
            since_start: state_times(
                0,
                &[
                    segment(0, 1000, WorkState::Parked),
                    segment(1000, 1800, WorkState::Op),
                    segment(1800, 2000, WorkState::Parked),
                ],
                &[],
            ),
        };
        let snapshot = Snapshot {
            workers: vec![worker(30, 0, cpu)],
            work_states: vec![now],
            ..Snapshot::default()
        };
        let delays = one_thread_delay("attr-w0", 1000.0, 600.0, 200.0);
        let run = attribute(
            &snapshot,
            Period::Since(std::slice::from_ref(&before)),
            Some(&delays),
        );
        let worker = &run.workers[0];
        close(worker.observed_ms, 1000.0);
        close(worker.shares[&Bucket::Op], 0.6);
        close(worker.shares[&Bucket::Descheduled], 0.2);
        close(worker.shares[&Bucket::NoReadyOp], 0.2);
        // Over the lifetime the same delays are a smaller share of more time.
        let lifetime = attribute(&snapshot, Period::Run, Some(&delays));
        close(lifetime.workers[0].observed_ms, 2000.0);
        close(lifetime.workers[0].shares[&Bucket::Descheduled], 0.1);
        // Cells that shrank were reset since: they count from the reset, as they are.
        let reset = WorkerStates {
            since_start: state_times(0, &[segment(0, 3000, WorkState::Parked)], &[]),
            ..before
        };
        let after_reset = attribute(&snapshot, Period::Since(&[reset]), None);
        close(after_reset.workers[0].observed_ms, 2000.0);
    }

    /// The dashboard's run delays cover the time since its previous computation; over the
    /// window they count at the same rate.
    #[test]
    fn window_delays_count_at_their_rate_over_the_window() {
        let cpu = DeviceId::of(Device::Cpu(7));
        let snapshot = Snapshot {
            workers: vec![worker(30, 0, cpu)],
            work_states: vec![WorkerStates {
                thread: 30,
                window: state_times(0, &[segment(0, 1000, WorkState::Op)], &[]),
                since_start: Vec::new(),
            }],
            ..Snapshot::default()
        };
        let delays = one_thread_delay("attr-w0", 2000.0, 1500.0, 500.0);
        let window = attribute(&snapshot, Period::Window, Some(&delays));
        close(window.workers[0].shares[&Bucket::Descheduled], 0.25);
        close(window.workers[0].shares[&Bucket::Op], 0.75);
    }

    #[test]
    fn typed_pools_list_in_row_order_before_named_devices() {
        let cells = |thread| WorkerStates {
            thread,
            window: Vec::new(),
            since_start: state_times(0, &[segment(0, 10, WorkState::Op)], &[]),
        };
        let mut prio = worker(40, 0, DeviceId::of(Device::Cpu(7)));
        prio.role = Some(PoolRole::CpuPriority);
        let mut named = worker(41, 0, DeviceId::register("attr-demo"));
        named.worker = None;
        let snapshot = Snapshot {
            workers: vec![named, prio, worker(42, 0, DeviceId::of(Device::Cpu(7)))],
            work_states: vec![cells(40), cells(41), cells(42)],
            ..Snapshot::default()
        };
        let attribution = attribute(&snapshot, Period::Run, None);
        let order: Vec<String> = attribution
            .workers
            .iter()
            .map(|w| w.pool.to_string())
            .collect();
        assert_eq!(order, ["cpu7 workers", "cpu priority", "attr-demo"]);
        let pools: Vec<String> = attribution
            .pools
            .iter()
            .map(|p| p.pool.to_string())
            .collect();
        assert_eq!(pools, ["cpu7 workers", "cpu priority", "attr-demo"]);
    }
}
