//! The header: what runs (workload, engine, pool kind, elapsed, iterations, notices) and the
//! state badge on the first row; the settings (`inter N`, `intra M`), throughput, GFLOP/s
//! against the peak and dropped events on the second. Each row drops its least important
//! parts first when the width is short; the badge, the settings and the dropped count always
//! stay.
#![forbid(unsafe_code)]

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::format;
use super::Ctx;
use crate::workload::run::peak_fraction;

/// Rows the header takes.
pub const HEIGHT: u16 = 2;

/// A part of a row and how readily it goes (0: never; higher goes first).
type Part<'a> = (u8, Vec<Span<'a>>);

/// Draws the header into `area`.
pub fn draw(frame: &mut Frame<'_>, area: Rect, ctx: &Ctx<'_>) {
    let width = usize::from(area.width);
    let lines = vec![
        fit(identity_parts(ctx), width),
        fit(figures_parts(ctx), width),
    ];
    frame.render_widget(Paragraph::new(lines), area);
}

/// The parts that fit in `width`, in their order, dropping the most expendable first.
fn fit(parts: Vec<Part<'_>>, width: usize) -> Line<'_> {
    let widths: Vec<usize> = parts
        .iter()
        .map(|(_, spans)| spans.iter().map(Span::width).sum())
        .collect();
    let mut kept = vec![true; parts.len()];
    let mut total: usize = widths.iter().sum();
    let mut by_expendability: Vec<usize> = (0..parts.len()).collect();
    by_expendability.sort_by_key(|&index| std::cmp::Reverse(parts[index].0));
    for index in by_expendability {
        if total <= width || parts[index].0 == 0 {
            break;
        }
        kept[index] = false;
        total -= widths[index];
    }
    let spans = parts
        .into_iter()
        .zip(kept)
        .filter(|(_, keep)| *keep)
        .flat_map(|((_, spans), _)| spans);
    Line::from(spans.collect::<Vec<_>>())
}

/// The badge: FINISHED, PAUSED or RUNNING.
fn badge(ctx: &Ctx<'_>) -> Span<'static> {
    let theme = ctx.theme;
    if ctx.app.is_finished() {
        Span::styled(" FINISHED ", theme.badge())
    } else if ctx.app.paused {
        Span::styled(" PAUSED ", theme.badge())
    } else {
        Span::styled(" RUNNING ", theme.ok())
    }
}

fn identity_parts<'a>(ctx: &Ctx<'a>) -> Vec<Part<'a>> {
    let facts = &ctx.app.data().facts;
    let theme = ctx.theme;
    let labelled = |label: &str, value: String| {
        vec![
            Span::styled(format!(" · {label}"), theme.dim()),
            Span::raw(value),
        ]
    };
    let mut parts = vec![
        (
            0,
            vec![Span::styled(" enginetop ", theme.strong()), badge(ctx)],
        ),
        (
            0,
            vec![Span::styled(
                format!(" {}", or_dash(&facts.workload)),
                theme.strong(),
            )],
        ),
        (4, labelled("engine ", or_dash(&facts.engine))),
        (3, labelled("pool ", or_dash(&facts.pool_kind))),
        (1, labelled("", format::elapsed(facts.elapsed))),
        (2, labelled("iter ", format::count(facts.iterations))),
    ];
    for notice in &facts.notices {
        parts.push((5, vec![Span::styled(format!("  [{notice}]"), theme.dim())]));
    }
    parts
}

fn or_dash(text: &str) -> String {
    if text.is_empty() {
        "-".into()
    } else {
        text.to_string()
    }
}

fn figures_parts<'a>(ctx: &Ctx<'a>) -> Vec<Part<'a>> {
    let data = ctx.app.data();
    let theme = ctx.theme;
    let sep = || Span::styled(" │ ", theme.dim());
    let inter = match ctx.app.inter_op_target() {
        Some((device, threads)) => vec![
            Span::styled(format!(" inter {threads}"), theme.strong()),
            Span::styled(format!(" ({device})"), theme.dim()),
        ],
        None => vec![Span::styled(" inter -", theme.strong())],
    };
    let intra = vec![Span::styled(
        format!("  intra {}", data.facts.intra_op),
        theme.strong(),
    )];
    let ops_per_s: f64 = data.snapshot.devices.iter().map(|d| d.ops_per_s).sum();
    let mut parts = vec![
        (0, inter),
        (0, intra),
        (
            1,
            vec![
                sep(),
                Span::raw(format!("{} ops/s", format::quantity(ops_per_s))),
            ],
        ),
    ];
    if let Some(gflops) = data.facts.gflops {
        parts.push((2, vec![sep(), Span::raw(format!("{gflops:.1} GFLOP/s"))]));
        if let Some(fraction) = peak_fraction(gflops, data.facts.peak_gflops) {
            let share = format!(" {:.0}% of peak", 100.0 * fraction);
            parts.push((3, vec![Span::styled(share, theme.dim())]));
        }
    }
    parts.push((0, dropped(ctx)));
    if data.facts.cores > 0 {
        let cores = format!("{} cores", data.facts.cores);
        parts.push((4, vec![sep(), Span::styled(cores, theme.dim())]));
    }
    parts
}

/// ` │ dropped N`, in red when events were lost.
fn dropped<'a>(ctx: &Ctx<'a>) -> Vec<Span<'a>> {
    let dropped = ctx.app.data().snapshot.dropped_events;
    let style = if dropped > 0 {
        ctx.theme.error()
    } else {
        ctx.theme.dim()
    };
    vec![
        Span::styled(" │ ", ctx.theme.dim()),
        Span::styled(format!("dropped {}", format::count(dropped)), style),
    ]
}
