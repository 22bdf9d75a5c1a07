//! Why a search cannot start.
#![forbid(unsafe_code)]

use std::time::Duration;

use super::Dimension;

/// A search refused before it measures anything; each names the fix.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// `--space` names something that is not a dimension.
    #[error("unknown dimension `{0}` in --space: use inter, intra or inter,intra")]
    UnknownDimension(String),
    /// `--space` names a dimension the tuner cannot vary yet.
    #[error(
        "`{}` is not searchable yet: the tuner varies inter and intra (--space inter,intra); \
         set {} by hand and tune the counts for it",
        dimension_name(*.0),
        dimension_flag(*.0)
    )]
    NotSearchable(Dimension),
    /// `--space` is empty.
    #[error("--space names no dimension: use inter, intra or inter,intra")]
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

fn dimension_name(dimension: Dimension) -> &'static str {
    match dimension {
        Dimension::Inter => "inter",
        Dimension::Intra => "intra",
        Dimension::Spin => "spin",
        Dimension::Pool => "pool",
    }
}

fn dimension_flag(dimension: Dimension) -> &'static str {
    match dimension {
        Dimension::Spin => "--spin on|off",
        Dimension::Pool => "--pool simple|eigen|chase-lev",
        Dimension::Inter => "--inter",
        Dimension::Intra => "--intra",
    }
}
