//! The live search over thread counts: one running workload, resized between measurement
//! windows through its [`DriverHandle`](crate::workload::run::DriverHandle), until the
//! budget is spent (`enginetop tune`, and the dashboard's `t`).
//!
//! # The search
//! The counts' space is a grid of inter-op x intra-op counts ([`Space`]): 1, 2, 4, ... up to twice
//! the schedulable CPUs, plus the CPU count itself, never past `max_threads`; the default
//! (one inter and one intra thread per CPU) is always in it. `search` then
//! 1. **calibrates**: one window at the run's counts decides how a window is measured
//!    ([`Basis`]): whole iterations when several fit in a window, else the ops' throughput
//!    (FLOPs when the workload counts them, else ops) turned into iterations per second with
//!    the graph's work per iteration;
//! 2. **scans**: every point once, the default first;
//! 3. **confirms**: the leaders of the scan (the two best and the two with the fewest
//!    threads among those within `SCAN_TOLERANCE` of the best), the default, and the next
//!    best of the scan up to five points are measured again in rounds, interleaved
//!    (A B C A B C), until each has `CONFIRM_SAMPLES` or the budget runs out: one scan
//!    window on a noisy machine can be off by half, and interleaving spreads a machine's drift
//!    over every leader alike;
//! 4. **chooses the challengers**: the candidate is the confirmed point with the best
//!    pessimistic figure (its median less its spread: a point fast only now and then does
//!    not lead), or any confirmed point within noise of it ([`within_noise`]: the two
//!    spreads together, at least `MIN_NOISE` of the median) with fewer threads; the
//!    challengers are the candidate and the leader of the points other than the default;
//! 5. **pairs**: the challengers and the default are measured again in alternating windows,
//!    one round after another (`PAIRED_WINDOWS` in all, the order reversed every other
//!    round so a steady drift favours neither side); each round gives every challenger one
//!    ratio, its window over the default's window of the same round, which cancels what the
//!    machine did to both. A challenger's figure is the median of its ratios and its paired
//!    spread, read off the ratios by the sign test (`paired_spread`);
//! 6. **picks** (`decide`): the first challenger faster than the default beyond its paired
//!    spread; else the challenger with the fewest threads whose ratio is within its paired
//!    spread of 1 (a tie), if it has fewer threads than the default: fewer threads leave
//!    cores to the rest of the machine for a speed the pairs cannot tell apart; else the
//!    default. **The pick is never slower than the default beyond the paired spread**, and
//!    the preference for fewer threads applies only to a tie the pairs show, never to a
//!    gap of fixed size. A search that ends before `MIN_PAIRS` rounds of pairs keeps the
//!    default. The gain reported is the pick's paired figure (median ratio ± paired spread,
//!    with its number of pairs); the default's is 1.0 ± 0.
//!
//! Spreads of a point's windows are median absolute deviations, so one disturbed window of
//! five moves neither figure much.
//!
//! # Budget and windows
//! The budget is divided over every window planned, all of one length: the calibration
//! (1), the scan (one per point), the confirm rounds (`CONFIRM_SAMPLES` - 1 for each of up
//! to five points) and the pairs (`PAIRED_WINDOWS`, when the grid has more than one
//! point): with 9 points (2 CPUs) the pairs get 24 of 54 windows. Each window's slot is a
//! settling period (`SETTLE_FRACTION` of it, discarded: queued work from the previous
//! counts drains and workers start) and the measurement. A budget that leaves a window
//! shorter than `MIN_WINDOW` is refused, naming the least that fits. A window never
//! starts unless its slot fits in what is left.
//!
//! # Stopping
//! A stop request ([`TuneStop`]), the run ending (it failed, or the user stopped it) or a
//! resize refused ends the search at once; the report keeps every window measured so far
//! and says why it ended ([`Outcome`]). Its pick is the default unless the pairs measured
//! so far already keep a challenger (at least `MIN_PAIRS` of them).
//!
//! # Spinning and the pool kind
//! Both are fixed when a run builds its pools, so a space naming `spin` or `pool` is searched
//! by rebuilding: one run per [`Setting`], each searched live over its counts as above (up to
//! its candidate: no pairs), then the settings' leaders and the default measured again in
//! interleaved rounds, one fresh run per visit, and those rounds are the pairs: the same
//! `decide` picks (`search_settings`, whose docs hold the budget's split). The
//! dashboard's tuner keeps to the counts: it tunes the run on screen and never rebuilds it.
//!
//! # Live, in the dashboard
//! [`LiveTuner`] runs `search` on its own thread beside a run that keeps going (the same
//! code, pairs and rule included); the dashboard reads a copy of its [`TuneProgress`] each
//! frame and settles the counts itself.
//!
//! # Measuring
//! `search` drives a [`Probe`]: [`DriverProbe`] on a real run, a deterministic noisy fake
//! in the tests. The workload's results do not depend on the counts (its checksum is the
//! same for every count, as for every run), so a tuned run computes what any run computes.
#![forbid(unsafe_code)]

mod error;
mod live;
mod paired;
mod predict;
mod probe;
mod rebuild;
mod render;
mod run;
mod search;
mod setting;
mod space;
mod stats;
#[cfg(all(test, not(loom)))]
mod tests;

pub(crate) use error::TuneError;
pub(crate) use live::{LiveTuner, TuneEnd, TuneProgress};
pub(crate) use predict::predicted_for_cores;
pub(crate) use probe::{DriverProbe, IterationWork};
pub(crate) use render::{heat_map, json, settings_json, settings_text, table, text_report};
pub(crate) use run::{tune_driver, tune_settings};
#[cfg(test)]
pub(crate) use search::PointResult;
pub(crate) use search::{Gain, Outcome, Phase, ProbeEvent, TuneOptions, TuneReport};
pub(crate) use setting::Setting;
pub(crate) use space::{Objective, Point, Space};

use crate::sync::{Arc, AtomicBool, Ordering};

/// A cloneable stop button for a running search: checked between windows and while a window
/// waits.
#[derive(Clone, Debug, Default)]
pub(crate) struct TuneStop(Arc<AtomicBool>);

impl TuneStop {
    /// A button not pressed.
    pub(crate) fn new() -> Self {
        TuneStop::default()
    }

    /// Asks the search to end after what it measured.
    pub(crate) fn stop(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Whether a stop was asked for.
    pub(crate) fn is_stopped(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}
