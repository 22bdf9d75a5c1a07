//! The warnings row(s) under the header: one line per [`Lint`](crate::tui::lints::Lint),
//! with the number behind it; when there are more than fit, the last row says how many more.
#![forbid(unsafe_code)]

use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::Ctx;

/// The most rows the warnings take, in the wide and the compact layout.
const MAX_ROWS: (usize, usize) = (3, 2);

/// Rows the warnings take.
pub fn height(ctx: &Ctx<'_>, wide: bool) -> u16 {
    let most = if wide { MAX_ROWS.0 } else { MAX_ROWS.1 };
    ctx.lints.len().min(most) as u16
}

/// Draws the warnings into `area`.
pub fn draw(frame: &mut Frame<'_>, area: Rect, ctx: &Ctx<'_>) {
    let rows = usize::from(area.height);
    if rows == 0 {
        return;
    }
    let mut lines: Vec<Line<'_>> = ctx
        .lints
        .iter()
        .take(rows)
        .map(|lint| Line::styled(format!(" ⚠ {lint}"), ctx.theme.warning()))
        .collect();
    let hidden = ctx.lints.len().saturating_sub(rows);
    if hidden > 0 {
        if let Some(last) = lines.last_mut() {
            let more = format!("{}  (+{} more)", ctx.lints[rows - 1], hidden);
            *last = Line::styled(format!(" ⚠ {more}"), ctx.theme.warning());
        }
    }
    frame.render_widget(Paragraph::new(lines), area);
}
