//! A second per-thread buffer, for an operand that a call prepares once and all of its
//! `parallel_for` items then read: the blocked input gradient's flipped weight, the blocked
//! weight gradient's transposed `dY` (`blocked.rs`); the batched weight gradient's gathered
//! `dY_b` (column-blocked form) and, in its direct form by rows, every image's unrolled
//! columns and their transpose `cols_b^T` (`weight_grad.rs`).
//!
//! The items take their own column buffers from the per-thread scratch
//! ([`crate::kernels::scratch::with_scratch`]), each thread's staying hot in its L2 from item
//! to item. Were the shared operand in the calling thread's scratch too, an item that the
//! calling thread runs itself would find that buffer lent out and allocate (and zero) a fresh
//! one on every call; so the operand has this buffer of its own. It is taken out of its slot
//! for the call and put back afterwards, grown only when a call needs more, so a call that
//! nests another gets an empty one rather than a borrow panic.
//!
//! Contents are unspecified between calls: the caller writes every value it reads.
#![forbid(unsafe_code)]

use std::cell::Cell;

use slot::SHARED;

// Loom's `thread_local!` has no `const` initializer form (see `scratch.rs`).
#[allow(clippy::missing_const_for_thread_local)]
mod slot {
    use std::cell::Cell;

    use crate::sync::thread_local;

    thread_local! {
        pub(super) static SHARED: Cell<Vec<f32>> = Cell::new(Vec::new());
    }
}

/// Runs `f` on `len` values of this thread's shared-operand buffer (contents unspecified).
pub(super) fn with_shared_operand<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    let mut buffer = SHARED.with(Cell::take);
    if buffer.len() < len {
        buffer.resize(len, 0.0);
    }
    let result = f(&mut buffer[..len]);
    SHARED.with(|slot| {
        let held = slot.take();
        slot.set(if held.capacity() > buffer.capacity() {
            held
        } else {
            buffer
        });
    });
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::scratch::with_scratch;

    #[test]
    fn the_buffer_is_kept_apart_from_the_scratch_and_reused() {
        let (first, scratch) = with_shared_operand(64, |shared| {
            shared.fill(1.0);
            let scratch = with_scratch(64, |scratch| {
                scratch.fill(2.0);
                scratch.as_ptr() as usize
            });
            assert!(shared.iter().all(|&v| v == 1.0));
            (shared.as_ptr() as usize, scratch)
        });
        assert_ne!(first, scratch);
        let again = with_shared_operand(32, |shared| shared.as_ptr() as usize);
        assert_eq!(again, first);
    }

    #[test]
    fn nested_calls_get_their_own_values() {
        with_shared_operand(8, |outer| {
            outer.fill(3.0);
            with_shared_operand(8, |inner| inner.fill(4.0));
            assert!(outer.iter().all(|&v| v == 3.0));
        });
    }
}
