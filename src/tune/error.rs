//! Why a search cannot start.
#![forbid(unsafe_code)]

use std::time::Duration;

/// A search refused before it measures anything; each names the fix.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TuneError {
    /// `--space` names something that is not a dimension.
    #[error("unknown dimension `{0}` in --space: use inter, intra, spin, pool or a comma-separated list")]
    UnknownDimension(String),
    /// `--space` is empty.
    #[error("--space names no dimension: use inter, intra, spin, pool or a comma-separated list")]
    EmptySpace,
    /// The naive engine runs every op on the driver thread.
    #[error(
        "the naive engine has no inter-op pool to search: use --space intra, or \
         --engine per-device"
    )]
    NoInterOpPool,
    /// The run's thread could not start.
    #[error("could not start the `driver` thread")]
    Thread(#[source] std::io::Error),
    /// The budget leaves windows too short to measure.
    #[error(
        "a budget of {:.1} s is too short for {points} points (windows of at least {} ms): \
         give --budget {} or more",
        budget.as_secs_f64(),
        min_window.as_millis(),
        needed.as_secs_f64().ceil()
    )]
    BudgetTooShort {
        /// The budget given.
        budget: Duration,
        /// Points in the grid.
        points: usize,
        /// The shortest window measured.
        min_window: Duration,
        /// The least budget that fits.
        needed: Duration,
    },
}
