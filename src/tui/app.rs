//! The dashboard's state, as a pure state machine: [`App::observe`] takes each frame's
//! data, [`App::update`] takes each [`Action`] and may answer with a [`Control`] for the
//! source, whose outcome comes back through [`App::control_done`]. Nothing here touches the
//! terminal or the clock, so the state tests drive it directly: time is counted in frames
//! ([`App::observe`], or [`App::tick`] once the data no longer changes), and a status message
//! goes after [`STATUS_FRAMES`] of them. One thing comes back from drawing: how many rows
//! the scrolling panels showed (`shown_rows`, set by the views), so that a scroll stops with
//! the last row at the bottom; until a first draw it stops at the last row.
#![forbid(unsafe_code)]

use std::time::Duration;

use super::history::History;
use super::panels::{device_panels, DevicePanel};
use super::source::{Control, ControlError, DashboardData, DeviceKind};
use super::timeline_nav::{self, NavFrame, Said, TimelineNav};
use super::tuner::TuneControl;
use crate::profiler::stats::OpSnapshot;
use crate::profiler::DeviceId;
use crate::tune::TuneProgress;

/// Frames a status message stays: 4 s at the default 10 frames a second.
pub(crate) const STATUS_FRAMES: u64 = 40;

/// Frames the start-up warnings stay: 10 s at the default 10 frames a second.
pub(crate) const WARNING_FRAMES: u64 = 100;

/// What the user asked for (from a key, see [`input`](super::input)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Leave the dashboard.
    Quit,
    /// Show or hide the help overlay.
    ToggleHelp,
    /// Show or hide the scaling view.
    ToggleWhy,
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
    /// Up a page (the rows the focused panel, or the help, shows).
    PageUp,
    /// Down a page.
    PageDown,
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
    /// Start the live thread-count search, or stop it while it runs.
    Tune,
    /// Once the search ended: resize the run to the best point found.
    TuneKeep,
    /// Once the search ended: resize the run back to where it started.
    TuneBack,
    /// Open (or close) the detail of the op under the timeline's cursor.
    OpenDetail,
    /// Pan the timeline back to the live edge.
    LiveEdge,
    /// Freeze (or resume) the display alone; the workload runs on.
    FreezeDisplay,
    /// A replay's key ([`keys`](super::replay::keys)).
    Replay(super::replay::ReplayAction),
}

/// The panel that arrows act on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Focus {
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
pub(crate) enum Mode {
    /// Keys are commands.
    #[default]
    Normal,
    /// The help overlay is up.
    Help,
    /// Keys type the ops filter.
    Filter,
    /// The search ended: keys keep its best or go back.
    TuneChoice,
    /// The scaling view (why it does not scale) replaces the panels.
    Why,
    /// Keys type a replay's prompt (a time, an op name).
    Prompt,
}

/// The ops table's columns, in order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum SortColumn {
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
    pub(crate) const ALL: [SortColumn; 5] = [
        SortColumn::Name,
        SortColumn::Count,
        SortColumn::Total,
        SortColumn::Mean,
        SortColumn::P99,
    ];

    /// The column's heading.
    pub(crate) fn heading(self) -> &'static str {
        match self {
            SortColumn::Name => "op",
            SortColumn::Count => "count",
            SortColumn::Total => "total",
            SortColumn::Mean => "mean",
            SortColumn::P99 => "p99",
        }
    }

    /// Whether the column is first shown ascending: names A to Z; figures largest first.
    fn starts_ascending(self) -> bool {
        self == SortColumn::Name
    }

    fn shifted(self, by: isize) -> SortColumn {
        let index = Self::ALL.iter().position(|&c| c == self).unwrap_or(0) as isize;
        let count = Self::ALL.len() as isize;
        Self::ALL[(index + by).rem_euclid(count) as usize]
    }
}

/// What a status line tells: the footer marks and colours it by its kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StatusKind {
    /// What an action did (`inter 5 on cpu0`).
    Info,
    /// The start-up warnings ([`Facts::warnings`](super::source::Facts::warnings)).
    Warning,
    /// Why an action was refused or failed.
    Error,
}

/// What `+`/`-` change with the current selection ([`App::plus_minus`]): the one answer
/// the header shows and the keys act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PlusMinus {
    /// The inter-op pool of the CPU device titled `device`, now `threads` workers.
    InterOp {
        /// The device's title.
        device: String,
        /// The device ([`DeviceLayout::workers`](super::DeviceLayout::workers)).
        workers: DeviceId,
        /// Its inter-op workers now.
        threads: usize,
    },
    /// The intra-op pool (its panel is selected).
    IntraOp,
    /// Nothing: the selected device (if any) has no pool `+`/`-` can resize.
    Nothing {
        /// The selected device's title.
        on: Option<String>,
        /// The refusal `+`/`-` answer with.
        why: String,
    },
}

/// The footer's status line: the last control's outcome, or the start-up warnings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Status {
    /// What to show.
    pub(crate) text: String,
    /// What it tells.
    pub(crate) kind: StatusKind,
}

/// How many rows the scrolling panels showed at their last draw (0: not drawn yet).
#[derive(Clone, Debug, Default)]
pub(crate) struct ShownRows {
    /// The selected device panel's worker rows.
    pub(crate) devices: std::cell::Cell<usize>,
    /// The timeline's worker rows.
    pub(crate) timeline: std::cell::Cell<usize>,
    /// The ops table's rows.
    pub(crate) ops: std::cell::Cell<usize>,
    /// The help overlay's rows inside its border.
    pub(crate) help: std::cell::Cell<usize>,
    /// The help's lines, shown or not.
    pub(crate) help_lines: std::cell::Cell<usize>,
}

/// The dashboard's whole state.
#[derive(Clone, Debug, Default)]
pub(crate) struct App {
    data: DashboardData,
    history: History,
    /// Whether the workload was paused by us.
    pub(crate) paused: bool,
    /// Whether the user asked to quit.
    pub(crate) should_quit: bool,
    /// How keys are read.
    pub(crate) mode: Mode,
    /// The panel arrows act on.
    pub(crate) focus: Focus,
    /// The selected device panel (target of `+`/`-`).
    pub(crate) selected_device: usize,
    /// First worker row shown in the selected device panel.
    pub(crate) device_scroll: usize,
    /// First row shown in the timeline.
    pub(crate) timeline_scroll: usize,
    /// First line shown in the help overlay.
    pub(crate) help_scroll: usize,
    /// Rows the selected device panel, the timeline, the ops table and the help showed when
    /// last drawn (the views set them): a scroll stops where the last row is at the bottom,
    /// so `G` then `↑` moves at once.
    pub(crate) shown_rows: ShownRows,
    /// The timeline's zoom, pan, cursor, op detail and display pause.
    pub(crate) timeline: TimelineNav,
    /// The ops table's sort column.
    pub(crate) sort: SortColumn,
    /// Whether the sort column's values grow down the table (the smallest figure, or the
    /// first name, at the top), shown as `▲`; else `▼`, the same in every column. ←/→ start
    /// each column in its natural order: names A to Z, figures largest first.
    pub(crate) ascending: bool,
    /// The ops filter (case-insensitive substring of the name).
    pub(crate) filter: String,
    /// The selected row of the ops table.
    pub(crate) selected_op: usize,
    /// The last action's outcome, until it expires.
    pub(crate) status: Option<Status>,
    /// Frames seen (observed or ticked).
    frames: u64,
    /// The frame at which `status` goes.
    status_until: u64,
    /// Whether the start-up warnings were shown.
    warnings_shown: bool,
    /// The workload's elapsed time at the last statistics reset (zero: never reset).
    stats_since: Duration,
    /// The live search's progress, while the source has one.
    tuner: Option<TuneProgress>,
    /// A replay's prompt, while it is typed.
    pub(crate) prompt: Option<super::replay::keys::Prompt>,
}

impl App {
    /// A dashboard with nothing observed yet.
    pub(crate) fn new() -> Self {
        App::default()
    }

    /// The latest frame's data.
    pub(crate) fn data(&self) -> &DashboardData {
        &self.data
    }

    /// What the dashboard remembers of earlier frames.
    pub(crate) fn history(&self) -> &History {
        &self.history
    }

    /// Whether the workload finished (the data no longer changes).
    pub(crate) fn is_finished(&self) -> bool {
        self.data.facts.finished
    }

    /// Takes a new frame's data: remembers it and adds it to the history. Once the
    /// workload has finished, the final frame stays and later ones only count as a
    /// [`tick`](App::tick).
    pub(crate) fn observe(&mut self, data: DashboardData) {
        self.tick();
        if self.is_finished() || self.timeline.display_paused {
            return;
        }
        self.history.record(&data);
        self.data = data;
        self.clamp_selection();
        self.show_warnings();
    }

    /// Takes the live search's progress this frame (`None`: no search). A search that ended
    /// with a report, while the run still goes, asks the user to keep its best or go back.
    pub(crate) fn observe_tuner(&mut self, progress: Option<TuneProgress>) {
        let choose = progress
            .as_ref()
            .is_some_and(|p| p.report().is_some() && !p.run_ended());
        if choose && !self.is_finished() && self.mode == Mode::Normal {
            self.mode = Mode::TuneChoice;
        }
        let nothing_to_choose = progress.is_none() || self.is_finished();
        if nothing_to_choose && self.mode == Mode::TuneChoice {
            self.mode = Mode::Normal;
        }
        self.tuner = progress;
    }

    /// The live search's progress, while there is one.
    pub(crate) fn tuner(&self) -> Option<&TuneProgress> {
        self.tuner.as_ref()
    }

    /// Whether a live search runs (it owns the counts meanwhile).
    pub(crate) fn is_tuning(&self) -> bool {
        self.tuner.as_ref().is_some_and(TuneProgress::is_running)
    }

    /// One frame passed (without new data, once finished): an expired status goes.
    pub(crate) fn tick(&mut self) {
        self.frames += 1;
        if self.frames >= self.status_until {
            self.status = None;
        }
    }

    /// Shows the start-up warnings, once, in the status line.
    fn show_warnings(&mut self) {
        let warnings = &self.data.facts.warnings;
        if self.warnings_shown || warnings.is_empty() {
            return;
        }
        let text = warnings.join(" · ");
        self.warnings_shown = true;
        self.set_status(text, StatusKind::Warning, WARNING_FRAMES);
    }

    /// Ops per second over the whole run (since the last reset, if any), once it finished:
    /// the ops counted over the elapsed time.
    pub(crate) fn run_ops_per_s(&self) -> Option<f64> {
        let ops: u64 = self.data.snapshot.devices.iter().map(|d| d.ops).sum();
        self.run_average(ops)
    }

    /// `count` (ops, tasks: counted since the start or the last reset) per second of the
    /// run since then, once it finished; `None` while it runs.
    pub(crate) fn run_average(&self, count: u64) -> Option<f64> {
        if !self.is_finished() {
            return None;
        }
        let seconds = self
            .data
            .facts
            .elapsed
            .saturating_sub(self.stats_since)
            .as_secs_f64();
        Some(if seconds > 0.0 {
            count as f64 / seconds
        } else {
            0.0
        })
    }

    /// Whether the statistics were reset during the run.
    pub(crate) fn stats_were_reset(&self) -> bool {
        self.stats_since > Duration::ZERO
    }

    /// The time one timeline column covers at the current zoom.
    pub(crate) fn column_span(&self) -> Duration {
        self.timeline.column_span()
    }

    /// What the timeline's navigation reads of the frame shown, `rows` being
    /// [`timeline_nav::rows_of`] the data.
    pub(crate) fn nav_frame<'a>(&'a self, rows: &'a [timeline_nav::NavRow]) -> NavFrame<'a> {
        NavFrame {
            rows,
            spans: &self.data.spans,
            history: &self.history,
            now_ns: self.data.snapshot.at_ns,
        }
    }

    /// The timeline's keys ([`TimelineNav::update`]); `true` when it took `action`.
    fn timeline_action(&mut self, action: Action) -> bool {
        let rows = timeline_nav::rows_of(&self.data);
        let frame = NavFrame {
            rows: &rows,
            spans: &self.data.spans,
            history: &self.history,
            now_ns: self.data.snapshot.at_ns,
        };
        let focused = self.focus == Focus::Timeline;
        let Some(said) = self.timeline.update(action, &frame, focused) else {
            return false;
        };
        let shown = self.shown_rows.timeline.get();
        self.timeline_scroll = self.timeline.scroll_for_row(self.timeline_scroll, shown);
        match said {
            Said::Nothing => {}
            Said::Info(text) => self.say(text),
            Said::Refused(text) => self.fail(text),
        }
        true
    }

    /// The ops table's rows: filtered, then sorted.
    pub(crate) fn visible_ops(&self) -> Vec<&OpSnapshot> {
        let filter = self.filter.to_lowercase();
        // No filter: no lowercased copy of every name (10,000 of them in `chain`, twice a
        // frame).
        let matches =
            |op: &&OpSnapshot| filter.is_empty() || op.name.to_lowercase().contains(&filter);
        let mut ops: Vec<&OpSnapshot> = self.data.snapshot.ops.iter().filter(matches).collect();
        ops.sort_by(|a, b| {
            let ascending = match self.sort {
                SortColumn::Name => a.name.cmp(&b.name),
                SortColumn::Count => a.count.cmp(&b.count),
                SortColumn::Total => a.total_ns.cmp(&b.total_ns),
                SortColumn::Mean => a.mean_ns.total_cmp(&b.mean_ns),
                SortColumn::P99 => a.p99_ns.cmp(&b.p99_ns),
            };
            let order = match self.ascending {
                true => ascending,
                false => ascending.reverse(),
            };
            order.then_with(|| a.name.cmp(&b.name)) // ties: names A to Z
        });
        ops
    }

    /// The inter-op count the header shows and the device it is: the selected device's, if
    /// it can be resized; else the first that can (what `+`/`-` change is
    /// [`plus_minus`](App::plus_minus)).
    pub(crate) fn shown_inter_op(&self) -> Option<(String, usize)> {
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

    /// What `+`/`-` change with the current selection: the selected CPU device's inter-op
    /// pool; on the intra-op panel, the intra-op pool; on a GPU or a device this engine
    /// cannot resize, nothing (with the refusal that says what to press instead).
    pub(crate) fn plus_minus(&self) -> PlusMinus {
        let panels = device_panels(&self.data);
        let Some(panel) = panels.get(self.selected_device) else {
            return PlusMinus::Nothing {
                on: None,
                why: "no device here has an inter-op pool to resize".into(),
            };
        };
        let device = panel.title().to_string();
        let why = match (panel.layout.kind, panel.layout.inter_op) {
            (DeviceKind::IntraOp, _) => return PlusMinus::IntraOp,
            (_, Some(threads)) => {
                let workers = panel.layout.workers;
                return PlusMinus::InterOp {
                    device,
                    workers,
                    threads,
                };
            }
            (DeviceKind::Gpu, None) => format!(
                "{device} is a GPU with fixed streams, no inter-op pool: pick a CPU device \
                 with ←/→ (]/[ resize the intra-op pool)"
            ),
            (DeviceKind::Cpu, None) => format!(
                "{device}'s inter-op pool cannot be resized with this engine; ]/[ resize the \
                 intra-op pool"
            ),
        };
        PlusMinus::Nothing {
            on: Some(device),
            why,
        }
    }

    /// Applies `action`; returns the control to send to the source, if any.
    pub(crate) fn update(&mut self, action: Action) -> Option<Control> {
        match self.mode {
            Mode::Help => self.update_help(action),
            Mode::Filter => self.update_filter(action),
            Mode::Normal => self.update_normal(action),
            Mode::TuneChoice => self.update_tune_choice(action),
            Mode::Why => {
                match action {
                    Action::Quit => self.should_quit = true,
                    Action::ToggleWhy => self.mode = Mode::Normal,
                    _ => {}
                }
                None
            }
            Mode::Prompt => super::replay::keys::update_prompt(self, action),
        }
    }

    /// Once the search ended: keep its best, or go back to where it started.
    fn update_tune_choice(&mut self, action: Action) -> Option<Control> {
        let progress = self.tuner.as_ref()?;
        match action {
            Action::Quit => self.should_quit = true,
            Action::TuneKeep => match progress.best() {
                Some((best, _)) => return Some(Control::Tune(TuneControl::Keep(best))),
                None => self.fail("the tuner measured nothing: b goes back".into()),
            },
            Action::TuneBack => return Some(Control::Tune(TuneControl::Back(progress.start))),
            _ => {}
        }
        None
    }

    /// `t`: starts the search, or stops the one that runs.
    fn tune_control(&mut self) -> Option<Control> {
        match self.is_tuning() {
            true => Some(Control::Tune(TuneControl::Stop)),
            false => Some(Control::Tune(TuneControl::Start)),
        }
    }

    fn update_help(&mut self, action: Action) -> Option<Control> {
        match action {
            Action::Quit => self.should_quit = true,
            Action::ToggleHelp => self.mode = Mode::Normal,
            Action::Up
            | Action::Down
            | Action::PageUp
            | Action::PageDown
            | Action::Top
            | Action::Bottom => self.scroll_help(action),
            _ => {}
        }
        None
    }

    /// Scrolls the help; it stops with its last line at the bottom of the overlay as last
    /// drawn (before a first draw, at its last line).
    fn scroll_help(&mut self, action: Action) {
        let page = self.shown_rows.help.get();
        let last_first = self.shown_rows.help_lines.get().saturating_sub(page.max(1));
        // Clamped before moving too: after the terminal grew, the first `↑` moves at once.
        let from = self.help_scroll.min(last_first);
        self.help_scroll = moved(from, action, page).min(last_first);
    }

    fn update_filter(&mut self, action: Action) -> Option<Control> {
        match action {
            Action::Quit => self.should_quit = true,
            Action::FilterChar(c) => self.filter.push(c),
            Action::FilterBackspace => {
                self.filter.pop();
            }
            Action::FilterAccept => {
                self.mode = Mode::Normal;
                self.say_filter();
            }
            Action::FilterCancel => {
                self.filter.clear();
                self.mode = Mode::Normal;
                self.say("filter cleared".into());
            }
            _ => {}
        }
        self.selected_op = 0;
        None
    }

    fn update_normal(&mut self, action: Action) -> Option<Control> {
        if let Some(nothing) = self.refused_as_finished(action) {
            self.fail(format!("the workload has finished: {nothing}"));
            return None;
        }
        if let Some(why) = super::replay::keys::refusal(self, action) {
            self.fail(why);
            return None;
        }
        let resize = matches!(
            action,
            Action::InterOpUp | Action::InterOpDown | Action::IntraOpUp | Action::IntraOpDown
        );
        if resize && self.is_tuning() {
            self.fail("the tuner is resizing the pools: t or Esc stops it first".into());
            return None;
        }
        if self.timeline_action(action) {
            return None;
        }
        match action {
            Action::Quit => self.should_quit = true,
            Action::ToggleHelp => {
                self.mode = Mode::Help;
                self.help_scroll = 0;
            }
            Action::TogglePause => return self.pause_control(),
            Action::ToggleWhy => self.mode = Mode::Why,
            Action::FocusNext => self.move_focus(self.focus.next()),
            Action::FocusPrev => self.move_focus(self.focus.prev()),
            Action::Up
            | Action::Down
            | Action::PageUp
            | Action::PageDown
            | Action::Top
            | Action::Bottom => self.scroll(action),
            Action::Left => self.sideways(-1),
            Action::Right => self.sideways(1),
            Action::InterOpUp => return self.inter_op_control(1),
            Action::InterOpDown => return self.inter_op_control(-1),
            Action::IntraOpUp => return self.intra_op_control(1),
            Action::IntraOpDown => return self.intra_op_control(-1),
            Action::ExportTrace => return Some(Control::ExportTrace),
            Action::ResetStats => return self.reset_control(),
            Action::InvertSort => {
                self.ascending = !self.ascending;
                self.say_sort();
            }
            Action::StartFilter => {
                self.mode = Mode::Filter;
                self.focus = Focus::Ops;
            }
            Action::Tune => return self.tune_control(),
            Action::FilterCancel if super::replay::keys::searching(self) => {
                return Some(Control::Replay(super::replay::ReplayControl::CancelSearch));
            }
            Action::FilterCancel if self.is_tuning() => {
                return Some(Control::Tune(TuneControl::Stop))
            }
            Action::FilterCancel if !self.filter.is_empty() => {
                self.filter.clear();
                self.say("filter cleared".into());
            }
            Action::FilterCancel => {}
            Action::Replay(action) => return super::replay::keys::update(self, action),
            Action::FilterChar(_)
            | Action::FilterBackspace
            | Action::FilterAccept
            | Action::TuneKeep
            | Action::TuneBack
            | Action::ZoomIn
            | Action::ZoomOut
            | Action::OpenDetail
            | Action::LiveEdge
            | Action::FreezeDisplay => {}
        }
        None
    }

    /// Takes the outcome of `control` (sent because [`update`](App::update) asked).
    pub(crate) fn control_done(
        &mut self,
        control: &Control,
        outcome: Result<String, ControlError>,
    ) {
        match outcome {
            Ok(text) => {
                self.apply_accepted_resize(control);
                match control {
                    // A replay's Space plays or pauses its cursor (its facts say which);
                    // the display follows the cursor, so it never freezes there.
                    Control::Pause(_) if self.data.facts.replay.is_some() => {}
                    Control::Pause(paused) => {
                        self.paused = *paused;
                        self.timeline.display_paused = *paused;
                    }
                    Control::ResetStats => {
                        self.history.clear();
                        self.stats_since = self.data.facts.elapsed;
                    }
                    Control::Tune(tune) if tune.settles_at().is_some() => {
                        self.tuner = None;
                        self.mode = Mode::Normal;
                    }
                    _ => {}
                }
                self.say(text);
            }
            Err(error) => self.fail(error.to_string()),
        }
    }

    /// Takes an accepted resize into the shown counts at once, so that the next key of a
    /// burst (`+ + + +`, a held key) counts from it rather than from the last frame's count
    /// (every press of a burst asked for the same size before). The next frame's data
    /// replaces it with what the source reports (the live run reports the count last
    /// asked for, which it applies to every CPU device's pool).
    fn apply_accepted_resize(&mut self, control: &Control) {
        match control {
            Control::SetInterOp { device, threads } => {
                let resized = self.data.devices.iter_mut().find(|d| d.workers == *device);
                if let Some(layout) = resized {
                    layout.inter_op = Some(*threads);
                }
            }
            Control::SetIntraOp(threads) => self.data.facts.intra_op = *threads,
            Control::Tune(tune) => {
                let Some(point) = tune.settles_at() else {
                    return;
                };
                for layout in &mut self.data.devices {
                    if layout.inter_op.is_some() {
                        layout.inter_op = Some(point.inter);
                    }
                }
                self.data.facts.intra_op = point.intra;
            }
            _ => {}
        }
    }

    fn set_status(&mut self, text: String, kind: StatusKind, frames: u64) {
        self.status = Some(Status { text, kind });
        self.status_until = self.frames + frames;
    }

    fn say(&mut self, text: String) {
        self.set_status(text, StatusKind::Info, STATUS_FRAMES);
    }

    pub(crate) fn fail(&mut self, text: String) {
        self.set_status(text, StatusKind::Error, STATUS_FRAMES);
    }

    /// Why `action` is refused, once the workload has finished ([`refused_when_finished`]).
    fn refused_as_finished(&self, action: Action) -> Option<&'static str> {
        self.is_finished()
            .then(|| refused_when_finished(action))
            .flatten()
    }

    fn pause_control(&mut self) -> Option<Control> {
        Some(Control::Pause(!self.paused))
    }

    fn reset_control(&mut self) -> Option<Control> {
        Some(Control::ResetStats)
    }

    /// `+`/`-`: resizes what [`plus_minus`](App::plus_minus) says.
    fn inter_op_control(&mut self, by: isize) -> Option<Control> {
        let (device, workers, threads) = match self.plus_minus() {
            PlusMinus::InterOp {
                device,
                workers,
                threads,
            } => (device, workers, threads),
            PlusMinus::IntraOp => return self.intra_op_control(by),
            PlusMinus::Nothing { why, .. } => {
                self.fail(why);
                return None;
            }
        };
        let Some(threads) = threads.checked_add_signed(by).filter(|&n| n >= 1) else {
            self.fail(format!("{device} keeps at least 1 inter-op worker"));
            return None;
        };
        Some(Control::SetInterOp {
            device: workers,
            threads,
        })
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
        let (position, page) = match self.focus {
            Focus::Devices => (&mut self.device_scroll, &self.shown_rows.devices),
            Focus::Timeline => (&mut self.timeline_scroll, &self.shown_rows.timeline),
            Focus::Ops => (&mut self.selected_op, &self.shown_rows.ops),
        };
        *position = moved(*position, action, page.get());
        self.clamp_selection();
    }

    /// Focuses `focus` and says so in the status line (a warning or an earlier message
    /// there would otherwise hide the footer's focus line, and once the run has finished
    /// the finished notice does).
    fn move_focus(&mut self, focus: Focus) {
        self.focus = focus;
        let panels = device_panels(&self.data);
        let device = panels
            .get(self.selected_device)
            .map_or("-", |panel| panel.title());
        let text = focus_text(focus, device);
        self.say(text);
    }

    fn say_sort(&mut self) {
        let arrow = if self.ascending { "▲" } else { "▼" };
        self.say(format!("sorted by {} {arrow}", self.sort.heading()));
    }

    fn say_filter(&mut self) {
        if self.filter.is_empty() {
            self.say("no filter: every op shows".into());
            return;
        }
        let shown = self.visible_ops().len();
        let all = self.data.snapshot.ops.len();
        self.say(format!("filter \"{}\": {shown} of {all} ops", self.filter));
    }

    fn sideways(&mut self, by: isize) {
        match self.focus {
            Focus::Ops => {
                self.sort = self.sort.shifted(by);
                self.ascending = self.sort.starts_ascending();
                self.say_sort();
            }
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
        let rows = panels
            .get(self.selected_device)
            .map_or(0, DevicePanel::row_count);
        let last_first_row = |rows: usize, shown: usize| rows.saturating_sub(shown.max(1));
        let devices_shown = self.shown_rows.devices.get();
        self.device_scroll = self.device_scroll.min(last_first_row(rows, devices_shown));
        let rows: usize = panels.iter().map(|panel| panel.all_workers().count()).sum();
        self.timeline.clamp_row(rows);
        let timeline_shown = self.shown_rows.timeline.get();
        self.timeline_scroll = self
            .timeline_scroll
            .min(last_first_row(rows, timeline_shown));
        self.selected_op = self
            .selected_op
            .min(self.visible_ops().len().saturating_sub(1));
    }
}

/// `position` after a scroll `action`, a page being `page` rows (at least 1); Bottom goes
/// past the end, for the caller to clamp.
fn moved(position: usize, action: Action, page: usize) -> usize {
    let page = page.max(1);
    match action {
        Action::Up => position.saturating_sub(1),
        Action::Down => position.saturating_add(1),
        Action::PageUp => position.saturating_sub(page),
        Action::PageDown => position.saturating_add(page),
        Action::Top => 0,
        _ => usize::MAX,
    }
}

/// What has the focus and what the arrows do there, for the footer: `device` is the
/// selected device panel's title.
pub(crate) fn focus_text(focus: Focus, device: &str) -> String {
    match focus {
        Focus::Devices => format!("focus: devices ({device}): ←/→ pick a device, ↑/↓ scroll"),
        Focus::Timeline => {
            "focus: timeline: ←/→ op (or pan), ↑/↓ row, Enter detail, </> zoom, End live"
                .to_string()
        }
        Focus::Ops => "focus: ops: ←/→ sort column, i invert, / filter".to_string(),
    }
}

/// What a finished workload cannot do for `action` (pause, reset, resize), in words; `None`
/// for what it still does. The app refuses these keys with the reason; the footer leaves
/// them out.
pub(crate) fn refused_when_finished(action: Action) -> Option<&'static str> {
    match action {
        Action::TogglePause => Some("nothing to pause"),
        Action::ResetStats => Some("its final numbers stay (e exports the trace)"),
        Action::InterOpUp | Action::InterOpDown | Action::IntraOpUp | Action::IntraOpDown => {
            Some("nothing to resize")
        }
        Action::Tune => Some("nothing to tune"),
        Action::FreezeDisplay => Some("its final frame stays"),
        _ => None,
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::tui::fake::{FakeOptions, FakeSource};
    use crate::tui::source::DashboardSource;

    /// An app fed `frames` frames of a fake (two CPUs, a GPU, the intra-op pool) that
    /// finishes after `finish_after` frames, if given.
    fn fed(frames: u64, finish_after: Option<u64>) -> (App, FakeSource) {
        let mut source = FakeSource::new(FakeOptions {
            finish_after,
            ..FakeOptions::default()
        });
        let mut app = App::new();
        for _ in 0..frames {
            app.observe(source.snapshot());
        }
        (app, source)
    }

    fn status_text(app: &App) -> &str {
        app.status
            .as_ref()
            .map_or("", |status| status.text.as_str())
    }

    #[test]
    fn a_finished_workload_refuses_resizes_and_resets_but_still_exports() {
        let (mut app, _) = fed(5, Some(5));
        assert!(app.is_finished());
        for action in [
            Action::InterOpUp,
            Action::InterOpDown,
            Action::IntraOpUp,
            Action::IntraOpDown,
            Action::ResetStats,
            Action::TogglePause,
        ] {
            app.status = None;
            assert_eq!(app.update(action), None, "{action:?}");
            let status = app.status.clone().expect("a refusal");
            assert_eq!(status.kind, StatusKind::Error, "{action:?}: {status:?}");
            assert!(
                status.text.starts_with("the workload has finished"),
                "{status:?}"
            );
        }
        assert_eq!(app.update(Action::ExportTrace), Some(Control::ExportTrace));
    }

    #[test]
    fn inter_op_keys_act_on_the_selected_device() {
        let (mut app, _) = fed(3, None);
        let titles: Vec<String> = device_panels(app.data())
            .iter()
            .map(|panel| panel.title().to_string())
            .collect();
        assert_eq!(titles, ["cpu0", "cpu1", "gpu0", "intra-op"]);
        app.update(Action::Right);
        let cpu1 = Control::SetInterOp {
            device: app.data().devices[1].workers,
            threads: 5,
        };
        assert_eq!(app.update(Action::InterOpUp), Some(cpu1));
        app.update(Action::Right);
        assert_eq!(app.update(Action::InterOpUp), None, "a GPU is not resized");
        let refusal = app.status.clone().unwrap();
        assert_eq!(refusal.kind, StatusKind::Error, "{refusal:?}");
        assert!(refusal.text.starts_with("gpu0 is a GPU"), "{refusal:?}");
        assert!(refusal.text.contains("←/→") && refusal.text.contains("]/["));
        app.update(Action::Right);
        assert_eq!(app.update(Action::InterOpUp), Some(Control::SetIntraOp(3)));
        assert_eq!(
            app.update(Action::InterOpDown),
            Some(Control::SetIntraOp(1))
        );
    }

    #[test]
    fn a_status_expires_after_its_frames_even_once_finished() {
        let (mut app, _) = fed(5, Some(5));
        app.update(Action::ExportTrace);
        app.control_done(&Control::ExportTrace, Ok("trace written".into()));
        for _ in 1..STATUS_FRAMES {
            app.tick();
        }
        assert_eq!(status_text(&app), "trace written");
        app.tick();
        assert_eq!(app.status, None);
        // A running workload's frames count the same way.
        let (mut app, mut source) = fed(3, None);
        app.update(Action::InvertSort);
        for _ in 0..STATUS_FRAMES {
            assert!(app.status.is_some());
            app.observe(source.snapshot());
        }
        assert_eq!(app.status, None);
    }

    #[test]
    fn zoom_sort_invert_and_filter_say_what_they_did() {
        let (mut app, _) = fed(10, None);
        app.update(Action::ZoomOut);
        assert_eq!(
            status_text(&app),
            "timeline: 200ms a column (sampled states)"
        );
        app.update(Action::ZoomIn);
        assert_eq!(
            status_text(&app),
            "timeline: 100ms a column (sampled states)"
        );
        app.update(Action::ZoomIn);
        assert_eq!(status_text(&app), "timeline: 50.0ms a column (ops)");
        app.timeline.zoom = 0;
        app.update(Action::ZoomIn);
        assert_eq!(app.timeline.zoom, 0);
        assert_eq!(
            status_text(&app),
            "already at the finest zoom (1.00µs a column)"
        );
        app.timeline.zoom = crate::tui::timeline_nav::ZOOM_LEVELS.len() - 1;
        app.update(Action::ZoomOut);
        assert_eq!(
            status_text(&app),
            "already at the widest zoom (10.0s a column)"
        );
        app.update(Action::FocusPrev); // the ops table
        app.update(Action::Right);
        assert_eq!(status_text(&app), "sorted by mean ▼");
        app.update(Action::InvertSort);
        assert_eq!(status_text(&app), "sorted by mean ▲");
        app.update(Action::StartFilter);
        for c in "conv".chars() {
            app.update(Action::FilterChar(c));
        }
        app.update(Action::FilterAccept);
        assert_eq!(status_text(&app), "filter \"conv\": 1 of 12 ops");
        app.update(Action::FilterCancel);
        assert_eq!(status_text(&app), "filter cleared");
    }

    fn finished_data(ops: u64, ops_per_s: f64, elapsed: Duration) -> DashboardData {
        let mut data = DashboardData::default();
        data.facts.elapsed = elapsed;
        data.facts.finished = true;
        data.snapshot
            .devices
            .push(crate::profiler::stats::DeviceSnapshot {
                ops,
                ops_per_s,
                ..crate::tui::fake::device_snapshot(crate::tui::fake::cpu0())
            });
        data
    }

    #[test]
    fn the_run_average_is_the_ops_counted_over_the_elapsed_time_once_finished() {
        let (app, _) = fed(3, None);
        assert_eq!(app.run_ops_per_s(), None, "not while it runs");
        let mut app = App::new();
        app.observe(finished_data(3000, 1000.0, Duration::from_secs(2)));
        assert_eq!(app.run_ops_per_s(), Some(1500.0));
        // After a reset, the ops counted start at the reset.
        let mut app = App::new();
        let mut running = finished_data(0, 0.0, Duration::from_secs(1));
        running.facts.finished = false;
        app.observe(running);
        app.update(Action::ResetStats);
        app.control_done(&Control::ResetStats, Ok("statistics reset".into()));
        app.observe(finished_data(3000, 1000.0, Duration::from_secs(3)));
        assert!(app.stats_were_reset());
        assert_eq!(app.run_ops_per_s(), Some(1500.0));
    }

    #[test]
    fn start_up_warnings_show_once_in_the_status_then_expire() {
        let mut data = DashboardData::default();
        data.facts.notices = vec!["log: /tmp/x.log".into()];
        data.facts.warnings = vec![
            "inter-op threads = 4 and engine CPU workers = 2".into(),
            "--trace-dir is unused".into(),
        ];
        let mut app = App::new();
        app.observe(data.clone());
        let status = app.status.clone().expect("the warnings show");
        assert_eq!(
            status.text,
            "inter-op threads = 4 and engine CPU workers = 2 · --trace-dir is unused"
        );
        assert_eq!(status.kind, StatusKind::Warning);
        for _ in 1..WARNING_FRAMES {
            app.observe(data.clone());
        }
        assert!(app.status.is_some(), "warnings stay longer than messages");
        app.observe(data.clone());
        assert_eq!(app.status, None);
        app.observe(data);
        assert_eq!(app.status, None, "shown once");
    }

    /// Presses sent as one burst (no frame between them) each count: the second `+` asks
    /// for one more than the first got, not for the same size again.
    #[test]
    fn every_press_of_a_burst_counts_before_the_next_frame() {
        let (mut app, _) = fed(3, None);
        let press = |app: &mut App, action| {
            let control = app.update(action).expect("a resize");
            app.control_done(&control, Ok("done".into()));
            control
        };
        let cpu0 = app.data().devices[0].workers;
        let inter = |threads| Control::SetInterOp {
            device: cpu0,
            threads,
        };
        assert_eq!(press(&mut app, Action::InterOpUp), inter(5));
        assert_eq!(press(&mut app, Action::InterOpUp), inter(6));
        assert_eq!(press(&mut app, Action::InterOpUp), inter(7));
        assert_eq!(press(&mut app, Action::InterOpDown), inter(6));
        assert_eq!(press(&mut app, Action::IntraOpUp), Control::SetIntraOp(3));
        assert_eq!(press(&mut app, Action::IntraOpUp), Control::SetIntraOp(4));
        assert_eq!(press(&mut app, Action::IntraOpUp), Control::SetIntraOp(5));
        assert_eq!(app.shown_inter_op(), Some(("cpu0".into(), 6)));
        // A refused resize changes nothing.
        let control = app.update(Action::InterOpUp).unwrap();
        app.control_done(&control, Err(ControlError::Failed("no".into())));
        assert_eq!(app.update(Action::InterOpUp), Some(inter(7)));
    }

    mod tuner {
        use super::*;
        use crate::tune::{
            Objective, Outcome, Phase, Point, PointResult, ProbeEvent, TuneEnd, TuneReport,
        };

        const START: Point = Point { inter: 4, intra: 2 };
        const BEST: Point = Point { inter: 1, intra: 2 };

        /// A search from [`START`] that measured `measured` windows; the one under way is
        /// at `at`; `ended` with `outcome` when given.
        fn progress(
            measured: &[(Point, f64)],
            at: Point,
            outcome: Option<Outcome>,
        ) -> TuneProgress {
            let results: Vec<PointResult> = measured
                .iter()
                .map(|&(point, value)| PointResult::new(point, vec![value]))
                .collect();
            let best = measured
                .iter()
                .copied()
                .reduce(|a, b| if b.1 > a.1 { b } else { a });
            let ended = outcome.map(|outcome| {
                TuneEnd::Report(TuneReport {
                    objective: Objective::Throughput,
                    basis: None,
                    window: Duration::from_millis(100),
                    budget: Duration::from_secs(60),
                    elapsed: Duration::from_secs(3),
                    points: results.clone(),
                    best: best.map(|(point, _)| point),
                    default: Point { inter: 2, intra: 2 },
                    gain: None,
                    paired: Vec::new(),
                    outcome,
                })
            });
            TuneProgress {
                start: START,
                objective: Objective::Throughput,
                latest: Some(ProbeEvent {
                    index: measured.len() + 2,
                    planned: 30,
                    phase: Phase::Scan,
                    point: at,
                    value: None,
                    best,
                }),
                measured: results,
                ended,
            }
        }

        fn tune(control: TuneControl) -> Option<Control> {
            Some(Control::Tune(control))
        }

        /// `t` starts; while it runs `+`/`]` are refused and `t` stops; once stopped the
        /// keys choose: Enter keeps the best (and the shown counts become it), b goes back.
        #[test]
        fn t_starts_stops_and_the_choice_keeps_the_best_or_goes_back() {
            for (choose, settled) in [
                (Action::TuneKeep, TuneControl::Keep(BEST)),
                (Action::TuneBack, TuneControl::Back(START)),
            ] {
                let (mut app, _) = fed(3, None);
                assert_eq!(app.update(Action::Tune), tune(TuneControl::Start));
                app.observe_tuner(Some(progress(&[], START, None)));
                assert!(app.is_tuning());
                let running = progress(&[(START, 10.0), (BEST, 12.0)], START, None);
                app.observe_tuner(Some(running));
                for resize in [Action::InterOpUp, Action::IntraOpDown] {
                    assert_eq!(app.update(resize), None);
                    assert!(status_text(&app).starts_with("the tuner is resizing"));
                }
                assert_eq!(app.update(Action::Tune), tune(TuneControl::Stop));
                assert_eq!(app.mode, Mode::Normal, "no choice before it ended");
                let stopped = progress(
                    &[(START, 10.0), (BEST, 12.0)],
                    START,
                    Some(Outcome::Stopped),
                );
                app.observe_tuner(Some(stopped.clone()));
                assert_eq!(app.mode, Mode::TuneChoice);
                assert!(!app.is_tuning());
                assert_eq!(app.update(Action::Down), None, "other keys wait");
                let control = app.update(choose);
                assert_eq!(control, tune(settled));
                app.control_done(&control.unwrap(), Ok("settled".into()));
                assert_eq!(app.mode, Mode::Normal);
                assert!(app.tuner().is_none());
                let point = settled.settles_at().unwrap();
                assert_eq!(app.shown_inter_op(), Some(("cpu0".into(), point.inter)));
                assert_eq!(app.data().facts.intra_op, point.intra);
                // The source's next frame has no tuner: nothing to choose again.
                app.observe_tuner(None);
                assert_eq!(app.mode, Mode::Normal);
            }
        }

        /// Esc stops a running search (and clears the filter otherwise).
        #[test]
        fn esc_stops_a_running_search() {
            let (mut app, _) = fed(3, None);
            app.observe_tuner(Some(progress(&[(START, 10.0)], BEST, None)));
            assert_eq!(app.update(Action::FilterCancel), tune(TuneControl::Stop));
        }

        /// A search cut short by the run's end keeps its figures and asks nothing; a refused
        /// settle keeps the choice open.
        #[test]
        fn a_search_the_run_ended_asks_nothing_and_a_refused_settle_keeps_the_choice() {
            let (mut app, _) = fed(3, None);
            let ended = Outcome::Ended("the run ended".into());
            app.observe_tuner(Some(progress(&[(BEST, 12.0)], START, Some(ended))));
            assert_eq!(app.mode, Mode::Normal);
            assert_eq!(app.tuner().unwrap().best(), Some((BEST, 12.0)));
            let (mut app, _) = fed(3, None);
            app.observe_tuner(Some(progress(&[], START, Some(Outcome::Stopped))));
            assert_eq!(
                app.update(Action::TuneKeep),
                None,
                "nothing measured to keep"
            );
            assert!(status_text(&app).contains("b goes back"));
            let back = app.update(Action::TuneBack).unwrap();
            app.control_done(&back, Err(ControlError::Failed("no".into())));
            assert_eq!(app.mode, Mode::TuneChoice);
        }

        #[test]
        fn a_finished_workload_refuses_t() {
            let (mut app, _) = fed(5, Some(5));
            assert_eq!(app.update(Action::Tune), None);
            assert_eq!(
                status_text(&app),
                "the workload has finished: nothing to tune"
            );
        }
    }
}
