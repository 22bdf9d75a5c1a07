//! The help overlay: every key (from [`KEYS`], and in a replay [`REPLAY_KEYS`]) and the
//! glyph legend, centred over the screen. On a narrow screen descriptions wrap under their
//! text; on a short one the rows that do not fit scroll (j k, arrows, PgUp PgDn, g G), the
//! bottom border counting the lines above and below and always saying how to close the
//! overlay.
#![forbid(unsafe_code)]

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};
use ratatui::Frame;

use super::format::{pad_right, wrap};
use super::{centered, first_shown, fit_parts, panel_block, Ctx, Part};
use crate::tui::input::KEYS;
use crate::tui::replay::REPLAY_KEYS;
use crate::tui::theme::{state_glyph, LEGEND};

/// Width of the key column.
const KEY_WIDTH: usize = 15;
/// The bottom border's reminder.
const CLOSE: &str = "Esc ? q close";

/// Draws the overlay over `area`.
pub(crate) fn draw(frame: &mut Frame<'_>, area: Rect, ctx: &Ctx<'_>) {
    let natural = lines(ctx, usize::MAX);
    let widest = natural.iter().map(Line::width).max().unwrap_or(0);
    let width = (widest as u16 + 2).min(area.width);
    let lines = lines(ctx, usize::from(width.saturating_sub(2)));
    let height = (lines.len() as u16 + 2).min(area.height);
    let popup = centered(area, width, height);
    let visible = usize::from(height.saturating_sub(2));
    ctx.app.shown_rows.help.set(visible);
    ctx.app.shown_rows.help_lines.set(lines.len());
    let above = first_shown(ctx.app.help_scroll, lines.len(), visible);
    let below = lines.len().saturating_sub(above + visible);
    let close = close_line(ctx, above, below, usize::from(width.saturating_sub(2)));
    let block = panel_block(Line::styled(" keys ", ctx.theme.strong()), true, ctx.theme)
        .title_bottom(close.right_aligned());
    frame.render_widget(Clear, popup);
    let shown: Vec<Line<'_>> = lines.into_iter().skip(above).collect();
    frame.render_widget(Paragraph::new(shown).block(block), popup);
}

/// The bottom border's text in `width` cells: how many lines are above and below, if any,
/// with the keys that scroll, and how to close, which always stays.
fn close_line<'a>(ctx: &Ctx<'a>, above: usize, below: usize, width: usize) -> Line<'a> {
    let mut parts: Vec<Part<'a>> = Vec::new();
    let mut position = Vec::new();
    if above > 0 {
        position.push(format!("↑ {above} above"));
    }
    if below > 0 {
        position.push(format!("↓ {below} more"));
    }
    if !position.is_empty() {
        let key = ctx.theme.key();
        let position = format!(" {}", position.join(" · "));
        parts.push((1, vec![Span::styled(position, key)]));
        parts.push((2, vec![Span::styled(" (j k PgUp PgDn scroll)", key)]));
        parts.push((1, vec![Span::raw(" ·")]));
    }
    parts.push((0, vec![Span::styled(format!(" {CLOSE} "), ctx.theme.key())]));
    fit_parts(parts, width)
}

/// Every row of the help, wrapped to `width` cells.
fn lines<'a>(ctx: &Ctx<'a>, width: usize) -> Vec<Line<'a>> {
    let theme = ctx.theme;
    let mut lines: Vec<Line<'a>> = Vec::new();
    // A space, the key column, the text, a space.
    let text_width = width.saturating_sub(KEY_WIDTH + 2).max(10);
    let replay = ctx.app.data().facts.replay.is_some();
    for help in KEYS.iter().chain(REPLAY_KEYS.iter().filter(|_| replay)) {
        for (index, chunk) in wrap(help.does, text_width).into_iter().enumerate() {
            let keys = if index == 0 { help.keys } else { "" };
            lines.push(Line::from(vec![
                Span::styled(format!(" {}", pad_right(keys, KEY_WIDTH)), theme.key()),
                Span::raw(format!("{chunk} ")),
            ]));
        }
    }
    lines.push(Line::raw(""));
    lines.extend(legend(ctx, width));
    for note in [
        "GFLOP/s and % of peak: CPU ops vs the CPU GEMM peak; GPU ops apart",
        "ops/s and worker bars (share of time running ops, or tasks in the intra-op pool): \
         the last seconds; once finished, the whole run (avg)",
        "NO_COLOR=1 turns colour off",
    ] {
        let chunks = wrap(note, width.saturating_sub(2).max(10));
        lines.extend(
            chunks
                .into_iter()
                .map(|chunk| Line::styled(format!(" {chunk}"), theme.dim())),
        );
    }
    lines
}

/// The glyph legend, as many entries a row as fit in `width`.
fn legend<'a>(ctx: &Ctx<'a>, width: usize) -> Vec<Line<'a>> {
    let theme = ctx.theme;
    let mut entries: Vec<Vec<Span<'a>>> = LEGEND
        .into_iter()
        .map(|(activity, name)| {
            vec![
                Span::styled(state_glyph(activity), theme.activity(activity)),
                Span::raw(format!(" {name}  ")),
            ]
        })
        .collect();
    entries.push(vec![Span::styled("st steals  q queue", theme.dim())]);
    let mut lines = Vec::new();
    let mut row = vec![Span::raw(" ")];
    for entry in entries {
        let used: usize = row.iter().map(Span::width).sum();
        let cost: usize = entry.iter().map(Span::width).sum();
        if used > 1 && used + cost > width {
            lines.push(Line::from(std::mem::replace(
                &mut row,
                vec![Span::raw(" ")],
            )));
        }
        row.extend(entry);
    }
    lines.push(Line::from(row));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::app::Action;
    use crate::tui::fake::FakeOptions;
    use crate::tui::view::tests::{app_after, screen};

    fn help_screen(width: u16, height: u16) -> String {
        let mut app = app_after(FakeOptions::default(), 10);
        app.update(Action::ToggleHelp);
        screen(&app, width, height)
    }

    #[test]
    fn long_descriptions_wrap_instead_of_being_cut() {
        let text = help_screen(60, 46);
        assert!(
            text.contains("(its elapsed") && text.contains("time stops too)"),
            "{text}"
        );
        assert!(text.contains("NO_COLOR=1 turns colour off"), "{text}");
        let bottom = bottom_border(&text);
        assert!(bottom.contains(CLOSE) && !bottom.contains('↓'), "{text}");
    }

    fn bottom_border(text: &str) -> &str {
        text.lines()
            .find(|l| l.contains(CLOSE))
            .expect("the help's bottom border")
    }

    #[test]
    fn a_short_screen_counts_the_rows_it_hides_and_still_says_how_to_close() {
        let text = help_screen(60, 18);
        let bottom = bottom_border(&text);
        assert!(
            bottom.contains("↓ ") && bottom.contains(" more") && bottom.contains(CLOSE),
            "{text}"
        );
        assert!(!bottom.contains("above"), "{text}");
        let wide = help_screen(160, 48);
        let bottom = bottom_border(&wide);
        assert!(bottom.contains(CLOSE) && !bottom.contains('↓'), "{wide}");
    }

    #[test]
    fn a_short_help_scrolls_to_its_end_and_back() {
        let mut app = app_after(FakeOptions::default(), 10);
        app.update(Action::ToggleHelp);
        let first = screen(&app, 60, 18);
        assert!(
            first.contains("quit") && !first.contains("NO_COLOR"),
            "{first}"
        );
        app.update(Action::Down);
        let down = screen(&app, 60, 18);
        assert!(bottom_border(&down).contains("↑ 1 above"), "{down}");
        app.update(Action::Bottom);
        let last = screen(&app, 60, 18);
        assert!(last.contains("NO_COLOR=1 turns colour off"), "{last}");
        let bottom = bottom_border(&last);
        assert!(bottom.contains("above") && !bottom.contains('↓'), "{last}");
        app.update(Action::PageDown);
        assert_eq!(screen(&app, 60, 18), last, "it stops at its last line");
        app.update(Action::PageUp);
        app.update(Action::Top);
        assert_eq!(screen(&app, 60, 18), first);
        app.update(Action::PageDown);
        let page = screen(&app, 60, 18);
        assert!(
            bottom_border(&page).contains("↑ 16 above"),
            "a page is 16 lines: {page}"
        );
        // Scrolled to the end of a small terminal, then drawn taller: one `↑` moves at once.
        app.update(Action::Bottom);
        screen(&app, 60, 18);
        let taller = screen(&app, 60, 30);
        app.update(Action::Up);
        assert_ne!(screen(&app, 60, 30), taller, "the first up moved");
        app.update(Action::Top);
        // Closing and opening again starts at the top.
        app.update(Action::ToggleHelp);
        app.update(Action::ToggleHelp);
        assert_eq!(screen(&app, 60, 18), first);
    }
}
