//! The timeline at a zoom finer than the frame period: op spans, one row per worker thread.
//! Each column is a fixed span of time ending at the view's right edge (the live edge, or as
//! far back as the user panned). A cell is `█` when ops fill at least half of it and `▌` when
//! they fill less; a column run of one op wide enough carries the op's name; the cursor's op
//! is `▓` (and named, where it fits); a failed op has the error style.
#![forbid(unsafe_code)]

use std::collections::HashMap;

use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use super::timeline::{merge, row_label, Shown};
use super::{fit_parts, format, Ctx, Part};
use crate::profiler::spans::OpSpan;
use crate::profiler::stats::Activity;
use crate::tui::timeline_nav::NavFrame;

/// Glyph of a column ops fill at least half of.
pub(crate) const FULL: &str = "█";
/// Glyph of a column ops fill less than half of.
pub(crate) const PART: &str = "▌";
/// Glyph of the cursor's op.
pub(crate) const CURSOR: &str = "▓";

/// The columns in view: `columns` of `span_ns` each, the last ending at `right_ns`.
#[derive(Clone, Copy, Debug)]
struct SpanAxis {
    columns: usize,
    span_ns: u64,
    left_ns: u64,
    right_ns: u64,
}

impl SpanAxis {
    /// The columns `[start, end)` touches, if any is in view.
    fn columns_of(&self, start: u64, end: u64) -> Option<(usize, usize)> {
        let end = end.max(start + 1);
        if self.columns == 0 || end <= self.left_ns || start >= self.right_ns {
            return None;
        }
        let first = (start.max(self.left_ns) - self.left_ns) / self.span_ns;
        let last = (end.min(self.right_ns) - 1 - self.left_ns) / self.span_ns;
        let clamp = |column: u64| (column as usize).min(self.columns - 1);
        Some((clamp(first), clamp(last)))
    }

    /// How much of column `column` `[start, end)` covers (at least 1 ns when it touches it).
    fn overlap(&self, column: usize, start: u64, end: u64) -> u64 {
        let column_start = self.left_ns + column as u64 * self.span_ns;
        let column_end = column_start + self.span_ns;
        let covered = end.min(column_end).saturating_sub(start.max(column_start));
        covered.max(1)
    }
}

/// One column of a row: the time ops fill and the op that fills most of it.
#[derive(Clone, Copy, Debug, Default)]
struct Cell {
    busy_ns: u64,
    /// (its share of the column, its index in the row's spans).
    top: Option<(u64, usize)>,
}

/// The title and lines (the legend, then one per row in view).
pub(super) fn content<'a>(
    ctx: &Ctx<'a>,
    nav_frame: &NavFrame<'_>,
    shown: &Shown<'_, '_>,
) -> (Line<'a>, Vec<Line<'a>>) {
    let nav = &ctx.app.timeline;
    let edge = nav_frame.edge_ns(true);
    let span_ns = (nav.column_span().as_nanos() as u64).max(1);
    let right_ns = nav.right_ns(edge);
    let axis = SpanAxis {
        columns: shown.columns,
        span_ns,
        right_ns,
        left_ns: right_ns.saturating_sub(span_ns * shown.columns as u64),
    };
    let title = title(ctx, nav_frame, edge - right_ns, shown.width);
    let mut lines = vec![legend(ctx, shown.width)];
    let cursor = nav.cursor.map(|span| (span.thread.id(), span.op));
    let mut by_thread: HashMap<u32, Vec<OpSpan>> = shown
        .rows()
        .map(|(_, worker)| (worker.thread, Vec::new()))
        .collect();
    let in_view = |s: &&OpSpan| axis.columns_of(s.start_ns, s.end_ns).is_some();
    for span in nav_frame.spans.iter().filter(in_view) {
        if let Some(row) = by_thread.get_mut(&span.thread.id()) {
            row.push(*span);
        }
    }
    for (index, worker) in shown.rows() {
        let mut spans = by_thread.remove(&worker.thread).unwrap_or_default();
        spans.sort_by_key(|s| (s.start_ns, s.op));
        let label = row_label(ctx, &worker.name, shown.label_width, index);
        let mut row = vec![label];
        row.extend(cells(ctx, &axis, &spans, cursor));
        lines.push(Line::from(merge(row)));
    }
    (title, lines)
}

/// ` timeline · ops · 10.0µs/column · live `, or how far back; the spans dropped, if any.
fn title<'a>(ctx: &Ctx<'a>, nav_frame: &NavFrame<'_>, back_ns: u64, width: usize) -> Line<'a> {
    let dim = ctx.theme.dim();
    let column = format::nanos(ctx.app.timeline.column_span().as_nanos() as f64);
    let at = match back_ns {
        0 => Span::styled("· live ", dim),
        back => Span::styled(
            format!("· {} back ", format::nanos(back as f64)),
            ctx.theme.key(),
        ),
    };
    let mut parts: Vec<Part<'a>> = vec![
        (0, vec![Span::styled(" timeline ", ctx.theme.strong())]),
        (2, vec![Span::styled("· ops ", dim)]),
        (1, vec![Span::styled(format!("· {column}/column "), dim)]),
        (1, vec![at]),
    ];
    let dropped = nav_frame.spans.dropped();
    if dropped > 0 {
        let text = format!("· {} older ops let go ", format::count(dropped));
        parts.push((3, vec![Span::styled(text, ctx.theme.warning())]));
    }
    fit_parts(parts, width)
}

/// What the glyphs mean and the keys that move, in `width` cells.
fn legend<'a>(ctx: &Ctx<'a>, width: usize) -> Line<'a> {
    let dim = ctx.theme.dim();
    let op = ctx.theme.activity(Activity::Running);
    let parts: Vec<Part<'a>> = vec![
        (0, vec![Span::raw(" ")]),
        (1, vec![Span::styled(FULL, op), Span::styled(" op  ", dim)]),
        (
            3,
            vec![Span::styled(PART, op), Span::styled(" <½ column  ", dim)],
        ),
        (
            2,
            vec![
                Span::styled(CURSOR, cursor_style(ctx)),
                Span::styled(" cursor  ", dim),
            ],
        ),
        (4, vec![Span::styled("←/→ op  Enter detail  ", dim)]),
        (5, vec![Span::styled("</> zoom", dim)]),
    ];
    fit_parts(parts, width)
}

fn cursor_style(ctx: &Ctx<'_>) -> Style {
    ctx.theme.strong().add_modifier(Modifier::REVERSED)
}

/// The row's cells: `spans` (the row's, in view, by start) laid on `axis`, names written
/// over the runs wide enough, the `cursor` op (thread, op id) marked.
fn cells<'a>(
    ctx: &Ctx<'a>,
    axis: &SpanAxis,
    spans: &[OpSpan],
    cursor: Option<(u32, u64)>,
) -> Vec<Span<'a>> {
    let mut columns = vec![Cell::default(); axis.columns];
    for (index, span) in spans.iter().enumerate() {
        let Some((first, last)) = axis.columns_of(span.start_ns, span.end_ns) else {
            continue;
        };
        for (column, cell) in columns.iter_mut().enumerate().take(last + 1).skip(first) {
            let share = axis.overlap(column, span.start_ns, span.end_ns);
            cell.busy_ns += share;
            if cell.top.is_none_or(|(most, _)| share > most) {
                cell.top = Some((share, index));
            }
        }
    }
    let is_cursor = |index: usize| {
        let span = &spans[index];
        cursor == Some((span.thread.id(), span.op))
    };
    let style_of = |index: usize| {
        if is_cursor(index) {
            cursor_style(ctx)
        } else if spans[index].error {
            ctx.theme.error()
        } else {
            ctx.theme.activity(Activity::Running)
        }
    };
    let mut out: Vec<Span<'a>> = columns
        .iter()
        .map(|cell| match cell.top {
            None => Span::raw(" "),
            Some((_, index)) if is_cursor(index) => Span::styled(CURSOR, style_of(index)),
            Some((_, index)) if cell.busy_ns * 2 >= axis.span_ns => {
                Span::styled(FULL, style_of(index))
            }
            Some((_, index)) => Span::styled(PART, style_of(index)),
        })
        .collect();
    name_runs(&columns, spans, &mut out, |index| {
        style_of(index).add_modifier(Modifier::REVERSED)
    });
    out
}

/// Writes each op's name over the runs of columns it fills most of, where a run has room for
/// at least three of its letters and a glyph after them.
fn name_runs<'a>(
    columns: &[Cell],
    spans: &[OpSpan],
    out: &mut [Span<'a>],
    style: impl Fn(usize) -> Style,
) {
    let mut column = 0;
    while column < columns.len() {
        let Some((_, index)) = columns[column].top else {
            column += 1;
            continue;
        };
        let run = columns[column..]
            .iter()
            .take_while(|cell| cell.top.is_some_and(|(_, i)| i == index))
            .count();
        if run >= 4 {
            let name = format::fit_name(spans[index].name.as_str(), run - 1);
            for (offset, letter) in name.chars().enumerate() {
                out[column + offset] = Span::styled(letter.to_string(), style(index));
            }
        }
        column += run;
    }
}
