//! The header: what runs (workload, engine, pool kind, elapsed, iterations, notices) and the
//! state badge on the first row; the settings (`inter N`, `intra M`), throughput, GFLOP/s
//! against the peak and dropped events (and the rate pool task events are sampled at, when
//! they are) on the second: over the last moments while the workload runs, over the whole run
//! (`run avg`) once it finished. Each row drops its least important parts first when the width
//! is short; the badge, the settings, the dropped count and the sampling rate always stay.
#![forbid(unsafe_code)]

use ratatui::layout::Rect;
use ratatui::text::Span;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::format;
use super::{fit_parts, Ctx, Part};
use crate::device::identity::PoolRole;
use crate::tui::app::PlusMinus;
use crate::tui::source::DashboardData;
use crate::workload::run::GflopsSplit;

/// Rows the header takes.
pub(crate) const HEIGHT: u16 = 2;

/// Draws the header into `area`.
pub(crate) fn draw(frame: &mut Frame<'_>, area: Rect, ctx: &Ctx<'_>) {
    let width = usize::from(area.width);
    let lines = vec![
        fit_parts(identity_parts(ctx), width),
        fit_parts(figures_parts(ctx), width),
    ];
    frame.render_widget(Paragraph::new(lines), area);
}

/// The badge: FINISHED, PAUSED or RUNNING.
fn badge(ctx: &Ctx<'_>) -> Span<'static> {
    let theme = ctx.theme;
    if ctx.app.data().facts.replay.is_some() {
        Span::styled(" REPLAY ", theme.badge())
    } else if ctx.app.is_finished() {
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
    if let Some(replay) = &facts.replay {
        parts.insert(
            2,
            (
                0,
                vec![Span::styled(
                    format!(" {}", replay.position()),
                    theme.strong(),
                )],
            ),
        );
    }
    // Start-up warnings (`Facts::warnings`) show in the footer instead.
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
    let mut parts = vec![(0, settings(ctx)), (1, throughput(ctx))];
    if let Some(cpu) = data.facts.gflops {
        let split = GflopsSplit {
            cpu,
            gpu: data.facts.gpu_gflops,
        };
        // The first figure is the CPU ops' (the one `% of peak` compares); GPU ops' is apart.
        parts.push((2, vec![sep(), Span::raw(format!("{cpu:.1} GFLOP/s"))]));
        if let Some(fraction) = split.peak_fraction(data.facts.peak_gflops) {
            let share = format!(" {:.0}% of peak", 100.0 * fraction);
            parts.push((3, vec![Span::styled(share, theme.dim())]));
        }
        if let Some(gpu) = split.gpu {
            parts.push((4, vec![sep(), Span::raw(format!("GPU {gpu:.1} GFLOP/s"))]));
        }
    }
    parts.push((0, dropped(ctx)));
    if let Some(sampled) = task_sampling(ctx) {
        parts.push((0, sampled));
    }
    if data.facts.cores > 0 {
        let cores = format!("{} cores", data.facts.cores);
        parts.push((5, vec![sep(), Span::styled(cores, theme.dim())]));
    }
    parts
}

/// ` +/- inter 4 (cpu0)  intra 2`: the inter-op count (of the selected device, else of the
/// first resizable one) and the intra-op count, `+/-` marking the one those keys change now,
/// or ending in `+/-: nothing on gpu0` when they change nothing ([`App::plus_minus`]). Once
/// the run finished, or in a replay, nothing is resized, and nothing is marked; a replay shows
/// the workers the first CPU device's pool had at the cursor; a resized run adds the counts
/// it had for the longest time, as the summary's headline names them.
///
/// [`App::plus_minus`]: crate::tui::app::App::plus_minus
fn settings<'a>(ctx: &Ctx<'a>) -> Vec<Span<'a>> {
    let app = ctx.app;
    let theme = ctx.theme;
    let replay = app.data().facts.replay.is_some();
    let plus_minus = (!app.is_finished() && !replay).then(|| app.plus_minus());
    let marked = |setting: String, marked: bool| {
        let mut spans = vec![Span::raw(" ")];
        if marked {
            spans.push(Span::styled("+/- ", theme.key()));
        }
        spans.push(Span::styled(setting, theme.strong()));
        spans
    };
    let changes_inter = matches!(plus_minus, Some(PlusMinus::InterOp { .. }));
    let changes_intra = plus_minus == Some(PlusMinus::IntraOp);
    let mut spans = match app.shown_inter_op() {
        Some((device, threads)) => {
            let mut spans = marked(format!("inter {threads}"), changes_inter);
            spans.push(Span::styled(format!(" ({device})"), theme.dim()));
            spans
        }
        None => match recorded_inter_op(app.data()) {
            Some((device, threads)) => {
                let mut spans = marked(format!("inter {threads}"), false);
                spans.push(Span::styled(format!(" ({device})"), theme.dim()));
                spans
            }
            None => marked("inter -".into(), false),
        },
    };
    spans.push(Span::raw(" "));
    spans.extend(marked(
        format!("intra {}", app.data().facts.intra_op),
        changes_intra,
    ));
    if let (true, Some((inter, intra))) = (app.is_finished(), app.data().facts.threads_over_run) {
        spans.push(Span::styled(
            format!("  (mostly {inter} x {intra} over the run)"),
            theme.dim(),
        ));
    }
    if let Some(PlusMinus::Nothing { on, .. }) = plus_minus {
        let on = on.map_or(String::new(), |device| format!(" on {device}"));
        spans.push(Span::styled("  +/-", theme.key()));
        spans.push(Span::styled(format!(": nothing{on}"), theme.dim()));
    }
    spans
}

/// ` │ 2734 ops/s` now, or ` │ run avg 2734 ops/s` once finished (`avg since reset` if the
/// statistics were reset: the ops counted start there).
fn throughput<'a>(ctx: &Ctx<'a>) -> Vec<Span<'a>> {
    let app = ctx.app;
    let sep = Span::styled(" │ ", ctx.theme.dim());
    let (label, ops_per_s) = match app.run_ops_per_s() {
        Some(rate) if app.stats_were_reset() => ("avg since reset ", rate),
        Some(rate) => ("run avg ", rate),
        None => (
            "",
            app.data()
                .snapshot
                .devices
                .iter()
                .map(|d| d.ops_per_s)
                .sum(),
        ),
    };
    vec![
        sep,
        Span::styled(label, ctx.theme.dim()),
        Span::raw(format!("{} ops/s", format::quantity(ops_per_s))),
    ]
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

/// ` │ tasks 1/N sampled` when pool task events were sampled (their counts stay exact), and
/// how many tasks the threads that scheduled them ran inline (a pool's queue was full):
/// ` │ tasks 1/N sampled, K ran inline`, or ` │ K tasks ran inline` alone.
fn task_sampling<'a>(ctx: &Ctx<'a>) -> Option<Vec<Span<'a>>> {
    let sampling = ctx.app.data().snapshot.task_sampling;
    let inline = sampling.run_by_callers;
    let text = match (sampling.is_sampled(), inline > 0) {
        (true, true) => format!(
            "tasks 1/{} sampled, {} ran inline",
            sampling.rate.max(1),
            format::count(inline)
        ),
        (true, false) => format!("tasks 1/{} sampled", sampling.rate.max(1)),
        (false, true) => format!("{} tasks ran inline", format::count(inline)),
        (false, false) => return None,
    };
    Some(vec![
        Span::styled(" │ ", ctx.theme.dim()),
        Span::styled(text, ctx.theme.dim()),
    ])
}

/// The worker count of the first device with CPU inter-op workers whose pool reported one
/// (its latest resize), by its name: what a source with no device layouts, a replay, shows
/// for inter.
fn recorded_inter_op(data: &DashboardData) -> Option<(String, u64)> {
    let snapshot = &data.snapshot;
    snapshot
        .workers
        .iter()
        .filter(|worker| worker.role.is_some_and(PoolRole::is_inter_op))
        .find_map(|worker| {
            let device = snapshot
                .devices
                .iter()
                .find(|device| Some(device.device()) == worker.device)?;
            Some((device.name.clone(), device.workers?))
        })
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::time::Duration;

    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    use super::*;
    use crate::profiler::stats::DeviceSnapshot;
    use crate::tui::app::App;
    use crate::tui::source::DashboardData;
    use crate::tui::theme::Theme;

    fn header_text(app: &App) -> String {
        header_rows(app, 160).concat()
    }

    /// The header's two rows at `width`.
    fn header_rows(app: &App, width: u16) -> Vec<String> {
        let mut terminal = Terminal::new(TestBackend::new(width, HEIGHT)).unwrap();
        terminal
            .draw(|frame| draw(frame, frame.area(), &Ctx::new(app, Theme::plain())))
            .unwrap();
        let buffer = terminal.backend().buffer();
        let cells: Vec<&str> = buffer.content().iter().map(|cell| cell.symbol()).collect();
        cells
            .chunks(usize::from(width))
            .map(|row| row.concat())
            .collect()
    }

    /// A figure the width leaves out is announced by a trailing `…` (it was dropped with
    /// nothing to show for it: `│ dropped 0` then the end of the line).
    #[test]
    fn a_header_line_that_drops_a_figure_ends_in_an_ellipsis() {
        let mut data = data(false);
        data.facts.gflops = Some(236.5);
        data.facts.gpu_gflops = Some(327.0);
        data.facts.peak_gflops = Some(1000.0);
        data.facts.cores = 2;
        let mut app = App::new();
        app.observe(data);
        let wide = header_rows(&app, 160);
        assert!(
            wide[1].contains("│ 2 cores") && !wide[1].contains('…'),
            "{wide:?}"
        );
        for width in [60, 80, 90] {
            let rows = header_rows(&app, width);
            assert!(!rows[1].contains("cores"), "{rows:?}");
            assert!(rows[1].trim_end().ends_with(" …"), "{width}: {rows:?}");
        }
    }

    /// 3000 ops in 2 s, 1000 ops/s in the last window; a notice and a start-up warning.
    fn data(finished: bool) -> DashboardData {
        let mut data = DashboardData::default();
        data.facts.elapsed = Duration::from_secs(2);
        data.facts.finished = finished;
        data.facts.notices = vec!["synthetic".into()];
        data.facts.warnings = vec!["too many threads".into()];
        data.snapshot.devices.push(DeviceSnapshot {
            ops: 3000,
            ops_per_s: 1000.0,
            ..crate::tui::fake::device_snapshot(crate::tui::fake::cpu0())
        });
        data
    }

    #[test]
    fn the_finished_header_shows_the_whole_runs_throughput_labelled() {
        let mut app = App::new();
        app.observe(data(false));
        let running = header_text(&app);
        assert!(running.contains("│ 1000 ops/s"), "{running}");
        let mut app = App::new();
        app.observe(data(true));
        let finished = header_text(&app);
        assert!(finished.contains("│ run avg 1500 ops/s"), "{finished}");
    }

    #[test]
    fn sampled_task_events_show_their_rate_beside_the_drops() {
        let mut app = App::new();
        app.observe(data(false));
        assert!(!header_text(&app).contains("sampled"));
        let mut sampled = data(false);
        sampled.snapshot.task_sampling = crate::profiler::TaskSampling {
            tasks: 1000,
            recorded: 10,
            rate: 64,
            max_rate: 64,
            run_by_callers: 0,
        };
        let mut app = App::new();
        app.observe(sampled.clone());
        let text = header_text(&app);
        assert!(text.contains("dropped 0 │ tasks 1/64 sampled"), "{text}");
        assert!(!text.contains("inline"), "{text}");
        sampled.snapshot.task_sampling.run_by_callers = 5;
        let mut app = App::new();
        app.observe(sampled.clone());
        let text = header_text(&app);
        assert!(text.contains("tasks 1/64 sampled, 5 ran inline"), "{text}");
        sampled.snapshot.task_sampling.rate = 1;
        sampled.snapshot.task_sampling.recorded = 1000;
        let mut app = App::new();
        app.observe(sampled);
        let text = header_text(&app);
        assert!(text.contains("dropped 0 │ 5 tasks ran inline"), "{text}");
    }

    #[test]
    fn start_up_warnings_are_left_to_the_footer() {
        let mut app = App::new();
        app.observe(data(false));
        let text = header_text(&app);
        assert!(text.contains("[synthetic]"), "{text}");
        assert!(!text.contains("too many threads"), "{text}");
    }
}
