//! The dashboard's tuner (`t`): the [`tune`](crate::tune) search run live on the workload
//! the dashboard shows, as `enginetop tune` runs it, resizing through the same driver handle
//! as `+`/`-`.
//!
//! ```text
//! Normal --t--> Control::Tune(Start) --> source starts a LiveTuner (start = counts now)
//!   each frame: App::observe_tuner(source.tuner()) -> the tuner line (window, figures, best)
//! running --t / Esc--> Control::Tune(Stop) --> the search ends with what it measured
//! ended (stopped, ran its course, run paused) --> Mode::TuneChoice
//!   Enter / k --> Control::Tune(Keep(best))   b / Esc --> Control::Tune(Back(start))
//!   accepted --> the source drops its tuner; the counts show in the next frame
//! the run ended mid-search --> the line keeps what the search had; nothing to choose
//! ```
//! While the search runs, `+`/`-`/`]`/`[` are refused (the tuner owns the counts); every
//! resize either makes is a marker on the sparklines and the timeline (see
//! [`Sample::threads`](super::history::Sample::threads)) and an instant in the trace.
#![forbid(unsafe_code)]

use crate::tune::{Objective, Point, TuneEnd, TuneProgress};

/// What the dashboard asks of the source's tuner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TuneControl {
    /// Start a search from the run's counts now.
    Start,
    /// End the search after what it measured.
    Stop,
    /// End the tuning at the best point found: resize the run to it.
    Keep(Point),
    /// End the tuning where it started: resize the run back to it.
    Back(Point),
}

impl TuneControl {
    /// The point the run is resized to, for [`Keep`](Self::Keep) and [`Back`](Self::Back).
    pub(crate) fn settles_at(self) -> Option<Point> {
        match self {
            TuneControl::Keep(point) | TuneControl::Back(point) => Some(point),
            TuneControl::Start | TuneControl::Stop => None,
        }
    }
}

/// `inter 1 intra 2`'s short form, `1x2`.
pub(crate) fn short(point: Point) -> String {
    format!("{}x{}", point.inter, point.intra)
}

/// A figure with its unit: `812 it/s`, `3.2 ms/step`.
pub(crate) fn figure(objective: Objective, value: f64) -> String {
    let shown = objective.shown(value);
    let digits = if shown >= 100.0 { 0 } else { 1 };
    let unit = match objective {
        Objective::Throughput => "it/s",
        Objective::Latency => "ms/step",
    };
    format!("{shown:.digits$} {unit}")
}

/// The tuner's headline: the window under way, or how the search ended.
pub(crate) fn headline(progress: &TuneProgress) -> String {
    let windows = progress
        .latest
        .as_ref()
        .map_or("no window yet".to_string(), |event| {
            format!("window {}/{}", event.index, event.planned)
        });
    let best = progress.best().map_or(String::new(), |(point, value)| {
        format!(" · best {point}: {}", figure(progress.objective, value))
    });
    match &progress.ended {
        None => {
            let now = progress.latest.as_ref().map_or(String::new(), |event| {
                let phase = match event.phase {
                    crate::tune::Phase::Calibrate => "calibrating at",
                    crate::tune::Phase::Scan => "scan",
                    crate::tune::Phase::Confirm => "confirm",
                    crate::tune::Phase::Paired => "paired",
                };
                match event.value {
                    None => format!(" · {phase} {} measuring", event.point),
                    Some(value) => format!(
                        " · {phase} {}: {}",
                        event.point,
                        figure(progress.objective, value)
                    ),
                }
            });
            format!("tuning: {windows}{now}{best}")
        }
        Some(TuneEnd::Refused(why)) => format!("tuner refused: {why}"),
        Some(TuneEnd::Report(report)) => {
            let how = match &report.outcome {
                crate::tune::Outcome::Finished => "done".to_string(),
                crate::tune::Outcome::Stopped => "stopped".to_string(),
                crate::tune::Outcome::Ended(why) => format!("ended ({why})"),
            };
            let gain = report.gain.map_or(String::new(), |gain| match gain.pairs {
                0 => " (the default: no challenger beat it in pairs)".to_string(),
                pairs => format!(
                    " ({:.2}x ±{:.2} the default {}, {pairs} pairs)",
                    gain.ratio,
                    gain.spread,
                    short(report.default),
                ),
            });
            format!("tuner {how} at {windows}{best}{gain}")
        }
    }
}

/// Every point measured so far: `1x2 200 it/s ±3 · 2x2 150 it/s`, in the order measured.
pub(crate) fn measured(progress: &TuneProgress) -> String {
    let points: Vec<String> = progress
        .measured
        .iter()
        .map(|result| {
            let spread = match result.samples.len() {
                1 => String::new(),
                n => format!(" ±{:.0}% ({n})", 100.0 * result.relative_spread()),
            };
            format!(
                "{} {}{spread}",
                short(result.point),
                figure(progress.objective, result.median)
            )
        })
        .collect();
    match points.is_empty() {
        true => "measured: nothing yet".to_string(),
        false => format!("measured: {}", points.join(" · ")),
    }
}
