//! Drawing: one file per panel, each rendering from the [`App`] (through a [`Ctx`]) into a
//! rectangle. [`draw`] lays the screen out:
//!
//! ```text
//! header (2 rows: names, settings, throughput, PAUSED)
//! lints (0-3 rows)
//! wide (>= 120x36):  devices | ops table        compact:  selected device (tabs in title)
//!                            | sparklines                 sparklines (2 rows)
//!                    timeline (full width)                timeline | ops table
//! footer (status line + key hints wrapped to the width)
//! ```
//! The help overlay is drawn over everything when it is up.
#![forbid(unsafe_code)]

pub mod device;
pub mod footer;
pub mod format;
pub mod header;
pub mod help;
pub mod lints;
pub mod ops;
pub mod sparklines;
pub mod timeline;

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::{Block, BorderType, Borders};
use ratatui::Frame;

use super::app::{App, Focus, Mode};
use super::lints::{find, Lint};
use super::panels::{device_panels, DevicePanel};
use super::theme::Theme;

/// The smallest screen that gets the wide layout.
pub const WIDE: (u16, u16) = (120, 36);

/// What every view reads: the state, the panels of the current frame, the warnings, the
/// theme.
pub struct Ctx<'a> {
    /// The dashboard's state.
    pub app: &'a App,
    /// The device panels of the latest frame.
    pub panels: Vec<DevicePanel<'a>>,
    /// The warnings of the latest frame.
    pub lints: Vec<Lint>,
    /// Colours or not.
    pub theme: Theme,
}

impl<'a> Ctx<'a> {
    /// The context of `app`'s latest frame.
    pub fn new(app: &'a App, theme: Theme) -> Self {
        let panels = device_panels(app.data());
        let lints = find(app.data(), &panels, app.history());
        Ctx {
            app,
            panels,
            lints,
            theme,
        }
    }

    /// A bordered block titled `title`, highlighted when `focus` has the focus.
    pub fn block(&self, title: Line<'a>, focus: Focus) -> Block<'a> {
        let style = if self.app.focus == focus && self.app.mode != Mode::Help {
            self.theme.focused_border()
        } else {
            self.theme.border()
        };
        Block::default()
            .borders(Borders::ALL)
            .border_type(BorderType::Rounded)
            .border_style(style)
            .title(title)
            .title_style(Style::new())
    }
}

/// Draws the whole screen.
pub fn draw(frame: &mut Frame<'_>, app: &App, theme: Theme) {
    let ctx = Ctx::new(app, theme);
    let area = frame.area();
    let wide = area.width >= WIDE.0 && area.height >= WIDE.1;
    let [header_area, lints_area, body, footer_area] = Layout::vertical([
        Constraint::Length(header::HEIGHT),
        Constraint::Length(lints::height(&ctx, wide)),
        Constraint::Min(0),
        Constraint::Length(footer::height(&ctx, area.width)),
    ])
    .areas(area);
    header::draw(frame, header_area, &ctx);
    lints::draw(frame, lints_area, &ctx);
    if wide {
        draw_wide(frame, body, &ctx);
    } else {
        draw_compact(frame, body, &ctx);
    }
    footer::draw(frame, footer_area, &ctx);
    if app.mode == Mode::Help {
        help::draw(frame, area, &ctx);
    }
}

fn draw_wide(frame: &mut Frame<'_>, body: Rect, ctx: &Ctx<'_>) {
    // The devices get what they need, up to three fifths; the timeline what is left.
    let top_rows = device::stack_height(ctx).clamp(body.height * 2 / 5, body.height * 3 / 5);
    let timeline_rows = timeline::wanted_height(ctx).min(body.height - top_rows);
    let [top, timeline_area] =
        Layout::vertical([Constraint::Min(0), Constraint::Length(timeline_rows)]).areas(body);
    let [devices, right] =
        Layout::horizontal([Constraint::Percentage(56), Constraint::Percentage(44)]).areas(top);
    let [ops_area, sparks] = Layout::vertical([
        Constraint::Min(0),
        Constraint::Length(sparklines::WIDE_HEIGHT),
    ])
    .areas(right);
    device::draw_stack(frame, devices, ctx);
    ops::draw(frame, ops_area, ctx);
    sparklines::draw_wide(frame, sparks, ctx);
    timeline::draw(frame, timeline_area, ctx);
}

fn draw_compact(frame: &mut Frame<'_>, body: Rect, ctx: &Ctx<'_>) {
    let device_rows = device::wanted_height(ctx).min(body.height / 2).max(3);
    let [devices, sparks, bottom] = Layout::vertical([
        Constraint::Length(device_rows),
        Constraint::Length(sparklines::COMPACT_HEIGHT),
        Constraint::Min(0),
    ])
    .areas(body);
    let [timeline_area, ops_area] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(bottom);
    device::draw_selected(frame, devices, ctx);
    sparklines::draw_compact(frame, sparks, ctx);
    timeline::draw(frame, timeline_area, ctx);
    ops::draw(frame, ops_area, ctx);
}
