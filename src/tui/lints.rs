//! Warnings about the configuration and the pools' behaviour, each with the number behind it:
//!
//! - **verdict**: the run's own answer to why it does not scale, one per device
//!   ([`crate::analysis`]'s rules), first;
//! - **oversubscribed**: inter-op workers (every CPU device's together) times intra-op
//!   threads exceed the CPUs, TensorFlow's rule (see `config::RuntimeConfig::warnings`),
//!   said only until the run has verdicts: theirs is measured (the threads' descheduled
//!   time), this one guessed from counts, and the two must not disagree on screen;
//! - **spinning**: a worker spent at least [`SPIN_SHARE`] of the profiler's window spinning;
//! - **queue growing**: a device's queues grew over the last [`QUEUE_SPAN`] to at least
//!   [`QUEUE_MIN_DEPTH`] tasks and at least twice what they held, faster than
//!   [`QUEUE_MIN_GROWTH`] tasks a second: work arrives faster than the pool drains it.
#![forbid(unsafe_code)]

use std::fmt;
use std::time::Duration;

use super::history::History;
use super::panels::DevicePanel;
use super::source::{DashboardData, DeviceKind};
use crate::profiler::stats::Activity;
use crate::profiler::DeviceId;

/// Share of the window spent spinning that makes a worker worth a warning.
pub(crate) const SPIN_SHARE: f64 = 0.5;
/// How far back the queue-growth lint looks.
pub(crate) const QUEUE_SPAN: Duration = Duration::from_secs(5);
/// How much of [`QUEUE_SPAN`] the history must cover before the lint speaks.
pub(crate) const QUEUE_MIN_COVERED: Duration = Duration::from_secs(3);
/// The smallest depth worth a warning.
pub(crate) const QUEUE_MIN_DEPTH: u64 = 64;
/// The slowest growth worth a warning, in tasks per second.
pub(crate) const QUEUE_MIN_GROWTH: f64 = 10.0;

/// One warning.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Lint {
    /// More threads may run at once than there are CPUs.
    Oversubscribed {
        /// Inter-op workers, every CPU device together.
        inter: usize,
        /// Intra-op threads.
        intra: usize,
        /// CPUs.
        cores: usize,
    },
    /// A worker spins most of the time.
    Spinning {
        /// The worker's thread name.
        worker: String,
        /// Share of the window spent spinning.
        share: f64,
        /// The profiler's window.
        window: Duration,
    },
    /// Why a device does not scale (`cpu0: critical path: ...`), as the driver judged it.
    Verdict(String),
    /// A device's queues keep growing.
    QueueGrowing {
        /// The profiler device.
        device: DeviceId,
        /// Depth at the start of the span.
        from: u64,
        /// Depth now.
        to: u64,
        /// The span looked at.
        over: Duration,
    },
}

impl Lint {
    /// Growth in tasks per second (queue lint only).
    fn growth_per_s(from: u64, to: u64, over: Duration) -> f64 {
        (to as f64 - from as f64) / over.as_secs_f64().max(1e-9)
    }
}

impl fmt::Display for Lint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Lint::Verdict(line) => f.write_str(line),
            Lint::Oversubscribed {
                inter,
                intra,
                cores,
            } => write!(
                f,
                "oversubscribed: inter {inter} x intra {intra} = {} threads > {cores} cores",
                inter * intra
            ),
            Lint::Spinning {
                worker,
                share,
                window,
            } => write!(
                f,
                "{worker} spinning {:.0}% of the last {:.1}s",
                share * 100.0,
                window.as_secs_f64()
            ),
            Lint::QueueGrowing {
                device,
                from,
                to,
                over,
            } => write!(
                f,
                "{} queue growing: {from} -> {to} in {:.1}s (+{:.0}/s)",
                device.name(),
                over.as_secs_f64(),
                Lint::growth_per_s(*from, *to, *over)
            ),
        }
    }
}

/// Every warning for this frame, most important first.
pub(crate) fn find(
    data: &DashboardData,
    panels: &[DevicePanel<'_>],
    history: &History,
) -> Vec<Lint> {
    let mut lints: Vec<Lint> = data
        .facts
        .verdicts
        .iter()
        .cloned()
        .map(Lint::Verdict)
        .collect();
    if lints.is_empty() {
        lints.extend(oversubscription(data, panels));
    }
    lints.extend(growing_queues(history));
    lints.extend(spinning_workers(data));
    lints
}

fn oversubscription(data: &DashboardData, panels: &[DevicePanel<'_>]) -> Option<Lint> {
    let cores = data.facts.cores;
    let inter: usize = panels
        .iter()
        .filter(|panel| panel.layout.kind == DeviceKind::Cpu)
        .map(|panel| panel.layout.inter_op.unwrap_or(panel.pool.workers.len()))
        .sum();
    let intra = data.facts.intra_op.max(1);
    (cores > 0 && inter * intra > cores).then_some(Lint::Oversubscribed {
        inter,
        intra,
        cores,
    })
}

fn spinning_workers(data: &DashboardData) -> impl Iterator<Item = Lint> + '_ {
    let window = Duration::from_nanos(data.snapshot.window_ns);
    data.snapshot
        .workers
        .iter()
        .filter(|worker| worker.activity != Activity::Idle)
        .filter(|worker| worker.shares.spinning >= SPIN_SHARE)
        .map(move |worker| Lint::Spinning {
            worker: worker.name.clone(),
            share: worker.shares.spinning,
            window,
        })
}

fn growing_queues(history: &History) -> Vec<Lint> {
    let recent: Vec<_> = history.within(QUEUE_SPAN).collect();
    let (Some(first), Some(last)) = (recent.first(), recent.last()) else {
        return Vec::new();
    };
    let over = last.elapsed.saturating_sub(first.elapsed);
    if over < QUEUE_MIN_COVERED {
        return Vec::new();
    }
    last.device_queues
        .iter()
        .filter_map(|&(device, to)| {
            let from = first.queue_of(device).unwrap_or(0);
            let growing = to >= QUEUE_MIN_DEPTH
                && to >= from.saturating_mul(2)
                && Lint::growth_per_s(from, to, over) >= QUEUE_MIN_GROWTH;
            growing.then_some(Lint::QueueGrowing {
                device,
                from,
                to,
                over,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::fake::{FakeOptions, FakeSource};
    use crate::tui::panels::device_panels;
    use crate::tui::source::DashboardSource;

    fn run(source: &mut FakeSource, frames: usize) -> (DashboardData, History) {
        let mut history = History::default();
        let mut data = source.snapshot();
        history.record(&data);
        for _ in 1..frames {
            data = source.snapshot();
            history.record(&data);
        }
        (data, history)
    }

    #[test]
    fn a_steady_workload_within_its_cores_has_no_warning() {
        let (data, history) = run(&mut FakeSource::new(FakeOptions::default()), 80);
        let panels = device_panels(&data);
        assert_eq!(find(&data, &panels, &history), []);
    }

    #[test]
    fn the_runs_verdicts_come_first_as_the_driver_wrote_them() {
        let (mut data, history) = run(&mut FakeSource::new(FakeOptions::overloaded()), 80);
        let line = "cpu0: critical path: span 4.10 ms of a 4.30 ms step (parallelism 1.0)";
        data.facts.verdicts = vec![line.to_string()];
        let panels = device_panels(&data);
        let lints = find(&data, &panels, &history);
        assert_eq!(lints[0], Lint::Verdict(line.to_string()));
        assert_eq!(lints[0].to_string(), line);
        // The measured verdict replaces the count rule's guess.
        let guessed = |lint: &Lint| matches!(lint, Lint::Oversubscribed { .. });
        assert!(!lints.iter().any(guessed), "{lints:?}");
    }

    #[test]
    fn an_overloaded_workload_gets_all_three_with_their_numbers() {
        let (data, history) = run(&mut FakeSource::new(FakeOptions::overloaded()), 80);
        let panels = device_panels(&data);
        let lints = find(&data, &panels, &history);
        let texts: Vec<String> = lints.iter().map(ToString::to_string).collect();
        assert!(
            matches!(lints[0], Lint::Oversubscribed { cores: 4, .. }),
            "{texts:?}"
        );
        assert!(texts[0].contains("inter 8 x intra 2 = 16 threads > 4 cores"));
        assert!(
            lints.iter().any(
                |lint| matches!(lint, Lint::QueueGrowing { to, .. } if *to >= QUEUE_MIN_DEPTH)
            ),
            "{texts:?}"
        );
        assert!(
            texts
                .iter()
                .any(|text| text.starts_with("cpu1-w3 spinning")),
            "{texts:?}"
        );
    }
}
