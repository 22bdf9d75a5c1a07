//! State tests: every key the help lists does what the help says, pressed through the real
//! key map into the `App`, with the controls it asks for applied by the `FakeSource` (as
//! `tui::run` does), and the outcome read back from the state, the source and the screen.

use std::path::PathBuf;

use super::support::Harness;
use crate::profiler::validate::validate_file;
use crate::profiler::DeviceId;
use crate::tui::app::Action;
use crate::tui::app::{Focus, Mode, SortColumn, StatusKind};
use crate::tui::input::{KeyHelp, KEYS};
use crate::tui::{DashboardSource, FakeOptions};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

fn trace_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("enginetop-tui-state-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn fresh() -> Harness {
    let options = FakeOptions {
        trace_dir: trace_dir(),
        ..FakeOptions::default()
    };
    Harness::new(options, 30)
}

fn op_names(harness: &Harness) -> Vec<String> {
    harness
        .app
        .visible_ops()
        .iter()
        .map(|op| op.name.clone())
        .collect()
}

/// Ops the dashboard's statistics have counted, over every op name.
fn ops_counted(harness: &Harness) -> u64 {
    let ops = &harness.app.data().snapshot.ops;
    ops.iter().map(|op| op.count).sum()
}

fn mean_throughput(harness: &Harness, frames: usize) -> f64 {
    let samples: Vec<f64> = harness
        .app
        .history()
        .newest(frames)
        .map(|s| s.ops_per_s)
        .collect();
    samples.iter().sum::<f64>() / samples.len() as f64
}

/// Presses `code` on a fresh dashboard and checks that `action` happened.
fn check(help: &KeyHelp, code: KeyCode, action: Action) {
    let mut h = fresh();
    let why = format!("{} ({:?}) should {}", help.keys, code, help.does);
    match action {
        Action::Quit => {
            h.press(code);
            assert!(h.app.should_quit, "{why}");
        }
        Action::ToggleHelp => {
            h.press(code);
            assert_eq!(h.app.mode, Mode::Help, "{why}");
            assert!(h.screen(80, 24).contains("show / hide this help"), "{why}");
            h.press(code);
            assert_eq!(h.app.mode, Mode::Normal, "{why}");
        }
        Action::ToggleWhy => {
            h.press(code);
            assert_eq!(h.app.mode, Mode::Why, "{why}");
            let screen = h.screen(120, 40);
            assert!(screen.contains("why it does not scale"), "{why}:\n{screen}");
            assert!(screen.contains("where each worker's time went"), "{why}");
            h.press(code);
            assert_eq!(h.app.mode, Mode::Normal, "{why}");
        }
        Action::TogglePause => check_pause(&mut h, code, &why),
        Action::Tune => {
            // The fake has no run to tune: the refusal says what it needs.
            h.press(code);
            let status = h.app.status.clone().expect("a refusal");
            assert!(
                status.text.contains("needs a live run"),
                "{why}: {status:?}"
            );
        }
        Action::TuneKeep | Action::TuneBack => {
            panic!("{why}: the tuner's choice keys are not in the help's key list")
        }
        Action::Replay(_) => panic!("{why}: the replay's keys are in their own list"),
        Action::FocusNext => {
            for expected in [Focus::Timeline, Focus::Ops, Focus::Devices] {
                h.press(code);
                assert_eq!(h.app.focus, expected, "{why}");
            }
        }
        Action::FocusPrev => {
            h.press(code);
            assert_eq!(h.app.focus, Focus::Ops, "{why}");
        }
        Action::Up | Action::Down | Action::Top | Action::Bottom => {
            check_rows(&mut h, code, action, &why)
        }
        Action::PageUp | Action::PageDown => check_pages(&mut h, code, action, &why),
        Action::Left | Action::Right => check_sideways(&mut h, code, action, &why),
        Action::InterOpUp | Action::InterOpDown => {
            let expected = if action == Action::InterOpUp { 5 } else { 3 };
            h.press(code);
            h.frames(1);
            assert_eq!(h.app.data().devices[0].inter_op, Some(expected), "{why}");
            let workers = h.app.data().snapshot.workers.iter();
            let cpu0 = workers
                .filter(|w| w.device.map(DeviceId::name) == Some("cpu0"))
                .count();
            assert_eq!(cpu0, expected, "{why}: the pool resized");
            assert!(
                h.screen(80, 24)
                    .contains(&format!("inter {expected} (cpu0)")),
                "{why}"
            );
            assert_eq!(
                h.app.status.as_ref().unwrap().text,
                format!("inter {expected} on cpu0")
            );
        }
        Action::IntraOpUp | Action::IntraOpDown => {
            let expected = if action == Action::IntraOpUp { 3 } else { 1 };
            h.press(code);
            h.frames(1);
            assert_eq!(h.app.data().facts.intra_op, expected, "{why}");
            assert!(
                h.screen(80, 24).contains(&format!("intra {expected}")),
                "{why}"
            );
        }
        Action::ZoomIn | Action::ZoomOut => {
            h.app.timeline.zoom = 16; // 200 ms
            h.press(code);
            let expected = if action == Action::ZoomIn { 100 } else { 500 };
            assert_eq!(h.app.column_span().as_millis(), expected, "{why}");
            let title = format!("{expected}ms/column");
            assert!(h.screen(160, 48).contains(&title), "{why}: {title}");
        }
        Action::ExportTrace => check_export(&mut h, code, &why),
        Action::ResetStats => {
            let before = ops_counted(&h);
            h.press(code);
            assert!(h.app.history().is_empty(), "{why}: the history restarts");
            h.frames(1);
            let after = ops_counted(&h);
            assert!(after < before / 10, "{why}: {before} -> {after}");
        }
        Action::InvertSort => {
            let before = op_names(&h);
            h.press(code);
            let mut after = op_names(&h);
            after.reverse();
            assert_eq!(before, after, "{why}");
        }
        Action::StartFilter => {
            h.press(code);
            assert_eq!(
                (h.app.mode, h.app.focus),
                (Mode::Filter, Focus::Ops),
                "{why}"
            );
            h.type_text("conv");
            assert_eq!(op_names(&h), ["conv2d"], "{why}");
            h.press(KeyCode::Enter);
            assert_eq!(h.app.mode, Mode::Normal, "Enter keeps the filter");
            assert_eq!(op_names(&h), ["conv2d"]);
        }
        Action::FilterCancel => {
            h.press(KeyCode::Char('/'));
            h.type_text("relu");
            h.press(KeyCode::Enter);
            h.press(code);
            assert!(h.app.filter.is_empty(), "{why}");
            assert_eq!(op_names(&h).len(), 12, "{why}");
        }
        Action::OpenDetail => {
            h.press(KeyCode::Tab); // the timeline: no op is under the cursor yet
            h.press(code);
            assert!(!h.app.timeline.detail, "{why}");
            let status = h.app.status.clone().expect("a refusal");
            assert!(
                status.text.starts_with("no op selected"),
                "{why}: {status:?}"
            );
        }
        Action::LiveEdge => {
            h.press(KeyCode::Tab);
            h.app.timeline.pan_ns = 1;
            h.press(code);
            assert_eq!(h.app.timeline.pan_ns, 0, "{why}");
        }
        Action::FreezeDisplay => {
            h.press(code);
            let frozen = h.app.data().clone();
            h.frames(3);
            assert_eq!(h.app.data(), &frozen, "{why}: the display is frozen");
            assert!(!h.app.paused, "{why}: the workload runs on");
            assert!(h.screen(80, 24).contains("display paused"), "{why}");
            h.press(code);
            h.frames(1);
            assert_ne!(h.app.data(), &frozen, "{why}: the display resumed");
        }
        Action::FilterChar(_) | Action::FilterBackspace | Action::FilterAccept => {
            unreachable!("typing keys are not in the help's key list: {why}")
        }
    }
}

/// Keys that arrive together (`+ + +` in one read, a held key) each count: they used to
/// ask for the same size, the one after the last frame's, so three presses grew by one.
#[test]
fn every_resize_key_of_a_burst_counts() {
    let mut h = fresh();
    for _ in 0..3 {
        h.press(KeyCode::Char('+'));
    }
    for _ in 0..3 {
        h.press(KeyCode::Char(']'));
    }
    h.frames(1);
    assert_eq!(h.app.data().devices[0].inter_op, Some(7));
    assert_eq!(h.app.data().facts.intra_op, 5);
    assert!(h.screen(80, 24).contains("inter 7 (cpu0)"));
    h.press(KeyCode::Char('-'));
    h.press(KeyCode::Char('-'));
    h.frames(1);
    assert_eq!(h.app.data().devices[0].inter_op, Some(5));
}

/// Space pauses the workload and freezes the display: the source's frames show no
/// throughput, the dashboard keeps its picture, and the footer says both are paused.
fn check_pause(h: &mut Harness, code: KeyCode, why: &str) {
    h.press(code);
    assert!(h.app.paused, "{why}");
    let screen = h.screen(80, 24);
    assert!(screen.contains("PAUSED"), "{why}");
    assert!(screen.contains("workload and display paused"), "{why}");
    let frozen = h.app.data().clone();
    h.frames(5);
    assert_eq!(h.app.data(), &frozen, "{why}: the display is frozen");
    let ops_per_s: f64 = h
        .source
        .snapshot()
        .snapshot
        .devices
        .iter()
        .map(|d| d.ops_per_s)
        .sum();
    assert_eq!(ops_per_s, 0.0, "{why}: the workload stops");
    h.press(code);
    assert!(!h.app.paused, "{why}");
    h.frames(5);
    assert!(mean_throughput(h, 5) > 0.0, "{why}: the workload resumes");
    assert!(h.screen(80, 24).contains("RUNNING"), "{why}");
}

fn check_rows(h: &mut Harness, code: KeyCode, action: Action, why: &str) {
    h.press(KeyCode::BackTab); // the ops table
    h.app.selected_op = 3;
    h.press(code);
    let last = h.app.visible_ops().len() - 1;
    let expected = match action {
        Action::Up => 2,
        Action::Down => 4,
        Action::Top => 0,
        _ => last,
    };
    assert_eq!(h.app.selected_op, expected, "{why}");
}

/// A page moves the selection by the rows the ops table showed at its last draw (several
/// at 80x24), stopping at either end.
fn check_pages(h: &mut Harness, code: KeyCode, action: Action, why: &str) {
    h.press(KeyCode::BackTab); // the ops table
    let last = h.app.visible_ops().len() - 1;
    h.screen(80, 24);
    h.app.selected_op = if action == Action::PageDown { 0 } else { last };
    h.press(code);
    let moved = h
        .app
        .selected_op
        .abs_diff(if action == Action::PageDown { 0 } else { last });
    assert!(moved > 1, "{why}: moved {moved} rows");
    h.press(code);
    h.press(code);
    h.press(code);
    let end = if action == Action::PageDown { last } else { 0 };
    assert_eq!(h.app.selected_op, end, "{why}");
}

fn check_sideways(h: &mut Harness, code: KeyCode, action: Action, why: &str) {
    let panels = h.app.data().devices.len();
    h.press(code);
    let expected = if action == Action::Right {
        1
    } else {
        panels - 1
    };
    assert_eq!(h.app.selected_device, expected, "{why}: pick a device");
    h.press(KeyCode::BackTab);
    h.press(code);
    let sort = if action == Action::Right {
        SortColumn::Mean
    } else {
        SortColumn::Count
    };
    assert_eq!(h.app.sort, sort, "{why}: pick the sort column");
}

fn check_export(h: &mut Harness, code: KeyCode, why: &str) {
    h.press(code);
    let status = h.app.status.clone().expect("a status line");
    assert_ne!(status.kind, StatusKind::Error, "{why}: {}", status.text);
    let path = status
        .text
        .strip_prefix("trace written to ")
        .and_then(|rest| rest.split(" (").next())
        .unwrap_or_else(|| panic!("{why}: {}", status.text));
    assert!(
        h.screen(160, 48).contains(path),
        "{why}: the path is on screen"
    );
    let summary = validate_file(path).unwrap_or_else(|problems| panic!("{why}: {problems}"));
    assert!(summary.slices > 0, "{why}: {summary:?}");
    std::fs::remove_file(path).unwrap();
}

#[test]
fn every_key_in_the_help_does_what_the_help_says() {
    for help in &KEYS {
        for &(code, action) in help.bindings {
            check(help, code, action);
        }
    }
}

#[test]
fn ctrl_c_quits_even_while_typing_a_filter_or_reading_the_help() {
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    for opener in [KeyCode::Char('/'), KeyCode::Char('?')] {
        let mut h = fresh();
        h.press(opener);
        h.press_key(ctrl_c);
        assert!(h.app.should_quit);
    }
    let mut h = fresh();
    h.press(KeyCode::Char('/'));
    h.press(KeyCode::Char('q'));
    assert!(!h.app.should_quit, "q types into the filter");
    assert_eq!(h.app.filter, "q");
}

#[test]
fn adding_workers_raises_the_throughput_in_the_sparkline() {
    let mut h = fresh();
    h.frames(20);
    let before = mean_throughput(&h, 20);
    h.press(KeyCode::Char('+'));
    h.press(KeyCode::Right);
    h.press(KeyCode::Char('+'));
    h.frames(20);
    let after = mean_throughput(&h, 20);
    assert!(after > before * 1.15, "{before:.0} -> {after:.0} ops/s");
}

#[test]
fn a_pool_keeps_one_worker_and_refusals_show_in_the_footer() {
    let mut h = fresh();
    for _ in 0..3 {
        h.press(KeyCode::Char('-'));
        h.frames(1);
    }
    assert_eq!(h.app.data().devices[0].inter_op, Some(1));
    h.press(KeyCode::Char('-'));
    let status = h.app.status.clone().unwrap();
    assert!(
        status.kind == StatusKind::Error && status.text.contains("at least 1"),
        "{status:?}"
    );
    for _ in 0..40 {
        h.press(KeyCode::Char(']'));
        h.frames(1);
    }
    let status = h.app.status.clone().unwrap();
    assert!(
        status.kind == StatusKind::Error && status.text.contains("1 to 32"),
        "{status:?}"
    );
    assert!(h.screen(80, 24).contains("1 to 32"));
}

/// The header's settings row (the second row of the screen).
fn settings_row(h: &Harness) -> String {
    h.screen(160, 48).lines().nth(1).unwrap().to_string()
}

/// Each device's inter-op count and the intra-op count, from the source's latest frame.
fn pool_sizes(h: &mut Harness) -> (Vec<Option<usize>>, usize) {
    h.frames(1);
    let data = h.app.data();
    let inter = data.devices.iter().map(|device| device.inter_op).collect();
    (inter, data.facts.intra_op)
}

/// For every selection the header names what `+`/`-` change, and `+` changes just that.
#[test]
fn the_header_says_what_plus_changes_for_every_selection() {
    let mut h = fresh();
    let titles: Vec<String> = h
        .app
        .data()
        .devices
        .iter()
        .map(|d| d.title.clone())
        .collect();
    assert_eq!(titles, ["cpu0", "cpu1", "gpu0", "intra-op"]);
    // Each `+` below lands: cpu0 has 5 workers from the second selection on.
    let expected_headers = [
        " +/- inter 4 (cpu0)  intra 2 │",
        " +/- inter 4 (cpu1)  intra 2 │",
        " inter 5 (cpu0)  intra 2  +/-: nothing on gpu0 │",
        " inter 5 (cpu0)  +/- intra 2 │",
    ];
    for (selected, header) in expected_headers.into_iter().enumerate() {
        h.app.selected_device = selected;
        let row = settings_row(&h);
        assert!(row.starts_with(header), "{}: {row}", titles[selected]);
        let (inter_before, intra_before) = pool_sizes(&mut h);
        h.press(KeyCode::Char('+'));
        let (inter_after, intra_after) = pool_sizes(&mut h);
        let mut inter_expected = inter_before.clone();
        let mut intra_expected = intra_before;
        match titles[selected].as_str() {
            "intra-op" => intra_expected += 1,
            "gpu0" => {
                let status = h.app.status.clone().unwrap();
                assert_eq!(status.kind, StatusKind::Error, "{status:?}");
            }
            _ => inter_expected[selected] = inter_expected[selected].map(|n| n + 1),
        }
        assert_eq!(inter_after, inter_expected, "{}", titles[selected]);
        assert_eq!(intra_after, intra_expected, "{}", titles[selected]);
    }
    // Once finished, nothing is marked: `+` resizes nothing.
    let finished = FakeOptions {
        finish_after: Some(5),
        ..FakeOptions::default()
    };
    let h = Harness::new(finished, 5);
    assert!(settings_row(&h).starts_with(" inter 4 (cpu0)  intra 2 │"));
}

#[test]
fn a_finished_workload_freezes_and_cannot_be_paused() {
    let options = FakeOptions {
        finish_after: Some(35),
        ..FakeOptions::default()
    };
    let mut h = Harness::new(options, 35);
    assert!(h.app.is_finished());
    let frozen = h.app.data().clone();
    h.frames(10);
    assert_eq!(h.app.data(), &frozen);
    h.press(KeyCode::Char(' '));
    assert!(!h.app.paused);
    assert_eq!(h.app.status.as_ref().unwrap().kind, StatusKind::Error);
    assert!(h.screen(80, 24).contains("FINISHED"));
    // The source itself keeps answering with the final frame.
    assert!(h.source.snapshot().facts.finished);
}
