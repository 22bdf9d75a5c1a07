//! The one call into the `gemm` crate: a single-threaded `f32` GEMM on checked slices.
//!
//! `gemm::gemm` takes raw pointers and strides. [`gemm_single_threaded`] takes slices and
//! strides instead, checks that every element the strides reach lies inside its slice, and only
//! then calls it, with `Parallelism::None`: threading is our `parallel_for`'s job. The
//! destination is row-major, its rows `n` apart or, with [`gemm_single_threaded_strided`],
//! any row stride of at least `n` (a block of columns of a wider matrix in its slice). To let
//! several threads write disjoint column blocks of one matrix at once, [`column_blocks`] cuts
//! a `&mut` matrix into [`ColumnBlock`]s (`Send`, each the one handle to its values) and
//! [`gemm_single_threaded_into_block`] computes into one.
#![deny(unsafe_code)]

use std::marker::PhantomData;

/// A read-only strided matrix in a slice: element `(row, col)` is
/// `data[row * row_stride + col * col_stride]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MatView<'a> {
    pub(crate) data: &'a [f32],
    pub(crate) row_stride: usize,
    pub(crate) col_stride: usize,
}

impl MatView<'_> {
    /// Whether every element of a `rows x cols` matrix lies inside `data` and every offset
    /// fits an `isize`.
    fn covers(&self, rows: usize, cols: usize) -> bool {
        fits(
            self.data.len(),
            rows,
            cols,
            self.row_stride,
            self.col_stride,
        )
    }
}

/// Whether a `rows x cols` matrix with these strides fits in `len` elements (with every stride
/// and offset representable as `isize`). An empty matrix always fits.
fn fits(len: usize, rows: usize, cols: usize, row_stride: usize, col_stride: usize) -> bool {
    if rows == 0 || cols == 0 {
        return true;
    }
    let last = (rows - 1)
        .checked_mul(row_stride)
        .and_then(|rows_span| rows_span.checked_add((cols - 1).checked_mul(col_stride)?));
    let strides_fit = isize::try_from(row_stride).is_ok() && isize::try_from(col_stride).is_ok();
    matches!(last, Some(last) if last < len && isize::try_from(last).is_ok()) && strides_fit
}

/// `c = alpha * a * b + beta * c` for `a` (`m x k`), `b` (`k x n`) and `c` (`m x n`,
/// row-major with `n` columns), on the calling thread. With `beta == 0` `c` is not read (NaNs
/// in it do not propagate). Panics if a view or `c` is too short for its matrix: callers check
/// shapes and return errors first, so a panic here is a bug in a kernel.
pub(crate) fn gemm_single_threaded(
    (m, n, k): (usize, usize, usize),
    a: MatView<'_>,
    b: MatView<'_>,
    c: &mut [f32],
    alpha: f32,
    beta: f32,
) {
    gemm_single_threaded_strided((m, n, k), a, b, (c, n), alpha, beta);
}

/// [`gemm_single_threaded`] into a `c` whose rows lie `c_row_stride` values apart (at least
/// `n`): row `i` of the product is `c[i * c_row_stride..][..n]`, and the values between rows
/// are neither read nor written (a block of columns of a wider matrix, such as a run of
/// pixels of every output plane of an image).
pub(crate) fn gemm_single_threaded_strided(
    (m, n, k): (usize, usize, usize),
    a: MatView<'_>,
    b: MatView<'_>,
    (c, c_row_stride): (&mut [f32], usize),
    alpha: f32,
    beta: f32,
) {
    if m == 0 || n == 0 {
        return;
    }
    assert!(
        c_row_stride >= n,
        "gemm: dst rows of {n} overlap at stride {c_row_stride}"
    );
    assert!(
        fits(c.len(), m, n, c_row_stride, 1),
        "gemm: dst too short for {m}x{n}"
    );
    #[allow(unsafe_code)]
    // SAFETY: the asserts above checked that every `c[i * c_row_stride + j]` (i < m, j < n)
    // is in bounds, with the offsets fitting `isize`, and that `c`'s rows do not overlap
    // (`c_row_stride >= n`); `c` is borrowed mutably, so it aliases neither view, and no
    // other thread touches it for the call.
    unsafe {
        gemm_into_raw((m, n, k), a, b, (c.as_mut_ptr(), c_row_stride), alpha, beta);
    }
}

/// The crate call behind [`gemm_single_threaded_strided`] and
/// [`gemm_single_threaded_into_block`], after checking that both views cover their matrices
/// (panics if not).
///
/// # Safety
/// `dst` must point to `m` rows of `n` writable values, row `i` at `dst + i * dst_row_stride`
/// (`dst_row_stride >= n`, every offset fitting `isize`), aliased by nothing else for the call.
#[allow(unsafe_code)]
unsafe fn gemm_into_raw(
    (m, n, k): (usize, usize, usize),
    a: MatView<'_>,
    b: MatView<'_>,
    (dst, dst_row_stride): (*mut f32, usize),
    alpha: f32,
    beta: f32,
) {
    assert!(a.covers(m, k), "gemm: lhs view too short for {m}x{k}");
    assert!(b.covers(k, n), "gemm: rhs view too short for {k}x{n}");
    // The casts cannot wrap: `covers` checked every stride fits an isize.
    let (a_rs, a_cs) = (a.row_stride as isize, a.col_stride as isize);
    let (b_rs, b_cs) = (b.row_stride as isize, b.col_stride as isize);
    // SAFETY: for every (row, col) of each view, `row * row_stride + col * col_stride` is in
    // bounds of its slice (`covers` checked the largest such offset without overflow) and
    // fits `isize`, as `gemm` requires; the caller vouches for `dst` (see above). With
    // `k == 0` the crate reads neither view and clears or scales `dst`.
    unsafe {
        ::gemm::gemm(
            m,
            n,
            k,
            dst,
            1,
            dst_row_stride as isize,
            beta != 0.0,
            a.data.as_ptr(),
            a_cs,
            a_rs,
            b.data.as_ptr(),
            b_cs,
            b_rs,
            beta,
            alpha,
            false,
            false,
            false,
            ::gemm::Parallelism::None,
        );
    }
}

/// One block of columns of a row-major matrix, the destination of one GEMM at a time on
/// whichever thread holds it: `rows x width` values, rows `row_stride` apart. Made only by
/// [`column_blocks`], which hands out disjoint column ranges of a matrix it borrows mutably
/// for `'a`, so a block is the one handle to its values, as a `&'a mut` would be.
pub(crate) struct ColumnBlock<'a> {
    first: *mut f32,
    rows: usize,
    width: usize,
    row_stride: usize,
    matrix: PhantomData<&'a mut [f32]>,
}

// SAFETY: a `ColumnBlock` is the only way to its values (see [`column_blocks`]): sending it to
// another thread hands over a unique borrow, as sending a `&mut [f32]` does.
#[allow(unsafe_code)]
unsafe impl Send for ColumnBlock<'_> {}

/// The row-major `rows x cols` matrix `c` cut into blocks of `width` columns (the last may be
/// narrower), left to right. Panics if `c` holds fewer than `rows x cols` values.
pub(crate) fn column_blocks(
    c: &mut [f32],
    (rows, cols): (usize, usize),
    width: usize,
) -> impl Iterator<Item = ColumnBlock<'_>> {
    assert!(
        rows.checked_mul(cols).is_some_and(|len| c.len() >= len),
        "gemm: matrix too short for {rows}x{cols}"
    );
    let (width, first) = (width.max(1), c.as_mut_ptr());
    (0..cols).step_by(width).map(move |column| ColumnBlock {
        first: first.wrapping_add(column),
        rows,
        width: width.min(cols - column),
        row_stride: cols,
        matrix: PhantomData,
    })
}

/// [`gemm_single_threaded`] into a column block of a wider matrix (`m x n`: the block's rows
/// and width), the values beside the block neither read nor written.
pub(crate) fn gemm_single_threaded_into_block(
    k: usize,
    a: MatView<'_>,
    b: MatView<'_>,
    block: &mut ColumnBlock<'_>,
    alpha: f32,
    beta: f32,
) {
    let (m, n) = (block.rows, block.width);
    if m == 0 || n == 0 {
        return;
    }
    #[allow(unsafe_code)]
    // SAFETY: the block's `rows x width` values, rows `row_stride >= width` apart, lie inside
    // the matrix that `column_blocks` checked (`rows x cols` without overflow, so every
    // offset is below the slice's length and fits `isize`) and borrows mutably for the
    // block's lifetime,
    // and no other block reaches them (the blocks' column ranges are disjoint); the block is
    // borrowed mutably here, so no other call writes them meanwhile.
    unsafe {
        gemm_into_raw(
            (m, n, k),
            a,
            b,
            (block.first, block.row_stride),
            alpha,
            beta,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_checks_the_last_element_and_overflow() {
        assert!(fits(6, 2, 3, 3, 1));
        assert!(!fits(5, 2, 3, 3, 1));
        assert!(fits(6, 3, 2, 1, 3)); // column-major 3x2
        assert!(fits(0, 0, 5, 5, 1));
        assert!(!fits(usize::MAX, 3, 3, usize::MAX / 2, 1));
    }

    #[test]
    fn two_by_two_product_and_accumulate() {
        let a = [1.0, 2.0, 3.0, 4.0];
        let b = [5.0, 6.0, 7.0, 8.0];
        let view = |data| MatView {
            data,
            row_stride: 2,
            col_stride: 1,
        };
        let mut c = [f32::NAN; 4];
        gemm_single_threaded((2, 2, 2), view(&a), view(&b), &mut c, 1.0, 0.0);
        assert_eq!(c, [19.0, 22.0, 43.0, 50.0]);
        gemm_single_threaded((2, 2, 2), view(&a), view(&b), &mut c, 0.5, 1.0);
        assert_eq!(c, [28.5, 33.0, 64.5, 75.0]);
    }

    #[test]
    fn a_strided_destination_writes_only_its_columns() {
        // A 2x3 times 3x2 product into columns 1..3 of a 2x4 matrix.
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let b = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0];
        let view = |data, row_stride| MatView {
            data,
            row_stride,
            col_stride: 1,
        };
        let mut c = [-1.0; 8];
        let dst = (&mut c[1..], 4);
        gemm_single_threaded_strided((2, 2, 3), view(&a, 3), view(&b, 2), dst, 1.0, 0.0);
        assert_eq!(c, [-1.0, 4.0, 5.0, -1.0, -1.0, 10.0, 11.0, -1.0]);
        let dst = (&mut c[1..], 4);
        // An empty inner dimension: the crate scales `dst` by `beta`, or clears it (NaN too).
        gemm_single_threaded_strided((2, 2, 0), view(&a, 3), view(&b, 2), dst, 1.0, 0.5);
        assert_eq!(c, [-1.0, 2.0, 2.5, -1.0, -1.0, 5.0, 5.5, -1.0]);
        c[2] = f32::NAN;
        let dst = (&mut c[1..], 4);
        gemm_single_threaded_strided((2, 2, 0), view(&a, 3), view(&b, 2), dst, 1.0, 0.0);
        assert_eq!(c, [-1.0, 0.0, 0.0, -1.0, -1.0, 0.0, 0.0, -1.0]);
        c[2] = 3.0;
        let dst = (&mut c[1..], 4);
        gemm_single_threaded_strided((2, 2, 0), view(&a, 3), view(&b, 2), dst, 1.0, 1.0);
        assert_eq!(c, [-1.0, 0.0, 3.0, -1.0, -1.0, 0.0, 0.0, -1.0]);
    }

    #[test]
    fn column_blocks_write_only_their_columns() {
        // A 2x3 times 3x5 product into a 2x5 matrix cut in blocks of 2, 2 and 1 columns.
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let b: Vec<f32> = (0..15).map(|i| i as f32).collect();
        let view = |data, row_stride| MatView {
            data,
            row_stride,
            col_stride: 1,
        };
        let product = [
            40.0, 46.0, 52.0, 58.0, 64.0, 85.0, 100.0, 115.0, 130.0, 145.0,
        ];
        let mut c = [-1.0; 10];
        // The middle block alone: the columns beside it keep their values.
        let mut middle = column_blocks(&mut c, (2, 5), 2).nth(1).unwrap();
        gemm_single_threaded_into_block(3, view(&a, 3), view(&b[2..], 5), &mut middle, 1.0, 0.0);
        assert_eq!(
            c,
            [-1.0, -1.0, 52.0, 58.0, -1.0, -1.0, -1.0, 115.0, 130.0, -1.0]
        );
        let blocks: Vec<ColumnBlock<'_>> = column_blocks(&mut c, (2, 5), 2).collect();
        assert_eq!(blocks.len(), 3);
        for (index, mut block) in blocks.into_iter().enumerate() {
            let b_columns = view(&b[index * 2..], 5);
            gemm_single_threaded_into_block(3, view(&a, 3), b_columns, &mut block, 1.0, 0.0);
        }
        assert_eq!(c, product);
    }

    #[test]
    #[should_panic(expected = "dst too short")]
    fn a_strided_destination_must_hold_its_last_row() {
        let (a, b) = ([1.0; 4], [1.0; 4]);
        let view = |data| MatView {
            data,
            row_stride: 2,
            col_stride: 1,
        };
        let dst = (&mut [0.0; 5][..], 4);
        gemm_single_threaded_strided((2, 2, 2), view(&a), view(&b), dst, 1.0, 0.0);
    }

    #[test]
    #[should_panic(expected = "lhs view too short")]
    fn short_lhs_panics_before_the_call() {
        let a = [1.0; 3];
        let b = [1.0; 4];
        let view = |data| MatView {
            data,
            row_stride: 2,
            col_stride: 1,
        };
        gemm_single_threaded((2, 2, 2), view(&a), view(&b), &mut [0.0; 4], 1.0, 0.0);
    }
}
