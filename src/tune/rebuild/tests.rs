//! The search over settings against fake runs: a known landscape per setting, seeded noise,
//! one virtual clock that builds and windows advance.
use std::cell::RefCell;
use std::rc::Rc;

use super::*;
use crate::config::PoolKind;
use crate::tune::Space;

/// What happened, in order, on the virtual clock.
#[derive(Clone, Debug, PartialEq)]
enum Step {
    Build(Setting, Point),
    Warm(Setting),
    Measure(Setting, Point),
    Finish(Setting),
}

/// The shared state of every fake run: the clock, the log, the noise.
struct World {
    clock: Duration,
    log: Vec<(Duration, Step)>,
    rng: fastrand::Rng,
}

type Shared = Rc<RefCell<World>>;

/// Builds fake runs: each build costs `build_cost`; point `p` of setting `s` measures
/// `landscape(s, p)` times a noise factor in `1 ± noise`.
struct FakeRebuild {
    world: Shared,
    landscape: fn(Setting, Point) -> f64,
    noise: f64,
    build_cost: Duration,
    /// The build with this number (from 0) fails.
    fail_build: Option<usize>,
    builds: usize,
}

struct FakeRun {
    world: Shared,
    setting: Setting,
    landscape: fn(Setting, Point) -> f64,
    noise: f64,
}

impl FakeRebuild {
    fn new(landscape: fn(Setting, Point) -> f64, noise: f64, seed: u64) -> FakeRebuild {
        FakeRebuild {
            world: Rc::new(RefCell::new(World {
                clock: Duration::ZERO,
                log: Vec::new(),
                rng: fastrand::Rng::with_seed(seed),
            })),
            landscape,
            noise,
            build_cost: Duration::from_millis(300),
            fail_build: None,
            builds: 0,
        }
    }

    fn log(&self) -> Vec<(Duration, Step)> {
        self.world.borrow().log.clone()
    }
}

fn advance(world: &Shared, by: Duration, step: Step) {
    let mut world = world.borrow_mut();
    world.clock += by;
    let at = world.clock;
    world.log.push((at, step));
}

impl Rebuild for FakeRebuild {
    type Run = FakeRun;

    fn build(&mut self, setting: Setting, start: Point, _: Option<Basis>) -> Result<FakeRun, Halt> {
        self.builds += 1;
        if self.fail_build == Some(self.builds - 1) {
            return Err(Halt::Ended(format!("building the run for {setting}: no")));
        }
        advance(&self.world, self.build_cost, Step::Build(setting, start));
        Ok(FakeRun {
            world: Rc::clone(&self.world),
            setting,
            landscape: self.landscape,
            noise: self.noise,
        })
    }

    fn finish(&mut self, setting: Setting, _: FakeRun) {
        advance(&self.world, Duration::ZERO, Step::Finish(setting));
    }

    fn elapsed(&self) -> Duration {
        self.world.borrow().clock
    }
}

impl Probe for FakeRun {
    fn calibrate(&mut self, window: Duration) -> Result<Basis, Halt> {
        let slot = window.mul_f64(1.0 + SETTLE_FRACTION);
        advance(&self.world, slot, Step::Warm(self.setting));
        Ok(Basis::Iterations)
    }

    fn measure(&mut self, point: Point, window: Duration) -> Result<f64, Halt> {
        let slot = window.mul_f64(1.0 + SETTLE_FRACTION);
        advance(&self.world, slot, Step::Measure(self.setting, point));
        let noise = self.noise * (2.0 * self.world.borrow_mut().rng.f64() - 1.0);
        Ok((self.landscape)(self.setting, point) * (1.0 + noise))
    }

    fn elapsed(&self) -> Duration {
        self.world.borrow().clock
    }
}

const EIGEN_ON: Setting = Setting {
    pool: PoolKind::Eigen,
    spin: true,
};
const SIMPLE_OFF: Setting = Setting {
    pool: PoolKind::Simple,
    spin: false,
};

fn options(budget_s: u64, space: &str) -> TuneOptions {
    TuneOptions {
        budget: Duration::from_secs(budget_s),
        objective: Objective::Throughput,
        space: space.parse().unwrap(),
        start: Point { inter: 2, intra: 2 },
        cpus: 2,
        max_threads: 128,
    }
}

fn settings(space: &str) -> Vec<Setting> {
    space.parse::<Space>().unwrap().settings(EIGEN_ON)
}

fn run(fake: &mut FakeRebuild, budget_s: u64, space: &str) -> SettingsReport {
    search_settings(
        fake,
        &options(budget_s, space),
        &settings(space),
        &TuneStop::new(),
        &mut |_, _| {},
    )
    .unwrap()
}

/// A GEMM chain on 2 cores (1 inter, 2 intra best) where the simple pool without spinning
/// is a fifth faster and every other setting as fast as the default's.
fn simple_off_wins(s: Setting, p: Point) -> f64 {
    let useful = p.intra.min(2) as f64;
    let over = (p.inter * p.intra).saturating_sub(2) as f64;
    let base = 10.0 * useful - 0.2 * over;
    match s == SIMPLE_OFF {
        true => base * 1.2,
        false => base,
    }
}

/// Every setting alike.
fn flat(_: Setting, p: Point) -> f64 {
    10.0 * p.intra.min(2) as f64
}

#[test]
fn every_setting_is_built_in_turn_then_the_finalists_are_interleaved() {
    let space = "inter,intra,spin,pool";
    let mut fake = FakeRebuild::new(simple_off_wins, 0.05, 3);
    let report = run(&mut fake, 120, space);
    let log = fake.log();
    let order = settings(space);
    assert_eq!(order.len(), 6);
    // Phase one: each setting built once, searched live (no rebuild inside), finished,
    // before the next is built.
    let builds: Vec<Setting> = log
        .iter()
        .filter_map(|(_, step)| match step {
            Step::Build(setting, _) => Some(*setting),
            _ => None,
        })
        .collect();
    assert_eq!(&builds[..6], &order[..]);
    for (setting, search) in order.iter().zip(&report.settings) {
        assert_eq!(search.setting, *setting);
        assert_eq!(search.report.outcome, Outcome::Finished);
    }
    // Phase two: rounds visit the same settings, the order reversed every other round,
    // each visit a fresh build, a warm-up, then its finalists' windows.
    let visits = &builds[6..];
    let finalist_settings: Vec<Setting> = {
        let mut seen = Vec::new();
        for finalist in &report.finalists {
            if !seen.contains(&finalist.setting) {
                seen.push(finalist.setting);
            }
        }
        seen
    };
    assert!(finalist_settings.len() <= ROUND_SETTINGS);
    assert_eq!(
        finalist_settings[0], EIGEN_ON,
        "the run's own setting first"
    );
    assert!(finalist_settings.contains(&SIMPLE_OFF));
    let mut reversed = finalist_settings.clone();
    reversed.reverse();
    for (k, round) in visits.chunks(finalist_settings.len()).enumerate() {
        let order = if k % 2 == 0 {
            &finalist_settings
        } else {
            &reversed
        };
        assert_eq!(round, &order[..round.len()], "round {k}");
    }
    assert_eq!(report.rounds, visits.len() / finalist_settings.len());
    assert!(report.rounds >= MIN_ROUNDS, "{report:#?}");
    let first_visit = log
        .iter()
        .position(|(_, step)| step == &Step::Build(visits[0], report.finalists[0].result.point))
        .unwrap();
    let after = log
        .iter()
        .skip(first_visit)
        .position(|(_, step)| *step == Step::Warm(visits[0]));
    assert_eq!(after, Some(1), "a warm-up right after each rebuild");
    for finalist in &report.finalists {
        assert_eq!(finalist.result.samples.len(), report.rounds, "{finalist:?}");
    }
    assert_eq!(
        report.best,
        Some((SIMPLE_OFF, Point { inter: 1, intra: 2 }))
    );
    assert_eq!(report.default, (EIGEN_ON, Point { inter: 2, intra: 2 }));
    let gain = report.gain.unwrap();
    assert!(gain.ratio > 1.1, "{gain:?}");
    // The rounds are the pairs: the pick's gain is its paired figure against the default.
    assert_eq!(gain.pairs, report.rounds);
    let (_, pick) = report
        .paired
        .iter()
        .find(|(setting, _)| *setting == SIMPLE_OFF)
        .unwrap();
    assert_eq!(pick.verdict, crate::tune::paired::Verdict::Faster);
}

/// The resnet-like case across settings: the own setting's 1x2 is the fewest threads within
/// the noise floor of the leader, but 4.5% slower than the default in every round: the
/// rounds' pairs reject it, and the default is kept.
#[test]
fn a_finalist_slower_than_the_default_in_the_rounds_is_not_picked() {
    fn resnet_like(_: Setting, p: Point) -> f64 {
        match (p.inter, p.intra) {
            (1, 2) => 94.5,
            (2, 2) => 99.0,
            (1, 1) => 55.0,
            _ => 84.0,
        }
    }
    for seed in 0..5 {
        let mut fake = FakeRebuild::new(resnet_like, 0.01, seed);
        let report = run(&mut fake, 60, "inter,intra,spin");
        assert!(report.rounds >= MIN_ROUNDS, "seed {seed}: {report:#?}");
        assert_eq!(
            report.best,
            Some(report.default),
            "seed {seed}: {report:#?}"
        );
        assert_eq!(report.gain, Some(Gain::NONE));
        assert!(
            report
                .paired
                .iter()
                .any(|(_, p)| p.point == Point { inter: 1, intra: 2 }
                    && p.verdict == crate::tune::paired::Verdict::Slower),
            "seed {seed}: {:#?}",
            report.paired
        );
    }
}

#[test]
fn the_budget_is_split_into_shares_and_kept() {
    let space = "inter,intra,pool";
    for budget in [30, 60, 120] {
        let mut fake = FakeRebuild::new(simple_off_wins, 0.05, 7);
        let report = run(&mut fake, budget, space);
        assert!(
            report.elapsed <= report.budget,
            "{budget} s: {:?}",
            report.elapsed
        );
        let share = Duration::from_secs(budget).mul_f64(1.0 - ROUNDS_FRACTION) / 3;
        // Setting k's live search ends by its deadline, share x (k + 1).
        let log = fake.log();
        let mut k = 0;
        for (at, step) in &log {
            if let Step::Finish(_) = step {
                if k < 3 {
                    assert!(*at <= share * (k + 1), "{budget} s: setting {k} at {at:?}");
                }
                k += 1;
            }
        }
        assert_eq!(report.settings.len(), 3);
        assert!(report.rounds >= MIN_ROUNDS, "{budget} s: {report:#?}");
        assert!(report.round_window >= MIN_WINDOW);
    }
    // A budget whose share cannot hold the grid is refused before any build.
    let mut fake = FakeRebuild::new(flat, 0.05, 7);
    let error = search_settings(
        &mut fake,
        &options(10, space),
        &settings(space),
        &TuneStop::new(),
        &mut |_, _| {},
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("too short for 27 points"), "{error}");
    assert!(fake.log().is_empty());
}

#[test]
fn slow_builds_shorten_their_own_share_and_the_rounds() {
    let space = "spin,pool";
    let mut fake = FakeRebuild::new(flat, 0.05, 1);
    fake.build_cost = Duration::from_millis(900);
    let report = run(&mut fake, 30, space);
    assert!(report.elapsed <= report.budget, "{:?}", report.elapsed);
    assert_eq!(report.settings.len() + report.skipped.len(), 6);
    // Within noise every setting ties: the run's own setting keeps the pick.
    assert_eq!(report.best.map(|(setting, _)| setting), Some(EIGEN_ON));
}

#[test]
fn a_failed_build_or_a_stop_reports_what_it_had() {
    let space = "inter,intra,spin";
    // The third build (the first round's first visit) fails.
    let mut fake = FakeRebuild::new(simple_off_wins, 0.05, 2);
    fake.fail_build = Some(2);
    let report = run(&mut fake, 60, space);
    assert!(matches!(&report.outcome, Outcome::Ended(why) if why.contains("building the run")));
    assert_eq!(report.settings.len(), 2);
    assert_eq!(report.rounds, 0);
    // No round: nothing was paired, so the default is kept.
    assert_eq!(report.best, Some(report.default), "{report:#?}");
    assert_eq!(report.gain, Some(Gain::NONE));
    // A stop before anything ran measures nothing.
    let stop = TuneStop::new();
    stop.stop();
    let mut fake = FakeRebuild::new(flat, 0.05, 2);
    let report = search_settings(
        &mut fake,
        &options(60, space),
        &settings(space),
        &stop,
        &mut |_, _| {},
    )
    .unwrap();
    assert_eq!((report.outcome, report.best), (Outcome::Stopped, None));
}

#[test]
fn no_point_of_any_setting_goes_past_max_threads() {
    let space = "inter,intra,pool";
    let mut options = options(90, space);
    options.cpus = 8;
    options.max_threads = 3;
    let mut fake = FakeRebuild::new(flat, 0.05, 4);
    search_settings(
        &mut fake,
        &options,
        &settings(space),
        &TuneStop::new(),
        &mut |_, _| {},
    )
    .unwrap();
    for (_, step) in fake.log() {
        if let Step::Measure(_, p) | Step::Build(_, p) = step {
            assert!(p.inter <= 3 && p.intra <= 3, "{p}");
        }
    }
}

/// The report for people and for programs, from a deterministic fake: one surface per
/// setting, the rounds' table, the verdict; JSON with `best` and `default` holding the pool
/// and spin, every setting's points, the finalists and the rounds.
#[test]
fn the_report_reads_as_one_surface_per_setting_then_the_rounds() {
    let space = "inter,intra,pool";
    let mut fake = FakeRebuild::new(simple_off_wins_any_spin, 0.02, 11);
    let report = run(&mut fake, 60, space);
    insta::assert_snapshot!("settings_text", crate::tune::settings_text(&report));
    let mut json = crate::tune::settings_json(&report);
    assert_eq!(json["best"]["pool"], "simple");
    assert_eq!(json["default"]["pool"], "eigen");
    assert_eq!(json["default"]["spin"], "on");
    assert_eq!(json["points"].as_array().unwrap().len(), 27);
    // The golden keeps two points and two finalists: the shape, not every figure.
    for key in ["points", "finalists"] {
        json[key].as_array_mut().unwrap().truncate(2);
    }
    insta::assert_snapshot!("settings_json", format!("{json:#}"));
}

/// [`simple_off_wins`] for the simple pool whatever its spin.
fn simple_off_wins_any_spin(s: Setting, p: Point) -> f64 {
    let s = match s.pool {
        PoolKind::Simple => SIMPLE_OFF,
        _ => s,
    };
    simple_off_wins(s, p)
}
