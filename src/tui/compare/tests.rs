//! The compare view (`enginetop compare A B --view`) over two real recordings, written by the
//! recorder from hand-made events (so every figure is exact): run B has `cv-relu` twice as
//! slow, `cv-gemm` a little slower, `cv-sgd` faster, three `cv-copy`s an iteration for A's
//! one, and 4 inter-op threads for A's 2. Rendered into ratatui's `TestBackend` (snapshots at
//! 80x24 and 160x48) and driven through its key map; `tests/compare_view.rs` runs the
//! binary's `compare --view` end to end.
use std::path::PathBuf;

use super::keys::{action_for, COMPARE_KEYS};
use super::state::{CompareView, Mode};
use super::view;
use crate::record::synthetic::{compare_table_names, record_compare_pair};
use crate::record::{compare, load_profile, Comparison, OpTotals, RunProfile};
use crate::tui::Theme;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;

use crate::tui::tests::support::text_of;

/// `a.etrec` and `b.etrec`, the compare pair, in a fresh directory named for `test`.
fn recordings(test: &str) -> (PathBuf, PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!(
        "enginetop-compare-view-{test}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = record_compare_pair(&dir);
    (dir, a, b)
}

/// The comparison of the two recordings, their sources named as a person would type them.
fn slower_relu(test: &str) -> Comparison {
    let (dir, a, b) = recordings(test);
    let mut comparison = compare(&load_profile(&a).unwrap(), &load_profile(&b).unwrap());
    comparison.a.source = "a.etrec".into();
    comparison.b.source = "b.etrec".into();
    std::fs::remove_dir_all(dir).unwrap();
    comparison
}

/// The view drawn at `width` x `height`, one line per row.
fn screen(view: &CompareView, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal
        .draw(|frame| view::draw(frame, view, Theme::colored()))
        .unwrap();
    text_of(terminal.backend().buffer())
}

/// Presses `code` through the view's key map.
fn press(view: &mut CompareView, code: KeyCode) {
    let event = TermEvent::Key(KeyEvent::new(code, KeyModifiers::NONE));
    if let Some(action) = action_for(&event, view.mode) {
        view.update(action);
    }
}

#[test]
fn the_op_made_twice_as_slow_is_first_and_detailed() {
    let view = CompareView::new(slower_relu("snapshot"));
    for (width, height) in [(80, 24), (160, 48)] {
        let text = screen(&view, width, height);
        insta::assert_snapshot!(format!("slower_relu_{width}x{height}"), text);
        assert_eq!(
            compare_table_names(&text).first().map(String::as_str),
            Some("cv-relu"),
            "{text}"
        );
        assert!(text.contains("inter 2 → 4"), "{text}");
        assert!(
            text.contains(" cv-relu (1 of 4) "),
            "the detail names it:\n{text}"
        );
    }
    let first = view.selected_op().unwrap();
    assert_eq!(first.mean_us.ratio, Some(2.0));
    let share = view.share_of_step_change(first).unwrap();
    // 40 µs more per step of the step's 71 µs more.
    assert!((share - 40.0 / 71.0).abs() < 1e-9, "{share}");
}

#[test]
fn sort_keys_switch_the_order_and_the_title_says_which() {
    let mut view = CompareView::new(slower_relu("sort"));
    let first = |view: &CompareView| view.ops().next().unwrap().name.clone();
    let shown_first = |view: &CompareView| compare_table_names(&screen(view, 160, 48))[0].clone();
    assert_eq!(first(&view), "cv-relu");
    for (key, by, expected) in [
        ('r', "by ratio of totals", "cv-copy"),
        ('m', "by ratio of means", "cv-relu"),
        ('n', "by name", "cv-copy"),
        ('i', "by name (inverted)", "cv-sgd"),
        ('d', "by Δ total", "cv-relu"),
        ('i', "by Δ total (inverted)", "cv-sgd"),
        ('c', "by contribution to the step change", "cv-relu"),
    ] {
        press(&mut view, KeyCode::Char(key));
        let text = screen(&view, 160, 48);
        assert!(text.contains(by), "{key}: {text}");
        assert_eq!(
            (first(&view), shown_first(&view)),
            (expected.into(), expected.into()),
            "{key}"
        );
    }
    // ← and → step through the keys and wrap around.
    press(&mut view, KeyCode::Left);
    assert!(screen(&view, 160, 48).contains("by name"));
    press(&mut view, KeyCode::Right);
    press(&mut view, KeyCode::Right);
    assert!(screen(&view, 160, 48).contains("by Δ total"));
    // The selection moves with j and the detail follows it.
    press(&mut view, KeyCode::Char('j'));
    let second = view.ops().nth(1).unwrap().name.clone();
    assert!(screen(&view, 160, 48).contains(&format!(" {second} (2 of 4) ")));
}

#[test]
fn the_help_lists_every_key_and_closes() {
    let mut view = CompareView::new(slower_relu("help"));
    press(&mut view, KeyCode::Char('?'));
    assert_eq!(view.mode, Mode::Help);
    let text = screen(&view, 160, 48);
    for help in COMPARE_KEYS {
        assert!(text.contains(help.keys), "{} missing:\n{text}", help.keys);
    }
    press(&mut view, KeyCode::Char('q'));
    assert_eq!(view.mode, Mode::Normal);
    assert!(!view.should_quit);
    press(&mut view, KeyCode::Char('q'));
    assert!(view.should_quit);
}

/// A run with `count` op names, each taking `us(index)` µs once.
fn many_ops(count: usize, us: impl Fn(usize) -> u64) -> RunProfile {
    let mut profile = RunProfile {
        source: "many".into(),
        format: "chrome trace",
        ..RunProfile::default()
    };
    for index in 0..count {
        let totals = OpTotals {
            count: 1,
            total_ns: us(index) * 1_000,
        };
        profile.ops.insert(format!("op-{index:02}"), totals);
    }
    profile
}

#[test]
fn many_ops_scroll_with_the_selection_and_say_how_many_are_hidden() {
    // op-39 changed most, op-00 least.
    let a = many_ops(40, |_| 100);
    let b = many_ops(40, |index| 100 + index as u64);
    let mut view = CompareView::new(compare(&a, &b));
    let top = screen(&view, 80, 24);
    assert_eq!(compare_table_names(&top)[0], "op-39", "{top}");
    assert!(top.contains("↓ 33 more"), "{top}");
    press(&mut view, KeyCode::Char('G'));
    let bottom = screen(&view, 80, 24);
    let names = compare_table_names(&bottom);
    assert!(names.contains(&"op-00".to_string()), "{bottom}");
    assert!(!names.contains(&"op-39".to_string()), "{bottom}");
    assert!(bottom.contains("above"), "{bottom}");
    assert!(bottom.contains(" op-00 (40 of 40) "), "{bottom}");
    press(&mut view, KeyCode::Char('g'));
    assert_eq!(screen(&view, 80, 24), top);
    press(&mut view, KeyCode::PageDown);
    let page = view.selected;
    assert!(page > 1, "a page moves more than a row: {page}");
    // Chrome traces say no iterations: no per-step column, contribution by Δ total.
    assert!(!top.contains("Δ/step"), "{top}");
    assert!(top.contains("Δ total▼"), "{top}");
}

#[test]
fn under_its_minimum_size_the_view_says_so() {
    let view = CompareView::new(compare(&many_ops(3, |_| 1), &many_ops(3, |_| 2)));
    let text = screen(&view, 50, 10);
    assert!(text.contains("terminal too small: 50x10"), "{text}");
}
