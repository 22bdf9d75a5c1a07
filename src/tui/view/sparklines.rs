//! Sparklines of throughput (ops/s, every device together) and queue depth (every queue
//! together), one point per frame, newest on the right: the effect of a resize shows here.
//! The vertical axis starts at three quarters of the smallest value shown, not at zero, so a
//! 10% step stands out; the label gives the range. A column whose frame follows a change of
//! the thread counts (`+`/`-`, `]`/`[` or the tuner) is marked: `│` in its top row and
//! above its bar, the rest of the bar in the marker's colour.
#![forbid(unsafe_code)]

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Sparkline};
use ratatui::Frame;

use super::{fit_parts, format, Ctx, Part};
use crate::tui::app::{App, Focus};
use crate::tui::history::Sample;

/// Rows the wide layout gives the sparklines (borders included).
pub(crate) const WIDE_HEIGHT: u16 = 8;
/// Rows the compact layout gives them.
pub(crate) const COMPACT_HEIGHT: u16 = 2;

/// One series: its name, unit and how to read it from a sample.
struct Series {
    name: &'static str,
    unit: &'static str,
    value: fn(&Sample) -> u64,
    /// The figure over the whole run, once it finished (shown instead of the last point).
    run_average: fn(&App) -> Option<f64>,
}

const THROUGHPUT: Series = Series {
    name: "throughput",
    unit: "ops/s",
    value: |sample| sample.ops_per_s.round() as u64,
    run_average: App::run_ops_per_s,
};

const QUEUED: Series = Series {
    name: "queued",
    unit: "waiting",
    value: |sample| sample.queue_depth,
    run_average: |_| None,
};

/// Draws both series in a bordered box, one above the other.
pub(crate) fn draw_wide(frame: &mut Frame<'_>, area: Rect, ctx: &Ctx<'_>) {
    // Never focused: the block is only a frame; use a focus no key gives it.
    let block = ctx
        .block(
            Line::styled(" history ", ctx.theme.strong()),
            Focus::Devices,
        )
        .border_style(ctx.theme.border());
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let [top, bottom] =
        Layout::vertical([Constraint::Ratio(1, 2), Constraint::Ratio(1, 2)]).areas(inner);
    draw_series(frame, top, ctx, &THROUGHPUT);
    draw_series(frame, bottom, ctx, &QUEUED);
}

/// Draws both series side by side, a label row over a one-row sparkline each.
pub(crate) fn draw_compact(frame: &mut Frame<'_>, area: Rect, ctx: &Ctx<'_>) {
    let [left, right] =
        Layout::horizontal([Constraint::Ratio(1, 2), Constraint::Ratio(1, 2)]).areas(area);
    draw_series(frame, left, ctx, &THROUGHPUT);
    draw_series(frame, right, ctx, &QUEUED);
}

/// The label's figure: the newest point `now` while the run goes; once it finished, the
/// run's average where the series has one (`avg 3025`, as the header's `run avg`), since
/// the last point is only the run's last moment.
fn headline(app: &App, series: &Series, now: u64) -> String {
    match (series.run_average)(app) {
        Some(average) => format!("avg {}", format::quantity(average)),
        None => format::count(now),
    }
}

/// A label row (`throughput 1.8k ops/s  (1.7k-2.0k)`) over the sparkline; when the width is
/// short the range goes, then the unit.
fn draw_series(frame: &mut Frame<'_>, area: Rect, ctx: &Ctx<'_>, series: &Series) {
    let [label_area, line_area] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(area);
    let samples: Vec<&Sample> = ctx
        .app
        .history()
        .newest(usize::from(area.width.saturating_sub(1)))
        .collect();
    let points: Vec<u64> = samples
        .iter()
        .map(|&sample| (series.value)(sample))
        .collect();
    let headline = headline(ctx.app, series, points.last().copied().unwrap_or(0));
    let max = points.iter().copied().max().unwrap_or(0);
    let min = points.iter().copied().min().unwrap_or(0);
    let range = format!("  ({}-{})", format::count(min), format::count(max));
    let parts: Vec<Part<'_>> = vec![
        (
            0,
            vec![
                Span::styled(format!(" {} ", series.name), ctx.theme.dim()),
                Span::styled(headline, ctx.theme.strong()),
            ],
        ),
        (
            1,
            vec![Span::styled(format!(" {}", series.unit), ctx.theme.dim())],
        ),
        (2, vec![Span::styled(range, ctx.theme.dim())]),
    ];
    let label = fit_parts(parts, usize::from(label_area.width));
    frame.render_widget(Paragraph::new(label), label_area);
    let floor = min / 4 * 3;
    let heights: Vec<u64> = points.iter().map(|&point| point - floor).collect();
    let sparkline = Sparkline::default()
        .data(&heights)
        .max((max - floor).max(1))
        .style(ctx.theme.sparkline());
    let line_area = Rect {
        x: line_area.x + 1,
        width: line_area.width.saturating_sub(1),
        ..line_area
    };
    frame.render_widget(sparkline, line_area);
    mark_resizes(frame, line_area, ctx, &samples);
}

/// Marks each column whose sample follows a resize (`samples[i]` is drawn in column `i`).
fn mark_resizes(frame: &mut Frame<'_>, area: Rect, ctx: &Ctx<'_>, samples: &[&Sample]) {
    let style = ctx.theme.marker();
    let buffer = frame.buffer_mut();
    for (index, pair) in samples.windows(2).enumerate() {
        let x = area.x + (index + 1) as u16;
        if !pair[1].resized_since(pair[0]) || x >= area.right() {
            continue;
        }
        for y in area.top()..area.bottom() {
            let cell = &mut buffer[(x, y)];
            if y == area.top() || cell.symbol() == " " {
                cell.set_symbol(RESIZE_GLYPH);
            }
            cell.set_style(style);
        }
    }
}

/// The glyph of a resize on the sparklines and the timeline.
pub(crate) const RESIZE_GLYPH: &str = "│";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::fake::FakeOptions;
    use crate::tui::theme::Theme;
    use crate::tui::view::tests::{app_after, render};

    #[test]
    fn a_narrow_label_drops_the_range_then_the_unit_whole() {
        let app = app_after(FakeOptions::default(), 20);
        let label = |width: u16| {
            let text = render(width, COMPACT_HEIGHT, |frame, area| {
                draw_compact(frame, area, &Ctx::new(&app, Theme::plain()))
            });
            text.lines().next().unwrap().to_string()
        };
        let wide = label(100);
        assert!(
            wide.contains("ops/s  (") && wide.contains("waiting  ("),
            "{wide}"
        );
        let narrow = label(60);
        let throughput = narrow.split("queued").next().unwrap();
        assert!(
            throughput.contains("ops/s") && !throughput.contains('('),
            "{narrow}"
        );
        let narrower = label(36);
        assert!(
            narrower.contains("throughput") && !narrower.contains("ops"),
            "{narrower}"
        );
        assert!(narrower.contains("queued"), "{narrower}");
    }

    /// A frame after a resize (the inter-op count changes at the 4th of 6 frames) marks its
    /// column with `│` in its top row, in both series.
    #[test]
    fn a_resize_marks_its_column() {
        use crate::profiler::stats::DeviceSnapshot;
        use crate::tui::source::{DashboardData, DeviceLayout};
        let mut app = App::new();
        for k in 0..6u64 {
            let mut data = DashboardData::default();
            data.snapshot.devices.push(DeviceSnapshot {
                ops_per_s: 100.0 + k as f64,
                queue_depth: 1,
                ..crate::tui::fake::device_snapshot(crate::tui::fake::cpu0())
            });
            data.devices.push(DeviceLayout {
                title: "cpu0".into(),
                inter_op: Some(if k >= 3 { 3 } else { 2 }),
                ..DeviceLayout::default()
            });
            app.observe(data);
        }
        let text = render(40, WIDE_HEIGHT, |frame, area| {
            draw_wide(frame, area, &Ctx::new(&app, Theme::plain()))
        });
        // Column 1 of the line area is the inner column 2: the 4th point sits at 2 + 3.
        let at = |line: &str| line.chars().nth(5);
        let tops: Vec<Option<char>> = text.lines().map(at).collect();
        assert!(tops.contains(&Some('│')), "{text}");
        let untouched = app_after(FakeOptions::default(), 6);
        let plain = render(40, WIDE_HEIGHT, |frame, area| {
            draw_wide(frame, area, &Ctx::new(&untouched, Theme::plain()))
        });
        assert!(!plain.lines().map(at).any(|c| c == Some('│')), "{plain}");
    }

    /// Once finished, the throughput's figure is the run's average (the header's), not the
    /// run's last moment; the range stays the points'.
    #[test]
    fn a_finished_run_headlines_its_average_throughput() {
        use crate::profiler::stats::DeviceSnapshot;
        use crate::tui::source::DashboardData;
        let frame = |ops_per_s: f64, finished: bool| {
            let mut data = DashboardData::default();
            data.facts.elapsed = std::time::Duration::from_secs(2);
            data.facts.finished = finished;
            data.snapshot.devices.push(DeviceSnapshot {
                ops: 3000,
                ops_per_s,
                ..crate::tui::fake::device_snapshot(crate::tui::fake::cpu0())
            });
            data
        };
        let mut app = App::new();
        for rate in [1400.0, 1600.0, 1550.0] {
            app.observe(frame(rate, false));
        }
        let label = |app: &App| {
            let text = render(100, COMPACT_HEIGHT, |frame, area| {
                draw_compact(frame, area, &Ctx::new(app, Theme::plain()))
            });
            text.lines().next().unwrap().to_string()
        };
        let running = label(&app);
        assert!(running.contains("throughput 1550 ops/s"), "{running}");
        app.observe(frame(700.0, true));
        let finished = label(&app);
        assert!(
            finished.contains("throughput avg 1500 ops/s  (700-1600)"),
            "{finished}"
        );
    }
}
