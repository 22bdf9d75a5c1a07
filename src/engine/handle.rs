//! The engine handle users hold: [`Engine`], and how to build one ([`EngineOptions`]).
#![forbid(unsafe_code)]

use std::fmt;
// std's `Arc` for the GPU hub: the core holds it as a trait object, which loom's `Arc`
// cannot coerce to `dyn` (the hub is not part of the loom models).
use std::sync::Arc as StdArc;

use super::bulk::BulkRegistry;
use super::core::{Core, Dispatch, DispatchStats, GpuPath, Latch};
use super::gpu::{GpuHub, GpuSetup, GpuSyncMode};
use super::naive::Naive;
use super::opr::{fill_deps, Completion, Deps, OpHeader, Operator, OperatorInner, RunContext};
use super::settings::{EngineSetting, WorkerCounts};
use super::spec::OpSpec;
use super::threaded::{PerDevice, Pooled, WorkerConfig};
use super::var::Var;
use super::var_list::VarList;
use super::{Context, EngineError, EngineKind, EngineObserver, FnProperty, OpName, OpResult};
use crate::config::RuntimeConfig;
use crate::device::cpu::{CpuWorkerOptions, PoolObservers};
use crate::device::discover::{GpuChoice, GpuSelection};
use crate::device::gpu::GpuWorkerCounts;
use crate::device::sim::SimModel;
use crate::device::stream::{GpuBackend, StreamObserver};
use crate::pool::{PoolKind, DEFAULT_MAX_THREADS};
use crate::sync::Arc;

/// How to build an engine.
#[derive(Clone)]
pub struct EngineOptions {
    /// Which engine.
    pub kind: EngineKind,
    /// The pool implementation of the CPU worker pools.
    pub pool_kind: PoolKind,
    /// Workers per CPU device (per-device) or shared workers (pooled); 1 to `max_threads`.
    pub cpu_workers: usize,
    /// Workers of the CPU priority pool (per-device); 1 to `max_threads` (at most
    /// [`MAX_PRIORITY_THREADS`](crate::device::cpu::MAX_PRIORITY_THREADS)).
    pub cpu_priority_workers: usize,
    /// GPU compute and copy workers per GPU.
    pub gpu_workers: GpuWorkerCounts,
    /// Which GPUs (`--gpus`); `None` refuses GPU contexts. Resolved the first time an op
    /// names a GPU (or [`Engine::gpus`] asks). Only the per-device engine runs GPU ops.
    pub gpus: GpuSelection,
    /// A GPU backend to use instead of resolving [`gpus`](Self::gpus) (tests, benchmarks).
    // std's `Arc`: a trait object, which loom's `Arc` cannot coerce to `dyn`.
    pub gpu_backend: Option<StdArc<dyn GpuBackend>>,
    /// The model of the simulated GPUs `gpus` may pick (`sim:N`, `auto` without CUDA).
    pub sim_model: SimModel,
    /// How dependencies between GPU ops are kept: events (default) or a sync per op.
    pub gpu_sync: GpuSyncMode,
    /// Where GPU stream events go (the profiler).
    // std's `Arc`: a trait object, which loom's `Arc` cannot coerce to `dyn`.
    pub stream_observer: Option<StdArc<dyn StreamObserver>>,
    /// The most workers of one pool, at start or in a live resize.
    pub max_threads: usize,
    /// Let one idle worker spin before parking.
    pub allow_spinning: bool,
    /// Where op events go (the profiler).
    pub observer: Option<Arc<dyn EngineObserver>>,
    /// Makes the observer of each worker pool the engine starts (the profiler's pool probes).
    pub pool_observers: Option<PoolObservers>,
}

impl EngineOptions {
    /// `kind` with `cpu_workers` CPU workers, MXNet's other defaults (4 priority workers,
    /// 2 GPU compute and 2 GPU copy workers), the `eigen` pool, no GPUs.
    ///
    /// ```
    /// use enginetop::engine::{Engine, EngineKind, EngineOptions};
    /// let engine = Engine::new(EngineOptions::new(EngineKind::Pooled, 2)).unwrap();
    /// assert_eq!(engine.kind(), EngineKind::Pooled);
    /// ```
    pub fn new(kind: EngineKind, cpu_workers: usize) -> Self {
        EngineOptions {
            kind,
            pool_kind: PoolKind::Eigen,
            cpu_workers,
            cpu_priority_workers: 4,
            gpu_workers: GpuWorkerCounts::default(),
            gpus: GpuSelection::None,
            gpu_backend: None,
            sim_model: SimModel::default(),
            gpu_sync: GpuSyncMode::default(),
            stream_observer: None,
            max_threads: DEFAULT_MAX_THREADS,
            allow_spinning: true,
            observer: None,
            pool_observers: None,
        }
    }

    /// The engine a [`RuntimeConfig`] describes (kind, pool kind, worker counts, spinning,
    /// GPUs and their sync mode).
    pub fn from_config(config: &RuntimeConfig) -> Self {
        let resolved = config.resolved_engine_workers();
        EngineOptions {
            kind: config.engine_kind,
            pool_kind: config.pool_kind,
            cpu_workers: resolved.cpu,
            cpu_priority_workers: resolved.cpu_priority,
            gpu_workers: GpuWorkerCounts {
                compute: resolved.gpu,
                copy: resolved.gpu_copy,
            },
            gpus: config.gpus,
            gpu_backend: None,
            sim_model: SimModel::default(),
            gpu_sync: config.gpu_sync,
            stream_observer: None,
            max_threads: config.max_threads,
            allow_spinning: config.allow_spinning,
            observer: None,
            pool_observers: None,
        }
    }

    /// Sets the pool implementation.
    pub fn pool_kind(mut self, kind: PoolKind) -> Self {
        self.pool_kind = kind;
        self
    }

    /// Sets the priority pool's size (checked by [`Engine::new`]: 1 to `max_threads`).
    pub fn cpu_priority_workers(mut self, threads: usize) -> Self {
        self.cpu_priority_workers = threads;
        self
    }

    /// Sets the most workers one pool may have, at start or in a live resize.
    pub fn max_threads(mut self, max_threads: usize) -> Self {
        self.max_threads = max_threads;
        self
    }

    /// Installs an observer of op events.
    pub fn observer(mut self, observer: Arc<dyn EngineObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Installs the factory of the observers of the engine's worker pools: it is called with
    /// each pool's name as the engine starts it (`cpu<i>`, `cpu-prio`; `engine` and `io` for
    /// the pooled engine).
    pub fn pool_observers(mut self, observers: PoolObservers) -> Self {
        self.pool_observers = Some(observers);
        self
    }

    /// Sets which GPUs the engine uses.
    pub fn gpus(mut self, selection: GpuSelection) -> Self {
        self.gpus = selection;
        self
    }

    /// Uses `backend`'s GPUs (instead of resolving [`gpus`](Self::gpus)).
    // std's `Arc`: a trait object, which loom's `Arc` cannot coerce to `dyn`.
    pub fn gpu_backend(mut self, backend: StdArc<dyn GpuBackend>) -> Self {
        self.gpu_backend = Some(backend);
        self
    }

    /// Sets how dependencies between GPU ops are kept.
    pub fn gpu_sync(mut self, mode: GpuSyncMode) -> Self {
        self.gpu_sync = mode;
        self
    }

    /// Sets the GPU compute and copy workers per GPU (at least 1 each).
    pub fn gpu_workers(mut self, compute: usize, copy: usize) -> Self {
        self.gpu_workers = GpuWorkerCounts {
            compute: compute.max(1),
            copy: copy.max(1),
        };
        self
    }

    /// Installs an observer of GPU stream events.
    // std's `Arc`: a trait object, which loom's `Arc` cannot coerce to `dyn`.
    pub fn stream_observer(mut self, observer: StdArc<dyn StreamObserver>) -> Self {
        self.stream_observer = Some(observer);
        self
    }

    /// The engine's GPUs, if it has any: the per-device engine with a GPU selection.
    // std's `Arc`: the core holds the hub as a trait object, which loom's `Arc` cannot make.
    fn gpu_hub(&self) -> Option<StdArc<GpuHub>> {
        let wants_gpus = self.gpu_backend.is_some() || self.gpus != GpuSelection::None;
        (self.kind == EngineKind::PerDevice && wants_gpus).then(|| {
            StdArc::new(GpuHub::new(GpuSetup {
                selection: self.gpus,
                backend: self.gpu_backend.clone(),
                model: self.sim_model,
                counts: self.gpu_workers,
                sync: self.gpu_sync,
                observer: self.stream_observer.clone(),
                pool_observers: self.pool_observers.clone(),
            }))
        })
    }

    /// Checks the worker counts of the settings this engine kind has (see `settings.rs`).
    fn check_settings(&self) -> Result<(), EngineError> {
        let counts = [
            (EngineSetting::CpuWorkers, self.cpu_workers),
            (EngineSetting::PriorityWorkers, self.cpu_priority_workers),
        ];
        for (setting, threads) in counts {
            if setting.limit(self.kind, self.max_threads).is_some() {
                setting.check(self.kind, threads, self.max_threads)?;
            }
        }
        Ok(())
    }

    fn worker_config(&self) -> WorkerConfig {
        WorkerConfig {
            cpu: CpuWorkerOptions {
                pool_kind: self.pool_kind,
                threads: self.cpu_workers,
                max_threads: self.max_threads,
                allow_spinning: self.allow_spinning,
            },
            priority_threads: self.cpu_priority_workers,
            gpu: self.gpu_workers,
        }
    }
}

impl fmt::Debug for EngineOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EngineOptions")
            .field("kind", &self.kind)
            .field("pool_kind", &self.pool_kind)
            .field("cpu_workers", &self.cpu_workers)
            .field("cpu_priority_workers", &self.cpu_priority_workers)
            .field("gpu_workers", &self.gpu_workers)
            .field("gpus", &self.gpus)
            .field("gpu_backend", &self.gpu_backend.as_ref().map(|b| b.kind()))
            .field("sim_model", &self.sim_model)
            .field("gpu_sync", &self.gpu_sync)
            .field("stream_observer", &self.stream_observer.is_some())
            .field("max_threads", &self.max_threads)
            .field("allow_spinning", &self.allow_spinning)
            .field("observer", &self.observer.is_some())
            .field("pool_observers", &self.pool_observers.is_some())
            .finish()
    }
}

/// A live view of an engine.
#[derive(Clone, Debug, serde::Serialize)]
pub struct EngineStats {
    /// Which engine.
    pub kind: EngineKind,
    /// Ops pushed and not completed.
    pub pending: usize,
    /// Ops that failed (error, panic, dropped completion).
    pub failed_ops: u64,
    /// Ops skipped because an input carried a failure.
    pub skipped_ops: u64,
    /// Ops whose bodies `cancel` skipped.
    pub cancelled_ops: u64,
    /// Whether the engine is stopped.
    pub stopped: bool,
    /// The worker pools.
    pub workers: DispatchStats,
}

/// The engine's queues and workers, seen without keeping the engine running
/// ([`Engine::queue_probe`]).
#[derive(Clone)]
pub struct EngineQueues {
    core: Arc<Core>,
}

impl EngineQueues {
    /// The worker pools and the ready ops in front of them, now.
    pub fn stats(&self) -> DispatchStats {
        self.core.dispatcher.stats()
    }
}

/// A dependency engine: cheap to clone; the last handle dropped runs everything pushed, then
/// joins the workers.
///
/// ```
/// use enginetop::engine::{Engine, EngineKind, EngineOptions, OpSpec};
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
///
/// let engine = Engine::new(EngineOptions::new(EngineKind::PerDevice, 2)).unwrap();
/// let x = engine.new_variable();
/// let value = Arc::new(AtomicU64::new(1));
/// for _ in 0..3 {
///     let value = value.clone();
///     engine
///         .push_sync(OpSpec::new("double").writes(&x), move |_| {
///             value.store(value.load(Ordering::Relaxed) * 2, Ordering::Relaxed);
///             Ok(())
///         })
///         .unwrap();
/// }
/// engine.wait_for_var(&x).unwrap();
/// assert_eq!((value.load(Ordering::Relaxed), x.version()), (8, 3));
/// ```
#[derive(Clone)]
pub struct Engine {
    shared: Arc<Shared>,
}

/// Shuts the core down when the last handle goes.
struct Shared {
    core: Arc<Core>,
    /// Every thread's bulk of small synchronous ops for this engine (`bulk.rs`).
    bulks: BulkRegistry,
    /// The engine's `max_threads`: the range of its worker-count settings.
    max_threads: usize,
    /// The engine's GPUs (the core holds them as its [`GpuPath`]).
    gpu: Option<StdArc<GpuHub>>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        let (core, bulks) = (&self.core, &self.bulks);
        Core::shutdown(core, |inside_op| {
            if !inside_op {
                // A failed flush means the engine was already stopped and drained.
                let _ = bulks.flush_all(core);
            }
            bulks.close();
        });
    }
}

impl Engine {
    /// Starts an engine as `options` describe.
    pub fn new(options: EngineOptions) -> Result<Engine, EngineError> {
        options.check_settings()?;
        let max_threads = options.max_threads;
        let workers = options.worker_config();
        let gpu = options.gpu_hub();
        let dispatcher: Box<dyn Dispatch> = match options.kind {
            EngineKind::Naive => Box::new(Naive),
            EngineKind::Pooled => Box::new(Pooled::new(workers, options.pool_observers)?),
            EngineKind::PerDevice => Box::new(PerDevice::new(
                workers,
                gpu.clone(),
                options.pool_observers,
            )?),
        };
        let path = gpu.clone().map(|hub| hub as StdArc<dyn GpuPath>);
        let core = Core::new(options.kind, dispatcher, options.observer, path);
        Ok(Engine {
            shared: Arc::new(Shared {
                core: Arc::new(core),
                bulks: BulkRegistry::new(),
                max_threads,
                gpu,
            }),
        })
    }

    /// The engine a [`RuntimeConfig`] describes.
    pub fn from_config(config: &RuntimeConfig) -> Result<Engine, EngineError> {
        Engine::new(EngineOptions::from_config(config))
    }

    fn core(&self) -> &Arc<Core> {
        &self.shared.core
    }

    /// Which engine this is.
    pub fn kind(&self) -> EngineKind {
        self.core().kind
    }

    /// What the engine's GPU selection comes to on this machine (resolving it now if no op
    /// named a GPU yet); `None` when the engine has no GPUs. When `auto` fell back to a
    /// simulated GPU, the choice's `notice` says why: print it.
    pub fn gpus(&self) -> Result<Option<GpuChoice>, EngineError> {
        let Some(gpu) = &self.shared.gpu else {
            return Ok(None);
        };
        gpu.choice().map(Some).map_err(EngineError::GpuSetup)
    }

    /// A new var (version 0).
    pub fn new_variable(&self) -> Var {
        self.core().new_variable()
    }

    /// Pushes an op whose `body` gets a [`Completion`] it must call exactly once, possibly
    /// later and from another thread.
    pub fn push_async<F>(&self, spec: OpSpec<'_>, body: F) -> Result<(), EngineError>
    where
        F: FnOnce(RunContext, Completion) + Send + 'static,
    {
        self.before_push(&spec)?;
        let fill = |deps: &mut Deps| fill_deps(deps, spec.reads, spec.writes);
        Core::push(self.core(), spec.header(), fill, body)
    }

    /// Pushes an op that is finished when `body` returns (`Err` fails it). With a bulk size
    /// set on this thread, `Normal` ops of priority 0 are batched (see [`set_bulk_size`]).
    ///
    /// [`set_bulk_size`]: Self::set_bulk_size
    pub fn push_sync<F>(&self, spec: OpSpec<'_>, body: F) -> Result<(), EngineError>
    where
        F: FnOnce(RunContext) -> OpResult + Send + 'static,
    {
        let core = self.core();
        if !self.shared.bulks.is_active() {
            return self.push_async(spec, sync_body(body));
        }
        check_not_deleted(&spec)?;
        // Refuse a context now, not when the bulk is flushed by some later call.
        core.dispatcher.check(spec.name, spec.ctx, spec.prop)?;
        match self.shared.bulks.try_append(core, &spec, Box::new(body))? {
            None => Ok(()),
            Some(body) => self.push_async(spec, sync_body(body)),
        }
    }

    /// A reusable op: `body` with fixed vars and property; push it with [`push`](Self::push)
    /// (the spec's context and priority are ignored: each push gives its own).
    pub fn new_operator<F>(&self, spec: OpSpec<'_>, body: F) -> Result<Operator, EngineError>
    where
        F: Fn(RunContext, Completion) + Send + Sync + 'static,
    {
        check_not_deleted(&spec)?;
        let mut deps = Deps::new();
        fill_deps(&mut deps, spec.reads, spec.writes);
        let vars = deps.iter().map(|dep| dep.var.to_var()).collect();
        Ok(Operator(Arc::new(OperatorInner {
            body: Box::new(body),
            deps,
            vars,
            prop: spec.prop,
            name: spec.name,
        })))
    }

    /// Runs `operator` once more, on `ctx` at `priority`.
    pub fn push(
        &self,
        operator: &Operator,
        ctx: Context,
        priority: i32,
    ) -> Result<(), EngineError> {
        let inner = &operator.0;
        let header = OpHeader {
            ctx,
            prop: inner.prop,
            priority,
            name: inner.name,
            is_wait: false,
        };
        self.before_push_operator(operator)?;
        let fill = |deps: &mut Deps| deps.extend(inner.deps.iter().cloned());
        Core::push(self.core(), header, fill, operator.body())
    }

    /// Deletes `operator` once every push of it so far has run (it writes all its vars).
    pub fn delete_operator(&self, operator: Operator) -> Result<(), EngineError> {
        let vars: Vec<Var> = operator.0.vars.clone();
        let spec = OpSpec::new(OpName::DELETE_OPERATOR)
            .writes(&vars)
            .prop(FnProperty::DeleteVar);
        self.push_async(spec, move |_, completion| {
            drop(operator);
            completion.done();
        })
    }

    /// Deletes `var` once every op pushed on it so far has run: `delete_fn` runs then (free
    /// the var's data there). Pushes naming the var afterwards are refused.
    pub fn delete_variable<F>(
        &self,
        var: &Var,
        ctx: Context,
        delete_fn: F,
    ) -> Result<(), EngineError>
    where
        F: FnOnce(RunContext) + Send + 'static,
    {
        let spec = OpSpec::new(OpName::DELETE_VARIABLE)
            .ctx(ctx)
            .writes(std::slice::from_ref(var))
            .prop(FnProperty::DeleteVar);
        self.push_async(spec, move |run, completion| {
            delete_fn(run);
            completion.done();
        })?;
        var.0.deleted.store(true, crate::sync::Ordering::Release);
        Ok(())
    }

    /// Waits until every op pushed so far that writes `var` has completed, then reports the
    /// var's failure, once for this var (the other vars the failure reached report it to their
    /// own waiters). Refused on a thread that is running an op.
    pub fn wait_for_var(&self, var: &Var) -> Result<(), EngineError> {
        Core::refuse_inside_op()?;
        let core = self.core();
        self.shared.bulks.flush_mine(core)?;
        if !var.0.cell.ready_to_read() {
            let latch = Arc::new(Latch::default());
            let signal = latch.clone();
            let header = OpHeader {
                ctx: Context::cpu(0),
                prop: FnProperty::Normal,
                priority: 0,
                name: OpName::WAIT_FOR_VAR,
                is_wait: true,
            };
            let fill = |deps: &mut Deps| fill_deps(deps, var, VarList::EMPTY);
            Core::push(core, header, fill, move |_, completion| {
                completion.done();
                signal.set();
            })?;
            latch.wait();
        }
        if let Some(gpu) = &core.gpu {
            gpu.host_wait_var(var); // the last GPU write's device work (event mode)
        }
        match var.0.cell.take_error() {
            Some(failure) => Err(failure.into()),
            None => Ok(()),
        }
    }

    /// Waits until every op pushed so far has completed, then reports the first failure not
    /// yet reported and forgets the others (a second call is clean). Refused on a thread that
    /// is running an op.
    pub fn wait_for_all(&self) -> Result<(), EngineError> {
        Core::wait_for_all(self.core(), || self.flush_all())
    }

    /// Runs everything pushed, then joins every worker thread; pushes are refused until
    /// [`start`](Self::start).
    pub fn stop(&self) -> Result<(), EngineError> {
        Core::stop(self.core(), || self.flush_all())
    }

    /// Stops like [`stop`](Self::stop), but skips the bodies of the ops that have not started
    /// (they complete without running, so nothing waits for them); ops already running finish.
    /// Returns how many ops were skipped. [`start`](Self::start) resumes the engine.
    pub fn cancel(&self) -> Result<u64, EngineError> {
        Core::cancel(self.core(), || self.flush_all())
    }

    /// Starts the workers again after [`stop`](Self::stop) (a no-op while running).
    pub fn start(&self) -> Result<(), EngineError> {
        self.core().start()
    }

    /// Sets this thread's bulk size (0 = no bulking); returns the previous one.
    pub fn set_bulk_size(&self, size: usize) -> Result<usize, EngineError> {
        let core = self.core();
        self.shared.bulks.set_size(core, size)
    }

    /// This thread's bulk size.
    pub fn bulk_size(&self) -> usize {
        self.shared.bulks.size()
    }

    /// Resizes the CPU worker pools (per-device: every CPU device, and those started later;
    /// pooled: the shared workers) while ops run; nothing queued is lost. 1 to `max_threads`;
    /// the naive engine, which has no workers, refuses it ([`EngineError::NoSuchSetting`]).
    pub fn set_cpu_workers(&self, threads: usize) -> Result<(), EngineError> {
        self.check_setting(EngineSetting::CpuWorkers, threads)?;
        self.core().dispatcher.set_cpu_workers(threads)
    }

    /// Resizes the CPU priority pool (per-device engine; the others refuse it, saying where
    /// their `CpuPrioritized` ops run). 1 to `max_threads`, checked whether or not the pool
    /// has started.
    pub fn set_priority_workers(&self, threads: usize) -> Result<(), EngineError> {
        self.check_setting(EngineSetting::PriorityWorkers, threads)?;
        self.core().dispatcher.set_priority_workers(threads)
    }

    fn check_setting(&self, setting: EngineSetting, threads: usize) -> Result<(), EngineError> {
        setting.check(self.kind(), threads, self.shared.max_threads)
    }

    /// Workers per pool role, the same call on every engine (0 for a role it does not have);
    /// follows live resizes.
    pub fn workers(&self) -> WorkerCounts {
        self.core().dispatcher.workers()
    }

    /// A live view of the engine and its workers.
    pub fn stats(&self) -> EngineStats {
        let core = self.core();
        EngineStats {
            kind: core.kind,
            pending: core.pending(),
            failed_ops: core.failed_ops(),
            skipped_ops: core.skipped_ops(),
            cancelled_ops: core.cancelled_ops(),
            stopped: core.is_stopped(),
            workers: core.dispatcher.stats(),
        }
    }

    /// A view of the engine's queues and workers that does not keep it running: a sampler
    /// (the profiler's queue-depth watch) can hold it for as long as it likes, and once the
    /// last [`Engine`] handle is gone it reads the stopped engine's empty queues.
    pub fn queue_probe(&self) -> EngineQueues {
        EngineQueues {
            core: Arc::clone(self.core()),
        }
    }

    /// Pushes every thread's bulk.
    fn flush_all(&self) -> Result<(), EngineError> {
        self.shared.bulks.flush_all(self.core())
    }

    fn before_push(&self, spec: &OpSpec<'_>) -> Result<(), EngineError> {
        check_not_deleted(spec)?;
        let core = self.core();
        if self.shared.bulks.is_active() {
            self.shared.bulks.flush_mine(core)?;
        }
        Ok(())
    }

    fn before_push_operator(&self, operator: &Operator) -> Result<(), EngineError> {
        let inner = &operator.0;
        if let Some(var) = inner.vars.iter().find(|var| var.is_deleted()) {
            return Err(EngineError::VarDeleted {
                op: inner.name,
                var: var.id(),
            });
        }
        let core = self.core();
        if self.shared.bulks.is_active() {
            self.shared.bulks.flush_mine(core)?;
        }
        Ok(())
    }
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("kind", &self.kind())
            .field("pending", &self.core().pending())
            .finish()
    }
}

/// Wraps a synchronous body as an async one.
fn sync_body<F>(body: F) -> impl FnOnce(RunContext, Completion) + Send + 'static
where
    F: FnOnce(RunContext) -> OpResult + Send + 'static,
{
    move |run, completion| match body(run) {
        Ok(()) => completion.done(),
        Err(error) => completion.fail(error),
    }
}

fn check_not_deleted(spec: &OpSpec<'_>) -> Result<(), EngineError> {
    let deleted = spec.reads.find(Var::is_deleted);
    match deleted.or_else(|| spec.writes.find(Var::is_deleted)) {
        Some(var) => Err(EngineError::VarDeleted {
            op: spec.name,
            var: var.id(),
        }),
        None => Ok(()),
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn from_config_takes_kind_pool_and_worker_counts() {
        let config = RuntimeConfig {
            engine_kind: EngineKind::Pooled,
            pool_kind: PoolKind::ChaseLev,
            cpu_workers: 3,
            cpu_priority_workers: 2,
            ..RuntimeConfig::default()
        };
        let options = EngineOptions::from_config(&config);
        assert_eq!(options.kind, EngineKind::Pooled);
        assert_eq!(options.pool_kind, PoolKind::ChaseLev);
        assert_eq!((options.cpu_workers, options.cpu_priority_workers), (3, 2));
        assert_eq!(options.gpu_workers, GpuWorkerCounts::default());
        let engine = Engine::from_config(&config).unwrap();
        assert_eq!(engine.kind(), EngineKind::Pooled);
        let stats = engine.stats();
        assert_eq!(stats.workers.pools[0].num_threads, 3);
        assert_eq!(stats.workers.pools[0].kind, PoolKind::ChaseLev);
    }

    #[test]
    fn live_resize_shows_in_the_stats() {
        let engine = Engine::new(EngineOptions::new(EngineKind::PerDevice, 2)).unwrap();
        engine.set_cpu_workers(3).unwrap();
        assert_eq!(engine.stats().workers.pools[0].num_threads, 3);
        assert!(engine.set_cpu_workers(0).is_err());
        engine.set_priority_workers(2).unwrap();
    }
}
