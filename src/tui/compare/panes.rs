//! The compare view's smaller panes: the header (both runs, the step time, the settings that
//! changed), the selected op's detail, and the workers' busy time with its change.
#![forbid(unsafe_code)]

use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table};
use ratatui::Frame;

use super::state::{CompareView, Pane};
use super::table::change_style;
use super::text::{delta_count, delta_ms, ms, ratio};
use super::view::{block, more_marker};
use crate::record::compare::{Delta, RunSummaryLine};
use crate::tui::theme::Theme;
use crate::tui::view::format;

/// Width of the labels in the header.
const LABEL: usize = 11;
/// Width of the labels in the detail.
const DETAIL_LABEL: usize = 9;
/// Lines of the detail pane.
const DETAIL_LINES: u16 = 5;
/// The most worker rows the bottom panes grow to before the workers scroll.
const MAX_WORKER_ROWS: u16 = 8;

/// Rows the detail and workers panes want: the detail's lines, or a heading and every
/// worker up to [`MAX_WORKER_ROWS`], in their borders.
pub(crate) fn bottom_height(view: &CompareView) -> u16 {
    let workers = view.comparison().workers.len() as u16;
    DETAIL_LINES.max(1 + workers.min(MAX_WORKER_ROWS)) + 2
}

fn label<'a>(text: &str, theme: Theme) -> Span<'a> {
    Span::styled(format!(" {}", format::pad_right(text, LABEL)), theme.dim())
}

fn detail_label<'a>(text: &str, theme: Theme) -> Span<'a> {
    Span::styled(
        format!(" {}", format::pad_right(text, DETAIL_LABEL)),
        theme.dim(),
    )
}

/// `A -> B +change xratio` of a duration, in ms.
fn change_spans<'a>(delta: &Delta, theme: Theme) -> Vec<Span<'a>> {
    vec![
        Span::styled(ms(delta.a), theme.text()),
        Span::styled(" → ", theme.dim()),
        Span::styled(ms(delta.b), theme.strong()),
        Span::raw(" "),
        Span::styled(delta_ms(delta.delta), change_style(theme, delta.delta)),
        Span::raw(" "),
        Span::styled(ratio(delta.ratio, 2), theme.text()),
    ]
}

/// Draws the header into `area`.
pub(crate) fn draw_header(frame: &mut Frame<'_>, area: Rect, view: &CompareView, theme: Theme) {
    let comparison = view.comparison();
    let width = usize::from(area.width.saturating_sub(2));
    let run = |side: &str, run: &RunSummaryLine| {
        let mut about = format!("{} · {}", run.source, run.format);
        if let Some(iterations) = run.iterations {
            about.push_str(&format!(" · {iterations} iterations"));
        }
        if let Some(cut_off) = &run.cut_off {
            about.push_str(&format!(" · {cut_off}"));
        }
        Line::from(vec![label(side, theme), Span::raw(about)])
    };
    let mut step = vec![label("step time", theme)];
    match &comparison.step_time_s {
        Some(delta) => step.extend(change_spans(&delta_in_ms(delta), theme)),
        None => step.push(Span::styled(
            "- (a Chrome trace or a cut-off recording has none)",
            theme.dim(),
        )),
    }
    let recorded = &comparison.recorded_s;
    step.push(Span::styled(
        format!(
            "    recorded {} → {}",
            format::nanos(recorded.a * 1e9),
            format::nanos(recorded.b * 1e9)
        ),
        theme.dim(),
    ));
    let lines: Vec<Line<'_>> = vec![
        run("A", &comparison.a),
        run("B", &comparison.b),
        Line::from(step),
        config_line(view, theme, width),
    ]
    .into_iter()
    .map(|line| fit_line(line, width))
    .collect();
    let title = Line::styled(" compare: A → B ", theme.strong());
    frame.render_widget(
        Paragraph::new(lines).block(block(title, false, theme)),
        area,
    );
}

/// A duration's delta in seconds as one in ms.
fn delta_in_ms(delta: &Delta) -> Delta {
    Delta {
        a: delta.a * 1e3,
        b: delta.b * 1e3,
        delta: delta.delta * 1e3,
        ratio: delta.ratio,
    }
}

/// The settings that changed (`inter 2 → 4 · ...`), as many as fit and how many did not; or
/// that none did.
fn config_line<'a>(view: &CompareView, theme: Theme, width: usize) -> Line<'a> {
    let config = &view.comparison().config;
    let changed: Vec<String> = config
        .iter()
        .filter(|row| row.changed)
        .map(|row| {
            let value = |value: &Option<String>| value.clone().unwrap_or_else(|| "-".into());
            format!("{} {} → {}", row.key, value(&row.a), value(&row.b))
        })
        .collect();
    let mut spans = vec![label("changed", theme)];
    if changed.is_empty() {
        let text = format!("no setting ({} in all)", config.len());
        spans.push(Span::styled(text, theme.dim()));
        return Line::from(spans);
    }
    let room = width.saturating_sub(LABEL + 1);
    let mut shown = String::new();
    for (index, text) in changed.iter().enumerate() {
        let joined = match shown.is_empty() {
            true => text.clone(),
            false => format!("{shown} · {text}"),
        };
        let left = changed.len() - index - 1;
        let tail = match left {
            0 => String::new(),
            left => format!(" · +{left} more"),
        };
        if !shown.is_empty() && format::cells(&joined) + format::cells(&tail) > room {
            shown.push_str(&format!(" · +{} more", left + 1));
            break;
        }
        shown = joined;
    }
    spans.push(Span::styled(shown, theme.warning()));
    Line::from(spans)
}

/// `line` cut to `width` cells, ending in `…` when cut.
fn fit_line(line: Line<'_>, width: usize) -> Line<'_> {
    if line.width() <= width {
        return line;
    }
    let mut left = width;
    let mut spans = Vec::new();
    for span in line.spans {
        let cells = span.width();
        if cells < left {
            left -= cells;
            spans.push(span);
            continue;
        }
        spans.push(Span::styled(
            format::ellipsized(&span.content, left),
            span.style,
        ));
        break;
    }
    Line::from(spans)
}

/// Draws the selected op's detail into `area`.
pub(crate) fn draw_detail(frame: &mut Frame<'_>, area: Rect, view: &CompareView, theme: Theme) {
    let width = usize::from(area.width.saturating_sub(2));
    let Some(op) = view.selected_op() else {
        let title = Line::styled(" op ", theme.strong());
        let text = Line::styled(" no op ran in either run", theme.dim());
        frame.render_widget(Paragraph::new(text).block(block(title, false, theme)), area);
        return;
    };
    let position = format!(
        " ({} of {}) ",
        view.selected + 1,
        view.comparison().ops.len()
    );
    let name_room = width.saturating_sub(format::cells(&position) + 1);
    let title = Line::from(vec![
        Span::styled(
            format!(" {}", format::fit_name(&op.name, name_room)),
            theme.strong(),
        ),
        Span::styled(position, theme.dim()),
    ]);
    let count = &op.count;
    let count_line = vec![
        detail_label("count", theme),
        Span::raw(format!(
            "{} → {}  ",
            format::quantity(count.a),
            format::quantity(count.b)
        )),
        Span::styled(delta_count(count.delta), change_style(theme, count.delta)),
    ];
    let mean = Delta {
        a: op.mean_us.a / 1e3,
        b: op.mean_us.b / 1e3,
        delta: op.mean_us.delta / 1e3,
        ratio: op.mean_us.ratio,
    };
    let mut per_step = vec![detail_label("per step", theme)];
    match view.comparison().per_step_ms(op) {
        Some(step) => per_step.extend(change_spans(&step, theme)),
        None => per_step.push(Span::styled("- (a run has no iterations)", theme.dim())),
    }
    let mut share = vec![detail_label("share", theme)];
    match view.share_of_step_change(op) {
        Some(part) => share.push(Span::raw(format!(
            "{:.0}% of the step's change",
            part * 100.0
        ))),
        None => share.push(Span::styled("- (no change in step time)", theme.dim())),
    }
    let lines: Vec<Line<'_>> = vec![
        Line::from(count_line),
        Line::from(
            [
                vec![detail_label("total", theme)],
                change_spans(&op.total_ms, theme),
            ]
            .concat(),
        ),
        Line::from(
            [
                vec![detail_label("mean", theme)],
                change_spans(&mean, theme),
            ]
            .concat(),
        ),
        Line::from(per_step),
        Line::from(share),
    ]
    .into_iter()
    .map(|line| fit_line(line, width))
    .collect();
    frame.render_widget(
        Paragraph::new(lines).block(block(title, false, theme)),
        area,
    );
}

/// Width of a figure column in the workers pane.
const FIGURE: u16 = 8;
/// The narrowest worker name column before figures go.
const MIN_WORKER_NAME: u16 = 10;

/// A figure column of the workers pane.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Busy {
    A,
    B,
    Delta,
    Ratio,
}

/// The figure columns that fit `width` beside a name of [`MIN_WORKER_NAME`], in their order
/// (the change stays longest, then its ratio, then both runs' figures together).
fn busy_columns(width: u16) -> Vec<Busy> {
    let fit = usize::from(width.saturating_sub(MIN_WORKER_NAME) / (FIGURE + 1));
    let keep: &[Busy] = match fit {
        0 | 1 => &[Busy::Delta],
        2 | 3 => &[Busy::Delta, Busy::Ratio],
        _ => &[Busy::A, Busy::B, Busy::Delta, Busy::Ratio],
    };
    keep.to_vec()
}

/// Draws the workers' busy time into `area`, scrolled where the focus put it.
pub(crate) fn draw_workers(frame: &mut Frame<'_>, area: Rect, view: &CompareView, theme: Theme) {
    let workers = &view.comparison().workers;
    let title = Line::from(vec![
        Span::styled(" workers busy ", theme.strong()),
        Span::styled(format!("({}) ", workers.len()), theme.dim()),
    ]);
    let block = block(title, view.focus == Pane::Workers, theme);
    let inner = block.inner(area);
    let visible = usize::from(inner.height.saturating_sub(1));
    view.shown.workers.set(visible);
    let from = view
        .workers_scroll
        .min(workers.len().saturating_sub(visible));
    let columns = busy_columns(inner.width);
    let name_width = inner
        .width
        .saturating_sub(columns.len() as u16 * (FIGURE + 1))
        .max(1);
    let figure = |text: String| Cell::from(Line::from(text).right_aligned());
    let mut header = vec![Cell::from("worker")];
    header.extend(columns.iter().map(|column| {
        figure(
            match column {
                Busy::A => "A",
                Busy::B => "B",
                Busy::Delta => "Δ",
                Busy::Ratio => "x",
            }
            .to_string(),
        )
    }));
    let rows = workers.iter().skip(from).take(visible).map(|row| {
        let busy = &row.busy_s;
        let delta = busy.delta * 1e3;
        let mut cells = vec![Cell::from(format::fit_name(
            &row.worker,
            usize::from(name_width),
        ))];
        cells.extend(columns.iter().map(|column| match column {
            Busy::A => figure(ms(busy.a * 1e3)),
            Busy::B => figure(ms(busy.b * 1e3)),
            Busy::Delta => Cell::from(
                Line::styled(delta_ms(delta), change_style(theme, delta)).right_aligned(),
            ),
            Busy::Ratio => figure(ratio(busy.ratio, 2)),
        }));
        Row::new(cells)
    });
    let widths = std::iter::once(Constraint::Length(name_width))
        .chain(columns.iter().map(|_| Constraint::Length(FIGURE)));
    let table = Table::new(rows, widths).header(Row::new(header).style(theme.strong()));
    frame.render_widget(table, inner);
    let below = workers.len().saturating_sub(from + visible);
    let block = match more_marker(theme, from, below) {
        Some(marker) => block.title_bottom(marker),
        None => block,
    };
    frame.render_widget(block, area);
}
