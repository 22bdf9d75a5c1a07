//! A pool of GPU worker threads, each owning a [`Lane`]: the [priority worker
//! pool](crate::device::priority) with a lane per worker (see the [module docs](super)).
#![forbid(unsafe_code)]

// std's `Arc`: handles to trait objects, which loom's `Arc` cannot coerce to `dyn`.
use std::sync::Arc;

use super::{GpuRole, Lane, CURRENT_LANE};
use crate::device::identity::{Device, PoolId};
use crate::device::priority::{PriorityWorkers, WorkerOwns};
use crate::device::stream::{GpuDevice, StreamError};
use crate::pool::{PoolError, PoolObserver, Task};

/// A live view of one GPU pool.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct GpuPoolStats {
    /// `gpu<d>-<role>`; threads are `<name>-<k>`.
    pub name: String,
    /// The pool's role.
    pub role: GpuRole,
    /// The pool: its GPU and role.
    pub pool: PoolId,
    /// Worker threads.
    pub num_threads: usize,
    /// Tasks waiting.
    pub queued: usize,
    /// Tasks run so far.
    pub tasks_run: u64,
    /// The workers' streams, thread by thread (`gpu0-compute-0`, `gpu0-h2d-0`, ...).
    pub streams: Vec<String>,
}

/// Worker threads of one GPU and role, each owning its streams.
///
/// ```
/// use enginetop::device::gpu::{current_lane, GpuWorkers, GpuRole};
/// use enginetop::device::sim::{SimBackend, SimModel};
/// use enginetop::device::stream::GpuBackend;
/// use enginetop::pool::Task;
///
/// let device = SimBackend::new(1, SimModel::instant()).open(0, None).unwrap();
/// let copy = GpuWorkers::start(&device, GpuRole::Copy, 1).unwrap();
/// let (tx, rx) = std::sync::mpsc::channel();
/// copy.schedule(0, Task::new(move || {
///     let streams = current_lane().unwrap().stream_ids();
///     tx.send((std::thread::current().name().unwrap().to_string(), streams)).unwrap();
/// }));
/// let (thread, streams) = rx.recv().unwrap();
/// assert_eq!(thread, "gpu0-copy-0");
/// assert_eq!(streams.iter().map(|s| s.to_string()).collect::<Vec<_>>(), ["gpu0-h2d-0", "gpu0-d2h-0"]);
/// ```
pub struct GpuWorkers {
    workers: PriorityWorkers<Arc<Lane>>,
    role: GpuRole,
    pool: PoolId,
    streams: Vec<String>,
}

/// A GPU worker owns its lane: the task it runs finds it with [`current_lane`](super::current_lane).
impl WorkerOwns for Arc<Lane> {
    fn enter(self) {
        CURRENT_LANE.with(|current| *current.borrow_mut() = Some(self));
    }

    fn leave() {
        // The streams go with the thread: dropping them lets their queued work finish first.
        CURRENT_LANE.with(|current| current.borrow_mut().take());
    }
}

impl GpuWorkers {
    /// Starts `threads` (at least 1) workers of `role` on `device`, named
    /// `gpu<ordinal>-<role>-<k>`; makes every worker's streams first, in thread order.
    pub fn start(
        device: &Arc<dyn GpuDevice>,
        role: GpuRole,
        threads: usize,
    ) -> Result<Self, StreamError> {
        Self::start_observed(device, role, threads, None)
    }

    /// [`start`](Self::start), with the workers reporting task start/end, park/unpark to
    /// `observer` as a pool's do (worker `k` is thread `gpu<ordinal>-<role>-<k>`).
    pub fn start_observed(
        device: &Arc<dyn GpuDevice>,
        role: GpuRole,
        threads: usize,
        observer: Option<Arc<dyn PoolObserver>>,
    ) -> Result<Self, StreamError> {
        let id = PoolId::new(Device::Gpu(device.info().ordinal), role.into());
        let lanes = (0..threads.max(1))
            .map(|_| Lane::open(device, role).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        let streams = lanes
            .iter()
            .flat_map(|lane| lane.stream_ids())
            .map(|id| id.to_string())
            .collect();
        let pool = GpuWorkers {
            workers: PriorityWorkers::new(id.thread_prefix(), observer),
            role,
            pool: id,
            streams,
        };
        // Thread k owns lane k; a failure drops (joins) the workers started so far.
        pool.workers
            .set_num_threads(lanes.len(), |k| Arc::clone(&lanes[k]))
            .map_err(|err| thread_error(id, err))?;
        Ok(pool)
    }

    /// Queues `task`; a priority-ordered pool runs higher `priority` first, a FIFO pool
    /// ignores it.
    pub fn schedule(&self, priority: i32, task: Task) {
        let priority = if self.role.by_priority() { priority } else { 0 };
        self.workers.schedule(priority, task);
    }

    /// A live view of the pool.
    pub fn stats(&self) -> GpuPoolStats {
        let counts = self.workers.counts();
        GpuPoolStats {
            name: self.workers.name().to_string(),
            role: self.role,
            pool: self.pool,
            num_threads: counts.active,
            queued: counts.queued,
            tasks_run: counts.tasks_run,
            streams: self.streams.clone(),
        }
    }
}

/// The stream error for a worker of `pool` that could not start, naming its thread.
fn thread_error(pool: PoolId, err: PoolError) -> StreamError {
    match err {
        PoolError::Spawn { index, reason, .. } => StreamError::Thread {
            thread: pool.thread_name(u32::try_from(index).unwrap_or(u32::MAX)),
            reason,
        },
        other => StreamError::Thread {
            thread: pool.thread_prefix(),
            reason: other.to_string(),
        },
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::device::gpu::current_lane;
    use crate::device::priority::testing::run_order_of_four;
    use crate::device::sim::{SimBackend, SimModel};
    use crate::device::stream::GpuBackend;
    use std::sync::mpsc;

    fn device() -> Arc<dyn GpuDevice> {
        SimBackend::new(1, SimModel::instant())
            .open(0, None)
            .unwrap()
    }

    fn run_order(role: GpuRole) -> Vec<&'static str> {
        let pool = GpuWorkers::start(&device(), role, 1).unwrap();
        run_order_of_four(pool, GpuWorkers::schedule)
    }

    #[test]
    fn priority_pools_run_highest_first_and_compute_pools_in_order() {
        assert_eq!(
            run_order(GpuRole::Prioritized),
            ["high-1", "high-2", "mid", "low"]
        );
        assert_eq!(run_order(GpuRole::Copy), ["high-1", "high-2", "mid", "low"]);
        assert_eq!(
            run_order(GpuRole::Compute),
            ["low", "high-1", "mid", "high-2"]
        );
    }

    #[test]
    fn thread_k_owns_stream_k_and_the_stats_say_so() {
        let device = device();
        let compute = GpuWorkers::start(&device, GpuRole::Compute, 2).unwrap();
        let prio = GpuWorkers::start(&device, GpuRole::Prioritized, 1).unwrap();
        let (tx, rx) = mpsc::channel();
        for _ in 0..20 {
            let tx = tx.clone();
            compute.schedule(
                0,
                Task::new(move || {
                    let thread = std::thread::current().name().unwrap().to_string();
                    let stream = current_lane().unwrap().stream_ids()[0].to_string();
                    tx.send((thread, stream)).unwrap();
                }),
            );
        }
        for _ in 0..20 {
            let (thread, stream) = rx.recv().unwrap();
            assert_eq!(
                thread.strip_prefix("gpu0-compute-"),
                stream.strip_prefix("gpu0-compute-")
            );
        }
        let stats = prio.stats();
        assert_eq!(stats.name, "gpu0-prio");
        assert_eq!(stats.streams, ["gpu0-compute-2"]);
        drop(compute);
        assert_eq!(current_lane().map(|lane| lane.role()), None);
    }

    #[test]
    fn dropping_runs_everything_queued() {
        let pool = GpuWorkers::start(&device(), GpuRole::Copy, 2).unwrap();
        let ran = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        for priority in 0..200 {
            let ran = Arc::clone(&ran);
            pool.schedule(
                priority % 7,
                Task::new(move || {
                    ran.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }),
            );
        }
        drop(pool);
        assert_eq!(ran.load(std::sync::atomic::Ordering::Relaxed), 200);
    }
}
