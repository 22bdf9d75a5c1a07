//! The live tuner's states against a fake probe: a known landscape, a virtual clock, and a
//! gate that holds a window until the stop button is pressed (as the driver's probe waits).
use std::time::{Duration, Instant};

use super::*;
use crate::tune::search::{Basis, Halt, SETTLE_FRACTION};
use crate::tune::Space;

/// Iterations per second at `p`: intra-op threads help up to 2, extra threads cost.
fn landscape(p: Point) -> f64 {
    let useful = p.intra.min(2) as f64;
    let over = (p.inter * p.intra).saturating_sub(2) as f64;
    100.0 * useful / (1.0 + 0.1 * over)
}

/// A probe on a virtual clock; after `gate` windows it waits for the stop button, and after
/// `halt` windows it halts with the given reason.
struct Fake {
    clock: Duration,
    windows: usize,
    stop: TuneStop,
    gate: Option<usize>,
    halt: Option<(usize, Halt)>,
}

impl Fake {
    fn new(stop: &TuneStop) -> Fake {
        Fake {
            clock: Duration::ZERO,
            windows: 0,
            stop: stop.clone(),
            gate: None,
            halt: None,
        }
    }
}

impl Probe for Fake {
    fn calibrate(&mut self, window: Duration) -> Result<Basis, Halt> {
        self.clock += window.mul_f64(1.0 + SETTLE_FRACTION);
        Ok(Basis::Iterations)
    }

    fn measure(&mut self, point: Point, window: Duration) -> Result<f64, Halt> {
        if let Some((after, halt)) = &self.halt {
            if self.windows == *after {
                return Err(halt.clone());
            }
        }
        if self.gate == Some(self.windows) {
            while !self.stop.is_stopped() {
                std::thread::park_timeout(Duration::from_millis(1));
            }
            return Err(Halt::Stopped);
        }
        self.clock += window.mul_f64(1.0 + SETTLE_FRACTION);
        self.windows += 1;
        Ok(landscape(point))
    }

    fn elapsed(&self) -> Duration {
        self.clock
    }
}

fn options(max_threads: usize) -> TuneOptions {
    TuneOptions {
        budget: Duration::from_secs(60),
        objective: Objective::Throughput,
        space: Space::default(),
        start: Point { inter: 2, intra: 2 },
        cpus: 2,
        max_threads,
    }
}

/// Reads the tuner's progress until `holds`; fails after a minute with the last copy.
fn await_progress(tuner: &LiveTuner, holds: impl Fn(&TuneProgress) -> bool) -> TuneProgress {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let progress = tuner.progress();
        if holds(&progress) {
            return progress;
        }
        assert!(Instant::now() < deadline, "never came: {progress:?}");
        std::thread::yield_now();
    }
}

fn windows(progress: &TuneProgress) -> usize {
    progress.measured.iter().map(|r| r.samples.len()).sum()
}

#[test]
fn a_search_left_alone_runs_its_course_and_picks_the_best() {
    let stop = TuneStop::new();
    let tuner = LiveTuner::start(Fake::new(&stop), options(128), stop).unwrap();
    let progress = tuner.wait();
    let report = progress.report().expect("a report");
    assert_eq!(report.outcome, Outcome::Finished);
    // 2 intra-op threads, 1 inter-op: the fastest with the fewest threads.
    assert_eq!(progress.best(), Some((Point { inter: 1, intra: 2 }, 200.0)));
    assert_eq!(progress.measured.len(), 9, "{progress:?}");
    assert_eq!(progress.start, Point { inter: 2, intra: 2 });
    let latest = progress.latest.clone().unwrap();
    assert!(latest.value.is_some() && latest.index <= latest.planned);
    assert!(!progress.is_running() && !progress.run_ended());
}

/// The dashboard sees each window as it runs (announced, not yet measured), the figures so
/// far and the best; a stop ends the search with every window measured before it.
#[test]
fn a_stopped_search_keeps_what_it_measured() {
    let stop = TuneStop::new();
    let mut probe = Fake::new(&stop);
    probe.gate = Some(3);
    let tuner = LiveTuner::start(probe, options(128), stop).unwrap();
    let running = await_progress(&tuner, |p| {
        p.latest.as_ref().is_some_and(|e| e.value.is_none()) && windows(p) == 3
    });
    assert!(running.is_running());
    let window = running.latest.clone().unwrap();
    assert_eq!(window.index, 5, "calibration, then the fourth scan window");
    assert!(running.best().is_some(), "{running:?}");
    tuner.stop();
    let stopped = await_progress(&tuner, |p| !p.is_running());
    let report = stopped.report().expect("a report");
    assert_eq!(report.outcome, Outcome::Stopped);
    assert_eq!(windows(&stopped), 3);
    assert_eq!(report.points.len(), 3);
    assert_eq!(stopped.best().map(|(p, _)| p), report.best);
    let waited = tuner.wait();
    assert_eq!(waited, stopped, "nothing changes once it ended");
}

#[test]
fn a_run_that_ends_mid_search_reports_what_it_had() {
    let stop = TuneStop::new();
    let mut probe = Fake::new(&stop);
    probe.halt = Some((4, Halt::Ended("the run ended".into())));
    let progress = LiveTuner::start(probe, options(128), stop).unwrap().wait();
    assert!(progress.run_ended(), "{progress:?}");
    assert_eq!(windows(&progress), 4);
    assert!(progress.best().is_some());
}

#[test]
fn no_point_goes_past_max_threads() {
    let stop = TuneStop::new();
    let progress = LiveTuner::start(Fake::new(&stop), options(1), stop)
        .unwrap()
        .wait();
    let points: Vec<Point> = progress.measured.iter().map(|r| r.point).collect();
    assert_eq!(points, [Point { inter: 1, intra: 1 }]);
}

#[test]
fn a_budget_too_short_is_refused_with_the_fix() {
    let stop = TuneStop::new();
    let mut short = options(128);
    short.budget = Duration::from_secs(1);
    let progress = LiveTuner::start(Fake::new(&stop), short, stop)
        .unwrap()
        .wait();
    let Some(TuneEnd::Refused(why)) = &progress.ended else {
        panic!("not refused: {progress:?}");
    };
    assert!(why.contains("give --budget"), "{why}");
    assert_eq!(progress.best(), None);
}

/// Dropping a running tuner stops it and waits for its thread.
#[test]
fn dropping_a_running_tuner_stops_it() {
    let stop = TuneStop::new();
    let mut probe = Fake::new(&stop);
    probe.gate = Some(0);
    let tuner = LiveTuner::start(probe, options(128), stop.clone()).unwrap();
    await_progress(&tuner, |p| p.latest.is_some());
    drop(tuner);
    assert!(stop.is_stopped());
}
