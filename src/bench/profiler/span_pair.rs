//! span_pair: what one op's begin and end cost us, against a `fastrace` span, in one run.
//!
//! - **ours**: `Profiler::op_start` then `Profiler::op_end` on one thread, as the engine probe
//!   records an op's start and end: two events, each with its own clock read.
//! - **fastrace**: a `LocalSpan` entered and dropped under a sampled root span that is the
//!   thread's local parent, with a reporter that discards what it is handed (fastrace's
//!   collector thread still gathers every span): the cheapest setup a fastrace user runs.
//!   fastrace reads its TSC clock once on entering and once on dropping.
//!
//! Both record in bursts of [`PAIRS_PER_BURST`] pairs, each burst of fastrace's under its own
//! root; what happens between bursts (our flush; the root span's end handing its spans to
//! fastrace's collector) is not timed. The burst fits either buffer (our ring; fastrace's
//! queue of 10,240 spans per root), and fastrace's spans for one root (about 120 bytes each)
//! stay below the allocator's mmap threshold, so its buffer is reused from root to root, as
//! in a service's traces, rather than mapped and faulted in anew inside the timed loop.
//! Each rep runs ours, then fastrace's; each figure is the median over reps of ns per pair,
//! with `ns_per_event` half of it, and ours carries `ratio` = ours / fastrace's per pair
//! (target at most [`TARGET_RATIO`]). fastrace is a benchmark-only dependency behind the
//! `peers` feature; without it fastrace's row says how to build it and ours has no ratio.
#![forbid(unsafe_code)]

use std::time::Duration;

use super::{record_bursts, ProfilerBenchConfig, ProfilerBenchError, ProfilerBenchResult};
use crate::bench::stats::median;
use crate::profiler::{Profiler, ProfilerOptions};

/// The most ours may cost per pair, as a fraction of a fastrace span (issue 26, target 4).
pub(crate) const TARGET_RATIO: f64 = 0.5;

/// Pairs per burst, for ours and fastrace's alike.
pub(crate) const PAIRS_PER_BURST: usize = 1_024;

/// ours and fastrace's rows, reps interleaved.
pub(crate) fn span_pair(
    config: &ProfilerBenchConfig,
) -> Result<Vec<ProfilerBenchResult>, ProfilerBenchError> {
    let options = ProfilerOptions::default();
    let profiler = Profiler::new(options)?;
    let pairs_per_burst = (super::burst_len(&options) / 2).min(PAIRS_PER_BURST);
    let pairs = (config.events_per_rep / 2).max(1);
    let mut peer = fastrace_peer::Peer::start();
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..config.reps {
        let elapsed = record_bursts(&profiler, pairs * 2, pairs_per_burst * 2);
        ours.push(per_pair(elapsed, pairs));
        if let Some(peer) = peer.as_mut() {
            theirs.push(per_pair(peer.spans(pairs, pairs_per_burst), pairs));
        }
    }
    profiler.flush();
    let mut mine = row("ours", config.reps, median(&ours));
    mine.dropped = profiler.snapshot().dropped_events;
    let mut fastrace = row("fastrace", config.reps, median(&theirs));
    match (mine.ns_per_pair, fastrace.ns_per_pair) {
        (Some(a), Some(b)) if b > 0.0 => mine.ratio = Some(a / b),
        _ => fastrace.note = Some(fastrace_peer::MISSING.to_string()),
    }
    if let Some(peer) = peer {
        peer.finish();
    }
    Ok(vec![mine, fastrace])
}

/// One span_pair row: ns per pair, and per event (half a pair, one clock read).
fn row(variant: &'static str, reps: usize, ns_per_pair: Option<f64>) -> ProfilerBenchResult {
    let mut result = ProfilerBenchResult::per_event("span_pair", 1, reps, 1.0);
    result.variant = Some(variant);
    result.ns_per_pair = ns_per_pair;
    result.ns_per_event = ns_per_pair.map(|ns| ns / 2.0);
    result
}

fn per_pair(elapsed: Duration, pairs: usize) -> f64 {
    elapsed.as_nanos() as f64 / pairs as f64
}

/// fastrace, set up as its documentation shows, with a reporter that discards every span.
#[cfg(feature = "peers")]
mod fastrace_peer {
    use std::hint::black_box;
    use std::time::{Duration, Instant};

    use fastrace::collector::{Config, Reporter, SpanRecord};
    use fastrace::prelude::{LocalSpan, Span, SpanContext};

    /// Never shown when fastrace is built in.
    pub(super) const MISSING: &str = "fastrace gave no figure";

    /// Discards the spans fastrace's collector hands it.
    struct Discard;

    impl Reporter for Discard {
        fn report(&mut self, spans: Vec<SpanRecord>) {
            drop(spans);
        }
    }

    /// fastrace's global collector, started once per process.
    pub(super) struct Peer;

    impl Peer {
        pub(super) fn start() -> Option<Peer> {
            static REPORTER: std::sync::Once = std::sync::Once::new();
            REPORTER.call_once(|| fastrace::set_reporter(Discard, Config::default()));
            Some(Peer)
        }

        /// `pairs` spans entered and dropped in bursts of `per_burst`, each burst under its
        /// own root; returns the time inside the bursts.
        pub(super) fn spans(&mut self, pairs: usize, per_burst: usize) -> Duration {
            let mut elapsed = Duration::ZERO;
            let mut done = 0;
            while done < pairs {
                let burst = per_burst.min(pairs - done);
                let root = Span::root("span_pair", SpanContext::random());
                let parent = root.set_local_parent();
                let start = Instant::now();
                for _ in 0..burst {
                    drop(black_box(LocalSpan::enter_with_local_parent("bench_op")));
                }
                elapsed += start.elapsed();
                drop(parent);
                drop(root);
                done += burst;
            }
            elapsed
        }

        /// Hands what is left to the reporter.
        pub(super) fn finish(self) {
            fastrace::flush();
        }
    }
}

/// Stands in for fastrace in a build without the `peers` feature.
#[cfg(not(feature = "peers"))]
mod fastrace_peer {
    use std::time::Duration;

    pub(super) const MISSING: &str =
        "fastrace is not built in: cargo build --release --features peers";

    pub(super) enum Peer {}

    impl Peer {
        pub(super) fn start() -> Option<Peer> {
            None
        }

        pub(super) fn spans(&mut self, _pairs: usize, _per_burst: usize) -> Duration {
            match *self {}
        }

        pub(super) fn finish(self) {
            match self {}
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn tiny() -> ProfilerBenchConfig {
        ProfilerBenchConfig {
            reps: 2,
            events_per_rep: 4_000,
            ..ProfilerBenchConfig::quick()
        }
    }

    #[test]
    fn ours_and_fastrace_each_have_a_row() {
        let rows = span_pair(&tiny()).unwrap();
        let variants: Vec<_> = rows.iter().map(|r| r.variant).collect();
        assert_eq!(variants, [Some("ours"), Some("fastrace")]);
        let ours = &rows[0];
        let pair = ours.ns_per_pair.unwrap();
        assert!(pair > 0.0, "{ours:?}");
        assert_eq!(ours.ns_per_event, Some(pair / 2.0));
        assert_eq!(ours.clock_reads, Some(1.0));
        assert_eq!(ours.dropped, 0, "bursts fit the ring");
        let fastrace = &rows[1];
        if cfg!(feature = "peers") {
            let theirs = fastrace.ns_per_pair.unwrap();
            assert!(theirs > 0.0 && fastrace.note.is_none(), "{fastrace:?}");
            assert_eq!(ours.ratio, Some(pair / theirs));
        } else {
            assert_eq!(fastrace.ns_per_pair, None);
            assert!(fastrace
                .note
                .as_deref()
                .unwrap()
                .contains("--features peers"));
            assert_eq!(ours.ratio, None);
        }
    }
}
