//! tree: one root task scheduled from outside; each task above depth 0 schedules two children
//! from inside the pool; every task notifies one barrier.
//!
//! Children are scheduled with [`spawn_here`] (ours) and `rayon::spawn` (rayon): both schedule
//! onto the running worker's own queue without touching any shared handle, as the C++ peer's
//! tasks do through a captured pointer.
#![forbid(unsafe_code)]

use std::time::Instant;

use super::contender::{Backend, Runner};
use super::{leak_barrier, ns_per_task, Metric};
use crate::pool::barrier::Barrier;
use crate::pool::spawn_here;

/// Tasks in a tree whose root is at `depth`: 2^(depth+1) - 1.
pub(super) fn tree_tasks(depth: u32) -> usize {
    (1usize << (depth + 1)) - 1
}

/// One rep: the whole tree; ns per task from scheduling the root to the barrier's release.
pub(super) fn tree_once(runner: &Runner, depth: u32) -> Metric {
    let tasks = tree_tasks(depth);
    let barrier = leak_barrier(tasks);
    let start = Instant::now();
    match &runner.backend {
        Backend::Ours(_) => runner.spawn(move || our_node(barrier, depth)),
        Backend::Rayon(_) => runner.spawn(move || rayon_node(barrier, depth)),
    }
    barrier.wait();
    ns_per_task(start.elapsed(), tasks)
}

/// A task of the tree on one of our pools.
fn our_node(barrier: &'static Barrier, depth: u32) {
    if depth > 0 {
        for _ in 0..2 {
            if spawn_here(move || our_node(barrier, depth - 1)).is_err() {
                unreachable!("tree tasks run on pool workers");
            }
        }
    }
    barrier.notify();
}

/// A task of the tree on rayon.
fn rayon_node(barrier: &'static Barrier, depth: u32) {
    if depth > 0 {
        rayon::spawn(move || rayon_node(barrier, depth - 1));
        rayon::spawn(move || rayon_node(barrier, depth - 1));
    }
    barrier.notify();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_19_is_the_reference_tree() {
        assert_eq!(tree_tasks(19), 1_048_575);
        assert_eq!(tree_tasks(0), 1);
    }
}
