//! The tuner's lines, under the panels while a search runs or waits for the user's choice
//! ([`tuner`](crate::tui::tuner)): the headline (the window under way and its figure, the
//! best so far; once ended, how and the gain over the default), wrapped to two rows at most,
//! then every point measured so far on one row. Nothing when no search is under way.
#![forbid(unsafe_code)]

use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::{format, Ctx};
use crate::tui::tuner::{headline, measured};

/// The headline's rows at most.
const HEADLINE_ROWS: usize = 2;

/// The rows the tuner's lines take at `width` (0 without a search).
pub(crate) fn height(ctx: &Ctx<'_>, width: u16) -> u16 {
    rows(ctx, width).len() as u16
}

fn rows(ctx: &Ctx<'_>, width: u16) -> Vec<(String, bool)> {
    let Some(progress) = ctx.app.tuner() else {
        return Vec::new();
    };
    let width = usize::from(width.saturating_sub(1)).max(1);
    let head = format::at_most_rows(
        format::wrap(&headline(progress), width),
        HEADLINE_ROWS,
        width,
    );
    let mut rows: Vec<(String, bool)> = head.into_iter().map(|row| (row, true)).collect();
    rows.push((format::fit(&measured(progress), width), false));
    rows
}

/// Draws the tuner's lines into `area`.
pub(crate) fn draw(frame: &mut Frame<'_>, area: Rect, ctx: &Ctx<'_>) {
    let lines: Vec<Line<'_>> = rows(ctx, area.width)
        .into_iter()
        .map(|(row, head)| {
            let style = if head {
                ctx.theme.warning()
            } else {
                ctx.theme.dim()
            };
            Line::styled(format!(" {row}"), style)
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), area);
}
