//! A pool of GPU worker threads, each owning a [`Lane`] (see the [module docs](super) for the
//! queue protocol).
#![forbid(unsafe_code)]

use std::cell::Cell;
use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::sync::Arc;

use super::{Lane, WorkerRole, CURRENT_LANE};
use crate::device::stream::{GpuDevice, StreamError};
use crate::pool::Task;
use crate::sync::{thread, thread_local, Condvar, Mutex};

/// A live view of one GPU pool.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct GpuPoolStats {
    /// `gpu<d>-<role>`; threads are `<name>-<k>`.
    pub name: String,
    /// The pool's role.
    pub role: WorkerRole,
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
/// use enginetop::device::gpu::{current_lane, GpuWorkers, WorkerRole};
/// use enginetop::device::sim::{SimBackend, SimModel};
/// use enginetop::device::stream::GpuBackend;
/// use enginetop::pool::Task;
///
/// let device = SimBackend::new(1, SimModel::instant()).open(0, None).unwrap();
/// let copy = GpuWorkers::start(&device, WorkerRole::Copy, 1).unwrap();
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
    shared: Arc<Shared>,
    handles: Mutex<Vec<thread::JoinHandle<()>>>,
    streams: Vec<String>,
}

struct Shared {
    name: String,
    role: WorkerRole,
    state: Mutex<State>,
    work: Condvar,
}

struct State {
    heap: BinaryHeap<Queued>,
    next_seq: u64,
    done: bool,
    tasks_run: u64,
}

struct Queued {
    priority: i32,
    seq: u64,
    task: Task,
}

impl Ord for Queued {
    fn cmp(&self, other: &Self) -> CmpOrdering {
        // Max-heap: higher priority first, then the earlier sequence number.
        self.priority
            .cmp(&other.priority)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Queued {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == CmpOrdering::Equal
    }
}

impl Eq for Queued {}

thread_local! {
    /// The GPU pool the calling thread works for (its shared state's address), or 0.
    #[allow(clippy::missing_const_for_thread_local)] // loom's thread_local! has no const form
    static WORKER_OF: Cell<usize> = Cell::new(0);
}

impl GpuWorkers {
    /// Starts `threads` (at least 1) workers of `role` on `device`, named
    /// `gpu<ordinal>-<role>-<k>`; makes every worker's streams first, in thread order.
    pub fn start(
        device: &Arc<dyn GpuDevice>,
        role: WorkerRole,
        threads: usize,
    ) -> Result<Self, StreamError> {
        let name = format!("gpu{}-{}", device.info().ordinal, role.as_str());
        let lanes = (0..threads.max(1))
            .map(|_| Lane::open(device, role).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        let streams = lanes
            .iter()
            .flat_map(|lane| lane.stream_ids())
            .map(|id| id.to_string())
            .collect();
        let pool = GpuWorkers {
            shared: Arc::new(Shared {
                name,
                role,
                state: Mutex::new(State {
                    heap: BinaryHeap::new(),
                    next_seq: 0,
                    done: false,
                    tasks_run: 0,
                }),
                work: Condvar::new(),
            }),
            handles: Mutex::new(Vec::new()),
            streams,
        };
        for (index, lane) in lanes.into_iter().enumerate() {
            let handle = pool.spawn_worker(index, lane)?; // a failure drops (joins) the others
            pool.handles.lock().push(handle);
        }
        Ok(pool)
    }

    fn spawn_worker(
        &self,
        index: usize,
        lane: Arc<Lane>,
    ) -> Result<thread::JoinHandle<()>, StreamError> {
        let shared = Arc::clone(&self.shared);
        let thread_name = format!("{}-{index}", self.shared.name);
        thread::Builder::new()
            .name(thread_name.clone())
            .spawn(move || shared.work_loop(lane))
            .map_err(|err| StreamError::Thread {
                thread: thread_name,
                reason: err.to_string(),
            })
    }

    /// Queues `task`; a priority-ordered pool runs higher `priority` first, a FIFO pool
    /// ignores it.
    pub fn schedule(&self, priority: i32, task: Task) {
        let priority = if self.shared.role.by_priority() {
            priority
        } else {
            0
        };
        let mut state = self.shared.state.lock();
        let seq = state.next_seq;
        state.next_seq += 1;
        state.heap.push(Queued {
            priority,
            seq,
            task,
        });
        drop(state);
        self.shared.work.notify_one();
    }

    /// A live view of the pool.
    pub fn stats(&self) -> GpuPoolStats {
        let state = self.shared.state.lock();
        GpuPoolStats {
            name: self.shared.name.clone(),
            role: self.shared.role,
            num_threads: self.handles.lock().len(),
            queued: state.heap.len(),
            tasks_run: state.tasks_run,
            streams: self.streams.clone(),
        }
    }
}

impl Shared {
    fn address(&self) -> usize {
        self as *const Self as usize
    }

    fn work_loop(&self, lane: Arc<Lane>) {
        WORKER_OF.with(|worker_of| worker_of.set(self.address()));
        CURRENT_LANE.with(|current| *current.borrow_mut() = Some(lane));
        let mut state = self.state.lock();
        loop {
            match state.heap.pop() {
                Some(queued) => {
                    drop(state);
                    let _ = queued.task.run_caught(); // op tasks report their own panics
                    state = self.state.lock();
                    state.tasks_run += 1;
                }
                None if state.done => break,
                None => state = self.work.wait(state),
            }
        }
        drop(state);
        // The streams go with the thread: dropping them lets their queued work finish first.
        CURRENT_LANE.with(|current| current.borrow_mut().take());
    }
}

impl Drop for GpuWorkers {
    fn drop(&mut self) {
        self.shared.state.lock().done = true;
        self.shared.work.notify_all();
        let me = WORKER_OF.with(Cell::get) == self.shared.address();
        for handle in self.handles.lock().drain(..) {
            if !me || handle.thread().id() != thread::current().id() {
                let _ = handle.join();
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::device::gpu::current_lane;
    use crate::device::sim::{SimBackend, SimModel};
    use crate::device::stream::GpuBackend;
    use std::sync::mpsc;

    fn device() -> Arc<dyn GpuDevice> {
        SimBackend::new(1, SimModel::instant())
            .open(0, None)
            .unwrap()
    }

    /// Blocks the pool's only worker until the returned sender is used.
    fn block_worker(pool: &GpuWorkers) -> mpsc::Sender<()> {
        let (release, wait) = mpsc::channel::<()>();
        let (started, is_started) = mpsc::channel();
        pool.schedule(
            i32::MAX,
            Task::new(move || {
                started.send(()).unwrap();
                let _ = wait.recv();
            }),
        );
        is_started.recv().unwrap();
        release
    }

    fn run_order(role: WorkerRole) -> Vec<&'static str> {
        let pool = GpuWorkers::start(&device(), role, 1).unwrap();
        let release = block_worker(&pool);
        let order = Arc::new(Mutex::new(Vec::new()));
        for (label, priority) in [("low", 0), ("high-1", 9), ("mid", 5), ("high-2", 9)] {
            let order = Arc::clone(&order);
            pool.schedule(priority, Task::new(move || order.lock().push(label)));
        }
        release.send(()).unwrap();
        drop(pool); // drains, then joins
        let order = order.lock().clone();
        order
    }

    #[test]
    fn priority_pools_run_highest_first_and_compute_pools_in_order() {
        assert_eq!(
            run_order(WorkerRole::Prioritized),
            ["high-1", "high-2", "mid", "low"]
        );
        assert_eq!(
            run_order(WorkerRole::Copy),
            ["high-1", "high-2", "mid", "low"]
        );
        assert_eq!(
            run_order(WorkerRole::Compute),
            ["low", "high-1", "mid", "high-2"]
        );
    }

    #[test]
    fn thread_k_owns_stream_k_and_the_stats_say_so() {
        let device = device();
        let compute = GpuWorkers::start(&device, WorkerRole::Compute, 2).unwrap();
        let prio = GpuWorkers::start(&device, WorkerRole::Prioritized, 1).unwrap();
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
        let pool = GpuWorkers::start(&device(), WorkerRole::Copy, 2).unwrap();
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
