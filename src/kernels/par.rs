//! Fixed-partition loops over [`parallel_for`]: the one way kernels go parallel.
//!
//! [`parallel_for`]: crate::pool::parallel_for::parallel_for
//!
//! A kernel cuts its output slice into chunks whose size depends only on the problem's shape,
//! never on the thread count, and [`for_each_chunk`] runs `f(index, chunk)` for every chunk on
//! the intra-op pool. Because a chunk is computed start to finish by one call of `f`, whatever
//! thread makes it, results do not depend on the pool kind or the thread count (see the
//! determinism notes in [`crate::kernels`]).
//!
//! # Handing out `&mut` pieces without allocating
//! `parallel_for` calls a shared `Fn + Sync` closure with index ranges, so disjoint `&mut`
//! pieces of one slice must reach it through something shared. A call plans its blocks the way
//! `parallel_for` would (Eigen's [`block_plan`], or one block where it would run inline), cuts
//! the output into one share per block up front (`split_at_mut`, in order), and parks each
//! share in its own slot of a fixed array on the caller's stack (`MAX_BLOCKS` slots, each an
//! uncontended lock from `crate::sync`). The loop then runs with exactly that block size
//! (`Schedule::FixedBlockSize`), and a block's one call takes its share out of its slot and
//! walks its chunks. No `unsafe`, no allocation, one lock per block instead of one per chunk
//! (the previous version collected a `Vec` of per-chunk locks on every call).
//! [`for_each_strided_group`] still collects its pieces into one `Vec`, since `f` takes a
//! group's pieces as one slice.
//!
//! The [`Cost`] handed to `parallel_for` is one chunk's: its bytes loaded and stored, and its
//! arithmetic in cycles at [`VECTOR_FLOPS_PER_CYCLE`] (or [`GEMM_FLOPS_PER_CYCLE`] inside a
//! GEMM), so Eigen's cost model picks the thread count and block size as it would for the same
//! loop in TensorFlow.
//!
//! # What a loop reports
//! Every block is timed (two clock reads; a block is worth at least 40,000 cycles), and the
//! outermost loop on a thread tells its pool, when it returns, its items, their cost, its
//! blocks' summed time and its own wall time ([`ThreadPool::loop_ran`]), inline loops
//! included: the run driver's what-if simulation divides that time as [`busiest_items`] says
//! the loop would be cut for another thread count. A loop inside a block is part of that
//! block's time, so it does not report.
#![forbid(unsafe_code)]

use std::cell::Cell;
use std::ops::Range;
use std::time::{Duration, Instant};

use crate::pool::parallel_for::{
    block_plan, parallel_for_scheduled, threads_for, Cost, LoopRun, Schedule,
};
use crate::pool::ThreadPool;
use crate::sync::{thread_local, AtomicU64, Mutex, Ordering};

// Thread-local: whether the calling thread is inside a loop is a fact about its stack, so
// only the outermost loop of a thread reports itself.
thread_local! {
    /// Whether the calling thread runs a loop of this module now.
    #[allow(clippy::missing_const_for_thread_local)] // loom's thread_local! has no const form
    static IN_LOOP: Cell<bool> = Cell::new(false);
}

/// Flops per cycle of a simple vectorized loop (8 `f32` lanes of AVX, one op each).
pub(crate) const VECTOR_FLOPS_PER_CYCLE: f64 = 8.0;
/// Flops per cycle of the GEMM microkernel on one core: two 8-lane fused multiply-adds per
/// cycle (AVX2; AVX-512 doubles the lanes but runs at a lower clock, and packing costs).
pub(crate) const GEMM_FLOPS_PER_CYCLE: f64 = 32.0;

/// About how many values one item of a memory-bound kernel covers when it groups small
/// units (planes, channels) several to an item.
const GROUP_ITEM_VALUES: usize = 4096;

/// The fewest items such a grouping leaves, where there are that many units.
const GROUP_MIN_ITEMS: usize = 16;

/// How many of `units` consecutive units of `unit_values` values each one item makes: as
/// many as fit in about 4096 values, leaving at least 16 items where there are that many
/// units (one item per small unit cost more in `parallel_for`'s ranges than its work); at
/// least 1.
pub(crate) fn units_per_item(unit_values: usize, units: usize) -> usize {
    (GROUP_ITEM_VALUES / unit_values.max(1))
        .min(units / GROUP_MIN_ITEMS)
        .max(1)
}

/// The cost of one item that reads `values_loaded` and writes `values_stored` `f32` values and
/// does `flops` arithmetic at `flops_per_cycle`.
pub fn item_cost(values_loaded: f64, values_stored: f64, flops: f64, flops_per_cycle: f64) -> Cost {
    Cost {
        bytes_loaded: values_loaded * 4.0,
        bytes_stored: values_stored * 4.0,
        compute_cycles: flops / flops_per_cycle,
    }
}

/// Runs `f(index, chunk)` on `pool` for every `chunk_len`-long chunk of `out` (the last may be
/// shorter), in parallel; `cost` is one chunk's cost. `index` counts chunks from 0.
pub(crate) fn for_each_chunk<T: Send>(
    pool: &dyn ThreadPool,
    out: &mut [T],
    chunk_len: usize,
    cost: Cost,
    f: impl Fn(usize, &mut [T]) + Sync,
) {
    let chunk_len = chunk_len.max(1);
    let mut rest = out;
    run_blocks(
        pool,
        rest.len().div_ceil(chunk_len),
        cost,
        |first, last| take_front(&mut rest, (last - first) * chunk_len),
        |blocks, block| {
            for (offset, chunk) in block.chunks_mut(chunk_len).enumerate() {
                f(blocks.start + offset, chunk);
            }
        },
    );
}

/// [`for_each_chunk`] over chunks inside chunks: `out` is cut into `outer_len`-long pieces (an
/// image), each piece into `inner_len`-long chunks (a block of channels), so no chunk straddles
/// two pieces. `f(outer, inner, chunk)` gets the piece's and the chunk's index.
pub(crate) fn for_each_nested_chunk<T: Send>(
    pool: &dyn ThreadPool,
    out: &mut [T],
    outer_len: usize,
    inner_len: usize,
    cost: Cost,
    f: impl Fn(usize, usize, &mut [T]) + Sync,
) {
    let layout = NestedChunks::new(out.len(), outer_len, inner_len);
    let mut rest = out;
    run_blocks(
        pool,
        layout.count(),
        cost,
        |first, last| take_front(&mut rest, layout.start(last) - layout.start(first)),
        |blocks, mut block| {
            for index in blocks {
                let chunk = take_front(&mut block, layout.start(index + 1) - layout.start(index));
                f(index / layout.per_outer, index % layout.per_outer, chunk);
            }
        },
    );
}

/// Where the chunks of [`for_each_nested_chunk`] lie in a slice of `len` values.
#[derive(Clone, Copy)]
struct NestedChunks {
    len: usize,
    outer_len: usize,
    inner_len: usize,
    /// Chunks per whole piece.
    per_outer: usize,
}

impl NestedChunks {
    fn new(len: usize, outer_len: usize, inner_len: usize) -> Self {
        let (outer_len, inner_len) = (outer_len.max(1), inner_len.max(1));
        let per_outer = outer_len.div_ceil(inner_len);
        Self {
            len,
            outer_len,
            inner_len,
            per_outer,
        }
    }

    /// Chunks in all: whole pieces, then the short last piece's.
    fn count(&self) -> usize {
        let tail = self.len % self.outer_len;
        self.len / self.outer_len * self.per_outer + tail.div_ceil(self.inner_len)
    }

    /// The offset of chunk `index` (`len` for the chunk past the last).
    fn start(&self, index: usize) -> usize {
        let (outer, inner) = (index / self.per_outer, index % self.per_outer);
        (outer * self.outer_len + inner * self.inner_len).min(self.len)
    }
}

/// [`for_each_chunk`] over two outputs cut in step: chunk `i` of `first` (`first_len` long)
/// and chunk `i` of `second` (`second_len` long) go to the same call `f(i, a, b)`. Both must
/// make the same number of chunks.
pub(crate) fn for_each_chunk_pair<T: Send, U: Send>(
    pool: &dyn ThreadPool,
    first: &mut [T],
    first_len: usize,
    second: &mut [U],
    second_len: usize,
    cost: Cost,
    f: impl Fn(usize, &mut [T], &mut [U]) + Sync,
) {
    let (first_len, second_len) = (first_len.max(1), second_len.max(1));
    let count = first.len().div_ceil(first_len);
    debug_assert_eq!(
        count,
        second.len().div_ceil(second_len),
        "for_each_chunk_pair: the two outputs make different numbers of chunks"
    );
    let (mut first_rest, mut second_rest) = (first, second);
    run_blocks(
        pool,
        count,
        cost,
        |begin, end| {
            let a = take_front(&mut first_rest, (end - begin) * first_len);
            (a, take_front(&mut second_rest, (end - begin) * second_len))
        },
        |blocks, (a, b)| {
            let pairs = a.chunks_mut(first_len).zip(b.chunks_mut(second_len));
            for (offset, (a, b)) in pairs.enumerate() {
                f(blocks.start + offset, a, b);
            }
        },
    );
}

/// Cuts the first `len` values (or all, if fewer) off `rest` and returns them.
fn take_front<'a, T>(rest: &mut &'a mut [T], len: usize) -> &'a mut [T] {
    let whole = std::mem::take(rest);
    let (front, back) = whole.split_at_mut(len.min(whole.len()));
    *rest = back;
    front
}

/// Runs `f(group, slot, pieces)` once per group, in parallel: `out` is cut into
/// `piece_len`-long pieces, piece `i` belonging to group `i % groups` (an NCHW tensor's planes
/// cut into channels: piece `n C + c` is image `n`'s plane of channel `c`), `pieces` holds the
/// group's pieces in order, and `slot` is the group's own element of `side` (one per group:
/// `groups = side.len()`), for a per-group result. `out` must hold a whole number of rounds
/// of `groups` pieces; `cost` is one group's cost.
pub(crate) fn for_each_strided_group<T: Send, S: Send>(
    pool: &dyn ThreadPool,
    out: &mut [T],
    piece_len: usize,
    side: &mut [S],
    cost: Cost,
    f: impl Fn(usize, &mut S, &mut [&mut [T]]) + Sync,
) {
    let (piece_len, groups) = (piece_len.max(1), side.len().max(1));
    let count = out.len().div_ceil(piece_len);
    let per_group = count / groups;
    debug_assert_eq!(
        per_group * groups,
        count,
        "for_each_strided_group: the pieces do not fill whole rounds of groups"
    );
    // The pieces group by group (`f` takes them as one slice): the one allocation left here.
    let mut ordered: Vec<&mut [T]> = (0..count).map(|_| Default::default()).collect();
    for (index, piece) in out.chunks_mut(piece_len).enumerate() {
        ordered[(index % groups) * per_group + index / groups] = piece;
    }
    let (mut slots, mut pieces) = (side, &mut ordered[..]);
    run_blocks(
        pool,
        slots.len(),
        cost,
        |first, last| {
            let group_pieces = take_front(&mut pieces, (last - first) * per_group);
            (take_front(&mut slots, last - first), group_pieces)
        },
        |blocks, (slots, pieces)| {
            let groups = slots.iter_mut().zip(pieces.chunks_mut(per_group.max(1)));
            for (offset, (slot, pieces)) in groups.enumerate() {
                f(blocks.start + offset, slot, pieces);
            }
        },
    );
}

/// The most blocks one call splits its output into; they sit in an array on the caller's
/// stack, so a call allocates nothing. Eigen's plan makes at most 4 blocks per thread, so this
/// only coarsens the plan of a pool of more than 16 threads.
const MAX_BLOCKS: usize = 64;

/// Runs the `n` items of a loop in parallel, in the blocks `parallel_for` would cut for
/// `cost`: `split(first, last)` cuts block `[first, last)`'s share of the outputs (called for
/// the blocks in order, before any runs) and `run(first..last, share)` computes it. Each
/// share waits in its own slot of a stack array, behind an uncontended lock that the block's
/// one call takes once.
fn run_blocks<B: Send>(
    pool: &dyn ThreadPool,
    n: usize,
    cost: Cost,
    mut split: impl FnMut(usize, usize) -> B,
    run: impl Fn(Range<usize>, B) + Sync,
) {
    let size = block_size(pool.num_threads(), n, cost);
    let slots: [Mutex<Option<B>>; MAX_BLOCKS] = std::array::from_fn(|block| {
        let first = block * size;
        Mutex::new((first < n).then(|| split(first, (first + size).min(n))))
    });
    let schedule = Schedule::FixedBlockSize { block_size: size };
    let outermost = Outermost::enter();
    let busy = AtomicU64::new(0);
    let start = Instant::now();
    parallel_for_scheduled(pool, n, schedule, |first, last| {
        debug_assert_eq!(first % size, 0, "a block that is not the planned one");
        let block_start = Instant::now();
        let blocks = first / size..last.div_ceil(size);
        for (block, slot) in slots.iter().enumerate().take(blocks.end).skip(blocks.start) {
            let share = slot.lock().take();
            let first = block * size;
            run(
                first..(first + size).min(n),
                share.expect("each block runs once"),
            );
        }
        busy.fetch_add(nanos(block_start.elapsed()), Ordering::Relaxed);
    });
    if outermost.0 {
        pool.loop_ran(&LoopRun {
            items: n,
            cost,
            busy: Duration::from_nanos(busy.load(Ordering::Relaxed)),
            wall: start.elapsed(),
        });
    }
}

/// Whether this loop is its thread's outermost; leaving it (also by a panic) clears the mark.
struct Outermost(bool);

impl Outermost {
    fn enter() -> Self {
        Outermost(!IN_LOOP.with(|in_loop| in_loop.replace(true)))
    }
}

impl Drop for Outermost {
    fn drop(&mut self) {
        if self.0 {
            IN_LOOP.with(|in_loop| in_loop.set(false));
        }
    }
}

fn nanos(time: Duration) -> u64 {
    u64::try_from(time.as_nanos()).unwrap_or(u64::MAX)
}

/// The block size `parallel_for` would use for `n` items of `cost` on `threads` threads (all
/// `n` where it would run them inline), coarsened to make at most [`MAX_BLOCKS`] blocks.
fn block_size(threads: usize, n: usize, cost: Cost) -> usize {
    let size = if n <= 1 || threads <= 1 || threads_for(n, cost, threads) == 1 {
        n
    } else {
        block_plan(n, cost, threads).size
    };
    size.max(n.div_ceil(MAX_BLOCKS)).max(1)
}

/// How many of a loop's `n` items of `cost` its busiest thread runs on an intra-op pool of
/// `threads` threads: the loop is cut as [`for_each_chunk`] cuts it, and its equal blocks are
/// shared out a block at a time, so the busiest thread runs `ceil(blocks / threads)` of them
/// (all `n` where the loop runs inline).
pub(crate) fn busiest_items(threads: usize, n: usize, cost: Cost) -> usize {
    let size = block_size(threads, n, cost);
    if n <= size || threads <= 1 {
        return n;
    }
    (n.div_ceil(size).div_ceil(threads) * size).min(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::{Pool, PoolKind, PoolOptions};

    fn pool(threads: usize) -> Pool {
        Pool::new(PoolOptions::new(PoolKind::Eigen, threads, "par-test")).unwrap()
    }

    #[test]
    fn every_chunk_is_visited_once_with_its_index() {
        let pool = pool(2);
        let mut out = vec![0usize; 1003];
        let cost = item_cost(0.0, 10.0, 1e5, 1.0);
        for_each_chunk(pool.as_dyn(), &mut out, 10, cost, |index, chunk| {
            chunk.iter_mut().for_each(|value| *value += index + 1);
        });
        for (i, value) in out.iter().enumerate() {
            assert_eq!(*value, i / 10 + 1, "element {i}");
        }
    }

    #[test]
    fn nested_chunks_never_straddle_an_outer_piece() {
        let pool = pool(2);
        let mut out = vec![(0, 0); 3 * 7];
        let cost = item_cost(0.0, 3.0, 1e5, 1.0);
        for_each_nested_chunk(
            pool.as_dyn(),
            &mut out,
            7,
            3,
            cost,
            |outer, inner, chunk| {
                chunk.iter_mut().for_each(|value| *value = (outer, inner));
            },
        );
        let expected: Vec<(usize, usize)> = (0..3)
            .flat_map(|outer| (0..7).map(move |i| (outer, i / 3)))
            .collect();
        assert_eq!(out, expected);
    }

    #[test]
    fn nested_chunks_cut_a_short_last_piece_too() {
        let pool = pool(2);
        let mut out = vec![(0, 0, 0); 2 * 7 + 5];
        let cost = item_cost(0.0, 3.0, 1e5, 1.0);
        let layout = (out.len(), 7, 3);
        for_each_nested_chunk(
            pool.as_dyn(),
            &mut out,
            7,
            3,
            cost,
            |outer, inner, chunk| {
                let len = chunk.len();
                chunk
                    .iter_mut()
                    .for_each(|value| *value = (outer, inner, len));
            },
        );
        let expected: Vec<(usize, usize, usize)> = (0..layout.0)
            .map(|i| {
                let (outer, within) = (i / layout.1, i % layout.1);
                let piece = layout.1.min(layout.0 - outer * layout.1);
                let inner = within / layout.2;
                (outer, inner, layout.2.min(piece - inner * layout.2))
            })
            .collect();
        assert_eq!(out, expected);
    }

    #[test]
    fn more_blocks_than_the_stack_holds_are_coarsened_not_lost() {
        let pool = pool(24);
        let mut out = vec![0usize; 5000];
        let cost = item_cost(0.0, 1.0, 1e6, 1.0);
        for_each_chunk(pool.as_dyn(), &mut out, 1, cost, |index, chunk| {
            chunk[0] += index + 1;
        });
        assert!(out.iter().enumerate().all(|(i, &value)| value == i + 1));
    }

    #[test]
    fn strided_groups_get_their_pieces_in_order() {
        let pool = pool(2);
        let (images, groups, len) = (3, 4, 5);
        let mut out = vec![(0, 0); images * groups * len];
        let mut seen = vec![0; groups];
        let cost = item_cost(0.0, 15.0, 1e5, 1.0);
        for_each_strided_group(
            pool.as_dyn(),
            &mut out,
            len,
            &mut seen,
            cost,
            |group, slot, pieces| {
                assert_eq!(pieces.len(), images);
                *slot = group + 1;
                for (image, piece) in pieces.iter_mut().enumerate() {
                    piece.iter_mut().for_each(|value| *value = (image, group));
                }
            },
        );
        let expected: Vec<(usize, usize)> = (0..images * groups * len)
            .map(|i| (i / (groups * len), (i / len) % groups))
            .collect();
        assert_eq!(out, expected);
        assert_eq!(seen, [1, 2, 3, 4]);
    }

    #[test]
    fn chunk_pairs_line_up() {
        let pool = pool(2);
        let mut rows = vec![0u32; 12];
        let mut sums = vec![0u32; 4];
        let cost = item_cost(0.0, 4.0, 1e5, 1.0);
        for_each_chunk_pair(
            pool.as_dyn(),
            &mut rows,
            3,
            &mut sums,
            1,
            cost,
            |i, row, sum| {
                row.iter_mut().for_each(|value| *value = i as u32);
                sum[0] = row.iter().sum();
            },
        );
        assert_eq!(sums, [0, 3, 6, 9]);
    }
}

/// The examples of the crate-private items above (doctests reach only the public API).
#[cfg(all(test, not(loom)))]
mod examples {
    #[test]
    fn for_each_chunk_visits_every_chunk_by_index() {
        use crate::kernels::par::{for_each_chunk, item_cost};
        use crate::pool::{Pool, PoolKind, PoolOptions};
        let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "doc")).unwrap();
        let mut squares = vec![0.0f32; 10];
        for_each_chunk(
            pool.as_dyn(),
            &mut squares,
            4,
            item_cost(0.0, 4.0, 4.0, 8.0),
            |index, chunk| {
                for (offset, value) in chunk.iter_mut().enumerate() {
                    let i = (index * 4 + offset) as f32;
                    *value = i * i;
                }
            },
        );
        assert_eq!(squares[9], 81.0);
    }

    #[test]
    fn the_busiest_thread_runs_its_share_of_blocks() {
        use crate::kernels::par::{busiest_items, item_cost};
        let heavy = item_cost(0.0, 0.0, 1e6, 1.0);
        assert_eq!(busiest_items(1, 64, heavy), 64);
        assert_eq!(busiest_items(2, 64, heavy), 32); // 8 blocks of 8, 4 each
        assert_eq!(busiest_items(3, 64, item_cost(0.0, 0.0, 1.0, 1.0)), 64); // too small to split
    }
}
