//! The timeline's navigation: zoom (1 µs to 10 s a column), pan through the retained history,
//! a cursor over the op spans of one worker row, the op detail, and the display pause. Pure
//! state, like the rest of [`App`](super::app::App): [`TimelineNav::update`] takes an action
//! with what it needs of the frame ([`NavFrame`]) and says whether it took it.
//!
//! The time axis: the view's right edge is `pan_ns` behind the live edge ([`NavFrame::edge_ns`]:
//! the newest span's end, or the newest frame while no span is held), and it is as wide as the
//! columns last drawn times the zoom's span. A column finer than the frame period shows op
//! spans ([`TimelineNav::shows_spans`]); a coarser one the frames' sampled states.
//!
//! Keys, with the timeline focused: ←/→ (h/l) move the cursor to the previous / next op on the
//! cursor's row and pan to keep it in view (at a zoom that shows no spans, or on a row with no
//! ops, they pan a quarter of the view); ↑/↓ change rows (the cursor goes to the op nearest in
//! time); Home/g go to the oldest retained time, End/G and `L` back to the live edge; Enter
//! opens the cursor op's detail, Esc closes it. `<`/`>` zoom anywhere; with a cursor the zoom
//! keeps its op in view. Space pauses the workload and freezes the display together; `f`
//! freezes the display alone (the workload runs on).
#![forbid(unsafe_code)]

use std::cell::Cell;
use std::time::Duration;

use super::app::Action;
use super::history::History;
use super::panels::device_panels;
use super::source::DashboardData;
use super::view::format;
use crate::profiler::spans::{OpSpan, SpanSnapshot};

const fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Timeline zoom levels, the time one column covers: 1-2-5 steps from 1 µs to 10 s.
pub(crate) const ZOOM_LEVELS: [Duration; 22] = [
    us(1),
    us(2),
    us(5),
    us(10),
    us(20),
    us(50),
    us(100),
    us(200),
    us(500),
    ms(1),
    ms(2),
    ms(5),
    ms(10),
    ms(20),
    ms(50),
    ms(100),
    ms(200),
    ms(500),
    ms(1_000),
    ms(2_000),
    ms(5_000),
    ms(10_000),
];

/// The zoom a dashboard starts at: 100 ms a column (a frame a column at 10 frames a second).
pub(crate) const DEFAULT_ZOOM: usize = 15;

/// The dashboard's frame period (at its 10 frames a second): a column finer than this shows
/// op spans. A nominal figure, not the gap between the last frames, so that frames coming
/// late under load do not change what the timeline draws.
pub(crate) const FRAME_PERIOD: Duration = ms(100);

/// Columns assumed before the timeline was first drawn.
const DEFAULT_COLUMNS: usize = 100;

/// What an action did, for the status line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Said {
    /// Nothing to say.
    Nothing,
    /// What it did.
    Info(String),
    /// Why it did nothing.
    Refused(String),
}

/// One timeline row: a worker's thread id and its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NavRow {
    /// Its thread (what spans carry).
    pub(crate) thread: u32,
    /// Its name (`cpu0-w1`).
    pub(crate) name: String,
}

/// The timeline's rows for `data`: every panel's workers, in panel order.
pub(crate) fn rows_of(data: &DashboardData) -> Vec<NavRow> {
    let panels = device_panels(data);
    panels
        .iter()
        .flat_map(|panel| panel.all_workers())
        .map(|worker| NavRow {
            thread: worker.thread,
            name: worker.name.clone(),
        })
        .collect()
}

/// What navigation reads of the frame shown.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NavFrame<'a> {
    /// The timeline's rows, in order.
    pub(crate) rows: &'a [NavRow],
    /// The op spans held.
    pub(crate) spans: &'a SpanSnapshot,
    /// The frames remembered.
    pub(crate) history: &'a History,
    /// The newest frame's time (ns, the profiler's clock).
    pub(crate) now_ns: u64,
}

impl NavFrame<'_> {
    /// The live edge at a zoom that `spans` (shows spans): the newest span's end (else the
    /// newest frame); else the newest frame.
    pub(crate) fn edge_ns(&self, spans: bool) -> u64 {
        let newest_frame = self
            .history
            .samples()
            .next_back()
            .map_or(self.now_ns, |s| s.taken_ns);
        if !spans {
            return newest_frame;
        }
        let newest_span = self.spans.iter().map(|s| s.end_ns).max();
        newest_span.unwrap_or(newest_frame)
    }

    /// The oldest time anything is retained for (a span's start or a frame).
    pub(crate) fn oldest_ns(&self) -> u64 {
        let oldest_span = self.spans.iter().map(|s| s.start_ns).min();
        let oldest_frame = self.history.samples().next().map(|s| s.taken_ns);
        oldest_span
            .into_iter()
            .chain(oldest_frame)
            .min()
            .unwrap_or(self.now_ns)
    }

    /// `row`'s spans, by start.
    pub(crate) fn row_spans(&self, row: usize) -> Vec<OpSpan> {
        let Some(thread) = self.rows.get(row).map(|r| r.thread) else {
            return Vec::new();
        };
        let mut spans: Vec<OpSpan> = self
            .spans
            .iter()
            .filter(|s| s.thread.id() == thread)
            .copied()
            .collect();
        spans.sort_by_key(|s| (s.start_ns, s.op));
        spans
    }
}

/// The timeline's navigation state (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct TimelineNav {
    /// Index into [`ZOOM_LEVELS`].
    pub(crate) zoom: usize,
    /// How far the view's right edge is behind the live edge (ns).
    pub(crate) pan_ns: u64,
    /// The cursor's row (index into the timeline's rows).
    pub(crate) row: usize,
    /// The op under the cursor, as it was when picked.
    pub(crate) cursor: Option<OpSpan>,
    /// Whether the cursor op's detail is open.
    pub(crate) detail: bool,
    /// Whether the display is frozen (new frames are not taken).
    pub(crate) display_paused: bool,
    /// Columns the timeline drew last (0: not drawn yet).
    pub(crate) columns: Cell<usize>,
}

impl Default for TimelineNav {
    fn default() -> Self {
        TimelineNav {
            zoom: DEFAULT_ZOOM,
            pan_ns: 0,
            row: 0,
            cursor: None,
            detail: false,
            display_paused: false,
            columns: Cell::new(0),
        }
    }
}

impl TimelineNav {
    /// The time one column covers.
    pub(crate) fn column_span(&self) -> Duration {
        ZOOM_LEVELS[self.zoom.min(ZOOM_LEVELS.len() - 1)]
    }

    /// Whether a column is finer than the [`FRAME_PERIOD`]: the timeline draws op spans,
    /// not the frames' samples.
    pub(crate) fn shows_spans(&self) -> bool {
        self.column_span() < FRAME_PERIOD
    }

    /// The time the view covers (ns): the columns last drawn times the column's span.
    pub(crate) fn view_ns(&self) -> u64 {
        let columns = match self.columns.get() {
            0 => DEFAULT_COLUMNS,
            drawn => drawn,
        };
        columns as u64 * self.column_span().as_nanos() as u64
    }

    /// The view's right edge for live edge `edge_ns`.
    pub(crate) fn right_ns(&self, edge_ns: u64) -> u64 {
        edge_ns.saturating_sub(self.pan_ns)
    }

    /// Takes `action` if it is the timeline's (`focused`: the timeline has the focus);
    /// `None` leaves it to the rest of the dashboard. Zoom and the display pause act in any
    /// focus; the cursor and pan keys only with the timeline focused or its detail open.
    pub(crate) fn update(
        &mut self,
        action: Action,
        frame: &NavFrame<'_>,
        focused: bool,
    ) -> Option<Said> {
        match action {
            Action::ZoomIn => return Some(self.zoom_by(-1, frame)),
            Action::ZoomOut => return Some(self.zoom_by(1, frame)),
            Action::FreezeDisplay => return Some(self.toggle_display()),
            Action::FocusNext | Action::FocusPrev => self.detail = false,
            Action::FilterCancel if self.detail => {
                self.detail = false;
                return Some(Said::Nothing);
            }
            _ => {}
        }
        if !(focused || self.detail) {
            return None;
        }
        let said = match action {
            Action::Left => self.step(-1, frame),
            Action::Right => self.step(1, frame),
            Action::Up | Action::Down | Action::PageUp | Action::PageDown => {
                self.change_row(action, frame)
            }
            Action::Top => self.pan_to(u64::MAX, frame, "the oldest retained time"),
            Action::Bottom | Action::LiveEdge => self.pan_to(0, frame, "the live edge"),
            Action::OpenDetail => self.open_detail(),
            _ => return None,
        };
        Some(said)
    }

    fn zoom_by(&mut self, by: isize, frame: &NavFrame<'_>) -> Said {
        let last = ZOOM_LEVELS.len() - 1;
        let zoom = self.zoom.min(last).saturating_add_signed(by).min(last);
        let per_column = format::nanos(ZOOM_LEVELS[zoom].as_nanos() as f64);
        if zoom == self.zoom {
            let end = if by < 0 { "finest" } else { "widest" };
            return Said::Refused(format!("already at the {end} zoom ({per_column} a column)"));
        }
        self.zoom = zoom;
        if let Some(cursor) = self.cursor {
            self.keep_in_view(&cursor, frame);
        }
        let what = if self.shows_spans() {
            "ops"
        } else {
            "sampled states"
        };
        Said::Info(format!("timeline: {per_column} a column ({what})"))
    }

    fn toggle_display(&mut self) -> Said {
        self.display_paused = !self.display_paused;
        Said::Info(
            match self.display_paused {
                true => "display paused: ←/→ pan it, f resumes it (the workload runs on)",
                false => "display resumed",
            }
            .into(),
        )
    }

    fn open_detail(&mut self) -> Said {
        if self.cursor.is_none() {
            return Said::Refused(
                "no op selected: zoom in (>) until ops show, then ←/→ pick one".into(),
            );
        }
        self.detail = !self.detail;
        Said::Nothing
    }

    /// ←/→: the previous / next op on the cursor's row; a quarter view when there is none to
    /// go to (no spans at this zoom, or none on the row).
    fn step(&mut self, by: i64, frame: &NavFrame<'_>) -> Said {
        let spans_shown = self.shows_spans();
        let row = frame.row_spans(self.row);
        if !spans_shown || row.is_empty() {
            return self.pan_by(by, frame);
        }
        let edge = frame.edge_ns(true);
        let right = self.right_ns(edge);
        let left = right.saturating_sub(self.view_ns());
        let next = match (self.cursor, by < 0) {
            (Some(at), true) => row
                .iter()
                .rev()
                .find(|s| (s.start_ns, s.op) < (at.start_ns, at.op)),
            (Some(at), false) => row
                .iter()
                .find(|s| (s.start_ns, s.op) > (at.start_ns, at.op)),
            (None, true) => row.iter().rev().find(|s| s.start_ns <= right),
            (None, false) => row.iter().find(|s| s.end_ns >= left),
        };
        let Some(&next) = next else {
            let (way, name) = (
                if by < 0 { "earlier" } else { "later" },
                &frame.rows[self.row].name,
            );
            return Said::Refused(format!("no {way} op on {name} in the retained history"));
        };
        self.cursor = Some(next);
        self.keep_in_view(&next, frame);
        Said::Nothing
    }

    /// Pans a quarter of the view back (`by` < 0) or forward, within the retained history.
    fn pan_by(&mut self, by: i64, frame: &NavFrame<'_>) -> Said {
        let quarter = (self.view_ns() / 4).max(1);
        let pan = match by < 0 {
            true => self.pan_ns.saturating_add(quarter),
            false => self.pan_ns.saturating_sub(quarter),
        };
        self.pan_ns = self.clamped_pan(pan, frame);
        Said::Nothing
    }

    /// Pans to `pan_ns` (clamped to the retained history), saying where it went.
    fn pan_to(&mut self, pan_ns: u64, frame: &NavFrame<'_>, what: &str) -> Said {
        self.pan_ns = self.clamped_pan(pan_ns, frame);
        Said::Info(format!("timeline: {what}"))
    }

    /// `pan_ns` kept within the retained history: the right edge never before the oldest
    /// retained time.
    fn clamped_pan(&self, pan_ns: u64, frame: &NavFrame<'_>) -> u64 {
        let edge = frame.edge_ns(self.shows_spans());
        let oldest = frame.oldest_ns().saturating_add(self.view_ns());
        pan_ns.min(edge.saturating_sub(oldest))
    }

    /// Pans so that `span` shows whole (centred, when it did not), never past the live edge.
    fn keep_in_view(&mut self, span: &OpSpan, frame: &NavFrame<'_>) {
        let edge = frame.edge_ns(self.shows_spans());
        let view = self.view_ns();
        let right = self.right_ns(edge);
        let left = right.saturating_sub(view);
        if span.start_ns >= left && span.end_ns <= right {
            return;
        }
        let middle = span.start_ns / 2 + span.end_ns / 2;
        self.pan_ns = edge.saturating_sub(middle.saturating_add(view / 2));
    }

    /// ↑/↓ (a page with PgUp/PgDn): the cursor's row; the cursor goes to the op of the new
    /// row nearest in time to the one it was on.
    fn change_row(&mut self, action: Action, frame: &NavFrame<'_>) -> Said {
        let last = frame.rows.len().saturating_sub(1);
        let page = 10;
        self.row = match action {
            Action::Up => self.row.saturating_sub(1),
            Action::Down => self.row + 1,
            Action::PageUp => self.row.saturating_sub(page),
            _ => self.row + page,
        }
        .min(last);
        let Some(was) = self.cursor else {
            return Said::Nothing;
        };
        let at = was.start_ns / 2 + was.end_ns / 2;
        let distance = |s: &OpSpan| {
            let within = s.start_ns <= at && at <= s.end_ns;
            (!within, s.start_ns.abs_diff(at).min(s.end_ns.abs_diff(at)))
        };
        self.cursor = frame.row_spans(self.row).into_iter().min_by_key(distance);
        match self.cursor {
            Some(span) => self.keep_in_view(&span, frame),
            None => self.detail = false,
        }
        Said::Nothing
    }

    /// Keeps the cursor's row within `rows` rows.
    pub(crate) fn clamp_row(&mut self, rows: usize) {
        self.row = self.row.min(rows.saturating_sub(1));
    }

    /// The first row to show so that the cursor's row is among `visible` rows shown from
    /// `scroll` on.
    pub(crate) fn scroll_for_row(&self, scroll: usize, visible: usize) -> usize {
        let visible = visible.max(1);
        if self.row < scroll {
            self.row
        } else if self.row >= scroll + visible {
            self.row + 1 - visible
        } else {
            scroll
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::profiler::{DeviceId, OpName, ThreadId};

    fn span(op: u64, thread: u32, start_us: u64, end_us: u64) -> OpSpan {
        OpSpan {
            op,
            name: OpName::new("nav-op"),
            device: DeviceId::HOST,
            thread: ThreadId::from_raw(thread),
            queued_ns: Some(start_us * 1_000 - 500),
            start_ns: start_us * 1_000,
            end_ns: end_us * 1_000,
            priority: 0,
            error: false,
            stream: None,
        }
    }

    fn rows() -> Vec<NavRow> {
        [(1, "cpu0-w0"), (2, "cpu0-w1")]
            .into_iter()
            .map(|(thread, name)| NavRow {
                thread,
                name: name.into(),
            })
            .collect()
    }

    /// Row 0 (thread 1): ops 1, 2, 3 at 100, 200, 300 µs (50 µs each); row 1 (thread 2):
    /// op 10 at 190-260 µs.
    fn spans() -> SpanSnapshot {
        SpanSnapshot::from_spans(vec![
            span(3, 1, 300, 350),
            span(1, 1, 100, 150),
            span(10, 2, 190, 260),
            span(2, 1, 200, 250),
        ])
    }

    fn with<R>(f: impl FnOnce(&NavFrame<'_>) -> R) -> R {
        let (rows, spans, history) = (rows(), spans(), History::default());
        let frame = NavFrame {
            rows: &rows,
            spans: &spans,
            history: &history,
            now_ns: 1_000_000,
        };
        f(&frame)
    }

    /// A nav at 10 µs a column over 40 columns (a 400 µs view).
    fn nav() -> TimelineNav {
        let nav = TimelineNav {
            zoom: 3,
            ..TimelineNav::default()
        };
        nav.columns.set(40);
        nav
    }

    #[test]
    fn zoom_goes_from_one_microsecond_to_ten_seconds_and_says_the_ends() {
        with(|frame| {
            let mut nav = TimelineNav::default();
            assert_eq!(nav.column_span(), Duration::from_millis(100));
            assert!(!nav.shows_spans(), "a frame a column: samples");
            let said = nav.update(Action::ZoomIn, frame, false).unwrap();
            assert_eq!(said, Said::Info("timeline: 50.0ms a column (ops)".into()));
            nav.zoom = 0;
            assert_eq!(nav.column_span(), Duration::from_micros(1));
            let said = nav.update(Action::ZoomIn, frame, false).unwrap();
            assert_eq!(
                said,
                Said::Refused("already at the finest zoom (1.00µs a column)".into())
            );
            nav.zoom = ZOOM_LEVELS.len() - 1;
            let said = nav.update(Action::ZoomOut, frame, false).unwrap();
            assert_eq!(
                said,
                Said::Refused("already at the widest zoom (10.0s a column)".into())
            );
        });
    }

    #[test]
    fn left_and_right_walk_the_rows_ops_in_time_order_and_stop_at_the_ends() {
        with(|frame| {
            let mut nav = nav();
            assert_eq!(nav.update(Action::Left, frame, false), None, "unfocused");
            let ops = |nav: &TimelineNav| nav.cursor.map(|s| s.op);
            nav.update(Action::Left, frame, true);
            assert_eq!(ops(&nav), Some(3), "the newest op in view first");
            nav.update(Action::Left, frame, true);
            nav.update(Action::Left, frame, true);
            assert_eq!(ops(&nav), Some(1));
            let said = nav.update(Action::Left, frame, true).unwrap();
            assert_eq!(
                said,
                Said::Refused("no earlier op on cpu0-w0 in the retained history".into())
            );
            nav.update(Action::Right, frame, true);
            assert_eq!(ops(&nav), Some(2));
        });
    }

    #[test]
    fn a_row_change_picks_the_op_nearest_in_time_and_enter_opens_its_detail() {
        with(|frame| {
            let mut nav = nav();
            let said = nav.update(Action::OpenDetail, frame, true).unwrap();
            assert!(matches!(said, Said::Refused(text) if text.starts_with("no op selected")));
            nav.update(Action::Left, frame, true);
            nav.update(Action::Left, frame, true); // op 2, 200-250 µs
            nav.update(Action::Down, frame, true);
            assert_eq!((nav.row, nav.cursor.map(|s| s.op)), (1, Some(10)));
            nav.update(Action::Down, frame, true);
            assert_eq!(nav.row, 1, "the last row stays");
            nav.update(Action::OpenDetail, frame, true);
            assert!(nav.detail);
            // Esc closes the detail, whatever has the focus.
            assert_eq!(
                nav.update(Action::FilterCancel, frame, false),
                Some(Said::Nothing)
            );
            assert!(!nav.detail);
            assert_eq!(nav.update(Action::FilterCancel, frame, true), None);
        });
    }

    /// A cursor on an op out of view pans to it; Home goes back to the oldest retained time
    /// and End to the live edge; the view never goes before the history.
    #[test]
    fn pans_follow_the_cursor_and_stay_within_the_history() {
        with(|frame| {
            let mut nav = nav();
            nav.zoom = 0; // 1 µs a column: a 40 µs view
            let edge = frame.edge_ns(true);
            assert_eq!(edge, 350_000);
            nav.update(Action::Left, frame, true);
            nav.update(Action::Left, frame, true); // op 2, 200-250 µs
            let right = nav.right_ns(edge);
            let left = right - nav.view_ns();
            let op = nav.cursor.unwrap();
            let middle = op.start_ns / 2 + op.end_ns / 2;
            assert!(left <= middle && middle <= right, "{left}..{right}: {op:?}");
            nav.update(Action::Top, frame, true);
            assert_eq!(
                nav.right_ns(edge),
                100_000 + 40_000,
                "the oldest start, a view in"
            );
            nav.update(Action::Bottom, frame, true);
            assert_eq!(nav.pan_ns, 0);
            // On a row without ops (or at a zoom without spans), ←/→ pan a quarter view.
            let mut coarse = TimelineNav::default();
            coarse.columns.set(40);
            coarse.pan_ns = 0;
            coarse.update(Action::Left, frame, true);
            assert_eq!(coarse.pan_ns, 0, "nothing older than the newest frame here");
        });
    }

    #[test]
    fn f_freezes_the_display_alone() {
        with(|frame| {
            let mut nav = TimelineNav::default();
            let said = nav.update(Action::FreezeDisplay, frame, false).unwrap();
            assert!(nav.display_paused);
            assert!(matches!(said, Said::Info(text) if text.starts_with("display paused")));
            nav.update(Action::FreezeDisplay, frame, false);
            assert!(!nav.display_paused);
        });
    }

    #[test]
    fn the_scroll_follows_the_cursors_row() {
        let mut nav = TimelineNav {
            row: 12,
            ..TimelineNav::default()
        };
        assert_eq!(nav.scroll_for_row(0, 5), 8);
        assert_eq!(nav.scroll_for_row(10, 5), 10);
        nav.row = 2;
        assert_eq!(nav.scroll_for_row(10, 5), 2);
        nav.clamp_row(2);
        assert_eq!(nav.row, 1);
    }
}
