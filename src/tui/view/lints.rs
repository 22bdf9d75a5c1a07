//! The warnings row(s) under the header: one line per [`Lint`](crate::tui::lints::Lint),
//! with the number behind it; when there are more than fit, the last row says how many more.
#![forbid(unsafe_code)]

use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::Ctx;

/// The most rows the warnings take, in the wide and the compact layout, and in the compact
/// one on a screen under [`SHORT`] rows (where every row goes to the panels).
const MAX_ROWS: (usize, usize, usize) = (3, 2, 1);
/// Screens with fewer rows than this give the warnings one row.
pub const SHORT: u16 = 24;

/// Rows the warnings take on a screen `rows` high.
pub fn height(ctx: &Ctx<'_>, wide: bool, rows: u16) -> u16 {
    let most = match (wide, rows < SHORT) {
        (true, _) => MAX_ROWS.0,
        (false, false) => MAX_ROWS.1,
        (false, true) => MAX_ROWS.2,
    };
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

#[cfg(test)]
mod tests {
    use crate::tui::fake::FakeOptions;
    use crate::tui::view::tests::{app_after, screen};

    #[test]
    fn a_short_screen_gives_the_warnings_one_row_and_says_how_many_more() {
        let app = app_after(FakeOptions::overloaded(), 60);
        let warnings = |text: &str| text.lines().filter(|l| l.contains('⚠')).count();
        let short = screen(&app, 80, 20);
        assert_eq!(warnings(&short), 1, "{short}");
        assert!(short.contains("(+2 more)"), "{short}");
        assert_eq!(warnings(&screen(&app, 80, 24)), 2);
        assert_eq!(warnings(&screen(&app, 160, 48)), 3);
    }
}
