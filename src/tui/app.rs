//! The dashboard's state, as a pure state machine: [`App::observe`] takes each frame's
//! data, [`App::update`] takes each [`Action`] and may answer with a [`Control`] for the
//! source, whose outcome comes back through [`App::control_done`]. Nothing here touches the
//! terminal or the clock, so the state tests drive it directly.
#![forbid(unsafe_code)]

use super::history::History;
use super::panels::device_panels;
use super::source::{Control, ControlError, DashboardData};
use crate::profiler::stats::OpSnapshot;

/// Timeline zoom levels: frames per column.
pub const ZOOM_LEVELS: [usize; 5] = [1, 2, 4, 8, 16];

/// What the user asked for (from a key, see [`input`](super::input)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Leave the dashboard.
    Quit,
    /// Show or hide the help overlay.
    ToggleHelp,
    /// Pause or resume the workload.
    TogglePause,
    /// Focus the next panel.
    FocusNext,
    /// Focus the previous panel.
    FocusPrev,
    /// Up a row.
    Up,
    /// Down a row.
    Down,
    /// Previous device, or previous sort column in the ops table.
    Left,
    /// Next device, or next sort column in the ops table.
    Right,
    /// First row.
    Top,
    /// Last row.
    Bottom,
    /// One more inter-op worker on the selected device.
    InterOpUp,
    /// One inter-op worker fewer on the selected device.
    InterOpDown,
    /// One more intra-op thread.
    IntraOpUp,
    /// One intra-op thread fewer.
    IntraOpDown,
    /// Fewer seconds in the timeline.
    ZoomIn,
    /// More seconds in the timeline.
    ZoomOut,
    /// Export the trace window.
    ExportTrace,
    /// Reset the statistics.
    ResetStats,
    /// Invert the ops table's order.
    InvertSort,
    /// Start typing an ops filter.
    StartFilter,
    /// A character of the filter.
    FilterChar(char),
    /// Delete the filter's last character.
    FilterBackspace,
    /// Keep the filter and stop typing.
    FilterAccept,
    /// Drop the filter and stop typing.
    FilterCancel,
}

/// The panel that arrows act on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Focus {
    /// The device panels: arrows pick a device and scroll its workers.
    #[default]
    Devices,
    /// The timeline: up/down scroll its rows.
    Timeline,
    /// The ops table: up/down select, left/right pick the sort column.
    Ops,
}

impl Focus {
    fn next(self) -> Focus {
        match self {
            Focus::Devices => Focus::Timeline,
            Focus::Timeline => Focus::Ops,
            Focus::Ops => Focus::Devices,
        }
    }

    fn prev(self) -> Focus {
        self.next().next()
    }
}

/// How keys are read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Keys are commands.
    #[default]
    Normal,
    /// The help overlay is up.
    Help,
    /// Keys type the ops filter.
    Filter,
}

/// The ops table's columns, in order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SortColumn {
    /// Op name.
    Name,
    /// Ops finished.
    Count,
    /// Total time.
    #[default]
    Total,
    /// Mean time.
    Mean,
    /// 99th percentile.
    P99,
}

impl SortColumn {
    /// Every column, left to right.
    pub const ALL: [SortColumn; 5] = [
        SortColumn::Name,
        SortColumn::Count,
        SortColumn::Total,
        SortColumn::Mean,
        SortColumn::P99,
    ];

    /// The column's heading.
    pub fn heading(self) -> &'static str {
        match self {
            SortColumn::Name => "op",
            SortColumn::Count => "count",
            SortColumn::Total => "total",
            SortColumn::Mean => "mean",
            SortColumn::P99 => "p99",
        }
    }

    fn shifted(self, by: isize) -> SortColumn {
        let index = Self::ALL.iter().position(|&c| c == self).unwrap_or(0) as isize;
        let count = Self::ALL.len() as isize;
        Self::ALL[(index + by).rem_euclid(count) as usize]
    }
}

/// The footer's status line: the last control's outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    /// What to show.
    pub text: String,
    /// Whether it is an error.
    pub is_error: bool,
}

/// The dashboard's whole state.
#[derive(Clone, Debug, Default)]
pub struct App {
    data: DashboardData,
    history: History,
    /// Whether the workload was paused by us.
    pub paused: bool,
    /// Whether the user asked to quit.
    pub should_quit: bool,
    /// How keys are read.
    pub mode: Mode,
    /// The panel arrows act on.
    pub focus: Focus,
    /// The selected device panel (target of `+`/`-`).
    pub selected_device: usize,
    /// First worker row shown in the selected device panel.
    pub device_scroll: usize,
    /// First row shown in the timeline.
    pub timeline_scroll: usize,
    /// Index into [`ZOOM_LEVELS`].
    pub zoom: usize,
    /// The ops table's sort column.
    pub sort: SortColumn,
    /// Whether the ops table is in ascending order (descending by default, names ascending).
    pub ascending: bool,
    /// The ops filter (case-insensitive substring of the name).
    pub filter: String,
    /// The selected row of the ops table.
    pub selected_op: usize,
    /// The last control's outcome.
    pub status: Option<Status>,
}

impl App {
    /// A dashboard with nothing observed yet.
    pub fn new() -> Self {
        App::default()
    }

    /// The latest frame's data.
    pub fn data(&self) -> &DashboardData {
        &self.data
    }

    /// What the dashboard remembers of earlier frames.
    pub fn history(&self) -> &History {
        &self.history
    }

    /// Whether the workload finished (the data no longer changes).
    pub fn is_finished(&self) -> bool {
        self.data.facts.finished
    }

    /// Takes a new frame's data: remembers it and adds it to the history. Once the
    /// workload has finished, the final frame stays and later ones are ignored.
    pub fn observe(&mut self, data: DashboardData) {
        if self.is_finished() {
            return;
        }
        self.history.record(&data);
        self.data = data;
        self.clamp_selection();
    }

    /// Frames per timeline column at the current zoom.
    pub fn frames_per_column(&self) -> usize {
        ZOOM_LEVELS[self.zoom.min(ZOOM_LEVELS.len() - 1)]
    }

    /// The ops table's rows: filtered, then sorted.
    pub fn visible_ops(&self) -> Vec<&OpSnapshot> {
        let filter = self.filter.to_lowercase();
        let mut ops: Vec<&OpSnapshot> = self
            .data
            .snapshot
            .ops
            .iter()
            .filter(|op| op.name.to_lowercase().contains(&filter))
            .collect();
        ops.sort_by(|a, b| {
            let order = match self.sort {
                SortColumn::Name => b.name.cmp(&a.name),
                SortColumn::Count => a.count.cmp(&b.count),
                SortColumn::Total => a.total_ns.cmp(&b.total_ns),
                SortColumn::Mean => a.mean_ns.total_cmp(&b.mean_ns),
                SortColumn::P99 => a.p99_ns.cmp(&b.p99_ns),
            };
            let order = order.then_with(|| b.name.cmp(&a.name));
            if self.ascending {
                order
            } else {
                order.reverse()
            }
        });
        ops
    }

    /// The selected device's title and inter-op count, if it can be resized; else the
    /// first device that can.
    pub fn inter_op_target(&self) -> Option<(String, usize)> {
        let resizable: Vec<(usize, String, usize)> = device_panels(&self.data)
            .iter()
            .enumerate()
            .filter_map(|(index, panel)| {
                Some((index, panel.title().to_string(), panel.layout.inter_op?))
            })
            .collect();
        let chosen = resizable
            .iter()
            .find(|(index, ..)| *index == self.selected_device)
            .or(resizable.first())?;
        Some((chosen.1.clone(), chosen.2))
    }

    /// Applies `action`; returns the control to send to the source, if any.
    pub fn update(&mut self, action: Action) -> Option<Control> {
        match self.mode {
            Mode::Help => self.update_help(action),
            Mode::Filter => self.update_filter(action),
            Mode::Normal => self.update_normal(action),
        }
    }

    fn update_help(&mut self, action: Action) -> Option<Control> {
        match action {
            Action::Quit => self.should_quit = true,
            Action::ToggleHelp => self.mode = Mode::Normal,
            _ => {}
        }
        None
    }

    fn update_filter(&mut self, action: Action) -> Option<Control> {
        match action {
            Action::Quit => self.should_quit = true,
            Action::FilterChar(c) => self.filter.push(c),
            Action::FilterBackspace => {
                self.filter.pop();
            }
            Action::FilterAccept => self.mode = Mode::Normal,
            Action::FilterCancel => {
                self.filter.clear();
                self.mode = Mode::Normal;
            }
            _ => {}
        }
        self.selected_op = 0;
        None
    }

    fn update_normal(&mut self, action: Action) -> Option<Control> {
        match action {
            Action::Quit => self.should_quit = true,
            Action::ToggleHelp => self.mode = Mode::Help,
            Action::TogglePause => return self.pause_control(),
            Action::FocusNext => self.focus = self.focus.next(),
            Action::FocusPrev => self.focus = self.focus.prev(),
            Action::Up | Action::Down | Action::Top | Action::Bottom => self.scroll(action),
            Action::Left => self.sideways(-1),
            Action::Right => self.sideways(1),
            Action::InterOpUp => return self.inter_op_control(1),
            Action::InterOpDown => return self.inter_op_control(-1),
            Action::IntraOpUp => return self.intra_op_control(1),
            Action::IntraOpDown => return self.intra_op_control(-1),
            Action::ZoomIn => self.zoom = self.zoom.saturating_sub(1),
            Action::ZoomOut => self.zoom = (self.zoom + 1).min(ZOOM_LEVELS.len() - 1),
            Action::ExportTrace => return Some(Control::ExportTrace),
            Action::ResetStats => return Some(Control::ResetStats),
            Action::InvertSort => self.ascending = !self.ascending,
            Action::StartFilter => {
                self.mode = Mode::Filter;
                self.focus = Focus::Ops;
            }
            Action::FilterCancel => self.filter.clear(),
            Action::FilterChar(_) | Action::FilterBackspace | Action::FilterAccept => {}
        }
        None
    }

    /// Takes the outcome of `control` (sent because [`update`](App::update) asked).
    pub fn control_done(&mut self, control: &Control, outcome: Result<String, ControlError>) {
        match outcome {
            Ok(text) => {
                match control {
                    Control::Pause(paused) => self.paused = *paused,
                    Control::ResetStats => self.history.clear(),
                    _ => {}
                }
                self.status = Some(Status {
                    text,
                    is_error: false,
                });
            }
            Err(error) => self.fail(error.to_string()),
        }
    }

    fn fail(&mut self, text: String) {
        self.status = Some(Status {
            text,
            is_error: true,
        });
    }

    fn pause_control(&mut self) -> Option<Control> {
        if self.is_finished() {
            self.fail("the workload has finished: nothing to pause".into());
            return None;
        }
        Some(Control::Pause(!self.paused))
    }

    fn inter_op_control(&mut self, by: isize) -> Option<Control> {
        let Some((device, threads)) = self.inter_op_target() else {
            self.fail("no device here has an inter-op pool to resize".into());
            return None;
        };
        let Some(threads) = threads.checked_add_signed(by).filter(|&n| n >= 1) else {
            self.fail(format!("{device} keeps at least 1 inter-op worker"));
            return None;
        };
        Some(Control::SetInterOp { device, threads })
    }

    fn intra_op_control(&mut self, by: isize) -> Option<Control> {
        let current = self.data.facts.intra_op;
        match current.checked_add_signed(by).filter(|&n| n >= 1) {
            Some(threads) if current > 0 => Some(Control::SetIntraOp(threads)),
            _ => {
                self.fail("the intra-op pool keeps at least 1 thread".into());
                None
            }
        }
    }

    fn scroll(&mut self, action: Action) {
        let position = match self.focus {
            Focus::Devices => &mut self.device_scroll,
            Focus::Timeline => &mut self.timeline_scroll,
            Focus::Ops => &mut self.selected_op,
        };
        *position = match action {
            Action::Up => position.saturating_sub(1),
            Action::Down => position.saturating_add(1),
            Action::Top => 0,
            _ => usize::MAX,
        };
        self.clamp_selection();
    }

    fn sideways(&mut self, by: isize) {
        match self.focus {
            Focus::Ops => self.sort = self.sort.shifted(by),
            Focus::Devices | Focus::Timeline => {
                let count = device_panels(&self.data).len().max(1) as isize;
                let next = (self.selected_device as isize + by).rem_euclid(count);
                self.selected_device = next as usize;
                self.device_scroll = 0;
            }
        }
    }

    /// Keeps every position inside what the data has.
    fn clamp_selection(&mut self) {
        let panels = device_panels(&self.data);
        self.selected_device = self.selected_device.min(panels.len().saturating_sub(1));
        let workers = panels
            .get(self.selected_device)
            .map_or(0, |panel| panel.all_workers().count());
        self.device_scroll = self.device_scroll.min(workers.saturating_sub(1));
        let rows: usize = panels.iter().map(|panel| panel.all_workers().count()).sum();
        self.timeline_scroll = self.timeline_scroll.min(rows.saturating_sub(1));
        self.selected_op = self
            .selected_op
            .min(self.visible_ops().len().saturating_sub(1));
    }
}
