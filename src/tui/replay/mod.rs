//! The dashboard over a recording (`enginetop replay FILE`): [`ReplaySource`] is a
//! [`DashboardSource`](crate::tui::DashboardSource) whose frames are the statistics at a time cursor
//! ([`crate::record::Replay`]), and [`keys`] are the cursor's keys and prompts.
//!
//! ```text
//! keys: space x X n N J o Esc --(Control::Pause / Control::Replay)--> ReplaySource
//!     playing: cursor += wall time since the last frame x speed; paused: moved by steps
//!     snapshot(): Replay::seek_within(cursor, FEED_BUDGET) -> Stats at the cursor, or at the
//!                 nearest state ready short of it (seeking) -> DashboardData + ReplayFacts
//! header / footer <- ReplayFacts (REPLAY, cursor / total, speed, seeking, what the file lost)
//! ```
//! A jump never holds a frame up: each frame feeds for [`FEED_BUDGET`] at most (half the
//! default frame interval of 100 ms) from the recording's checkpoint before the target, and
//! while the target is not reached the frame shows the state fed so far and the footer says
//! `seeking`. The search for the next op of a name (`o`) goes the same way: a slice of the
//! file per frame for the same budget, the footer saying `searching` and how far, Esc
//! cancelling it.
//! A replay shows a recorded run, so what changes a run (resizing, tuning, resetting,
//! exporting the live window) is refused with the reason.
#![forbid(unsafe_code)]

pub(crate) mod keys;
mod source;

pub(crate) use keys::{ReplayAction, REPLAY_KEYS};
pub(crate) use source::ReplaySource;

use std::time::Duration;

/// A request to the replay's cursor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ReplayControl {
    /// The next speed up (`true`) or down.
    Speed(bool),
    /// One step forward (`true`) or back, while paused.
    Step(bool),
    /// To a time of the run, as typed (`12.5`, `800ms`, `1m30s`).
    JumpTo(String),
    /// To the next start of an op whose name holds this text (searched a slice per frame).
    NextOp(String),
    /// Stop the search for the next op.
    CancelSearch,
}

/// The replay's state, for the header and the footer.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ReplayFacts {
    /// The cursor, from the run's first event.
    pub(crate) cursor: Duration,
    /// The run's length (its last event).
    pub(crate) total: Duration,
    /// Run time per wall time.
    pub(crate) speed: f64,
    /// Whether the cursor moves by itself.
    pub(crate) playing: bool,
    /// What the file lost (cut off, damaged frames), one sentence each.
    pub(crate) losses: Vec<String>,
    /// The moment the cursor is on its way to, while the statistics are short of it.
    pub(crate) seeking: Option<Duration>,
    /// Whether a search for the next op of a name runs (Esc cancels it).
    pub(crate) searching: bool,
    /// How that search goes or went (`searching `sgd` 42% (Esc cancels)`), until the next
    /// control.
    pub(crate) search: Option<String>,
}

impl ReplayFacts {
    /// `12.345 s / 40.000 s · 2x · paused`, and while the statistics are short of the cursor
    /// ` · seeking 30.000 s`, then how the search for the next op goes.
    pub(crate) fn position(&self) -> String {
        let state = if self.playing { "playing" } else { "paused" };
        let mut line = format!(
            "{} / {} · {} · {state}",
            seconds(self.cursor),
            seconds(self.total),
            speed_text(self.speed)
        );
        if let Some(target) = self.seeking {
            line.push_str(&format!(" · seeking {}", seconds(target)));
        }
        if let Some(search) = &self.search {
            line.push_str(&format!(" · {search}"));
        }
        line
    }
}

/// `12.345 s`.
pub(crate) fn seconds(time: Duration) -> String {
    format!("{:.3} s", time.as_secs_f64())
}

/// `0.25x`, `2x`.
pub(crate) fn speed_text(speed: f64) -> String {
    format!("{speed}x")
}

/// How long a frame feeds the replay's statistics at most: half the dashboard's default
/// frame interval (100 ms, 10 frames a second), the rest left to the snapshot and drawing.
pub(crate) const FEED_BUDGET: Duration = Duration::from_millis(50);

/// Why the dashboard refuses what would change a run, in a replay.
pub(crate) const CANNOT_RESIZE: &str = "a replay cannot resize: it shows a recorded run; record a \
                                 run with other counts (--inter, --intra) and compare them";

/// Why a replay exports no trace window.
pub(crate) const CANNOT_EXPORT: &str =
    "a replay exports the whole recording: enginetop export FILE --to chrome";

/// Why a replay keeps its statistics.
pub(crate) const CANNOT_RESET: &str =
    "a replay shows the run's statistics as they were: J jumps to a time";

/// Parses a time of the run: seconds (`12.5`), or a number with a unit (`800ms`, `250us`,
/// `2s`, `1m`), or several (`1m30s`).
pub(crate) fn parse_time(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let bad = || {
        format!(
            "`{text}` is not a time of the run: expected seconds from 0 (12.5) or a number with \
             a unit (800ms, 250us, 2s, 1m30s)"
        )
    };
    if text.is_empty() {
        return Err(bad());
    }
    if let Ok(seconds) = text.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds).map_err(|_| bad());
    }
    let mut total = 0.0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let number: f64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let scale = match &rest[..unit] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" | "min" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        total += number * scale;
        rest = &rest[unit..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| bad())
}

#[cfg(all(test, not(loom)))]
mod tests {
    /// A small use of `parse_time`.
    #[test]
    fn parse_time_example() {
        use crate::tui::replay::parse_time;
        use std::time::Duration;
        assert_eq!(parse_time("12.5"), Ok(Duration::from_millis(12_500)));
        assert_eq!(parse_time("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_time(" 800ms "), Ok(Duration::from_millis(800)));
        assert!(parse_time("soon").is_err());
    }
}
