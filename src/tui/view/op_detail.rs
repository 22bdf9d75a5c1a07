//! The op detail: one op's whole story, in a box over the screen while it is open (Enter on
//! the timeline's cursor, Esc closes): its name and id, the worker that ran it, when it was
//! queued, started and ended (seconds on the profiler's clock), its queue wait and duration,
//! its stream for a GPU op, whether it failed, and what it read, wrote and waited on where the
//! source knows the graph ("not recorded" where it does not): each op it waited on on a row
//! of its own, with its id, name and the edge's reason (`op 412 conv1 (RAW on w1)`). The
//! deps are computed here, for this op only ([`OpGraph::deps`](crate::tui::deps::OpGraph)).
#![forbid(unsafe_code)]

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};
use ratatui::Frame;

use super::{centered, format, panel_block, Ctx};
use crate::profiler::spans::OpSpan;
use crate::tui::deps::OpDeps;
use crate::tui::source::stream_label;

/// Width of the label column.
const LABEL_WIDTH: usize = 11;
/// The widest the box gets.
const MAX_WIDTH: u16 = 72;
/// The most waited-on ops listed, one a row; a last row counts the rest.
const MAX_WAITED_ON: usize = 8;

/// Draws the detail of the timeline's cursor op over `area`, if it is open.
pub(crate) fn draw(frame: &mut Frame<'_>, area: Rect, ctx: &Ctx<'_>) {
    let nav = &ctx.app.timeline;
    let Some(span) = nav.cursor.filter(|_| nav.detail) else {
        return;
    };
    let width = MAX_WIDTH.min(area.width);
    let text_width = usize::from(width.saturating_sub(2));
    let lines = lines(ctx, &span, text_width);
    let height = (lines.len() as u16 + 2).min(area.height);
    let popup = centered(area, width, height);
    let title = format!(" op {} · {} ", span.op, span.name);
    let title = Line::styled(format::fit(&title, text_width), ctx.theme.strong());
    let block = panel_block(title, true, ctx.theme).title_bottom(
        Line::styled(" ←/→ other ops · Esc closes ", ctx.theme.key()).right_aligned(),
    );
    frame.render_widget(Clear, popup);
    frame.render_widget(Paragraph::new(lines).block(block), popup);
}

/// The rows of `span`'s detail, each cut to `width` cells.
pub(crate) fn lines<'a>(ctx: &Ctx<'a>, span: &OpSpan, width: usize) -> Vec<Line<'a>> {
    let data = ctx.app.data();
    let deps = data.deps.deps(span, &data.spans);
    let deps = deps.as_ref();
    let rows: [(&str, String); 13] = [
        ("name", span.name.as_str().to_string()),
        ("op id", span.op.to_string()),
        ("worker", worker(ctx, span)),
        (
            "queued",
            span.queued_ns.map_or_else(|| "not seen".into(), seconds),
        ),
        (
            "queue wait",
            span.queue_wait_ns().map_or_else(|| "-".into(), nanos),
        ),
        ("start", seconds(span.start_ns)),
        ("end", seconds(span.end_ns)),
        ("duration", nanos(span.duration_ns())),
        ("stream", stream(span)),
        ("priority", span.priority.to_string()),
        ("status", if span.error { "failed" } else { "ok" }.into()),
        ("reads", names(deps.map(|d| &d.reads))),
        ("writes", names(deps.map(|d| &d.writes))),
    ];
    let waited = waited_on(deps).into_iter().enumerate();
    let waited = waited.map(|(row, text)| (if row == 0 { "waited on" } else { "" }, text));
    rows.into_iter()
        .chain(waited)
        .map(|(label, value)| {
            let label = format!(" {} ", format::pad_right(label, LABEL_WIDTH));
            let value = format::fit(&value, width.saturating_sub(LABEL_WIDTH + 2));
            let style = if label.contains("status") && span.error {
                ctx.theme.error()
            } else {
                ctx.theme.text()
            };
            Line::from(vec![
                Span::styled(label, ctx.theme.dim()),
                Span::styled(value, style),
            ])
        })
        .collect()
}

/// The worker's row name (the thread's name where it has no row), its device and thread id.
fn worker(ctx: &Ctx<'_>, span: &OpSpan) -> String {
    let thread = span.thread.id();
    let named = ctx
        .panels
        .iter()
        .flat_map(|panel| panel.all_workers())
        .find(|worker| worker.thread == thread)
        .map(|worker| worker.name.clone());
    let name = named.unwrap_or_else(|| span.thread.name());
    format!("{name} on {} (thread {thread})", span.device.name())
}

/// A GPU op's stream, as the trace names its track (`stream h2d0`).
fn stream(span: &OpSpan) -> String {
    match span.stream {
        Some(code) => stream_label(code),
        None => "- (no stream events: a CPU op)".into(),
    }
}

fn seconds(ns: u64) -> String {
    format!("{:.6}s", ns as f64 / 1e9)
}

fn nanos(ns: u64) -> String {
    format::nanos(ns as f64)
}

fn names(names: Option<&Vec<String>>) -> String {
    match names {
        None => "not recorded".into(),
        Some(names) if names.is_empty() => "none".into(),
        Some(names) => names.join(", "),
    }
}

/// The waited-on rows: one per op (at most [`MAX_WAITED_ON`], then how many more).
fn waited_on(deps: Option<&OpDeps>) -> Vec<String> {
    let Some(deps) = deps else {
        return vec!["not recorded".into()];
    };
    if deps.waited_on.is_empty() {
        return vec!["none (ready at once)".into()];
    }
    let mut rows: Vec<String> = deps
        .waited_on
        .iter()
        .take(MAX_WAITED_ON)
        .map(ToString::to_string)
        .collect();
    let more = deps.waited_on.len().saturating_sub(MAX_WAITED_ON);
    if more > 0 {
        rows.push(format!("and {more} more"));
    }
    rows
}
