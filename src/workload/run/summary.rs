//! [`RunSummary`]: what a run achieved, as a table for people or one JSON object.
//!
//! ```text
//! resnet-like: 20 iterations in 1.52 s (per-device engine, eigen pool, mostly 2 inter x 2
//!   intra, 1 x 2 at the end)
//!   inter x intra 2x2 0.00-1.20 s, 1x2 1.20-1.55 s
//!   iterations/s    13.2
//!   ops/s           6797
//!   GFLOP/s         13.6   (1.031 GFLOP per iteration)
//!   GEMM peak      108.4   GFLOP/s on 2 threads: CPU ops at 12.5% of peak
//!   checksum       6b1e0c6f2f5a9d13
//! worker pools (busy = op time / thread time, an op's descheduled time included; workers = average over the run):
//!   cpu0 workers     1.8 workers   8180 ops   2.71 s busy   97.4%
//!   cpu priority      4 workers   2140 ops   0.04 s busy    0.7%
//! intra-op pool: 2 eigen threads ran 50211 tasks (w0 25102, w1 25109); callers ran 31034
//!   of their own, 412 steals
//! profiler: not connected (the aggregate table and dropped events come with the profiler)
//! ```
//!
//! Every per-thread figure divides by the threads the run had while it ran: the driver's
//! [`ConfigHistory`] holds the inter- and intra-op counts over the run's wall-clock time,
//! and a lane's busy share is its ops' time over the integral of its thread count (a lane
//! that was never resized: the count times the wall-clock time). The headline names the
//! counts the run had for the longest share of its time, and the last ones when they differ.
#![forbid(unsafe_code)]

use std::fmt;
use std::time::Duration;

use crate::config::RuntimeConfig;
use crate::device::discover::GpuSelection;
use crate::device::gpu::GPU_PRIORITY_WORKERS;
use crate::engine::EngineKind;
use crate::pool::{PoolKind, PoolStats};
use crate::workload::Graph;

use super::counters::Lane;
use super::driver::RunReport;
use super::history::{utilization, ConfigHistory};
use super::hooks::ProfilerReport;
use super::scaling::ScalingSummary;

/// Where a summary's GEMM peak came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PeakSource {
    /// `enginetop bench gemm` on this machine, at [`RunSettings::gemm_peak_threads`]
    /// (measured once and cached).
    Measured,
    /// The user's `--gemm-peak`.
    Given,
    /// `--measure-peak`: measured just before and just after this run, their mean, so the
    /// ratio does not depend on how fast a shared machine was when the cache was filled.
    Now,
}

/// The engine, pool kind and thread counts a run used.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RunSettings {
    /// Which engine.
    pub engine: EngineKind,
    /// The pool kind of the engine's workers and the intra-op pool.
    pub pool: PoolKind,
    /// Inter-op threads (the engine's CPU workers per device).
    pub inter: usize,
    /// Intra-op threads (the kernels' pool).
    pub intra: usize,
    /// Threads the GEMM peak is measured on: what `inter x intra` keeps busy at the start
    /// ([`RuntimeConfig::kernel_threads`]).
    pub gemm_peak_threads: usize,
    /// The per-device engine's CPU priority workers.
    pub priority_workers: usize,
    /// Worker threads per GPU by role (`None` with `--gpus none`: no GPU to work for).
    pub gpu_workers: Option<GpuWorkerRoles>,
}

/// A GPU's worker threads by role, as the engine starts them (`gpu0-compute-<k>`,
/// `gpu0-copy-<k>`, `gpu0-prio-<k>`): the one count the summary, the JSON and the dashboard
/// give.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct GpuWorkerRoles {
    /// Compute workers (`--gpu-workers`).
    pub compute: usize,
    /// Copy workers (`--gpu-copy-workers`), each with an h2d and a d2h stream.
    pub copy: usize,
    /// Prioritized workers (`GpuPrioritized` ops), each with a compute stream of its own.
    pub prio: usize,
}

impl GpuWorkerRoles {
    /// Every role together.
    pub fn total(&self) -> usize {
        self.compute + self.copy + self.prio
    }
}

impl fmt::Display for GpuWorkerRoles {
    /// `2 compute, 2 copy, 1 prio workers`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} compute, {} copy, {} prio worker{}",
            self.compute,
            self.copy,
            self.prio,
            plural(self.prio as u64)
        )
    }
}

impl RunSettings {
    /// The settings `config` resolves to (`0` thread counts picked).
    pub(super) fn from_config(config: &RuntimeConfig) -> Self {
        let threads = config.resolved();
        let workers = config.resolved_engine_workers();
        RunSettings {
            engine: config.engine_kind,
            pool: config.pool_kind,
            inter: threads.inter_op,
            intra: threads.intra_op,
            gemm_peak_threads: config.kernel_threads(),
            priority_workers: workers.cpu_priority,
            gpu_workers: match config.gpus {
                GpuSelection::None => None,
                _ => Some(GpuWorkerRoles {
                    compute: workers.gpu,
                    copy: workers.gpu_copy,
                    prio: GPU_PRIORITY_WORKERS,
                }),
            },
        }
    }

    /// Threads of `lane`'s pool.
    pub(super) fn workers(&self, lane: Lane) -> usize {
        match lane {
            Lane::Driver | Lane::Io => 1,
            Lane::SharedWorkers | Lane::CpuWorkers(_) => self.inter,
            Lane::Priority => self.priority_workers,
            Lane::Gpu(_) => self.gpu_workers.map_or(0, |roles| roles.total()),
        }
    }
}

/// GFLOP/s of `flops` done in `elapsed` (0 when no time passed): the figure of the headless
/// summary and of the dashboard's header alike.
///
/// ```
/// use enginetop::workload::run::{gflops_rate, peak_fraction};
/// use std::time::Duration;
/// let gflops = gflops_rate(3_000_000_000, Duration::from_millis(500));
/// assert_eq!(gflops, 6.0);
/// assert_eq!(peak_fraction(gflops, Some(24.0)), Some(0.25));
/// assert_eq!(peak_fraction(gflops, Some(0.0)), None);
/// ```
pub fn gflops_rate(flops: u64, elapsed: Duration) -> f64 {
    let seconds = elapsed.as_secs_f64();
    if seconds > 0.0 {
        flops as f64 / seconds / 1e9
    } else {
        0.0
    }
}

/// `gflops` as a fraction of the GEMM `peak` (`None` without a positive peak).
pub fn peak_fraction(gflops: f64, peak: Option<f64>) -> Option<f64> {
    peak.filter(|peak| *peak > 0.0).map(|peak| gflops / peak)
}

/// GFLOP/s split by the context the ops ran on: the CPU's figure is the one compared with
/// the CPU GEMM peak; the GPU's (`None` when the workload has no GPU ops) stands alone. The
/// headless summary and the dashboard's header both compute it here, so they agree.
///
/// ```
/// use enginetop::workload::run::GflopsSplit;
/// use std::time::Duration;
/// let split = GflopsSplit::of(5_000_000_000, 3_000_000_000, Duration::from_secs(1), true);
/// assert_eq!((split.cpu, split.gpu), (2.0, Some(3.0)));
/// assert_eq!(split.total(), 5.0);
/// assert_eq!(split.peak_fraction(Some(4.0)), Some(0.5)); // the CPU's 2 of 4, not 5 of 4
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct GflopsSplit {
    /// GFLOP/s of ops on CPU contexts.
    pub cpu: f64,
    /// GFLOP/s of ops on GPU contexts, if the workload has any.
    pub gpu: Option<f64>,
}

impl GflopsSplit {
    /// The rates of `flops` (every op) of which `gpu_flops` on GPU contexts, in `elapsed`.
    pub fn of(flops: u64, gpu_flops: u64, elapsed: Duration, has_gpu_ops: bool) -> Self {
        let gpu_flops = gpu_flops.min(flops);
        GflopsSplit {
            cpu: gflops_rate(flops - gpu_flops, elapsed),
            gpu: has_gpu_ops.then(|| gflops_rate(gpu_flops, elapsed)),
        }
    }

    /// Both together.
    pub fn total(&self) -> f64 {
        self.cpu + self.gpu.unwrap_or(0.0)
    }

    /// The CPU's GFLOP/s as a fraction of the CPU GEMM `peak` (GPU work never counts);
    /// `None` too when GPU ops did the only FLOPs: the figure does not apply, it is not 0.
    ///
    /// ```
    /// use enginetop::workload::run::GflopsSplit;
    /// let gpu_only = GflopsSplit { cpu: 0.0, gpu: Some(20.0) };
    /// assert_eq!(gpu_only.peak_fraction(Some(40.0)), None);
    /// ```
    pub fn peak_fraction(&self, peak: Option<f64>) -> Option<f64> {
        if self.cpu == 0.0 && self.gpu.is_some_and(|gpu| gpu > 0.0) {
            return None;
        }
        peak_fraction(self.cpu, peak)
    }
}

/// How busy one worker pool of the engine was.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LaneUsage {
    /// The pool: `cpu0 workers`, `cpu priority`, `engine workers`, `io worker`, `driver
    /// thread` (the naive engine runs ops on the pushing thread).
    pub lane: String,
    /// The same, typed.
    #[serde(skip)]
    pub(crate) kind: Lane,
    /// Its threads on average over the run's wall-clock time (the counts it had, weighted
    /// by how long it had each).
    pub workers: f64,
    /// Thread-seconds its threads existed: the integral of its thread count over the run.
    pub worker_s: f64,
    /// Ops it ran.
    pub ops: u64,
    /// Seconds its ops ran, summed.
    pub busy_s: f64,
    /// `busy_s / worker_s`: the share of its threads' time spent in ops, within [0, 1].
    pub utilization: f64,
}

/// The thread counts a run had from `start_s` to `end_s` (wall-clock seconds since its
/// start).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct ConfigSpan {
    /// When the counts took effect.
    pub start_s: f64,
    /// When the next resize (or the run's end) replaced them.
    pub end_s: f64,
    /// Inter-op threads.
    pub inter: usize,
    /// Intra-op threads.
    pub intra: usize,
}

impl ConfigSpan {
    fn of(history: &ConfigHistory, wall: Duration) -> Vec<ConfigSpan> {
        history
            .spans(wall)
            .map(|(segment, span)| ConfigSpan {
                start_s: segment.start.min(wall).as_secs_f64(),
                end_s: (segment.start.min(wall) + span).as_secs_f64(),
                inter: segment.inter,
                intra: segment.intra,
            })
            .collect()
    }
}

/// What the intra-op pool did during the run (counts; the pools keep no busy time).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct IntraPoolSummary {
    /// Pool kind.
    pub kind: PoolKind,
    /// Workers that existed during the run (the most it had at once).
    pub threads: usize,
    /// Workers at the run's end.
    pub(crate) threads_at_end: usize,
    /// `parallel_for` tasks its workers ran.
    pub tasks_run: u64,
    /// The same per worker that existed, by index.
    pub(crate) tasks_per_worker: Vec<u64>,
    /// Tasks run by threads outside the pool: an op's thread helping with its own blocks.
    pub(crate) run_by_callers: u64,
    /// Tasks a worker stole from another's queue.
    pub steals: u64,
}

impl IntraPoolSummary {
    /// The pool's counts over a run that had at most `existed` workers at once.
    fn new(stats: &PoolStats, existed: usize) -> Self {
        let workers = &stats.workers[..stats.workers.len().min(existed)];
        IntraPoolSummary {
            kind: stats.kind,
            threads: existed,
            threads_at_end: stats.num_threads,
            tasks_run: stats.tasks_run(),
            tasks_per_worker: workers.iter().map(|worker| worker.tasks_run).collect(),
            run_by_callers: stats.inline_runs,
            steals: stats.workers.iter().map(|worker| worker.steals).sum(),
        }
    }
}

/// A run's summary. `--summary json` prints it as one object: every field below, settings
/// inline (`engine`, `pool`, `inter`, `intra`, ...).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RunSummary {
    /// The workload's name.
    pub workload: String,
    /// Engine, pool and threads: `inter` and `intra` are the counts the run had for the
    /// longest share of its time (`config_history` has them all).
    #[serde(flatten)]
    pub settings: RunSettings,
    /// The thread counts over the run, oldest first (one span when nothing was resized).
    pub config_history: Vec<ConfigSpan>,
    /// Iterations run.
    pub iterations: u64,
    /// Seconds from the first push to the last op's end.
    pub elapsed_s: f64,
    /// Iterations per second.
    pub iterations_per_s: f64,
    /// Ops run.
    pub ops: u64,
    /// Ops per second.
    pub ops_per_s: f64,
    /// Billions of FLOPs per iteration (the kernels' counts).
    pub gflop_per_iteration: f64,
    /// Achieved GFLOP/s, every op.
    pub gflops: f64,
    /// Of which ops on CPU contexts (what `peak_fraction` compares).
    pub cpu_gflops: f64,
    /// Of which ops on GPU contexts, when the workload has any.
    pub gpu_gflops: Option<f64>,
    /// This machine's GEMM peak at the intra-op thread count, when measured, or the one the
    /// user gave.
    pub gemm_peak_gflops: Option<f64>,
    /// Where `gemm_peak_gflops` came from.
    pub gemm_peak_source: PeakSource,
    /// `cpu_gflops / gemm_peak_gflops` (GPU work is not compared with the CPU's peak).
    pub peak_fraction: Option<f64>,
    /// Per worker pool of the engine: ops, busy time, utilization.
    pub utilization: Vec<LaneUsage>,
    /// The intra-op pool's counts.
    pub(crate) intra_pool: IntraPoolSummary,
    /// Hash of every tensor after the run (16 hex digits); equal on every engine.
    pub checksum: String,
    /// The configuration's warnings (oversubscription).
    pub warnings: Vec<String>,
    /// Which GPUs the run's GPU ops ran on, and why (`sim x1 (no CUDA driver found ...;
    /// using a simulated GPU)`), when it had any.
    pub gpus: Option<String>,
    /// The profiler's aggregate table as text, when a profiler is connected (not in the
    /// JSON, which has `profiler`).
    #[serde(skip)]
    pub(crate) profiler_table: Option<String>,
    /// The profiler's aggregate table as JSON rows (`operators`, `spans`, each row's times
    /// in nanoseconds, and how many rows were not shown), when a profiler is connected.
    pub profiler: Option<serde_json::Value>,
    /// Profiler events dropped (full rings), when a profiler is connected.
    pub dropped_events: Option<u64>,
    /// Ops the run executed that the profiler's table does not count (their events were
    /// dropped, or the statistics reset), when a profiler is connected: 0 when it has them all.
    pub ops_missing_from_profiler: Option<u64>,
    /// Why the run scales as it does: work, span, critical path, descheduled time and a
    /// verdict per device (`None` only before the driver adds it).
    pub scaling: Option<ScalingSummary>,
}

impl RunSummary {
    pub(super) fn new(
        graph: &Graph,
        settings: &RunSettings,
        report: &RunReport,
        gemm_peak_gflops: Option<f64>,
        profiler: Option<&dyn ProfilerReport>,
        warnings: &[String],
    ) -> Self {
        let seconds = report.elapsed.as_secs_f64();
        let per_second = |count: f64| if seconds > 0.0 { count / seconds } else { 0.0 };
        let split = GflopsSplit::of(
            report.flops,
            report.gpu_flops,
            report.elapsed,
            graph.uses_gpu(),
        );
        let peak = gemm_peak_gflops.filter(|peak| *peak > 0.0);
        let longest = report.history.longest(report.wall);
        RunSummary {
            workload: graph.name.clone(),
            settings: RunSettings {
                inter: longest.inter,
                intra: longest.intra,
                ..settings.clone()
            },
            config_history: ConfigSpan::of(&report.history, report.wall),
            iterations: report.iterations,
            elapsed_s: seconds,
            iterations_per_s: per_second(report.iterations as f64),
            ops: report.ops,
            ops_per_s: per_second(report.ops as f64),
            gflop_per_iteration: report.flops as f64 / report.iterations.max(1) as f64 / 1e9,
            gflops: split.total(),
            cpu_gflops: split.cpu,
            gpu_gflops: split.gpu,
            gemm_peak_gflops: peak,
            gemm_peak_source: PeakSource::Measured,
            peak_fraction: split.peak_fraction(peak),
            utilization: lane_usage(settings, report),
            intra_pool: IntraPoolSummary::new(&report.intra_pool, report.history.max_intra()),
            checksum: format!("{:016x}", report.checksum),
            warnings: warnings.to_vec(),
            gpus: None,
            profiler_table: profiler.map(ProfilerReport::aggregate_table),
            profiler: profiler.map(ProfilerReport::aggregate_json),
            dropped_events: profiler.map(ProfilerReport::dropped_events),
            ops_missing_from_profiler: profiler.map(|profiler| {
                // The table also counts the `iteration_end` op the run pushes per iteration.
                let ran = report.ops + report.iterations;
                ran.saturating_sub(profiler.ops_counted())
            }),
            scaling: None,
        }
    }

    /// The summary with `gemm_peak_gflops` marked as given by the user (`--gemm-peak`), not
    /// measured: the table then does not claim a thread count for it.
    pub fn with_given_peak(self) -> Self {
        RunSummary {
            gemm_peak_source: PeakSource::Given,
            ..self
        }
    }

    /// The summary compared with `peak`, the mean of GEMM peaks measured just before and
    /// just after the run (`--measure-peak`).
    pub fn with_peak_measured_now(self, peak: f64) -> Self {
        let peak = Some(peak).filter(|peak| *peak > 0.0);
        RunSummary {
            gemm_peak_gflops: peak,
            gemm_peak_source: PeakSource::Now,
            peak_fraction: GflopsSplit {
                cpu: self.cpu_gflops,
                gpu: self.gpu_gflops,
            }
            .peak_fraction(peak),
            ..self
        }
    }

    /// The summary as one JSON object on one line.
    pub fn json(&self) -> String {
        serde_json::to_string(self).expect("a RunSummary always serializes")
    }
}

/// Each lane's busy time over the thread-seconds its pool had: the inter-op lanes follow the
/// resize history, the others keep their count for the whole run.
fn lane_usage(settings: &RunSettings, report: &RunReport) -> Vec<LaneUsage> {
    let wall = report.wall.max(report.elapsed);
    let wall_s = wall.as_secs_f64();
    let mut lanes = report.lanes.clone();
    lanes.sort_by_key(|totals| totals.lane);
    lanes
        .iter()
        .map(|totals| {
            let worker_s = match totals.lane {
                Lane::SharedWorkers | Lane::CpuWorkers(_) => {
                    report.history.thread_seconds(wall, |segment| segment.inter)
                }
                lane => settings.workers(lane) as f64 * wall_s,
            };
            let busy_s = totals.busy.as_secs_f64();
            LaneUsage {
                lane: totals.lane.to_string(),
                kind: totals.lane,
                workers: if wall_s > 0.0 { worker_s / wall_s } else { 0.0 },
                worker_s,
                ops: totals.ops,
                busy_s,
                utilization: utilization(busy_s, worker_s),
            }
        })
        .collect()
}

impl fmt::Display for RunSummary {
    /// The table `--summary table` prints (see the module docs).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_headline(f)?;
        self.write_lanes(f)?;
        self.write_intra_pool(f)?;
        if let Some(scaling) = &self.scaling {
            write!(f, "{scaling}")?;
        }
        match (&self.profiler_table, self.dropped_events) {
            (Some(table), Some(dropped)) => {
                match self
                    .ops_missing_from_profiler
                    .filter(|&missing| missing > 0)
                {
                    Some(missing) => writeln!(
                        f,
                        "profiler ({dropped} events dropped; the table lacks {missing} ops the \
                         run executed):"
                    )?,
                    None => writeln!(f, "profiler ({dropped} events dropped):")?,
                }
                write!(f, "{table}")?;
                if !table.ends_with('\n') {
                    writeln!(f)?;
                }
                Ok(())
            }
            _ => writeln!(
                f,
                "profiler: not connected (the aggregate table and dropped events come with \
                 the profiler)"
            ),
        }
    }
}

impl RunSummary {
    fn write_headline(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.settings;
        let threads = match self.config_history.as_slice() {
            [] | [_] => format!("{} inter x {} intra", s.inter, s.intra),
            [.., last] => format!(
                "mostly {} inter x {} intra, {} x {} at the end",
                s.inter, s.intra, last.inter, last.intra
            ),
        };
        writeln!(
            f,
            "{}: {} iteration{} in {:.2} s ({} engine, {} pool, {threads})",
            self.workload,
            self.iterations,
            plural(self.iterations),
            self.elapsed_s,
            s.engine,
            s.pool,
        )?;
        if self.config_history.len() > 1 {
            self.write_config_history(f)?;
        }
        writeln!(f, "  iterations/s  {:>10.2}", self.iterations_per_s)?;
        writeln!(f, "  ops/s         {:>10.0}", self.ops_per_s)?;
        writeln!(
            f,
            "  GFLOP/s       {:>10.2}   ({:.3} GFLOP per iteration)",
            self.gflops, self.gflop_per_iteration
        )?;
        if let Some(gpus) = &self.gpus {
            writeln!(f, "  GPUs          {gpus}")?;
        }
        if let Some(gpu) = self.gpu_gflops {
            writeln!(f, "    on CPU      {:>10.2}", self.cpu_gflops)?;
            writeln!(
                f,
                "    on GPU      {gpu:>10.2}   (not compared with the CPU peak)"
            )?;
        }
        match (self.gemm_peak_gflops, self.peak_fraction) {
            (Some(peak), Some(fraction)) => {
                let threads = s.gemm_peak_threads;
                let on_threads = format!("on {threads} thread{}", plural(threads as u64));
                let source = match self.gemm_peak_source {
                    PeakSource::Measured => on_threads,
                    PeakSource::Given => "as given (--gemm-peak)".to_string(),
                    PeakSource::Now => format!("{on_threads}, measured around this run"),
                };
                writeln!(
                    f,
                    "  GEMM peak     {peak:>10.2}   GFLOP/s {source}: CPU ops at {:.1}% of peak",
                    fraction * 100.0
                )?
            }
            (Some(peak), None) => writeln!(
                f,
                "  GEMM peak     {peak:>10.2}   GFLOP/s: CPU ops at - of peak (only GPU ops did FLOPs)"
            )?,
            _ => writeln!(f, "  GEMM peak     {:>10}   (not measured)", "-")?,
        }
        writeln!(f, "  checksum      {:>16}", self.checksum)
    }

    /// The thread counts over time: `4x1 0.00-4.10 s, 3x1 4.10-6.20 s, ...` (the first and
    /// last few when there are many).
    fn write_config_history(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 6;
        let span =
            |c: &ConfigSpan| format!("{}x{} {:.2}-{:.2} s", c.inter, c.intra, c.start_s, c.end_s);
        let history = &self.config_history;
        let mut parts: Vec<String> = history.iter().take(SHOWN / 2).map(span).collect();
        if history.len() > SHOWN {
            parts.push(format!("{} more", history.len() - SHOWN));
            parts.extend(history[history.len() - SHOWN / 2..].iter().map(span));
        } else {
            parts.extend(history.iter().skip(SHOWN / 2).map(span));
        }
        writeln!(f, "  inter x intra {}", parts.join(", "))
    }

    fn write_lanes(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "worker pools (busy = op time / thread time, an op's descheduled time included; workers = average over the run):"
        )?;
        for lane in &self.utilization {
            writeln!(
                f,
                "  {:<16} {:>3} workers {:>9} ops {:>8.2} s busy {:>6.1}%",
                lane.lane,
                worker_count(lane.workers),
                lane.ops,
                lane.busy_s,
                lane.utilization * 100.0
            )?;
        }
        Ok(())
    }

    fn write_intra_pool(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pool = &self.intra_pool;
        let per_worker: Vec<String> = pool
            .tasks_per_worker
            .iter()
            .enumerate()
            .map(|(index, tasks)| format!("w{index} {tasks}"))
            .collect();
        let threads = match pool.threads_at_end {
            end if end == pool.threads => {
                format!(
                    "{} {} thread{}",
                    pool.threads,
                    pool.kind,
                    plural(pool.threads as u64)
                )
            }
            end => format!(
                "{} {} thread{} over the run ({end} at the end)",
                pool.threads,
                pool.kind,
                plural(pool.threads as u64)
            ),
        };
        writeln!(
            f,
            "intra-op pool: {threads} ran {} tasks ({}); callers ran {} of their own, {} steals",
            pool.tasks_run,
            per_worker.join(", "),
            pool.run_by_callers,
            pool.steals
        )
    }
}

/// `""` for one, `"s"` for any other count.
pub(crate) fn plural(count: u64) -> &'static str {
    if count == 1 {
        ""
    } else {
        "s"
    }
}

/// An average worker count: whole when it is one (`4`), else to one decimal (`2.6`).
pub(crate) fn worker_count(workers: f64) -> String {
    if (workers - workers.round()).abs() < 0.05 {
        format!("{:.0}", workers)
    } else {
        format!("{workers:.1}")
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::workload::run::{run_workload, RunHooks, RunLength, RunOptions};
    use crate::workload::{load_spec, Overrides};

    #[test]
    fn without_gpus_no_gpu_workers_are_reported() {
        let config = |gpus| RuntimeConfig {
            gpus,
            ..RuntimeConfig::default()
        };
        let none = RunSettings::from_config(&config(GpuSelection::None));
        assert_eq!(none.gpu_workers, None);
        let json = serde_json::to_value(&none).unwrap();
        assert!(json["gpu_workers"].is_null(), "{json}");
        let sim = RunSettings::from_config(&config(GpuSelection::Sim(1)));
        let roles = sim.gpu_workers.unwrap();
        assert_eq!(
            (roles.compute, roles.copy, roles.prio),
            (2, 2, 1),
            "MXNet's 2 compute and 2 copy workers, and the prioritized one"
        );
        assert_eq!(sim.workers(Lane::Gpu(0)), 5);
        assert_eq!(roles.to_string(), "2 compute, 2 copy, 1 prio worker");
    }

    /// A workload whose FLOPs all run on GPUs: the GFLOP/s split adds up, the CPU peak
    /// share is null, and the GPU workers are counted by role, the prioritized one too.
    #[test]
    fn gpu_flops_are_apart_from_the_cpu_peak() {
        let overrides = [
            "device=gpu:0",
            "batches=2",
            "rows=16",
            "features=32",
            "hidden=32",
        ];
        let graph = load_spec("pipeline", &Overrides::from_args(overrides).unwrap()).unwrap();
        let config = RuntimeConfig {
            inter_op_threads: 1,
            intra_op_threads: 1,
            gpus: GpuSelection::Sim(1),
            ..RuntimeConfig::default()
        };
        let mut options = RunOptions::new(config, RunLength::Iterations(2));
        options.gemm_peak_gflops = Some(1e-3);
        let summary = run_workload(graph, &options, RunHooks::default()).unwrap();
        let gpu = summary.gpu_gflops.expect("the workload has GPU ops");
        assert!(gpu > 0.0, "the GEMMs run on the GPU: {summary:?}");
        let sum = summary.cpu_gflops + gpu;
        assert!((sum - summary.gflops).abs() <= 1e-9 * summary.gflops.max(1.0));
        // Only GPU ops did FLOPs (the CPU's reads are sleeps): the CPU's share of its peak
        // does not apply, null in the JSON and `-` in the table, not 0.
        assert_eq!(summary.cpu_gflops, 0.0, "{summary:?}");
        assert_eq!(summary.peak_fraction, None);
        assert!(summary.json().contains(r#""peak_fraction":null"#));
        let table = summary.to_string();
        assert!(
            table.contains("on GPU") && table.contains("CPU ops at - of peak"),
            "{table}"
        );
        // The GPU's workers, every role counted once: the summary's lane and the JSON.
        let roles = summary.settings.gpu_workers.unwrap();
        let lane = summary
            .utilization
            .iter()
            .find(|lane| lane.kind == Lane::Gpu(0))
            .unwrap();
        assert_eq!(lane.workers.round() as usize, roles.total());
        assert!(
            summary
                .json()
                .contains(r#""gpu_workers":{"compute":2,"copy":2,"prio":1}"#),
            "{}",
            summary.json()
        );
    }

    /// A profiler that counts `counted` ops, whatever the run did.
    struct Counting {
        counted: u64,
    }

    impl ProfilerReport for Counting {
        fn aggregate_table(&self) -> String {
            "the table\n".to_string()
        }

        fn aggregate_json(&self) -> serde_json::Value {
            serde_json::json!({})
        }

        fn dropped_events(&self) -> u64 {
            7
        }

        fn ops_counted(&self) -> u64 {
            self.counted
        }
    }

    /// The summary says when the profiler's table counts fewer ops than the run executed
    /// (the run's ops plus an `iteration_end` per iteration), and is quiet when it has all.
    #[test]
    fn the_summary_says_when_its_op_table_lacks_ops() {
        let graph = load_spec("chain", &Overrides::from_args(["length=4"]).unwrap()).unwrap();
        let config = RuntimeConfig {
            inter_op_threads: 1,
            intra_op_threads: 1,
            ..RuntimeConfig::default()
        };
        let options = RunOptions::new(config, RunLength::Iterations(2));
        let summary = run_workload(graph.clone(), &options, RunHooks::default()).unwrap();
        assert_eq!(
            summary.ops_missing_from_profiler, None,
            "no profiler, no figure"
        );
        let with = |counted| {
            let hooks = RunHooks {
                profiler: Some(crate::sync::Arc::new(Counting { counted })),
                ..RunHooks::default()
            };
            run_workload(graph.clone(), &options, hooks).unwrap()
        };
        let ran = summary.ops + summary.iterations;
        let complete = with(ran);
        assert_eq!(complete.ops_missing_from_profiler, Some(0));
        assert!(complete
            .to_string()
            .contains("profiler (7 events dropped):"));
        let short = with(ran - 3);
        assert_eq!(short.ops_missing_from_profiler, Some(3));
        let table = short.to_string();
        assert!(
            table.contains("the table lacks 3 ops the run executed"),
            "{table}"
        );
        assert!(short.json().contains(r#""ops_missing_from_profiler":3"#));
    }

    /// A measured peak names the threads it was measured on; a given one says so instead,
    /// in the table and in the JSON.
    #[test]
    fn the_table_says_where_the_peak_came_from() {
        let graph = load_spec("chain", &Overrides::from_args(["length=4"]).unwrap()).unwrap();
        let config = RuntimeConfig {
            inter_op_threads: 1,
            intra_op_threads: 1,
            ..RuntimeConfig::default()
        };
        let mut options = RunOptions::new(config, RunLength::Iterations(1));
        options.gemm_peak_gflops = Some(100.0);
        let measured = run_workload(graph, &options, RunHooks::default()).unwrap();
        let table = measured.to_string();
        assert!(table.starts_with("chain: 1 iteration in "), "{table}");
        assert!(table.contains("GFLOP/s on 1 thread: CPU ops at"), "{table}");
        let intra = format!("intra-op pool: 1 {} thread ran ", measured.intra_pool.kind);
        assert!(table.contains(&intra), "{table}");
        assert!(table.contains(" 1 inter x 1 intra)\n"), "{table}");
        assert!(measured.json().contains(r#""gemm_peak_source":"measured""#));

        let given = measured.clone().with_given_peak();
        let table = given.to_string();
        assert!(
            table.contains("GFLOP/s as given (--gemm-peak): CPU ops at"),
            "{table}"
        );
        assert!(!table.contains("threads: CPU ops"), "{table}");
        assert!(given.json().contains(r#""gemm_peak_source":"given""#));

        let now = measured.with_peak_measured_now(50.0);
        let table = now.to_string();
        assert!(
            table.contains("GFLOP/s on 1 thread, measured around this run: CPU ops at"),
            "{table}"
        );
        assert_eq!(now.gemm_peak_gflops, Some(50.0));
        assert_eq!(now.peak_fraction, peak_fraction(now.cpu_gflops, Some(50.0)));
        assert!(now.json().contains(r#""gemm_peak_source":"now""#));
    }
}
