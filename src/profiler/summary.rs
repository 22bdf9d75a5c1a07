//! The aggregate summary, like MXNet's `profiler.dumps()`: one row per op name (and per
//! `tracing` span name) with count, total, min, max, average, p50 and p99, as a table or JSON,
//! sortable by total, avg, min, max or count.
//!
//! Rows come from the live statistics, where each op is counted exactly once, at its
//! `OpEnd`: an op queued, started and ended is one op, never three.
#![forbid(unsafe_code)]

use std::fmt::Write as _;
use std::str::FromStr;

use super::stats::{OpSnapshot, Snapshot};
use super::task_counts::TaskSampling;
use super::ProfilerError;

/// What the rows are sorted by (largest first).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SortKey {
    /// Total time.
    #[default]
    Total,
    /// Average time.
    Avg,
    /// Shortest time.
    Min,
    /// Longest time.
    Max,
    /// Number of ops.
    Count,
}

impl FromStr for SortKey {
    type Err = ProfilerError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name.trim().to_ascii_lowercase().as_str() {
            "total" => Ok(SortKey::Total),
            "avg" | "mean" | "average" => Ok(SortKey::Avg),
            "min" => Ok(SortKey::Min),
            "max" => Ok(SortKey::Max),
            "count" => Ok(SortKey::Count),
            _ => Err(ProfilerError::UnknownSortKey(name.to_string())),
        }
    }
}

/// The aggregate table.
///
/// ```
/// use enginetop::profiler::{DeviceId, Event, EventKind, OpName, OpInfo, SortKey, Stats,
///     StatsOptions, Summary};
/// let mut stats = Stats::new(StatsOptions::default());
/// let (cpu, conv) = (DeviceId::HOST, OpName::new("conv"));
/// for id in 0..3 {
///     stats.ingest(&Event::op(EventKind::OpStart, cpu, conv, OpInfo::new(id)).at(0));
///     stats.ingest(&Event::op(EventKind::OpEnd, cpu, conv, OpInfo::new(id)).at(2_000_000));
/// }
/// let summary = Summary::from_snapshot(&stats.snapshot(10)).sorted_by(SortKey::Count);
/// assert!(summary.table().contains("conv"));
/// assert_eq!(summary.to_json()["operators"][0]["count"], 3);
/// ```
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Summary {
    /// One row per op name.
    pub operators: Vec<OpSnapshot>,
    /// One row per span name.
    pub spans: Vec<OpSnapshot>,
    /// The order of the rows.
    pub sort_by: SortKey,
    /// Events lost before the collector saw them (their ops may be missing).
    pub dropped_events: u64,
    /// How pool task events were sampled, when some task's were not recorded or some task
    /// ran on the thread that scheduled it (`None`: neither).
    pub task_sampling: Option<TaskSampling>,
}

impl Summary {
    /// The summary of `snapshot`, sorted by total time.
    pub fn from_snapshot(snapshot: &Snapshot) -> Summary {
        Summary {
            operators: snapshot.ops.clone(),
            spans: snapshot.spans.clone(),
            sort_by: SortKey::Total,
            dropped_events: snapshot.dropped_events,
            task_sampling: Some(snapshot.task_sampling)
                .filter(|sampling| sampling.is_sampled() || sampling.run_by_callers > 0),
        }
        .sorted_by(SortKey::Total)
    }

    /// The same rows sorted by `key`, largest first (ties by name).
    pub fn sorted_by(mut self, key: SortKey) -> Summary {
        for rows in [&mut self.operators, &mut self.spans] {
            rows.sort_by(|a, b| {
                sort_value(b, key)
                    .total_cmp(&sort_value(a, key))
                    .then_with(|| a.name.cmp(&b.name))
            });
        }
        self.sort_by = key;
        self
    }

    /// The MXNet-style text table (times in milliseconds).
    pub fn table(&self) -> String {
        self.table_top(usize::MAX)
    }

    /// The table with at most `rows` rows per section, the first in the summary's order; a
    /// line after them says how many were left out and their share of the section's time
    /// (a workload of 10,000 distinct op names prints 10,000 rows otherwise).
    pub fn table_top(&self, rows: usize) -> String {
        let mut out = String::from("Profile Statistics:\n\tNote: times are in milliseconds.\n");
        section(&mut out, "operator", &self.operators, rows);
        if !self.spans.is_empty() {
            section(&mut out, "span", &self.spans, rows);
        }
        if self.dropped_events > 0 {
            let _ = writeln!(
                out,
                "\nWARNING: {} events were dropped; some ops may be missing.",
                self.dropped_events
            );
        }
        if let Some(sampling) = self.task_sampling.filter(TaskSampling::is_sampled) {
            let _ = writeln!(
                out,
                "\nNote: pool task events were sampled, {}; task counts and state times are \
                 exact.",
                sampling.describe()
            );
        }
        if let Some(callers) = self.task_sampling.and_then(|s| s.describe_callers()) {
            let _ = writeln!(
                out,
                "\nNote: {callers} (a full queue, no workers, or a caller helping); they are \
                 counted as that thread's."
            );
        }
        out
    }

    /// The summary as JSON (times in nanoseconds, as in [`OpSnapshot`]).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a summary always serializes")
    }

    /// The JSON of [`table_top`](Self::table_top): at most `rows` rows per section, and
    /// `operators_not_shown` / `spans_not_shown` counting the rest.
    pub fn to_json_top(&self, rows: usize) -> serde_json::Value {
        let (operators, operators_not_shown) = split_at_most(&self.operators, rows);
        let (spans, spans_not_shown) = split_at_most(&self.spans, rows);
        let top = TopJson {
            operators,
            operators_not_shown,
            spans,
            spans_not_shown,
            sort_by: self.sort_by,
            dropped_events: self.dropped_events,
            task_sampling: self.task_sampling,
        };
        serde_json::to_value(top).expect("a summary always serializes")
    }
}

/// [`Summary`] cut to its first rows, as JSON.
#[derive(serde::Serialize)]
struct TopJson<'a> {
    operators: &'a [OpSnapshot],
    operators_not_shown: usize,
    spans: &'a [OpSnapshot],
    spans_not_shown: usize,
    sort_by: SortKey,
    dropped_events: u64,
    task_sampling: Option<TaskSampling>,
}

/// The first `limit` of `rows`, and how many are left out.
fn split_at_most(rows: &[OpSnapshot], limit: usize) -> (&[OpSnapshot], usize) {
    let shown = limit.min(rows.len());
    (&rows[..shown], rows.len() - shown)
}

fn sort_value(row: &OpSnapshot, key: SortKey) -> f64 {
    match key {
        SortKey::Total => row.total_ns as f64,
        SortKey::Avg => row.mean_ns,
        SortKey::Min => row.min_ns as f64,
        SortKey::Max => row.max_ns as f64,
        SortKey::Count => row.count as f64,
    }
}

fn ms(ns: f64) -> f64 {
    ns / 1e6
}

fn section(out: &mut String, title: &str, all_rows: &[OpSnapshot], limit: usize) {
    let (rows, _) = split_at_most(all_rows, limit);
    let _ = writeln!(out, "\n{title}\n=================");
    let _ = writeln!(
        out,
        "{:<32} {:>11} {:>7} {:>13} {:>13} {:>13} {:>13} {:>13} {:>13}",
        "Name",
        "Total Count",
        "Errors",
        "Time (ms)",
        "Min Time (ms)",
        "Max Time (ms)",
        "Avg Time (ms)",
        "P50 (ms)",
        "P99 (ms)"
    );
    let _ = writeln!(
        out,
        "{:<32} {:>11} {:>7} {:>13} {:>13} {:>13} {:>13} {:>13} {:>13}",
        "----",
        "-----------",
        "------",
        "---------",
        "-------------",
        "-------------",
        "-------------",
        "--------",
        "--------"
    );
    for row in rows {
        let _ = writeln!(
            out,
            "{:<32} {:>11} {:>7} {:>13.4} {:>13.4} {:>13.4} {:>13.4} {:>13.4} {:>13.4}",
            row.name,
            row.count,
            row.errors,
            ms(row.total_ns as f64),
            ms(row.min_ns as f64),
            ms(row.max_ns as f64),
            ms(row.mean_ns),
            ms(row.p50_ns as f64),
            ms(row.p99_ns as f64),
        );
    }
    let left_out = &all_rows[rows.len()..];
    if !left_out.is_empty() {
        let time = |rows: &[OpSnapshot]| rows.iter().map(|row| row.total_ns as f64).sum::<f64>();
        let share = 100.0 * time(left_out) / time(all_rows).max(1.0);
        let _ = writeln!(
            out,
            "... {} more {title} names, {share:.1}% of the {title} time, not shown",
            left_out.len()
        );
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn row(name: &str, count: u64, total_ms: u64, min_ms: u64, max_ms: u64) -> OpSnapshot {
        OpSnapshot {
            name: name.to_string(),
            count,
            errors: 0,
            total_ns: total_ms * 1_000_000,
            min_ns: min_ms * 1_000_000,
            max_ns: max_ms * 1_000_000,
            mean_ns: (total_ms * 1_000_000) as f64 / count as f64,
            p50_ns: 0,
            p99_ns: 0,
        }
    }

    fn summary() -> Summary {
        let snapshot = Snapshot {
            ops: vec![
                row("a", 10, 100, 1, 50),
                row("b", 2, 300, 100, 200),
                row("c", 50, 50, 1, 1),
            ],
            dropped_events: 3,
            ..Snapshot::default()
        };
        Summary::from_snapshot(&snapshot)
    }

    fn order(summary: &Summary) -> Vec<&str> {
        summary
            .operators
            .iter()
            .map(|row| row.name.as_str())
            .collect()
    }

    #[test]
    fn rows_sort_by_every_key() {
        assert_eq!(order(&summary()), ["b", "a", "c"]);
        assert_eq!(order(&summary().sorted_by(SortKey::Avg)), ["b", "a", "c"]);
        assert_eq!(order(&summary().sorted_by(SortKey::Count)), ["c", "a", "b"]);
        assert_eq!(order(&summary().sorted_by(SortKey::Max)), ["b", "a", "c"]);
        assert_eq!(order(&summary().sorted_by(SortKey::Min)), ["b", "a", "c"]);
    }

    #[test]
    fn sort_keys_parse_and_unknown_ones_name_the_choices() {
        assert_eq!("AVG".parse::<SortKey>().unwrap(), SortKey::Avg);
        let message = "median".parse::<SortKey>().unwrap_err().to_string();
        assert!(message.contains("total, avg, min, max, count"), "{message}");
    }

    #[test]
    fn table_and_json_carry_every_row_and_the_drop_warning() {
        let summary = summary().sorted_by(SortKey::Count);
        let table = summary.table();
        assert!(table.starts_with("Profile Statistics:"));
        let b_line = table.lines().find(|line| line.starts_with("b ")).unwrap();
        assert!(
            b_line.contains("300.0000") && b_line.contains("150.0000"),
            "{b_line}"
        );
        assert!(table.contains("3 events were dropped"));
        let json = summary.to_json();
        assert_eq!(json["sort_by"], "count");
        assert_eq!(json["operators"].as_array().unwrap().len(), 3);
        assert_eq!(json["operators"][0]["name"], "c");
        assert!(!table.contains("not shown"));
    }

    #[test]
    fn sampled_task_events_are_stated_in_the_table_and_the_json() {
        let sampling = TaskSampling {
            tasks: 5_000,
            recorded: 40,
            rate: 128,
            max_rate: 256,
            run_by_callers: 0,
        };
        let snapshot = Snapshot {
            task_sampling: sampling,
            ..Snapshot::default()
        };
        let summary = Summary::from_snapshot(&snapshot);
        let table = summary.table();
        assert!(
            table.contains("sampled, 1 in 128, up to 1 in 256 (40 of 5,000 tasks recorded)"),
            "{table}"
        );
        for json in [summary.to_json(), summary.to_json_top(1)] {
            assert_eq!(json["task_sampling"]["rate"], 128);
            assert_eq!(json["task_sampling"]["tasks"], 5_000);
        }
        let every = Snapshot {
            task_sampling: TaskSampling {
                recorded: 5_000,
                rate: 1,
                max_rate: 1,
                ..sampling
            },
            ..Snapshot::default()
        };
        let summary = Summary::from_snapshot(&every);
        assert!(!summary.table().contains("sampled"));
        assert!(summary.to_json()["task_sampling"].is_null());
        let by_callers = Snapshot {
            task_sampling: TaskSampling {
                run_by_callers: 1_200,
                ..every.task_sampling
            },
            ..Snapshot::default()
        };
        let summary = Summary::from_snapshot(&by_callers);
        let table = summary.table();
        assert!(!table.contains("sampled"), "{table}");
        assert!(
            table.contains("1,200 of 5,000 pool tasks ran inline on the thread that scheduled"),
            "{table}"
        );
        assert_eq!(summary.to_json()["task_sampling"]["run_by_callers"], 1_200);
    }

    #[test]
    fn a_top_table_says_what_it_left_out() {
        let table = summary().table_top(1);
        assert!(table.lines().any(|line| line.starts_with("b ")));
        assert!(!table
            .lines()
            .any(|line| line.starts_with("a ") || line.starts_with("c ")));
        // a and c: 150 of 450 ms.
        assert!(
            table.contains("... 2 more operator names, 33.3% of the operator time, not shown"),
            "{table}"
        );
        assert_eq!(summary().table_top(3), summary().table());
    }

    #[test]
    fn the_top_json_has_the_tables_rows_as_numbers() {
        let json = summary().to_json_top(2);
        let rows = json["operators"].as_array().unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            (&rows[0]["name"], &rows[1]["name"]),
            (&"b".into(), &"a".into())
        );
        assert_eq!(rows[0]["total_ns"], 300_000_000);
        assert_eq!(rows[0]["count"], 2);
        assert_eq!(json["operators_not_shown"], 1);
        assert_eq!(json["spans_not_shown"], 0);
        assert_eq!(
            (&json["sort_by"], &json["dropped_events"]),
            (&"total".into(), &3.into())
        );
        assert_eq!(summary().to_json_top(9)["operators_not_shown"], 0);
    }
}
