//! [`search_settings`]: the search when the space holds a dimension fixed when a run builds
//! its pools (`spin`, `pool`): one run per [`Setting`], rebuilt in turn, each searched live
//! over its counts, then the settings' leaders measured again in interleaved rounds, one
//! fresh run per visit. Pure logic over a [`Rebuild`], so the tests drive it with a fake.
//!
//! # The budget
//! With one setting the whole budget is its live [`search`]. With several,
//! [`ROUNDS_FRACTION`] of it is kept for the rounds and the rest is cut in equal shares, one
//! per setting, each with its own deadline (share x (k + 1) from the start): building a run
//! (its tensors, its pools, its setup ops) comes out of the setting's share, and the live
//! search gets what is left before the deadline, so a slow build never eats a later
//! setting's share. A budget whose share cannot hold one setting's grid is refused before
//! anything runs, naming the least that fits; a setting whose build left too little to
//! measure is listed as skipped.
//!
//! # The rounds
//! Each setting's live search ends with its unpaired candidate (the tie rule within the
//! setting; the live searches do not pair: the rounds do). The finalists are the run's own
//! setting (its candidate and the default counts) and the other settings with the best
//! candidates, up to [`ROUND_SETTINGS`]. A round visits each finalist setting, the order
//! reversed every other round (so a steady drift of the machine favours no setting): a
//! fresh run built at the finalist's counts, one warm-up window (discarded: workers start,
//! caches fill, setup ops run), then one window per finalist of that setting. Rounds go on
//! until [`CONFIRM_SAMPLES`] or the budget: their window is cut from what phase one left,
//! with each visit's build cost taken as the slowest build seen; fewer rounds (at least
//! [`MIN_PAIRS`]) are run rather than windows shorter than [`MIN_WINDOW`]. Every finalist
//! is thus measured once per round, a slow moment of the machine lands on one round of
//! every setting alike, and only these interleaved figures compare settings (figures from
//! different phases would carry the machine's drift between them).
//!
//! # The pick
//! The rounds are the pairs: a finalist's window and the default's of the same round make a
//! pair. The candidate among the finalists is chosen by the same rule as within a setting
//! ([`pick_among`](super::search::pick_among): the best pessimistic figure leads, then the fewest threads within noise
//! of it, then the run's own setting); it and the leader of the other finalists are then
//! checked against the default in their pairs ([`decide`]): kept when faster beyond the
//! paired spread, or tied within it with fewer threads; else the default. When no round
//! could run nothing was paired, and the default is kept (the report says so).
//!
//! # Stopping
//! A stop, a run that fails or a build that fails ends the search at once; the report keeps
//! every setting and round measured so far and says why it ended.
#![forbid(unsafe_code)]

use std::time::Duration;

use super::paired::{decide, PairedResult, MIN_PAIRS};
use super::search::{
    challengers, rank, search_with, Basis, Gain, Halt, Outcome, Pairing, Phase, PointResult, Probe,
    ProbeEvent, TuneOptions, TuneReport, CONFIRM_SAMPLES, HEADROOM, MIN_WINDOW, SETTLE_FRACTION,
};
use super::setting::Setting;
use super::space::{Objective, Point};
use super::{TuneError, TuneStop};

/// The share of the budget kept for the interleaved rounds when several settings are
/// searched.
pub(crate) const ROUNDS_FRACTION: f64 = 0.3;
/// The most settings measured in the rounds (the run's own included).
pub(crate) const ROUND_SETTINGS: usize = 4;
/// The fewest rounds worth running: the pairs confirm nothing with fewer.
const MIN_ROUNDS: usize = MIN_PAIRS;

/// What builds, measures and stops the runs: real workload runs
/// ([`tune_settings`](super::tune_settings)), or a fake.
pub(crate) trait Rebuild {
    /// A running run, measured through [`Probe`] (its `elapsed` on the search's clock).
    type Run: Probe;

    /// Builds and starts a run with `setting` at `start`'s counts; its windows are measured
    /// on `basis` when given (so every run's figures compare with the first's).
    fn build(
        &mut self,
        setting: Setting,
        start: Point,
        basis: Option<Basis>,
    ) -> Result<Self::Run, Halt>;

    /// Stops `run` and keeps what it did.
    fn finish(&mut self, setting: Setting, run: Self::Run);

    /// Time since the search started.
    fn elapsed(&self) -> Duration;
}

/// One setting's live search.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SettingSearch {
    /// The setting its run was built with.
    pub(crate) setting: Setting,
    /// What the live search over the counts found.
    pub(crate) report: TuneReport,
}

/// One finalist of the rounds: a setting and counts, with its interleaved windows.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Finalist {
    /// The setting.
    pub(crate) setting: Setting,
    /// The counts and one window's figure per round.
    pub(crate) result: PointResult,
}

/// What a search over settings found.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SettingsReport {
    /// What was better.
    pub(crate) objective: Objective,
    /// The budget given.
    pub(crate) budget: Duration,
    /// Time the search took.
    pub(crate) elapsed: Duration,
    /// Each setting's live search, in the order run.
    pub(crate) settings: Vec<SettingSearch>,
    /// Settings whose build left too little of their share to measure.
    pub(crate) skipped: Vec<Setting>,
    /// The rounds' window (zero: no round ran).
    pub(crate) round_window: Duration,
    /// Rounds measured whole.
    pub(crate) rounds: usize,
    /// The finalists with their rounds' figures.
    pub(crate) finalists: Vec<Finalist>,
    /// The pick (`None`: nothing was measured).
    pub(crate) best: Option<(Setting, Point)>,
    /// The default: the run's own setting at one thread per CPU.
    pub(crate) default: (Setting, Point),
    /// The best over the default, when both were measured alike.
    pub(crate) gain: Option<Gain>,
    /// The challengers checked against the default in the rounds' pairs, with their
    /// settings, in order of preference.
    pub(crate) paired: Vec<(Setting, PairedResult)>,
    /// How the search ended.
    pub(crate) outcome: Outcome,
}

impl SettingsReport {
    /// The figures the pick compared: the rounds' when any ran, else every setting's live
    /// figures.
    pub(crate) fn compared(&self) -> Vec<(Setting, &PointResult)> {
        match self.rounds {
            0 => self
                .settings
                .iter()
                .flat_map(|s| s.report.points.iter().map(move |r| (s.setting, r)))
                .collect(),
            _ => self
                .finalists
                .iter()
                .map(|f| (f.setting, &f.result))
                .collect(),
        }
    }

    /// The compared figure of `setting` at `point`.
    pub(crate) fn result(&self, setting: Setting, point: Point) -> Option<&PointResult> {
        self.compared()
            .into_iter()
            .find(|&(s, r)| s == setting && r.point == point)
            .map(|(_, r)| r)
    }
}

/// Searches every setting of `settings` (the first is the run's own), rebuilding a run for
/// each with `rebuild`; `options` holds the counts' space and the budget. `observe` hears of
/// each window with its setting.
pub(crate) fn search_settings<R: Rebuild>(
    rebuild: &mut R,
    options: &TuneOptions,
    settings: &[Setting],
    stop: &TuneStop,
    observe: &mut dyn FnMut(Setting, &ProbeEvent),
) -> Result<SettingsReport, TuneError> {
    let shares = Shares::new(options, settings.len())?;
    let own = settings.first().copied().ok_or(TuneError::EmptySpace)?;
    let mut run = SettingsRun {
        rebuild,
        options,
        stop,
        observe,
        own,
        settings: Vec::new(),
        skipped: Vec::new(),
        finalists: Vec::new(),
        basis: None,
        slowest_build: Duration::ZERO,
        round_window: Duration::ZERO,
    };
    let mut outcome = run.searches(settings, &shares);
    if outcome == Outcome::Finished && settings.len() > 1 {
        outcome = run.rounds();
    }
    Ok(run.report(outcome))
}

/// How the budget is cut: one share per setting, the rest for the rounds.
#[derive(Debug)]
struct Shares {
    share: Duration,
}

impl Shares {
    fn new(options: &TuneOptions, settings: usize) -> Result<Shares, TuneError> {
        let settings = settings.max(1);
        let fraction = match settings {
            1 => 1.0,
            _ => 1.0 - ROUNDS_FRACTION,
        };
        let share = options.budget.mul_f64(fraction) / settings as u32;
        let one = TuneOptions {
            budget: share,
            ..options.clone()
        };
        match search_plan_fits(&one) {
            Ok(()) => Ok(Shares { share }),
            Err(TuneError::BudgetTooShort {
                points,
                min_window,
                needed,
                ..
            }) => Err(TuneError::BudgetTooShort {
                budget: options.budget,
                points: points * settings,
                min_window,
                needed: needed.mul_f64(settings as f64 / fraction),
            }),
            Err(other) => Err(other),
        }
    }

    /// When setting `k`'s live search must end, from the search's start.
    fn deadline(&self, k: usize) -> Duration {
        self.share * (k as u32 + 1)
    }
}

/// Whether a live search over `options` fits its budget.
fn search_plan_fits(options: &TuneOptions) -> Result<(), TuneError> {
    super::search::Plan::new(options, Pairing::Unpaired).map(drop)
}

/// A search over settings in progress.
struct SettingsRun<'a, R: Rebuild> {
    rebuild: &'a mut R,
    options: &'a TuneOptions,
    stop: &'a TuneStop,
    observe: &'a mut dyn FnMut(Setting, &ProbeEvent),
    own: Setting,
    settings: Vec<SettingSearch>,
    skipped: Vec<Setting>,
    finalists: Vec<Finalist>,
    /// The first run's calibration: every later run measures on it.
    basis: Option<Basis>,
    slowest_build: Duration,
    round_window: Duration,
}

impl<R: Rebuild> SettingsRun<'_, R> {
    fn default_point(&self) -> Point {
        let options = self.options;
        options
            .space
            .default_point(options.start, options.cpus, options.max_threads)
    }

    /// Builds a run, timing the build.
    fn build(&mut self, setting: Setting, start: Point) -> Result<R::Run, Halt> {
        let before = self.rebuild.elapsed();
        let run = self.rebuild.build(setting, start, self.basis)?;
        let took = self.rebuild.elapsed().saturating_sub(before);
        self.slowest_build = self.slowest_build.max(took);
        Ok(run)
    }

    /// Phase one: each setting's live search, in turn, within its share.
    fn searches(&mut self, settings: &[Setting], shares: &Shares) -> Outcome {
        for (k, &setting) in settings.iter().enumerate() {
            if self.stop.is_stopped() {
                return Outcome::Stopped;
            }
            let mut run = match self.build(setting, self.options.start) {
                Ok(run) => run,
                Err(halt) => return outcome_of(halt),
            };
            let since = self.rebuild.elapsed();
            let options = TuneOptions {
                budget: shares.deadline(k).saturating_sub(since),
                ..self.options.clone()
            };
            if search_plan_fits(&options).is_err() {
                self.rebuild.finish(setting, run);
                self.skipped.push(setting);
                continue;
            }
            let observe = &mut *self.observe;
            let mut on_clock = Since {
                probe: &mut run,
                since,
            };
            let found = search_with(
                &mut on_clock,
                &options,
                Pairing::Unpaired,
                self.stop,
                &mut |event| observe(setting, event),
            );
            self.rebuild.finish(setting, run);
            let Ok(report) = found else {
                self.skipped.push(setting);
                continue;
            };
            self.basis = self.basis.or(report.basis);
            let outcome = report.outcome.clone();
            self.settings.push(SettingSearch { setting, report });
            if outcome != Outcome::Finished {
                return outcome;
            }
        }
        Outcome::Finished
    }

    /// The finalists: the run's own setting (its pick and the default counts), then the
    /// other settings by their pick's figure, up to [`ROUND_SETTINGS`] settings.
    fn choose_finalists(&self) -> Vec<(Setting, Point)> {
        let objective = self.options.objective;
        let mut picks: Vec<(Setting, &PointResult)> = self
            .settings
            .iter()
            .filter(|s| s.setting != self.own)
            .filter_map(|s| Some((s.setting, s.report.point(s.report.best?)?)))
            .collect();
        picks.sort_by(|a, b| rank(objective, a.1, b.1));
        let mut finalists = Vec::new();
        if let Some(own) = self.settings.iter().find(|s| s.setting == self.own) {
            finalists.extend(own.report.best.map(|best| (self.own, best)));
            finalists.push((self.own, own.report.default));
        }
        finalists.extend(
            picks
                .iter()
                .take(ROUND_SETTINGS - 1)
                .map(|&(setting, result)| (setting, result.point)),
        );
        finalists.dedup();
        finalists
    }

    /// Phase two: the finalists in interleaved rounds, one fresh run per setting a round.
    fn rounds(&mut self) -> Outcome {
        let chosen = self.choose_finalists();
        let mut visits: Vec<(Setting, Vec<Point>)> = Vec::new();
        for &(setting, point) in &chosen {
            match visits.iter_mut().find(|(s, _)| *s == setting) {
                Some((_, points)) => points.push(point),
                None => visits.push((setting, vec![point])),
            }
        }
        self.finalists = chosen
            .iter()
            .map(|&(setting, point)| Finalist {
                setting,
                result: PointResult::new(point, Vec::new()),
            })
            .collect();
        let Some((rounds, window)) = self.round_plan(&visits) else {
            return Outcome::Finished;
        };
        self.round_window = window;
        let slot = window.mul_f64(1.0 + SETTLE_FRACTION);
        let planned = rounds * visits.iter().map(|(_, p)| 1 + p.len()).sum::<usize>();
        let mut index = 0;
        for round in 0..rounds {
            let order: Vec<&(Setting, Vec<Point>)> = match round % 2 {
                0 => visits.iter().collect(),
                _ => visits.iter().rev().collect(),
            };
            for (setting, points) in order {
                if self.stop.is_stopped() {
                    return Outcome::Stopped;
                }
                let needed = self.slowest_build + slot * (1 + points.len() as u32);
                if self.rebuild.elapsed() + needed > self.options.budget {
                    return Outcome::Finished;
                }
                if let Err(halt) = self.visit(*setting, points, window, (&mut index, planned)) {
                    return outcome_of(halt);
                }
            }
        }
        Outcome::Finished
    }

    /// How many rounds, and their window: as many rounds as fit up to
    /// [`CONFIRM_SAMPLES`], at least [`MIN_ROUNDS`] with windows of [`MIN_WINDOW`]; `None`
    /// when even that does not fit.
    fn round_plan(&self, visits: &[(Setting, Vec<Point>)]) -> Option<(usize, Duration)> {
        let left = self.options.budget.saturating_sub(self.rebuild.elapsed());
        let windows: usize = visits.iter().map(|(_, points)| 1 + points.len()).sum();
        let builds = self.slowest_build * visits.len() as u32;
        (MIN_ROUNDS..=CONFIRM_SAMPLES).rev().find_map(|rounds| {
            let per_round = (left / rounds as u32).checked_sub(builds)?;
            let slot = per_round / windows.max(1) as u32;
            let window = slot.mul_f64(HEADROOM / (1.0 + SETTLE_FRACTION));
            (window >= MIN_WINDOW).then_some((rounds, window))
        })
    }

    /// One visit of a round: a fresh run at the first finalist's counts, a warm-up window,
    /// then one window per finalist of `setting`.
    fn visit(
        &mut self,
        setting: Setting,
        points: &[Point],
        window: Duration,
        (index, planned): (&mut usize, usize),
    ) -> Result<(), Halt> {
        let mut run = self.build(setting, points[0])?;
        let measured = self.measure_visit(&mut run, setting, points, window, (index, planned));
        self.rebuild.finish(setting, run);
        measured
    }

    fn measure_visit(
        &mut self,
        run: &mut R::Run,
        setting: Setting,
        points: &[Point],
        window: Duration,
        (index, planned): (&mut usize, usize),
    ) -> Result<(), Halt> {
        *index += 1;
        self.announce(
            setting,
            Phase::Calibrate,
            points[0],
            (*index, planned),
            None,
        );
        run.calibrate(window)?;
        for &point in points {
            if self.stop.is_stopped() {
                return Err(Halt::Stopped);
            }
            *index += 1;
            self.announce(setting, Phase::Confirm, point, (*index, planned), None);
            let value = run.measure(point, window)?;
            let finalist = self
                .finalists
                .iter_mut()
                .find(|f| f.setting == setting && f.result.point == point)
                .expect("every point visited is a finalist");
            let mut samples = std::mem::take(&mut finalist.result.samples);
            samples.push(value);
            finalist.result = PointResult::new(point, samples);
            self.announce(
                setting,
                Phase::Confirm,
                point,
                (*index, planned),
                Some(value),
            );
        }
        Ok(())
    }

    fn announce(
        &mut self,
        setting: Setting,
        phase: Phase,
        point: Point,
        (index, planned): (usize, usize),
        value: Option<f64>,
    ) {
        (self.observe)(
            setting,
            &ProbeEvent {
                index,
                planned,
                phase,
                point,
                value,
                best: None,
            },
        );
    }

    fn report(self, outcome: Outcome) -> SettingsReport {
        let default = (self.own, self.default_point());
        let rounds = self
            .finalists
            .iter()
            .map(|f| f.result.samples.len())
            .min()
            .unwrap_or(0);
        let mut report = SettingsReport {
            objective: self.options.objective,
            budget: self.options.budget,
            elapsed: self.rebuild.elapsed(),
            settings: self.settings,
            skipped: self.skipped,
            round_window: self.round_window,
            rounds,
            finalists: self.finalists,
            best: None,
            default,
            gain: None,
            paired: Vec::new(),
            outcome,
        };
        let (best, gain, paired) = decision(&report);
        report.best = best;
        report.gain = gain;
        report.paired = paired;
        report
    }
}

/// The pick, its gain and the pairs behind them (see the module docs): the default unless a
/// challenger's rounds, paired with the default's, keep it.
#[allow(clippy::type_complexity)]
fn decision(
    report: &SettingsReport,
) -> (
    Option<(Setting, Point)>,
    Option<Gain>,
    Vec<(Setting, PairedResult)>,
) {
    let compared = report.compared();
    let default = report.default;
    let Some(d) = compared
        .iter()
        .position(|&(s, r)| (s, r.point) == default && !r.samples.is_empty())
    else {
        return (None, None, Vec::new());
    };
    if report.rounds == 0 {
        return (Some(default), Some(Gain::NONE), Vec::new());
    }
    let results: Vec<&PointResult> = compared.iter().map(|&(_, r)| r).collect();
    let cost = |i: usize| {
        let (setting, result) = compared[i];
        (result.point.threads(), usize::from(setting != default.0))
    };
    let objective = report.objective;
    let paired: Vec<(Setting, PairedResult)> = challengers(&results, objective, Some(d), &cost)
        .into_iter()
        .map(|i| {
            let (setting, r) = compared[i];
            let pairs = PairedResult::measured(objective, r.point, &r.samples, &results[d].samples);
            (setting, pairs)
        })
        .collect();
    let results: Vec<PairedResult> = paired.iter().map(|(_, p)| p.clone()).collect();
    let (best, gain) = match decide(default.1, &results) {
        Some(i) => ((paired[i].0, paired[i].1.point), paired[i].1.gain()),
        None => (default, Gain::NONE),
    };
    (Some(best), Some(gain), paired)
}

fn outcome_of(halt: Halt) -> Outcome {
    match halt {
        Halt::Stopped => Outcome::Stopped,
        Halt::Ended(reason) => Outcome::Ended(reason),
    }
}

/// A run's probe on a live search's clock: time from `since`.
struct Since<'p, P: Probe> {
    probe: &'p mut P,
    since: Duration,
}

impl<P: Probe> Probe for Since<'_, P> {
    fn calibrate(&mut self, window: Duration) -> Result<Basis, Halt> {
        self.probe.calibrate(window)
    }

    fn measure(&mut self, point: Point, window: Duration) -> Result<f64, Halt> {
        self.probe.measure(point, window)
    }

    fn elapsed(&self) -> Duration {
        self.probe.elapsed().saturating_sub(self.since)
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
