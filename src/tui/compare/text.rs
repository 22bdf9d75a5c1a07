//! Figures of a comparison as short text: durations with the dashboard's three significant
//! digits, signed changes, ratios, and a line cut to its width.
#![forbid(unsafe_code)]

use crate::tui::view::format;

/// A duration in milliseconds (`800µs`, `1.60ms`).
pub(super) fn ms(ms: f64) -> String {
    format::nanos(ms * 1e6)
}

/// A change in milliseconds, signed (`+800µs`, `-1.20ms`, `+0ns`).
pub(crate) fn delta_ms(ms: f64) -> String {
    let sign = if ms < 0.0 { '-' } else { '+' };
    format!("{sign}{}", format::nanos(ms.abs() * 1e6))
}

/// A count, or a change of one, signed (`+3`, `-1.2k`).
pub(crate) fn delta_count(count: f64) -> String {
    let sign = if count < 0.0 { '-' } else { '+' };
    format!("{sign}{}", format::quantity(count.abs().round()))
}

/// A ratio with `decimals` decimals (`x2.00`), or `-` without one (A had none).
pub(super) fn ratio(ratio: Option<f64>, decimals: usize) -> String {
    ratio.map_or_else(|| "-".to_string(), |ratio| format!("x{ratio:.decimals$}"))
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn changes_carry_their_sign_and_ratios_their_x() {
        assert_eq!(ms(0.8), "800µs");
        assert_eq!(delta_ms(0.8), "+800µs");
        assert_eq!(delta_ms(-1.2), "-1.20ms");
        assert_eq!(delta_count(-3.0), "-3");
        assert_eq!(delta_count(0.0), "+0");
        assert_eq!(ratio(Some(2.0), 2), "x2.00");
        assert_eq!(ratio(None, 2), "-");
    }
}
