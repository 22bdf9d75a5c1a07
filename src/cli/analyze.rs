//! `enginetop analyze FILE [--summary table|json]`: why a recorded run scales as it does.
//!
//! Reads the graph that ran from a recording (`--record FILE`) or from our Chrome export of
//! one (`otherData.graph`), rebuilds the scaling analysis's input from it, and prints what
//! the live run's summary prints: the `why` section, or `--summary json`'s `scaling` object.
//!
//! The rebuild follows the live summary's rules: an op's time is its `OpStart` to its
//! `OpEnd`; the mean iteration gives each op its summed time over the iterations that ran
//! (those with at least one op run), and its step is the time from the first op's start to
//! the last op's end over the same count; the last iteration's step is from the end of the
//! iteration before to its own end. The pools' workers and thread counts are those at the
//! run's start. A recording has no schedstat samples, so the verdicts judge the graph alone.
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;

use crate::analysis::{self, DeviceFacts, RanGraph, RanOp, Scaling};
use crate::record::load_graph_calls;
use crate::record::{GraphCalls, GraphSource, OpCall};
use crate::workload::run::ScalingSummary;

/// How `analyze` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum AnalyzeFormat {
    /// The summary's `why` section.
    Table,
    /// One JSON object holding `scaling`, as the run's `--summary json` does.
    Json,
}

#[derive(Debug, Args)]
pub(super) struct AnalyzeArgs {
    /// A recording (`--record FILE`) or its Chrome export (`enginetop export FILE --to chrome`).
    file: PathBuf,
    /// How to print the analysis.
    #[arg(long, value_enum, default_value_t = AnalyzeFormat::Table)]
    summary: AnalyzeFormat,
}

pub(super) fn run(args: &AnalyzeArgs) -> Result<()> {
    let (calls, source) = load_graph_calls(&args.file)?;
    if let GraphSource::Recording {
        cut_off: Some(ending),
    } = &source
    {
        eprintln!(
            "warning: {} is {ending}; analyzing what it holds",
            args.file.display()
        );
    }
    if calls.unmatched > 0 {
        eprintln!(
            "warning: {} op runs have no recorded start or end (events dropped or cut off): \
             left out",
            calls.unmatched
        );
    }
    let Some(scaling) = scaling_summary(&calls) else {
        anyhow::bail!(
            "`{}` holds the graph but no op that ran in an iteration: record a run of at \
             least one iteration",
            args.file.display()
        );
    };
    let iterations = iterations(&calls.calls).len();
    let text = match args.summary {
        AnalyzeFormat::Table => format!(
            "{}: {iterations} iterations of {} ops ({})\n{scaling}  (a recording holds no \
             schedstat samples: the verdicts judge the graph alone)\n",
            args.file.display(),
            calls.shape.ops.len(),
            match source {
                GraphSource::Recording { .. } => "recording",
                GraphSource::ChromeTrace => "chrome trace",
            },
        ),
        AnalyzeFormat::Json => {
            let json = serde_json::json!({
                "source": args.file.display().to_string(),
                "iterations": iterations,
                "unmatched_op_runs": calls.unmatched,
                "scaling": scaling,
            });
            format!("{json}\n")
        }
    };
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .context("writing to stdout")
}

/// The iterations that have op runs.
fn iterations(calls: &[OpCall]) -> BTreeSet<u64> {
    calls.iter().map(|call| call.run.iteration).collect()
}

/// The analysis of `calls`, as the live summary makes it (`None` without op runs).
fn scaling_summary(calls: &GraphCalls) -> Option<ScalingSummary> {
    let count = u32::try_from(iterations(&calls.calls).len()).unwrap_or(u32::MAX);
    let first = calls.calls.iter().map(|call| call.start_ns).min()?;
    let last = calls.calls.iter().map(|call| call.end_ns).max()?;
    let mut totals = vec![Duration::ZERO; calls.shape.ops.len()];
    for call in &calls.calls {
        totals[call.run.index as usize] += duration(call);
    }
    let mean_times: Vec<Duration> = totals.iter().map(|total| *total / count).collect();
    let wall = Duration::from_nanos(last - first) / count;
    let mean = analysis::analyze(&ran_graph(calls, &mean_times, wall));
    let threads = &calls.shape.threads;
    let verdicts = analysis::verdicts(&mean, &facts(calls), None, threads);
    Some(ScalingSummary {
        mean,
        last_iteration: last_iteration(calls),
        descheduled: None,
        verdicts,
        predicted: None,
        attribution: None,
    })
}

/// The last iteration's analysis, over the time between its end and the one before's.
fn last_iteration(calls: &GraphCalls) -> Option<Scaling> {
    let mut ends: BTreeMap<u64, u64> = BTreeMap::new();
    for call in &calls.calls {
        let end = ends.entry(call.run.iteration).or_default();
        *end = (*end).max(call.end_ns);
    }
    let mut newest = ends.iter().rev();
    let (&last, &last_end) = newest.next()?;
    let (&before, &before_end) = newest.next()?;
    if before + 1 != last || last_end <= before_end {
        return None;
    }
    let mut times = vec![Duration::ZERO; calls.shape.ops.len()];
    for call in calls.calls.iter().filter(|call| call.run.iteration == last) {
        times[call.run.index as usize] = duration(call);
    }
    let step = Duration::from_nanos(last_end - before_end);
    Some(analysis::analyze(&ran_graph(calls, &times, step)))
}

fn duration(call: &OpCall) -> Duration {
    Duration::from_nanos(call.end_ns - call.start_ns)
}

/// The shape of `calls` with `times` (one per op) over a step of `wall`.
fn ran_graph(calls: &GraphCalls, times: &[Duration], wall: Duration) -> RanGraph {
    let shape = &calls.shape;
    let indices = |vars: &[u32]| vars.iter().map(|&var| var as usize).collect();
    RanGraph {
        ops: shape
            .ops
            .iter()
            .zip(times)
            .map(|(op, &time)| RanOp {
                name: op.name.clone(),
                device: op.device as usize,
                reads: indices(&op.reads),
                writes: indices(&op.writes),
                time,
            })
            .collect(),
        vars: shape.vars.clone(),
        devices: shape.devices.iter().map(|device| device.lane).collect(),
        wall,
    }
}

/// What the verdicts need of each pool.
fn facts(calls: &GraphCalls) -> Vec<DeviceFacts> {
    calls
        .shape
        .devices
        .iter()
        .map(|device| DeviceFacts {
            lane: device.lane,
            workers: device.workers as usize,
        })
        .collect()
}
