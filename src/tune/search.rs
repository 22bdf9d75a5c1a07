//! [`search`]: calibrate, scan, confirm the leaders interleaved, check the pick against the
//! default in pairs, pick (the algorithm is in the [module docs](super)). Pure logic over a
//! [`Probe`], so the tests drive it with a fake.
#![forbid(unsafe_code)]

use std::time::Duration;

use serde::Serialize;

use super::paired::{decide, PairedResult, PAIRED_WINDOWS};
use super::space::{Objective, Point, Space};
use super::stats::{median, spread, within_noise};
use super::{TuneError, TuneStop};

/// The shortest measurement window: shorter ones measure the scheduler's whims.
pub(crate) const MIN_WINDOW: Duration = Duration::from_millis(100);
/// The settling period before each window, as a fraction of the window (discarded).
pub(crate) const SETTLE_FRACTION: f64 = 0.25;
/// Windows each confirmed point gets (its scan window included), budget permitting.
pub(crate) const CONFIRM_SAMPLES: usize = 5;
/// The most points confirmed (the default included).
const CONFIRM_POINTS: usize = 5;
/// A scan figure within this fraction of the best scan figure makes a point a contender.
pub(crate) const SCAN_TOLERANCE: f64 = 0.5;
/// Two medians closer than this fraction of the larger are always within noise (choosing
/// the candidate among the leaders; the default is then faced in pairs).
pub(crate) const MIN_NOISE: f64 = 0.1;
/// The part of a slot left for a window's overrun (it ends on an iteration end).
pub(super) const HEADROOM: f64 = 0.9;

/// How a window is measured: what the workload's progress is counted in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Basis {
    /// Whole iterations (an iteration is short next to a window).
    Iterations,
    /// Ops finished, over the ops of one iteration.
    Ops,
    /// FLOPs done, over the FLOPs of one iteration.
    Flops,
}

impl Basis {
    /// The name shown in reports.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Basis::Iterations => "whole iterations",
            Basis::Ops => "op throughput",
            Basis::Flops => "GFLOP/s",
        }
    }
}

/// Why a probe could not measure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Halt {
    /// The search was asked to stop.
    Stopped,
    /// The run ended, or refused a resize: the reason.
    Ended(String),
}

/// What the search measures with: a running workload ([`DriverProbe`](super::DriverProbe)),
/// or a fake.
pub(crate) trait Probe {
    /// Measures one window at the run's current counts (after settling) and decides how
    /// windows are measured.
    fn calibrate(&mut self, window: Duration) -> Result<Basis, Halt>;

    /// Resizes to `point`, settles, and measures one `window`: iterations per second
    /// ([`Objective::Throughput`]) or seconds per step ([`Objective::Latency`]).
    fn measure(&mut self, point: Point, window: Duration) -> Result<f64, Halt>;

    /// Time since the search started.
    fn elapsed(&self) -> Duration;
}

/// What `search` needs to know.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TuneOptions {
    /// How long the whole search may take.
    pub(crate) budget: Duration,
    /// What is better.
    pub(crate) objective: Objective,
    /// The dimensions varied.
    pub(crate) space: Space,
    /// The run's counts when the search starts (the fixed dimensions keep them).
    pub(crate) start: Point,
    /// CPUs the process may use.
    pub(crate) cpus: usize,
    /// No count goes past this.
    pub(crate) max_threads: usize,
}

/// Which part of the search a window belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// The first window, at the run's counts.
    Calibrate,
    /// Every point once.
    Scan,
    /// The leaders again, interleaved.
    Confirm,
    /// The candidates and the default in alternating windows, paired.
    Paired,
}

/// One window, before (`value: None`) and after it is measured, for progress displays.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ProbeEvent {
    /// The window's number, from 1.
    pub(crate) index: usize,
    /// Windows planned in all.
    pub(crate) planned: usize,
    /// Its part of the search.
    pub(crate) phase: Phase,
    /// The counts measured.
    pub(crate) point: Point,
    /// The figure, once measured.
    pub(crate) value: Option<f64>,
    /// The best scan or confirmed figure so far.
    pub(crate) best: Option<(Point, f64)>,
}

/// One point's windows and what they say.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct PointResult {
    /// The configuration.
    #[serde(flatten)]
    pub(crate) point: Point,
    /// The median figure.
    pub(crate) median: f64,
    /// The figures' median absolute deviation.
    pub(crate) spread: f64,
    /// Every window's figure, in the order measured.
    pub(crate) samples: Vec<f64>,
}

impl PointResult {
    /// `point` measured as `samples`.
    pub(crate) fn new(point: Point, samples: Vec<f64>) -> Self {
        PointResult {
            point,
            median: median(&samples),
            spread: spread(&samples),
            samples,
        }
    }

    fn push(&mut self, sample: f64) {
        self.samples.push(sample);
        self.median = median(&self.samples);
        self.spread = spread(&self.samples);
    }

    /// The spread as a fraction of the median.
    pub(crate) fn relative_spread(&self) -> f64 {
        match self.median {
            median if median != 0.0 => self.spread / median.abs(),
            _ => 0.0,
        }
    }
}

/// How much the best beats the default.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub(crate) struct Gain {
    /// The best's speed over the default's (1.0: as fast): the median of the pairs' ratios
    /// when paired.
    pub(crate) ratio: f64,
    /// The ratio's uncertainty (plus or minus): the paired spread when paired, else from the
    /// two points' spreads.
    pub(crate) spread: f64,
    /// The pairs it was measured in (0: from the two points' own windows, or the pick is
    /// the default).
    pub(crate) pairs: usize,
}

impl Gain {
    /// The default against itself.
    pub(crate) const NONE: Gain = Gain {
        ratio: 1.0,
        spread: 0.0,
        pairs: 0,
    };

    /// What the figure is: paired, and what a ratio below 1.0 means (a tie within the
    /// paired spread, which goes to fewer threads).
    pub(crate) fn note(&self) -> String {
        let tie = match self.ratio < 1.0 {
            true => ": a tie within the paired spread, which goes to fewer threads",
            false => "",
        };
        match self.pairs {
            0 => String::new(),
            pairs => format!(" (median of {pairs} alternating pairs{tie})"),
        }
    }
}

/// How the search ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// It ran its course (every confirm round, or the budget was spent).
    Finished,
    /// It was stopped before.
    Stopped,
    /// The run ended or refused a resize: why.
    Ended(String),
}

/// What a search found.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TuneReport {
    /// What was better.
    pub(crate) objective: Objective,
    /// How windows were measured (`None`: the search ended before calibrating).
    pub(crate) basis: Option<Basis>,
    /// Each window's measured length (its settling period not counted).
    pub(crate) window: Duration,
    /// The budget given.
    pub(crate) budget: Duration,
    /// Time the search took.
    pub(crate) elapsed: Duration,
    /// Every point measured, in grid order.
    pub(crate) points: Vec<PointResult>,
    /// The pick (`None`: nothing was measured).
    pub(crate) best: Option<Point>,
    /// The default configuration.
    pub(crate) default: Point,
    /// The best over the default, when both were measured.
    pub(crate) gain: Option<Gain>,
    /// The challengers checked against the default in pairs, in order of preference (empty:
    /// a grid of one point, a search that does not pair, or one that ended before the pairs).
    pub(crate) paired: Vec<PairedResult>,
    /// How the search ended.
    pub(crate) outcome: Outcome,
}

impl TuneReport {
    /// The windows of `point`, if it was measured.
    pub(crate) fn point(&self, point: Point) -> Option<&PointResult> {
        self.points.iter().find(|result| result.point == point)
    }
}

/// Searches `options`' space with `probe`, telling `observe` about each window; stops early
/// when `stop` is pressed. Refuses a budget too short for the grid before measuring.
pub(crate) fn search(
    probe: &mut dyn Probe,
    options: &TuneOptions,
    stop: &TuneStop,
    observe: &mut dyn FnMut(&ProbeEvent),
) -> Result<TuneReport, TuneError> {
    search_with(probe, options, Pairing::Paired, stop, observe)
}

/// Whether a search checks its candidate against the default in pairs itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pairing {
    /// It does: its pick is never slower than the default beyond the paired spread.
    Paired,
    /// It does not: its `best` is the unpaired candidate, for a caller that pairs it with
    /// the default itself (the rounds of a search over settings).
    Unpaired,
}

/// [`search`], pairing as `pairing` says.
pub(super) fn search_with(
    probe: &mut dyn Probe,
    options: &TuneOptions,
    pairing: Pairing,
    stop: &TuneStop,
    observe: &mut dyn FnMut(&ProbeEvent),
) -> Result<TuneReport, TuneError> {
    let plan = Plan::new(options, pairing)?;
    let mut run = Search {
        probe,
        options,
        plan: &plan,
        stop,
        observe,
        index: 0,
        results: plan
            .grid
            .iter()
            .map(|&point| PointResult::new(point, Vec::new()))
            .collect(),
        challengers: Vec::new(),
        default_pairs: Vec::new(),
        basis: None,
    };
    let outcome = match run.run() {
        Ok(()) | Err(End::BudgetSpent) => Outcome::Finished,
        Err(End::Halt(Halt::Stopped)) => Outcome::Stopped,
        Err(End::Halt(Halt::Ended(reason))) => Outcome::Ended(reason),
    };
    Ok(run.report(outcome))
}

/// The grid and how the budget is cut.
pub(super) struct Plan {
    grid: Vec<Point>,
    default: Point,
    pairing: Pairing,
    /// Windows planned: calibration, scan, confirm rounds, pairs.
    planned: usize,
    /// Settling plus window, per window.
    slot: Duration,
    pub(super) window: Duration,
}

impl Plan {
    pub(super) fn new(options: &TuneOptions, pairing: Pairing) -> Result<Plan, TuneError> {
        let (space, start) = (options.space, options.start);
        let mut grid = space.grid(start, options.cpus, options.max_threads);
        let default = space.default_point(start, options.cpus, options.max_threads);
        if !grid.contains(&default) {
            grid.push(default);
            grid.sort();
        }
        let confirm = CONFIRM_POINTS.min(grid.len()) * (CONFIRM_SAMPLES - 1);
        let paired = match (pairing, grid.len()) {
            (Pairing::Paired, 2..) => PAIRED_WINDOWS,
            _ => 0,
        };
        let planned = 1 + grid.len() + confirm + paired;
        let slot = options.budget / planned as u32;
        let window = slot.mul_f64(HEADROOM / (1.0 + SETTLE_FRACTION));
        if window < MIN_WINDOW {
            let needed = MIN_WINDOW.mul_f64((1.0 + SETTLE_FRACTION) / HEADROOM) * planned as u32;
            return Err(TuneError::BudgetTooShort {
                budget: options.budget,
                points: grid.len(),
                min_window: MIN_WINDOW,
                needed,
            });
        }
        Ok(Plan {
            grid,
            default,
            pairing,
            planned,
            slot,
            window,
        })
    }
}

/// A search in progress.
struct Search<'a> {
    probe: &'a mut dyn Probe,
    options: &'a TuneOptions,
    plan: &'a Plan,
    stop: &'a TuneStop,
    observe: &'a mut dyn FnMut(&ProbeEvent),
    index: usize,
    /// One per grid point, in grid order.
    results: Vec<PointResult>,
    /// The candidates paired with the default, with their paired windows.
    challengers: Vec<(Point, Vec<f64>)>,
    /// The default's paired windows.
    default_pairs: Vec<f64>,
    basis: Option<Basis>,
}

impl Search<'_> {
    fn run(&mut self) -> Result<(), End> {
        if self.stop.is_stopped() {
            return Err(End::Halt(Halt::Stopped));
        }
        let start = self.options.start;
        self.announce(Phase::Calibrate, start, None);
        self.basis = Some(self.probe.calibrate(self.plan.window)?);
        let mut scan_order = vec![self.plan.default];
        scan_order.extend(self.plan.grid.iter().filter(|&&p| p != self.plan.default));
        for point in scan_order {
            self.window(Phase::Scan, point)?;
        }
        let leaders = self.leaders();
        for _round in 1..CONFIRM_SAMPLES {
            for &point in &leaders {
                if self.samples(point) < CONFIRM_SAMPLES {
                    self.window(Phase::Confirm, point)?;
                }
            }
        }
        match self.plan.pairing {
            Pairing::Paired => self.pairs(),
            Pairing::Unpaired => Ok(()),
        }
    }

    /// The candidates against the default in rounds, the order alternating (default first
    /// in even rounds, last in odd ones), as many rounds as [`PAIRED_WINDOWS`] holds.
    fn pairs(&mut self) -> Result<(), End> {
        let default = self.plan.default;
        self.challengers = self
            .candidates()
            .into_iter()
            .filter(|&point| point != default)
            .map(|point| (point, Vec::new()))
            .collect();
        if self.challengers.is_empty() {
            return Ok(());
        }
        let mut order = vec![default];
        order.extend(self.challengers.iter().map(|(point, _)| *point));
        for round in 0..PAIRED_WINDOWS / order.len() {
            for k in 0..order.len() {
                let point = match round % 2 {
                    0 => order[k],
                    _ => order[order.len() - 1 - k],
                };
                self.window(Phase::Paired, point)?;
            }
        }
        Ok(())
    }

    /// The points worth pairing with the default: see [`challengers`].
    fn candidates(&self) -> Vec<Point> {
        let results: Vec<&PointResult> = self.results.iter().collect();
        let default = results.iter().position(|r| r.point == self.plan.default);
        let cost = |i: usize| (results[i].point.threads(), 0);
        challengers(&results, self.options.objective, default, &cost)
            .into_iter()
            .map(|i| results[i].point)
            .collect()
    }

    /// The pick once the pairs are in: see [`decide`]; the unpaired candidate while none is
    /// under way (or when the search does not pair).
    fn decision(&self) -> (Option<Point>, Option<Gain>, Vec<PairedResult>) {
        let objective = self.options.objective;
        let default = self.plan.default;
        let measured: Vec<PointResult> = self
            .results
            .iter()
            .filter(|r| !r.samples.is_empty())
            .cloned()
            .collect();
        let find = |point: Point| measured.iter().find(|r| r.point == point);
        let candidate = pick(&measured, objective);
        let Some(default_result) = find(default) else {
            return (candidate, None, Vec::new());
        };
        if self.plan.pairing == Pairing::Unpaired {
            let gain = candidate
                .and_then(find)
                .map(|best| gain(objective, best, default_result));
            return (candidate, gain, Vec::new());
        }
        let paired: Vec<PairedResult> = self
            .challengers
            .iter()
            .map(|(point, windows)| {
                PairedResult::measured(objective, *point, windows, &self.default_pairs)
            })
            .collect();
        let (best, gain) = match decide(default, &paired) {
            Some(i) => (paired[i].point, paired[i].gain()),
            None => (default, Gain::NONE),
        };
        (Some(best), Some(gain), paired)
    }

    /// Measures `point` once, if its slot fits in the budget (else ends the search).
    fn window(&mut self, phase: Phase, point: Point) -> Result<(), End> {
        if self.stop.is_stopped() {
            return Err(End::Halt(Halt::Stopped));
        }
        if self.probe.elapsed() + self.plan.slot > self.options.budget {
            return Err(End::BudgetSpent);
        }
        self.announce(phase, point, None);
        let value = self.probe.measure(point, self.plan.window)?;
        match phase {
            Phase::Paired if point == self.plan.default => self.default_pairs.push(value),
            Phase::Paired => self.paired_mut(point).push(value),
            _ => self.result_mut(point).push(value),
        }
        self.announce(phase, point, Some(value));
        Ok(())
    }

    fn announce(&mut self, phase: Phase, point: Point, value: Option<f64>) {
        if value.is_none() {
            self.index += 1;
        }
        let picked = match self.challengers.is_empty() {
            true => pick(&self.results, self.options.objective),
            false => self.decision().0,
        };
        let best = picked.and_then(|best| {
            let result = self.results.iter().find(|r| r.point == best)?;
            Some((best, result.median))
        });
        (self.observe)(&ProbeEvent {
            index: self.index,
            planned: self.plan.planned,
            phase,
            point,
            value,
            best,
        });
    }

    fn samples(&self, point: Point) -> usize {
        self.results
            .iter()
            .find(|r| r.point == point)
            .map_or(0, |r| r.samples.len())
    }

    fn paired_mut(&mut self, point: Point) -> &mut Vec<f64> {
        let index = self
            .challengers
            .iter()
            .position(|(challenger, _)| *challenger == point)
            .expect("every point paired is a challenger");
        &mut self.challengers[index].1
    }

    fn result_mut(&mut self, point: Point) -> &mut PointResult {
        let index = self
            .results
            .iter()
            .position(|r| r.point == point)
            .expect("every point measured is in the grid");
        &mut self.results[index]
    }

    /// The points confirmed: the two best of the scan and the two with the fewest threads
    /// among those within [`SCAN_TOLERANCE`] of the best, the default, then the next best
    /// of the scan up to [`CONFIRM_POINTS`] (a small grid is confirmed whole).
    fn leaders(&self) -> Vec<Point> {
        let objective = self.options.objective;
        let measured: Vec<&PointResult> = self
            .results
            .iter()
            .filter(|r| !r.samples.is_empty())
            .collect();
        let Some(top) = measured.iter().copied().reduce(|a, b| {
            if objective.better(b.median, a.median) {
                b
            } else {
                a
            }
        }) else {
            return Vec::new();
        };
        let mut near: Vec<&PointResult> = measured
            .into_iter()
            .filter(|r| objective.speedup(top.median, r.median) <= 1.0 + SCAN_TOLERANCE)
            .collect();
        near.sort_by(|a, b| rank(objective, a, b));
        let mut leaders: Vec<Point> = near.iter().take(2).map(|r| r.point).collect();
        near.sort_by(|a, b| {
            a.point
                .threads()
                .cmp(&b.point.threads())
                .then(rank(objective, a, b))
        });
        leaders.extend(near.iter().take(2).map(|r| r.point));
        leaders.push(self.plan.default);
        // Then the next best of the scan, up to the points the budget planned for.
        let mut rest: Vec<&PointResult> = self
            .results
            .iter()
            .filter(|r| !r.samples.is_empty())
            .collect();
        rest.sort_by(|a, b| rank(objective, a, b));
        leaders.extend(rest.iter().map(|r| r.point));
        let mut seen = Vec::new();
        leaders.retain(|point| {
            let new = !seen.contains(point);
            seen.push(*point);
            new
        });
        leaders.truncate(CONFIRM_POINTS);
        leaders
    }

    fn report(self, outcome: Outcome) -> TuneReport {
        let objective = self.options.objective;
        let (best, gain, paired) = self.decision();
        let points: Vec<PointResult> = self
            .results
            .into_iter()
            .filter(|r| !r.samples.is_empty())
            .collect();
        TuneReport {
            objective,
            basis: self.basis,
            window: self.plan.window,
            budget: self.options.budget,
            elapsed: self.probe.elapsed(),
            points,
            best,
            default: self.plan.default,
            gain,
            paired,
            outcome,
        }
    }
}

/// Why the search ended before its last window.
enum End {
    /// The probe could not measure.
    Halt(Halt),
    /// The next window's slot does not fit in what is left of the budget.
    BudgetSpent,
}

impl From<Halt> for End {
    fn from(halt: Halt) -> Self {
        End::Halt(halt)
    }
}

/// Best first: by median, per `objective`.
pub(super) fn rank(objective: Objective, a: &PointResult, b: &PointResult) -> std::cmp::Ordering {
    match objective {
        Objective::Throughput => b.median.total_cmp(&a.median),
        Objective::Latency => a.median.total_cmp(&b.median),
    }
}

/// The unpaired candidate among `results` (the points measured more than once; all measured
/// points while none is): see [`pick_among`].
fn pick(results: &[PointResult], objective: Objective) -> Option<Point> {
    let results: Vec<&PointResult> = results.iter().collect();
    pick_among(&results, objective, &|i| (results[i].point.threads(), 0)).map(|i| results[i].point)
}

/// The indices `results` are judged among: the ones measured more than once; all measured
/// ones while none is.
fn eligible(results: &[&PointResult]) -> Vec<usize> {
    let measured: Vec<usize> = (0..results.len())
        .filter(|&i| !results[i].samples.is_empty())
        .collect();
    let repeated: Vec<usize> = measured
        .iter()
        .copied()
        .filter(|&i| results[i].samples.len() > 1)
        .collect();
    match repeated.is_empty() {
        true => measured,
        false => repeated,
    }
}

/// The index of the leader among `results` ([`eligible`] ones): the best pessimistic figure
/// (median less its spread, or plus it for a step time), so a point that is fast only
/// sometimes does not lead.
pub(super) fn leader_among(results: &[&PointResult], objective: Objective) -> Option<usize> {
    let pessimistic = |r: &PointResult| match objective {
        Objective::Throughput => r.median - r.spread,
        Objective::Latency => r.median + r.spread,
    };
    eligible(results).into_iter().reduce(|a, b| {
        match objective.better(pessimistic(results[b]), pessimistic(results[a])) {
            true => b,
            false => a,
        }
    })
}

/// The index of the unpaired candidate among `results` ([`eligible`] ones): the lowest
/// `cost` (fewest threads first) within noise of the leader ([`leader_among`]), then the
/// best median. Whether it beats the default is for the pairs to say ([`decide`]).
pub(super) fn pick_among(
    results: &[&PointResult],
    objective: Objective,
    cost: &dyn Fn(usize) -> (usize, usize),
) -> Option<usize> {
    let leader = leader_among(results, objective)?;
    eligible(results)
        .into_iter()
        .filter(|&i| within_noise(results[i], results[leader]))
        .min_by(|&a, &b| {
            cost(a)
                .cmp(&cost(b))
                .then(rank(objective, results[a], results[b]))
        })
}

/// The indices of the points worth pairing with `default` among `results`, in order of
/// preference: the unpaired candidate ([`pick_among`]), then the leader of the rest (the
/// best pessimistic figure among the points other than the default), so a candidate the
/// pairs reject can give way to the next best rather than straight to the default. Never
/// `default` itself.
pub(super) fn challengers(
    results: &[&PointResult],
    objective: Objective,
    default: Option<usize>,
    cost: &dyn Fn(usize) -> (usize, usize),
) -> Vec<usize> {
    let mut chosen: Vec<usize> = pick_among(results, objective, cost).into_iter().collect();
    let others: Vec<usize> = (0..results.len()).filter(|&i| Some(i) != default).collect();
    let rest: Vec<&PointResult> = others.iter().map(|&i| results[i]).collect();
    if let Some(leader) = leader_among(&rest, objective) {
        chosen.push(others[leader]);
    }
    chosen.dedup();
    chosen.retain(|&i| Some(i) != default);
    chosen
}

/// `best` over `default`, with the uncertainty of the two spreads.
pub(super) fn gain(objective: Objective, best: &PointResult, default: &PointResult) -> Gain {
    let ratio = objective.speedup(best.median, default.median);
    let ratio = if ratio.is_finite() { ratio } else { 0.0 };
    Gain {
        ratio,
        spread: ratio * (best.relative_spread() + default.relative_spread()),
        pairs: 0,
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
