//! spawn: a thread outside the pool schedules no-op tasks, each notifying one shared barrier,
//! then waits on the barrier.
#![forbid(unsafe_code)]

use std::time::Instant;

use super::contender::Runner;
use super::{leak_barrier, ns_per_task, Metric};

/// One rep: `tasks` tasks scheduled from this thread; ns per task from the first schedule to
/// the barrier's release.
pub(super) fn spawn_once(runner: &Runner, tasks: usize) -> Metric {
    let barrier = leak_barrier(tasks);
    let start = Instant::now();
    for _ in 0..tasks {
        runner.spawn(move || barrier.notify());
    }
    barrier.wait();
    ns_per_task(start.elapsed(), tasks)
}
