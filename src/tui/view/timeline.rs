//! The per-worker timeline: a Gantt of the last seconds, one row per worker (every panel's,
//! in panel order), newest on the right. The time axis is honest: a column is a fixed span
//! of time ([`App::column_span`], 100 ms to 1.6 s), the last one ending at the newest frame,
//! and each frame's sample goes in the column its timestamp (the profiler's clock) falls in,
//! so frames that come late under load do not stretch the axis. A cell shows the state the
//! worker was seen in most often in its column (`█` running, `▒` stealing, `░` spinning,
//! `·` parked); a column no frame fell in (a late frame) shows the last state seen before
//! it, for up to [`HOLD`], then stays blank. `>` / `<` zoom in and out. Labels are cut with
//! [`format::fit_name`]; rows out of sight are counted in the bottom border. A column whose
//! samples follow a change of the thread counts (by hand or by the tuner) is a `│` down every
//! row, and the legend names it while one is in view.
//!
//!
//! A column finer than the frame period shows op spans instead ([`op_spans`](super::op_spans)):
//! each op on the row of the thread that ran it, named where it is wide enough, the
//! cursor's op marked. The view pans through the retained history; with the timeline
//! focused, the cursor's row is highlighted (see
//! [`timeline_nav`](crate::tui::timeline_nav)).
//!
//! [`App::column_span`]: crate::tui::app::App::column_span
#![forbid(unsafe_code)]

use std::time::Duration;

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::sparklines::RESIZE_GLYPH;
use super::{first_shown, fit_parts, format, more_marker, Ctx, Part};
use crate::profiler::stats::{Activity, WorkerSnapshot};
use crate::tui::app::Focus;
use crate::tui::history::{History, Sample};
use crate::tui::theme::{timeline_glyph, LEGEND};
use crate::tui::timeline_nav::NavRow;

/// How long a state stays shown after the sample that saw it when no later sample comes
/// (frames that came late); past it the cells stay blank.
pub(crate) const HOLD: Duration = Duration::from_secs(1);

/// Rows the timeline would like (borders, legend and one per worker).
pub(crate) fn wanted_height(ctx: &Ctx<'_>) -> u16 {
    let rows: usize = ctx.panels.iter().map(|p| p.all_workers().count()).sum();
    rows as u16 + 3
}

/// Draws the timeline into `area`.
pub(crate) fn draw(frame: &mut Frame<'_>, area: Rect, ctx: &Ctx<'_>) {
    let workers: Vec<&WorkerSnapshot> = ctx.panels.iter().flat_map(|p| p.all_workers()).collect();
    let label_width = workers
        .iter()
        .map(|w| format::cells(&w.name))
        .max()
        .unwrap_or(4)
        .clamp(4, 14);
    let columns = usize::from(area.width.saturating_sub(2)).saturating_sub(label_width + 1);
    ctx.app.timeline.columns.set(columns);
    let visible = usize::from(area.height.saturating_sub(3));
    ctx.app.shown_rows.timeline.set(visible);
    let skip = first_shown(ctx.app.timeline_scroll, workers.len(), visible);
    let below = workers.len().saturating_sub(skip + visible);
    let rows: Vec<NavRow> = workers
        .iter()
        .map(|w| NavRow {
            thread: w.thread,
            name: w.name.clone(),
        })
        .collect();
    let shown = Shown {
        workers: &workers,
        label_width,
        columns,
        skip,
        visible,
        width: usize::from(area.width.saturating_sub(2)),
    };
    let nav_frame = ctx.app.nav_frame(&rows);
    let (title, lines) = match ctx.app.timeline.shows_spans() {
        true => super::op_spans::content(ctx, &nav_frame, &shown),
        false => sampled(ctx, &nav_frame, &shown),
    };
    let mut block = ctx.block(title, Focus::Timeline);
    if let Some(marker) = more_marker(ctx, skip, below) {
        block = block.title_bottom(marker);
    }
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

/// The rows in view and how wide things are.
pub(super) struct Shown<'a, 'w> {
    /// Every row's worker.
    pub(super) workers: &'a [&'w WorkerSnapshot],
    /// Cells a label takes (a space follows it).
    pub(super) label_width: usize,
    /// Time columns.
    pub(super) columns: usize,
    /// The first row shown.
    pub(super) skip: usize,
    /// Rows shown.
    pub(super) visible: usize,
    /// Cells inside the border.
    pub(super) width: usize,
}

impl<'a, 'w> Shown<'a, 'w> {
    /// The rows in view, with their indices.
    pub(super) fn rows(&self) -> impl Iterator<Item = (usize, &'w WorkerSnapshot)> + 'a {
        let workers = self.workers;
        (self.skip..workers.len())
            .take(self.visible)
            .map(move |index| (index, workers[index]))
    }
}

/// The title and lines at a zoom that shows the frames' sampled states.
fn sampled<'a>(
    ctx: &Ctx<'a>,
    nav_frame: &crate::tui::timeline_nav::NavFrame<'_>,
    shown: &Shown<'_, '_>,
) -> (Line<'a>, Vec<Line<'a>>) {
    let newest = nav_frame.edge_ns(false);
    let right_ns = ctx.app.timeline.right_ns(newest);
    let axis = Axis::new(
        ctx.app.history(),
        shown.columns,
        ctx.app.column_span(),
        right_ns,
    );
    let title = title(ctx, &axis, shown.width as u16 + 2, newest - right_ns);
    let mut lines = vec![legend(ctx, shown.width, axis.resized.contains(&true))];
    lines.extend(shown.rows().map(|(index, worker)| {
        let label = row_label(ctx, &worker.name, shown.label_width, index);
        row(ctx, label, worker, &axis)
    }));
    (title, lines)
}

/// The time axis: `columns` columns of `span` each, the last ending at the newest sample,
/// and the samples that fall in them, each with its column (oldest first).
struct Axis<'h> {
    columns: usize,
    span: Duration,
    /// The newest sample's time (ns, the profiler's clock).
    newest_ns: u64,
    /// The samples in view and their columns, oldest first.
    placed: Vec<(usize, &'h Sample)>,
    /// Whether any sample fell in each column.
    sampled: Vec<bool>,
    /// Whether a sample in each column follows a resize.
    resized: Vec<bool>,
}

impl<'h> Axis<'h> {
    /// The axis whose last column ends at `newest_ns`.
    fn new(history: &'h History, columns: usize, span: Duration, newest_ns: u64) -> Axis<'h> {
        let mut axis = Axis {
            columns,
            span,
            newest_ns,
            placed: Vec::new(),
            sampled: vec![false; columns],
            resized: vec![false; columns],
        };
        let placed: Vec<(usize, &Sample)> = history
            .samples()
            .filter(|sample| sample.taken_ns <= newest_ns)
            .filter_map(|sample| Some((axis.column_of(sample)?, sample)))
            .collect();
        for &(column, _) in &placed {
            axis.sampled[column] = true;
        }
        for pair in placed.windows(2) {
            let ((_, before), (column, after)) = (pair[0], pair[1]);
            axis.resized[column] |= after.resized_since(before);
        }
        axis.placed = placed;
        axis
    }

    /// The column `sample` falls in, if it is in view.
    fn column_of(&self, sample: &Sample) -> Option<usize> {
        let span_ns = (self.span.as_nanos() as u64).max(1);
        let back = self.newest_ns.saturating_sub(sample.taken_ns) / span_ns;
        let back = usize::try_from(back)
            .ok()
            .filter(|&back| back < self.columns)?;
        Some(self.columns - 1 - back)
    }

    /// When `column` starts (ns, the profiler's clock; saturating at 0).
    fn start_ns(&self, column: usize) -> u64 {
        let from_the_end = (self.columns - column) as u64 * self.span.as_nanos() as u64;
        self.newest_ns.saturating_sub(from_the_end)
    }

    /// The time the columns with samples cover, from the oldest such column to the end.
    fn covered(&self) -> Duration {
        let oldest = self.sampled.iter().position(|&sampled| sampled);
        let oldest = oldest.unwrap_or(self.columns);
        self.span * u32::try_from(self.columns - oldest).unwrap_or(u32::MAX)
    }
}

/// ` timeline · last 6.0s · 100ms/column `, the column's span going first, then the span;
/// ` · 3.00s back` when panned `back_ns` from the newest frame.
fn title<'a>(ctx: &Ctx<'a>, axis: &Axis<'_>, width: u16, back_ns: u64) -> Line<'a> {
    let dim = ctx.theme.dim();
    let column = format::nanos(axis.span.as_nanos() as f64);
    let shown = axis.covered().as_secs_f64();
    let mut parts: Vec<Part<'a>> = vec![
        (0, vec![Span::styled(" timeline ", ctx.theme.strong())]),
        (1, vec![Span::styled(format!("· last {shown:.1}s "), dim)]),
        (2, vec![Span::styled(format!("· {column}/column "), dim)]),
    ];
    if back_ns > 0 {
        let back = format::nanos(back_ns as f64);
        parts.push((
            1,
            vec![Span::styled(format!("· {back} back "), ctx.theme.key())],
        ));
    }
    fit_parts(parts, usize::from(width.saturating_sub(2)))
}

/// A row's label, `width` cells and a space; the cursor's row (`index`) is highlighted while
/// the timeline has the focus.
pub(super) fn row_label<'a>(ctx: &Ctx<'a>, name: &str, width: usize, index: usize) -> Span<'a> {
    let name = format::fit_name(name, width);
    let label = format!("{} ", format::pad_left(&name, width));
    let cursor = ctx.app.focus == Focus::Timeline && ctx.app.timeline.row == index;
    match cursor {
        true => Span::styled(label, ctx.theme.selected()),
        false => Span::styled(label, ctx.theme.dim()),
    }
}

/// The glyphs and what they mean, in `width` cells: the zoom hint goes first, then the
/// states from the last (parked) on, each whole.
fn legend<'a>(ctx: &Ctx<'a>, width: usize, resizes: bool) -> Line<'a> {
    let mut parts: Vec<Part<'a>> = vec![(0, vec![Span::raw(" ")])];
    for (index, (activity, name)) in LEGEND.into_iter().enumerate() {
        let glyph = Span::styled(timeline_glyph(Some(activity)), ctx.theme.activity(activity));
        let name = Span::styled(format!(" {name}  "), ctx.theme.dim());
        parts.push((1 + index as u8, vec![glyph, name]));
    }
    if resizes {
        let glyph = Span::styled(RESIZE_GLYPH, ctx.theme.marker());
        parts.push((8, vec![glyph, Span::styled(" resize  ", ctx.theme.dim())]));
    }
    parts.push((9, vec![Span::styled("</> zoom", ctx.theme.dim())]));
    fit_parts(parts, width)
}

fn row<'a>(ctx: &Ctx<'a>, label: Span<'a>, worker: &WorkerSnapshot, axis: &Axis<'_>) -> Line<'a> {
    let mut spans = vec![label];
    for (column, activity) in cells(axis, worker.thread).into_iter().enumerate() {
        if axis.resized[column] {
            spans.push(Span::styled(RESIZE_GLYPH, ctx.theme.marker()));
            continue;
        }
        let style = activity.map_or(ctx.theme.dim(), |a| ctx.theme.activity(a));
        spans.push(Span::styled(timeline_glyph(activity), style));
    }
    Line::from(merge(spans))
}

/// What `thread` shows in each column, oldest first: the state seen most often in the
/// column's samples (ties go to the busier state); in a column no sample fell in, the
/// latest state seen before it, for up to [`HOLD`]; else (or when the column's samples did
/// not see the thread) nothing.
fn cells(axis: &Axis<'_>, thread: u32) -> Vec<Option<Activity>> {
    let mut counts = vec![[0usize; LEGEND.len()]; axis.columns];
    let mut latest: Vec<Option<(u64, Activity)>> = vec![None; axis.columns];
    for &(column, sample) in &axis.placed {
        let Some(activity) = sample.activity_of(thread) else {
            continue;
        };
        if let Some(index) = LEGEND.iter().position(|&(a, _)| a == activity) {
            counts[column][index] += 1;
            latest[column] = Some((sample.taken_ns, activity));
        }
    }
    let hold_ns = HOLD.as_nanos() as u64;
    let mut held: Option<(u64, Activity)> = None;
    (0..axis.columns)
        .map(|column| {
            if let Some(activity) = most_seen(&counts[column]) {
                held = latest[column];
                return Some(activity);
            }
            if axis.sampled[column] {
                held = None;
                return None;
            }
            let (seen_ns, activity) = held?;
            (axis.start_ns(column).saturating_sub(seen_ns) < hold_ns).then_some(activity)
        })
        .collect()
}

/// The state counted most often in `counts` (by [`LEGEND`] order; ties go to the busier).
fn most_seen(counts: &[usize; LEGEND.len()]) -> Option<Activity> {
    let (index, &most) = counts
        .iter()
        .enumerate()
        .rev()
        .max_by_key(|&(_, count)| *count)?;
    (most > 0).then_some(LEGEND[index].0)
}

/// Adjacent spans of one style made one (fewer cells to diff, smaller snapshots).
pub(super) fn merge(spans: Vec<Span<'_>>) -> Vec<Span<'_>> {
    let mut merged: Vec<Span<'_>> = Vec::with_capacity(spans.len());
    for span in spans {
        match merged.last_mut() {
            Some(last) if last.style == span.style => last.content.to_mut().push_str(&span.content),
            _ => merged.push(span),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::app::{Action, App};
    use crate::tui::fake::FakeOptions;
    use crate::tui::source::DashboardData;
    use crate::tui::theme::Theme;
    use crate::tui::view::tests::{app_after, render};

    fn timeline(app: &App, width: u16, height: u16) -> String {
        render(width, height, |frame, area| {
            draw(frame, area, &Ctx::new(app, Theme::plain()))
        })
    }

    /// One worker (`cpu0-w0`, thread 1) seen at each `(ms, activity)`, ms on the
    /// profiler's clock.
    fn app_with_frames(frames: &[(u64, Activity)]) -> App {
        let mut app = App::new();
        for &(ms, activity) in frames {
            let mut data = DashboardData::default();
            data.snapshot.at_ns = ms * 1_000_000;
            data.snapshot
                .devices
                .push(crate::tui::fake::device_snapshot(crate::tui::fake::cpu0()));
            let worker = crate::tui::fake::worker_snapshot(
                1,
                "cpu0-w0",
                crate::tui::fake::cpu0(),
                0,
                activity,
            );
            data.snapshot.workers = vec![worker];
            app.observe(data);
        }
        app
    }

    /// A resize (the intra-op count changes at the 6th of 10 frames) is a `│` in its
    /// column, and the legend names it; without one, neither shows.
    #[test]
    fn a_resize_is_marked_in_its_column() {
        let mut app = App::new();
        for k in 1..=10u64 {
            let mut data = DashboardData::default();
            data.snapshot.at_ns = k * 100_000_000;
            data.facts.intra_op = if k >= 6 { 2 } else { 1 };
            data.snapshot
                .devices
                .push(crate::tui::fake::device_snapshot(crate::tui::fake::cpu0()));
            let worker = crate::tui::fake::worker_snapshot(
                1,
                "cpu0-w0",
                crate::tui::fake::cpu0(),
                0,
                Activity::Running,
            );
            data.snapshot.workers = vec![worker];
            app.observe(data);
        }
        let (_, cells) = title_and_cells(&app);
        assert_eq!(cells, format!("{}│{}", "█".repeat(5), "█".repeat(4)));
        let text = timeline(&app, 80, 4);
        assert!(text.lines().nth(1).unwrap().contains("│ resize"), "{text}");
        let still = app_with_frames(&[(100, Activity::Running), (200, Activity::Running)]);
        assert!(!timeline(&still, 80, 4).contains("resize"));
    }

    /// The title row and the worker's cells from its first sample on, at 80 wide.
    fn title_and_cells(app: &App) -> (String, String) {
        let text = timeline(app, 80, 4);
        let rows: Vec<&str> = text.lines().collect();
        let cells = rows[2].trim_matches('│').trim_start();
        let cells = cells.trim_start_matches("cpu0-w0 ").trim();
        (rows[0].to_string(), cells.to_string())
    }

    /// 20 frames 100 ms apart, then 10 coming late, 300 ms apart: each column is still
    /// 100 ms, so the late 3 s take 30 columns, not 10 (a state holds until the next frame:
    /// the last running one until 2.3 s).
    #[test]
    fn late_frames_keep_a_column_a_fixed_span_of_time() {
        let mut frames: Vec<(u64, Activity)> =
            (1..=20).map(|k| (k * 100, Activity::Running)).collect();
        frames.extend((1..=10).map(|k| (2_000 + k * 300, Activity::Parked)));
        let app = app_with_frames(&frames);
        let (title, cells) = title_and_cells(&app);
        assert!(title.contains("last 5.0s · 100ms/column"), "{title}");
        assert_eq!(cells, format!("{}{}", "█".repeat(22), "·".repeat(28)));
    }

    /// A state shows in the columns after its frame for up to a second when no frame
    /// comes; a longer gap stays blank rather than inventing what the worker did.
    #[test]
    fn a_gap_without_frames_holds_the_last_state_only_for_a_second() {
        let frames = [
            (100, Activity::Running),
            (200, Activity::Running),
            (3_200, Activity::Parked),
        ];
        let app = app_with_frames(&frames);
        let (title, cells) = title_and_cells(&app);
        assert!(title.contains("last 3.2s"), "{title}");
        let cells: Vec<char> = cells.chars().collect();
        assert_eq!(cells.len(), 32, "{cells:?}");
        let running = cells.iter().filter(|&&c| c == '█').count();
        assert_eq!(running, 2 + 10, "two frames and a second held: {cells:?}");
        assert_eq!(cells[12..31].iter().collect::<String>(), " ".repeat(19));
        assert_eq!(cells[31], '·');
    }

    #[test]
    fn long_labels_keep_their_distinguishing_end() {
        let worker = |thread: u32| {
            let name = format!("engine-worker-pool-{thread}");
            crate::tui::fake::worker_snapshot(
                thread,
                name,
                crate::tui::fake::cpu0(),
                thread,
                Activity::Parked,
            )
        };
        let mut data = DashboardData::default();
        data.snapshot
            .devices
            .push(crate::tui::fake::device_snapshot(crate::tui::fake::cpu0()));
        data.snapshot.workers = vec![worker(1), worker(2)];
        let mut app = App::new();
        app.observe(data);
        let text = timeline(&app, 60, 6);
        let labels: Vec<&str> = text
            .lines()
            .skip(2)
            .take(2)
            .map(|row| {
                row.trim_start_matches('│')
                    .split_whitespace()
                    .next()
                    .unwrap()
            })
            .collect();
        assert_eq!(labels, ["engi…er-pool-1", "engi…er-pool-2"], "{text}");
    }

    #[test]
    fn hidden_rows_are_counted_and_the_last_page_stays_full() {
        let mut app = app_after(FakeOptions::default(), 20);
        let text = timeline(&app, 100, 8);
        let bottom = text.lines().last().unwrap();
        assert!(bottom.contains("↓ 10 more"), "15 rows, 5 shown:\n{text}");
        app.update(Action::FocusNext);
        for _ in 0..14 {
            app.update(Action::Down); // the cursor's row to the last; the rows follow it
        }
        let text = timeline(&app, 100, 8);
        let rows: Vec<&str> = text.lines().collect();
        assert!(rows[6].contains("intra-1"), "{text}");
        assert!(rows[7].contains("↑ 10 above"), "{text}");
    }

    #[test]
    fn a_narrow_title_and_legend_drop_whole_words_and_say_so() {
        let app = app_after(FakeOptions::default(), 20);
        let text = timeline(&app, 35, 6);
        let rows: Vec<&str> = text.lines().collect();
        assert!(rows[0].contains(" timeline · last "), "{text}");
        assert!(
            !rows[0].contains("/col"),
            "the column span goes whole: {text}"
        );
        let legend = rows[1].trim_matches('│');
        for word in legend.split_whitespace() {
            assert!(
                ["█", "▒", "░", "·", "running", "stealing", "spinning", "parked", "…"]
                    .contains(&word),
                "{word:?} cut: {text}"
            );
        }
        assert!(legend.trim_end().ends_with(" …"), "dropped words: {text}");
        assert!(rows[0].contains("s …─"), "the title dropped a part: {text}");
        // At 80 columns (the compact layout's half) `parked` and the zoom hint go, and say so.
        let text = timeline(&app, 40, 6);
        let legend = text.lines().nth(1).unwrap();
        assert!(legend.contains("spinning  …"), "{text}");
        let wide = timeline(&app, 100, 6);
        let legend = wide.lines().nth(1).unwrap();
        assert!(
            legend.contains("</> zoom") && !legend.contains('…'),
            "{wide}"
        );
    }
}
