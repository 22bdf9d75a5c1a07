//! The per-worker timeline: a Gantt of the last seconds, one row per worker (every panel's,
//! in panel order), newest on the right. Each column is [`App::frames_per_column`] frames;
//! a cell shows the state the worker was seen in most often in them (`█` running, `▒`
//! stealing, `░` spinning, `·` parked). `>` / `<` zoom in and out.
//!
//! [`App::frames_per_column`]: crate::tui::app::App::frames_per_column
#![forbid(unsafe_code)]

use std::time::Duration;

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::format;
use super::Ctx;
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
    let title = title(ctx, frame_interval(ctx), samples.len());
    let block = ctx.block(title, Focus::Timeline);
    let mut lines = vec![legend(ctx)];
    lines.extend(
        workers
            .iter()
            .skip(ctx.app.timeline_scroll)
            .map(|worker| row(ctx, worker, &samples, columns, label_width)),
    );
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

fn title<'a>(ctx: &Ctx<'a>, per_frame: Duration, frames: usize) -> Line<'a> {
    let per_column = per_frame * ctx.app.frames_per_column() as u32;
    let shown = per_frame * u32::try_from(frames).unwrap_or(u32::MAX);
    Line::from(vec![
        Span::styled(" timeline ", ctx.theme.strong()),
        Span::styled(
            format!(
                "· last {:.1}s · {}/column ",
                shown.as_secs_f64(),
                format::nanos(per_column.as_nanos() as f64)
            ),
            ctx.theme.dim(),
        ),
    ])
}

/// The time between two frames, from the history's own timestamps (the profiler's clock,
/// which runs on while the workload is paused; 100 ms until there are two).
fn frame_interval(ctx: &Ctx<'_>) -> Duration {
    let history = ctx.app.history();
    let mut samples = history.samples();
    match (samples.next(), samples.next_back()) {
        (Some(first), Some(last)) if last.taken_ns > first.taken_ns => {
            let span = Duration::from_nanos(last.taken_ns - first.taken_ns);
            span / (history.len() as u32 - 1)
        }
        _ => Duration::from_millis(100),
    }
}

fn legend<'a>(ctx: &Ctx<'a>) -> Line<'a> {
    let mut spans = vec![Span::raw(" ")];
    for (activity, name) in LEGEND {
        spans.push(Span::styled(
            timeline_glyph(Some(activity)),
            ctx.theme.activity(activity),
        ));
        spans.push(Span::styled(format!(" {name}  "), ctx.theme.dim()));
    }
    spans.push(Span::styled("</> zoom", ctx.theme.dim()));
    Line::from(spans)
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
        format::fit(&worker.name, label_width),
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
