//! The threaded engines: where a ready op goes.
//!
//! - **pooled** (MXNet's `ThreadedEngine`): one shared worker pool for every context and one
//!   IO worker for copies (`CopyFromGpu`, `CopyToGpu`).
//! - **per-device** (MXNet's `ThreadedEnginePerDevice`, the default): per CPU device a worker
//!   pool (created on the device's first op), one CPU priority pool for `CpuPrioritized` ops
//!   ordered by priority; per GPU compute, copy and prioritized workers when the engine has
//!   GPUs (see `engine::gpu`), else GPU contexts are refused. The pooled and naive engines
//!   refuse GPU contexts.
//!
//! In both, an `Async` or `DeleteVar` op that is ready at push runs inline on the pushing
//! thread, as in MXNet. Other ready ops for a CPU worker pool go into the engine's own queue
//! in front of that pool (`ready.rs`), which the pool's workers drain; a worker that makes an
//! op of its own pool ready keeps it as its next op instead (a continuation, `current.rs`).
//! Prioritized ops (the priority pool) and the pooled engine's copies (the IO worker) are
//! handed to their pools one task per op.
//!
//! # Stop, start, resize
//! The worker pools live in an [`ArcSwapOption`] snapshot: dispatch reads it without a lock
//! (a ready op is dispatched on every completion, so a lock here would be a global one).
//! `stop` runs only once the engine is drained and refusing pushes, so no dispatch can race
//! it; it swaps the snapshot out and drops it, which joins every worker. `start` builds a new
//! snapshot with the same devices. Lazily created devices and resizes swap in a new snapshot
//! under the `manage` lock; the pools inside are shared between snapshots, never rebuilt, so
//! a resize loses nothing.
#![forbid(unsafe_code)]

// arc-swap stores std's `Arc`; the snapshots hold no lock-free protocol of ours, so they are
// not part of the loom models.
use std::sync::Arc as StdArc;

use arc_swap::ArcSwapOption;

use super::block::OpHandle;
use super::core::{Dispatch, DispatchStats};
use super::current::{self, Refused};
use super::gpu::GpuHub;
use super::opr::OpHeader;
use super::opr::{op_task, run_ready};
use super::ready::{learn_route, ReadyQueue};
use super::{Context, EngineError, EngineKind, EngineSetting, FnProperty, OpName, WorkerCounts};
use crate::device::cpu::{cpu_pool, observer_for, CpuWorkerOptions, PoolObservers, PriorityPool};
use crate::device::gpu::{GpuWorkerCounts, GPU_PRIORITY_WORKERS};
use crate::device::identity::{Device, PoolId, PoolRole};
use crate::pool::{Pool, PoolOptions};
use crate::sync::{Arc, AtomicU32, Mutex, Ordering};

/// CPU devices an engine can address: `cpu0` to `cpu(MAX_CPU_DEVICES - 1)`.
pub const MAX_CPU_DEVICES: u32 = 16;

/// Worker counts and pool settings of a threaded engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WorkerConfig {
    pub(crate) cpu: CpuWorkerOptions,
    pub(crate) priority_threads: usize,
    pub(crate) gpu: GpuWorkerCounts,
}

/// A worker pool and the engine's queue of ready ops in front of it (`ready.rs`).
struct Workers {
    pool: Pool,
    ready: Arc<ReadyQueue>,
}

impl Workers {
    fn new(pool: Pool) -> Self {
        let ready = Arc::new(ReadyQueue::new(pool.num_threads()));
        Workers { pool, ready }
    }

    /// Resizes the pool; the ready queue follows (how many drainers it may count).
    fn set_num_threads(&self, threads: usize) -> Result<(), EngineError> {
        self.pool.set_num_threads(threads)?;
        self.ready.set_workers(self.pool.num_threads());
        Ok(())
    }

    /// Queues a ready op; a drainer of this pool's queue that made it ready keeps it as its
    /// continuation instead (see `current.rs`), or requeues it without waking anyone once
    /// it ran its budget of continuations (it drains the queue itself right after).
    fn dispatch(&self, op: OpHandle, from_push: bool) {
        if from_push || !ReadyQueue::is_draining(&self.ready) {
            return ReadyQueue::push(&self.ready, &self.pool, op);
        }
        learn_route(&self.ready, &op);
        match current::offer_continuation(op) {
            Ok(()) => {}
            Err(Refused::BudgetSpent(op)) => self.ready.requeue(op),
            Err(Refused::Busy(op)) => ReadyQueue::push(&self.ready, &self.pool, op),
        }
    }
}

/// The CPU contexts every engine accepts: `cpu0` to `cpu(MAX_CPU_DEVICES - 1)`, the same on
/// each, so a workload that runs on one engine runs on the others.
pub(crate) fn check_cpu_device(name: OpName, ctx: Context) -> Result<(), EngineError> {
    if ctx.id < MAX_CPU_DEVICES {
        return Ok(());
    }
    Err(EngineError::NoSuchDevice {
        op: name,
        context: ctx,
        max: MAX_CPU_DEVICES,
    })
}

/// The check of an engine without GPUs: a CPU context in range.
pub(crate) fn check_cpu_only(name: OpName, ctx: Context) -> Result<(), EngineError> {
    if ctx.is_cpu() {
        check_cpu_device(name, ctx)
    } else {
        Err(EngineError::NoGpuBackend {
            op: name,
            context: ctx,
        })
    }
}

/// The per-device engine's workers.
pub(crate) struct PerDevice {
    config: Mutex<WorkerConfig>,
    devices: ArcSwapOption<Devices>,
    /// Which workers exist (bit `i`: `cpu(i)`'s pool, [`PRIORITY_BIT`]: the priority pool);
    /// kept across stop, so start rebuilds the same ones. Lets a push skip the snapshot.
    created: AtomicU32,
    /// Serializes device creation, resize, stop and start.
    manage: Mutex<()>,
    /// The GPUs, if the engine has any.
    gpu: Option<StdArc<GpuHub>>,
    /// Makes the observer of each pool started.
    observers: Option<PoolObservers>,
}

/// The bit of [`PerDevice::created`] for the priority pool.
const PRIORITY_BIT: u32 = 1 << 31;

/// One snapshot of the per-device workers.
#[derive(Clone, Default)]
struct Devices {
    cpu: Vec<Option<StdArc<Workers>>>,
    priority: Option<StdArc<PriorityPool>>,
}

impl PerDevice {
    pub(crate) fn new(
        config: WorkerConfig,
        gpu: Option<StdArc<GpuHub>>,
        observers: Option<PoolObservers>,
    ) -> Result<Self, EngineError> {
        let per_device = PerDevice {
            config: Mutex::new(config),
            devices: ArcSwapOption::empty(),
            created: AtomicU32::new(1), // cpu0
            manage: Mutex::new(()),
            gpu,
            observers,
        };
        per_device.start()?;
        Ok(per_device)
    }

    fn cpu_pool(&self, device: u32, config: &WorkerConfig) -> Result<Pool, EngineError> {
        Ok(cpu_pool(device, &config.cpu, self.observers.as_ref())?)
    }

    fn priority_pool(&self, threads: usize) -> Result<PriorityPool, EngineError> {
        let observer = observer_for(self.observers.as_ref(), PoolId::CPU_PRIORITY);
        Ok(PriorityPool::with_observer(
            PoolId::CPU_PRIORITY.thread_prefix(),
            threads,
            observer,
        )?)
    }

    /// Makes sure the workers `ctx` and `prop` need exist (slow path, first use only).
    fn ensure(&self, ctx: Context, prop: FnProperty) -> Result<(), EngineError> {
        let wants_priority = prop == FnProperty::CpuPrioritized;
        let bit = if wants_priority {
            PRIORITY_BIT
        } else {
            1 << ctx.id
        };
        if self.created.load(Ordering::Acquire) & bit != 0 {
            return Ok(()); // exists (or will again at start; a stopped engine refuses the push)
        }
        let has = |devices: &Devices| {
            if wants_priority {
                devices.priority.is_some()
            } else {
                devices.cpu[ctx.id as usize].is_some()
            }
        };
        let _manage = self.manage.lock();
        let Some(current) = self.devices.load_full() else {
            return Ok(());
        };
        if has(&current) {
            return Ok(());
        }
        let config = *self.config.lock();
        let mut next = Devices::clone(&current);
        if wants_priority {
            next.priority = Some(StdArc::new(self.priority_pool(config.priority_threads)?));
        } else {
            let workers = Workers::new(self.cpu_pool(ctx.id, &config)?);
            next.cpu[ctx.id as usize] = Some(StdArc::new(workers));
        }
        self.devices.store(Some(StdArc::new(next)));
        self.created.fetch_or(bit, Ordering::Release);
        Ok(())
    }
}

impl PerDevice {
    /// Whether a CPU op on `ctx` with `prop` goes to a worker pool that exists already: the
    /// check of nearly every push, a few instructions before the full one.
    #[inline]
    fn has_cpu_workers(&self, ctx: Context, prop: FnProperty) -> bool {
        ctx.is_cpu()
            && ctx.id < MAX_CPU_DEVICES
            && prop != FnProperty::CpuPrioritized
            && self.created.load(Ordering::Acquire) & (1 << ctx.id) != 0
    }

    #[cold]
    #[inline(never)]
    fn check_slow(&self, name: OpName, ctx: Context, prop: FnProperty) -> Result<(), EngineError> {
        if !ctx.is_cpu() {
            return match &self.gpu {
                Some(gpu) => gpu.check(name, ctx),
                None => Err(EngineError::NoGpuBackend {
                    op: name,
                    context: ctx,
                }),
            };
        }
        check_cpu_device(name, ctx)?;
        self.ensure(ctx, prop)
    }
}

impl Dispatch for PerDevice {
    fn check(&self, name: OpName, ctx: Context, prop: FnProperty) -> Result<(), EngineError> {
        if self.has_cpu_workers(ctx, prop) {
            return Ok(());
        }
        self.check_slow(name, ctx, prop)
    }

    fn runs_at_push(&self, op: &OpHeader) -> bool {
        // A GPU op never runs at push: its body needs a GPU worker's stream.
        op.ctx.is_cpu() && op.prop.runs_inline_at_push()
    }

    fn dispatch(&self, op: OpHandle, from_push: bool) {
        if let (false, Some(gpu)) = (op.ctx.is_cpu(), &self.gpu) {
            return gpu.dispatch(op);
        }
        let devices = self.devices.load();
        let Some(devices) = &*devices else {
            return run_ready(op); // workers gone (dropped from inside an op): run here
        };
        if op.prop == FnProperty::CpuPrioritized {
            if let Some(priority) = &devices.priority {
                let priority_of_op = op.priority;
                return priority.schedule(priority_of_op, op_task(op));
            }
        } else if let Some(workers) = &devices.cpu[op.ctx.id as usize] {
            return workers.dispatch(op, from_push);
        }
        run_ready(op); // unreachable for a checked push; never lose the op
    }

    fn stop(&self) {
        let _manage = self.manage.lock();
        drop(self.devices.swap(None)); // joins the workers (unless a dispatch still holds it)
        if let Some(gpu) = &self.gpu {
            gpu.stop();
        }
    }

    fn start(&self) -> Result<(), EngineError> {
        let _manage = self.manage.lock();
        if self.devices.load().is_some() {
            return Ok(());
        }
        let config = *self.config.lock();
        let created = self.created.load(Ordering::Acquire);
        let mut devices = Devices {
            cpu: vec![None; MAX_CPU_DEVICES as usize],
            priority: None,
        };
        for device in (0..MAX_CPU_DEVICES).filter(|device| created & (1 << device) != 0) {
            let workers = Workers::new(self.cpu_pool(device, &config)?);
            devices.cpu[device as usize] = Some(StdArc::new(workers));
        }
        if created & PRIORITY_BIT != 0 {
            let threads = config.priority_threads;
            devices.priority = Some(StdArc::new(self.priority_pool(threads)?));
        }
        self.devices.store(Some(StdArc::new(devices)));
        if let Some(gpu) = &self.gpu {
            gpu.start()?;
        }
        Ok(())
    }

    fn set_cpu_workers(&self, threads: usize) -> Result<(), EngineError> {
        let _manage = self.manage.lock();
        if let Some(devices) = &*self.devices.load() {
            for workers in devices.cpu.iter().flatten() {
                workers.set_num_threads(threads)?;
            }
        }
        self.config.lock().cpu.threads = threads;
        Ok(())
    }

    fn set_priority_workers(&self, threads: usize) -> Result<(), EngineError> {
        let _manage = self.manage.lock();
        if let Some(Some(priority)) = self.devices.load().as_ref().map(|d| d.priority.clone()) {
            priority.set_num_threads(threads)?;
        }
        self.config.lock().priority_threads = threads;
        Ok(())
    }

    fn stats(&self) -> DispatchStats {
        let devices = self.devices.load_full();
        let Some(devices) = devices else {
            return DispatchStats::default();
        };
        let cpu = || devices.cpu.iter().flatten();
        let cpu_ids = devices.cpu.iter().enumerate();
        let cpu_ids = cpu_ids.filter(|(_, workers)| workers.is_some());
        DispatchStats {
            pools: cpu().map(|workers| workers.pool.stats()).collect(),
            pool_ids: cpu_ids
                .map(|(device, _)| PoolId::new(Device::Cpu(device as u32), PoolRole::CpuWorker))
                .collect(),
            priority: devices.priority.as_ref().map(|priority| priority.stats()),
            gpu: self.gpu.as_ref().map(|gpu| gpu.stats()).unwrap_or_default(),
            ready_ops: cpu().map(|workers| workers.ready.len()).collect(),
        }
    }

    fn workers(&self) -> WorkerCounts {
        let config = *self.config.lock();
        let gpu = |count: usize| if self.gpu.is_some() { count } else { 0 };
        WorkerCounts {
            cpu: config.cpu.threads,
            priority: config.priority_threads,
            io: 0,
            gpu_compute: gpu(config.gpu.compute),
            gpu_copy: gpu(config.gpu.copy),
            gpu_priority: gpu(GPU_PRIORITY_WORKERS),
        }
    }
}

/// The pooled engine's shared workers, listed with CPU 0, where its CPU ops record.
const POOLED_WORKERS: PoolId = PoolId::SHARED_WORKERS;
/// The pooled engine's IO worker.
const POOLED_IO: PoolId = PoolId::IO;

/// The pooled engine's workers: shared workers and one IO worker.
pub(crate) struct Pooled {
    config: Mutex<WorkerConfig>,
    pools: ArcSwapOption<PooledPools>,
    manage: Mutex<()>,
    /// Makes the observer of each pool started.
    observers: Option<PoolObservers>,
}

struct PooledPools {
    workers: Workers,
    io: Pool,
}

impl Pooled {
    pub(crate) fn new(
        config: WorkerConfig,
        observers: Option<PoolObservers>,
    ) -> Result<Self, EngineError> {
        let pooled = Pooled {
            config: Mutex::new(config),
            pools: ArcSwapOption::empty(),
            manage: Mutex::new(()),
            observers,
        };
        pooled.start()?;
        Ok(pooled)
    }
}

impl Dispatch for Pooled {
    fn check(&self, name: OpName, ctx: Context, _prop: FnProperty) -> Result<(), EngineError> {
        check_cpu_only(name, ctx)
    }

    fn runs_at_push(&self, op: &OpHeader) -> bool {
        op.prop.runs_inline_at_push()
    }

    fn dispatch(&self, op: OpHandle, from_push: bool) {
        match &*self.pools.load() {
            Some(pools) if op.prop.is_copy() => pools.io.schedule(op_task(op)),
            Some(pools) => pools.workers.dispatch(op, from_push),
            None => run_ready(op), // workers gone (dropped from inside an op): run here
        }
    }

    fn stop(&self) {
        let _manage = self.manage.lock();
        drop(self.pools.swap(None));
    }

    fn start(&self) -> Result<(), EngineError> {
        let _manage = self.manage.lock();
        if self.pools.load().is_some() {
            return Ok(());
        }
        let config = *self.config.lock();
        let observed = |options: PoolOptions, pool: PoolId| match observer_for(
            self.observers.as_ref(),
            pool,
        ) {
            Some(observer) => options.observer(observer),
            None => options,
        };
        let threads = config.cpu.threads.max(1);
        let workers = Workers::new(Pool::new(observed(
            PoolOptions::new(
                config.cpu.pool_kind,
                threads,
                POOLED_WORKERS.thread_prefix(),
            )
            .max_threads(config.cpu.max_threads.max(threads))
            .allow_spinning(config.cpu.allow_spinning),
            POOLED_WORKERS,
        ))?);
        let io = Pool::new(observed(
            PoolOptions::new(config.cpu.pool_kind, 1, POOLED_IO.thread_prefix())
                .allow_spinning(config.cpu.allow_spinning),
            POOLED_IO,
        ))?;
        self.pools
            .store(Some(StdArc::new(PooledPools { workers, io })));
        Ok(())
    }

    fn set_cpu_workers(&self, threads: usize) -> Result<(), EngineError> {
        let _manage = self.manage.lock();
        if let Some(pools) = &*self.pools.load() {
            pools.workers.set_num_threads(threads)?;
        }
        self.config.lock().cpu.threads = threads;
        Ok(())
    }

    fn set_priority_workers(&self, _threads: usize) -> Result<(), EngineError> {
        // The handle refuses it first (settings.rs): prioritized ops share the workers.
        Err(EngineError::NoSuchSetting {
            engine: EngineKind::Pooled,
            setting: EngineSetting::PriorityWorkers,
        })
    }

    fn stats(&self) -> DispatchStats {
        match self.pools.load_full() {
            Some(pools) => DispatchStats {
                pools: vec![pools.workers.pool.stats(), pools.io.stats()],
                pool_ids: vec![POOLED_WORKERS, POOLED_IO],
                priority: None,
                gpu: Vec::new(),
                ready_ops: vec![pools.workers.ready.len(), 0],
            },
            None => DispatchStats::default(),
        }
    }

    fn workers(&self) -> WorkerCounts {
        WorkerCounts {
            cpu: self.config.lock().cpu.threads,
            io: 1,
            ..WorkerCounts::default()
        }
    }
}
