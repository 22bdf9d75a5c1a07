//! The per-worker timeline: a Gantt of the last seconds, one row per worker (every panel's,
//! in panel order), newest on the right. Each column is [`App::frames_per_column`] frames;
//! a cell shows the state the worker was seen in most often in them (`█` running, `▒`
//! stealing, `░` spinning, `·` parked). `>` / `<` zoom in and out. Labels are cut with
//! [`format::fit_name`]; rows out of sight are counted in the bottom border.
//!
//! [`App::frames_per_column`]: crate::tui::app::App::frames_per_column
#![forbid(unsafe_code)]

use std::time::Duration;

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::{first_shown, fit_parts, format, more_marker, Ctx, Part};
use crate::profiler::stats::{Activity, WorkerSnapshot};
use crate::tui::app::Focus;
use crate::tui::history::Sample;
use crate::tui::theme::{timeline_glyph, LEGEND};

/// Rows the timeline would like (borders, legend and one per worker).
pub fn wanted_height(ctx: &Ctx<'_>) -> u16 {
    let rows: usize = ctx.panels.iter().map(|p| p.all_workers().count()).sum();
    rows as u16 + 3
}

/// Draws the timeline into `area`.
pub fn draw(frame: &mut Frame<'_>, area: Rect, ctx: &Ctx<'_>) {
    let workers: Vec<&WorkerSnapshot> = ctx.panels.iter().flat_map(|p| p.all_workers()).collect();
    let label_width = workers
        .iter()
        .map(|w| w.name.chars().count())
        .max()
        .unwrap_or(4)
        .clamp(4, 14);
    let columns = usize::from(area.width.saturating_sub(2)).saturating_sub(label_width + 1);
    let per_column = ctx.app.frames_per_column();
    let samples: Vec<&Sample> = ctx.app.history().newest(columns * per_column).collect();
    // The span the samples shown cover, not the span the width could hold.
    let title = title(
        ctx,
        ctx.app.history().frame_interval(),
        samples.len(),
        area.width,
    );
    let mut block = ctx.block(title, Focus::Timeline);
    let inner_width = usize::from(area.width.saturating_sub(2));
    let visible = usize::from(area.height.saturating_sub(3));
    ctx.app.shown_rows.timeline.set(visible);
    let skip = first_shown(ctx.app.timeline_scroll, workers.len(), visible);
    let below = workers.len().saturating_sub(skip + visible);
    if let Some(marker) = more_marker(ctx, skip, below) {
        block = block.title_bottom(marker);
    }
    let mut lines = vec![legend(ctx, inner_width)];
    lines.extend(
        workers
            .iter()
            .skip(skip)
            .take(visible)
            .map(|worker| row(ctx, worker, &samples, columns, label_width)),
    );
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

/// ` timeline · last 6.0s · 100ms/column `, the column's span going first, then the span.
fn title<'a>(ctx: &Ctx<'a>, per_frame: Duration, frames: usize, width: u16) -> Line<'a> {
    let per_column = per_frame * ctx.app.frames_per_column() as u32;
    let shown = per_frame * u32::try_from(frames).unwrap_or(u32::MAX);
    let dim = ctx.theme.dim();
    let column = format::nanos(per_column.as_nanos() as f64);
    let parts: Vec<Part<'a>> = vec![
        (0, vec![Span::styled(" timeline ", ctx.theme.strong())]),
        (
            1,
            vec![Span::styled(
                format!("· last {:.1}s ", shown.as_secs_f64()),
                dim,
            )],
        ),
        (2, vec![Span::styled(format!("· {column}/column "), dim)]),
    ];
    fit_parts(parts, usize::from(width.saturating_sub(2)))
}

/// The glyphs and what they mean, in `width` cells: the zoom hint goes first, then the
/// states from the last (parked) on, each whole.
fn legend<'a>(ctx: &Ctx<'a>, width: usize) -> Line<'a> {
    let mut parts: Vec<Part<'a>> = vec![(0, vec![Span::raw(" ")])];
    for (index, (activity, name)) in LEGEND.into_iter().enumerate() {
        let glyph = Span::styled(timeline_glyph(Some(activity)), ctx.theme.activity(activity));
        let name = Span::styled(format!(" {name}  "), ctx.theme.dim());
        parts.push((1 + index as u8, vec![glyph, name]));
    }
    parts.push((9, vec![Span::styled("</> zoom", ctx.theme.dim())]));
    fit_parts(parts, width)
}

fn row<'a>(
    ctx: &Ctx<'a>,
    worker: &WorkerSnapshot,
    samples: &[&Sample],
    columns: usize,
    label_width: usize,
) -> Line<'a> {
    let label = format!(
        "{:>width$} ",
        format::fit_name(&worker.name, label_width),
        width = label_width
    );
    let mut spans = vec![Span::styled(label, ctx.theme.dim())];
    let per_column = ctx.app.frames_per_column();
    // Newest on the right: pad on the left until the history fills the width.
    let filled = samples.len().div_ceil(per_column);
    spans.push(Span::raw(" ".repeat(columns.saturating_sub(filled))));
    let first_chunk = samples.len() % per_column;
    let mut chunks: Vec<&[&Sample]> = Vec::new();
    if first_chunk > 0 {
        chunks.push(&samples[..first_chunk]);
    }
    chunks.extend(samples[first_chunk..].chunks(per_column));
    for chunk in chunks {
        let activity = dominant(chunk, worker.thread);
        let style = activity.map_or(ctx.theme.dim(), |a| ctx.theme.activity(a));
        spans.push(Span::styled(timeline_glyph(activity), style));
    }
    Line::from(merge(spans))
}

/// The state `thread` was seen in most often in `samples` (ties go to the busier state).
fn dominant(samples: &[&Sample], thread: u32) -> Option<Activity> {
    let mut counts = [0usize; 4];
    for sample in samples {
        if let Some(activity) = sample.activity_of(thread) {
            if let Some(index) = LEGEND.iter().position(|&(a, _)| a == activity) {
                counts[index] += 1;
            }
        }
    }
    let (index, &most) = counts
        .iter()
        .enumerate()
        .rev()
        .max_by_key(|&(_, count)| *count)?;
    (most > 0).then_some(LEGEND[index].0)
}

/// Adjacent spans of one style made one (fewer cells to diff, smaller snapshots).
fn merge(spans: Vec<Span<'_>>) -> Vec<Span<'_>> {
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
    use crate::profiler::stats::DeviceSnapshot;
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

    #[test]
    fn long_labels_keep_their_distinguishing_end() {
        let worker = |thread: u32| {
            let name = format!("engine-worker-pool-{thread}");
            crate::tui::fake::worker_snapshot(thread, name, "cpu0", thread, Activity::Parked)
        };
        let mut data = DashboardData::default();
        data.snapshot.devices.push(DeviceSnapshot {
            id: 1,
            name: "cpu0".into(),
            ..Default::default()
        });
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
        app.update(Action::Bottom);
        let text = timeline(&app, 100, 8);
        let rows: Vec<&str> = text.lines().collect();
        assert!(rows[6].contains("intra-1"), "{text}");
        assert!(rows[7].contains("↑ 10 above"), "{text}");
    }

    #[test]
    fn a_narrow_title_and_legend_drop_whole_words() {
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
                ["█", "▒", "░", "·", "running", "stealing", "spinning", "parked"].contains(&word),
                "{word:?} cut: {text}"
            );
        }
    }
}
