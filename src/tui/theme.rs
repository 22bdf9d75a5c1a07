//! Glyphs and colours, in one place; [`Theme::plain`] (for `NO_COLOR`) keeps the glyphs and
//! drops every colour, using bold / dim / reverse alone.
//!
//! Worker states: `▶` running (green), `⇄` stealing (yellow), `◌` spinning (magenta),
//! `·` parked (dim), `-` idle or exited (dim). The timeline uses one cell glyph per state so it
//! reads without colour too: `█` running, `▒` stealing, `░` spinning, `·` parked.
#![forbid(unsafe_code)]

use ratatui::style::{Color, Modifier, Style};

use crate::profiler::stats::Activity;

/// Whether colour is on, given the value of `NO_COLOR`: colour unless it is set to a
/// non-empty value (<https://no-color.org>).
fn colored_unless(no_color: Option<&str>) -> bool {
    !matches!(no_color, Some(value) if !value.is_empty())
}

/// The styles every view draws with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Theme {
    color: bool,
}

impl Default for Theme {
    fn default() -> Self {
        Theme::colored()
    }
}

impl Theme {
    /// Colours on.
    pub(crate) fn colored() -> Self {
        Theme { color: true }
    }

    #[cfg(test)]
    /// No colour at all (`NO_COLOR`).
    pub(crate) fn plain() -> Self {
        Theme { color: false }
    }

    /// Colour unless `NO_COLOR` says otherwise (read from the environment).
    pub(crate) fn from_env() -> Self {
        let no_color = std::env::var("NO_COLOR").ok();
        Theme {
            color: colored_unless(no_color.as_deref()),
        }
    }

    fn fg(self, color: Color) -> Style {
        if self.color {
            Style::new().fg(color)
        } else {
            Style::new()
        }
    }

    /// Ordinary text.
    pub(crate) fn text(self) -> Style {
        Style::new()
    }

    /// Labels and secondary figures.
    pub(crate) fn dim(self) -> Style {
        Style::new().add_modifier(Modifier::DIM)
    }

    /// Titles and key figures.
    pub(crate) fn strong(self) -> Style {
        Style::new().add_modifier(Modifier::BOLD)
    }

    /// A warning (lints, dropped events).
    pub(crate) fn warning(self) -> Style {
        self.fg(Color::Yellow).add_modifier(Modifier::BOLD)
    }

    /// An error.
    pub(crate) fn error(self) -> Style {
        self.fg(Color::Red).add_modifier(Modifier::BOLD)
    }

    /// A good outcome (a control applied).
    pub(crate) fn ok(self) -> Style {
        self.fg(Color::Green)
    }

    /// A key in the footer or the help.
    pub(crate) fn key(self) -> Style {
        self.fg(Color::Cyan).add_modifier(Modifier::BOLD)
    }

    /// A state badge (PAUSED, FINISHED): reversed so it shows without colour.
    pub(crate) fn badge(self) -> Style {
        self.fg(Color::Yellow)
            .add_modifier(Modifier::REVERSED | Modifier::BOLD)
    }

    /// The border of the focused panel.
    pub(crate) fn focused_border(self) -> Style {
        self.fg(Color::Cyan).add_modifier(Modifier::BOLD)
    }

    /// The border of other panels.
    pub(crate) fn border(self) -> Style {
        self.fg(Color::DarkGray)
    }

    /// A selected table row.
    pub(crate) fn selected(self) -> Style {
        Style::new().add_modifier(Modifier::REVERSED)
    }

    /// The filled part of a bar or gauge.
    pub(crate) fn bar(self) -> Style {
        self.fg(Color::Green)
    }

    /// A change of the thread counts on the sparklines and the timeline.
    pub(crate) fn marker(self) -> Style {
        self.fg(Color::Magenta)
    }

    /// A sparkline.
    pub(crate) fn sparkline(self) -> Style {
        self.fg(Color::Cyan)
    }

    /// The colour of `activity`.
    pub(crate) fn activity(self, activity: Activity) -> Style {
        match activity {
            Activity::Running => self.fg(Color::Green),
            Activity::Stealing => self.fg(Color::Yellow),
            Activity::Spinning => self.fg(Color::Magenta),
            Activity::Parked | Activity::Idle => self.dim(),
        }
    }
}

/// The glyph of a worker's state in its row.
pub(crate) fn state_glyph(activity: Activity) -> &'static str {
    match activity {
        Activity::Running => "▶",
        Activity::Stealing => "⇄",
        Activity::Spinning => "◌",
        Activity::Parked => "·",
        Activity::Idle => "-",
    }
}

/// The glyph of one timeline cell.
pub(crate) fn timeline_glyph(activity: Option<Activity>) -> &'static str {
    match activity {
        Some(Activity::Running) => "█",
        Some(Activity::Stealing) => "▒",
        Some(Activity::Spinning) => "░",
        Some(Activity::Parked) => "·",
        Some(Activity::Idle) | None => " ",
    }
}

/// The states in legend order, with their names.
pub(crate) const LEGEND: [(Activity, &str); 4] = [
    (Activity::Running, "running"),
    (Activity::Stealing, "stealing"),
    (Activity::Spinning, "spinning"),
    (Activity::Parked, "parked"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_color_set_and_non_empty_turns_colour_off() {
        assert!(colored_unless(None));
        assert!(colored_unless(Some("")));
        assert!(!colored_unless(Some("1")));
    }

    #[test]
    fn the_plain_theme_has_no_colour_but_keeps_emphasis() {
        let plain = Theme::plain();
        for activity in [Activity::Running, Activity::Stealing, Activity::Spinning] {
            assert_eq!(plain.activity(activity).fg, None);
        }
        assert_eq!(plain.warning().fg, None);
        assert!(plain.badge().add_modifier.contains(Modifier::REVERSED));
    }
}
