//! One engine's GPUs: which backend (resolved from `--gpus` on first use), each opened
//! device's workers, the var records of event mode, and the ops in flight.
//!
//! # Lifecycle (mirrors the CPU devices of `threaded.rs`)
//! The selection is resolved the first time a GPU is named (CUDA detection loads a library,
//! so engines that never use a GPU never pay for it). A device is opened, and its workers
//! started, the first time an op names it; the set of opened devices is an [`ArcSwapOption`]
//! snapshot, so dispatch reads it without a lock, and devices are added under the `manage`
//! lock. `stop` (engine drained: no device work in flight, see the pending count in the
//! module docs) drops the snapshot, which joins the workers and drops their streams and the
//! devices; `start` reopens the devices used before, fresh (a poisoned device is reset).
#![forbid(unsafe_code)]

use std::collections::{BTreeSet, HashMap};
// std's `Arc`: handles to trait objects, which loom's `Arc` cannot coerce to `dyn`.
use std::sync::Arc;

use arc_swap::ArcSwapOption;

use super::op_stream::OpState;
use super::table::VarTable;
use super::GpuSyncMode;
use crate::device::cpu::{observer_for, PoolObservers};
use crate::device::cuda;
use crate::device::discover::{backend_for, choose, GpuChoice, GpuSelection};
use crate::device::gpu::{
    GpuPoolStats, GpuRole, GpuWorkerCounts, GpuWorkers, GPU_PRIORITY_WORKERS,
};
use crate::device::identity::{Device, PoolId};
use crate::device::sim::SimModel;
use crate::device::stream::{GpuBackend, GpuDevice, StreamError, StreamObserver};
use crate::engine::block::OpHandle;
use crate::engine::opr::{op_task, run_ready};
use crate::engine::{Context, EngineError, FnProperty, OpName};
use crate::sync::Mutex;

/// What an engine's GPUs are built from ([`EngineOptions`](crate::engine::EngineOptions)).
#[derive(Clone)]
pub(crate) struct GpuSetup {
    pub(crate) selection: GpuSelection,
    pub(crate) backend: Option<Arc<dyn GpuBackend>>,
    pub(crate) model: SimModel,
    pub(crate) counts: GpuWorkerCounts,
    pub(crate) sync: GpuSyncMode,
    pub(crate) observer: Option<Arc<dyn StreamObserver>>,
    /// Makes the observer of each worker pool (`gpu<d>-compute`, `-copy`, `-prio`).
    pub(crate) pool_observers: Option<PoolObservers>,
}

/// The backend the selection came to.
struct Resolved {
    choice: GpuChoice,
    backend: Arc<dyn GpuBackend>,
    count: u32,
}

/// One opened GPU and its workers (dropped in this order: workers, then the device).
struct DeviceWorkers {
    compute: GpuWorkers,
    copy: GpuWorkers,
    prioritized: GpuWorkers,
    _device: Arc<dyn GpuDevice>,
}

impl DeviceWorkers {
    fn open(resolved: &Resolved, setup: &GpuSetup, ordinal: u32) -> Result<Self, StreamError> {
        let device = resolved.backend.open(ordinal, setup.observer.clone())?;
        let start = |role: GpuRole, threads: usize| {
            let pool = PoolId::new(Device::Gpu(ordinal), role.into());
            let observer = observer_for(setup.pool_observers.as_ref(), pool);
            GpuWorkers::start_observed(&device, role, threads, observer)
        };
        Ok(DeviceWorkers {
            compute: start(GpuRole::Compute, setup.counts.compute)?,
            copy: start(GpuRole::Copy, setup.counts.copy)?,
            prioritized: start(GpuRole::Prioritized, GPU_PRIORITY_WORKERS)?,
            _device: device,
        })
    }

    fn pool(&self, prop: FnProperty) -> &GpuWorkers {
        match prop {
            FnProperty::CopyToGpu | FnProperty::CopyFromGpu => &self.copy,
            FnProperty::GpuPrioritized => &self.prioritized,
            _ => &self.compute,
        }
    }
}

/// A snapshot of the opened devices, indexed by ordinal.
type DeviceSet = Vec<Option<Arc<DeviceWorkers>>>;

/// An engine's GPUs (see the module docs).
pub(crate) struct GpuHub {
    setup: GpuSetup,
    resolved: Mutex<Option<Result<Arc<Resolved>, StreamError>>>,
    devices: ArcSwapOption<DeviceSet>,
    /// Ordinals opened so far; kept across stop, so start reopens them.
    used: Mutex<BTreeSet<u32>>,
    /// Serializes opening devices, stop and start.
    manage: Mutex<()>,
    /// Event mode's per-var records.
    pub(super) table: VarTable,
    /// GPU ops between their prologue and their completion, by block address.
    pub(super) in_flight: Mutex<HashMap<usize, Arc<OpState>>>,
}

impl GpuHub {
    pub(crate) fn new(setup: GpuSetup) -> Self {
        GpuHub {
            setup,
            resolved: Mutex::new(None),
            devices: ArcSwapOption::from_pointee(Vec::new()),
            used: Mutex::new(BTreeSet::new()),
            manage: Mutex::new(()),
            table: VarTable::new(),
            in_flight: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn sync(&self) -> GpuSyncMode {
        self.setup.sync
    }

    /// The backend, resolving the selection the first time.
    fn resolve(&self) -> Result<Arc<Resolved>, StreamError> {
        let mut slot = self.resolved.lock();
        slot.get_or_insert_with(|| resolve(&self.setup).map(Arc::new))
            .clone()
    }

    /// What the selection came to (resolving it now if needed).
    pub(crate) fn choice(&self) -> Result<GpuChoice, StreamError> {
        self.resolve().map(|resolved| resolved.choice.clone())
    }

    /// Refuses a GPU the backend does not have; opens the device on first use.
    pub(crate) fn check(&self, op: OpName, context: Context) -> Result<(), EngineError> {
        if let Some(devices) = &*self.devices.load() {
            if devices
                .get(context.id as usize)
                .is_some_and(Option::is_some)
            {
                return Ok(());
            }
        }
        let gpu_error = |reason| EngineError::Gpu {
            op,
            context,
            reason,
        };
        let resolved = self.resolve().map_err(gpu_error)?;
        if context.id >= resolved.count {
            return Err(EngineError::NoSuchGpu {
                op,
                context,
                backend: resolved.backend.kind(),
                count: resolved.count,
            });
        }
        self.ensure(&resolved, context.id).map_err(gpu_error)
    }

    /// Opens GPU `ordinal` and starts its workers unless that was done (slow path).
    fn ensure(&self, resolved: &Resolved, ordinal: u32) -> Result<(), StreamError> {
        let _manage = self.manage.lock();
        let Some(current) = self.devices.load_full() else {
            return Ok(()); // stopped: the push is refused; start reopens what was used
        };
        if current.get(ordinal as usize).is_some_and(Option::is_some) {
            return Ok(());
        }
        let workers = DeviceWorkers::open(resolved, &self.setup, ordinal)?;
        let mut next = DeviceSet::clone(&current);
        next.resize(resolved.count as usize, None);
        next[ordinal as usize] = Some(Arc::new(workers));
        self.devices.store(Some(Arc::new(next)));
        self.used.lock().insert(ordinal);
        Ok(())
    }

    /// Queues a ready GPU op (its body in its block) on its device's workers.
    pub(crate) fn dispatch(&self, op: OpHandle) {
        let devices = self.devices.load();
        let workers = devices
            .as_ref()
            .and_then(|devices| devices.get(op.ctx.id as usize)?.as_ref());
        match workers {
            Some(workers) => {
                let (prop, priority) = (op.prop, op.priority);
                workers.pool(prop).schedule(priority, op_task(op));
            }
            // Workers gone (the engine was dropped from inside an op): run here, streamless.
            None => run_ready(op),
        }
    }

    /// Joins every GPU worker (the engine is drained) and forgets the records.
    pub(crate) fn stop(&self) {
        let _manage = self.manage.lock();
        drop(self.devices.swap(None));
        self.table.clear();
    }

    /// Reopens the devices used before the stop.
    pub(crate) fn start(&self) -> Result<(), EngineError> {
        let _manage = self.manage.lock();
        if self.devices.load().is_some() {
            return Ok(());
        }
        let used: Vec<u32> = self.used.lock().iter().copied().collect();
        let mut devices = DeviceSet::new();
        if let Some(&last) = used.last() {
            let resolved = self.resolve().map_err(EngineError::GpuSetup)?;
            devices.resize(last as usize + 1, None);
            for ordinal in used {
                let workers = DeviceWorkers::open(&resolved, &self.setup, ordinal)
                    .map_err(EngineError::GpuSetup)?;
                devices[ordinal as usize] = Some(Arc::new(workers));
            }
        }
        self.devices.store(Some(Arc::new(devices)));
        Ok(())
    }

    /// Every GPU pool of every opened device.
    pub(crate) fn stats(&self) -> Vec<GpuPoolStats> {
        let Some(devices) = self.devices.load_full() else {
            return Vec::new();
        };
        devices
            .iter()
            .flatten()
            .flat_map(|workers| {
                [&workers.compute, &workers.copy, &workers.prioritized].map(GpuWorkers::stats)
            })
            .collect()
    }
}

/// The backend `setup` names: the one given, or what the selection picks here.
fn resolve(setup: &GpuSetup) -> Result<Resolved, StreamError> {
    if let Some(backend) = &setup.backend {
        let count = backend.devices().len() as u32;
        let kind = backend.kind();
        let choice = GpuChoice {
            selection: match kind {
                crate::device::stream::BackendKind::Sim => GpuSelection::Sim(count.max(1)),
                crate::device::stream::BackendKind::Cuda => GpuSelection::Cuda,
            },
            backend: Some(kind),
            devices: count,
            why: format!("{count} {kind} GPU(s) given to the engine"),
            notice: None,
        };
        return Ok(Resolved {
            choice,
            backend: Arc::clone(backend),
            count,
        });
    }
    let probe = cuda::probe();
    let choice = choose(setup.selection, &probe)?;
    let Some(backend) = backend_for(&choice, probe, setup.model) else {
        return Err(StreamError::CudaUnavailable {
            reason: "no GPUs were selected".to_string(),
        });
    };
    Ok(Resolved {
        count: choice.devices,
        choice,
        backend,
    })
}
