//! GEMM: `C = alpha op(A) op(B) + beta C` in `f32`, rows split over the intra-op pool.
//!
//! # Layout
//! `C` is `m x n` row-major. `A` is stored `m x k` row-major, or `k x m` with
//! [`Transpose::Yes`] (then `op(A) = A^T`); likewise `B` is `k x n` or, transposed, `n x k`.
//! Transposes cost no copy: they only swap the strides the `gemm` crate reads with.
//!
//! # Parallelism and determinism
//! `C`'s rows are cut into an even number of equal blocks of [`rows_per_block`] rows (40 to
//! 256, about an eighth of `m`), a figure that depends on the shape alone. Each block is one
//! `parallel_for` item: a single-threaded `gemm` crate call
//! (`Parallelism::None`) on the block's rows of `A` and all of `B`, its whole `k` loop inside.
//! The same block is always computed by the same call on the same data, so `C` is bitwise the
//! same on every pool and thread count. An item costs `2 * rows * n * k` flops at
//! [`super::par::GEMM_FLOPS_PER_CYCLE`] plus its reads and writes.
//!
//! The `gemm` crate's API is `unsafe` (raw pointers and strides); the one call to it is in
//! `call.rs`, which checks every view against its slice first. This file is safe code.
#![deny(unsafe_code)]

mod call;

pub(crate) use call::{column_blocks, gemm_single_threaded_into_block, ColumnBlock};
pub(crate) use call::{gemm_single_threaded, gemm_single_threaded_strided, MatView};

use super::error::{expect_rank, expect_shape, KernelError};
use super::par::{for_each_chunk, item_cost, GEMM_FLOPS_PER_CYCLE};
use super::tensor::Tensor;
use super::work::Work;
use crate::pool::ThreadPool;

/// Fewest rows of `C` per parallel item before the blocks are evened out: below this, re-packing `B` for every item costs more
/// than a quarter of the item's time (each item packs all of `B`; see [`rows_per_block`]).
pub(crate) const GEMM_MIN_ROWS: usize = 64;
/// Most rows of `C` per parallel item: past this, packing overhead is under 10%.
pub(crate) const GEMM_MAX_ROWS: usize = 256;
/// Items a large GEMM is cut into, at least, so 8 threads have work.
pub(crate) const GEMM_TARGET_BLOCKS: usize = 8;

/// Whether a GEMM operand is used as stored or transposed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Transpose {
    /// `op(X) = X`.
    #[default]
    No,
    /// `op(X) = X^T`.
    Yes,
}

/// The sizes of `C (m x n) = op(A) (m x k) * op(B) (k x n)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmShape {
    /// Rows of `C` and `op(A)`.
    pub m: usize,
    /// Columns of `C` and `op(B)`.
    pub n: usize,
    /// Columns of `op(A)`, rows of `op(B)`.
    pub k: usize,
}

impl GemmShape {
    /// `2 m n k` flops; reads `A`, `B` (and `C` when accumulating, not counted), writes `C`.
    pub fn work(&self) -> Work {
        let (m, n, k) = (self.m as f64, self.n as f64, self.k as f64);
        Work::new(2.0 * m * n * k, m * k + k * n + m * n)
    }
}

/// A GEMM call: shape, transposes and scales. `GemmSpec::new(m, n, k)` is `C = A B`.
///
/// ```
/// use enginetop::kernels::{gemm, GemmSpec};
/// use enginetop::pool::{Pool, PoolKind, PoolOptions};
/// let pool = Pool::new(PoolOptions::new(PoolKind::Eigen, 2, "doc")).unwrap();
/// let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]; // 2 x 3
/// let b = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0]; // 3 x 2
/// let mut c = [0.0; 4];
/// gemm(pool.as_dyn(), &GemmSpec::new(2, 2, 3), &a, &b, &mut c).unwrap();
/// assert_eq!(c, [4.0, 5.0, 10.0, 11.0]);
/// // c += a a^T
/// gemm(pool.as_dyn(), &GemmSpec::new(2, 2, 3).transpose_b().accumulate(), &a, &a, &mut c)
///     .unwrap();
/// assert_eq!(c, [18.0, 37.0, 42.0, 88.0]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmSpec {
    /// The sizes.
    pub shape: GemmShape,
    /// Whether `A` is stored transposed (`k x m`).
    pub trans_a: Transpose,
    /// Whether `B` is stored transposed (`n x k`).
    pub trans_b: Transpose,
    /// Scale of the product.
    pub alpha: f32,
    /// Scale of `C`'s old value; 0 means `C` is not read.
    pub beta: f32,
}

impl GemmSpec {
    /// `C (m x n) = A (m x k) B (k x n)`.
    pub fn new(m: usize, n: usize, k: usize) -> Self {
        GemmSpec {
            shape: GemmShape { m, n, k },
            trans_a: Transpose::No,
            trans_b: Transpose::No,
            alpha: 1.0,
            beta: 0.0,
        }
    }

    /// Reads `A` as stored `k x m` and uses its transpose.
    pub fn transpose_a(mut self) -> Self {
        self.trans_a = Transpose::Yes;
        self
    }

    /// Reads `B` as stored `n x k` and uses its transpose.
    pub fn transpose_b(mut self) -> Self {
        self.trans_b = Transpose::Yes;
        self
    }

    /// Adds the product to `C` instead of overwriting it (`beta = 1`).
    pub fn accumulate(mut self) -> Self {
        self.beta = 1.0;
        self
    }

    /// Scales the product by `alpha`.
    pub fn alpha(mut self, alpha: f32) -> Self {
        self.alpha = alpha;
        self
    }

    /// `op(A)` as a strided view of `a`.
    pub(crate) fn view_a<'a>(&self, a: &'a [f32]) -> MatView<'a> {
        operand_view(a, self.trans_a, self.shape.k, self.shape.m)
    }

    /// `op(B)` as a strided view of `b`.
    pub(crate) fn view_b<'a>(&self, b: &'a [f32]) -> MatView<'a> {
        operand_view(b, self.trans_b, self.shape.n, self.shape.k)
    }

    fn check_lengths(&self, a: usize, b: usize, c: usize) -> Result<(), KernelError> {
        let GemmShape { m, n, k } = self.shape;
        for (name, len, expected) in [("a", a, m * k), ("b", b, k * n), ("c", c, m * n)] {
            if len != expected {
                return Err(KernelError::shape(
                    "gemm",
                    format!(
                        "{name} holds {len} values but m={m}, n={n}, k={k} needs {expected}; \
                         pass matching sizes"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// A view of an operand used as `rows x cols` after `trans`, stored with `stored_cols`
/// columns when not transposed (`cols`), or `rows` when transposed.
fn operand_view(data: &[f32], trans: Transpose, cols: usize, rows: usize) -> MatView<'_> {
    match trans {
        Transpose::No => MatView {
            data,
            row_stride: cols,
            col_stride: 1,
        },
        Transpose::Yes => MatView {
            data,
            row_stride: 1,
            col_stride: rows,
        },
    }
}

/// Rows of `C` per parallel item for a GEMM of this shape; never depends on the thread count.
///
/// Every item is a separate `gemm` crate call that packs all of `B` (`k x n`) again, so an item
/// of `r` rows spends about `1 / r` of its time re-packing relative to its `2 r k n` flops
/// (the measurements: `bench/KERNELS.md`). So: `m / 8` rows rounded up to a multiple of 16, kept within
/// [`GEMM_MIN_ROWS`, `GEMM_MAX_ROWS`]; a GEMM of fewer than `2 * GEMM_MIN_ROWS` rows is one item.
/// Then the blocks are evened out: an odd block count is raised by one (3 blocks on 2 threads
/// take as long as 4, and 2, 4 and 8 threads all divide an even count better) and the rows
/// are shared out equally, rounded up to a multiple of 8 (so blocks of 40 rows occur, just past 128).
/// A 192-row GEMM is 4 blocks of 48 rows, not 64, 64, 64 (two of which run one after the other).
pub(crate) fn rows_per_block(shape: GemmShape) -> usize {
    if shape.m < 2 * GEMM_MIN_ROWS {
        return shape.m.max(1);
    }
    let eighth = shape.m.div_ceil(GEMM_TARGET_BLOCKS).next_multiple_of(16);
    let rows = eighth.clamp(GEMM_MIN_ROWS, GEMM_MAX_ROWS);
    let blocks = shape.m.div_ceil(rows).next_multiple_of(2);
    shape.m.div_ceil(blocks).next_multiple_of(8)
}

/// `C = alpha op(A) op(B) + beta C` on `pool` (see the module docs for layout and blocking).
/// Returns the call's [`Work`].
pub fn gemm(
    pool: &dyn ThreadPool,
    spec: &GemmSpec,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
) -> Result<Work, KernelError> {
    spec.check_lengths(a.len(), b.len(), c.len())?;
    gemm_rows(pool, spec, a, b, c);
    Ok(spec.shape.work())
}

/// [`gemm`] on checked lengths: one item per block of rows.
pub(crate) fn gemm_rows(
    pool: &dyn ThreadPool,
    spec: &GemmSpec,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
) {
    let GemmShape { n, k, .. } = spec.shape;
    let rows = rows_per_block(spec.shape);
    let cost = gemm_item_cost(rows, n, k);
    let view_a = spec.view_a(a);
    let view_b = spec.view_b(b);
    for_each_chunk(pool, c, rows * n.max(1), cost, |block, c_rows| {
        let first_row = block * rows;
        let block_rows = c_rows.len() / n.max(1);
        let a_rows = MatView {
            data: &view_a.data[first_row * view_a.row_stride..],
            ..view_a
        };
        let block_shape = (block_rows, n, k);
        gemm_single_threaded(block_shape, a_rows, view_b, c_rows, spec.alpha, spec.beta);
    });
}

/// `out = a b` for 2-D tensors: `a` is `m x k`, `b` is `k x n`, `out` must be `m x n`.
///
/// ```
/// use enginetop::kernels::{matmul, Tensor};
/// use enginetop::pool::{Pool, PoolKind, PoolOptions};
/// let pool = Pool::new(PoolOptions::new(PoolKind::Simple, 2, "doc")).unwrap();
/// let a = Tensor::random(&[3, 4], 1);
/// let b = Tensor::random(&[5, 6], 2);
/// let mut out = Tensor::zeros(&[3, 6]);
/// let message = matmul(pool.as_dyn(), &a, &b, &mut out).unwrap_err().to_string();
/// assert!(message.contains("a has 4 columns but b has 5 rows"), "{message}");
/// ```
pub fn matmul(
    pool: &dyn ThreadPool,
    a: &Tensor,
    b: &Tensor,
    out: &mut Tensor,
) -> Result<Work, KernelError> {
    let [m, k] = expect_rank("gemm", "a", &a.shape, "rows, columns")?;
    let [b_rows, n] = expect_rank("gemm", "b", &b.shape, "rows, columns")?;
    if k != b_rows {
        return Err(KernelError::shape(
            "gemm",
            format!("a has {k} columns but b has {b_rows} rows; they must be equal"),
        ));
    }
    expect_shape("gemm", "the output", &out.shape, &[m, n])?;
    gemm(
        pool,
        &GemmSpec::new(m, n, k),
        &a.data,
        &b.data,
        &mut out.data,
    )
}

/// The cost of one GEMM item (one thread's block of a product) of `rows x n`, inner dimension `k`.
pub(crate) fn gemm_item_cost(rows: usize, n: usize, k: usize) -> crate::pool::parallel_for::Cost {
    let (rows, n, k) = (rows as f64, n as f64, k as f64);
    item_cost(
        rows * k + k * n,
        rows * n,
        2.0 * rows * n * k,
        GEMM_FLOPS_PER_CYCLE,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_even_in_number_and_nearly_equal() {
        for m in (2 * GEMM_MIN_ROWS..5000).step_by(7) {
            let rows = rows_per_block(GemmShape { m, n: 64, k: 64 });
            let blocks = m.div_ceil(rows);
            assert!(rows <= GEMM_MAX_ROWS && rows % 8 == 0, "m={m}: {rows} rows");
            assert!(rows * blocks >= m, "m={m}: {blocks} x {rows} rows");
            // The last block falls short of the others by less than one block (so the count
            // is minimal), and by little: the count was rounded up to even, then the rows to 8.
            assert!(m - (blocks - 1) * rows <= rows, "m={m}");
            let ideal = m.div_ceil(blocks.next_multiple_of(2));
            assert!(rows - ideal < 8, "m={m}: {rows} rows, ideal {ideal}");
        }
        let blocks = |m: usize| m.div_ceil(rows_per_block(GemmShape { m, n: 64, k: 64 }));
        assert_eq!((blocks(192), blocks(384), blocks(1728)), (4, 6, 8));
    }
}

/// The examples of the crate-private items above (doctests reach only the public API).
#[cfg(all(test, not(loom)))]
mod examples {
    #[test]
    fn rows_per_block_cuts_rows_into_even_blocks_of_eights() {
        use crate::kernels::gemm::{rows_per_block, GemmShape};
        let rows = |m| {
            rows_per_block(GemmShape {
                m,
                n: 1024,
                k: 1024,
            })
        };
        assert_eq!(
            (rows(100), rows(512), rows(1024), rows(4096)),
            (100, 64, 128, 256)
        );
        assert_eq!((rows(192), rows(200), rows(1728)), (48, 56, 216));
    }
}
