//! How benchmark results are written: one JSON object per line (`--json`), or a table.
//!
//! A JSON line holds `bench`, `pool`, `threads`, the metric (`ns_per_task` for spawn and tree,
//! `ms` for parallel_for, `us_p50` and `us_p99` for wake_*) and `reps`:
//!
//! ```text
//! {"bench":"spawn","pool":"simple","threads":2,"ns_per_task":212.5,"reps":5}
//! {"bench":"wake_hot","pool":"rayon","threads":2,"us_p50":1.8,"us_p99":31.0,"reps":5}
//! ```
//!
//! The C++ peers print the same lines, so one script aggregates both.
#![forbid(unsafe_code)]

use std::fmt::Write as _;

use super::pool::{BenchResult, Metric};

/// The pool kind every table row is compared with.
pub(crate) const BASELINE_POOL: &str = "eigen";

/// `result` as one JSON object on one line.
pub(crate) fn json_line(result: &BenchResult) -> String {
    serde_json::to_string(result).expect("a BenchResult always serializes")
}

/// A table of `results` with each row's time relative to the `eigen` pool's in the same run.
pub(crate) fn table(results: &[BenchResult]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<13} {:<10} {:>7}  {:<30} {:>8}",
        "bench", "pool", "threads", "metric", "vs eigen"
    );
    for result in results {
        let _ = writeln!(
            out,
            "{:<13} {:<10} {:>7}  {:<30} {:>8}",
            result.bench.as_str(),
            result.pool,
            result.threads,
            metric_text(&result.metric),
            ratio_text(vs_baseline(result, results)),
        );
    }
    out.push_str(
        "vs eigen: this pool's time / the eigen pool's in the same run (below 1 is faster); \
         figures are medians over reps\n",
    );
    out
}

/// `result`'s headline figure divided by the baseline pool's for the same bench and threads.
pub(crate) fn vs_baseline(result: &BenchResult, results: &[BenchResult]) -> Option<f64> {
    let baseline = results.iter().find(|other| {
        other.pool == BASELINE_POOL
            && other.bench == result.bench
            && other.threads == result.threads
    })?;
    let baseline_figure = baseline.metric.headline();
    (baseline_figure > 0.0).then(|| result.metric.headline() / baseline_figure)
}

fn metric_text(metric: &Metric) -> String {
    match *metric {
        Metric::NsPerTask { ns_per_task } => format!("{ns_per_task:.1} ns/task"),
        Metric::Ms { ms } => format!("{ms:.2} ms"),
        Metric::Latency { us_p50, us_p99 } => format!("p50 {us_p50:.2} us  p99 {us_p99:.2} us"),
    }
}

fn ratio_text(ratio: Option<f64>) -> String {
    ratio.map_or_else(|| "-".to_string(), |ratio| format!("{ratio:.2}x"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::pool::Bench;
    use serde_json::{json, Value};

    fn result(bench: Bench, pool: &str, metric: Metric) -> BenchResult {
        BenchResult {
            bench,
            pool: pool.to_string(),
            threads: 2,
            metric,
            reps: 5,
        }
    }

    #[test]
    fn spawn_line_has_the_reference_keys_in_order() {
        let line = json_line(&result(
            Bench::Spawn,
            "simple",
            Metric::NsPerTask { ns_per_task: 212.5 },
        ));
        assert_eq!(
            line,
            r#"{"bench":"spawn","pool":"simple","threads":2,"ns_per_task":212.5,"reps":5}"#
        );
    }

    #[test]
    fn parallel_for_line_carries_ms() {
        let line = json_line(&result(
            Bench::ParallelFor,
            "rayon",
            Metric::Ms { ms: 14.25 },
        ));
        let value: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            value,
            json!({"bench": "parallel_for", "pool": "rayon", "threads": 2, "ms": 14.25, "reps": 5})
        );
    }

    #[test]
    fn wake_line_carries_both_percentiles_and_no_newline() {
        let metric = Metric::Latency {
            us_p50: 1.5,
            us_p99: 40.0,
        };
        let line = json_line(&result(Bench::WakeCold, "chase-lev", metric));
        assert!(!line.contains('\n'));
        let value: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(value["bench"], "wake_cold");
        assert_eq!(value["pool"], "chase-lev");
        assert_eq!(value["us_p50"], 1.5);
        assert_eq!(value["us_p99"], 40.0);
        assert_eq!(value.as_object().unwrap().len(), 6);
    }

    #[test]
    fn table_compares_each_pool_with_eigen() {
        let results = [
            result(
                Bench::Tree,
                "eigen",
                Metric::NsPerTask { ns_per_task: 40.0 },
            ),
            result(
                Bench::Tree,
                "simple",
                Metric::NsPerTask { ns_per_task: 100.0 },
            ),
            result(
                Bench::Tree,
                "rayon",
                Metric::NsPerTask { ns_per_task: 20.0 },
            ),
        ];
        assert_eq!(vs_baseline(&results[1], &results), Some(2.5));
        assert_eq!(vs_baseline(&results[2], &results), Some(0.5));
        let table = table(&results);
        assert!(table.contains("2.50x") && table.contains("0.50x") && table.contains("1.00x"));
    }

    #[test]
    fn table_without_eigen_shows_no_ratio() {
        let results = [result(
            Bench::Spawn,
            "simple",
            Metric::NsPerTask { ns_per_task: 1.0 },
        )];
        assert_eq!(vs_baseline(&results[0], &results), None);
        let row = table(&results).lines().nth(1).unwrap().to_string();
        assert!(row.trim_end().ends_with('-'), "{row}");
    }
}
