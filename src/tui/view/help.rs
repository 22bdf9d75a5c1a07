//! The help overlay: every key (from [`KEYS`]) and the glyph legend, centred over the screen.
//! On a narrow screen descriptions wrap under their text; on a short one the rows that do not
//! fit are counted in the bottom border, which always says how to close the overlay.
#![forbid(unsafe_code)]

use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Paragraph};
use ratatui::Frame;

use super::format::wrap;
use super::{fit_parts, Ctx, Part};
use crate::tui::input::KEYS;
use crate::tui::theme::{state_glyph, LEGEND};

/// Width of the key column.
const KEY_WIDTH: usize = 15;
/// The bottom border's reminder.
const CLOSE: &str = "Esc ? q close";

/// Draws the overlay over `area`.
pub fn draw(frame: &mut Frame<'_>, area: Rect, ctx: &Ctx<'_>) {
    let natural = lines(ctx, usize::MAX);
    let widest = natural.iter().map(Line::width).max().unwrap_or(0);
    let width = (widest as u16 + 2).min(area.width);
    let lines = lines(ctx, usize::from(width.saturating_sub(2)));
    let height = (lines.len() as u16 + 2).min(area.height);
    let [popup] = Layout::horizontal([Constraint::Length(width)])
        .flex(Flex::Center)
        .areas(area);
    let [popup] = Layout::vertical([Constraint::Length(height)])
        .flex(Flex::Center)
        .areas(popup);
    let hidden = lines
        .len()
        .saturating_sub(usize::from(height.saturating_sub(2)));
    let close = close_line(ctx, hidden, usize::from(width.saturating_sub(2)));
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .border_style(ctx.theme.focused_border())
        .title(Line::styled(" keys ", ctx.theme.strong()))
        .title_bottom(close.right_aligned());
    frame.render_widget(Clear, popup);
    frame.render_widget(Paragraph::new(lines).block(block), popup);
}

/// The bottom border's text in `width` cells: how many rows are hidden, if any, and how to
/// close, which always stays.
fn close_line<'a>(ctx: &Ctx<'a>, hidden: usize, width: usize) -> Line<'a> {
    let mut parts: Vec<Part<'a>> = Vec::new();
    if hidden > 0 {
        let warning = ctx.theme.warning();
        parts.push((
            1,
            vec![Span::styled(format!(" ↓ {hidden} more lines"), warning)],
        ));
        parts.push((2, vec![Span::styled(" (enlarge the terminal)", warning)]));
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
    for help in KEYS {
        for (index, chunk) in wrap(help.does, text_width).into_iter().enumerate() {
            let keys = if index == 0 { help.keys } else { "" };
            lines.push(Line::from(vec![
                Span::styled(format!(" {keys:<KEY_WIDTH$}"), theme.key()),
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
        let text = help_screen(60, 40);
        assert!(
            text.contains("(its elapsed") && text.contains("time stops too)"),
            "{text}"
        );
        assert!(text.contains("NO_COLOR=1 turns colour off"), "{text}");
        assert!(
            text.contains(CLOSE) && !text.contains("more lines"),
            "{text}"
        );
    }

    #[test]
    fn a_short_screen_counts_the_rows_it_hides_and_still_says_how_to_close() {
        let text = help_screen(60, 18);
        let bottom = text.lines().rev().find(|l| l.contains('╰')).unwrap();
        assert!(
            bottom.contains("more lines") && bottom.contains(CLOSE),
            "{text}"
        );
        let wide = help_screen(160, 48);
        assert!(
            wide.contains(CLOSE) && !wide.contains("more lines"),
            "{wide}"
        );
    }
}
