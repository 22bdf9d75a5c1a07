//! The op table: per op name, its change per step, total and mean time in A and B with the
//! change and ratio, and its count in each, ordered by the chosen key (`▼` descending, `▲`
//! ascending, as the dashboard's ops table marks it). On a narrow screen whole figure
//! columns go (counts first, then the runs' own figures, the changes last; the sort column
//! never) and names are cut with [`format::fit_name`]: a figure is never cut.
#![forbid(unsafe_code)]

use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row, Table, TableState};
use ratatui::Frame;

use super::state::{CompareView, Pane, SortKey};
use super::text::{delta_ms, ms, ratio};
use super::view::{block, more_marker};
use crate::record::compare::OpRow;
use crate::tui::theme::Theme;
use crate::tui::view::{fit_parts, format, Part};

/// A column of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Column {
    Name,
    PerStep,
    TotalA,
    TotalB,
    DeltaTotal,
    RatioTotal,
    MeanA,
    MeanB,
    RatioMean,
    CountA,
    CountB,
}

impl Column {
    /// Left to right.
    const SHOWN: [Column; 11] = [
        Column::Name,
        Column::PerStep,
        Column::TotalA,
        Column::TotalB,
        Column::DeltaTotal,
        Column::RatioTotal,
        Column::MeanA,
        Column::MeanB,
        Column::RatioMean,
        Column::CountA,
        Column::CountB,
    ];
    /// The figure columns, the first to go first on a narrow screen.
    const EXPENDABLE: [Column; 10] = [
        Column::CountB,
        Column::CountA,
        Column::MeanB,
        Column::MeanA,
        Column::TotalB,
        Column::TotalA,
        Column::RatioMean,
        Column::RatioTotal,
        Column::DeltaTotal,
        Column::PerStep,
    ];

    fn heading(self) -> &'static str {
        match self {
            Column::Name => "name",
            Column::PerStep => "Δ/step",
            Column::TotalA => "total A",
            Column::TotalB => "total B",
            Column::DeltaTotal => "Δ total",
            Column::RatioTotal => "x total",
            Column::MeanA => "mean A",
            Column::MeanB => "mean B",
            Column::RatioMean => "x mean",
            Column::CountA => "count A",
            Column::CountB => "count B",
        }
    }
}

/// Columns that show together or not at all: run A's figure and run B's.
const PAIRS: [(Column, Column); 3] = [
    (Column::TotalA, Column::TotalB),
    (Column::MeanA, Column::MeanB),
    (Column::CountA, Column::CountB),
];

/// Width of a figure column (`+1.23ms`, `x12.50`, the headings with their arrow).
const FIGURE: usize = 8;
/// The narrowest name column the figures leave before whole columns go.
const MIN_NAME: usize = 14;

/// Draws the table into `area`, keeping the selected op in sight.
pub(super) fn draw(frame: &mut Frame<'_>, area: Rect, view: &CompareView, theme: Theme) {
    let count = view.comparison().ops.len();
    let block = block(
        title(view, theme, usize::from(area.width)),
        view.focus == Pane::Ops,
        theme,
    );
    let inner = block.inner(area);
    let sorted = sorted_column(view);
    let longest = view.ops().map(|op| format::cells(&op.name)).max();
    let width = usize::from(inner.width);
    let columns = shown_columns(sorted, width, longest.unwrap_or(4), per_step_known(view));
    // Names no wider than the longest, so the figures stay next to them on a wide screen.
    let name_width = name_width(&columns, width).min(longest.unwrap_or(4).max(MIN_NAME));
    let header =
        Row::new(columns.iter().map(|&column| heading(view, column, sorted))).style(theme.strong());
    let rows = view
        .ops()
        .map(|op| op_row(view, op, &columns, name_width, theme));
    let widths = columns.iter().map(|&column| match column {
        Column::Name => Constraint::Length(name_width as u16),
        _ => Constraint::Length(FIGURE as u16),
    });
    let table = Table::new(rows, widths)
        .header(header)
        .row_highlight_style(theme.selected());
    let mut state = TableState::default().with_offset(view.shown.ops_from.get());
    if count > 0 {
        state.select(Some(view.selected));
    }
    frame.render_stateful_widget(table, inner, &mut state);
    if count == 0 && inner.height >= 2 {
        let line = Line::styled(" no op ran in either run", theme.dim());
        let row = Rect {
            y: inner.y + 1,
            height: 1,
            ..inner
        };
        frame.render_widget(line, row);
    }
    let visible = usize::from(inner.height.saturating_sub(1));
    view.shown.ops.set(visible);
    view.shown.ops_from.set(state.offset());
    let above = state.offset().min(count);
    let below = count.saturating_sub(above + visible);
    let block = match more_marker(theme, above, below) {
        Some(marker) => block.title_bottom(marker),
        None => block,
    };
    frame.render_widget(block, area);
}

/// Whether both runs say their iterations (a Chrome trace does not): the per-step column
/// shows only then.
fn per_step_known(view: &CompareView) -> bool {
    let comparison = view.comparison();
    comparison.a.iterations.is_some_and(|n| n > 0) && comparison.b.iterations.is_some_and(|n| n > 0)
}

/// The column the sort key orders by: contribution is the change per step where the runs
/// say their iterations, else the change in total time.
fn sorted_column(view: &CompareView) -> Column {
    match view.sort {
        SortKey::Contribution if per_step_known(view) => Column::PerStep,
        SortKey::Contribution | SortKey::Delta => Column::DeltaTotal,
        SortKey::Ratio => Column::RatioTotal,
        SortKey::MeanRatio => Column::RatioMean,
        SortKey::Name => Column::Name,
    }
}

/// The columns that fit `width` with a name column of [`MIN_NAME`] (or the longest name, if
/// shorter), the sort column always among them (the per-step one only where `per_step`).
fn shown_columns(sorted: Column, width: usize, longest: usize, per_step: bool) -> Vec<Column> {
    let name = longest.clamp(4, MIN_NAME);
    let mut figures: Vec<Column> = Column::EXPENDABLE.into_iter().rev().collect();
    figures.retain(|&column| per_step || column != Column::PerStep);
    if sorted != Column::Name {
        figures.retain(|&column| column != sorted);
        figures.insert(0, sorted);
    }
    let fit = width.saturating_sub(name) / (FIGURE + 1);
    figures.truncate(fit.max(usize::from(sorted != Column::Name)));
    // A run's figure shows with the other run's or not at all.
    for (a, b) in PAIRS {
        if figures.contains(&a) != figures.contains(&b) {
            figures.retain(|&column| column != a && column != b);
        }
    }
    Column::SHOWN
        .into_iter()
        .filter(|column| *column == Column::Name || figures.contains(column))
        .collect()
}

/// What the figures (and the spaces between columns) leave the name.
fn name_width(columns: &[Column], width: usize) -> usize {
    let figures = columns.len().saturating_sub(1);
    width.saturating_sub(figures * (FIGURE + 1)).max(1)
}

fn heading(view: &CompareView, column: Column, sorted: Column) -> Cell<'static> {
    let mut text = column.heading().to_string();
    if column == sorted {
        // Names run A to Z, figures largest first, unless inverted.
        let ascending = (column == Column::Name) != view.inverted;
        text.push(if ascending { '▲' } else { '▼' });
    }
    align(text, column)
}

/// Names on the left, figures on the right.
fn align(text: String, column: Column) -> Cell<'static> {
    let line = Line::from(text);
    Cell::from(if column == Column::Name {
        line
    } else {
        line.right_aligned()
    })
}

fn op_row(
    view: &CompareView,
    op: &OpRow,
    columns: &[Column],
    name_width: usize,
    theme: Theme,
) -> Row<'static> {
    let figure = |text: String| Cell::from(Line::from(text).right_aligned());
    let change = |delta: f64, text: String| {
        Cell::from(Line::styled(text, change_style(theme, delta)).right_aligned())
    };
    let per_step = view.comparison().per_step_ms(op);
    Row::new(columns.iter().map(|column| match column {
        Column::Name => Cell::from(format::fit_name(&op.name, name_width)),
        Column::PerStep => match per_step {
            Some(step) => change(step.delta, delta_ms(step.delta)),
            None => figure("-".into()),
        },
        Column::TotalA => figure(ms(op.total_ms.a)),
        Column::TotalB => figure(ms(op.total_ms.b)),
        Column::DeltaTotal => change(op.total_ms.delta, delta_ms(op.total_ms.delta)),
        Column::RatioTotal => figure(ratio(op.total_ms.ratio, 2)),
        Column::MeanA => figure(ms(op.mean_us.a / 1e3)),
        Column::MeanB => figure(ms(op.mean_us.b / 1e3)),
        Column::RatioMean => figure(ratio(op.mean_us.ratio, 2)),
        Column::CountA => figure(format::quantity(op.count.a)),
        Column::CountB => figure(format::quantity(op.count.b)),
    }))
}

/// Slower (more time in B) as a warning, faster as good news, no change plain.
pub(crate) fn change_style(theme: Theme, delta: f64) -> ratatui::style::Style {
    match delta {
        d if d > 0.0 => theme.warning(),
        d if d < 0.0 => theme.ok(),
        _ => theme.text(),
    }
}

/// ` ops (12) · by contribution to the step change ▼ `; the order goes last.
fn title<'a>(view: &CompareView, theme: Theme, width: usize) -> Line<'a> {
    let count = view.comparison().ops.len();
    let order = if view.inverted { "inverted" } else { "" };
    let mut by = format!("· by {} ", view.sort.label());
    if !order.is_empty() {
        by.push_str(&format!("({order}) "));
    }
    let parts: Vec<Part<'a>> = vec![
        (0, vec![Span::styled(" ops ", theme.strong())]),
        (2, vec![Span::styled(format!("({count}) "), theme.dim())]),
        (1, vec![Span::styled(by, theme.key())]),
    ];
    fit_parts(parts, width.saturating_sub(2))
}
