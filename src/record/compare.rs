//! `enginetop compare A B`: what changed between two runs, from their recordings or their
//! Chrome traces (ours: ops are `X` slices or `b`/`e` pairs of `cat: "op"`, pool tasks `X`
//! slices named `task`).
//!
//! Each run is reduced to a [`RunProfile`]: its step time (a recording's summary: wall time
//! over iterations), its configuration (a recording's settings and resizes), each op name's
//! count and total time, and each worker thread's busy time (the union of its ops' and tasks'
//! intervals, so an op's tasks run by its own thread count once; where a recording's pool
//! task events were sampled, at least the busy time its exact task counters say). [`Comparison`] lines the two
//! up with deltas (B - A) and ratios (B / A); op names come in order of their total time's
//! change, largest first, so the op that explains a slower run is named first.
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;

use serde::Serialize;

use super::format::{RecordKind, MAGIC};
use super::{parse_recording, RecordError, Recording};

/// One op name's figures in a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OpTotals {
    /// Ops of the name that started and ended.
    pub count: u64,
    /// Their summed time, ns.
    pub total_ns: u64,
}

/// A run reduced to what a comparison reads.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RunProfile {
    /// Where it came from.
    pub source: String,
    /// `recording` or `chrome trace`.
    pub format: &'static str,
    /// Wall-clock seconds per iteration, where the input says (a recording's summary).
    pub step_time_s: Option<f64>,
    /// Iterations, where the input says.
    pub iterations: Option<u64>,
    /// Seconds from the first event to the last.
    pub recorded_s: f64,
    /// Settings by name (a Chrome trace has none).
    pub config: BTreeMap<String, String>,
    /// Figures by op name.
    pub ops: BTreeMap<String, OpTotals>,
    /// Busy seconds by worker thread name.
    pub workers: BTreeMap<String, f64>,
    /// What a cut-off recording lacks (`None` for a whole one or a Chrome trace).
    pub cut_off: Option<String>,
}

/// Reads `path` as a recording or one of our Chrome traces and reduces it.
pub fn load_profile(path: impl AsRef<Path>) -> Result<RunProfile, RecordError> {
    let path = path.as_ref();
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| RecordError::Read {
        path: name.clone(),
        source,
    })?;
    if bytes.starts_with(&MAGIC) {
        return Ok(RunProfile::from_recording(
            &parse_recording(&bytes, &name)?,
            &name,
        ));
    }
    RunProfile::from_chrome_json(&bytes, &name)
}

impl RunProfile {
    /// Where a worker's pool task events were sampled, its busy time is at least the time
    /// its counters say its tasks took (the rule the live snapshot's running share follows).
    fn raise_to_counted_tasks(&mut self, recording: &Recording) {
        for reading in recording.tasks.iter().filter(|r| r.recorded < r.tasks) {
            let busy = self
                .workers
                .entry(recording.thread_name(reading.thread))
                .or_default();
            *busy = busy.max(reading.busy_ns as f64 / 1e9);
        }
    }
}

/// The worker counts each pool of a run had, in order, from its resize events: a pool's
/// start (from 0) and its live resizes; its shutdown (to 0) is no size it ran with.
#[derive(Debug, Default)]
struct PoolSizes(BTreeMap<String, Vec<u64>>);

impl PoolSizes {
    fn new() -> Self {
        PoolSizes::default()
    }

    fn resized(&mut self, pool: &str, to: u64) {
        let sizes = self.0.entry(pool.to_string()).or_default();
        if to > 0 && sizes.last() != Some(&to) {
            sizes.push(to);
        }
    }

    /// One setting per pool that ran: `workers of cpu0` = `2`, or `2, then 4` after a
    /// live resize.
    fn settings(self) -> impl Iterator<Item = (String, String)> {
        self.0
            .into_iter()
            .filter(|(_, sizes)| !sizes.is_empty())
            .map(|(pool, sizes)| {
                let sizes: Vec<String> = sizes.iter().map(u64::to_string).collect();
                (format!("workers of {pool}"), sizes.join(", then "))
            })
    }
}

/// Busy intervals (start, end ns) by thread name.
type Intervals = HashMap<String, Vec<(u64, u64)>>;

impl RunProfile {
    /// `recording` reduced; `source` names it.
    pub(crate) fn from_recording(recording: &Recording, source: &str) -> Self {
        let mut profile = RunProfile {
            source: source.to_string(),
            format: "recording",
            cut_off: (!recording.ending.is_complete()).then(|| recording.ending.to_string()),
            ..RunProfile::default()
        };
        profile.config = recording
            .info
            .settings
            .iter()
            .map(|setting| (setting.key.clone(), setting.value.clone()))
            .collect();
        let mut busy = Intervals::new();
        let mut open_ops: HashMap<u64, (u64, u32)> = HashMap::new();
        let mut open_tasks: HashMap<u32, Vec<u64>> = HashMap::new();
        let mut pool_sizes = PoolSizes::new();
        for event in &recording.events {
            match event.kind {
                RecordKind::OpStart => {
                    open_ops.insert(event.arg, (event.ts_ns, event.thread));
                }
                RecordKind::OpEnd => {
                    let Some((start, thread)) = open_ops.remove(&event.arg) else {
                        continue;
                    };
                    let op = profile
                        .ops
                        .entry(recording.name(event.name).to_string())
                        .or_default();
                    op.count += 1;
                    op.total_ns += event.ts_ns.saturating_sub(start);
                    let worker = recording.thread_name(thread);
                    busy.entry(worker).or_default().push((start, event.ts_ns));
                }
                RecordKind::TaskStart => open_tasks
                    .entry(event.thread)
                    .or_default()
                    .push(event.ts_ns),
                RecordKind::TaskEnd => {
                    if let Some(start) = open_tasks.get_mut(&event.thread).and_then(Vec::pop) {
                        let worker = recording.thread_name(event.thread);
                        busy.entry(worker).or_default().push((start, event.ts_ns));
                    }
                }
                RecordKind::PoolResized => {
                    let pool = match recording.name(event.name) {
                        "unnamed" => recording.device_name(event.device),
                        name => name,
                    };
                    pool_sizes.resized(pool, event.arg);
                }
                _ => {}
            }
        }
        profile.config.extend(pool_sizes.settings());
        profile.workers = busy_seconds(busy);
        profile.raise_to_counted_tasks(recording);
        let times = recording.events.iter().map(|event| event.ts_ns);
        profile.recorded_s = span_seconds(times.clone().min(), times.max());
        let summary = recording
            .summary
            .as_deref()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok());
        if let Some(summary) = summary {
            let iterations = summary["iterations"].as_u64();
            let elapsed = summary["elapsed_s"].as_f64();
            profile.iterations = iterations;
            if let (Some(iterations @ 1..), Some(elapsed)) = (iterations, elapsed) {
                profile.step_time_s = Some(elapsed / iterations as f64);
            }
        }
        profile
    }

    /// One of our Chrome traces reduced; `source` names it.
    pub(crate) fn from_chrome_json(bytes: &[u8], source: &str) -> Result<Self, RecordError> {
        let unrecognized = |why: String| RecordError::Unrecognized {
            path: source.to_string(),
            why,
        };
        let trace: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|err| unrecognized(err.to_string()))?;
        let events = match &trace {
            serde_json::Value::Array(events) => events,
            _ => trace["traceEvents"]
                .as_array()
                .ok_or_else(|| unrecognized("it has no `traceEvents` array".to_string()))?,
        };
        let mut profile = RunProfile {
            source: source.to_string(),
            format: "chrome trace",
            ..RunProfile::default()
        };
        let mut thread_names: HashMap<(u64, u64), String> = HashMap::new();
        let mut slices: Vec<(String, (u64, u64), u64, u64)> = Vec::new(); // name, track, from, to
        let mut open_async: HashMap<u64, (u64, (u64, u64))> = HashMap::new();
        let (mut first, mut last) = (None::<u64>, None::<u64>);
        for event in events {
            let track = (
                event["pid"].as_u64().unwrap_or(0),
                event["tid"].as_u64().unwrap_or(0),
            );
            let name = event["name"].as_str().unwrap_or("unknown");
            let ts = micros_to_ns(event["ts"].as_f64());
            let (ph, cat) = (event["ph"].as_str().unwrap_or(""), event["cat"].as_str());
            if ph == "M" {
                if name == "thread_name" {
                    let text = event["args"]["name"].as_str().unwrap_or("unknown");
                    thread_names.insert(track, text.to_string());
                }
                continue;
            }
            let end = ts + micros_to_ns(event["dur"].as_f64());
            first = Some(first.map_or(ts, |first| first.min(ts)));
            last = Some(last.map_or(end, |last| last.max(end)));
            match (ph, cat) {
                ("X", Some("op")) => {
                    add_op(&mut profile, name, end - ts);
                    slices.push((name.to_string(), track, ts, end));
                }
                ("X", Some("pool")) if name == "task" => {
                    slices.push((String::new(), track, ts, end))
                }
                ("b", Some("op")) => {
                    let id = event["id"].as_u64().unwrap_or(0);
                    open_async.insert(id, (ts, track));
                }
                ("e", Some("op")) => {
                    let id = event["id"].as_u64().unwrap_or(0);
                    if let Some((start, track)) = open_async.remove(&id) {
                        add_op(&mut profile, name, ts.saturating_sub(start));
                        slices.push((name.to_string(), track, start, ts));
                    }
                }
                _ => {}
            }
        }
        let mut busy = Intervals::new();
        for (_, track, from, to) in slices {
            let worker = thread_names
                .get(&track)
                .cloned()
                .unwrap_or_else(|| format!("pid {} tid {}", track.0, track.1));
            busy.entry(worker).or_default().push((from, to));
        }
        profile.workers = busy_seconds(busy);
        profile.recorded_s = span_seconds(first, last);
        Ok(profile)
    }
}

fn add_op(profile: &mut RunProfile, name: &str, dur_ns: u64) {
    let op = profile.ops.entry(name.to_string()).or_default();
    op.count += 1;
    op.total_ns += dur_ns;
}

/// A Chrome trace's microseconds as ns (0 for a missing or negative value).
fn micros_to_ns(micros: Option<f64>) -> u64 {
    let micros = micros.filter(|value| value.is_finite() && *value > 0.0);
    micros.map_or(0, |micros| (micros * 1e3).round() as u64)
}

fn span_seconds(first: Option<u64>, last: Option<u64>) -> f64 {
    match (first, last) {
        (Some(first), Some(last)) => last.saturating_sub(first) as f64 / 1e9,
        _ => 0.0,
    }
}

/// Each thread's busy seconds: the length of the union of its intervals.
fn busy_seconds(busy: Intervals) -> BTreeMap<String, f64> {
    busy.into_iter()
        .map(|(worker, mut intervals)| {
            intervals.sort_unstable();
            let (mut total, mut reach) = (0u64, 0u64);
            for (from, to) in intervals {
                let from = from.max(reach);
                if to > from {
                    total += to - from;
                    reach = to;
                }
            }
            (worker, total as f64 / 1e9)
        })
        .collect()
}

/// A figure in both runs: A, B, B - A and B / A (`None` when A is 0).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Delta {
    /// Run A's.
    pub a: f64,
    /// Run B's.
    pub b: f64,
    /// B - A.
    pub delta: f64,
    /// B / A.
    pub ratio: Option<f64>,
}

impl Delta {
    fn of(a: f64, b: f64) -> Self {
        let ratio = (a != 0.0).then(|| b / a);
        Delta {
            a,
            b,
            delta: b - a,
            ratio,
        }
    }
}

/// One setting in both runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConfigRow {
    /// The setting.
    pub key: String,
    /// Run A's value.
    pub a: Option<String>,
    /// Run B's value.
    pub b: Option<String>,
    /// Whether they differ.
    pub changed: bool,
}

/// One op name in both runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpRow {
    /// The op name.
    pub name: String,
    /// How many ran.
    pub count: Delta,
    /// Their summed time, ms.
    pub total_ms: Delta,
    /// Their mean time, us (0 where none ran).
    pub mean_us: Delta,
}

/// One worker thread in both runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkerRow {
    /// The thread's name.
    pub worker: String,
    /// Its busy seconds.
    pub busy_s: Delta,
}

/// Two runs lined up.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    /// The first run (the baseline).
    pub a: RunSummaryLine,
    /// The second.
    pub b: RunSummaryLine,
    /// Seconds per iteration, where both runs say.
    pub step_time_s: Option<Delta>,
    /// Seconds from the first event to the last.
    pub recorded_s: Delta,
    /// Every setting either run has, changed ones first.
    pub config: Vec<ConfigRow>,
    /// Every op name either run has, the largest change in total time first.
    pub ops: Vec<OpRow>,
    /// Every worker either run has, the largest change in busy time first.
    pub workers: Vec<WorkerRow>,
}

/// What a comparison says about where a run came from.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunSummaryLine {
    /// The file.
    pub source: String,
    /// `recording` or `chrome trace`.
    pub format: &'static str,
    /// Iterations, where the input says.
    pub iterations: Option<u64>,
    /// Seconds per iteration, where the input says.
    pub step_time_s: Option<f64>,
    /// What a cut-off recording lacks.
    pub cut_off: Option<String>,
}

/// Lines up `a` (the baseline) and `b`.
pub fn compare(a: &RunProfile, b: &RunProfile) -> Comparison {
    let line = |profile: &RunProfile| RunSummaryLine {
        source: profile.source.clone(),
        format: profile.format,
        iterations: profile.iterations,
        step_time_s: profile.step_time_s,
        cut_off: profile.cut_off.clone(),
    };
    let step_time_s = match (a.step_time_s, b.step_time_s) {
        (Some(a), Some(b)) => Some(Delta::of(a, b)),
        _ => None,
    };
    Comparison {
        a: line(a),
        b: line(b),
        step_time_s,
        recorded_s: Delta::of(a.recorded_s, b.recorded_s),
        config: config_rows(a, b),
        ops: op_rows(a, b),
        workers: worker_rows(a, b),
    }
}

fn config_rows(a: &RunProfile, b: &RunProfile) -> Vec<ConfigRow> {
    let keys: std::collections::BTreeSet<&String> =
        a.config.keys().chain(b.config.keys()).collect();
    let mut rows: Vec<ConfigRow> = keys
        .into_iter()
        .map(|key| {
            let (a, b) = (a.config.get(key).cloned(), b.config.get(key).cloned());
            ConfigRow {
                key: key.clone(),
                changed: a != b,
                a,
                b,
            }
        })
        .collect();
    rows.sort_by_key(|row| !row.changed); // stable: changed first, then by name
    rows
}

fn op_rows(a: &RunProfile, b: &RunProfile) -> Vec<OpRow> {
    let names: std::collections::BTreeSet<&String> = a.ops.keys().chain(b.ops.keys()).collect();
    let mut rows: Vec<OpRow> = names
        .into_iter()
        .map(|name| {
            let (a, b) = (
                a.ops.get(name).copied().unwrap_or_default(),
                b.ops.get(name).copied().unwrap_or_default(),
            );
            let mean_us = |op: OpTotals| match op.count {
                0 => 0.0,
                count => op.total_ns as f64 / count as f64 / 1e3,
            };
            OpRow {
                name: name.clone(),
                count: Delta::of(a.count as f64, b.count as f64),
                total_ms: Delta::of(a.total_ns as f64 / 1e6, b.total_ns as f64 / 1e6),
                mean_us: Delta::of(mean_us(a), mean_us(b)),
            }
        })
        .collect();
    rows.sort_by(|x, y| y.total_ms.delta.abs().total_cmp(&x.total_ms.delta.abs()));
    rows
}

fn worker_rows(a: &RunProfile, b: &RunProfile) -> Vec<WorkerRow> {
    let names: std::collections::BTreeSet<&String> =
        a.workers.keys().chain(b.workers.keys()).collect();
    let mut rows: Vec<WorkerRow> = names
        .into_iter()
        .map(|worker| WorkerRow {
            worker: worker.clone(),
            busy_s: Delta::of(
                a.workers.get(worker).copied().unwrap_or(0.0),
                b.workers.get(worker).copied().unwrap_or(0.0),
            ),
        })
        .collect();
    rows.sort_by(|x, y| y.busy_s.delta.abs().total_cmp(&x.busy_s.delta.abs()));
    rows
}

impl Comparison {
    /// The comparison as one JSON object (`--summary json`).
    pub fn json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// `op`'s total time per iteration in each run, ms: what it adds to one step, where both
    /// runs say how many iterations they ran (a Chrome trace does not).
    pub(crate) fn per_step_ms(&self, op: &OpRow) -> Option<Delta> {
        match (self.a.iterations, self.b.iterations) {
            (Some(a @ 1..), Some(b @ 1..)) => Some(Delta::of(
                op.total_ms.a / a as f64,
                op.total_ms.b / b as f64,
            )),
            _ => None,
        }
    }
}

/// `x1.234`, or `-` without a ratio.
fn ratio(delta: &Delta) -> String {
    delta
        .ratio
        .map_or_else(|| "-".to_string(), |ratio| format!("x{ratio:.3}"))
}

impl fmt::Display for Comparison {
    /// The comparison as tables for people: A is the baseline, deltas are B - A.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (side, run) in [("A", &self.a), ("B", &self.b)] {
            writeln!(f, "{side}: {} ({})", run.source, run.format)?;
            if let Some(cut_off) = &run.cut_off {
                writeln!(f, "   {cut_off}")?;
            }
        }
        match &self.step_time_s {
            Some(step) => writeln!(
                f,
                "step time    {:>10.3} ms -> {:>10.3} ms  {:>+10.3} ms  {}",
                step.a * 1e3,
                step.b * 1e3,
                step.delta * 1e3,
                ratio(step)
            )?,
            None => {
                let side = |step: Option<f64>| {
                    step.map_or_else(|| "-".to_string(), |s| format!("{:.3} ms", s * 1e3))
                };
                writeln!(
                    f,
                    "step time    {} -> {} (a Chrome trace or a cut-off recording has none)",
                    side(self.a.step_time_s),
                    side(self.b.step_time_s)
                )?
            }
        }
        let recorded = &self.recorded_s;
        writeln!(
            f,
            "recorded     {:>10.3} s  -> {:>10.3} s   {:>+10.3} s   {}",
            recorded.a,
            recorded.b,
            recorded.delta,
            ratio(recorded)
        )?;
        self.fmt_config(f)?;
        self.fmt_ops(f)?;
        self.fmt_workers(f)
    }
}

impl Comparison {
    fn fmt_config(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.config.is_empty() {
            return Ok(());
        }
        writeln!(f, "configuration (changed first):")?;
        for row in &self.config {
            let value = |value: &Option<String>| value.clone().unwrap_or_else(|| "-".into());
            let mark = if row.changed { "*" } else { " " };
            writeln!(
                f,
                " {mark} {:<28} {:>16} -> {}",
                row.key,
                value(&row.a),
                value(&row.b)
            )?;
        }
        Ok(())
    }

    fn fmt_ops(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "ops (largest change in total time first):")?;
        writeln!(
            f,
            "  {:<24} {:>8} {:>8} {:>8}  {:>10} {:>10} {:>10} {:>8}  {:>10} {:>10} {:>8}",
            "name",
            "count A",
            "count B",
            "delta",
            "total A ms",
            "total B ms",
            "delta",
            "ratio",
            "mean A us",
            "mean B us",
            "ratio"
        )?;
        for row in &self.ops {
            writeln!(
                f,
                "  {:<24} {:>8} {:>8} {:>+8}  {:>10.3} {:>10.3} {:>+10.3} {:>8}  {:>10.2} {:>10.2} {:>8}",
                row.name,
                row.count.a,
                row.count.b,
                row.count.delta,
                row.total_ms.a,
                row.total_ms.b,
                row.total_ms.delta,
                ratio(&row.total_ms),
                row.mean_us.a,
                row.mean_us.b,
                ratio(&row.mean_us)
            )?;
        }
        Ok(())
    }

    fn fmt_workers(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "workers busy (largest change first):")?;
        writeln!(
            f,
            "  {:<24} {:>10} {:>10} {:>10} {:>8}",
            "worker", "A s", "B s", "delta", "ratio"
        )?;
        for row in &self.workers {
            let busy = &row.busy_s;
            writeln!(
                f,
                "  {:<24} {:>10.4} {:>10.4} {:>+10.4} {:>8}",
                row.worker,
                busy.a,
                busy.b,
                busy.delta,
                ratio(busy)
            )?;
        }
        Ok(())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::PoolSizes;

    #[test]
    fn a_pools_sizes_are_those_it_ran_with_in_order() {
        let mut sizes = PoolSizes::new();
        // cpu0: started with 2, resized live to 4, shut down; intra-op: 1, shut down;
        // a pool only ever shut down ran with nothing.
        for (pool, to) in [
            ("cpu0", 2),
            ("intra-op", 1),
            ("cpu0", 4),
            ("cpu0", 4),
            ("cpu0", 0),
            ("intra-op", 0),
            ("io", 0),
        ] {
            sizes.resized(pool, to);
        }
        let settings: Vec<(String, String)> = sizes.settings().collect();
        assert_eq!(
            settings,
            [
                ("workers of cpu0".to_string(), "2, then 4".to_string()),
                ("workers of intra-op".to_string(), "1".to_string()),
            ]
        );
    }
}
