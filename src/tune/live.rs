//! [`LiveTuner`]: the [`search`] on its own `tuner` thread beside a run that keeps going,
//! for the dashboard's `t`. The dashboard only reads: each frame it takes a copy of the
//! [`TuneProgress`], and it stops the search with the [`TuneStop`] it shares.
//!
//! ```text
//! tuner thread: search(probe, options, stop, observe) -> TuneReport (paired pick)
//!                 observe(ProbeEvent) --lock--> TuneProgress (latest window, samples so far)
//!                 end -----------------lock--> TuneProgress::ended (the report, or a refusal)
//! dashboard:    LiveTuner::progress() (a copy, under the same lock); LiveTuner::stop()
//! ```
//! The progress is written only by the tuner thread and read only as a whole copy, so the
//! dashboard never sees a window counted twice or a report without its last window. Once the
//! search ended (its course run, stopped, the run ended, or refused before measuring) the
//! progress holds how it ended and never changes again. Dropping the tuner presses stop and
//! joins the thread: the probe checks the button every few milliseconds, so it ends soon.
#![forbid(unsafe_code)]

use super::search::{
    search, Outcome, Phase, PointResult, Probe, ProbeEvent, TuneOptions, TuneReport,
};
use super::space::{Objective, Point};
use super::TuneStop;
use crate::sync::{thread, Arc, Mutex};

/// How a search ended, once it did.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum TuneEnd {
    /// It measured what it could: the report (its outcome says why it ended).
    Report(TuneReport),
    /// It was refused before measuring (a budget too short): why.
    Refused(String),
}

/// What a live search has done so far: a copy for the dashboard.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TuneProgress {
    /// The run's counts when the search started (where "go back" returns).
    pub(crate) start: Point,
    /// What is better.
    pub(crate) objective: Objective,
    /// The window measured now, or the last one measured.
    pub(crate) latest: Option<ProbeEvent>,
    /// Every point measured so far with its windows' figures, in the order first measured
    /// (the paired windows are the report's `paired`, not counted here, as in its `points`).
    pub(crate) measured: Vec<PointResult>,
    /// How it ended (`None`: it still runs).
    pub(crate) ended: Option<TuneEnd>,
}

impl TuneProgress {
    fn new(options: &TuneOptions) -> Self {
        TuneProgress {
            start: options.start,
            objective: options.objective,
            latest: None,
            measured: Vec::new(),
            ended: None,
        }
    }

    /// Whether the search still runs.
    pub(crate) fn is_running(&self) -> bool {
        self.ended.is_none()
    }

    /// The best point so far and its median: the report's pick once it ended, else the
    /// search's own best so far.
    pub(crate) fn best(&self) -> Option<(Point, f64)> {
        match &self.ended {
            Some(TuneEnd::Report(report)) => {
                let best = report.best?;
                Some((best, report.point(best)?.median))
            }
            Some(TuneEnd::Refused(_)) => None,
            None => self.latest.as_ref()?.best,
        }
    }

    /// The report, once the search ended with one.
    pub(crate) fn report(&self) -> Option<&TuneReport> {
        match &self.ended {
            Some(TuneEnd::Report(report)) => Some(report),
            _ => None,
        }
    }

    /// Whether the search ended because the run did (nothing left to resize).
    pub(crate) fn run_ended(&self) -> bool {
        self.report()
            .is_some_and(|report| matches!(report.outcome, Outcome::Ended(_)))
    }

    /// Takes one window's event: the latest window, and its figure once measured.
    fn observe(&mut self, event: &ProbeEvent) {
        if let Some(value) = event.value.filter(|_| event.phase != Phase::Paired) {
            match self.measured.iter_mut().find(|r| r.point == event.point) {
                Some(result) => {
                    let mut samples = std::mem::take(&mut result.samples);
                    samples.push(value);
                    *result = PointResult::new(event.point, samples);
                }
                None => self
                    .measured
                    .push(PointResult::new(event.point, vec![value])),
            }
        }
        self.latest = Some(event.clone());
    }
}

/// A search running on its `tuner` thread (see the module docs).
#[derive(Debug)]
pub(crate) struct LiveTuner {
    stop: TuneStop,
    progress: Arc<Mutex<TuneProgress>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl LiveTuner {
    /// Starts searching `options`' space with `probe` on a thread named `tuner`; `stop` is
    /// the button `probe` checks too.
    pub(crate) fn start<P: Probe + Send + 'static>(
        mut probe: P,
        options: TuneOptions,
        stop: TuneStop,
    ) -> std::io::Result<LiveTuner> {
        let progress = Arc::new(Mutex::new(TuneProgress::new(&options)));
        let shared = Arc::clone(&progress);
        let button = stop.clone();
        let thread = thread::Builder::new().name("tuner".into()).spawn(move || {
            let mut observe = |event: &ProbeEvent| shared.lock().observe(event);
            let ended = match search(&mut probe, &options, &button, &mut observe) {
                Ok(report) => TuneEnd::Report(report),
                Err(refused) => TuneEnd::Refused(refused.to_string()),
            };
            shared.lock().ended = Some(ended);
        })?;
        Ok(LiveTuner {
            stop,
            progress,
            thread: Some(thread),
        })
    }

    /// A copy of what the search did so far.
    pub(crate) fn progress(&self) -> TuneProgress {
        self.progress.lock().clone()
    }

    /// Asks the search to end after what it measured (the window under way is dropped).
    pub(crate) fn stop(&self) {
        self.stop.stop();
    }

    #[cfg(test)]
    /// Waits for the search to end; what it did.
    pub(crate) fn wait(mut self) -> TuneProgress {
        self.join();
        self.progress()
    }

    fn join(&mut self) {
        if let Some(thread) = self.thread.take() {
            if let Err(panic) = thread.join() {
                std::panic::resume_unwind(panic);
            }
        }
    }
}

impl Drop for LiveTuner {
    fn drop(&mut self) {
        self.stop();
        if !std::thread::panicking() {
            self.join();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
