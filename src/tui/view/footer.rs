//! The footer: a status line (the last control's outcome, or what has the focus) over the
//! key hints, wrapped to the width so none is cut.
#![forbid(unsafe_code)]

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::Ctx;
use crate::tui::app::{Focus, Mode};
use crate::tui::input::KEYS;

/// Rows the footer takes at `width`.
pub fn height(ctx: &Ctx<'_>, width: u16) -> u16 {
    1 + hint_lines(ctx, width).len() as u16
}

/// Draws the footer into `area`.
pub fn draw(frame: &mut Frame<'_>, area: Rect, ctx: &Ctx<'_>) {
    let mut lines = vec![status_line(ctx)];
    lines.extend(hint_lines(ctx, area.width));
    frame.render_widget(Paragraph::new(lines), area);
}

fn status_line<'a>(ctx: &Ctx<'a>) -> Line<'a> {
    let theme = ctx.theme;
    if let Some(status) = &ctx.app.status {
        let style = if status.is_error {
            theme.error()
        } else {
            theme.ok()
        };
        let mark = if status.is_error { "✗" } else { "✓" };
        return Line::styled(format!(" {mark} {}", status.text), style);
    }
    if ctx.app.is_finished() {
        return Line::styled(
            " the workload has finished: these are its final numbers; q quits",
            theme.strong(),
        );
    }
    Line::styled(format!(" focus: {}", focus_name(ctx)), theme.dim())
}

fn focus_name(ctx: &Ctx<'_>) -> String {
    let device = ctx
        .panels
        .get(ctx.app.selected_device)
        .map_or("-", |panel| panel.title());
    match ctx.app.focus {
        Focus::Devices => format!("devices ({device}): ←/→ pick a device, ↑/↓ scroll"),
        Focus::Timeline => "timeline: ↑/↓ scroll, </> zoom".to_string(),
        Focus::Ops => "ops: ←/→ sort column, i invert, / filter".to_string(),
    }
}

/// The hints: in the filter, how to leave it; else every key with a footer label.
fn hints() -> Vec<(&'static str, &'static str)> {
    KEYS.iter()
        .map(|help| help.hint)
        .filter(|(keys, _)| !keys.is_empty())
        .collect()
}

fn hint_lines<'a>(ctx: &Ctx<'a>, width: u16) -> Vec<Line<'a>> {
    let hints = match ctx.app.mode {
        Mode::Filter => vec![
            ("Enter", "keep filter"),
            ("Esc", "clear filter"),
            ("Ctrl-C", "quit"),
        ],
        Mode::Help => vec![("Esc/?/q", "close help")],
        Mode::Normal => hints(),
    };
    let width = usize::from(width.max(1));
    let mut lines = Vec::new();
    let mut spans: Vec<Span<'a>> = Vec::new();
    let mut used = 0;
    for (key, label) in hints {
        let cost = 1 + key.chars().count() + 1 + label.chars().count() + 1;
        if used > 0 && used + cost > width {
            lines.push(Line::from(std::mem::take(&mut spans)));
            used = 0;
        }
        spans.push(Span::raw(" "));
        spans.push(Span::styled(key, ctx.theme.key()));
        spans.push(Span::styled(format!(" {label} "), ctx.theme.dim()));
        used += cost;
    }
    if !spans.is_empty() {
        lines.push(Line::from(spans));
    }
    lines
}
