//! A unit of work, and running it so that a panic never kills the thread that runs it.
//!
//! A [`Task`] keeps a closure of up to 32 bytes (alignment at most 8) inline, as C++'s
//! `std::function` does for small callables, so scheduling a small task allocates nothing:
//! with a `Box` per task the scheduling thread always allocates and a worker always frees,
//! which costs a malloc arena round trip and a cache miss per task (measured as the whole gap
//! in wake-up latency to Eigen's pool). Larger closures are boxed and the task holds the box.
//!
//! # Representation
//! A task is a pointer to a static table of two functions for the closure's type (`call`,
//! which moves the closure out of the storage and runs it, and `drop`) plus 32 bytes of
//! storage: 40 bytes, moved by value through the queues. Calling is one indirect call that
//! consumes the closure in place: no `FnMut` over a taken `Option` (a `dyn FnOnce` cannot be
//! called through a pointer), no inline-or-heap branch, no fat pointer to carry. This is the
//! per-task path of every pool (the tree benchmark moves each task four times), so the task
//! is kept small and its call direct; the storage rules below are the only `unsafe` here.
//!
//! # Why not `smallbox`
//! The engine keeps its op bodies in a `smallbox::SmallBox<dyn FnMut>` (`engine::block`).
//! A pool task is the hotter path (made, moved through a queue, run once, per task), and
//! there the crate costs more: a `SmallBox` carries a fat pointer beside its storage (48
//! bytes for the same 32 inline), a `dyn FnOnce` cannot be called through it so the
//! closure sits in an `Option` taken at the call (one more field, so a 32-byte closure no
//! longer fits, and one more branch), and every call checks where the value lives. Measured
//! side by side (the commit that wrote this section gives the figures), the table below runs
//! a task in fewer instructions, so the pool keeps it.
//!
//! # Why the storage is sound
//! `Task::new::<F>` writes either `F` itself (when it fits the storage's size and alignment)
//! or a `Box<F>` into the storage and picks the table made for exactly that choice, so the
//! table's functions always read the storage as the type that was written. Every task is
//! consumed exactly once: [`Task::run_caught`] calls `call` and then forgets the task (the
//! closure was moved out, and on a panic unwinding dropped it), and `Drop` calls `drop` for a
//! task that never ran. `F: Send` is required to build a task; the storage is plain bytes, so
//! a marker field keeps `Task` `Send` but not `Sync`.

use std::any::Any;
use std::fmt;
use std::marker::PhantomData;
use std::mem::{self, ManuallyDrop, MaybeUninit};
use std::panic::{self, AssertUnwindSafe};
use std::ptr;

use crate::sync::{AtomicU64, Mutex, Ordering};

/// Bytes of closure a task holds without allocating.
pub(crate) const INLINE_BYTES: usize = 32;

/// The inline storage: 32 bytes, aligned for pointers.
type Storage = MaybeUninit<[usize; INLINE_BYTES / mem::size_of::<usize>()]>;

/// How to run or drop the closure a task's storage holds.
struct TaskTable {
    /// Moves the closure out of the storage and runs it.
    call: unsafe fn(*mut Storage),
    /// Drops the closure in the storage without running it.
    drop: unsafe fn(*mut Storage),
    /// Whether the closure itself is in the storage (rather than a box holding it).
    inline: bool,
}

/// The tables for closures of type `F`.
struct TablesFor<F>(PhantomData<F>);

impl<F: FnOnce()> TablesFor<F> {
    /// Whether an `F` fits the inline storage.
    const FITS: bool = mem::size_of::<F>() <= mem::size_of::<Storage>()
        && mem::align_of::<F>() <= mem::align_of::<Storage>();

    /// The storage holds an `F`.
    const INLINE: TaskTable = TaskTable {
        call: Self::call_inline,
        drop: Self::drop_inline,
        inline: true,
    };

    /// The storage holds a `Box<F>`.
    const BOXED: TaskTable = TaskTable {
        call: Self::call_boxed,
        drop: Self::drop_boxed,
        inline: false,
    };

    /// # Safety
    /// `storage` holds an `F` written by [`Task::new`], not yet moved out or dropped.
    unsafe fn call_inline(storage: *mut Storage) {
        // SAFETY: per the contract the storage holds a live `F`; reading it moves it out, and
        // the caller never touches the storage again.
        let f = unsafe { storage.cast::<F>().read() };
        f()
    }

    /// # Safety
    /// As for [`call_inline`](Self::call_inline).
    unsafe fn drop_inline(storage: *mut Storage) {
        // SAFETY: per the contract the storage holds a live `F`, dropped here once.
        unsafe { storage.cast::<F>().drop_in_place() }
    }

    /// # Safety
    /// `storage` holds a `Box<F>` written by [`Task::new`], not yet moved out or dropped.
    unsafe fn call_boxed(storage: *mut Storage) {
        // SAFETY: per the contract the storage holds a live `Box<F>`; reading moves it out.
        let f = unsafe { storage.cast::<Box<F>>().read() };
        f()
    }

    /// # Safety
    /// As for [`call_boxed`](Self::call_boxed).
    unsafe fn drop_boxed(storage: *mut Storage) {
        // SAFETY: per the contract the storage holds a live `Box<F>`, dropped here once.
        unsafe { storage.cast::<Box<F>>().drop_in_place() }
    }
}

/// A task not built yet: it writes itself into the storage it is handed and returns that
/// storage, initialized. Only safe code makes one (see [`spawn_here`]), and safe code can only
/// return a reference to that storage by writing it, so the returned reference proves the
/// write.
///
/// A pool hands the writer the queue slot the task will wait in, after claiming the slot: the
/// task is then written once, where it is read next, instead of being built on the spawning
/// thread's stack and copied down the call chain. (Copying a task right after it was written
/// field by field made every copy wait for the stores it re-reads, a store-forwarding stall
/// per copy; after the slot claim's locked instruction those stores have all landed.)
///
/// [`spawn_here`]: super::spawn_here
pub(crate) type TaskWriter<'a> =
    &'a mut dyn for<'s> FnMut(&'s mut MaybeUninit<Task>) -> &'s mut Task;

/// Runs `write` on `storage` and checks that it returned `storage` itself, which safe code can
/// only do after initializing it. Panics (leaving `storage` uninitialized) otherwise.
#[inline]
pub(crate) fn write_checked<T>(
    storage: &mut MaybeUninit<T>,
    write: impl for<'s> FnOnce(&'s mut MaybeUninit<T>) -> &'s mut T,
) {
    let written: *const T = write(storage);
    assert!(
        ptr::eq(written, storage.as_ptr()),
        "a task writer must initialize the storage it is handed and return it"
    );
}

/// A closure scheduled on a pool: inline when it fits in 32 bytes, boxed otherwise.
/// [`run_caught`](Task::run_caught) consumes the task, so it runs at most once; a task dropped
/// unrun drops its closure.
pub struct Task {
    table: &'static TaskTable,
    storage: Storage,
    /// `Send` (every closure is), not `Sync`: the storage's bytes say neither.
    _closure: PhantomData<Box<dyn FnOnce() + Send>>,
}

impl Task {
    /// Wraps a closure.
    #[inline]
    pub fn new<F: FnOnce() + Send + 'static>(f: F) -> Self {
        let mut storage = Storage::uninit();
        let table: &'static TaskTable = if TablesFor::<F>::FITS {
            // SAFETY: `FITS` checked that an `F` fits the storage's size and alignment.
            unsafe { storage.as_mut_ptr().cast::<F>().write(f) };
            &TablesFor::<F>::INLINE
        } else {
            // SAFETY: a `Box` is one pointer, which the storage (pointer-aligned) holds.
            unsafe { storage.as_mut_ptr().cast::<Box<F>>().write(Box::new(f)) };
            &TablesFor::<F>::BOXED
        };
        Task {
            table,
            storage,
            _closure: PhantomData,
        }
    }

    /// Builds the task a [`TaskWriter`] describes, as a value (where it has no slot to go to).
    pub(crate) fn from_writer(write: TaskWriter<'_>) -> Task {
        let mut task = MaybeUninit::uninit();
        write_checked(&mut task, write);
        // SAFETY: `write_checked` returned, so the writer initialized `task`.
        unsafe { task.assume_init() }
    }

    /// Whether the closure lives inside the task (no allocation).
    pub fn is_inline(&self) -> bool {
        self.table.inline
    }

    /// Runs the task, catching a panic; returns the panic's message if it panicked.
    #[inline]
    pub fn run_caught(self) -> Result<(), String> {
        let mut task = ManuallyDrop::new(self);
        let call = task.table.call;
        let storage: *mut Storage = &mut task.storage;
        // SAFETY: `table` was chosen for what `new` wrote into `storage`; the task is
        // forgotten (`ManuallyDrop`), so the closure `call` moves out is never used again.
        panic::catch_unwind(AssertUnwindSafe(|| unsafe { call(storage) }))
            .map_err(|p| panic_message(&*p))
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        // SAFETY: the task never ran (`run_caught` forgets it), so its closure is still in the
        // storage, of the type `table` was chosen for.
        unsafe { (self.table.drop)(&mut self.storage) }
    }
}

impl fmt::Debug for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Task")
    }
}

/// The text of a panic payload (`&str` and `String` payloads; others get a placeholder).
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic with a non-string payload".to_string()
    }
}

/// Panics seen by one pool: how many, and the latest message.
#[derive(Debug, Default)]
pub(crate) struct PanicLog {
    count: AtomicU64,
    last: Mutex<Option<String>>,
}

impl PanicLog {
    /// Runs `task`, recording a panic if it panics; returns whether it panicked.
    pub(crate) fn run(&self, task: Task) -> bool {
        match task.run_caught() {
            Ok(()) => false,
            Err(message) => {
                self.count.fetch_add(1, Ordering::Relaxed);
                *self.last.lock() = Some(message);
                true
            }
        }
    }

    pub(crate) fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    pub(crate) fn last(&self) -> Option<String> {
        self.last.lock().clone()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    #[test]
    fn small_closures_are_inline_and_large_ones_boxed_and_both_run_once() {
        let runs = Arc::new(AtomicUsize::new(0));
        let small = {
            let runs = runs.clone();
            Task::new(move || {
                runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            })
        };
        let big_capture = [7u64; 8];
        let large = {
            let runs = runs.clone();
            Task::new(move || {
                let sum: u64 = big_capture.iter().sum();
                runs.fetch_add(sum as usize, std::sync::atomic::Ordering::Relaxed);
            })
        };
        assert!(small.is_inline());
        assert!(!large.is_inline());
        small.run_caught().unwrap();
        large.run_caught().unwrap();
        assert_eq!(runs.load(std::sync::atomic::Ordering::Relaxed), 1 + 56);
    }

    #[test]
    fn thirty_two_bytes_stay_inline_and_over_aligned_closures_are_boxed() {
        let words = [1usize, 2, 3, 4];
        let fits = Task::new(move || assert_eq!(words.iter().sum::<usize>(), 10));
        assert!(fits.is_inline());
        fits.run_caught().unwrap();

        #[repr(align(16))]
        struct Aligned(u8);
        let aligned = Aligned(5);
        let over_aligned = Task::new(move || {
            let whole = aligned; // captures the struct, not just its field
            assert_eq!(whole.0, 5);
        });
        assert!(!over_aligned.is_inline());
        over_aligned.run_caught().unwrap();
        assert_eq!(mem::size_of::<Task>(), 40);
        assert_eq!(mem::size_of::<Option<Task>>(), 40);
    }

    #[test]
    fn a_boxed_task_that_panics_is_caught_and_a_dropped_one_frees_its_closure() {
        let big = [3u64; 8];
        let panics = Task::new(move || panic!("big {}", big[0]));
        assert!(!panics.is_inline());
        assert_eq!(panics.run_caught().unwrap_err(), "big 3");

        let token = Arc::new(());
        let held = token.clone();
        let unrun = Task::new(move || drop((big, held)));
        assert_eq!(Arc::strong_count(&token), 2);
        drop(unrun);
        assert_eq!(Arc::strong_count(&token), 1);
    }

    #[test]
    fn a_writer_builds_a_task_in_the_storage_it_is_handed() {
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = runs.clone();
        let mut f = Some(move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        });
        let task = Task::from_writer(&mut |storage| storage.write(Task::new(f.take().unwrap())));
        task.run_caught().unwrap();
        assert_eq!(runs.load(std::sync::atomic::Ordering::Relaxed), 1);
    }

    #[test]
    #[should_panic(expected = "must initialize the storage")]
    fn a_writer_returning_other_storage_is_refused() {
        let _ = Task::from_writer(&mut |_storage| Box::leak(Box::new(Task::new(|| ()))));
    }

    #[test]
    fn a_dropped_task_drops_its_closure_without_running_it() {
        let token = Arc::new(());
        let held = token.clone();
        let task = Task::new(move || panic!("must not run {held:?}"));
        assert_eq!(Arc::strong_count(&token), 2);
        drop(task);
        assert_eq!(Arc::strong_count(&token), 1);
    }

    #[test]
    fn a_panic_is_caught_with_its_message() {
        let task = Task::new(|| panic!("boom {}", 7));
        assert_eq!(task.run_caught().unwrap_err(), "boom 7");
    }
}
