//! [`Driver`]: tensors, vars and prepared ops of one workload, pushed into an engine
//! iteration after iteration (the data flow, locking rule and pipelining are in the
//! [module docs](super)).
#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use crate::analysis::{self, Descheduled, DispatchCost, OpSplit, Period, SchedSample};
use crate::config::RuntimeConfig;
use crate::device::identity::PoolId;
use crate::engine::{
    Engine, EngineError, EngineKind, EngineOptions, FnProperty, OpName, OpResult, OpSpec, Var,
};
use crate::kernels::Tensor;
use crate::pool::{Pool, PoolOptions, PoolStats};
use crate::profiler::WorkerStates;
use crate::record::graph::{GraphObserver, OpRun};
use crate::sync::{Arc, AtomicU64, Condvar, Mutex, Ordering};
use crate::workload::Graph;

use super::counters::{Lane, LaneTotals, RunCounters};
use super::device_work::DeviceWork;
use super::error::RunError;
use super::handoff_probe::Handoff;
use super::history::ConfigHistory;
use super::hooks::{ProfilerReport, Progress, RunHooks};
use super::intra_split::{IntraSplit, MeasuredPool};
use super::live::{DriverHandle, RunControl};
use super::op_times::{OpTimes, READABLE_ITERATIONS};
use super::plan::{check_dtypes, PreparedOp};
use super::predict::LoopWake;
use super::scaling::{LiveVerdicts, RanShape, ScalingSummary};
use super::storage::{check_memory, TensorStore};
use super::summary::{RunSettings, RunSummary};

/// Iterations pushed and not yet finished, at most: iteration `i` is pushed once `i - 2` is
/// done, so one iteration's ops can overlap the previous one's tail.
pub const ITERATIONS_IN_FLIGHT: u64 = 2;

/// The name of the op that marks an iteration done: pushed after the iteration's ops, it
/// reads every tensor, so the next iteration's first write of each waits for it.
pub const ITERATION_END: &str = "iteration_end";

/// How long a run goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunLength {
    /// Exactly this many iterations.
    Iterations(u64),
    /// Iterations until this much time has passed (at least one). An iteration is queued
    /// only while it can still start in time (the time is not up, and the ones in flight are
    /// expected to finish before it is), so a run ends within about one iteration of it.
    Duration(Duration),
    /// Iterations until [`DriverHandle::stop`] (at least one): the dashboard's default.
    UntilStopped,
}

impl RunLength {
    fn check(self) -> Result<(), RunError> {
        match self {
            RunLength::Iterations(0) => Err(RunError::NothingToRun),
            RunLength::Duration(duration) if duration.is_zero() => Err(RunError::NothingToRun),
            _ => Ok(()),
        }
    }

    /// Whether to push another iteration (every length runs at least one). `pace` gives the
    /// time one iteration takes so far (elapsed time over iterations done; `None` before
    /// one is done), asked only by a timed run: it queues another only if the iteration
    /// ahead of it should finish before the time is up.
    fn wants_another(
        self,
        pushed: u64,
        elapsed: Duration,
        stopped: bool,
        pace: impl FnOnce() -> Option<Duration>,
    ) -> bool {
        match self {
            _ if pushed == 0 => true,
            _ if stopped => false,
            RunLength::Iterations(total) => pushed < total,
            RunLength::Duration(total) => {
                elapsed.saturating_add(pace().unwrap_or_default()) < total
            }
            RunLength::UntilStopped => true,
        }
    }

    /// The time left before a timed run's deadline (`None` for the other lengths).
    fn time_left(self, elapsed: Duration) -> Option<Duration> {
        match self {
            RunLength::Duration(total) => Some(total.saturating_sub(elapsed)),
            _ => None,
        }
    }
}

/// The time per iteration so far: `elapsed` over `done` (`None` when none is done).
fn pace(elapsed: Duration, done: u64) -> Option<Duration> {
    let done = u32::try_from(done).unwrap_or(u32::MAX);
    (done > 0).then(|| elapsed / done)
}

/// What one [`Driver::run`] did.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// Iterations run.
    pub iterations: u64,
    /// Ops run (setup ops not counted).
    pub ops: u64,
    /// From the first push to the end of the last op.
    pub elapsed: Duration,
    /// FLOPs: what the kernels reported, the graph's estimate for the others.
    pub flops: u64,
    /// Of which ops on GPU contexts.
    pub gpu_flops: u64,
    /// The tensors' checksum after the run.
    pub checksum: u64,
    pub(super) lanes: Vec<LaneTotals>,
    /// The intra-op pool's counters over the run.
    pub(super) intra_pool: PoolStats,
    /// The thread counts over the run's wall-clock time.
    pub(super) history: ConfigHistory,
    /// The run's wall-clock time, pauses included (what `history` spans).
    pub(super) wall: Duration,
    /// Each iteration op's time summed over the run.
    pub(super) op_totals: Vec<Duration>,
    /// The last iteration's op times and its step, when the run had two iterations.
    pub(super) last_iteration: Option<(Vec<Duration>, Duration)>,
    /// The threads' descheduled time over the run (`None` without schedstat).
    pub(crate) descheduled: Option<Descheduled>,
    /// The profiler's workers' time at the run's start (`None` without a profiler).
    pub(super) states_before: Option<Vec<WorkerStates>>,
    /// Each iteration op's mean body split over the intra-op pool.
    pub(super) op_splits: Vec<OpSplit>,
    /// Per device of the iteration's graph, the engine's cost before an op, measured over
    /// the run's last iterations.
    pub(super) dispatch: Vec<DispatchCost>,
    /// The inter-op count in force at the run's end, where `dispatch` was measured.
    pub(super) dispatch_inter: usize,
    /// A split loop's wait for a woken intra-op thread, measured or calibrated (`None`:
    /// neither gave a figure).
    pub(super) loop_wake: Option<LoopWake>,
    /// How much slower a split loop's blocks run than alone (the probe's factor; 1 without).
    pub(super) corun: f64,
}

/// Counts finished iterations; the driver waits on it.
#[derive(Debug, Default)]
struct IterationLatch {
    done: Mutex<u64>,
    changed: Condvar,
}

impl IterationLatch {
    /// Iteration `index` (0-based) finished.
    fn finish(&self, index: u64) {
        let mut done = self.done.lock();
        *done = (*done).max(index + 1);
        self.changed.notify_all();
    }

    /// Waits until `count` iterations have finished, or until `deadline` has passed when one
    /// is given; returns how many have.
    fn wait_for(&self, count: u64, deadline: Option<Instant>) -> u64 {
        let mut done = self.done.lock();
        while *done < count {
            done = match deadline {
                None => self.changed.wait(done),
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    self.changed.wait_timeout(done, left)
                }
            };
        }
        *done
    }
}

/// What every op body shares.
#[derive(Debug)]
pub(super) struct Shared {
    store: TensorStore,
    ops: Vec<PreparedOp>,
    /// Per op, what it launches on its GPU stream (`None` for CPU ops).
    device_work: Vec<Option<DeviceWork>>,
    pub(super) counters: RunCounters,
    /// FLOPs of the finished ops on GPU contexts (also in `counters`' total).
    pub(super) gpu_flops: AtomicU64,
    // std's `Arc`: the public queue watch takes the pool as one and makes a weak trait
    // object of it, which loom's `Arc` cannot (no `Weak`, no coercion to `dyn`).
    pub(super) intra: std::sync::Arc<Pool>,
    iterations: IterationLatch,
    /// The iteration ops' measured times.
    pub(super) times: OpTimes,
    /// How the iteration ops' bodies divided over the intra-op pool.
    pub(super) split: Arc<IntraSplit>,
    /// Index of the first iteration op in `ops`.
    first_iteration_op: usize,
    /// The iteration's graph, for the scaling analysis.
    pub(super) shape: RanShape,
    /// The settings at the start (the thread counts live in the run control).
    pub(super) settings: RunSettings,
    /// The dashboard's verdicts, recomputed at most once a second.
    pub(super) live_verdicts: LiveVerdicts,
    /// The engine's cost before an op with one worker and with two, probed once.
    pub(super) handoff: Handoff,
    /// Told the graph that runs ([`RunHooks::graph`]).
    graph: GraphTap,
}

/// The run's [`GraphObserver`], if one is hooked.
// std's `Arc`: a trait object, which loom's `Arc` cannot coerce to `dyn`.
struct GraphTap(Option<std::sync::Arc<dyn GraphObserver>>);

impl std::fmt::Debug for GraphTap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GraphTap({})", self.0.is_some())
    }
}

impl Shared {
    /// Iterations finished since the driver started (every run).
    pub(super) fn iterations_done(&self) -> u64 {
        *self.iterations.done.lock()
    }

    /// Waits until `count` iterations have finished since the driver started, or until
    /// `deadline`; returns how many have.
    pub(super) fn wait_for_iterations(&self, count: u64, deadline: Instant) -> u64 {
        self.iterations.wait_for(count, Some(deadline))
    }

    /// The body of op `index`: lock, compute (an iteration op's intra-op tasks measured),
    /// count.
    fn run_op(&self, index: usize, iteration_op: bool) -> OpResult {
        let op = &self.ops[index];
        let start = Instant::now();
        let work = self.store.with_operands(&op.operands, |reads, writes| {
            if !iteration_op {
                return op.call.execute(self.intra.as_dyn(), reads, writes);
            }
            let slot = index - self.first_iteration_op;
            let pool = MeasuredPool::new(self.intra.as_dyn(), &self.split, slot);
            op.call.execute(&pool, reads, writes)
        })?;
        let flops = work.map_or(op.flops_estimate, |work| work.flops);
        self.counters.record(op.lane_slot, start.elapsed(), flops);
        if !op.ctx.is_cpu() {
            self.gpu_flops
                .fetch_add(flops.round() as u64, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// Runs one workload on its own engine and intra-op pool.
///
/// ```
/// use enginetop::config::RuntimeConfig;
/// use enginetop::workload::run::{Driver, RunHooks, RunLength};
/// use enginetop::workload::{load_spec, Overrides};
///
/// let graph = load_spec("tree", &Overrides::from_args(["nodes=63"]).unwrap()).unwrap();
/// let mut naive = RuntimeConfig { intra_op_threads: 1, ..Default::default() };
/// naive.engine_kind = enginetop::engine::EngineKind::Naive;
/// let mut driver = Driver::new(graph.clone(), &naive, &RunHooks::default()).unwrap();
/// let report = driver.run(RunLength::Iterations(2), &mut |_| {}).unwrap();
/// assert_eq!(report.ops, 126);
///
/// let pooled = RuntimeConfig { inter_op_threads: 2, intra_op_threads: 1, ..Default::default() };
/// let mut threaded = Driver::new(graph, &pooled, &RunHooks::default()).unwrap();
/// threaded.run(RunLength::Iterations(2), &mut |_| {}).unwrap();
/// assert_eq!(threaded.checksum(), report.checksum);
/// ```
pub struct Driver {
    graph: Graph,
    engine: Engine,
    shared: Arc<Shared>,
    /// One var per tensor, in tensor order (the iteration sentinel reads them all).
    vars: Vec<Var>,
    iteration_end: OpName,
    /// The settings at the start; the thread counts live in `control`.
    settings: RunSettings,
    control: Arc<RunControl>,
    warnings: Vec<String>,
    setup_done: bool,
    iterations_pushed: u64,
    /// What keeps the queue-depth watch going ([`RunHooks::watch_queues`]).
    _queue_watch: Option<Box<dyn std::any::Any + Send + Sync>>,
    /// The profiler ([`RunHooks::profiler`]): a run reads its workers' time at its start,
    /// so the summary attributes the run's time alone.
    profiler: Option<Arc<dyn ProfilerReport>>,
}

impl Driver {
    /// Allocates `graph`'s tensors and starts an engine and an intra-op pool as `config`
    /// says (engine CPU workers = the inter-op threads).
    pub fn new(graph: Graph, config: &RuntimeConfig, hooks: &RunHooks) -> Result<Driver, RunError> {
        check_dtypes(&graph)?;
        // First, so a workload too big for the memory fails before any thread starts.
        check_memory(&graph)?;
        let store = TensorStore::allocate(&graph.tensors)?;
        let settings = RunSettings::from_config(config);
        let engine = start_engine(config, hooks)?;
        // std's `Arc`: see `Shared::intra`.
        let intra = std::sync::Arc::new(start_intra_pool(config, settings.intra, hooks)?);
        let queue_watch = hooks
            .watch_queues
            .as_ref()
            .map(|watch| watch(&engine.queue_probe(), &intra));
        let vars: Vec<Var> = (0..store.len()).map(|_| engine.new_variable()).collect();
        let mut lanes: Vec<Lane> = Vec::new();
        let ops: Vec<PreparedOp> = graph
            .ops
            .iter()
            .map(|op| PreparedOp::new(&graph, op, &vars, config.engine_kind, &mut lanes))
            .collect();
        let device_work = device_work_of(&graph, &ops);
        let shape = RanShape::new(&graph, &ops, &lanes);
        let shared = Arc::new(Shared {
            store,
            ops,
            device_work,
            counters: RunCounters::new(&lanes),
            gpu_flops: AtomicU64::new(0),
            intra,
            iterations: IterationLatch::default(),
            times: OpTimes::new(graph.iteration.len()),
            split: Arc::new(IntraSplit::new(graph.iteration.len())),
            first_iteration_op: graph.iteration.start,
            shape,
            settings: settings.clone(),
            live_verdicts: LiveVerdicts::default(),
            handoff: Handoff::new(&EngineOptions::from_config(config)),
            graph: GraphTap(hooks.graph.clone()),
        });
        Ok(Driver {
            graph,
            engine,
            shared,
            vars,
            iteration_end: OpName::new(ITERATION_END),
            control: Arc::new(RunControl::new(settings.inter, settings.intra)),
            settings,
            warnings: config.warnings().iter().map(ToString::to_string).collect(),
            setup_done: false,
            iterations_pushed: 0,
            _queue_watch: queue_watch,
            profiler: hooks.profiler.clone(),
        })
    }

    /// Runs the setup ops (the first time), then `length`'s iterations, calling `progress`
    /// as iterations finish; returns what the iterations did (setup is not timed).
    pub fn run(
        &mut self,
        length: RunLength,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<RunReport, RunError> {
        length.check()?;
        self.run_setup()?;
        self.shared.counters.reset();
        self.shared.gpu_flops.store(0, Ordering::Relaxed);
        self.shared.times.reset();
        self.shared.split.reset();
        if let Some(graph) = &self.shared.graph.0 {
            graph.shape(&self.shared.shape.graph_shape(&self.settings()));
        }
        let sched_before = SchedSample::now();
        let states_before = self.work_states();
        let pool_before = self.shared.intra.stats();
        let failed_before = self.engine.stats().failed_ops;
        let first = self.iterations_pushed;
        self.control.run_started(first);
        // Active time: a pause (the dashboard's space) stops this clock, so rates and a
        // `--duration` count running time only.
        let control = Arc::clone(&self.control);
        let elapsed = move || control.elapsed();
        let mut pushed = 0;
        let (control, shared) = (Arc::clone(&self.control), Arc::clone(&self.shared));
        let wants_another = |pushed: u64| {
            let elapsed = elapsed();
            let pace = || pace(elapsed, shared.iterations_done().saturating_sub(first));
            length.wants_another(pushed, elapsed, control.stop_requested(), pace)
        };
        while wants_another(pushed) {
            if pushed >= ITERATIONS_IN_FLIGHT {
                let done = self.wait_for_iterations(first + pushed + 1 - ITERATIONS_IN_FLIGHT);
                progress(Progress {
                    iterations_done: done - first,
                    length,
                    elapsed: elapsed(),
                });
                if self.engine.stats().failed_ops > failed_before {
                    break; // wait_for_all reports it; the queued iterations skip their ops
                }
            } else if let (1, Some(left)) = (pushed, length.time_left(elapsed())) {
                // A timed run learns how long an iteration takes before queuing a second.
                let deadline = Instant::now() + left;
                self.shared.iterations.wait_for(first + 1, Some(deadline));
            }
            // The wait may have run past the deadline, or a stop came: ask again.
            if !wants_another(pushed) {
                break;
            }
            self.push_iteration()?;
            pushed += 1;
        }
        let drained = self.engine.wait_for_all();
        let elapsed = elapsed();
        let (history, wall) = self.control.history();
        let dispatch_inter = history.last().inter;
        let descheduled = sched_before.zip(SchedSample::now());
        let last = self
            .iterations_pushed
            .checked_sub(1)
            .filter(|_| pushed >= 2);
        let last_iteration = last.and_then(|last| {
            let step = self.shared.times.step(last)?;
            Some((self.shared.times.iteration(last), step))
        });
        drained.map_err(|error| RunError::from_engine("wait for the run's ops", error))?;
        let corun = self.shared.split.corun(self.shared.intra.as_dyn());
        progress(Progress {
            iterations_done: pushed,
            length,
            elapsed,
        });
        Ok(RunReport {
            iterations: pushed,
            ops: pushed * self.graph.iteration.len() as u64,
            elapsed,
            flops: self.shared.counters.flops(),
            gpu_flops: self.shared.gpu_flops.load(Ordering::Relaxed),
            checksum: self.checksum(),
            lanes: self.shared.counters.lanes(),
            intra_pool: pool_delta(&pool_before, self.shared.intra.stats()),
            history,
            wall,
            op_totals: self.shared.times.totals(),
            op_splits: self
                .shared
                .split
                .splits(&self.shared.times.totals(), pushed, corun),
            last_iteration,
            descheduled: descheduled.map(|(before, after)| before.until(&after)),
            states_before,
            dispatch: self.dispatch(pushed),
            dispatch_inter,
            loop_wake: self.shared.split.wake(self.shared.intra.as_dyn()),
            corun,
        })
    }

    /// The profiler's workers' time now, when one is connected.
    fn work_states(&self) -> Option<Vec<WorkerStates>> {
        let snapshot = self.profiler.as_ref()?.snapshot()?;
        Some(snapshot.work_states)
    }

    /// The engine's cost before an op per device, over the last of the `pushed` iterations
    /// just run (as many as stay readable).
    fn dispatch(&self, pushed: u64) -> Vec<DispatchCost> {
        let end = self.iterations_pushed;
        let recent = end - pushed.min(READABLE_ITERATIONS).min(end)..end;
        let times = &self.shared.times;
        let iterations: Vec<_> = recent.map(|i| times.iteration_times(i)).collect();
        analysis::dispatch_costs(
            &self.shared.shape.template,
            &self.shared.shape.preds,
            &iterations,
        )
    }

    /// The summary of `report`, compared with `gemm_peak_gflops` when given, with the
    /// profiler's table when one is connected.
    pub fn summary(
        &self,
        report: &RunReport,
        gemm_peak_gflops: Option<f64>,
        profiler: Option<&dyn ProfilerReport>,
    ) -> RunSummary {
        let mut summary = RunSummary::new(
            &self.graph,
            &self.settings(),
            report,
            gemm_peak_gflops,
            profiler,
            &self.warnings,
        );
        // The attribution first: the what-if below may probe the engine for tens of
        // milliseconds, which the run's idle workers must not count as theirs.
        let attribution = profiler.and_then(ProfilerReport::snapshot).map(|snapshot| {
            let period = match &report.states_before {
                Some(before) => Period::Since(before),
                None => Period::Run,
            };
            analysis::attribute(&snapshot, period, report.descheduled.as_ref())
        });
        let mut scaling = self.scaling(report, &summary.settings);
        scaling.attribution = attribution;
        summary.scaling = Some(scaling);
        if self.graph.uses_gpu() {
            summary.gpus = match self.engine.gpus() {
                Ok(Some(choice)) => Some(choice.to_string()),
                Ok(None) | Err(_) => None, // a refused GPU op already failed the run
            };
        }
        summary
    }

    /// Why `report`'s run scales as it does, under `settings` (the counts the run had for
    /// the longest share of its time).
    fn scaling(&self, report: &RunReport, settings: &RunSettings) -> ScalingSummary {
        let iterations = u32::try_from(report.iterations.max(1)).unwrap_or(u32::MAX);
        let mean_times: Vec<Duration> = report
            .op_totals
            .iter()
            .map(|total| *total / iterations)
            .collect();
        let mean = self
            .shared
            .shape
            .analyze(&mean_times, report.elapsed / iterations);
        let last_iteration = report
            .last_iteration
            .as_ref()
            .map(|(times, step)| self.shared.shape.analyze(times, *step));
        let verdicts = self
            .shared
            .shape
            .verdicts(&mean, settings, report.descheduled.as_ref());
        let shape = &self.shared.shape;
        let handoff = self
            .shared
            .handoff
            .figures(shape.mean_body(&report.op_splits));
        let predicted = shape.predicted_curve(
            &report.op_splits,
            report.costs(handoff),
            settings,
            report.elapsed / iterations,
        );
        ScalingSummary {
            mean,
            last_iteration,
            descheduled: report.descheduled.clone(),
            verdicts,
            predicted: Some(predicted),
            attribution: None,
        }
    }

    /// A hash of every tensor's bits, in tensor order: equal runs have equal checksums.
    pub fn checksum(&self) -> u64 {
        self.shared.store.checksum()
    }

    /// A copy of the tensor called `name` (waits for an op writing it to finish).
    pub fn tensor(&self, name: &str) -> Option<Tensor> {
        let id = self.graph.tensor_id(name)?;
        Some(self.shared.store.snapshot(id.index()))
    }

    /// The workload.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The engine (its stats, or a live resize).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The engine, pool kind and thread counts of this run (the counts as resized last).
    pub fn settings(&self) -> RunSettings {
        RunSettings {
            inter: self.control.inter(),
            intra: self.control.intra(),
            ..self.settings.clone()
        }
    }

    /// A handle that resizes, pauses, stops and watches this driver from other threads,
    /// while [`run`](Self::run) goes on this one.
    pub fn handle(&self) -> DriverHandle {
        DriverHandle {
            engine: self.engine.clone(),
            shared: Arc::clone(&self.shared),
            control: Arc::clone(&self.control),
        }
    }

    /// Resizes the engine's CPU workers (the inter-op threads) while ops run.
    pub fn set_inter_op_threads(&self, threads: usize) -> Result<(), RunError> {
        self.handle().set_inter_op_threads(threads)
    }

    fn run_setup(&mut self) -> Result<(), RunError> {
        if self.setup_done {
            return Ok(());
        }
        for index in self.graph.setup.clone() {
            self.push_op(index, None)?;
        }
        self.engine
            .wait_for_all()
            .map_err(|error| RunError::from_engine("wait for the setup ops", error))?;
        self.setup_done = true;
        Ok(())
    }

    fn push_iteration(&mut self) -> Result<(), RunError> {
        for index in self.graph.iteration.clone() {
            self.push_op(index, Some(self.iterations_pushed))?;
        }
        self.push_iteration_end(self.iterations_pushed)?;
        self.iterations_pushed += 1;
        Ok(())
    }

    /// Pushes op `index` of iteration `iteration` (`None`: a setup op), waiting first while
    /// the run is paused.
    fn push_op(&self, index: usize, iteration: Option<u64>) -> Result<(), RunError> {
        self.control.wait_while_paused();
        let op = &self.shared.ops[index];
        let spec = OpSpec::new(op.name)
            .ctx(op.ctx)
            .reads(&op.const_vars)
            .writes(&op.mutable_vars)
            .prop(op.prop)
            .priority(op.priority);
        let shared = Arc::clone(&self.shared);
        let pushed = Instant::now();
        self.engine
            .push_sync(spec, move |run| {
                let start = Instant::now();
                shared.run_op(index, iteration.is_some())?;
                // A GPU op also puts its kernel's device work on its stream (device_work.rs).
                if let (Some(work), Some(stream)) = (shared.device_work[index], run.stream()) {
                    stream.launch(work.gpu_work())?;
                }
                if let Some(iteration) = iteration {
                    let op = index - shared.first_iteration_op;
                    shared
                        .times
                        .record(iteration, op, (pushed, start), start.elapsed());
                    if let Some(graph) = &shared.graph.0 {
                        let index = u32::try_from(op).unwrap_or(u32::MAX);
                        graph.ran(OpRun {
                            op_id: run.id,
                            iteration,
                            index,
                        });
                    }
                }
                Ok(())
            })
            .map_err(|error| self.refused(index, error))
    }

    /// Pushes the op that counts iteration `index` done once every op of it that writes a
    /// tensor has finished. `NoSkip`: it runs even if an input carries a failure.
    fn push_iteration_end(&self, index: u64) -> Result<(), RunError> {
        let spec = OpSpec::new(self.iteration_end)
            .reads(&self.vars)
            .prop(FnProperty::NoSkip);
        let shared = Arc::clone(&self.shared);
        self.engine
            .push_sync(spec, move |_| {
                shared.times.end(index);
                shared.iterations.finish(index);
                Ok(())
            })
            .map_err(|source| RunError::Engine {
                what: "iteration marker push",
                source,
            })
    }

    fn wait_for_iterations(&self, count: u64) -> u64 {
        self.shared.iterations.wait_for(count, None)
    }

    /// The error for a refused push of op `index`, once everything pushed before it ran.
    fn refused(&self, index: usize, error: EngineError) -> RunError {
        let _ = self.engine.wait_for_all(); // the refusal is the error to report
        let op = &self.graph.ops[index];
        // The engine's own message repeats the op and device and speaks to API users: say
        // what of this run's settings refuses the device, and its flag.
        let reason = match error {
            EngineError::NoGpuBackend { .. } if self.settings.engine != EngineKind::PerDevice => {
                format!(
                    "the {} engine runs no GPU ops (--engine per-device does)",
                    self.settings.engine
                )
            }
            EngineError::NoGpuBackend { .. } => {
                "no GPU is selected (--gpus none; auto, cuda or sim:N select one)".to_string()
            }
            EngineError::NoSuchDevice { max, .. } => {
                format!("only cpu:0 to cpu:{} exist", max.saturating_sub(1))
            }
            source => {
                return RunError::Engine {
                    what: "push",
                    source,
                }
            }
        };
        RunError::DeviceRefused {
            op: op.name.clone(),
            device: op.device,
            reason,
        }
    }
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("workload", &self.graph.name)
            .field("settings", &self.settings())
            .field("iterations_pushed", &self.iterations_pushed)
            .finish()
    }
}

/// Per op of `graph`, the device work it launches when it runs on a GPU context.
fn device_work_of(graph: &Graph, ops: &[PreparedOp]) -> Vec<Option<DeviceWork>> {
    graph
        .ops
        .iter()
        .zip(ops)
        .map(|(decl, op)| {
            if op.ctx.is_cpu() {
                return None;
            }
            let output = decl
                .writes
                .first()
                .map_or(0, |&id| graph.tensor(id).elements());
            let inputs = decl.reads.len();
            Some(DeviceWork::of(
                &op.call,
                op.prop,
                output,
                inputs,
                op.flops_estimate,
            ))
        })
        .collect()
}

/// The engine `config` describes (its CPU workers are the inter-op threads).
fn start_engine(config: &RuntimeConfig, hooks: &RunHooks) -> Result<Engine, RunError> {
    let mut options = EngineOptions::from_config(config);
    options.observer = hooks.engine_observer.clone();
    options.pool_observers = hooks.pool_observers.clone();
    if hooks.stream_observer.is_some() {
        options.stream_observer = hooks.stream_observer.clone();
    }
    Engine::new(options).map_err(|source| RunError::Engine {
        what: "engine start",
        source,
    })
}

/// The intra-op pool: `intra` workers of `config`'s pool kind, named as
/// [`PoolId::INTRA_OP`] names its threads (`intra-w<i>`).
fn start_intra_pool(
    config: &RuntimeConfig,
    intra: usize,
    hooks: &RunHooks,
) -> Result<Pool, RunError> {
    let mut options = PoolOptions::new(config.pool_kind, intra, PoolId::INTRA_OP.thread_prefix())
        .max_threads(config.max_threads.max(intra))
        .allow_spinning(config.allow_spinning);
    if let Some(observer) = &hooks.intra_pool_observer {
        // std's `Arc`: the observer is a trait object (see `PoolOptions::observer`).
        options = options.observer(std::sync::Arc::clone(observer));
    }
    Pool::new(options).map_err(|source| RunError::IntraPool {
        kind: config.pool_kind,
        threads: intra,
        source,
    })
}

/// `after`'s counters minus `before`'s (per worker, and the pool-wide ones).
fn pool_delta(before: &PoolStats, mut after: PoolStats) -> PoolStats {
    for worker in &mut after.workers {
        if let Some(old) = before.workers.iter().find(|old| old.index == worker.index) {
            worker.tasks_run -= old.tasks_run.min(worker.tasks_run);
            worker.steals -= old.steals.min(worker.steals);
            worker.steal_attempts -= old.steal_attempts.min(worker.steal_attempts);
            worker.spins -= old.spins.min(worker.spins);
            worker.parks -= old.parks.min(worker.parks);
            worker.wakeups -= old.wakeups.min(worker.wakeups);
            worker.panics -= old.panics.min(worker.panics);
        }
    }
    after.inline_runs -= before.inline_runs.min(after.inline_runs);
    after.panics -= before.panics.min(after.panics);
    after
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_timed_run_queues_no_iteration_that_would_start_after_the_deadline() {
        let length = RunLength::Duration(100 * MS);
        assert!(
            length.wants_another(0, 500 * MS, false, || None),
            "one always runs"
        );
        assert!(length.wants_another(1, 10 * MS, false, || None));
        assert!(!length.wants_another(2, 100 * MS, false, || Some(50 * MS)));
        // 60 ms in, 30 ms an iteration: the one ahead ends at 90 ms, the next starts in time.
        assert!(length.wants_another(2, 60 * MS, false, || Some(30 * MS)));
        // 80 ms in, 30 ms an iteration: the one ahead ends past the deadline.
        assert!(!length.wants_another(2, 80 * MS, false, || Some(30 * MS)));
        assert!(
            !length.wants_another(1, 10 * MS, true, || None),
            "a stop ends it"
        );
    }

    #[test]
    fn counted_runs_never_ask_the_pace() {
        let length = RunLength::Iterations(3);
        let unasked = || -> Option<Duration> {
            unreachable!("only a timed run asks how long an iteration takes")
        };
        assert!(length.wants_another(2, 1000 * MS, false, unasked));
        assert!(!length.wants_another(3, MS, false, unasked));
        assert!(RunLength::UntilStopped.wants_another(9, MS, false, unasked));
        assert_eq!(length.time_left(MS), None);
        assert_eq!(RunLength::Duration(5 * MS).time_left(2 * MS), Some(3 * MS));
        assert_eq!(pace(90 * MS, 3), Some(30 * MS));
        assert_eq!(pace(90 * MS, 0), None);
    }

    #[test]
    fn the_latch_wait_gives_up_after_its_timeout() {
        let latch = IterationLatch::default();
        assert_eq!(latch.wait_for(1, Some(Instant::now() + 5 * MS)), 0);
        latch.finish(0);
        let far = Instant::now() + Duration::from_secs(60);
        assert_eq!(latch.wait_for(1, Some(far)), 1);
        assert_eq!(latch.wait_for(1, None), 1);
    }
}
