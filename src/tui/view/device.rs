//! Device panels. A CPU device (or the intra-op pool) shows one row per worker: the state
//! glyph, the thread, its current op, a utilization bar (share of the window running), steals
//! (`st`) and the depth of its own queue (`q`); its priority pool's workers follow. A GPU
//! shows one occupancy gauge per compute and copy stream, named as the trace's stream track
//! and after the worker thread that feeds it, as the timeline names that worker's row
//! (`stream h2d1 (gpu0-copy-1)`), then a row for each
//! GPU worker that has fed no stream yet (`gpu0-prio-0  no stream used yet`). The title
//! carries the inter-op count (a GPU: its workers by role), the throughput (once the run
//! finished, its average over the run, as the header's `run avg`, and the pool's busy share
//! over the run, the summary's) and the total queue depth, dropping the least important
//! whole when the width is short (the settings last). The bottom border has a GPU's model
//! and counts the rows out of sight (`↓ 5 more`).
//!
//! The wide layout stacks every panel (panels that do not fit collapse to a summary row);
//! the compact one shows the selected panel with every device's name as tabs in its title.
#![forbid(unsafe_code)]

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Paragraph};
use ratatui::Frame;

use super::{first_shown, fit_parts, format, more_marker, Ctx, Part};
use crate::profiler::stats::WorkerSnapshot;
use crate::tui::app::Focus;
use crate::tui::panels::{DevicePanel, PoolPanel, StreamPanel};
use crate::tui::source::DeviceKind;
use crate::tui::theme::state_glyph;
use crate::workload::run::{plural, worker_count};

/// Rows a panel collapsed to its summary takes (borders included).
const COLLAPSED: u16 = 3;

/// Rows the selected panel would like (borders included).
pub(crate) fn wanted_height(ctx: &Ctx<'_>) -> u16 {
    ctx.panels
        .get(ctx.app.selected_device)
        .map_or(COLLAPSED, |panel| panel.row_count() as u16 + 2)
}

/// Rows every panel would like, stacked (borders included).
pub(crate) fn stack_height(ctx: &Ctx<'_>) -> u16 {
    ctx.panels
        .iter()
        .map(|panel| panel.row_count() as u16 + 2)
        .sum::<u16>()
        .max(COLLAPSED)
}

/// Draws every panel, stacked, into `area`.
pub(crate) fn draw_stack(frame: &mut Frame<'_>, area: Rect, ctx: &Ctx<'_>) {
    if ctx.panels.is_empty() {
        let block = ctx.block(Line::from(" devices "), Focus::Devices);
        let text = Paragraph::new("  waiting for the first worker events…").block(block);
        frame.render_widget(text, area);
        return;
    }
    let heights = stack_heights(ctx, area.height);
    let constraints = heights.iter().map(|&h| Constraint::Length(h));
    let areas = Layout::vertical(constraints).split(area);
    for (index, (panel, &panel_area)) in ctx.panels.iter().zip(areas.iter()).enumerate() {
        let selected = index == ctx.app.selected_device;
        let title = title_line(ctx, panel, selected, panel_area.width);
        draw_panel(frame, panel_area, ctx, panel, title, selected);
    }
}

/// Each panel's height: all rows if they fit, else every panel but the selected one
/// collapsed, and the selected one gets what is left.
fn stack_heights(ctx: &Ctx<'_>, available: u16) -> Vec<u16> {
    let full: Vec<u16> = ctx
        .panels
        .iter()
        .map(|panel| panel.row_count() as u16 + 2)
        .collect();
    if full.iter().sum::<u16>() <= available {
        return full;
    }
    let selected = ctx.app.selected_device;
    let others = COLLAPSED * (full.len() as u16 - 1);
    let rest = available.saturating_sub(others).max(COLLAPSED);
    (0..full.len())
        .map(|index| {
            if index == selected {
                rest.min(full[index])
            } else {
                COLLAPSED
            }
        })
        .collect()
}

/// Draws the selected panel into `area`, with every device's name as a tab in its title.
pub(crate) fn draw_selected(frame: &mut Frame<'_>, area: Rect, ctx: &Ctx<'_>) {
    let Some(panel) = ctx.panels.get(ctx.app.selected_device) else {
        return draw_stack(frame, area, ctx);
    };
    let mut parts = tabs(ctx);
    parts.extend(title_figures(ctx, panel));
    let title = fit_parts(parts, title_width(area.width));
    draw_panel(frame, area, ctx, panel, title, true);
}

/// The cells a title has in a bordered block `width` wide.
fn title_width(width: u16) -> usize {
    usize::from(width.saturating_sub(2))
}

/// Every device's name as a tab; the other devices' go before the selected one's settings.
fn tabs<'a>(ctx: &Ctx<'a>) -> Vec<Part<'a>> {
    let mut parts = vec![(0, vec![Span::raw(" ")])];
    for (index, panel) in ctx.panels.iter().enumerate() {
        let mut spans = Vec::new();
        if index > 0 {
            spans.push(Span::styled("│", ctx.theme.dim()));
        }
        let name = format!(" {} ", panel.title());
        let selected = index == ctx.app.selected_device;
        if selected {
            spans.push(Span::styled(name, ctx.theme.selected()));
        } else {
            spans.push(Span::styled(name, ctx.theme.dim()));
        }
        parts.push((if selected { 0 } else { 3 }, spans));
    }
    parts
}

fn title_line<'a>(ctx: &Ctx<'a>, panel: &DevicePanel<'a>, selected: bool, width: u16) -> Line<'a> {
    let marker = if selected { " ▸ " } else { " " };
    let mut parts = vec![(
        0,
        vec![
            Span::raw(marker),
            Span::styled(panel.title().to_string(), ctx.theme.strong()),
        ],
    )];
    parts.extend(title_figures(ctx, panel));
    fit_parts(parts, title_width(width))
}

/// ` · inter 4 · 912 ops/s · queue 7 ` (or a GPU's workers by role), each part with how
/// readily it goes: the worker counts first, the throughput, the queue, and the settings
/// last. A GPU's model goes in the bottom border.
fn title_figures<'a>(ctx: &Ctx<'a>, panel: &DevicePanel<'a>) -> Vec<Part<'a>> {
    let dim = ctx.theme.dim();
    let mut parts = Vec::new();
    match panel.layout.kind {
        DeviceKind::Gpu => match panel.layout.gpu_workers {
            Some(roles) => parts.push((5, roles.to_string())),
            None => {
                let streams = panel.streams.len();
                parts.push((5, format!("{streams} stream{}", plural(streams as u64))));
            }
        },
        DeviceKind::IntraOp => {
            let threads = panel.pool.workers.len();
            parts.push((1, format!("{threads} thread{}", plural(threads as u64))));
        }
        DeviceKind::Cpu => match panel.layout.inter_op {
            Some(inter) => parts.push((1, format!("inter {inter}"))),
            None => {
                let workers = panel.pool.workers.len();
                parts.push((1, format!("{workers} worker{}", plural(workers as u64))));
            }
        },
    }
    if let Some(usage) = run_usage(ctx, panel) {
        parts.push((3, usage));
    }
    parts.push((4, throughput(ctx, panel)));
    let queued = panel.pool.queue_depth() + panel.priority.as_ref().map_or(0, |p| p.queue_depth());
    parts.push((2, format!("queue {queued}")));
    let mut parts: Vec<Part<'a>> = parts
        .into_iter()
        .map(|(priority, text)| (priority, vec![Span::styled(" · ", dim), Span::raw(text)]))
        .collect();
    parts.push((0, vec![Span::raw(" ")]));
    parts
}

/// `busy 51.6% of 2.6 workers over the run` once the run finished: the summary's figure for
/// the panel's pool, time-weighted over the thread counts it had.
fn run_usage(ctx: &Ctx<'_>, panel: &DevicePanel<'_>) -> Option<String> {
    if !ctx.app.is_finished() {
        return None;
    }
    let facts = &ctx.app.data().facts;
    let usage = facts
        .pool_usage
        .iter()
        .find(|usage| usage.device == panel.layout.workers)?;
    Some(format!(
        "busy {:.1}% of {} workers over the run",
        usage.busy * 100.0,
        worker_count(usage.workers)
    ))
}

/// `912 ops/s` over the window while the run goes; once it finished, `avg 845 ops/s` over
/// the whole run (or since the last reset), as the header's `run avg` is. The intra-op pool
/// counts tasks (the ops' parallel_for pieces), not ops.
fn throughput(ctx: &Ctx<'_>, panel: &DevicePanel<'_>) -> String {
    let pool = &panel.pool;
    let (window_rate, count, unit) = match panel.layout.kind {
        DeviceKind::IntraOp => (pool.tasks_per_s(), pool.tasks(), "tasks/s"),
        _ => (pool.ops_per_s(), pool.ops(), "ops/s"),
    };
    match ctx.app.run_average(count) {
        Some(run_rate) => format!("avg {} {unit}", format::quantity(run_rate)),
        None => format!("{} {unit}", format::quantity(window_rate)),
    }
}

fn draw_panel<'a>(
    frame: &mut Frame<'_>,
    area: Rect,
    ctx: &Ctx<'a>,
    panel: &DevicePanel<'a>,
    title: Line<'a>,
    selected: bool,
) {
    let focused = selected && ctx.app.focus == Focus::Devices;
    let border = if focused {
        ctx.theme.focused_border()
    } else {
        ctx.theme.border()
    };
    let mut block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .border_style(border)
        .title(title);
    if let Some(model) = &panel.layout.model {
        block = block.title_bottom(Line::styled(format!(" {model} "), ctx.theme.dim()));
    }
    let inner = block.inner(area);
    let width = usize::from(inner.width);
    let lines = if inner.height == 1 && panel.row_count() > 1 {
        vec![summary_line(ctx, panel)]
    } else {
        let lines = panel_lines(ctx, panel, width);
        let visible = usize::from(inner.height);
        let scroll = if selected {
            ctx.app.shown_rows.devices.set(visible);
            ctx.app.device_scroll
        } else {
            0
        };
        let skip = first_shown(scroll, lines.len(), visible);
        let below = lines.len().saturating_sub(skip + visible);
        if let Some(marker) = more_marker(ctx, skip, below) {
            block = block.title_bottom(marker);
        }
        lines.into_iter().skip(skip).collect()
    };
    frame.render_widget(block, area);
    frame.render_widget(Paragraph::new(lines), inner);
}

fn panel_lines<'a>(ctx: &Ctx<'a>, panel: &DevicePanel<'a>, width: usize) -> Vec<Line<'a>> {
    let label_width = panel.streams.iter().map(|s| format::cells(&s.label)).max();
    if let Some(label_width) = label_width {
        let label_width = label_width.min(width * 2 / 5);
        let mut lines: Vec<Line<'a>> = panel
            .streams
            .iter()
            .map(|stream| stream_line(ctx, stream, label_width, width))
            .collect();
        lines.extend(
            panel
                .workers_without_stream()
                .map(|worker| streamless_line(ctx, &worker.name, label_width)),
        );
        return lines;
    }
    let columns = Columns::for_width(width, panel);
    let mut lines: Vec<Line<'a>> = panel
        .pool
        .workers
        .iter()
        .map(|worker| worker_line(ctx, worker, &panel.pool, &columns))
        .collect();
    if let Some(priority) = &panel.priority {
        lines.extend(
            priority
                .workers
                .iter()
                .map(|worker| worker_line(ctx, worker, priority, &columns)),
        );
    }
    if lines.is_empty() {
        lines.push(Line::styled("  no workers seen yet", ctx.theme.dim()));
    }
    lines
}

/// How busy `worker` was: over the window while the run goes, over the whole run (or since
/// the last reset) once it has finished, as the header's `run avg` figures are.
fn running_share(ctx: &Ctx<'_>, worker: &WorkerSnapshot) -> f64 {
    if ctx.app.is_finished() {
        worker.shares_since_start.running
    } else {
        worker.shares.running
    }
}

/// One row for a collapsed panel: how many workers, how busy, how much is queued.
fn summary_line<'a>(ctx: &Ctx<'a>, panel: &DevicePanel<'a>) -> Line<'a> {
    let workers: Vec<&WorkerSnapshot> = panel.all_workers().collect();
    let busy =
        workers.iter().map(|w| running_share(ctx, w)).sum::<f64>() / workers.len().max(1) as f64;
    let glyphs: String = workers
        .iter()
        .take(32)
        .map(|w| state_glyph(w.activity))
        .collect();
    Line::from(vec![
        Span::raw(format!(" {glyphs} ")),
        Span::styled(format!("{} busy", format::percent(busy)), ctx.theme.dim()),
    ])
}

/// Column widths of the worker rows at one panel width.
struct Columns {
    name: usize,
    op: usize,
    bar: usize,
}

impl Columns {
    /// Glyph, spaces, ` 100%`, ` st 12345`, `  q 123`.
    const FIXED: usize = 2 + 1 + 5 + 9 + 7;

    fn for_width(width: usize, panel: &DevicePanel<'_>) -> Columns {
        let longest = panel.all_workers().map(|w| format::cells(&w.name)).max();
        let name = longest.unwrap_or(6).clamp(4, 14);
        // The op column gets a third of what is left past a 10-cell bar (12 to 24 cells),
        // or nothing when that is under 12; names longer than it end in `…`.
        let room = width.saturating_sub(Self::FIXED + name + 1 + 10);
        let op = if room >= 12 {
            (room / 3).clamp(12, 24)
        } else {
            0
        };
        let bar = width.saturating_sub(Self::FIXED + name + op + usize::from(op > 0));
        Columns { name, op, bar }
    }
}

fn worker_line<'a>(
    ctx: &Ctx<'a>,
    worker: &WorkerSnapshot,
    pool: &PoolPanel<'a>,
    columns: &Columns,
) -> Line<'a> {
    let theme = ctx.theme;
    let style = theme.activity(worker.activity);
    let mut spans = vec![
        Span::styled(format!("{} ", state_glyph(worker.activity)), style),
        Span::raw(format!(
            "{} ",
            format::pad_right(&format::fit_name(&worker.name, columns.name), columns.name)
        )),
    ];
    if columns.op > 0 {
        let op = worker.current_op.as_deref().unwrap_or("");
        spans.push(Span::styled(
            format!(
                "{} ",
                format::pad_right(&format::fit_name(op, columns.op), columns.op)
            ),
            style,
        ));
    }
    let running = running_share(ctx, worker);
    let (filled, empty) = format::bar(running, columns.bar);
    spans.push(Span::styled(filled, theme.bar()));
    spans.push(Span::raw(empty));
    spans.push(Span::raw(format!(" {}", format::percent(running))));
    spans.push(Span::styled(" st ", theme.dim()));
    spans.push(Span::raw(format!("{:>5}", format::count(worker.steals))));
    spans.push(Span::styled("  q ", theme.dim()));
    let queue = pool.queue_of(worker.worker);
    spans.push(Span::raw(queue.map_or("-".into(), |q| format!("{q:<3}"))));
    Line::from(spans)
}

/// `  gpu0-prio-0    no stream used yet`.
fn streamless_line<'a>(ctx: &Ctx<'a>, name: &str, label_width: usize) -> Line<'a> {
    let name = format::fit_name(name, label_width);
    Line::styled(
        format!(
            "  {} no stream used yet",
            format::pad_right(&name, label_width)
        ),
        ctx.theme.dim(),
    )
}

/// One stream: its name (`label_width` wide: the stream and the worker feeding it, or the
/// stream alone where both do not fit), occupancy gauge and kernels finished.
fn stream_line<'a>(
    ctx: &Ctx<'a>,
    stream: &StreamPanel<'a>,
    label_width: usize,
    width: usize,
) -> Line<'a> {
    let theme = ctx.theme;
    let name = if format::cells(&stream.label) <= label_width {
        stream.label.clone()
    } else {
        format::fit_name(&stream.layout.stream_label(), label_width)
    };
    let label = format!("  {} ", format::pad_right(&name, label_width));
    let (occupancy, ops) = stream.stats.map_or((0.0, 0), |s| (s.occupancy, s.ops));
    let ops = format!("  {:>6} ops", format::count(ops));
    let bar_width = width.saturating_sub(format::cells(&label) + 5 + format::cells(&ops));
    let (filled, empty) = format::bar(occupancy, bar_width);
    Line::from(vec![
        Span::styled(label, theme.dim()),
        Span::styled(filled, theme.bar()),
        Span::raw(empty),
        Span::raw(format!(" {}", format::percent(occupancy))),
        Span::styled(ops, theme.dim()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::app::{Action, App};
    use crate::tui::fake::FakeOptions;
    use crate::tui::theme::Theme;
    use crate::tui::view::tests::{app_after, render};

    fn selected_panel(app: &App, width: u16, height: u16) -> String {
        render(width, height, |frame, area| {
            draw_selected(frame, area, &Ctx::new(app, Theme::plain()))
        })
    }

    fn stacked(app: &App, width: u16, height: u16) -> String {
        render(width, height, |frame, area| {
            draw_stack(frame, area, &Ctx::new(app, Theme::plain()))
        })
    }

    /// Eight inter-op workers and a priority worker: 9 rows.
    fn nine_rows() -> App {
        let options = FakeOptions {
            inter_op: 8,
            ..FakeOptions::default()
        };
        app_after(options, 10)
    }

    #[test]
    fn hidden_worker_rows_are_counted_in_the_bottom_border() {
        let app = nine_rows();
        let text = selected_panel(&app, 80, 9);
        let bottom = text.lines().last().unwrap();
        assert!(bottom.contains("↓ 2 more"), "{text}");
        let all = selected_panel(&app, 80, 11);
        assert!(!all.contains("more"), "{all}");
    }

    #[test]
    fn a_wide_op_name_keeps_its_column_and_the_row_its_steals_and_queue() {
        let mut data = nine_rows().data().clone();
        for (index, worker) in data.snapshot.workers.iter_mut().enumerate() {
            worker.current_op = Some(format!("卷积层反向传播梯度计算_非常长的名字_{index}"));
            worker.steals = 8;
        }
        let mut app = App::new();
        app.observe(data);
        for width in [80, 120, 160] {
            let text = selected_panel(&app, width, 12);
            let rows: Vec<&str> = text.lines().filter(|l| l.contains("-w")).collect();
            assert!(!rows.is_empty(), "{text}");
            let bar_ends: Vec<usize> = rows
                .iter()
                .map(|row| {
                    let bytes = row.find(" st ").expect("the steals column shows");
                    row[..bytes].chars().count() // a buffer cell is one char
                })
                .collect();
            for row in &rows {
                assert!(
                    row.contains("st     8") && row.contains("  q "),
                    "{width}:\n{text}"
                );
                assert!(row.ends_with('│'), "{width}:\n{text}");
            }
            assert!(
                bar_ends.windows(2).all(|w| w[0] == w[1]),
                "{width}: columns line up:\n{text}"
            );
            assert!(text.contains('…'), "{width}: the op is cut:\n{text}");
        }
    }

    #[test]
    fn a_finished_run_shows_how_busy_each_worker_was_over_the_run() {
        let mut data = app_after(FakeOptions::default(), 10).data().clone();
        for worker in &mut data.snapshot.workers {
            worker.shares.running = 0.2; // the last window: the run winding down
            worker.shares_since_start.running = 0.9;
        }
        let row_of_w0 = |finished: bool| {
            let mut data = data.clone();
            data.facts.finished = finished;
            let mut app = App::new();
            app.observe(data);
            let text = selected_panel(&app, 100, 12);
            text.lines()
                .find(|l| l.contains("cpu0-w0"))
                .unwrap()
                .to_string()
        };
        assert!(row_of_w0(false).contains(" 20%"), "{}", row_of_w0(false));
        assert!(row_of_w0(true).contains(" 90%"), "{}", row_of_w0(true));
    }

    #[test]
    fn a_finished_runs_titles_show_each_devices_run_average() {
        let mut data = app_after(FakeOptions::default(), 10).data().clone();
        data.facts.elapsed = std::time::Duration::from_secs(4);
        for device in &mut data.snapshot.devices {
            device.ops_per_s = 2066.0; // the last window: the run winding down
            device.ops = 9148; // 2287 ops/s over the 4 s run
            device.tasks_per_s = 1000.0;
            device.tasks = 6000;
        }
        let titles = |finished: bool| {
            let mut data = data.clone();
            data.facts.finished = finished;
            let mut app = App::new();
            app.observe(data);
            let text = stacked(&app, 120, 40);
            let title_of = |name: &str| {
                let title = text.lines().find(|l| l.contains(&format!(" {name} ")));
                title
                    .unwrap_or_else(|| panic!("{name}: {text}"))
                    .to_string()
            };
            [title_of("cpu0"), title_of("gpu0"), title_of("intra-op")]
        };
        let [cpu, gpu, intra] = titles(false);
        assert!(cpu.contains("· 2066 ops/s"), "{cpu}");
        assert!(gpu.contains("· 2066 ops/s"), "{gpu}");
        assert!(intra.contains("· 1000 tasks/s"), "{intra}");
        let [cpu, gpu, intra] = titles(true);
        assert!(
            cpu.contains("· avg 2287 ops/s") && !cpu.contains("2066"),
            "{cpu}"
        );
        assert!(gpu.contains("· avg 2287 ops/s"), "{gpu}");
        assert!(intra.contains("· avg 1500 tasks/s"), "{intra}");
    }

    #[test]
    fn after_the_last_row_one_up_scrolls_at_once() {
        let mut app = nine_rows();
        selected_panel(&app, 80, 9); // 7 rows shown
        app.update(Action::Bottom);
        assert_eq!(app.device_scroll, 2, "the last row at the bottom");
        app.update(Action::Up);
        let text = selected_panel(&app, 80, 9);
        let rows: Vec<&str> = text.lines().collect();
        assert!(rows[1].contains("cpu0-w1"), "{text}");
    }

    #[test]
    fn the_last_row_scrolled_to_leaves_no_blank_rows() {
        let mut app = nine_rows();
        app.update(Action::Bottom);
        let text = selected_panel(&app, 80, 9);
        let rows: Vec<&str> = text.lines().collect();
        assert!(rows[1].contains("cpu0-w2"), "{text}");
        assert!(rows[7].contains("cpu0-prio-0"), "{text}");
        assert!(
            rows[8].contains("↑ 2 above") && !rows[8].contains("more"),
            "{text}"
        );
    }

    #[test]
    fn titles_drop_whole_parts_and_keep_the_device_and_its_queue() {
        let model = "simulated: 1000 GFLOP/s, 200.0 GB/s, copies 0.55 GB/s, launch 5 µs";
        let mut data = app_after(FakeOptions::default(), 10).data().clone();
        let gpu = data.devices.iter_mut().find(|d| d.title == "gpu0").unwrap();
        gpu.model = Some(model.into());
        let mut app = App::new();
        app.observe(data);
        app.update(Action::Right);
        app.update(Action::Right);
        for width in [60, 80, 89, 120, 200] {
            for text in [stacked(&app, width, 30), selected_panel(&app, width, 8)] {
                let title = text.lines().find(|l| l.contains("gpu0")).unwrap();
                assert!(title.contains("queue"), "{width}: {title}");
                assert!(!title.contains("simulated"), "{width}: {title}");
                assert!(
                    title.contains("2 compute, 1 copy, 0 prio workers")
                        || !title.contains("compute"),
                    "{width}: {title}"
                );
                assert!(
                    title.contains("─╮"),
                    "the title ends before the corner: {title}"
                );
            }
        }
        // At 200 columns nothing of the GPU's title is cut, and its model is in the
        // bottom border.
        let text = stacked(&app, 200, 30);
        let title = text.lines().find(|l| l.contains("gpu0")).unwrap();
        assert!(
            title.contains("2 compute, 1 copy, 0 prio workers") && !title.contains('…'),
            "{title}"
        );
        assert!(
            text.lines().any(|l| l.contains(model) && l.contains('╰')),
            "{text}"
        );
    }

    #[test]
    fn the_intra_op_pool_counts_tasks_not_ops() {
        let mut app = app_after(FakeOptions::default(), 10);
        while !app.data().devices[app.selected_device]
            .title
            .contains("intra")
        {
            app.update(Action::Right);
        }
        let text = selected_panel(&app, 120, 8);
        let title = text.lines().find(|l| l.contains("intra-op")).unwrap();
        assert!(
            title.contains("tasks/s") && !title.contains("ops/s"),
            "{title}"
        );
    }

    /// A GPU panel lists more rows than it has workers (a copy worker feeds two streams):
    /// scrolling reaches its last row.
    #[test]
    fn a_short_gpu_panel_scrolls_to_its_last_stream() {
        let mut app = app_after(FakeOptions::default(), 10);
        while app.data().devices[app.selected_device].title != "gpu0" {
            app.update(Action::Right);
        }
        selected_panel(&app, 100, 5); // 3 rows shown
        app.update(Action::Bottom);
        let text = selected_panel(&app, 100, 5);
        let rows: Vec<&str> = text.lines().collect();
        assert!(rows[3].contains("stream d2h0 (gpu0-copy-0)"), "{text}");
        assert!(
            rows[4].contains("above") && !rows[4].contains("more"),
            "{text}"
        );
    }

    /// The GPU panel lists every GPU worker the timeline has a row for: the prioritized
    /// worker, which has no stream until its first op, shows as such.
    #[test]
    fn a_gpu_worker_without_a_stream_still_has_a_row() {
        let mut app = app_after(FakeOptions::default(), 10);
        let mut data = app.data().clone();
        let gpu = data.devices.iter().position(|d| d.title == "gpu0").unwrap();
        let template = data
            .snapshot
            .workers
            .iter()
            .find(|w| w.name == "gpu0-compute-0")
            .unwrap()
            .clone();
        let mut prio = template;
        prio.name = "gpu0-prio-0".into();
        prio.role = Some(crate::device::identity::PoolRole::GpuPriority);
        prio.worker = Some(0);
        prio.thread = 9999;
        data.snapshot.workers.push(prio);
        app = App::new();
        app.observe(data);
        for _ in 0..gpu {
            app.update(Action::Right);
        }
        let text = selected_panel(&app, 100, 14);
        assert!(text.contains("gpu0-prio-0"), "{text}");
        assert!(text.contains("no stream used yet"), "{text}");
    }
}
