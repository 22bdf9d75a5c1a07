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
    /// `--space` names a dimension fixed when the run starts: the live search cannot vary
    /// it without a restart, which it never fakes.
    #[error(
        "`{}` cannot be searched live: {}, and the tuner resizes one running workload without \
         restarting it; tune once per setting ({} ...) and compare, varying inter,intra",
        dimension_name(*.0),
        why_fixed(*.0),
        dimension_flag(*.0)
    )]
    NeedsRestart(Dimension),
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

/// Why `dimension` cannot change while a run goes.
fn why_fixed(dimension: Dimension) -> &'static str {
    match dimension {
        Dimension::Spin => "whether idle workers spin is fixed when a pool's workers start",
        Dimension::Pool => "the pool kind is fixed when the run builds its pools",
        Dimension::Inter | Dimension::Intra => "it is searched live",
    }
}

fn dimension_flag(dimension: Dimension) -> &'static str {
    match dimension {
        Dimension::Spin => "enginetop tune --spin on|off",
        Dimension::Pool => "enginetop tune --pool simple|eigen|chase-lev",
        Dimension::Inter => "--inter",
        Dimension::Intra => "--intra",
    }
}
