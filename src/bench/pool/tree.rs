//! tree: one root task scheduled from outside; each task above depth 0 schedules two children
//! from inside the pool; every task notifies one barrier.
//!
//! Our tasks reach the pool through an `Arc<Pool>`: a parent clones it for each child and drops
//! its own, two reference-count operations per task on average, which the C++ peer's tasks
//! (capturing a raw pointer) do not pay. Our pools offer no "spawn into the pool I run in"
//! yet; rayon's tasks use `rayon::spawn`, which does that. A task drops its handle before it
//! notifies, so when the barrier opens the benchmark holds the only handle left and a pool is
//! never dropped on one of its own workers.
#![forbid(unsafe_code)]

use std::time::Instant;

use super::contender::{Backend, Runner};
use super::{leak_barrier, ns_per_task, Metric};
use crate::pool::barrier::Barrier;
use crate::pool::Pool;
use crate::sync::Arc;

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
        Backend::Ours(pool) => {
            let pool = pool.clone();
            runner.spawn(move || our_node(pool, barrier, depth));
        }
        Backend::Rayon(_) => runner.spawn(move || rayon_node(barrier, depth)),
    }
    barrier.wait();
    ns_per_task(start.elapsed(), tasks)
}

/// A task of the tree on one of our pools.
fn our_node(pool: Arc<Pool>, barrier: &'static Barrier, depth: u32) {
    if depth > 0 {
        let first_child_pool = pool.clone();
        let second_child_pool = pool.clone();
        pool.spawn(move || our_node(first_child_pool, barrier, depth - 1));
        pool.spawn(move || our_node(second_child_pool, barrier, depth - 1));
    }
    drop(pool);
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
