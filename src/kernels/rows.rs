//! Row-wise loops for kernels that work on the last dimension (softmax, layer-norm).
#![forbid(unsafe_code)]

use super::elementwise::ELEMENTWISE_CHUNK;
use super::error::{expect_rank, KernelError};
use super::par::{for_each_chunk, item_cost, VECTOR_FLOPS_PER_CYCLE};
use crate::pool::ThreadPool;

/// `(rows, cols)` of a 2-D tensor.
pub(super) fn matrix_dims(
    kernel: &'static str,
    name: &str,
    shape: &[usize],
) -> Result<(usize, usize), KernelError> {
    let [rows, cols] = expect_rank(kernel, name, shape, "rows, columns")?;
    Ok((rows, cols))
}

/// Whole rows per item: about [`ELEMENTWISE_CHUNK`] values, at least one row.
pub(super) fn rows_per_item(cols: usize) -> usize {
    (ELEMENTWISE_CHUNK / cols.max(1)).max(1)
}

/// Runs `f(row, out_row)` for every `cols`-long row of `out`, whole rows per item; each row
/// reads `loads` and does `flops` per value.
pub(super) fn for_each_row(
    pool: &dyn ThreadPool,
    out: &mut [f32],
    cols: usize,
    (loads, flops): (f64, f64),
    f: impl Fn(usize, &mut [f32]) + Sync,
) {
    let cols = cols.max(1);
    let rows = rows_per_item(cols);
    let values = (rows * cols) as f64;
    let cost = item_cost(
        loads * values,
        values,
        flops * values,
        VECTOR_FLOPS_PER_CYCLE,
    );
    for_each_chunk(pool, out, rows * cols, cost, |index, block| {
        for (offset, row) in block.chunks_mut(cols).enumerate() {
            f(index * rows + offset, row);
        }
    });
}
