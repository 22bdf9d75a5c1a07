//! Fixed-partition loops over [`parallel_for`]: the one way kernels go parallel.
//!
//! A kernel cuts its output slice into chunks whose size depends only on the problem's shape,
//! never on the thread count, and [`for_each_chunk`] runs `f(index, chunk)` for every chunk on
//! the intra-op pool. Each chunk (or pair of chunks, or group of pieces) sits behind its own
//! (uncontended) mutex from `crate::sync`, which is how disjoint `&mut` pieces of one slice
//! reach a `Fn + Sync` closure without `unsafe`; a block of `parallel_for` locks its items one
//! after another. Because a chunk is computed start to
//! finish by one call of `f`, whatever thread makes it, results do not depend on the pool kind
//! or the thread count (see the determinism notes in [`crate::kernels`]).
//!
//! The [`Cost`] handed to `parallel_for` is one chunk's: its bytes loaded and stored, and its
//! arithmetic in cycles at [`VECTOR_FLOPS_PER_CYCLE`] (or [`GEMM_FLOPS_PER_CYCLE`] inside a
//! GEMM), so Eigen's cost model picks the thread count and block size as it would for the same
//! loop in TensorFlow.
#![forbid(unsafe_code)]

use crate::pool::parallel_for::{parallel_for, Cost};
use crate::pool::ThreadPool;
use crate::sync::Mutex;

/// Flops per cycle of a simple vectorized loop (8 `f32` lanes of AVX, one op each).
pub const VECTOR_FLOPS_PER_CYCLE: f64 = 8.0;
/// Flops per cycle of the GEMM microkernel on one core: two 8-lane fused multiply-adds per
/// cycle (AVX2; AVX-512 doubles the lanes but runs at a lower clock, and packing costs).
pub const GEMM_FLOPS_PER_CYCLE: f64 = 32.0;

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
///
/// ```
/// use enginetop::kernels::par::{for_each_chunk, item_cost};
/// use enginetop::pool::{Pool, PoolKind, PoolOptions};
/// let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "doc")).unwrap();
/// let mut squares = vec![0.0f32; 10];
/// for_each_chunk(pool.as_dyn(), &mut squares, 4, item_cost(0.0, 4.0, 4.0, 8.0), |index, chunk| {
///     for (offset, value) in chunk.iter_mut().enumerate() {
///         let i = (index * 4 + offset) as f32;
///         *value = i * i;
///     }
/// });
/// assert_eq!(squares[9], 81.0);
/// ```
pub fn for_each_chunk<T: Send>(
    pool: &dyn ThreadPool,
    out: &mut [T],
    chunk_len: usize,
    cost: Cost,
    f: impl Fn(usize, &mut [T]) + Sync,
) {
    let chunks: Vec<Mutex<&mut [T]>> = out.chunks_mut(chunk_len.max(1)).map(Mutex::new).collect();
    run_items(pool, &chunks, cost, |index, chunk| f(index, chunk));
}

/// [`for_each_chunk`] over chunks inside chunks: `out` is cut into `outer_len`-long pieces (an
/// image), each piece into `inner_len`-long chunks (a block of channels), so no chunk straddles
/// two pieces. `f(outer, inner, chunk)` gets the piece's and the chunk's index.
pub fn for_each_nested_chunk<T: Send>(
    pool: &dyn ThreadPool,
    out: &mut [T],
    outer_len: usize,
    inner_len: usize,
    cost: Cost,
    f: impl Fn(usize, usize, &mut [T]) + Sync,
) {
    let outer_len = outer_len.max(1);
    let inner_len = inner_len.max(1);
    let per_outer = outer_len.div_ceil(inner_len);
    let chunks: Vec<Mutex<&mut [T]>> = out
        .chunks_mut(outer_len)
        .flat_map(|piece| piece.chunks_mut(inner_len))
        .map(Mutex::new)
        .collect();
    run_items(pool, &chunks, cost, |index, chunk| {
        f(index / per_outer, index % per_outer, chunk)
    });
}

/// [`for_each_chunk`] over two outputs cut in step: chunk `i` of `first` (`first_len` long)
/// and chunk `i` of `second` (`second_len` long) go to the same call `f(i, a, b)`. Both must
/// make the same number of chunks.
pub fn for_each_chunk_pair<T: Send, U: Send>(
    pool: &dyn ThreadPool,
    first: &mut [T],
    first_len: usize,
    second: &mut [U],
    second_len: usize,
    cost: Cost,
    f: impl Fn(usize, &mut [T], &mut [U]) + Sync,
) {
    let count = first.len().div_ceil(first_len.max(1));
    debug_assert_eq!(
        count,
        second.len().div_ceil(second_len.max(1)),
        "for_each_chunk_pair: the two outputs make different numbers of chunks"
    );
    let pairs: Vec<Mutex<(&mut [T], &mut [U])>> = first
        .chunks_mut(first_len.max(1))
        .zip(second.chunks_mut(second_len.max(1)))
        .map(Mutex::new)
        .collect();
    run_items(pool, &pairs, cost, |index, (a, b)| f(index, a, b));
}

/// One item of [`for_each_strided_group`]: a group's slot and its pieces.
type GroupItem<'s, 'p, S, T> = (&'s mut S, &'s mut [&'p mut [T]]);

/// Runs `f(group, slot, pieces)` once per group, in parallel: `out` is cut into
/// `piece_len`-long pieces, piece `i` belonging to group `i % groups` (an NCHW tensor's planes
/// cut into channels: piece `n C + c` is image `n`'s plane of channel `c`), `pieces` holds the
/// group's pieces in order, and `slot` is the group's own element of `side` (one per group:
/// `groups = side.len()`), for a per-group result. `out` must hold a whole number of rounds
/// of `groups` pieces; `cost` is one group's cost.
pub fn for_each_strided_group<T: Send, S: Send>(
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
    let mut slots: Vec<Option<&mut [T]>> = (0..count).map(|_| None).collect();
    for (index, piece) in out.chunks_mut(piece_len).enumerate() {
        slots[(index % groups) * per_group + index / groups] = Some(piece);
    }
    let mut ordered: Vec<&mut [T]> = slots.into_iter().flatten().collect();
    let items: Vec<Mutex<GroupItem<'_, '_, S, T>>> = side
        .iter_mut()
        .zip(ordered.chunks_mut(per_group.max(1)))
        .map(Mutex::new)
        .collect();
    run_items(pool, &items, cost, |group, (slot, pieces)| {
        f(group, slot, pieces)
    });
}

/// Runs `f(index, item)` once per item, in parallel. Each item sits behind its own
/// (uncontended) lock: `parallel_for` hands out index ranges through a shared closure, and the
/// lock is how one range's call gets the `&mut` of its items.
fn run_items<I: Send>(
    pool: &dyn ThreadPool,
    items: &[Mutex<I>],
    cost: Cost,
    f: impl Fn(usize, &mut I) + Sync,
) {
    parallel_for(pool, items.len(), cost, |begin, end| {
        for (index, item) in items.iter().enumerate().take(end).skip(begin) {
            f(index, &mut item.lock());
        }
    });
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
