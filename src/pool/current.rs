//! Which pool worker the calling thread is, if any (Eigen's per-thread `PerThread`).
//!
//! A pool is identified by the address of its shared state, unique while the pool lives; its
//! workers are gone before that address can be reused, so a stale mark is never consulted.
#![forbid(unsafe_code)]

use std::cell::Cell;

use crate::sync::thread_local;

thread_local! {
    /// (pool id, worker index) of the calling thread; id 0 = not a pool worker.
    #[allow(clippy::missing_const_for_thread_local)] // loom's thread_local! has no const form
    static CURRENT: Cell<(usize, usize)> = Cell::new((0, 0));
}

/// Marks the calling thread as worker `index` of pool `pool_id` (called once by each worker).
pub(crate) fn enter(pool_id: usize, index: usize) {
    CURRENT.with(|current| current.set((pool_id, index)));
}

/// The calling thread's index in pool `pool_id`, or `None` if it is not one of its workers.
#[inline]
pub(crate) fn index_in(pool_id: usize) -> Option<usize> {
    CURRENT.with(|current| {
        let (pool, index) = current.get();
        (pool == pool_id).then_some(index)
    })
}
