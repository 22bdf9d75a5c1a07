//! Per-thread scratch buffers, so a kernel's temporary (an im2col column matrix, the input
//! gradient's columns) is allocated once per thread and reused by every later call.
//!
//! # Algorithm
//! Each thread keeps one `Vec<f32>` in a thread-local slot. [`with_scratch`] moves the vector
//! out of the slot (leaving an empty one), grows it if the call needs more, lends `len` values
//! of it to the closure, and moves it back afterwards, keeping the larger of the returned
//! vector and whatever the slot holds by then. Moving the vector out, rather than borrowing
//! the slot, makes the function re-entrant: a kernel that calls another kernel from inside the
//! closure just gets a fresh vector (allocated once) instead of a `RefCell` borrow panic.
//!
//! The buffer's old contents are left in place: every caller overwrites all `len` values it is
//! given before reading any (im2col writes its zeros in the padding explicitly), so stale values
//! can never leak into a result, and results stay bitwise deterministic.
//!
//! The closure may hand the slice to the intra-op pool (worker threads read it through a shared
//! borrow while the caller waits in `parallel_for`); the buffer belongs to the calling thread
//! for the whole call, so nothing else can reuse it meanwhile.
#![forbid(unsafe_code)]

use slot::SCRATCH;

// Loom's `thread_local!` (which `crate::sync` hands out under `--cfg loom`) has no `const`
// initializer form, so the lint's suggestion would not build there.
#[allow(clippy::missing_const_for_thread_local)]
mod slot {
    use std::cell::RefCell;

    use crate::sync::thread_local;

    thread_local! {
        pub(super) static SCRATCH: RefCell<Vec<f32>> = RefCell::new(Vec::new());
    }
}

/// Runs `f` on `len` values of this thread's scratch buffer (contents unspecified: `f` must
/// write every value before reading it).
pub(crate) fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    let mut buffer = SCRATCH.with(|slot| std::mem::take(&mut *slot.borrow_mut()));
    if buffer.len() < len {
        buffer.resize(len, 0.0);
    }
    let result = f(&mut buffer[..len]);
    SCRATCH.with(|slot| {
        let mut slot = slot.borrow_mut();
        if slot.capacity() < buffer.capacity() {
            *slot = buffer;
        }
    });
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_buffer_is_reused_and_calls_nest() {
        let first = with_scratch(100, |buffer| {
            buffer.fill(1.0);
            buffer.as_ptr() as usize
        });
        let (again, inner_len) = with_scratch(50, |outer| {
            outer.fill(2.0);
            let inner_len = with_scratch(10, |inner| {
                inner.fill(3.0);
                inner.len()
            });
            assert!(
                outer.iter().all(|&v| v == 2.0),
                "the nested call got its own buffer"
            );
            (outer.as_ptr() as usize, inner_len)
        });
        assert_eq!((again, inner_len), (first, 10));
    }
}
