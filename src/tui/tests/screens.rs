//! Whole-screen and widget snapshots of the dashboard at 80x24 and 160x48, rendered into
//! ratatui's `TestBackend` from the deterministic `FakeSource`. Review changes with
//! `cargo insta review` (or `INSTA_UPDATE=always cargo test --lib tui::tests::screens`).

use super::support::{text_of, Harness, SIZES};
use crate::tui::fake::worker_snapshot;
use crate::tui::view::{self, device, footer, header, ops, timeline, Ctx};
use crate::tui::{App, FakeOptions, Theme};
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::KeyCode;
use ratatui::layout::Rect;
use ratatui::style::Color;
use ratatui::{Frame, Terminal};

/// Frames before a screen is taken: enough history for sparklines, timeline and lints.
const WARM: usize = 60;

fn assert_screens(name: &str, harness: &Harness) {
    for (width, height) in SIZES {
        insta::assert_snapshot!(
            format!("{name}_{width}x{height}"),
            harness.screen(width, height)
        );
    }
}

/// One widget drawn alone into a `width` x `height` buffer.
fn widget(
    app: &App,
    width: u16,
    height: u16,
    draw: impl Fn(&mut Frame<'_>, Rect, &Ctx<'_>),
) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal
        .draw(|frame| {
            let ctx = Ctx::new(app, Theme::colored());
            draw(frame, frame.area(), &ctx);
        })
        .unwrap();
    text_of(terminal.backend().buffer())
}

#[test]
fn steady_workload() {
    assert_screens("steady", &Harness::new(FakeOptions::default(), WARM));
}

#[test]
fn overloaded_workload_shows_every_lint() {
    let harness = Harness::new(FakeOptions::overloaded(), WARM);
    assert_screens("overloaded", &harness);
    let screen = harness.screen(160, 48);
    assert!(screen.contains("oversubscribed: inter 8 x intra 2 = 16 threads > 4 cores"));
    assert!(screen.contains("cpu0 queue growing"));
    assert!(screen.contains("cpu1-w3 spinning"));
}

#[test]
fn nothing_observed_yet() {
    assert_screens("empty", &Harness::new(FakeOptions::default(), 0));
}

#[test]
fn help_overlay_lists_every_key() {
    let mut harness = Harness::new(FakeOptions::default(), WARM);
    harness.press(KeyCode::Char('?'));
    assert_screens("help", &harness);
    let screen = harness.screen(80, 24);
    for help in crate::tui::input::KEYS {
        assert!(
            screen.contains(help.keys),
            "{} missing from the help",
            help.keys
        );
    }
}

#[test]
fn paused_resized_filtered_and_sorted() {
    let mut harness = Harness::new(FakeOptions::default(), WARM);
    harness.press(KeyCode::Char('+'));
    harness.press(KeyCode::Char(']'));
    harness.press(KeyCode::Char(' '));
    harness.frames(20);
    harness.press(KeyCode::Tab);
    harness.press(KeyCode::Tab);
    harness.press(KeyCode::Right); // sort by mean
    harness.press(KeyCode::Char('/'));
    harness.type_text("o");
    harness.press(KeyCode::Enter);
    assert_screens("paused_filtered", &harness);
    let screen = harness.screen(80, 24);
    assert!(screen.contains("PAUSED") && screen.contains("inter 5") && screen.contains("intra 3"));
}

#[test]
fn finished_workload_keeps_its_final_numbers() {
    let options = FakeOptions {
        finish_after: Some(40),
        ..FakeOptions::default()
    };
    let mut harness = Harness::new(options, 40);
    let last = harness.screen(160, 48);
    harness.frames(30);
    assert_eq!(harness.screen(160, 48), last, "the final frame stays");
    assert_screens("finished", &harness);
}

#[test]
fn timeline_zoomed_out_and_third_device_selected() {
    let mut harness = Harness::new(FakeOptions::default(), 120);
    harness.press(KeyCode::Char('<'));
    harness.press(KeyCode::Char('<'));
    harness.press(KeyCode::Right);
    harness.press(KeyCode::Right);
    assert_screens("zoomed_gpu", &harness);
    let screen = harness.screen(160, 48);
    // Each stream is named as a stream, and after the worker feeding it, the name of that
    // worker's timeline row.
    let timeline_rows: Vec<&str> = screen
        .lines()
        .skip_while(|line| !line.contains(" timeline "))
        .filter_map(|line| line.trim_start_matches('│').split_whitespace().next())
        .collect();
    for (label, worker) in [
        ("stream compute0 (gpu0-compute-0) ", "gpu0-compute-0"),
        ("stream compute1 (gpu0-compute-1) ", "gpu0-compute-1"),
        ("stream h2d0 (gpu0-copy-0) ", "gpu0-copy-0"),
        ("stream d2h0 (gpu0-copy-0) ", "gpu0-copy-0"),
    ] {
        assert!(screen.contains(label), "stream {label}:\n{screen}");
        assert!(timeline_rows.contains(&worker), "{worker}:\n{screen}");
    }
}

#[test]
fn header_widget_keeps_settings_and_dropped_when_narrow() {
    let harness = Harness::new(FakeOptions::overloaded(), WARM);
    for width in [60, 80, 160] {
        let text = widget(&harness.app, width, header::HEIGHT, header::draw);
        assert!(
            text.contains("inter 4") && text.contains("intra 2"),
            "{text}"
        );
        assert!(text.contains("dropped"), "{text}");
        insta::assert_snapshot!(format!("header_{width}"), text);
    }
}

#[test]
fn footer_widget_rewraps_hints_to_the_width() {
    let harness = Harness::new(FakeOptions::default(), 1);
    for width in [40, 80, 160] {
        let ctx = Ctx::new(&harness.app, Theme::colored());
        let height = footer::height(&ctx, width);
        let text = widget(&harness.app, width, height, footer::draw);
        for hint in [
            "quit", "help", "pause", "inter", "intra", "zoom", "export", "reset", "filter",
        ] {
            assert!(text.contains(hint), "{hint} cut at width {width}:\n{text}");
        }
        insta::assert_snapshot!(format!("footer_{width}"), text);
    }
}

#[test]
fn device_panels_widget() {
    let harness = Harness::new(FakeOptions::default(), WARM);
    insta::assert_snapshot!(
        "devices_90x30",
        widget(&harness.app, 90, 30, device::draw_stack)
    );
}

#[test]
fn timeline_and_ops_widgets() {
    let harness = Harness::new(FakeOptions::default(), WARM);
    insta::assert_snapshot!(
        "timeline_100x12",
        widget(&harness.app, 100, 12, timeline::draw)
    );
    insta::assert_snapshot!("ops_60x16", widget(&harness.app, 60, 16, ops::draw));
}

#[test]
fn no_color_draws_without_any_colour_and_colour_uses_some() {
    let harness = Harness::new(FakeOptions::overloaded(), WARM);
    let plain = harness.buffer(160, 48, Theme::plain());
    let colored_cells = plain
        .content()
        .iter()
        .filter(|cell| cell.fg != Color::Reset || cell.bg != Color::Reset)
        .count();
    assert_eq!(colored_cells, 0, "NO_COLOR: no cell may carry a colour");
    let colored = harness.buffer(160, 48, Theme::colored());
    assert!(colored.content().iter().any(|cell| cell.fg == Color::Green));
    assert_eq!(
        text_of(&plain),
        text_of(&colored),
        "the same text either way"
    );
}

#[test]
fn every_size_down_to_80x24_draws_without_panicking() {
    let mut harness = Harness::new(FakeOptions::overloaded(), WARM);
    for (width, height) in [
        (80, 24),
        (100, 30),
        (119, 35),
        (120, 36),
        (200, 60),
        (20, 5),
        (1, 1),
    ] {
        harness.buffer(width, height, Theme::colored());
    }
    harness.press(KeyCode::Char('?'));
    harness.buffer(80, 24, Theme::colored());
    let _ = view::WIDE;
}

/// The timeline claims only the history it has: 60 frames 100 ms apart are 6 s, however
/// many more columns the width could hold.
#[test]
fn timeline_span_is_the_history_it_has() {
    let harness = Harness::new(FakeOptions::default(), 60);
    let text = widget(&harness.app, 160, 12, timeline::draw);
    assert!(text.contains("last 6.0s"), "{text}");
    let young = Harness::new(FakeOptions::default(), 3);
    let text = widget(&young.app, 160, 12, timeline::draw);
    assert!(text.contains("last 0.3s"), "{text}");
}

/// A worker row shows the op the profiler says it runs, cut to the column with `…`; a
/// worker between ops shows none.
#[test]
fn worker_rows_show_their_current_op_truncated_to_fit() {
    use crate::profiler::stats::{Activity, WorkerSnapshot};
    use crate::tui::DashboardData;
    let worker = |thread: u32, op: Option<&str>| {
        let activity = if op.is_some() {
            Activity::Running
        } else {
            Activity::Parked
        };
        WorkerSnapshot {
            current_op: op.map(str::to_string),
            ..worker_snapshot(
                thread,
                format!("cpu0-w{thread}"),
                crate::tui::fake::cpu0(),
                thread,
                activity,
            )
        }
    };
    let mut data = DashboardData::default();
    data.snapshot
        .devices
        .push(crate::tui::fake::device_snapshot(crate::tui::fake::cpu0()));
    let long = "layer4_bottleneck2_conv3_backward_weights";
    data.snapshot.workers = vec![
        worker(0, Some("fc1_3")),
        worker(1, Some(long)),
        worker(2, None),
    ];
    let mut app = App::new();
    app.observe(data);
    let text = widget(&app, 90, 6, device::draw_stack);
    let rows: Vec<&str> = text.lines().collect();
    assert!(
        rows[1].contains("cpu0-w0") && rows[1].contains("fc1_3"),
        "{text}"
    );
    assert!(
        rows[2].contains("layer…d_weights") && rows[2].contains('…'),
        "{text}"
    );
    assert!(!rows[2].contains(long), "the long name is cut: {text}");
    assert!(
        !rows[3].contains("fc1") && !rows[3].contains("layer"),
        "{text}"
    );
}

/// `% of peak` compares the CPU ops' GFLOP/s with the CPU peak; the GPU's GFLOP/s stands
/// apart (a GPU workload never reads 137% of a CPU peak).
#[test]
fn header_compares_only_cpu_flops_with_the_cpu_peak() {
    let mut harness = Harness::new(FakeOptions::default(), 1);
    let mut data = harness.app.data().clone();
    data.facts.gflops = Some(20.0);
    data.facts.gpu_gflops = Some(117.0);
    data.facts.peak_gflops = Some(100.0);
    harness.app = App::new();
    harness.app.observe(data);
    let text = widget(&harness.app, 160, header::HEIGHT, header::draw);
    assert!(text.contains("20.0 GFLOP/s 20% of peak"), "{text}");
    assert!(text.contains("GPU 117.0 GFLOP/s"), "{text}");
    assert!(!text.contains("137%"), "{text}");
}

/// The scaling view (`w`): the verdicts, work and span with the critical path, and one
/// stacked bar per worker from its time against the ready work.
#[test]
fn scaling_view_shows_verdicts_path_and_attribution_bars() {
    use crate::analysis::{analyze, LiveScaling, RanGraph, RanOp};
    use crate::profiler::stats::Activity;
    use crate::profiler::{Readiness, StateTime, WorkState, WorkerStates};
    use crate::tui::DashboardData;
    use std::time::Duration;
    let ms = Duration::from_millis;
    let op = |name: &str, time| RanOp {
        name: name.into(),
        device: 0,
        reads: vec![0],
        writes: vec![0],
        time: ms(time),
    };
    let graph = RanGraph {
        ops: vec![op("conv1", 30), op("conv2", 10)],
        vars: vec!["x".into()],
        devices: vec![crate::device::identity::Lane::CpuWorkers(0)],
        wall: ms(45),
    };
    let mut data = DashboardData::default();
    data.facts.verdicts =
        vec!["cpu0: critical path: span 40 ms of a 45 ms step (parallelism 1.0)".into()];
    data.facts.scaling = Some(LiveScaling {
        scaling: analyze(&graph),
        descheduled: None,
    });
    let cell = |state, own, elsewhere, ns_ms: u64| StateTime {
        state,
        ready: Readiness { own, elsewhere },
        ns: ns_ms * 1_000_000,
    };
    data.snapshot.workers = vec![
        worker_snapshot(1, "cpu0-w0", crate::tui::fake::cpu0(), 0, Activity::Running),
        worker_snapshot(2, "cpu0-w1", crate::tui::fake::cpu0(), 1, Activity::Parked),
    ];
    data.snapshot.work_states = vec![
        WorkerStates {
            thread: 1,
            window: vec![
                cell(WorkState::Op, false, false, 900),
                cell(WorkState::Stealing, false, false, 100),
            ],
            since_start: Vec::new(),
        },
        WorkerStates {
            thread: 2,
            window: vec![
                cell(WorkState::Op, false, false, 100),
                cell(WorkState::Parked, false, false, 700),
                cell(WorkState::Parked, true, false, 200),
            ],
            since_start: Vec::new(),
        },
    ];
    let mut app = App::new();
    app.observe(data);
    let text = widget(&app, 100, 16, view::scaling::draw);
    insta::assert_snapshot!("scaling_view_100x16", text);
    assert!(text.contains("cpu0: critical path"), "{text}");
    assert!(text.contains("conv1 75%"), "{text}");
    assert!(text.contains("cpu0-w1 "), "{text}");
    assert!(text.contains("no ready op 70%, wake-up 20%"), "{text}");
    assert!(text.contains("op 90%, stealing 10%"), "{text}");
}

/// The scaling view's what-if block: the summary's predicted grid with today's counts marked.
#[test]
fn scaling_view_shows_the_predicted_curve_with_today_marked() {
    use crate::analysis::{PredictedStep, GRID};
    use crate::tui::DashboardData;
    use crate::workload::run::PredictedCurve;
    let step = |inter: usize, intra: usize| PredictedStep {
        inter,
        intra,
        step_ms: 40.0 / (inter.min(4) * intra.min(2)) as f64,
    };
    let points = GRID
        .iter()
        .flat_map(|&inter| GRID.iter().map(move |&intra| step(inter, intra)))
        .collect();
    let mut data = DashboardData::default();
    data.facts.predicted = Some(PredictedCurve {
        points,
        today: step(2, 1),
        measured_step_ms: 21.5,
        intra_measured: true,
        dispatch: Vec::new(),
        loop_wake: std::time::Duration::ZERO,
        loop_wake_source: crate::workload::run::LoopWakeSource::EngineWaking,
        loop_wake_stats: None,
        corun: 1.0,
    });
    let mut app = App::new();
    app.observe(data);
    let text = widget(&app, 120, 30, view::scaling::draw);
    assert!(text.contains("what if (predicted, not measured)"), "{text}");
    assert!(
        text.contains("today 2x1: predicted 20.00 ms, measured 21.50 ms"),
        "{text}"
    );
    assert!(text.contains("best predicted 4x2: 5.00 ms"), "{text}");
}
