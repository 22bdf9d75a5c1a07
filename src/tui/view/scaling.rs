//! The scaling view (`w`): why the workload does not scale, in place of the panels.
//!
//! ```text
//! ╭ why it does not scale ─────────────────────────────────────────╮
//! │ cpu0: critical path: span 412 ms of a 430 ms step ...           │  verdicts, wrapped
//! ╰─────────────────────────────────────────────────────────────────╯
//! ╭ work and span (last iteration) ─────────────────────────────────╮
//! │ work 12.3 ms  span 10.1 ms  parallelism 1.2  achieved 1.1 ...   │
//! │ critical path (300 ops): step7 1%, step3 1%, ...                │
//! ╰─────────────────────────────────────────────────────────────────╯
//! ╭ where each worker's time went (window) ─────────────────────────╮
//! │ cpu0-w0          ████████▒▒░░········  op 60%, no ready op 30% │  one bar per worker
//! │ █ op  ▓ intra-op  ▒ stealing  ...                               │  legend
//! ╰─────────────────────────────────────────────────────────────────╯
//! ```
//! The view is a column of blocks (`blocks`), each as tall as its lines, the last taking
//! what is left: another block (a predicted scaling curve) goes in the list. The bars use the
//! timeline's glyphs and colours for the states they share, so a worker reads the same here
//! and there.
#![forbid(unsafe_code)]

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Paragraph};
use ratatui::Frame;

use super::format::{fit_name, pad_right, wrap};
use super::Ctx;
use crate::analysis::{attribute, Attribution, Bucket, Period};
use crate::profiler::stats::Activity;
use crate::tui::theme::{timeline_glyph, Theme};

/// Width of the worker column.
const NAME_WIDTH: usize = 20;
/// Width of the text after a bar (its two largest buckets).
const TEXT_WIDTH: usize = 34;

/// One block of the view: its title and its lines; `fill` takes the height left.
struct ViewBlock<'a> {
    title: String,
    lines: Vec<Line<'a>>,
    fill: bool,
}

/// Draws the view over `area`.
pub(crate) fn draw(frame: &mut Frame<'_>, area: Rect, ctx: &Ctx<'_>) {
    let inner = usize::from(area.width.saturating_sub(2));
    let blocks = blocks(ctx, inner);
    let constraints = blocks.iter().map(|block| match block.fill {
        true => Constraint::Min(3),
        false => Constraint::Length(block.lines.len() as u16 + 2),
    });
    let areas = Layout::vertical(constraints).split(area);
    for (block, rect) in blocks.into_iter().zip(areas.iter()) {
        let title = Line::styled(format!(" {} ", block.title), ctx.theme.strong());
        let shown = usize::from(rect.height.saturating_sub(2));
        let hidden = block.lines.len().saturating_sub(shown);
        let mut frame_block = Block::default()
            .borders(Borders::ALL)
            .border_type(BorderType::Rounded)
            .border_style(ctx.theme.border())
            .title(title);
        if hidden > 0 {
            let more = Line::styled(format!(" ↓ {hidden} more "), ctx.theme.key());
            frame_block = frame_block.title_bottom(more.right_aligned());
        }
        frame.render_widget(Paragraph::new(block.lines).block(frame_block), *rect);
    }
}

/// The view's blocks for `inner` cells of width, top to bottom.
fn blocks<'a>(ctx: &Ctx<'a>, inner: usize) -> Vec<ViewBlock<'a>> {
    let facts = &ctx.app.data().facts;
    let live = facts.scaling.as_ref();
    let attribution = attribute(
        &ctx.app.data().snapshot,
        Period::Window,
        live.and_then(|live| live.descheduled.as_ref()),
    );
    vec![
        ViewBlock {
            title: "why it does not scale".into(),
            lines: verdict_lines(ctx, inner),
            fill: false,
        },
        ViewBlock {
            title: "work and span (last iteration)".into(),
            lines: span_lines(ctx, inner),
            fill: false,
        },
        ViewBlock {
            title: "what if (predicted, not measured)".into(),
            lines: predicted_lines(ctx, inner),
            fill: false,
        },
        ViewBlock {
            title: "where each worker's time went (window)".into(),
            lines: attribution_lines(ctx.theme, &attribution, inner),
            fill: true,
        },
    ]
}

/// The predicted curve as the summary prints it: the grid, today's counts marked `*`, the
/// best point and the assumptions.
fn predicted_lines<'a>(ctx: &Ctx<'a>, inner: usize) -> Vec<Line<'a>> {
    match &ctx.app.data().facts.predicted {
        Some(curve) => {
            let text = curve.to_string();
            let indent = text
                .lines()
                .filter(|line| !line.trim().is_empty())
                .map(|line| line.len() - line.trim_start().len())
                .min()
                .unwrap_or(0);
            // The grid's columns line up by their spaces: only a line too long for the row
            // (the assumptions) is wrapped, at words.
            text.lines()
                .map(|line| line.get(indent..).unwrap_or(""))
                .flat_map(|line| match line.chars().count() <= inner {
                    true => vec![line.to_string()],
                    false => wrap(line, inner.max(10)),
                })
                .map(Line::raw)
                .collect()
        }
        None => vec![Line::styled(
            "no prediction yet: it needs two finished iterations",
            ctx.theme.dim(),
        )],
    }
}

fn verdict_lines<'a>(ctx: &Ctx<'a>, inner: usize) -> Vec<Line<'a>> {
    let verdicts = &ctx.app.data().facts.verdicts;
    if verdicts.is_empty() {
        let waiting = "no verdict yet: it needs two finished iterations";
        return vec![Line::styled(waiting, ctx.theme.dim())];
    }
    verdicts
        .iter()
        .flat_map(|verdict| wrap(verdict, inner.max(10)))
        .map(|row| Line::styled(row, ctx.theme.warning()))
        .collect()
}

fn span_lines<'a>(ctx: &Ctx<'a>, inner: usize) -> Vec<Line<'a>> {
    let Some(live) = ctx.app.data().facts.scaling.as_ref() else {
        return vec![Line::styled("not measured yet", ctx.theme.dim())];
    };
    let s = &live.scaling;
    let figures = format!(
        "work {:.2} ms  span {:.2} ms  parallelism {:.1}  achieved {:.1} over a {:.2} ms step",
        s.work_ms, s.span_ms, s.parallelism, s.achieved_parallelism, s.wall_ms
    );
    let path: Vec<String> = s
        .critical_path
        .iter()
        .take(5)
        .map(|op| format!("{} {:.0}%", op.name, op.share * 100.0))
        .collect();
    let path = format!(
        "critical path ({} ops): {}",
        s.critical_path_ops,
        path.join(", ")
    );
    let mut lines: Vec<Line<'a>> = Vec::new();
    for text in [figures, path] {
        lines.extend(wrap(&text, inner.max(10)).into_iter().map(Line::raw));
    }
    lines
}

/// Each bucket's glyph and style: the timeline's for the states they share.
fn look(theme: Theme, bucket: Bucket) -> (&'static str, Style) {
    match bucket {
        Bucket::Op => (
            timeline_glyph(Some(Activity::Running)),
            theme.activity(Activity::Running),
        ),
        Bucket::IntraOp => ("▓", theme.activity(Activity::Running)),
        Bucket::Stealing => (
            timeline_glyph(Some(Activity::Stealing)),
            theme.activity(Activity::Stealing),
        ),
        Bucket::Spinning => (
            timeline_glyph(Some(Activity::Spinning)),
            theme.activity(Activity::Spinning),
        ),
        Bucket::WakeUp => ("!", theme.warning()),
        Bucket::ReadyElsewhere => ("»", theme.warning()),
        Bucket::NoReadyOp => (
            timeline_glyph(Some(Activity::Parked)),
            theme.activity(Activity::Parked),
        ),
        Bucket::Descheduled => ("x", theme.error()),
    }
}

fn attribution_lines<'a>(theme: Theme, attribution: &Attribution, inner: usize) -> Vec<Line<'a>> {
    if attribution.workers.is_empty() {
        return vec![Line::styled(
            "no worker seen in the window (a profiled run records them)",
            theme.dim(),
        )];
    }
    let bar_width = inner.saturating_sub(NAME_WIDTH + TEXT_WIDTH + 2).max(10);
    let mut lines = legend(theme, inner);
    for worker in &attribution.workers {
        let mut spans = vec![Span::raw(pad_right(
            &fit_name(&worker.label(), NAME_WIDTH),
            NAME_WIDTH + 1,
        ))];
        spans.extend(bar(theme, &worker.shares, bar_width));
        spans.push(Span::styled(
            format!(" {}", largest(&worker.shares)),
            theme.dim(),
        ));
        lines.push(Line::from(spans));
    }
    lines
}

/// The legend: every bucket's glyph and name, wrapped to `width` cells.
fn legend<'a>(theme: Theme, width: usize) -> Vec<Line<'a>> {
    let mut lines = Vec::new();
    let (mut spans, mut used) = (Vec::new(), 0);
    for bucket in Bucket::ALL {
        let (glyph, style) = look(theme, bucket);
        let name = format!(" {}  ", bucket.label());
        let cost = 1 + name.chars().count();
        if used > 0 && used + cost > width {
            lines.push(Line::from(std::mem::take(&mut spans)));
            used = 0;
        }
        spans.push(Span::styled(glyph, style));
        spans.push(Span::styled(name, theme.dim()));
        used += cost;
    }
    lines.push(Line::from(spans));
    lines
}

/// A stacked bar of `width` cells: each bucket's cells in [`Bucket::ALL`] order, cut so the
/// cells add up to `width` (each bucket ends where its cumulative share rounds to).
fn bar<'a>(
    theme: Theme,
    shares: &std::collections::BTreeMap<Bucket, f64>,
    width: usize,
) -> Vec<Span<'a>> {
    let mut spans = Vec::new();
    let (mut cumulative, mut drawn) = (0.0, 0);
    for bucket in Bucket::ALL {
        cumulative += shares.get(&bucket).copied().unwrap_or(0.0);
        let end = ((cumulative * width as f64).round() as usize).min(width);
        if end > drawn {
            let (glyph, style) = look(theme, bucket);
            spans.push(Span::styled(glyph.repeat(end - drawn), style));
            drawn = end;
        }
    }
    if drawn < width {
        spans.push(Span::raw(" ".repeat(width - drawn)));
    }
    spans
}

/// The two largest buckets with their shares (`op 60%, no ready op 30%`).
fn largest(shares: &std::collections::BTreeMap<Bucket, f64>) -> String {
    let mut sorted: Vec<(&Bucket, &f64)> = shares.iter().collect();
    sorted.sort_by(|a, b| b.1.total_cmp(a.1));
    sorted
        .iter()
        .take(2)
        .map(|(bucket, share)| format!("{} {:.0}%", bucket.label(), **share * 100.0))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn a_bar_fills_its_width_in_bucket_order() {
        let shares = BTreeMap::from([
            (Bucket::Op, 0.5),
            (Bucket::NoReadyOp, 0.3),
            (Bucket::Stealing, 0.2),
        ]);
        let text: String = bar(Theme::plain(), &shares, 10)
            .iter()
            .map(|span| span.content.to_string())
            .collect();
        assert_eq!(text, "█████▒▒···");
        assert_eq!(largest(&shares), "op 50%, no ready op 30%");
    }
}
