//! Groups a frame's data into device panels: for each [`DeviceLayout`], the profiler devices,
//! workers, queues and streams it is drawn from. Pure; the views and the lints read it.
#![forbid(unsafe_code)]

use std::borrow::Cow;

use super::source::{gpu_worker_name, DashboardData, DeviceKind, DeviceLayout, StreamLayout};
use crate::device::gpu::WorkerRole;
use crate::profiler::stats::{Activity, DeviceSnapshot, StreamSnapshot, WorkerSnapshot};

/// One pool of workers (a device's inter-op pool, its priority pool, the intra-op pool).
#[derive(Clone, Debug)]
pub struct PoolPanel<'a> {
    /// The profiler device's statistics, if it saw an event.
    pub device: Option<&'a DeviceSnapshot>,
    /// Its workers, by role on a GPU ([`role_rank`]), then by worker index (threads
    /// without an index last, by thread id).
    pub workers: Vec<&'a WorkerSnapshot>,
}

impl PoolPanel<'_> {
    /// The depth of worker `index`'s own queue (the pool's `w<index>` queue), if sampled.
    pub fn queue_of(&self, index: Option<u32>) -> Option<u64> {
        let label = format!("w{}", index?);
        let device = self.device?;
        device
            .queues
            .iter()
            .find(|queue| queue.label == label)
            .map(|queue| queue.depth)
    }

    /// The sum of every queue's latest depth.
    pub fn queue_depth(&self) -> u64 {
        self.device.map_or(0, |device| device.queue_depth)
    }

    /// Ops finished per second over the window.
    pub fn ops_per_s(&self) -> f64 {
        self.device.map_or(0.0, |device| device.ops_per_s)
    }

    /// Ops finished since the start (or the last reset).
    pub fn ops(&self) -> u64 {
        self.device.map_or(0, |device| device.ops)
    }

    /// Pool tasks finished per second over the window.
    pub fn tasks_per_s(&self) -> f64 {
        self.device.map_or(0.0, |device| device.tasks_per_s)
    }

    /// Pool tasks finished since the start (or the last reset).
    pub fn tasks(&self) -> u64 {
        self.device.map_or(0, |device| device.tasks)
    }
}

/// One stream and its statistics.
#[derive(Clone, Debug)]
pub struct StreamPanel<'a> {
    /// Where the stream's events come from, and its role.
    pub layout: &'a StreamLayout,
    /// Its name: the worker thread feeding it, as the timeline's row names it, and a copy
    /// stream's direction ([`StreamLayout::label`]).
    pub label: String,
    /// The worker thread feeding it ([`StreamLayout::worker`]).
    pub worker: String,
    /// Its statistics, if it ran anything yet.
    pub stats: Option<&'a StreamSnapshot>,
}

/// One device panel.
#[derive(Clone, Debug)]
pub struct DevicePanel<'a> {
    /// How it is laid out (synthesized when the source gave no layout).
    pub layout: Cow<'a, DeviceLayout>,
    /// Its inter-op workers (or the intra-op pool's threads).
    pub pool: PoolPanel<'a>,
    /// Its priority pool, if it has one.
    pub priority: Option<PoolPanel<'a>>,
    /// Its streams.
    pub streams: Vec<StreamPanel<'a>>,
}

impl DevicePanel<'_> {
    /// The panel's title.
    pub fn title(&self) -> &str {
        &self.layout.title
    }

    /// Whether `+`/`-` can resize it.
    pub fn is_resizable(&self) -> bool {
        self.layout.inter_op.is_some()
    }

    /// Every worker row: the pool's, then the priority pool's.
    pub fn all_workers(&self) -> impl Iterator<Item = &WorkerSnapshot> + '_ {
        let priority = self.priority.iter().flat_map(|pool| pool.workers.iter());
        self.pool.workers.iter().chain(priority).copied()
    }

    /// A GPU's worker threads that feed none of the streams it has seen (the prioritized
    /// worker before its first op): the timeline has a row for them, so the panel lists them.
    pub fn workers_without_stream(&self) -> impl Iterator<Item = &WorkerSnapshot> + '_ {
        let feeds_a_stream = |worker: &WorkerSnapshot| {
            self.streams
                .iter()
                .any(|stream| stream.worker == worker.name)
        };
        self.pool
            .workers
            .iter()
            .copied()
            .filter(move |worker| !feeds_a_stream(worker))
    }

    /// The rows its panel lists (borders excluded): a GPU's streams and stream-less workers,
    /// else every worker (at least one row, saying none was seen).
    pub fn row_count(&self) -> usize {
        if self.streams.is_empty() {
            self.all_workers().count().max(1)
        } else {
            self.streams.len() + self.workers_without_stream().count()
        }
    }
}

/// The panels of `data`, in display order.
pub fn device_panels(data: &DashboardData) -> Vec<DevicePanel<'_>> {
    if data.devices.is_empty() {
        return data
            .snapshot
            .devices
            .iter()
            .filter(|device| has_workers(data, &device.name))
            .map(|device| panel(data, Cow::Owned(fallback_layout(device))))
            .collect();
    }
    data.devices
        .iter()
        .map(|layout| panel(data, Cow::Borrowed(layout)))
        .collect()
}

fn has_workers(data: &DashboardData, device: &str) -> bool {
    data.snapshot
        .workers
        .iter()
        .any(|worker| worker.device.as_deref() == Some(device))
}

fn fallback_layout(device: &DeviceSnapshot) -> DeviceLayout {
    DeviceLayout {
        title: device.name.clone(),
        kind: DeviceKind::Cpu,
        workers: device.name.clone(),
        ..DeviceLayout::default()
    }
}

fn panel<'a>(data: &'a DashboardData, layout: Cow<'a, DeviceLayout>) -> DevicePanel<'a> {
    let pool = pool_panel(data, &layout.workers);
    let priority = layout
        .priority
        .as_deref()
        .map(|device| pool_panel(data, device));
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
        .find(|known| known.title == layout.title)
    else {
        return Vec::new();
    };
    let compute_workers = match layout.gpu_workers {
        Some(roles) => Some(roles.compute as u32),
        None => compute_workers_seen(&layout.title, pool),
    };
    let mut streams: Vec<StreamPanel<'a>> = owned
        .streams
        .iter()
        .map(|stream| StreamPanel {
            layout: stream,
            label: stream.label(&layout.title, compute_workers),
            worker: stream.worker(&layout.title, compute_workers),
            stats: data
                .snapshot
                .streams
                .iter()
                .find(|stats| stats.device == stream.device && stats.stream == stream.stream),
        })
        .collect();
    streams.sort_by_key(|stream| {
        (
            role_rank(&stream.worker),
            stream.layout.index,
            stream.layout.stream,
        )
    });
    streams
}

/// Where a GPU worker thread's role puts it among its GPU's rows: compute workers, then
/// copy workers, then the prioritized one (`gpu0-compute-1` before `gpu0-copy-0` before
/// `gpu0-prio-0`), so the panel and the timeline list them in one order whatever order
/// their threads started in. It reads the name's second `-` part, so a CPU priority pool's
/// `cpu-prio-0` ranks 2 too (alone in its pool, it is not reordered); other threads rank 0.
pub fn role_rank(thread_name: &str) -> usize {
    const ORDER: [WorkerRole; 3] = [
        WorkerRole::Compute,
        WorkerRole::Copy,
        WorkerRole::Prioritized,
    ];
    let role = thread_name.split('-').nth(1);
    ORDER
        .iter()
        .position(|known| role == Some(known.as_str()))
        .unwrap_or(0)
}

/// How many compute workers the GPU titled `gpu` has (`gpu0-compute-0`, `-1`, ... among
/// `pool`'s threads), if any was seen.
fn compute_workers_seen(gpu: &str, pool: &PoolPanel<'_>) -> Option<u32> {
    let seen = |index: u32| {
        let name = gpu_worker_name(gpu, WorkerRole::Compute, index);
        pool.workers.iter().any(|worker| worker.name == name)
    };
    let count = (0..).take_while(|&index| seen(index)).count() as u32;
    (count > 0).then_some(count)
}

/// The pool of `device`: its workers, less those a resize retired (their threads exited:
/// a later `+` starts a new thread under the same index, which takes the row).
fn pool_panel<'a>(data: &'a DashboardData, device: &str) -> PoolPanel<'a> {
    let mut workers: Vec<&WorkerSnapshot> = data
        .snapshot
        .workers
        .iter()
        .filter(|worker| worker.device.as_deref() == Some(device) && !is_retired(worker))
        .collect();
    workers.sort_by_key(|worker| {
        let index = worker.worker.unwrap_or(u32::MAX);
        (role_rank(&worker.name), index, worker.thread)
    });
    PoolPanel {
        device: data.snapshot.device(device),
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

    fn worker(thread: u32, index: u32, activity: Activity) -> WorkerSnapshot {
        let name = format!("cpu0-w{index}");
        crate::tui::fake::worker_snapshot(thread, name, "cpu0", index, activity)
    }

    #[test]
    fn workers_a_resize_retired_leave_their_rows_to_the_live_ones() {
        let mut data = DashboardData::default();
        data.snapshot.devices.push(DeviceSnapshot {
            name: "cpu0".into(),
            ..DeviceSnapshot::default()
        });
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

    /// A GPU's worker threads start in any order (thread ids differ run to run); its rows
    /// are compute, copy, prio, each by index, in the panel's streams and the timeline.
    #[test]
    fn gpu_rows_keep_one_order_whatever_order_their_threads_started_in() {
        let gpu_worker = |thread: u32, name: &str, index: u32| {
            crate::tui::fake::worker_snapshot(
                thread,
                name.to_string(),
                "gpu(0)",
                index,
                Activity::Parked,
            )
        };
        let started = [
            (1, "gpu0-copy-0", 0),
            (2, "gpu0-compute-0", 0),
            (3, "gpu0-prio-0", 0),
            (4, "gpu0-copy-1", 1),
            (5, "gpu0-compute-1", 1),
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
                .collect();
            let mut streams = vec![
                codes(StreamKind::CopyD2H, 0),
                codes(StreamKind::Compute, 2),
                codes(StreamKind::CopyH2D, 0),
                codes(StreamKind::Compute, 1),
                codes(StreamKind::Compute, 0),
            ];
            streams.rotate_left(order[0]);
            data.devices.push(DeviceLayout {
                title: "gpu0".into(),
                kind: DeviceKind::Gpu,
                workers: "gpu(0)".into(),
                streams: streams
                    .into_iter()
                    .map(|code| StreamLayout::of_code("gpu(0)", code))
                    .collect(),
                ..DeviceLayout::default()
            });
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
