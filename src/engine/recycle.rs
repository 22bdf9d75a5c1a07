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
//! [`LOCAL_MAX`] moves a batch there: one lock per [`BATCH`] ops on each side. A completion
//! owns its block (`block.rs`), so recycling needs no check that nobody else holds it. The
//! fast paths (a thread that has a cache for the engine) take no lock and allocate nothing.
//! A block's lines were last written by the worker that recycled it, so taking one also
//! prefetches the block the next push will take (`block::prefetch`): its lines travel to the
//! pusher's core while the pusher fills this one.
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

use super::block::prefetch;
use super::opr::OpBlock;
use crate::sync::{Arc, AtomicBool, Mutex, Ordering};

/// The most free blocks a thread keeps per engine.
const LOCAL_MAX: usize = 256;
/// Blocks moved between a thread's cache and the engine's stack at once.
const BATCH: usize = 64;

type FreeBlocks = Vec<Box<OpBlock>>;

/// One thread's free blocks for one engine.
struct LocalCache {
    key: u64,
    closed: Arc<AtomicBool>,
    free: FreeBlocks,
}

// Thread-local: each thread's cache of free op blocks, so allocating and freeing an op
// block on the push and completion paths takes no lock.
engine_thread_local! {
    static LOCAL: RefCell<Vec<LocalCache>> = RefCell::new(Vec::new());
}

/// An engine's free op blocks.
pub(crate) struct BlockPool {
    key: u64,
    closed: Arc<AtomicBool>,
    shared: Mutex<FreeBlocks>,
}

impl BlockPool {
    pub(crate) fn new() -> Self {
        BlockPool {
            key: fastrand::u64(..),
            closed: Arc::new(AtomicBool::new(false)),
            shared: Mutex::new(Vec::new()),
        }
    }

    /// A free block, if one is cached (the caller allocates otherwise).
    pub(crate) fn take(&self) -> Option<Box<OpBlock>> {
        let taken = LOCAL.with(|local| {
            let mut local = local.borrow_mut();
            let cache = local.iter_mut().find(|cache| cache.key == self.key)?;
            Some(self.pop(&mut cache.free))
        });
        taken.unwrap_or_else(|| self.with_new_local(|free| self.pop(free)))
    }

    /// Pops a thread's cache, refilling it from the shared stack when empty.
    fn pop(&self, free: &mut FreeBlocks) -> Option<Box<OpBlock>> {
        if free.is_empty() {
            let mut shared = self.shared.lock();
            let from = shared.len().saturating_sub(BATCH);
            free.extend(shared.drain(from..));
        }
        let block = free.pop();
        if let Some(next) = free.last() {
            // The block the next push takes: last written by the worker that recycled it.
            prefetch(&**next);
        }
        block
    }

    /// Moves a batch of free blocks to the shared stack (dropping them once closed).
    fn share(&self, batch: FreeBlocks) {
        if !self.closed.load(Ordering::Relaxed) {
            self.shared.lock().extend(batch);
        }
    }

    /// Runs `f` on a new cache for this pool on a thread that had none, dropping the caches
    /// of closed pools on the way.
    #[cold]
    fn with_new_local<R>(&self, f: impl FnOnce(&mut FreeBlocks) -> R) -> R {
        let (result, stale) = LOCAL.with(|local| {
            let mut local = local.borrow_mut();
            let (live, stale): (Vec<_>, Vec<_>) = std::mem::take(&mut *local)
                .into_iter()
                .partition(|cache| !cache.closed.load(Ordering::Relaxed));
            *local = live;
            let mut cache = LocalCache {
                key: self.key,
                closed: self.closed.clone(),
                free: Vec::with_capacity(LOCAL_MAX + 1),
            };
            let result = f(&mut cache.free);
            local.push(cache);
            (result, stale)
        });
        drop(stale); // outside the borrow: dropping blocks may drop an engine
        result
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

/// Puts a completed block back in the calling thread's cache (its dependencies dropped; it
/// keeps its engine reference); a full cache moves a batch to the engine's shared stack.
pub(crate) fn recycle(mut block: Box<OpBlock>) {
    block.deps.clear();
    let key = block.core().blocks.key;
    let pushed = LOCAL.with(|local| {
        let mut local = local.borrow_mut();
        match local.iter_mut().find(|cache| cache.key == key) {
            Some(cache) => {
                cache.free.push(block);
                Ok(overflow(&mut cache.free))
            }
            None => Err(block),
        }
    });
    let batch = match pushed {
        Ok(batch) => batch,
        Err(block) => {
            let engine = block.core().clone(); // a new cache: rare
            engine.blocks.with_new_local(|free| {
                free.push(block);
                overflow(free)
            })
        }
    };
    if let Some(batch) = batch {
        let engine = batch[0].core().clone();
        engine.blocks.share(batch);
    }
}

/// A batch to move out of a cache that grew past [`LOCAL_MAX`].
#[inline]
fn overflow(free: &mut FreeBlocks) -> Option<FreeBlocks> {
    (free.len() > LOCAL_MAX).then(|| free.drain(..BATCH).collect())
}
