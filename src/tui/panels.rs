//! Groups a frame's data into device panels: for each [`DeviceLayout`], the profiler devices,
//! workers, queues and streams it is drawn from. Pure; the views and the lints read it.
#![forbid(unsafe_code)]

use std::borrow::Cow;

use super::source::{DashboardData, DeviceKind, DeviceLayout, StreamLayout};
use crate::device::identity::PoolRole;
use crate::profiler::stats::{Activity, DeviceSnapshot, StreamSnapshot, WorkerSnapshot};
use crate::profiler::DeviceId;

/// One pool of workers (a device's inter-op pool, its priority pool, the intra-op pool).
#[derive(Clone, Debug)]
pub(crate) struct PoolPanel<'a> {
    /// The profiler device's statistics, if it saw an event.
    pub(crate) device: Option<&'a DeviceSnapshot>,
    /// Its workers, by their pool's role ([`PoolRole`]'s order: a GPU's compute, copy, then
    /// prioritized workers), then by worker index (threads without an index last, by thread
    /// id).
    pub(crate) workers: Vec<&'a WorkerSnapshot>,
}

impl PoolPanel<'_> {
    /// The depth of worker `index`'s own queue (the pool's `w<index>` queue), if sampled.
    pub(crate) fn queue_of(&self, index: Option<u32>) -> Option<u64> {
        let label = format!("w{}", index?);
        let device = self.device?;
        device
            .queues
            .iter()
            .find(|queue| queue.label == label)
            .map(|queue| queue.depth)
    }

    /// The sum of every queue's latest depth.
    pub(crate) fn queue_depth(&self) -> u64 {
        self.device.map_or(0, |device| device.queue_depth)
    }

    /// Ops finished per second over the window.
    pub(crate) fn ops_per_s(&self) -> f64 {
        self.device.map_or(0.0, |device| device.ops_per_s)
    }

    /// Ops finished since the start (or the last reset).
    pub(crate) fn ops(&self) -> u64 {
        self.device.map_or(0, |device| device.ops)
    }

    /// Pool tasks finished per second over the window.
    pub(crate) fn tasks_per_s(&self) -> f64 {
        self.device.map_or(0.0, |device| device.tasks_per_s)
    }

    /// Pool tasks finished since the start (or the last reset).
    pub(crate) fn tasks(&self) -> u64 {
        self.device.map_or(0, |device| device.tasks)
    }
}

/// One stream and its statistics.
#[derive(Clone, Debug)]
pub(crate) struct StreamPanel<'a> {
    /// Where the stream's events come from, and its role.
    pub(crate) layout: &'a StreamLayout,
    /// Its name: the worker thread feeding it, as the timeline's row names it, and a copy
    /// stream's direction ([`StreamLayout::label`]).
    pub(crate) label: String,
    /// The GPU worker feeding it: its pool's role and its index there
    /// ([`StreamLayout::feeder`]).
    pub(crate) feeder: (PoolRole, u32),
    /// Its statistics, if it ran anything yet.
    pub(crate) stats: Option<&'a StreamSnapshot>,
}

/// One device panel.
#[derive(Clone, Debug)]
pub(crate) struct DevicePanel<'a> {
    /// How it is laid out (synthesized when the source gave no layout).
    pub(crate) layout: Cow<'a, DeviceLayout>,
    /// Its inter-op workers (or the intra-op pool's threads).
    pub(crate) pool: PoolPanel<'a>,
    /// Its priority pool, if it has one.
    pub(crate) priority: Option<PoolPanel<'a>>,
    /// Its streams.
    pub(crate) streams: Vec<StreamPanel<'a>>,
}

impl DevicePanel<'_> {
    /// The panel's title.
    pub(crate) fn title(&self) -> &str {
        &self.layout.title
    }

    /// Every worker row: the pool's, then the priority pool's.
    pub(crate) fn all_workers(&self) -> impl Iterator<Item = &WorkerSnapshot> + '_ {
        let priority = self.priority.iter().flat_map(|pool| pool.workers.iter());
        self.pool.workers.iter().chain(priority).copied()
    }

    /// A GPU's worker threads that feed none of the streams it has seen (the prioritized
    /// worker before its first op): the timeline has a row for them, so the panel lists them.
    pub(crate) fn workers_without_stream(&self) -> impl Iterator<Item = &WorkerSnapshot> + '_ {
        let feeds_a_stream = |worker: &WorkerSnapshot| {
            let (role, index) = (worker.role, worker.worker);
            self.streams
                .iter()
                .any(|stream| (role, index) == (Some(stream.feeder.0), Some(stream.feeder.1)))
        };
        self.pool
            .workers
            .iter()
            .copied()
            .filter(move |worker| !feeds_a_stream(worker))
    }

    /// The rows its panel lists (borders excluded): a GPU's streams and stream-less workers,
    /// else every worker (at least one row, saying none was seen).
    pub(crate) fn row_count(&self) -> usize {
        if self.streams.is_empty() {
            self.all_workers().count().max(1)
        } else {
            self.streams.len() + self.workers_without_stream().count()
        }
    }
}

/// The panels of `data`, in display order.
pub(crate) fn device_panels(data: &DashboardData) -> Vec<DevicePanel<'_>> {
    if data.devices.is_empty() {
        return data
            .snapshot
            .devices
            .iter()
            .filter(|device| has_workers(data, device))
            .map(|device| panel(data, Cow::Owned(fallback_layout(device))))
            .collect();
    }
    data.devices
        .iter()
        .map(|layout| panel(data, Cow::Borrowed(layout)))
        .collect()
}

fn has_workers(data: &DashboardData, device: &DeviceSnapshot) -> bool {
    let device = Some(device.device());
    data.snapshot
        .workers
        .iter()
        .any(|worker| worker.device == device)
}

fn fallback_layout(device: &DeviceSnapshot) -> DeviceLayout {
    DeviceLayout {
        title: device.name.clone(),
        kind: DeviceKind::Cpu,
        workers: device.device(),
        ..DeviceLayout::default()
    }
}

fn panel<'a>(data: &'a DashboardData, layout: Cow<'a, DeviceLayout>) -> DevicePanel<'a> {
    let pool = pool_panel(data, layout.workers);
    let priority = layout.priority.map(|device| pool_panel(data, device));
    let streams = stream_panels(data, &layout, &pool);
    DevicePanel {
        layout,
        pool,
        priority,
        streams,
    }
}

fn stream_panels<'a>(
    data: &'a DashboardData,
    layout: &DeviceLayout,
    pool: &PoolPanel<'_>,
) -> Vec<StreamPanel<'a>> {
    // The layout borrowed from `data` outlives this call; a synthesized one has no streams.
    let Some(owned) = data
        .devices
        .iter()
        .find(|known| known.workers == layout.workers)
    else {
        return Vec::new();
    };
    let compute_workers = match layout.gpu_workers {
        Some(roles) => Some(roles.compute as u32),
        None => compute_workers_seen(pool),
    };
    let mut streams: Vec<StreamPanel<'a>> = owned
        .streams
        .iter()
        .map(|stream| StreamPanel {
            layout: stream,
            label: stream.label(compute_workers),
            feeder: stream.feeder(compute_workers),
            stats: data
                .snapshot
                .streams
                .iter()
                .find(|stats| stats.device == stream.device && stats.stream == stream.stream),
        })
        .collect();
    streams.sort_by_key(|stream| (stream.feeder.0, stream.layout.index, stream.layout.stream));
    streams
}

/// How many compute workers `pool` (a GPU's) has (compute workers 0, 1, ... among its
/// workers), if any was seen.
fn compute_workers_seen(pool: &PoolPanel<'_>) -> Option<u32> {
    let seen = |index: u32| {
        pool.workers
            .iter()
            .any(|worker| (worker.role, worker.worker) == (Some(PoolRole::GpuCompute), Some(index)))
    };
    let count = (0..).take_while(|&index| seen(index)).count() as u32;
    (count > 0).then_some(count)
}

/// The pool of `device`: its workers, less those a resize retired (their threads exited:
/// a later `+` starts a new thread under the same index, which takes the row).
fn pool_panel(data: &DashboardData, device: DeviceId) -> PoolPanel<'_> {
    let mut workers: Vec<&WorkerSnapshot> = data
        .snapshot
        .workers
        .iter()
        .filter(|worker| worker.device == Some(device) && !is_retired(worker))
        .collect();
    workers.sort_by_key(|worker| {
        let index = worker.worker.unwrap_or(u32::MAX);
        (worker.worker.is_none(), worker.role, index, worker.thread)
    });
    PoolPanel {
        device: data.snapshot.device_of(device),
        workers,
    }
}

/// A pool worker whose thread has exited.
fn is_retired(worker: &WorkerSnapshot) -> bool {
    worker.worker.is_some() && worker.activity == Activity::Idle
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::identity::{Device, PoolId};

    fn worker(thread: u32, index: u32, activity: Activity) -> WorkerSnapshot {
        let name = PoolId::new(Device::Cpu(0), PoolRole::CpuWorker).thread_name(index);
        crate::tui::fake::worker_snapshot(thread, name, crate::tui::fake::cpu0(), index, activity)
    }

    #[test]
    fn workers_a_resize_retired_leave_their_rows_to_the_live_ones() {
        let mut data = DashboardData::default();
        data.snapshot
            .devices
            .push(crate::tui::fake::device_snapshot(crate::tui::fake::cpu0()));
        // w1 retired twice (`-`, `+`, `-`, `+`): two exited threads, then the live one.
        data.snapshot.workers = vec![
            worker(10, 0, Activity::Running),
            worker(11, 1, Activity::Idle),
            worker(12, 1, Activity::Idle),
            worker(13, 1, Activity::Parked),
            worker(14, 2, Activity::Idle), // retired by the last `-`
        ];
        let panels = device_panels(&data);
        let threads: Vec<u32> = panels[0].pool.workers.iter().map(|w| w.thread).collect();
        assert_eq!(threads, [10, 13]);
    }

    /// GPU 0's worker `index` of `role`, on thread `thread`, named as the engine names it.
    fn gpu_worker(thread: u32, role: PoolRole, index: u32) -> (WorkerSnapshot, String) {
        let name = PoolId::new(Device::Gpu(0), role).thread_name(index);
        let worker = WorkerSnapshot {
            role: Some(role),
            ..crate::tui::fake::worker_snapshot(
                thread,
                &name,
                DeviceId::of(Device::Gpu(0)),
                index,
                Activity::Parked,
            )
        };
        (worker, name)
    }

    fn gpu_layout(streams: Vec<u32>) -> DeviceLayout {
        DeviceLayout {
            title: "gpu0".into(),
            kind: DeviceKind::Gpu,
            workers: DeviceId::of(Device::Gpu(0)),
            streams: streams
                .into_iter()
                .map(|code| StreamLayout::of_code(Device::Gpu(0), code))
                .collect(),
            ..DeviceLayout::default()
        }
    }

    /// Rows are grouped and ordered by the typed role the profiler recorded, whatever the
    /// threads are called: a copy worker whose thread name says nothing feeds the copy
    /// streams, and a priority pool's worker is listed after the inter-op workers.
    #[test]
    fn rows_follow_the_recorded_role_not_the_thread_name() {
        use crate::device::stream::{StreamId, StreamKind};
        let code = |kind| {
            StreamId {
                device: 0,
                kind,
                index: 0,
            }
            .code()
        };
        let named = |(worker, _): (WorkerSnapshot, String), name: &str| WorkerSnapshot {
            name: name.into(),
            ..worker
        };
        let mut data = DashboardData::default();
        data.snapshot.workers = vec![
            named(gpu_worker(1, PoolRole::GpuCopy, 0), "thread-1"),
            named(gpu_worker(2, PoolRole::GpuCompute, 0), "thread-2"),
        ];
        data.devices.push(gpu_layout(vec![
            code(StreamKind::CopyH2D),
            code(StreamKind::Compute),
        ]));
        let panels = device_panels(&data);
        let rows: Vec<u32> = panels[0].all_workers().map(|w| w.thread).collect();
        assert_eq!(rows, [2, 1], "compute before copy");
        let feeders: Vec<(PoolRole, u32)> = panels[0].streams.iter().map(|s| s.feeder).collect();
        assert_eq!(feeders, [(PoolRole::GpuCompute, 0), (PoolRole::GpuCopy, 0)]);
        assert_eq!(
            panels[0].workers_without_stream().count(),
            0,
            "each feeds its stream"
        );
        assert_eq!(panels[0].row_count(), 2);

        // One pool holding workers of two roles: the priority worker ranks after the others,
        // though its index and thread id are the smallest.
        let mut data = DashboardData::default();
        let cpu = |thread: u32, index: u32, role: PoolRole| WorkerSnapshot {
            role: Some(role),
            ..crate::tui::fake::worker_snapshot(
                thread,
                "t",
                DeviceId::register("panels-test-cpu"),
                index,
                Activity::Parked,
            )
        };
        data.snapshot.workers = vec![
            cpu(1, 0, PoolRole::CpuPriority),
            cpu(2, 1, PoolRole::CpuWorker),
            cpu(3, 2, PoolRole::CpuWorker),
        ];
        data.devices.push(DeviceLayout {
            title: "cpu0".into(),
            workers: DeviceId::register("panels-test-cpu"),
            ..DeviceLayout::default()
        });
        let panels = device_panels(&data);
        let rows: Vec<u32> = panels[0].pool.workers.iter().map(|w| w.thread).collect();
        assert_eq!(rows, [2, 3, 1]);
    }

    /// A GPU's worker threads start in any order (thread ids differ run to run); its rows
    /// are compute, copy, prio, each by index, in the panel's streams and the timeline.
    #[test]
    fn gpu_rows_keep_one_order_whatever_order_their_threads_started_in() {
        let started = [
            (1, PoolRole::GpuCopy, 0),
            (2, PoolRole::GpuCompute, 0),
            (3, PoolRole::GpuPriority, 0),
            (4, PoolRole::GpuCopy, 1),
            (5, PoolRole::GpuCompute, 1),
        ];
        let codes = |kind, index| {
            crate::device::stream::StreamId {
                device: 0,
                kind,
                index,
            }
            .code()
        };
        use crate::device::stream::StreamKind;
        for order in [[0, 1, 2, 3, 4], [4, 3, 2, 1, 0], [2, 0, 4, 1, 3]] {
            let mut data = DashboardData::default();
            data.snapshot.workers = order
                .iter()
                .map(|&i| gpu_worker(started[i].0, started[i].1, started[i].2))
                .map(|(worker, _)| worker)
                .collect();
            let mut streams = vec![
                codes(StreamKind::CopyD2H, 0),
                codes(StreamKind::Compute, 2),
                codes(StreamKind::CopyH2D, 0),
                codes(StreamKind::Compute, 1),
                codes(StreamKind::Compute, 0),
            ];
            streams.rotate_left(order[0]);
            data.devices.push(gpu_layout(streams));
            let panels = device_panels(&data);
            let rows: Vec<&str> = panels[0].all_workers().map(|w| w.name.as_str()).collect();
            assert_eq!(
                rows,
                [
                    "gpu0-compute-0",
                    "gpu0-compute-1",
                    "gpu0-copy-0",
                    "gpu0-copy-1",
                    "gpu0-prio-0"
                ]
            );
            let labels: Vec<&str> = panels[0].streams.iter().map(|s| s.label.as_str()).collect();
            assert_eq!(
                labels,
                [
                    "stream compute0 (gpu0-compute-0)",
                    "stream compute1 (gpu0-compute-1)",
                    "stream h2d0 (gpu0-copy-0)",
                    "stream d2h0 (gpu0-copy-0)",
                    "stream compute2 (gpu0-prio-0)"
                ],
                "{order:?}"
            );
        }
    }
}
