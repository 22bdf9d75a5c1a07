//! The compare view's state: the comparison, the order its op rows are shown in, the
//! selected op, the workers' scroll, the focus and the help. Pure: keys come in as
//! [`CompareAction`]s, the views read it, and the tests drive it without a terminal.
#![forbid(unsafe_code)]

use std::cell::Cell;
use std::cmp::Ordering;

use crate::record::compare::{Comparison, OpRow};

/// What orders the op rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SortKey {
    /// The op's change in time per step, in the direction the step time moved: the op that
    /// explains a slower (or faster) run first. Without iterations: the change in total time.
    Contribution,
    /// The change in total time, B - A, largest first.
    Delta,
    /// Total time B / A, largest first (ops A lacks last).
    Ratio,
    /// Mean time B / A, largest first (ops A lacks last).
    MeanRatio,
    /// The op name, A to Z.
    Name,
}

impl SortKey {
    /// Every key, in the order ← → step through them.
    pub(crate) const ALL: [SortKey; 5] = [
        SortKey::Contribution,
        SortKey::Delta,
        SortKey::Ratio,
        SortKey::MeanRatio,
        SortKey::Name,
    ];

    /// What the title says the rows are ordered by.
    pub(crate) fn label(self) -> &'static str {
        match self {
            SortKey::Contribution => "contribution to the step change",
            SortKey::Delta => "Δ total",
            SortKey::Ratio => "ratio of totals",
            SortKey::MeanRatio => "ratio of means",
            SortKey::Name => "name",
        }
    }

    fn step(self, by: isize) -> SortKey {
        let at = Self::ALL.iter().position(|&key| key == self).unwrap_or(0);
        let count = Self::ALL.len() as isize;
        Self::ALL[(at as isize + by).rem_euclid(count) as usize]
    }
}

/// The pane the arrows move in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pane {
    /// The op table: the arrows select an op.
    Ops,
    /// The workers' busy time: the arrows scroll it.
    Workers,
}

/// What the keys do now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// The view.
    Normal,
    /// The help overlay is up.
    Help,
}

/// What a key asks of the view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CompareAction {
    /// Leave the view.
    Quit,
    /// Show or hide the help.
    ToggleHelp,
    /// The next sort key.
    SortNext,
    /// The previous sort key.
    SortPrev,
    /// Order by this key.
    SortBy(SortKey),
    /// Reverse the order.
    Invert,
    /// Focus the other pane.
    FocusNext,
    /// One row up.
    Up,
    /// One row down.
    Down,
    /// A page up.
    PageUp,
    /// A page down.
    PageDown,
    /// The first row.
    Top,
    /// The last row.
    Bottom,
}

/// Rows the views showed on their last draw (for paging and for keeping the selection in
/// sight); written while drawing, hence cells.
#[derive(Debug, Default)]
pub(crate) struct ShownRows {
    /// Op rows the table showed.
    pub(crate) ops: Cell<usize>,
    /// Worker rows the workers pane showed.
    pub(crate) workers: Cell<usize>,
    /// The first op row the table showed (it follows the selection).
    pub(crate) ops_from: Cell<usize>,
    /// The help's last first line (its length less the lines it showed).
    pub(crate) help_last: Cell<usize>,
}

/// The compare view's whole state.
#[derive(Debug)]
pub(crate) struct CompareView {
    comparison: Comparison,
    order: Vec<usize>,
    /// What orders the op rows.
    pub(crate) sort: SortKey,
    /// Whether the order is reversed.
    pub(crate) inverted: bool,
    /// The selected op: a position in the shown order.
    pub(crate) selected: usize,
    /// The first worker row shown.
    pub(crate) workers_scroll: usize,
    /// The first help line shown.
    pub(crate) help_scroll: usize,
    /// The pane the arrows move in.
    pub(crate) focus: Pane,
    /// What the keys do now.
    pub(crate) mode: Mode,
    /// Set by [`CompareAction::Quit`].
    pub(crate) should_quit: bool,
    /// Rows shown on the last draw.
    pub(crate) shown: ShownRows,
}

impl CompareView {
    /// The view of `comparison`, ordered by contribution, its first op selected.
    pub(crate) fn new(comparison: Comparison) -> Self {
        let mut view = CompareView {
            order: (0..comparison.ops.len()).collect(),
            comparison,
            sort: SortKey::Contribution,
            inverted: false,
            selected: 0,
            workers_scroll: 0,
            help_scroll: 0,
            focus: Pane::Ops,
            mode: Mode::Normal,
            should_quit: false,
            shown: ShownRows::default(),
        };
        view.reorder();
        view
    }

    /// The comparison shown.
    pub(crate) fn comparison(&self) -> &Comparison {
        &self.comparison
    }

    /// The op rows in the shown order.
    pub(crate) fn ops(&self) -> impl Iterator<Item = &OpRow> + '_ {
        self.order.iter().map(|&index| &self.comparison.ops[index])
    }

    /// The selected op, if there are any.
    pub(crate) fn selected_op(&self) -> Option<&OpRow> {
        let index = *self.order.get(self.selected)?;
        self.comparison.ops.get(index)
    }

    /// `op`'s change in time per step, ms (where both runs say their iterations; else its
    /// change in total time): what [`SortKey::Contribution`] orders by, signed.
    pub(crate) fn change_ms(&self, op: &OpRow) -> f64 {
        self.comparison
            .per_step_ms(op)
            .map_or(op.total_ms.delta, |per_step| per_step.delta)
    }

    /// `op`'s share of the step time's change (its per-step change over the step's), where
    /// both are known and the step changed.
    pub(crate) fn share_of_step_change(&self, op: &OpRow) -> Option<f64> {
        let step_ms = self.comparison.step_time_s?.delta * 1e3;
        let per_step = self.comparison.per_step_ms(op)?;
        (step_ms != 0.0).then(|| per_step.delta / step_ms)
    }

    /// Applies `action`.
    pub(crate) fn update(&mut self, action: CompareAction) {
        match action {
            CompareAction::Quit => self.should_quit = true,
            CompareAction::ToggleHelp => {
                self.help_scroll = 0;
                self.mode = match self.mode {
                    Mode::Normal => Mode::Help,
                    Mode::Help => Mode::Normal,
                }
            }
            CompareAction::SortNext => self.sort_by(self.sort.step(1)),
            CompareAction::SortPrev => self.sort_by(self.sort.step(-1)),
            CompareAction::SortBy(key) => self.sort_by(key),
            CompareAction::Invert => {
                self.inverted = !self.inverted;
                self.reorder();
            }
            CompareAction::FocusNext => {
                self.focus = match self.focus {
                    Pane::Ops => Pane::Workers,
                    Pane::Workers => Pane::Ops,
                }
            }
            CompareAction::Up => self.move_by(-1),
            CompareAction::Down => self.move_by(1),
            CompareAction::PageUp => self.move_by(-(self.page() as isize)),
            CompareAction::PageDown => self.move_by(self.page() as isize),
            CompareAction::Top => self.move_by(isize::MIN / 2),
            CompareAction::Bottom => self.move_by(isize::MAX / 2),
        }
    }

    fn sort_by(&mut self, key: SortKey) {
        if key != self.sort {
            self.inverted = false;
        }
        self.sort = key;
        self.reorder();
    }

    /// Orders the rows by the sort key and shows the first one selected.
    fn reorder(&mut self) {
        let rows = &self.comparison.ops;
        let mut order: Vec<usize> = (0..rows.len()).collect();
        order.sort_by(|&x, &y| self.compare_rows(&rows[x], &rows[y]));
        if self.inverted {
            order.reverse();
        }
        self.order = order;
        self.selected = 0;
        self.shown.ops_from.set(0);
    }

    /// `x` before `y` under the sort key (ties by name, so the order is total and stable).
    fn compare_rows(&self, x: &OpRow, y: &OpRow) -> Ordering {
        let descending = |a: f64, b: f64| b.total_cmp(&a);
        let ratio = |r: Option<f64>| r.unwrap_or(f64::NEG_INFINITY);
        let by_key = match self.sort {
            SortKey::Contribution => descending(self.contribution(x), self.contribution(y)),
            SortKey::Delta => descending(x.total_ms.delta, y.total_ms.delta),
            SortKey::Ratio => descending(ratio(x.total_ms.ratio), ratio(y.total_ms.ratio)),
            SortKey::MeanRatio => descending(ratio(x.mean_us.ratio), ratio(y.mean_us.ratio)),
            SortKey::Name => Ordering::Equal,
        };
        by_key.then_with(|| x.name.cmp(&y.name))
    }

    /// `op`'s change toward the step time's change: positive when it moved the way the step
    /// did (its size when the step did not change, or the runs do not say).
    fn contribution(&self, op: &OpRow) -> f64 {
        let change = self.change_ms(op);
        match self.comparison.step_time_s.map(|step| step.delta) {
            Some(step) if step > 0.0 => change,
            Some(step) if step < 0.0 => -change,
            _ => change.abs(),
        }
    }

    fn page(&self) -> usize {
        if self.mode == Mode::Help {
            return 10;
        }
        let shown = match self.focus {
            Pane::Ops => self.shown.ops.get(),
            Pane::Workers => self.shown.workers.get(),
        };
        shown.max(1)
    }

    fn move_by(&mut self, by: isize) {
        if self.mode == Mode::Help {
            let last = self.shown.help_last.get();
            self.help_scroll = self.help_scroll.saturating_add_signed(by).min(last);
            return;
        }
        match self.focus {
            Pane::Ops => {
                let last = self.order.len().saturating_sub(1);
                self.selected = self.selected.saturating_add_signed(by).min(last);
            }
            Pane::Workers => {
                let rows = self.comparison.workers.len();
                let last = rows.saturating_sub(self.shown.workers.get().max(1));
                self.workers_scroll = self.workers_scroll.saturating_add_signed(by).min(last);
            }
        }
    }
}
