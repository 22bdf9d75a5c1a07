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
//! recycled only when the completion holds its last reference (`Arc::get_mut`).
//!
//! # Engine references
//! A recycled block keeps its reference to the engine, so reusing it costs no reference-count
//! update (that count sits on the line every push and completion already fight over). The
//! price is a cycle while the engine lives (engine -> shared stack -> block -> engine), which
//! shutdown breaks: it empties and closes the shared stack and drops the calling thread's
//! cache. Worker threads drop theirs when they exit (shutdown joins them). Another thread that
//! pushed to the engine drops its cache the next time it touches any engine's cache, or when it
//! exits; until then its cached blocks keep the stopped engine's memory (not its threads).
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
        with_local_cache(self.key, || self.closed.clone(), f)
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

    /// Moves a batch of free blocks to the shared stack (dropping them once closed).
    fn share(&self, batch: Vec<OpRef>) {
        if !self.closed.load(Ordering::Relaxed) {
            self.shared.lock().extend(batch);
        }
    }

    /// The engine is gone: frees the shared stack; threads drop their caches lazily.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        let cached = std::mem::take(&mut *self.shared.lock());
        drop(cached);
        let mine = LOCAL.with(|local| {
            let mut local = local.borrow_mut();
            let position = local.iter().position(|cache| cache.key == self.key);
            position.map(|index| local.swap_remove(index))
        });
        drop(mine); // outside the borrow: dropping blocks may drop an engine
    }
}

/// Runs `f` on the calling thread's cache for the pool `key` (created with `closed` if new).
fn with_local_cache<R>(
    key: u64,
    closed: impl FnOnce() -> Arc<AtomicBool>,
    f: impl FnOnce(&mut Vec<OpRef>) -> R,
) -> R {
    let (result, stale) = LOCAL.with(|local| {
        let mut local = local.borrow_mut();
        let mut stale = Vec::new();
        let index = match local.iter().position(|cache| cache.key == key) {
            Some(index) => index,
            None => {
                let (live, dead): (Vec<_>, Vec<_>) = std::mem::take(&mut *local)
                    .into_iter()
                    .partition(|cache| !cache.closed.load(Ordering::Relaxed));
                *local = live;
                stale = dead;
                local.push(LocalCache {
                    key,
                    closed: closed(),
                    free: Vec::with_capacity(LOCAL_MAX + 1),
                });
                local.len() - 1
            }
        };
        (f(&mut local[index].free), stale)
    });
    drop(stale); // outside the borrow: dropping blocks may drop an engine
    result
}

/// Puts a completed block back in the calling thread's cache, if the caller held its last
/// reference; otherwise just drops the reference.
pub(crate) fn recycle(mut block: OpRef) {
    let Some(done) = Arc::get_mut(&mut block) else {
        return;
    };
    done.deps.clear();
    let pool = &block.core().blocks;
    let key = pool.key;
    with_local_cache(key, || pool.closed.clone(), |_| ());
    let overflow = with_local_cache(
        key,
        || unreachable!("created above"),
        move |free| {
            free.push(block);
            (free.len() > LOCAL_MAX).then(|| free.drain(..BATCH).collect::<Vec<_>>())
        },
    );
    if let Some(batch) = overflow {
        let engine = batch[0]
            .core
            .clone()
            .expect("a recycled block keeps its engine");
        engine.blocks.share(batch);
    }
}
