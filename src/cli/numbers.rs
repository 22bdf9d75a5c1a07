//! The value parser of the whole-number flags: one message, naming the range, for every value
//! outside it (a negative number, a fraction, a word, a number too large for the type).
//!
//! Clap reads `-1` after a flag as another flag unless the argument says
//! `allow_negative_numbers = true`; every flag parsed here says so, so `--intra -1` reaches
//! [`whole`] and is refused with `invalid value '-1' for '--intra <M>': expected a whole
//! number from 0 to 4096`, instead of clap's "unexpected argument '-1'".
use std::fmt::Display;
use std::str::FromStr;

use crate::config::HARD_MAX_THREADS;

/// A parser of whole numbers from `min` to `max`, inclusive.
pub(super) fn whole<T>(min: T, max: T) -> impl Fn(&str) -> Result<T, String> + Clone
where
    T: FromStr + PartialOrd + Display + Copy + Send + Sync + 'static,
{
    move |text: &str| match text.trim().parse::<T>() {
        Ok(value) if min <= value && value <= max => Ok(value),
        _ => Err(range_text(min, max)),
    }
}

/// A parser of whole numbers from `min` up (to the type's largest).
pub(super) fn at_least(min: usize) -> impl Fn(&str) -> Result<usize, String> + Clone {
    move |text: &str| match text.trim().parse::<usize>() {
        Ok(value) if value >= min => Ok(value),
        _ => Err(format!("expected a whole number from {min} up")),
    }
}

/// A thread count (`--inter`, `--intra`, the engine's worker counts): 0 (each flag's default
/// count) to [`HARD_MAX_THREADS`].
pub(super) fn thread_count() -> impl Fn(&str) -> Result<usize, String> + Clone {
    checked_by_config(0, HARD_MAX_THREADS)
}

/// `--max-threads`: 1 to [`HARD_MAX_THREADS`].
pub(super) fn max_threads() -> impl Fn(&str) -> Result<usize, String> + Clone {
    checked_by_config(1, HARD_MAX_THREADS)
}

/// A parser of the whole numbers whose range the configuration checks, naming the limit that
/// applies and how to raise it (`expected at most max_threads = 128; ... --max-threads`):
/// only what is no whole number at all (negative, a fraction, a word) is refused here, naming
/// the widest range, `min` to `max`.
fn checked_by_config(min: usize, max: usize) -> impl Fn(&str) -> Result<usize, String> + Clone {
    move |text: &str| {
        text.trim()
            .parse::<usize>()
            .map_err(|_| range_text(min, max))
    }
}

/// `expected a whole number from MIN to MAX`.
pub(super) fn range_text(min: impl Display, max: impl Display) -> String {
    format!("expected a whole number from {min} to {max}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_outside_the_range_or_not_whole_are_refused_naming_the_range() {
        let threads = whole::<u16>(1, 1024);
        assert_eq!(threads("1"), Ok(1));
        assert_eq!(threads(" 1024 "), Ok(1024));
        for bad in ["0", "1025", "-1", "70000", "2.5", "many", ""] {
            assert_eq!(
                threads(bad),
                Err("expected a whole number from 1 to 1024".to_string()),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn thread_counts_leave_the_limit_to_the_configuration() {
        assert_eq!(thread_count()("100000"), Ok(100_000));
        assert_eq!(max_threads()("0"), Ok(0));
        for bad in ["-1", "2.5", "many"] {
            let range = format!("expected a whole number from 0 to {HARD_MAX_THREADS}");
            assert_eq!(thread_count()(bad), Err(range), "{bad:?}");
        }
        assert_eq!(
            max_threads()("-1"),
            Err(format!(
                "expected a whole number from 1 to {HARD_MAX_THREADS}"
            ))
        );
    }
}
