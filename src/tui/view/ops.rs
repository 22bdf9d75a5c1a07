//! The top ops table: count, total, mean and p99 per op name, sorted by the chosen column
//! (`▼` descending, `▲` ascending; ←/→ pick it when the table has the focus, `i` inverts) and
//! filtered by `/`.
#![forbid(unsafe_code)]

use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row, Table, TableState};
use ratatui::Frame;

use super::format;
use super::Ctx;
use crate::profiler::stats::OpSnapshot;
use crate::tui::app::{Focus, Mode, SortColumn};

/// Draws the ops table into `area`.
pub fn draw(frame: &mut Frame<'_>, area: Rect, ctx: &Ctx<'_>) {
    let app = ctx.app;
    let ops = app.visible_ops();
    let header =
        Row::new(SortColumn::ALL.map(|column| heading(ctx, column))).style(ctx.theme.strong());
    let rows = ops.iter().map(|op| op_row(op));
    // Figures are at most 6 wide (`format::nanos`, `format::count`, `total▼`).
    let widths = [
        Constraint::Min(6),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(6),
    ];
    let table = Table::new(rows, widths)
        .header(header)
        .block(ctx.block(title(ctx, ops.len()), Focus::Ops))
        .row_highlight_style(ctx.theme.selected());
    let mut state = TableState::default();
    if app.focus == Focus::Ops && !ops.is_empty() {
        state.select(Some(app.selected_op));
    }
    frame.render_stateful_widget(table, area, &mut state);
}

fn heading(ctx: &Ctx<'_>, column: SortColumn) -> Cell<'static> {
    let name = column.heading();
    if column != ctx.app.sort {
        return Cell::from(align(name, column));
    }
    let arrow = if ctx.app.ascending { "▲" } else { "▼" };
    Cell::from(align(&format!("{name}{arrow}"), column))
}

/// Names on the left, figures on the right.
fn align(text: &str, column: SortColumn) -> Line<'static> {
    let line = Line::from(text.to_string());
    if column == SortColumn::Name {
        line
    } else {
        line.right_aligned()
    }
}

fn op_row(op: &OpSnapshot) -> Row<'static> {
    Row::new([
        Cell::from(op.name.clone()),
        Cell::from(Line::from(format::count(op.count)).right_aligned()),
        Cell::from(Line::from(format::nanos(op.total_ns as f64)).right_aligned()),
        Cell::from(Line::from(format::nanos(op.mean_ns)).right_aligned()),
        Cell::from(Line::from(format::nanos(op.p99_ns as f64)).right_aligned()),
    ])
}

fn title<'a>(ctx: &Ctx<'a>, shown: usize) -> Line<'a> {
    let app = ctx.app;
    let total = app.data().snapshot.ops.len();
    let mut spans = vec![
        Span::styled(" top ops ", ctx.theme.strong()),
        Span::styled(format!("· {shown}/{total} "), ctx.theme.dim()),
    ];
    if app.mode == Mode::Filter {
        spans.push(Span::styled(format!("/{}▏", app.filter), ctx.theme.key()));
        spans.push(Span::raw(" "));
    } else if !app.filter.is_empty() {
        spans.push(Span::styled(
            format!("filter: {} ", app.filter),
            ctx.theme.key(),
        ));
    }
    Line::from(spans)
}
