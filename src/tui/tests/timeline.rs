//! The timeline read op by op: op spans at a zoom finer than a frame, the cursor walking a
//! row's ops, pan and the live edge, the display pause, and the op detail, through the real
//! key map into the `App` over the `FakeSource`, with op spans laid on the fake's worker
//! threads. Snapshots of the zoomed timeline and of the detail; state checks of pan, zoom and
//! select.

use super::support::{text_of, Harness};
use crate::profiler::spans::{OpSpan, SpanSnapshot};
use crate::profiler::{DeviceId, OpName, ThreadId};
use crate::record::graph::GraphOp;
use crate::record::{GraphShape, OpRun};
use crate::tui::app::Focus;
use crate::tui::deps::OpGraph;
use crate::tui::view::{op_detail, timeline, Ctx};
use crate::tui::{App, DashboardSource, FakeOptions, Theme};
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::KeyCode;
use ratatui::Terminal;

const US: u64 = 1_000;

/// The op names the spans cycle through.
const NAMES: [&str; 4] = ["conv2d", "relu", "gemm", "sgd_update"];

/// Ops on each of the first `rows` worker threads of `app`'s frame: on row `r`, op
/// `1000 * (r + 1) + k` starts at `k * 900 + r * 150` µs and lasts 300 to 800 µs; the
/// third of row 1 failed. Ends by 20 ms.
fn spans_for(app: &App, rows: usize) -> Vec<OpSpan> {
    let threads: Vec<u32> = crate::tui::timeline_nav::rows_of(app.data())
        .iter()
        .map(|row| row.thread)
        .take(rows)
        .collect();
    let mut spans = Vec::new();
    for (r, &thread) in threads.iter().enumerate() {
        for k in 0..20u64 {
            let start = (k * 900 + r as u64 * 150) * US;
            let length = (300 + (k * 7 + r as u64 * 3) % 6 * 100) * US;
            spans.push(OpSpan {
                op: 1000 * (r as u64 + 1) + k,
                name: OpName::new(NAMES[(k as usize + r) % NAMES.len()]),
                device: DeviceId::register("cpu0"),
                thread: ThreadId::from_raw(thread),
                queued_ns: Some(start - 40 * US),
                start_ns: start,
                end_ns: start + length,
                priority: 0,
                error: r == 1 && k == 2,
                stream: None,
            });
        }
    }
    spans
}

/// A fake dashboard after 30 frames whose last frame carries op spans on its first three
/// rows, and the graph of ops 1017 to 1019 (one iteration: `relu` writes w1, `gemm` reads it
/// and writes x, `sgd_update` reads both and writes y).
fn harness() -> Harness {
    let mut h = Harness::new(FakeOptions::default(), 30);
    let mut data = h.source.snapshot();
    let spans = spans_for(&h.app, 3);
    data.spans = SpanSnapshot::from_spans(spans);
    let op = GraphOp::on_first_pool;
    let shape = GraphShape {
        vars: vec!["w1".into(), "x".into(), "y".into()],
        ops: vec![
            op("relu", &[], &[0]),
            op("gemm", &[0], &[1]),
            op("sgd_update", &[0, 1], &[2]),
        ],
        ..GraphShape::default()
    };
    let runs = (0..3)
        .map(|index| OpRun {
            op_id: 1017 + u64::from(index),
            iteration: 0,
            index,
        })
        .collect();
    data.deps = OpGraph::new(&shape, runs);
    h.app.observe(data);
    h
}

/// Presses `code` `times` times.
fn press_n(h: &mut Harness, code: KeyCode, times: usize) {
    for _ in 0..times {
        h.press(code);
    }
}

/// Focuses the timeline and zooms to 200 µs a column (8 steps in from 100 ms).
fn zoomed(h: &mut Harness) {
    h.press(KeyCode::Tab);
    assert_eq!(h.app.focus, Focus::Timeline);
    press_n(h, KeyCode::Char('>'), 8);
    assert_eq!(h.app.column_span().as_micros(), 200);
}

fn timeline_widget(app: &App, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal
        .draw(|frame| timeline::draw(frame, frame.area(), &Ctx::new(app, Theme::plain())))
        .unwrap();
    text_of(terminal.backend().buffer())
}

/// Cells of the cursor's op in the rows (the legend, which shows the glyph too, aside).
fn cursor_cells(text: &str) -> usize {
    let rows = text.lines().skip(2);
    rows.map(|row| row.matches('▓').count()).sum()
}

fn status(h: &Harness) -> String {
    h.app
        .status
        .as_ref()
        .map_or(String::new(), |s| s.text.clone())
}

#[test]
fn a_zoomed_timeline_draws_op_spans_named_where_they_fit() {
    let mut h = harness();
    zoomed(&mut h);
    assert_eq!(status(&h), "timeline: 200µs a column (ops)");
    let text = timeline_widget(&h.app, 100, 8);
    insta::assert_snapshot!("timeline_ops_100x8", text);
    assert!(
        text.contains("timeline · ops · 200µs/column · live"),
        "{text}"
    );
    for name in ["relu", "gemm", "co…", "sg…"] {
        assert!(text.contains(name), "{name} missing:\n{text}");
    }
    // One frame a column (the default zoom) shows the sampled states, no op names.
    let mut h = harness();
    h.press(KeyCode::Tab);
    let text = timeline_widget(&h.app, 100, 8);
    assert!(
        !text.contains("gemm") && text.contains("100ms/column"),
        "{text}"
    );
}

#[test]
fn left_and_right_walk_a_rows_ops_and_enter_opens_the_detail() {
    let mut h = harness();
    zoomed(&mut h);
    let cursor = |h: &Harness| h.app.timeline.cursor.map(|s| s.op);
    h.press(KeyCode::Left);
    assert_eq!(cursor(&h), Some(1019), "the newest op on the first row");
    h.press(KeyCode::Char('h'));
    assert_eq!(cursor(&h), Some(1018));
    h.press(KeyCode::Right);
    assert_eq!(cursor(&h), Some(1019));
    let drawn = timeline_widget(&h.app, 100, 8);
    assert!(
        cursor_cells(&drawn) > 0,
        "the cursor's op is marked:\n{drawn}"
    );
    h.press(KeyCode::Right);
    assert_eq!(cursor(&h), Some(1019), "no later op");
    assert_eq!(status(&h), "no later op on cpu0-w0 in the retained history");
    h.press(KeyCode::Enter);
    assert!(h.app.timeline.detail);
    let screen = h.screen(160, 48);
    insta::assert_snapshot!("op_detail_160x48", screen);
    for expected in [
        "op 1019 · sgd_update",
        "op id       1019",
        "worker      cpu0-w0 on cpu0",
        "queue wait  40.0µs",
        "reads       w1, x",
        "writes      y",
        "waited on   op 1017 relu (RAW on w1)",
        "            op 1018 gemm (RAW on x)",
    ] {
        assert!(screen.contains(expected), "{expected:?} missing:\n{screen}");
    }
    h.press(KeyCode::Left);
    let screen = h.screen(160, 48);
    assert!(screen.contains("op id       1018"), "{screen}");
    assert!(
        screen.contains("waited on   op 1017 relu (RAW on w1)"),
        "{screen}"
    );
    h.press(KeyCode::Left);
    assert!(h
        .screen(160, 48)
        .contains("waited on   none (ready at once)"));
    // An op the graph does not place: the detail says its graph was not recorded.
    h.press(KeyCode::Left);
    let screen = h.screen(160, 48);
    assert!(screen.contains("op id       1016"), "{screen}");
    assert!(screen.contains("reads       not recorded"), "{screen}");
    h.press(KeyCode::Esc);
    assert!(!h.app.timeline.detail);
    assert!(
        !h.screen(160, 48).contains("op id  "),
        "Esc closed the detail"
    );
}

#[test]
fn a_row_change_keeps_the_cursor_near_in_time_and_a_failed_op_says_so() {
    let mut h = harness();
    zoomed(&mut h);
    press_n(&mut h, KeyCode::Left, 18); // op 1002, 1800-2300 µs
    assert_eq!(h.app.timeline.cursor.map(|s| s.op), Some(1002));
    h.press(KeyCode::Down); // row 1's op 2002, 1950-2750 µs, holds 2050 µs
    assert_eq!(h.app.timeline.row, 1);
    assert_eq!(h.app.timeline.cursor.map(|s| s.op), Some(2002));
    h.press(KeyCode::Enter);
    let detail = widget_detail(&h);
    assert!(detail.contains("status      failed"), "{detail}");
    h.press(KeyCode::Right);
    assert_eq!(h.app.timeline.cursor.map(|s| s.op), Some(2003));
    let detail = widget_detail(&h);
    assert!(
        detail.contains("status      ok"),
        "the detail follows: {detail}"
    );
    h.press(KeyCode::Up);
    assert_eq!(h.app.timeline.row, 0);
}

/// The detail alone, drawn over a 72x20 area.
fn widget_detail(h: &Harness) -> String {
    let mut terminal = Terminal::new(TestBackend::new(72, 20)).unwrap();
    terminal
        .draw(|frame| op_detail::draw(frame, frame.area(), &Ctx::new(&h.app, Theme::plain())))
        .unwrap();
    text_of(terminal.backend().buffer())
}

#[test]
fn the_cursor_pans_the_view_and_end_or_l_goes_back_to_the_live_edge() {
    let mut h = harness();
    zoomed(&mut h);
    press_n(&mut h, KeyCode::Char('>'), 3); // 20 µs a column: a view of 2 ms or less
    press_n(&mut h, KeyCode::Left, 20); // op 1000 at 0 µs: far left of the live edge
    assert_eq!(h.app.timeline.cursor.map(|s| s.op), Some(1000));
    assert!(h.app.timeline.pan_ns > 0, "the view panned back to the op");
    let text = timeline_widget(&h.app, 100, 8);
    assert!(
        text.contains(" back"),
        "the title says how far back:\n{text}"
    );
    assert!(
        cursor_cells(&text) > 0,
        "the cursor's op is in view:\n{text}"
    );
    h.press(KeyCode::End);
    assert_eq!(h.app.timeline.pan_ns, 0);
    h.press(KeyCode::Home);
    assert!(h.app.timeline.pan_ns > 0, "Home: the oldest retained time");
    h.press(KeyCode::Char('L'));
    assert_eq!(h.app.timeline.pan_ns, 0);
    assert_eq!(status(&h), "timeline: the live edge");
}

#[test]
fn zoom_keeps_the_cursors_op_in_view() {
    let mut h = harness();
    zoomed(&mut h);
    press_n(&mut h, KeyCode::Left, 10);
    press_n(&mut h, KeyCode::Char('>'), 7); // 1 µs a column
    assert_eq!(h.app.column_span().as_micros(), 1);
    let text = timeline_widget(&h.app, 100, 8);
    assert!(cursor_cells(&text) > 0, "the op stays in view:\n{text}");
    h.press(KeyCode::End);
    let text = timeline_widget(&h.app, 100, 8);
    assert_eq!(cursor_cells(&text), 0, "the live edge is past it:\n{text}");
}

/// Space pauses the workload and freezes the display; `f` freezes the display alone; the
/// footer says which.
#[test]
fn space_freezes_the_display_with_the_workload_and_f_freezes_it_alone() {
    let mut h = harness();
    h.press(KeyCode::Char(' '));
    assert!(h.app.paused && h.app.timeline.display_paused);
    let frozen = h.app.data().clone();
    h.frames(5);
    assert_eq!(h.app.data(), &frozen, "the display keeps its picture");
    assert!(h.screen(160, 48).contains("‖ workload and display paused"));
    h.press(KeyCode::Char(' '));
    assert!(!h.app.paused && !h.app.timeline.display_paused);
    h.press(KeyCode::Char('f'));
    assert!(!h.app.paused && h.app.timeline.display_paused);
    let frozen = h.app.data().clone();
    h.frames(3);
    assert_eq!(h.app.data(), &frozen);
    let screen = h.screen(160, 48);
    assert!(
        screen.contains("‖ display paused (the workload runs on)"),
        "{screen}"
    );
    assert!(
        h.source.snapshot().snapshot.at_ns > frozen.snapshot.at_ns,
        "it runs"
    );
    h.press(KeyCode::Char('f'));
    h.frames(1);
    assert_ne!(h.app.data(), &frozen, "the display takes frames again");
    assert!(!h.screen(160, 48).contains('‖'));
}

#[test]
fn enter_without_a_cursor_says_how_to_pick_an_op() {
    let mut h = harness();
    h.press(KeyCode::Tab);
    h.press(KeyCode::Enter);
    assert!(!h.app.timeline.detail);
    assert_eq!(
        status(&h),
        "no op selected: zoom in (>) until ops show, then ←/→ pick one"
    );
}
