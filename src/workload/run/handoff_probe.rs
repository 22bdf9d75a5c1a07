//! Calibrating the engine's cost before an op with one worker and with two, for the what-if
//! simulation ([`crate::analysis::DispatchByWorkers`]): a run measures that cost at its own
//! count of workers only, and on a fine-grained graph the other count's cost decides the
//! step (`analysis::dispatch` explains the two figures and how they are carried).
//!
//! # The probe
//! Two engines of the run's kind and pool kind, one with one CPU worker and one with two,
//! take turns for [`PROBE_ROUNDS`] rounds, each running one iteration of the same graph per
//! round: [`PROBE_OPS`] ops over [`PROBE_VARS`] vars, each writing one var and reading 2 to
//! 19 (picked at random from a fixed seed, as MXNet's `RandSumExpr` test and the
//! `random-dag` workload pick them), each body spinning for the run's mean op time (at least
//! [`MIN_BODY`]), so the ops arrive at the engine at the run's rate. A run whose mean op
//! takes longer than [`MAX_BODY`] is not probed: its engine cost is a small share of every
//! op at any count, and the run's own figure stands for all. The
//! driver's way is kept: every op of an iteration pushed at once from one thread. Each op's
//! push, start, end and worker are stamped, and each iteration's two figures are computed by
//! the same rule as a run's ([`crate::analysis::dispatch_costs`]). Each engine's figure is
//! the median of its rounds': taking turns spreads a load that comes and goes over both
//! engines alike, and the median drops a round the OS descheduled.
//!
//! # Cost and races
//! About `2 x PROBE_ROUNDS x PROBE_OPS` op bodies of at most [`MAX_BODY`], plus two engine starts,
//! once per run driver. The summary waits for it; the dashboard starts it on a thread of its own
//! and predicts with the run's figure at every count until it is done. The probe's engines are its
//! own (no observer, no GPU): a run's engine is neither resized nor fed foreign ops, and the
//! profiler sees none of the probe's ops. A live run's ops compete with the probe for the cores, so
//! its figures are taken under that load, both engines alike. An engine that does not start, or an
//! op that fails, gives no calibration.
#![forbid(unsafe_code)]

use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use crate::analysis::{
    dispatch_costs, predecessors, DispatchByWorkers, DispatchCost, IterationTimes, OpRunTimes,
    RanGraph, RanOp,
};
use crate::device::discover::GpuSelection;
use crate::device::identity::Lane;
use crate::engine::{Engine, EngineKind, EngineOptions, OpName, OpSpec, Var};
use crate::sync::{Arc, AtomicU64, Mutex, Ordering};

use super::call::busy_wait;

/// Ops per probe iteration.
pub(super) const PROBE_OPS: usize = 512;

/// Vars the probe's ops read and write (`random-dag`'s count).
const PROBE_VARS: usize = 100;

/// Iterations per engine, the engines taking turns.
const PROBE_ROUNDS: usize = 3;

/// The shortest op body: shorter ones would measure the clock, not the engine.
const MIN_BODY: Duration = Duration::from_micros(1);

/// The longest mean op body probed: beyond it the engine's cost (microseconds) is a small
/// share of every op, whatever the workers, and the probe would take long; such a run is
/// not probed.
const MAX_BODY: Duration = Duration::from_micros(50);

/// The seed of the probe's graph.
const SEED: u64 = 0x6e67_696e_6574_6f70;

/// A run driver's probe: its engines' options, and where it stands.
pub(super) struct Handoff {
    options: EngineOptions,
    state: Mutex<Probe>,
}

/// Where a driver's probe stands.
enum Probe {
    /// Not started.
    Idle,
    /// Running on a thread of its own (started by a live prediction, which cannot wait).
    // std's thread: the probe drives whole engines, which no loom model covers.
    Running(std::thread::JoinHandle<Option<DispatchByWorkers>>),
    /// Done: its figures, if it gave any.
    Done(Option<DispatchByWorkers>),
}

impl std::fmt::Debug for Handoff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &*self.state.lock() {
            Probe::Idle => "idle".to_string(),
            Probe::Running(_) => "running".to_string(),
            Probe::Done(figures) => format!("{figures:?}"),
        };
        f.debug_struct("Handoff")
            .field("kind", &self.options.kind)
            .field("state", &state)
            .finish_non_exhaustive()
    }
}

impl Handoff {
    /// The probe of engines like `options` describe (their observers and GPUs aside).
    pub(super) fn new(options: &EngineOptions) -> Self {
        Handoff {
            options: options.clone(),
            state: Mutex::new(Probe::Idle),
        }
    }

    /// The figures, probed with ops of `body` each the first time (see the module docs),
    /// waiting for a probe already running.
    pub(super) fn figures(&self, body: Duration) -> Option<DispatchByWorkers> {
        let mut state = self.state.lock();
        let figures = match std::mem::replace(&mut *state, Probe::Idle) {
            Probe::Done(figures) => figures,
            Probe::Running(probe) => probe.join().ok().flatten(),
            Probe::Idle => calibrate(&self.options, body),
        };
        *state = Probe::Done(figures);
        figures
    }

    /// The figures if the probe is done; else `None`, the probe started (with ops of
    /// `body` each) on a thread of its own the first time: a dashboard's frame does not wait
    /// for it.
    pub(super) fn figures_if_done(&self, body: Duration) -> Option<DispatchByWorkers> {
        let mut state = self.state.lock();
        match std::mem::replace(&mut *state, Probe::Idle) {
            Probe::Done(figures) => *state = Probe::Done(figures),
            Probe::Running(probe) if probe.is_finished() => {
                *state = Probe::Done(probe.join().ok().flatten());
            }
            Probe::Running(probe) => *state = Probe::Running(probe),
            Probe::Idle => {
                let options = self.options.clone();
                // std's thread: see `Probe::Running`.
                let spawned = std::thread::Builder::new()
                    .name("handoff-probe".into())
                    .spawn(move || calibrate(&options, body));
                // A thread that does not start leaves no probe: flat costs, as without one.
                *state = spawned.map_or(Probe::Done(None), Probe::Running);
            }
        }
        match &*state {
            Probe::Done(figures) => *figures,
            _ => None,
        }
    }
}

/// The engine's cost before an op with one worker and with two, on engines `options`
/// describe, for ops of `body` each (see the module docs); `None` for the naive engine (it
/// has no workers), for ops longer than [`MAX_BODY`], or when an engine did not start or an
/// op failed.
pub(super) fn calibrate(options: &EngineOptions, body: Duration) -> Option<DispatchByWorkers> {
    if options.kind == EngineKind::Naive || body > MAX_BODY {
        return None;
    }
    let body = body.max(MIN_BODY);
    let graph = probe_graph();
    let (one, two) = (ProbeEngine::new(options, 1)?, ProbeEngine::new(options, 2)?);
    let (mut ones, mut twos) = (Vec::new(), Vec::new());
    for _ in 0..PROBE_ROUNDS {
        ones.push(one.iteration(&graph, body)?);
        twos.push(two.iteration(&graph, body)?);
    }
    Some(DispatchByWorkers {
        one: median_cost(&ones),
        several: median_cost(&twos),
    })
}

/// Each figure's median over `costs` (the upper one of an even count).
fn median_cost(costs: &[DispatchCost]) -> DispatchCost {
    let median = |figure: fn(&DispatchCost) -> Duration| {
        let mut figures: Vec<Duration> = costs.iter().map(figure).collect();
        figures.sort_unstable();
        figures.get(figures.len() / 2).copied().unwrap_or_default()
    };
    DispatchCost {
        continuing: median(|cost| cost.continuing),
        waking: median(|cost| cost.waking),
    }
}

/// The probe's graph: ops writing one var and reading 2 to 19, all on one CPU device.
fn probe_graph() -> RanGraph {
    let mut rng = fastrand::Rng::with_seed(SEED);
    let ops = (0..PROBE_OPS)
        .map(|index| {
            let reads = rng.usize(2..=19);
            RanOp {
                name: format!("handoff{index}"),
                device: 0,
                reads: (0..reads).map(|_| rng.usize(..PROBE_VARS)).collect(),
                writes: vec![rng.usize(..PROBE_VARS)],
                time: Duration::ZERO,
            }
        })
        .collect();
    RanGraph {
        ops,
        vars: (0..PROBE_VARS).map(|var| format!("v{var}")).collect(),
        devices: vec![Lane::CpuWorkers(0)],
        wall: Duration::ZERO,
    }
}

/// One op's stamps, written by its body (nanoseconds since the probe's epoch).
#[derive(Default)]
struct Stamps {
    start: AtomicU64,
    end: AtomicU64,
    worker: AtomicU64,
}

/// One of the probe's engines and its vars.
struct ProbeEngine {
    engine: Engine,
    vars: Vec<Var>,
    epoch: Instant,
}

impl ProbeEngine {
    /// An engine as `options` describe with `workers` CPU workers, and no observer or GPU.
    fn new(options: &EngineOptions, workers: usize) -> Option<Self> {
        let mut options = options.clone();
        options.cpu_workers = workers;
        options.observer = None;
        options.pool_observers = None;
        options.stream_observer = None;
        options.gpus = GpuSelection::None;
        options.gpu_backend = None;
        let engine = Engine::new(options).ok()?;
        let vars = (0..PROBE_VARS).map(|_| engine.new_variable()).collect();
        Some(ProbeEngine {
            engine,
            vars,
            epoch: Instant::now(),
        })
    }

    /// One iteration of `graph` with bodies of `body`, pushed at once, and its cost before
    /// an op (`None` when an op failed).
    fn iteration(&self, graph: &RanGraph, body: Duration) -> Option<DispatchCost> {
        let epoch = self.epoch;
        let since = move |at: Instant| u64::try_from((at - epoch).as_nanos()).unwrap_or(u64::MAX);
        let stamps: Arc<Vec<Stamps>> =
            Arc::new((0..graph.ops.len()).map(|_| Stamps::default()).collect());
        let name = OpName::new("handoff-probe");
        let mut pushed = Vec::with_capacity(graph.ops.len());
        for (index, op) in graph.ops.iter().enumerate() {
            let vars = |indices: &[usize]| -> Vec<Var> {
                indices.iter().map(|&var| self.vars[var].clone()).collect()
            };
            let (reads, writes) = (vars(&op.reads), vars(&op.writes));
            let spec = OpSpec::new(name).reads(&reads[..]).writes(&writes[..]);
            let stamps = Arc::clone(&stamps);
            pushed.push(since(Instant::now()));
            let run = move |_| {
                let stamp = &stamps[index];
                stamp.start.store(since(Instant::now()), Ordering::Relaxed);
                busy_wait(body);
                stamp.end.store(since(Instant::now()), Ordering::Relaxed);
                stamp.worker.store(this_thread(), Ordering::Relaxed);
                Ok(())
            };
            self.engine.push_sync(spec, run).ok()?;
        }
        self.engine.wait_for_all().ok()?;
        let ops = stamps
            .iter()
            .zip(&pushed)
            .map(|(stamp, &pushed)| OpRunTimes {
                pushed,
                start: stamp.start.load(Ordering::Relaxed),
                end: stamp.end.load(Ordering::Relaxed),
                worker: stamp.worker.load(Ordering::Relaxed) as u32,
            });
        let iteration = IterationTimes {
            ops: ops.collect(),
            previous_end: None,
        };
        let costs = dispatch_costs(graph, &predecessors(graph), &[iteration]);
        costs.first().copied()
    }
}

/// A number for the calling thread (the low bits of a hash of its id).
fn this_thread() -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    std::thread::current().id().hash(&mut hasher);
    hasher.finish() & u64::from(u32::MAX)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// The probe measures both engines, the per-device and the pooled: every figure is a
    /// hand-off that took time.
    #[test]
    fn the_probe_measures_one_worker_and_two() {
        for kind in [EngineKind::PerDevice, EngineKind::Pooled] {
            let options = EngineOptions::new(kind, 1);
            let probe = calibrate(&options, Duration::from_micros(2)).expect("engines run");
            assert!(probe.one.continuing > Duration::ZERO, "{kind:?} {probe:?}");
            assert!(probe.one.waking > Duration::ZERO, "{kind:?} {probe:?}");
            assert!(
                probe.several.continuing > Duration::ZERO,
                "{kind:?} {probe:?}"
            );
            assert!(probe.several.waking > Duration::ZERO, "{kind:?} {probe:?}");
        }
    }

    /// A live prediction does not wait: the first ask starts the probe and gets nothing, a
    /// later one the figures, the same as a waiting ask then gets.
    #[test]
    fn a_live_ask_starts_the_probe_and_takes_its_figures_once_done() {
        let handoff = Handoff::new(&EngineOptions::new(EngineKind::PerDevice, 1));
        let body = Duration::from_micros(2);
        assert_eq!(handoff.figures_if_done(body), None, "started, not done");
        let deadline = Instant::now() + Duration::from_secs(60);
        let figures = loop {
            if let Some(figures) = handoff.figures_if_done(body) {
                break figures;
            }
            assert!(Instant::now() < deadline, "the probe ends");
            std::thread::sleep(Duration::from_millis(5));
        };
        assert_eq!(handoff.figures(body), Some(figures));
        assert!(figures.several.continuing > Duration::ZERO, "{figures:?}");
    }

    /// The naive engine runs ops on the pushing thread: nothing to probe; nor is a run of
    /// ops too long for the engine's cost to matter.
    #[test]
    fn the_naive_engine_and_coarse_ops_have_no_probe() {
        let options = EngineOptions::new(EngineKind::Naive, 1);
        assert_eq!(calibrate(&options, Duration::from_micros(2)), None);
        let options = EngineOptions::new(EngineKind::PerDevice, 1);
        assert_eq!(
            calibrate(&options, MAX_BODY + Duration::from_micros(1)),
            None
        );
    }

    /// The probe's graph has the parallelism of a random DAG over its vars: more than one
    /// op at a time on average, far fewer than its ops.
    #[test]
    fn the_probe_graph_keeps_two_workers_busy() {
        let mut graph = probe_graph();
        for op in &mut graph.ops {
            op.time = Duration::from_micros(1);
        }
        let scaling = crate::analysis::analyze(&graph);
        assert!(
            (1.5..16.0).contains(&scaling.parallelism),
            "{}",
            scaling.parallelism
        );
    }
}
