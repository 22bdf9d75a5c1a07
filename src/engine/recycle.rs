//! Op blocks are recycled, not freed: a push takes a block from the calling thread's cache and
//! a completion puts it back into the completing thread's cache.
//!
//! # Why
//! A pusher allocates and a worker frees, on another thread. With the system allocator that
//! pairing funnels every op through one arena lock (the worker frees into the pusher's
//! arena), and on two cores the lock's futex waits and wakes cost more than everything else an
//! op does. Recycling takes the allocator off the hot path.
//!
//! # How
//! Each thread keeps, per engine, a small stack of free blocks (no lock). A thread that runs
//! dry takes a batch from the engine's shared stack; a thread whose stack grows past
//! [`LOCAL_MAX`] moves a batch there: one lock per [`BATCH`] ops on each side. A block is
//! recycled only when the completion holds its last reference (`Arc::get_mut`), and it gives
//! up its engine reference first, so cached blocks never keep an engine alive. When the
//! engine shuts down its shared stack is emptied and closed; a thread's cache for a closed
//! engine is dropped the next time that thread touches its caches.
#![forbid(unsafe_code)]

use std::cell::RefCell;

use super::opr::OpRef;
use crate::sync::{thread_local, Arc, AtomicBool, Mutex, Ordering};

/// The most free blocks a thread keeps per engine.
const LOCAL_MAX: usize = 256;
/// Blocks moved between a thread's cache and the engine's stack at once.
const BATCH: usize = 64;

/// One thread's free blocks for one engine.
struct LocalCache {
    key: u64,
    closed: Arc<AtomicBool>,
    free: Vec<OpRef>,
}

thread_local! {
    #[allow(clippy::missing_const_for_thread_local)] // loom's thread_local! has no const form
    static LOCAL: RefCell<Vec<LocalCache>> = RefCell::new(Vec::new());
}

/// An engine's free op blocks.
pub(crate) struct BlockPool {
    key: u64,
    closed: Arc<AtomicBool>,
    shared: Mutex<Vec<OpRef>>,
}

impl BlockPool {
    pub(crate) fn new() -> Self {
        BlockPool {
            key: fastrand::u64(..),
            closed: Arc::new(AtomicBool::new(false)),
            shared: Mutex::new(Vec::new()),
        }
    }

    /// Runs `f` on the calling thread's cache for this pool.
    fn with_local<R>(&self, f: impl FnOnce(&mut Vec<OpRef>) -> R) -> R {
        LOCAL.with(|local| {
            let mut local = local.borrow_mut();
            let index = match local.iter().position(|cache| cache.key == self.key) {
                Some(index) => index,
                None => {
                    local.retain(|cache| !cache.closed.load(Ordering::Relaxed));
                    local.push(LocalCache {
                        key: self.key,
                        closed: self.closed.clone(),
                        free: Vec::with_capacity(LOCAL_MAX + 1),
                    });
                    local.len() - 1
                }
            };
            f(&mut local[index].free)
        })
    }

    /// A free block, if one is cached (the caller allocates otherwise).
    pub(crate) fn take(&self) -> Option<OpRef> {
        self.with_local(|free| {
            if free.is_empty() {
                let mut shared = self.shared.lock();
                let from = shared.len().saturating_sub(BATCH);
                free.extend(shared.drain(from..));
            }
            free.pop()
        })
    }

    /// Keeps `block` (already reset, holding no engine reference) for a later push.
    pub(crate) fn put(&self, block: OpRef) {
        self.with_local(|free| {
            free.push(block);
            if free.len() > LOCAL_MAX {
                let batch = free.drain(..BATCH);
                if !self.closed.load(Ordering::Relaxed) {
                    self.shared.lock().extend(batch);
                }
            }
        });
    }

    /// The engine is gone: frees the shared stack; threads drop their caches lazily.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        self.shared.lock().clear();
    }
}
