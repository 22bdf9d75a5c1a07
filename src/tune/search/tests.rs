//! The search against a fake probe: a known landscape, seeded noise, a virtual clock.
use super::*;
use crate::tune::paired::{Verdict, PAIRED_WINDOWS};

/// A probe whose point `p` measures `landscape(p)` times a seeded noise factor in
/// `1 ± noise`, each window costing its slot on a virtual clock.
struct Fake {
    landscape: fn(Point) -> f64,
    noise: f64,
    rng: fastrand::Rng,
    clock: Duration,
    /// Every point measured, in order.
    measured: Vec<Point>,
    /// After this many windows, the probe halts with this.
    halt_after: Option<(usize, Halt)>,
}

impl Fake {
    fn new(landscape: fn(Point) -> f64, noise: f64, seed: u64) -> Fake {
        Fake {
            landscape,
            noise,
            rng: fastrand::Rng::with_seed(seed),
            clock: Duration::ZERO,
            measured: Vec::new(),
            halt_after: None,
        }
    }

    fn slot(window: Duration) -> Duration {
        window.mul_f64(1.0 + SETTLE_FRACTION)
    }
}

impl Probe for Fake {
    fn calibrate(&mut self, window: Duration) -> Result<Basis, Halt> {
        self.clock += Fake::slot(window);
        Ok(Basis::Iterations)
    }

    fn measure(&mut self, point: Point, window: Duration) -> Result<f64, Halt> {
        if let Some((after, halt)) = &self.halt_after {
            if self.measured.len() == *after {
                return Err(halt.clone());
            }
        }
        self.clock += Fake::slot(window);
        self.measured.push(point);
        let factor = 1.0 + self.noise * (2.0 * self.rng.f64() - 1.0);
        Ok((self.landscape)(point) * factor)
    }

    fn elapsed(&self) -> Duration {
        self.clock
    }
}

fn options(budget_s: u64) -> TuneOptions {
    TuneOptions {
        budget: Duration::from_secs(budget_s),
        objective: Objective::Throughput,
        space: Space::default(),
        start: Point { inter: 2, intra: 2 },
        cpus: 2,
        max_threads: 128,
    }
}

fn run(fake: &mut Fake, options: &TuneOptions) -> TuneReport {
    search(fake, options, &TuneStop::new(), &mut |_| {}).unwrap()
}

const fn point(inter: usize, intra: usize) -> Point {
    Point { inter, intra }
}

/// A chain of GEMMs on 2 cores: only intra-op threads help, up to the cores; more threads
/// than cores cost a little.
fn gemm_chain(p: Point) -> f64 {
    let useful = p.intra.min(2) as f64;
    let over = (p.inter * p.intra).saturating_sub(2) as f64;
    10.0 * useful - 0.2 * over
}

/// Independent small ops on 2 cores: only inter-op workers help.
fn independent(p: Point) -> f64 {
    let useful = p.inter.min(2) as f64;
    let over = (p.inter * p.intra).saturating_sub(2) as f64;
    10.0 * useful - 0.2 * over
}

#[test]
fn known_landscapes_are_found_through_noise_with_the_tie_rule() {
    for seed in 0..20 {
        let mut fake = Fake::new(gemm_chain, 0.06, seed);
        let report = run(&mut fake, &options(30));
        assert_eq!(report.best, Some(point(1, 2)), "seed {seed}: {report:#?}");
        let mut fake = Fake::new(independent, 0.06, seed);
        let report = run(&mut fake, &options(30));
        assert_eq!(report.best, Some(point(2, 1)), "seed {seed}: {report:#?}");
    }
}

#[test]
fn within_noise_the_fewest_threads_win() {
    // Flat from 2 threads up (1 thread is half as fast): every tie goes to 2 threads, and of
    // the two 2-thread points to the better median.
    fn flat(p: Point) -> f64 {
        if p.threads() >= 3 {
            100.0
        } else {
            50.0
        }
    }
    for seed in 0..10 {
        let report = run(&mut Fake::new(flat, 0.03, seed), &options(30));
        let best = report.best.unwrap();
        assert_eq!(best.threads(), 3, "seed {seed}: {best}");
    }
    // A clear winner with more threads is not overruled by the tie rule.
    fn more_is_better(p: Point) -> f64 {
        (p.inter * p.intra) as f64
    }
    let report = run(&mut Fake::new(more_is_better, 0.02, 1), &options(30));
    assert_eq!(report.best, Some(point(4, 4)));
}

#[test]
fn latency_picks_the_shortest_step() {
    /// Seconds per step of a GEMM chain that oversubscription hurts badly.
    fn step(p: Point) -> f64 {
        let over = (p.inter * p.intra).saturating_sub(2) as f64;
        1.0 / (10.0 * p.intra.min(2) as f64 - 4.0 * over).max(1.0)
    }
    let mut options = options(30);
    options.objective = Objective::Latency;
    let report = run(&mut Fake::new(step, 0.1, 3), &options);
    assert_eq!(report.best, Some(point(1, 2)));
    let gain = report.gain.unwrap();
    // The default (2, 2) takes 1/12 s a step, the best 1/20 s.
    assert!((gain.ratio - 20.0 / 12.0).abs() < 0.2, "{gain:?}");
}

#[test]
fn the_budget_is_kept_and_a_short_one_is_refused() {
    for budget in [8, 12, 30, 120] {
        let mut fake = Fake::new(gemm_chain, 0.1, 7);
        let report = run(&mut fake, &options(budget));
        assert!(
            report.elapsed <= report.budget,
            "{budget} s: {:?}",
            report.elapsed
        );
        assert_eq!(report.outcome, Outcome::Finished);
        assert!(report.window >= MIN_WINDOW);
    }
    let error = search(
        &mut Fake::new(gemm_chain, 0.1, 7),
        &options(1),
        &TuneStop::new(),
        &mut |_| {},
    )
    .unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("too short for 9 points") && message.contains("give --budget 8"),
        "{message}"
    );
}

#[test]
fn no_point_goes_past_max_threads() {
    let mut options = options(30);
    options.cpus = 8;
    options.max_threads = 3;
    let mut fake = Fake::new(|p| (p.inter + p.intra) as f64, 0.05, 2);
    let report = run(&mut fake, &options);
    assert!(!fake.measured.is_empty());
    assert!(fake.measured.iter().all(|p| p.inter <= 3 && p.intra <= 3));
    assert_eq!(report.default, point(3, 3), "one per CPU, capped");
    assert!(report.point(point(3, 3)).is_some());
}

#[test]
fn leaders_are_confirmed_interleaved() {
    let mut fake = Fake::new(gemm_chain, 0.05, 5);
    let report = run(&mut fake, &options(60));
    let scan = report.points.len();
    let paired = paired_windows(&report);
    let confirm = &fake.measured[scan..fake.measured.len() - paired];
    // The rounds visit the same leaders in the same order, one window each.
    let round: Vec<Point> = confirm[..confirm.len() / (CONFIRM_SAMPLES - 1)].to_vec();
    assert!(round.len() >= 2, "{confirm:?}");
    for chunk in confirm.chunks(round.len()) {
        assert_eq!(chunk, &round[..chunk.len()]);
    }
    assert!(round.contains(&report.default));
    for leader in &round {
        assert_eq!(
            report.point(*leader).unwrap().samples.len(),
            CONFIRM_SAMPLES
        );
    }
    assert_eq!(
        fake.measured[0], report.default,
        "the scan starts at the default"
    );
}

/// The windows the paired check took: whole rounds of the default and each challenger.
fn paired_windows(report: &TuneReport) -> usize {
    let round = 1 + report.paired.len();
    match report.paired.len() {
        0 => 0,
        _ => PAIRED_WINDOWS / round * round,
    }
}

#[test]
fn the_pick_is_paired_with_the_default_in_alternating_rounds() {
    let mut fake = Fake::new(gemm_chain, 0.05, 5);
    let report = run(&mut fake, &options(60));
    let paired = paired_windows(&report);
    assert!(paired > 0, "{report:#?}");
    let windows = &fake.measured[fake.measured.len() - paired..];
    let round = 1 + report.paired.len();
    let mut first: Vec<Point> = vec![report.default];
    first.extend(report.paired.iter().map(|p| p.point));
    let mut second = first.clone();
    second.reverse();
    for (k, chunk) in windows.chunks(round).enumerate() {
        let expected = if k % 2 == 0 { &first } else { &second };
        assert_eq!(chunk, &expected[..], "round {k}");
    }
    for challenger in &report.paired {
        assert_eq!(challenger.ratios.len(), PAIRED_WINDOWS / round);
        assert!(challenger.point != report.default);
    }
    // The paired windows are the pairs' own: the points keep their scan and confirm windows.
    let default = report.point(report.default).unwrap();
    assert_eq!(default.samples.len(), CONFIRM_SAMPLES);
    // The pick 1x2 beats the default 2x2 by 2% on this landscape; with 5% noise the pairs
    // show it faster or tied, and either way it has fewer threads.
    assert_eq!(report.best, Some(point(1, 2)));
    let gain = report.gain.unwrap();
    assert_eq!(gain.pairs, PAIRED_WINDOWS / round);
}

#[test]
fn a_stop_before_the_pairs_keeps_the_default() {
    // The scan and the confirm rounds (9 + 20 windows) ran, the pairs did not.
    let mut fake = Fake::new(gemm_chain, 0.05, 9);
    fake.halt_after = Some((29, Halt::Stopped));
    let report = run(&mut fake, &options(60));
    assert_eq!(report.outcome, Outcome::Stopped);
    assert_eq!(report.best, Some(report.default), "{report:#?}");
    assert_eq!(report.gain, Some(Gain::NONE));
}

#[test]
fn a_stop_or_an_ended_run_reports_what_it_had() {
    for (halt, outcome) in [
        (Halt::Stopped, Outcome::Stopped),
        (
            Halt::Ended("the run ended".into()),
            Outcome::Ended("the run ended".into()),
        ),
    ] {
        let mut fake = Fake::new(gemm_chain, 0.05, 9);
        fake.halt_after = Some((4, halt));
        let report = run(&mut fake, &options(30));
        assert_eq!(report.outcome, outcome);
        assert_eq!(
            report.points.iter().map(|r| r.samples.len()).sum::<usize>(),
            4
        );
        assert!(report.best.is_some());
        assert!(report.point(report.default).is_some());
    }
    // A stop pressed before the search starts measures nothing.
    let stop = TuneStop::new();
    stop.stop();
    let mut fake = Fake::new(gemm_chain, 0.05, 9);
    let report = search(&mut fake, &options(30), &stop, &mut |_| {}).unwrap();
    assert_eq!((report.outcome, report.best), (Outcome::Stopped, None));
}

#[test]
fn every_window_is_announced_before_and_after() {
    let mut events = Vec::new();
    let mut fake = Fake::new(gemm_chain, 0.05, 4);
    let report = search(&mut fake, &options(30), &TuneStop::new(), &mut |event| {
        events.push(event.clone())
    })
    .unwrap();
    let measured = events.iter().filter(|e| e.value.is_some()).count();
    assert_eq!(measured, fake.measured.len());
    assert_eq!(events[0].phase, Phase::Calibrate);
    let last = events.last().unwrap();
    assert!(last.index <= last.planned);
    assert_eq!(last.best.map(|(p, _)| p), report.best);
}

#[test]
fn a_pick_slower_than_the_default_says_why() {
    let tie = Gain {
        ratio: 0.99,
        spread: 0.02,
        pairs: 12,
    };
    assert!(
        tie.note().contains("12 alternating pairs"),
        "{}",
        tie.note()
    );
    assert!(tie.note().contains("a tie within the paired spread"));
    let faster = Gain {
        ratio: 1.2,
        spread: 0.05,
        pairs: 8,
    };
    assert_eq!(faster.note(), " (median of 8 alternating pairs)");
    assert_eq!(Gain::NONE.note(), "");
}

/// Shaped like resnet-like on 2 cores: 1x2 is within the noise floor of the leader (so it is
/// the unpaired candidate, fewest threads) but 4.5% below the default 2x2, with windows that
/// agree to about 1%: the pairs show it slower, and the default (or 4x2, 1% faster) is kept.
#[test]
fn the_tie_rule_never_picks_a_point_slower_than_the_default_in_pairs() {
    fn resnet_like(p: Point) -> f64 {
        match (p.inter, p.intra) {
            (1, 1) => 55.0,
            (1, 2) => 94.5,
            (2, 2) => 99.0,
            (4, 2) => 100.0,
            (2, 4) => 98.0,
            (4, 4) => 95.0,
            _ => 84.0,
        }
    }
    for seed in 0..10 {
        let report = run(&mut Fake::new(resnet_like, 0.01, seed), &options(60));
        let fewer = report.paired.iter().find(|p| p.point == point(1, 2));
        let fewer = fewer.unwrap_or_else(|| panic!("seed {seed}: 1x2 paired: {report:#?}"));
        assert_eq!(fewer.verdict, Verdict::Slower, "seed {seed}: {fewer:?}");
        let best = report.best.unwrap();
        assert!(
            best == point(2, 2) || best == point(4, 2),
            "seed {seed}: {best}"
        );
        let gain = report.gain.unwrap();
        assert!(gain.ratio + gain.spread >= 1.0, "seed {seed}: {gain:?}");
    }
}
