//! The dashboard's own cost: at 10 frames a second, under 5% of one core means under 5 ms of
//! CPU per frame. Measured with 64 inter-op workers (two devices of 32, plus a GPU and the
//! intra-op pool) at 160x48 with a full history, as the thread's own CPU time (so a busy
//! machine does not inflate it), per frame: `App::observe` plus drawing (layout, every panel,
//! the buffer diff). The source's snapshot is the source's cost and is reported apart.

use std::time::{Duration, Instant};

use crate::tui::{history, view, DashboardSource, FakeOptions, Theme};

use super::support::Harness;
use ratatui::backend::TestBackend;
use ratatui::Terminal;

/// 5% of one core at 10 frames a second.
const BUDGET: Duration = Duration::from_millis(5);
const FRAMES: usize = 100;

/// CPU time of the calling thread (Linux), else wall time since an arbitrary start.
fn thread_time() -> Duration {
    let schedstat = std::fs::read_to_string("/proc/thread-self/schedstat").ok();
    let ns = schedstat.and_then(|text| text.split_whitespace().next()?.parse::<u64>().ok());
    match ns {
        Some(ns) => Duration::from_nanos(ns),
        None => {
            static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
            START.get_or_init(Instant::now).elapsed()
        }
    }
}

#[test]
fn a_frame_with_64_workers_costs_under_5_ms() {
    let mut h = Harness::new(FakeOptions::wide(2, 32), history::CAPACITY);
    let workers = h.app.data().snapshot.workers.len();
    assert!(workers >= 64, "{workers} workers");
    let mut terminal = Terminal::new(TestBackend::new(160, 48)).unwrap();
    // The clock may tick coarsely (schedstat moves at scheduler ticks): time whole loops.
    let start = thread_time();
    let frames: Vec<_> = (0..FRAMES).map(|_| h.source.snapshot()).collect();
    let source = (thread_time() - start) / FRAMES as u32;
    let start = thread_time();
    for data in frames {
        h.app.observe(data);
        terminal
            .draw(|frame| view::draw(frame, &h.app, Theme::colored()))
            .unwrap();
    }
    let ui = (thread_time() - start) / FRAMES as u32;
    println!(
        "per frame with {workers} workers at 160x48: dashboard {ui:?}, fake source {source:?}"
    );
    assert!(
        ui < BUDGET,
        "the dashboard takes {ui:?} a frame; the budget is {BUDGET:?}"
    );
}
