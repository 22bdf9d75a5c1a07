//! The cost beyond the clock: each ns/event figure set beside the clock reads it contains.
//!
//! A recorded event costs at least the read of its timestamp. Every ns/event row says how
//! many clock reads its figure holds per event (`clock_reads`: 1 for `op_start`/`op_end`, 0
//! for a pre-stamped or disabled event and for the collector, 2/3 for the engine's mix), and
//! `attribute` sets `beyond_clock_ns = ns_per_event - clock_reads * tsc`, where `tsc` is the
//! `clock_read`/`tsc` row of the same run: the raw counter read the recording path stores.
//! `needs_clock` makes a run that selects a row with clock reads measure that clock too.
#![forbid(unsafe_code)]

use super::ProfilerBenchResult;

/// The most a recorded event may cost beyond its clock reads, in ns (issue 26, target 5).
pub(crate) const TARGET_BEYOND_CLOCK_NS: f64 = 3.0;

/// The benchmarks whose rows contain clock reads to set apart.
const WITH_CLOCK_READS: [&str; 4] = [
    "record_event",
    "span_pair",
    "record_disabled",
    "collect_event",
];

/// Whether `bench` is the clock read and some selected benchmark needs it measured.
pub(super) fn needs_clock(bench: &str, selected: &[&str]) -> bool {
    bench == "clock_read" && selected.iter().any(|s| WITH_CLOCK_READS.contains(s))
}

/// The TSC read's ns in `results`, if it was measured.
pub(crate) fn tsc_read_ns(results: &[ProfilerBenchResult]) -> Option<f64> {
    results
        .iter()
        .find(|r| r.bench == "clock_read" && r.variant == Some("tsc"))
        .and_then(|r| r.ns_per_event)
}

/// Sets `beyond_clock_ns` on every row that has an ns/event figure and its clock reads.
pub(super) fn attribute(results: &mut [ProfilerBenchResult]) {
    let Some(tsc) = tsc_read_ns(results) else {
        return;
    };
    for result in results.iter_mut() {
        if let (Some(ns), Some(reads)) = (result.ns_per_event, result.clock_reads) {
            result.beyond_clock_ns = Some(ns - reads * tsc);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn row(bench: &'static str, variant: Option<&'static str>, ns: f64) -> ProfilerBenchResult {
        let mut result = ProfilerBenchResult::new(bench, 1, 1);
        result.variant = variant;
        result.ns_per_event = Some(ns);
        result
    }

    #[test]
    fn beyond_the_clock_is_the_figure_less_its_reads() {
        let mut results = vec![
            ProfilerBenchResult {
                clock_reads: Some(2.0 / 3.0),
                ..row("record_event", Some("engine_mix"), 14.0)
            },
            ProfilerBenchResult {
                clock_reads: Some(0.0),
                ..row("record_disabled", None, 0.5)
            },
            row("clock_read", Some("std_instant"), 30.0),
            row("clock_read", Some("tsc"), 12.0),
        ];
        attribute(&mut results);
        let beyond: Vec<Option<f64>> = results.iter().map(|r| r.beyond_clock_ns).collect();
        assert_eq!(beyond, [Some(6.0), Some(0.5), None, None]);
    }

    #[test]
    fn without_the_clock_nothing_is_attributed() {
        let mut results = vec![ProfilerBenchResult {
            clock_reads: Some(1.0),
            ..row("record_event", None, 20.0)
        }];
        attribute(&mut results);
        assert_eq!(results[0].beyond_clock_ns, None);
    }

    #[test]
    fn the_clock_runs_when_a_row_needs_it() {
        assert!(needs_clock("clock_read", &["span_pair"]));
        assert!(!needs_clock("clock_read", &["random_dag"]));
        assert!(!needs_clock("record_event", &["record_event"]));
    }
}
