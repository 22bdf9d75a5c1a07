//! Drawing the compare view from a [`CompareView`]:
//!
//! ```text
//! header (A and B, step time A -> B with change and ratio, the settings that changed)
//! op table (sorted; the selected op reversed)
//! selected op's detail | workers' busy time
//! footer (key hints wrapped to the width)
//! ```
//! The help overlay goes over everything while it is up; under [`MIN`] the screen is one
//! centred line saying so.
#![forbid(unsafe_code)]

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};
use ratatui::Frame;

use super::keys::COMPARE_KEYS;
use super::panes;
use super::state::{CompareView, Mode};
use super::table;
use crate::tui::theme::Theme;
use crate::tui::view::{centered, draw_too_small_for, format};

/// The smallest screen the view draws its panes on.
pub(crate) const MIN: (u16, u16) = (60, 16);
/// The detail pane's width when half the screen is less: its widest line, `total` with
/// six-cell figures, in a border.
const DETAIL_WIDTH: u16 = 42;
/// Rows of the header: four lines in a border.
const HEADER_ROWS: u16 = 6;

/// Draws the whole screen.
pub(crate) fn draw(frame: &mut Frame<'_>, view: &CompareView, theme: Theme) {
    let area = frame.area();
    if area.width < MIN.0 || area.height < MIN.1 {
        return draw_too_small(frame, area, view, theme);
    }
    let footer = footer_lines(view, theme, area.width);
    let [header, body, footer_area] = Layout::vertical([
        Constraint::Length(HEADER_ROWS),
        Constraint::Min(0),
        Constraint::Length(footer.len() as u16),
    ])
    .areas(area);
    let bottom_rows = panes::bottom_height(view).min(body.height / 2);
    let [ops, bottom] =
        Layout::vertical([Constraint::Min(0), Constraint::Length(bottom_rows)]).areas(body);
    let detail_width = (bottom.width / 2).max(DETAIL_WIDTH.min(bottom.width));
    let [detail, workers] =
        Layout::horizontal([Constraint::Length(detail_width), Constraint::Min(0)]).areas(bottom);
    panes::draw_header(frame, header, view, theme);
    table::draw(frame, ops, view, theme);
    panes::draw_detail(frame, detail, view, theme);
    panes::draw_workers(frame, workers, view, theme);
    frame.render_widget(Paragraph::new(footer), footer_area);
    if view.mode == Mode::Help {
        draw_help(frame, area, view, theme);
    }
}

pub(crate) use crate::tui::view::panel_block as block;

/// ` ↑ 2 above · ↓ 5 more ` for a bottom border, when rows are out of sight.
pub(crate) fn more_marker<'a>(theme: Theme, above: usize, below: usize) -> Option<Line<'a>> {
    let mut parts = Vec::new();
    if above > 0 {
        parts.push(format!("↑ {above} above"));
    }
    if below > 0 {
        parts.push(format!("↓ {below} more"));
    }
    (!parts.is_empty())
        .then(|| Line::styled(format!(" {} ", parts.join(" · ")), theme.key()).right_aligned())
}

/// The key hints, wrapped to `width`.
fn footer_lines<'a>(view: &CompareView, theme: Theme, width: u16) -> Vec<Line<'a>> {
    let hints: Vec<(&str, &str)> = match view.mode {
        Mode::Help => vec![("j/k", "scroll"), ("Esc/?/q", "close help")],
        Mode::Normal => COMPARE_KEYS
            .iter()
            .map(|help| help.hint)
            .filter(|(keys, _)| !keys.is_empty())
            .collect(),
    };
    let width = usize::from(width.max(1));
    let mut lines = Vec::new();
    let mut spans: Vec<Span<'a>> = Vec::new();
    let mut used = 0;
    for (key, label) in hints {
        let cost = 1 + format::cells(key) + 1 + format::cells(label) + 1;
        if used > 0 && used + cost > width {
            lines.push(Line::from(std::mem::take(&mut spans)));
            used = 0;
        }
        spans.push(Span::raw(" "));
        spans.push(Span::styled(key.to_string(), theme.key()));
        spans.push(Span::styled(format!(" {label} "), theme.dim()));
        used += cost;
    }
    if !spans.is_empty() {
        lines.push(Line::from(spans));
    }
    lines
}

/// Width of the help's key column.
const KEY_WIDTH: usize = 15;

/// What the figures mean, under the keys in the help.
const NOTES: [&str; 4] = [
    "A is the baseline: changes are B - A, ratios B / A (- where A has none)",
    "Δ/step: the op's total time per iteration, B - A (recordings; a Chrome trace has no \
     iterations, so its ops sort by Δ total)",
    "share: the op's Δ/step over the step time's change; ops on parallel workers can add up \
     to more than 100%",
    "NO_COLOR=1 turns colour off",
];

/// The help overlay over `area`: every key, then what the figures mean; scrolls when short.
fn draw_help(frame: &mut Frame<'_>, area: Rect, view: &CompareView, theme: Theme) {
    let width = area.width.min(100);
    let lines = help_lines(theme, usize::from(width.saturating_sub(2)));
    let height = (lines.len() as u16 + 2).min(area.height);
    let popup = centered(area, width, height);
    let visible = usize::from(height.saturating_sub(2));
    let above = view.help_scroll.min(lines.len().saturating_sub(visible));
    view.shown
        .help_last
        .set(lines.len().saturating_sub(visible));
    let below = lines.len().saturating_sub(above + visible);
    let mut close = more_marker(theme, above, below).map_or_else(Vec::new, |line| line.spans);
    close.push(Span::styled(" Esc ? q close ", theme.key()));
    let block = block(Line::styled(" compare: keys ", theme.strong()), true, theme)
        .title_bottom(Line::from(close).right_aligned());
    frame.render_widget(Clear, popup);
    let shown: Vec<Line<'_>> = lines.into_iter().skip(above).collect();
    frame.render_widget(Paragraph::new(shown).block(block), popup);
}

/// Every row of the help, wrapped to `width` cells.
fn help_lines<'a>(theme: Theme, width: usize) -> Vec<Line<'a>> {
    let text_width = width.saturating_sub(KEY_WIDTH + 2).max(10);
    let mut lines = Vec::new();
    for help in COMPARE_KEYS {
        for (index, chunk) in format::wrap(help.does, text_width).into_iter().enumerate() {
            let keys = if index == 0 { help.keys } else { "" };
            lines.push(Line::from(vec![
                Span::styled(
                    format!(" {}", format::pad_right(keys, KEY_WIDTH)),
                    theme.key(),
                ),
                Span::raw(format!("{chunk} ")),
            ]));
        }
    }
    lines.push(Line::raw(""));
    for note in NOTES {
        let chunks = format::wrap(note, width.saturating_sub(2).max(10));
        lines.extend(
            chunks
                .into_iter()
                .map(|chunk| Line::styled(format!(" {chunk}"), theme.dim())),
        );
    }
    lines
}

/// One centred line in place of panes that would not fit.
fn draw_too_small(frame: &mut Frame<'_>, area: Rect, view: &CompareView, theme: Theme) {
    draw_too_small_for(frame, area, MIN, view.mode == Mode::Normal, theme);
}
