//! The one call into the `gemm` crate: a single-threaded `f32` GEMM on checked slices.
//!
//! `gemm::gemm` takes raw pointers and strides. [`gemm_single_threaded`] takes slices and
//! strides instead, checks that every element the strides reach lies inside its slice, and only
//! then calls it, with `Parallelism::None`: threading is our `parallel_for`'s job. The
//! destination is row-major, its rows `n` apart or, with [`gemm_single_threaded_strided`],
//! any row stride of at least `n` (a block of columns of a wider matrix in its slice).
#![deny(unsafe_code)]

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
    if k == 0 {
        let rows = c.chunks_mut(c_row_stride).take(m);
        return rows.for_each(|row| scale_in_place(&mut row[..n], beta));
    }
    assert!(a.covers(m, k), "gemm: lhs view too short for {m}x{k}");
    assert!(b.covers(k, n), "gemm: rhs view too short for {k}x{n}");
    // The casts cannot wrap: `covers`/`fits` checked every stride fits an isize.
    let (a_rs, a_cs) = (a.row_stride as isize, a.col_stride as isize);
    let (b_rs, b_cs) = (b.row_stride as isize, b.col_stride as isize);
    #[allow(unsafe_code)]
    // SAFETY: the asserts above checked, for every (row, col) of each matrix, that
    // `row * row_stride + col * col_stride` is in bounds of its slice (the largest such offset
    // is `(rows-1)*rs + (cols-1)*cs`, checked without overflow), and that strides and offsets
    // fit `isize`, as `gemm` requires; `c`'s rows do not overlap (`c_row_stride >= n`). `c` is
    // borrowed mutably, so it aliases neither `a` nor `b`, and no other thread touches it for
    // the call. m, n, k > 0 here.
    unsafe {
        ::gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            c_row_stride as isize,
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

/// `c *= beta`, with `beta == 0` clearing (a product over an empty `k` is zero).
fn scale_in_place(c: &mut [f32], beta: f32) {
    if beta == 0.0 {
        c.fill(0.0);
    } else {
        c.iter_mut().for_each(|value| *value *= beta);
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
        gemm_single_threaded_strided((2, 2, 0), view(&a, 3), view(&b, 2), dst, 1.0, 0.5);
        assert_eq!(c, [-1.0, 2.0, 2.5, -1.0, -1.0, 5.0, 5.5, -1.0]);
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
