//! The top ops table: count, total, mean and p99 per op name, sorted by the chosen column
//! (`▲` ascending: the smallest figure or the first name at the top; `▼` descending; the same
//! in every column, as htop's `△`/`▽`; ←/→ pick it when the table has the focus, `i` inverts)
//! and filtered by `/`.
#![forbid(unsafe_code)]

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row, Table, TableState};
use ratatui::Frame;

use super::{fit_parts, format, more_marker, Ctx, Part};
use crate::profiler::stats::OpSnapshot;
use crate::tui::app::{Focus, Mode, SortColumn};

/// Width of a figure column: `format::nanos` and `format::count` are at most 6 wide, and
/// so are the headings with their arrow (`count▼`).
const FIGURE: usize = 6;
/// The narrowest name column that total, mean and p99 leave (or the longest name, if
/// shorter): past it they go whole.
const MIN_NAME: usize = 12;
/// The narrowest name column that the sort column and the count leave.
const MIN_NAME_KEPT: usize = 5;

/// Draws the ops table into `area`. When the width is short, whole figure columns go (p99,
/// then mean, then total; the sort column and the count stay longest) and names are cut with
/// [`format::fit_name`]: a figure is never cut.
pub(crate) fn draw(frame: &mut Frame<'_>, area: Rect, ctx: &Ctx<'_>) {
    let app = ctx.app;
    let ops = app.visible_ops();
    let block = ctx.block(title(ctx, ops.len(), area.width), Focus::Ops);
    let inner = block.inner(area);
    let longest = ops.iter().map(|op| format::cells(&op.name)).max();
    let columns = shown_columns(app.sort, usize::from(inner.width), longest.unwrap_or(0));
    let name_width = name_width(&columns, usize::from(inner.width));
    let header =
        Row::new(columns.iter().map(|&column| heading(ctx, column))).style(ctx.theme.strong());
    let rows = ops.iter().map(|op| op_row(op, &columns, name_width));
    let widths = columns.iter().map(|&column| match column {
        SortColumn::Name => Constraint::Length(name_width as u16),
        _ => Constraint::Length(FIGURE as u16),
    });
    let table = Table::new(rows, widths)
        .header(header)
        .row_highlight_style(ctx.theme.selected());
    let mut state = TableState::default();
    if app.focus == Focus::Ops && !ops.is_empty() {
        state.select(Some(app.selected_op));
    }
    frame.render_stateful_widget(table, inner, &mut state);
    if let Some(line) = no_match_line(ctx, ops.len(), usize::from(inner.width)) {
        let [_, first_row] =
            Layout::vertical([Constraint::Length(1), Constraint::Length(1)]).areas(inner);
        frame.render_widget(line, first_row);
    }
    let visible = usize::from(inner.height.saturating_sub(1));
    app.shown_rows.ops.set(visible);
    let above = state.offset().min(ops.len());
    let below = ops.len().saturating_sub(above + visible);
    let block = match more_marker(ctx, above, below) {
        Some(marker) => block.title_bottom(marker),
        None => block,
    };
    frame.render_widget(block, area);
}

/// `no op matches "xyz"` in place of the rows, when a filter leaves none (`None` when rows
/// show, or no filter is set: an empty table then means no op has finished yet).
fn no_match_line<'a>(ctx: &Ctx<'a>, shown: usize, width: usize) -> Option<Line<'a>> {
    let filter = &ctx.app.filter;
    if shown > 0 || filter.is_empty() {
        return None;
    }
    let text = format::fit(&format!("no op matches \"{filter}\""), width);
    Some(Line::styled(text, ctx.theme.dim()))
}

/// The columns that fit in `width`, in table order: the name, then figures by importance
/// (the sort column and the count while the name keeps [`MIN_NAME_KEPT`] cells, then total,
/// mean and p99 while it keeps [`MIN_NAME`] or the `longest` name).
fn shown_columns(sort: SortColumn, width: usize, longest: usize) -> Vec<SortColumn> {
    let by_importance = [
        sort,
        SortColumn::Count,
        SortColumn::Total,
        SortColumn::Mean,
        SortColumn::P99,
    ];
    let mut figures: Vec<SortColumn> = Vec::new();
    for column in by_importance {
        if column == SortColumn::Name || figures.contains(&column) {
            continue;
        }
        let kept = column == sort || column == SortColumn::Count;
        let name = if kept {
            MIN_NAME_KEPT
        } else {
            MIN_NAME.min(longest.max(MIN_NAME_KEPT))
        };
        if width < name + (figures.len() + 1) * (FIGURE + 1) {
            break;
        }
        figures.push(column);
    }
    SortColumn::ALL
        .into_iter()
        .filter(|column| *column == SortColumn::Name || figures.contains(column))
        .collect()
}

/// What the figures (and the spaces between columns) leave the name.
fn name_width(columns: &[SortColumn], width: usize) -> usize {
    let figures = columns.len().saturating_sub(1);
    width.saturating_sub(figures * (FIGURE + 1))
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

fn op_row(op: &OpSnapshot, columns: &[SortColumn], name_width: usize) -> Row<'static> {
    let figure = |text: String| Cell::from(Line::from(text).right_aligned());
    Row::new(columns.iter().map(|column| match column {
        SortColumn::Name => Cell::from(format::fit_name(&op.name, name_width)),
        SortColumn::Count => figure(format::count(op.count)),
        SortColumn::Total => figure(format::nanos(op.total_ns as f64)),
        SortColumn::Mean => figure(format::nanos(op.mean_ns)),
        SortColumn::P99 => figure(format::nanos(op.p99_ns as f64)),
    }))
}

/// ` top ops · 12/402 filter: conv `: the count goes first when the width is short; the
/// filter being typed never goes.
fn title<'a>(ctx: &Ctx<'a>, shown: usize, width: u16) -> Line<'a> {
    let app = ctx.app;
    let total = app.data().snapshot.ops.len();
    let mut parts: Vec<Part<'a>> = vec![
        (0, vec![Span::styled(" top ops ", ctx.theme.strong())]),
        (
            2,
            vec![Span::styled(format!("· {shown}/{total} "), ctx.theme.dim())],
        ),
    ];
    if app.mode == Mode::Filter {
        parts.push((
            0,
            vec![
                Span::styled(format!("/{}▏", app.filter), ctx.theme.key()),
                Span::raw(" "),
            ],
        ));
    } else if !app.filter.is_empty() {
        let filter = format!("filter: {} ", app.filter);
        parts.push((1, vec![Span::styled(filter, ctx.theme.key())]));
    }
    fit_parts(parts, usize::from(width.saturating_sub(2)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::app::{Action, App};
    use crate::tui::source::DashboardData;
    use crate::tui::theme::Theme;
    use crate::tui::view::tests::render;

    /// resnet-like's ops: long names that differ only at their end, figures of every width.
    fn resnet_ops() -> App {
        let op = |name: &str, count: u64, total_ns: u64, mean_ns: f64, p99_ns: u64| OpSnapshot {
            name: name.into(),
            count,
            errors: 0,
            total_ns,
            min_ns: 1,
            max_ns: p99_ns,
            mean_ns,
            p50_ns: 1,
            p99_ns,
        };
        let mut data = DashboardData::default();
        data.snapshot.ops = vec![
            op("s4b0_conv2", 68, 415_000_000, 6_110_000.0, 12_500_000),
            op(
                "s4b0_conv2_grad_in",
                51,
                319_000_000,
                6_250_000.0,
                15_500_000,
            ),
            op("stem_conv_grad_w", 23, 94_100_000, 4_090_000.0, 12_700_000),
            op("iteration_boundary", 12_345, 1_230_000, 99.0, 812),
        ];
        let mut app = App::new();
        app.observe(data);
        app
    }

    fn table(app: &App, width: u16, height: u16) -> String {
        render(width, height, |frame, area| {
            draw(frame, area, &Ctx::new(app, Theme::plain()))
        })
    }

    #[test]
    fn a_narrow_table_drops_whole_columns_and_never_cuts_a_figure() {
        let app = resnet_ops();
        for width in [24, 30, 35, 40, 48, 60, 80] {
            let text = table(&app, width, 8);
            let rows: Vec<&str> = text.lines().collect();
            for figure in ["6.11ms", "415ms", "12.5ms", "68"] {
                let column = match figure {
                    "6.11ms" => "mean",
                    "12.5ms" => "p99",
                    _ => "",
                };
                // A column is whole or gone: its heading and its figure both or neither.
                if column.is_empty() || rows[1].contains(column) {
                    assert!(rows[2].contains(&format!(" {figure}")), "{width}:\n{text}");
                }
            }
            let headings = rows[1].trim_matches('│').split_whitespace();
            for heading in headings {
                assert!(
                    ["op", "count", "total▼", "mean", "p99"].contains(&heading),
                    "heading {heading:?} cut at {width}:\n{text}"
                );
            }
            assert!(
                rows[1].contains("count") && rows[1].contains("total▼"),
                "{text}"
            );
        }
        let narrow = table(&app, 35, 8);
        assert!(!narrow.contains("p99"), "p99 goes first:\n{narrow}");
        let wide = table(&app, 60, 8);
        assert!(wide.contains("p99") && wide.contains("mean"), "{wide}");
    }

    #[test]
    fn short_names_leave_room_for_every_column() {
        let mut data = resnet_ops().data().clone();
        for (op, name) in data
            .snapshot
            .ops
            .iter_mut()
            .zip(["conv", "relu", "add", "fc"])
        {
            op.name = name.into();
        }
        let mut app = App::new();
        app.observe(data);
        let text = table(&app, 37, 8);
        assert!(text.contains("p99") && text.contains("12.5ms"), "{text}");
        assert!(!table(&resnet_ops(), 37, 8).contains("p99"));
    }

    #[test]
    fn the_sort_column_stays_longest() {
        let mut app = resnet_ops();
        app.update(Action::FocusNext);
        app.update(Action::FocusNext);
        app.update(Action::Right);
        app.update(Action::Right); // p99
        let text = table(&app, 30, 8);
        assert!(text.contains("p99▼") && text.contains("count"), "{text}");
        assert!(!text.contains("total") && !text.contains("mean"), "{text}");
    }

    #[test]
    fn cut_names_end_in_an_ellipsis_and_keep_their_end() {
        let app = resnet_ops();
        let text = table(&app, 40, 8);
        assert!(text.contains("s4b0_…nv2_grad_in"), "{text}");
        assert!(text.contains("s4b0_conv2 "), "{text}");
        assert!(!text.contains("s4b0_conv_"), "{text}");
    }

    #[test]
    fn rows_below_the_table_are_counted_in_its_border() {
        let app = resnet_ops();
        let text = table(&app, 60, 5);
        let bottom = text.lines().last().unwrap();
        assert!(bottom.contains("↓ 2 more"), "{text}");
        let all = table(&app, 60, 8);
        assert!(!all.contains("more"), "{all}");
    }

    /// The first figure or name under the heading of the sort column, in every row.
    fn column_order(app: &App) -> Vec<String> {
        app.visible_ops()
            .iter()
            .map(|op| match app.sort {
                SortColumn::Name => op.name.clone(),
                SortColumn::Count => format!("{:020}", op.count),
                SortColumn::Total => format!("{:020}", op.total_ns),
                SortColumn::Mean => format!("{:020.3}", op.mean_ns),
                SortColumn::P99 => format!("{:020}", op.p99_ns),
            })
            .collect()
    }

    /// `▲` means the values grow down the table and `▼` that they shrink, in the name column
    /// as in the figures; each column starts in its natural order (names A to Z, figures
    /// largest first), and `i` turns the order and the arrow over together.
    #[test]
    fn the_sort_arrow_means_the_same_in_every_column() {
        let mut app = resnet_ops();
        app.update(crate::tui::app::Action::FocusPrev); // the ops table
        for _ in SortColumn::ALL {
            app.update(crate::tui::app::Action::Right);
            for inverted in [false, true] {
                let order = column_order(&app);
                let mut ascending = order.clone();
                ascending.sort();
                let heading = app.sort.heading();
                let text = table(&app, 80, 10);
                let arrow = match order == ascending {
                    true => "▲",
                    false => {
                        ascending.reverse();
                        assert_eq!(order, ascending, "{heading} is not sorted:\n{text}");
                        "▼"
                    }
                };
                assert!(
                    text.contains(&format!("{heading}{arrow}")),
                    "{heading}: rows {order:?}, expected {arrow}:\n{text}"
                );
                assert_eq!(app.ascending, arrow == "▲", "{heading}");
                let natural = app.sort == SortColumn::Name; // names A to Z, figures largest first
                assert_eq!(app.ascending, natural != inverted, "{heading}");
                app.update(crate::tui::app::Action::InvertSort);
            }
            app.update(crate::tui::app::Action::InvertSort); // back to the natural order
        }
        app.update(crate::tui::app::Action::Left); // p99, fresh: largest first
        assert!(!app.ascending);
        while app.sort != SortColumn::Name {
            app.update(crate::tui::app::Action::Right);
        }
        assert!(app.ascending, "names start A to Z");
        assert!(table(&app, 80, 10).contains("op▲"));
    }

    /// Ops named in wide characters, apart only at their end.
    fn wide_ops() -> App {
        let mut data = resnet_ops().data().clone();
        for (index, op) in data.snapshot.ops.iter_mut().enumerate() {
            op.name = format!("卷积层反向传播梯度计算_非常长的名字_{}", 104 + index);
        }
        let mut app = App::new();
        app.observe(data);
        app
    }

    #[test]
    fn wide_names_are_cut_in_cells_with_an_ellipsis_and_their_true_end() {
        let app = wide_ops();
        for width in [30, 40, 60] {
            let text = table(&app, width, 8);
            let rows: Vec<&str> = text.lines().skip(2).take(4).collect();
            for row in &rows {
                assert_eq!(row.chars().count(), usize::from(width), "{width}:\n{text}");
                assert!(
                    row.contains('…'),
                    "{width}: cut without an ellipsis:\n{text}"
                );
            }
            for end in ["_104", "_105", "_106", "_107"] {
                assert!(text.contains(&format!("{end} ")), "{width}: {end}:\n{text}");
            }
            assert!(text.contains("total▼") && text.contains("415ms"), "{text}");
        }
    }

    #[test]
    fn a_filter_that_matches_nothing_says_so() {
        let mut app = resnet_ops();
        app.update(Action::StartFilter);
        for c in "xyz".chars() {
            app.update(Action::FilterChar(c));
        }
        let text = table(&app, 40, 8);
        assert!(text.contains("no op matches \"xyz\""), "{text}");
        app.update(Action::FilterBackspace);
        app.update(Action::FilterBackspace);
        app.update(Action::FilterBackspace);
        app.update(Action::FilterChar('c'));
        assert!(!table(&app, 40, 8).contains("no op matches"));
        assert!(!table(&App::new(), 40, 8).contains("no op matches"));
    }
}
