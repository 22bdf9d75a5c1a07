//! The help overlay: every key (from [`KEYS`]) and the glyph legend, centred over the screen.
#![forbid(unsafe_code)]

use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Paragraph};
use ratatui::Frame;

use super::Ctx;
use crate::tui::input::KEYS;
use crate::tui::theme::{state_glyph, LEGEND};

/// Width of the key column.
const KEY_WIDTH: usize = 15;

/// Draws the overlay over `area`.
pub fn draw(frame: &mut Frame<'_>, area: Rect, ctx: &Ctx<'_>) {
    let lines = lines(ctx);
    let width = lines.iter().map(Line::width).max().unwrap_or(0) as u16 + 2;
    let height = lines.len() as u16 + 2;
    let [popup] = Layout::horizontal([Constraint::Length(width.min(area.width))])
        .flex(Flex::Center)
        .areas(area);
    let [popup] = Layout::vertical([Constraint::Length(height.min(area.height))])
        .flex(Flex::Center)
        .areas(popup);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .border_style(ctx.theme.focused_border())
        .title(Line::styled(" keys ", ctx.theme.strong()));
    frame.render_widget(Clear, popup);
    frame.render_widget(Paragraph::new(lines).block(block), popup);
}

fn lines<'a>(ctx: &Ctx<'a>) -> Vec<Line<'a>> {
    let theme = ctx.theme;
    let mut lines: Vec<Line<'a>> = KEYS
        .iter()
        .map(|help| {
            Line::from(vec![
                Span::styled(format!(" {:<KEY_WIDTH$}", help.keys), theme.key()),
                Span::raw(format!("{} ", help.does)),
            ])
        })
        .collect();
    lines.push(Line::raw(""));
    let mut legend = vec![Span::raw(" ")];
    for (activity, name) in LEGEND {
        legend.push(Span::styled(
            state_glyph(activity),
            theme.activity(activity),
        ));
        legend.push(Span::raw(format!(" {name}  ")));
    }
    legend.push(Span::styled("st steals  q queue", theme.dim()));
    lines.push(Line::from(legend));
    lines.push(Line::styled(
        " GFLOP/s and % of peak: CPU ops vs the CPU GEMM peak; GPU ops apart",
        theme.dim(),
    ));
    lines.push(Line::styled(
        " Esc ? q close · NO_COLOR=1 turns colour off",
        theme.dim(),
    ));
    lines
}
