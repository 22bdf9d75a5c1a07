//! What the dashboard remembers between frames: one [`Sample`] per frame (worker states,
//! throughput, queue depths), for the timeline, the sparklines and the queue-growth lint.
//! The profiler's snapshot is a sliding window; the history is what lets the screen show the
//! last minutes.
#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::time::Duration;

use super::source::DashboardData;
use crate::profiler::stats::Activity;
use crate::profiler::DeviceId;

/// Samples kept: the widest timeline (about 200 columns) at the widest zoom (1.6 s a
/// column) at the default 10 frames a second.
pub(crate) const CAPACITY: usize = 200 * 16;

/// One frame's figures.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Sample {
    /// The workload's elapsed time when it was taken (paused time excluded).
    pub(crate) elapsed: Duration,
    /// When it was taken, on the profiler's clock (ns; keeps running while paused).
    pub(crate) taken_ns: u64,
    /// Ops finished per second, every device together.
    pub(crate) ops_per_s: f64,
    /// Tasks waiting, every queue of every device together.
    pub(crate) queue_depth: u64,
    /// Queue depth per profiler device (sorted by device).
    pub(crate) device_queues: Vec<(DeviceId, u64)>,
    /// What each thread was doing, by thread id (sorted).
    pub(crate) activities: Vec<(u32, Activity)>,
    /// The (inter-op, intra-op) counts in force: the first resizable device's inter-op
    /// workers (0: none) and the intra-op threads. A sample whose counts differ from the one
    /// before it follows a resize, by hand or by the tuner: the sparklines and the timeline
    /// mark it.
    pub(crate) threads: (usize, usize),
}

impl Sample {
    /// The sample of `data`.
    pub(crate) fn of(data: &DashboardData) -> Sample {
        let snapshot = &data.snapshot;
        let mut device_queues: Vec<(DeviceId, u64)> = snapshot
            .devices
            .iter()
            .map(|device| (device.device(), device.queue_depth))
            .collect();
        device_queues.sort();
        let mut activities: Vec<(u32, Activity)> = snapshot
            .workers
            .iter()
            .map(|worker| (worker.thread, worker.activity))
            .collect();
        activities.sort_by_key(|&(thread, _)| thread);
        Sample {
            elapsed: data.facts.elapsed,
            taken_ns: snapshot.at_ns,
            ops_per_s: snapshot.devices.iter().map(|device| device.ops_per_s).sum(),
            queue_depth: device_queues.iter().map(|&(_, depth)| depth).sum(),
            device_queues,
            activities,
            threads: (
                data.devices.iter().find_map(|d| d.inter_op).unwrap_or(0),
                data.facts.intra_op,
            ),
        }
    }

    /// Whether the counts changed between `before` and this sample (a resize happened).
    pub(crate) fn resized_since(&self, before: &Sample) -> bool {
        self.threads != before.threads
    }

    /// What `thread` was doing, if it was seen.
    pub(crate) fn activity_of(&self, thread: u32) -> Option<Activity> {
        self.activities
            .binary_search_by_key(&thread, |&(id, _)| id)
            .ok()
            .map(|index| self.activities[index].1)
    }

    /// The queue depth of profiler device `device`, if it was seen.
    pub(crate) fn queue_of(&self, device: DeviceId) -> Option<u64> {
        self.device_queues
            .iter()
            .find(|&&(known, _)| known == device)
            .map(|&(_, depth)| depth)
    }
}

/// The last [`CAPACITY`] samples, oldest first.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct History {
    samples: VecDeque<Sample>,
}

impl History {
    /// Adds the sample of `data`, forgetting the oldest past [`CAPACITY`].
    pub(crate) fn record(&mut self, data: &DashboardData) {
        if self.samples.len() == CAPACITY {
            self.samples.pop_front();
        }
        self.samples.push_back(Sample::of(data));
    }

    /// Forgets everything.
    pub(crate) fn clear(&mut self) {
        self.samples.clear();
    }

    /// Samples held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether nothing was recorded.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Every sample, oldest first.
    pub(crate) fn samples(&self) -> impl DoubleEndedIterator<Item = &Sample> + ExactSizeIterator {
        self.samples.iter()
    }

    /// The newest `count` samples (fewer if fewer were taken), oldest first.
    pub(crate) fn newest(&self, count: usize) -> impl Iterator<Item = &Sample> {
        self.samples
            .iter()
            .skip(self.samples.len().saturating_sub(count))
    }

    /// The samples taken in the last `span` of elapsed time, oldest first.
    pub(crate) fn within(&self, span: Duration) -> impl Iterator<Item = &Sample> {
        let newest = self.samples.back().map_or(Duration::ZERO, |s| s.elapsed);
        let since = newest.saturating_sub(span);
        self.samples.iter().filter(move |s| s.elapsed >= since)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profiler::stats::DeviceSnapshot;

    fn data(elapsed_ms: u64, depth: u64) -> DashboardData {
        let mut data = DashboardData::default();
        data.facts.elapsed = Duration::from_millis(elapsed_ms);
        data.snapshot.devices.push(DeviceSnapshot {
            ops_per_s: 10.0,
            queue_depth: depth,
            ..crate::tui::fake::device_snapshot(crate::tui::fake::cpu0())
        });
        let worker = crate::tui::fake::worker_snapshot(
            7,
            "cpu0-w0",
            crate::tui::fake::cpu0(),
            0,
            Activity::Spinning,
        );
        data.snapshot.workers.push(worker);
        data
    }

    #[test]
    fn samples_hold_totals_and_states_and_the_oldest_go_first() {
        let mut history = History::default();
        for k in 0..CAPACITY as u64 + 5 {
            history.record(&data(k * 100, k));
        }
        assert_eq!(history.len(), CAPACITY);
        let oldest = history.samples().next().unwrap();
        assert_eq!(oldest.queue_depth, 5);
        assert_eq!(oldest.queue_of(crate::tui::fake::cpu0()), Some(5));
        assert_eq!(oldest.activity_of(7), Some(Activity::Spinning));
        assert_eq!(oldest.activity_of(8), None);
        assert_eq!(history.newest(3).count(), 3);
        // 100 ms apart: the last second holds 11 samples (both ends included).
        assert_eq!(history.within(Duration::from_secs(1)).count(), 11);
        history.clear();
        assert!(history.is_empty());
    }
}
