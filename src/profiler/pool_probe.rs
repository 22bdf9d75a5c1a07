//! Pool instrumentation: a [`PoolObserver`] that records a pool's events into the profiler,
//! and queue-depth sampling of a [`Pool`].
//!
//! The pools call their observer at task start/end, steal, spin start/end, park/unpark and
//! resize, behind one `if let Some(observer)` branch each. [`PoolProbe`] maps each call to one
//! [`Event`] of the pool's device, with the worker index in `aux`. Task events double the
//! events per task; a pool whose tasks are engine ops (which record their own start/end) can
//! leave them out with [`PoolProbe::task_events`].
//!
//! Queue depths are not recorded per push: the collector samples [`ThreadPool::stats`] every
//! `queue_sample_interval` (10 ms by default) for pools registered with
//! [`Profiler::watch_queues`], one `QueueDepth` event per worker queue (`w0`, `w1`, ...) plus
//! the shared queue (`shared`).
//!
//! An engine's queues are sampled the same way ([`EngineQueues`] as a source): the ready ops
//! in front of each worker pool (`ready`), the pool's own queues (which hold the tasks that
//! drain them), the priority pool's heap and the GPU pools' queues, each on its pool's device.
//!
//! The engine builds its worker pools itself; [`PoolProbe::engine_pools`] is the factory it
//! takes (`EngineOptions::pool_observers`). The engine names each pool by its typed
//! [`PoolId`]; the probe records on the device [`DeviceId::of_pool`] gives it (a CPU's workers
//! and a GPU's pools on that device, with the ops [`EngineProbe`](super::EngineProbe) records
//! there, so a trace shows a device's ops, steals and parks in one process) and stamps the
//! pool's role on each event, so the snapshot knows each worker's role without its name.
//!
//! [`ThreadPool::stats`]: crate::pool::ThreadPool::stats
#![forbid(unsafe_code)]

use super::core::{QueueDepth, QueueDepthSource};
use super::event::{Event, EventKind, FROM_INJECTOR, NO_WORKER};
use super::names::DeviceId;
use super::Profiler;
use crate::device::cpu::PoolObservers;
use crate::device::identity::{PoolId, PoolRole};
use crate::engine::EngineQueues;
use crate::engine::OpName;
use crate::pool::{Pool, PoolEvent, PoolObserver, PoolStats};

/// Records one pool's events as `device`'s (and its role's, if it has one).
///
/// ```
/// use enginetop::pool::{Pool, PoolKind, PoolOptions};
/// use enginetop::profiler::{DeviceId, PoolProbe, Profiler, ProfilerOptions};
/// let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
/// let device = DeviceId::register("doc-probe");
/// let observer = PoolProbe::new(&profiler, device).task_events(false).into_observer();
/// let options = PoolOptions::new(PoolKind::Simple, 1, "doc-probe").observer(observer);
/// let pool = Pool::new(options).unwrap();
/// drop(pool);
/// profiler.flush();
/// assert_eq!(profiler.snapshot().device("doc-probe").unwrap().tasks, 0);
/// ```
#[derive(Clone, Debug)]
pub struct PoolProbe {
    profiler: Profiler,
    device: DeviceId,
    role: Option<PoolRole>,
    task_events: bool,
}

impl PoolProbe {
    /// A probe recording into `profiler` as `device`, task events included.
    pub fn new(profiler: &Profiler, device: DeviceId) -> Self {
        PoolProbe {
            profiler: profiler.clone(),
            device,
            role: None,
            task_events: true,
        }
    }

    /// A probe recording into `profiler` as pool `pool`: on the device the pool records on
    /// ([`DeviceId::of_pool`]), its role on every event; task events included.
    pub fn for_pool(profiler: &Profiler, pool: PoolId) -> Self {
        PoolProbe {
            role: Some(pool.role),
            ..PoolProbe::new(profiler, DeviceId::of_pool(pool))
        }
    }

    /// Whether to record task start/end (on by default).
    pub fn task_events(mut self, record: bool) -> Self {
        self.task_events = record;
        self
    }

    /// The probe as the pool's observer type.
    // std's Arc: a `dyn` trait object, which loom's `Arc` cannot hold.
    pub fn into_observer(self) -> std::sync::Arc<dyn PoolObserver> {
        std::sync::Arc::new(self)
    }

    /// The engine's pool-observer factory for `profiler` (`None` when it is disabled, so the
    /// engine's pools get no observer at all). Task events are left out: the engine's ops
    /// record their own start and end.
    ///
    /// ```
    /// use enginetop::engine::{Engine, EngineKind, EngineOptions};
    /// use enginetop::profiler::{PoolProbe, Profiler, ProfilerOptions};
    /// let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
    /// let mut options = EngineOptions::new(EngineKind::PerDevice, 1);
    /// options.pool_observers = PoolProbe::engine_pools(&profiler);
    /// let engine = Engine::new(options).unwrap();
    /// engine.set_cpu_workers(2).unwrap();
    /// engine.wait_for_all().unwrap();
    /// profiler.flush();
    /// assert!(profiler.snapshot().device("cpu(0)").is_some());
    /// ```
    pub fn engine_pools(profiler: &Profiler) -> Option<PoolObservers> {
        if !profiler.is_enabled() {
            return None;
        }
        let profiler = profiler.clone();
        // std's Arc: a `dyn Fn` trait object, which loom's `Arc` cannot hold.
        Some(std::sync::Arc::new(move |pool: PoolId| {
            let probe = PoolProbe::for_pool(&profiler, pool).task_events(false);
            Some(probe.into_observer())
        }))
    }
}

impl PoolProbe {
    fn event(&self, worker: u32, event: PoolEvent) -> Option<Event> {
        let event = self.untagged_event(worker, event)?;
        Some(match self.role {
            Some(role) => event.with_pool_role(role),
            None => event,
        })
    }

    fn untagged_event(&self, worker: u32, event: PoolEvent) -> Option<Event> {
        let on_worker = |kind| Some(Event::worker_event(kind, self.device, worker));
        match event {
            PoolEvent::TaskStart if self.task_events => on_worker(EventKind::TaskStart),
            PoolEvent::TaskEnd { panicked } if self.task_events => {
                on_worker(EventKind::TaskEnd).map(|event| event.with_error(panicked))
            }
            PoolEvent::TaskStart | PoolEvent::TaskEnd { .. } => None,
            PoolEvent::Steal { victim } => {
                let victim = victim.map_or(FROM_INJECTOR, |victim| victim as u64);
                let kind = EventKind::Steal;
                Some(Event::new(
                    kind,
                    self.device,
                    OpName::UNNAMED,
                    worker,
                    victim,
                ))
            }
            PoolEvent::SpinStart => on_worker(EventKind::SpinStart),
            PoolEvent::SpinEnd => on_worker(EventKind::SpinEnd),
            PoolEvent::Park => on_worker(EventKind::Park),
            PoolEvent::Unpark => on_worker(EventKind::Unpark),
            PoolEvent::Resized { from, to } => {
                let kind = EventKind::PoolResized;
                let name = OpName::UNNAMED;
                Some(Event::new(kind, self.device, name, from as u32, to as u64))
            }
        }
    }
}

impl PoolObserver for PoolProbe {
    #[inline]
    fn on_event(&self, worker: Option<usize>, event: PoolEvent) {
        let worker = worker.map_or(NO_WORKER, |worker| worker as u32);
        if let Some(event) = self.event(worker, event) {
            self.profiler.record(event);
        }
    }
}

impl QueueDepthSource for Pool {
    fn queue_depths(&self, device: DeviceId, out: &mut Vec<QueueDepth>) {
        pool_queue_depths(device, &self.stats(), out);
    }
}

/// The engine's queues, each as the device its pool records on ([`DeviceId::of_pool`]):
/// per worker pool its workers' queues and `shared` (the tasks that drain the ready ops) and
/// `ready` (the ready ops waiting for them), the CPU priority pool's `heap`, and each GPU
/// pool's queue under its role (`compute`, `copy`, `prio`).
impl QueueDepthSource for EngineQueues {
    fn queue_depths(&self, _device: DeviceId, out: &mut Vec<QueueDepth>) {
        let stats = self.stats();
        let ready = stats.ready_ops.iter().copied().chain(std::iter::repeat(0));
        for ((pool, &id), ready) in stats.pools.iter().zip(&stats.pool_ids).zip(ready) {
            let device = DeviceId::of_pool(id);
            pool_queue_depths(device, pool, out);
            out.push((device, OpName::new("ready"), ready as u64));
        }
        if let Some(priority) = &stats.priority {
            let heap = priority.queued as u64;
            let device = DeviceId::of_pool(PoolId::CPU_PRIORITY);
            out.push((device, OpName::new("heap"), heap));
        }
        for gpu in &stats.gpu {
            let label = OpName::new(gpu.role.as_str());
            out.push((DeviceId::of_pool(gpu.pool), label, gpu.queued as u64));
        }
    }
}

/// A pool's queues as `device`'s: each worker's own (`w<i>`) and the shared one (`shared`).
pub(crate) fn pool_queue_depths(device: DeviceId, stats: &PoolStats, out: &mut Vec<QueueDepth>) {
    for worker in &stats.workers {
        let label = OpName::new(&format!("w{}", worker.index));
        out.push((device, label, worker.queue_depth as u64));
    }
    let shared = stats.unowned_queue_depth as u64;
    out.push((device, OpName::new("shared"), shared));
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::device::identity::Device;
    use crate::pool::{PoolKind, PoolOptions};
    use crate::profiler::ProfilerOptions;
    use std::time::Duration;

    #[test]
    fn every_pool_event_maps_to_one_event_of_the_device() {
        let profiler = Profiler::disabled();
        let device = DeviceId::register("probe-test");
        let probe = PoolProbe::new(&profiler, device);
        let steal = probe
            .event(1, PoolEvent::Steal { victim: Some(0) })
            .unwrap();
        assert_eq!(
            (steal.kind, steal.worker(), steal.victim()),
            (EventKind::Steal, Some(1), Some(0))
        );
        let injector = probe.event(1, PoolEvent::Steal { victim: None }).unwrap();
        assert_eq!(injector.victim(), None);
        let end = probe
            .event(0, PoolEvent::TaskEnd { panicked: true })
            .unwrap();
        assert!(end.is_error() && end.device == device);
        let resized = probe
            .event(NO_WORKER, PoolEvent::Resized { from: 2, to: 4 })
            .unwrap();
        assert_eq!((resized.aux, resized.arg), (2, 4));
        let quiet = probe.clone().task_events(false);
        assert_eq!(quiet.event(0, PoolEvent::TaskStart), None);
        assert!(quiet.event(0, PoolEvent::Park).is_some());
    }

    #[test]
    fn a_pools_probe_records_on_its_device_with_its_role() {
        let profiler = Profiler::disabled();
        let copy = PoolId::new(Device::Gpu(1), PoolRole::GpuCopy);
        let park = PoolProbe::for_pool(&profiler, copy)
            .event(1, PoolEvent::Park)
            .unwrap();
        assert_eq!(park.device, DeviceId::of(Device::Gpu(1)));
        assert_eq!(
            (park.pool_role(), park.worker()),
            (Some(PoolRole::GpuCopy), Some(1))
        );
        let prio = PoolProbe::for_pool(&profiler, PoolId::CPU_PRIORITY);
        let end = prio
            .event(0, PoolEvent::TaskEnd { panicked: true })
            .unwrap();
        assert_eq!(end.pool_role(), Some(PoolRole::CpuPriority));
        assert!(end.is_error());
        assert_eq!(end.device.name(), "cpu-prio");
        let unnamed = PoolProbe::new(&profiler, DeviceId::HOST);
        assert_eq!(unnamed.event(0, PoolEvent::Park).unwrap().pool_role(), None);
        assert!(PoolProbe::engine_pools(&Profiler::disabled()).is_none());
    }

    #[test]
    fn a_disabled_profiler_leaves_pool_options_alone() {
        let options = PoolOptions::new(PoolKind::Eigen, 1, "probe-off");
        let untouched = Profiler::disabled().instrument_pool(options, DeviceId::HOST);
        assert!(untouched.observer.is_none());
    }

    #[test]
    fn watched_pools_are_sampled_until_dropped() {
        let profiler = Profiler::new(ProfilerOptions {
            queue_sample_interval: Duration::from_millis(1),
            ..ProfilerOptions::default()
        })
        .unwrap();
        let device = DeviceId::register("probe-watched");
        let options = PoolOptions::new(PoolKind::Eigen, 2, "probe-watched");
        let pool = std::sync::Arc::new(Pool::new(options).unwrap());
        let weak: std::sync::Weak<dyn QueueDepthSource> = std::sync::Arc::downgrade(&pool) as _;
        profiler.watch_queues(device, weak);
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let mut labels: Vec<String> = Vec::new();
        while labels.len() < 3 {
            assert!(std::time::Instant::now() < deadline, "never sampled");
            profiler.flush();
            if let Some(device) = profiler.snapshot().device("probe-watched") {
                labels = device.queues.iter().map(|q| q.label.clone()).collect();
            }
        }
        labels.sort();
        assert_eq!(labels, ["shared", "w0", "w1"]);
        drop(pool);
        profiler.flush();
    }

    #[test]
    fn an_engines_ready_ops_are_sampled_on_their_cpu() {
        use crate::engine::{Engine, EngineKind, EngineOptions, OpSpec};
        let profiler = Profiler::new(ProfilerOptions {
            queue_sample_interval: Duration::from_millis(1),
            ..ProfilerOptions::default()
        })
        .unwrap();
        let engine = Engine::new(EngineOptions::new(EngineKind::PerDevice, 1)).unwrap();
        let source: std::sync::Arc<dyn QueueDepthSource> =
            std::sync::Arc::new(engine.queue_probe());
        profiler.watch_queues(DeviceId::HOST, std::sync::Arc::downgrade(&source));
        // One worker held by a gate op: the three ops after it wait as ready ops.
        let (open, gate) = std::sync::mpsc::channel::<()>();
        let gate = std::sync::Mutex::new(gate);
        engine
            .push_sync(OpSpec::new("gate"), move |_| {
                let _ = gate.lock().unwrap().recv();
                Ok(())
            })
            .unwrap();
        for _ in 0..3 {
            engine
                .push_sync(OpSpec::new("waiting"), |_| Ok(()))
                .unwrap();
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let ready = |profiler: &Profiler| {
            let snapshot = profiler.snapshot();
            let cpu = snapshot.device("cpu(0)")?;
            cpu.queues
                .iter()
                .find(|q| q.label == "ready")
                .map(|q| q.depth)
        };
        loop {
            assert!(
                std::time::Instant::now() < deadline,
                "ready ops never sampled"
            );
            profiler.flush();
            if ready(&profiler).is_some_and(|depth| depth > 0) {
                break;
            }
        }
        open.send(()).unwrap();
        engine.wait_for_all().unwrap();
    }
}
